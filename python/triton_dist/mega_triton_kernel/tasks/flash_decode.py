"""FlashDecode family: ``flash_decode``, decode attention over a paged KV cache (GQA), as two ops.

``query [B, 1, Hq, D]``, caches ``[num_blocks, page_size, Hkv, D]``, ``block_tables [B, max_blocks]`` (int32),
``kv_lens [B]`` (int32, read on the device at run time) -> ``output [B, 1, Hq, D]``; fp32 math, scores
``s = sm_scale * q . k`` (``sm_scale=None``: ``D ** -0.5``), capped to ``soft_cap * tanh(s / soft_cap)`` when
``soft_cap > 0``.

* split op: one task per ``(b, kv head h, split)``; it streams its share of ``[0, kv_lens[b])`` (``cdiv(kv_len,
  NUM_KV_SPLITS)`` positions, laid from the end: the last split holds the newest position) in blocks of
  ``BLOCK_N`` positions x ``D`` (one vector load of K and of V per block, page offsets in int64) and runs an
  online softmax (base 2) for all ``Hq / Hkv`` query heads of ``h`` at once (the group is the row operand of
  ``tl.dot`` for ``q k^T`` and ``p v``, padded to the MMA minimum of 16 rows: decode is memory bound, so the padding
  costs tensor-core time, not bandwidth), writing the fp32 partial output (normalised) and its log2-sum-exp into
  buffers the builder allocates. A split with no position left writes a neutral partial (output 0, lse -inf).
* combine op: one task per ``(b, h)``: ``output = sum_i 2^(lse_i - m) o_i / sum_i 2^(lse_i - m)`` over the splits
  (``m`` their maximum); a sequence with ``kv_lens[b] == 0`` gives 0, not NaN.

``NUM_KV_SPLITS`` (a constexpr) makes ``B * Hkv * splits`` about ``builder.num_workers`` (at least 1, at most one
split per ``BLOCK_N`` positions of the longest possible sequence; with ``builder.kv_split_positions = P > 0`` at
least ``cdiv(max_len, P)``, and then every split at least ``MIN_CHUNK = BLOCK_N`` positions long, the front splits
of a short sequence empty); the build function also takes ``num_kv_splits`` to force it. The split tasks read the caches as ``qk_norm_rope.cache_space(cache, b * Hkv + h, "all")`` (the
writers of the cache, ``qk_norm_rope``, describe their writes in the same space: per sequence and kv head, the
step's new positions apart). ``kv_lens[b]`` is clamped to ``max_blocks * page_size`` and positions on
a page index outside ``[0, num_blocks)`` are skipped, so bad tables never read outside the caches.
"""
from __future__ import annotations

import triton
import triton.language as tl

import triton_dist
import triton_dist.language as dl
from ..core.checks import check_tensor
from ..core.device import arg, wait_deps
from ..core.registry import register_fusion, register_task
from ..core.task import Op, Tile, region, same_tensor
from ._attn_checks import check_gqa, check_head_dim, check_scale, check_soft_cap, check_paged_tables
from .qk_norm_rope import cache_space, norm_rope_group, norm_rope_store, rope_row

__all__ = ["flash_decode_split_task", "flash_decode_rope_split_task", "flash_decode_rope_split_ahead_task",
           "flash_decode_combine_task", "pick_num_kv_splits", "pick_block_n", "can_fuse_rope", "fuse_rope_prologue",
           "split_loads_ahead"]

LOG2E = 1.4426950408889634
#: Elements of one K (or V) block a split task loads per iteration (``BLOCK_N x BLOCK_D``).
KV_BLOCK_ELEMS = 8192


def pick_block_n(block_d: int) -> int:
    """Positions per K/V block (a power of two, 16..64): ``BLOCK_N x BLOCK_D`` within KV_BLOCK_ELEMS."""
    return max(16, min(64, KV_BLOCK_ELEMS // block_d))


def pick_num_kv_splits(B: int, Hkv: int, num_workers: int, max_len: int, block_n: int,
                       split_positions: int = 0) -> int:
    """Splits per ``(b, kv head)`` so that ``B * Hkv * splits`` about fills ``num_workers``; with
    ``split_positions > 0`` also at least ``cdiv(max_len, split_positions)``, so that no split of the longest
    possible sequence streams more than about that many positions (at most one split per ``block_n`` positions and
    128 splits either way)."""
    fill = num_workers // max(1, B * Hkv)
    if split_positions > 0:
        fill = max(fill, triton.cdiv(max_len, split_positions))
    return max(1, min(fill, triton.cdiv(max_len, block_n), 128))


@triton_dist.jit
def online_softmax_block(q, k, v, ok, m, l_sum, acc, SM_SCALE: tl.constexpr, SOFT_CAP: tl.constexpr,
                         DT: tl.constexpr):
    """One K/V block of a base-2 online softmax (shared by flash decode and flash attention): scores
    ``q @ k.T * SM_SCALE`` (``SOFT_CAP > 0``: ``SOFT_CAP * tanh(scores / SOFT_CAP)``, as ``1 - 2 / (e^2x + 1)``,
    which saturates cleanly at +-1), ``-inf`` where ``ok`` is False; returns the updated running max ``m``, sum
    ``l_sum`` and fp32 accumulator ``acc`` (rows with nothing seen yet keep ``m = -inf`` and add nothing)."""
    s = tl.dot(q, tl.trans(k))
    if SOFT_CAP > 0:
        s = (SOFT_CAP * 1.4426950408889634) * (
            1.0 - 2.0 / (tl.exp2(s * (2.0 * SM_SCALE / SOFT_CAP * 1.4426950408889634)) + 1.0))
    else:
        s = s * (SM_SCALE * 1.4426950408889634)
    s = tl.where(ok, s, float("-inf"))
    m_new = tl.maximum(m, tl.max(s, axis=1))
    m_ref = tl.where(m_new == float("-inf"), 0.0, m_new)
    alpha = tl.exp2(m - m_ref)
    p = tl.exp2(s - m_ref[:, None])
    l_sum = l_sum * alpha + tl.sum(p, axis=1)
    acc = tl.dot(p.to(DT), v, acc * alpha[:, None])
    return m_new, l_sum, acc


@triton_dist.jit
def flash_decode_split_task(args, tile, step, HQ: tl.constexpr, HKV: tl.constexpr, D: tl.constexpr,
                            BLOCK_D: tl.constexpr, G: tl.constexpr, BLOCK_G: tl.constexpr, PAGE: tl.constexpr,
                            NUM_BLOCKS: tl.constexpr, MAX_BLOCKS: tl.constexpr, SPLITS: tl.constexpr,
                            BLOCK_N: tl.constexpr, SM_SCALE: tl.constexpr, SOFT_CAP: tl.constexpr,
                            DT: tl.constexpr, MIN_CHUNK: tl.constexpr = 0):
    """Split ``tile % SPLITS`` of ``(b, h) = divmod(tile // SPLITS, HKV)``. ``args``: query, key_cache,
    value_cache, block_tables, kv_lens, partial output ``[B, HQ, SPLITS, D]`` fp32, partial lse ``[B, HQ,
    SPLITS]`` fp32 (base 2)."""
    q_ptr = arg(args, 0, DT)
    split, h, b, kc, vc, bt, kvl = _split_unit(args, tile, HKV, SPLITS, DT)
    po = arg(args, 5, tl.float32)
    pl = arg(args, 6, tl.float32)
    g = tl.arange(0, BLOCK_G)
    d = tl.arange(0, BLOCK_D)
    gm = g < G
    dm = d < D
    heads = b * HQ + h * G + g
    # the group's query heads as the rows of one MMA operand (BLOCK_G >= 16 rows, padding rows masked)
    q = tl.load(q_ptr + heads[:, None] * D + d[None, :], mask=gm[:, None] & dm[None, :], other=0.0)
    _split_attend(q, kc, vc, bt, kvl, po, pl, b, h, split, HQ, HKV, D, BLOCK_D, G, BLOCK_G, PAGE, NUM_BLOCKS,
                  MAX_BLOCKS, SPLITS, BLOCK_N, SM_SCALE, SOFT_CAP, DT, MIN_CHUNK)


@triton_dist.jit
def _split_unit(args, tile, HKV: tl.constexpr, SPLITS: tl.constexpr, DT: tl.constexpr):
    """A split task's unit: ``(split, h, b)`` of tile ``tile % SPLITS`` of ``(b, h) = divmod(tile // SPLITS,
    HKV)``, and its op's cache arguments ``(key_cache, value_cache, block_tables, kv_lens)`` (``args[1:5]``, the
    same places in the plain and the fused split ops)."""
    split = tile % SPLITS
    bh = tile // SPLITS
    return (split, bh % HKV, bh // HKV, arg(args, 1, DT), arg(args, 2, DT), arg(args, 3, tl.int32),
            arg(args, 4, tl.int32))


@triton_dist.jit
def _split_attend(q, kc, vc, bt, kvl, po, pl, b, h, split, HQ: tl.constexpr, HKV: tl.constexpr, D: tl.constexpr,
                  BLOCK_D: tl.constexpr, G: tl.constexpr, BLOCK_G: tl.constexpr, PAGE: tl.constexpr,
                  NUM_BLOCKS: tl.constexpr, MAX_BLOCKS: tl.constexpr, SPLITS: tl.constexpr, BLOCK_N: tl.constexpr,
                  SM_SCALE: tl.constexpr, SOFT_CAP: tl.constexpr, DT: tl.constexpr, MIN_CHUNK: tl.constexpr = 0):
    """Split ``split`` of ``(b, h)`` for the group's queries ``q [BLOCK_G, BLOCK_D]``: the online softmax over its
    positions (:func:`_split_range`), then its partial output and lse. Splits are laid from the end: split
    ``SPLITS - 1`` holds the newest position ``kv_len - 1``, so only that split reads the step's new positions."""
    start, end = _split_range(kvl, b, split, PAGE, MAX_BLOCKS, SPLITS, MIN_CHUNK)
    m = tl.full([BLOCK_G], float("-inf"), tl.float32)
    l_sum = tl.zeros([BLOCK_G], dtype=tl.float32)
    acc = tl.zeros([BLOCK_G, BLOCK_D], dtype=tl.float32)
    for n0 in range(start, end, BLOCK_N):
        k, v, pm = _kv_block(kc, vc, bt, b, h, n0, end, HKV, D, BLOCK_D, PAGE, NUM_BLOCKS, MAX_BLOCKS, BLOCK_N)
        m, l_sum, acc = online_softmax_block(q, k, v, pm[None, :], m, l_sum, acc, SM_SCALE, SOFT_CAP, DT)
    _split_store(po, pl, m, l_sum, acc, b, h, split, HQ, D, BLOCK_D, G, BLOCK_G, SPLITS)


@triton_dist.jit
def _split_range(kvl, b, split, PAGE: tl.constexpr, MAX_BLOCKS: tl.constexpr, SPLITS: tl.constexpr,
                 MIN_CHUNK: tl.constexpr = 0):
    """Positions ``[start, end)`` of split ``split`` of sequence ``b``: ``chunk = cdiv(kv_len, SPLITS)`` each (at
    least ``MIN_CHUNK``), laid from the end (the first splits empty when ``kv_len < SPLITS * chunk``); ``kv_len``
    clamped to the table."""
    kv_len = tl.maximum(tl.minimum(tl.load(kvl + b), MAX_BLOCKS * PAGE), 0)
    chunk = (kv_len + SPLITS - 1) // SPLITS
    if MIN_CHUNK > 0:
        chunk = tl.maximum(chunk, MIN_CHUNK)
    end = tl.maximum(kv_len - (SPLITS - 1 - split) * chunk, 0)
    start = tl.maximum(end - chunk, 0)
    return start, end


@triton_dist.jit
def _kv_block(kc, vc, bt, b, h, n0, end, HKV: tl.constexpr, D: tl.constexpr, BLOCK_D: tl.constexpr,
              PAGE: tl.constexpr, NUM_BLOCKS: tl.constexpr, MAX_BLOCKS: tl.constexpr, BLOCK_N: tl.constexpr):
    """Positions ``n0 .. n0 + BLOCK_N`` (below ``end``) of kv head ``h`` of sequence ``b``: ``(k, v, pm)``, the
    ``[BLOCK_N, BLOCK_D]`` K and V rows (0 where masked) and the positions' mask (in range, on a valid page)."""
    n = tl.arange(0, BLOCK_N)
    d = tl.arange(0, BLOCK_D)
    dm = d < D
    p = n0 + n
    pm = p < end
    page = tl.load(bt + b * MAX_BLOCKS + p // PAGE, mask=pm, other=0)
    pm = pm & (page >= 0) & (page < NUM_BLOCKS)
    off = ((tl.where(pm, page, 0).to(tl.int64) * PAGE + p % PAGE) * HKV + h) * D
    kvm = pm[:, None] & dm[None, :]
    k = tl.load(kc + off[:, None] + d[None, :], mask=kvm, other=0.0)
    v = tl.load(vc + off[:, None] + d[None, :], mask=kvm, other=0.0)
    return k, v, pm


@triton_dist.jit
def _split_store(po, pl, m, l_sum, acc, b, h, split, HQ: tl.constexpr, D: tl.constexpr, BLOCK_D: tl.constexpr,
                 G: tl.constexpr, BLOCK_G: tl.constexpr, SPLITS: tl.constexpr):
    """The split's partial output (normalised; 0 for an empty split) and its log2-sum-exp (-inf when empty)."""
    g = tl.arange(0, BLOCK_G)
    d = tl.arange(0, BLOCK_D)
    gm = g < G
    dm = d < D
    heads = b * HQ + h * G + g
    nonempty = l_sum > 0
    out = tl.where(nonempty[:, None], acc / tl.where(nonempty, l_sum, 1.0)[:, None], 0.0)
    lse = tl.where(nonempty, m + tl.log2(tl.where(nonempty, l_sum, 1.0)), float("-inf"))
    row = heads.to(tl.int64) * SPLITS + split
    tl.store(po + row[:, None] * D + d[None, :], out, mask=gm[:, None] & dm[None, :])
    tl.store(pl + row, lse, mask=gm)


@triton_dist.jit
def flash_decode_rope_split_task(args, tile, step, HQ: tl.constexpr, HKV: tl.constexpr, D: tl.constexpr,
                                 BLOCK_D: tl.constexpr, G: tl.constexpr, BLOCK_G: tl.constexpr, PAGE: tl.constexpr,
                                 NUM_BLOCKS: tl.constexpr, MAX_BLOCKS: tl.constexpr, SPLITS: tl.constexpr,
                                 BLOCK_N: tl.constexpr, SM_SCALE: tl.constexpr, SOFT_CAP: tl.constexpr,
                                 DT: tl.constexpr, MAX_POS: tl.constexpr, COS_PER_SEQ: tl.constexpr,
                                 Q_EPS: tl.constexpr, K_EPS: tl.constexpr, SKIP_Q: tl.constexpr,
                                 SKIP_K: tl.constexpr, WDT: tl.constexpr, MIN_CHUNK: tl.constexpr = 0):
    """The split of :func:`flash_decode_split_task` with the decode step's ``qk_norm_rope_update_kvcache`` as its
    prologue (fusion 3 of ``core/fusion.py``): the task computes its group's queries from ``qkv`` itself (the
    rope task's code, so the same bits), split 0 also stores them to ``q_norm_rope`` and the last split, the one
    holding the new position, stores the new k / v to the cache, then a CTA barrier, then reads it back like the
    other positions. ``args``: qkv, key_cache, value_cache, block_tables, kv_lens, partial output, partial lse,
    q_rms_weight, k_rms_weight, cos_cache, sin_cache, q_norm_rope."""
    split, h, b, kc, vc, bt, kvl = _split_unit(args, tile, HKV, SPLITS, DT)
    q = norm_rope_group(arg(args, 0, DT), kc, vc, bt, kvl, arg(args, 7, WDT), arg(args, 8, WDT),
                        arg(args, 9, tl.float32), arg(args, 10, tl.float32), arg(args, 11, DT), b, 0, h,
                        (split == 0).to(tl.int32), (split == SPLITS - 1).to(tl.int32), 1, HQ, HKV, D, BLOCK_D, G,
                        BLOCK_G, PAGE, NUM_BLOCKS, MAX_BLOCKS, MAX_POS, COS_PER_SEQ, Q_EPS, K_EPS, SKIP_Q, SKIP_K,
                        DT)
    tl.debug_barrier()  # the new k / v rows this program stored are read back by its other threads
    _split_attend(q, kc, vc, bt, kvl, arg(args, 5, tl.float32), arg(args, 6, tl.float32), b, h, split, HQ, HKV, D,
                  BLOCK_D, G, BLOCK_G, PAGE, NUM_BLOCKS, MAX_BLOCKS, SPLITS, BLOCK_N, SM_SCALE, SOFT_CAP, DT,
                  MIN_CHUNK)


@triton_dist.jit
def flash_decode_rope_split_ahead_task(args, tile, step, deps_ptr, dep_first, dep_count, scoreboard_ptr,
                                       HQ: tl.constexpr, HKV: tl.constexpr, D: tl.constexpr, BLOCK_D: tl.constexpr,
                                       G: tl.constexpr, BLOCK_G: tl.constexpr, PAGE: tl.constexpr,
                                       NUM_BLOCKS: tl.constexpr, MAX_BLOCKS: tl.constexpr, SPLITS: tl.constexpr,
                                       BLOCK_N: tl.constexpr, SM_SCALE: tl.constexpr, SOFT_CAP: tl.constexpr,
                                       DT: tl.constexpr, MAX_POS: tl.constexpr, COS_PER_SEQ: tl.constexpr,
                                       Q_EPS: tl.constexpr, K_EPS: tl.constexpr, SKIP_Q: tl.constexpr,
                                       SKIP_K: tl.constexpr, WDT: tl.constexpr, MIN_CHUNK: tl.constexpr = 0):
    """:func:`flash_decode_rope_split_task` with its loads that need no task of the step issued before it waits
    for the qkv tiles (``waits_inside``; ``ModelBuilder(split_loads_ahead=True)``, :func:`split_loads_ahead`): the
    split's range, its first K/V block (the cache's older positions: no task of the step writes them), the rope
    row. After the wait only the qkv row is read, so the chain qkv -> split -> combine no longer pays the lengths
    -> table -> K/V and lengths -> cos / sin round trips after the qkv GEMV ends. The newest position, which this
    task writes when it is the last split, is taken from the values it stored where it lies in the first block
    (a later block reads it back as before). The same bits as :func:`flash_decode_rope_split_task` (same values,
    same order), unless one sequence's table names the same page twice (unsupported: a page holds one
    sequence's positions)."""
    split, h, b, kc, vc, bt, kvl = _split_unit(args, tile, HKV, SPLITS, DT)
    start, end = _split_range(kvl, b, split, PAGE, MAX_BLOCKS, SPLITS, MIN_CHUNK)
    k0, v0, pm0 = _kv_block(kc, vc, bt, b, h, start, end, HKV, D, BLOCK_D, PAGE, NUM_BLOCKS, MAX_BLOCKS, BLOCK_N)
    pos, pos_ok, posc, c, sn = rope_row(kvl, arg(args, 9, tl.float32), arg(args, 10, tl.float32), b, 0, 1, D,
                                        BLOCK_D, MAX_POS, COS_PER_SEQ)
    tok = wait_deps(deps_ptr, dep_first, dep_count, scoreboard_ptr, step)
    q, k_new, v_new, stored = norm_rope_store(
        dl.consume_token(arg(args, 0, DT), tok), kc, vc, bt, arg(args, 7, WDT), arg(args, 8, WDT),
        dl.consume_token(arg(args, 11, DT), tok), b, 0, h, (split == 0).to(tl.int32),
        (split == SPLITS - 1).to(tl.int32), pos_ok, posc, c, sn, 1, HQ, HKV, D, BLOCK_D, G, BLOCK_G, PAGE,
        NUM_BLOCKS, MAX_BLOCKS, Q_EPS, K_EPS, SKIP_Q, SKIP_K, DT)
    # the newest position in the first block holds, once stored, exactly k_new / v_new (masks from vectors)
    p0 = start + tl.arange(0, BLOCK_N)
    new = (p0 == pos) & ((p0 * 0 + stored.to(tl.int32)) != 0)
    k0 = tl.where(new[:, None], k_new[None, :], k0)
    v0 = tl.where(new[:, None], v_new[None, :], v0)
    tl.debug_barrier()  # a later block may read back the new k / v rows this program stored
    m = tl.full([BLOCK_G], float("-inf"), tl.float32)
    l_sum = tl.zeros([BLOCK_G], dtype=tl.float32)
    acc = tl.zeros([BLOCK_G, BLOCK_D], dtype=tl.float32)
    if start < end:
        m, l_sum, acc = online_softmax_block(q, k0, v0, pm0[None, :], m, l_sum, acc, SM_SCALE, SOFT_CAP, DT)
    for n0 in range(start + BLOCK_N, end, BLOCK_N):
        k, v, pm = _kv_block(kc, vc, bt, b, h, n0, end, HKV, D, BLOCK_D, PAGE, NUM_BLOCKS, MAX_BLOCKS, BLOCK_N)
        m, l_sum, acc = online_softmax_block(q, k, v, pm[None, :], m, l_sum, acc, SM_SCALE, SOFT_CAP, DT)
    _split_store(arg(args, 5, tl.float32), arg(args, 6, tl.float32), m, l_sum, acc, b, h, split, HQ, D, BLOCK_D,
                 G, BLOCK_G, SPLITS)


@triton_dist.jit
def flash_decode_combine_task(args, tile, step, HQ: tl.constexpr, HKV: tl.constexpr, D: tl.constexpr,
                              BLOCK_D: tl.constexpr, G: tl.constexpr, BLOCK_G: tl.constexpr, SPLITS: tl.constexpr,
                              BLOCK_S: tl.constexpr, DT: tl.constexpr):
    """``(b, h) = divmod(tile, HKV)``: rescale and sum the splits of the group's query heads. ``args``: partial
    output, partial lse, output ``[B, 1, HQ, D]``."""
    po = arg(args, 0, tl.float32)
    pl = arg(args, 1, tl.float32)
    o_ptr = arg(args, 2, DT)
    h = tile % HKV
    b = tile // HKV
    g = tl.arange(0, BLOCK_G)
    d = tl.arange(0, BLOCK_D)
    gm = g < G
    dm = d < D
    heads = (b * HQ + h * G + g).to(tl.int64)
    sp = tl.arange(0, BLOCK_S)
    lse = tl.load(pl + heads[:, None] * SPLITS + sp[None, :], mask=gm[:, None] & (sp < SPLITS)[None, :],
                  other=float("-inf"))
    m = tl.max(lse, axis=1)
    m = tl.where(m == float("-inf"), 0.0, m)  # every split empty: all weights 0, output 0
    denom = tl.sum(tl.exp2(lse - m[:, None]), axis=1)
    acc = tl.zeros([BLOCK_G, BLOCK_D], dtype=tl.float32)
    for i in range(SPLITS):
        w = tl.exp2(tl.load(pl + heads * SPLITS + i, mask=gm, other=float("-inf")) - m)
        o = tl.load(po + (heads * SPLITS + i)[:, None] * D + d[None, :], mask=gm[:, None] & dm[None, :], other=0.0)
        acc += w[:, None] * o
    out = tl.where(denom[:, None] > 0, acc / tl.where(denom > 0, denom, 1.0)[:, None], 0.0)
    tl.store(o_ptr + heads[:, None] * D + d[None, :], out.to(DT), mask=gm[:, None] & dm[None, :])


@register_task("flash_decode", "FlashDecode")
def build_flash_decode(builder, layer_id, query, key_cache, value_cache, block_tables, kv_lens, output,
                       sm_scale=None, soft_cap: float = 0.0, num_kv_splits=None):
    import torch

    name = "make_flash_decode"
    check_tensor(name, "query", query, dim=4, dtype=(torch.bfloat16, torch.float16))
    B, one, HQ, D = query.shape
    if one != 1:
        raise ValueError(f"{name}: query must have shape [B, 1, Hq, D] (one new token per sequence), got "
                         f"{list(query.shape)}")
    check_tensor(name, "key_cache", key_cache, dim=4, dtype=query.dtype)
    NB, PAGE, HKV, DK = key_cache.shape
    check_tensor(name, "value_cache", value_cache, dtype=query.dtype, shape=list(key_cache.shape))
    if DK != D:
        raise ValueError(f"{name}: key_cache has head dim {DK}, query has {D}")
    G = check_gqa(name, "query", HQ, "key_cache", HKV)
    check_head_dim(name, "query", D)
    if B < 1 or NB < 1 or PAGE < 1:
        raise ValueError(f"{name}: empty query {list(query.shape)} or key_cache {list(key_cache.shape)}")
    MAXB = check_paged_tables(name, block_tables, kv_lens, B)
    check_tensor(name, "output", output, dtype=query.dtype, shape=list(query.shape))
    scale = check_scale(name, sm_scale, D)
    cap = check_soft_cap(name, soft_cap)
    BG, BD = triton.next_power_of_2(G), max(16, triton.next_power_of_2(D))
    bn = pick_block_n(BD)
    split_positions = builder.kv_split_positions
    if num_kv_splits is None:
        splits = pick_num_kv_splits(B, HKV, builder.num_workers, MAXB * PAGE, bn, split_positions)
    elif isinstance(num_kv_splits, bool) or not isinstance(num_kv_splits, int) or num_kv_splits < 1:
        raise ValueError(f"{name}: num_kv_splits must be None or an int >= 1, got {num_kv_splits!r}")
    else:
        splits = num_kv_splits
    dev = builder.device
    part_o = torch.empty((B, HQ, splits, D), dtype=torch.float32, device=dev)
    part_l = torch.empty((B, HQ, splits), dtype=torch.float32, device=dev)
    es = query.element_size()
    per_split = triton.cdiv(MAXB * PAGE, splits)
    split_tiles, comb_tiles = [], []
    for b in range(B):
        for h in range(HKV):
            heads = slice(h * G, (h + 1) * G)
            for i in range(splits):
                split_tiles.append(Tile(
                    reads=(region(query, b, 0, heads)
                           + cache_space(key_cache, b * HKV + h, "all")
                           + cache_space(value_cache, b * HKV + h, "all")
                           + region(block_tables, b)
                           + region(kv_lens, slice(b, b + 1))),
                    writes=region(part_o, b, heads, i) + region(part_l, b, heads, i),
                    cost=2 * per_split * D * es + G * D * (es + 4)))
            comb_tiles.append(Tile(reads=region(part_o, b, heads) + region(part_l, b, heads),
                                   writes=region(output, b, 0, heads), cost=G * D * (splits * 4 + es)))
    common = dict(HQ=HQ, HKV=HKV, D=D, BLOCK_D=BD, G=G, BLOCK_G=BG)
    split_consts = dict(common, BLOCK_G=max(16, BG), PAGE=PAGE, NUM_BLOCKS=NB, MAX_BLOCKS=MAXB, SPLITS=splits,
                        BLOCK_N=bn, SM_SCALE=scale, SOFT_CAP=cap, DT=query.dtype)
    if split_positions > 0:  # a short sequence's splits: one block at least, the front ones empty (no load)
        split_consts["MIN_CHUNK"] = bn
    split_op = Op("FlashDecode", "flash_decode", layer_id, flash_decode_split_task,
                  [query, key_cache, value_cache, block_tables, kv_lens, part_o, part_l], split_consts, split_tiles,
                  name=f"L{layer_id}.flash_decode.split")
    comb_op = Op("FlashDecode", "flash_decode", layer_id, flash_decode_combine_task, [part_o, part_l, output],
                 dict(common, SPLITS=splits, BLOCK_S=triton.next_power_of_2(splits), DT=output.dtype), comb_tiles,
                 name=f"L{layer_id}.flash_decode.combine")
    return [split_op, comb_op]


# ---------------------------------------------------------------------------------------------------- fusion
_ROPE_CONSTS = ("MAX_POS", "COS_PER_SEQ", "Q_EPS", "K_EPS", "SKIP_Q", "SKIP_K", "WDT")


def can_fuse_rope(rope: Op, split: Op) -> bool:
    """``rope`` is a decode step's ``qk_norm_rope_update_kvcache`` (one token per sequence) and ``split`` a
    flash-decode split reading its ``q_norm_rope`` from the caches, tables and lengths it wrote with."""
    if rope.op_type != "qk_norm_rope_update_kvcache" or split.kernel is not flash_decode_split_task:
        return False
    if rope.constexprs["S"] != 1:
        return False
    rt, st = rope.tensors, split.tensors
    same = all(same_tensor(st[i], rt[j]) for i, j in ((0, 9), (1, 1), (2, 2), (3, 3), (4, 4)))
    rc, sc = rope.constexprs, split.constexprs
    return same and all(rc[k] == sc[k] for k in ("HQ", "HKV", "D", "G", "PAGE", "NUM_BLOCKS", "MAX_BLOCKS", "DT"))


def fuse_rope_prologue(rope: Op, split: Op) -> Op:
    """One op doing both (see :func:`flash_decode_rope_split_task`): split ``i`` of ``(b, h)`` reads what rope
    task ``(b, h)`` read; split 0 writes its ``q_norm_rope`` rows and the last split its cache rows (the step's new
    positions), which only that split reads; the other splits read only the older positions (no task of the
    step writes them), so the splits of ``(b, h)`` do not wait for each other."""
    qkv, kc, vc, bt, kvl, qw, kw, cos, sin, qo = rope.tensors
    part_o, part_l = split.tensors[5], split.tensors[6]
    c = split.constexprs
    hkv, g, splits = c["HKV"], c["G"], c["SPLITS"]
    tiles = []
    for i, st in enumerate(split.tiles):
        sp, bh = i % splits, i // splits
        h, b = bh % hkv, bh // hkv
        rt = rope.tiles[bh]
        last = sp == splits - 1
        part = "all" if last else "old"
        writes = list(st.writes)
        if sp == 0:
            writes += region(qo, b, 0, slice(h * g, (h + 1) * g))
        if last:
            writes += cache_space(kc, bh, "new") + cache_space(vc, bh, "new")
        reads = list(rt.reads) + cache_space(kc, bh, part) + cache_space(vc, bh, part)
        tiles.append(Tile(reads=reads, writes=writes, cost=st.cost + rt.cost, waits=st.waits))
    consts = dict(c, **{k: rope.constexprs[k] for k in _ROPE_CONSTS})
    return Op(split.family, split.op_type, split.layer_id, flash_decode_rope_split_task,
              [qkv, kc, vc, bt, kvl, part_o, part_l, qw, kw, cos, sin, qo], consts, tiles,
              name=f"{rope.name}+{split.name}")


def split_loads_ahead(ops):
    """``ops`` with every fused rope + split op (:func:`fuse_rope_prologue`) running
    :func:`flash_decode_rope_split_ahead_task`, which waits for its qkv tiles itself after issuing the loads that
    need no task of the step (``ModelBuilder(split_loads_ahead=True)``). Same tiles, regions and dependencies;
    returns a new list (changed ops are new objects)."""
    import dataclasses

    return [dataclasses.replace(op, kernel=flash_decode_rope_split_ahead_task, waits_inside=True)
            if op.kernel is flash_decode_rope_split_task else op for op in ops]


@register_fusion(order=30)
def rope_prologue_rule(prev: Op, op: Op):
    """Fusion 3 of ``core/fusion.py``: a decode step's rope op then the flash-decode split reading it -> one op."""
    if can_fuse_rope(prev, op):
        return [fuse_rope_prologue(prev, op)]
    return None
