"""Device code of the MoE routing layout on one device: group each token's top-k copies by expert (route), and sum
the experts' outputs back per token with the top-k weights (combine). The host side is
:mod:`triton_dist.ops.moe_layout`; the layout is described in docs/moe.md.

A *pair* is one (token ``t``, slot ``j``) of ``topk_idx [T, k]``, flattened as ``p = t * k + j``. Routing is a
stable counting sort of the pairs by expert, in three launches that never read anything on the host:

1. :func:`route_count_kernel` (one program per ``BLOCK`` pairs): how many pairs of the block go to each expert
   (``counts [E + 1, blocks]``, expert-major; the last row counts pairs whose expert id is out of range).
2. :func:`route_block_scan_kernel` (one program per expert, in parallel): ``base[e, b]`` = the pairs of expert ``e``
   in the blocks before ``b``, and the expert's total; then :func:`route_expert_scan_kernel` (one program over the
   ``E + 1`` totals): ``starts[e]`` = the first row of expert ``e``, ``offsets[e]`` = its cumulative end row.
   Out-of-range pairs get rows after every expert's (``[offsets[E - 1], T * k)``): they exist, they are never an
   expert's rows, and combine leaves them out.
3. :func:`route_scatter_kernel` (grid ``blocks x column chunks``): each pair's row is ``starts[e] + base[e, b]`` plus
   the number of earlier pairs of its block with the same expert, so within an expert the rows follow the pairs'
   order (token order, then slot): the same layout every run. It writes ``dest_rows[p]`` and copies ``x[t]`` there.

:func:`combine_kernel` (grid ``tokens x column chunks``): ``out[t] = sum_j w[t, j] * expert_out[dest_rows[t, j]]``
over the in-range slots, in slot order, accumulated in fp32: deterministic.
"""
from __future__ import annotations

import triton.language as tl

import triton_dist

#: columns per fp8 scale of the quantizing route (the grouped GEMM's ``SCALE_BLOCK``: its block scales read these)
QUANT_GROUP = tl.constexpr(128)
#: e4m3's largest finite value
FP8_E4M3_MAX = tl.constexpr(448.0)


@triton_dist.jit
def _expert_of(ids_ptr, p, P, E):
    """Expert id of pairs ``p`` as int32 (``E`` for an id out of ``[0, E)`` -- compared in the ids' own width, so a
    wide id never wraps into range -- and for ``p >= P``)."""
    e = tl.load(ids_ptr + p, mask=p < P, other=E)
    return tl.where((e >= 0) & (e < E) & (p < P), e, E).to(tl.int32)


@triton_dist.jit
def quantize_groups_fp8(vals, BLOCK: tl.constexpr, BLOCK_H: tl.constexpr):
    """``(q, scale)`` of a ``[BLOCK, BLOCK_H]`` tile (``BLOCK_H`` a multiple of :data:`QUANT_GROUP`): ``scale [BLOCK,
    BLOCK_H / QUANT_GROUP]`` fp32 = ``max(|v|) / 448`` over each group of columns (1e-12 / 448 for an all-zero group),
    ``q = v / scale`` in fp32, to be stored as e4m3 (the store's conversion rounds to nearest even, saturating)."""
    GROUPS: tl.constexpr = BLOCK_H // QUANT_GROUP
    v = vals.to(tl.float32)
    amax = tl.max(tl.reshape(tl.abs(v), (BLOCK, GROUPS, QUANT_GROUP)), axis=2)
    scale = tl.maximum(amax, 1e-12) / FP8_E4M3_MAX
    q = tl.reshape(tl.reshape(v, (BLOCK, GROUPS, QUANT_GROUP)) / scale[:, :, None], (BLOCK, BLOCK_H))
    return q, scale


@triton_dist.jit
def route_count_kernel(ids_ptr, counts_ptr, P, E, NB, BLOCK: tl.constexpr, EXPERTS_CHUNK: tl.constexpr):
    """``counts[e, b]`` (int32 ``[E + 1, NB]``, expert-major) = pairs of block ``b`` (pairs ``[b * BLOCK, (b + 1) *
    BLOCK)`` of ``P``) routed to expert ``e``; row ``E``: out-of-range ids."""
    b = tl.program_id(0)
    p = b * BLOCK + tl.arange(0, BLOCK)
    e = _expert_of(ids_ptr, p, P, E)
    for c0 in range(0, E + 1, EXPERTS_CHUNK):
        cols = c0 + tl.arange(0, EXPERTS_CHUNK)
        hits = (e[:, None] == cols[None, :]) & (p < P)[:, None]
        tl.store(counts_ptr + cols * NB + b, tl.sum(hits.to(tl.int32), axis=0), mask=cols < E + 1)


@triton_dist.jit
def route_block_scan_kernel(counts_ptr, base_ptr, totals_ptr, NB, BLOCKS_CHUNK: tl.constexpr):
    """Program ``e`` (one per expert, and one for the out-of-range row ``E``): ``base[e, b]`` = pairs of expert ``e``
    in the blocks before ``b`` (int32 ``[E + 1, NB]``), ``totals[e]`` = all of them."""
    e = tl.program_id(0)
    run = 0
    for b0 in range(0, NB, BLOCKS_CHUNK):
        b = b0 + tl.arange(0, BLOCKS_CHUNK)
        m = b < NB
        c = tl.load(counts_ptr + e * NB + b, mask=m, other=0)
        tl.store(base_ptr + e * NB + b, run + tl.cumsum(c, axis=0) - c, mask=m)
        run += tl.sum(c, axis=0)
    tl.store(totals_ptr + e, run)


@triton_dist.jit
def route_expert_scan_kernel(totals_ptr, starts_ptr, offs_ptr, E, EXPERTS_CHUNK: tl.constexpr):
    """One program: ``starts[e]`` = pairs of the experts before ``e`` (``e`` in ``[0, E]``: the out-of-range pairs
    start after every expert's), ``offs[e]`` = ``starts[e] + totals[e]`` for ``e < E``."""
    run = 0
    for e0 in range(0, E + 1, EXPERTS_CHUNK):
        e = e0 + tl.arange(0, EXPERTS_CHUNK)
        m = e < E + 1
        t = tl.load(totals_ptr + e, mask=m, other=0)
        first = run + tl.cumsum(t, axis=0) - t
        tl.store(starts_ptr + e, first, mask=m)
        tl.store(offs_ptr + e, first + t, mask=e < E)
        run += tl.sum(t, axis=0)


@triton_dist.jit
def route_scatter_kernel(x_ptr, ids_ptr, base_ptr, starts_ptr, tokens_ptr, dest_ptr, scales_ptr, P, TOPK, E, NB, H,
                         stride_x, stride_tok, stride_scales, BLOCK: tl.constexpr, BLOCK_H: tl.constexpr,
                         QUANT_FP8: tl.constexpr = False, ROUTED_ONLY: tl.constexpr = False):
    """Program ``(b, h)``: the rows of block ``b``'s pairs (stable within each expert), stored to ``dest_rows`` by
    the ``h == 0`` programs, and columns ``[h * BLOCK_H, +BLOCK_H)`` of each pair's token copied to its row.
    ``ROUTED_ONLY``: only the pairs whose id is in range are copied (the others still get their row in
    ``dest_rows``, after every expert's, but nothing is read or stored for them): the expert-parallel ``normal``
    dispatch routes a pair list of which most pairs belong to other ranks or to no token.

    ``QUANT_FP8`` (``BLOCK_H`` and ``H`` multiples of :data:`QUANT_GROUP`): the row is stored as fp8 e4m3 with one
    fp32 scale per ``QUANT_GROUP`` columns, ``scale = max(|x|) / 448`` over the group (448: e4m3's largest finite
    value; an all-zero group gets the scale of 1e-12 / 448 and zeros), ``q = x / scale`` rounded to e4m3, so
    ``x ~ q * scale``; the scales go to ``scales[row, column // QUANT_GROUP]``."""
    b = tl.program_id(0)
    h = tl.program_id(1)
    i = tl.arange(0, BLOCK)
    p = b * BLOCK + i
    valid = p < P
    e = _expert_of(ids_ptr, p, P, E)
    earlier = (e[:, None] == e[None, :]) & (i[None, :] < i[:, None]) & valid[None, :]
    rank = tl.sum(earlier.to(tl.int32), axis=1)
    dest = tl.load(starts_ptr + e, mask=valid, other=0) + tl.load(base_ptr + e * NB + b, mask=valid, other=0) + rank
    if h == 0:
        tl.store(dest_ptr + p, dest, mask=valid)
    if ROUTED_ONLY:
        valid = valid & (e < E)
    cols = h * BLOCK_H + tl.arange(0, BLOCK_H)
    m = valid[:, None] & (cols < H)[None, :]
    t = (p // TOPK).to(tl.int64)
    row = dest.to(tl.int64)
    vals = tl.load(x_ptr + t[:, None] * stride_x + cols[None, :], mask=m, other=0.0)
    if QUANT_FP8:
        q, scale = quantize_groups_fp8(vals, BLOCK, BLOCK_H)
        tl.store(tokens_ptr + row[:, None] * stride_tok + cols[None, :], q.to(tokens_ptr.dtype.element_ty), mask=m)
        g = h * (BLOCK_H // QUANT_GROUP) + tl.arange(0, BLOCK_H // QUANT_GROUP)
        tl.store(scales_ptr + row[:, None] * stride_scales + g[None, :], scale,
                 mask=valid[:, None] & (g * QUANT_GROUP < H)[None, :])
    else:
        tl.store(tokens_ptr + row[:, None] * stride_tok + cols[None, :], vals, mask=m)


@triton_dist.jit
def combine_kernel(eo_ptr, dest_ptr, ids_ptr, w_ptr, out_ptr, ROWS, TOPK, E, H, stride_eo, stride_w, stride_out,
                   BLOCK_H: tl.constexpr):
    """Program ``(t, h)``: ``out[t, cols] = sum_j w[t, j] * expert_out[dest[t, j], cols]`` over the slots whose
    expert id is in range (and whose row is one of ``expert_out``'s ``ROWS``: a routing from elsewhere can never make
    it read outside), ``j`` in order, fp32 accumulation, stored in ``out``'s dtype."""
    t = tl.program_id(0)
    h = tl.program_id(1)
    cols = h * BLOCK_H + tl.arange(0, BLOCK_H)
    acc = weighted_slot_sum(eo_ptr, dest_ptr, ids_ptr, w_ptr, t, cols, ROWS, TOPK, E, H, stride_eo, stride_w)
    tl.store(out_ptr + t.to(tl.int64) * stride_out + cols, acc.to(out_ptr.dtype.element_ty), mask=cols < H)


@triton_dist.jit
def weighted_slot_sum(eo_ptr, dest_ptr, ids_ptr, w_ptr, t, cols, ROWS, TOPK, E, H, stride_eo, stride_w):
    """fp32 ``sum_j w[t, j] * expert_out[dest[t, j], cols]`` over token ``t``'s slots whose expert id is in ``[0,
    E)`` and whose row is one of ``expert_out``'s ``ROWS``, ``j`` in order (columns ``>= H`` read as 0): the sum of
    every combine (one device, and the tensor-parallel reduce of :mod:`triton_dist.kernels.moe_tp`)."""
    acc = tl.zeros(cols.shape, dtype=tl.float32)
    for j in range(0, TOPK):
        e = tl.load(ids_ptr + t * TOPK + j)
        row = tl.load(dest_ptr + t * TOPK + j).to(tl.int64)
        if (e >= 0) & (e < E) & (row >= 0) & (row < ROWS):
            w = tl.load(w_ptr + t * stride_w + j).to(tl.float32)
            acc += w * tl.load(eo_ptr + row * stride_eo + cols, mask=cols < H, other=0.0).to(tl.float32)
    return acc


__all__ = ["weighted_slot_sum", "quantize_groups_fp8", "route_count_kernel", "route_block_scan_kernel", "route_expert_scan_kernel", "route_scatter_kernel",
           "combine_kernel", "QUANT_GROUP",
           "FP8_E4M3_MAX"]
