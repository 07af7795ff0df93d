"""All-reduce kernels (intra-node, SM based), fp32 accumulation: ``out = sum_r x_r`` on every rank.

* one-shot (``allreduce_one_shot_kernel``, latency): every program stores its blocks of ``x`` into each peer's
  symmetric buffer slot ``[parity, rank]`` (parity = epoch % 2), raises ``ready[parity]`` on the peers, waits for
  the peers' ready signals and reduces ``x`` plus the peers' slots of its own buffer. Double buffering by parity
  means no wait before the remote stores: when program ``p`` of rank B reaches call ``e + 2`` it has seen A's
  call-``e + 1`` ready signal, which A raised only after its call ``e`` had finished reading slot parity ``e % 2``.
* two-shot (``allreduce_two_shot_kernel``, bandwidth): reduce-scatter by push (shard ``d`` of ``x`` into peer
  ``d``'s slot ``[rank]``), local fp32 reduction of shard ``rank``, then all-gather by push of the reduced shard
  (into the peers' second buffer half); done handshake for reuse.

* ``ll`` (``allreduce_ll_kernel``, lowest latency): one-shot over flagged words (``kernels.common``, flagged
  words): every program sends its words of ``x`` to each peer's slot ``[parity, rank]`` with ``dl.store_flagged``,
  then waits for the peers' words in its own buffer with ``dl.load_flagged`` and reduces them with ``x``. No ready
  signal, no fence: the data carries the flag. Same summation order as one-shot (bit-identical results).
* ``two_shot_pipe`` (ops layer) is no kernel of its own: the reduce-scatter and all-gather ``push_pipe`` kernels
  back to back (a fused version that pipelined only the reduce-scatter phase measured 4-7% slower than two-shot at
  64 MiB - 1 GiB on 2x H200).

Shards for two-shot: ``Ns = shard`` elements (host rounds ``ceil(N / WORLD)`` up to 128); shard ``d`` covers
``[d * Ns, min((d + 1) * Ns, N))``.
"""
from __future__ import annotations

import triton.language as tl

import triton_dist
import triton_dist.language as dl

from triton_dist.kernels.common import (TAG_BITS_C, acquire_buffer, add_peer_slots, exchange, ll_add_peers, ll_load_f32,
                                        ll_load_words, ll_program, ll_send_to_peers, ll_store_f32, notify_peers,
                                        program_epoch, store_to_peers)


@triton_dist.jit
def allreduce_one_shot_kernel(x_ptr, out_ptr, buf_ptr, ready_ptr, counter_ptr, N, CAP, tag, rank, WORLD: tl.constexpr,
                              BLOCK: tl.constexpr):
    """``buf``: symmetric ``[2, WORLD, CAP]`` of x's dtype (``N <= CAP``); ``ready``: symmetric
    ``[2, num_programs, WORLD]`` int64; ``counter [num_programs]``."""
    pid, nprog, e, ready_val, _ = program_epoch(counter_ptr, tag, WORLD)
    par = e % 2
    sig = (par * nprog + pid) * WORLD
    slot = buf_ptr + (par * WORLD) * CAP
    nblk = tl.cdiv(N, BLOCK)

    b = pid
    while b < nblk:
        offs = b * BLOCK + tl.arange(0, BLOCK)
        mask = offs < N
        v = tl.load(x_ptr + offs, mask=mask)
        store_to_peers(slot, rank * CAP, offs, v, mask, rank, WORLD)
        b += nprog
    tok = exchange(ready_ptr + sig, rank, WORLD, ready_val)
    slotr = dl.consume_token(slot, tok)

    b = pid
    while b < nblk:
        offs = b * BLOCK + tl.arange(0, BLOCK)
        mask = offs < N
        acc = tl.load(x_ptr + offs, mask=mask).to(tl.float32)
        acc = add_peer_slots(acc, slotr, offs, mask, rank, CAP, WORLD)
        tl.store(out_ptr + offs, acc.to(out_ptr.dtype.element_ty), mask=mask)
        b += nprog


@triton_dist.jit
def allreduce_two_shot_kernel(x_ptr, out_ptr, buf_ptr, ready_ptr, done_ptr, counter_ptr, N, Ns, CAP, tag, rank,
                              WORLD: tl.constexpr,
                              BLOCK: tl.constexpr):
    """``buf``: symmetric ``2 * WORLD * CAP`` elements of x's dtype (``Ns <= CAP``; first half: reduce-scatter slots
    ``[src, CAP]``, second: all-gather slots); ``ready``: symmetric ``[2, num_programs, WORLD]``; ``done [num_programs, WORLD]``."""
    pid, nprog, e, ready_val, sig = program_epoch(counter_ptr, tag, WORLD)
    sig2 = (nprog + pid) * WORLD
    nblk = tl.cdiv(Ns, BLOCK)
    ag = buf_ptr + WORLD * CAP

    bufw = acquire_buffer(buf_ptr, done_ptr + sig, rank, WORLD, e)

    # 1. reduce-scatter, push: shard d -> peer d, slot [rank]
    for i in tl.static_range(1, WORLD):
        d = (rank + i) % WORLD
        dst = dl.symm_at(bufw, d) + rank * CAP
        b = pid
        while b < nblk:
            offs = b * BLOCK + tl.arange(0, BLOCK)
            mask = (offs < Ns) & (d * Ns + offs < N)
            v = tl.load(x_ptr + d * Ns + offs, mask=mask)
            tl.store(dst + offs, v, mask=mask)
            b += nprog
    tok = exchange(ready_ptr + sig, rank, WORLD, ready_val)
    bufr = dl.consume_token(buf_ptr, tok)
    agw = dl.consume_token(ag, tok)

    # 2. reduce shard `rank` (fp32), write it locally and push it to every peer's all-gather slot [rank]
    b = pid
    while b < nblk:
        offs = b * BLOCK + tl.arange(0, BLOCK)
        mask = (offs < Ns) & (rank * Ns + offs < N)
        acc = tl.load(x_ptr + rank * Ns + offs, mask=mask).to(tl.float32)
        acc = add_peer_slots(acc, bufr, offs, mask, rank, CAP, WORLD)
        r = acc.to(out_ptr.dtype.element_ty)
        tl.store(out_ptr + rank * Ns + offs, r, mask=mask)
        store_to_peers(agw, rank * CAP, offs, r.to(x_ptr.dtype.element_ty), mask, rank, WORLD)
        b += nprog
    notify_peers(ready_ptr + sig2, rank, WORLD, ready_val)

    # 3. all-gather: copy the peers' reduced shards out of our second buffer half
    for i in tl.static_range(1, WORLD):
        src = (rank + WORLD - i) % WORLD
        tok = dl.wait(ready_ptr + sig2 + src, 1, "sys", "acquire", ready_val, tag_bits=TAG_BITS_C)
        agr = dl.consume_token(ag, tok) + src * CAP
        b = pid
        while b < nblk:
            offs = b * BLOCK + tl.arange(0, BLOCK)
            mask = (offs < Ns) & (src * Ns + offs < N)
            v = tl.load(agr + offs, mask=mask)
            tl.store(out_ptr + src * Ns + offs, v.to(out_ptr.dtype.element_ty), mask=mask)
            b += nprog
        dl.notify(done_ptr + sig + rank, src, e, "set", "intra_node")


@triton_dist.jit
def allreduce_ll_kernel(x_ptr, out_ptr, buf_ptr, counter_ptr, N, CAPW, tag, rank, WORLD: tl.constexpr,
                        BLOCK: tl.constexpr, EPW: tl.constexpr):
    """``x``, ``out``: ``N`` elements, ``EPW`` per 32-bit word (fp32: 1, bf16 / fp16: 2); ``buf``: symmetric int64
    ``[2, WORLD, CAPW]`` flagged words (``cdiv(N, EPW) <= CAPW``); ``counter [num_programs]``. ``BLOCK`` words per
    block; block ``b`` belongs to program ``b % num_programs`` on every rank."""
    pid, nprog, flag, par, nw, nblk = ll_program(counter_ptr, N, tag, EPW, BLOCK)

    b = pid
    while b < nblk:
        words = ll_load_words(x_ptr, b * BLOCK, N, BLOCK, EPW)
        ll_send_to_peers(buf_ptr, par, b * BLOCK, words, nw, flag, rank, CAPW, WORLD, BLOCK)
        b += nprog

    b = pid
    while b < nblk:
        acc = ll_load_f32(x_ptr, b * BLOCK, N, BLOCK, EPW)
        acc = ll_add_peers(acc, buf_ptr, par, b * BLOCK, nw, flag, rank, CAPW, x_ptr.dtype.element_ty, WORLD, BLOCK,
                           EPW)
        ll_store_f32(out_ptr, b * BLOCK, N, acc, BLOCK, EPW)
        b += nprog
