"""The Triton GEMM used by the overlapped kernels: ``C[M, N] = A[M, K] @ B[K, N]`` (fp32 accumulation).

Design (one source, every target; no target checks in the kernel, the host picks the constexprs):

* **Persistent grid**: ``NUM_SMS`` programs walk the output tiles ``pid, pid + NUM_SMS, ...`` (grouped ordering,
  ``GROUP_M`` row-tiles per group, for L2 reuse of B).
* **Loads**: ``USE_TMA=True`` builds device-side tensor descriptors (``tl.make_tensor_descriptor``) for A and B:
  on sm_90 those are TMA loads feeding ``wgmma`` (needs ``triton.set_allocator`` for the descriptor scratch, see
  :func:`ensure_tma_allocator`). ``USE_TMA=False`` is the pointer path (masked ``tl.load``; ``cp.async`` + ``mma.sync``
  on sm_80, ``mfma`` on gfx942, numpy on the simulator). The host chooses with :func:`use_tma_for` (sm_90+ CUDA
  device and not the interpreter). Stock Triton would also rewrite descriptors to pointers below sm_90 and on AMD,
  but the explicit pointer path keeps masks exact and is what the simulator runs.
* **Tile helpers** :func:`tile_acc_tma` / :func:`tile_acc_ptr` compute one ``BLOCK_M x BLOCK_N`` fp32 tile; the
  overlapped kernels (``ag_gemm``, ``gemm_rs``, ``gemm_ar``) call them after ``dl.wait`` with the wait's token
  consumed into the A pointer / row coordinate, so no load of that tile can be hoisted above its wait.
* **Configs**: :data:`CONFIGS` (Hopper-tuned) + :func:`gemm_autotuned` (``triton.autotune`` keyed on ``M, N, K``,
  cached per shape, results cached on disk) for the plain GEMM. The fused kernels cannot be autotuned in-place
  (benchmark launches would consume signal epochs, and ranks could pick different tilings, i.e. different signal
  layouts): they use :func:`pick_config`, a deterministic function of the shape, the same on every rank.
* **Measured table** (``gemm_table.json`` next to this module): per device name, dtype and exact ``(M, N, K)``, the
  tiling and loop / epilogue form (``FLATTEN``, ``TMA_STORE``) that ``benchmarks/bench_gemm.py`` timed fastest, with
  where that came from. :func:`matmul` on a GPU without ``config`` runs an exact-shape entry for its device and dtype
  (through :func:`launch_variant`, the launch bench_gemm times) and otherwise the autotuner: "auto" is
  table-then-autotune. Loaded once, lazily; a malformed file raises :class:`GemmTableError` naming it and the entry.
* fp8 (e4m3/e5m2) inputs: ``acc * scale`` where ``scale`` is ``scale_a * scale_b`` (per-tensor), loaded from a
  1-element fp32 tensor when ``HAS_SCALE``.
"""
from __future__ import annotations

import dataclasses
import functools
import json
import math
import os
import re
from dataclasses import dataclass
from typing import Optional

import triton
import triton.language as tl

import triton_dist
from triton_dist import _compat
from triton_dist._table_file import check_header, read_table


# ----------------------------------------------------------------------------------------------------------------
# device helpers
# ----------------------------------------------------------------------------------------------------------------
@triton_dist.jit
def tile_coords(tile, num_pid_m, num_pid_n, GROUP_M: tl.constexpr):
    """Grouped tile order: ``(pid_m, pid_n)`` of linear tile ``tile`` (GROUP_M row-tiles share a column sweep)."""
    width = GROUP_M * num_pid_n
    group = tile // width
    first_m = group * GROUP_M
    size_m = tl.minimum(num_pid_m - first_m, GROUP_M)
    pid_m = first_m + (tile % width) % size_m
    pid_n = (tile % width) // size_m
    return pid_m, pid_n


@triton_dist.jit
def tma_descriptors(a_ptr, b_ptr, M, N, K, stride_am, stride_bk, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                    BLOCK_K: tl.constexpr):
    """Device-side tensor descriptors ``(a_desc, b_desc)`` of ``A [M, K]`` and ``B [K, N]`` (unit column strides),
    with :func:`tile_acc_tma`'s block shapes."""
    a_desc = tl.make_tensor_descriptor(a_ptr, shape=[M, K], strides=[stride_am, 1], block_shape=[BLOCK_M, BLOCK_K])
    b_desc = tl.make_tensor_descriptor(b_ptr, shape=[K, N], strides=[stride_bk, 1], block_shape=[BLOCK_K, BLOCK_N])
    return a_desc, b_desc


@triton_dist.jit
def tile_acc_tma(a_desc, b_desc, off_m, off_n, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                 BLOCK_K: tl.constexpr):
    """fp32 ``A[off_m:+BM, :] @ B[:, off_n:+BN]`` through tensor descriptors (TMA on sm_90; out-of-range rows and
    columns read as zero). ``off_m`` may carry a ``dl.wait`` token (``dl.consume_token(off_m, tok)``)."""
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        a = a_desc.load([off_m, k * BLOCK_K])
        b = b_desc.load([k * BLOCK_K, off_n])
        acc = tl.dot(a, b, acc)
    return acc


@triton_dist.jit
def tile_acc_tma_k(a_desc, b_desc, off_m, off_n, k_first, k_end, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                   BLOCK_K: tl.constexpr):
    """:func:`tile_acc_tma` over the K blocks ``k_first <= k < k_end`` only (``BLOCK_K`` columns of A / rows of B
    each): one split of a split-K tile. An empty range gives zeros. (The whole-K helpers keep their own loop: routing
    them through this one reorders their generated code.)"""
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(k_first, k_end):
        a = a_desc.load([off_m, k * BLOCK_K])
        b = b_desc.load([k * BLOCK_K, off_n])
        acc = tl.dot(a, b, acc)
    return acc


@triton_dist.jit
def tile_acc_ptr(a_ptr, b_ptr, off_m, off_n, m_end, N, K, stride_am, stride_ak, stride_bk, stride_bn,
                 BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    """Pointer path of :func:`tile_acc_tma`: rows ``>= m_end`` and columns ``>= N`` read as zero. ``a_ptr`` may
    carry a ``dl.wait`` token."""
    offs_m = off_m + tl.arange(0, BLOCK_M)
    offs_n = off_n + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + offs_m[:, None] * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_n[None, :] * stride_bn
    m_ok = offs_m[:, None] < m_end
    n_ok = offs_n[None, :] < N
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        k_left = K - k * BLOCK_K
        a = tl.load(a_ptrs, mask=m_ok & (offs_k[None, :] < k_left), other=0.0)
        b = tl.load(b_ptrs, mask=(offs_k[:, None] < k_left) & n_ok, other=0.0)
        acc = tl.dot(a, b, acc)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    return acc


@triton_dist.jit
def tile_acc_ptr_k(a_ptr, b_ptr, off_m, off_n, m_end, N, K, stride_am, stride_ak, stride_bk, stride_bn, k_first, k_end,
                   BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    """:func:`tile_acc_ptr` over the K blocks ``k_first <= k < k_end`` only (see :func:`tile_acc_tma_k`)."""
    offs_m = off_m + tl.arange(0, BLOCK_M)
    offs_n = off_n + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    k0 = k_first * BLOCK_K
    a_ptrs = a_ptr + offs_m[:, None] * stride_am + (k0 + offs_k[None, :]) * stride_ak
    b_ptrs = b_ptr + (k0 + offs_k[:, None]) * stride_bk + offs_n[None, :] * stride_bn
    m_ok = offs_m[:, None] < m_end
    n_ok = offs_n[None, :] < N
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(k_first, k_end):
        k_left = K - k * BLOCK_K
        a = tl.load(a_ptrs, mask=m_ok & (offs_k[None, :] < k_left), other=0.0)
        b = tl.load(b_ptrs, mask=(offs_k[:, None] < k_left) & n_ok, other=0.0)
        acc = tl.dot(a, b, acc)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    return acc


@triton_dist.jit
def store_tile(c_ptr, acc, off_m, off_n, m_end, N, stride_cm, stride_cn, BLOCK_M: tl.constexpr,
               BLOCK_N: tl.constexpr):
    """Store ``acc`` (converted to C's dtype) at ``C[off_m:, off_n:]``, rows ``< m_end`` and columns ``< N``."""
    offs_m = off_m + tl.arange(0, BLOCK_M)
    offs_n = off_n + tl.arange(0, BLOCK_N)
    ptrs = c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn
    tl.store(ptrs, acc.to(c_ptr.dtype.element_ty), mask=(offs_m[:, None] < m_end) & (offs_n[None, :] < N))


@triton_dist.jit
def slot_tile(off_m, off_n, m_end, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """``(offsets, mask)`` of the tile at ``(off_m, off_n)`` in a row-major ``[m_end, N]`` array (the fp32 partial
    staging slots of ``gemm_rs`` / ``gemm_ar``)."""
    offs_m = off_m + tl.arange(0, BLOCK_M)
    offs_n = off_n + tl.arange(0, BLOCK_N)
    return offs_m[:, None] * N + offs_n[None, :], (offs_m[:, None] < m_end) & (offs_n[None, :] < N)


@triton_dist.jit
def gemm_kernel(a_ptr, b_ptr, c_ptr, scale_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm,
                stride_cn, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                GROUP_M: tl.constexpr, NUM_SMS: tl.constexpr, USE_TMA: tl.constexpr, HAS_SCALE: tl.constexpr,
                FLATTEN: tl.constexpr = False, TMA_STORE: tl.constexpr = False):
    """Persistent GEMM ``C = (A @ B) * scale`` (scale only when ``HAS_SCALE``). Grid: ``min(NUM_SMS, tiles)``
    programs; each walks tiles ``pid, pid + NUM_SMS, ...``. ``USE_TMA`` needs ``stride_ak == stride_bn == 1``.
    ``FLATTEN``: the tile loop and the K loop are fused into one software-pipelined loop (``tl.range(...,
    flatten=True)``), so the next tile's loads are in flight during a tile's epilogue. ``TMA_STORE`` (with
    ``USE_TMA``, ``stride_cn == 1``, 16-byte aligned C rows): the epilogue stores through a tensor descriptor."""
    pid = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    num_tiles = num_pid_m * num_pid_n
    if USE_TMA:
        a_desc, b_desc = tma_descriptors(a_ptr, b_ptr, M, N, K, stride_am, stride_bk, BLOCK_M, BLOCK_N, BLOCK_K)
        if TMA_STORE:
            c_desc = tl.make_tensor_descriptor(c_ptr, shape=[M, N], strides=[stride_cm, 1],
                                               block_shape=[BLOCK_M, BLOCK_N])
    scale = 1.0
    if HAS_SCALE:
        scale = tl.load(scale_ptr)
    for tile in tl.range(pid, num_tiles, NUM_SMS, flatten=FLATTEN):
        pid_m, pid_n = tile_coords(tile, num_pid_m, num_pid_n, GROUP_M)
        off_m = pid_m * BLOCK_M
        off_n = pid_n * BLOCK_N
        if USE_TMA:
            acc = tile_acc_tma(a_desc, b_desc, off_m, off_n, K, BLOCK_M, BLOCK_N, BLOCK_K)
        else:
            acc = tile_acc_ptr(a_ptr, b_ptr, off_m, off_n, M, N, K, stride_am, stride_ak, stride_bk, stride_bn,
                               BLOCK_M, BLOCK_N, BLOCK_K)
        if HAS_SCALE:
            acc = acc * scale
        if USE_TMA and TMA_STORE:
            c_desc.store([off_m, off_n], acc.to(c_ptr.dtype.element_ty))
        else:
            store_tile(c_ptr, acc, off_m, off_n, M, N, stride_cm, stride_cn, BLOCK_M, BLOCK_N)


@triton_dist.jit
def split_k_reduce(acc, ws_ptr, cnt_ptr, t, s, tile_off, mask, MN, SPLIT_K: tl.constexpr, BLOCK_M: tl.constexpr,
                   BLOCK_N: tl.constexpr):
    """Split-K handshake of one unit (split ``s`` of tile ``t``), executed by every thread of the program; returns
    ``(acc, finisher)``.

    Pseudocode::

        ws[s][tile] = acc                                  # fp32 partial of this split (mask: in-range elements)
        barrier()                                          # every thread's stores precede the count
        arrived = atomic_add(cnt[t], 1, acq_rel, gpu)      # one per unit
        finisher = arrived == SPLIT_K - 1                  # the last split of tile t to arrive (any program)
        if finisher:
            barrier()                                      # the acquire precedes every thread's loads
            acc = ws[0][tile] + ws[1][tile] + ... + ws[SPLIT_K - 1][tile]   # in split order, .cg loads (L2)
            cnt[t] = 0                                     # ready for the next launch
        return acc, finisher

    The sum is in split order whichever program finishes: bit-identical results run to run. ``ws``: fp32
    ``[SPLIT_K, MN]`` laid out like :func:`slot_tile`'s ``tile_off``; ``cnt``: int32, 0 before the tile's first
    unit (every launch leaves it 0). Nothing waits: a unit that is not last just leaves."""
    tl.store(ws_ptr + s * MN + tile_off, acc, mask=mask)
    tl.debug_barrier()  # every thread's part of the partial is stored before the count is released
    arrived = tl.atomic_add(cnt_ptr + t, 1, sem="acq_rel", scope="gpu")
    finisher = arrived == SPLIT_K - 1
    if finisher:
        tl.debug_barrier()  # the acquire (one thread) before any thread reads the other splits
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for j in tl.static_range(0, SPLIT_K):
            acc += tl.load(ws_ptr + j * MN + tile_off, mask=mask, other=0.0, cache_modifier=".cg")
        tl.store(cnt_ptr + t, 0)
    return acc, finisher


@triton_dist.jit
def gemm_split_k_kernel(a_ptr, b_ptr, c_ptr, scale_ptr, ws_ptr, cnt_ptr, M, N, K, stride_am, stride_ak, stride_bk,
                        stride_bn, stride_cm, stride_cn, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                        BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr, NUM_SMS: tl.constexpr, USE_TMA: tl.constexpr,
                        HAS_SCALE: tl.constexpr, SPLIT_K: tl.constexpr):
    """Persistent split-K GEMM ``C = (A @ B) * scale`` for decode sizes, where the output tiles alone would leave
    SMs idle while the weights ``B`` stream. A *unit* ``u = t * SPLIT_K + s`` is split ``s`` of output tile ``t``:
    the K blocks ``[s * per, min((s + 1) * per, cdiv(K, BLOCK_K)))``, ``per = cdiv(cdiv(K, BLOCK_K), SPLIT_K)``
    (an empty range contributes zeros). Grid: ``min(NUM_SMS, units)`` programs; each walks units ``pid, pid +
    NUM_SMS, ...``, computes its partial and hands it to :func:`split_k_reduce`; the tile's finisher scales and
    stores ``C`` (rows ``< M``, columns ``< N``). ``SPLIT_K = 1``: every unit is a whole tile, stored directly.
    Workspace: ``ws`` fp32 ``[SPLIT_K, M * N]``, ``cnt`` int32 ``[tiles]`` zero before the launch and zero after it
    (:func:`split_k_workspace`). Deterministic: the split partials are summed in split order. ``USE_TMA`` needs
    unit column strides of ``A`` and ``B``."""
    pid = tl.program_id(0)
    tiles_m = tl.cdiv(M, BLOCK_M)
    tiles_n = tl.cdiv(N, BLOCK_N)
    num_units = tiles_m * tiles_n * SPLIT_K
    k_blocks = tl.cdiv(K, BLOCK_K)
    per_split = tl.cdiv(k_blocks, SPLIT_K)
    if USE_TMA:
        a_desc, b_desc = tma_descriptors(a_ptr, b_ptr, M, N, K, stride_am, stride_bk, BLOCK_M, BLOCK_N, BLOCK_K)
    scale = 1.0
    if HAS_SCALE:
        scale = tl.load(scale_ptr)
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
            acc = tile_acc_ptr_k(a_ptr, b_ptr, off_m, off_n, M, N, K, stride_am, stride_ak, stride_bk, stride_bn,
                                 k_first, k_end, BLOCK_M, BLOCK_N, BLOCK_K)
        finisher = True
        if SPLIT_K > 1:
            tile_off, mask = slot_tile(off_m, off_n, M, N, BLOCK_M, BLOCK_N)
            acc, finisher = split_k_reduce(acc, ws_ptr, cnt_ptr, t, s, tile_off, mask, M * N, SPLIT_K, BLOCK_M,
                                           BLOCK_N)
        if finisher:
            if HAS_SCALE:
                acc = acc * scale
            store_tile(c_ptr, acc, off_m, off_n, M, N, stride_cm, stride_cn, BLOCK_M, BLOCK_N)


# ----------------------------------------------------------------------------------------------------------------
# configs
# ----------------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class TileConfig:
    """One tiling: block sizes, group size, warps, pipeline stages, ``flatten`` (the kernel's tile loop and K loop
    fused into one software-pipelined loop: ``FLATTEN`` of :func:`gemm_kernel` and of the AG+GEMM kernel),
    ``pointer_loads`` (masked pointer loads instead of tensor descriptors even where TMA is available: the fused
    launches' ``USE_TMA`` is off; no descriptor is built on the device), ``split_k`` (the K blocks of a tile
    shared by that many programs: ``SPLIT_K`` of :func:`gemm_split_k_kernel` and of the GEMM+AR kernel) and
    ``tma_store`` (the epilogue stores each tile through a tensor descriptor: ``TMA_STORE`` of the AG+GEMM kernel,
    where its launch allows it; needs TMA loads, so not with ``pointer_loads``)."""

    BLOCK_M: int
    BLOCK_N: int
    BLOCK_K: int
    GROUP_M: int = 8
    num_warps: int = 8
    num_stages: int = 3
    flatten: bool = False
    split_k: int = 1
    pointer_loads: bool = False
    tma_store: bool = False

    def __post_init__(self):
        if self.tma_store and self.pointer_loads:
            raise ValueError(f"tile config {self}: a TMA store (t) needs TMA loads; pointer loads (p) build no "
                             f"descriptor")

    def meta(self, with_flatten: bool = True, with_split: bool = False) -> dict:
        """Constexpr keywords of a launch; ``FLATTEN`` only when set and ``with_flatten``, ``SPLIT_K`` only when
        ``with_split`` (kernels without a flattened or split-K form leave them out and ignore those fields)."""
        meta = dict(BLOCK_M=self.BLOCK_M, BLOCK_N=self.BLOCK_N, BLOCK_K=self.BLOCK_K, GROUP_M=self.GROUP_M)
        if self.flatten and with_flatten:
            meta["FLATTEN"] = True
        if with_split:
            meta["SPLIT_K"] = self.split_k
        return meta

    def launch(self) -> dict:
        return dict(num_warps=self.num_warps, num_stages=self.num_stages)

    def __str__(self) -> str:
        flat = "f" if self.flatten else ""
        store = "t" if self.tma_store else ""
        ptr = "p" if self.pointer_loads else ""
        split = f"k{self.split_k}" if self.split_k > 1 else ""
        return (f"{self.BLOCK_M}x{self.BLOCK_N}x{self.BLOCK_K}x{self.num_warps}x{self.num_stages}{flat}{store}{ptr}"
                f"{split}")

    @classmethod
    def parse(cls, text: str, group_m: int = 8) -> "TileConfig":
        """``"BMxBNxBKxWARPSxSTAGES"`` with optional suffixes, in this order: ``f`` (``flatten``), ``t``
        (``tma_store``), ``p`` (``pointer_loads``; not with ``t``), ``kS`` (``split_k = S``), as ``str()`` writes it
        -> TileConfig; ValueError otherwise."""
        m = re.fullmatch(r"(\d+)x(\d+)x(\d+)x(\d+)x(\d+)(f?)(t?)(p?)(?:k(\d+))?", str(text).strip().lower())
        if m is None:
            raise ValueError(f"tile config {text!r}: expected BMxBNxBKxWARPSxSTAGES[f][t|p][kS], e.g. "
                             f"128x256x64x8x3, 128x128x64x4x4f (f: flattened loop), 128x128x64x4x6ft (t: TMA-store "
                             f"epilogue), 16x64x128x4x4p (p: pointer loads, no TMA) or 64x128x128x4x4k2 (k2: split-K "
                             f"by 2)")
        bm, bn, bk, w, st = (int(v) for v in m.groups()[:5])
        split = int(m.group(9) or 1)
        if min(bm, bn, bk, w, st, split) < 1 or any(v & (v - 1) for v in (bm, bn, bk, w)):
            raise ValueError(f"tile config {text!r}: block sizes and warps must be positive powers of two, stages "
                             f"and split-K >= 1")
        if m.group(7) and m.group(8):
            raise ValueError(f"tile config {text!r}: t (TMA-store epilogue) needs TMA loads; p (pointer loads) "
                             f"builds no descriptor: use one of them")
        return cls(bm, bn, bk, group_m, w, st, bool(m.group(6)), split, bool(m.group(8)), bool(m.group(7)))


#: Hopper bf16/fp16 autotune candidates (128x256x64 / 4 stages is the classic sm_90 wgmma sweet spot).
#: 128x128x64 with one warpgroup and 6 stages is what cuBLAS runs at M = 256 on an H200 (ncu: nvjet 128x128_64x6,
#: 128 CTAs); ours with it went from 0.92x / 0.87x cuBLAS (the autotuner without it) to 0.97x / 0.94x at
#: 256x8192x7168 / 256x7168x4096 (benchmarks/results/2026-12-01-decode-gemm/stages-33afd5a).
CONFIGS = [
    TileConfig(128, 256, 64, 8, 8, 3),
    TileConfig(128, 256, 64, 8, 8, 4),
    TileConfig(128, 128, 64, 8, 8, 4),
    TileConfig(128, 128, 64, 8, 4, 4),
    TileConfig(128, 128, 64, 8, 4, 6),
    TileConfig(64, 128, 64, 8, 4, 4),
    TileConfig(128, 64, 64, 8, 4, 4),
]
#: Simulator tiling (tiny: the interpreter executes each tile with numpy).
SIM_CONFIG = TileConfig(16, 16, 16, 4, 1, 1)


def env_config():
    """The tiling ``TRITON_DIST_OVERLAP_CONFIG=BMxBNxBKxWARPSxSTAGES[f][t|p][kS]`` sets for every fused launch
    (tuning; :meth:`TileConfig.parse`; a kernel without a flattened, TMA-store or split-K form ignores ``f`` / ``t``
    / ``kS``), or None when it is unset. A malformed value raises ValueError naming the variable."""
    env = os.environ.get("TRITON_DIST_OVERLAP_CONFIG", "").strip()
    if not env:
        return None
    try:
        return TileConfig.parse(env)
    except ValueError as exc:
        raise ValueError(f"TRITON_DIST_OVERLAP_CONFIG: {exc}") from None


def pick_config(M: int, N: int, K: int, *, on_gpu: bool, elem_bytes: int = 2, cc: int = 90,
                sim_config: TileConfig = SIM_CONFIG) -> TileConfig:
    """Deterministic tiling for the fused kernels (same on every rank). GPU: 128x256x64 for large shapes,
    128x128x64 when the tile count would leave SMs idle, 64x128 for small M; fp8 doubles BLOCK_K.
    :func:`env_config` overrides it."""
    env = env_config()
    if env is not None:
        return env
    if not on_gpu:
        return sim_config
    bk = 128 if elem_bytes == 1 else 64
    stages = 3
    if M <= 256:
        return TileConfig(64, 128, bk, 8, 4, 4 if cc >= 90 else 3)
    if cc < 90:
        return TileConfig(128, 128, 32, 8, 4, stages)
    if (M // 128) * (N // 256) >= 132:
        return TileConfig(128, 256, bk, 8, 8, stages)
    return TileConfig(128, 128, bk, 8, 8, 4)


#: most programs that share the K blocks of one tile (``SPLIT_K`` of :func:`gemm_split_k_kernel` and of the GEMM+AR
#: kernel); the decode rule (:func:`pick_decode_config`) never splits more
SPLIT_K_MAX = 8
#: most rows the decode rule covers (:func:`pick_decode_config`; ``matmul``'s "auto" above it is the autotuner, the
#: GEMM+AR kernel's workspace holds ``SPLIT_K_MAX * min(max_m, SPLIT_K_MAX_M) * n`` fp32): split-K pays off where the
#: output tiles alone cannot keep the SMs streaming weights, i.e. at decode sizes
SPLIT_K_MAX_M = 128


def pick_decode_config(M: int, N: int, K: int, *, num_sms: int) -> TileConfig:
    """Deterministic tiling for ``M <= SPLIT_K_MAX_M`` rows (decode), where a GEMM is a stream of the weights ``B``.
    Measured on H200 (``benchmarks/results/2026-12-01-decode-gemm``, bf16, N=4096-28672, K=3584-14336): masked
    pointer loads beat tensor descriptors by 1-3 us per call at every such shape (the descriptors' fixed cost), 128-deep
    K blocks beat 64, and the fastest tiles leave about one tile per SM: 16x64 for M <= 16, 64x64 for M <= 64, 64x128
    for M <= 128 (4 warps, 4 stages). Where the tiles still leave half the SMs idle the K blocks are split, ``split =
    max(1, min(SPLIT_K_MAX, num_sms // tiles, K blocks))`` (1x4096x14336: 64 tiles, split 2, 31.3 us against 44.2
    unsplit); a split with the SMs already covered only adds its workspace round trip. The same on every rank (a
    function of the shape and the SM count). ValueError above :data:`SPLIT_K_MAX_M` rows."""
    if M > SPLIT_K_MAX_M:
        raise ValueError(f"pick_decode_config: M={M} rows; the decode rule covers M <= {SPLIT_K_MAX_M}")
    bm, bn, bk = (16, 64, 128) if M <= 16 else ((64, 64, 128) if M <= 64 else (64, 128, 128))
    tiles = -(-M // bm) * -(-N // bn)
    split = max(1, min(SPLIT_K_MAX, num_sms // tiles, -(-K // bk)))
    return TileConfig(bm, bn, bk, 8, 4, 4, split_k=split, pointer_loads=True)


_split_k_ws = {}  # (device, stream handle) -> [fp32 workspaces], never freed (a captured graph may hold one)
_split_k_cnt = {}  # (device, stream handle) -> [int32 counter arrays zeroed eagerly], never freed
_split_k_captured = []  # counter arrays allocated (and zeroed) inside a CUDA-graph capture: owned by that graph


def split_k_workspace(device, ws_elems: int, tiles: int):
    """``(ws, cnt)`` for one :func:`gemm_split_k_kernel` launch on ``device`` from the current stream: an fp32
    workspace of at least ``ws_elems`` elements and an int32 array of at least ``tiles`` counters that are 0 (every
    launch leaves them 0). Cached per device and stream, like cuBLAS's workspace: launches on one stream are ordered,
    so they can share it; two streams get two. Never freed, so a CUDA graph that captured a launch keeps valid
    pointers. Inside a capture, counters not zeroed before it are allocated anew (their zeroing is a memset node of
    that graph, so they are not reused outside it); one eager call of the shape before capturing avoids that node.
    Hazard (as with cuBLAS's workspace): replaying a graph concurrently with other split-K work of the stream it
    was captured on."""
    import torch

    capturing = False
    handle = 0
    if device.type == "cuda":
        handle = torch.cuda.current_stream(device).cuda_stream
        capturing = torch.cuda.is_current_stream_capturing()
    key = (str(device), handle)
    ws_list = _split_k_ws.setdefault(key, [])
    ws = next((w for w in ws_list if w.numel() >= ws_elems), None)
    if ws is None:
        # at least the decode rule's largest need (num_sms units of 64x128 fp32 tiles): one buffer serves them all
        floor = num_sms(device) * 64 * 128 if device.type == "cuda" else 0
        ws = torch.empty((max(ws_elems, floor), ), dtype=torch.float32, device=device)
        ws_list.append(ws)
    cnt_list = _split_k_cnt.setdefault(key, [])
    cnt = next((c for c in cnt_list if c.numel() >= tiles), None)
    if cnt is None:
        cnt = torch.zeros((max(tiles, 1024), ), dtype=torch.int32, device=device)
        (_split_k_captured if capturing else cnt_list).append(cnt)
    return ws, cnt


def launch_split_k(a, b, c, cfg: TileConfig, scale=None, sms: Optional[int] = None, use_tma: bool = True):
    """Launch :func:`gemm_split_k_kernel` for ``c = (a @ b) * scale`` with ``cfg`` (its ``split_k`` > 1; workspace
    from :func:`split_k_workspace`). ValueError when ``split_k * M * N`` does not fit 32-bit offsets. No operand
    checks: callers check."""
    M, K = a.shape
    N = b.shape[1]
    split = cfg.split_k
    if split * M * N >= 2 ** 31:
        raise ValueError(f"matmul: split-K {split} of a {M}x{N} output needs {split * M * N} workspace elements; at "
                         f"most 2**31 - 1 (32-bit offsets): use fewer splits or rows")
    sms = num_sms(a.device) if sms is None else sms
    tiles = triton.cdiv(M, cfg.BLOCK_M) * triton.cdiv(N, cfg.BLOCK_N)
    ws, cnt = split_k_workspace(a.device, split * M * N, tiles)
    grid = (min(sms, tiles * split), )
    gemm_split_k_kernel[grid](a, b, c, c if scale is None else scale, ws, cnt, M, N, K, a.stride(0), a.stride(1),
                              b.stride(0), b.stride(1), c.stride(0), c.stride(1), **cfg.meta(with_flatten=False),
                              NUM_SMS=sms, USE_TMA=use_tma, HAS_SCALE=scale is not None, SPLIT_K=split,
                              **cfg.launch())
    return c


def launch_autotuned(a, b, c, scale=None, sms: Optional[int] = None, use_tma: bool = True):
    """Launch :func:`gemm_autotuned` for ``c = (a @ b) * scale`` (GPU; the autotuner's pick per ``M, N, K``): what
    :func:`matmul` runs when neither the table nor the decode rule applies, and ``benchmarks/bench_gemm.py``'s
    ``ours/autotune``. No operand checks: callers check."""
    M, K = a.shape
    N = b.shape[1]
    sms = num_sms(a.device) if sms is None else sms
    grid = lambda META: (min(sms, triton.cdiv(M, META["BLOCK_M"]) * triton.cdiv(N, META["BLOCK_N"])), )  # noqa
    gemm_autotuned()[grid](a, b, c, c if scale is None else scale, M, N, K, a.stride(0), a.stride(1), b.stride(0),
                           b.stride(1), c.stride(0), c.stride(1), NUM_SMS=sms, USE_TMA=use_tma,
                           HAS_SCALE=scale is not None)
    return c


def autotune_configs():
    """:data:`CONFIGS` as ``triton.Config`` objects, each with ``FLATTEN`` off and on (the autotuned GEMMs'
    candidates: ``gemm_kernel`` and the kernels that share its tile loop take a ``FLATTEN`` switch). Measured on
    H200 (``benchmarks/bench_gemm.py``): the flattened loop is 1-4% faster at most overlap shapes, not all."""
    return [triton.Config({**c.meta(), "FLATTEN": flat}, num_warps=c.num_warps, num_stages=c.num_stages)
            for c in CONFIGS for flat in (False, True)]


@functools.lru_cache(maxsize=None)
def gemm_autotuned():
    """``gemm_kernel`` wrapped in ``triton.autotune`` (keyed on ``M, N, K``; per-shape results cached in memory and
    on disk). Created on first use (GPU only)."""
    return triton.autotune(configs=autotune_configs(), key=["M", "N", "K"], cache_results=True)(gemm_kernel)


def use_tma_for(device) -> bool:
    """Host decision for ``USE_TMA``: a CUDA device of compute capability >= 9.0 (and not the interpreter)."""
    import torch

    if _compat.interpret_enabled() or getattr(device, "type", "cpu") != "cuda":
        return False
    if getattr(torch.version, "hip", None):
        return False
    major, _ = torch.cuda.get_device_capability(device)
    return major >= 9


_allocator_set = False


def ensure_tma_allocator() -> None:
    """Device-side tensor descriptors need per-launch global scratch: install a torch-backed Triton allocator if
    none is set (a user-set allocator is kept)."""
    global _allocator_set
    if _allocator_set:
        return
    import torch

    if _compat.allocator_is_unset():
        def alloc(size: int, alignment: int, stream):
            return torch.empty(size, device="cuda", dtype=torch.int8)

        triton.set_allocator(alloc)
    _allocator_set = True


def num_sms(device) -> int:
    """Programs of a persistent grid on ``device``: this rank's SMs (its share where ranks share a GPU,
    ``runtime.device_info.rank_sm_count``); 2 on the interpreter."""
    if getattr(device, "type", "cpu") == "cuda":
        from ..runtime.device_info import rank_sm_count

        return rank_sm_count(device)
    return 2


# ----------------------------------------------------------------------------------------------------------------
# measured dispatch table (gemm_table.json)
# ----------------------------------------------------------------------------------------------------------------
#: The loop / epilogue forms of :func:`gemm_kernel` that ``benchmarks/bench_gemm.py`` times per tiling, by the name
#: its variants carry (``ours/<tiling>/<form>``): ``(FLATTEN, TMA_STORE)``.
GEMM_FORMS = {"plain": (False, False), "flat": (True, False), "tma": (False, True), "flat+tma": (True, True)}
#: The measured table shipped with the package, written by ``benchmarks/bench_gemm.py --write-table`` (or
#: ``--table-from JSON``). ``$TRITON_DIST_GEMM_TABLE`` names another file instead.
GEMM_TABLE_PATH = os.path.join(os.path.dirname(__file__), "gemm_table.json")
GEMM_TABLE_ENV = "TRITON_DIST_GEMM_TABLE"
GEMM_TABLE_FORMAT = "triton_dist.gemm_table/1"
GEMM_TABLE_DTYPES = ("bfloat16", "float16", "float8_e4m3fn", "float8_e5m2")
#: Keys every entry carries: the launch (``config``, ``flatten``, ``tma_store``) and its provenance (the bench JSON
#: ``source`` and its ``git_commit`` / ``timestamp_utc``, the entry's and cuBLAS's measured ``us`` / ``cublas_us``).
GEMM_TABLE_KEYS = ("config", "flatten", "tma_store", "source", "git_commit", "timestamp_utc", "us", "cublas_us")


class GemmTableError(ValueError):
    """The measured GEMM table file is malformed (the message names the file and the bad entry)."""


@dataclass(frozen=True)
class GemmVariant:
    """One launch of :func:`launch_variant`: a tiling (:func:`variant_config`: no ``f`` suffix, the form says
    ``flatten``; ``p``: pointer loads; ``kS``: split-K, :func:`gemm_split_k_kernel`) and the loop / epilogue form
    (one of :func:`variant_forms` of the tiling)."""

    config: TileConfig
    flatten: bool = False
    tma_store: bool = False

    @property
    def form(self) -> str:
        return next(name for name, f in GEMM_FORMS.items() if f == (self.flatten, self.tma_store))

    def __str__(self) -> str:
        return f"{self.config}/{self.form}"

    @classmethod
    def parse(cls, text: str) -> "GemmVariant":
        """``"<tiling>/<form>"`` (bench_gemm's variant name without ``ours/``, e.g. ``128x128x64x4x4/flat+tma``) ->
        GemmVariant; ValueError otherwise."""
        tiling, sep, form = str(text).strip().partition("/")
        if not sep or form not in GEMM_FORMS:
            raise ValueError(f"gemm variant {text!r}: expected <tiling>/<form>, form one of {', '.join(GEMM_FORMS)}")
        cfg = variant_config(tiling)
        if form not in variant_forms(cfg):
            raise ValueError(f"gemm variant {text!r}: tiling {cfg} runs as {', '.join(variant_forms(cfg))} only")
        return cls(cfg, *GEMM_FORMS[form])


def variant_config(text: str) -> TileConfig:
    """A tiling :func:`launch_variant` can run (what bench_gemm's ``--configs`` and a table entry's ``config``
    accept): :meth:`TileConfig.parse` text without the ``f`` and ``t`` suffixes (the form carries ``FLATTEN`` and
    ``TMA_STORE``); ``p`` (pointer loads) and ``kS`` (split-K) are accepted. ValueError otherwise."""
    cfg = TileConfig.parse(text)
    if cfg.flatten or cfg.tma_store:
        bare = str(dataclasses.replace(cfg, flatten=False, tma_store=False))
        form = "flat+tma" if cfg.flatten and cfg.tma_store else ("flat" if cfg.flatten else "tma")
        raise ValueError(f"tile config {text!r}: a GEMM variant takes its loop and epilogue form from the form name: "
                         f"no f suffix (loop) or t suffix (TMA store) (e.g. {bare}/{form})")
    return cfg


def variant_forms(cfg: TileConfig) -> tuple:
    """The forms (:data:`GEMM_FORMS` names) a tiling runs in: split-K (``kS``, S > 1) ``plain`` only (its kernel has
    one loop form and stores through pointers); pointer loads (``p``) ``plain`` and ``flat`` (no descriptor, so no
    TMA store); otherwise all four."""
    if cfg.split_k > 1:
        return ("plain", )
    if cfg.pointer_loads:
        return ("plain", "flat")
    return tuple(GEMM_FORMS)


def launch_variant(a, b, c, variant: GemmVariant, scale=None, sms: Optional[int] = None):
    """Launch ``c = (a @ b) * scale`` with one tiling and form: :func:`gemm_kernel` with TMA loads (sm_90; pointer
    loads for a ``p`` tiling), or :func:`gemm_split_k_kernel` for a ``kS`` tiling (:func:`launch_split_k`). The
    launch ``benchmarks/bench_gemm.py`` times for its variants and :func:`matmul` runs for a table entry (one helper,
    so the two cannot drift). ``sms``: the grid bound (default: the device's SM count). No operand checks: callers
    check."""
    M, K = a.shape
    N = b.shape[1]
    cfg = variant.config
    sms = num_sms(a.device) if sms is None else sms
    if cfg.split_k > 1:
        return launch_split_k(a, b, c, cfg, scale=scale, sms=sms, use_tma=not cfg.pointer_loads)
    grid = (min(sms, triton.cdiv(M, cfg.BLOCK_M) * triton.cdiv(N, cfg.BLOCK_N)), )
    gemm_kernel[grid](a, b, c, c if scale is None else scale, M, N, K, a.stride(0), a.stride(1), b.stride(0),
                      b.stride(1), c.stride(0), c.stride(1), **cfg.meta(with_flatten=False), NUM_SMS=sms,
                      USE_TMA=not cfg.pointer_loads, HAS_SCALE=scale is not None, FLATTEN=variant.flatten,
                      TMA_STORE=variant.tma_store, **cfg.launch())
    return c


def _positive_int(text) -> bool:
    return str(text).isdigit() and int(text) > 0


def _parse_gemm_entry(where: str, ent) -> GemmVariant:
    if not isinstance(ent, dict):
        raise GemmTableError(f"{where}: expected an object with {', '.join(GEMM_TABLE_KEYS)}, got {ent!r}")
    missing = [k for k in GEMM_TABLE_KEYS if k not in ent]
    if missing:
        raise GemmTableError(f"{where}: missing {', '.join(missing)} (every entry names its launch and the bench JSON "
                             f"it was measured in)")
    try:
        cfg = variant_config(ent["config"]) if isinstance(ent["config"], str) else None
    except ValueError as exc:
        raise GemmTableError(f"{where}.config: {exc}") from None
    if cfg is None:
        raise GemmTableError(f"{where}.config: expected a tiling string, got {ent['config']!r}")
    for key in ("flatten", "tma_store"):
        if not isinstance(ent[key], bool):
            raise GemmTableError(f"{where}.{key}: expected true or false, got {ent[key]!r}")
    form = next(name for name, f in GEMM_FORMS.items() if f == (ent["flatten"], ent["tma_store"]))
    if form not in variant_forms(cfg):
        raise GemmTableError(f"{where}: tiling {cfg} runs as {', '.join(variant_forms(cfg))} only, the entry says "
                             f"{form} (flatten / tma_store)")
    for key in ("us", "cublas_us"):
        v = ent[key]
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0:
            raise GemmTableError(f"{where}.{key}: expected a positive number of microseconds, got {v!r}")
    for key, nullable in (("source", False), ("git_commit", True), ("timestamp_utc", False)):
        v = ent[key]
        if not (isinstance(v, str) and v.strip() or nullable and v is None):
            raise GemmTableError(f"{where}.{key}: expected a non-empty string{' or null' if nullable else ''}, "
                                 f"got {v!r}")
    return GemmVariant(cfg, ent["flatten"], ent["tma_store"])


def parse_gemm_table(doc, path: str = "<table>") -> dict:
    """Check a table document and return ``{(device, dtype, M, N, K): GemmVariant}``. Raises
    :class:`GemmTableError` naming ``path`` and the entry.

    Document: ``{"format": GEMM_TABLE_FORMAT, "devices": {device name: {dtype: {"MxNxK": {"config": tiling,
    "flatten": bool, "tma_store": bool, "source": bench JSON path, "git_commit": str | null, "timestamp_utc": str,
    "us": float, "cublas_us": float, ...}}}}}`` (device names as ``torch.cuda.get_device_name`` gives them; extra
    keys are more provenance, ignored here)."""
    check_header(doc, path, "GEMM", "devices", GEMM_TABLE_FORMAT, GemmTableError)
    out = {}
    for dev, by_dtype in doc["devices"].items():
        if not dev.strip() or not isinstance(by_dtype, dict):
            raise GemmTableError(f"{path}: devices.{dev!r}: expected a device name and an object keyed by dtype")
        for dt, by_shape in by_dtype.items():
            where = f"{path}: devices.{dev}.{dt}"
            if dt not in GEMM_TABLE_DTYPES:
                raise GemmTableError(f"{where}: unknown dtype; accepted: {', '.join(GEMM_TABLE_DTYPES)}")
            if not isinstance(by_shape, dict):
                raise GemmTableError(f"{where}: expected an object keyed by shape MxNxK")
            for shape, ent in by_shape.items():
                dims = str(shape).split("x")
                if len(dims) != 3 or not all(_positive_int(d) for d in dims):
                    raise GemmTableError(f"{where}.{shape}: shape key must be MxNxK with positive integers")
                out[(dev, dt) + tuple(int(d) for d in dims)] = _parse_gemm_entry(f"{where}.{shape}", ent)
    return out


_gemm_table = None  # (path, {(device, dtype, M, N, K): GemmVariant})


def gemm_table_path() -> str:
    """The measured table in use: ``$TRITON_DIST_GEMM_TABLE`` if set, else :data:`GEMM_TABLE_PATH`."""
    return os.environ.get(GEMM_TABLE_ENV) or GEMM_TABLE_PATH


def load_gemm_table(reload: bool = False) -> dict:
    """The parsed measured table (read once, lazily, on the first :func:`matmul` that may use it, from
    :func:`gemm_table_path`; ``reload=True`` reads it again). A missing file is an empty table; a malformed one
    raises :class:`GemmTableError` naming the file and the entry (every later call raises it again)."""
    global _gemm_table
    if _gemm_table is None or reload:
        _gemm_table = None
        path = gemm_table_path()
        found = read_table(path, parse_gemm_table, GemmTableError)
        _gemm_table = (path, {} if found is None else found[1])
    return _gemm_table[1]


def _dtype_name(dtype) -> str:
    return str(dtype).replace("torch.", "")


def gemm_table_lookup(device_name: str, dtype, M: int, N: int, K: int) -> Optional[GemmVariant]:
    """The measured table's variant for an ``M x N x K`` GEMM in ``dtype`` (a ``torch.dtype`` or its name) on the
    device named ``device_name``, or None: exact device, dtype and shape only."""
    return load_gemm_table().get((device_name, _dtype_name(dtype), int(M), int(N), int(K)))


def select_matmul_launch(M: int, N: int, K: int, dtype, device_name: Optional[str], *, use_tma: bool,
                         num_sms: int, config: Optional[TileConfig] = None, autotune: bool = True,
                         table: bool = True, tma_store_ok: bool = True):
    """What :func:`matmul` launches, as ``(kind, what)``: ``("config", TileConfig or None)`` (the given ``config``,
    or :func:`pick_config`'s when None: off GPU, ``autotune=False``), ``("table", GemmVariant)`` (an exact-shape entry
    of the measured table for this device and dtype), ``("decode", TileConfig)`` (no entry and ``M <=
    SPLIT_K_MAX_M``: :func:`pick_decode_config` for ``num_sms`` SMs, split-K where the tiles leave SMs idle) or
    ``("autotune", None)``. ``device_name`` None means not on a GPU. A table entry is taken only where its launch is
    the one measured: TMA loads available (``use_tma``) and, for a ``tma_store`` entry, an output a tensor descriptor
    can store to (``tma_store_ok``); ``table=False`` skips the table (the decode rule still applies)."""
    if device_name is None or config is not None or not autotune:
        return "config", config
    if table and use_tma:
        var = gemm_table_lookup(device_name, dtype, M, N, K)
        if var is not None and (tma_store_ok or not var.tma_store):
            return "table", var
    if M <= SPLIT_K_MAX_M:
        return "decode", pick_decode_config(M, N, K, num_sms=num_sms)
    return "autotune", None


@functools.lru_cache(maxsize=None)
def _device_name(index: int) -> str:
    import torch

    return torch.cuda.get_device_name(index)


def tma_store_ok(out) -> bool:
    """``out`` can be the base of a tensor descriptor: unit column stride, 16-byte aligned rows and base."""
    return out.stride(1) == 1 and (out.stride(0) * out.element_size()) % 16 == 0 and out.data_ptr() % 16 == 0


def _timestamp_of(doc: dict, source: str) -> Optional[str]:
    """The run's UTC timestamp: the document's ``timestamp_utc``, else the ``gemm-<stamp>.json`` file name's."""
    if doc.get("timestamp_utc"):
        return str(doc["timestamp_utc"])
    m = re.search(r"(\d{8}T\d{6}Z)", os.path.basename(source))
    return m.group(1) if m else None


def best_gemm_variants(doc: dict):
    """Per record of a ``bench_gemm`` results document: ``((M, N, K), GemmVariant or None, us, record)``. The
    candidates are our fixed variants (``ours/<tiling>/<form>``, timed without error) and ``ours/auto`` when the
    record says which variant it ran (``auto_variant``: a table entry; ``auto_rule``: the decode rule's tiling, run
    plain); the fastest wins. None when the fastest of
    ours ran the autotuner (``ours/auto`` without ``auto_variant``, or ``ours/autotune``): its pick is not known."""
    out = []
    for rec in doc.get("records", []):
        us = rec.get("us") or {}
        errors = rec.get("errors") or {}
        cands = {}  # name -> (variant or None, us)
        for name, t in us.items():
            if not name.startswith("ours/") or name in errors or not isinstance(t, (int, float)):
                continue
            if name in ("ours/auto", "ours/autotune"):
                var = rec.get("auto_variant") if name == "ours/auto" else None
                if name == "ours/auto" and not var and rec.get("auto_rule"):
                    var = f"{rec['auto_rule']}/plain"  # the decode rule's tiling: a launch the table can name
                try:
                    cands[name] = (GemmVariant.parse(var) if var else None, float(t))
                except ValueError as exc:
                    raise GemmTableError(f"record {rec.get('M')}x{rec.get('N')}x{rec.get('K')}: auto_variant: "
                                         f"{exc}") from None
                continue
            try:
                cands[name] = (GemmVariant.parse(name[len("ours/"):]), float(t))
            except ValueError:
                continue  # a variant this table cannot name (e.g. a flattened tiling written with f)
        if not cands:
            continue
        best = min(cands, key=lambda n: cands[n][1])
        out.append(((int(rec["M"]), int(rec["N"]), int(rec["K"])), cands[best][0], cands[best][1], rec))
    return out


def _incumbent_us(rec: dict, held: GemmVariant) -> Optional[float]:
    """The time an existing table entry's variant ``held`` got in the run of record ``rec``: ``ours/auto`` when that
    launch was the entry (``auto_variant``), else the same variant timed as a fixed one; None when the run did not
    time it."""
    us = rec.get("us") or {}
    errors = rec.get("errors") or {}
    name = str(held)
    for key, ran in (("ours/auto", rec.get("auto_variant")), (f"ours/{name}", name)):
        t = us.get(key)
        if ran == name and key not in errors and isinstance(t, (int, float)):
            return float(t)
    return None


def build_gemm_table(doc: dict, source: str, old: Optional[dict] = None, margin: float = 0.0):
    """Merge a ``bench_gemm`` results document ``doc`` (recorded as coming from ``source``) into the table document
    ``old`` (None: empty) and return ``(table, report)``. Per measured shape (device ``doc["device"]``, dtype
    ``doc["dtype"]``, bf16 when absent): the fastest of :func:`best_gemm_variants` becomes the entry, with
    provenance; a shape whose fastest was the autotuner (pick unknown) gets no entry (an old one is removed: the
    autotuner beat it there). Entries of shapes ``doc`` did not measure are kept. ``margin`` (a fraction, e.g.
    0.015): an old entry the run timed too stays unless the run's fastest beats it by more than that, so timing
    noise (entries of one shape flip by 0.5% between processes) does not rewrite the table; 0 (the default, and
    what wrote the shipped table): the fastest always wins. ``report``: one line per shape."""
    if not 0.0 <= margin < 0.5:
        raise ValueError(f"build_gemm_table: margin={margin!r} must be a fraction in [0, 0.5)")
    device = doc.get("device")
    if not isinstance(device, str) or not device.strip():
        raise GemmTableError(f"{source}: the results document names no device")
    dtype = doc.get("dtype", "bfloat16")
    if dtype not in GEMM_TABLE_DTYPES:
        raise GemmTableError(f"{source}: dtype {dtype!r}; accepted: {', '.join(GEMM_TABLE_DTYPES)}")
    devices = {}
    if old:
        parse_gemm_table(old, "old table")
        devices = json.loads(json.dumps(old["devices"]))  # a copy
    stamp = _timestamp_of(doc, source)
    if stamp is None:
        raise GemmTableError(f"{source}: no timestamp_utc in the results document and no <stamp> in its file name "
                             f"(gemm-<stamp>.json): an entry must say when it was measured")
    by_shape = devices.setdefault(device, {}).setdefault(dtype, {})
    report = []
    for (M, N, K), var, t, rec in best_gemm_variants(doc):
        key = f"{M}x{N}x{K}"
        cublas = (rec.get("us") or {}).get("cublas")
        held = by_shape.get(key)
        t_held = _incumbent_us(rec, _parse_gemm_entry(key, held)) if held is not None and margin > 0 else None
        if t_held is not None and t >= t_held * (1.0 - margin):
            report.append(f"{key}: entry {held['config']} kept ({t_held:.1f} us in this run; the fastest, "
                          f"{var or 'the autotuner'} at {t:.1f} us, is within the {margin:.1%} margin)")
            continue
        if var is None or not cublas:
            dropped = by_shape.pop(key, None)
            why = "ours/autotune" if var is None and "ours/autotune" in rec.get("us", {}) else "the autotuner"
            report.append(f"{key}: fastest was {why} ({t:.1f} us; its pick is not known): no entry"
                          + (" (old entry removed)" if dropped else ""))
            continue
        auto = (rec.get("us") or {}).get("ours/auto")
        ent = {"config": str(var.config), "flatten": var.flatten, "tma_store": var.tma_store, "source": source,
               "git_commit": doc.get("git_commit"), "timestamp_utc": stamp, "us": round(t, 2),
               "cublas_us": round(float(cublas), 2)}
        if auto:
            ent["auto_us"] = round(float(auto), 2)
        by_shape[key] = ent
        report.append(f"{key}: {var} {t:.1f} us, {float(cublas) / t:.3f}x cuBLAS"
                      + (f" (ours/auto {auto:.1f} us)" if auto else ""))
    if not by_shape:
        del devices[device][dtype]
        if not devices[device]:
            del devices[device]
    for dev in devices.values():
        for dt in dev:
            dev[dt] = dict(sorted(dev[dt].items(), key=lambda kv: tuple(int(v) for v in kv[0].split("x"))))
    table = {"format": GEMM_TABLE_FORMAT,
             "note": "kernels.gemm.matmul on a GPU without config: per device name, dtype and exact M x N x K, the "
                     "fastest of our fixed variants (tiling + FLATTEN / TMA_STORE, launched by launch_variant) in "
                     "benchmarks/bench_gemm.py (CUDA-graph replay, interleaved rounds, median); shapes without an "
                     "entry run the Triton autotuner. Written by bench_gemm.py --write-table / --table-from; each "
                     "entry names the results JSON and commit it came from.",
             "devices": devices}
    parse_gemm_table(table, "new table")
    return table, report


def dump_gemm_table(table: dict) -> str:
    """The table's JSON text: one line per entry."""
    text = json.dumps(table, indent=1)
    return re.sub(r"\{\s*([^{}\[\]]*?)\s*\}", lambda m: "{" + " ".join(m.group(1).split()) + "}", text) + "\n"


def check_operands(op: str, a, b, dtypes=None) -> None:
    """Host checks of GEMM operands ``a [M, K] @ b [K, N]`` before any launch: 2-D tensors of one dtype among
    ``dtypes`` (default bf16, fp16, fp8 e4m3 / e5m2), matching inner dimensions, one device, row-major with unit
    column stride, ``K`` and ``N`` multiples of 8 and 16-byte aligned rows (tensor descriptors). Raises ValueError
    naming ``op``, the bad value and what is accepted."""
    import torch

    if dtypes is None:
        dtypes = (torch.bfloat16, torch.float16) + tuple(
            d for d in (getattr(torch, "float8_e4m3fn", None), getattr(torch, "float8_e5m2", None)) if d)
    for name, t in (("a", a), ("b", b)):
        if not isinstance(t, torch.Tensor):
            raise ValueError(f"{op}: {name} must be a torch.Tensor, got {type(t).__name__}")
        if t.dim() != 2:
            raise ValueError(f"{op}: {name} must be 2-D, got shape {tuple(t.shape)}")
        if t.dtype not in dtypes:
            names = ", ".join(str(d).replace("torch.", "") for d in dtypes)
            raise ValueError(f"{op}: {name}.dtype={t.dtype} is not supported; accepted: {names}")
    if a.dtype != b.dtype:
        raise ValueError(f"{op}: a.dtype={a.dtype} and b.dtype={b.dtype} differ")
    if a.shape[1] != b.shape[0]:
        raise ValueError(f"{op}: inner dimensions differ: a is {tuple(a.shape)}, b is {tuple(b.shape)}")
    if a.device != b.device:
        raise ValueError(f"{op}: a is on {a.device}, b on {b.device}")
    if a.stride(1) != 1 or b.stride(1) != 1:
        raise ValueError(f"{op}: a and b must be row-major with unit column stride (call .contiguous())")
    if a.shape[1] % 8 or b.shape[1] % 8:
        raise ValueError(f"{op}: K={a.shape[1]} and N={b.shape[1]} must be multiples of 8 (16-byte rows for TMA)")
    if a.stride(0) % 8 or b.stride(0) % 8:
        raise ValueError(f"{op}: row strides a.stride(0)={a.stride(0)}, b.stride(0)={b.stride(0)} must be multiples "
                         f"of 8 elements (16-byte aligned rows for TMA)")


def matmul(a, b, out=None, scale=None, config: TileConfig = None, autotune: bool = True, table: bool = True):
    """``out = (a @ b) * scale`` with :func:`gemm_kernel` (a: [M, K], b: [K, N], same dtype among bf16 / fp16 /
    fp8 e4m3 / e5m2; fp8 gives bf16 unless ``out`` is given). On GPU without ``config`` ("auto"): the measured
    table's entry for this device, dtype and exact shape (:func:`select_matmul_launch`; ``table=False`` skips it),
    else for ``M <= SPLIT_K_MAX_M`` rows the decode rule (:func:`pick_decode_config`: small tiles, split-K over the
    SMs through :func:`gemm_split_k_kernel`), else the autotuned kernel; ``autotune=False``: :func:`pick_config`;
    under the interpreter :data:`SIM_CONFIG`. A ``config`` with ``split_k > 1`` runs the split-K kernel (a cached
    workspace per device and stream: :func:`split_k_workspace`), one with ``pointer_loads`` masked pointer loads,
    one with ``tma_store`` the TMA-store epilogue (where ``out`` can be a descriptor's base; else pointer stores).
    Every launch is deterministic (split-K partials are summed in a fixed order). Raises ValueError on bad shapes /
    dtypes (before any launch), :class:`GemmTableError` on a malformed table."""
    import torch

    check_operands("matmul", a, b)
    M, K = a.shape
    N = b.shape[1]
    if out is None:
        out_dtype = torch.bfloat16 if a.dtype.itemsize == 1 else a.dtype
        out = torch.empty((M, N), dtype=out_dtype, device=a.device)
    if out.shape != (M, N):
        raise ValueError(f"matmul: out has shape {tuple(out.shape)}, expected {(M, N)}")
    if M == 0 or N == 0:
        return out
    use_tma = use_tma_for(a.device) and a.stride(1) == 1 and b.stride(1) == 1 and \
        not (config is not None and config.pointer_loads)
    if use_tma:
        ensure_tma_allocator()
    sms = num_sms(a.device)
    on_gpu = a.device.type == "cuda"
    kind, picked = select_matmul_launch(M, N, K, a.dtype, _device_name(a.device.index) if on_gpu else None,
                                        use_tma=use_tma, num_sms=sms, config=config, autotune=autotune,
                                        table=table, tma_store_ok=on_gpu and tma_store_ok(out))
    if kind == "table":
        launch_variant(a, b, out, picked, scale=scale, sms=sms)
        return out
    if kind == "decode":
        return launch_variant(a, b, out, GemmVariant(picked), scale=scale, sms=sms)
    if kind == "autotune":
        return launch_autotuned(a, b, out, scale=scale, sms=sms, use_tma=use_tma)
    cfg = config or pick_config(M, N, K, on_gpu=on_gpu, elem_bytes=a.dtype.itemsize)
    if cfg.split_k > 1:
        return launch_split_k(a, b, out, cfg, scale=scale, sms=sms, use_tma=use_tma)
    grid = (min(sms, triton.cdiv(M, cfg.BLOCK_M) * triton.cdiv(N, cfg.BLOCK_N)), )
    gemm_kernel[grid](a, b, out, out if scale is None else scale, M, N, K, a.stride(0), a.stride(1), b.stride(0),
                      b.stride(1), out.stride(0), out.stride(1), **cfg.meta(), NUM_SMS=sms, USE_TMA=use_tma,
                      HAS_SCALE=scale is not None, TMA_STORE=cfg.tma_store and use_tma and tma_store_ok(out),
                      **cfg.launch())
    return out


__all__ = ["gemm_kernel", "gemm_split_k_kernel", "split_k_reduce", "SPLIT_K_MAX", "SPLIT_K_MAX_M",
           "pick_decode_config", "split_k_workspace", "launch_split_k", "launch_autotuned", "variant_forms", "tile_acc_tma", "tile_acc_ptr", "tile_acc_tma_k", "tile_acc_ptr_k", "tile_coords", "store_tile", "tma_descriptors", "slot_tile",
           "TileConfig", "CONFIGS", "SIM_CONFIG", "env_config", "pick_config", "gemm_autotuned", "autotune_configs", "use_tma_for",
           "ensure_tma_allocator", "tma_store_ok", "matmul", "num_sms", "check_operands", "GEMM_FORMS", "GEMM_TABLE_PATH", "GEMM_TABLE_ENV",
           "GEMM_TABLE_FORMAT", "GemmTableError", "GemmVariant", "variant_config", "launch_variant", "parse_gemm_table",
           "load_gemm_table", "gemm_table_path", "gemm_table_lookup", "select_matmul_launch", "best_gemm_variants",
           "build_gemm_table", "dump_gemm_table"]
