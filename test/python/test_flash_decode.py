"""Split-KV decode attention over a paged KV cache (triton_dist.ops.attention.flash_decode over
triton_dist.kernels.flash_decode) and the merge of attention partials (merge_attention_partials): results under the
interpreter against a plain fp32 torch reference (GQA ratios 1, 3 and 4, D 64 and 128, page sizes 1 / 16 / 64, lengths
0, 1 and not a multiple of the page, shuffled page ids, bf16 and fp16, one split, several, more splits than a request
has pages, tiles spanning several pages, strided K / V views), ``out`` and ``lse`` both; the merge with empty (-inf)
partials whose outputs hold NaN; the torch.library ops under torch.compile; the host checks; the split rule; and
compilation of both kernels for cuda:90 and hip:gfx942 in fresh processes."""
import json
import re

import pytest
import torch
from _subprocess_runs import assert_script_says, compile_kernel

_INTERP_SCRIPT = r"""
import math
import os
os.environ["TRITON_INTERPRET"] = "1"
import torch
from triton_dist.ops.attention import (DecodeConfig, flash_decode, flash_decode_reference,
                                       merge_attention_partials)

fails = []
torch.manual_seed(0)
TOL = {torch.bfloat16: 2e-2, torch.float16: 4e-3, torch.float32: 1e-5}


def close(name, got, want, tol):
    if got.shape != want.shape:
        fails.append(f"{name}: shape {tuple(got.shape)} != {tuple(want.shape)}")
        return
    got, want = got.float(), want.float()
    inf = torch.isinf(want)
    if not torch.equal(torch.isinf(got), inf) or not torch.equal(got[inf], want[inf]):
        fails.append(f"{name}: infinities differ: {got[inf | torch.isinf(got)].tolist()}")
        return
    err = ((got[~inf] - want[~inf]).abs() - tol * (1 + want[~inf].abs())).max().item() if bool((~inf).any()) else 0
    if not err <= 0:  # NaN fails too
        fails.append(f"{name}: max err {(got[~inf] - want[~inf]).abs().max().item()}")


def paged(lens, Hq, Hkv, D, page, dtype, kv_view=False):
    # each request owns its pages in a shuffled order; a spare page and a spare table column with garbage ids
    pages_per = [-(-n // page) for n in lens]
    total = sum(pages_per) + 1
    perm = torch.randperm(total).to(torch.int32)
    bt = torch.full((len(lens), max(pages_per) + 1), 10 ** 6, dtype=torch.int32)
    at = 0
    for b, n in enumerate(pages_per):
        bt[b, :n] = perm[at:at + n]
        at += n
    q = torch.randn(len(lens), Hq, D).to(dtype)
    if kv_view:  # one [pages, 2, page, Hkv, D] buffer, K and V strided views of it
        kv = torch.randn(total, 2, page, Hkv, D).to(dtype)
        k, v = kv[:, 0], kv[:, 1]
    else:
        k = torch.randn(total, page, Hkv, D).to(dtype)
        v = torch.randn(total, page, Hkv, D).to(dtype)
    return q, k, v, bt, torch.tensor(lens, dtype=torch.int32)


def case(name, lens, Hq, Hkv, D, page, dtype=torch.bfloat16, splits=(None, ), config=None, scale=None,
         kv_view=False):
    q, k, v, bt, sl = paged(lens, Hq, Hkv, D, page, dtype, kv_view)
    want_o, want_l = flash_decode_reference(q, k, v, bt, sl, scale=scale)
    for ns in splits:
        tag = f"{name}, num_splits={ns}"
        try:
            o, l = flash_decode(q, k, v, bt, sl, num_splits=ns, config=config, scale=scale)
        except Exception as e:
            fails.append(f"{tag}: {type(e).__name__}: {e}")
            continue
        if o.dtype != dtype or l.dtype != torch.float32:
            fails.append(f"{tag}: dtypes {o.dtype}, {l.dtype}")
        close(f"{tag}: out", o, want_o.to(dtype), TOL[dtype])
        close(f"{tag}: lse", l, want_l, 1e-5)
    return q, k, v, bt, sl, want_o, want_l


case("MHA, D 64, 1-token pages, bf16", [0, 1, 5, 23], 2, 2, 64, 1, splits=(None, 9))  # None: one split
q, k, v, bt, sl, want_o, want_l = case("GQA 4, D 128, 16-token pages, fp16", [37, 0, 16, 1], 8, 2, 128, 16,
                                       dtype=torch.float16, splits=(2, 9))
case("GQA 4, D 64, 64-token pages", [70, 3], 4, 1, 64, 64, splits=(1, 4))
case("GQA 1, D 128, strided K / V views, scale 0.3", [20, 33], 2, 2, 128, 16, splits=(2, ), scale=0.3,
     kv_view=True)
case("GQA 3, 32-token tiles over 16-token pages", [45, 9], 6, 2, 64, 16, dtype=torch.float16, splits=(2, ),
     config=DecodeConfig(32, 16, 4, 1))
case("16-token tiles in 64-token pages, BLOCK_G 32", [100], 4, 1, 64, 64, splits=(3, ),
     config=DecodeConfig(16, 32, 4, 1))

# the int64 K/V row offsets (wide_offsets, the former code) and the int32 ones (the default where the caches fit)
# give the same bits; resident=3 (splits in whole waves: several at the interpreter's 2 SMs) against the reference
qw, kw_, vw, btw, slw = paged([37, 0, 90], 8, 2, 64, 16, torch.bfloat16)
narrow = flash_decode(qw, kw_, vw, btw, slw, num_splits=3, config=DecodeConfig(16, 16, 4, 1))
wide = flash_decode(qw, kw_, vw, btw, slw, num_splits=3, config=DecodeConfig(16, 16, 4, 1, wide_offsets=True))
if not (torch.equal(narrow[0], wide[0]) and torch.equal(narrow[1], wide[1])):
    fails.append("wide_offsets: the int64 offsets' result differs from the int32 ones'")
case("GQA 4, splits in waves of 3 programs per SM", [200], 4, 1, 64, 16, config=DecodeConfig(16, 16, 4, 1, resident=3))
case("the merge 4 splits a step", [150, 7], 4, 2, 64, 16, splits=(9, ), config=DecodeConfig(16, 16, 4, 1,
                                                                                             merge_block_s=4))

# out= is written in place; return_lse=False gives out alone
buf = torch.full_like(q, float("nan"))
got = flash_decode(q, k, v, bt, sl, num_splits=2, out=buf, return_lse=False)
if got is not buf:
    fails.append("out= was not returned")
close("out=, return_lse=False", buf, want_o.half(), TOL[torch.float16])
# no request
o, l = flash_decode(q[:0], k, v, bt[:0], sl[:0])
if o.shape != (0, 8, 128) or l.shape != (0, 8):
    fails.append(f"empty batch: {tuple(o.shape)}, {tuple(l.shape)}")

# merge_attention_partials: S = 11 partials over disjoint random token sets (more than one chunk of partials), some
# empty (lse -inf, output NaN); one row (b=1, h=2) empty in every partial
S, B, H, D, N = 11, 2, 3, 64, 40
scores = torch.randn(B, H, N) * 3
vals = torch.randn(B, H, N, D)
owner = torch.randint(0, S - 3, (B, H, N))  # partials S-3 .. S-1 own nothing
owner[1, 2] = S  # nobody
outs = torch.full((S, B, H, D), float("nan"))
lses = torch.full((S, B, H), float("-inf"))
for s in range(S):
    m = owner == s
    sc = scores.masked_fill(~m, float("-inf"))
    lse = torch.logsumexp(sc, dim=-1)
    p = torch.where(m.any(-1, keepdim=True), torch.softmax(sc, dim=-1), 0.0)
    outs[s] = torch.where(m.any(-1)[..., None], torch.einsum("bhn,bhnd->bhd", p, vals), float("nan"))
    lses[s] = lse
full_sc = scores.masked_fill(owner == S, float("-inf"))
want_l = torch.logsumexp(full_sc, dim=-1)
want_o = torch.einsum("bhn,bhnd->bhd", torch.softmax(full_sc, dim=-1).nan_to_num(0.0), vals)
o, l = merge_attention_partials(outs, lses)
close("merge: out", o, want_o, 1e-5)
close("merge: lse", l, want_l, 1e-5)
if bool(o.isnan().any()) or o[1, 2].abs().max().item() != 0 or l[1, 2].item() != float("-inf"):
    fails.append(f"merge: the empty row is {o[1, 2, :4].tolist()}, {l[1, 2].item()}")
# bf16 partials viewed through a permute (any strides but D's), into a bf16 out=
outs_bf = outs.to(torch.bfloat16).permute(1, 0, 2, 3).contiguous().permute(1, 0, 2, 3)
buf = torch.empty(B, H, D, dtype=torch.bfloat16)
o, l = merge_attention_partials(outs_bf, lses, out=buf)
close("merge: bf16 strided partials, out=", o, want_o.to(torch.bfloat16), 2e-2)
if o is not buf:
    fails.append("merge: out= was not returned")
# one partial: itself
o, l = merge_attention_partials(outs[:1], lses[:1])
close("merge: one partial", o, torch.where(torch.isinf(lses[0])[..., None], 0.0, outs[0]), 1e-6)

# the split kernel's partials merged by the op equal one call over the whole (the sequence-parallel use)
q, k, v, bt, sl = paged([29, 0, 50], 4, 1, 64, 16, torch.bfloat16)
whole_o, whole_l = flash_decode(q, k, v, bt, sl, num_splits=1)
halves = [(bt[:, :1], sl.clamp(max=16)), (bt[:, 1:], (sl - 16).clamp(min=0))]  # tokens 0..15 and 16..
parts = [flash_decode(q, k, v, t, n, num_splits=1) for t, n in halves]
o, l = merge_attention_partials(torch.stack([p[0].float() for p in parts]), torch.stack([p[1] for p in parts]),
                                out_dtype=torch.bfloat16)
close("split by pages + merge: out", o, whole_o, 2e-2)
close("split by pages + merge: lse", l, whole_l, 1e-5)

# torch.compile (fullgraph): the registered ops
def layer(q, k, v, bt, sl):
    o, l = flash_decode(q, k, v, bt, sl, num_splits=2)
    m_o, m_l = merge_attention_partials(torch.stack([o.float(), o.float()]), torch.stack([l, l]))
    return o.float() * 2, m_o, m_l - math.log(2)

eager = layer(q, k, v, bt, sl)
compiled = torch.compile(layer, backend="aot_eager", fullgraph=True)(q, k, v, bt, sl)
for name, e, c in zip(("out", "merged out", "merged lse"), eager, compiled):
    if not torch.equal(e, c):
        fails.append(f"torch.compile: {name} differs")
close("merge of a partial with itself", eager[2], whole_l, 1e-5)
print("FAILS", fails)
"""


def test_flash_decode_under_interpreter():
    assert_script_says(_INTERP_SCRIPT, "FAILS []")


def _operands(B=2, Hq=4, Hkv=2, D=64, page=16, pages=6, max_pages=3, dtype=torch.bfloat16):
    q = torch.zeros(B, Hq, D, dtype=dtype)
    k = torch.zeros(pages, page, Hkv, D, dtype=dtype)
    v = torch.zeros(pages, page, Hkv, D, dtype=dtype)
    bt = torch.arange(B * max_pages, dtype=torch.int32).reshape(B, max_pages)
    sl = torch.tensor([5, 40][:B], dtype=torch.int32)
    return q, k, v, bt, sl


_BAD = [
    (lambda q, k, v, b, s: (q[0], k, v, b, s), {}, ["q must be 3-D [B, Hq, D]"]),
    (lambda q, k, v, b, s: (q, k[0], v, b, s), {}, ["k_cache must be 4-D [num_pages, page_size, Hkv, D]"]),
    (lambda q, k, v, b, s: (q.float(), k, v, b, s), {}, ["q.dtype=torch.float32", "accepted: bfloat16, float16"]),
    (lambda q, k, v, b, s: (q, k.half(), v, b, s), {}, ["k_cache.dtype=torch.float16 differs"]),
    (lambda q, k, v, b, s: (q, k, v[:, :, :1], b, s), {}, ["differ in shape"]),
    (lambda q, k, v, b, s: (q[..., :32], k[..., :32], v[..., :32], b, s), {}, ["D=32", "64, 128"]),
    (lambda q, k, v, b, s: (q, k.transpose(2, 3).contiguous().transpose(2, 3), v, b, s), {},
     ["k_cache needs a unit stride along the head dim"]),
    (lambda q, k, v, b, s: (q[:, :3], k, v, b, s), {}, ["Hq=3", "multiple", "Hkv=2"]),
    (lambda q, k, v, b, s: (q, k[:, :12], v[:, :12], b, s), {}, ["page_size=12", "power of two"]),
    (lambda q, k, v, b, s: (q, k, v, b.long(), s), {}, ["block_table must be int32 [B=2, max_pages]"]),
    (lambda q, k, v, b, s: (q, k, v, b[:1], s), {}, ["block_table must be int32 [B=2, max_pages]"]),
    (lambda q, k, v, b, s: (q, k, v, b.t().contiguous().t(), s), {}, ["block_table needs a unit stride"]),
    (lambda q, k, v, b, s: (q, k, v, b, s.long()), {}, ["seq_lens must be int32 [B=2]"]),
    (lambda q, k, v, b, s: (q, k, v, b, s[None]), {}, ["seq_lens must be int32 [B=2]"]),
    (lambda q, k, v, b, s: (q, k[:0], v[:0], b, s), {}, ["no pages"]),
    (lambda q, k, v, b, s: (q, k, v, b, s), {"num_splits": 0}, ["num_splits must be a positive int"]),
    (lambda q, k, v, b, s: (q, k, v, b, s), {"scale": float("nan")}, ["scale must be a finite number"]),
    (lambda q, k, v, b, s: (q, k, v, b, s), {"out": torch.zeros(2, 4, 64, dtype=torch.float16)},
     ["out must be a bfloat16, float32 [2, 4, 64]"]),
    (lambda q, k, v, b, s: (q, k, v, b, s), {"lse": torch.zeros(2, 3)}, ["lse must be a contiguous float32 [2, 4]"]),
    (lambda q, k, v, b, s: (q, k, v, b, s), {"config": None, "num_splits": 1.5}, ["num_splits"]),
    (lambda q, k, v, b, s: (q, k, v, b, torch.tensor([5, 49], dtype=torch.int32)), {},
     ["seq_lens[1]=49 is outside [0, 48]", "3 pages of 16 tokens"]),
    (lambda q, k, v, b, s: (q, k, v, b, torch.tensor([-1, 0], dtype=torch.int32)), {}, ["seq_lens[0]=-1"]),
    (lambda q, k, v, b, s: (q, k, v, torch.tensor([[0, 1, 2], [3, 6, 5]], dtype=torch.int32), s), {},
     ["block_table[1, 1]=6 is not a page id in [0, 6)", "request 1 has 40 tokens"]),
]


@pytest.mark.parametrize("mutate,kw,words", _BAD)
def test_flash_decode_rejects_bad_input_before_launch(mutate, kw, words):
    from triton_dist.ops.attention import flash_decode

    with pytest.raises(ValueError) as err:
        flash_decode(*mutate(*_operands()), **kw)
    msg = str(err.value)
    assert "\n" not in msg and msg.startswith("flash_decode: "), msg
    for w in words:
        assert w in msg, (w, msg)


class _Recorder:
    """Stands in for a kernel: ``kernel[grid](*args, **kw)`` records the launch."""

    def __init__(self):
        self.launches = []

    def __getitem__(self, grid):
        return lambda *args, **kw: self.launches.append((grid, args, kw))


def test_flash_decode_launch_reads_nothing_on_the_host(monkeypatch):
    """Inside a capture (or with check_lens=False) the lengths are not checked: the launch proceeds with a grid fixed
    by the shapes (B * Hkv * num_splits programs), whatever seq_lens holds; unused entries of the table are never
    checked either."""
    from triton_dist.ops import attention

    split, merge = _Recorder(), _Recorder()
    monkeypatch.setattr(attention, "flash_decode_split_kernel", split)
    monkeypatch.setattr(attention, "merge_partials_kernel", merge)
    q, k, v, bt, _ = _operands()
    bad_lens = torch.tensor([10 ** 6, -3], dtype=torch.int32)
    attention.flash_decode(q, k, v, bt, bad_lens, num_splits=3, check_lens=False)
    monkeypatch.setattr(attention, "_capturing", lambda: True)
    attention.flash_decode(q, k, v, bt, bad_lens, num_splits=1)
    assert [g for g, _, _ in split.launches] == [(2 * 2 * 3, ), (2 * 2 * 1, )]
    assert [g for g, _, _ in merge.launches] == [(2 * 4, )]  # one split: no merge
    assert split.launches[1][2]["DIRECT"] and not split.launches[0][2]["DIRECT"]
    # a table entry past a request's pages may hold anything
    bt[0, 1:] = -5
    attention.flash_decode(q, k, v, bt, torch.tensor([16, 40], dtype=torch.int32), num_splits=1)


def test_flash_decode_offsets_and_waves_reach_the_launch(monkeypatch):
    """``KV_I32`` is passed where both caches' element offsets fit in int32 and ``wide_offsets`` is off;
    ``DecodeConfig.resident`` selects pick_num_splits' waves rule (the grid), an explicit ``num_splits`` wins;
    ``merge_block_s`` sets the merge kernel's step."""
    import dataclasses

    from triton_dist.ops import attention

    split, merge = _Recorder(), _Recorder()
    monkeypatch.setattr(attention, "flash_decode_split_kernel", split)
    monkeypatch.setattr(attention, "merge_partials_kernel", merge)
    q, k, v, bt, sl = _operands()
    base = attention.pick_decode_config(64, 2, on_gpu=False)
    for mbs in (0, 4, 64):  # merge_block_s: the merge's step (0: the rule, 8 on the interpreter; at most pow2(9))
        attention.flash_decode(q, k, v, bt, sl, num_splits=9, config=dataclasses.replace(base, merge_block_s=mbs))
    assert [kw["BLOCK_S"] for _, _, kw in merge.launches] == [8, 4, 16]
    split.launches.clear()
    attention.flash_decode(q, k, v, bt, sl, num_splits=2, config=base)
    attention.flash_decode(q, k, v, bt, sl, num_splits=2, config=dataclasses.replace(base, wide_offsets=True))
    monkeypatch.setattr(attention, "kv_offsets_fit_int32", lambda kc, vc: False)
    attention.flash_decode(q, k, v, bt, sl, num_splits=2, config=base)
    assert [kw["KV_I32"] for _, _, kw in split.launches] == [True, False, False]
    split.launches.clear()
    long_bt = torch.zeros(1, 64, dtype=torch.int32)  # 1,024 tokens at most: 64 tiles of 16
    for resident, ns in ((0, None), (3, None), (3, 5)):
        cfg = dataclasses.replace(base, resident=resident)
        attention.flash_decode(q[:1], k, v, long_bt, sl[:1], config=cfg, num_splits=ns, check_lens=False)
    sms = attention.num_sms(q.device)
    want = [attention.pick_num_splits(1, 2, 1024, sms, 16), attention.pick_num_splits(1, 2, 1024, sms, 16, resident=3),
            5]
    assert [g[0] for g, _, _ in split.launches] == [2 * n for n in want]
    assert want[0] != want[1]
    with pytest.raises(ValueError, match="resident must be an int >= 0"):
        attention.flash_decode(q, k, v, bt, sl, config=dataclasses.replace(base, resident=-1))
    with pytest.raises(ValueError, match="wide_offsets must be a bool"):
        attention.flash_decode(q, k, v, bt, sl, config=dataclasses.replace(base, wide_offsets=1))
    with pytest.raises(ValueError, match="merge_block_s must be 0"):
        attention.flash_decode(q, k, v, bt, sl, config=dataclasses.replace(base, merge_block_s=3))


def test_kv_offsets_fit_int32():
    """The largest element offset of each cache decides (meta tensors: shapes and strides without storage)."""
    from triton_dist.ops.attention import INT32_OFFSETS_LIMIT, kv_offsets_fit_int32, max_element_offset

    def cache(pages, stride_page=16 * 8 * 128):
        return torch.empty_strided((pages, 16, 8, 128), (stride_page, 8 * 128, 128, 1), dtype=torch.bfloat16,
                                   device="meta")

    fits = INT32_OFFSETS_LIMIT // (16 * 8 * 128)  # 131,072 pages: offsets up to 2**31 - 1
    assert max_element_offset(cache(fits)) == INT32_OFFSETS_LIMIT - 1
    assert kv_offsets_fit_int32(cache(fits), cache(fits))
    assert not kv_offsets_fit_int32(cache(fits), cache(fits + 1))
    assert not kv_offsets_fit_int32(cache(fits + 1), cache(1))
    # a strided view (K and V interleaved in one [pages, 2, ...] buffer) counts its strides, not its element count
    assert not kv_offsets_fit_int32(cache(fits // 2 + 1, stride_page=2 * 16 * 8 * 128), cache(1))
    assert max_element_offset(cache(0)) == -1 and kv_offsets_fit_int32(cache(0), cache(0))


@pytest.mark.parametrize("args,kw,words", [
    ((torch.zeros(2, 3, 4), torch.zeros(2, 3)), {}, ["outs must be 4-D [S, B, H, D]"]),
    ((torch.zeros(2, 1, 3, 4), torch.zeros(2, 1, 3, dtype=torch.float16)), {},
     ["lses must be float32 [S=2, B=1, H=3]"]),
    ((torch.zeros(2, 1, 3, 4), torch.zeros(2, 3)), {}, ["lses must be float32"]),
    ((torch.zeros(2, 1, 3, 4, dtype=torch.int32), torch.zeros(2, 1, 3)), {}, ["outs.dtype=torch.int32"]),
    ((torch.zeros(0, 1, 3, 4), torch.zeros(0, 1, 3)), {}, ["S=0"]),
    ((torch.zeros(2, 1, 4, 3).transpose(2, 3), torch.zeros(2, 1, 3)), {}, ["unit stride along D"]),
    ((torch.zeros(2, 1, 3, 4), torch.zeros(2, 1, 3)), {"out": torch.zeros(1, 3, 5)}, ["out must be"]),
    ((torch.zeros(2, 1, 3, 4), torch.zeros(2, 1, 3)), {"out_dtype": torch.int8}, ["out_dtype=torch.int8"]),
])
def test_merge_rejects_bad_input_before_launch(args, kw, words):
    from triton_dist.ops.attention import merge_attention_partials

    with pytest.raises(ValueError) as err:
        merge_attention_partials(*args, **kw)
    msg = str(err.value)
    assert "\n" not in msg and msg.startswith("merge_attention_partials: "), msg
    for w in words:
        assert w in msg, (w, msg)


def test_pick_num_splits_and_config():
    from triton_dist.ops.attention import MAX_SPLITS, pick_decode_config, pick_num_splits

    # 132 SMs, 32 q / 8 kv heads, 64-token tiles: splits of about 16 tiles of the longest request, at least 4
    # programs per SM, each split at least 4 tiles
    assert pick_num_splits(1, 8, 131072, 132, 64) == 128
    assert pick_num_splits(8, 8, 131072, 132, 64) == 128
    assert pick_num_splits(1, 8, 32768, 132, 64) == 66  # 4 programs per SM
    assert pick_num_splits(8, 8, 32768, 132, 64) == 32
    assert pick_num_splits(1, 8, 512, 132, 64) == 2  # 8 tiles: at least 4 a split
    assert pick_num_splits(256, 8, 256, 132, 64) == 1
    assert pick_num_splits(1, 1, 10 ** 7, 1000, 64) == MAX_SPLITS
    assert pick_num_splits(4, 2, 0, 132, 64) == 1  # no tokens at all: one (empty) split
    # the waves rule (resident programs per SM): the fewest tiles per split (>= 4) whose programs fill the waves
    # that splits of 16 tiles need; 132 SMs x 3, 8 kv heads, 128-token tiles
    for B, L, want in ((1, 32768, 43), (1, 131072, 94), (8, 32768, 18), (8, 131072, 64)):
        splits = pick_num_splits(B, 8, L, 132, 128, resident=3)
        tiles = L // 128
        per = -(-tiles // splits)
        assert splits == want and -(-tiles // per) == splits, (B, L, splits)  # every split holds tokens
        programs, slots = B * 8 * splits, 3 * 132
        assert -(-programs // slots) == -(-B * 8 * (tiles // 16) // slots), (B, L)  # no more waves than at 16
    assert pick_num_splits(1, 8, 32768, 132, 128, resident=2) == 32  # 256 programs of 8 tiles: one wave of 264
    assert pick_num_splits(1, 8, 512, 132, 128, resident=3) == 1  # 4 tiles: at least 4 a split
    assert pick_num_splits(1, 8, 100, 132, 128, resident=3) == 1
    assert pick_num_splits(4, 2, 0, 132, 64, resident=3) == 1
    assert pick_num_splits(1, 1, 10 ** 7, 1000, 64, resident=3) == MAX_SPLITS
    assert pick_decode_config(128, 4, on_gpu=True) == pick_decode_config(128, 16, on_gpu=True)
    assert pick_decode_config(128, 4, on_gpu=True).BLOCK_G == 16
    assert pick_decode_config(64, 32, on_gpu=True).BLOCK_G == 32
    assert pick_decode_config(64, 1, on_gpu=False).BLOCK_N == 16


# q, k, v, block_table, seq_lens, part_out, part_lse, out, lse, qk_scale, num_kv_heads, num_splits, max_pages,
# num_pages, stride_qb, stride_qh, stride_kp, stride_kt, stride_kh, stride_vp, stride_vt, stride_vh, stride_btb,
# stride_ob, stride_oh, then G, BLOCK_G, D, PAGE, BLOCK_N, DIRECT
SPLIT_SIG = "*bf16:16, *bf16:16, *bf16:16, *i32:16, *i32:16, *fp32:16, *fp32:16, *bf16:16, *fp32:16, fp32, i32, " \
            "i32, i32, i32, i32:16, i32:16, i32:16, i32:16, i32:16, i32:16, i32:16, i32:16, i32, i32:16, i32:16"
# parts, lses, out, lse, seq_lens, num_parts, num_heads, head_dim, max_len, stride_ps, stride_pb, stride_ph,
# stride_ls, stride_lb, stride_lh, stride_ob, stride_oh, then BLOCK_S, BLOCK_D, FROM_SPLITS, SPLIT_BLOCK_N
MERGE_SIG = "*fp32:16, *fp32:16, *bf16:16, *fp32:16, *i32:16, i32, i32, i32:16, i32, i32:16, i32:16, i32:16, i32, " \
            "i32, i32, i32:16, i32:16"


_TYPES = {torch.bfloat16: "bf16", torch.float16: "fp16", torch.float32: "fp32", torch.int32: "i32"}


def _tool_args_of_launch(args, kw):
    """``(signature, options)``: the compile tool's ``-s`` and its ``-D`` / option arguments that compile what one
    recorded split-kernel launch runs, specialised as Triton's launch specialises it: a tensor is a pointer of its
    dtype, 16-byte aligned (the CUDA caching allocator's blocks are; meta tensors stand in for them here); an int is
    the constexpr 1 where it is 1, ``i32:16`` where divisible by 16, else ``i32``; a float is ``fp32``; keyword
    constexprs are ``-D``."""
    from triton_dist.kernels.flash_decode import flash_decode_split_kernel as kernel

    def entry(a):
        if isinstance(a, torch.Tensor):
            return f"*{_TYPES[a.dtype]}:16"
        if isinstance(a, float):
            return "fp32"
        if isinstance(a, int) and not isinstance(a, bool):
            assert -2 ** 31 <= a < 2 ** 31, a
            return "1" if a == 1 else "i32:16" if a % 16 == 0 else "i32"
        raise AssertionError(f"argument {a!r}")

    kw = dict(kw)
    opts = ["--num-warps", str(kw.pop("num_warps")), "--num-stages", str(kw.pop("num_stages"))]
    sig, defines, skipped = [entry(a) for a in args], [], []
    for param in kernel.params[len(args):]:  # keywords in the kernel's order: runtime ones extend the signature
        if param.name not in kw:
            skipped.append(param.name)
        elif param.is_constexpr:
            defines += ["-D", f"{param.name}={kw.pop(param.name)}"]
        else:  # the tool fills the parameters not set by -D in order: none may be left out before this one
            assert not skipped, (param.name, skipped)
            sig.append(entry(kw.pop(param.name)))
    assert not kw, kw
    return ", ".join(sig), defines + opts


def _split_launch(monkeypatch, B=1, tokens=32768, Hq=32, Hkv=8, D=128, page=16, config=None, sms=132):
    """The split kernel's launch (args, keywords) of ``flash_decode`` on a GPU at this shape, recorded from meta
    tensors (no memory, nothing runs): the GPU's tiling (``pick_decode_config(on_gpu=True)``) and split count
    (``pick_num_splits`` for ``sms`` SMs) unless ``config`` says otherwise."""
    from triton_dist.ops import attention

    split = _Recorder()
    monkeypatch.setattr(attention, "flash_decode_split_kernel", split)
    monkeypatch.setattr(attention, "merge_partials_kernel", _Recorder())
    cfg = config or attention.pick_decode_config(D, Hq // Hkv, on_gpu=True)
    pages = B * tokens // page
    meta = {"device": "meta", "dtype": torch.bfloat16}
    q = torch.empty(B, Hq, D, **meta)
    k = torch.empty(pages, page, Hkv, D, **meta)
    v = torch.empty(pages, page, Hkv, D, **meta)
    bt = torch.empty(B, tokens // page, device="meta", dtype=torch.int32)
    sl = torch.empty(B, device="meta", dtype=torch.int32)
    ns = attention.pick_num_splits(B, Hkv, tokens, sms, cfg.BLOCK_N, resident=cfg.resident)
    attention.flash_decode(q, k, v, bt, sl, num_splits=ns, config=cfg, check_lens=False)
    (grid, args, kw), = split.launches
    return grid[0], args, kw


def _resources(args, kw):
    sig, options = _tool_args_of_launch(args, kw)
    res = compile_kernel("flash_decode.py", "flash_decode_split_kernel", sig, "cuda:90", *options, "--resources")
    assert res.returncode == 0, res.stderr[-3000:]
    return json.loads(res.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("page", [16, 1, 64])
def test_split_kernel_occupancy_on_sm90(monkeypatch, page):
    """The split kernel as ``flash_decode`` launches it on an H100 / H200 for the issue's shape (batch 1, 32K
    tokens, 32 q / 8 kv heads, D 128, bf16; pages of 16, and 1 and 64), compiled for cuda:90 here with ptxas:
    three programs fit an SM (int32 K/V row offsets: ~126 registers a thread at 4 warps, the 72.5 KiB of shared
    memory then the bound; with int64 offsets 189 registers allowed two), nothing spills; the grid at 132 SMs:
    64 splits x 8 kv heads (docs/attention.md, "Occupancy and the split rule")."""
    programs, args, kw = _split_launch(monkeypatch, page=page)
    assert programs == 8 * 64 and kw["KV_I32"] is True and kw["num_warps"] == 4 and kw["num_stages"] == 3
    res = _resources(args, kw)
    assert res["spill_stores"] == 0 and res["spill_loads"] == 0, res
    assert res["programs_per_sm"] == 3, res
    assert res["bound_by"]["regs"] >= 3 and res["registers"] <= 168, res  # 168: the most that still fits 3
    if page == 16:  # the former int64 offsets (wide_offsets) cost registers: why the int32 ones are the default
        import dataclasses

        from triton_dist.ops.attention import pick_decode_config

        wide_cfg = dataclasses.replace(pick_decode_config(128, 4, on_gpu=True), wide_offsets=True)
        _, args, kw = _split_launch(monkeypatch, page=page, config=wide_cfg)
        assert kw["KV_I32"] is False
        wide = _resources(args, kw)
        assert wide["registers"] > res["registers"] and wide["shared"] == res["shared"], (wide, res)


NV_ATOMICS = [r"\batom\.", r"\bred\."]
AMD_ATOMICS = [r"_atomic_"]


@pytest.mark.parametrize("target,kernel,sig,expect,absent", [
    # GQA 4 (16 MMA rows), 16-token pages under 64-token tiles: 16-byte asynchronous copies of K / V (pipelined),
    # mma.sync m16n8k16 (a 16-row dot is below wgmma's 64 rows per warp group)
    ("cuda:90", "flash_decode_split_kernel", SPLIT_SIG + ", 4, 16, 128, 16, 64, False",
     ["cp.async.cg.shared.global", "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32"], NV_ATOMICS),
    # 64 MMA rows (BLOCK_G 64): wgmma
    ("cuda:90", "flash_decode_split_kernel", SPLIT_SIG + ", 4, 64, 128, 64, 64, True",
     ["wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16"], NV_ATOMICS),
    ("hip:gfx942", "flash_decode_split_kernel", SPLIT_SIG + ", 4, 16, 128, 16, 64, False",
     ["v_mfma_f32_16x16x16_bf16"], AMD_ATOMICS),
    ("cuda:90", "merge_partials_kernel", MERGE_SIG + ", 16, 128, True, 64", ["ex2.approx.f32", "ld.global.v4.b32"],
     NV_ATOMICS),
    ("hip:gfx942", "merge_partials_kernel", MERGE_SIG + ", 16, 128, False, 64", ["v_exp_f32", "v_log_f32"],
     AMD_ATOMICS),
])
def test_flash_decode_compiles_for_every_target(target, kernel, sig, expect, absent):
    res = compile_kernel("flash_decode.py", kernel, sig, target, "--num-warps", "4", "--num-stages",
                         "3" if target == "cuda:90" else "2")
    assert res.returncode == 0, res.stderr[-3000:]
    for s in expect:
        assert s in res.stdout, (target, kernel, s)
    for s in absent:
        assert not re.search(s, res.stdout), (target, kernel, s)
