"""Test tiers.

* CPU tier (default): unit tests, compile-for-both-targets tests, simulator executions (marker ``sim``).
* ``gpu`` tier: needs >= 2 CUDA GPUs and a torchrun launch (``scripts/test.sh --gpu``); skipped elsewhere with
  the reason shown in pytest's summary (``-ra``).
"""
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))


def _gpu_skip_reason():
    try:
        import torch
    except ImportError:  # pragma: no cover
        return "torch is not installed"
    if not torch.cuda.is_available():
        return "gpu tier: no CUDA GPU on this machine (run scripts/test.sh --gpu on a host with >= 2 GPUs)"
    if torch.cuda.device_count() < 2:
        return f"gpu tier: needs >= 2 CUDA GPUs, found {torch.cuda.device_count()}"
    if int(os.environ.get("WORLD_SIZE", "1")) < 2:
        return "gpu tier: must run under torchrun --nproc_per_node >= 2 (scripts/test.sh --gpu)"
    return None


def pytest_collection_modifyitems(config, items):
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
