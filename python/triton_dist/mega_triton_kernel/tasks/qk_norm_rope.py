"""Normalization family, the attention prologue of a decode / prefill step: ``qk_norm_rope_update_kvcache``.

Per token ``(b, s)`` of ``qkv [B, S, Hq + 2 Hkv, D]`` (q heads, then k heads, then v heads): RMS-norm every q and
k head over ``D`` (fp32 math, weights ``q_rms_weight / k_rms_weight [D]``; skipped with ``skip_q_norm /
skip_k_norm``), rotate q and k (NeoX / rotate-half RoPE as in Llama / Qwen3: ``x * cos + rotate_half(x) * sin`` with
``rotate_half(x) = cat(-x[D/2:], x[:D/2])``) at position ``pos = kv_lens[b] - S + s`` (``kv_lens`` already counts
the ``S`` new tokens), write q to ``q_norm_rope [B, S, Hq, D]`` and k (normed, rotated) and v (unchanged) into the
paged caches ``[num_blocks, page_size, Hkv, D]`` at page ``block_tables[b, pos // page_size]``, slot
``pos % page_size``.

``cos_cache / sin_cache`` (fp32 ``[1 or B, max_pos, D]``, all ``D`` entries of a position) are authoritative:
``rope_theta`` is only accepted (and checked > 0) for the reference's signature; nothing is recomputed from it.

Tiling: one task per ``(b, s, kv head h)``, handling k / v head ``h`` and its ``Hq / Hkv`` query heads together. The
cache pages a task writes are chosen on the device (``block_tables``), so its cache writes are described as
``cache_space(cache, b * Hkv + h, "new")``, in the space the decode tasks read in: per sequence and kv head (so
the tasks of different sequences do not wait for each other; a step's new positions of two sequences never share a
page; pages shared by sequences, a common prefix, are only read within a step), the step's new positions apart
from the older ones.

Positions the device cannot place (``pos`` outside ``[0, max_pos)`` or past ``max_blocks * page_size``, or a page
index outside ``[0, num_blocks)``: ``kv_lens`` / ``block_tables`` inconsistent with the tables) write nothing to
the caches, and write zeros for q (out-of-range tables give cos = sin = 0), never touching memory outside them.
"""
from __future__ import annotations

import triton
import triton.language as tl

import triton_dist
from ..core.checks import check_tensor
from ..core.device import arg
from ..core.registry import register_task
from ..core.task import Op, Tile, logical_region, region
from ._attn_checks import check_bool, check_eps, check_gqa, check_head_dim, check_paged_tables

__all__ = ["qk_norm_rope_task", "norm_rope_group", "rope_row", "norm_rope_store", "cache_space"]


def cache_space(cache, unit: int, part: str):
    """The logical region of a paged cache in the space every attention task describes it in: per (sequence ``b``,
    kv head ``h``) ``unit = b * Hkv + h``, two parts, ``"old"`` (the positions before this step's new tokens, which
    no task of the step writes) and ``"new"`` (this step's new positions, written by ``qk_norm_rope``); ``"all"``:
    both. A reader of every position depends on the writer of the new ones; a reader of the old ones only (a
    flash-decode split that does not hold the newest position, when the rope is fused into it) on nothing."""
    if part not in ("old", "new", "all"):
        raise ValueError(f"cache_space: part must be 'old', 'new' or 'all', got {part!r}")
    lo = 2 * unit + (1 if part == "new" else 0)
    hi = 2 * unit + (1 if part == "old" else 2)
    return logical_region(cache, "seq_kv_head", lo, hi)


@triton_dist.jit
def _norm_rope(x_ptr, w_ptr, offs, d, dr, mask, sign, c, sn, D: tl.constexpr, EPS: tl.constexpr,
               SKIP: tl.constexpr):
    """``rope(rms_norm(x))`` of the heads at ``x_ptr + offs`` (``offs`` rows x ``d`` columns), fp32; the rotated
    half is read directly at the partner columns ``dr`` (the norm is per element, so no shuffle is needed)."""
    x = tl.load(x_ptr + offs + d, mask=mask, other=0.0).to(tl.float32)
    xr = tl.load(x_ptr + offs + dr, mask=mask, other=0.0).to(tl.float32)
    if not SKIP:
        rstd = 1.0 / tl.sqrt(tl.sum(x * x, axis=-1, keep_dims=True) / D + EPS)
        w = tl.load(w_ptr + d, mask=mask, other=0.0).to(tl.float32)
        wr = tl.load(w_ptr + dr, mask=mask, other=0.0).to(tl.float32)
        x = x * rstd * w
        xr = xr * rstd * wr
    return x * c + sign * xr * sn


@triton_dist.jit
def norm_rope_group(qkv, kc, vc, bt, kvl, qw, kw, cos, sin, qo, b, s, h, store_q, store_kv, S: tl.constexpr,
                    HQ: tl.constexpr, HKV: tl.constexpr, D: tl.constexpr, BLOCK_D: tl.constexpr, G: tl.constexpr,
                    BLOCK_G: tl.constexpr, PAGE: tl.constexpr, NUM_BLOCKS: tl.constexpr, MAX_BLOCKS: tl.constexpr,
                    MAX_POS: tl.constexpr, COS_PER_SEQ: tl.constexpr, Q_EPS: tl.constexpr, K_EPS: tl.constexpr,
                    SKIP_Q: tl.constexpr, SKIP_K: tl.constexpr, DT: tl.constexpr):
    """The work of one task of this op, token ``(b, s)``, kv head ``h``: returns the group's query heads normed and
    rotated, rounded to ``DT`` (``[BLOCK_G, BLOCK_D]``, rows past ``G`` and columns past ``D`` zero); stores them to
    ``q_norm_rope`` where ``store_q != 0`` and k (normed, rotated) / v to the cache where ``store_kv != 0`` (ints,
    runtime or constant, so that a fused caller, the rope prologue of ``flash_decode``'s split, can leave each
    store to one of its tasks). :func:`rope_row` then :func:`norm_rope_store`, which a caller may also call apart
    (the first needs nothing another task of the step writes)."""
    pos, pos_ok, posc, c, sn = rope_row(kvl, cos, sin, b, s, S, D, BLOCK_D, MAX_POS, COS_PER_SEQ)
    q, k, v, stored = norm_rope_store(qkv, kc, vc, bt, qw, kw, qo, b, s, h, store_q, store_kv, pos_ok, posc, c, sn,
                                      S, HQ, HKV, D, BLOCK_D, G, BLOCK_G, PAGE, NUM_BLOCKS, MAX_BLOCKS, Q_EPS, K_EPS,
                                      SKIP_Q, SKIP_K, DT)
    return q


@triton_dist.jit
def rope_row(kvl, cos, sin, b, s, S: tl.constexpr, D: tl.constexpr, BLOCK_D: tl.constexpr, MAX_POS: tl.constexpr,
             COS_PER_SEQ: tl.constexpr):
    """Token ``(b, s)``'s position and rope row: ``(pos, pos_ok, posc, cos, sin)``, ``pos = kv_lens[b] - S + s``,
    ``pos_ok`` whether it is in ``[0, MAX_POS)``, ``posc`` it or 0, and the fp32 ``[BLOCK_D]`` cos / sin rows (0
    past ``D`` and where ``pos`` is out of range). Reads only what the host set before the step."""
    pos = tl.load(kvl + b) - S + s
    pos_ok = (pos >= 0) & (pos < MAX_POS)
    posc = tl.where(pos_ok, pos, 0)
    d = tl.arange(0, BLOCK_D)
    # masks are built from vectors: Triton 3.9's interpreter rejects a scalar bool broadcast into a mask
    pv = d * 0 + pos
    dm = d < D
    trow = (b * COS_PER_SEQ * MAX_POS + posc).to(tl.int64) * D
    tm = dm & (pv >= 0) & (pv < MAX_POS)
    c = tl.load(cos + trow + d, mask=tm, other=0.0)
    sn = tl.load(sin + trow + d, mask=tm, other=0.0)
    return pos, pos_ok, posc, c, sn


@triton_dist.jit
def norm_rope_store(qkv, kc, vc, bt, qw, kw, qo, b, s, h, store_q, store_kv, pos_ok, posc, c, sn, S: tl.constexpr,
                    HQ: tl.constexpr, HKV: tl.constexpr, D: tl.constexpr, BLOCK_D: tl.constexpr, G: tl.constexpr,
                    BLOCK_G: tl.constexpr, PAGE: tl.constexpr, NUM_BLOCKS: tl.constexpr, MAX_BLOCKS: tl.constexpr,
                    Q_EPS: tl.constexpr, K_EPS: tl.constexpr, SKIP_Q: tl.constexpr, SKIP_K: tl.constexpr,
                    DT: tl.constexpr):
    """Given :func:`rope_row`'s ``pos_ok, posc, c, sn``: the group's queries (returned, ``DT``; stored where
    ``store_q != 0``) and k / v of kv head ``h`` (stored to the cache where ``store_kv != 0`` and the position has a
    page). Returns ``(q, k, v, stored)``: ``k`` / ``v`` the ``[BLOCK_D]`` rows in ``DT``, exactly the bits stored,
    ``stored`` whether they were."""
    bs = b * S + s
    HALF: tl.constexpr = D // 2
    d = tl.arange(0, BLOCK_D)
    dm = d < D
    dr = tl.where(d < HALF, d + HALF, d - HALF)
    sign = tl.where(d < HALF, -1.0, 1.0)
    row = bs.to(tl.int64) * ((HQ + 2 * HKV) * D)
    # the group's query heads, together
    g = tl.arange(0, BLOCK_G)
    m2 = (g < G)[:, None] & dm[None, :]
    q = _norm_rope(qkv + row, qw, (h * G + g)[:, None] * D, d[None, :], dr[None, :], m2, sign[None, :],
                   c[None, :], sn[None, :], D, Q_EPS, SKIP_Q).to(DT)
    qm = m2 & ((d * 0 + store_q) != 0)[None, :]
    tl.store(qo + bs.to(tl.int64) * (HQ * D) + (h * G + g)[:, None] * D + d[None, :], q, mask=qm)
    # k (normed, rotated) and v (as is) into the page of this position
    k = _norm_rope(qkv + row, kw, (HQ + h) * D, d, dr, dm, sign, c, sn, D, K_EPS, SKIP_K)
    v = tl.load(qkv + row + (HQ + HKV + h) * D + d, mask=dm, other=0.0)
    bi = posc // PAGE
    ok = pos_ok & (bi < MAX_BLOCKS) & (store_kv != 0)
    page = tl.load(bt + b * MAX_BLOCKS + tl.where(ok, bi, 0), mask=ok, other=-1)
    ok = ok & (page >= 0) & (page < NUM_BLOCKS)
    coff = ((tl.where(ok, page, 0).to(tl.int64) * PAGE + posc % PAGE) * HKV + h) * D
    cm = dm & ((d * 0 + ok.to(tl.int32)) != 0)
    tl.store(kc + coff + d, k.to(DT), mask=cm)
    tl.store(vc + coff + d, v, mask=cm)
    return q, k.to(DT), v, ok


@triton_dist.jit
def qk_norm_rope_task(args, tile, step, S: tl.constexpr, HQ: tl.constexpr, HKV: tl.constexpr, D: tl.constexpr,
                      BLOCK_D: tl.constexpr, G: tl.constexpr, BLOCK_G: tl.constexpr, PAGE: tl.constexpr,
                      NUM_BLOCKS: tl.constexpr, MAX_BLOCKS: tl.constexpr, MAX_POS: tl.constexpr,
                      COS_PER_SEQ: tl.constexpr, Q_EPS: tl.constexpr, K_EPS: tl.constexpr, SKIP_Q: tl.constexpr,
                      SKIP_K: tl.constexpr, DT: tl.constexpr, WDT: tl.constexpr):
    """Token ``tile // HKV`` (``b * S + s``), kv head ``tile % HKV``. ``args``: qkv, key_cache, value_cache,
    block_tables, kv_lens, q_rms_weight, k_rms_weight, cos_cache, sin_cache, q_norm_rope."""
    h = tile % HKV
    bs = tile // HKV
    norm_rope_group(arg(args, 0, DT), arg(args, 1, DT), arg(args, 2, DT), arg(args, 3, tl.int32),
                    arg(args, 4, tl.int32), arg(args, 5, WDT), arg(args, 6, WDT), arg(args, 7, tl.float32),
                    arg(args, 8, tl.float32), arg(args, 9, DT), bs // S, bs % S, h, 1, 1, S, HQ, HKV, D,
                    BLOCK_D, G, BLOCK_G, PAGE, NUM_BLOCKS, MAX_BLOCKS, MAX_POS, COS_PER_SEQ, Q_EPS, K_EPS, SKIP_Q,
                    SKIP_K, DT)


@register_task("qk_norm_rope_update_kvcache", "Normalization")
def build_qk_norm_rope_update_kvcache(builder, layer_id, qkv, key_cache, value_cache, block_tables, kv_lens,
                                      q_rms_weight, k_rms_weight, cos_cache, sin_cache, q_norm_rope,
                                      q_rms_eps: float = 1e-6, k_rms_eps: float = 1e-6, rope_theta=1000000,
                                      skip_q_norm: bool = False, skip_k_norm: bool = False) -> Op:
    import torch

    name = "make_qk_norm_rope_update_kvcache"
    dts = (torch.bfloat16, torch.float16)
    check_tensor(name, "qkv", qkv, dim=4, dtype=dts)
    B, S, H, D = qkv.shape
    check_tensor(name, "key_cache", key_cache, dim=4, dtype=qkv.dtype)
    NB, PAGE, HKV, DK = key_cache.shape
    check_tensor(name, "value_cache", value_cache, dtype=qkv.dtype, shape=list(key_cache.shape))
    if DK != D:
        raise ValueError(f"{name}: key_cache has head dim {DK}, qkv has {D}")
    HQ = H - 2 * HKV
    if HQ < 1:
        raise ValueError(f"{name}: qkv has {H} heads, fewer than the 2 * {HKV} k/v heads of key_cache plus one q head")
    G = check_gqa(name, "qkv", HQ, "key_cache", HKV)
    check_head_dim(name, "qkv", D, even=True)
    if B < 1 or S < 1 or NB < 1 or PAGE < 1:
        raise ValueError(f"{name}: empty qkv {list(qkv.shape)} or key_cache {list(key_cache.shape)}")
    MAXB = check_paged_tables(name, block_tables, kv_lens, B)
    check_tensor(name, "q_rms_weight", q_rms_weight, dim=1, dtype=dts, shape=[D])
    check_tensor(name, "k_rms_weight", k_rms_weight, dim=1, dtype=q_rms_weight.dtype, shape=[D])
    check_tensor(name, "cos_cache", cos_cache, dim=3, dtype=torch.float32, shape=[None, None, D])
    if cos_cache.shape[0] not in (1, B) or cos_cache.shape[1] < 1:
        raise ValueError(f"{name}: cos_cache must have shape [1 or {B}, max_pos >= 1, {D}], got "
                         f"{list(cos_cache.shape)}")
    check_tensor(name, "sin_cache", sin_cache, dtype=torch.float32, shape=list(cos_cache.shape))
    check_tensor(name, "q_norm_rope", q_norm_rope, dtype=qkv.dtype, shape=[B, S, HQ, D])
    q_eps = check_eps(name, "q_rms_eps", q_rms_eps)
    k_eps = check_eps(name, "k_rms_eps", k_rms_eps)
    if isinstance(rope_theta, bool) or not isinstance(rope_theta, (int, float)) or not rope_theta > 0:
        raise ValueError(f"{name}: rope_theta must be a number > 0, got {rope_theta!r} (the cos/sin tables are "
                         f"what is applied)")
    check_bool(name, "skip_q_norm", skip_q_norm)
    check_bool(name, "skip_k_norm", skip_k_norm)
    per_seq = int(cos_cache.shape[0] == B and B > 1)
    es = qkv.element_size()
    tiles = []
    for b in range(B):
        cb = b if per_seq else 0
        for s in range(S):
            for h in range(HKV):
                reads = (region(qkv, b, s, slice(h * G, (h + 1) * G)) + region(qkv, b, s, HQ + h)
                         + region(qkv, b, s, HQ + HKV + h) + region(block_tables, b) + region(kv_lens, slice(b, b + 1))
                         + region(q_rms_weight) + region(k_rms_weight) + region(cos_cache, cb)
                         + region(sin_cache, cb))
                writes = (region(q_norm_rope, b, s, slice(h * G, (h + 1) * G))
                          + cache_space(key_cache, b * HKV + h, "new")
                          + cache_space(value_cache, b * HKV + h, "new"))
                tiles.append(Tile(reads=reads, writes=writes, cost=(2 * G + 4) * D * es + 16 * D))
    return Op("Normalization", "qk_norm_rope_update_kvcache", layer_id, qk_norm_rope_task,
              [qkv, key_cache, value_cache, block_tables, kv_lens, q_rms_weight, k_rms_weight, cos_cache, sin_cache,
               q_norm_rope],
              dict(S=S, HQ=HQ, HKV=HKV, D=D, BLOCK_D=triton.next_power_of_2(D), G=G,
                   BLOCK_G=triton.next_power_of_2(G), PAGE=PAGE, NUM_BLOCKS=NB, MAX_BLOCKS=MAXB,
                   MAX_POS=cos_cache.shape[1], COS_PER_SEQ=per_seq, Q_EPS=q_eps, K_EPS=k_eps,
                   SKIP_Q=bool(skip_q_norm), SKIP_K=bool(skip_k_norm), DT=qkv.dtype, WDT=q_rms_weight.dtype), tiles)
