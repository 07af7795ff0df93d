"""A test kernel built from the jit building blocks of triton_dist.kernels.flash_attention the way a fused
sequence-parallel kernel uses them: one query tile's softmax state carried across the K/V chunks of one buffer,
chunk by chunk (there a wait on each chunk's signal would precede its attend_range)."""
import triton.language as tl

import triton_dist
from triton_dist.kernels.flash_attention import attend_range, finish_rows, init_state, load_q_tile


@triton_dist.jit
def chunked_attention_kernel(q_ptr, k_ptr, v_ptr, o_ptr, lse_ptr, H_Q, H_KV, Lq, Lkv, diag, qk_scale, CHUNK,
                             stride_qb, stride_ql, stride_qh, stride_kb, stride_kl, stride_kh,
                             stride_ob, stride_ol, stride_oh, HEAD_D: tl.constexpr, BLOCK_M: tl.constexpr,
                             BLOCK_N: tl.constexpr, CAUSAL: tl.constexpr):
    """Program ``(bh, t)``: query tile ``t`` of head ``bh % H_Q`` against keys ``[0, Lkv)`` as chunks ``[c * CHUNK,
    min((c + 1) * CHUNK, Lkv))`` taken last chunk first (any order must give the same result); k and v share
    strides; pointer path."""
    bh = tl.program_id(0)
    m0 = tl.program_id(1) * BLOCK_M
    b = bh // H_Q
    h = bh % H_Q
    kh = h // (H_Q // H_KV)
    q = load_q_tile(None, q_ptr, b, h, m0, Lq, stride_qb, stride_ql, stride_qh, BLOCK_M, HEAD_D, False)
    m_i, l_i, acc = init_state(BLOCK_M, HEAD_D)
    chunks = tl.cdiv(Lkv, CHUNK)
    for i in range(0, chunks):
        lo = (chunks - 1 - i) * CHUNK
        hi = tl.minimum(lo + CHUNK, Lkv)
        m_i, l_i, acc = attend_range(q, m_i, l_i, acc, None, None, k_ptr, v_ptr, b, kh, m0, lo, hi, diag, qk_scale,
                                     stride_kb, stride_kl, stride_kh, stride_kb, stride_kl, stride_kh, BLOCK_M,
                                     BLOCK_N, HEAD_D, CAUSAL, False)
    out, lse = finish_rows(m_i, l_i, acc)
    rows = m0 + tl.arange(0, BLOCK_M)
    cols = tl.arange(0, HEAD_D)
    ok = rows < Lq
    tl.store(o_ptr + b * stride_ob + h * stride_oh + rows[:, None] * stride_ol + cols[None, :],
             out.to(o_ptr.dtype.element_ty), mask=ok[:, None])
    tl.store(lse_ptr + bh * Lq + rows, lse, mask=ok)
