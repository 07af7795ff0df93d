"""Device code of sequence-parallel decode attention (:func:`triton_dist.ops.attention_sp.sp_flash_decode`): every
rank holds a slice of every request's tokens, runs the local decode on it (:mod:`triton_dist.kernels.flash_decode`,
its fp32 partial written into its own slot of the symmetric buffers), then ONE launch of
:func:`sp_decode_exchange_kernel` pushes that partial to every peer and merges all ranks' partials by their LSE.

Buffers (symmetric, one copy per rank; ``W`` ranks, the context's capacity ``max_batch``):

* ``part_out [W, max_batch, Hq, D]`` fp32, ``part_lse [W, max_batch, Hq]`` fp32: slot ``s`` holds rank ``s``'s
  partial (its own slot written by its local decode; the others pushed by the peers);
* ``ready [W, NSIG]`` int64: ``ready[s, p]`` is raised by rank ``s``'s program ``p`` once it has stored its rows
  into this rank's slot ``s``;
* ``recv_ok [W]`` int64: ``recv_ok[s] = e`` is raised by rank ``s`` at the start of its call ``e`` (its call ``e -
  1`` has ended, so it no longer reads its slots): this rank may write into rank ``s``'s buffers for call ``e``;
* ``counter [3]`` int64, local: the whole-launch epoch (:func:`~triton_dist.kernels.common.call_epoch` /
  :func:`~triton_dist.kernels.common.finish_call`).

Protocol of call ``e`` (every rank makes the same calls, so ``e`` is the same everywhere without host involvement;
the grid is ``NSIG`` programs on every call; the rows ``b * Hq + h`` of the call are cut into ``BLOCK_R``-row tiles
and tile ``t`` belongs to program ``t % NSIG`` on every rank):

1. program 0 raises ``recv_ok[rank] = e`` on every peer (system-scope release store);
2. program ``p`` waits (system-scope acquire) for every peer's ``recv_ok == e``, then stores its tiles of the own
   slot (``part_out[rank]``, ``part_lse[rank]``, read locally) into slot ``rank`` of every peer (``dl.symm_at``),
   then raises ``ready[rank, p] = e * 2**24 + tag`` on every peer (CTA barrier, system-scope release store; ``tag``
   the call's ``B * Hq * D`` mod ``2**24``);
3. program ``p`` waits (system-scope acquire, tagged: a peer called with another batch is reported, not waited for)
   for ``ready[s, p]`` of every peer ``s``, then merges, for each row of its tiles, the ``W`` slots with
   :func:`~triton_dist.kernels.flash_decode.merge_lse_row` (this rank's own slot read locally like the others) and
   writes ``out`` (its dtype) and ``lse``;
4. :func:`finish_call`: the last program publishes the epoch.

Deadlock freedom: program 0's ``recv_ok`` is raised before any wait; program ``p`` otherwise waits only for program
``p`` of the peers, which waits for nothing of this rank but ``recv_ok``. Reuse: signals carry the epoch and are
compared for equality (a stale value never matches); slot ``rank`` of a peer is written in call ``e`` only after the
peer raised ``recv_ok == e``, i.e. after its call ``e - 1``, the last reader of that slot, ended; the own slot is
written by the local decode of call ``e``, on this rank's stream after its call ``e - 1`` ended.
"""
from __future__ import annotations

import triton.language as tl

import triton_dist
import triton_dist.language as dl

from triton_dist.kernels.common import TAG_BITS_C, TAG_RANGE_C, call_epoch, finish_call, notify_peers
from triton_dist.kernels.flash_decode import merge_lse_row


@triton_dist.jit
def sp_decode_exchange_kernel(part_out_ptr, part_lse_ptr, out_ptr, lse_ptr, ready_ptr, recv_ok_ptr, counter_ptr,
                              nrows, num_heads, CAP_O, CAP_L, stride_ob, stride_oh, tag, rank,
                              WORLD: tl.constexpr, NSIG: tl.constexpr, D: tl.constexpr, BLOCK_R: tl.constexpr,
                              BLOCK_S: tl.constexpr):
    """Exchange and merge of the sequence-parallel decode's partials (module docstring). ``nrows = B * num_heads``
    rows; slot ``s`` of ``part_out`` starts at ``s * CAP_O`` (row ``r`` at ``r * D``), of ``part_lse`` at ``s *
    CAP_L``; ``out [B, num_heads, D]`` (strides ``stride_ob``, ``stride_oh``, unit along D), ``lse [B, num_heads]``
    fp32 contiguous. Grid: ``NSIG`` programs (``ready`` has ``NSIG`` signals per source)."""
    pid = tl.program_id(0)
    e_call = call_epoch(counter_ptr)
    value = e_call * TAG_RANGE_C + tag
    tiles = tl.cdiv(nrows, BLOCK_R)
    offs_r = tl.arange(0, BLOCK_R)
    offs_d = tl.arange(0, D)
    own_o = part_out_ptr + rank * CAP_O
    own_l = part_lse_ptr + rank * CAP_L
    if WORLD > 1:
        if pid == 0:
            notify_peers(recv_ok_ptr, rank, WORLD, e_call)
        # push: this rank's partial into slot `rank` of every peer, once that peer entered this call
        for i in tl.static_range(1, WORLD):
            peer = (rank + i) % WORLD
            tok = dl.wait(recv_ok_ptr + peer, 1, "sys", "acquire", e_call)
            dst_o = dl.symm_at(dl.consume_token(part_out_ptr, tok), peer) + rank * CAP_O
            dst_l = dl.symm_at(dl.consume_token(part_lse_ptr, tok), peer) + rank * CAP_L
            for t in range(pid, tiles, NSIG):
                rows = t * BLOCK_R + offs_r
                r_ok = rows < nrows
                o = tl.load(own_o + rows[:, None] * D + offs_d[None, :], mask=r_ok[:, None], other=0.0)
                lv = tl.load(own_l + rows, mask=r_ok, other=float("-inf"))
                tl.store(dst_o + rows[:, None] * D + offs_d[None, :], o, mask=r_ok[:, None])
                tl.store(dst_l + rows, lv, mask=r_ok)
            dl.notify(ready_ptr + rank * NSIG + pid, peer, value, "set", "intra_node")
    # merge: every peer's program `pid` has pushed the tiles this program merges
    tok = pid * 0
    for i in tl.static_range(1, WORLD):
        src = (rank + i) % WORLD
        tok = tok + dl.wait(ready_ptr + src * NSIG + pid, 1, "sys", "acquire", value, tag_bits=TAG_BITS_C)
    parts = dl.consume_token(part_out_ptr, tok)
    lses = dl.consume_token(part_lse_ptr, tok)
    for t in range(pid, tiles, NSIG):
        r_end = tl.minimum(t * BLOCK_R + BLOCK_R, nrows)
        for r in range(t * BLOCK_R, r_end):
            out, lse = merge_lse_row(parts + r * D, lses + r, WORLD, CAP_O, CAP_L, D, BLOCK_S, D)
            b = r // num_heads
            h = r % num_heads
            tl.store(out_ptr + b.to(tl.int64) * stride_ob + h * stride_oh + offs_d, out.to(out_ptr.dtype.element_ty))
            tl.store(lse_ptr + r, lse)
    finish_call(counter_ptr, e_call)


__all__ = ["sp_decode_exchange_kernel"]
