"""The MoE routing layout on one device (ops.moe_route / ops.moe_combine) and the MoE layer at expert parallelism 1
(layers.moe_forward: route -> group_gemm -> SiLU gate -> group_gemm -> combine) under the interpreter: the layout
against a stable sort done in torch (several routing blocks, more experts than one scan step, experts without
tokens, every token to one expert, top-1 and top-8), per-expert distinct functions (expert e scales by e + 1), so a
token sent to the wrong expert or combined with the wrong weight fails; out-of-range ids refused, or left out of the
sum when the check is skipped; torch.compile over the registered ops; compilation for cuda:90 and hip:gfx942."""
import os
import sys

import pytest
import torch
from _subprocess_runs import ROOT, assert_script_says, compile_kernel

_INTERP_SCRIPT = r"""
import os
os.environ["TRITON_INTERPRET"] = "1"
import torch
from triton_dist import ops
from triton_dist.layers import moe_forward, moe_reference

fails = []
torch.manual_seed(0)

def q(shape, dtype=torch.bfloat16):
    return (torch.randint(-4, 5, shape).float() / 4).to(dtype)

def routing(T, k, E, gen, empty=(), only=None, dtype=torch.int64):
    if only is not None:
        return torch.full((T, k), only, dtype=dtype)
    scores = torch.rand(T, E, generator=gen)
    scores[:, list(empty)] = -1.0
    return scores.topk(k, dim=1).indices.to(dtype)

def check_layout(name, T, k, E, H, **kw):
    gen = torch.Generator().manual_seed(T * 31 + k)
    idx = routing(T, k, E, gen, **kw)
    x = q((T, H))
    w = torch.rand(T, k, generator=gen)
    tokens, offs, _, r = ops.moe_route(x, idx, w, E)
    flat = idx.flatten()
    order = torch.sort(flat, stable=True).indices      # pairs by expert, in pair order within an expert
    want_dest = torch.empty_like(order)
    want_dest[order] = torch.arange(order.numel())
    want_offs = torch.bincount(flat, minlength=E).cumsum(0).to(torch.int32)
    if not torch.equal(offs, want_offs):
        fails.append(f"{name}: offsets {offs.tolist()[:8]} want {want_offs.tolist()[:8]}")
    if not torch.equal(r.dest_rows.flatten().long(), want_dest):
        fails.append(f"{name}: dest rows differ from the stable sort")
    if not torch.equal(tokens, x.repeat_interleave(k, dim=0)[order]):
        fails.append(f"{name}: token rows differ")
    # expert e scales by (e + 1): combine must give sum_j w[t, j] * (idx[t, j] + 1) * x[t]
    scale = torch.repeat_interleave(torch.arange(E) + 1, torch.bincount(flat, minlength=E))
    eo = (tokens.float() * scale[:, None]).to(torch.float32)
    got = ops.moe_combine(eo, r)
    want = (w * (idx.float() + 1)).sum(1, keepdim=True) * x.float()
    if not torch.allclose(got, want, rtol=1e-5, atol=1e-5):
        fails.append(f"{name}: combine max err {(got - want).abs().max().item()}")

check_layout("3 blocks, top-4", 40, 4, 9, 24)
check_layout("70 experts (two steps of the totals' scan), empty experts", 37, 8, 70, 16, empty=(0, 5, 69))
check_layout("every token to expert 6", 21, 2, 7, 16, only=6)
check_layout("top-1, int32 ids", 50, 1, 5, 16, dtype=torch.int32)
check_layout("260 blocks (two steps of an expert's block scan)", 4150, 4, 6, 8)
check_layout("one token", 1, 3, 4, 300)

# out-of-range ids: refused by default; with the check skipped, left out of the sum (never out of bounds)
x, w = q((6, 16)), torch.ones(6, 2)
idx = torch.tensor([[0, 1], [1, 9], [2, -1], [0, 2], [5, 1], [2, 2]])
try:
    ops.moe_route(x, idx, w, 3)
    fails.append("bad ids not refused")
except ValueError as exc:
    if "topk_idx[1, 1]=9" not in str(exc):
        fails.append(f"bad ids message: {exc}")
tokens, offs, _, r = ops.moe_route(x, idx, w, 3, check_ids=False)
ok = (idx >= 0) & (idx < 3)
want_offs = torch.bincount(idx[ok], minlength=3).cumsum(0).to(torch.int32)
got = ops.moe_combine(tokens.float(), r)
if not torch.equal(offs, want_offs) or not torch.equal(got, ok.sum(1, keepdim=True).float() * x.float()):
    fails.append("out-of-range ids with the check skipped")

# fp8 routing: e4m3 rows with one scale per 128 columns (the group_gemm's scale_a), then the fp8 grouped GEMM
T, k, E, H, N = 9, 2, 3, 256, 32
gen = torch.Generator().manual_seed(3)
idx = routing(T, k, E, gen)
x = (torch.randn(T, H, generator=gen) * torch.linspace(0.01, 30, H)).to(torch.bfloat16)
x[2, :128] = 0  # an all-zero group: zero codes, a tiny scale
w = torch.rand(T, k, generator=gen)
t8, offs, sc, r = ops.moe_route(x, idx, w, E, quant="fp8")
plain, offs2, none, r2 = ops.moe_route(x, idx, w, E)
deq = t8.float() * sc.repeat_interleave(128, dim=1)
# e4m3: half an ulp is 2**-4 of a normal value; below 2**-6 (subnormal codes) the step is 2**-9 of the scale
excess = (deq - plain.float()).abs() - plain.float().abs() * 2.0 ** -4 - sc.repeat_interleave(128, dim=1) * 2.0 ** -10
if t8.dtype != torch.float8_e4m3fn or sc.shape != (T * k, 2) or none is not None or not torch.equal(offs, offs2):
    fails.append(f"fp8 route: dtype {t8.dtype}, scales {tuple(sc.shape)}")
elif excess.max().item() > 0 or bool((deq[plain.float() == 0] != 0).any()):
    fails.append(f"fp8 route: dequantized rows off by {excess.max().item()} more than e4m3 rounds")
# more than one routing block and column chunk (the second partial): codes and scales as torch computes them
xb = torch.randn(40, 384, generator=gen).to(torch.bfloat16)
ib = routing(40, 2, 5, gen)
t8b, _, scb, _ = ops.moe_route(xb, ib, torch.ones(40, 2), 5, quant="fp8")
rows_b, _, _, _ = ops.moe_route(xb, ib, torch.ones(40, 2), 5)
want_sc = rows_b.float().abs().view(80, 3, 128).amax(2).clamp_min(1e-12) / 448
want_q = (rows_b.float().view(80, 3, 128) / want_sc[:, :, None]).view(80, 384).to(torch.float8_e4m3fn)
if not torch.allclose(scb, want_sc, rtol=1e-6, atol=0) or \
        (t8b.float() - want_q.float()).abs().gt(want_q.float().abs() * 2.0 ** -3).any():
    fails.append("fp8 route over two blocks and column chunks")
w8 = (torch.randn(E, H, N, generator=gen)).to(torch.float8_e4m3fn)
sb = torch.rand(E, 2, 1, generator=gen) + 0.5
got = ops.group_gemm(t8, w8, offs, scale_a=sc, scale_b=sb)
w_deq = w8.float() * sb.repeat_interleave(128, dim=1)[:, :, :1]
want = torch.cat([deq[s:e] @ w_deq[i] for i, (s, e) in enumerate(zip([0] + offs.tolist()[:-1], offs.tolist()))])
if ((got.float() - want).norm() / want.norm()).item() > 1e-2:
    fails.append("fp8 route -> fp8 group_gemm")

# the MoE layer at EP=1 against the plain torch reference
T, k, E, H, I = 24, 4, 6, 32, 16
gen = torch.Generator().manual_seed(7)
idx = routing(T, k, E, gen, empty=(3, ))
w = torch.softmax(torch.rand(T, k, generator=gen), dim=1)
x = q((T, H))
wgu, wd = q((E, H, 2 * I)) / 4, q((E, I, H)) / 4
got = moe_forward(x, idx, w, wgu, wd)
want = moe_reference(x, idx, w, wgu, wd)
err = ((got.float() - want).norm() / want.norm()).item()
if got.dtype != torch.bfloat16 or err > 1e-2:
    fails.append(f"moe_forward vs reference: rel err {err}")
print("FAILS", fails)
"""

_COMPILE_SCRIPT = r"""
import os
os.environ["TRITON_INTERPRET"] = "1"
import torch
from triton_dist import ops

def layer(x, idx, w, wgt):
    tokens, offs, _, r = ops.moe_route(x, idx, w, wgt.shape[0])
    return ops.moe_combine(ops.group_gemm(tokens, wgt, offs), r)

torch.manual_seed(0)
x = (torch.randint(-4, 5, (10, 32)).float() / 4).to(torch.bfloat16)
idx = torch.rand(10, 3).argsort(1)[:, :2].contiguous()
w = torch.rand(10, 2)
wgt = (torch.randint(-4, 5, (3, 32, 16)).float() / 4).to(torch.bfloat16)
eager = layer(x, idx, w, wgt)
compiled = torch.compile(layer, backend="aot_eager", fullgraph=True)(x, idx, w, wgt)
print("SAME", torch.equal(eager, compiled))
"""


def test_route_combine_and_the_layer_under_interpreter():
    assert_script_says(_INTERP_SCRIPT, "FAILS []", timeout=900)


def test_route_and_combine_under_torch_compile_fullgraph():
    assert_script_says(_COMPILE_SCRIPT, "SAME True", timeout=900)


@pytest.mark.parametrize("call,words", [
    (lambda o: o.moe_route(torch.zeros(4, 8), torch.zeros(4, 2, dtype=torch.int64), torch.ones(4, 3), 2),
     ["topk_weights has shape (4, 3)"]),
    (lambda o: o.moe_route(torch.zeros(4, 8), torch.zeros(5, 2, dtype=torch.int64), torch.ones(5, 2), 2),
     ["topk_idx must be [tokens=4, k]"]),
    (lambda o: o.moe_route(torch.zeros(4, 8), torch.zeros(4, 2), torch.ones(4, 2), 2), ["topk_idx.dtype"]),
    (lambda o: o.moe_route(torch.zeros(4, 8), torch.zeros(4, 2, dtype=torch.int64), torch.ones(4, 2), 0),
     ["num_experts=0"]),
    (lambda o: o.moe_route(torch.zeros(4, 8), torch.zeros(4, 2, dtype=torch.int64),
                           torch.ones(4, 2, dtype=torch.int32), 2), ["topk_weights.dtype"]),
    (lambda o: o.moe_route(torch.zeros(4, 8), torch.tensor([[0, 1], [1, 2], [0, 0], [1, 1]]), torch.ones(4, 2), 2),
     ["topk_idx[1, 1]=2", "[0, 2)"]),
    (lambda o: o.moe_combine(torch.zeros(8, 8), "not a routing"), ["MoERouting"]),
    (lambda o: o.moe_route(torch.zeros(4, 200), torch.zeros(4, 2, dtype=torch.int64), torch.ones(4, 2), 2,
                           quant="fp8"), ["H (200)", "multiple of 128"]),
    (lambda o: o.moe_route(torch.zeros(4, 128), torch.zeros(4, 2, dtype=torch.int64), torch.ones(4, 2), 2,
                           quant="int8"), ["quant='int8'"]),
])
def test_bad_input_is_refused_before_launch(call, words):
    from triton_dist import ops

    with pytest.raises(ValueError) as err:
        call(ops)
    for w in words:
        assert w in str(err.value), (w, str(err.value))


def test_combine_refuses_a_routing_it_cannot_read():
    from triton_dist import ops
    from triton_dist.ops.moe_layout import MoERouting

    idx, w = torch.zeros(4, 2, dtype=torch.int64), torch.ones(4, 2)
    for bad, words in ((MoERouting(torch.zeros(4, 2, dtype=torch.int64), idx, w, 2), "dest_rows"),
                       (MoERouting(torch.zeros(4, 2, dtype=torch.int32), idx[:3], w, 2), "topk_idx"),
                       (MoERouting(torch.zeros(4, 2, dtype=torch.int32), idx, torch.ones(2, 4).t(), 2),
                        "topk_weights"),
                       (MoERouting(torch.zeros(4, 2, dtype=torch.int32), idx, torch.ones(4, 1), 2), "topk_weights")):
        with pytest.raises(ValueError, match=words):
            ops.moe_combine(torch.zeros(8, 8), bad)


_ROWS_SCRIPT = r"""
import os
os.environ["TRITON_INTERPRET"] = "1"
import torch
from triton_dist import ops
from triton_dist.ops.moe_layout import MoERouting

# a hand-made routing whose rows lie outside expert_out: those slots are left out, nothing is read out of bounds
dest = torch.tensor([[0, 10 ** 6], [-5, 3]], dtype=torch.int32)
r = MoERouting(dest, torch.zeros(2, 2, dtype=torch.int64), torch.ones(2, 2), 1)
eo = torch.arange(4 * 8, dtype=torch.float32).view(4, 8)
print(ops.moe_combine(eo, r).tolist() == [eo[0].tolist(), eo[3].tolist()])
"""


def test_combine_leaves_out_rows_outside_expert_out():
    assert_script_says(_ROWS_SCRIPT, "True", timeout=900)


def test_combine_checks_the_rows():
    from triton_dist import ops
    from triton_dist.ops.moe_layout import MoERouting

    r = MoERouting(torch.zeros(4, 2, dtype=torch.int32), torch.zeros(4, 2, dtype=torch.int64), torch.ones(4, 2), 2)
    with pytest.raises(ValueError, match=r"expert_out must be \[8, H\]"):
        ops.moe_combine(torch.zeros(7, 8), r)
    with pytest.raises(ValueError, match="bf16 / fp16 / fp32"):
        ops.moe_combine(torch.zeros(8, 8, dtype=torch.int32), r)


# ids, counts, P, E, NB, BLOCK, EXPERTS_CHUNK / counts, base, totals, NB, chunk / totals, starts, offs, E, chunk /
# the scatter / combine
@pytest.mark.parametrize("kernel,sig", [
    ("route_count_kernel", "*i64:16, *i32:16, i32, i32, i32, 64, 64"),
    ("route_block_scan_kernel", "*i32:16, *i32:16, *i32:16, i32, 256"),
    ("route_expert_scan_kernel", "*i32:16, *i32:16, *i32:16, i32, 64"),
    # x, ids, base, starts, tokens, dest, scales, P, TOPK, E, NB, H, strides (x, tokens, scales), BLOCK, BLOCK_H,
    # QUANT_FP8
    ("route_scatter_kernel", "*bf16:16, *i64:16, *i32:16, *i32:16, *bf16:16, *i32:16, *bf16:16, i32, i32, i32, i32, "
                             "i32:16, i32:16, i32:16, i32:16, 64, 256, False"),
    ("route_scatter_kernel", "*bf16:16, *i64:16, *i32:16, *i32:16, *fp8e4nv:16, *i32:16, *fp32:16, i32, i32, i32, "
                             "i32, i32:16, i32:16, i32:16, i32, 64, 256, True"),
    ("combine_kernel", "*bf16:16, *i32:16, *i64:16, *fp32:16, *bf16:16, i32, i32, i32, i32:16, i32:16, i32, i32:16, "
                       "256"),
])
@pytest.mark.parametrize("target", ["cuda:90", "hip:gfx942"])
def test_route_kernels_compile_for_every_target(kernel, sig, target):
    res = compile_kernel("moe_route.py", kernel, sig, target, "--num-warps", "4")
    assert res.returncode == 0, res.stderr[-3000:]


def test_benchmark_torch_baseline_layer_matches_the_reference():
    """bench_group_gemm --layer's torch baseline (argsort, index_select, torch._grouped_mm, index_add_) computes the
    layer moe_reference defines (on the CPU, where torch._grouped_mm has a CPU path)."""
    sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
    from bench_group_gemm import torch_moe_layer

    from triton_dist.layers import moe_reference

    if not hasattr(torch, "_grouped_mm"):
        pytest.skip("torch._grouped_mm: not in this torch")
    torch.manual_seed(0)
    T, k, E, H, inter = 20, 4, 6, 32, 16
    top = torch.rand(T, E).topk(k, dim=1)
    idx, w = top.indices, torch.softmax(top.values, 1)
    x = torch.randn(T, H).bfloat16()
    wgu, wd = (torch.randn(E, H, 2 * inter) / 8).bfloat16(), (torch.randn(E, inter, H) / 8).bfloat16()
    got, ref = torch_moe_layer(x, idx, w, wgu, wd), moe_reference(x, idx, w, wgu, wd)
    assert ((got.float() - ref).norm() / ref.norm()).item() < 1e-2


def test_empty_routing_with_one_slot_is_accepted():
    """torch gives an empty ``[0, 1]`` tensor the strides ``(1, 0)``: a rank without tokens at top-1 must still pass
    the checks (seen in the expert-parallel dispatch, where ranks may hold no tokens)."""
    import torch

    from triton_dist.ops.moe_layout import check_routing

    w = torch.empty_strided((0, 1), (1, 0))
    assert w.stride(1) != 1
    check_routing("moe_route", torch.zeros((0, 8)), torch.zeros((0, 1), dtype=torch.int64), w, 4)
