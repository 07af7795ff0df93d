"""Device code of the Triton GEMM used by ``ops.matmul`` and the overlapped kernels: ``C[M, N] = A[M, K] @ B[K, N]``
(fp32 accumulation). The host side lives apart: tilings and launchers in :mod:`~triton_dist.kernels.gemm_config`,
the measured dispatch table in :mod:`~triton_dist.kernels.gemm_table`, the op in :mod:`triton_dist.ops.gemm`.

Design (one source, every target; no target checks in the kernel, the host picks the constexprs):

* **Persistent grid**: ``NUM_SMS`` programs walk the output tiles ``pid, pid + NUM_SMS, ...`` (grouped ordering,
  ``GROUP_M`` row-tiles per group, for L2 reuse of B).
* **Loads**: ``USE_TMA=True`` builds device-side tensor descriptors (``tl.make_tensor_descriptor``) for A and B:
  on sm_90 those are TMA loads feeding ``wgmma`` (needs ``triton.set_allocator`` for the descriptor scratch, see
  ``gemm_config.ensure_tma_allocator``). ``USE_TMA=False`` is the pointer path (masked ``tl.load``; ``cp.async`` +
  ``mma.sync`` on sm_80, ``mfma`` on gfx942, numpy on the simulator). The host chooses with
  ``gemm_config.use_tma_for`` (sm_90+ CUDA device and not the interpreter). Stock Triton would also rewrite
  descriptors to pointers below sm_90 and on AMD, but the explicit pointer path keeps masks exact and is what the
  simulator runs.
* **Tile helpers** :func:`tile_acc_tma` / :func:`tile_acc_ptr` compute one ``BLOCK_M x BLOCK_N`` fp32 tile; the
  overlapped kernels (``ag_gemm``, ``gemm_rs``, ``gemm_ar``) call them after ``dl.wait`` with the wait's token
  consumed into the A pointer / row coordinate, so no load of that tile can be hoisted above its wait.
* fp8 (e4m3/e5m2) inputs: ``acc * scale`` where ``scale`` is ``scale_a * scale_b`` (per-tensor), loaded from a
  1-element fp32 tensor when ``HAS_SCALE``.
"""
from __future__ import annotations

import triton.language as tl

import triton_dist

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


__all__ = ["gemm_kernel", "gemm_split_k_kernel", "split_k_reduce", "tile_acc_tma", "tile_acc_ptr", "tile_acc_tma_k",
           "tile_acc_ptr_k", "tile_coords", "store_tile", "tma_descriptors", "slot_tile"]
