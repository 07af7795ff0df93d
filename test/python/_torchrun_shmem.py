"""What the GPU tests that run under torchrun with SHMEM share: the rank layout from torchrun's environment, one
distributed setup per pytest process (NVSHMEM through ``triton_dist.utils``) with a module-scoped seeding fixture,
and the SHMEM barrier."""
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


def shmem_session_setup():
    """The body of the session fixture ``shmem_session`` (``test/python/conftest.py``): torch.distributed + NVSHMEM
    for the whole pytest process (this rank's GPU selected), initialised once, at the first test that needs it, and
    finalised at the end of the session. Per module it was initialised and finalised again: on the GPU machine the
    second module's initialisation in the same process then failed in Gloo's connect (``Connection refused``, every
    test of ``test_gpu_libshmem_scope.py`` after ``test_gpu_libshmem.py``, run at 56407d5)."""
    torch.cuda.set_device(LOCAL_RANK)
    g = U.initialize_distributed()
    yield g
    U.finalize_distributed()


def shmem_group(seed: int):
    """A module-scoped fixture: the session's distributed setup (:func:`shmem_session`) with the RNGs seeded with
    ``seed`` for the module's tests (as ``initialize_distributed(seed=seed)`` seeds them). Use as
    ``group = shmem_group(5)``."""
    @pytest.fixture(scope="module")
    def group(shmem_session):
        U.init_seed(seed)
        return shmem_session

    return group


def shmem_barrier():
    """Every rank's NVSHMEM barrier on the current stream, then a device synchronize."""
    U.nvshmem_barrier_all_on_stream()
    torch.cuda.synchronize()
