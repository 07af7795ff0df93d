"""Ranks that share a GPU (runtime/shared_gpu.py, docs/runtime.md "Develop on one GPU"), on the CPU: the binding rule,
the process-group backend, each rank's grid budget (rank_sm_count), the MPS client check and the SM-share check
with their messages, the refusals of initialize_distributed, the host paths of runtime/torch_collectives.py, and
scripts/launch.sh's handling of the mode (MPS daemon start / reuse / stop, no active-thread percentage, its
one-line refusals) with stub programs."""
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
def _rec(rank, sms, gpu="GPU-a", host="h", mps="client"):
    return {"rank": rank, "gpu": gpu, "device": 0, "sms": sms, "mps": mps, "host": host}


def test_sm_shares_that_fit_pass():
    # clients of one MPS server without a limit: each context sees the whole GPU, the ranks split it by grid size
    assert shared_gpu.check_sm_shares([_rec(0, 132), _rec(1, 132)]) == {"h/GPU-a": [0, 1]}
    assert shared_gpu.check_sm_shares([_rec(r, 132) for r in range(4)]) == {"h/GPU-a": [0, 1, 2, 3]}
    # a caller's limit, the same for every rank: one pool of 66 SMs, shared
    assert shared_gpu.check_sm_shares([_rec(0, 66), _rec(1, 66)])
    # one rank per GPU: the whole GPU each, nothing to check (no MPS status needed)
    assert len(shared_gpu.check_sm_shares([_rec(0, 132, gpu="a", mps=None), _rec(1, 132, gpu="b", mps=None)])) == 2
    # the same GPU id on two hosts is two GPUs
    assert len(shared_gpu.check_sm_shares([_rec(0, 132, host="x", mps=None), _rec(1, 132, host="y", mps=None)])) == 2


def test_sm_shares_that_cannot_be_resident_are_refused():
    # a rank outside MPS: the contexts time-slice
    why = "not an MPS client: no MPS control daemon answers at CUDA_MPS_PIPE_DIRECTORY=/tmp/x"
    with pytest.raises(RuntimeError) as e:
        shared_gpu.check_sm_shares([_rec(0, 132), _rec(1, 132, mps=why)])
    msg = str(e.value)
    assert "ranks [0, 1] share GPU GPU-a" in msg and f"rank 1: {why}" in msg and "rank 0:" not in msg
    assert "cannot all be resident" in msg and "--ranks-per-gpu 2" in msg and "TRITON_DIST_SM_SHARE_CHECK=0" in msg
    # ranks that do not know they share the GPU (TRITON_DIST_RANKS_PER_GPU unset: no MPS status in their records)
    with pytest.raises(RuntimeError, match=r"ranks \[0, 1, 2, 3\] share GPU GPU-a but ranks \[0, 1, 2, 3\] were started "
                                           r"as one rank per GPU.*--ranks-per-gpu 4"):
        shared_gpu.check_sm_shares([_rec(r, 132, mps=None) for r in range(4)])
    # different pools (different MPS limits): a rank with the larger pool could fill the smaller one
    with pytest.raises(RuntimeError, match=r"different SM counts \(rank 0: 132, rank 1: 66;.*cannot all be resident"):
        shared_gpu.check_sm_shares([_rec(0, 132), _rec(1, 66)])
    # fewer SMs than ranks
    with pytest.raises(RuntimeError, match="fewer SMs than ranks"):
        shared_gpu.check_sm_shares([_rec(r, 2) for r in range(4)])


def test_each_rank_sizes_its_grids_to_its_part_of_the_shared_pool(monkeypatch):
    """rank_sm_count: the context's SMs over the ranks on the GPU (what initialisation measured, else the
    environment capped at LOCAL_WORLD_SIZE), less the margin; the whole context at one rank per GPU."""
    import types

    import torch
    from triton_dist.runtime import device_info as di

    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda d: types.SimpleNamespace(multi_processor_count=132))
    monkeypatch.delenv(di.SM_MARGIN_ENV, raising=False)
    monkeypatch.setattr(STATE, "gpu_ranks", {})
    monkeypatch.delenv(shared_gpu.RANKS_PER_GPU_ENV, raising=False)
    assert di.rank_sm_count("cuda:0") == 132
    monkeypatch.setenv(shared_gpu.RANKS_PER_GPU_ENV, "4")
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "2")
    m = di.SHARED_GPU_SM_MARGIN  # where ranks share a GPU, each leaves these SMs free (copies between them need SMs)
    assert m >= 1 and shared_gpu.ranks_on_this_gpu() == 2 and di.rank_sm_count("cuda:0") == 66 - m
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "4")
    assert di.rank_sm_count("cuda:0") == 33 - m
    monkeypatch.setattr(STATE, "gpu_ranks", {"h/GPU-a": [0, 1, 2], "h/GPU-b": [3]})  # measured at initialisation
    monkeypatch.setattr(STATE, "ranks_per_gpu", 3)
    assert di.rank_sm_count("cuda:0") == 44 - m
    monkeypatch.setenv(di.SM_MARGIN_ENV, "4")
    assert di.rank_sm_count("cuda:0") == 40
    monkeypatch.setenv(di.SM_MARGIN_ENV, "0")  # an explicit 0 wins: every SM in the grids
    assert di.rank_sm_count("cuda:0") == 44
    monkeypatch.setattr(STATE, "gpu_ranks", {"h/GPU-a": [0], "h/GPU-b": [1]})  # one rank per GPU: no default margin
    monkeypatch.setattr(STATE, "ranks_per_gpu", 1)
    monkeypatch.delenv(di.SM_MARGIN_ENV)
    assert di.rank_sm_count("cuda:0") == 132


_STUB_MPS_QUERY = textwrap.dedent("""\
    #!/usr/bin/env bash
    # stub nvidia-cuda-mps-control answering the two queries of mps_client_status
    [[ -n "${STUB_DOWN:-}" ]] && { echo "Cannot find MPS control daemon process" >&2; exit 1; }
    if [[ -n "${STUB_BUSY_ONCE:-}" && ! -e "$STUB_BUSY_ONCE" ]]; then  # the first query is not answered
      touch "$STUB_BUSY_ONCE"; echo "Cannot find MPS control daemon process" >&2; exit 1
    fi
    read -r cmd arg
    if [[ -n "${STUB_EMPTY_ONCE:-}" && ! -e "$STUB_EMPTY_ONCE" && "$cmd" == get_server_list ]]; then
      touch "$STUB_EMPTY_ONCE"; echo ""; exit 0  # answered, but no server yet
    fi
    case "$cmd" in
      get_server_list) echo "${STUB_SERVERS:-}" ;;
      get_client_list) [[ "$arg" == 4242 ]] && printf '%s\\n' ${STUB_CLIENTS:-} ;;
    esac
    """)


def test_mps_client_status_asks_the_control_daemon(tmp_path, monkeypatch):
    tool = tmp_path / "nvidia-cuda-mps-control"
    tool.write_text(_STUB_MPS_QUERY)
    tool.chmod(tool.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{tmp_path}:/usr/bin:/bin")
    monkeypatch.setenv("CUDA_MPS_PIPE_DIRECTORY", "/tmp/pipe-x")
    monkeypatch.setenv("STUB_SERVERS", "4242")
    monkeypatch.setenv("STUB_CLIENTS", "17 99 1234")
    assert shared_gpu.mps_client_status(pid=99) == "client"
    monkeypatch.setenv("STUB_BUSY_ONCE", str(tmp_path / "busy"))  # a query the daemon did not answer is retried
    assert shared_gpu.mps_client_status(pid=99) == "client" and (tmp_path / "busy").exists()
    why = shared_gpu.mps_client_status(pid=98, rounds=2)
    assert why.startswith("not an MPS client") and "process 98" in why and "['4242']" in why
    monkeypatch.setenv("STUB_SERVERS", "")
    assert "none running" in shared_gpu.mps_client_status(pid=99, rounds=2)
    # the daemon names no server (or not this client) at first, then does: asked again, it is a client
    monkeypatch.setenv("STUB_SERVERS", "4242")
    monkeypatch.setenv("STUB_EMPTY_ONCE", str(tmp_path / "empty"))
    assert shared_gpu.mps_client_status(pid=99) == "client" and (tmp_path / "empty").exists()
    monkeypatch.delenv("STUB_EMPTY_ONCE")
    monkeypatch.setenv("STUB_SERVERS", "")
    monkeypatch.setenv("STUB_DOWN", "1")
    assert shared_gpu.mps_client_status(pid=99, attempts=2) == (
        "not an MPS client: no MPS control daemon answers at CUDA_MPS_PIPE_DIRECTORY=/tmp/pipe-x (nvidia-cuda-mps-control "
        "get_server_list, 2 tries; last: exit 1: Cannot find MPS control daemon process)")
    monkeypatch.setenv("PATH", "/nonexistent")
    assert "not on PATH" in shared_gpu.mps_client_status(pid=99)


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
    [[ "$cmd" == quit && -z "${STUB_KEEP_SOCKET:-}" ]] && rm -f "$dir/control"
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
    # no active-thread percentage: it would put every rank on the same fraction of the SMs (runtime/shared_gpu.py)
    assert got["TRITON_DIST_RANKS_PER_GPU"] == "4" and got["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] == "<unset>"
    assert got["NVSHMEM_DISABLE_NCCL"] == "1" and got["NVSHMEM_DISABLE_NVLS"] == "1"
    pipe = got["CUDA_MPS_PIPE_DIRECTORY"]
    assert pipe.startswith("/tmp/triton-dist-mps-pipe.") and "DAEMON_UP" in (tmp_path / "torchrun.log").read_text()
    assert mps_log[0] == "started" and mps_log[-1] == "quit"  # started for the job, stopped after it
    assert not os.path.exists(pipe)  # nothing left behind


def test_launch_stops_the_daemon_without_waiting_on_a_socket_file_left_behind(launch):
    """The stop waits for the daemon and server processes, not for the control socket file to vanish (if it stays, a
    wait on it costs the full 10 s; shared-GPU steps exited ~10 s later than one-rank-per-GPU ones on 2026-12-06,
    the suspected cause), and says how long it took."""
    import time

    t0 = time.monotonic()
    r, got, mps_log = launch("--nproc_per_node", "2", "--ranks-per-gpu", "2", ngpu=1,
                             env_extra={"STUB_KEEP_SOCKET": "1"})
    assert r.returncode == 0 and mps_log[-1] == "quit" and not os.path.exists(got["CUDA_MPS_PIPE_DIRECTORY"])
    assert "[launch] MPS daemon stopped in 0 s (0 waits of 0.1 s)" in r.stderr, r.stderr
    assert "[launch] ranks ended after" in r.stderr
    assert time.monotonic() - t0 < 8


def test_launch_passes_the_job_exit_status_and_still_stops_the_daemon(launch):
    r, got, mps_log = launch("--nproc_per_node", "2", "--ranks-per-gpu", "2", ngpu=1, env_extra={"STUB_RC": "3"})
    assert r.returncode == 3 and got["TRITON_DIST_RANKS_PER_GPU"] == "2"
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


def test_launch_keeps_a_percentage_the_caller_set(launch):
    r, got, _ = launch("--nproc_per_node", "2", "--ranks-per-gpu", "2", ngpu=1,
                       env_extra={"CUDA_MPS_ACTIVE_THREAD_PERCENTAGE": "80"})
    assert r.returncode == 0 and got["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] == "80"


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


def test_waiting_grids_keep_to_one_program_per_sm_of_the_share_where_ranks_share_a_gpu(monkeypatch):
    """waiting_grid_programs: per_sm programs per SM of the rank's share on a GPU of its own; one per SM of the
    share where ranks share a GPU (a grid spread over every SM would leave a peer's GEMM no whole SM); per_sm x
    simulated off CUDA."""
    import types

    import torch
    from triton_dist.runtime import device_info as di

    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda d: types.SimpleNamespace(multi_processor_count=132))
    monkeypatch.delenv(di.SM_MARGIN_ENV, raising=False)
    monkeypatch.setattr(STATE, "gpu_ranks", {"h/GPU-a": [0], "h/GPU-b": [1]})
    monkeypatch.setattr(STATE, "ranks_per_gpu", 1)
    assert di.waiting_grid_programs("cuda:0", 4) == 4 * 132
    monkeypatch.setattr(STATE, "gpu_ranks", {"h/GPU-a": [0, 1]})
    monkeypatch.setattr(STATE, "ranks_per_gpu", 2)
    share = di.rank_sm_count("cuda:0")
    assert share == 66 - di.SHARED_GPU_SM_MARGIN and di.waiting_grid_programs("cuda:0", 4) == share
    assert di.waiting_grid_programs("cpu", 4, simulated=2) == 8


def _one_h100(monkeypatch, ranks_on_it: int):
    """A 132-SM CUDA device as seen by rank_sm_count, with ``ranks_on_it`` ranks on it (1: a GPU per rank)."""
    import types

    import torch
    from triton_dist.runtime import device_info as di

    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda d: types.SimpleNamespace(multi_processor_count=132))
    monkeypatch.delenv(di.SM_MARGIN_ENV, raising=False)
    if ranks_on_it == 1:
        monkeypatch.setattr(STATE, "gpu_ranks", {"h/GPU-a": [0], "h/GPU-b": [1]})
    else:
        monkeypatch.setattr(STATE, "gpu_ranks", {"h/GPU-a": list(range(ranks_on_it))})
    monkeypatch.setattr(STATE, "ranks_per_gpu", ranks_on_it)
    return di.rank_sm_count("cuda:0")


def test_given_grids_of_waiting_programs_keep_to_the_share_where_ranks_share_a_gpu(monkeypatch):
    """programs_within_share: a grid size the caller was given stays as given on a GPU of its own and off CUDA, and
    is capped at the rank's share where ranks share a GPU (waiting programs beyond it would sit on every SM)."""
    from triton_dist.runtime import device_info as di

    assert _one_h100(monkeypatch, 1) == 132
    assert di.programs_within_share("cuda:0", 264) == 264 and di.programs_within_share("cuda:0", 8) == 8
    assert di.programs_within_share("cpu", 1000) == 1000
    share = _one_h100(monkeypatch, 2)
    assert share == 66 - di.SHARED_GPU_SM_MARGIN
    assert di.programs_within_share("cuda:0", 132) == share and di.programs_within_share("cuda:0", 8) == 8
    assert di.programs_within_share("cpu", 1000) == 1000
    assert _one_h100(monkeypatch, 4) == 33 - di.SHARED_GPU_SM_MARGIN
    assert di.programs_within_share("cuda:0", 64) == 33 - di.SHARED_GPU_SM_MARGIN


def test_collective_contexts_keep_num_programs_within_the_share_where_ranks_share_a_gpu(monkeypatch):
    """ops.context.program_budget (every collective context's max_programs, the channels' grid bound): the rank's
    SMs by default, a given num_programs as given on a GPU of its own, capped at the share where ranks share one;
    2 / as given on the simulator."""
    from triton_dist.ops.context import program_budget

    assert _one_h100(monkeypatch, 1) == 132
    assert program_budget("cuda:0") == 132 and program_budget("cuda:0", 200) == 200 and program_budget("cuda:0", 8) == 8
    share = _one_h100(monkeypatch, 2)
    assert program_budget("cuda:0") == share and program_budget("cuda:0", 132) == share
    assert program_budget("cuda:0", 8) == 8
    assert program_budget("cpu") == 2 and program_budget("cpu", 300) == 300


def test_mega_kernel_workers_keep_to_the_share_where_ranks_share_a_gpu(monkeypatch):
    """mega_triton_kernel.builder.resolve_num_workers: one worker per SM of the share by default, a given count as
    given on a GPU of its own, capped at the share where ranks share one; 1 on the simulator; bad values refused."""
    from triton_dist.mega_triton_kernel.builder import resolve_num_workers

    assert _one_h100(monkeypatch, 1) == 132
    assert resolve_num_workers(None, "cuda:0", False) == 132 and resolve_num_workers(264, "cuda:0", False) == 264
    share = _one_h100(monkeypatch, 2)
    assert resolve_num_workers(None, "cuda:0", False) == share
    assert resolve_num_workers(2 * 132, "cuda:0", False) == share and resolve_num_workers(16, "cuda:0", False) == 16
    assert resolve_num_workers(None, "cpu", True) == 1 and resolve_num_workers(16, "cpu", False) == 16
    for bad in (0, -1, True, 2.0):
        with pytest.raises(ValueError, match="num_workers must be an int >= 1"):
            resolve_num_workers(bad, "cuda:0", False)
    with pytest.raises(ValueError, match="on the simulator num_workers must be 1"):
        resolve_num_workers(4, "cpu", True)


def test_ag_gemm_push_programs_leave_the_gemm_room_in_the_share_where_ranks_share_a_gpu(monkeypatch):
    """ops.allgather_gemm.push_programs: method sm's push programs plus at least one GEMM program fit the rank's
    share where ranks share a GPU; the given count (default 8; 2 on the simulator) elsewhere."""
    from triton_dist.ops.allgather_gemm import push_programs

    assert _one_h100(monkeypatch, 1) == 132
    assert push_programs(None, "cuda:0") == 8 and push_programs(200, "cuda:0") == 200
    share = _one_h100(monkeypatch, 2)
    assert push_programs(None, "cuda:0") == 8 and push_programs(64, "cuda:0") == share - 1
    assert push_programs(None, "cpu") == 2 and push_programs(300, "cpu") == 300
    monkeypatch.setattr(STATE, "gpu_ranks", {"h/GPU-a": list(range(13))})
    monkeypatch.setattr(STATE, "ranks_per_gpu", 13)  # share 132 // 13 - 2 = 8: the default 8 leaves no GEMM program
    assert push_programs(None, "cuda:0") == 7


def test_sm_margin_knob(monkeypatch):
    """TRITON_DIST_SM_MARGIN: SMs a rank leaves out of its "one program per SM" grids (default 0 at one rank per
    GPU, SHARED_GPU_SM_MARGIN where ranks share one; the variable overrides both); a bad value is a one-line
    ValueError naming the variable."""
    from triton_dist.runtime import device_info as di

    monkeypatch.delenv(di.SM_MARGIN_ENV, raising=False)
    assert di.sm_margin() == 0 and di.sm_margin(1) == 0
    assert di.sm_margin(2) == di.sm_margin(4) == di.SHARED_GPU_SM_MARGIN
    monkeypatch.setenv(di.SM_MARGIN_ENV, "0")
    assert di.sm_margin(2) == 0
    monkeypatch.setenv(di.SM_MARGIN_ENV, "2")
    assert di.sm_margin() == 2
    assert di.rank_sm_count("cpu", simulated=2) == 2  # not CUDA: the caller's count, no margin
    for bad in ("-1", "two", "1.5"):
        monkeypatch.setenv(di.SM_MARGIN_ENV, bad)
        with pytest.raises(ValueError, match="TRITON_DIST_SM_MARGIN"):
            di.sm_margin()


def test_sm_probe_summary_tells_shared_sets_from_side_by_side_grids():
    """tools/sm_probe.py's summary (pure): the measurement of 2026-12-06 under an MPS percentage (both ranks on the
    same 66 SMs, one grid after the other) and under the pool rule (132 SMs each alone, 66 + 66 side by side)."""
    from triton_dist.tools.sm_probe import summarize

    def rank(alone, sms, t0, t1):
        return {"alone_sms": alone, "together": {"sms": sms, "first_start": t0, "last_start": t0 + 1,
                                                 "first_end": t1 - 1, "last_end": t1, "span_ms": (t1 - t0) / 1e6,
                                                 "start_spread_ms": 1e-6}}

    ms = 1_000_000
    percent = summarize([rank(list(range(66)), list(range(66)), 0, 50 * ms),
                         rank(list(range(66)), list(range(66)), 50 * ms, 100 * ms)], 50.0)
    assert percent["alone_overlap"] == percent["alone_union"] == 66 and not percent["together_concurrent"]
    pool = summarize([rank(list(range(132)), list(range(66)), 0, 50 * ms),
                      rank(list(range(132)), list(range(66, 132)), 0, 50 * ms)], 50.0)
    assert pool["alone_counts"] == [132, 132] and pool["together_overlap"] == 0 and pool["together_concurrent"]


def test_sm_probe_kernel_compiles_for_hopper_on_the_cpu(tmp_path):
    """The probe's kernel (clock and SM id from the profiler's lowering, a full-SM shared-memory reservation)
    compiles for cuda:90 without a GPU."""
    from triton_dist.tools import compile as tool

    rc = tool.run([f"{os.path.join(ROOT, 'python', 'triton_dist', 'tools', 'sm_probe.py')}:k_sm_probe", "-s",
                   "*i32:16, *i64:16, *i64:16, i64, *bf16:16, *bf16:16, *fp32:16, i32", "--target", "cuda:90",
                   "--num-warps", "8", "--num-stages", "4", "--stage", "ptx", "--out", str(tmp_path / "probe.ptx")])
    ptx = (tmp_path / "probe.ptx").read_text()
    assert rc == 0 and "%globaltimer" in ptx and "%smid" in ptx


def test_copy_progress_kernel_compiles_for_hopper_and_polls_with_volatile_loads(tmp_path):
    """tools/sm_probe.py's copy-progress kernel (an SM-filling block polling a peer-raised flag against a deadline)
    compiles for cuda:90 without a GPU, and its poll is a volatile load (a cached load could spin forever on a
    stale value and make every variant look blocked)."""
    from triton_dist.tools import compile as tool

    rc = tool.run([f"{os.path.join(ROOT, 'python', 'triton_dist', 'tools', 'sm_probe.py')}:k_spin_until_flag", "-s",
                   "*i64:16, *i64:16, *i64:16, i64, *bf16:16, *bf16:16, *fp32:16, i32", "--target", "cuda:90",
                   "--num-warps", "8", "--num-stages", "4", "--stage", "ptx", "--out", str(tmp_path / "spin.ptx")])
    ptx = (tmp_path / "spin.ptx").read_text()
    assert rc == 0 and "%globaltimer" in ptx and "ld.volatile.global" in ptx
