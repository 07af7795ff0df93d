"""Ranks that share a GPU (runtime/shared_gpu.py, docs/runtime.md "Develop on one GPU"), on the CPU: the binding rule,
the process-group backend, the MPS percentages, the SM-share check and its messages, the refusals of
initialize_distributed, the host paths of runtime/torch_collectives.py, and scripts/launch.sh's handling of the
mode (MPS daemon start / reuse / stop, the percentages it exports, its one-line refusals) with stub programs."""
import os
import stat
import subprocess
import textwrap

import pytest

import _shared_gpu_work as work
from conftest_sim import sim_ranks  # noqa: F401  (fixture)
from triton_dist.runtime import bootstrap, select, shared_gpu
from triton_dist.runtime.state import STATE

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


# ---- the rule and the numbers --------------------------------------------------------------------------------
def test_ranks_per_gpu_env(monkeypatch):
    monkeypatch.delenv(shared_gpu.RANKS_PER_GPU_ENV, raising=False)
    assert shared_gpu.ranks_per_gpu() == 1
    monkeypatch.setenv(shared_gpu.RANKS_PER_GPU_ENV, "4")
    assert shared_gpu.ranks_per_gpu() == 4
    for bad in ("0", "-2", "two"):
        monkeypatch.setenv(shared_gpu.RANKS_PER_GPU_ENV, bad)
        with pytest.raises(ValueError, match="TRITON_DIST_RANKS_PER_GPU"):
            shared_gpu.ranks_per_gpu()


@pytest.mark.parametrize("local_world,gpus,per_gpu,want", [
    (2, 1, 2, [0, 0]), (4, 1, 4, [0, 0, 0, 0]), (4, 2, 2, [0, 0, 1, 1]), (2, 2, 1, [0, 1]), (3, 2, 2, [0, 0, 1]),
    (2, 8, 1, [0, 1]), (4, 4, 2, [0, 0, 1, 1]),
])
def test_binding_rule(local_world, gpus, per_gpu, want):
    assert [shared_gpu.device_for_local_rank(r, local_world, gpus, per_gpu) for r in range(local_world)] == want
    assert shared_gpu.gpus_used(local_world, per_gpu) == max(want) + 1


def test_binding_refusals_name_the_fix():
    with pytest.raises(RuntimeError, match=r"needs 4 visible GPU\(s\).*sees 1.*TRITON_DIST_RANKS_PER_GPU=4"):
        shared_gpu.device_for_local_rank(0, 4, 1, 1)
    with pytest.raises(RuntimeError, match=r"needs 3 visible.*sees 2.*raise TRITON_DIST_RANKS_PER_GPU"):
        shared_gpu.device_for_local_rank(0, 5, 2, 2)
    with pytest.raises(ValueError, match="LOCAL_RANK=4"):
        shared_gpu.device_for_local_rank(4, 4, 1, 4)


def test_percentages_and_group_backend():
    assert [shared_gpu.mps_percentage(n) for n in (1, 2, 3, 4, 8)] == [100, 50, 33, 25, 12]
    assert bootstrap.process_group_backend("nvshmem", 1) == "cpu:gloo,cuda:nccl"
    assert bootstrap.process_group_backend("rocshmem", 1) == "cpu:gloo,cuda:nccl"
    assert bootstrap.process_group_backend("nvshmem", 2) == "gloo"  # NCCL refuses two ranks on one GPU
    assert bootstrap.process_group_backend("sim", 1) == "gloo"
    assert shared_gpu.cores_per_sm(9, 0) == 128 and shared_gpu.cores_per_sm(8, 0) == 64
    assert shared_gpu.cores_per_sm(8, 6) == 128 and shared_gpu.cores_per_sm(7, 0) == 64
    assert shared_gpu.cores_per_sm(5, 2) is None


def test_auto_never_picks_nccl_without_nccl(monkeypatch):
    """Where the group has no NCCL (ranks share a GPU) a measured-table entry that names "nccl" for "auto" is passed
    over, down to the built-in defaults (the table is the only source of "auto" besides them: docs/ops.md)."""
    from triton_dist.ops import collectives as C

    monkeypatch.setattr(C, "table_lookup", lambda *a: "nccl")
    assert C._select_method("all_gather", 2, 4096, True) == "nccl"
    assert C._select_method("all_reduce", 2, 4096, True) == "nccl"
    assert C._select_method("all_gather", 2, 4096, True, nccl=False) == C.AUTO_DEFAULTS["all_gather"]
    assert C._select_method("reduce_scatter", 2, 4096, True, nccl=False) == C.AUTO_DEFAULTS["reduce_scatter"]
    assert C._select_method("all_reduce", 2, 4096, True, nccl=False) == "one_shot"  # DEFAULT_AR_TABLES[2]


# ---- the SM-share check ----------------------------------------------------------------------------------------
def _rec(rank, sms, phys=132, pct=None, gpu="GPU-a", host="h"):
    return {"rank": rank, "gpu": gpu, "device": 0, "sms": sms, "physical_sms": phys, "mps_percent": pct, "host": host}


def test_sm_shares_that_fit_pass():
    assert shared_gpu.check_sm_shares([_rec(0, 66, pct=50), _rec(1, 66, pct=50)]) == {"h/GPU-a": [0, 1]}
    four = [_rec(r, 33, pct=25) for r in range(4)]
    assert shared_gpu.check_sm_shares(four) == {"h/GPU-a": [0, 1, 2, 3]}
    # one rank per GPU: the whole GPU each, nothing to check
    assert len(shared_gpu.check_sm_shares([_rec(0, 132, gpu="a"), _rec(1, 132, gpu="b")])) == 2
    # the same GPU id on two hosts is two GPUs
    assert len(shared_gpu.check_sm_shares([_rec(0, 132, host="x"), _rec(1, 132, host="y")])) == 2
    # no physical count: the percentages decide
    assert shared_gpu.check_sm_shares([_rec(0, 66, None, 50), _rec(1, 66, None, 50)])


def test_sm_shares_that_cannot_be_resident_are_refused():
    # no MPS (or 100% each): each context sees the whole GPU
    with pytest.raises(RuntimeError) as e:
        shared_gpu.check_sm_shares([_rec(0, 132), _rec(1, 132)])
    msg = str(e.value)
    assert "ranks [0, 1] share GPU GPU-a (132 SMs)" in msg and "264 SMs together" in msg
    assert "cannot all be resident" in msg and "--ranks-per-gpu 2" in msg
    assert "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=50" in msg and "TRITON_DIST_SM_SHARE_CHECK=0" in msg
    # four ranks at 50% each
    with pytest.raises(RuntimeError, match=r"264 SMs together.*--ranks-per-gpu 4.*PERCENTAGE=25"):
        shared_gpu.check_sm_shares([_rec(r, 66, pct=50) for r in range(4)])
    # no physical count: percentages (unset = 100) over 100
    with pytest.raises(RuntimeError, match=r"add up to 150%.*rank 0: 50%, rank 1: 100%"):
        shared_gpu.check_sm_shares([_rec(0, 66, None, 50), _rec(1, 66, None, None)])


def test_physical_sm_count_override(monkeypatch):
    monkeypatch.setenv(shared_gpu.GPU_SM_COUNT_ENV, "132")
    assert shared_gpu.physical_sm_count(0) == 132


# ---- initialize_distributed's refusals (before any GPU call) -----------------------------------------------------
@pytest.fixture
def gpu_backend(monkeypatch):
    """initialize_distributed as if on a GPU machine with ``n`` GPUs (nothing of CUDA is called before the
    refusals under test)."""
    import torch

    def setup(name, n):
        monkeypatch.setattr(select, "backend_name", lambda: name)
        monkeypatch.setattr(torch.cuda, "device_count", lambda: n)
        monkeypatch.setattr(torch.cuda, "is_available", lambda: n > 0)
        monkeypatch.setattr(STATE, "group", None)
        for k, v in {"RANK": "1", "WORLD_SIZE": "4", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "4"}.items():
            monkeypatch.setenv(k, v)
        return monkeypatch

    return setup


def test_more_ranks_than_gpus_is_refused_with_the_mode_named(gpu_backend):
    mp = gpu_backend("nvshmem", 1)
    mp.delenv(shared_gpu.RANKS_PER_GPU_ENV, raising=False)
    with pytest.raises(RuntimeError, match=r"LOCAL_WORLD_SIZE=4 .*needs 4 visible.*TRITON_DIST_RANKS_PER_GPU=4"):
        bootstrap.initialize_distributed()


def test_shared_gpus_on_rocm_are_refused(gpu_backend):
    mp = gpu_backend("rocshmem", 1)
    mp.setenv(shared_gpu.RANKS_PER_GPU_ENV, "4")
    with pytest.raises(RuntimeError, match="need CUDA MPS"):
        bootstrap.initialize_distributed()


def test_local_world_defaults_to_gpus_times_ranks_per_gpu(gpu_backend):
    mp = gpu_backend("nvshmem", 1)
    mp.delenv("LOCAL_WORLD_SIZE")
    mp.setenv("LOCAL_RANK", "0")
    mp.setenv(shared_gpu.RANKS_PER_GPU_ENV, "2")
    assert bootstrap._read_launch_env("nvshmem") == (1, 4, 0, 2)


# ---- the host paths the torch / NCCL methods take without NCCL ----------------------------------------------------
@pytest.mark.sim
def test_host_collectives_match_gloo(sim_ranks):  # noqa: F811
    for rank, fails in enumerate(sim_ranks.run(2, work.host_collectives_match_gloo, timeout=120)):
        assert not fails, (rank, fails)


# ---- scripts/launch.sh with stub programs ------------------------------------------------------------------------
_STUB_PY = textwrap.dedent("""\
    #!/usr/bin/env bash
    # stub interpreter: "-c ..." prints the GPU count; "-m torch.distributed.run ..." records what torchrun would get
    if [[ "$1" == "-c" ]]; then echo "${STUB_NGPU:-1}"; exit 0; fi
    {
      echo "ARGS $*"
      for v in TRITON_DIST_RANKS_PER_GPU CUDA_MPS_ACTIVE_THREAD_PERCENTAGE CUDA_MPS_PIPE_DIRECTORY NVSHMEM_DISABLE_NCCL \\
               NVSHMEM_DISABLE_NVLS; do echo "$v=${!v-<unset>}"; done
      [[ -n "${CUDA_MPS_PIPE_DIRECTORY:-}" && -S "$CUDA_MPS_PIPE_DIRECTORY/control" ]] && echo "DAEMON_UP"
    } > "$STUB_LOG"
    exit "${STUB_RC:-0}"
    """)
_STUB_MPS = textwrap.dedent("""\
    #!/usr/bin/env bash
    # stub nvidia-cuda-mps-control: -d makes the control socket; commands on stdin answer while it exists
    dir=${CUDA_MPS_PIPE_DIRECTORY:-/tmp/nvidia-mps}
    if [[ "${1:-}" == "-d" ]]; then
      echo started >> "$STUB_MPS_LOG"
      python3 -c "import socket,sys; socket.socket(socket.AF_UNIX).bind(sys.argv[1])" "$dir/control"; exit 0
    fi
    [[ -S "$dir/control" ]] || { echo "cannot connect" >&2; exit 1; }
    read -r cmd
    echo "$cmd" >> "$STUB_MPS_LOG"
    [[ "$cmd" == quit ]] && rm -f "$dir/control"
    echo 100
    """)


@pytest.fixture
def launch(tmp_path):
    bindir = tmp_path / "bin"
    bindir.mkdir()
    py = bindir / "python"
    py.write_text(_STUB_PY)
    mps = bindir / "nvidia-cuda-mps-control"
    mps.write_text(_STUB_MPS)
    for f in (py, mps):
        f.chmod(f.stat().st_mode | stat.S_IEXEC)

    def run(*args, ngpu=1, with_mps=True, env_extra=None):
        env = {k: v for k, v in os.environ.items() if not k.startswith(("TRITON_DIST_", "CUDA_MPS_"))}
        path = os.environ["PATH"] if with_mps else "/usr/bin:/bin"
        if not with_mps:
            mps.unlink(missing_ok=True)
        env.update(PYTHON=str(py), STUB_NGPU=str(ngpu), STUB_LOG=str(tmp_path / "torchrun.log"),
                   STUB_MPS_LOG=str(tmp_path / "mps.log"), PATH=f"{bindir}:{path}", **(env_extra or {}))
        r = subprocess.run(["bash", os.path.join(ROOT, "scripts", "launch.sh"), *args, "prog.py"], env=env,
                           capture_output=True, text=True, timeout=60)
        log = tmp_path / "torchrun.log"
        got = dict(line.split("=", 1) for line in log.read_text().splitlines() if "=" in line and
                   not line.startswith("ARGS")) if log.exists() else None
        mps_log = (tmp_path / "mps.log").read_text().split() if (tmp_path / "mps.log").exists() else []
        return r, got, mps_log

    return run


def test_launch_refuses_more_ranks_than_gpus_without_the_mode(launch):
    r, got, _ = launch("--nproc_per_node", "4", ngpu=1)
    assert r.returncode == 2 and got is None
    assert r.stderr.count("\n") == 1 and "4 ranks per node but 1 visible GPU(s)" in r.stderr
    assert "--ranks-per-gpu 4" in r.stderr


def test_launch_shares_the_gpu_under_a_private_mps_daemon(launch, tmp_path):
    r, got, mps_log = launch("--nproc_per_node", "4", "--ranks-per-gpu", "auto", ngpu=1)
    assert r.returncode == 0, r.stderr
    assert "[launch] world_size=4 gpus=1 ranks_per_gpu=4 mps=private" in r.stdout
    assert got["TRITON_DIST_RANKS_PER_GPU"] == "4" and got["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] == "25"
    assert got["NVSHMEM_DISABLE_NCCL"] == "1" and got["NVSHMEM_DISABLE_NVLS"] == "1"
    pipe = got["CUDA_MPS_PIPE_DIRECTORY"]
    assert pipe.startswith("/tmp/triton-dist-mps-pipe.") and "DAEMON_UP" in (tmp_path / "torchrun.log").read_text()
    assert mps_log[0] == "started" and mps_log[-1] == "quit"  # started for the job, stopped after it
    assert not os.path.exists(pipe)  # nothing left behind


def test_launch_passes_the_job_exit_status_and_still_stops_the_daemon(launch):
    r, got, mps_log = launch("--nproc_per_node", "2", "--ranks-per-gpu", "2", ngpu=1, env_extra={"STUB_RC": "3"})
    assert r.returncode == 3 and got["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] == "50"
    assert mps_log[-1] == "quit" and not os.path.exists(got["CUDA_MPS_PIPE_DIRECTORY"])


def test_launch_uses_a_running_daemon_and_leaves_it_running(launch, tmp_path):
    pipe = tmp_path / "pipe"
    pipe.mkdir()
    subprocess.run(["python3", "-c", "import socket,sys; socket.socket(socket.AF_UNIX).bind(sys.argv[1])",
                    str(pipe / "control")], check=True)
    r, got, mps_log = launch("--nproc_per_node", "2", "--ranks-per-gpu", "2", ngpu=1,
                             env_extra={"CUDA_MPS_PIPE_DIRECTORY": str(pipe)})
    assert r.returncode == 0 and "mps=existing" in r.stdout
    assert got["CUDA_MPS_PIPE_DIRECTORY"] == str(pipe) and "quit" not in mps_log and "started" not in mps_log
    assert (pipe / "control").exists()


def test_launch_without_mps_tools_refuses_in_one_line(launch):
    r, got, _ = launch("--nproc_per_node", "2", "--ranks-per-gpu", "2", ngpu=1, with_mps=False)
    assert r.returncode == 2 and got is None and r.stderr.count("\n") == 1
    assert "nvidia-cuda-mps-control is not on PATH" in r.stderr


def test_launch_one_rank_per_gpu_needs_no_mps(launch):
    r, got, mps_log = launch("--nproc_per_node", "2", "--ranks-per-gpu", "auto", ngpu=2)
    assert r.returncode == 0 and "[launch] world_size=2 gpus=2 ranks_per_gpu=1 mps=none" in r.stdout
    assert got["TRITON_DIST_RANKS_PER_GPU"] == "<unset>" and got["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] == "<unset>"
    assert mps_log == []


def test_launch_refuses_bad_values(launch):
    for args, text in ((("--ranks-per-gpu", "0"), "--ranks-per-gpu=0 is not a positive integer"),
                       (("--nproc_per_node", "x"), "--nproc_per_node=x is not a positive integer"),
                       (("--nproc_per_node", "4", "--ranks-per-gpu", "1"), "need 4 GPUs, 1 visible")):
        r, _, _ = launch(*args, ngpu=1)
        assert r.returncode == 2 and text in r.stderr, (args, r.stderr)


def test_sm_margin_knob(monkeypatch):
    """TRITON_DIST_SM_MARGIN: SMs a rank leaves out of its "one program per SM" grids (diagnostic, default 0);
    a bad value is a one-line ValueError naming the variable."""
    from triton_dist.runtime import device_info as di

    monkeypatch.delenv(di.SM_MARGIN_ENV, raising=False)
    assert di.sm_margin() == 0
    monkeypatch.setenv(di.SM_MARGIN_ENV, "2")
    assert di.sm_margin() == 2
    assert di.rank_sm_count("cpu", simulated=2) == 2  # not CUDA: the caller's count, no margin
    for bad in ("-1", "two", "1.5"):
        monkeypatch.setenv(di.SM_MARGIN_ENV, bad)
        with pytest.raises(ValueError, match="TRITON_DIST_SM_MARGIN"):
            di.sm_margin()
