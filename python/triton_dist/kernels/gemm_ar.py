"""GEMM + AllReduce, overlapped (one-shot, for small-M decode shapes): every rank gets ``C = sum_src A_src @ B_src``.

One persistent kernel (:func:`gemm_ar_kernel`): ``A_local``: ``[M, K_loc]``, ``B_local``: ``[K_loc, N]``.

* Phase 1: each program computes its tiles; each fp32 partial tile is stored into EVERY rank's staging slot
  ``stage[par, rank]`` (peers through ``dl.symm_at``, itself locally) and the per-tile signal
  ``sig[par, rank, t] = value`` is raised on every peer.
* Phase 2: the same program revisits its tiles: waits (sys, acquire) for each peer's signal of the tile, sums the
  ``WORLD`` partials in fp32 in rank order ``0, 1, ..., WORLD-1`` (so every rank produces bit-identical results) and
  stores ``C`` once rounded.

Program ``p`` only waits for program ``p`` of the peers (same tiles), so there is no cross-program dependency.
Pushing all tiles before reducing any lets the peers' pushes overlap this rank's remaining GEMM work.
Reuse: double-buffered by epoch parity, signals compared for equality (same argument as ``gemm_rs``); the epoch
comes from the context's device counter, so calls can be captured in a CUDA graph and replayed.
Layout: ``stage``: fp32 ``[2, WORLD, CAP]`` (``CAP >= M * N``), ``sig``: int64 ``[2, WORLD, MAX_TILES]``.
"""
from __future__ import annotations

import triton.language as tl

import triton_dist
import triton_dist.language as dl

from triton_dist.kernels.common import TAG_RANGE_C, call_epoch, finish_call, store_to_peers
from triton_dist.kernels.gemm import slot_tile, store_tile, tile_acc_ptr, tile_acc_tma, tile_coords, tma_descriptors


@triton_dist.jit
def gemm_ar_kernel(a_ptr, b_ptr, out_ptr, stage_ptr, sig_ptr, counter_ptr, prof_ptr, M, N, K, stride_am, stride_bk,
                   stride_bn, stride_om, stride_on, CAP, MAX_TILES, tag, rank, WORLD: tl.constexpr,
                   BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
                   NUM_SMS: tl.constexpr, USE_TMA: tl.constexpr, PROFILE: tl.constexpr = False):
    """One call (module docstring). ``a``: ``[M, K]`` with unit column stride; ``out``: ``[M, N]``. ``prof_ptr`` /
    ``PROFILE``: accepted for a uniform launch signature with ``gemm_rs_kernel`` (no tasks recorded)."""
    pid = tl.program_id(0)
    e = call_epoch(counter_ptr)
    par = e % 2
    value = e * TAG_RANGE_C + tag
    tiles_m = tl.cdiv(M, BLOCK_M)
    tiles_n = tl.cdiv(N, BLOCK_N)
    num_tiles = tiles_m * tiles_n
    if USE_TMA:
        a_desc, b_desc = tma_descriptors(a_ptr, b_ptr, M, N, K, stride_am, stride_bk, BLOCK_M, BLOCK_N, BLOCK_K)
    slot_w = (par * WORLD + rank) * CAP
    for t in range(pid, num_tiles, NUM_SMS):
        pid_m, pid_n = tile_coords(t, tiles_m, tiles_n, GROUP_M)
        off_m = pid_m * BLOCK_M
        off_n = pid_n * BLOCK_N
        if USE_TMA:
            acc = tile_acc_tma(a_desc, b_desc, off_m, off_n, K, BLOCK_M, BLOCK_N, BLOCK_K)
        else:
            acc = tile_acc_ptr(a_ptr, b_ptr, off_m, off_n, M, N, K, stride_am, 1, stride_bk, stride_bn,
                               BLOCK_M, BLOCK_N, BLOCK_K)
        tile_off, mask = slot_tile(off_m, off_n, M, N, BLOCK_M, BLOCK_N)
        tl.store(stage_ptr + slot_w + tile_off, acc, mask=mask)
        store_to_peers(stage_ptr, slot_w, tile_off, acc, mask, rank, WORLD)
        for i in tl.static_range(1, WORLD):
            peer = (rank + i) % WORLD
            dl.notify(sig_ptr + (par * WORLD + rank) * MAX_TILES + t, peer, value, "set", "intra_node")
    for t in range(pid, num_tiles, NUM_SMS):
        pid_m, pid_n = tile_coords(t, tiles_m, tiles_n, GROUP_M)
        off_m = pid_m * BLOCK_M
        off_n = pid_n * BLOCK_N
        tile_off, mask = slot_tile(off_m, off_n, M, N, BLOCK_M, BLOCK_N)
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for src in tl.static_range(0, WORLD):
            slot = par * WORLD + src
            p = stage_ptr + slot * CAP
            if src != rank:
                tok = dl.wait(sig_ptr + slot * MAX_TILES + t, 1, "sys", "acquire", value)
                p = dl.consume_token(p, tok)
            acc += tl.load(p + tile_off, mask=mask, other=0.0)
        store_tile(out_ptr, acc, off_m, off_n, M, N, stride_om, stride_on, BLOCK_M, BLOCK_N)
    finish_call(counter_ptr, e)


__all__ = ["gemm_ar_kernel"]
