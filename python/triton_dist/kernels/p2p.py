"""Point-to-point send/recv kernels (pipeline parallelism), intra-node, signalled.

``p2p_send_kernel`` (on the sender) stores ``x`` into the receiver's symmetric buffer slot ``[sender]`` and raises
``ready[pid, sender]`` there; ``p2p_recv_kernel`` (on the receiver) waits for it, copies the slot into ``out`` and
raises ``done[pid, receiver]`` on the sender. One message per (sender, receiver) pair may be in flight: a send waits
(``done == e - 1``) until the receiver consumed the previous message of that pair, so a send never waits for the
matching recv of the same message (send-then-recv on both sides of a pair cannot deadlock).
Epochs: ``send_counter [WORLD, num_programs]`` (by destination) and ``recv_counter [WORLD, num_programs]`` (by
source), both local, so each (pair, program) has the same message number on both sides.
"""
from __future__ import annotations

import triton.language as tl

import triton_dist
import triton_dist.language as dl

from triton_dist.kernels.common import TAG_BITS_C, TAG_RANGE_C, copy_blocks, next_epoch


@triton_dist.jit
def p2p_send_kernel(x_ptr, buf_ptr, ready_ptr, done_ptr, counter_ptr, N, CAP, dst, tag, rank, WORLD: tl.constexpr,
                    BLOCK: tl.constexpr):
    """``buf``: symmetric ``[WORLD, CAP]``; ``ready``/``done``: symmetric ``[num_programs, WORLD]`` int64."""
    pid = tl.program_id(0)
    nprog = tl.num_programs(0)
    e = next_epoch(counter_ptr, dst * nprog + pid)
    sig = pid * WORLD
    tok = dl.wait(done_ptr + sig + dst, 1, "sys", "acquire", e - 1)
    rbuf = dl.symm_at(dl.consume_token(buf_ptr, tok), dst) + rank * CAP
    copy_blocks(x_ptr, rbuf, N, pid, nprog, BLOCK)
    dl.notify(ready_ptr + sig + rank, dst, e * TAG_RANGE_C + tag, "set", "intra_node")


@triton_dist.jit
def p2p_recv_kernel(out_ptr, buf_ptr, ready_ptr, done_ptr, counter_ptr, N, CAP, src, tag, rank, WORLD: tl.constexpr,
                    BLOCK: tl.constexpr):
    """Receive one message from ``src`` into ``out`` (``N`` elements)."""
    pid = tl.program_id(0)
    nprog = tl.num_programs(0)
    e = next_epoch(counter_ptr, src * nprog + pid)
    sig = pid * WORLD
    tok = dl.wait(ready_ptr + sig + src, 1, "sys", "acquire", e * TAG_RANGE_C + tag, tag_bits=TAG_BITS_C)
    lbuf = dl.consume_token(buf_ptr, tok) + src * CAP
    copy_blocks(lbuf, out_ptr, N, pid, nprog, BLOCK)
    dl.notify(done_ptr + sig + rank, src, e, "set", "intra_node")
