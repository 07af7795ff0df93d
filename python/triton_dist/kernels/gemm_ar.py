"""GEMM + AllReduce, overlapped (small-M decode shapes): every rank gets ``C = sum_src A_src @ B_src``.

One persistent kernel (:func:`gemm_ar_kernel`), two exchanges (``LL`` constexpr): ``A_local``: ``[M, K_loc]``,
``B_local``: ``[K_loc, N]``. A *unit* is one split of one output tile: ``u = t * SPLIT_K + s`` covers the K blocks
``[s * per, (s + 1) * per)`` of tile ``t`` (``per = cdiv(cdiv(K, BLOCK_K), SPLIT_K)``). With ``SPLIT_K = 1`` a unit
is a whole tile. Program ``p`` walks the units ``p, p + NUM_SMS, ...``; at decode sizes a tile is a stream of
weights (``B``) and the split lets every SM stream them (``N / BLOCK_N`` tiles alone leave SMs idle).

* Phase 1, per unit: the fp32 partial of its K range. With ``SPLIT_K > 1`` it goes through
  :func:`~triton_dist.kernels.gemm.split_k_reduce` (the split-K handshake of the plain split-K GEMM): stored into
  the local workspace ``ws[s]``, the tile's local counter ``cnt[t]`` bumped (``acq_rel``, gpu scope, after a CTA
  barrier); the unit that makes the count ``SPLIT_K`` (the tile's *finisher*, whichever program that is) sums
  ``ws[0..SPLIT_K)`` in split order and resets ``cnt[t] = 0``; each unit records ``fin[u]`` (1 for the finisher). The finisher (every
  unit when ``SPLIT_K = 1``) keeps the tile's rank partial ``P_rank`` in its own staging slot ``stage[par, rank]``
  and sends it to every peer: this overlaps the exchange with the rest of the GEMM.

  - ``fused`` (``LL=False``): ``P_rank`` is stored into every peer's staging slot ``stage[par, rank]``
    (``dl.symm_at``), then ``sig[par, rank, t] = value`` is raised on every peer (``dl.notify``: CTA barrier,
    system-scope release fence, remote signal store).
  - ``ll`` (``LL=True``): ``P_rank``'s fp32 words go to word ``[par, rank]`` of every peer's int64 word buffer
    ``words`` as flagged words (``dl.store_flagged``, flag ``ll_flag(e, tag)``: one relaxed system-scope 64-bit
    store per element, no fence, no barrier, no signal).
* Phase 2: the program revisits its units; for each it finished (``fin[u]``, its own write) it sums the ``WORLD``
  partials of the tile in fp32 in rank order ``0, 1, ..., WORLD-1`` and stores ``C`` once rounded: its own from
  ``stage[par, rank]`` (written by this program in phase 1), a peer's after waiting for it -- ``fused``: a
  (sys, acquire) wait for the peer's tile signal, then its staging slot; ``ll``: ``dl.load_flagged`` of the tile's
  words in ``words[par, src]`` (tagged: a peer's word of this call with another size tag is reported at once), which
  are then cleared (plain stores of 0). Every rank sums the same fp32 values in the same order: bit-identical
  results on every rank, and deterministic (fixed split order, no float atomics).

Waits: phase 1 never waits, so every finisher of every rank sends its partial; a phase-2 wait on rank r is for a
signal / words that a phase-1 step of a peer sends unconditionally. That needs the programs of a launch to run
concurrently (a GPU grid capped at the SM count, one program per SM; the simulator's ``run_grid``), as every
overlapped kernel here does. Both exchanges use the same epoch ``e`` (the context's device counter, read by
:func:`~triton_dist.kernels.common.call_epoch`: calls can be captured in a CUDA graph and replayed) and parity
``par = e % 2``; every launch (``M > 0``: the host launches nothing for ``M = 0``) waits on every rank for every
peer's data of every tile of the same call. ``cnt`` is reset by its finisher before the launch ends, ``ws`` and
``fin`` are written before they are read in every launch.

Reuse, ``fused``: double-buffered by epoch parity, signals compared for equality (same argument as ``gemm_rs``).
Reuse, ``ll``: rank A writes ``words[par, A]`` of peer B in call ``e`` only after its launch of call ``e - 1``
ended, and that launch waited for B's data of call ``e - 1``, which B sent only after its launch of call ``e - 2``
had ended -- so B's reads (and clears) of slot parity ``e % 2`` from call ``e - 2`` are complete before A writes
it again; B's reads of call ``e - 1`` (still running) use the other parity. Within a call each word of
``words[par, A]`` on B is written once (by A's finisher of its tile) and read and cleared once (by B's finisher of
that tile: every rank finishes every tile, with the same ``M``, ``N`` and tiling), so after the launch every word
is 0 again and a word can only ever show a flag that its writer stored in the current call (epoch bits are
compared for equality; :func:`~triton_dist.kernels.common.ll_flag` never makes 0). The calls of either method
advance the same epoch, so ``fused`` and ``ll`` calls may alternate on one context (``fused`` never touches
``words``; ``ll`` writes only this rank's own ``stage`` slot, which no peer writes). The own partial stays in the
fp32 staging slot rather than the word buffer: a plain 4-byte store per element instead of an 8-byte flagged one,
and no poll or clear for data the program wrote itself.

Layout: ``stage``: fp32 ``[2, WORLD, CAP]`` (``CAP >= M * N``), ``sig``: int64 ``[2, WORLD, MAX_TILES]``
(``fused`` only), ``words``: int64 ``[2, WORLD, CAP]`` (``ll`` only; zero between launches), ``ws``: fp32
``[SPLIT_K, M, N]``, ``cnt``: int32 ``[MAX_TILES]`` (zero between launches), ``fin``: int32 ``[MAX_TILES *
SPLIT_K]``. With ``SPLIT_K = 1`` the last three are not touched, nor ``words`` by ``fused`` or ``sig`` by ``ll``
(dummies allowed). ``tag``: ``fused``: the size tag ``(M * N) % 2**24`` of the signals; ``ll``: the ``ll`` size
tag ``(M * N) % 2**16`` (:func:`~triton_dist.kernels.common.ll_size_tag`).
"""
from __future__ import annotations

import triton.language as tl

import triton_dist
import triton_dist.language as dl

from triton_dist.kernels.common import (LL_TAG_BITS_C, TAG_RANGE_C, call_epoch, finish_call, ll_flag,
                                        store_to_peers)
from triton_dist.kernels.gemm import (slot_tile, split_k_reduce, store_tile, tile_acc_ptr_k, tile_acc_tma_k, tile_coords,
                                      tma_descriptors)
from triton_dist.kernels.gemm_config import SIM_CONFIG, SPLIT_K_MAX, SPLIT_K_MAX_M, TileConfig, env_config


@triton_dist.jit
def ll_receive_tile(p, flag, mask):
    """``ll`` phase 2, one peer's partial of one tile: wait for the flagged words at ``p`` (where ``mask``) to carry
    ``flag`` (tagged: a word of this call with another size tag is reported at once), clear them (consumed: the
    module docstring's reuse argument) and return their fp32 values (0 where masked off)."""
    words = dl.load_flagged(p, flag, mask=mask, tag_bits=LL_TAG_BITS_C)
    tl.store(p, 0, mask=mask)
    return words.to(tl.float32, bitcast=True)


@triton_dist.jit
def gemm_ar_kernel(a_ptr, b_ptr, out_ptr, stage_ptr, sig_ptr, words_ptr, counter_ptr, ws_ptr, cnt_ptr, fin_ptr, M,
                   N, K, stride_am, stride_bk, stride_bn, stride_om, stride_on, CAP, MAX_TILES, tag, rank,
                   WORLD: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                   GROUP_M: tl.constexpr, NUM_SMS: tl.constexpr, USE_TMA: tl.constexpr, SPLIT_K: tl.constexpr = 1,
                   LL: tl.constexpr = False):
    """One call (module docstring; ``LL``: the ``ll`` exchange, else ``fused``). ``a``: ``[M, K]`` with unit column
    stride; ``out``: ``[M, N]``."""
    pid = tl.program_id(0)
    e = call_epoch(counter_ptr)
    par = e % 2
    if LL:
        flag = ll_flag(e, tag)
    else:
        value = e * TAG_RANGE_C + tag
    tiles_m = tl.cdiv(M, BLOCK_M)
    tiles_n = tl.cdiv(N, BLOCK_N)
    num_units = tiles_m * tiles_n * SPLIT_K
    k_blocks = tl.cdiv(K, BLOCK_K)
    per_split = tl.cdiv(k_blocks, SPLIT_K)
    if USE_TMA:
        a_desc, b_desc = tma_descriptors(a_ptr, b_ptr, M, N, K, stride_am, stride_bk, BLOCK_M, BLOCK_N, BLOCK_K)
    slot_w = (par * WORLD + rank) * CAP
    for u in range(pid, num_units, NUM_SMS):
        t = u // SPLIT_K
        s = u % SPLIT_K
        pid_m, pid_n = tile_coords(t, tiles_m, tiles_n, GROUP_M)
        off_m = pid_m * BLOCK_M
        off_n = pid_n * BLOCK_N
        k_first = s * per_split
        k_end = tl.minimum(k_first + per_split, k_blocks)
        if USE_TMA:
            acc = tile_acc_tma_k(a_desc, b_desc, off_m, off_n, k_first, k_end, BLOCK_M, BLOCK_N, BLOCK_K)
        else:
            acc = tile_acc_ptr_k(a_ptr, b_ptr, off_m, off_n, M, N, K, stride_am, 1, stride_bk, stride_bn, k_first,
                                 k_end, BLOCK_M, BLOCK_N, BLOCK_K)
        tile_off, mask = slot_tile(off_m, off_n, M, N, BLOCK_M, BLOCK_N)
        finisher = True
        if SPLIT_K > 1:
            acc, finisher = split_k_reduce(acc, ws_ptr, cnt_ptr, t, s, tile_off, mask, M * N, SPLIT_K, BLOCK_M,
                                           BLOCK_N)
            tl.store(fin_ptr + u, finisher.to(tl.int32))
        if finisher:
            tl.store(stage_ptr + slot_w + tile_off, acc, mask=mask)
            if LL:
                for i in tl.static_range(1, WORLD):
                    peer = (rank + i) % WORLD
                    dl.store_flagged(dl.symm_at(words_ptr, peer) + slot_w + tile_off, acc, flag, mask=mask)
            else:
                store_to_peers(stage_ptr, slot_w, tile_off, acc, mask, rank, WORLD)
                for i in tl.static_range(1, WORLD):
                    peer = (rank + i) % WORLD
                    dl.notify(sig_ptr + (par * WORLD + rank) * MAX_TILES + t, peer, value, "set", "intra_node")
    if LL:
        # phase 2 reads the own partial from stage[par, rank] through another layout than phase 1 stored it (other
        # threads): the CTA barrier orders those stores before the loads (fused: its notify's barrier does)
        tl.debug_barrier()
    for u in range(pid, num_units, NUM_SMS):
        t = u // SPLIT_K
        finisher = True
        if SPLIT_K > 1:
            finisher = tl.load(fin_ptr + u) != 0
        if finisher:
            pid_m, pid_n = tile_coords(t, tiles_m, tiles_n, GROUP_M)
            off_m = pid_m * BLOCK_M
            off_n = pid_n * BLOCK_N
            tile_off, mask = slot_tile(off_m, off_n, M, N, BLOCK_M, BLOCK_N)
            acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
            for src in tl.static_range(0, WORLD):
                slot = par * WORLD + src
                if LL:
                    if src == rank:
                        acc += tl.load(stage_ptr + slot * CAP + tile_off, mask=mask, other=0.0)
                    else:
                        acc += ll_receive_tile(words_ptr + slot * CAP + tile_off, flag, mask)
                else:
                    p = stage_ptr + slot * CAP
                    if src != rank:
                        tok = dl.wait(sig_ptr + slot * MAX_TILES + t, 1, "sys", "acquire", value)
                        p = dl.consume_token(p, tok)
                    acc += tl.load(p + tile_off, mask=mask, other=0.0)
            store_tile(out_ptr, acc, off_m, off_n, M, N, stride_om, stride_on, BLOCK_M, BLOCK_N)
    finish_call(counter_ptr, e)


def pick_ar_config(M: int, N: int, K: int, *, num_sms: int, on_gpu: bool,
                   sim_config: TileConfig = SIM_CONFIG) -> TileConfig:
    """Deterministic tiling of :func:`gemm_ar_kernel` when the measured table has none (same on every rank).
    GPU, measured on 2x H200 at N=8192 (``benchmarks/bench_overlap.py --probe gemm-ar``, the ``overlap-ar`` sweep): the weights
    (``B``) are the traffic at decode sizes, so M <= 16 takes 16x64 tiles with 128-deep K blocks (N / 64 tiles cover
    the SMs: a split only adds its workspace round trip), M <= 64 takes 64x128x128 tiles and M <= 128 64x128x64;
    then the K blocks are split so that the units cover the SMs (``num_sms // tiles``, at most
    :data:`SPLIT_K_MAX`). (``matmul``'s decode rule, :func:`~triton_dist.kernels.gemm_config.pick_decode_config`, measured
    alone on one H200, differs: pointer loads, 64x64 tiles at M <= 64; not yet measured inside this kernel.) Above :data:`SPLIT_K_MAX_M` rows, 64x128x64 tiles without a split. Simulator:
    ``sim_config``. :func:`~triton_dist.kernels.gemm_config.env_config` overrides it."""
    env = env_config()
    if env is not None:
        return env
    if not on_gpu:
        return sim_config
    if M > SPLIT_K_MAX_M:
        return TileConfig(64, 128, 64, 8, 4, 4)
    bm, bn, bk = (16, 64, 128) if M <= 16 else ((64, 128, 128) if M <= 64 else (64, 128, 64))
    tiles = -(-M // bm) * -(-N // bn)
    split = max(1, min(SPLIT_K_MAX, num_sms // tiles, -(-K // bk)))
    return TileConfig(bm, bn, bk, 8, 4, 4, split_k=split)


__all__ = ["gemm_ar_kernel", "ll_receive_tile", "pick_ar_config", "SPLIT_K_MAX", "SPLIT_K_MAX_M"]
