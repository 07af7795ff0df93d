"""Device code of the grouped GEMM of the MoE family: ``C[rows, N] = A[rows, K] @ B[e]`` where rows
``offsets[e - 1] <= r < offsets[e]`` of ``A`` belong to expert ``e`` (``B [E, K, N]``, fp32 accumulation).

The layout is the MoE routing layout (docs/moe.md): the tokens of every local expert lie contiguously in one
static-shape buffer ``A [ROWS, K]``, expert ``e`` owning rows ``[offsets[e - 1], offsets[e])`` (``offsets[-1]`` is
read as 0), ``offsets`` int32 cumulative *end* offsets on the device -- the ``offs`` convention of
``torch._grouped_mm``. Rows at or past ``offsets[E - 1]`` (capacity padding) are neither read for a product nor
written. Nothing about the routing is known on the host, so a launch is CUDA-graph capturable and needs no
synchronisation.

Design (one source, every target; the host picks the constexprs, :mod:`triton_dist.ops.group_gemm`):

* **Persistent grid over a tile list that only the device knows**: one program per SM; every program walks the
  experts in order, computing each expert's tile count from ``offsets`` (``cdiv(rows_e, BLOCK_M) * cdiv(N,
  BLOCK_N)``, zero for an expert without rows), and takes the tiles of the global list ``pid, pid + programs, ...``
  that fall in that expert. Within an expert the row tiles of one column block are consecutive, so programs that run
  at the same time share ``B[e][:, n-block]`` through L2 (each weight byte comes from HBM about once).
* **Memory safety whatever ``offsets`` hold**: each end offset is clamped to ``[previous end, ROWS]`` before use,
  so a corrupt offsets tensor can make results wrong (the op checks offsets on the host where it may) but never
  makes the kernel read or write outside ``A``, ``B`` or ``C``.
* **Loads**: ``USE_TMA`` builds device-side tensor descriptors: ``A`` as ``[ROWS, K]``, ``B`` as 3-D ``[E, K, N]``
  (or ``[E, N, K]`` when ``B_K_CONTIGUOUS``: per-expert ``nn.Linear`` weights ``[out, in]`` seen as ``[E, K, N]``
  through a transpose), so a K block past the end of one expert's matrix reads zeros, not the next expert's rows.
  Rows of ``A`` past the tile's expert are loaded and multiplied but never stored. The pointer path (simulator,
  AMD, pre-Hopper) masks rows to the expert and ``K`` / ``N`` to the matrix.
* **FP8 with block scales** (``BLOCK_SCALED``; the DeepSeek-V3 / dispatch format): ``A`` and ``B`` e4m3 / e5m2,
  ``scale_a [ROWS, cdiv(K, 128)]`` fp32 (one scale per row and 128 channels of ``K``) and ``scale_b [E, cdiv(K,
  128), cdiv(N, 128)]`` fp32 (one per 128 x 128 block of each expert's matrix); every ``BLOCK_K`` step (``128 %
  BLOCK_K == 0``, so a step lies in one scale block) is a fresh fp32 product scaled by ``scale_a[row, kb] *
  scale_b[e, kb, col // 128]`` and added to the accumulator.
"""
from __future__ import annotations

import triton.language as tl

import triton_dist

#: channels per FP8 scale along K (activations) and per side of a weight scale block
SCALE_BLOCK = tl.constexpr(128)


@triton_dist.jit
def expert_b_tile(b_desc, b_ptr, e, off_n, k, N, K, stride_be, stride_bk, stride_bn, USE_TMA: tl.constexpr,
                  B_K_CONTIGUOUS: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    """``B[e][k * BLOCK_K:+BLOCK_K, off_n:+BLOCK_N]`` as a ``[BLOCK_K, BLOCK_N]`` block (zeros past ``K`` / ``N``)."""
    if USE_TMA:
        if B_K_CONTIGUOUS:
            b = b_desc.load([e, off_n, k * BLOCK_K]).reshape(BLOCK_N, BLOCK_K).trans(1, 0)
        else:
            b = b_desc.load([e, k * BLOCK_K, off_n]).reshape(BLOCK_K, BLOCK_N)
    else:
        offs_k = k * BLOCK_K + tl.arange(0, BLOCK_K)
        offs_n = off_n + tl.arange(0, BLOCK_N)
        ptrs = (b_ptr + e * stride_be.to(tl.int64) + offs_k[:, None].to(tl.int64) * stride_bk +
                offs_n[None, :].to(tl.int64) * stride_bn)  # 64-bit: a strided view's offsets may pass 2**31
        b = tl.load(ptrs, mask=(offs_k[:, None] < K) & (offs_n[None, :] < N), other=0.0)
    return b


@triton_dist.jit
def expert_tile_acc(a_desc, b_desc, a_ptr, b_ptr, sa_ptr, sb_ptr, e, off_m, m_end, off_n, N, K, stride_am, stride_be,
                    stride_bk, stride_bn, stride_sam, stride_sak, stride_sbe, stride_sbk, stride_sbn,
                    BLOCK_M: tl.constexpr,
                    BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, USE_TMA: tl.constexpr,
                    B_K_CONTIGUOUS: tl.constexpr, BLOCK_SCALED: tl.constexpr):
    """fp32 ``A[off_m:+BLOCK_M, :] @ B[e][:, off_n:+BLOCK_N]`` (rows ``>= m_end`` count as zero on the pointer
    path and are discarded by the store on both), with the FP8 block scales applied when ``BLOCK_SCALED``."""
    offs_m = off_m + tl.arange(0, BLOCK_M)
    offs_n = off_n + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    m_ok = offs_m < m_end
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        if USE_TMA:
            a = a_desc.load([off_m, k * BLOCK_K])
        else:
            a_ptrs = a_ptr + offs_m[:, None].to(tl.int64) * stride_am + (k * BLOCK_K + offs_k)[None, :]
            a = tl.load(a_ptrs, mask=m_ok[:, None] & ((k * BLOCK_K + offs_k)[None, :] < K), other=0.0)
        b = expert_b_tile(b_desc, b_ptr, e, off_n, k, N, K, stride_be, stride_bk, stride_bn, USE_TMA,
                          B_K_CONTIGUOUS, BLOCK_N, BLOCK_K)
        if BLOCK_SCALED:
            kb = (k * BLOCK_K) // SCALE_BLOCK
            sa = tl.load(sa_ptr + offs_m.to(tl.int64) * stride_sam + kb * stride_sak, mask=m_ok, other=0.0)
            sb = tl.load(sb_ptr + e * stride_sbe.to(tl.int64) + kb * stride_sbk + (offs_n // SCALE_BLOCK) * stride_sbn,
                         mask=offs_n < N, other=0.0)
            acc += tl.dot(a, b) * (sa[:, None] * sb[None, :])
        else:
            acc = tl.dot(a, b, acc)
    return acc


@triton_dist.jit
def group_gemm_kernel(a_ptr, b_ptr, c_ptr, offs_ptr, sa_ptr, sb_ptr, ROWS, E, N, K, stride_am, stride_be, stride_bk,
                      stride_bn, stride_cm, stride_sam, stride_sak, stride_sbe, stride_sbk, stride_sbn,
                      BLOCK_M: tl.constexpr,
                      BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, USE_TMA: tl.constexpr, B_K_CONTIGUOUS: tl.constexpr, BLOCK_SCALED: tl.constexpr):
    """Persistent grouped GEMM over the routing layout (module docstring). Grid: any number of programs (the
    host launches one per SM, or fewer when there are fewer tiles); program ``p`` of ``P`` takes tiles ``p, p + P,
    ...`` of the global list. ``A [ROWS, K]`` and ``C [ROWS, N]`` row-major with unit
    column strides; ``B`` any strides (``B_K_CONTIGUOUS``: ``stride_bk == 1``; with ``USE_TMA`` the other unit
    stride is ``stride_bn``'s); ``offsets`` int32 ``[E]``, contiguous; ``scale_a`` / ``scale_b`` (any strides) read
    only when ``BLOCK_SCALED``."""
    pid = tl.program_id(0)
    num_programs = tl.num_programs(0)
    num_n = tl.cdiv(N, BLOCK_N)
    a_desc = None
    b_desc = None
    if USE_TMA:
        a_desc = tl.make_tensor_descriptor(a_ptr, shape=[ROWS, K], strides=[stride_am, 1],
                                           block_shape=[BLOCK_M, BLOCK_K])
        if B_K_CONTIGUOUS:
            b_desc = tl.make_tensor_descriptor(b_ptr, shape=[E, N, K], strides=[stride_be, stride_bn, 1],
                                               block_shape=[1, BLOCK_N, BLOCK_K])
        else:
            b_desc = tl.make_tensor_descriptor(b_ptr, shape=[E, K, N], strides=[stride_be, stride_bk, 1],
                                               block_shape=[1, BLOCK_K, BLOCK_N])
    done = 0  # tiles of the experts before e, in the global tile list
    start = 0  # first row of expert e
    for e in range(0, E):
        end = tl.load(offs_ptr + e)
        end = tl.minimum(tl.maximum(end, start), ROWS)  # memory-safe whatever offsets hold
        m_tiles = tl.cdiv(end - start, BLOCK_M)
        tiles = m_tiles * num_n
        first = done + (pid - done % num_programs + num_programs) % num_programs  # its first tile at/after `done`
        for t in range(first, done + tiles, num_programs):
            local = t - done
            off_m = start + (local % m_tiles) * BLOCK_M
            off_n = (local // m_tiles) * BLOCK_N
            acc = expert_tile_acc(a_desc, b_desc, a_ptr, b_ptr, sa_ptr, sb_ptr, e, off_m, end, off_n, N, K,
                                  stride_am, stride_be, stride_bk, stride_bn, stride_sam, stride_sak, stride_sbe,
                                  stride_sbk, stride_sbn, BLOCK_M, BLOCK_N, BLOCK_K, USE_TMA, B_K_CONTIGUOUS, BLOCK_SCALED)
            offs_m = off_m + tl.arange(0, BLOCK_M)
            offs_n = off_n + tl.arange(0, BLOCK_N)
            ptrs = c_ptr + offs_m[:, None].to(tl.int64) * stride_cm + offs_n[None, :]
            tl.store(ptrs, acc.to(c_ptr.dtype.element_ty), mask=(offs_m[:, None] < end) & (offs_n[None, :] < N))
        done += tiles
        start = end


@triton_dist.jit
def silu_gate_kernel(h_ptr, out_ptr, offs_ptr, ROWS, INTER, stride_h, stride_out, E,
                     HAS_OFFSETS: tl.constexpr, BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):
    """Program ``(rb, cb)``: rows ``[rb * BLOCK_R, +BLOCK_R)`` and columns ``[cb * BLOCK_C, +BLOCK_C)`` of ``out [ROWS,
    INTER] = silu(h[:, :INTER]) * h[:, INTER:]`` (the SiLU-gated activation between the two grouped GEMMs of an
    expert MLP), computed in fp32 from ``h [ROWS, 2 * INTER]`` and rounded once to ``out``'s dtype. With
    ``HAS_OFFSETS`` only rows below ``offs[E - 1]`` (the layout's routed rows, clamped to ``ROWS``) are read and
    written: a program whose rows all lie past it returns at once, so a static capacity costs only its used rows."""
    rb = tl.program_id(0)
    cb = tl.program_id(1)
    limit = ROWS
    if HAS_OFFSETS:
        limit = tl.minimum(tl.maximum(tl.load(offs_ptr + E - 1), 0), ROWS)
    if rb * BLOCK_R < limit:
        r = rb * BLOCK_R + tl.arange(0, BLOCK_R)
        c = cb * BLOCK_C + tl.arange(0, BLOCK_C)
        m = (r[:, None] < limit) & (c[None, :] < INTER)
        row = h_ptr + r[:, None].to(tl.int64) * stride_h
        g = tl.load(row + c[None, :], mask=m, other=0.0).to(tl.float32)
        u = tl.load(row + INTER + c[None, :], mask=m, other=0.0).to(tl.float32)
        a = g / (1.0 + tl.exp(-g)) * u
        tl.store(out_ptr + r[:, None].to(tl.int64) * stride_out + c[None, :], a.to(out_ptr.dtype.element_ty), mask=m)


__all__ = ["group_gemm_kernel", "expert_tile_acc", "expert_b_tile", "silu_gate_kernel", "SCALE_BLOCK"]
