"""GPU tier for tiles indexed per thread inside ``simt_exec_region`` (issue 16, point 4):
``torchrun --nproc_per_node 2 -m pytest -s test/python/gpu/test_gpu_simt_tiles.py`` (every rank runs the same
single-GPU checks on its GPU by the binding rule; no SHMEM needed).

The kernels of ``_simt_tile_kernels`` (the ones the simulator tests run): a 32 x 32 transpose moved element by
element by every thread through the shared tile scratch, per-thread gathers with fp16 / int1 / int32 tiles, and two
regions sharing one scratch in a ``@triton_dist.jit`` kernel, with several programs and warp counts, and a transpose
whose 128 KiB of tiles live in dynamic shared memory.
"""
import os
import sys

import pytest
import torch

pytestmark = pytest.mark.gpu

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import triton_dist  # noqa: E402,F401
import _simt_tile_kernels as K  # noqa: E402
from _torchrun_shmem import DEVICE  # noqa: E402


@pytest.fixture(scope="module", autouse=True)
def device():
    torch.cuda.set_device(DEVICE)


@pytest.mark.parametrize("num_warps", [1, 4, 8])
def test_transpose_through_the_tile_scratch(num_warps):
    x = torch.randn(32, 32, device="cuda")
    y = torch.full_like(x, float("nan"))
    K.transpose_tile[(1, )](x, y, T=32, num_warps=num_warps)
    torch.cuda.synchronize()
    torch.testing.assert_close(y, x.T.contiguous(), rtol=0, atol=0)


@pytest.mark.parametrize("num_warps", [2, 4])
def test_gather_counts_and_flags(num_warps):
    n = 64
    src = torch.randn(n, device="cuda").to(torch.float16)
    idx = torch.randint(0, n, (n, ), dtype=torch.int32, device="cuda")
    dst = torch.zeros(n, dtype=torch.float16, device="cuda")
    hits = torch.zeros(n, dtype=torch.int32, device="cuda")
    K.gather_scale_count[(1, )](src, idx, dst, hits, N=n, num_warps=num_warps)
    torch.cuda.synchronize()
    torch.testing.assert_close(dst, src[idx.long()] * 2, rtol=0, atol=0)
    assert torch.equal(hits, torch.bincount(idx.long(), minlength=n).to(torch.int32))


def test_two_regions_in_a_dist_jit_kernel_many_programs():
    for _ in range(3):
        x = torch.randn(16, 16, device="cuda")
        y = torch.zeros_like(x)
        K.dist_two_regions[(1, )](x, y, T=16)
        torch.cuda.synchronize()
        torch.testing.assert_close(y, x.T.contiguous() + 1.0, rtol=0, atol=0)


def test_transpose_of_tiles_above_48k_through_dynamic_shared_memory():
    """T = 128: two 64 KiB fp32 tiles, more than a block may declare statically; the scratch lives in the block's
    dynamic shared memory (an H200 block gets 227 KiB), which the kernel's shared size requests at launch."""
    x = torch.randn(128, 128, device="cuda")
    y = torch.full_like(x, float("nan"))
    kernel = K.transpose_tile[(1, )](x, y, T=128, num_warps=16)
    torch.cuda.synchronize()
    assert kernel.metadata.shared >= 128 * 1024
    torch.testing.assert_close(y, x.T.contiguous(), rtol=0, atol=0)
