"""GPU tier: the overlapped GEMMs (AG+GEMM, GEMM+RS, GEMM+AR), the Triton GEMM and TPMLP on real GPUs.

    torchrun --nproc_per_node 2 -m pytest -q test/python/gpu/test_gpu_overlap.py

Every rank runs the same tests in the same order (the ops are collective). Each fused result is compared with
torch's NCCL + cuBLAS path on the same inputs (bf16/fp16: small-integer inputs, so fp32 sums are exact and the only
difference is the final rounding; fp8: against a dequantised fp32 reference).
"""
from __future__ import annotations

import os

import pytest
import torch

pytestmark = pytest.mark.gpu

os.environ.setdefault("NVSHMEM_DISABLE_NVLS", "1")
os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
os.environ.setdefault("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1")
os.environ.setdefault("NVSHMEM_SYMMETRIC_SIZE", "8G")


def _init():
    import torch.distributed as dist

    import triton_dist.utils as tdu

    tdu.initialize_distributed()
    return dist.get_rank(), dist.get_world_size()


def _q(shape, dtype, seed):
    g = torch.Generator(device="cuda").manual_seed(seed)
    return (torch.randint(-4, 5, shape, device="cuda", generator=g).float() / 4).to(dtype)


def _assert_close(got, ref, what, rtol=2.0 ** -8):
    diff = (got.float() - ref.float()).abs()
    bad = diff > rtol * ref.float().abs() + 1e-6
    assert not bool(bad.any()), f"{what}: {int(bad.sum())} elements off, max err {diff.max().item()}"


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_gemm_matches_cublas(dtype):
    from triton_dist.kernels.gemm import matmul

    _init()
    for (M, N, K) in ((8192, 8192, 8192), (1000, 4104, 520), (64, 14336, 4096)):
        a, b = _q((M, K), dtype, M), _q((K, N), dtype, N)
        _assert_close(matmul(a, b), (a.float() @ b.float()), f"matmul {M}x{N}x{K}")
        _assert_close(matmul(a, b, autotune=False), (a.float() @ b.float()), f"matmul fixed {M}x{N}x{K}")


@pytest.mark.parametrize("method", ["sm", "ce"])
@pytest.mark.parametrize("m_loc,k,n", [(4096, 8192, 14336), (64, 4096, 7168), (1000, 1024, 1032)])
def test_ag_gemm(method, m_loc, k, n):
    import torch.distributed as dist

    from triton_dist.ops.overlap import ag_gemm, create_ag_gemm_context

    rank, W = _init()
    ctx = create_ag_gemm_context(m_loc, k, torch.bfloat16)
    try:
        for call in range(3):  # epochs: repeated calls on one context, fresh data each time
            a = _q((m_loc, k), torch.bfloat16, 100 * call + rank)
            b = _q((k, n), torch.bfloat16, 7 + call)
            c = ag_gemm(a, b, ctx, method=method)
            ref = ag_gemm(a, b, ctx, method="torch")
            torch.cuda.synchronize()
            _assert_close(c, ref, f"ag_gemm {method} call {call}", rtol=2.0 ** -7)
        dist.barrier()
    finally:
        ctx.close()


def test_ag_gemm_fp8():
    from triton_dist.ops.overlap import ag_gemm, create_ag_gemm_context

    rank, W = _init()
    f8 = torch.float8_e4m3fn
    ctx = create_ag_gemm_context(512, 1024, f8)
    try:
        for method in ("sm", "ce"):
            a = _q((512, 1024), torch.float32, rank).to(f8)
            b = _q((1024, 2048), torch.float32, 5).to(f8)
            c = ag_gemm(a, b, ctx, scale_a=0.5, scale_b=torch.tensor([2.0], device="cuda"), method=method)
            ref = ag_gemm(a, b, ctx, scale_a=0.5, scale_b=2.0, method="torch")
            _assert_close(c, ref, f"fp8 {method}", rtol=2.0 ** -7)
    finally:
        ctx.close()


@pytest.mark.parametrize("m,k_loc,n", [(8192, 7168, 8192), (8192, 3584, 4096), (256, 7168, 8192), (1000, 520, 1032)])
def test_gemm_rs(m, k_loc, n):
    from triton_dist.ops.overlap import create_gemm_rs_context, gemm_rs

    rank, W = _init()
    m = m - m % W
    ctx = create_gemm_rs_context(m, n, torch.bfloat16)
    try:
        for call in range(3):
            a = _q((m, k_loc), torch.bfloat16, 10 * call + rank)
            b = _q((k_loc, n), torch.bfloat16, 20 * call + rank)
            out = gemm_rs(a, b, ctx, method="fused")
            ref = gemm_rs(a, b, ctx, method="torch")
            torch.cuda.synchronize()
            _assert_close(out, ref, f"gemm_rs call {call}", rtol=2.0 ** -7)
    finally:
        ctx.close()


@pytest.mark.parametrize("m", [1, 16, 128, 512])
def test_gemm_ar(m):
    from triton_dist.ops.overlap import create_gemm_ar_context, gemm_ar

    rank, W = _init()
    k_loc, n = 7168, 8192
    ctx = create_gemm_ar_context(512, n, torch.bfloat16)
    try:
        outs = []
        for call in range(3):
            a = _q((m, k_loc), torch.bfloat16, 30 * call + rank)
            b = _q((k_loc, n), torch.bfloat16, 40 * call + rank)
            out = gemm_ar(a, b, ctx, method="fused")
            ref = gemm_ar(a, b, ctx, method="torch")
            torch.cuda.synchronize()
            _assert_close(out, ref, f"gemm_ar m={m} call {call}", rtol=2.0 ** -7)
            outs.append(out)
        # identical on every rank (fp32 sum in rank order)
        import torch.distributed as dist

        gathered = [torch.empty_like(outs[-1]) for _ in range(W)]
        dist.all_gather(gathered, outs[-1])
        assert all(torch.equal(g, gathered[0]) for g in gathered)
    finally:
        ctx.close()


def test_tp_mlp_matches_single_device_reference():
    from triton_dist.layers import TPMLP, mlp_reference

    rank, W = _init()
    H, I, T = 4096, 14336, 2048
    g = torch.Generator(device="cuda").manual_seed(0)
    w_gate = (torch.randn(H, I, device="cuda", generator=g) / 64).to(torch.bfloat16)
    w_up = (torch.randn(H, I, device="cuda", generator=g) / 64).to(torch.bfloat16)
    w_down = (torch.randn(I, H, device="cuda", generator=g) / 64).to(torch.bfloat16)
    x = torch.randn(T, H, device="cuda", generator=g).to(torch.bfloat16)
    ref = mlp_reference(x, w_gate, w_up, w_down)
    t_loc = T // W
    for method in ("fused", "torch"):
        mlp = TPMLP(H, I, max_tokens=T, method=method).load_full_weights(w_gate, w_up, w_down)
        try:
            y = mlp(x[rank * t_loc:(rank + 1) * t_loc])
            torch.cuda.synchronize()
            r = ref[rank * t_loc:(rank + 1) * t_loc]
            err = (y.float() - r).abs().max().item()
            assert err <= 0.02 * r.abs().max().item() + 1e-3, (method, err)
        finally:
            mlp.close()


def test_validation_before_launch():
    from triton_dist.ops.overlap import ag_gemm, create_ag_gemm_context

    _init()
    ctx = create_ag_gemm_context(128, 256, torch.bfloat16)
    try:
        a = _q((128, 256), torch.bfloat16, 0)
        with pytest.raises(ValueError, match="inner dimensions"):
            ag_gemm(a, _q((128, 64), torch.bfloat16, 1), ctx)
        with pytest.raises(ValueError, match="max_m_per_rank"):
            ag_gemm(_q((256, 256), torch.bfloat16, 0), _q((256, 64), torch.bfloat16, 1), ctx)
        with pytest.raises(ValueError, match="the context.s buffers are on"):
            ag_gemm(a.cpu(), _q((256, 64), torch.bfloat16, 1).cpu(), ctx)
        c = ag_gemm(a, _q((256, 64), torch.bfloat16, 1), ctx, method="sm")  # still usable
        assert c.shape == (128 * ctx.world_size, 64)
    finally:
        ctx.close()
