"""GPU tier for plain ``@triton.jit`` kernels using ``dl.*`` / ``libshmem_device`` (issue 16, point 1):
``torchrun --nproc_per_node 2 -m pytest -s test/python/gpu/test_gpu_plain_jit.py``.

The kernel (``_plain_jit_kernels.plain_exchange``, the one the simulator test runs at 2 ranks) is made by stock
``triton.jit``: ``import triton_dist`` links NVSHMEM's device library into it at compile time and initialises its
module at load. Every rank writes into the next one through ``dl.symm_at`` + ``dl.notify`` and
``libshmem_device.putmem_signal_block``, waits with ``dl.wait`` and checks what the previous rank sent. A kernel
without SHMEM calls launched alongside needs no module init (the count does not move).
"""
import os
import sys

import pytest
import torch
from triton.runtime.jit import JITFunction

pytestmark = pytest.mark.gpu

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import triton_dist  # noqa: E402,F401
import triton_dist.utils as U  # noqa: E402
from triton_dist.runtime import module_init  # noqa: E402
import _plain_jit_kernels as K  # noqa: E402

from _torchrun_shmem import RANK, WORLD, shmem_barrier, shmem_group  # noqa: E402
PREV = (RANK - 1) % max(WORLD, 1)


group = shmem_group(seed=5)
_barrier = shmem_barrier


def test_plain_jit_kernel_with_dl_and_libshmem_moves_data(group):
    assert type(K.plain_exchange) is JITFunction
    block = 1024
    data = U.nvshmem_create_tensor((3 * block, ), torch.float32)
    sig = U.nvshmem_create_tensor((2, ), torch.int64)
    for rnd in range(3):  # later rounds: the compiled, initialised module is reused
        data.fill_(-1)
        data[block:2 * block] = torch.arange(block, dtype=torch.float32, device="cuda") + 100 * (RANK + 1) + rnd
        sig.zero_()
        out = torch.zeros(2 * block + 2, dtype=torch.float32, device="cuda")
        _barrier()
        K.plain_exchange[(1, )](data, sig, out, BLOCK=block)
        torch.cuda.synchronize()
        idx = torch.arange(block, dtype=torch.float32, device="cuda")
        torch.testing.assert_close(out[:block], idx + PREV * 1000, rtol=0, atol=0)
        torch.testing.assert_close(out[block:2 * block], idx + 100 * (PREV + 1) + rnd, rtol=0, atol=0)
        assert out[2 * block:].tolist() == [float(RANK), float(WORLD)]
        assert sig.tolist() == [1, 1]
        _barrier()
    assert module_init.module_init_count() >= 1


def test_plain_jit_kernel_without_shmem_needs_no_module_init(group):
    before = module_init.module_init_count()
    x = torch.randn(1000, device="cuda")
    y = torch.empty_like(x)
    K.plain_no_shmem[(8, )](x, y, 1000, BLOCK=128)
    torch.testing.assert_close(y, torch.exp(x) * 2.0)
    assert module_init.module_init_count() == before
    _barrier()
