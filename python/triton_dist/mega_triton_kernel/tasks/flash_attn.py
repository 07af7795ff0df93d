"""FlashAttention family: ``flash_attn``, prefill attention (GQA, causal or not).

``q [B, S, Hq, D]``, ``k, v [B, S, Hkv, D]`` -> ``output [B, S, Hq, D]``; scores ``s = sm_scale * q . k``
(``sm_scale=None``: ``D ** -0.5``), capped to ``soft_cap * tanh(s / soft_cap)`` when ``soft_cap > 0``; causal: query
row ``i`` sees key rows ``0..i``. fp32 softmax (online, base 2), ``tl.dot`` for ``q k^T`` and ``p v``.

Tiling: one task per ``(b, q head, BLOCK_M query rows)``; a task reads its query rows, the k / v rows of its kv head
it needs (causal: up to its last row) and writes its output rows.
"""
from __future__ import annotations

import triton
import triton.language as tl

import triton_dist
from ..core.checks import check_tensor
from ..core.device import arg
from ..core.registry import register_task
from ..core.task import Op, Tile, region
from ._attn_checks import check_bool, check_gqa, check_head_dim, check_scale, check_soft_cap
from .flash_decode import online_softmax_block

__all__ = ["flash_attn_task"]


@triton_dist.jit
def flash_attn_task(args, tile, step, S: tl.constexpr, HQ: tl.constexpr, HKV: tl.constexpr, D: tl.constexpr,
                    BLOCK_D: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, CAUSAL: tl.constexpr,
                    SM_SCALE: tl.constexpr, SOFT_CAP: tl.constexpr, DT: tl.constexpr):
    """Query rows ``mb * BLOCK_M ...`` of head ``qh`` of sequence ``b``, ``tile = (b * HQ + qh) * M_TILES + mb``.
    ``args``: q, k, v, output."""
    q_ptr = arg(args, 0, DT)
    k_ptr = arg(args, 1, DT)
    v_ptr = arg(args, 2, DT)
    o_ptr = arg(args, 3, DT)
    M_TILES: tl.constexpr = (S + BLOCK_M - 1) // BLOCK_M
    G: tl.constexpr = HQ // HKV
    mb = tile % M_TILES
    bq = tile // M_TILES
    qh = bq % HQ
    b = bq // HQ
    kh = qh // G
    rm = mb * BLOCK_M + tl.arange(0, BLOCK_M)
    d = tl.arange(0, BLOCK_D)
    dm = d < D
    mm = rm < S
    q = tl.load(q_ptr + ((b * S + rm).to(tl.int64)[:, None] * HQ + qh) * D + d[None, :],
                mask=mm[:, None] & dm[None, :], other=0.0)
    m = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_sum = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, BLOCK_D], dtype=tl.float32)
    if CAUSAL:
        hi = tl.minimum(S, (mb + 1) * BLOCK_M)
    else:
        hi = S
    rn0 = tl.arange(0, BLOCK_N)
    for n0 in range(0, hi, BLOCK_N):
        rn = n0 + rn0
        nm = rn < hi
        kv_off = ((b * S + rn).to(tl.int64)[:, None] * HKV + kh) * D + d[None, :]
        k = tl.load(k_ptr + kv_off, mask=nm[:, None] & dm[None, :], other=0.0)
        v = tl.load(v_ptr + kv_off, mask=nm[:, None] & dm[None, :], other=0.0)
        ok = nm[None, :]
        if CAUSAL:
            ok = ok & (rn[None, :] <= rm[:, None])
        m, l_sum, acc = online_softmax_block(q, k, v, ok, m, l_sum, acc, SM_SCALE, SOFT_CAP, DT)
    out = acc / tl.where(l_sum > 0, l_sum, 1.0)[:, None]
    tl.store(o_ptr + ((b * S + rm).to(tl.int64)[:, None] * HQ + qh) * D + d[None, :], out.to(DT),
             mask=mm[:, None] & dm[None, :])


@register_task("flash_attn", "FlashAttention")
def build_flash_attn(builder, layer_id, q, k, v, output, sm_scale=None, soft_cap: float = 0.0,
                     is_causal: bool = True) -> Op:
    import torch

    name = "make_flash_attn"
    check_tensor(name, "q", q, dim=4, dtype=(torch.bfloat16, torch.float16))
    B, S, HQ, D = q.shape
    check_tensor(name, "k", k, dim=4, dtype=q.dtype, shape=[B, S, None, D])
    HKV = k.shape[2]
    check_tensor(name, "v", v, dtype=q.dtype, shape=list(k.shape))
    check_tensor(name, "output", output, dtype=q.dtype, shape=list(q.shape))
    if B < 1 or S < 1:
        raise ValueError(f"{name}: empty q {list(q.shape)}")
    check_gqa(name, "q", HQ, "k", HKV)
    check_head_dim(name, "q", D)
    scale = check_scale(name, sm_scale, D)
    cap = check_soft_cap(name, soft_cap)
    causal = check_bool(name, "is_causal", is_causal)
    G = HQ // HKV
    bm = 16 if S <= 16 else (32 if S <= 32 else 64)
    bn = 32 if S <= 32 else 64
    m_tiles = triton.cdiv(S, bm)
    es = q.element_size()
    tiles = []
    for b in range(B):
        for qh in range(HQ):
            kh = qh // G
            for mb in range(m_tiles):
                r0, r1 = mb * bm, min(S, (mb + 1) * bm)
                hi = r1 if causal else S
                rows = slice(r0, r1)
                tiles.append(Tile(reads=(region(q, b, rows, qh) + region(k, b, slice(0, hi), kh)
                                         + region(v, b, slice(0, hi), kh)),
                                  writes=region(output, b, rows, qh), cost=(2 * hi + 2 * (r1 - r0)) * D * es))
    return Op("FlashAttention", "flash_attn", layer_id, flash_attn_task, [q, k, v, output],
              dict(S=S, HQ=HQ, HKV=HKV, D=D, BLOCK_D=max(16, triton.next_power_of_2(D)), BLOCK_M=bm, BLOCK_N=bn,
                   CAUSAL=causal, SM_SCALE=scale, SOFT_CAP=cap, DT=q.dtype), tiles)
