"""All-gather kernels (intra-node, SM based): ``out[r * N:(r + 1) * N] = x_r`` on every rank.

Two variants, one kernel (``PUSH`` constexpr):

* push: each program stores its blocks of ``x`` into every peer's symmetric buffer slot ``[rank]`` (remote stores
  through ``dl.symm_at``, 16-byte vectorised), raises ``ready`` on the peer, then copies the peers' slots of its own
  buffer into ``out`` as their ready signals arrive.
* pull: each program stages its blocks of ``x`` into its own symmetric buffer (region ``[world * CAP, world * CAP + N)``,
  disjoint from the push slots so that calls may alternate methods), raises ``ready`` on every peer, then loads the
  peers' staged blocks (remote loads) into ``out``.

Both write this rank's own shard straight from ``x`` to ``out``. Buffer reuse across calls: done handshake
(``kernels.common``). Signals: ``ready``/``done`` are ``[num_programs, WORLD]`` int64 symmetric arrays; ``counter`` is a
``[num_programs]`` int64 local array. The copy-engine variant lives in ``triton_dist.ops`` (host copies between peer
views, signalled with the ``ce_*`` kernels of ``kernels.common``).
"""
from __future__ import annotations

import triton.language as tl

import triton_dist
import triton_dist.language as dl

from triton_dist.kernels.common import acquire_buffer, copy_blocks, notify_peers, program_epoch, store_to_peers


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
        tok = dl.wait(ready_ptr + sig + src, 1, "sys", "acquire", ready_val)
        if PUSH:
            srcp = dl.consume_token(buf_ptr, tok) + src * CAP
        else:
            srcp = dl.symm_at(dl.consume_token(buf_ptr, tok), src) + WORLD * CAP
        copy_blocks(srcp, out_ptr + src * N, N, pid, nprog, BLOCK)
        # push: src may overwrite our slot [src] next call; pull: src may re-stage its buffer
        dl.notify(done_ptr + sig + rank, src, e, "set", "intra_node")
