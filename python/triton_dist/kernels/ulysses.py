"""Device code of Ulysses sequence parallelism (:mod:`triton_dist.ops.attention_ulysses`): the all-to-all before
attention (:func:`~triton_dist.ops.attention_ulysses.pre_attn_all_to_all`, sequence-sharded with all heads ->
full sequence for one head group) and the one after it (``post_attn_all_to_all``, the way back), ONE launch of
:func:`ulysses_all_to_all_kernel` per call, either direction.

Both directions move the same pieces. ``W`` ranks, this call's ``B`` (batch), ``L`` (tokens per rank), ``Hg`` (heads
per rank's group, ``H / W``) and ``D``; a **piece** is a ``[B, L, Hg, D]`` block:

* pre: rank ``r``'s ``x [B, L, H, D]``; the piece for rank ``p`` is ``x[:, :, p*Hg:(p+1)*Hg]`` (a view of x: its
  strides, the pieces ``x_step = Hg * x.stride(2)`` elements apart), and what rank ``p`` receives from rank ``s``
  lands at ``out[:, s*L:(s+1)*L]`` of ``out [B, W*L, Hg, D]`` (``o_step = L * out.stride(1)``);
* post: rank ``r``'s ``y [B, W*L, Hg, D]``; the piece for rank ``p`` is ``y[:, p*L:(p+1)*L]`` (``x_step = L *
  y.stride(1)``), landing at ``out[:, :, s*Hg:(s+1)*Hg]`` of ``out [B, L, H, D]`` (``o_step = Hg * out.stride(2)``).

Every piece is cut into the same tiles: ``BLOCK_R`` rows ``b * L + l`` by ``HB`` heads (``BLOCK_D >= D`` elements
each, masked past ``D``), tile ``t`` = (row block ``t // cdiv(Hg, HB)``, head block ``t % cdiv(Hg, HB)``) belonging
to program ``t % NSIG`` on every rank; the tiling is a function of ``(B, L, Hg, D)`` and the constexprs only, so the
program that pushes a tile into a peer's slot and the peer's program that copies it out are the same ``pid``.

Buffers (symmetric, one copy per rank; ``NSIG`` programs, fixed per context):

* ``recv [W * CAP]`` (the context's dtype): slot ``s`` (``[s * CAP, (s + 1) * CAP)``) receives rank ``s``'s piece
  for this rank, contiguous ``[B, L, Hg, D]`` (the own slot is never used: the own piece goes from the input straight
  to ``out``). ``CAP`` is the context's capacity of a piece, not the call's size: slots do not move between calls;
* ``ready [W, NSIG]`` int64: ``ready[s, p]`` is raised by rank ``s``'s program ``p`` once it has stored its tiles
  into this rank's slot ``s``;
* ``recv_ok [W]`` int64: ``recv_ok[s] = e`` is raised by rank ``s`` at the start of its call ``e`` (its call ``e -
  1``, the last reader of its slots, has ended): this rank may write into rank ``s``'s slot for call ``e``;
* ``counter [3]`` int64, local: the whole-launch epoch (:func:`~triton_dist.kernels.common.call_epoch` /
  :func:`~triton_dist.kernels.common.finish_call`), in device memory: a call can be captured into a CUDA graph and
  replayed.

Protocol of call ``e`` (every rank makes the same calls on the context, pre and post alike, so ``e`` is the same
everywhere without host involvement):

1. program 0 raises ``recv_ok[rank] = e`` on every peer (system-scope release store);
2. program ``p``, for each peer ``q`` in the order ``rank + 1, rank + 2, ...``: waits (system-scope acquire) for
   ``recv_ok[q] == e``, stores its tiles of the piece for ``q`` into slot ``rank`` of ``q``'s ``recv``
   (``dl.symm_at`` and plain stores), then raises ``ready[rank, p] = e * 2**24 + tag`` on ``q`` (CTA barrier,
   system-scope release store); ``tag`` is the piece's shape tag (the host's: element count mod ``2**23``, plus
   ``2**23`` for post, so a pre on one rank and a post on another are told apart);
3. program ``p`` copies its tiles of the own piece from the input straight to ``out`` (no round trip);
4. program ``p``, for each source ``s`` in the order ``rank - 1, rank - 2, ...`` (the order in which the sources push
   to this rank), waits (system-scope acquire, tagged: a peer called with another shape or direction is reported,
   not waited for) for ``ready[s, p]``, then copies its tiles of slot ``s`` into ``out``;
5. :func:`finish_call`: the last program publishes the epoch.

Deadlock freedom: program 0's ``recv_ok`` is raised before any wait; program ``p`` otherwise waits only for program
``p`` of the peers, which waits for nothing of this rank but ``recv_ok``. Every program must be resident at once on
a GPU (the grid is capped at the SMs and launched cooperatively on NVIDIA); the simulator's sequential interpreter
runs program ``p`` of every rank together. Reuse: signals carry the epoch and are compared for equality (a stale
value never matches); slot ``rank`` of a peer is written in call ``e`` only after that peer raised ``recv_ok == e``,
i.e. after its call ``e - 1`` ended. So consecutive calls on one context -- q, k and v through pre one after the
other, then post -- are consecutive epochs and never clash, whatever their shapes.
"""
from __future__ import annotations

import triton.language as tl

import triton_dist
import triton_dist.language as dl

from triton_dist.kernels.common import TAG_BITS_C, TAG_RANGE_C, call_epoch, finish_call, notify_peers


@triton_dist.jit
def copy_view_tiles(src_ptr, ssb, ssl, ssh, ssd, dst_ptr, dsb, dsl, dsh, dsd, B, L, Hg, pid, NSIG: tl.constexpr,
                    D: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_R: tl.constexpr, HB: tl.constexpr):
    """``dst[b, l, h, d] = src[b, l, h, d]`` for a ``[B, L, Hg, D]`` block given by strides on both sides (element
    strides ``ss*`` / ``ds*``), tiles ``pid, pid + NSIG, ...`` (module docstring): ``BLOCK_R`` rows ``b * L + l`` by
    ``HB`` heads of ``BLOCK_D`` elements (masked past ``D`` and ``Hg``). Offsets along the batch, sequence and head
    dims in int64 (any strides); with a unit stride along D the accesses are vectorised."""
    nrows = B * L
    hbn = tl.cdiv(Hg, HB)
    tiles = tl.cdiv(nrows, BLOCK_R) * hbn
    offs_r = tl.arange(0, BLOCK_R)
    cols = tl.arange(0, HB * BLOCK_D)
    dd = cols % BLOCK_D
    for t in range(pid, tiles, NSIG):
        rb = t // hbn
        hh = (t - rb * hbn) * HB + cols // BLOCK_D
        rows = rb * BLOCK_R + offs_r
        mask = (rows < nrows)[:, None] & (hh < Hg)[None, :]
        if BLOCK_D != D:
            mask = mask & (dd < D)[None, :]
        b = (rows // L).to(tl.int64)
        sq = (rows % L).to(tl.int64)
        h64 = hh.to(tl.int64)
        s_off = (b * ssb + sq * ssl)[:, None] + (h64 * ssh + dd * ssd)[None, :]
        d_off = (b * dsb + sq * dsl)[:, None] + (h64 * dsh + dd * dsd)[None, :]
        v = tl.load(src_ptr + s_off, mask=mask)
        tl.store(dst_ptr + d_off, v, mask=mask)


@triton_dist.jit
def ulysses_all_to_all_kernel(x_ptr, out_ptr, recv_ptr, ready_ptr, recv_ok_ptr, counter_ptr, B, L, Hg, sxb, sxl,
                              sxh, sxd, x_step, sob, sol, soh, sod, o_step, CAP, tag, rank, WORLD: tl.constexpr,
                              NSIG: tl.constexpr, D: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_R: tl.constexpr,
                              HB: tl.constexpr):
    """One Ulysses all-to-all, either direction (module docstring): the input's piece for rank ``q`` is the
    ``[B, L, Hg, D]`` view at ``x_ptr + q * x_step`` with strides ``sx*``; the piece received from rank ``s`` goes
    to the view at ``out_ptr + s * o_step`` with strides ``so*``. Slot ``s`` of ``recv`` starts at ``s * CAP`` and
    holds a contiguous ``[B, L, Hg, D]``. Grid: ``NSIG`` programs (``ready`` has ``NSIG`` signals per source)."""
    pid = tl.program_id(0)
    e_call = call_epoch(counter_ptr)
    value = e_call * TAG_RANGE_C + tag
    # the slot's strides: a contiguous [B, L, Hg, D]
    ssh = D
    ssl = Hg * D
    ssb = L * ssl
    if WORLD > 1:
        if pid == 0:
            notify_peers(recv_ok_ptr, rank, WORLD, e_call)
        # push: the piece for each peer into its slot `rank`, once that peer entered this call
        for i in tl.static_range(1, WORLD):
            peer = (rank + i) % WORLD
            tok = dl.wait(recv_ok_ptr + peer, 1, "sys", "acquire", e_call)
            dst = dl.symm_at(dl.consume_token(recv_ptr, tok), peer) + rank * CAP
            copy_view_tiles(x_ptr + tl.cast(peer, tl.int64) * x_step, sxb, sxl, sxh, sxd, dst, ssb, ssl, ssh, 1, B,
                            L, Hg, pid, NSIG, D, BLOCK_D, BLOCK_R, HB)
            dl.notify(ready_ptr + rank * NSIG + pid, peer, value, "set", "intra_node")
    # the own piece: straight from the input to out, while the peers' pushes are in flight
    own = tl.cast(rank, tl.int64)
    copy_view_tiles(x_ptr + own * x_step, sxb, sxl, sxh, sxd, out_ptr + own * o_step, sob, sol, soh, sod, B, L, Hg,
                    pid, NSIG, D, BLOCK_D, BLOCK_R, HB)
    # receive: each source's tiles of this program, in the order the sources push to this rank
    for i in tl.static_range(1, WORLD):
        src = (rank + WORLD - i) % WORLD
        tok = dl.wait(ready_ptr + src * NSIG + pid, 1, "sys", "acquire", value, tag_bits=TAG_BITS_C)
        slot = dl.consume_token(recv_ptr, tok) + src * CAP
        copy_view_tiles(slot, ssb, ssl, ssh, 1, out_ptr + tl.cast(src, tl.int64) * o_step, sob, sol, soh, sod, B,
                        L, Hg, pid, NSIG, D, BLOCK_D, BLOCK_R, HB)
    finish_call(counter_ptr, e_call)


__all__ = ["copy_view_tiles", "ulysses_all_to_all_kernel"]
