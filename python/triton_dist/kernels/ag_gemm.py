"""AllGather + GEMM, overlapped: ``C = all_gather(A_shard, dim=0) @ B`` (every rank gets the full ``C``).

Buffers (owned by :class:`triton_dist.ops.overlap.AGGemmContext`):

* ``a_full``: symmetric, ``WORLD * M_loc * K`` elements; chunk ``src`` (rows ``[src * M_loc, (src + 1) * M_loc)``)
  receives rank ``src``'s shard.
* ``ready``: symmetric int64 ``[WORLD, NSIG]``: ``ready[src, j] = value`` once part ``j`` of chunk ``src`` has landed
  in this rank's ``a_full`` (``NSIG`` = number of pushing programs; the GEMM waits for all ``NSIG`` at once).
* ``recv_ok``: symmetric int64 ``[WORLD]``: ``recv_ok[p] = epoch`` on this rank means "rank ``p`` finished reading
  its ``a_full`` for the previous call, you may push call ``epoch``'s chunk into it".

Protocol of call ``epoch`` (``value = epoch * 2**24 + (M_loc * K) % 2**24``; the host counts epochs, all ranks make
the same calls in the same order):

1. communication side: method ``sm`` = :func:`ag_push` on the first ``NSIG`` programs of the GEMM launch itself
   (ordered after this rank's previous call by stream order); method ``ce`` (GPU) = the copy-engine sequence of
   ``ops.overlap`` (torch copies into peer views + :func:`ag_ce_signal_kernel`) on a side stream that first waits
   for the main stream: raise ``recv_ok[rank] = epoch`` on every peer; copy the shard into
   the local chunk and raise local ``ready[rank, :]``; then, per peer in rotated order ``rank+1, rank+2, ...``:
   wait for ``recv_ok[peer] == epoch``, store the shard into the peer's chunk ``rank`` (``dl.symm_at``) and raise
   ``ready[rank, j]`` on the peer.
2. :func:`ag_gemm_kernel` (persistent): tiles are visited chunk by chunk in rank-rotated order starting with the
   local chunk; before a tile reads chunk ``src`` it ``dl.wait``s (sys scope, acquire) for ``ready[src, :] ==
   value`` and consumes the token into the A pointer (pointer path) or the A row coordinate (TMA path), so none of
   the tile's loads can be scheduled above the wait.

Why signals can be compared for equality (no resets): a peer can only overwrite ``ready``/``recv_ok`` with the next
call's value after this rank raised ``recv_ok`` for that call, which happens after this rank's GEMM of the current
call finished. Deadlock freedom on GPU: ``sm``: push and GEMM programs are one launch of at most SM-count programs, so all are
co-resident and the push programs never wait for GEMM programs (only for peers' push programs' ``recv_ok``, raised
first thing); ``ce``: the copies run on the copy engine and the one-program signal kernels on a side stream, and
the GEMM grid leaves one SM free for them.
"""
from __future__ import annotations

import triton.language as tl

import triton_dist
import triton_dist.language as dl

from triton_dist.kernels.common import copy_blocks, notify_peers
from triton_dist.kernels.gemm import store_tile, tile_acc_ptr, tile_acc_tma, tile_coords, tma_descriptors


@triton_dist.jit
def ag_push(x_ptr, a_full_ptr, ready_ptr, recv_ok_ptr, n, value, epoch, rank, pid, nprog, WORLD: tl.constexpr,
            BLOCK: tl.constexpr):
    """Push role of program ``pid`` of ``nprog`` (= NSIG): copy blocks ``pid, pid + nprog, ...`` of the shard into
    the local chunk and raise local ``ready[rank, pid]``; then per peer (rotated): wait for ``recv_ok[peer] ==
    epoch``, store the blocks into the peer's chunk ``rank`` and raise ``ready[rank, pid]`` there. Program 0 first
    raises ``recv_ok[rank] = epoch`` on every peer."""
    if pid == 0:
        notify_peers(recv_ok_ptr, rank, WORLD, epoch)
    copy_blocks(x_ptr, a_full_ptr + rank * n, n, pid, nprog, BLOCK)
    dl.notify(ready_ptr + rank * nprog + pid, rank, value, "set", "intra_node")
    for i in tl.static_range(1, WORLD):
        peer = (rank + i) % WORLD
        tok = dl.wait(recv_ok_ptr + peer, 1, "sys", "acquire", epoch)
        dst = dl.symm_at(dl.consume_token(a_full_ptr, tok), peer) + rank * n
        copy_blocks(x_ptr, dst, n, pid, nprog, BLOCK)
        dl.notify(ready_ptr + rank * nprog + pid, peer, value, "set", "intra_node")


@triton_dist.jit
def ag_push_kernel(x_ptr, a_full_ptr, ready_ptr, recv_ok_ptr, n, value, epoch, rank, WORLD: tl.constexpr,
                   BLOCK: tl.constexpr):
    """Stand-alone SM all-gather for AG+GEMM (grid = NSIG programs; e.g. on a side stream before a GEMM launched
    with ``PUSH_PROGRAMS=0``). ``x``: this rank's contiguous shard (``n`` elements); ``a_full``: symmetric."""
    ag_push(x_ptr, a_full_ptr, ready_ptr, recv_ok_ptr, n, value, epoch, rank, tl.program_id(0), tl.num_programs(0),
            WORLD, BLOCK)


@triton_dist.jit
def ag_ce_signal_kernel(ready_ptr, recv_ok_ptr, peer, value, epoch, rank, WORLD: tl.constexpr, NSIG: tl.constexpr,
                        STEP: tl.constexpr):
    """One-program signalling steps of the copy-engine all-gather (host copies in between, same side stream):
    ``STEP=0``: raise ``recv_ok[rank] = epoch`` on every peer and ``ready[rank, :] = value`` locally (after the local
    copy); ``STEP=1``: wait until ``recv_ok[peer] == epoch`` (before the copy into ``peer``); ``STEP=2``: raise
    ``ready[rank, :] = value`` on ``peer`` (after the copy; the notify's system-scope release is ordered after the
    copy by stream order)."""
    if STEP == 0:
        notify_peers(recv_ok_ptr, rank, WORLD, epoch)
        for j in tl.static_range(0, NSIG):
            dl.notify(ready_ptr + rank * NSIG + j, rank, value, "set", "intra_node")
    elif STEP == 1:
        dl.wait(recv_ok_ptr + peer, 1, "sys", "acquire", epoch)
    else:
        for j in tl.static_range(0, NSIG):
            dl.notify(ready_ptr + rank * NSIG + j, peer, value, "set", "intra_node")


@triton_dist.jit
def ag_gemm_kernel(a_full_ptr, b_ptr, c_ptr, ready_ptr, scale_ptr, x_ptr, recv_ok_ptr, M_loc, N, K, stride_bk,
                   stride_bn, stride_cm, stride_cn, value, epoch, rank, WORLD: tl.constexpr, NSIG: tl.constexpr,
                   PUSH_PROGRAMS: tl.constexpr, COPY_BLOCK: tl.constexpr, BLOCK_M: tl.constexpr,
                   BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr, NUM_SMS: tl.constexpr,
                   USE_TMA: tl.constexpr, HAS_SCALE: tl.constexpr):
    """Persistent GEMM over the gathered A (``a_full``: ``[WORLD * M_loc, K]`` contiguous), optionally with the
    all-gather fused into the same launch.

    Grid: ``NUM_SMS + PUSH_PROGRAMS`` programs. Programs ``pid >= NUM_SMS`` (``PUSH_PROGRAMS`` == NSIG of them
    when > 0) run :func:`ag_push` on ``x`` (this rank's shard) and exit; programs ``pid < NUM_SMS`` are the GEMM
    (launched first, so on the simulator they really wait for the pushes): program ``pid`` visits tiles ``pid,
    pid + NUM_SMS, ...`` in order chunk ``(rank + c) % WORLD`` for ``c = 0, 1, ...``
    (local chunk first); each tile waits (sys, acquire) for its chunk's ``NSIG`` ready signals and consumes the
    token into the A pointer / row coordinate before loading A. ``C``: ``[WORLD * M_loc, N]``; ``HAS_SCALE``:
    ``acc * scale[0]`` (fp8). All programs of the launch must be co-resident (grid <= SM count)."""
    pid = tl.program_id(0)
    if pid >= NUM_SMS:
        ag_push(x_ptr, a_full_ptr, ready_ptr, recv_ok_ptr, M_loc * K, value, epoch, rank, pid - NUM_SMS,
                PUSH_PROGRAMS, WORLD, COPY_BLOCK)
    else:
        ag_gemm_tiles(a_full_ptr, b_ptr, c_ptr, ready_ptr, scale_ptr, M_loc, N, K, stride_bk, stride_bn, stride_cm,
                      stride_cn, value, rank, pid, WORLD, NSIG, BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M, NUM_SMS, USE_TMA,
                      HAS_SCALE)


@triton_dist.jit
def ag_gemm_tiles(a_full_ptr, b_ptr, c_ptr, ready_ptr, scale_ptr, M_loc, N, K, stride_bk, stride_bn, stride_cm,
                  stride_cn, value, rank, gpid, WORLD: tl.constexpr, NSIG: tl.constexpr, BLOCK_M: tl.constexpr,
                  BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr, NUM_SMS: tl.constexpr,
                  USE_TMA: tl.constexpr, HAS_SCALE: tl.constexpr):
    """GEMM role of :func:`ag_gemm_kernel` (GEMM program ``gpid`` of ``NUM_SMS``)."""
    tiles_m = tl.cdiv(M_loc, BLOCK_M)
    tiles_n = tl.cdiv(N, BLOCK_N)
    tiles_chunk = tiles_m * tiles_n
    num_tiles = WORLD * tiles_chunk
    if USE_TMA:
        a_desc, b_desc = tma_descriptors(a_full_ptr, b_ptr, WORLD * M_loc, N, K, K, stride_bk, BLOCK_M, BLOCK_N,
                                         BLOCK_K)
    scale = 1.0
    if HAS_SCALE:
        scale = tl.load(scale_ptr)
    for tile in range(gpid, num_tiles, NUM_SMS):
        c = tile // tiles_chunk
        src = (rank + c) % WORLD
        pid_m, pid_n = tile_coords(tile % tiles_chunk, tiles_m, tiles_n, GROUP_M)
        row0 = src * M_loc
        off_m = row0 + pid_m * BLOCK_M
        off_n = pid_n * BLOCK_N
        tok = dl.wait(ready_ptr + src * NSIG, NSIG, "sys", "acquire", value)
        if USE_TMA:
            acc = tile_acc_tma(a_desc, b_desc, dl.consume_token(off_m, tok), off_n, K, BLOCK_M, BLOCK_N, BLOCK_K)
        else:
            acc = tile_acc_ptr(dl.consume_token(a_full_ptr, tok), b_ptr, off_m, off_n, row0 + M_loc, N, K, K, 1,
                               stride_bk, stride_bn, BLOCK_M, BLOCK_N, BLOCK_K)
        if HAS_SCALE:
            acc = acc * scale
        store_tile(c_ptr, acc, off_m, off_n, row0 + M_loc, N, stride_cm, stride_cn, BLOCK_M, BLOCK_N)


__all__ = ["ag_push", "ag_push_kernel", "ag_ce_signal_kernel", "ag_gemm_kernel", "ag_gemm_tiles"]
