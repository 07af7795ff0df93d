"""What the GPU tests that run under torchrun with SHMEM share: the rank layout from torchrun's environment, a
module-scoped distributed setup (NVSHMEM through ``triton_dist.utils``), and the SHMEM barrier."""
import os

import pytest
import torch

import triton_dist.utils as U

RANK = int(os.environ.get("RANK", 0))
WORLD = int(os.environ.get("WORLD_SIZE", 1))
LOCAL_RANK = int(os.environ.get("LOCAL_RANK", 0))
LOCAL_WORLD = int(os.environ.get("LOCAL_WORLD_SIZE", WORLD))
NXT = (RANK + 1) % max(WORLD, 1)
PRV = (RANK - 1) % max(WORLD, 1)


def shmem_group(seed: int):
    """A module-scoped fixture: this rank's GPU selected, ``initialize_distributed(seed=seed)`` (torch.distributed +
    NVSHMEM) for the module's tests, ``finalize_distributed`` after them. Use as ``group = shmem_group(5)``."""
    @pytest.fixture(scope="module")
    def group():
        torch.cuda.set_device(LOCAL_RANK)
        g = U.initialize_distributed(seed=seed)
        yield g
        U.finalize_distributed()

    return group


def shmem_barrier():
    """Every rank's NVSHMEM barrier on the current stream, then a device synchronize."""
    U.nvshmem_barrier_all_on_stream()
    torch.cuda.synchronize()
