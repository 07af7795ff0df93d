"""GEMM + AllReduce: ``gemm_ar(a, b, ctx)`` = ``all_reduce(a @ b)``, overlapped (decode sizes), and its context
(:func:`create_gemm_ar_context`). The shared context base and checks: :mod:`.overlap_context`; the public facade:
:mod:`triton_dist.ops.overlap`.
"""
from __future__ import annotations

import dataclasses
from typing import Optional

import torch

from ..kernels import common as _common
from ..kernels import gemm_ar as _ark
from ..runtime import torch_collectives as _torch_coll
from .context import capacity_arg, check_ctx, traced_result
from .overlap_context import TAG_RANGE, _PartialsContext, _partials_checks, _run_partials, _tiles


class GemmARContext(_PartialsContext):
    """Buffers for :func:`gemm_ar` with up to ``max_m`` rows and exactly ``n`` output columns: the fused kernel's fp32
    staging and tile signals, the ``ll`` exchange's flagged words (symmetric int64 ``[2, world, max_m * n]``, zero
    between calls), the split-K workspace (local: ``SPLIT_K_MAX * min(max_m, SPLIT_K_MAX_M) * n`` fp32, tile
    counters and finisher flags), and (GPU, method ``one_shot``) an all-reduce context of ``max_m * n`` elements."""

    kind = "gemm_ar"

    def __init__(self, max_m: int, n: int, dtype: torch.dtype, sim_config=None, **kw):
        super().__init__(max_m, n, dtype, sim_config, **kw)
        self._setup_common()
        bm, bn = self._min_block()
        self.ar_ctx = None
        if self.on_gpu:
            from .collectives import create_allreduce_ctx

            self.ar_ctx = create_allreduce_ctx(max_m * n, dtype, one_shot_max_numel=max_m * n,
                                               methods=("one_shot", ))
        # method "ll": the peers' fp32 partials arrive as flagged words in slot [epoch % 2, src] (kernels.gemm_ar);
        # zeroed here, before _alloc_partials' barrier, and left zero by every call (each reader clears its words)
        self.words = self._utils.nvshmem_create_tensor((2 * self.world_size * max_m * n, ), torch.int64)
        self.words.zero_()
        self._symmetric.append(self.words)
        self._alloc_partials(max_m * n, _tiles(max_m, n, bm, bn))
        split_rows = min(max_m, _ark.SPLIT_K_MAX_M)
        self.split_ws = torch.empty((_ark.SPLIT_K_MAX * split_rows * n, ), dtype=torch.float32, device=self.device)
        self.split_cnt = torch.zeros((self.max_tiles, ), dtype=torch.int32, device=self.device)
        self.split_fin = torch.zeros((self.max_tiles * _ark.SPLIT_K_MAX, ), dtype=torch.int32, device=self.device)

    def _min_block(self):
        if self.on_gpu:
            return 16, 64
        return self.sim_config.BLOCK_M, self.sim_config.BLOCK_N

    def _pick_config(self, M, N, K, elem_bytes):
        return _ark.pick_ar_config(M, N, K, num_sms=self.num_sms, on_gpu=self.on_gpu, sim_config=self.sim_config)

    def split_for(self, cfg, M: int, N: int, K: int) -> int:
        """The split-K of a call with tiling ``cfg``: its ``split_k``, at most the K blocks there are and what the
        workspace holds for ``M`` rows (1 when ``M`` exceeds :data:`~triton_dist.kernels.gemm_ar.SPLIT_K_MAX_M`)."""
        if cfg.split_k > _ark.SPLIT_K_MAX:
            raise ValueError(f"gemm_ar: tiling {cfg} splits K {cfg.split_k} ways; at most "
                             f"{_ark.SPLIT_K_MAX} (kernels.gemm_ar.SPLIT_K_MAX)")
        fits = self.split_ws.numel() // max(1, M * N)
        return max(1, min(cfg.split_k, -(-K // cfg.BLOCK_K), fits))

    def close(self) -> None:
        if self.ar_ctx is not None:
            self.ar_ctx.close()
        super().close()


def create_gemm_ar_context(max_m: Optional[int] = None, n: Optional[int] = None, dtype: torch.dtype = torch.bfloat16,
                           *, max_M: Optional[int] = None, **kw) -> GemmARContext:
    """Collective: context for :func:`gemm_ar` (bf16 / fp16, up to ``max_m`` rows, ``n`` columns). Symmetric memory:
    ``2 * world * max_m * n`` fp32 (``fused`` staging) + signals, ``2 * world * max_m * n`` int64 words (``ll``: 16
    bytes per output element and rank, e.g. 32 MiB at max_m 128, n 8192, 2 ranks), and on GPU ``2 * world * max_m *
    n`` elements of ``dtype`` for the one-shot all-reduce; local: the split-K workspace (``8 * min(max_m, 128) * n``
    fp32). Meant for small-M (decode) shapes."""
    return GemmARContext(capacity_arg("create_gemm_ar_context", "max_m", max_m, {"max_M": max_M}), n, dtype, **kw)


GEMM_AR_METHODS = ("auto", "fused", "ll", "one_shot", "torch")


def gemm_ar(a: torch.Tensor, b: torch.Tensor, ctx: GemmARContext, out: Optional[torch.Tensor] = None,
            method: Optional[str] = None) -> torch.Tensor:
    """``all_reduce(a @ b)``: ``a`` ``[M, K_loc]``, ``b`` ``[K_loc, N]``; returns ``[M, N]``, identical on every rank.
    Stream-ordered, no host synchronization (CUDA-graph capturable). ``method``: ``auto`` (measured table) /
    ``fused`` (one persistent kernel, :func:`~triton_dist.kernels.gemm_ar.gemm_ar_kernel`: each tile's K blocks
    split over up to 8 programs so that every SM streams weights, the splits summed in a fixed order, each tile's
    fp32 partial pushed to every peer as soon as it is complete, the ranks' partials summed in rank order and
    rounded once: deterministic and bit-identical on every rank) / ``ll`` (the same kernel, tiling and split-K, and
    the same sums and results, with the partials sent as flagged words: ``dl.store_flagged`` / ``dl.load_flagged``,
    no fence and no tile signal; ``auto`` picks it only where the measured table names it) / ``one_shot`` (GPU:
    cuBLAS ``torch.matmul`` then this library's one-shot all-reduce of the bf16/fp16 product, fp32 sum, one rounding
    of the sum) / ``torch`` (``torch.matmul`` + NCCL all_reduce)."""
    op = "gemm_ar"
    check_ctx(op, ctx, GemmARContext, "create_gemm_ar_context")
    method = ctx._call_method(method)  # None: the context's method; "nccl": "torch" (docs/ops.md)
    if torch.compiler.is_compiling():  # traced: the registered op (docs/ops.md, "torch.compile")
        return traced_result(torch.ops.triton_dist.gemm_ar(a, b, ctx.handle, method), out)
    _partials_checks(op, a, b, ctx, method, GEMM_AR_METHODS)
    if method == "one_shot" and ctx.ar_ctx is None:
        raise ValueError(f"{op}: method='one_shot' (cuBLAS + one-shot all-reduce) needs GPUs; accepted here: auto, "
                         f"fused, ll, torch")
    M = a.shape[0]
    if M > ctx.max_m:
        raise ValueError(f"{op}: a has M={M} rows, the context holds at most max_m={ctx.max_m}")
    return _run_partials(op, ctx, a, b, out, method, False,
                         {"torch": _gemm_ar_torch, "one_shot": _gemm_ar_one_shot, "fused": _gemm_ar_fused,
                          "ll": _gemm_ar_ll}, None)


def _gemm_ar_fused(a, b, ctx, out, ll: bool = False):
    """Method ``fused`` (``ll``: method ``ll``) of :func:`gemm_ar`: one launch of
    :func:`~triton_dist.kernels.gemm_ar.gemm_ar_kernel` with the context's tiling for this shape and its split-K
    (:meth:`GemmARContext.split_for`); ``ll`` sets ``LL`` and passes the ``ll`` size tag."""
    op = "gemm_ar"
    M, K = a.shape
    N = b.shape[1]
    cfg = ctx._cfg(M, N, K, a.dtype.itemsize)
    split = ctx.split_for(cfg, M, N, K)
    tiles = ctx._signal_tiles(op, cfg, M, N)
    tma = ctx._use_tma() and not cfg.pointer_loads
    grid = (max(1, min(ctx.num_sms, tiles * split)), )
    meta = dataclasses.replace(cfg, split_k=split).meta(with_flatten=False, with_split=True)
    tag = _common.ll_size_tag(M * N) if ll else (M * N) % TAG_RANGE
    _ark.gemm_ar_kernel[grid](a, b, out, ctx.stage, ctx.sig, ctx.words, ctx.counter, ctx.split_ws, ctx.split_cnt,
                              ctx.split_fin, M, N, K, a.stride(0), b.stride(0), b.stride(1), out.stride(0),
                              out.stride(1), ctx.cap, ctx.max_tiles, tag, ctx.rank, WORLD=ctx.world_size, **meta,
                              NUM_SMS=grid[0], USE_TMA=tma, LL=ll, **cfg.launch(), **ctx._coop())
    return out


def _gemm_ar_ll(a, b, ctx, out):
    """Method ``ll`` of :func:`gemm_ar`: :func:`_gemm_ar_fused` with the flagged-word exchange."""
    return _gemm_ar_fused(a, b, ctx, out, ll=True)


def _gemm_ar_torch(a, b, ctx, out):
    torch.matmul(a, b, out=out)
    _torch_coll.all_reduce(out, group=ctx.group)
    return out


def _gemm_ar_one_shot(a, b, ctx, out):
    from .collectives import all_reduce

    part = torch.matmul(a, b)
    return all_reduce(part, ctx.ar_ctx, out=out, method="one_shot")


__all__ = ["GemmARContext", "create_gemm_ar_context", "gemm_ar", "GEMM_AR_METHODS"]
