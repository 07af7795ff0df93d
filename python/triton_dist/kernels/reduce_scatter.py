"""Reduce-scatter kernels (intra-node, SM based): rank ``r`` gets ``out = sum_src x_src[r * Ns:(r + 1) * Ns]``.

Accumulation is fp32 for every input dtype (bf16/fp16 are converted on load and rounded once on store).

* direct (``reduce_scatter_direct_kernel``): ``PUSH=False`` (pull, the default): each program stages the blocks of
  ``x`` that peers need into this rank's symmetric buffer, raises ``ready``, then reduces its blocks of shard
  ``rank`` by loading the peers' staged blocks. ``PUSH=True``: each program stores shard ``d`` of ``x`` into peer
  ``d``'s buffer slot ``[rank]`` and reduces its own buffer's slots locally.
* push_pipe (``reduce_scatter_push_pipe_kernel``): ``direct_push`` with the reduction overlapped: ``npush`` pusher
  programs push shard ``d`` of ``x`` into peer ``d``'s slot ``[rank]`` segment by segment with a ready signal per
  (pusher, segment), while the other programs of the launch (reducers) reduce each finished segment into ``out``.
  Same fp32 summation order as ``direct_push`` (own shard, then slots ``rank + 1, rank + 2, ...``): bit-identical.
* ll (``reduce_scatter_ll_kernel``, lowest latency): ``direct_push`` over flagged words (``kernels.common``, flagged
  words): no ready or done signal, double-buffered by epoch parity; same summation order (bit-identical).
* ring (``reduce_scatter_ring_kernel``): ``WORLD - 1`` steps; at step ``s`` rank ``r`` adds its part of chunk
  ``(r - s - 1) mod WORLD`` to the fp32 partial received from ``r - 1`` and stores it into ``r + 1``'s buffer slot
  ``s``. Partials travel as fp32 (exact same arithmetic as direct, twice the bytes for 16-bit inputs).

Shards: ``x`` has ``WORLD * Ns`` elements; shard ``d`` is ``x[d * Ns:(d + 1) * Ns]``. Signals ``[num_programs, WORLD]``
(direct) / ``[num_programs, WORLD]`` ring-step slots + ``[num_programs]`` done (ring); ``counter [num_programs]``.
"""
from __future__ import annotations

import triton.language as tl

import triton_dist
import triton_dist.language as dl

from triton_dist.kernels.common import (TAG_BITS_C, acquire_buffer, add_peer_slots, copy_blocks, exchange, ll_add_peers,
                                        ll_load_f32, ll_load_words, ll_program, ll_send, ll_store_f32,
                                        notify_peers, pipe_plan, pipe_segment_end, program_epoch,
                                        release_served_pushers, wait_ready_peers)


@triton_dist.jit
def reduce_scatter_direct_kernel(x_ptr, out_ptr, buf_ptr, ready_ptr, done_ptr, counter_ptr, Ns, CAP, tag, rank,
                                 WORLD: tl.constexpr,
                                 PUSH: tl.constexpr, BLOCK: tl.constexpr):
    """One call. ``buf``: symmetric, ``WORLD * CAP`` elements of x's dtype (slot stride ``CAP >= Ns``). Memory ordering as in all-gather."""
    pid, nprog, e, ready_val, sig = program_epoch(counter_ptr, tag, WORLD)
    nblk = tl.cdiv(Ns, BLOCK)

    bufw = acquire_buffer(buf_ptr, done_ptr + sig, rank, WORLD, e)

    # stage / push the shards the peers reduce
    for i in tl.static_range(1, WORLD):
        d = (rank + i) % WORLD
        if PUSH:
            dst = dl.symm_at(bufw, d) + rank * CAP
        else:
            dst = bufw + d * CAP
        copy_blocks(x_ptr + d * Ns, dst, Ns, pid, nprog, BLOCK)
    tok = exchange(ready_ptr + sig, rank, WORLD, ready_val)
    bufr = dl.consume_token(buf_ptr, tok)

    b = pid
    while b < nblk:
        offs = b * BLOCK + tl.arange(0, BLOCK)
        mask = offs < Ns
        acc = tl.load(x_ptr + rank * Ns + offs, mask=mask).to(tl.float32)
        for i in tl.static_range(1, WORLD):
            src = (rank + i) % WORLD
            if PUSH:
                p = bufr + src * CAP
            else:
                p = dl.symm_at(bufr, src) + rank * CAP
            acc += tl.load(p + offs, mask=mask).to(tl.float32)
        tl.store(out_ptr + offs, acc.to(out_ptr.dtype.element_ty), mask=mask)
        b += nprog

    notify_peers(done_ptr + sig, rank, WORLD, e)


@triton_dist.jit
def reduce_scatter_push_pipe_kernel(x_ptr, out_ptr, buf_ptr, ready_ptr, done_ptr, counter_ptr, Ns, CAP, tag, npush,
                                    seg_blocks, rank, WORLD: tl.constexpr, SEG: tl.constexpr, BLOCK: tl.constexpr):
    """One call of the pipelined push reduce-scatter. ``buf``: symmetric ``WORLD * CAP`` elements of x's dtype (slot
    ``[src]`` at ``src * CAP``, ``Ns <= CAP``); ``ready``: symmetric ``[npush, SEG, WORLD]``; ``done``: symmetric
    ``[npush, WORLD]``; ``counter [nprog]``.

    Same roles, block ownership, epochs and deadlock argument as ``allgather_push_pipe_kernel`` (blocks of a shard,
    ``cdiv(Ns, BLOCK)`` of them): pusher ``q`` waits ``done[q, *] == e - 1``, then per segment ``s`` and per peer
    ``d`` stores its blocks of shard ``d`` into ``d``'s slot ``[rank]`` and raises ``ready[q, s, rank]`` on ``d``.
    Reducer ``c`` (program ``npush + c``) serves pushers ``c, c + nred, ...``: per segment and served pusher it waits
    for every peer's ready, reduces ``x``'s own shard plus the peers' slots (fp32, order ``rank + 1, ...``) into
    ``out`` and at the end raises ``done[q, rank] = e`` on every peer. Pushers never wait for anything of the
    running call; reducers only for peers' pushers."""
    pid, nprog, e, ready_val, _ = program_epoch(counter_ptr, tag, WORLD)
    nblk, nseg, K = pipe_plan(Ns, npush, seg_blocks, SEG, BLOCK)
    if pid < npush:
        q = pid
        bufw = acquire_buffer(buf_ptr, done_ptr + q * WORLD, rank, WORLD, e)
        s = 0  # a while loop: interpreted scalars are 1-element arrays, range() rejects them
        while s < nseg:
            j0 = s * K
            jend = pipe_segment_end(nblk, q, npush, j0, K)
            for i in tl.static_range(1, WORLD):
                d = (rank + i) % WORLD
                dst = dl.symm_at(bufw, d) + rank * CAP
                j = j0
                while j < jend:
                    offs = (q + j * npush) * BLOCK + tl.arange(0, BLOCK)
                    mask = offs < Ns
                    v = tl.load(x_ptr + d * Ns + offs, mask=mask)
                    tl.store(dst + offs, v, mask=mask)
                    j += 1
                dl.notify(ready_ptr + (q * SEG + s) * WORLD + rank, d, ready_val, "set", "intra_node")
            s += 1
    else:
        c = pid - npush
        nred = nprog - npush
        s = 0  # a while loop: interpreted scalars are 1-element arrays, range() rejects them
        while s < nseg:
            q = c
            while q < npush:
                tok = wait_ready_peers(ready_ptr + (q * SEG + s) * WORLD, rank, WORLD, ready_val)
                bufr = dl.consume_token(buf_ptr, tok)
                j = s * K
                jend = pipe_segment_end(nblk, q, npush, j, K)
                while j < jend:
                    offs = (q + j * npush) * BLOCK + tl.arange(0, BLOCK)
                    mask = offs < Ns
                    acc = tl.load(x_ptr + rank * Ns + offs, mask=mask).to(tl.float32)
                    acc = add_peer_slots(acc, bufr, offs, mask, rank, CAP, WORLD)
                    tl.store(out_ptr + offs, acc.to(out_ptr.dtype.element_ty), mask=mask)
                    j += 1
                q += nred
            s += 1
        release_served_pushers(done_ptr, c, npush, nred, rank, WORLD, e)


@triton_dist.jit
def add_blocks(x_ptr, prev_ptr, dst_ptr, n, pid, nprog, HAS_PREV: tl.constexpr, BLOCK: tl.constexpr):
    """Ring step: ``dst[0:n] = x[0:n]`` (as fp32) ``+ prev[0:n]`` (fp32 partial, only when ``HAS_PREV``), rounded
    to dst's dtype; blocks ``pid, pid + nprog, ...``."""
    nblk = tl.cdiv(n, BLOCK)
    b = pid
    while b < nblk:
        offs = b * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        acc = tl.load(x_ptr + offs, mask=mask).to(tl.float32)
        if HAS_PREV:
            acc += tl.load(prev_ptr + offs, mask=mask)
        tl.store(dst_ptr + offs, acc.to(dst_ptr.dtype.element_ty), mask=mask)
        b += nprog


@triton_dist.jit
def reduce_scatter_ring_kernel(x_ptr, out_ptr, buf_ptr, ready_ptr, done_ptr, counter_ptr, Ns, CAP, tag, rank,
                               WORLD: tl.constexpr,
                               BLOCK: tl.constexpr):
    """One call. ``buf``: symmetric fp32, ``(WORLD - 1) * CAP`` (``Ns <= CAP``); ``ready [num_programs, WORLD]`` (slot = step);
    ``done [num_programs]`` (raised by the next rank once it consumed this rank's partials)."""
    pid, nprog, e, ready_val, sig = program_epoch(counter_ptr, tag, WORLD)
    nxt = (rank + 1) % WORLD
    prv = (rank + WORLD - 1) % WORLD

    tok = pid * 0
    if WORLD > 1:
        tok = dl.wait(done_ptr + pid, 1, "sys", "acquire", e - 1)
    bufw = dl.symm_at(dl.consume_token(buf_ptr, tok), nxt)

    for s in tl.static_range(0, WORLD - 1):
        c = (rank + 2 * WORLD - s - 1) % WORLD
        if s > 0:
            tok = dl.wait(ready_ptr + sig + s - 1, 1, "sys", "acquire", ready_val, tag_bits=TAG_BITS_C)
        bufr = dl.consume_token(buf_ptr, tok) + (s - 1) * CAP
        add_blocks(x_ptr + c * Ns, bufr, bufw + s * CAP, Ns, pid, nprog, s > 0, BLOCK)
        dl.notify(ready_ptr + sig + s, nxt, ready_val, "set", "intra_node")

    if WORLD > 1:
        tok = dl.wait(ready_ptr + sig + WORLD - 2, 1, "sys", "acquire", ready_val, tag_bits=TAG_BITS_C)
    bufr = dl.consume_token(buf_ptr, tok) + (WORLD - 2) * CAP
    add_blocks(x_ptr + rank * Ns, bufr, out_ptr, Ns, pid, nprog, WORLD > 1, BLOCK)
    if WORLD > 1:
        dl.notify(done_ptr + pid, prv, e, "set", "intra_node")


@triton_dist.jit
def reduce_scatter_ll_kernel(x_ptr, out_ptr, buf_ptr, counter_ptr, Ns, CAPW, tag, rank, WORLD: tl.constexpr,
                             BLOCK: tl.constexpr, EPW: tl.constexpr):
    """``x``: ``WORLD * Ns`` elements, ``EPW`` per 32-bit word (fp32: 1, bf16 / fp16: 2); ``out``: ``Ns``; ``buf``:
    symmetric int64 ``[2, WORLD, CAPW]`` flagged words (``cdiv(Ns, EPW) <= CAPW``); ``counter [num_programs]``.
    Each program sends its blocks of shard ``d`` to peer ``d``'s slot ``[parity, rank]``, then reduces its blocks of
    shard ``rank`` with the peers' words as they arrive (fp32: own shard, then ``rank + 1, rank + 2, ...``)."""
    pid, nprog, flag, par, nw, nblk = ll_program(counter_ptr, Ns, tag, EPW, BLOCK)

    b = pid
    while b < nblk:
        for i in tl.static_range(1, WORLD):
            d = (rank + i) % WORLD
            words = ll_load_words(x_ptr + d * Ns, b * BLOCK, Ns, BLOCK, EPW)
            ll_send(buf_ptr, (par * WORLD + rank) * CAPW, b * BLOCK, words, nw, flag, d, BLOCK)
        b += nprog

    b = pid
    while b < nblk:
        acc = ll_load_f32(x_ptr + rank * Ns, b * BLOCK, Ns, BLOCK, EPW)
        acc = ll_add_peers(acc, buf_ptr, par, b * BLOCK, nw, flag, rank, CAPW, x_ptr.dtype.element_ty, WORLD, BLOCK,
                           EPW)
        ll_store_f32(out_ptr, b * BLOCK, Ns, acc, BLOCK, EPW)
        b += nprog
