"""The GEMM op: ``matmul(a, b)`` = ``(a @ b) * scale`` on one device with this library's Triton GEMM
(:mod:`triton_dist.kernels.gemm`), and :func:`check_operands`, the host checks every GEMM-shaped op (this one and the
overlapped GEMMs) runs before any launch.

On a GPU without ``config`` ("auto") the launch comes from the measured table
(:func:`~triton_dist.kernels.gemm_table.select_matmul_launch`: an exact-shape entry, else the decode rule, else the
autotuner). Inside a CUDA-graph capture a shape the autotuner has not timed yet runs the deterministic tiling
(:func:`~triton_dist.kernels.gemm_config.pick_config`) instead of tuning: tuning times launches and synchronizes,
which a capture forbids.
"""
from __future__ import annotations

import triton

from ..kernels.gemm import gemm_kernel
from ..kernels.gemm_config import (GemmVariant, TileConfig, autotuned, ensure_tma_allocator, launch_autotuned,
                                   launch_split_k, launch_variant, num_sms, pick_config, tma_store_ok,
                                   use_tma_for)
from ..kernels.gemm_table import device_name_of, select_matmul_launch
from ..runtime.dtypes import FP8_DTYPES, HALF_DTYPES, dtype_names
from .context import capturing as _capturing  # the ops' one capture predicate, a module global the CPU tests patch
from .context import check_eager_only, traced_result


def check_operands(op: str, a, b, dtypes=None) -> None:
    """Host checks of GEMM operands ``a [M, K] @ b [K, N]`` before any launch: 2-D tensors of one dtype among
    ``dtypes`` (default bf16, fp16, fp8 e4m3 / e5m2), matching inner dimensions, one device, row-major with unit
    column stride, ``K`` and ``N`` multiples of 8 and 16-byte aligned rows (tensor descriptors). Raises ValueError
    naming ``op``, the bad value and what is accepted."""
    import torch

    if dtypes is None:
        dtypes = HALF_DTYPES + FP8_DTYPES
    for name, t in (("a", a), ("b", b)):
        if not isinstance(t, torch.Tensor):
            raise ValueError(f"{op}: {name} must be a torch.Tensor, got {type(t).__name__}")
        if t.dim() != 2:
            raise ValueError(f"{op}: {name} must be 2-D, got shape {tuple(t.shape)}")
        if t.dtype not in dtypes:
            raise ValueError(f"{op}: {name}.dtype={t.dtype} is not supported; accepted: {dtype_names(dtypes)}")
    if a.dtype != b.dtype:
        raise ValueError(f"{op}: a.dtype={a.dtype} and b.dtype={b.dtype} differ")
    if a.shape[1] != b.shape[0]:
        raise ValueError(f"{op}: inner dimensions differ: a is {tuple(a.shape)}, b is {tuple(b.shape)}")
    if a.device != b.device:
        raise ValueError(f"{op}: a is on {a.device}, b on {b.device}")
    if a.stride(1) != 1 or b.stride(1) != 1:
        raise ValueError(f"{op}: a and b must be row-major with unit column stride (call .contiguous())")
    if a.shape[1] % 8 or b.shape[1] % 8:
        raise ValueError(f"{op}: K={a.shape[1]} and N={b.shape[1]} must be multiples of 8 (16-byte rows for TMA)")
    if a.stride(0) % 8 or b.stride(0) % 8:
        raise ValueError(f"{op}: row strides a.stride(0)={a.stride(0)}, b.stride(0)={b.stride(0)} must be multiples "
                         f"of 8 elements (16-byte aligned rows for TMA)")


def matmul(a, b, out=None, scale=None, config: TileConfig = None, autotune: bool = True, table: bool = True):
    """``out = (a @ b) * scale`` with :func:`gemm_kernel` (a: [M, K], b: [K, N], same dtype among bf16 / fp16 /
    fp8 e4m3 / e5m2; fp8 gives bf16 unless ``out`` is given). On GPU without ``config`` ("auto"): the measured
    table's entry for this device, dtype and exact shape (:func:`select_matmul_launch`; ``table=False`` skips it),
    else for ``M <= SPLIT_K_MAX_M`` rows the decode rule (:func:`pick_decode_config`: small tiles, split-K over the
    SMs through :func:`gemm_split_k_kernel`), else the autotuned kernel (inside a CUDA-graph capture, for a shape
    it has not tuned yet in this process: :func:`pick_config`, no tuning); ``autotune=False``: :func:`pick_config`;
    under the interpreter :data:`SIM_CONFIG`. A ``config`` with ``split_k > 1`` runs the split-K kernel (a cached
    workspace per device and stream: :func:`split_k_workspace`), one with ``pointer_loads`` masked pointer loads,
    one with ``tma_store`` the TMA-store epilogue (where ``out`` can be a descriptor's base; else pointer stores).
    Every launch is deterministic (split-K partials are summed in a fixed order). Raises ValueError on bad shapes /
    dtypes (before any launch), :class:`GemmTableError` on a malformed table. Under torch.compile the call is the
    registered ``torch.ops.triton_dist.matmul`` (``config`` is refused there; ``out`` receives a copy)."""
    import torch

    if torch.compiler.is_compiling():
        check_eager_only("matmul", config=config)
        return traced_result(torch.ops.triton_dist.matmul(a, b, scale, autotune, table), out)
    check_operands("matmul", a, b)
    M, K = a.shape
    N = b.shape[1]
    if out is None:
        out_dtype = torch.bfloat16 if a.dtype.itemsize == 1 else a.dtype
        out = torch.empty((M, N), dtype=out_dtype, device=a.device)
    if out.shape != (M, N):
        raise ValueError(f"matmul: out has shape {tuple(out.shape)}, expected {(M, N)}")
    if M == 0 or N == 0:
        return out
    use_tma = use_tma_for(a.device) and a.stride(1) == 1 and b.stride(1) == 1 and \
        not (config is not None and config.pointer_loads)
    if use_tma:
        ensure_tma_allocator()
    sms = num_sms(a.device)
    on_gpu = a.device.type == "cuda"
    kind, picked = select_matmul_launch(M, N, K, a.dtype, device_name_of(a.device.index) if on_gpu else None,
                                        use_tma=use_tma, num_sms=sms, config=config, autotune=autotune,
                                        table=table, tma_store_ok=on_gpu and tma_store_ok(out))
    if kind == "table":
        launch_variant(a, b, out, picked, scale=scale, sms=sms)
        return out
    if kind == "decode":
        return launch_variant(a, b, out, GemmVariant(picked), scale=scale, sms=sms)
    if kind == "autotune" and (not _capturing() or autotuned(a, b, out, scale=scale, sms=sms, use_tma=use_tma)):
        return launch_autotuned(a, b, out, scale=scale, sms=sms, use_tma=use_tma)
    # kind "config", or "autotune" for a first call of its shape inside a capture: the deterministic tiling
    cfg = config or pick_config(M, N, K, on_gpu=on_gpu, elem_bytes=a.dtype.itemsize)
    if cfg.split_k > 1:
        return launch_split_k(a, b, out, cfg, scale=scale, sms=sms, use_tma=use_tma)
    grid = (min(sms, triton.cdiv(M, cfg.BLOCK_M) * triton.cdiv(N, cfg.BLOCK_N)), )
    gemm_kernel[grid](a, b, out, out if scale is None else scale, M, N, K, a.stride(0), a.stride(1), b.stride(0),
                      b.stride(1), out.stride(0), out.stride(1), **cfg.meta(), NUM_SMS=sms, USE_TMA=use_tma,
                      HAS_SCALE=scale is not None, TMA_STORE=cfg.tma_store and use_tma and tma_store_ok(out),
                      **cfg.launch())
    return out


__all__ = ["matmul", "check_operands"]
