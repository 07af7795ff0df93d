"""Device code of the expert-parallel dispatch / combine (host side: :mod:`triton_dist.ops.moe_ep`; protocol:
docs/moe.md, "Expert parallelism").

``WORLD`` ranks each hold ``E_LOC`` experts (global expert ``g`` lives on rank ``g // E_LOC``) and ``T_r <= Tmax``
tokens with ``k`` routed slots each. A *pair* is one (token ``t``, slot ``j``) of a rank's ``topk_idx [T, k]``,
flattened as ``p = t * k + j``; its global id is ``rank * TMAXK + p`` (``TMAXK = Tmax * k``).

Receive layout on rank ``d`` (the routing layout of docs/moe.md, one buffer per call parity): the rows of local
expert ``le`` are ``[offsets[le - 1], offsets[le])``; within an expert the pairs follow source rank order, then
the source's pair order (token, then slot): the same layout every run, whatever the timing. Row ``r``'s global pair
id is ``meta[r]``, which combine uses to send the expert's output row back.

Method ``push``: one dispatch is four launches and one combine three, none reading anything on the host:

1. the route kernels of :mod:`.moe_route` (count, per-expert block scan) on the local pairs: this rank's count per
   expert and each pair's rank among this rank's pairs of its expert;
2. :func:`ep_exchange_kernel` (one program; its body is :func:`exchange_counts`): pushes the counts to every rank, waits for everyone's, and derives
   where this rank's pairs of every expert start on the expert's rank, this rank's receive offsets, and the running
   totals its two arrival waits expect;
3. :func:`ep_dispatch_kernel` (one program per (64-pair block, column chunk)): stores each in-range pair's token
   row (and, for column chunk 0, its global pair id) straight into the destination rank's receive buffer, then adds
   the number of rows it stored to that rank's dispatch arrival counter (``dl.notify(..., "add")``: a CTA barrier
   and a system-scope release, so the rows are visible before the count);
4. :func:`ep_arrival_wait_kernel`: waits until the arrival counter equals the running total expected.

Combine: :func:`ep_combine_send_kernel` sends every received row's expert output back to its source pair's row of
the source's combine buffer (and adds to its combine arrival counter), :func:`ep_arrival_wait_kernel` waits for
this rank's pairs, and :func:`~triton_dist.kernels.moe_route.combine_kernel` (``moe_combine``'s) sums each token's
slots with the top-k weights in slot order in fp32 (deterministic; pair ``t * k + j`` is row ``t * k + j`` of the
combine buffer).

Why arrival counters can use an equality wait: counters only grow, by exactly one unit per (row, column chunk),
and no unit of a later call can arrive before the wait saw its total. Dispatch: no rank sends rows of call ``n + 1``
to this rank before this rank published its counts of call ``n + 1``, which its stream does only after call ``n``'s
wait. Combine: with two dispatches in flight a peer may send call ``n + 1``'s outputs while this rank still waits
for call ``n``'s, so each buffer parity has its own combine counter (and running total); call ``n + 2`` (the same
parity) cannot send here before this rank dispatched ``n + 2``, which the host allows only after call ``n``'s
combine was enqueued, so after its wait on this stream.

Method ``normal`` (the prefill bandwidth mode; protocol in docs/moe.md): :func:`ep_normal_enter_kernel` exchanges
the token counts (the same epoch-slotted signals as the count exchange, another tag) and is the handshake after
which peers may write this rank's buffers of the call's parity; :func:`ep_normal_send_kernel` stores each token
once to every rank holding one of its experts, every token's routing row to every rank, and adds one arrival unit
per program on every rank; after the arrival wait, :func:`ep_normal_ids_kernel` and the route kernels of
:mod:`.moe_route` build this rank's layout locally (push's order). Combine: :func:`ep_normal_combine_send_kernel`
sends one partial (this rank's slots of the token, fp32, rounded once) per (source, token) back, and
:func:`ep_normal_combine_reduce_kernel` sums a token's partials in rank order.

Method ``ll`` (the decode latency mode; protocol in docs/moe.md): push's protocol and layout in ONE launch per
direction on a small persistent grid. :func:`ep_ll_dispatch_kernel`: program 0 counts and runs
:func:`exchange_counts` (push's exchange, shared), then releases an intra-kernel barrier flag (epoch-valued: no
reset) that every program acquires; then every program pushes its pair blocks and adds its arrivals, and program 0
ends with the arrival wait. The barrier needs every program co-resident (the host caps the grid at the rank's
program budget and 32). :func:`ep_ll_combine_kernel`: sends back, waits (every program) and sums the slots.
"""
from __future__ import annotations

import triton.language as tl

import triton_dist
import triton_dist.language as dl

from triton_dist.kernels.common import TAG_BITS_C, TAG_RANGE_C, next_epoch
from triton_dist.kernels.moe_route import QUANT_GROUP, _expert_of, quantize_groups_fp8


@triton_dist.jit
def ep_exchange_kernel(totals_ptr, cnt_ptr, cnt_ready_ptr, counter_ptr, send_base_ptr, offs_ptr, expect_ptr,
                       cexpect_ptr, tag, E, E_LOC, NCHUNK, rank, WORLD: tl.constexpr, BLOCK_E: tl.constexpr):
    """One program: :func:`exchange_counts` (method ``push``'s count exchange, its second launch)."""
    exchange_counts(totals_ptr, cnt_ptr, cnt_ready_ptr, counter_ptr, send_base_ptr, offs_ptr, expect_ptr, cexpect_ptr,
                    tag, E, E_LOC, NCHUNK, rank, WORLD, BLOCK_E)


@triton_dist.jit
def exchange_counts(totals_ptr, cnt_ptr, cnt_ready_ptr, counter_ptr, send_base_ptr, offs_ptr, expect_ptr,
                    cexpect_ptr, tag, E, E_LOC, NCHUNK, rank, WORLD: tl.constexpr, BLOCK_E: tl.constexpr):
    """The count exchange of methods ``push`` (:func:`ep_exchange_kernel`) and ``ll`` (program 0 of
    :func:`ep_ll_dispatch_kernel`), run by ONE program; returns the dispatch arrivals' new running total (int64).
    ``totals [E + 1]`` int32: this rank's pairs per global expert (entry ``E``, out-of-range ids, is never read);
    ``cnt`` symmetric int32 ``[2, WORLD, E]`` and ``cnt_ready`` symmetric int64 ``[2, WORLD]``, slot ``e % 2`` used
    by call ``e`` (the DEVICE epoch's parity, not the host's buffer parity, which a CUDA graph freezes); ``counter
    [1]`` int64 (the context's epoch); ``send_base [E]`` int32 (out: the row on expert ``g``'s rank where this rank's
    first pair of ``g`` goes; scratch first); ``offs [E_LOC]`` int32 (out: this rank's receive offsets, cumulative
    ends); ``expect [1]`` / ``cexpect [1]`` int64 (running totals, this call's included, in units of rows x
    ``NCHUNK``: the dispatch arrivals; the combine arrivals of the calls of this call's buffer parity). The parity is
    in which ``cexpect`` the caller passes, never an integer argument: a CUDA graph captured after one eager call of
    the other parity runs the kernel compiled for that call. ``tag`` differs per method, so ranks that call
    different methods are reported at once.

    Memory ordering: the counts are stored to every rank, then ``cnt_ready[rank] = e * TAG_RANGE + tag`` is raised
    on every rank (``dl.notify``: its release publishes the stores); the tagged acquire waits on every rank's signal
    order the loads of the count matrix after them. A rank whose signal carries another tag (another context shape
    or method) is reported at once.

    Slot reuse: a rank writes slot ``e % 2`` again in call ``e + 2`` only after its call ``e + 1`` saw every rank's
    ``ready(e + 1)``, which each rank raises after its own call ``e`` (same stream) loaded its counts: no rank can
    overwrite counts or a signal another rank has not read yet, even between ranks that exchange no rows."""
    e = next_epoch(counter_ptr, 0)
    ready = e * TAG_RANGE_C + tag
    slot = e % 2
    cnt_ptr += slot * WORLD * E
    cnt_ready_ptr += slot * WORLD
    g = tl.arange(0, BLOCK_E)
    m = g < E
    mine = tl.load(totals_ptr + g, mask=m, other=0)
    for d in tl.static_range(WORLD):
        tl.store(dl.symm_at(cnt_ptr, d) + rank * E + g, mine, mask=m)
    for d in tl.static_range(WORLD):
        dl.notify(cnt_ready_ptr + rank, d, ready, "set", "intra_node")
    tok = tl.program_id(0) * 0
    for s in tl.static_range(WORLD):
        tok = dl.wait(cnt_ready_ptr + s, 1, "sys", "acquire", ready, tag_bits=TAG_BITS_C)
    cnt = dl.consume_token(cnt_ptr, tok)
    tot = tl.zeros((BLOCK_E, ), dtype=tl.int32)
    before = tl.zeros((BLOCK_E, ), dtype=tl.int32)
    for s in tl.static_range(WORLD):
        c = tl.load(cnt + s * E + g, mask=m, other=0)
        tot += c
        before += tl.where(s < rank, c, 0)
    excl = tl.cumsum(tot, axis=0) - tot  # rows of every expert before g, over all ranks' experts
    tl.store(send_base_ptr + g, excl, mask=m)  # scratch: the gather below reads the value at each group's start
    tl.debug_barrier()
    group_first = (g // E_LOC) * E_LOC
    start = excl - tl.load(send_base_ptr + group_first, mask=m, other=0)  # first row of g on its rank
    tl.debug_barrier()
    tl.store(send_base_ptr + g, start + before, mask=m)
    own = m & (g // E_LOC == rank)
    tl.store(offs_ptr + (g - rank * E_LOC), start + tot, mask=own)
    recv = tl.sum(tl.where(own, tot, 0), axis=0).to(tl.int64)
    sent = tl.sum(mine, axis=0).to(tl.int64)
    run_d = tl.load(expect_ptr) + recv * NCHUNK
    run_c = tl.load(cexpect_ptr) + sent * NCHUNK
    tl.store(expect_ptr, run_d)
    tl.store(cexpect_ptr, run_c)
    return run_d


@triton_dist.jit
def store_rows_at(tok_ptr, scales_ptr, d, row, h, H, vals, scale, sel, QUANT_FP8: tl.constexpr,
                  BLOCK_H: tl.constexpr):
    """Store the rows of tile ``vals [B, BLOCK_H]`` (columns ``[h * BLOCK_H, +BLOCK_H)`` of ``H``) selected by
    ``sel [B]`` to rows ``row [B]`` (int64) of rank ``d``'s symmetric ``tok [*, H]``, in ``tok``'s dtype; with
    ``QUANT_FP8`` also their scales (``scale [B, BLOCK_H / QUANT_GROUP]``, from :func:`quantize_groups_fp8`) to the
    same rows of ``scales [*, H / QUANT_GROUP]`` there (``scale`` is not read otherwise). No memory ordering: the
    caller's ``dl.notify`` publishes the stores."""
    cols = h * BLOCK_H + tl.arange(0, BLOCK_H)
    tl.store(dl.symm_at(tok_ptr, d) + row[:, None] * H + cols[None, :], vals.to(tok_ptr.dtype.element_ty),
             mask=sel[:, None] & (cols < H)[None, :])
    if QUANT_FP8:
        grp = h * (BLOCK_H // QUANT_GROUP) + tl.arange(0, BLOCK_H // QUANT_GROUP)
        HG = H // QUANT_GROUP
        tl.store(dl.symm_at(scales_ptr, d) + row[:, None] * HG + grp[None, :], scale,
                 mask=sel[:, None] & (grp < HG)[None, :])


@triton_dist.jit
def push_row_chunk(x_ptr, tok_ptr, scales_ptr, meta_ptr, arrived_ptr, p, TOPK, stride_x, ok, dest, row, rank, TMAXK,
                   h, H, WORLD: tl.constexpr, BLOCK: tl.constexpr, BLOCK_H: tl.constexpr, QUANT_FP8: tl.constexpr,
                   NOTIFY: tl.constexpr):
    """Column chunk ``h`` of a block of pairs ``p`` pushed to their experts' ranks (push's and ll's dispatch): the
    token rows ``x[p // TOPK]`` of the pairs where ``ok``, quantised with ``QUANT_FP8``, stored to row ``row`` on rank ``dest``
    (:func:`store_rows_at`). With ``NOTIFY`` (push: one program per chunk) each rank that got rows also gets, from
    chunk 0, their global pair ids ``rank * TMAXK + p`` at the same rows of ``meta``, and ``arrived += rows`` (release after the stores); without
    (ll: the caller publishes a block's ids and arrivals once, after its chunks) nothing is published here."""
    cols = h * BLOCK_H + tl.arange(0, BLOCK_H)
    cm = cols < H
    t = (p // TOPK).to(tl.int64)
    vals = tl.load(x_ptr + t[:, None] * stride_x + cols[None, :], mask=ok[:, None] & cm[None, :], other=0.0)
    scale = vals  # read by store_rows_at with QUANT_FP8 only
    if QUANT_FP8:
        vals, scale = quantize_groups_fp8(vals, BLOCK, BLOCK_H)
    for d in tl.static_range(WORLD):
        sel = ok & (dest == d)
        n = tl.sum(sel.to(tl.int32), axis=0)
        if n > 0:
            store_rows_at(tok_ptr, scales_ptr, d, row, h, H, vals, scale, sel, QUANT_FP8, BLOCK_H)
            if NOTIFY:
                if h == 0:
                    tl.store(dl.symm_at(meta_ptr, d) + row, rank * TMAXK + p, mask=sel)
                dl.notify(arrived_ptr, d, n.to(tl.int64), "add", "intra_node")


@triton_dist.jit
def send_rows_back(eo_ptr, cbuf_ptr, arrived_ptr, r, valid, src, pair, h, H, stride_eo, WORLD: tl.constexpr,
                   BLOCK_H: tl.constexpr, NOTIFY: tl.constexpr):
    """Column chunk ``h`` of received rows ``r`` (where ``valid``) of ``expert_out`` sent back to row ``pair`` of
    the combine buffer ``cbuf [*, H]`` on their source rank ``src`` (push's and ll's combine). With ``NOTIFY`` (push:
    one program per chunk) each source that got rows gets ``arrived += rows`` (release after the stores); without
    (ll) the caller publishes a block's arrivals once, after its chunks."""
    cols = h * BLOCK_H + tl.arange(0, BLOCK_H)
    cm = cols < H
    vals = tl.load(eo_ptr + r.to(tl.int64)[:, None] * stride_eo + cols[None, :], mask=valid[:, None] & cm[None, :],
                   other=0.0)
    for d in tl.static_range(WORLD):
        sel = valid & (src == d)
        n = tl.sum(sel.to(tl.int32), axis=0)
        if n > 0:
            tl.store(dl.symm_at(cbuf_ptr, d) + pair[:, None] * H + cols[None, :], vals.to(cbuf_ptr.dtype.element_ty),
                     mask=sel[:, None] & cm[None, :])
            if NOTIFY:
                dl.notify(arrived_ptr, d, n.to(tl.int64), "add", "intra_node")


@triton_dist.jit
def ep_dispatch_kernel(x_ptr, ids_ptr, base_ptr, send_base_ptr, tok_ptr, meta_ptr, scales_ptr, arrived_ptr, P, TOPK,
                       E, E_LOC, NB, H, stride_x, TMAXK, rank, WORLD: tl.constexpr, BLOCK: tl.constexpr,
                       BLOCK_H: tl.constexpr, QUANT_FP8: tl.constexpr = False):
    """Program ``(b, h)``: the in-range pairs of block ``b`` (pairs ``[b * BLOCK, (b + 1) * BLOCK)`` of ``P``),
    columns ``[h * BLOCK_H, +BLOCK_H)`` of each pair's token row stored to row ``send_base[g] + base[g, b] + (earlier
    pairs of the block with expert g)`` of the receive buffer ``tok [rows, H]`` on rank ``g // E_LOC`` (symmetric,
    row stride ``H``); the ``h == 0`` programs also store the global pair id to ``meta [rows]`` there. Then, per
    destination rank that got rows, ``arrived += rows`` on that rank (release: the rows are visible first).
    ``QUANT_FP8``: the row travels as fp8 e4m3 codes with one fp32 scale per :data:`QUANT_GROUP` columns
    (:func:`~triton_dist.kernels.moe_route.quantize_groups_fp8`, as ``moe_route(quant="fp8")``), the scales to
    ``scales [rows, H / QUANT_GROUP]`` on the same rank."""
    b = tl.program_id(0)
    h = tl.program_id(1)
    i = tl.arange(0, BLOCK)
    p = b * BLOCK + i
    valid = p < P
    e = _expert_of(ids_ptr, p, P, E)
    ok = valid & (e < E)
    earlier = (e[:, None] == e[None, :]) & (i[None, :] < i[:, None]) & valid[None, :]
    within = tl.sum(earlier.to(tl.int32), axis=1)
    row = (tl.load(send_base_ptr + e, mask=ok, other=0) + tl.load(base_ptr + e * NB + b, mask=ok, other=0) +
           within).to(tl.int64)
    push_row_chunk(x_ptr, tok_ptr, scales_ptr, meta_ptr, arrived_ptr, p, TOPK, stride_x, ok, e // E_LOC, row, rank,
                   TMAXK, h, H, WORLD, BLOCK, BLOCK_H, QUANT_FP8, True)


@triton_dist.jit
def ep_arrival_wait_kernel(arrived_ptr, expect_ptr):
    """One program: wait (system-scope acquire) until the arrival counter ``arrived`` (symmetric int64, raised by
    the peers' ``add`` notifications) equals the running total ``expect[0]``. The launches after it on the stream
    read what the senders published before their notifications."""
    want = tl.load(expect_ptr)
    dl.wait(arrived_ptr, 1, "sys", "acquire", want)


@triton_dist.jit
def ep_combine_send_kernel(eo_ptr, meta_ptr, offs_ptr, cbuf_ptr, arrived_ptr, H, stride_eo, TMAXK, E_LOC,
                           WORLD: tl.constexpr, BLOCK: tl.constexpr, BLOCK_H: tl.constexpr):
    """Program ``(b, h)``: rows ``[b * BLOCK, +BLOCK)`` of the received rows (``offs[E_LOC - 1]`` of them; the
    others are skipped), columns of chunk ``h`` of ``expert_out`` stored to row ``meta[r] % TMAXK`` (the pair) of the
    combine buffer ``cbuf [TMAXK, H]`` on rank ``meta[r] // TMAXK`` (the source); then ``arrived += rows`` on each
    source that got rows (release)."""
    b = tl.program_id(0)
    h = tl.program_id(1)
    r = b * BLOCK + tl.arange(0, BLOCK)
    total = tl.load(offs_ptr + E_LOC - 1)
    valid = r < total
    mt = tl.load(meta_ptr + r, mask=valid, other=0)
    send_rows_back(eo_ptr, cbuf_ptr, arrived_ptr, r, valid, mt // TMAXK, (mt % TMAXK).to(tl.int64), h, H, stride_eo,
                   WORLD, BLOCK_H, True)


# ---------------------------------------------------------------------------------------------------------------
# method "normal": every token crosses to each rank that holds one of its experts once; the receiver routes locally
# ---------------------------------------------------------------------------------------------------------------
@triton_dist.jit
def ep_normal_enter_kernel(tcnt_ptr, ready_ptr, counter_ptr, tcounts_ptr, expect_ptr, cexpect_ptr, tag, T, NCHUNK, rank,
                           WORLD: tl.constexpr, WORLD_P2: tl.constexpr, BLOCK_T: tl.constexpr):
    """One program, first launch of a ``normal`` dispatch. ``tcnt`` symmetric int32 ``[2, WORLD]`` and ``ready``
    symmetric int64 ``[2, WORLD]`` (the context's exchange signals, shared with ``push``'s count exchange), slot
    ``e % 2`` used by call ``e`` (the DEVICE epoch drawn from ``counter``, as :func:`ep_exchange_kernel`); ``tcounts``
    ``[WORLD]`` int32 (out, local: every source's token count of this call); ``expect [1]`` / ``cexpect [1]`` int64
    (running totals of the arrival waits: dispatch; combine of this call's buffer parity, as
    :func:`ep_exchange_kernel`'s).

    Stores this rank's token count ``T`` into every rank's ``tcnt[slot, rank]``, raises ``ready[slot, rank] = e *
    TAG_RANGE + tag`` on every rank (``dl.notify``: its release publishes the count) and waits (tagged, acquire) for
    every rank's. That is the handshake that lets the senders write: a rank raises ``ready(e)`` only once its stream
    finished every earlier launch on the context, so everything it read of this call's buffer parity in call ``e -
    2`` (received tokens, routing rows, combine partials) is read. Then the running totals: dispatch arrivals
    ``+= sum_s cdiv(T_s, BLOCK_T) * NCHUNK`` (every program of a source's send grid adds one unit on every rank),
    combine arrivals of this parity ``+= WORLD * cdiv(T, BLOCK_T) * NCHUNK`` (every rank's combine grid adds one
    unit per block of this rank's tokens and column chunk). ``tag`` differs from ``push``'s, so ranks that call
    different methods are reported at once (tagged wait) instead of hanging. Slot reuse: as
    :func:`ep_exchange_kernel`'s (every rank loaded slot ``e % 2`` before it raises ``ready(e + 1)``)."""
    e = next_epoch(counter_ptr, 0)
    ready = e * TAG_RANGE_C + tag
    slot = e % 2
    tcnt_ptr += slot * WORLD
    ready_ptr += slot * WORLD
    for d in tl.static_range(WORLD):
        tl.store(dl.symm_at(tcnt_ptr, d) + rank, T)
    for d in tl.static_range(WORLD):
        dl.notify(ready_ptr + rank, d, ready, "set", "intra_node")
    tok = tl.program_id(0) * 0
    for s in tl.static_range(WORLD):
        tok = dl.wait(ready_ptr + s, 1, "sys", "acquire", ready, tag_bits=TAG_BITS_C)
    src = tl.arange(0, WORLD_P2)
    tc = tl.load(dl.consume_token(tcnt_ptr, tok) + src, mask=src < WORLD, other=0)
    tl.store(tcounts_ptr + src, tc, mask=src < WORLD)
    units = tl.sum((tc + BLOCK_T - 1) // BLOCK_T, axis=0).to(tl.int64) * NCHUNK
    tl.store(expect_ptr, tl.load(expect_ptr) + units)
    mine = (T + BLOCK_T - 1) // BLOCK_T * NCHUNK * WORLD  # int32 (T may be a constexpr 1: no .to here)
    tl.store(cexpect_ptr, tl.load(cexpect_ptr) + mine)


@triton_dist.jit
def ep_normal_send_kernel(x_ptr, ids_ptr, w_ptr, tbuf_ptr, tscales_ptr, ridx_ptr, rw_ptr, arrived_ptr, T, TOPK, E,
                          E_LOC, H, stride_x, TMAX, rank, WORLD: tl.constexpr, BLOCK_T: tl.constexpr,
                          BLOCK_K: tl.constexpr, BLOCK_H: tl.constexpr, QUANT_FP8: tl.constexpr = False):
    """Program ``(b, h)``: tokens ``[b * BLOCK_T, +BLOCK_T)`` of ``T``, columns ``[h * BLOCK_H, +BLOCK_H)``. ``ids
    [T, TOPK]`` int64 and ``w [T, TOPK]`` float32 (the routing as copied at dispatch, contiguous). For every rank
    ``d``, the tokens with at least one in-range expert on ``d`` (``id // E_LOC == d``) store their columns ONCE to
    ``tbuf [WORLD, TMAX, H]`` row ``(rank, t)`` on ``d`` (symmetric, this call's buffer parity), as fp8 e4m3 codes
    with their scales to ``tscales [WORLD, TMAX, H / QUANT_GROUP]`` where ``QUANT_FP8`` (the quantiser of
    :func:`~triton_dist.kernels.moe_route.quantize_groups_fp8`, once per token instead of once per pair). The ``h
    == 0`` programs store every token's routing row to every rank: ``ridx [WORLD, TMAX, TOPK]`` int32 (global id,
    ``E`` for an id out of range) and ``rw`` float32, row ``(rank, t)``: the receiver routes from them, and rows
    of tokens not routed to it must say so in this call. Then ``arrived += 1`` on EVERY rank (one unit per program
    and rank, whether it stored there or not, so that the receiver knows the total from the token counts alone;
    release: the stores are visible first)."""
    b = tl.program_id(0)
    h = tl.program_id(1)
    t = b * BLOCK_T + tl.arange(0, BLOCK_T)
    tv = t < T
    j = tl.arange(0, BLOCK_K)
    mk = tv[:, None] & (j < TOPK)[None, :]
    pk = t.to(tl.int64)[:, None] * TOPK + j[None, :]
    g = tl.load(ids_ptr + pk, mask=mk, other=E)
    g = tl.where(mk & (g >= 0) & (g < E), g, E).to(tl.int32)
    dest = g // E_LOC  # WORLD for an id out of range or a padding slot
    cols = h * BLOCK_H + tl.arange(0, BLOCK_H)
    cm = cols < H
    vals = tl.load(x_ptr + t.to(tl.int64)[:, None] * stride_x + cols[None, :], mask=tv[:, None] & cm[None, :],
                   other=0.0)
    scale = vals  # read by store_rows_at with QUANT_FP8 only
    if QUANT_FP8:
        vals, scale = quantize_groups_fp8(vals, BLOCK_T, BLOCK_H)
    row = rank * TMAX + t.to(tl.int64)
    wv = tl.load(w_ptr + pk, mask=mk & (h == 0), other=0.0)
    for d in tl.static_range(WORLD):
        sel = tl.max((dest == d).to(tl.int32), axis=1) > 0
        n = tl.sum(sel.to(tl.int32), axis=0)
        if n > 0:
            store_rows_at(tbuf_ptr, tscales_ptr, d, row, h, H, vals, scale, sel, QUANT_FP8, BLOCK_H)
        if h == 0:
            rk = row[:, None] * TOPK + j[None, :]
            tl.store(dl.symm_at(ridx_ptr, d) + rk, g, mask=mk)
            tl.store(dl.symm_at(rw_ptr, d) + rk, wv, mask=mk)
        dl.notify(arrived_ptr, d, 1, "add", "intra_node")


@triton_dist.jit
def ep_normal_ids_kernel(ridx_ptr, tcounts_ptr, lids_ptr, TOPK, TMAX, E_LOC, rank, WORLD: tl.constexpr,
                         BLOCK: tl.constexpr):
    """Program ``b``: entries ``[b * BLOCK, +BLOCK)`` of the virtual pair list ``q = (s * TMAX + t) * TOPK + j`` of
    every source ``s``'s token slots (``WORLD * TMAX * TOPK``). ``lids[q]`` (int32) = the LOCAL expert of the slot
    (``id - rank * E_LOC``) where the slot is present (``t < tcounts[s]``, this call's token of ``s``) and its
    expert is on this rank; else ``E_LOC`` (out of range for the route kernels: such pairs get rows after every
    expert's, never computed nor combined). ``ridx``: the routing rows received (this call's parity)."""
    q = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    n = WORLD * TMAX * TOPK
    inb = q < n
    s = q // (TMAX * TOPK)
    t = (q // TOPK) % TMAX
    present = inb & (t < tl.load(tcounts_ptr + s, mask=inb, other=0))
    g = tl.load(ridx_ptr + q, mask=present, other=-1)
    here = present & (g >= rank * E_LOC) & (g < (rank + 1) * E_LOC)
    tl.store(lids_ptr + q, tl.where(here, g - rank * E_LOC, E_LOC), mask=inb)


@triton_dist.jit
def ep_normal_combine_send_kernel(eo_ptr, lids_ptr, dest_ptr, rw_ptr, tcounts_ptr, cbuf_ptr, arrived_ptr, TOPK, E_LOC,
                                  H, stride_eo, TMAX, NBT, rank, WORLD: tl.constexpr, BLOCK_T: tl.constexpr,
                                  BLOCK_H: tl.constexpr):
    """Program ``(s * NBT + b, h)``: tokens ``[b * BLOCK_T, +BLOCK_T)`` of source ``s`` (programs past its
    ``tcounts[s]`` tokens return at once), columns of chunk ``h``. For each token with at least one slot on this
    rank (``lids < E_LOC``): the partial ``sum_j rw[s, t, j] * expert_out[dest[q(s, t, j)]]`` over those slots, in
    slot order, fp32, rounded once to ``cbuf``'s dtype and stored to row ``(rank, t)`` of ``cbuf [WORLD, TMAX, H]``
    on ``s``. Then ``arrived += 1`` on ``s`` (one unit per program with tokens of ``s``, rows or not: ``s`` expects
    ``WORLD * cdiv(T_s, BLOCK_T) * NCHUNK``; release)."""
    pid = tl.program_id(0)
    h = tl.program_id(1)
    s = pid // NBT
    b = pid % NBT
    tc = tl.load(tcounts_ptr + s)
    if b * BLOCK_T < tc:
        t = b * BLOCK_T + tl.arange(0, BLOCK_T)
        tv = t < tc
        vt = (s * TMAX + t).to(tl.int64)
        cols = h * BLOCK_H + tl.arange(0, BLOCK_H)
        cm = cols < H
        acc = tl.zeros((BLOCK_T, BLOCK_H), dtype=tl.float32)
        here = t < 0
        for j in range(0, TOPK):
            lid = tl.load(lids_ptr + vt * TOPK + j, mask=tv, other=E_LOC)
            m = tv & (lid < E_LOC)
            r = tl.load(dest_ptr + vt * TOPK + j, mask=m, other=0).to(tl.int64)
            w = tl.load(rw_ptr + vt * TOPK + j, mask=m, other=0.0).to(tl.float32)
            v = tl.load(eo_ptr + r[:, None] * stride_eo + cols[None, :], mask=m[:, None] & cm[None, :], other=0.0)
            acc += w[:, None] * v.to(tl.float32)
            here = here | m
        row = rank * TMAX + t.to(tl.int64)
        tl.store(dl.symm_at(cbuf_ptr, s) + row[:, None] * H + cols[None, :], acc.to(cbuf_ptr.dtype.element_ty),
                 mask=here[:, None] & cm[None, :])
        dl.notify(arrived_ptr, s, 1, "add", "intra_node")


@triton_dist.jit
def ep_normal_combine_reduce_kernel(cbuf_ptr, ids_ptr, out_ptr, TOPK, E, E_LOC, H, stride_out, TMAX,
                                    WORLD: tl.constexpr, BLOCK_K: tl.constexpr, BLOCK_H: tl.constexpr):
    """Program ``(t, h)``: ``out[t, cols] = sum_d cbuf[d, t, cols]`` over the ranks ``d`` in order ``0 .. WORLD - 1``
    that hold at least one of token ``t``'s in-range experts (``ids [T, TOPK]`` int64: the routing copied at
    dispatch), fp32 accumulation, rounded once to ``out``'s dtype (``cbuf [WORLD, TMAX, H]``: the partials the
    experts' ranks sent back)."""
    t = tl.program_id(0)
    h = tl.program_id(1)
    cols = h * BLOCK_H + tl.arange(0, BLOCK_H)
    cm = cols < H
    j = tl.arange(0, BLOCK_K)
    g = tl.load(ids_ptr + t.to(tl.int64) * TOPK + j, mask=j < TOPK, other=-1)
    dest = tl.where((g >= 0) & (g < E), g // E_LOC, -1)
    acc = tl.zeros((BLOCK_H, ), dtype=tl.float32)
    for d in tl.static_range(WORLD):
        if tl.sum((dest == d).to(tl.int32), axis=0) > 0:
            acc += tl.load(cbuf_ptr + (d * TMAX + t).to(tl.int64) * H + cols, mask=cm, other=0.0).to(tl.float32)
    tl.store(out_ptr + t.to(tl.int64) * stride_out + cols, acc.to(out_ptr.dtype.element_ty), mask=cm)


# ---------------------------------------------------------------------------------------------------------------
# method "ll": push's layout in ONE launch per direction (decode sizes), a small persistent grid
# ---------------------------------------------------------------------------------------------------------------
@triton_dist.jit
def ep_ll_dispatch_kernel(x_ptr, ids_ptr, w_ptr, ridx_ptr, rw_ptr, totals_ptr, cnt_ptr, cnt_ready_ptr, counter_ptr,
                          epochs_ptr, bar_ptr, send_base_ptr, offs_ptr, tok_ptr, meta_ptr, scales_ptr, arrived_ptr,
                          expect_ptr, cexpect_ptr, tag, T, TOPK, E, E_LOC, H, stride_x, stride_w0, stride_w1, TMAXK,
                          rank, WORLD: tl.constexpr, BLOCK: tl.constexpr, BLOCK_E: tl.constexpr,
                          BLOCK_H: tl.constexpr, QUANT_FP8: tl.constexpr = False):
    """Method ``ll``'s whole dispatch, one launch of a fixed grid of ``G`` programs (all co-resident: ``G`` is at
    most the rank's program budget). ``x [T, H]``, ``ids [T, TOPK]`` (int32 / int64, contiguous), ``w [T, TOPK]``
    (strides ``stride_w0`` / ``stride_w1``): this rank's call; ``ridx [Tmax, TOPK]`` int64 / ``rw`` float32 (out: the
    routing copied for combine, this call's buffer parity); ``totals [E]`` int32 (scratch); ``epochs [G]`` int64
    (local: one launch counter per program); ``bar [1]`` int64 (symmetric, used on this rank only: the
    intra-kernel barrier's flag); the others as :func:`ep_dispatch_kernel` / :func:`exchange_counts` (``tok``,
    ``meta``, ``scales``, ``offs``, ``cexpect``: this call's buffer parity).

    1. Program 0: this rank's count per expert (``tl.histogram`` of each block of ``BLOCK`` pairs' experts, summed)
       into ``totals``, then :func:`exchange_counts` (the device-epoch, tagged exchange; ``tag`` is ``ll``'s) writes
       ``send_base``, ``offs`` and the running totals (one unit per row: programs store whole rows), and raises
       ``bar = epoch`` (``dl.notify`` on this rank: CTA barrier + release, so ``send_base`` is visible first).
    2. Every program (program 0 included) waits (acquire) for ``bar == epoch`` (its own launch counter: every
       program of the launch drew the same value), then takes pair blocks ``pid, pid + G, ...``: copies their
       routing, ranks each pair among this rank's earlier pairs of its expert (comparisons with every earlier block
       and within the block: the layout is push's, in pair order), stores each in-range pair's row (all column
       chunks, :func:`push_row_chunk`; fp8 codes and scales included) and global pair id to row ``send_base[g] +
       rank`` on ``g``'s rank, then adds the block's row count there (release after the stores).
    3. Program 0 waits (system-scope acquire) until this rank's dispatch arrivals reach the running total it
       computed in step 1. The launches after this one on the stream read the rows (kernel boundary).

    The barrier needs co-residency: programs 1.. spin until program 0 finished step 1, so program 0 must run while
    they spin; the host keeps ``G <= min(32, ctx.max_programs)`` (the rank's SM share)."""
    pid = tl.program_id(0)
    nprog = tl.num_programs(0)
    epoch = next_epoch(epochs_ptr, pid)
    P = T * TOPK
    nb = tl.cdiv(P, BLOCK)
    i = tl.arange(0, BLOCK)
    run_d = epoch * 0
    if pid == 0:
        acc = tl.zeros((BLOCK_E, ), dtype=tl.int32)
        for b in range(0, nb):
            e = _expert_of(ids_ptr, b * BLOCK + i, P, E)
            acc += tl.histogram(e, BLOCK_E, mask=e < E)
        g = tl.arange(0, BLOCK_E)
        tl.store(totals_ptr + g, acc, mask=g < E)
        tl.debug_barrier()
        run_d = exchange_counts(totals_ptr, cnt_ptr, cnt_ready_ptr, counter_ptr, send_base_ptr, offs_ptr, expect_ptr,
                                cexpect_ptr, tag, E, E_LOC, 1, rank, WORLD, BLOCK_E)
        dl.notify(bar_ptr, rank, epoch, "set", "intra_node")
    tok = dl.wait(bar_ptr, 1, "gpu", "acquire", epoch)
    sb_ptr = dl.consume_token(send_base_ptr, tok)
    nchunk = tl.cdiv(H, BLOCK_H)
    for b in range(pid, nb, nprog):
        p = b * BLOCK + i
        valid = p < P
        e = _expert_of(ids_ptr, p, P, E)
        ok = valid & (e < E)
        t = (p // TOPK).to(tl.int64)
        tl.store(ridx_ptr + p, tl.load(ids_ptr + p, mask=valid, other=0).to(tl.int64), mask=valid)
        wv = tl.load(w_ptr + t * stride_w0 + (p % TOPK) * stride_w1, mask=valid, other=0.0)
        tl.store(rw_ptr + p, wv.to(tl.float32), mask=valid)
        within = tl.sum(((e[:, None] == e[None, :]) & (i[None, :] < i[:, None])).to(tl.int32), axis=1)
        for b2 in range(0, b):
            e2 = _expert_of(ids_ptr, b2 * BLOCK + i, P, E)
            within += tl.sum((e[:, None] == e2[None, :]).to(tl.int32), axis=1)
        row = (tl.load(sb_ptr + e, mask=ok, other=0) + within).to(tl.int64)
        dest = e // E_LOC
        for h in range(0, nchunk):
            push_row_chunk(x_ptr, tok_ptr, scales_ptr, meta_ptr, arrived_ptr, p, TOPK, stride_x, ok, dest, row, rank,
                           TMAXK, h, H, WORLD, BLOCK, BLOCK_H, QUANT_FP8, False)
        for d in tl.static_range(WORLD):
            sel = ok & (dest == d)
            n = tl.sum(sel.to(tl.int32), axis=0)
            if n > 0:
                tl.store(dl.symm_at(meta_ptr, d) + row, rank * TMAXK + p, mask=sel)
                dl.notify(arrived_ptr, d, n.to(tl.int64), "add", "intra_node")
    if pid == 0:
        dl.wait(arrived_ptr, 1, "sys", "acquire", run_d)


@triton_dist.jit
def ep_ll_combine_kernel(eo_ptr, meta_ptr, offs_ptr, cbuf_ptr, arrived_ptr, cexpect_ptr, ids_ptr, w_ptr, out_ptr, T,
                         TOPK, E, H, stride_eo, stride_out, TMAXK, E_LOC, WORLD: tl.constexpr, BLOCK: tl.constexpr,
                         BLOCK_H: tl.constexpr):
    """Method ``ll``'s whole combine, one launch of ``G`` programs (no intra-kernel barrier: any grid works).
    Program ``pid`` sends received row blocks ``pid, pid + G, ...`` (``offs[E_LOC - 1]`` rows of this call's buffer
    parity; ``meta``: their global pair ids) of ``expert_out`` to row ``pair`` of the source's combine buffer ``cbuf
    [TMAXK, H]`` (every column chunk), then adds the block's row count to the source's combine counter ``arrived``
    (release). Then EVERY program waits (system-scope acquire) until ``arrived`` reaches the running total
    ``cexpect[0]`` (this parity's: written by the dispatch), so each reads the rows the peers published, and sums
    tokens ``pid, pid + G, ... < T``: ``out[t] = sum_j w[t, j] * cbuf[t * TOPK + j]`` over the in-range slots
    (``ids`` / ``w``: the routing copied at dispatch) in slot order, fp32, rounded once (``combine_kernel``'s sum)."""
    pid = tl.program_id(0)
    nprog = tl.num_programs(0)
    total = tl.load(offs_ptr + E_LOC - 1)
    nchunk = tl.cdiv(H, BLOCK_H)
    for b in range(pid, tl.cdiv(total, BLOCK), nprog):
        r = b * BLOCK + tl.arange(0, BLOCK)
        valid = r < total
        mt = tl.load(meta_ptr + r, mask=valid, other=0)
        src = mt // TMAXK
        pair = (mt % TMAXK).to(tl.int64)
        for h in range(0, nchunk):
            send_rows_back(eo_ptr, cbuf_ptr, arrived_ptr, r, valid, src, pair, h, H, stride_eo, WORLD, BLOCK_H, False)
        for d in tl.static_range(WORLD):
            n = tl.sum((valid & (src == d)).to(tl.int32), axis=0)
            if n > 0:
                dl.notify(arrived_ptr, d, n.to(tl.int64), "add", "intra_node")
    tok = dl.wait(arrived_ptr, 1, "sys", "acquire", tl.load(cexpect_ptr))
    cb = dl.consume_token(cbuf_ptr, tok)
    for t in range(pid, T, nprog):
        for h in range(0, nchunk):
            cols = h * BLOCK_H + tl.arange(0, BLOCK_H)
            cm = cols < H
            acc = tl.zeros((BLOCK_H, ), dtype=tl.float32)
            for j in range(0, TOPK):
                g = tl.load(ids_ptr + t * TOPK + j)
                if (g >= 0) & (g < E):
                    wj = tl.load(w_ptr + t * TOPK + j).to(tl.float32)
                    # int32 offsets: rows * H < 2**31 (max_tokens <= 256, topk <= 8)
                    acc += wj * tl.load(cb + (t * TOPK + j) * H + cols, mask=cm, other=0.0).to(tl.float32)
            tl.store(out_ptr + t * stride_out + cols, acc.to(out_ptr.dtype.element_ty), mask=cm)


__all__ = ["store_rows_at", "push_row_chunk", "send_rows_back", "exchange_counts", "ep_exchange_kernel", "ep_dispatch_kernel", "ep_arrival_wait_kernel", "ep_combine_send_kernel",
           "ep_normal_enter_kernel", "ep_normal_send_kernel", "ep_normal_ids_kernel",
           "ep_normal_combine_send_kernel", "ep_normal_combine_reduce_kernel", "ep_ll_dispatch_kernel", "ep_ll_combine_kernel"]
