"""Device code of prefill flash attention whose K/V may come in chunks (issue 41: the local kernel under the
sequence-parallel ``sp_ag_attention``, usable alone on one device). The host side is
:mod:`triton_dist.ops.attention_prefill`.

**Layout.** ``q [B, Lq, Hq, D]``, ``k, v [B, Lkv, Hkv, D]``, ``out [B, Lq, Hq, D]`` (batch, sequence, head, head
dimension; any strides with a unit stride along ``D``), ``lse [B, Hq, Lq]`` float32 contiguous. Grouped-query
attention: query head ``h`` reads K/V head ``h // (Hq // Hkv)``.

**Global positions.** Query row ``i`` sits at global position ``q_start + i`` and key row ``j`` at ``kv_start + j``;
the kernels only see their difference ``diag = q_start - kv_start`` (any sign): with ``causal``, row ``i`` sees key
``j`` iff ``j <= i + diag``. A query block in the middle of a sequence can thus attend an earlier chunk (every key
visible), its own chunk (the diagonal) or a later one (nothing visible: ``out = 0``, ``lse = -inf``).

**Softmax state.** A query tile carries ``(m, l, acc)``: ``m [BLOCK_M]`` the running row maximum of the scores in
base-2 units (``score * scale * log2(e)``; ``-inf`` while a row has seen no key), ``l [BLOCK_M]`` the sum of
``2 ** (s - m)`` over the keys seen, ``acc [BLOCK_M, D]`` fp32 the matching sum of ``2 ** (s - m) * v``. The
result is ``out = acc / l`` and ``lse = (m + log2(l)) * ln(2)`` (natural log); rows with ``l == 0`` give ``out = 0``
and ``lse = -inf`` (:func:`finish_rows`). Two partial results of the same queries over disjoint key sets merge
exactly by their lse (``ops.attention_prefill.merge_chunk_partials``).

**Building blocks for a fused kernel** (the contract a later ``sp_ag_attention`` kernel relies on; all public API,
every target):

* :func:`load_q_tile` -> ``q [BLOCK_M, D]`` (rows past ``Lq`` read as 0), :func:`init_state` -> ``(m, l, acc)``;
* :func:`attend_range` -- one query tile against the keys ``[lo, hi)`` of a K/V tensor (one arrived chunk): splits the
  range into the tiles every row sees in full (no mask) and the tiles on the causal diagonal or at ``hi`` (masked),
  skips the tiles above the diagonal, and updates ``(m, l, acc)`` through :func:`attend_block`. Chunks may be
  attended in any order and the state carried across them: the result equals one call over their union. A fused
  kernel waits for chunk ``c``'s signal, takes the wait's token into ``k_ptr`` / ``v_ptr`` (or the descriptors) with
  ``dl.consume_token``, and calls :func:`attend_range` with that chunk's ``[lo, hi)``;
* :func:`finish_rows` -> ``(out fp32, lse natural log)``; :func:`store_rows` writes them.

**Reads past ``hi``.** The pointer path reads only rows ``< hi``. The descriptor path (``USE_TMA``) loads whole
``BLOCK_N``-row tiles, so the last tile of a range may read rows in ``[hi, hi + BLOCK_N)``: their scores are
masked, but their V rows are multiplied by 0, so they must hold finite values (rows past the descriptor's own
length read as 0). The local op's range ends at the descriptor's length; a fused kernel attending one chunk of a
larger buffer keeps the rest of the buffer finite (zeroed once at creation) or uses chunks that are a multiple of
``BLOCK_N`` rows.

**Design for Hopper** (the host picks the constexprs): grid ``(B * Hq, cdiv(Lq, BLOCK_M))`` with the heads on the
fast axis (query heads sharing a K/V head run side by side and share its tiles through L2) and, for causal
attention, the heaviest query tiles (the last ones) launched first, so the short tiles fill the tail of the grid;
the online softmax in fp32 with ``exp2`` and the scale folded into one multiply-add per score; ``p`` rounded to the
input dtype for the second MMA, the accumulator in fp32; the loop over fully visible tiles carries no mask at all
(the causal mask and the ``hi`` bound cost only the ``BLOCK_M / BLOCK_N + 1`` diagonal tiles); with ``USE_TMA``
(sm_90) Q, K and V come through device-side 4-D tensor descriptors ``[B, L, H, D]`` (blocks ``[1, rows, 1, D]``),
software-pipelined by Triton into ``wgmma``; the pointer path (the interpreter, AMD, pre-Hopper) masks its loads.
"""
from __future__ import annotations

import triton.language as tl

import triton_dist

#: log2(e): scores are scaled into base 2 once, so the softmax uses exp2
LOG2E = 1.4426950408889634
#: ln(2): a base-2 log-sum-exp times this is the natural one
LN2 = tl.constexpr(0.6931471805599453)


@triton_dist.jit
def load_rows(desc, ptr, b, head, r0, bound, stride_b, stride_l, stride_h, ROWS: tl.constexpr,
              HEAD_D: tl.constexpr, USE_TMA: tl.constexpr, MASK_ROWS: tl.constexpr):
    """Rows ``[r0, r0 + ROWS)`` of head ``head`` of sequence ``b`` of a ``[B, L, H, HEAD_D]`` tensor as a ``[ROWS,
    HEAD_D]`` block. ``USE_TMA``: through ``desc`` (block ``[1, ROWS, 1, HEAD_D]``; rows at or past the descriptor's
    ``L`` read as 0). Pointer path: through ``ptr`` and the strides; with ``MASK_ROWS`` rows ``>= bound`` read as 0
    and are not accessed, without it every row must lie in the tensor."""
    if USE_TMA:
        t = desc.load([b, r0, head, 0]).reshape(ROWS, HEAD_D)
    else:
        rows = r0 + tl.arange(0, ROWS)
        cols = tl.arange(0, HEAD_D)
        base = ptr + b.to(tl.int64) * stride_b + head.to(tl.int64) * stride_h
        ptrs = base + rows[:, None].to(tl.int64) * stride_l + cols[None, :]
        if MASK_ROWS:
            t = tl.load(ptrs, mask=rows[:, None] < bound, other=0.0)
        else:
            t = tl.load(ptrs)
    return t


@triton_dist.jit
def load_q_tile(q_desc, q_ptr, b, h, m0, Lq, stride_qb, stride_ql, stride_qh, BLOCK_M: tl.constexpr,
                HEAD_D: tl.constexpr, USE_TMA: tl.constexpr):
    """Query rows ``[m0, m0 + BLOCK_M)`` of head ``h`` of sequence ``b`` as ``[BLOCK_M, HEAD_D]`` (rows ``>= Lq``
    read as 0; they produce finite results that the caller must not store)."""
    return load_rows(q_desc, q_ptr, b, h, m0, Lq, stride_qb, stride_ql, stride_qh, BLOCK_M, HEAD_D, USE_TMA, True)


@triton_dist.jit
def init_state(BLOCK_M: tl.constexpr, HEAD_D: tl.constexpr):
    """The softmax state of a query tile that has seen no key: ``(m, l, acc) = (-inf, 0, 0)`` (fp32)."""
    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_D], dtype=tl.float32)
    return m_i, l_i, acc


@triton_dist.jit
def attend_block(q, m_i, l_i, acc, k_desc, v_desc, k_ptr, v_ptr, b, kh, lo, hi, offs_m, diag, qk_scale,
                 stride_kb, stride_kl, stride_kh, stride_vb, stride_vl, stride_vh, BLOCK_N: tl.constexpr,
                 HEAD_D: tl.constexpr, MASKED: tl.constexpr, CAUSAL: tl.constexpr, USE_TMA: tl.constexpr):
    """The online-softmax update of one query tile (``q [BLOCK_M, HEAD_D]``, local rows ``offs_m``, state ``(m_i,
    l_i, acc)``) over the K/V tiles starting at ``lo, lo + BLOCK_N, ...`` below ``hi`` of head ``kh`` of sequence
    ``b``; returns the new ``(m_i, l_i, acc)``.

    ``qk_scale = scale * log2(e)`` must be positive. ``MASKED=False``: every row sees every key of every tile (the
    caller guarantees ``lo + k * BLOCK_N + BLOCK_N <= hi`` and, when causal, that the tiles lie below the diagonal of
    every row); no mask is computed. ``MASKED=True``: keys ``>= hi`` and, with ``CAUSAL``, keys ``j > i + diag`` of
    row ``i`` are excluded; a row that has seen nothing keeps ``m = -inf``, ``l = 0``, ``acc = 0``. Rows of V past
    ``hi`` that a descriptor load reads must be finite (module docstring)."""
    for n0 in range(lo, hi, BLOCK_N):
        k = load_rows(k_desc, k_ptr, b, kh, n0, hi, stride_kb, stride_kl, stride_kh, BLOCK_N, HEAD_D, USE_TMA,
                      MASKED)
        s = tl.dot(q, tl.trans(k))
        if MASKED:
            offs_n = n0 + tl.arange(0, BLOCK_N)
            ok = offs_n[None, :] < hi
            if CAUSAL:
                ok = ok & (offs_n[None, :] <= offs_m[:, None] + diag)
            s = tl.where(ok, s * qk_scale, float("-inf"))
            m_new = tl.maximum(m_i, tl.max(s, 1))
            # a row without a visible key so far: subtract 0 instead of -inf (exp2(-inf) = 0, never NaN)
            m_ref = tl.where(m_new == float("-inf"), 0.0, m_new)
            p = tl.exp2(s - m_ref[:, None])
            alpha = tl.exp2(m_i - m_ref)
        else:
            m_new = tl.maximum(m_i, tl.max(s, 1) * qk_scale)  # scale > 0: max commutes with it
            p = tl.exp2(s * qk_scale - m_new[:, None])
            alpha = tl.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, 1)
        v = load_rows(v_desc, v_ptr, b, kh, n0, hi, stride_vb, stride_vl, stride_vh, BLOCK_N, HEAD_D, USE_TMA,
                      MASKED)
        acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None])
        m_i = m_new
    return m_i, l_i, acc


@triton_dist.jit
def attend_range(q, m_i, l_i, acc, k_desc, v_desc, k_ptr, v_ptr, b, kh, m0, lo, hi, diag, qk_scale,
                 stride_kb, stride_kl, stride_kh, stride_vb, stride_vl, stride_vh, BLOCK_M: tl.constexpr,
                 BLOCK_N: tl.constexpr, HEAD_D: tl.constexpr, CAUSAL: tl.constexpr, USE_TMA: tl.constexpr):
    """One query tile (local rows ``[m0, m0 + BLOCK_M)``, ``q`` and state ``(m_i, l_i, acc)``) against the keys
    ``[lo, hi)`` of head ``kh`` of sequence ``b`` (local rows of the K/V tensors; ``0 <= lo <= hi``); returns the
    updated state. With ``CAUSAL`` row ``i`` sees key ``j`` iff ``j <= i + diag`` (``diag = q_start - kv_start``,
    module docstring); tiles above the diagonal of every row are neither loaded nor computed, tiles below it for
    every row run unmasked, the rest (the diagonal band and a partial last tile) masked. The state may come from
    other ranges of other K/V tensors (chunks): the updates compose, in any order. With ``CAUSAL`` a range with
    ``lo >= m0 + BLOCK_M + diag`` is wholly above the diagonal and reads nothing: a fused kernel need not wait for
    such a chunk."""
    offs_m = m0 + tl.arange(0, BLOCK_M)
    end = hi
    full = hi
    if CAUSAL:
        end = tl.minimum(hi, m0 + BLOCK_M + diag)  # keys at or past it: above the diagonal of every row
        full = tl.minimum(end, m0 + 1 + diag)  # keys before it: visible to every row
    end = tl.maximum(end, lo)
    full = tl.maximum(full, lo)
    n_full = lo + ((full - lo) // BLOCK_N) * BLOCK_N  # non-negative operands: floor == truncation on every target
    m_i, l_i, acc = attend_block(q, m_i, l_i, acc, k_desc, v_desc, k_ptr, v_ptr, b, kh, lo, n_full, offs_m, diag,
                                 qk_scale, stride_kb, stride_kl, stride_kh, stride_vb, stride_vl, stride_vh,
                                 BLOCK_N, HEAD_D, False, CAUSAL, USE_TMA)
    m_i, l_i, acc = attend_block(q, m_i, l_i, acc, k_desc, v_desc, k_ptr, v_ptr, b, kh, n_full, end, offs_m, diag,
                                 qk_scale, stride_kb, stride_kl, stride_kh, stride_vb, stride_vl, stride_vh,
                                 BLOCK_N, HEAD_D, True, CAUSAL, USE_TMA)
    return m_i, l_i, acc


@triton_dist.jit
def finish_rows(m_i, l_i, acc):
    """The tile's result from its state: ``(out, lse)`` with ``out = acc / l`` (fp32 ``[BLOCK_M, D]``) and ``lse =
    (m + log2(l)) * ln(2)`` (fp32 ``[BLOCK_M]``, natural log of the sum of ``exp(scale * q.k)``); rows with ``l ==
    0`` (no visible key) give 0 and ``-inf``."""
    seen = l_i > 0.0
    l_safe = tl.where(seen, l_i, 1.0)
    out = acc * (1.0 / l_safe)[:, None]
    lse = tl.where(seen, (m_i + tl.log2(l_safe)) * LN2, float("-inf"))
    return out, lse


@triton_dist.jit(do_not_specialize=["diag"])
def flash_attention_kernel(q_ptr, k_ptr, v_ptr, o_ptr, lse_ptr, B, H_Q, H_KV, Lq, Lkv, diag, qk_scale,
                           stride_qb, stride_ql, stride_qh, stride_kb, stride_kl, stride_kh,
                           stride_vb, stride_vl, stride_vh, stride_ob, stride_ol, stride_oh,
                           HEAD_D: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                           CAUSAL: tl.constexpr, USE_TMA: tl.constexpr, WRITE_LSE: tl.constexpr):
    """Program ``(bh, t)``: query rows of tile ``t`` (the last tile first when ``CAUSAL``) of head ``h = bh % H_Q``
    of sequence ``b = bh // H_Q`` against all ``Lkv`` keys of K/V head ``h // (H_Q // H_KV)`` (module docstring:
    layout, ``diag``); writes its rows of ``out`` (in ``out``'s dtype) and, with ``WRITE_LSE``, of ``lse [B, H_Q,
    Lq]`` (contiguous float32). ``qk_scale = scale * log2(e) > 0``. ``USE_TMA``: q, k and v 16-byte aligned with
    16-byte-multiple strides (the host checks)."""
    bh = tl.program_id(0)
    t = tl.program_id(1)
    if CAUSAL:
        t = tl.num_programs(1) - 1 - t  # heaviest first: the short tiles fill the grid's tail
    b = bh // H_Q
    h = bh % H_Q
    kh = h // (H_Q // H_KV)
    m0 = t * BLOCK_M
    q_desc = None
    k_desc = None
    v_desc = None
    if USE_TMA:
        q_desc = tl.make_tensor_descriptor(q_ptr, shape=[B, Lq, H_Q, HEAD_D], strides=[stride_qb, stride_ql,
                                           stride_qh, 1], block_shape=[1, BLOCK_M, 1, HEAD_D])
        k_desc = tl.make_tensor_descriptor(k_ptr, shape=[B, Lkv, H_KV, HEAD_D], strides=[stride_kb, stride_kl,
                                           stride_kh, 1], block_shape=[1, BLOCK_N, 1, HEAD_D])
        v_desc = tl.make_tensor_descriptor(v_ptr, shape=[B, Lkv, H_KV, HEAD_D], strides=[stride_vb, stride_vl,
                                           stride_vh, 1], block_shape=[1, BLOCK_N, 1, HEAD_D])
    q = load_q_tile(q_desc, q_ptr, b, h, m0, Lq, stride_qb, stride_ql, stride_qh, BLOCK_M, HEAD_D, USE_TMA)
    m_i, l_i, acc = init_state(BLOCK_M, HEAD_D)
    m_i, l_i, acc = attend_range(q, m_i, l_i, acc, k_desc, v_desc, k_ptr, v_ptr, b, kh, m0, 0, Lkv, diag, qk_scale,
                                 stride_kb, stride_kl, stride_kh, stride_vb, stride_vl, stride_vh, BLOCK_M, BLOCK_N,
                                 HEAD_D, CAUSAL, USE_TMA)
    out, lse = finish_rows(m_i, l_i, acc)
    store_rows(o_ptr, lse_ptr, out, lse, b, h, bh, m0, Lq, stride_ob, stride_ol, stride_oh, BLOCK_M, HEAD_D,
               WRITE_LSE)


@triton_dist.jit
def store_rows(o_ptr, lse_ptr, out, lse, b, h, bh, m0, Lq, stride_ob, stride_ol, stride_oh, BLOCK_M: tl.constexpr,
               HEAD_D: tl.constexpr, WRITE_LSE: tl.constexpr):
    """Store a query tile's result (:func:`finish_rows`): rows ``[m0, m0 + BLOCK_M)`` below ``Lq`` of head ``h`` of
    sequence ``b`` of ``out [B, Lq, H, HEAD_D]`` (rounded to its dtype) and, with ``WRITE_LSE``, of ``lse [B, H,
    Lq]`` (contiguous float32; ``bh = b * H + h``)."""
    offs_m = m0 + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, HEAD_D)
    row_ok = offs_m < Lq
    o_ptrs = (o_ptr + b.to(tl.int64) * stride_ob + h.to(tl.int64) * stride_oh +
              offs_m[:, None].to(tl.int64) * stride_ol + offs_d[None, :])
    tl.store(o_ptrs, out.to(o_ptr.dtype.element_ty), mask=row_ok[:, None])
    if WRITE_LSE:
        tl.store(lse_ptr + bh.to(tl.int64) * Lq + offs_m, lse, mask=row_ok)


__all__ = ["flash_attention_kernel", "attend_range", "attend_block", "load_q_tile", "load_rows", "init_state",
           "finish_rows", "store_rows", "LOG2E", "LN2"]
