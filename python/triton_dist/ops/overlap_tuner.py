"""The runtime tuner of the overlapped GEMMs: GEMM+RS ``ce`` runs this rank's own rows as one launch of our GEMM
(:func:`~triton_dist.kernels.gemm_rs.rs_own_gemm_kernel`, autotuned per shape) that waits for the peers' pieces in
each tile's epilogue. Tuning times launches and synchronizes, so it runs once per context and shape, eagerly, on
scratch flags; a first call of a shape inside a CUDA-graph capture launches the deterministic tiling
(:func:`~triton_dist.kernels.gemm_config.pick_config`) instead: no tuning, nothing allocated.
"""
from __future__ import annotations


import torch

from ..kernels import gemm_config as _gcfg
from ..kernels import gemm_rs as _rsk
from .overlap_context import _capturing


#: most row pieces per push that gemm_rs ``ce`` makes (``pieces``)
CE_PIECES_MAX = 4


def _rs_own_gemm_launcher(ctx, own, b, stage, cap, pieces, tuned: bool = True):
    """``(tuning key, launch(out, flags, count))`` of :func:`~triton_dist.kernels.gemm_rs.rs_own_gemm_kernel` for
    this rank's own rows ``own``: autotuned per ``(rows, N, K)``, or (``tuned=False``) with the deterministic tiling
    of :func:`~triton_dist.kernels.gemm_config.pick_config` (no tuning)."""
    rows, K = own.shape
    N = b.shape[1]
    W = ctx.world_size
    # tensor descriptors need 16-byte aligned bases (unit column strides and 16-byte rows were checked before any
    # launch, _operand_checks); else the pointer path
    tma = own.data_ptr() % 16 == 0 and b.data_ptr() % 16 == 0 and ctx._use_tma()
    kern = _rsk.rs_own_gemm_autotuned() if tuned else _rsk.rs_own_gemm_kernel
    sms = ctx.num_sms
    fixed = {}
    if not tuned:
        cfg = _gcfg.pick_config(rows, N, K, on_gpu=True, elem_bytes=own.element_size(), cc=getattr(ctx, "cc", 0) or 90)
        tma = tma and not cfg.pointer_loads
        fixed = {**cfg.meta(), **cfg.launch()}

    def grid(meta):
        return (max(1, min(sms, -(-rows // meta["BLOCK_M"]) * -(-N // meta["BLOCK_N"]))), )

    def launch(o, fl, count):
        kern[grid](own, b, o, stage, fl, count, rows, N, K, own.stride(0), b.stride(0), b.stride(1), o.stride(0), cap,
                   ctx.rank, WORLD=W, PIECES=pieces, FLAG_STRIDE=CE_PIECES_MAX, NUM_SMS=sms, USE_TMA=tma, **fixed)

    return (rows, N, K, str(own.dtype), tma), launch


def _rs_ce_tune_with(ctx, key, launch, like):
    """Tune the ``ce`` own-rows GEMM of ``key`` on scratch flags (all raised; restored after every benchmark launch)
    and a scratch output shaped like ``like``, once per context and shape. Eager calls only (the callers check)."""
    if key in ctx._ce_tuned:
        return
    launch(torch.empty_like(like), torch.ones(ctx.world_size * CE_PIECES_MAX, dtype=torch.int64, device=ctx.device),
           torch.zeros(1, dtype=torch.int64, device=ctx.device))
    ctx._ce_tuned.add(key)


def _rs_ce_tune(ctx, a, b):
    """Tune the ``ce`` own-rows GEMM for ``a @ b`` now (an eager ``auto`` call that runs another method, where a
    captured call of the same shape would run ``ce``)."""
    W, r = ctx.world_size, ctx.rank
    rows = a.shape[0] // W
    own = a[r * rows:(r + 1) * rows]
    key, launch = _rs_own_gemm_launcher(ctx, own, b, ctx.ce_stage_peers[r], (ctx.max_m // W) * ctx.n, 1)
    _rs_ce_tune_with(ctx, key, launch, torch.empty((rows, b.shape[1]), dtype=a.dtype, device=a.device))


def _rs_own_gemm(ctx, own, b, out, stage, flags, cap, pieces):
    """Launch :func:`~triton_dist.kernels.gemm_rs.rs_own_gemm_kernel`, autotuned per shape: the first call of a
    shape tunes on scratch flags (all raised, restored after every benchmark launch) and a scratch output, so the
    real launch runs once, with the best tiling, on the real flags. A first call of a shape inside a CUDA-graph
    capture launches the deterministic tiling instead (tuning times launches and synchronizes, which a capture
    forbids; a later eager call tunes the shape, and captures after it use the tuned tiling)."""
    key, launch = _rs_own_gemm_launcher(ctx, own, b, stage, cap, pieces)
    if key not in ctx._ce_tuned and _capturing():
        _rs_own_gemm_launcher(ctx, own, b, stage, cap, pieces, tuned=False)[1](out, flags, ctx.ce_count)
        return
    _rs_ce_tune_with(ctx, key, launch, out)
    launch(out, flags, ctx.ce_count)


__all__ = ["CE_PIECES_MAX"]  # the rest is the overlap ops' internals (ops.gemm_reduce_scatter)
