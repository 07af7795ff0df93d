"""Device code of sequence-parallel prefill attention with the K/V all-gather fused in
(:func:`triton_dist.ops.attention_sp_ag.sp_ag_attention`, issue 41): every rank holds a contiguous chunk of every
sequence (rank ``r``: global positions ``[r * L, (r + 1) * L)``), and ONE launch of :func:`sp_ag_attention_kernel`
gathers the K/V chunks while the rank's query rows attend them.

Buffers (owned by :class:`triton_dist.ops.attention_sp_ag.SPAttentionContext`; ``W`` ranks, ``n = B * L * Hkv * D``
elements per chunk of a call):

* ``k_full``, ``v_full``: symmetric, ``W * capacity`` elements each; chunk ``c`` of a call lives at element ``c *
  n`` (the chunks of a call packed back to back, :func:`~triton_dist.kernels.ag_gemm.ag_push`'s layout, the same as
  ``ag_gemm``'s ``a_full``), in the packed layout ``[B, L, Hkv, D]``. Seen as ``[W * B, L, Hkv, D]``, chunk ``c``'s
  sequence ``b`` is batch row ``c * B + b``: one tensor descriptor covers every peer chunk and clips each at ``L``
  rows (rows past ``L`` read as 0, the TMA caveat of :mod:`~triton_dist.kernels.flash_attention`). This rank's own
  slot is never written: its chunk is read from the caller's ``k`` / ``v``.
* ``ready``: symmetric int64 ``[2, W, NSIG]``: ``ready[0, c, j]`` (K) and ``ready[1, c, j]`` (V) ``= e * 2**24 +
  tag`` once push program ``j`` of rank ``c`` has stored its blocks of chunk ``c`` into this rank's buffer;
* ``recv_ok``: symmetric int64 ``[W]``: ``recv_ok[p] = e`` on this rank means "rank ``p`` has finished its call ``e
  - 1`` (the last reader of its gathered buffers): push call ``e``'s chunk into them";
* ``counter``: local int64 ``[3]``, the whole-launch epoch (:func:`~triton_dist.kernels.common.call_epoch` /
  :func:`~triton_dist.kernels.common.finish_call`): in device memory, so a call can be captured in a CUDA graph.

Protocol of call ``e`` (``value = e * 2**24 + tag``, ``tag = (n mod 2**24) xor (2**23 if causal)``: a rank called
with another chunk size, or another ``causal``, is reported by the tagged waits instead of waited for; every rank
makes the same calls in the same order, so ``e`` agrees across ranks without the host):

1. push programs (the last ``2 * NSIG`` of the grid; none at ``W = 1``): ``NSIG`` run
   :func:`~triton_dist.kernels.ag_gemm.ag_push` on ``k`` into ``k_full`` with ``ready[0]``, ``NSIG`` on ``v`` into
   ``v_full`` with ``ready[1]``: program 0 of each raises ``recv_ok[rank] = e`` on every peer, then per reader peer
   (rotated order ``rank + 1, rank + 2, ...``) waits for its ``recv_ok == e``, stores its blocks of the chunk at
   element ``rank * n`` of the peer's buffer and raises its ready signal there. Readers: every peer, or with
   ``causal`` only the peers of a higher rank (``ag_push(HIGHER_ONLY=True)``): rank ``p`` reads chunks ``0 ..
   p`` only.
2. attention programs (the first ``P`` of the grid, persistent): work item ``(t, bh)`` -- query tile ``t`` (the last
   tiles first when causal: the heaviest) of head ``h = bh % Hq`` of sequence ``b = bh // Hq``; items ``pid, pid +
   P, ...``. Per item: the query tile (:func:`~triton_dist.kernels.flash_attention.load_q_tile`), the own chunk from
   ``k`` / ``v`` with no wait (``diag = 0``), then the peer chunks in arrival order ``c = rank - 1, rank - 2, ...``
   (causal: down to 0 only; else all ``W - 1``, wrapping): a tagged system-scope acquire ``dl.wait`` for the ``NSIG``
   K and ``NSIG`` V ready signals of chunk ``c``, their tokens consumed into the chunk's batch coordinate ``c * B +
   b`` (which every descriptor load and pointer of the chunk goes through), then
   :func:`~triton_dist.kernels.flash_attention.attend_range` over its ``L`` keys with ``diag = (rank - c) * L``.
   :func:`~triton_dist.kernels.flash_attention.finish_rows` and
   :func:`~triton_dist.kernels.flash_attention.store_rows` write ``out`` and ``lse``.
3. :func:`~triton_dist.kernels.common.finish_call` in every program; the last one publishes the epoch.

A chunk that causal masking hides entirely (``c > rank``) is neither waited for nor read, and not even sent.

Reuse: signals carry the epoch and are compared for equality (ready: tagged). A peer writes into this rank's
buffers in call ``e`` only after this rank raised ``recv_ok == e`` (its call ``e - 1`` ended: stream order). The
push's equality wait on ``recv_ok[p] == e`` cannot miss its value, because ``p`` reads the pushed chunk in call
``e`` and so cannot finish call ``e`` and raise ``e + 1`` before the push went through: that is why a causal rank
pushes only to the ranks that read its chunk (pushing to all would let a rank that never waits for the chunk race
ahead one call; ``ag_push``'s ``HIGHER_ONLY`` docstring). Mixed causal / non-causal calls keep this: each call's
pushes go exactly to that call's readers.

Deadlock freedom: push programs wait only for the peers' ``recv_ok``, raised first thing by their program 0, never
for an attention program; attention programs wait only for peers' push programs. Every program of the launch must
be resident at once (a spinning attention program must not keep a push program off the GPU): the grid is at most
the rank's SM count and is launched cooperatively on NVIDIA (an impossible grid is a launch error, not a hang).
"""
from __future__ import annotations

import triton.language as tl

import triton_dist
import triton_dist.language as dl

from triton_dist.kernels.ag_gemm import ag_push
from triton_dist.kernels.common import TAG_BITS_C, TAG_RANGE_C, call_epoch, finish_call
from triton_dist.kernels.flash_attention import attend_range, finish_rows, init_state, load_q_tile, store_rows
from triton_dist.language.profiler import Profiler

#: xor-ed into the size tag of a causal call (a rank called with another ``causal`` is reported, not waited for)
CAUSAL_TAG = 1 << 23


@triton_dist.jit(do_not_specialize=["rank"])
def sp_ag_attention_kernel(q_ptr, k_ptr, v_ptr, o_ptr, lse_ptr, k_full_ptr, v_full_ptr, ready_ptr, recv_ok_ptr,
                           counter_ptr, B, H_Q, H_KV, L, qk_scale, stride_qb, stride_ql, stride_qh,
                           stride_ob, stride_ol, stride_oh, tag, rank, WORLD: tl.constexpr, NSIG: tl.constexpr,
                           COPY_BLOCK: tl.constexpr, HEAD_D: tl.constexpr, BLOCK_M: tl.constexpr,
                           BLOCK_N: tl.constexpr, CAUSAL: tl.constexpr, USE_TMA: tl.constexpr,
                           WRITE_LSE: tl.constexpr):
    """One call of the fused all-gather + attention (module docstring). ``q [B, L, H_Q, HEAD_D]`` (strides
    ``stride_q*``, unit along D), this rank's chunk ``k, v [B, L, H_KV, HEAD_D]`` contiguous, ``out`` like q
    (strides ``stride_o*``), ``lse [B, H_Q, L]`` float32 contiguous (``WRITE_LSE``). ``qk_scale = scale * log2(e) >
    0``. Grid: ``P`` attention programs, then ``2 * NSIG`` push programs when ``WORLD > 1``; all co-resident.
    ``USE_TMA``: q, k, v 16-byte aligned with 16-byte-multiple strides (the host checks; the gathered buffers are)."""
    pid = tl.program_id(0)
    e = call_epoch(counter_ptr)
    value = e * TAG_RANGE_C + tag
    if WORLD > 1:
        nattn = tl.num_programs(0) - 2 * NSIG
    else:
        nattn = tl.num_programs(0)
    if pid >= nattn:
        j = pid - nattn
        n = B * L * H_KV * HEAD_D
        prof = Profiler.create(counter_ptr, ENABLE_PROFILING=False)
        if j < NSIG:
            ag_push(k_ptr, k_full_ptr, ready_ptr, recv_ok_ptr, n, value, e, rank, j, NSIG, prof, WORLD, COPY_BLOCK,
                    CAUSAL)
        else:
            ag_push(v_ptr, v_full_ptr, ready_ptr + WORLD * NSIG, recv_ok_ptr, n, value, e, rank, j - NSIG, NSIG, prof,
                    WORLD, COPY_BLOCK, CAUSAL)
    else:
        sp_ag_attend_items(q_ptr, k_ptr, v_ptr, o_ptr, lse_ptr, k_full_ptr, v_full_ptr, ready_ptr, B, H_Q, H_KV, L,
                           qk_scale, stride_qb, stride_ql, stride_qh, stride_ob, stride_ol, stride_oh, value, rank,
                           pid, nattn, WORLD, NSIG, HEAD_D, BLOCK_M, BLOCK_N, CAUSAL, USE_TMA, WRITE_LSE)
    finish_call(counter_ptr, e)


@triton_dist.jit
def sp_ag_attend_items(q_ptr, k_ptr, v_ptr, o_ptr, lse_ptr, k_full_ptr, v_full_ptr, ready_ptr, B, H_Q, H_KV, L,
                       qk_scale, stride_qb, stride_ql, stride_qh, stride_ob, stride_ol, stride_oh, value, rank, pid,
                       nprog, WORLD: tl.constexpr, NSIG: tl.constexpr, HEAD_D: tl.constexpr, BLOCK_M: tl.constexpr,
                       BLOCK_N: tl.constexpr, CAUSAL: tl.constexpr, USE_TMA: tl.constexpr, WRITE_LSE: tl.constexpr):
    """Attention role of :func:`sp_ag_attention_kernel`: program ``pid`` of ``nprog`` walks the work items ``pid,
    pid + nprog, ...`` (module docstring, step 2). The descriptors are built once, before the walk: the own chunk's
    ``[B, L, H_KV, D]`` over ``k`` / ``v``, the peer chunks' ``[W * B, L, H_KV, D]`` over the gathered buffers."""
    stride_kh = HEAD_D
    stride_kl = H_KV * HEAD_D
    stride_kb = L * stride_kl
    BH = B * H_Q
    tiles = tl.cdiv(L, BLOCK_M)
    q_desc = None
    kl_desc = None
    vl_desc = None
    kf_desc = None
    vf_desc = None
    if USE_TMA:
        q_desc = tl.make_tensor_descriptor(q_ptr, shape=[B, L, H_Q, HEAD_D], strides=[stride_qb, stride_ql, stride_qh,
                                           1], block_shape=[1, BLOCK_M, 1, HEAD_D])
        kl_desc = tl.make_tensor_descriptor(k_ptr, shape=[B, L, H_KV, HEAD_D], strides=[stride_kb, stride_kl,
                                            stride_kh, 1], block_shape=[1, BLOCK_N, 1, HEAD_D])
        vl_desc = tl.make_tensor_descriptor(v_ptr, shape=[B, L, H_KV, HEAD_D], strides=[stride_kb, stride_kl,
                                            stride_kh, 1], block_shape=[1, BLOCK_N, 1, HEAD_D])
        kf_desc = tl.make_tensor_descriptor(k_full_ptr, shape=[WORLD * B, L, H_KV, HEAD_D], strides=[stride_kb,
                                            stride_kl, stride_kh, 1], block_shape=[1, BLOCK_N, 1, HEAD_D])
        vf_desc = tl.make_tensor_descriptor(v_full_ptr, shape=[WORLD * B, L, H_KV, HEAD_D], strides=[stride_kb,
                                            stride_kl, stride_kh, 1], block_shape=[1, BLOCK_N, 1, HEAD_D])
    if CAUSAL:
        npeers = rank  # chunks rank - 1, ..., 0; the later ones are above every query row's diagonal
    else:
        npeers = WORLD - 1
    for item in range(pid, BH * tiles, nprog):
        t = item // BH
        if CAUSAL:
            t = tiles - 1 - t  # heaviest first: the short tiles fill the tail
        bh = item % BH
        b = bh // H_Q
        h = bh % H_Q
        kh = h // (H_Q // H_KV)
        m0 = t * BLOCK_M
        q = load_q_tile(q_desc, q_ptr, b, h, m0, L, stride_qb, stride_ql, stride_qh, BLOCK_M, HEAD_D, USE_TMA)
        m_i, l_i, acc = init_state(BLOCK_M, HEAD_D)
        # the own chunk: already here, no wait (its queries and keys share positions: diag 0)
        m_i, l_i, acc = attend_range(q, m_i, l_i, acc, kl_desc, vl_desc, k_ptr, v_ptr, b, kh, m0, 0, L, 0, qk_scale,
                                     stride_kb, stride_kl, stride_kh, stride_kb, stride_kl, stride_kh, BLOCK_M,
                                     BLOCK_N, HEAD_D, CAUSAL, USE_TMA)
        # the peer chunks, in the order they arrive (rank - 1 pushes to this rank first)
        for i in range(1, npeers + 1):
            c = (rank - i + WORLD) % WORLD
            tok = dl.wait(ready_ptr + c * NSIG, NSIG, "sys", "acquire", value, tag_bits=TAG_BITS_C)
            tok = tok + dl.wait(ready_ptr + (WORLD + c) * NSIG, NSIG, "sys", "acquire", value, tag_bits=TAG_BITS_C)
            # chunk c's rows are read only through this coordinate (descriptor loads and pointers alike)
            bc = dl.consume_token(c * B + b, tok)
            m_i, l_i, acc = attend_range(q, m_i, l_i, acc, kf_desc, vf_desc, k_full_ptr, v_full_ptr, bc, kh, m0, 0, L,
                                         (rank - c) * L, qk_scale, stride_kb, stride_kl, stride_kh, stride_kb,
                                         stride_kl, stride_kh, BLOCK_M, BLOCK_N, HEAD_D, CAUSAL, USE_TMA)
        out, lse = finish_rows(m_i, l_i, acc)
        store_rows(o_ptr, lse_ptr, out, lse, b, h, bh, m0, L, stride_ob, stride_ol, stride_oh, BLOCK_M, HEAD_D,
                   WRITE_LSE)


__all__ = ["sp_ag_attention_kernel", "sp_ag_attend_items", "CAUSAL_TAG"]
