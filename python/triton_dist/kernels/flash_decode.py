"""Device code of split-KV decode attention over a paged KV cache (flash-decoding), and of the merge of attention
partials by their log-sum-exp. The torch-facing op, its checks and its launch choices are
:mod:`triton_dist.ops.attention`.

Layouts (element strides are arguments; the head dimension has unit stride everywhere):

* ``q [B, Hq, D]``: one query token per request;
* ``k_cache``, ``v_cache`` ``[num_pages, PAGE, Hkv, D]``: token ``t`` of request ``b`` lives at page
  ``block_table[b, t // PAGE]``, slot ``t % PAGE``;
* ``block_table [B, max_pages]`` int32 (unit stride along the pages), ``seq_lens [B]`` int32: request ``b`` attends to
  its tokens ``0 .. seq_lens[b] - 1``;
* GQA: query head ``h`` reads kv head ``h // G`` (``G = Hq / Hkv``).

:func:`flash_decode_split_kernel`, one program per ``(request b, kv head, split)``: the request's tokens are cut into
``BLOCK_N``-token tiles, the tiles into ``num_splits`` contiguous ranges of ``cdiv(tiles, num_splits)`` tiles (only
the device knows the lengths: the grid depends on shapes alone, a program whose range lies past the request's end
does no work). A program loads the ``G`` query heads of its kv head once as the rows of a ``[BLOCK_G, D]`` operand
(``BLOCK_G >= 16``, the MMA minimum; padding rows are zeros and never stored), then per tile gathers ``BLOCK_N`` rows
of K and V through the block table (one page id per tile when ``PAGE >= BLOCK_N``, one per token otherwise), computes
the ``[BLOCK_G, BLOCK_N]`` scores with one ``tl.dot`` and runs an online softmax in fp32 (base 2: the scores are
pre-multiplied by ``scale * log2(e)``), accumulating ``p @ V`` with a second ``tl.dot``. It writes the normalised
partial output and its natural-log LSE to a workspace ``[B, Hq, num_splits, D]`` / ``[B, Hq, num_splits]`` fp32, or
(``DIRECT``, one split) the final ``out`` and ``lse`` themselves. On GPUs the token loop is software-pipelined by
Triton: K and V are copied asynchronously (16-byte pieces) into shared memory, the page ids a tile ahead of them
(``num_stages >= 3``). How far ahead depends on ``num_stages`` (Triton 3.6, sm_90, read from the TTGIR): at 3 or 4
stages K and V get ONE buffer each, so the copy of tile ``t + 1`` is issued after tile ``t``'s two dots and waited
for at the top of the next iteration (a program has at most one tile in flight, none while it computes: the other
programs resident on the SM hide the latency); 5 stages give two buffers (tile ``t + 1`` in flight while ``t`` is
computed), 7 stages three. With 2 stages the page ids are a plain load after the dots.

Registers (ptxas, sm_90a; docs/attention.md, "Occupancy and the split rule"): the K / V addresses dominate. A
thread issues its share of a tile's 16-byte copies (16 rows of K and 16 of V at 128-token tiles and 4 warps), one
row offset each; as int64 these offsets (``page * stride_kp + slot * stride_kt``) took the split kernel to 189
registers at 4 warps (2 programs per SM), as int32 (``KV_I32``, chosen by the host when every element offset of
both caches is below 2**31) 126 (3 per SM, then bound by shared memory). Results are the same either way (addresses
only).

:func:`merge_partials_kernel`, one program per ``(b, query head)``: ``out = sum_s exp(lse_s - m) o_s / sum_s exp(lse_s
- m)`` and ``lse = m + log(sum_s exp(lse_s - m))`` (``m`` the largest partial LSE). A partial with LSE ``-inf``
(nothing attended) weighs 0 and its output is not read; if every partial is empty the row gets ``out = 0``, ``lse =
-inf``. The same kernel merges the decode workspace (``FROM_SPLITS``: it derives how many splits of each request hold
tokens from ``seq_lens``, so empty splits need not write anything) and any ``[S, B, H, D]`` partials (sequence-
parallel attention across ranks).

Fused merge (``FUSED_MERGE=True``, ``num_splits > 1``; opt-in, ``DecodeConfig.fused_merge``): no second launch.
After storing its partial, a split program that holds tokens (split ``< max(used, 1)``: with no token at all, split
0 stands for the request) increments the ``(b, kv head)``'s arrival counter ``counters[b * Hkv + kv head]`` (int32)
and the program that arrives last merges the ``G`` rows of that kv head itself (:func:`merge_lse_group`: the merge
kernel's math, all ``G`` rows at once, its loads ``.cg``: from L2) and sets the counter back to 0 for the next
launch. Memory
ordering: every thread's partial stores, then a CTA barrier, then one ``atom.add.acq_rel.gpu`` (release: the
program's partial; acquire: every earlier arrival's, each of which acquired the ones before it), then a CTA barrier
before any thread reads the partials. Nothing waits, so no program depends on another being resident. The counters
start at 0 (zeroed when allocated) and every launch leaves them 0.

Profiling (``PROFILE=True``; off by default, and then nothing is emitted: no clock read, load or store): both
kernels record into one profiler buffer (:mod:`triton_dist.language.profiler`; the layout:
:mod:`triton_dist.profiler_layout`) as two *groups* of ``prof_blocks`` tracks (``prof_blocks`` at least either
grid): group 0 holds the split kernel's programs, group 1 the merge kernel's, so program ``p`` of a launch is track
``2 * p + group``. Task types (:data:`TASKS`, index = task type): a split program records ``prologue`` (its start to
its query rows loaded: lengths, split bounds, the Q load), ``tokens`` (the token loop: K / V tiles, both dots, the
online softmax; empty for a split past its request's end), ``store`` (normalising and storing the partial, or
``out`` / ``lse`` with one split); a merge program records ``merge`` (its whole row); with ``FUSED_MERGE`` a split
program that holds tokens also records ``arrive`` (the barrier and the counter's increment) and the last one of its
``(b, kv head)`` ``fused_merge`` (the merge of its ``G`` rows). Each stamp follows a CTA-scope
fence (:func:`~triton_dist.language.profiler.timestamp`), so it is not taken before the program's earlier memory
operations were performed.

Memory safety whatever the tables hold: lengths are clamped to ``[0, max_pages * PAGE]`` and page ids to ``[0,
num_pages)``, so a corrupt table gives wrong results, never an access outside the tensors.
"""
from __future__ import annotations

import triton.language as tl

import triton_dist
from triton_dist.language.profiler import Profiler

#: profiler task names of the decode kernels (index = task type; module docstring)
TASKS = ("prologue", "tokens", "store", "merge", "arrive", "fused_merge")
TASK_PROLOGUE, TASK_TOKENS, TASK_STORE, TASK_MERGE = tl.constexpr(0), tl.constexpr(1), tl.constexpr(2), \
    tl.constexpr(3)
TASK_ARRIVE, TASK_FUSED_MERGE = tl.constexpr(4), tl.constexpr(5)
#: profiler groups: the split kernel's programs are group 0, the merge kernel's group 1
PROFILE_GROUPS = 2
_GROUPS = tl.constexpr(PROFILE_GROUPS)
#: record slots per track: a split program records at most 10 (prologue, tokens, store, and with the fused merge
#: arrive and fused_merge: a start and an end each); two spare, so that a track whose slots all filled up (what the
#: profiler's parser reports as records dropped) means records really were dropped
RECORDS_PER_TRACK = 12

LOG2E = tl.constexpr(1.4426950408889634)
LN2 = tl.constexpr(0.6931471805599453)


@triton_dist.jit
def split_tiles(seq_len, num_splits, BLOCK_N: tl.constexpr):
    """``(tiles, tiles_per_split, used_splits)`` of a request of ``seq_len`` tokens cut into ``BLOCK_N``-token tiles
    shared by ``num_splits`` splits (split ``s`` owns tiles ``[s * tiles_per_split, min((s + 1) * tiles_per_split,
    tiles))``; splits ``>= used_splits`` own none)."""
    tiles = tl.cdiv(seq_len, BLOCK_N)
    per_split = tl.cdiv(tiles, num_splits)
    used = tl.cdiv(tiles, tl.maximum(per_split, 1))
    return tiles, per_split, used


@triton_dist.jit
def clamped_len(seq_lens_ptr, b, max_len):
    """``seq_lens[b]`` clamped to ``[0, max_len]`` (the tokens the block table can address)."""
    return tl.minimum(tl.maximum(tl.load(seq_lens_ptr + b), 0), max_len)


@triton_dist.jit
def kv_tile(bt_row, n0, seq_len, num_pages, PAGE: tl.constexpr, BLOCK_N: tl.constexpr, KV_I32: tl.constexpr = False):
    """Where tokens ``n0 .. n0 + BLOCK_N - 1`` of one request live: ``(pages, slots, valid)``, their page ids (int64,
    or int32 with ``KV_I32``; clamped to ``[0, num_pages)``; a scalar when ``PAGE >= BLOCK_N``), slots in the page
    (``[BLOCK_N]``) and mask (``< seq_len``). ``n0`` is a multiple of ``BLOCK_N``: with ``PAGE >= BLOCK_N`` (both
    powers of two) the tile lies in one page, whose id is loaded once; otherwise each token's page id is loaded (one
    vector load). ``KV_I32``: the caller knows that every element offset of the caches fits in int32, so the row
    offsets computed from the page ids may stay 32-bit."""
    offs_n = n0 + tl.arange(0, BLOCK_N)
    valid = offs_n < seq_len
    if PAGE >= BLOCK_N:
        pages = tl.load(bt_row + n0 // PAGE)
        slots = (n0 % PAGE) + tl.arange(0, BLOCK_N)
    else:
        pages = tl.load(bt_row + offs_n // PAGE, mask=valid, other=0)
        slots = offs_n % PAGE
    pages = tl.minimum(tl.maximum(pages, 0), num_pages - 1)
    if not KV_I32:
        pages = pages.to(tl.int64)
    return pages, slots, valid


@triton_dist.jit
def flash_decode_split_kernel(q_ptr, k_ptr, v_ptr, block_table_ptr, seq_lens_ptr, part_out_ptr, part_lse_ptr, out_ptr,
                              lse_ptr, qk_scale, num_kv_heads, num_splits, max_pages, num_pages, stride_qb, stride_qh,
                              stride_kp, stride_kt, stride_kh, stride_vp, stride_vt, stride_vh, stride_btb, stride_ob,
                              stride_oh, G: tl.constexpr, BLOCK_G: tl.constexpr, D: tl.constexpr,
                              PAGE: tl.constexpr, BLOCK_N: tl.constexpr, DIRECT: tl.constexpr, counters_ptr=None,
                              FUSED_MERGE: tl.constexpr = False, BLOCK_GM: tl.constexpr = 4,
                              MERGE_BLOCK_SM: tl.constexpr = 64, MERGE_BLOCK_S: tl.constexpr = 8, prof_ptr=None,
                              prof_blocks=None, PROFILE: tl.constexpr = False, KV_I32: tl.constexpr = False):
    """Split ``pid % num_splits`` of ``(b, kv head) = divmod(pid // num_splits, num_kv_heads)`` (module docstring).
    ``qk_scale`` is ``scale * log2(e)``. Writes, for the ``G`` query heads of the kv head, the normalised partial
    output and its natural-log LSE: to ``part_out [B, Hq, num_splits, D]`` / ``part_lse [B, Hq, num_splits]`` (fp32,
    contiguous; only splits that hold tokens write), or with ``DIRECT`` (``num_splits == 1``) to ``out [B, Hq, D]``
    (its dtype; strides ``stride_ob``, ``stride_oh``) and ``lse [B, Hq]`` (fp32, contiguous), a request without tokens
    getting 0 and ``-inf``. ``FUSED_MERGE`` (not with ``DIRECT``): the last split of each ``(b, kv head)`` to
    finish merges the kv head's rows into ``out`` / ``lse`` (module docstring; ``counters_ptr``: int32 ``[B *
    num_kv_heads]``, 0 before the launch and after it; :func:`merge_lse_group` over ``BLOCK_GM >= G`` rows,
    ``MERGE_BLOCK_SM`` / ``MERGE_BLOCK_S`` splits per step of its two passes). ``PROFILE``: records ``prologue``, ``tokens`` and ``store`` into the profiler buffer
    ``prof_ptr`` as group 0 of ``prof_blocks`` tracks (module docstring); ``prof_ptr`` / ``prof_blocks`` are unused
    (None) otherwise. ``KV_I32`` (the caller's promise: every element offset of ``k`` and ``v`` is below 2**31): the
    K / V row offsets are computed in int32 instead of int64 (module docstring, "Registers")."""
    profiler = Profiler.create(prof_ptr, group_id=0, num_groups=_GROUPS, num_blocks=prof_blocks,
                               ENABLE_PROFILING=PROFILE)
    profiler = profiler.record(True, TASK_PROLOGUE)
    pid = tl.program_id(0)
    split = pid % num_splits
    bh = pid // num_splits
    kvh = bh % num_kv_heads
    b = bh // num_kv_heads
    num_heads = num_kv_heads * G

    seq_len = clamped_len(seq_lens_ptr, b, max_pages * PAGE)
    tiles, per_split, used = split_tiles(seq_len, num_splits, BLOCK_N)
    t_begin = split * per_split
    t_end = tl.minimum(t_begin + per_split, tiles)

    offs_g = tl.arange(0, BLOCK_G)
    offs_d = tl.arange(0, D)
    g_ok = offs_g < G
    heads = kvh * G + offs_g
    q = tl.load(q_ptr + b.to(tl.int64) * stride_qb + heads[:, None] * stride_qh + offs_d[None, :],
                mask=g_ok[:, None], other=0.0)
    profiler = profiler.record(False, TASK_PROLOGUE)
    profiler = profiler.record(True, TASK_TOKENS)

    k_head = k_ptr + kvh * stride_kh
    v_head = v_ptr + kvh * stride_vh
    bt_row = block_table_ptr + b.to(tl.int64) * stride_btb
    m_i = tl.full([BLOCK_G], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_G], tl.float32)
    acc = tl.zeros([BLOCK_G, D], tl.float32)
    # every tile of the range holds at least one token, so each row's running max is finite after the first tile
    for t in range(t_begin, t_end):
        n0 = t * BLOCK_N
        pages, slots, valid = kv_tile(bt_row, n0, seq_len, num_pages, PAGE, BLOCK_N, KV_I32)
        k_rows = pages * stride_kp + slots * stride_kt
        v_rows = pages * stride_vp + slots * stride_vt
        k = tl.load(k_head + k_rows[:, None] + offs_d[None, :], mask=valid[:, None], other=0.0)
        v = tl.load(v_head + v_rows[:, None] + offs_d[None, :], mask=valid[:, None], other=0.0)
        s = tl.dot(q, tl.trans(k)) * qk_scale
        s = tl.where(valid[None, :], s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, axis=1))
        alpha = tl.exp2(m_i - m_new)
        p = tl.exp2(s - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, axis=1)
        acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None])
        m_i = m_new
    profiler = profiler.record(False, TASK_TOKENS)
    profiler = profiler.record(True, TASK_STORE)

    seen = l_i > 0
    l_safe = tl.where(seen, l_i, 1.0)
    o = acc / l_safe[:, None]
    lse = tl.where(seen, (m_i + tl.log2(l_safe)) * LN2, float("-inf"))
    if DIRECT:
        o_ptrs = out_ptr + b.to(tl.int64) * stride_ob + heads[:, None] * stride_oh + offs_d[None, :]
        tl.store(o_ptrs, o.to(out_ptr.dtype.element_ty), mask=g_ok[:, None])
        tl.store(lse_ptr + b * num_heads + heads, lse, mask=g_ok)
    else:
        row = (b.to(tl.int64) * num_heads + heads) * num_splits + split
        keep = g_ok & (t_begin < t_end)
        tl.store(part_out_ptr + row[:, None] * D + offs_d[None, :], o, mask=keep[:, None])
        tl.store(part_lse_ptr + row, lse, mask=keep)
    profiler = profiler.record(False, TASK_STORE)
    if FUSED_MERGE and not DIRECT:
        arrivals = tl.maximum(used, 1)  # no token at all: split 0 arrives alone and writes 0 / -inf
        if split < arrivals:
            profiler = profiler.record(True, TASK_ARRIVE)
            counter = counters_ptr + bh
            tl.debug_barrier()  # every thread's part of the partial is stored before the arrival is released
            arrived = tl.atomic_add(counter, 1, sem="acq_rel", scope="gpu")
            profiler = profiler.record(False, TASK_ARRIVE)
            if arrived == arrivals - 1:  # the last split of (b, kv head): every other one's partial is visible
                profiler = profiler.record(True, TASK_FUSED_MERGE)
                tl.atomic_xchg(counter, 0, sem="relaxed", scope="gpu")  # every arrival of this launch is counted
                tl.debug_barrier()  # the acquire (one thread) before any thread reads the other splits' partials
                row0 = (b.to(tl.int64) * num_heads + kvh * G) * num_splits  # the kv head's G rows are contiguous
                o_m, lse_m = merge_lse_group(part_out_ptr + row0 * D, part_lse_ptr + row0, used, num_splits, G,
                                             BLOCK_GM, MERGE_BLOCK_SM, MERGE_BLOCK_S, D)
                offs_gm = tl.arange(0, BLOCK_GM)
                gm_ok = offs_gm < G
                heads_m = kvh * G + offs_gm
                tl.store(out_ptr + b.to(tl.int64) * stride_ob + heads_m[:, None] * stride_oh + offs_d[None, :],
                         o_m.to(out_ptr.dtype.element_ty), mask=gm_ok[:, None])
                tl.store(lse_ptr + b * num_heads + heads_m, lse_m, mask=gm_ok)
                profiler = profiler.record(False, TASK_FUSED_MERGE)


@triton_dist.jit
def merge_lse_row(part_row, lse_row, used, stride_ps, stride_ls, head_dim, BLOCK_S: tl.constexpr,
                  BLOCK_D: tl.constexpr):
    """The LSE merge of one output row (shared by :func:`merge_partials_kernel` and the sequence-parallel decode's
    exchange kernel, :mod:`triton_dist.kernels.attention_sp`): partial ``s < used`` has its output at ``part_row + s
    * stride_ps`` (``head_dim`` contiguous elements of any float dtype) and its natural-log LSE at ``lse_row + s *
    stride_ls`` (fp32). Returns ``(out [BLOCK_D] fp32, lse fp32)``: ``out = sum_s exp(lse_s - m) o_s / sum_s
    exp(lse_s - m)``, ``lse = m + log(sum_s exp(lse_s - m))`` (``m`` the largest LSE); a partial with LSE ``-inf`` weighs
    0 and its output is not read; all empty gives 0 and ``-inf``. Two passes over the LSEs: their maximum, then the
    weighted sum."""
    offs_s = tl.arange(0, BLOCK_S)
    offs_d = tl.arange(0, BLOCK_D)
    d_ok = offs_d < head_dim

    m_vec = tl.full([BLOCK_S], float("-inf"), tl.float32)
    for s0 in range(0, used, BLOCK_S):
        ls = tl.load(lse_row + (s0 + offs_s) * stride_ls, mask=s0 + offs_s < used, other=float("-inf"))
        m_vec = tl.maximum(m_vec, ls)
    m = tl.max(m_vec, axis=0)
    m_ref = tl.where(m == float("-inf"), 0.0, m)  # all empty: every weight exp(-inf) = 0, no inf - inf

    acc = tl.zeros([BLOCK_D], tl.float32)
    w_sum = tl.zeros([BLOCK_S], tl.float32)
    for s0 in range(0, used, BLOCK_S):
        ls = tl.load(lse_row + (s0 + offs_s) * stride_ls, mask=s0 + offs_s < used, other=float("-inf"))
        live = ls > float("-inf")
        w = tl.where(live, tl.exp(ls - m_ref), 0.0)
        o = tl.load(part_row + (s0 + offs_s)[:, None].to(tl.int64) * stride_ps + offs_d[None, :],
                    mask=live[:, None] & d_ok[None, :], other=0.0).to(tl.float32)
        acc += tl.sum(w[:, None] * o, axis=0)
        w_sum += w
    total = tl.sum(w_sum, axis=0)
    seen = total > 0
    out = acc / tl.where(seen, total, 1.0)
    lse = tl.where(seen, m_ref + tl.log(tl.where(seen, total, 1.0)), float("-inf"))
    return out, lse


@triton_dist.jit
def merge_lse_group(part_ptr, lse_ptr, used, num_parts, rows, BLOCK_R: tl.constexpr, BLOCK_SM: tl.constexpr,
                    BLOCK_S: tl.constexpr, D: tl.constexpr):
    """:func:`merge_lse_row`'s merge for ``rows`` rows at once (the fused merge's ``G`` query heads of one kv head):
    row ``r``'s partial ``s < used`` has its output at ``part_ptr + (r * num_parts + s) * D`` (fp32, ``D``
    contiguous) and its LSE at ``lse_ptr + r * num_parts + s`` (fp32, natural log). Returns ``(out [BLOCK_R, D]
    fp32, lse [BLOCK_R] fp32)``, the same math as :func:`merge_lse_row` per row: the largest LSE ``m`` first
    (``BLOCK_SM`` partials a step), then ``out = sum_s exp(lse_s - m) o_s / sum_s exp(lse_s - m)``, ``lse = m +
    log(sum_s exp(lse_s - m))`` (``BLOCK_S`` partials a step), a partial with LSE ``-inf`` weighing 0 (its output,
    loaded with the LSE rather than after it, is replaced by 0 before use, so NaN there cannot leak), all empty
    giving 0 and ``-inf``. The rows are merged together so that a step's loads for every row are in flight at once
    (one L2 round trip per step instead of one per row and step; the loads are ``.cg``: the partials were written
    by other programs of the launch)."""
    offs_r = tl.arange(0, BLOCK_R)
    r_ok = offs_r < rows
    offs_m = tl.arange(0, BLOCK_SM)
    m_vec = tl.full([BLOCK_R, BLOCK_SM], float("-inf"), tl.float32)
    for s0 in range(0, used, BLOCK_SM):
        s_ok = s0 + offs_m < used
        ls = tl.load(lse_ptr + offs_r[:, None] * num_parts + (s0 + offs_m)[None, :],
                     mask=r_ok[:, None] & s_ok[None, :], other=float("-inf"), cache_modifier=".cg")
        m_vec = tl.maximum(m_vec, ls)
    m = tl.max(m_vec, axis=1)
    m_ref = tl.where(m == float("-inf"), 0.0, m)  # all empty: every weight exp(-inf) = 0, no inf - inf

    offs_s = tl.arange(0, BLOCK_S)
    offs_d = tl.arange(0, D)
    acc = tl.zeros([BLOCK_R, D], tl.float32)
    w_sum = tl.zeros([BLOCK_R, BLOCK_S], tl.float32)
    for s0 in range(0, used, BLOCK_S):
        rs_ok = r_ok[:, None] & (s0 + offs_s < used)[None, :]
        idx = offs_r[:, None].to(tl.int64) * num_parts + (s0 + offs_s)[None, :]
        ls = tl.load(lse_ptr + idx, mask=rs_ok, other=float("-inf"), cache_modifier=".cg")
        o = tl.load(part_ptr + idx[:, :, None] * D + offs_d[None, None, :], mask=rs_ok[:, :, None], other=0.0,
                    cache_modifier=".cg")
        live = ls > float("-inf")
        w = tl.where(live, tl.exp(ls - m_ref[:, None]), 0.0)
        o = tl.where(live[:, :, None], o, 0.0)
        acc += tl.sum(w[:, :, None] * o, axis=1)
        w_sum += w
    total = tl.sum(w_sum, axis=1)
    seen = total > 0
    out = acc / tl.where(seen, total, 1.0)[:, None]
    lse = tl.where(seen, m_ref + tl.log(tl.where(seen, total, 1.0)), float("-inf"))
    return out, lse


@triton_dist.jit
def merge_partials_kernel(parts_ptr, lses_ptr, out_ptr, lse_ptr, seq_lens_ptr, num_parts, num_heads, head_dim,
                          max_len, stride_ps, stride_pb, stride_ph, stride_ls, stride_lb, stride_lh, stride_ob,
                          stride_oh, BLOCK_S: tl.constexpr, BLOCK_D: tl.constexpr, FROM_SPLITS: tl.constexpr,
                          SPLIT_BLOCK_N: tl.constexpr, prof_ptr=None, prof_blocks=None,
                          PROFILE: tl.constexpr = False):
    """Row ``(b, h) = divmod(program_id, num_heads)``: merges partial ``s`` (output at ``parts + s * stride_ps + b *
    stride_pb + h * stride_ph``, ``head_dim`` contiguous elements of any float dtype; LSE at ``lses + s * stride_ls +
    b * stride_lb + h * stride_lh``, fp32, natural log) for ``s < num_parts`` into ``out[b, h, :]`` (its dtype) and
    ``lse[b * num_heads + h]`` (fp32). ``FROM_SPLITS``: the partials are :func:`flash_decode_split_kernel`'s splits of
    ``SPLIT_BLOCK_N``-token tiles, and only the splits holding tokens of request ``b`` (``seq_lens[b]`` clamped to
    ``max_len``) are read. The math: :func:`merge_lse_row`. ``PROFILE``: records ``merge`` (the whole program) into
    ``prof_ptr`` as group 1 of ``prof_blocks`` tracks (module docstring)."""
    profiler = Profiler.create(prof_ptr, group_id=1, num_groups=_GROUPS, num_blocks=prof_blocks,
                               ENABLE_PROFILING=PROFILE)
    profiler = profiler.record(True, TASK_MERGE)
    row = tl.program_id(0)
    b = row // num_heads
    h = row % num_heads
    used = num_parts
    if FROM_SPLITS:
        seq_len = clamped_len(seq_lens_ptr, b, max_len)
        _, _, used = split_tiles(seq_len, num_parts, SPLIT_BLOCK_N)

    lse_row = lses_ptr + b.to(tl.int64) * stride_lb + h * stride_lh
    part_row = parts_ptr + b.to(tl.int64) * stride_pb + h * stride_ph
    out, lse = merge_lse_row(part_row, lse_row, used, stride_ps, stride_ls, head_dim, BLOCK_S, BLOCK_D)
    offs_d = tl.arange(0, BLOCK_D)
    d_ok = offs_d < head_dim
    tl.store(out_ptr + b.to(tl.int64) * stride_ob + h * stride_oh + offs_d, out.to(out_ptr.dtype.element_ty),
             mask=d_ok)
    tl.store(lse_ptr + row, lse)
    profiler = profiler.record(False, TASK_MERGE)
