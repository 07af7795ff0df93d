"""The mega kernel's attention-side task families on the simulator (world 1): ``qk_norm_rope_update_kvcache``
(Normalization), ``flash_decode`` (FlashDecode: split + combine) and ``flash_attn`` (FlashAttention), each against a
plain-torch reference (fp32 math on the same bf16 inputs), chained through one ModelBuilder over several decode
steps; their argument checks; and the generated kernel holding them compiled for cuda:90 and hip:gfx942."""
import math

import pytest
import torch

from _expect import expect_error
from conftest_sim import sim_ranks  # noqa: F401  (fixture)

ENV = {"TRITON_DIST_SIM_WAIT_TIMEOUT": "240"}


def _close(got, ref, what, fails, atol=2e-2, rtol=2e-2):
    """``|got - ref| <= atol + rtol * |ref|``: bf16 rounding passes, a wrong head / page / position (errors of the
    order of the values, ~1) does not."""
    if got.shape != ref.shape:
        fails.append(f"{what}: shape {tuple(got.shape)} vs {tuple(ref.shape)}")
        return
    diff = (got.float() - ref.float()).abs()
    bad = diff > atol + rtol * ref.float().abs()
    if bool(bad.any()) or not bool(torch.isfinite(got.float()).all()):
        fails.append(f"{what}: max err {diff.max().item()} at {bad.nonzero()[:3].tolist()}")


def _rope_tables(n, max_pos, D, theta, offset=0.0):
    inv = 1.0 / (theta ** (torch.arange(0, D, 2, dtype=torch.float64) / D))
    ang = torch.outer(torch.arange(max_pos, dtype=torch.float64) + offset, inv)
    emb = torch.cat([ang, ang], -1)
    cos = emb.cos().float()[None].expand(n, -1, -1).contiguous()
    sin = emb.sin().float()[None].expand(n, -1, -1).contiguous()
    return cos, sin


def _ref_norm_rope(x, w, cos, sin, skip, eps=1e-6):
    """x [H, D] fp32, cos / sin [D] -> rope(rms_norm(x))."""
    if not skip:
        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w.float()
    h = x.shape[-1] // 2
    return x * cos + torch.cat([-x[..., h:], x[..., :h]], -1) * sin


def _ref_decode(q, kc, vc, bt, kv_lens, scale, soft_cap):
    """q [B, 1, Hq, D] -> [B, 1, Hq, D] fp32, the cache gathered through block_tables in plain torch."""
    B, _, Hq, D = q.shape
    page, Hkv = kc.shape[1], kc.shape[2]
    out = torch.zeros(B, 1, Hq, D)
    for b in range(B):
        n = int(kv_lens[b])
        if n == 0:
            continue
        pos = torch.arange(n)
        pages = bt[b].long()[pos // page]
        k = kc[pages, pos % page].float()  # [n, Hkv, D]
        v = vc[pages, pos % page].float()
        k = k.repeat_interleave(Hq // Hkv, dim=1)
        v = v.repeat_interleave(Hq // Hkv, dim=1)
        s = torch.einsum("hd,nhd->hn", q[b, 0].float(), k) * scale
        if soft_cap > 0:
            s = soft_cap * torch.tanh(s / soft_cap)
        out[b, 0] = torch.einsum("hn,nhd->hd", torch.softmax(s, -1), v)
    return out


def _ref_attn(q, k, v, scale, soft_cap, causal):
    B, S, Hq, D = q.shape
    G = Hq // k.shape[2]
    kk = k.float().repeat_interleave(G, dim=2)
    vv = v.float().repeat_interleave(G, dim=2)
    s = torch.einsum("bshd,bthd->bhst", q.float(), kk) * scale
    if soft_cap > 0:
        s = soft_cap * torch.tanh(s / soft_cap)
    if causal:
        s = s.masked_fill(torch.ones(S, S, dtype=torch.bool).triu(1), float("-inf"))
    return torch.einsum("bhst,bthd->bshd", torch.softmax(s, -1), vv)


def rank_decode_chain(Hq, Hkv, splits, steps, fusion=False):
    """x -> linear (qkv) -> qk_norm_rope_update_kvcache -> flash_decode, ``steps`` decode steps of one builder
    with kv_lens advancing (crossing page boundaries; kv_len not a multiple of the page), shuffled block tables,
    ``splits`` KV splits (more than some sequences have positions for). ``fusion=False``: the ops as added (their
    derived dependencies checked); True: the rope fused into the split (its dependencies checked)."""
    fails, _ = _decode_chain(Hq, Hkv, splits, steps, fusion)
    return fails


def rank_decode_chain_min_chunk(Hq, Hkv, steps):
    """:func:`rank_decode_chain` fused, with ``kv_split_positions=64`` over a 256-position cache: the split count
    from the policy (4: one per 64 positions of the longest possible sequence) and every split at least one K/V
    block (64 positions) long, so the short sequences' front splits are empty; the outputs against the torch
    reference at lengths 71, 101 and 21 (two, two and one non-empty splits: the split log-sum-exps say which), and
    with the split's loads ahead."""
    from triton_dist.mega_triton_kernel.tasks.flash_decode import pick_num_kv_splits

    fails = []
    if pick_num_kv_splits(3, Hkv, 1, 256, 64, 64) != 4:
        fails.append(f"policy: {pick_num_kv_splits(3, Hkv, 1, 256, 64, 64)} splits, expected 4")
    for ahead in (False, True):
        f, _ = _decode_chain(Hq, Hkv, None, steps, True, ahead=ahead, lens=(70, 100, 20), maxb=64,
                             builder_kw=dict(kv_split_positions=64), want_splits=4, want_min_chunk=64)
        fails += [f"ahead={ahead}: {m}" for m in f]
    return fails


def rank_rope_fusion_is_bit_identical(Hq, Hkv, splits, steps):
    """The chain of :func:`rank_decode_chain` built with and without the rope prologue fusion, same inputs: every
    output of every step (qkv, q_norm_rope, both caches, the attention output) equal bit for bit."""
    fails, fused = _decode_chain(Hq, Hkv, splits, steps, True)
    fails2, plain = _decode_chain(Hq, Hkv, splits, steps, False)
    fails += fails2
    for step, (a, b) in enumerate(zip(fused, plain)):
        for name, x, y in zip(("qkv", "q_norm_rope", "key_cache", "value_cache", "out"), a, b):
            if not torch.equal(x, y):
                fails.append(f"step {step} {name}: fused differs from unfused by "
                             f"{(x.float() - y.float()).abs().max().item()}")
    return fails


def rank_split_loads_ahead_is_bit_identical(Hq, Hkv, splits, steps, lens=(3, 6, 1), maxb=4):
    """The fused chain of :func:`rank_decode_chain` with the split's loads issued ahead of its wait
    (``split_loads_ahead``) against the same chain without: every output of every step equal bit for bit, the
    newest position taken from the stored values where it lies in a split's first K/V block and read back where
    it lies in a later one (``lens`` / ``maxb`` long enough for one split to hold several blocks)."""
    fails, ahead = _decode_chain(Hq, Hkv, splits, steps, True, ahead=True, lens=lens, maxb=maxb)
    fails2, plain = _decode_chain(Hq, Hkv, splits, steps, True, lens=lens, maxb=maxb)
    fails += fails2
    for step, (a, b) in enumerate(zip(ahead, plain)):
        for name, x, y in zip(("qkv", "q_norm_rope", "key_cache", "value_cache", "out"), a, b):
            if not torch.equal(x, y):
                fails.append(f"step {step} {name}: loads ahead differ by {(x.float() - y.float()).abs().max().item()}")
    return fails


def _decode_chain(Hq, Hkv, splits, steps, fusion, ahead=False, lens=(3, 6, 1), maxb=4, builder_kw=None,
                  want_splits=None, want_min_chunk=None):
    from triton_dist.mega_triton_kernel import ModelBuilder
    from triton_dist.mega_triton_kernel.tasks.flash_decode import flash_decode_rope_split_ahead_task

    g = torch.Generator().manual_seed(Hq * 10 + Hkv)
    B, D, PAGE, MAXB, K = 3, 64, 4, maxb, 32
    NB = B * MAXB + 3
    H = Hq + 2 * Hkv
    fails = []
    x = torch.randn(B, K, generator=g).bfloat16()
    w_qkv = (torch.randn(H * D, K, generator=g) / 4).bfloat16()
    qkv2 = torch.empty(B, H * D).bfloat16()
    qkv = qkv2.view(B, 1, H, D)
    kc = torch.randn(NB, PAGE, Hkv, D, generator=g).bfloat16()  # history: whatever the pages hold
    vc = torch.randn(NB, PAGE, Hkv, D, generator=g).bfloat16()
    bt = torch.randperm(NB, generator=g)[:B * MAXB].reshape(B, MAXB).int().contiguous()
    kv_lens = torch.tensor(lens, dtype=torch.int32)  # default: after the first step 4 (page boundary), 7, 2
    q_w = (1 + 0.2 * torch.randn(D, generator=g)).bfloat16()
    k_w = (1 + 0.2 * torch.randn(D, generator=g)).bfloat16()
    cos, sin = _rope_tables(1, MAXB * PAGE, D, 10000.0)
    qo = torch.empty(B, 1, Hq, D).bfloat16()
    out = torch.empty(B, 1, Hq, D).bfloat16()
    b = ModelBuilder(enable_fusion=fusion, split_loads_ahead=ahead, **(builder_kw or {}))
    b.make_linear(x, w_qkv, qkv2)
    b.make_qk_norm_rope_update_kvcache(qkv, kc, vc, bt, kv_lens, q_w, k_w, cos, sin, qo)
    b._add("flash_decode", 0, qo, kc, vc, bt, kv_lens, out, num_kv_splits=splits)
    b.compile()
    if splits is None:  # the builder's policy
        splits = b.ops[-2].constexprs["SPLITS"]
        if splits != want_splits or b.ops[-2].constexprs.get("MIN_CHUNK") != want_min_chunk:
            fails.append(f"split policy: {b.ops[-2].constexprs}, expected SPLITS={want_splits}, "
                         f"MIN_CHUNK={want_min_chunk}")
    if b.ops[-2].constexprs["SPLITS"] != splits:
        fails.append(f"num_kv_splits={splits} not applied: {b.ops[-2].constexprs}")
    first = [0]
    for op in b.compiled_ops:
        first.append(first[-1] + len(op.tiles))
    names = [op.name for op in b.compiled_ops]
    if fusion:
        # linear, rope + split, combine: a split task waits for the qkv tiles it reads and nothing else, not for
        # the other splits of its (sequence, kv head) although the last one writes the cache they read (it writes
        # only the step's new positions, which only it reads)
        if names != ["L0.linear", "L0.qk_norm_rope_update_kvcache+L0.flash_decode.split", "L0.flash_decode.combine"]:
            fails.append(f"rope prologue not fused: {names}")
        split_op = b.compiled_ops[1]
        if (split_op.kernel is flash_decode_rope_split_ahead_task) != ahead or split_op.waits_inside != ahead:
            fails.append(f"split_loads_ahead={ahead}: the split runs {split_op.kernel.fn.__name__}, waits inside "
                         f"{split_op.waits_inside}")
        splits_at = first[1]
        for t in b.tasks[first[1]:first[2]]:
            if not t.deps or any(d >= first[1] for d in t.deps):
                fails.append(f"fused split task {t.index} deps {t.deps}: expected qkv tiles (< {first[1]}) only")
    else:
        if len(names) != 4:
            fails.append(f"fusion off, but the ops are {names}")
        # a split task waits for the cache writer of its (sequence, kv head) (logical regions) and no other, the
        # cache writers of different sequences do not wait for each other
        splits_at = first[2]
        for t in b.tasks[first[1]:first[2]]:
            if any(d >= first[1] for d in t.deps):
                fails.append(f"cache-writer task {t.index} waits for another cache writer: {t.deps}")
        for t in b.tasks[first[2]:first[3]]:
            bb, h = divmod(t.tile // splits, Hkv)
            writers = [d for d in t.deps if first[1] <= d < first[2]]
            if writers != [first[1] + bb * Hkv + h]:
                fails.append(f"split task {t.index} (b {bb}, head {h}) waits for cache writers {writers}, expected "
                             f"[{first[1] + bb * Hkv + h}]")
    # a combine task waits for exactly the splits of its (b, h)
    for t in b.tasks[first[-2]:]:
        want = list(range(splits_at + t.tile * splits, splits_at + (t.tile + 1) * splits))
        if t.deps != want:
            fails.append(f"combine task {t.index} deps {t.deps}, expected {want}")
    outputs = []
    for step in range(steps):
        x.copy_(torch.randn(B, K, generator=g).bfloat16())
        kv_lens += 1
        kc_before, vc_before = kc.clone(), vc.clone()
        b.run()
        outputs.append([t.clone() for t in (qkv, qo, kc, vc, out)])
        ref_qkv = (x.float() @ w_qkv.float().T).bfloat16().view(B, 1, H, D)
        _close(qkv, ref_qkv, f"step {step} qkv", fails)
        kc_ref, vc_ref = kc_before.clone(), vc_before.clone()
        for s_ in range(B):
            pos = int(kv_lens[s_]) - 1
            xs = ref_qkv[s_, 0].float()
            q = _ref_norm_rope(xs[:Hq], q_w, cos[0, pos], sin[0, pos], False)
            k = _ref_norm_rope(xs[Hq:Hq + Hkv], k_w, cos[0, pos], sin[0, pos], False)
            _close(qo[s_, 0], q, f"step {step} seq {s_} q_norm_rope", fails)
            page, slot = int(bt[s_, pos // PAGE]), pos % PAGE
            kc_ref[page, slot] = k.bfloat16()
            vc_ref[page, slot] = xs[Hq + Hkv:].bfloat16()
        # only the new positions changed; k within bf16 rounding, v bit-exact
        _close(kc, kc_ref, f"step {step} key_cache", fails)
        if not torch.equal(vc, vc_ref):
            fails.append(f"step {step} value_cache: {(vc.float() - vc_ref.float()).abs().max().item()}")
        if want_min_chunk:  # the splits a sequence fills: those of chunk max(cdiv(L, S), MIN_CHUNK) from the end
            lse = b.ops[-2].tensors[6]  # [B, Hq, SPLITS] (the fused op writes the split op's buffers)
            for s_, L in enumerate(kv_lens.tolist()):
                used = -(-L // max(-(-L // splits), want_min_chunk))
                filled = torch.isfinite(lse[s_]).all(0).tolist()
                if filled != [i >= splits - used for i in range(splits)]:
                    fails.append(f"step {step} seq {s_} (kv_len {L}): splits filled {filled}, expected the last "
                                 f"{used}")
        ref = _ref_decode(qo, kc, vc, bt, kv_lens, D ** -0.5, 0.0)
        _close(out, ref, f"step {step} flash_decode (kv_lens {kv_lens.tolist()})", fails, atol=1e-2, rtol=1e-2)
    return fails, outputs


def rank_decode_variants():
    """flash_decode alone: 1:1 heads, soft_cap and an explicit sm_scale, kv_lens[b] == 0 (zero output, no NaN),
    more splits than positions; qk_norm_rope with skipped norms and per-sequence tables, S = 2 new tokens."""
    from triton_dist.mega_triton_kernel import ModelBuilder

    g = torch.Generator().manual_seed(7)
    fails = []
    B, H, D, PAGE, MAXB, NB = 3, 4, 32, 8, 3, 12
    q = torch.randn(B, 1, H, D, generator=g).bfloat16()
    kc = torch.randn(NB, PAGE, H, D, generator=g).bfloat16()
    vc = torch.randn(NB, PAGE, H, D, generator=g).bfloat16()
    bt = torch.randperm(NB, generator=g)[:B * MAXB].reshape(B, MAXB).int().contiguous()
    kv_lens = torch.tensor([0, 19, 5], dtype=torch.int32)
    out = torch.full((B, 1, H, D), float("nan")).bfloat16()
    out2 = torch.empty(B, 1, H, D).bfloat16()
    b = ModelBuilder()
    b._add("flash_decode", 0, q, kc, vc, bt, kv_lens, out, sm_scale=1.0, soft_cap=5.0, num_kv_splits=7)
    b.make_flash_decode(q, kc, vc, bt, kv_lens, out2)  # auto splits (1 worker: 1)
    b.compile()
    if b.ops[2].constexprs["SPLITS"] != 1:
        fails.append(f"auto splits with one worker: {b.ops[2].constexprs['SPLITS']}")
    b.run()
    _close(out, _ref_decode(q, kc, vc, bt, kv_lens, 1.0, 5.0), "decode soft_cap / kv_len 0", fails, 1e-2, 1e-2)
    if not torch.equal(out[0].float(), torch.zeros(1, H, D)):
        fails.append(f"kv_lens[0] == 0 must give zeros: {out[0].float().abs().max()}")
    _close(out2, _ref_decode(q, kc, vc, bt, kv_lens, D ** -0.5, 0.0), "decode auto splits", fails, 1e-2, 1e-2)
    # the soft cap matters at these scores (else the check above would not test it)
    if torch.allclose(_ref_decode(q, kc, vc, bt, kv_lens, 1.0, 5.0), _ref_decode(q, kc, vc, bt, kv_lens, 1.0, 0.0),
                      atol=0.05):
        fails.append("soft_cap=5 does not change the reference: the test would not catch a missing cap")

    # qk_norm_rope: S = 2, skipped q norm, per-sequence tables (offset per sequence), 2:1 heads
    S, Hkv, Hq = 2, 2, 4
    qkv = torch.randn(B, S, Hq + 2 * Hkv, D, generator=g).bfloat16()
    kc2 = torch.zeros(NB, PAGE, Hkv, D).bfloat16()
    vc2 = torch.zeros(NB, PAGE, Hkv, D).bfloat16()
    lens = torch.tensor([2, 9, 16], dtype=torch.int32)  # positions 0-1, 7-8 (page boundary), 14-15
    cos, sin = _rope_tables(B, MAXB * PAGE, D, 1e6)
    cos[1] *= -1.0  # per-sequence tables: sequence 1 must use its own
    sin[2] = torch.roll(sin[2], 3, dims=-1)
    q_w = (1 + 0.2 * torch.randn(D, generator=g)).bfloat16()
    k_w = (1 + 0.2 * torch.randn(D, generator=g)).bfloat16()
    qo = torch.empty(B, S, Hq, D).bfloat16()
    b = ModelBuilder()
    b.make_qk_norm_rope_update_kvcache(qkv, kc2, vc2, bt, lens, q_w, k_w, cos, sin, qo, skip_q_norm=True,
                                       rope_theta=1e6)
    b.compile()
    b.run()
    kc_ref = torch.zeros_like(kc2, dtype=torch.float32)
    vc_ref = torch.zeros_like(vc2)
    for s_ in range(B):
        for t in range(S):
            pos = int(lens[s_]) - S + t
            x = qkv[s_, t].float()
            _close(qo[s_, t], _ref_norm_rope(x[:Hq], q_w, cos[s_, pos], sin[s_, pos], True),
                   f"S=2 seq {s_} token {t} q", fails)
            page, slot = int(bt[s_, pos // PAGE]), pos % PAGE
            kc_ref[page, slot] = _ref_norm_rope(x[Hq:Hq + Hkv], k_w, cos[s_, pos], sin[s_, pos], False)
            vc_ref[page, slot] = qkv[s_, t, Hq + Hkv:]
    _close(kc2, kc_ref, "S=2 key_cache", fails)
    if not torch.equal(vc2, vc_ref):
        fails.append("S=2 value_cache differs")
    return fails


def rank_flash_attn():
    """Prefill: causal and not, GQA 2:1 and 1:1, S not a multiple of BLOCK_M, soft_cap; chained on one builder
    (the second attention reads the first one's output as its q)."""
    from triton_dist.mega_triton_kernel import ModelBuilder

    g = torch.Generator().manual_seed(3)
    fails = []
    B, S, Hq, Hkv, D = 2, 70, 4, 2, 32
    q = torch.randn(B, S, Hq, D, generator=g).bfloat16()
    k = torch.randn(B, S, Hkv, D, generator=g).bfloat16()
    v = torch.randn(B, S, Hkv, D, generator=g).bfloat16()
    o1 = torch.empty(B, S, Hq, D).bfloat16()
    o2 = torch.empty(B, S, Hq, D).bfloat16()
    k1 = torch.randn(B, S, Hq, D, generator=g).bfloat16()
    v1 = torch.randn(B, S, Hq, D, generator=g).bfloat16()
    o3 = torch.empty(B, S, Hq, D).bfloat16()
    b = ModelBuilder()
    b.make_flash_attn(q, k, v, o1)
    b.make_flash_attn(q, k, v, o2, is_causal=False, sm_scale=0.3, soft_cap=4.0)
    b.make_flash_attn(o1, k1, v1, o3, is_causal=True)  # 1:1, reads o1
    b.compile()
    if b.ops[0].constexprs["BLOCK_M"] >= S or S % b.ops[0].constexprs["BLOCK_M"] == 0:
        fails.append(f"S={S} should span several BLOCK_M tiles with a partial last one: {b.ops[0].constexprs}")
    b.run()
    _close(o1, _ref_attn(q, k, v, D ** -0.5, 0.0, True), "flash_attn causal GQA", fails, 1e-2, 1e-2)
    _close(o2, _ref_attn(q, k, v, 0.3, 4.0, False), "flash_attn non-causal soft_cap", fails, 1e-2, 1e-2)
    _close(o3, _ref_attn(o1, k1, v1, D ** -0.5, 0.0, True), "flash_attn 1:1 chained", fails, 1e-2, 1e-2)
    return fails


def rank_generated_source(ahead=False):
    """The generated kernel source of a builder holding every op type of these families (``ahead``: the fused
    split with its loads ahead of its wait)."""
    from triton_dist.mega_triton_kernel import ModelBuilder

    B, Hq, Hkv, D, PAGE, NB, MAXB, S = 1, 8, 2, 128, 16, 8, 4, 40
    bf = torch.bfloat16
    qkv = torch.zeros(B, 1, Hq + 2 * Hkv, D, dtype=bf)
    kc, vc = torch.zeros(NB, PAGE, Hkv, D, dtype=bf), torch.zeros(NB, PAGE, Hkv, D, dtype=bf)
    bt = torch.zeros(B, MAXB, dtype=torch.int32)
    lens = torch.ones(B, dtype=torch.int32)
    w = torch.ones(D, dtype=bf)
    cos, sin = _rope_tables(1, MAXB * PAGE, D, 1e6)
    qo, out = torch.zeros(B, 1, Hq, D, dtype=bf), torch.zeros(B, 1, Hq, D, dtype=bf)
    q, kk, vv, o = (torch.zeros(B, S, h, D, dtype=bf) for h in (Hq, Hkv, Hkv, Hq))
    kc2, vc2 = torch.zeros_like(kc), torch.zeros_like(vc)
    qo2, out2 = torch.zeros_like(qo), torch.zeros_like(out)
    b = ModelBuilder(split_loads_ahead=ahead)
    b.make_qk_norm_rope_update_kvcache(qkv, kc, vc, bt, lens, w, w, cos, sin, qo)
    b._add("flash_decode", 0, qo, kc, vc, bt, lens, out, soft_cap=30.0, num_kv_splits=4)  # fused
    b.make_qk_norm_rope_update_kvcache(qkv, kc2, vc2, bt, lens, w, w, cos, sin, qo2)
    b.make_flash_attn(q, kk, vv, o)  # between the two: not fused
    b._add("flash_decode", 0, qo2, kc2, vc2, bt, lens, out2, num_kv_splits=4)
    b.compile()
    return b.source, b.queue_cap, b.num_args


def _expect(fails, what, fn, *needles):
    expect_error(fails, what, fn, *needles, exc=(TypeError, ValueError))


def rank_argument_checks():
    from triton_dist.mega_triton_kernel import ModelBuilder

    fails = []
    bf = torch.bfloat16
    B, Hq, Hkv, D, PAGE, NB, MAXB = 2, 4, 2, 32, 4, 8, 3
    qkv = torch.zeros(B, 1, Hq + 2 * Hkv, D, dtype=bf)
    kc, vc = torch.zeros(NB, PAGE, Hkv, D, dtype=bf), torch.zeros(NB, PAGE, Hkv, D, dtype=bf)
    bt = torch.zeros(B, MAXB, dtype=torch.int32)
    lens = torch.ones(B, dtype=torch.int32)
    w = torch.ones(D, dtype=bf)
    cos, sin = _rope_tables(1, 16, D, 1e6)
    qo = torch.zeros(B, 1, Hq, D, dtype=bf)
    out = torch.zeros(B, 1, Hq, D, dtype=bf)
    b = ModelBuilder()
    rope_args = dict(qkv=qkv, key_cache=kc, value_cache=vc, block_tables=bt, kv_lens=lens, q_rms_weight=w,
                     k_rms_weight=w, cos_cache=cos, sin_cache=sin, q_norm_rope=qo)

    def rope(**kw):
        a = dict(rope_args)
        a.update(kw)
        return b.make_qk_norm_rope_update_kvcache(**a)

    _expect(fails, "qkv fp32", lambda: rope(qkv=qkv.float()), "qkv", "torch.float32")
    _expect(fails, "kv_lens int64", lambda: rope(kv_lens=lens.long()), "kv_lens", "torch.int32")
    _expect(fails, "block_tables rows", lambda: rope(block_tables=bt[:1]), "block_tables", "[2, *]")
    _expect(fails, "value_cache shape", lambda: rope(value_cache=vc[:, :2]), "value_cache")
    _expect(fails, "cos fp16", lambda: rope(cos_cache=cos.half()), "cos_cache")
    _expect(fails, "cos batch", lambda: rope(cos_cache=cos.expand(3, -1, -1).contiguous(),
                                             sin_cache=sin.expand(3, -1, -1).contiguous()), "cos_cache", "[1 or 2")
    _expect(fails, "q_norm_rope heads", lambda: rope(q_norm_rope=qo[:, :, :2]), "q_norm_rope")
    _expect(fails, "q weight", lambda: rope(q_rms_weight=w[:16]), "q_rms_weight")
    _expect(fails, "GQA", lambda: rope(qkv=torch.zeros(B, 1, 3 + 2 * Hkv, D, dtype=bf),
                                       q_norm_rope=torch.zeros(B, 1, 3, D, dtype=bf)), "multiple")
    _expect(fails, "odd head dim", lambda: rope(qkv=torch.zeros(B, 1, Hq + 2 * Hkv, 9, dtype=bf)), "head dim")
    _expect(fails, "rope_theta", lambda: rope(rope_theta=0), "rope_theta")
    _expect(fails, "eps", lambda: b.make_qk_norm_rope_update_kvcache(*rope_args.values(), q_rms_eps=-1.0),
            "q_rms_eps")
    _expect(fails, "skip flag", lambda: b.make_qk_norm_rope_update_kvcache(*rope_args.values(), skip_k_norm=1),
            "skip_k_norm")
    q = torch.zeros(B, 1, Hq, D, dtype=bf)
    _expect(fails, "query S=2", lambda: b.make_flash_decode(torch.zeros(B, 2, Hq, D, dtype=bf), kc, vc, bt, lens,
                                                            torch.zeros(B, 2, Hq, D, dtype=bf)), "query", "[B, 1")
    _expect(fails, "query fp32", lambda: b.make_flash_decode(q.float(), kc, vc, bt, lens, out), "query")
    _expect(fails, "key_cache dtype", lambda: b.make_flash_decode(q, kc.half(), vc, bt, lens, out), "key_cache")
    _expect(fails, "block_tables int64", lambda: b.make_flash_decode(q, kc, vc, bt.long(), lens, out),
            "block_tables")
    _expect(fails, "kv_lens shape", lambda: b.make_flash_decode(q, kc, vc, bt, lens[:1], out), "kv_lens")
    _expect(fails, "output dtype", lambda: b.make_flash_decode(q, kc, vc, bt, lens, out.half()), "output")
    _expect(fails, "sm_scale", lambda: b.make_flash_decode(q, kc, vc, bt, lens, out, sm_scale=0.0), "sm_scale")
    _expect(fails, "soft_cap", lambda: b.make_flash_decode(q, kc, vc, bt, lens, out, soft_cap=-1.0), "soft_cap")
    _expect(fails, "soft_cap nan", lambda: b.make_flash_decode(q, kc, vc, bt, lens, out, soft_cap=math.nan),
            "soft_cap")
    _expect(fails, "num_kv_splits", lambda: b._add("flash_decode", 0, q, kc, vc, bt, lens, out, num_kv_splits=0),
            "num_kv_splits")
    qa = torch.zeros(B, 8, Hq, D, dtype=bf)
    ka = torch.zeros(B, 8, Hkv, D, dtype=bf)
    _expect(fails, "attn k seq", lambda: b.make_flash_attn(qa, ka[:, :4], ka[:, :4], qa.clone()), "k")
    _expect(fails, "attn v dtype", lambda: b.make_flash_attn(qa, ka, ka.half(), qa.clone()), "v")
    _expect(fails, "attn heads", lambda: b.make_flash_attn(qa[:, :, :3].contiguous(), ka, ka,
                                                           qa[:, :, :3].contiguous()), "multiple")
    _expect(fails, "attn causal", lambda: b.make_flash_attn(qa, ka, ka, qa.clone(), is_causal=None), "is_causal")
    _expect(fails, "attn noncontig", lambda: b.make_flash_attn(qa.transpose(1, 2), ka, ka, qa.clone()), "q")
    if b.ops:
        fails.append(f"failed calls added ops: {[op.name for op in b.ops]}")
    return fails


@pytest.mark.sim
@pytest.mark.parametrize("fn,args", [
    ("rank_decode_chain", (8, 2, 5, 3)),   # GQA 4:1, 5 splits > the positions of the short sequence
    ("rank_decode_chain", (2, 2, 2, 2)),   # 1:1
    ("rank_decode_chain", (8, 2, 5, 3, True)),   # the rope fused into the split
    ("rank_rope_fusion_is_bit_identical", (8, 2, 5, 3)),
    ("rank_rope_fusion_is_bit_identical", (2, 2, 1, 2)),  # one split: it writes q and the cache
    ("rank_split_loads_ahead_is_bit_identical", (8, 2, 5, 3)),  # the newest position in the last split's block
    # one split of up to 2 blocks of 64 positions: the newest in the second block for the first two sequences
    ("rank_split_loads_ahead_is_bit_identical", (2, 2, 1, 2, (70, 100, 20), 32)),
    ("rank_decode_chain_min_chunk", (4, 2, 2)),
    ("rank_decode_variants", ()),
    ("rank_flash_attn", ()),
    ("rank_argument_checks", ()),
])
def test_mega_attention_on_simulator(sim_ranks, fn, args):  # noqa: F811
    res = sim_ranks.run(1, globals()[fn], *args, timeout=300, env=ENV)
    assert not res[0], res[0]


@pytest.mark.sim
@pytest.mark.parametrize("target,stage,needle,ahead", [("cuda:90", "ptx", ".target sm_90a", False),
                                                       ("hip:gfx942", "amdgcn", '.amdgcn_target "amd', False),
                                                       ("cuda:90", "ptx", ".target sm_90a", True),
                                                       ("hip:gfx942", "amdgcn", '.amdgcn_target "amd', True)])
def test_mega_attention_kernel_compiles(sim_ranks, tmp_path, capsys, target, stage, needle, ahead):  # noqa: F811
    from triton_dist.tools import compile as ctool

    source, cap, nargs = sim_ranks.run(1, rank_generated_source, ahead, timeout=300, env=ENV)[0]
    fused = "flash_decode_rope_split_ahead_task" if ahead else "flash_decode_rope_split_task"
    for fn in ("qk_norm_rope_task", "flash_decode_split_task", fused, "flash_decode_combine_task", "flash_attn_task"):
        assert fn in source, fn
    path = tmp_path / "mega_attn_kernel.py"
    path.write_text(source)
    consts = dict(QUEUE_CAP=cap, ROW=8, NUM_ARGS=nargs, DYNAMIC=0, STRICT=0, PROFILE=0)
    rc = ctool.main([f"{path}:MEGA_TRITON_KERNEL", "-s", "*i32,*i32,*i64,*i32,*i32,*i32,*i32,*i64",
                     *[a for k, v in consts.items() for a in ("-D", f"{k}={v}")], "--target", target,
                     "--stage", stage])
    out = capsys.readouterr()
    assert rc == 0, out.err[-3000:]
    assert needle in out.out
