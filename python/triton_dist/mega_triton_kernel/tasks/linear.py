"""Linear family: ``output[M, N] = input[M, K] @ weight[N, K].T`` tiles (fp32 accumulation), under the op types
``linear``, ``qkv_proj``, ``o_proj``, ``mlp_fc1``, ``mlp_fc2``, and the fused ``mlp_fc1_silu_mul_up``
(``silu(x @ W[:I].T) * (x @ W[I:].T)``, the activation applied to the tile before it is stored).

Tiling: one task per ``BLOCK_M x ROWS`` output tile, row-tile major. Decode (``M == 1``) is a GEMV: the task
streams its ``ROWS`` weight rows in ``BLOCK_K`` chunks with the next chunk's load (and the input's next chunk,
from L2) issued before the current one is reduced (two chunks in flight per program), ``ROWS`` chosen by
:func:`pick_gemv_rows` so that the op's tiles fill whole waves of the workers, each tile's fixed cost counted
(a ``BLOCK_N = next_power_of_2(ROWS)`` block, the lanes past ``ROWS`` masked off).
``1 < M <= 16`` (batched decode, one row per request) is the same streaming tile with the ``M`` rows' products on
the tensor cores: a step of a memory-bound decoder must read every weight once whatever the batch, so the tile
keeps the GEMV's shape (``ROWS`` from :func:`pick_gemv_rows`, ~32 KB weight chunks, the next chunk's load issued
before the current one's MMA, the first chunk loaded before the wait) and multiplies each chunk by all ``M`` input
rows at once (``tl.dot`` of the rows padded to 16, ``[16, BLOCK_K] x [BLOCK_K, BLOCK_N]``): each weight byte is
read once per step for all the requests. Chosen over a register-FMA GEMV over ``M`` rows (``M`` fp32 accumulators
of the chunk's size: the registers run out at a few rows, or the chunk shrinks and the stream slows) and over the
plain ``tl.dot`` tiles below (64 rows, 64-column chunks, no wave fill: ~100 tiles for a 6K-row weight on a
132-SM GPU, and one 8 KB load in flight per program). The M = 1 tile is untouched (its FMA path); the norm /
residual fusions apply to both streaming tiles (the small-M tile recomputes each of its rows' norm).
``M > 16`` uses ``tl.dot`` on ``16 <= BLOCK_M`` row tiles. A tile reads its input rows (all of K) and weight rows
and writes its output tile, so it waits only for the tasks that wrote those input rows.
"""
from __future__ import annotations

import dataclasses
from typing import List

import triton
import triton.language as tl

import triton_dist
import triton_dist.language as dl
from ..core.checks import check_tensor
from ..core.device import arg, wait_deps
from ..core.registry import register_fusion, register_task
from ..core.task import Op, Tile, region, same_tensor
from .activation import silu_mul

__all__ = ["linear_task", "pick_gemv_rows", "gate_prefetch", "plan_early_prefetch", "tile_ranges"]

def _dtypes():
    import torch

    return (torch.bfloat16, torch.float16, torch.float32)


#: Bytes of weight one GEMV chunk loads per program (two chunks are in flight).
GEMV_CHUNK_BYTES = 32 * 1024


#: A GEMV task's fixed cost (fetch, argument loads, the first chunk's latency, the reduction, the store and the
#: release), in weight bytes a worker streams in the same time: ~1.5 us at ~30 GB/s per SM (the Qwen3-8B profile on
#: an H200, 2026-12-01: 5.8 us for a 128 KB tile, 18.8 us for 512 KB).
GEMV_TASK_OVERHEAD_BYTES = 44 * 1024
#: Most weight rows one GEMV tile streams (its block is the next power of two, lanes past the rows masked off).
MAX_GEMV_ROWS = 128


def pick_gemv_rows(N: int, num_workers: int, row_bytes: int) -> int:
    """Rows per GEMV tile (the tile's output columns) minimising ``waves * (rows * row_bytes + overhead)``
    (:data:`GEMV_TASK_OVERHEAD_BYTES`), ``waves`` being the tiles per worker of the busiest worker. Candidates: the
    powers of two 4..64 and the row counts that fill exactly 1, 2 or 3 waves over ``num_workers`` workers (up to
    :data:`MAX_GEMV_ROWS`). Ties: fewer tiles. E.g. 132 workers, N = 6144, 8 KB rows: 47 rows, one wave of 131
    tiles, instead of 16 rows in three waves."""
    cands = {4, 8, 16, 32, 64} | {triton.cdiv(N, k * num_workers) for k in (1, 2, 3)}
    best = None
    for r in sorted(c for c in cands if 1 <= c <= MAX_GEMV_ROWS):
        tiles = triton.cdiv(N, r)
        t = triton.cdiv(tiles, num_workers) * (r * row_bytes + GEMV_TASK_OVERHEAD_BYTES)
        if best is None or (t, tiles) < best[:2]:
            best = (t, tiles, r)
    return best[2]


@triton_dist.jit
def linear_task(args, tile, step, deps_ptr, dep_first, dep_count, scoreboard_ptr, M: tl.constexpr, N: tl.constexpr,
                K: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, ROWS: tl.constexpr, BLOCK_K: tl.constexpr,
                DT: tl.constexpr, ODT: tl.constexpr, SILU_MUL: tl.constexpr, NORM: tl.constexpr, EPS: tl.constexpr,
                RES: tl.constexpr, PF_ROW: tl.constexpr = 0, NORM_BLOCK: tl.constexpr = 0,
                STAGES: tl.constexpr = 0):
    """Output tile ``tile`` (row-tile major over ``cdiv(N, ROWS)`` column tiles of ``ROWS <= BLOCK_N`` columns, the
    lanes of the ``BLOCK_N`` block past ``ROWS`` masked off). ``args``: input, weight,
    output, [norm weight], [residual, sum]. Waits for its dependencies itself (``waits_inside``): a GEMV tile
    issues its first weight chunk(s) before the wait, so a program waiting for the input already streams.

    * ``SILU_MUL``: weight has ``2 N`` rows (gate, then up); the tile stores ``silu(gate) * up``.
    * ``NORM`` (fused RMS-norm prologue, streaming tiles): ``args[0]`` is the norm's input ``h``; the input is
      ``(h * rsqrt(mean(h**2) + EPS) * norm_weight)`` rounded to ``DT`` (bit-identical to the rms_norm task's
      output, recomputed per tile from the L2-resident rows, each row's sum of squares in the norm task's own
      ``NORM_BLOCK`` chunks, hence the same fp32 order).
    * ``RES`` (fused residual add epilogue, streaming tiles): besides the output tile, stores ``sum = output +
      residual`` (the output rounded to ``ODT`` first, fp32 add: bit-identical to the add task).
    * ``STAGES`` (streaming tiles, ``ModelBuilder(gemv_stages=...)``): 0, the chunks after the first streamed through
      registers one chunk ahead (:func:`_gemv`); ``>= 2``, through Triton's software pipeliner with that many
      stages (asynchronous 16-byte copies into shared memory, ``STAGES - 1`` chunks in flight, no register
      cost). The same products summed in the same order: the same bits."""
    x_ptr = arg(args, 0, DT)
    w_ptr = arg(args, 1, DT)
    o_ptr = arg(args, 2, ODT)
    n_tiles: tl.constexpr = (N + ROWS - 1) // ROWS
    pm = tile // n_tiles
    pn = tile % n_tiles
    lane = tl.arange(0, BLOCK_N)
    rn = pn * ROWS + lane
    nmask = (lane < ROWS) & (rn < N)
    if BLOCK_M == 1:
        wp, w0, u0 = _first_chunks(w_ptr, rn, nmask, N, K, BLOCK_K, SILU_MUL)
        if PF_ROW > 0:
            for r in tl.static_range(ROWS):
                n = pn * ROWS + r
                row = w_ptr + n.to(tl.int64) * K + BLOCK_K
                dl.prefetch_l2(row, PF_ROW, mask=n < N)
                if SILU_MUL:
                    dl.prefetch_l2(row + N * K, PF_ROW, mask=n < N)
        tok = wait_deps(deps_ptr, dep_first, dep_count, scoreboard_ptr, step)
        x_ptr = dl.consume_token(x_ptr, tok) + pm * K
        r = tl.zeros([BLOCK_N], dtype=tl.float32)
        if RES:  # the residual right after the wait, not after the stream: its latency hidden (4,529 -> 4,499 us)
            r = tl.load(dl.consume_token(arg(args, 4, ODT), tok) + pm * N + rn, mask=nmask, other=0.0).to(tl.float32)
        rstd = 1.0
        g_ptr = x_ptr
        if NORM:
            g_ptr = arg(args, 3, DT)
            rstd = _row_rstd(x_ptr, K, EPS, NORM_BLOCK)
        acc = _gemv(x_ptr, g_ptr, rstd, wp, w0, nmask, K, BLOCK_N, BLOCK_K, DT, NORM, STAGES)
        if SILU_MUL:
            up = _gemv(x_ptr, g_ptr, rstd, wp + N * K, u0, nmask, K, BLOCK_N, BLOCK_K, DT, NORM, STAGES)
            acc = silu_mul(acc, up)
        out = acc.to(ODT)
        tl.store(o_ptr + pm * N + rn, out, mask=nmask)
        if RES:
            tl.store(arg(args, 5, ODT) + pm * N + rn, (out.to(tl.float32) + r).to(ODT), mask=nmask)
    else:
        if M <= 16:  # batched decode: the tile's first weight chunk(s) before the wait, as the GEMV
            wp, w0, u0 = _first_chunks(w_ptr, rn, nmask, N, K, BLOCK_K, SILU_MUL)
        tok = wait_deps(deps_ptr, dep_first, dep_count, scoreboard_ptr, step)
        x_ptr = dl.consume_token(x_ptr, tok)
        rm = pm * BLOCK_M + tl.arange(0, BLOCK_M)
        mmask = rm < M
        omask = mmask[:, None] & nmask[None, :]
        r = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
        if M <= 16:  # one 16-row tile: the weight streamed once for all the rows
            if RES:  # the residual right after the wait, as the GEMV
                r = tl.load(dl.consume_token(arg(args, 4, ODT), tok) + rm[:, None] * N + rn[None, :], mask=omask,
                            other=0.0).to(tl.float32)
            rstd = tl.full([BLOCK_M], 1.0, tl.float32)
            g_ptr = x_ptr
            if NORM:
                g_ptr = arg(args, 3, DT)
                rstd = _rows_rstd(x_ptr, M, BLOCK_M, K, EPS, NORM_BLOCK)
            acc = _mm_stream(x_ptr, g_ptr, rstd, wp, w0, rm, mmask, nmask, K, BLOCK_M, BLOCK_N, BLOCK_K, STAGES, DT,
                             NORM)
            if SILU_MUL:
                acc = silu_mul(acc, _mm_stream(x_ptr, g_ptr, rstd, wp + N * K, u0, rm, mmask, nmask, K, BLOCK_M,
                                               BLOCK_N, BLOCK_K, STAGES, DT, NORM))
        else:
            acc = _mm(x_ptr, w_ptr, rm, mmask, rn, nmask, K, BLOCK_M, BLOCK_N, BLOCK_K)
            if SILU_MUL:
                acc = silu_mul(acc, _mm(x_ptr, w_ptr + N * K, rm, mmask, rn, nmask, K, BLOCK_M, BLOCK_N, BLOCK_K))
        out = acc.to(ODT)
        tl.store(o_ptr + rm[:, None] * N + rn[None, :], out, mask=omask)
        if RES:
            tl.store(arg(args, 5, ODT) + rm[:, None] * N + rn[None, :], (out.to(tl.float32) + r).to(ODT), mask=omask)


@triton_dist.jit
def _first_chunks(w_ptr, rn, nmask, N: tl.constexpr, K: tl.constexpr, BLOCK_K: tl.constexpr, SILU_MUL: tl.constexpr):
    """A streaming tile's first weight chunk, loaded before its wait: ``(wp, w0, u0)``, the pointers of the tile's
    ``[BLOCK_N, BLOCK_K]`` first chunk (rows ``rn``), that chunk, and with ``SILU_MUL`` the up rows' first chunk
    (``N`` rows further; else ``w0`` again)."""
    rk = tl.arange(0, BLOCK_K)
    wp = w_ptr + rn[:, None].to(tl.int64) * K + rk[None, :]
    wmask = nmask[:, None] & (rk[None, :] < K)
    w0 = tl.load(wp, mask=wmask, other=0.0)
    u0 = w0
    if SILU_MUL:
        u0 = tl.load(wp + N * K, mask=wmask, other=0.0)
    return wp, w0, u0


@triton_dist.jit
def _row_rstd(x_ptr, K: tl.constexpr, EPS: tl.constexpr, BLOCK_K: tl.constexpr):
    """``rsqrt(mean(x[0:K]**2) + EPS)`` in fp32, as the rms_norm task computes it: with ``BLOCK_K`` its ``BLOCK``
    (the same chunks, the same order of fp32 additions; one chunk for rows up to 4096)."""
    rk = tl.arange(0, BLOCK_K)
    ss = tl.zeros([BLOCK_K], dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        x = tl.load(x_ptr + k0 + rk, mask=k0 + rk < K, other=0.0).to(tl.float32)
        ss += x * x
    return 1.0 / tl.sqrt(tl.sum(ss, axis=0) / K + EPS)


@triton_dist.jit
def _rows_rstd(x_ptr, M: tl.constexpr, BLOCK_M: tl.constexpr, K: tl.constexpr, EPS: tl.constexpr,
               BLOCK_K: tl.constexpr):
    """:func:`_row_rstd` of each of the ``M`` rows of ``x [M, K]`` (the rms_norm task's order per row), as fp32
    ``[BLOCK_M]`` (1 past ``M``)."""
    rows = tl.arange(0, BLOCK_M)
    rstd = tl.full([BLOCK_M], 1.0, tl.float32)
    for m in tl.static_range(M):
        rstd = tl.where(rows == m, _row_rstd(x_ptr + m * K, K, EPS, BLOCK_K), rstd)
    return rstd


@triton_dist.jit
def _gemv(x_ptr, g_ptr, rstd, wp, w, nmask, K: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
          DT: tl.constexpr, NORM: tl.constexpr, STAGES: tl.constexpr = 0):
    """``sum_k x[k] * w[rn, k]`` as fp32 ``[BLOCK_N]``; ``wp`` points at the tile's ``[BLOCK_N, BLOCK_K]`` first
    chunk, already loaded as ``w``. ``STAGES == 0``: the next chunk's loads (weight and input) are issued before
    this one's FMAs; ``STAGES >= 2``: the chunks after the first through Triton's pipeliner (``STAGES`` stages)."""
    rk = tl.arange(0, BLOCK_K)
    acc = tl.zeros([BLOCK_N, BLOCK_K], dtype=tl.float32)
    if STAGES == 0:
        # the input's chunk is loaded one iteration ahead too: loaded in the iteration that uses it, its L2 latency
        # was exposed every iteration (Qwen3-8B TP=1 on an H200: 4,636 -> 4,568 us)
        xv = _x_chunk(x_ptr, g_ptr, rstd, 0, K, BLOCK_K, DT, NORM)
        for k0 in range(0, K, BLOCK_K):
            kn = k0 + BLOCK_K + rk
            w_next = tl.load(wp + k0 + BLOCK_K, mask=nmask[:, None] & (kn[None, :] < K), other=0.0)
            x_next = _x_chunk(x_ptr, g_ptr, rstd, k0 + BLOCK_K, K, BLOCK_K, DT, NORM)
            acc += w.to(tl.float32) * xv.to(tl.float32)[None, :]
            w = w_next
            xv = x_next
    else:
        acc += w.to(tl.float32) * _x_chunk(x_ptr, g_ptr, rstd, 0, K, BLOCK_K, DT, NORM).to(tl.float32)[None, :]
        for k0 in tl.range(BLOCK_K, K, BLOCK_K, num_stages=STAGES):
            kk = k0 + rk
            wk = tl.load(wp + k0, mask=nmask[:, None] & (kk[None, :] < K), other=0.0)
            acc += wk.to(tl.float32) * _x_chunk(x_ptr, g_ptr, rstd, k0, K, BLOCK_K, DT, NORM).to(tl.float32)[None, :]
    return tl.sum(acc, axis=1)


@triton_dist.jit
def _x_chunk(x_ptr, g_ptr, rstd, k0, K: tl.constexpr, BLOCK_K: tl.constexpr, DT: tl.constexpr, NORM: tl.constexpr):
    """The input's chunk at column ``k0`` (0 past ``K``), normalised as the rms_norm task rounds it when ``NORM``."""
    xk = k0 + tl.arange(0, BLOCK_K)
    xv = tl.load(x_ptr + xk, mask=xk < K, other=0.0)
    if NORM:
        g = tl.load(g_ptr + xk, mask=xk < K, other=0.0).to(tl.float32)
        xv = (xv.to(tl.float32) * rstd * g).to(DT)
    return xv


@triton_dist.jit
def _mm_stream(x_ptr, g_ptr, rstd, wp, w, rm, mmask, nmask, K: tl.constexpr, BLOCK_M: tl.constexpr,
               BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, STAGES: tl.constexpr, DT: tl.constexpr,
               NORM: tl.constexpr):
    """``x[rm, :] @ W[rn, :].T`` as fp32 ``[BLOCK_M, BLOCK_N]`` (the small-M tile): ``wp`` points at the tile's
    ``[BLOCK_N, BLOCK_K]`` first weight chunk, already loaded as ``w``; ``STAGES == 0``: the next chunk's load is
    issued before this one's MMA (two chunks in flight, as in :func:`_gemv`); ``STAGES >= 2``: the chunks after the
    first through Triton's pipeliner. The input rows' chunk comes from L2, normalised as the rms_norm task rounds
    them when ``NORM`` (:func:`_rows_chunk`)."""
    rk = tl.arange(0, BLOCK_K)
    acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    if STAGES == 0:
        for k0 in range(0, K, BLOCK_K):
            kn = k0 + BLOCK_K + rk
            w_next = tl.load(wp + k0 + BLOCK_K, mask=nmask[:, None] & (kn[None, :] < K), other=0.0)
            a = _rows_chunk(x_ptr, g_ptr, rstd, rm, mmask, k0, K, BLOCK_K, DT, NORM)
            acc = tl.dot(a, tl.trans(w), acc)
            w = w_next
    else:
        acc = tl.dot(_rows_chunk(x_ptr, g_ptr, rstd, rm, mmask, 0, K, BLOCK_K, DT, NORM), tl.trans(w), acc)
        for k0 in tl.range(BLOCK_K, K, BLOCK_K, num_stages=STAGES):
            kk = k0 + rk
            wk = tl.load(wp + k0, mask=nmask[:, None] & (kk[None, :] < K), other=0.0)
            acc = tl.dot(_rows_chunk(x_ptr, g_ptr, rstd, rm, mmask, k0, K, BLOCK_K, DT, NORM), tl.trans(wk), acc)
    return acc


@triton_dist.jit
def _rows_chunk(x_ptr, g_ptr, rstd, rm, mmask, k0, K: tl.constexpr, BLOCK_K: tl.constexpr, DT: tl.constexpr,
                NORM: tl.constexpr):
    """Rows ``rm`` of the input, columns ``k0 .. k0 + BLOCK_K`` (0 where masked); with ``NORM`` each row
    normalised as the rms_norm task rounds it (``rstd [BLOCK_M]`` per row, ``g`` the norm weight)."""
    kk = k0 + tl.arange(0, BLOCK_K)
    a = tl.load(x_ptr + rm[:, None] * K + kk[None, :], mask=mmask[:, None] & (kk[None, :] < K), other=0.0)
    if NORM:
        g = tl.load(g_ptr + kk, mask=kk < K, other=0.0).to(tl.float32)
        a = (a.to(tl.float32) * rstd[:, None] * g[None, :]).to(DT)
    return a


@triton_dist.jit
def _mm(x_ptr, w_ptr, rm, mmask, rn, nmask, K: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
        BLOCK_K: tl.constexpr):
    acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    rk = tl.arange(0, BLOCK_K)
    for k0 in range(0, K, BLOCK_K):
        kk = k0 + rk
        a = tl.load(x_ptr + rm[:, None] * K + kk[None, :], mask=mmask[:, None] & (kk[None, :] < K), other=0.0)
        b = tl.load(w_ptr + rn[:, None].to(tl.int64) * K + kk[None, :], mask=nmask[:, None] & (kk[None, :] < K),
                    other=0.0)
        acc = tl.dot(a, tl.trans(b), acc)
    return acc


def _build(op_type: str, builder, layer_id: int, input, weight, output, fused: bool = False) -> Op:
    name = f"make_{op_type}"
    dts = _dtypes()
    check_tensor(name, "input", input, dim=2, dtype=dts)
    check_tensor(name, "weight", weight, dim=2, dtype=input.dtype)
    check_tensor(name, "output", output, dim=2, dtype=dts)
    M, K = input.shape
    rows, wk = weight.shape
    N = output.shape[1]
    if wk != K:
        raise ValueError(f"{name}: weight is [{rows}, {wk}], input is [{M}, {K}]: K differs")
    if output.shape[0] != M:
        raise ValueError(f"{name}: output has {output.shape[0]} rows, input has {M}")
    if rows != (2 * N if fused else N):
        want = f"2 * {N} (gate rows, then up rows)" if fused else str(N)
        raise ValueError(f"{name}: weight has {rows} rows, expected {want} for output [{M}, {N}]")
    pf_row = 0
    if M == 1:
        bm = 1
        rows_ = pick_gemv_rows(N, builder.num_workers, K * input.element_size() * (2 if fused else 1))
        bn = max(4, triton.next_power_of_2(rows_))
        bk = min(triton.next_power_of_2(K), max(64, GEMV_CHUNK_BYTES // (bn * input.element_size())))
        # the prefetch budget split over the tile's weight rows (gate and up rows when fused), after the first
        # chunk, in whole 16-byte units, never past the row's end
        per_row = builder.gemv_prefetch_bytes // (rows_ * (2 if fused else 1))
        pf_row = max(0, min(per_row, (K - bk) * input.element_size())) // 16 * 16
    elif M <= 16:  # batched decode: the GEMV's streaming tile, the rows' products on the tensor cores
        bm = 16
        rows_ = pick_gemv_rows(N, builder.num_workers, K * input.element_size() * (2 if fused else 1))
        bn = max(16, triton.next_power_of_2(rows_))
        bk = min(max(16, triton.next_power_of_2(K)), max(64, GEMV_CHUNK_BYTES // (bn * input.element_size())))
    else:
        bm = 16 if M <= 16 else (32 if M <= 32 else 64)
        bn = rows_ = 64
        bk = min(64, max(16, triton.next_power_of_2(K)))
    m_tiles, n_tiles = triton.cdiv(M, bm), triton.cdiv(N, rows_)
    es = input.element_size()
    tiles = []
    for pm in range(m_tiles):
        r0, r1 = pm * bm, min(M, (pm + 1) * bm)
        for pn in range(n_tiles):
            c0, c1 = pn * rows_, min(N, (pn + 1) * rows_)
            reads = region(input, slice(r0, r1)) + region(weight, slice(c0, c1))
            if fused:
                reads += region(weight, slice(N + c0, N + c1))
            wbytes = (c1 - c0) * K * es * (2 if fused else 1)
            tiles.append(Tile(reads=reads, writes=region(output, slice(r0, r1), slice(c0, c1)),
                              cost=wbytes + (r1 - r0) * K * es))
    consts = dict(M=M, N=N, K=K, BLOCK_M=bm, BLOCK_N=bn, ROWS=rows_, BLOCK_K=bk, DT=input.dtype, ODT=output.dtype,
                  SILU_MUL=fused, NORM=False, EPS=0.0, RES=False, PF_ROW=pf_row)
    stages = builder.gemv_stages
    if stages and M <= 16:  # the streaming tiles only (the M > 16 tiles keep their own loop)
        consts["STAGES"] = stages
    return Op("Linear", op_type, layer_id, linear_task, [input, weight, output], consts, tiles, waits_inside=True)


# ---------------------------------------------------------------------------------------------------- prefetch
def gate_prefetch(ops: List[Op], tasks) -> List[Op]:
    """``ops`` where a GEMV keeps its L2-prefetch budget (``PF_ROW``) only if it waits for an op of another family
    than Linear (attention, all-reduce, a norm: latency-bound tasks during which HBM is mostly idle, so the prefetch
    fills idle time). A GEMV that waits only for GEMVs (whose last tiles are still streaming while it waits) or
    for nothing gets ``PF_ROW = 0``: there its prefetch would only compete with the streams it waits for (measured
    on an H200: Qwen3-8B, prefetching in every GEMV made the step 1-5% slower, in o_proj alone faster).
    ``tasks``: the step's tasks (``core.graph.build_tasks``); returns a new list (changed ops are new objects)."""
    deps_of = _op_deps(tasks)
    out = list(ops)
    for i, op in enumerate(ops):
        if op.family != "Linear" or not op.constexprs.get("PF_ROW"):
            continue
        producers = deps_of.get(i, set()) - {i}
        if not producers or all(ops[o].family == "Linear" for o in producers):
            out[i] = dataclasses.replace(op, constexprs=dict(op.constexprs, PF_ROW=0))
    return out


def _op_deps(tasks) -> dict:
    """Op index -> the set of op indices its tasks wait for (the task graph folded to ops)."""
    deps_of: dict = {}
    for t in tasks:
        deps_of.setdefault(t.op, set()).update(tasks[d].op for d in t.deps)
    return deps_of


def _streams(op: Op) -> bool:
    """``op`` is a Linear op of streaming tiles (the GEMV, or the small-M tile of batched decode): one row tile,
    tile ``t`` reading weight rows ``[t * ROWS, (t + 1) * ROWS)``."""
    c = op.constexprs
    return op.family == "Linear" and (c["BLOCK_M"] == 1 or c["M"] <= 16)


def _latency_chain(ops: List[Op], deps_of: dict, i: int) -> set:
    """The non-Linear ops op ``i`` waits for, directly or through other non-Linear ops (attention after the qkv
    GEMV, an all-reduce and its norm, ...): the latency-bound stretch between the previous GEMV and this one."""
    chain, todo = set(), [o for o in deps_of.get(i, ()) if ops[o].family != "Linear"]
    while todo:
        o = todo.pop()
        if o in chain or o == i:
            continue
        chain.add(o)
        todo.extend(d for d in deps_of.get(o, ()) if ops[d].family != "Linear")
    return chain


def tile_ranges(op: Op, tile: int) -> List[tuple]:
    """The weight bytes tile ``tile`` of a streaming Linear op reads, as ``(address, bytes)`` ranges: its rows
    ``[tile * ROWS, min(N, (tile + 1) * ROWS))`` of the ``[N, K]`` weight, contiguous (and with ``SILU_MUL`` the up
    rows ``N`` rows further: a second range)."""
    c = op.constexprs
    w = op.tensors[1]
    row = c["K"] * w.element_size()
    r0, r1 = tile * c["ROWS"], min(c["N"], (tile + 1) * c["ROWS"])
    out = [(w.data_ptr() + r0 * row, (r1 - r0) * row)]
    if c["SILU_MUL"]:
        out.append((w.data_ptr() + (c["N"] + r0) * row, (r1 - r0) * row))
    return out


def plan_early_prefetch(ops: List[Op], tasks, queues, budget: int) -> dict:
    """L2 prefetches for the queue slots (``core/codegen.py``: a worker issues a slot's ranges as soon as it reads
    the slot, before the task's wait): for each streaming GEMV that waits for a latency-bound op (attention, an
    all-reduce: :func:`_latency_chain`), each tile's weight rows (:func:`tile_ranges`) go to the slot where its worker
    enters the wait for that op: the first of the latency-bound tasks its worker runs right before the tile (a
    flash-decode split, say), or the tile itself where the worker runs none (it waits idle). Up to ``budget`` bytes
    per op, the tiles behind latency-bound tasks first (they reach their own wait last); one slot holds one tile's
    ranges. ``queues``: the static per-worker task lists. Returns ``{task index: [(address, bytes), ...]}``
    (empty for ``budget`` 0). A hint only: the results are the same bits with or without it."""
    if budget <= 0:
        return {}
    deps_of = _op_deps(tasks)
    op_tasks: dict = {}
    for t in tasks:
        op_tasks.setdefault(t.op, []).append(t)
    prev = {b: a for q in queues for a, b in zip([None] + list(q[:-1]), q)}
    plan: dict = {}
    for i, op in enumerate(ops):
        if not _streams(op):
            continue
        chain = _latency_chain(ops, deps_of, i)
        if not chain:
            continue
        entry, behind = {}, []
        for t in op_tasks.get(i, []):
            e, p = t.index, prev.get(t.index)
            while p is not None and tasks[p].op in chain:  # back to the first of the run of chain tasks
                e, p = p, prev.get(p)
            entry[t.index] = e
            if e != t.index:
                behind.append(t)
        behind_set = {t.index for t in behind}
        left = budget
        for t in behind + [t for t in op_tasks.get(i, []) if t.index not in behind_set]:
            ranges = tile_ranges(op, t.tile)
            size = sum(n for _, n in ranges)
            if size > left:
                break
            slot = entry[t.index] if entry[t.index] not in plan else t.index
            if slot in plan:
                continue
            plan[slot] = ranges
            left -= size
    return plan


# ---------------------------------------------------------------------------------------------------- fusions
def _col_regions(op: Op, t, tile: int):
    """The columns of tile ``tile`` of ``op`` (a streaming Linear op: one row tile) in each of the ``M`` rows of
    ``t`` (``[M, N]`` elements)."""
    bn, n, m = op.constexprs["ROWS"], op.constexprs["N"], op.constexprs["M"]
    c0 = tile * bn
    return region(t.reshape(m, n), slice(0, m), slice(c0, min(n, c0 + bn)))


def can_fuse_norm(norm: Op, lin: Op) -> bool:
    """``lin`` (a streaming Linear op, GEMV or small-M, not fused with a norm yet) reads exactly the output of
    ``norm``, whose rows are its ``M`` input rows."""
    x2, w, o2 = norm.tensors
    return (_streams(lin) and not lin.constexprs["NORM"] and norm.constexprs["M"] == lin.constexprs["M"]
            and same_tensor(lin.tensors[0], o2) and w.dtype == o2.dtype)


def fuse_norm_prologue(norm: Op, lin: Op) -> Op:
    """``lin`` computing its input row from ``norm``'s input (see :func:`linear_task`, ``NORM``)."""
    x2, w, _ = norm.tensors
    tensors = list(lin.tensors)
    tensors[0] = x2
    while len(tensors) < 4:
        tensors.append(x2)
    tensors[3] = w
    tiles = [Tile(reads=region(x2) + region(w) + t.reads[len(region(lin.tensors[0])):], writes=list(t.writes),
                  cost=t.cost, waits=t.waits) for t in lin.tiles]
    consts = dict(lin.constexprs, NORM=True, EPS=norm.constexprs["EPS"], NORM_BLOCK=norm.constexprs["BLOCK"])
    return Op(lin.family, lin.op_type, lin.layer_id, lin.kernel, tensors, consts, tiles,
              name=f"{norm.name}+{lin.name}", waits_inside=True)


def can_fuse_residual(lin: Op, add: Op) -> bool:
    """``add`` sums the whole output of ``lin`` (a streaming Linear op, GEMV or small-M) with another tensor."""
    if not _streams(lin) or lin.constexprs["RES"]:
        return False
    o = lin.tensors[2]
    a, b, s = add.tensors
    if a.numel() != o.numel() or a.dtype != o.dtype:
        return False
    same_a = a.data_ptr() == o.data_ptr()
    same_b = b.data_ptr() == o.data_ptr()
    return same_a != same_b


def fuse_residual_epilogue(lin: Op, add: Op) -> Op:
    """``lin`` also storing ``output + residual`` (see :func:`linear_task`, ``RES``); replaces both ops."""
    o = lin.tensors[2]
    a, b, s = add.tensors
    res = b if a.data_ptr() == o.data_ptr() else a
    tensors = list(lin.tensors)
    while len(tensors) < 4:
        tensors.append(tensors[0])
    tensors += [res.reshape(-1), s.reshape(-1)]
    tiles = [Tile(reads=list(t.reads) + _col_regions(lin, res, i), writes=list(t.writes) + _col_regions(lin, s, i),
                  cost=t.cost, waits=t.waits) for i, t in enumerate(lin.tiles)]
    consts = dict(lin.constexprs, RES=True)
    return Op(lin.family, lin.op_type, lin.layer_id, lin.kernel, tensors, consts, tiles,
              name=f"{lin.name}+{add.name}", waits_inside=True)


@register_fusion(order=10)
def norm_prologue_rule(prev: Op, op: Op):
    """Fusion 1 of ``core/fusion.py``: an ``rms_norm`` then a streaming Linear op (GEMV or small-M) reading its
    output -> the norm (kept: its output may have other readers) and the Linear computing the normalised rows
    itself."""
    if (op.op_type != "rms_norm" and op.family == "Linear" and prev.op_type == "rms_norm"
            and can_fuse_norm(prev, op)):
        return [prev, fuse_norm_prologue(prev, op)]
    return None


@register_fusion(order=20)
def residual_epilogue_rule(prev: Op, op: Op):
    """Fusion 2 of ``core/fusion.py``: a streaming Linear op then an ``add`` of its output -> the Linear also storing
    the sum."""
    if op.op_type == "add" and prev.family == "Linear" and can_fuse_residual(prev, op):
        return [fuse_residual_epilogue(prev, op)]
    return None


def _register(op_type: str, fused: bool = False):
    def build(builder, layer_id, input, weight, output):
        return _build(op_type, builder, layer_id, input, weight, output, fused)

    build.__name__ = f"build_{op_type}"
    register_task(op_type, "Linear")(build)


for _t in ("linear", "qkv_proj", "o_proj", "mlp_fc1", "mlp_fc2"):
    _register(_t)
_register("mlp_fc1_silu_mul_up", fused=True)
