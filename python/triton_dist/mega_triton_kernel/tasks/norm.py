"""Normalization family: ``rms_norm`` (``output = input * rsqrt(mean(input**2) + eps) * weight`` per row, fp32
math). One task per row block of ``ROWS`` rows (all of a row's columns: the mean needs the whole row); the
RoPE-and-KV-cache form ``qk_norm_rope_update_kvcache`` lives in :mod:`.qk_norm_rope`."""
from __future__ import annotations

import triton
import triton.language as tl

import triton_dist
from ..core.checks import check_tensor
from ..core.device import arg
from ..core.registry import register_task
from ..core.task import Op, Tile, region

__all__ = ["rms_norm_task"]


@triton_dist.jit
def rms_norm_task(args, tile, step, M: tl.constexpr, N: tl.constexpr, ROWS: tl.constexpr, BLOCK: tl.constexpr,
                  EPS: tl.constexpr, DT: tl.constexpr, WDT: tl.constexpr):
    """Rows ``tile * ROWS ...`` of ``args``: input ``[M, N]``, weight ``[N]``, output ``[M, N]``."""
    x_ptr = arg(args, 0, DT)
    w_ptr = arg(args, 1, WDT)
    o_ptr = arg(args, 2, DT)
    cols = tl.arange(0, BLOCK)
    for r in range(tile * ROWS, tl.minimum(tile * ROWS + ROWS, M)):
        ss = tl.zeros([BLOCK], dtype=tl.float32)
        for c0 in range(0, N, BLOCK):
            c = c0 + cols
            x = tl.load(x_ptr + r * N + c, mask=c < N, other=0.0).to(tl.float32)
            ss += x * x
        rstd = 1.0 / tl.sqrt(tl.sum(ss, axis=0) / N + EPS)
        for c0 in range(0, N, BLOCK):
            c = c0 + cols
            x = tl.load(x_ptr + r * N + c, mask=c < N, other=0.0).to(tl.float32)
            w = tl.load(w_ptr + c, mask=c < N, other=0.0).to(tl.float32)
            tl.store(o_ptr + r * N + c, (x * rstd * w).to(DT), mask=c < N)


@register_task("rms_norm", "Normalization")
def build_rms_norm(builder, layer_id, input, rms_weight, output, rms_eps: float = 1e-6) -> Op:
    import torch

    name = "make_rms_norm"
    dts = (torch.bfloat16, torch.float16, torch.float32)
    check_tensor(name, "input", input, dtype=dts)
    check_tensor(name, "output", output, dtype=input.dtype, shape=list(input.shape))
    N = input.shape[-1] if input.dim() else 0
    check_tensor(name, "rms_weight", rms_weight, dim=1, dtype=dts, shape=[N])
    if not isinstance(rms_eps, (int, float)) or isinstance(rms_eps, bool) or not rms_eps > 0:
        raise ValueError(f"{name}: rms_eps must be a positive number, got {rms_eps!r}")
    x2, o2 = input.reshape(-1, N), output.reshape(-1, N)
    M = x2.shape[0]
    rows = max(1, min(M, 8192 // max(N, 1)))
    tiles = []
    for t in range(triton.cdiv(M, rows)):
        r0, r1 = t * rows, min(M, (t + 1) * rows)
        tiles.append(Tile(reads=region(x2, slice(r0, r1)) + region(rms_weight),
                          writes=region(o2, slice(r0, r1)), cost=2 * (r1 - r0) * N * input.element_size()))
    return Op("Normalization", "rms_norm", layer_id, rms_norm_task, [x2, rms_weight, o2],
              dict(M=M, N=N, ROWS=rows, BLOCK=min(triton.next_power_of_2(N), 4096), EPS=float(rms_eps),
                   DT=input.dtype, WDT=rms_weight.dtype), tiles)
