"""Split-KV decode attention over a paged KV cache (triton_dist.ops.attention.flash_decode over
triton_dist.kernels.flash_decode) and the merge of attention partials (merge_attention_partials): results under the
interpreter against a plain fp32 torch reference (GQA ratios 1, 3 and 4, D 64 and 128, page sizes 1 / 16 / 64, lengths
0, 1 and not a multiple of the page, shuffled page ids, bf16 and fp16, one split, several, more splits than a request
has pages, tiles spanning several pages, strided K / V views), ``out`` and ``lse`` both; the merge with empty (-inf)
partials whose outputs hold NaN; the torch.library ops under torch.compile; the host checks; the split rule; and
compilation of both kernels for cuda:90 and hip:gfx942 in fresh processes."""
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
