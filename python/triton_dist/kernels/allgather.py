"""All-gather kernels (intra-node, SM based): ``out[r * N:(r + 1) * N] = x_r`` on every rank.

Two variants, one kernel (``PUSH`` constexpr):

* push: each program stores its blocks of ``x`` into every peer's symmetric buffer slot ``[rank]`` (remote stores
  through ``dl.symm_at``, 16-byte vectorised), raises ``ready`` on the peer, then copies the peers' slots of its own
  buffer into ``out`` as their ready signals arrive.
* pull: each program stages its blocks of ``x`` into its own symmetric buffer (region ``[world * CAP, world * CAP + N)``,
  disjoint from the push slots so that calls may alternate methods), raises ``ready`` on every peer, then loads the
  peers' staged blocks (remote loads) into ``out``.

* push_pipe (``allgather_push_pipe_kernel``): push with the copy-out overlapped: the launch's programs are split
  into ``npush`` *pushers* and ``nprog - npush`` *copiers*; pushers push segment by segment and raise a ready
  signal per (pusher, segment) while copiers copy the finished segments out (protocol in the kernel's docstring).

* ll (``allgather_ll_kernel``, lowest latency): push over flagged words (``kernels.common``, flagged words): no
  ready or done signal, the data carries the flag; double-buffered by epoch parity.

All of them write this rank's own shard straight from ``x`` to ``out``. Buffer reuse across calls: done handshake
(``kernels.common``). Signals: ``ready``/``done`` are ``[num_programs, WORLD]`` int64 symmetric arrays; ``counter`` is a
``[num_programs]`` int64 local array. The copy-engine variant lives in ``triton_dist.ops`` (host copies between peer
views, signalled with the ``ce_*`` kernels of ``kernels.common``).
"""
from __future__ import annotations

import triton.language as tl

import triton_dist
import triton_dist.language as dl

from triton_dist.kernels.common import (TAG_BITS_C, acquire_buffer, copy_blocks, ll_load_words, ll_program, ll_receive,
                                        ll_send_to_peers, ll_store_words, notify_peers, pipe_plan, pipe_segment_end,
                                        program_epoch, release_served_pushers, store_to_peers)


@triton_dist.jit
def allgather_kernel(x_ptr, out_ptr, buf_ptr, ready_ptr, done_ptr, counter_ptr, N, CAP, tag, rank, WORLD: tl.constexpr,
                     PUSH: tl.constexpr,
                     BLOCK: tl.constexpr):
    """One call of the all-gather. ``x``: ``N`` elements (this rank's shard); ``out``: ``WORLD * N``; ``buf``:
    symmetric, ``(WORLD + 1) * CAP`` elements, ``N <= CAP``. Every program participates in the signalling even when it
    owns no block. Memory ordering: ``dl.notify`` publishes all the program's earlier stores; the reader waits with
    sys-scope acquire and consumes the token into its pointers."""
    pid, nprog, e, ready_val, sig = program_epoch(counter_ptr, tag, WORLD)
    nblk = tl.cdiv(N, BLOCK)

    # previous call: every peer is done with the buffer we are about to write (push: theirs; pull: ours)
    bufw = acquire_buffer(buf_ptr, done_ptr + sig, rank, WORLD, e)
    stage = bufw + WORLD * CAP  # pull staging region, disjoint from the push slots (methods may alternate)

    b = pid
    while b < nblk:
        offs = b * BLOCK + tl.arange(0, BLOCK)
        mask = offs < N
        v = tl.load(x_ptr + offs, mask=mask)
        tl.store(out_ptr + rank * N + offs, v, mask=mask)
        if PUSH:
            store_to_peers(bufw, rank * CAP, offs, v, mask, rank, WORLD)
        else:
            tl.store(stage + offs, v, mask=mask)
        b += nprog

    notify_peers(ready_ptr + sig, rank, WORLD, ready_val)

    for i in tl.static_range(1, WORLD):
        src = (rank + WORLD - i) % WORLD
        tok = dl.wait(ready_ptr + sig + src, 1, "sys", "acquire", ready_val, tag_bits=TAG_BITS_C)
        if PUSH:
            srcp = dl.consume_token(buf_ptr, tok) + src * CAP
        else:
            srcp = dl.symm_at(dl.consume_token(buf_ptr, tok), src) + WORLD * CAP
        copy_blocks(srcp, out_ptr + src * N, N, pid, nprog, BLOCK)
        # push: src may overwrite our slot [src] next call; pull: src may re-stage its buffer
        dl.notify(done_ptr + sig + rank, src, e, "set", "intra_node")


@triton_dist.jit
def allgather_push_pipe_kernel(x_ptr, out_ptr, buf_ptr, ready_ptr, done_ptr, counter_ptr, N, CAP, tag, npush,
                               seg_blocks, rank, WORLD: tl.constexpr, SEG: tl.constexpr, BLOCK: tl.constexpr):
    """One call of the pipelined push all-gather. ``buf``: symmetric ``WORLD * CAP`` elements (slot ``[src]`` at
    ``src * CAP``, ``N <= CAP``); ``ready``: symmetric ``[npush, SEG, WORLD]`` int64; ``done``: symmetric
    ``[npush, WORLD]``; ``counter``: ``[nprog]``.

    Roles (fixed per channel: ``npush`` and the grid never change): programs ``0 .. npush - 1`` are *pushers*,
    ``npush .. nprog - 1`` *copiers*. Pusher ``q`` owns blocks ``q, q + npush, ...`` (:func:`pipe_plan`: local
    index ``j``, segment ``s`` = ``j`` in ``[s * K, (s + 1) * K)``); copier ``c`` serves the pushers ``q = c, c +
    ncopy, ...``. So a block is always pushed by the same pusher id and copied by the same copier id whatever the
    call size (fixed block ownership).

    * pusher ``q``: waits ``done[q, src] == e - 1`` from every peer (the copiers that read its slot there in the
      previous call are finished), then per segment: stores its blocks of ``x`` into every peer's slot ``[rank]``
      and into ``out``'s own shard, then raises ``ready[q, s, rank] = e * TAG_RANGE + tag`` on every peer
      (``dl.notify``: CTA barrier + system-scope release publish the segment's stores).
    * copier ``c``: per segment ``s``, per served pusher ``q``, per peer ``src``: waits ``ready[q, s, src]`` (sys
      acquire; the token is consumed into the load pointer) and copies those blocks of slot ``[src]`` to ``out``.
      At the end it raises ``done[q, rank] = e`` on every peer for every served ``q``.

    Epochs: every program bumps its own counter slot once per call, so pusher ``q`` and copier ``c`` of every rank
    hold the same ``e``. Empty segments (ragged ends, pushers without blocks) are signalled all the same, so the
    copiers' waits never depend on the data layout beyond ``(N, channel)``, which every rank shares.

    Deadlock freedom. Pushers wait only on ``done`` of the *previous* call: it is raised by the peers' copiers of
    call ``e - 1``, which only waited on pushers of call ``e - 1``; by induction over calls every pusher of call
    ``e`` finishes once it is resident, without waiting for any program of call ``e`` (in particular never for a
    copier of the same call). Copiers wait only for pushers of call ``e`` on peers, so they finish once those ran.
    No wait cycle exists. Residency: with all programs co-resident (grid <= SM count) that is all; if a rank's grid
    is only partly resident (other kernels hold SMs), pushers have the lowest program ids and blocks are
    dispatched in id order, so a resident copier implies its rank's pushers were dispatched before it: copiers can
    never hold every slot while a pusher of the same rank waits to be scheduled. Triton's sequential interpreter
    (program 0, 1, ...) also works: pushers run first and need nothing of the running call.
    """
    pid, nprog, e, ready_val, _ = program_epoch(counter_ptr, tag, WORLD)
    nblk, nseg, K = pipe_plan(N, npush, seg_blocks, SEG, BLOCK)
    if pid < npush:
        q = pid
        bufw = acquire_buffer(buf_ptr, done_ptr + q * WORLD, rank, WORLD, e)
        s = 0  # a while loop: interpreted scalars are 1-element arrays, range() rejects them
        while s < nseg:
            j = s * K
            jend = pipe_segment_end(nblk, q, npush, j, K)
            while j < jend:
                offs = (q + j * npush) * BLOCK + tl.arange(0, BLOCK)
                mask = offs < N
                v = tl.load(x_ptr + offs, mask=mask)
                tl.store(out_ptr + rank * N + offs, v, mask=mask)
                store_to_peers(bufw, rank * CAP, offs, v, mask, rank, WORLD)
                j += 1
            notify_peers(ready_ptr + (q * SEG + s) * WORLD, rank, WORLD, ready_val)
            s += 1
    else:
        c = pid - npush
        ncopy = nprog - npush
        s = 0  # a while loop: interpreted scalars are 1-element arrays, range() rejects them
        while s < nseg:
            q = c
            while q < npush:
                j0 = s * K
                jend = pipe_segment_end(nblk, q, npush, j0, K)
                for i in tl.static_range(1, WORLD):
                    src = (rank + WORLD - i) % WORLD
                    tok = dl.wait(ready_ptr + (q * SEG + s) * WORLD + src, 1, "sys", "acquire", ready_val,
                                  tag_bits=TAG_BITS_C)
                    srcp = dl.consume_token(buf_ptr, tok) + src * CAP
                    j = j0
                    while j < jend:
                        offs = (q + j * npush) * BLOCK + tl.arange(0, BLOCK)
                        mask = offs < N
                        v = tl.load(srcp + offs, mask=mask)
                        tl.store(out_ptr + src * N + offs, v, mask=mask)
                        j += 1
                q += ncopy
            s += 1
        release_served_pushers(done_ptr, c, npush, ncopy, rank, WORLD, e)


@triton_dist.jit
def allgather_ll_kernel(x_ptr, out_ptr, buf_ptr, counter_ptr, N, CAPW, tag, rank, WORLD: tl.constexpr,
                        BLOCK: tl.constexpr, EPW: tl.constexpr):
    """``x``: ``N`` elements, ``EPW`` per 32-bit word (4-, 2- or 1-byte dtypes: 1, 2, 4); ``out``: ``WORLD * N``;
    ``buf``: symmetric int64 ``[2, WORLD, CAPW]`` flagged words (``cdiv(N, EPW) <= CAPW``); ``counter
    [num_programs]``. Each program sends its blocks of words to every peer's slot ``[parity, rank]`` and copies them
    to its own shard of ``out``, then copies the peers' words out of its own buffer as they arrive."""
    pid, nprog, flag, par, nw, nblk = ll_program(counter_ptr, N, tag, EPW, BLOCK)

    b = pid
    while b < nblk:
        words = ll_load_words(x_ptr, b * BLOCK, N, BLOCK, EPW)
        ll_send_to_peers(buf_ptr, par, b * BLOCK, words, nw, flag, rank, CAPW, WORLD, BLOCK)
        ll_store_words(out_ptr + rank * N, b * BLOCK, N, words, BLOCK, EPW)
        b += nprog

    b = pid
    while b < nblk:
        for i in tl.static_range(1, WORLD):
            src = (rank + i) % WORLD
            words = ll_receive(buf_ptr, (par * WORLD + src) * CAPW, b * BLOCK, nw, flag, BLOCK)
            ll_store_words(out_ptr + src * N, b * BLOCK, N, words, BLOCK, EPW)
        b += nprog
