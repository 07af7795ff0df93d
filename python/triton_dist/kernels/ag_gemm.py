"""AllGather + GEMM, overlapped: ``C = all_gather(A_shard, dim=0) @ B`` (every rank gets the full ``C``).

Buffers (owned by :class:`triton_dist.ops.overlap.AGGemmContext`):

* ``a_full``: symmetric, ``WORLD * M_loc * K`` elements; chunk ``src`` (rows ``[src * M_loc, (src + 1) * M_loc)``)
  receives rank ``src``'s shard (this rank's own chunk is never written: its tiles read the shard ``x`` itself).
* ``ready``: symmetric int64 ``[WORLD, NSIG]``: ``ready[src, j] = value`` once part ``j`` of chunk ``src`` has landed
  in this rank's ``a_full`` (``NSIG`` = number of pushing programs; the GEMM waits for all ``NSIG`` at once).
* ``recv_ok``: symmetric int64 ``[WORLD]``: ``recv_ok[p] = e`` on this rank means "rank ``p`` finished reading
  its ``a_full`` for call ``e - 1``, you may push call ``e``'s chunk into it".
* ``counter``: local int64 ``[3]``: ``counter[0]`` = calls completed on this context (the epoch of the running
  call is ``counter[0] + 1``, :func:`~triton_dist.kernels.common.call_epoch`), ``counter[1]`` = programs of the
  running launch that finished (:func:`~triton_dist.kernels.common.finish_call`), ``counter[2]`` = the epoch the
  copy-engine signal kernels of the running call use.

The epoch lives in device memory, not in a kernel argument, so calls can be captured in a CUDA graph and
replayed. Protocol of call ``e`` (``value = e * 2**24 + tag``, ``tag = (M_loc * K) % 2**24``; every rank makes the
same calls in the same order, so ``e`` agrees across ranks):

1. communication side: method ``sm`` = :func:`ag_push` on ``NSIG`` extra programs of the GEMM launch itself
   (ordered after this rank's previous call by stream order); method ``ce`` (GPU) = the copy-engine sequence of
   ``ops.overlap`` (torch copies into peer views + :func:`ag_ce_signal_kernel`) on a side stream that first waits
   for the main stream. Both: raise ``recv_ok[rank] = e`` on every peer; then, per peer in rotated order
   ``rank+1, rank+2, ...``: wait for ``recv_ok[peer] == e``, store the shard into the peer's chunk ``rank`` and
   raise ``ready[rank, j] = value`` on the peer.
2. :func:`ag_gemm_kernel` (persistent): tiles are visited chunk by chunk in rank-rotated order starting with the
   local chunk, which is read from ``x`` with no wait; before a tile reads a peer's chunk ``src`` it ``dl.wait``s
   (sys scope, acquire) for ``ready[src, :] == value`` and consumes the token into the A row coordinate (TMA path)
   or the A pointer (pointer path), so none of the tile's loads can be scheduled above the wait.

Why signals can be compared for equality (no resets): a peer can only overwrite ``ready``/``recv_ok`` with the next
call's value after this rank raised ``recv_ok`` for that call, which happens after this rank's GEMM of the current
call finished. Deadlock freedom on GPU: ``sm``: push and GEMM programs are one launch of at most SM-count programs
(a cooperative launch on NVIDIA, so a grid that cannot be co-resident is a launch error), and the push programs
never wait for GEMM programs (only for peers' ``recv_ok``, raised first thing); ``ce``: the copies run on the copy
engine and the one-program signal kernels on a side stream, and the GEMM grid leaves one SM free for them.

Profiling (``PROFILE=True``, :data:`TASKS`): each GEMM program records ``wait`` (a peer chunk's ready signal) and
``tile`` (one output tile: loads, MMA, epilogue) per tile; push programs record ``push`` per peer.
"""
from __future__ import annotations

import triton.language as tl

import triton_dist
import triton_dist.language as dl

from triton_dist.kernels.common import TAG_RANGE_C, call_epoch, copy_blocks, finish_call, notify_peers, wait_peers
from triton_dist.kernels.gemm import store_tile, tile_acc_ptr, tile_acc_tma, tile_coords
from triton_dist.language.profiler import Profiler

#: profiler task names of :func:`ag_gemm_kernel` (index = task type)
TASKS = ("tile", "wait", "push")
TASK_TILE, TASK_WAIT, TASK_PUSH = tl.constexpr(0), tl.constexpr(1), tl.constexpr(2)


@triton_dist.jit
def ag_push(x_ptr, a_full_ptr, ready_ptr, recv_ok_ptr, n, value, e, rank, pid, nprog, profiler, WORLD: tl.constexpr,
            BLOCK: tl.constexpr, HIGHER_ONLY: tl.constexpr = False):
    """Push role of program ``pid`` of ``nprog`` (= NSIG): program 0 raises ``recv_ok[rank] = e`` on every peer;
    then per peer (rotated): wait for ``recv_ok[peer] == e``, store blocks ``pid, pid + nprog, ...`` of the shard
    into the peer's chunk ``rank`` and raise ``ready[rank, pid] = value`` there. Returns the profiler.

    ``HIGHER_ONLY`` (the causal sequence-parallel attention, :mod:`triton_dist.kernels.attention_sp_ag`): push only
    to the peers of a higher rank, the only ones that read this rank's chunk. The equality wait on ``recv_ok`` stays
    sound only because every peer pushed to reads (waits for) the chunk in the same call: such a peer cannot finish
    the call, and so cannot raise its next ``recv_ok``, before this push saw the current one."""
    if pid == 0:
        notify_peers(recv_ok_ptr, rank, WORLD, e)
    for i in tl.static_range(1, WORLD):
        peer = (rank + i) % WORLD
        profiler = profiler.record(True, TASK_PUSH)
        if HIGHER_ONLY:
            if rank + i < WORLD:  # peer > rank (no wrap-around)
                _push_chunk(x_ptr, a_full_ptr, ready_ptr, recv_ok_ptr, n, value, e, rank, peer, pid, nprog, BLOCK)
        else:
            _push_chunk(x_ptr, a_full_ptr, ready_ptr, recv_ok_ptr, n, value, e, rank, peer, pid, nprog, BLOCK)
        profiler = profiler.record(False, TASK_PUSH)
    return profiler


@triton_dist.jit
def _push_chunk(x_ptr, a_full_ptr, ready_ptr, recv_ok_ptr, n, value, e, rank, peer, pid, nprog, BLOCK: tl.constexpr):
    """One step of :func:`ag_push`: wait for ``recv_ok[peer] == e``, store this program's blocks of the shard into
    ``peer``'s chunk ``rank`` and raise ``ready[rank, pid] = value`` there."""
    tok = dl.wait(recv_ok_ptr + peer, 1, "sys", "acquire", e)
    dst = dl.symm_at(dl.consume_token(a_full_ptr, tok), peer) + rank * n
    copy_blocks(x_ptr, dst, n, pid, nprog, BLOCK)
    dl.notify(ready_ptr + rank * nprog + pid, peer, value, "set", "intra_node")


@triton_dist.jit
def ag_ce_signal_kernel(ready_ptr, recv_ok_ptr, counter_ptr, flag_ptr, peer, tag, rank, WORLD: tl.constexpr,
                        NSIG: tl.constexpr, STEP: tl.constexpr):
    """One-program signalling steps of the copy-engine all-gather (host copies in between, same side stream):
    ``STEP=0``: take this call's epoch ``e = counter[0] + 1`` into ``counter[2]`` and raise ``recv_ok[rank] = e``
    on every peer; ``STEP=1``: wait until ``recv_ok[peer] == e`` (before the copy into ``peer``); ``STEP=2``: raise
    ``ready[rank, :] = e * 2**24 + tag`` on ``peer`` (after the copy; the notify's system-scope release is ordered
    after the copy by stream order). ``counter[0]`` cannot advance before STEP 0 ran: the GEMM of this call needs
    the peers' chunks, which they only push after seeing this ``recv_ok``.

    The ``chunked`` method of ``gemm_rs`` (cuBLAS GEMMs, no Triton GEMM launch; its own arrays, ``NSIG=1``; the
    AG+GEMM ``chunked`` method uses 0/1 flags and stream memory operations instead) runs on the main stream:
    ``STEP=5`` first: ``e = counter[0] + 1`` into ``counter[2]``, ``flag[0:NSIG] = e * 2**24 + tag`` (a local
    int64 array that the side stream then copies into the peers' ``ready`` with the copy engine, after the data: no
    SM needed while cuBLAS holds them all), raise
    ``recv_ok[rank] = e`` on every peer and wait for every peer's ``recv_ok == e`` (each peer finished reading
    what this rank pushed in call ``e - 1``); ``STEP=3``: wait until ``ready[peer, :] == e * 2**24 + tag`` with
    ``e = counter[0] + 1`` (peer ``peer``'s data arrived; ``counter[0]`` does not move during the call);
    ``STEP=4`` (last, after the main stream joined the side stream): ``counter[0] = e``, the call is complete."""
    if STEP == 0:
        e = call_epoch(counter_ptr)
        tl.store(counter_ptr + 2, e)
        notify_peers(recv_ok_ptr, rank, WORLD, e)
    elif STEP == 1:
        e = tl.load(counter_ptr + 2)
        dl.wait(recv_ok_ptr + peer, 1, "sys", "acquire", e)
    elif STEP == 2:
        e = tl.load(counter_ptr + 2)
        for j in tl.static_range(0, NSIG):
            dl.notify(ready_ptr + rank * NSIG + j, peer, e * TAG_RANGE_C + tag, "set", "intra_node")
    elif STEP == 3:
        e = call_epoch(counter_ptr)
        dl.wait(ready_ptr + peer * NSIG, NSIG, "sys", "acquire", e * TAG_RANGE_C + tag)
    elif STEP == 4:
        e = call_epoch(counter_ptr)
        tl.atomic_xchg(counter_ptr, e, sem="release")
    else:
        e = call_epoch(counter_ptr)
        tl.store(counter_ptr + 2, e)
        for j in tl.static_range(0, NSIG):
            tl.store(flag_ptr + j, e * TAG_RANGE_C + tag)
        notify_peers(recv_ok_ptr, rank, WORLD, e)
        wait_peers(recv_ok_ptr, rank, WORLD, e)


@triton_dist.jit
def ag_gemm_kernel(a_full_ptr, b_ptr, c_ptr, ready_ptr, scale_ptr, x_ptr, recv_ok_ptr, counter_ptr, prof_ptr, M_loc,
                   N, K, stride_bk, stride_bn, stride_cm, stride_cn, tag, rank, WORLD: tl.constexpr,
                   NSIG: tl.constexpr, PUSH_PROGRAMS: tl.constexpr, COPY_BLOCK: tl.constexpr, BLOCK_M: tl.constexpr,
                   BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr, NUM_SMS: tl.constexpr,
                   USE_TMA: tl.constexpr, HAS_SCALE: tl.constexpr, PROFILE: tl.constexpr = False,
                   FLATTEN: tl.constexpr = False, TMA_STORE: tl.constexpr = False):
    """Persistent GEMM over the gathered A, optionally with the all-gather fused into the same launch.

    Grid: ``NUM_SMS + PUSH_PROGRAMS`` programs. Programs ``pid >= NUM_SMS`` (``PUSH_PROGRAMS`` == NSIG of them
    when > 0) run :func:`ag_push` on ``x`` (this rank's shard) and exit; programs ``pid < NUM_SMS`` are the GEMM
    (launched first, so on the simulator they really wait for the pushes): program ``pid`` visits tiles ``pid,
    pid + NUM_SMS, ...`` in order chunk ``(rank + c) % WORLD`` for ``c = 0, 1, ...`` (local chunk first, read from
    ``x``); each peer-chunk tile waits (sys, acquire) for its chunk's ``NSIG`` ready signals and consumes the token
    before loading A. ``C``: ``[WORLD * M_loc, N]``; ``HAS_SCALE``: ``acc * scale[0]`` (fp8). All programs of the
    launch must be co-resident (grid <= SM count). Every program ends with :func:`finish_call` (the last one
    advances ``counter[0]``). ``PROFILE``: records :data:`TASKS` into ``prof_ptr`` (a profiler buffer).
    ``FLATTEN``: the GEMM programs' tile loop and K loop are fused into one software-pipelined loop (as in
    :func:`~triton_dist.kernels.gemm.gemm_kernel`). ``TMA_STORE`` (with ``USE_TMA``; the host sets it only where
    ``M_loc`` is a multiple of ``BLOCK_M``, ``C`` has unit column stride and 16-byte aligned rows): each tile is
    stored through one tensor descriptor over ``C`` (a chunk's last tile would otherwise spill zero rows into the
    next chunk: the descriptor clips only at ``C``'s end)."""
    pid = tl.program_id(0)
    e = call_epoch(counter_ptr)
    value = e * TAG_RANGE_C + tag
    profiler = Profiler.create(prof_ptr, ENABLE_PROFILING=PROFILE)
    if pid >= NUM_SMS:
        ag_push(x_ptr, a_full_ptr, ready_ptr, recv_ok_ptr, M_loc * K, value, e, rank, pid - NUM_SMS, PUSH_PROGRAMS,
                profiler, WORLD, COPY_BLOCK)
    else:
        ag_gemm_tiles(a_full_ptr, b_ptr, c_ptr, ready_ptr, scale_ptr, x_ptr, M_loc, N, K, stride_bk, stride_bn,
                      stride_cm, stride_cn, value, rank, pid, profiler, WORLD, NSIG, BLOCK_M, BLOCK_N, BLOCK_K,
                      GROUP_M, NUM_SMS, USE_TMA, HAS_SCALE, FLATTEN, TMA_STORE)
    finish_call(counter_ptr, e)


@triton_dist.jit
def _store_c_tile(c_ptr, c_desc, acc, scale, row, off_n, row_end, N, stride_cm, stride_cn, BLOCK_M: tl.constexpr,
                  BLOCK_N: tl.constexpr, HAS_SCALE: tl.constexpr, BY_DESCRIPTOR: tl.constexpr):
    """Epilogue of one C tile at ``(row, off_n)``: ``acc * scale`` when ``HAS_SCALE``, rounded to C's dtype, stored
    through the descriptor ``c_desc`` (``BY_DESCRIPTOR``) or through pointers masked at ``row_end`` and ``N``."""
    if HAS_SCALE:
        acc = acc * scale
    if BY_DESCRIPTOR:
        c_desc.store([row, off_n], acc.to(c_ptr.dtype.element_ty))
    else:
        store_tile(c_ptr, acc, row, off_n, row_end, N, stride_cm, stride_cn, BLOCK_M, BLOCK_N)


@triton_dist.jit
def ag_gemm_tiles(a_full_ptr, b_ptr, c_ptr, ready_ptr, scale_ptr, x_ptr, M_loc, N, K, stride_bk, stride_bn, stride_cm,
                  stride_cn, value, rank, gpid, profiler, WORLD: tl.constexpr, NSIG: tl.constexpr,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
                  NUM_SMS: tl.constexpr, USE_TMA: tl.constexpr, HAS_SCALE: tl.constexpr,
                  FLATTEN: tl.constexpr = False, TMA_STORE: tl.constexpr = False):
    """GEMM role of :func:`ag_gemm_kernel` (GEMM program ``gpid`` of ``NUM_SMS``); returns the profiler.

    The program visits tiles ``gpid, gpid + NUM_SMS, ...`` of ``WORLD`` chunks in two persistent loops run one after
    the other: the local chunk's tiles (A = the shard ``x``, no wait), then the peer chunks' (A = ``a_full``, a wait
    per tile). Each loop has its own K loop with one set of tensor descriptors built before both: a single loop
    over all chunks had to build the A descriptor per tile (its base changes with the chunk), which cost about 5%
    at 2048x7168x4096 on an H200 (``benchmarks/results/2026-12-02-ag-compute``). The two loops' pipeline buffers
    are live one after the other, so shared memory does not grow. The peer descriptor spans every chunk of
    ``a_full``: a chunk's last tile may read rows of the next chunk, which land in output rows the epilogue never
    stores (pointer stores are masked at the chunk's end; the TMA store runs only where ``M_loc`` is a multiple of
    ``BLOCK_M``)."""
    tiles_m = tl.cdiv(M_loc, BLOCK_M)
    tiles_n = tl.cdiv(N, BLOCK_N)
    tiles_chunk = tiles_m * tiles_n
    num_tiles = WORLD * tiles_chunk
    if USE_TMA:
        b_desc = tl.make_tensor_descriptor(b_ptr, shape=[K, N], strides=[stride_bk, 1], block_shape=[BLOCK_K, BLOCK_N])
        x_desc = tl.make_tensor_descriptor(x_ptr, shape=[M_loc, K], strides=[K, 1], block_shape=[BLOCK_M, BLOCK_K])
        f_desc = tl.make_tensor_descriptor(a_full_ptr, shape=[WORLD * M_loc, K], strides=[K, 1],
                                           block_shape=[BLOCK_M, BLOCK_K])
    if USE_TMA and TMA_STORE:
        c_desc = tl.make_tensor_descriptor(c_ptr, shape=[WORLD * M_loc, N], strides=[stride_cm, 1],
                                           block_shape=[BLOCK_M, BLOCK_N])
    else:
        c_desc = c_ptr  # unused: tiles are stored through pointers
    scale = 1.0
    if HAS_SCALE:
        scale = tl.load(scale_ptr)
    # the local chunk (c = 0): rows rank * M_loc + [0, M_loc) of C, A read from the shard itself
    row0 = rank * M_loc
    for tile in tl.range(gpid, tiles_chunk, NUM_SMS, flatten=FLATTEN):
        pid_m, pid_n = tile_coords(tile, tiles_m, tiles_n, GROUP_M)
        loc_m = pid_m * BLOCK_M
        off_n = pid_n * BLOCK_N
        profiler = profiler.record(True, TASK_TILE)
        if USE_TMA:
            acc = tile_acc_tma(x_desc, b_desc, loc_m, off_n, K, BLOCK_M, BLOCK_N, BLOCK_K)
        else:
            acc = tile_acc_ptr(x_ptr, b_ptr, loc_m, off_n, M_loc, N, K, K, 1, stride_bk, stride_bn, BLOCK_M,
                               BLOCK_N, BLOCK_K)
        _store_c_tile(c_ptr, c_desc, acc, scale, row0 + loc_m, off_n, row0 + M_loc, N, stride_cm, stride_cn, BLOCK_M,
                      BLOCK_N, HAS_SCALE, USE_TMA and TMA_STORE)
        profiler = profiler.record(False, TASK_TILE)
    # the peer chunks c = 1 .. WORLD - 1 (chunk src = (rank + c) % WORLD), continuing this program's tile sequence:
    # its first tile index >= tiles_chunk
    first = gpid + tl.cdiv(tl.maximum(tiles_chunk - gpid, 0), NUM_SMS) * NUM_SMS
    for tile in tl.range(first, num_tiles, NUM_SMS, flatten=FLATTEN):
        c = tile // tiles_chunk
        src = (rank + c) % WORLD
        pid_m, pid_n = tile_coords(tile % tiles_chunk, tiles_m, tiles_n, GROUP_M)
        loc_m = pid_m * BLOCK_M
        row0 = src * M_loc
        off_n = pid_n * BLOCK_N
        # chunk src's rows are read only once its ready signals are seen: the token flows into the A coordinate
        profiler = profiler.record(True, TASK_WAIT)
        tok = dl.wait(ready_ptr + src * NSIG, NSIG, "sys", "acquire", value)
        profiler = profiler.record(False, TASK_WAIT)
        profiler = profiler.record(True, TASK_TILE)
        if USE_TMA:
            acc = tile_acc_tma(f_desc, b_desc, dl.consume_token(row0 + loc_m, tok), off_n, K, BLOCK_M, BLOCK_N,
                               BLOCK_K)
        else:
            acc = tile_acc_ptr(dl.consume_token(a_full_ptr + row0 * K, tok), b_ptr, loc_m, off_n, M_loc, N, K, K, 1,
                               stride_bk, stride_bn, BLOCK_M, BLOCK_N, BLOCK_K)
        _store_c_tile(c_ptr, c_desc, acc, scale, row0 + loc_m, off_n, row0 + M_loc, N, stride_cm, stride_cn, BLOCK_M,
                      BLOCK_N, HAS_SCALE, USE_TMA and TMA_STORE)
        profiler = profiler.record(False, TASK_TILE)
    return profiler


__all__ = ["ag_push", "ag_ce_signal_kernel", "ag_gemm_kernel", "ag_gemm_tiles", "TASKS"]
