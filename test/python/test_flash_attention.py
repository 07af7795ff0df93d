"""Prefill flash attention over K/V chunks (triton_dist.ops.attention_prefill over
triton_dist.kernels.flash_attention): results under the interpreter against a plain fp32 torch reference (explicit
mask, softmax) -- causal and not, GQA groups 1 and 2, D 64 and 128, lengths that are not multiples of the block,
global offsets (a query block in the middle of a sequence against an earlier chunk, its own chunk, a straddling one,
a later one), the lse-weighted merge of chunks against one call, bf16 and fp16, strided views --, the host checks,
and compilation for cuda:90 (TMA + wgmma) and hip:gfx942 (MFMA) in fresh processes."""
import os

import pytest
import torch
from _subprocess_runs import assert_script_says, compile_kernel

_INTERP_SCRIPT = r"""
import os
os.environ["TRITON_INTERPRET"] = "1"
import torch
from triton_dist.ops.attention_prefill import (AttentionConfig, flash_attention, flash_attention_partial,
                                             merge_chunk_partials)

fails = []
torch.manual_seed(0)

def reference(q, k, v, causal, scale, q_start, kv_start):
    # plain fp32 attention with an explicit mask; rows without a visible key: out 0, lse -inf
    B, Lq, Hq, D = q.shape
    g = Hq // k.shape[2]
    kk = k.float().repeat_interleave(g, dim=2)
    vv = v.float().repeat_interleave(g, dim=2)
    s = torch.einsum("bihd,bjhd->bhij", q.float(), kk) * scale
    if causal:
        qpos = q_start + torch.arange(Lq)[:, None]
        kpos = kv_start + torch.arange(k.shape[1])[None, :]
        s = s.masked_fill(kpos > qpos, float("-inf"))
    lse = torch.logsumexp(s, dim=-1)  # [B, Hq, Lq]
    p = torch.softmax(s, dim=-1).nan_to_num(0.0)
    return torch.einsum("bhij,bjhd->bihd", p, vv), lse

def tol(dtype):
    return 3e-2 if dtype == torch.bfloat16 else 4e-3

def compare(name, out, lse, want_out, want_lse, dtype):
    if out.dtype != dtype:
        fails.append(f"{name}: out dtype {out.dtype}")
        return
    err = (out.float() - want_out).abs().max().item() if out.numel() else 0.0
    if err > tol(dtype):
        fails.append(f"{name}: out max err {err}")
    if lse is not None:
        if lse.dtype != torch.float32 or lse.shape != want_lse.shape:
            fails.append(f"{name}: lse {lse.dtype} {tuple(lse.shape)}")
            return
        if not torch.equal(torch.isneginf(lse), torch.isneginf(want_lse)):
            fails.append(f"{name}: lse -inf rows differ")
            return
        fin = torch.isfinite(want_lse)
        lerr = (lse[fin] - want_lse[fin]).abs().max().item() if bool(fin.any()) else 0.0
        if lerr > 1e-4:
            fails.append(f"{name}: lse max err {lerr}")

def rand(*shape, dtype=torch.bfloat16):
    return torch.randn(*shape).to(dtype)

def case(name, B, Lq, Lkv, Hq, Hkv, D, causal=True, q_start=0, kv_start=0, dtype=torch.bfloat16, scale=None,
         config=None):
    q, k, v = rand(B, Lq, Hq, D, dtype=dtype), rand(B, Lkv, Hkv, D, dtype=dtype), rand(B, Lkv, Hkv, D, dtype=dtype)
    out, lse = flash_attention(q, k, v, causal=causal, scale=scale, q_start=q_start, kv_start=kv_start,
                               return_lse=True, config=config)
    want_out, want_lse = reference(q, k, v, causal, scale or D ** -0.5, q_start, kv_start)
    compare(name, out, lse, want_out, want_lse, dtype)
    return q, k, v, out, lse

# self-attention from position 0, lengths not multiples of the 16-row tiles
q, k, v, out, _ = case("causal, GQA 1, D 64, 2 sequences", 2, 37, 37, 1, 1, 64)
if not torch.equal(flash_attention(q, k, v), out):
    fails.append("return_lse=False gives another out")
case("causal, GQA 2, D 128", 1, 35, 35, 2, 1, 128)
case("not causal, GQA 2, D 64, Lq != Lkv", 1, 21, 35, 2, 1, 64, causal=False)
case("not causal, GQA 1, D 128", 2, 17, 9, 1, 1, 128, causal=False)
case("causal, fp16, explicit scale", 1, 20, 20, 1, 1, 64, dtype=torch.float16, scale=0.3)
case("one query row, one key", 1, 1, 1, 1, 1, 64)

# a query block in the middle of a sequence (positions 48..71) against chunks of K/V at other positions
case("earlier chunk: every key visible", 1, 24, 40, 1, 1, 64, q_start=48, kv_start=0)
case("its own chunk: the diagonal", 1, 24, 24, 1, 1, 64, q_start=48, kv_start=48)
# straddling chunks; diag = q_start - kv_start = 14, 15, 1 (mod 16) puts a tile edge next to the diagonal
case("straddling chunk, GQA 2, diag 14", 1, 24, 40, 2, 1, 128, q_start=48, kv_start=34)
case("straddling chunk, diag 15", 1, 24, 40, 1, 1, 64, q_start=48, kv_start=33)
case("straddling chunk, diag 1", 1, 24, 30, 1, 1, 64, q_start=48, kv_start=47)
case("chunk starting mid-block: the first rows see nothing", 1, 24, 30, 1, 1, 64, q_start=48, kv_start=56)
q, k, v, out, lse = case("later chunk: nothing visible", 1, 24, 20, 2, 1, 64, q_start=48, kv_start=72)
if not (torch.equal(out.float(), torch.zeros_like(out.float())) and bool(torch.isneginf(lse).all())):
    fails.append("later chunk: out must be 0 and lse -inf")
case("later chunk, not causal: all visible", 1, 24, 20, 1, 1, 64, causal=False, q_start=48, kv_start=72)
# tiles of other shapes: a diagonal band of several key tiles (BLOCK_M = 2 BLOCK_N, as on AMD), and key tiles
# wider than the query tile
case("32 x 16 tiles", 1, 45, 50, 1, 1, 64, q_start=20, kv_start=3, config=AttentionConfig(32, 16, 4, 1))
case("16 x 32 tiles", 1, 40, 45, 1, 1, 64, q_start=10, kv_start=0, config=AttentionConfig(16, 32, 4, 1))

# chunked K/V merged by lse == one call over the concatenation (and the reference)
for D, Hq, Hkv, bounds in ((64, 2, 1, (0, 25, 50, 70)), (128, 1, 1, (0, 40, 70))):
    B, q_start, Lq = 1, 40, 30  # queries at positions 40..69, keys 0..69
    q, k, v = rand(B, Lq, Hq, D), rand(B, bounds[-1], Hkv, D), rand(B, bounds[-1], Hkv, D)
    whole, whole_lse = flash_attention(q, k, v, q_start=q_start, return_lse=True)
    parts = [flash_attention_partial(q, k[:, lo:hi], v[:, lo:hi], q_start=q_start, kv_start=lo)
             for lo, hi in zip(bounds[:-1], bounds[1:])]
    merged, merged_lse = merge_chunk_partials([p[0] for p in parts], [p[1] for p in parts])
    want_out, want_lse = reference(q, k, v, True, D ** -0.5, q_start, 0)
    name = f"merge of {len(parts)} chunks, D {D}"
    compare(name + " (one call)", whole, whole_lse, want_out, want_lse, torch.bfloat16)
    compare(name, merged, merged_lse, want_out, want_lse, torch.bfloat16)
    if (merged_lse - whole_lse).abs().max().item() > 1e-4 or \
            (merged.float() - whole.float()).abs().max().item() > 3e-2:
        fails.append(f"{name}: differs from one call")
# the merge with a chunk that no query sees (lse -inf everywhere) changes nothing
q, k, v = rand(1, 20, 1, 64), rand(1, 36, 1, 64), rand(1, 36, 1, 64)
a = flash_attention_partial(q, k[:, :20], v[:, :20], q_start=0, kv_start=0)
b = flash_attention_partial(q, k[:, 20:], v[:, 20:], q_start=0, kv_start=20)
m_out, m_lse = merge_chunk_partials([a[0], b[0]], [a[1], b[1]])
if not bool(torch.isneginf(b[1]).all()) or not torch.equal(m_out, a[0]) or not torch.equal(m_lse, a[1]):
    fails.append("merge with an invisible chunk")

# strided views (q, k, v slices of one packed [B, L, Hq + 2 Hkv, D] tensor) and out=
packed = rand(2, 19, 2 + 2 * 1, 64)
q, k, v = packed[:, :, :2], packed[:, :, 2:3], packed[:, :, 3:]
dest = torch.full((2, 19, 2, 64), 7.0, dtype=torch.bfloat16)
got = flash_attention(q, k, v, out=dest)
want_out, _ = reference(q, k, v, True, 64 ** -0.5, 0, 0)
if got is not dest:
    fails.append("out= is not returned")
compare("packed qkv views, out=", got, None, want_out, None, torch.bfloat16)

# the jit building blocks as a fused kernel uses them: the state carried across chunks of one K/V buffer (21 rows
# each: not a multiple of the 16-key tiles), last chunk first, against one call
import sys
sys.path.insert(0, TEST_DIR)
from _flash_attention_kernels import chunked_attention_kernel
for causal, q_start in ((True, 30), (False, 0)):
    q, k, v = rand(2, 26, 2, 64), rand(2, 60, 1, 64), rand(2, 60, 1, 64)
    out, lse = torch.empty_like(q), torch.empty(2, 2, 26)
    chunked_attention_kernel[(4, 2)](q, k, v, out, lse, 2, 1, 26, 60, q_start, 64 ** -0.5 * 1.4426950408889634, 21,
                                     *q.stride()[:3], *k.stride()[:3], *out.stride()[:3], HEAD_D=64, BLOCK_M=16,
                                     BLOCK_N=16, CAUSAL=causal)
    want_out, want_lse = reference(q, k, v, causal, 64 ** -0.5, q_start, 0)
    compare(f"building blocks over 3 chunks, causal={causal}", out, lse, want_out, want_lse, torch.bfloat16)

# no keys at all: out 0, lse -inf (no launch)
q = rand(1, 5, 2, 64)
out, lse = flash_attention(q, rand(1, 0, 1, 64), rand(1, 0, 1, 64), return_lse=True)
if not (bool((out == 0).all()) and bool(torch.isneginf(lse).all()) and lse.shape == (1, 2, 5)):
    fails.append("Lkv == 0")

# torch.compile (fullgraph): the registered op, the same bits as eager
def step(q, k, v):
    o, l = flash_attention(q, k, v, q_start=3, return_lse=True)
    return o.float() * 2, l
q, k, v = rand(1, 9, 2, 64), rand(1, 12, 1, 64), rand(1, 12, 1, 64)
for name, e, c in zip(("out", "lse"), step(q, k, v), torch.compile(step, backend="aot_eager", fullgraph=True)(q, k, v)):
    if not torch.equal(e, c):
        fails.append(f"torch.compile: {name} differs")
print("FAILS", fails)
"""


def test_flash_attention_under_interpreter():
    script = _INTERP_SCRIPT.replace("TEST_DIR", repr(os.path.dirname(os.path.abspath(__file__))))
    assert_script_says(script, "FAILS []")


def _qkv(B=1, Lq=8, Lkv=8, Hq=4, Hkv=2, D=64, dtype=torch.bfloat16):
    return (torch.zeros(B, Lq, Hq, D, dtype=dtype), torch.zeros(B, Lkv, Hkv, D, dtype=dtype),
            torch.zeros(B, Lkv, Hkv, D, dtype=dtype))


@pytest.mark.parametrize("mutate,kw,words", [
    (lambda q, k, v: (q.float(), k, v), {}, ["q.dtype=torch.float32", "accepted: bfloat16, float16"]),
    (lambda q, k, v: (q, k.half(), v), {}, ["share a dtype"]),
    (lambda q, k, v: (q[0], k, v), {}, ["4-D [B, L, H, D]"]),
    (lambda q, k, v: (q, k, v[:, :4]), {}, ["same shape"]),
    (lambda q, k, v: (torch.zeros(2, 8, 4, 64, dtype=torch.bfloat16), k, v), {}, ["batch"]),
    (lambda q, k, v: (q, k[..., :32].contiguous(), v[..., :32].contiguous()), {}, ["head dim"]),
    (lambda q, k, v: (*_qkv(D=96)[:1], *_qkv(D=96)[1:]), {}, ["D=96", "64, 128"]),
    (lambda q, k, v: (torch.zeros(1, 8, 3, 64, dtype=torch.bfloat16), k, v), {}, ["Hq=3", "Hkv=2", "multiple"]),
    (lambda q, k, v: (q.transpose(2, 3).contiguous().transpose(2, 3), k, v), {}, ["unit stride along D"]),
    (lambda q, k, v: (q, k, v), {"q_start": -1}, ["q_start=-1", "non-negative"]),
    (lambda q, k, v: (q, k, v), {"kv_start": 2.0}, ["kv_start", "non-negative int"]),
    (lambda q, k, v: (q, k, v), {"kv_start": True}, ["kv_start", "non-negative int"]),
    (lambda q, k, v: (q, k, v), {"q_start": 2 ** 30}, ["q_start + Lq"]),
    (lambda q, k, v: (q, k, v), {"scale": 0.0}, ["scale=0.0", "positive"]),
    (lambda q, k, v: (q, k, v), {"scale": float("nan")}, ["scale=nan"]),
    (lambda q, k, v: (q, k, v), {"causal": 1}, ["causal must be a bool"]),
    (lambda q, k, v: (q, k, v), {"return_lse": None}, ["return_lse must be a bool"]),
    (lambda q, k, v: (q, k, v), {"out": torch.zeros(1, 8, 4, 64)}, ["out must be a torch.bfloat16"]),
    (lambda q, k, v: (q, k, v), {"out": torch.zeros(1, 8, 2, 64, dtype=torch.bfloat16)}, ["q's shape"]),
    (lambda q, k, v: (q, k, v), {"config": (16, 16, 4, 1)}, ["AttentionConfig"]),
    (lambda q, k, v: (q, k, "v"), {}, ["v must be a torch.Tensor"]),
])
def test_flash_attention_rejects_bad_input_before_launch(mutate, kw, words):
    from triton_dist.ops.attention_prefill import flash_attention

    q, k, v = mutate(*_qkv())
    with pytest.raises(ValueError) as err:
        flash_attention(q, k, v, **kw)
    msg = str(err.value)
    assert "\n" not in msg and msg.startswith("flash_attention: "), msg
    for w in words:
        assert w in msg, (w, msg)


def test_flash_attention_partial_and_merge_check_their_arguments():
    from triton_dist.ops.attention_prefill import flash_attention_partial, merge_chunk_partials

    q, k, v = _qkv()
    with pytest.raises(ValueError, match="do not pass return_lse"):
        flash_attention_partial(q, k, v, return_lse=False)
    with pytest.raises(ValueError, match="as many lse"):
        merge_chunk_partials([q], [])
    with pytest.raises(ValueError, match="do not match"):
        merge_chunk_partials([q], [torch.zeros(1, 8, 4)])


def test_pick_attention_config():
    from triton_dist.ops.attention_prefill import SIM_CONFIG, AttentionConfig, pick_attention_config

    assert pick_attention_config(8192, 128, on_gpu=False) == SIM_CONFIG
    assert pick_attention_config(8192, 128, on_gpu=True, cc=90) == AttentionConfig(128, 128, 8, 2)
    assert pick_attention_config(8192, 64, on_gpu=True, cc=90) == AttentionConfig(128, 128, 8, 3)
    assert pick_attention_config(8192, 128, on_gpu=True, cc=80) == AttentionConfig(128, 64, 8, 2)
    assert pick_attention_config(8192, 128, on_gpu=True, cc=94, hip=True) == AttentionConfig(128, 64, 4, 2)
    assert pick_attention_config(32, 128, on_gpu=True, cc=90).BLOCK_M == 64
    with pytest.raises(ValueError, match="power of two"):
        AttentionConfig(48, 64, 4, 2)
    with pytest.raises(ValueError, match="num_warps"):
        AttentionConfig(64, 64, 3, 2)


# q, k, v, out, lse, B, H_Q, H_KV, Lq, Lkv, diag, qk_scale, 12 strides (q, k, v, out: batch, sequence, head)
SIG = "*bf16:16, *bf16:16, *bf16:16, *bf16:16, *fp32:16, i32, i32, i32, i32, i32, i32, fp32, " + \
    ", ".join(["i32:16"] * 12)


@pytest.mark.parametrize("target,extra,warps,stages,expect", [
    # sm_90: 4-D descriptors for q / k / v, both MMAs on wgmma (128-key steps: n128 for q.k^T, D=128 for p.v)
    ("cuda:90", ", 128, 128, 128, True, True, True", 8, 2,
     ["cp.async.bulk.tensor.4d", "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16", "ex2.approx"]),
    ("hip:gfx942", ", 128, 128, 64, True, False, True", 4, 2, ["v_mfma_f32", "v_exp_f32"]),
])
def test_flash_attention_compiles_for_every_target(target, extra, warps, stages, expect):
    res = compile_kernel("flash_attention.py", "flash_attention_kernel", SIG + extra, target, "--num-warps",
                         str(warps), "--num-stages", str(stages))
    assert res.returncode == 0, res.stderr[-3000:]
    for s in expect:
        assert s in res.stdout, (target, s)
