"""CPU checks of what the GPU tier needs to run with ranks that share a GPU (``TRITON_DIST_RANKS_PER_GPU``, CUDA MPS):
when the tier runs and why not (``conftest.gpu_tier_skip_reason``), the order it runs in (``conftest.run_first``),
each rank's GPU (``_torchrun_shmem.rank_device``) and the environment of a child job that may trap
(``_torchrun_shmem.isolated_child_env``), against the library's binding rule (``runtime.shared_gpu``). The GPU tier
itself cannot run here: these are the parts of it a GPU run would otherwise be the first to exercise."""
import os
import re
import types

import pytest

import conftest
import _torchrun_shmem as T
from triton_dist.runtime import shared_gpu

HERE = os.path.dirname(os.path.abspath(__file__))
GPU_DIR = os.path.join(HERE, "gpu")


def _env(world, local_world=None, per_gpu=None, **kw):
    env = {"WORLD_SIZE": str(world), "LOCAL_WORLD_SIZE": str(world if local_world is None else local_world)}
    if per_gpu is not None:
        env["TRITON_DIST_RANKS_PER_GPU"] = str(per_gpu)
    env.update(kw)
    return env


# ---------------------------------------------------------------------------------------------- skip reason


@pytest.mark.parametrize("env,gpus", [
    (_env(2), 2), (_env(4), 4), (_env(2, per_gpu=2), 1), (_env(4, per_gpu=4), 1), (_env(4, per_gpu=2), 2),
    (_env(3, per_gpu=2), 2), (_env(2, per_gpu=4), 1), (_env(8, local_world=4, per_gpu=4), 1),  # 2 nodes
    (_env(2, per_gpu=1), 8),
])
def test_tier_runs_where_the_gpus_fit_the_ranks(env, gpus):
    assert conftest.gpu_tier_skip_reason(env, gpus) is None


@pytest.mark.parametrize("env,gpus,words", [
    (_env(2, per_gpu=2), 0, ["no CUDA GPU", "scripts/test.sh --gpu", "share a GPU"]),
    ({}, 1, [">= 2 ranks", "scripts/test.sh --gpu", "share a GPU"]),
    (_env(1), 2, [">= 2 ranks"]),
    (_env(2), 1, ["2 ranks on this node at 1 rank(s) per GPU need 2 GPUs, found 1", "scripts/test.sh --gpu",
                  "--ranks-per-gpu", "TRITON_DIST_RANKS_PER_GPU"]),
    (_env(4, per_gpu=2), 1, ["need 2 GPUs, found 1"]),
    (_env(8, local_world=8, per_gpu=4), 1, ["need 2 GPUs"]),
    (_env(2, per_gpu=0), 1, ["TRITON_DIST_RANKS_PER_GPU='0'", "integer >= 1"]),
    (_env(2, per_gpu="two"), 1, ["TRITON_DIST_RANKS_PER_GPU='two'"]),
])
def test_skip_reason_says_why_and_how_to_run(env, gpus, words):
    reason = conftest.gpu_tier_skip_reason(env, gpus)
    assert reason and reason.startswith("gpu tier: ")
    for w in words:
        assert w in reason, (w, reason)


def test_skip_reason_uses_the_librarys_rule():
    """Runs exactly where the library's binding rule has a GPU for every local rank."""
    assert conftest.RANKS_PER_GPU_ENV == shared_gpu.RANKS_PER_GPU_ENV
    for local_world in range(1, 9):
        for per_gpu in range(1, 6):
            for gpus in range(1, 5):
                env = _env(max(local_world, 2), local_world, per_gpu)
                fits = shared_gpu.gpus_used(local_world, per_gpu) <= gpus
                assert (conftest.gpu_tier_skip_reason(env, gpus) is None) == fits, (local_world, per_gpu, gpus)
                if fits:  # every local rank gets a visible GPU
                    assert all(shared_gpu.device_for_local_rank(r, local_world, gpus, per_gpu) < gpus
                               for r in range(local_world))


# ---------------------------------------------------------------------------------------------- run order


def _item(file_name, name):
    return types.SimpleNamespace(path=types.SimpleNamespace(name=file_name), originalname=name, name=name)


def test_run_first_moves_the_named_tests_to_the_front():
    items = [_item("test_gpu_collectives.py", "test_a"), _item("test_gpu_runtime.py", "test_init"),
             _item("test_gpu_runtime.py", "test_launch_before_init_is_a_clear_error_then_works_after"),
             _item("test_gpu_tools.py", "test_b")]
    got = conftest.run_first(items)
    assert [i.originalname for i in got] == ["test_launch_before_init_is_a_clear_error_then_works_after", "test_a",
                                             "test_init", "test_b"]
    assert conftest.run_first(items[:1]) == items[:1]


def test_run_first_names_tests_that_exist():
    for entry in conftest.GPU_RUN_FIRST:
        file_name, name = entry.split("::")
        with open(os.path.join(GPU_DIR, file_name)) as f:
            assert re.search(rf"^def {name}\(", f.read(), re.M), entry


# ---------------------------------------------------------------------------------------------- rank's GPU


@pytest.mark.parametrize("text,want", [(None, 1), ("", 1), ("1", 1), ("2", 2), ("4", 4), ("0", 1), ("-2", 1),
                                       ("x", 1)])
def test_env_ranks_per_gpu(text, want):
    env = {} if text is None else {"TRITON_DIST_RANKS_PER_GPU": text}
    assert T.env_ranks_per_gpu(env) == want


@pytest.mark.parametrize("local_rank,local_world,per_gpu,visible,want", [
    (0, 2, None, 2, 0), (1, 2, None, 2, 1), (1, 2, 2, 1, 0), (3, 4, 4, 1, 0), (3, 4, 2, 2, 1), (2, 4, 2, 2, 1),
    (1, 4, 2, 2, 0),
    (3, 4, None, 1, 3),  # too few GPUs (the tier is skipped): the rule's index all the same, no error at import
    (1, 2, 2, 0, 0),  # a CPU host collecting the tier
])
def test_rank_device_is_the_binding_rule(local_rank, local_world, per_gpu, visible, want):
    env = {"LOCAL_RANK": str(local_rank), "LOCAL_WORLD_SIZE": str(local_world)}
    if per_gpu is not None:
        env["TRITON_DIST_RANKS_PER_GPU"] = str(per_gpu)
    assert T.rank_device(env, visible) == want == local_rank // (per_gpu or 1)


def test_this_process_device_constants():
    assert T.DEVICE == T.rank_device() and T.RANKS_PER_GPU == T.env_ranks_per_gpu()


def test_visible_device_id():
    assert T.visible_device_id({}, 0) == "0" and T.visible_device_id({}, 3) == "3"
    assert T.visible_device_id({"CUDA_VISIBLE_DEVICES": "3,5"}, 1) == "5"
    assert T.visible_device_id({"CUDA_VISIBLE_DEVICES": " 3 , 5 "}, 0) == "3"
    assert T.visible_device_id({"CUDA_VISIBLE_DEVICES": "GPU-aa,GPU-bb"}, 1) == "GPU-bb"
    assert T.visible_device_id({"CUDA_VISIBLE_DEVICES": ""}, 2) == "2"


# ---------------------------------------------------------------------------------------------- shared or not


def test_gpu_shared_and_mps_client(tmp_path):
    none = str(tmp_path / "no-daemon")
    assert not T.mps_client({}, none) and not T.gpu_shared({}, none)
    assert not T.gpu_shared({"TRITON_DIST_RANKS_PER_GPU": "1"}, none)
    assert T.gpu_shared({"TRITON_DIST_RANKS_PER_GPU": "2"}, none)
    assert T.mps_client({"CUDA_MPS_PIPE_DIRECTORY": "/run/mps"}, none)
    assert T.gpu_shared({"CUDA_MPS_PIPE_DIRECTORY": "/run/mps"}, none)
    daemon = tmp_path / "default"
    daemon.mkdir()
    (daemon / "control").write_text("")
    assert T.mps_client({}, str(daemon)) and T.gpu_shared({}, str(daemon))


def test_child_timeout_is_longer_when_shared(tmp_path):
    none = str(tmp_path / "no-daemon")
    assert T.child_timeout(150, {}, none) == 150
    assert T.child_timeout(150, {"TRITON_DIST_RANKS_PER_GPU": "2"}, none) == 150 * T.SHARED_CHILD_SLOWDOWN > 150
    assert T.child_timeout(240, {"CUDA_MPS_PIPE_DIRECTORY": "/run/mps"}, none) > 240


# ---------------------------------------------------------------------------------------------- child env


def _parent(**kw):
    """A torchrun rank's environment where 4 ranks share one GPU under a private MPS daemon."""
    env = {"RANK": "1", "WORLD_SIZE": "4", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "4", "MASTER_ADDR": "10.0.0.1",
           "MASTER_PORT": "29500", "TORCHELASTIC_RUN_ID": "x", "TORCHELASTIC_USE_AGENT_STORE": "True",
           "GROUP_RANK": "0", "ROLE_NAME": "default", "ROLE_RANK": "1", "TRITON_DIST_RANKS_PER_GPU": "4",
           "CUDA_MPS_PIPE_DIRECTORY": "/tmp/td-mps/pipe", "CUDA_MPS_LOG_DIRECTORY": "/tmp/td-mps/log",
           "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE": "25", "PATH": "/usr/bin", "NVSHMEM_DISABLE_NVLS": "1"}
    env.update(kw)
    return env


@pytest.mark.parametrize("ranks,rank", [(1, 0), (2, 0), (2, 1)])
def test_child_env_runs_outside_the_mps_server(tmp_path, ranks, rank):
    base = _parent(CUDA_VISIBLE_DEVICES="3")
    before = dict(base)
    mps_dir = tmp_path / "no-mps"
    mps_dir.mkdir()
    env = T.isolated_child_env(base, port=31234, ranks=ranks, rank=rank, device=0, mps_dir=mps_dir,
                               MISMATCH_METHOD="ll", TRITON_DIST_BOUNDED_WAIT=200, NVSHMEM_DISABLE_NVLS=None)
    assert base == before  # the parent's environment is not touched
    assert {k: env[k] for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR",
                                "MASTER_PORT")} == dict(RANK=str(rank), WORLD_SIZE=str(ranks), LOCAL_RANK=str(rank),
                                                        LOCAL_WORLD_SIZE=str(ranks), MASTER_ADDR="127.0.0.1",
                                                        MASTER_PORT="31234")
    assert not [k for k in env if k.startswith(("TORCHELASTIC_", "GROUP_", "ROLE_"))]
    # outside MPS: an empty pipe directory (no daemon: an ordinary context), no share
    assert env["CUDA_MPS_PIPE_DIRECTORY"] == str(mps_dir) and os.listdir(mps_dir) == []
    assert [k for k in env if k.startswith("CUDA_MPS_")] == ["CUDA_MPS_PIPE_DIRECTORY"]
    assert env["TRITON_DIST_SM_SHARE_CHECK"] == "0" and env["TRITON_DIST_RANKS_PER_GPU"] == str(ranks)
    assert env["CUDA_VISIBLE_DEVICES"] == "3"  # the parent's GPU 0, the child's only one
    assert env["MISMATCH_METHOD"] == "ll" and env["TRITON_DIST_BOUNDED_WAIT"] == "200"
    assert "NVSHMEM_DISABLE_NVLS" not in env and env["PATH"] == "/usr/bin"


def test_child_env_binds_as_the_library_does(tmp_path, monkeypatch):
    """The child's variables mean what the child's ``initialize_distributed`` reads: every rank on the one visible
    GPU, and no SM-share check (the ranks time-slice outside MPS)."""
    for rank in (0, 1):
        env = T.isolated_child_env(_parent(), port=1, ranks=2, rank=rank, mps_dir=tmp_path)
        for k in list(os.environ):
            if k.startswith(("TRITON_DIST_", "CUDA_MPS_")):
                monkeypatch.delenv(k)
        for k, v in env.items():
            monkeypatch.setenv(k, v)
        per_gpu = shared_gpu.ranks_per_gpu()
        assert per_gpu == 2 and not shared_gpu.share_check_enabled()
        assert shared_gpu.device_for_local_rank(int(env["LOCAL_RANK"]), int(env["LOCAL_WORLD_SIZE"]), 1,
                                                per_gpu) == 0


def test_child_env_one_rank_per_gpu(tmp_path):
    base = {"RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2", "CUDA_VISIBLE_DEVICES": "4,6",
            "TORCHELASTIC_RUN_ID": "x"}
    one = T.isolated_child_env(base, port=5, device=1, shared=False)
    assert one["CUDA_VISIBLE_DEVICES"] == "6" and one["TRITON_DIST_RANKS_PER_GPU"] == "1"
    assert "CUDA_MPS_PIPE_DIRECTORY" not in one and "TRITON_DIST_SM_SHARE_CHECK" not in one
    assert one["WORLD_SIZE"] == "1" and "TORCHELASTIC_RUN_ID" not in one
    two = T.isolated_child_env(base, port=5, ranks=2, rank=1, device=1, shared=False)
    assert two["CUDA_VISIBLE_DEVICES"] == "4,6" and two["LOCAL_RANK"] == "1"  # child rank 1 on the parents' GPU 1
    assert two["TRITON_DIST_RANKS_PER_GPU"] == "1" and "CUDA_MPS_PIPE_DIRECTORY" not in two


def test_child_env_shared_is_detected_from_the_parent(tmp_path):
    env = T.isolated_child_env(_parent(), port=5, device=0)  # TRITON_DIST_RANKS_PER_GPU=4: shared
    try:
        assert os.path.isdir(env["CUDA_MPS_PIPE_DIRECTORY"]) and os.listdir(env["CUDA_MPS_PIPE_DIRECTORY"]) == []
        assert env["CUDA_MPS_PIPE_DIRECTORY"] != "/tmp/td-mps/pipe" and env["CUDA_VISIBLE_DEVICES"] == "0"
    finally:
        os.rmdir(env["CUDA_MPS_PIPE_DIRECTORY"])
    with pytest.raises(ValueError, match="rank 2 is not in"):
        T.isolated_child_env(_parent(), port=5, ranks=2, rank=2, mps_dir=tmp_path)


# ---------------------------------------------------------------------------------------------- the tier's files


_DEVICE_FROM_LOCAL_RANK = re.compile(r"environ(\.get\(|\[)\s*[\"']LOCAL_RANK[\"']|\(\s*LOCAL_RANK\s*\)")
_RAW_COLLECTIVE = re.compile(r"\bdist\.(all_gather_into_tensor|reduce_scatter_tensor|all_reduce|all_gather|"
                             r"reduce_scatter|reduce|broadcast)\(")


def test_gpu_tier_files_use_the_binding_rule_and_torch_collectives():
    """No GPU-tier file takes LOCAL_RANK for a device index (``set_device(LOCAL_RANK)``, ``os.environ["LOCAL_RANK"]``:
    wrong where ranks share a GPU -- use ``_torchrun_shmem.DEVICE``), and none calls a torch.distributed collective
    on tensors directly (NCCL's: absent where ranks share a GPU -- use ``runtime.torch_collectives``; the object
    collectives and barriers run on gloo and are fine)."""
    files = sorted(f for f in os.listdir(GPU_DIR) if f.endswith(".py"))
    assert len(files) >= 10
    bad = []
    for name in files:
        with open(os.path.join(GPU_DIR, name)) as f:
            for line_no, line in enumerate(f, 1):
                if _DEVICE_FROM_LOCAL_RANK.search(line) or _RAW_COLLECTIVE.search(line):
                    bad.append(f"{name}:{line_no}: {line.strip()}")
    assert not bad, bad
    # the patterns themselves
    assert _DEVICE_FROM_LOCAL_RANK.search("torch.cuda.set_device(LOCAL_RANK)")
    assert _DEVICE_FROM_LOCAL_RANK.search('int(os.environ.get("LOCAL_RANK", "0"))')
    assert _RAW_COLLECTIVE.search("    dist.all_gather(parts, p)") and not _RAW_COLLECTIVE.search("dist.barrier()")
    assert not _RAW_COLLECTIVE.search("dist.all_gather_object(out, mine)")
