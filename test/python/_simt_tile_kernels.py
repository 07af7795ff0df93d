"""Kernels that index tiles per thread inside ``simt_exec_region`` (issue 16, point 4), as kernels written for the
reference do; compiled by test_simt_tiles.py and test/lit/extra/simt_tiles.py, run on the simulator there. Import
after the interpreter mode is decided."""
import triton
import triton.language as tl

import triton_dist
import triton_dist.language as dl
from triton_dist.language.extra.language_extra import __syncthreads, st


@triton.jit
def transpose_tile(src, dst, T: tl.constexpr):
    """dst = src.T for one T x T fp32 tile: thread t moves columns t, t + n, ... element by element."""
    rows = tl.arange(0, T)
    tile = tl.load(src + rows[:, None] * T + rows[None, :])
    out = tl.zeros((T, T), tl.float32)
    with dl.simt_exec_region() as (t, n):
        for i in range(T):
            for j in range(t, T, n):
                out[j, i] = tile[i, j]
    tl.store(dst + rows[:, None] * T + rows[None, :], out)


@triton.jit
def gather_scale_count(src, idx, dst, hits, N: tl.constexpr):
    """Per thread: dst[k] = 2 * src_tile[idx[k]] (a read-only fp16 tile, per-thread indices loaded from memory);
    counts[idx[k]] += 1 (int32 tile, augmented assignment); flags[k] = True (int1 tile). Then hits = counts where
    flags, else -1."""
    offs = tl.arange(0, N)
    tile = tl.load(src + offs)
    counts = tl.zeros((N, ), tl.int32)
    flags = offs < 0
    with dl.simt_exec_region() as (t, n):
        for k in range(t, N, n):
            i = tl.load(idx + k)
            st(dst + k, tile[i] * 2.0)
            flags[k] = True
        __syncthreads()
        if t == 0:
            for k in range(N):
                counts[tl.load(idx + k)] += 1
    tl.store(hits + offs, tl.where(flags, counts, -1))


@triton_dist.jit
def dist_two_regions(src, dst, T: tl.constexpr):
    """Two regions one after the other (they share one scratch), in a @triton_dist.jit kernel: dst = src.T + 1."""
    rows = tl.arange(0, T)
    tile = tl.load(src + rows[:, None] * T + rows[None, :])
    out = tl.zeros((T, T), tl.float32)
    with dl.simt_exec_region() as (t, n):
        for e in range(t, T * T, n):
            out[e % T, e // T] = tile[e // T, e % T]
    with dl.simt_exec_region() as (t, n):
        for e in range(t, T * T, n):
            out[e // T, e % T] += 1.0
    tl.store(dst + rows[:, None] * T + rows[None, :], out)
