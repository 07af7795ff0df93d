"""Device code of the tensor-parallel MoE ops, overlapped: ``ag_group_gemm`` (the all-gather of the tokens fused with
the first grouped GEMM) and ``group_gemm_rs`` (the second grouped GEMM fused with the top-k reduce and the
reduce-scatter). The host side is :mod:`triton_dist.ops.moe_tp`; the protocol is in docs/moe.md ("Tensor
parallelism").

Tensor parallelism splits every expert's columns: rank ``r`` holds ``w_gate_up[:, :, r-th slice]`` and ``w_down[:,
r-th slice, :]`` of all ``E`` experts, and every rank computes every token's experts on its slice. Tokens arrive
sequence-sharded (``T`` per rank, the same ``T`` on every rank), so the first GEMM needs every rank's tokens (an
all-gather) and the second GEMM's per-rank partial sums are reduced and scattered back to the token's owner.

**The TP layout** (rows of the gathered tokens' routing, ``ROWS = WORLD * T * TOPK``): the MoE routing layout of
all ``WORLD * T`` gathered tokens (expert-major: expert ``e``'s rows are ``[expert_offsets[e - 1],
expert_offsets[e])``, the ``offs`` convention of ``torch._grouped_mm``), and within an expert by source rank, then
token, then slot. ``seg_offsets [E * WORLD]`` int32 are the cumulative end rows of the *segments* ``(e, s)`` (index
``e * WORLD + s``): the rows of expert ``e`` whose token came from rank ``s`` (``expert_offsets[e] ==
seg_offsets[e * WORLD + WORLD - 1]``). ``row_pairs [ROWS]`` int32: row -> gathered pair ``g * TOPK + j`` (token
``g = s * T + t``). The host builds it with the one-device routing kernels over virtual expert ids ``e * WORLD +
g // T`` (:mod:`triton_dist.kernels.moe_route`) and :func:`invert_rows_kernel`. A tile never spans two segments,
so it reads the tokens of ONE source rank.

:func:`ag_group_gemm_kernel` (one launch, ``NUM_SMS + PUSH_PROGRAMS`` programs, all co-resident):

1. push programs (``pid >= NUM_SMS``): :func:`~triton_dist.kernels.ag_gemm.ag_push` -- the AG+GEMM protocol: raise
   ``recv_ok[rank] = e`` on every peer, then per peer (rotated) wait for its ``recv_ok == e``, store this rank's ``x``
   into the peer's ``a_full`` chunk ``rank`` and raise ``ready[rank, pid] = value`` there (system-scope release
   after the stores).
2. GEMM programs (``pid < NUM_SMS``, persistent): tiles in source order ``rank, rank + 1, ...`` (the local tokens
   first, read from ``x`` with no wait), within a source by expert, then column block; program ``p`` takes tiles
   ``p, p + NUM_SMS, ...`` of that list. A tile of a peer's segment first waits (sys scope, acquire) for that
   source's ``NSIG`` ready signals and consumes the token into its A pointer; its rows are gathered through
   ``row_pairs`` (pointer loads: row ``r`` reads token ``row_pairs[r] // TOPK - s * T`` of source ``s``'s chunk).
   ``h[r] = x_g @ w[e]`` (fp32 accumulation) is stored in layout order.

:func:`group_gemm_rs_kernel` (one launch, ``NUM_SMS + RED_PROGRAMS`` programs, all co-resident):

1. GEMM programs: ``y[r] = inter[r] @ w[e]`` over the same segments, sources in the order ``rank + 1, rank + 2,
   ..., rank`` (peers' tokens first, the own last), ``y`` in the output dtype (what a per-expert matmul returns);
   after each tile ``dl.notify(done[s], +1, gpu scope)`` (a CTA barrier, then a cumulative release: the tile's
   stores are visible before the count).
2. reduce programs (``pid >= NUM_SMS``; program ``j`` owns tokens ``j, j + RED_PROGRAMS, ...`` of every peer):
   program 0 first raises ``rs_ok[rank] = e`` on every peer (this rank finished reading its stage in call ``e - 1``).
   Then per peer ``s`` in the GEMM's order: wait (gpu, acquire) until ``done[s]`` equals source ``s``'s tile count
   (computed from ``seg_offsets``) and for the peer's ``rs_ok == e``, compute each owned token's partial ``sum_j
   w[g, j] * y[dest[g, j]]`` (fp32, slots in order, out-of-range ids left out), round it to the output dtype into the
   peer's ``stage[rank, t]`` (``dl.symm_at``) and raise ``ready[rank, j] = value`` on it.
3. every program (GEMM programs after their tiles, reduce programs after the peers): wait until ``done[rank]`` is
   complete and every peer's ``ready[q, :] == value``, then for tokens ``pid, pid + programs, ...``: ``out[t] = own
   partial + sum_q stage[q, t]`` in fp32 (peers in the order ``rank + 1, ...``), rounded once. The own tokens'
   reduce thus runs on the whole grid (at world 1 it is the whole reduce).
4. the last program to finish resets ``done[:]`` and advances the epoch counter (``finish_call``).

Deadlock freedom: the ag_group_gemm push programs wait only for ``recv_ok`` (raised first thing by every rank), the
GEMM programs only for the pushes; in group_gemm_rs no program waits before its GEMM tiles are done, reduce programs
wait for local GEMM tiles and ``rs_ok`` (raised first thing), and the final reduce for the local tiles and the peers'
reduce programs, which wait for nothing of this rank's final reduce. Every program of a launch must be resident at
once (a cooperative launch on NVIDIA; ranks sharing a GPU each get their SM share). Reuse: signals carry ``e * 2**24 + tag`` and are compared for equality; ``a_full`` and
``stage`` are written for call ``e`` only after their owner raised ``recv_ok`` / ``rs_ok == e``; ``done`` is reset
at the end of every launch.
"""
from __future__ import annotations

import triton.language as tl

import triton_dist
import triton_dist.language as dl

from triton_dist.kernels.ag_gemm import ag_push
from triton_dist.kernels.common import TAG_RANGE_C, call_epoch, notify_peers
from triton_dist.kernels.group_gemm import expert_b_tile, expert_tile_acc
from triton_dist.kernels.moe_route import weighted_slot_sum
from triton_dist.language.profiler import Profiler


@triton_dist.jit
def invert_rows_kernel(dest_ptr, pairs_ptr, P, BLOCK: tl.constexpr):
    """``pairs[dest[p]] = p`` for the pairs ``p < P`` of block ``program_id(0)`` (the layout row -> pair map of a
    routing; every pair has its own row, so no two stores collide)."""
    p = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = p < P
    row = tl.load(dest_ptr + p, mask=m, other=0)
    tl.store(pairs_ptr + row, p, mask=m & (row >= 0) & (row < P))


@triton_dist.jit
def segment_rows(seg_ptr, v, ROWS):
    """``(start, end)`` rows of segment ``v`` of the cumulative ``seg_offsets``, clamped to ``[previous end, ROWS]``
    (memory-safe whatever the offsets hold)."""
    start = tl.where(v > 0, tl.load(seg_ptr + tl.maximum(v - 1, 0)), 0)
    start = tl.minimum(tl.maximum(start, 0), ROWS)
    end = tl.minimum(tl.maximum(tl.load(seg_ptr + v), start), ROWS)
    return start, end


@triton_dist.jit
def source_tiles(seg_ptr, s, ROWS, E, N, WORLD: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """Output tiles of source ``s``'s segments (every expert): the count the reduce programs wait for."""
    total = 0
    for e in range(0, E):
        start, end = segment_rows(seg_ptr, e * WORLD + s, ROWS)
        total += tl.cdiv(end - start, BLOCK_M) * tl.cdiv(N, BLOCK_N)
    return total


@triton_dist.jit
def gathered_tile_acc(src_ptr, pairs_ptr, b_desc, b_ptr, e, first_token, off_m, m_end, off_n, N, K, stride_be,
                      stride_bk, stride_bn, TOPK: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                      BLOCK_K: tl.constexpr, USE_TMA: tl.constexpr, B_K_CONTIGUOUS: tl.constexpr):
    """fp32 ``A_g[off_m:+BLOCK_M] @ B[e][:, off_n:+BLOCK_N]`` where row ``r`` of ``A_g`` is token ``row_pairs[r] //
    TOPK - first_token`` of ``src [*, K]`` (rows ``>= m_end`` read as zeros)."""
    offs_m = off_m + tl.arange(0, BLOCK_M)
    m_ok = offs_m < m_end
    tok = tl.load(pairs_ptr + offs_m, mask=m_ok, other=0) // TOPK - first_token
    row = src_ptr + tok.to(tl.int64)[:, None] * K
    offs_k = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        kk = k * BLOCK_K + offs_k
        a = tl.load(row + kk[None, :], mask=m_ok[:, None] & (kk[None, :] < K), other=0.0)
        b = expert_b_tile(b_desc, b_ptr, e, off_n, k, N, K, stride_be, stride_bk, stride_bn, USE_TMA,
                          B_K_CONTIGUOUS, BLOCK_N, BLOCK_K)
        acc = tl.dot(a, b, acc)
    return acc


@triton_dist.jit
def _b_descriptor(b_ptr, E, N, K, stride_be, stride_bk, stride_bn, USE_TMA: tl.constexpr,
                  B_K_CONTIGUOUS: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    """The experts' weights as one 3-D tensor descriptor (``None`` on the pointer path), as the grouped GEMM's."""
    b_desc = None
    if USE_TMA:
        if B_K_CONTIGUOUS:
            b_desc = tl.make_tensor_descriptor(b_ptr, shape=[E, N, K], strides=[stride_be, stride_bn, 1],
                                               block_shape=[1, BLOCK_N, BLOCK_K])
        else:
            b_desc = tl.make_tensor_descriptor(b_ptr, shape=[E, K, N], strides=[stride_be, stride_bk, 1],
                                               block_shape=[1, BLOCK_K, BLOCK_N])
    return b_desc


@triton_dist.jit
def _store_rows(c_ptr, acc, off_m, m_end, off_n, N, stride_cm, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    offs_m = off_m + tl.arange(0, BLOCK_M)
    offs_n = off_n + tl.arange(0, BLOCK_N)
    ptrs = c_ptr + offs_m[:, None].to(tl.int64) * stride_cm + offs_n[None, :]
    tl.store(ptrs, acc.to(c_ptr.dtype.element_ty), mask=(offs_m[:, None] < m_end) & (offs_n[None, :] < N))


@triton_dist.jit
def ag_group_gemm_kernel(a_full_ptr, x_ptr, b_ptr, h_ptr, pairs_ptr, seg_ptr, ready_ptr, recv_ok_ptr, counter_ptr,
                         T, ROWS, E, N, K, stride_be, stride_bk, stride_bn, stride_hm, tag, rank,
                         TOPK: tl.constexpr, WORLD: tl.constexpr, NSIG: tl.constexpr, PUSH_PROGRAMS: tl.constexpr,
                         COPY_BLOCK: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                         BLOCK_K: tl.constexpr, NUM_SMS: tl.constexpr, USE_TMA: tl.constexpr,
                         B_K_CONTIGUOUS: tl.constexpr):
    """AllGather of ``x [T, K]`` fused with the grouped GEMM over the TP layout (module docstring): ``h [ROWS, N]``
    (row ``r`` of segment ``(e, s)``: token ``row_pairs[r] // TOPK`` of the gathered tokens times ``w[e]``). Grid:
    ``NUM_SMS + PUSH_PROGRAMS`` (``PUSH_PROGRAMS == NSIG``, 0 at world 1). ``a_full`` symmetric ``[WORLD * T, K]``
    (chunk ``s`` receives rank ``s``'s tokens; this rank's own chunk is never written: its tiles read ``x``)."""
    pid = tl.program_id(0)
    e_call = call_epoch(counter_ptr)
    value = e_call * TAG_RANGE_C + tag
    if pid >= NUM_SMS:
        profiler = Profiler.create(counter_ptr, ENABLE_PROFILING=False)
        ag_push(x_ptr, a_full_ptr, ready_ptr, recv_ok_ptr, T * K, value, e_call, rank, pid - NUM_SMS, PUSH_PROGRAMS,
                profiler, WORLD, COPY_BLOCK)
    else:
        b_desc = _b_descriptor(b_ptr, E, N, K, stride_be, stride_bk, stride_bn, USE_TMA, B_K_CONTIGUOUS, BLOCK_N,
                               BLOCK_K)
        num_n = tl.cdiv(N, BLOCK_N)
        done = 0  # tiles before the current segment in this launch's tile list
        for c in range(0, WORLD):
            s = (rank + c) % WORLD
            for e in range(0, E):
                start, end = segment_rows(seg_ptr, e * WORLD + s, ROWS)
                m_tiles = tl.cdiv(end - start, BLOCK_M)
                tiles = m_tiles * num_n
                first = done + (pid - done % NUM_SMS + NUM_SMS) % NUM_SMS
                for t in range(first, done + tiles, NUM_SMS):
                    local = t - done
                    off_m = start + (local % m_tiles) * BLOCK_M
                    off_n = (local // m_tiles) * BLOCK_N
                    # the tile's token rows: this rank's own from x (no wait); source s's from its chunk of a_full,
                    # read only once its ready signals are seen (the wait's token flows into the pointer, so no
                    # load of the tile, pipelined prologue included, can move above the wait). ONE call of the
                    # K loop for both cases: two calls would be two software-pipelined loops, each with its own
                    # stage buffers (twice the shared memory: 393 KB at 128x128x64 x 4 stages on sm_90).
                    src = x_ptr
                    if s != rank:
                        tok = dl.wait(ready_ptr + s * NSIG, NSIG, "sys", "acquire", value)
                        src = dl.consume_token(a_full_ptr + s * T * K, tok)  # int32: WORLD * T * K < 2**31
                    acc = gathered_tile_acc(src, pairs_ptr, b_desc, b_ptr, e, s * T, off_m, end, off_n, N, K,
                                            stride_be, stride_bk, stride_bn, TOPK, BLOCK_M, BLOCK_N, BLOCK_K,
                                            USE_TMA, B_K_CONTIGUOUS)
                    _store_rows(h_ptr, acc, off_m, end, off_n, N, stride_hm, BLOCK_M, BLOCK_N)
                done += tiles
    _finish(counter_ptr, counter_ptr, e_call, 0)


@triton_dist.jit
def _finish(counter_ptr, done_ptr, e_call, NDONE: tl.constexpr):
    """:func:`~triton_dist.kernels.common.finish_call` that also zeroes ``done[0:NDONE]`` (the per-source tile
    counts) in the launch's last program, before it publishes the epoch: every program has stopped reading them."""
    arrived = tl.atomic_add(counter_ptr + 1, 1, sem="acq_rel")
    if arrived == tl.num_programs(0) - 1:
        for i in tl.static_range(0, NDONE):
            tl.atomic_xchg(done_ptr + i, 0, sem="relaxed")
        tl.atomic_xchg(counter_ptr + 1, 0, sem="relaxed")
        tl.atomic_xchg(counter_ptr, e_call, sem="release")


@triton_dist.jit
def group_gemm_rs_kernel(a_ptr, b_ptr, y_ptr, out_ptr, seg_ptr, dest_ptr, ids_ptr, w_ptr, stage_ptr, ready_ptr,
                         rs_ok_ptr, done_ptr, counter_ptr, T, CAP, ROWS, E, N, K, stride_am, stride_be, stride_bk,
                         stride_bn, stride_ym, stride_om, tag, rank, TOPK: tl.constexpr, WORLD: tl.constexpr,
                         RED_PROGRAMS: tl.constexpr, RED_BLOCK_N: tl.constexpr, BLOCK_M: tl.constexpr,
                         BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, NUM_SMS: tl.constexpr, USE_TMA: tl.constexpr,
                         B_K_CONTIGUOUS: tl.constexpr):
    """Grouped GEMM + top-k reduce + reduce-scatter over the TP layout (module docstring): ``out [T, N]`` = for this
    rank's tokens ``t``, ``sum over ranks q of sum_j w[g, j] * (a_q[dest[g, j]] @ w_q[e])`` with ``g = rank * T +
    t``. ``a [ROWS, K]`` (the layout's rows, e.g. the gated activation), ``w [E, K, N]``; ``y [ROWS, N]`` scratch;
    ``dest / ids / w`` the gathered routing ``[WORLD * T, TOPK]`` (layout rows, int32 global expert ids, fp32
    weights); ``stage`` symmetric ``[WORLD, CAP]`` (slot ``q`` receives rank ``q``'s partials of this rank's tokens,
    ``T * N <= CAP``); ``ready`` symmetric int64 ``[WORLD, RED_PROGRAMS]``, ``rs_ok`` symmetric ``[WORLD]``, ``done``
    symmetric ``[WORLD]`` (zero between launches). Grid: ``NUM_SMS + RED_PROGRAMS``."""
    pid = tl.program_id(0)
    e_call = call_epoch(counter_ptr)
    value = e_call * TAG_RANGE_C + tag
    num_n = tl.cdiv(N, BLOCK_N)
    if pid < NUM_SMS:
        a_desc = None
        if USE_TMA:
            a_desc = tl.make_tensor_descriptor(a_ptr, shape=[ROWS, K], strides=[stride_am, 1],
                                               block_shape=[BLOCK_M, BLOCK_K])
        b_desc = _b_descriptor(b_ptr, E, N, K, stride_be, stride_bk, stride_bn, USE_TMA, B_K_CONTIGUOUS, BLOCK_N,
                               BLOCK_K)
        done = 0
        for c in range(1, WORLD + 1):
            s = (rank + c) % WORLD
            for e in range(0, E):
                start, end = segment_rows(seg_ptr, e * WORLD + s, ROWS)
                m_tiles = tl.cdiv(end - start, BLOCK_M)
                tiles = m_tiles * num_n
                first = done + (pid - done % NUM_SMS + NUM_SMS) % NUM_SMS
                for t in range(first, done + tiles, NUM_SMS):
                    local = t - done
                    off_m = start + (local % m_tiles) * BLOCK_M
                    off_n = (local // m_tiles) * BLOCK_N
                    acc = expert_tile_acc(a_desc, b_desc, a_ptr, b_ptr, a_ptr, a_ptr, e, off_m, end, off_n, N, K,
                                          stride_am, stride_be, stride_bk, stride_bn, 0, 0, 0, 0, 0, BLOCK_M,
                                          BLOCK_N, BLOCK_K, USE_TMA, B_K_CONTIGUOUS, False)
                    _store_rows(y_ptr, acc, off_m, end, off_n, N, stride_ym, BLOCK_M, BLOCK_N)
                    dl.notify(done_ptr + s, rank, 1, "add", "gpu")  # after a barrier: the tile's stores first
                done += tiles
    else:
        j = pid - NUM_SMS
        if j == 0:
            notify_peers(rs_ok_ptr, rank, WORLD, e_call)
        for c in range(1, WORLD):
            s = (rank + c) % WORLD
            need = source_tiles(seg_ptr, s, ROWS, E, N, WORLD, BLOCK_M, BLOCK_N)
            tok = dl.wait(done_ptr + s, 1, "gpu", "acquire", need)
            y_src = dl.consume_token(y_ptr, tok)
            tok = dl.wait(rs_ok_ptr + s, 1, "sys", "acquire", e_call)
            dst = dl.symm_at(dl.consume_token(stage_ptr, tok), s) + rank * CAP  # int32: WORLD * CAP < 2**31
            for t in range(j, T, RED_PROGRAMS):
                for c0 in range(0, N, RED_BLOCK_N):
                    cols = c0 + tl.arange(0, RED_BLOCK_N)
                    acc = weighted_slot_sum(y_src, dest_ptr, ids_ptr, w_ptr, s * T + t, cols, ROWS, TOPK, E, N,
                                            stride_ym, TOPK)
                    tl.store(dst + t * N + cols, acc.to(stage_ptr.dtype.element_ty), mask=cols < N)
            dl.notify(ready_ptr + rank * RED_PROGRAMS + j, s, value, "set", "intra_node")
    # this rank's own tokens (its tiles come last): every program of the launch, GEMM programs once their tiles are
    # done, reduce programs once they have served the peers, sums the own partial and the peers' staged ones
    need = source_tiles(seg_ptr, rank, ROWS, E, N, WORLD, BLOCK_M, BLOCK_N)
    tok = dl.wait(done_ptr + rank, 1, "gpu", "acquire", need)
    for i in tl.static_range(1, WORLD):  # both waits' tokens flow into the loads below (zeros, summed)
        q = (rank + i) % WORLD
        tok = tok + dl.wait(ready_ptr + q * RED_PROGRAMS, RED_PROGRAMS, "sys", "acquire", value)
    y_own = dl.consume_token(y_ptr, tok)
    stage = dl.consume_token(stage_ptr, tok)
    for t in range(pid, T, tl.num_programs(0)):
        for c0 in range(0, N, RED_BLOCK_N):
            cols = c0 + tl.arange(0, RED_BLOCK_N)
            acc = weighted_slot_sum(y_own, dest_ptr, ids_ptr, w_ptr, rank * T + t, cols, ROWS, TOPK, E, N, stride_ym,
                                    TOPK)
            for i in tl.static_range(1, WORLD):
                q = (rank + i) % WORLD
                acc += tl.load(stage + q * CAP + t * N + cols, mask=cols < N, other=0.0).to(tl.float32)
            tl.store(out_ptr + t * stride_om + cols, acc.to(out_ptr.dtype.element_ty), mask=cols < N)
    _finish(counter_ptr, done_ptr, e_call, WORLD)


__all__ = ["invert_rows_kernel", "segment_rows", "source_tiles", "gathered_tile_acc", "ag_group_gemm_kernel",
           "group_gemm_rs_kernel"]
