"""Test tiers.

* CPU tier (default): unit tests, compile-for-both-targets tests, simulator executions (marker ``sim``).
* ``gpu`` tier: a torchrun launch of >= 2 ranks on a node with enough CUDA GPUs for them -- one GPU per rank, or
  ranks that share a GPU (``TRITON_DIST_RANKS_PER_GPU=N``: ``ceil(LOCAL_WORLD_SIZE / N)`` GPUs, under CUDA MPS).
  ``scripts/test.sh --gpu`` launches it, sharing the GPU when there are fewer GPUs than ranks. Skipped elsewhere with
  the reason (and how to run it) shown in pytest's summary (``-ra``): :func:`gpu_tier_skip_reason`.
"""
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))


@pytest.fixture(scope="session")
def shmem_session():
    """GPU tier: one torch.distributed + NVSHMEM setup per pytest process (``_torchrun_shmem.shmem_session_setup``),
    requested by the modules' ``group = shmem_group(seed)`` fixtures. Imported when first requested: the CPU tier
    never loads it."""
    from _torchrun_shmem import shmem_session_setup

    yield from shmem_session_setup()


RANKS_PER_GPU_ENV = "TRITON_DIST_RANKS_PER_GPU"  # triton_dist.runtime.shared_gpu.RANKS_PER_GPU_ENV (not imported here)
_SHARE = "the ranks share a GPU when there are fewer GPUs than ranks"


def gpu_tier_skip_reason(env, device_count: int):
    """Why the GPU tier cannot run in a process with environment ``env`` on a node with ``device_count`` visible
    CUDA GPUs, or None when it can: WORLD_SIZE >= 2 (a torchrun launch) and ``ceil(LOCAL_WORLD_SIZE / N) <=
    device_count`` with N = ``TRITON_DIST_RANKS_PER_GPU`` (default 1: a GPU per rank), the binding rule of
    ``triton_dist.runtime.shared_gpu``. The reason says how to run the tier. A pure function (tested on the CPU)."""
    world = int(env.get("WORLD_SIZE", "1") or 1)
    local_world = int(env.get("LOCAL_WORLD_SIZE", world) or world)
    text = str(env.get(RANKS_PER_GPU_ENV, "") or "").strip()
    try:
        per_gpu = int(text) if text else 1
    except ValueError:
        per_gpu = 0
    if per_gpu < 1:
        return f"gpu tier: {RANKS_PER_GPU_ENV}={text!r} is not an integer >= 1 (ranks that share one GPU)"
    if device_count < 1:
        return f"gpu tier: no CUDA GPU on this machine: run scripts/test.sh --gpu on a host with a GPU ({_SHARE})"
    if world < 2:
        return (f"gpu tier: must run under torchrun with >= 2 ranks: scripts/test.sh --gpu (NPROC ranks, default 2; "
                f"{_SHARE})")
    need = -(-local_world // per_gpu)
    if device_count < need:
        return (f"gpu tier: {local_world} ranks on this node at {per_gpu} rank(s) per GPU need {need} GPUs, found "
                f"{device_count}: let the ranks share a GPU: scripts/test.sh --gpu does (scripts/launch.sh "
                f"--ranks-per-gpu N: {RANKS_PER_GPU_ENV}=N under CUDA MPS)")
    return None


def _gpu_skip_reason():
    try:
        import torch
    except ImportError:  # pragma: no cover
        return "torch is not installed"
    return gpu_tier_skip_reason(os.environ, torch.cuda.device_count() if torch.cuda.is_available() else 0)


#: GPU-tier tests that must run before anything in the pytest process initialises SHMEM: moved to the front of the
#: run. The GPU tier keeps one distributed setup for the whole pytest process (re-initialising it in one process
#: fails: ``_torchrun_shmem.shmem_session_setup``), so in a whole-tier run (``scripts/test.sh --gpu``) a test of
#: what happens *before* initialisation must come first.
GPU_RUN_FIRST = ("test_gpu_runtime.py::test_launch_before_init_is_a_clear_error_then_works_after", )


def run_first(items, first=GPU_RUN_FIRST):
    """``items`` with those named in ``first`` (``file name::test name``) moved to the front, order otherwise
    kept."""
    head = [it for it in items if f"{it.path.name}::{getattr(it, 'originalname', it.name)}" in first]
    return head + [it for it in items if all(it is not h for h in head)]


#: The matrix subset: what CI runs on every supported Triton other than the pinned one (``pytest --triton-matrix``,
#: from ``scripts/triton_matrix.sh``, which also runs the whole lit suite). These files -- every Triton assumption
#: (test_compat), compiling the ``dl`` / ``language_extra`` / ``libshmem_device`` / library kernels for cuda:90 and
#: hip:gfx942 (NVSHMEM bitcode linked where the tests link it), and the simulator suite -- with simulator runs at
#: MATRIX_MAX_RANKS ranks at most. The one place that defines the subset.
MATRIX_FILES = (
    "test_compat.py", "test_target.py", "test_import_without_gpu.py", "test_import_layering.py", "test_bitcode.py",
    "test_compile_tool.py", "test_language_ops.py", "test_language_extra.py", "test_libshmem_device.py",
    "test_amd_memory_model.py", "test_jit.py", "test_aot.py", "test_gemm.py",
    "test_language_sim.py", "test_libshmem_sim.py", "test_collectives_sim.py", "test_overlap_sim.py",
    "test_sim_runtime.py", "test_sim_user_kernels.py", "test_ops_api.py", "test_profiler.py", "test_utils.py",
    "test_plain_jit_shmem.py", "test_simt_tiles.py", "test_amd_hsaco.py", "test_mega_attention_sim.py",
    "test_mega_core.py", "test_mega_qwen3_sim.py",
)
MATRIX_MAX_RANKS = 2
#: Tests of MATRIX_FILES left out of the matrix: test_stress_4_ranks takes no rank-count parameter (its rank count is
#: in the body); test_torchrun_cpu (two torchrun ranks on the simulator) aborted once at exit under Triton 3.8
#: ("terminate called without an active exception", 1 of 5 runs, cause not found) and runs in the pinned tier.
#: test_push_pipe (55 s per Triton at 2 ranks, the matrix's longest) runs in the pinned tier; across Triton versions
#: its two kernels are covered by test/lit/collectives/push_pipe.py, which the matrix compiles.
MATRIX_DESELECT = ("test_collectives_sim.py::test_stress_4_ranks", "test_sim_runtime.py::test_torchrun_cpu",
                   "test_collectives_sim.py::test_push_pipe")
_RANK_PARAMS = ("world", "world_size")


def in_triton_matrix(item) -> bool:
    """Whether pytest ``item`` belongs to the matrix subset (MATRIX_FILES, at most MATRIX_MAX_RANKS ranks)."""
    file_name = item.path.name
    if file_name not in MATRIX_FILES or f"{file_name}::{item.originalname}" in MATRIX_DESELECT:
        return False
    params = getattr(getattr(item, "callspec", None), "params", {})
    return all(params[p] <= MATRIX_MAX_RANKS for p in _RANK_PARAMS if isinstance(params.get(p), int))


def pytest_collection_modifyitems(config, items):
    if config.getoption("--triton-matrix"):
        kept = [item for item in items if in_triton_matrix(item)]
        config.hook.pytest_deselected(items=[item for item in items if not in_triton_matrix(item)])
        items[:] = kept
    items[:] = run_first(items)
    reason = _gpu_skip_reason()
    if reason is None:
        return
    skip = pytest.mark.skip(reason=reason)
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


def pytest_ignore_collect(collection_path, config):
    # GPU test modules import CUDA-only machinery at collection time on purpose; do not even import them on CPU
    # hosts unless asked (they would be skipped anyway). A visible skip is still reported by test_gpu_tier_visible.
    if "gpu" in collection_path.parts and _gpu_skip_reason() is not None and collection_path.suffix == ".py":
        return not config.getoption("--collect-gpu")
    return None


def pytest_addoption(parser):
    parser.addoption("--collect-gpu", action="store_true", default=False,
                     help="collect test/python/gpu even when the GPU tier cannot run (its tests are skipped)")
    parser.addoption("--triton-matrix", action="store_true", default=False,
                     help="run only the matrix subset CI runs on the non-pinned Tritons (conftest.MATRIX_FILES)")


def pytest_sessionfinish(session, exitstatus):
    """GPU tier under torchrun: end this rank cleanly once its tests are done -- a barrier with the other ranks
    (none tears down while a peer still uses SHMEM or the process group), then ``finalize_distributed()`` (symmetric
    memory freed, NVSHMEM finalized, the process group destroyed), so no NCCL thread outlives the torchrun store.
    Nothing happens where no test initialised the distributed runtime."""
    utils = sys.modules.get("triton_dist.utils")
    if utils is None:
        return
    try:
        import torch.distributed as dist

        if dist.is_available() and dist.is_initialized():
            dist.barrier()
    finally:
        utils.finalize_distributed()


REPORT_FAILURES_NOW_ENV = "TRITON_DIST_REPORT_FAILURES_NOW"


def pytest_runtest_logreport(report):
    """With ``TRITON_DIST_REPORT_FAILURES_NOW=1`` (the GPU suite's tiers set it): a failure's report goes to the
    process's stderr the moment it happens, not only in the session summary, and rank 0 prints a ``[done]`` line
    with the outcome and duration of each finished test -- a kernel that later hangs the rank
    or kills it in a library's teardown (2026-12-06: both, on a shared GPU) would otherwise take every message of
    the session with it."""
    if os.environ.get(REPORT_FAILURES_NOW_ENV, "") in ("", "0"):
        return
    rank = os.environ.get("RANK", "?")
    if report.failed:
        sys.__stderr__.write(f"\n[rank {rank}] FAILED {report.nodeid} ({report.when}):\n{report.longreprtext}\n")
        sys.__stderr__.flush()
    elif rank in ("0", "?") and (report.when == "call" or report.skipped):
        # one line per finished test from the first rank, with its duration: a step cut at its time limit prints no
        # summary and no --durations, and this is where its time went (2026-12-05: the overlap tier, cut after 9
        # of 79 tests, told nothing of it). The "[done]" lines also list what a later run may deselect.
        sys.__stderr__.write(f"\n[done] {report.outcome} {report.duration:.1f}s {report.nodeid}\n")
        sys.__stderr__.flush()
