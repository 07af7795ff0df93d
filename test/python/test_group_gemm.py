"""The MoE grouped GEMM (triton_dist.ops.group_gemm over triton_dist.kernels.group_gemm): results under the
interpreter against per-expert torch matmuls (empty experts, every row to one expert, one expert, padding rows left
untouched, both weight layouts, the descriptor path, fp8 with block scales), the host checks, the torch.library op
under torch.compile, and compilation for cuda:90 (TMA + wgmma) and hip:gfx942 (MFMA) in fresh processes."""
import pytest
import torch
from _subprocess_runs import assert_script_says, compile_kernel

_INTERP_SCRIPT = r"""
import os
os.environ["TRITON_INTERPRET"] = "1"
import torch
from triton_dist.kernels.gemm_config import TileConfig
from triton_dist.ops import group_gemm

fails = []
torch.manual_seed(0)

def q(shape, dtype):
    return (torch.randint(-4, 5, shape).float() / 4).to(dtype)

def reference(a, b, counts, out):
    ref, start = out.float().clone(), 0
    for e, n in enumerate(counts):
        ref[start:start + n] = a[start:start + n].float() @ b[e].float()
        start += n
    return ref

def case(name, counts, K, N, dtype=torch.bfloat16, pad=3, transposed=False, config=None):
    E = len(counts)
    rows = sum(counts) + pad
    a = q((rows, K), dtype)
    w = q((E, K, N), dtype)
    b = w.transpose(1, 2).contiguous().transpose(1, 2) if transposed else w  # [E, N, K] storage seen as [E, K, N]
    offs = torch.tensor(counts, dtype=torch.int64).cumsum(0).to(torch.int32)
    out = torch.full((rows, N), 5.0, dtype=dtype)  # padding rows must keep this
    got = group_gemm(a, b, offs, out=out, config=config)
    want = reference(a, w, counts, torch.full((rows, N), 5.0, dtype=dtype)).to(dtype)
    if got is not out or not torch.equal(got, want):
        fails.append(f"{name}: max err {(got.float() - want.float()).abs().max().item()}")

case("uneven, an empty expert, padding", [5, 0, 17, 3], 40, 24)
case("every row to one expert", [0, 0, 29, 0], 32, 40)
case("one expert", [21], 48, 16)
case("no rows at all", [0, 0, 0], 16, 16)
case("top-1 / top-8 like counts, fp16", [1, 8, 0, 2, 16, 0, 0, 3], 24, 32, dtype=torch.float16, pad=0)
case("[E, N, K] weights through transpose", [7, 0, 18], 40, 24, transposed=True)
case("an explicit 16x16x16 config", [9, 0, 20, 2], 48, 40, config=TileConfig(16, 16, 16, 1, 4, 1))
case("32-row tiles, K not a multiple of BLOCK_K", [33, 1, 0, 40], 40, 56,
     config=TileConfig(32, 32, 32, 1, 4, 1, pointer_loads=True))

# fp8 (e4m3) with block scales: K = 256 (2 scale blocks), N = 144 (2 column blocks, the second partial)
f8 = torch.float8_e4m3fn
counts, K, N = [6, 0, 11], 256, 144
E, rows = len(counts), sum(counts) + 2
a8, w8 = q((rows, K), f8), q((E, K, N), f8)
sa = torch.rand(rows, 2) + 0.5
sb = torch.rand(E, 2, 2) + 0.5
offs = torch.tensor(counts).cumsum(0).to(torch.int32)
got = group_gemm(a8, w8, offs, scale_a=sa, scale_b=sb)
a_deq = a8.float() * sa.repeat_interleave(128, dim=1)[:, :K]
w_deq = w8.float() * sb.repeat_interleave(128, dim=1)[:, :K].repeat_interleave(128, dim=2)[:, :, :N]
want = reference(a_deq, w_deq, counts, torch.zeros(rows, N))
n_valid = sum(counts)
err = (got[:n_valid].float() - want[:n_valid]).abs() - 2.0 ** -7 * want[:n_valid].abs() - 1e-3
if got.dtype != torch.bfloat16 or bool((err > 0).any()):
    fails.append(f"fp8 block scales: max err {(got[:n_valid].float() - want[:n_valid]).abs().max().item()}")
# the same with [E, N, K] weights and [E, N / 128, K / 128] scales, both passed transposed (any scale strides)
w8_nk = w8.transpose(1, 2).contiguous()
sb_nk = sb.transpose(1, 2).contiguous()
got2 = group_gemm(a8, w8_nk.transpose(1, 2), offs, scale_a=sa, scale_b=sb_nk.transpose(1, 2))
if not torch.equal(got[:n_valid], got2[:n_valid]):
    fails.append("fp8 with transposed weights and scales")
print("FAILS", fails)
"""


def test_group_gemm_under_interpreter():
    assert_script_says(_INTERP_SCRIPT, "FAILS []")


def _operands(E=3, K=32, N=16, rows=10, dtype=torch.bfloat16):
    a = torch.zeros(rows, K, dtype=dtype)
    b = torch.zeros(E, K, N, dtype=dtype)
    offs = torch.tensor([2, 5, 9], dtype=torch.int32)[:E]
    return a, b, offs


@pytest.mark.parametrize("mutate,words", [
    (lambda a, b, o: (a.float(), b, o), ["a.dtype=torch.float32", "accepted"]),
    (lambda a, b, o: (a, b.half(), o), ["differ"]),
    (lambda a, b, o: (a[:, :24], b, o), ["K=24", "K=32"]),
    (lambda a, b, o: (a, b[0], o), ["3-D [E, K, N]"]),
    (lambda a, b, o: (a, b, o.long()), ["int32 [E=3]"]),
    (lambda a, b, o: (a, b, o[:2]), ["int32 [E=3]"]),
    (lambda a, b, o: (torch.zeros(10, 12, dtype=torch.bfloat16), torch.zeros(3, 12, 16, dtype=torch.bfloat16), o),
     ["multiples of 8"]),
    (lambda a, b, o: (a, b.permute(0, 2, 1).contiguous().permute(0, 2, 1)[:, :, :8].contiguous()
                      .as_strided((3, 32, 8), (1, 24, 3)), o), ["unit stride"]),
    (lambda a, b, o: (a, b, torch.tensor([2, 1, 9], dtype=torch.int32)), ["expert_offsets[1]=1", "non-decreasing"]),
    (lambda a, b, o: (a, b, torch.tensor([2, 0, 5, 0, 9, 0], dtype=torch.int32)[::2]), ["contiguous"]),
    (lambda a, b, o: (a, b, torch.tensor([9], dtype=torch.int32).expand(3)), ["contiguous"]),
    (lambda a, b, o: (torch.zeros(10, 0, dtype=torch.bfloat16), torch.zeros(3, 0, 16, dtype=torch.bfloat16), o),
     ["K=0"]),
    (lambda a, b, o: (a, b, torch.tensor([-1, 1, 9], dtype=torch.int32)), ["expert_offsets[0]=-1"]),
    (lambda a, b, o: (a, b, torch.tensor([2, 5, 11], dtype=torch.int32)), ["expert_offsets[2]=11", "10 rows"]),
])
def test_group_gemm_rejects_bad_input_before_launch(mutate, words):
    from triton_dist.ops import group_gemm

    a, b, offs = mutate(*_operands())
    with pytest.raises(ValueError) as err:
        group_gemm(a, b, offs)
    for w in words:
        assert w in str(err.value), (w, str(err.value))


def test_group_gemm_fp8_scales_are_checked():
    from triton_dist.ops import group_gemm

    f8 = torch.float8_e4m3fn
    a, b, offs = _operands(K=256, N=144)
    a8, b8 = a.to(f8), b.to(f8)
    with pytest.raises(ValueError, match="need both block scales"):
        group_gemm(a8, b8, offs)
    with pytest.raises(ValueError, match=r"scale_a has shape \(10, 1\), expected \(10, 2\)"):
        group_gemm(a8, b8, offs, scale_a=torch.ones(10, 1), scale_b=torch.ones(3, 2, 2))
    with pytest.raises(ValueError, match=r"scale_b has shape \(3, 2, 1\), expected \(3, 2, 2\)"):
        group_gemm(a8, b8, offs, scale_a=torch.ones(10, 2), scale_b=torch.ones(3, 2, 1))
    with pytest.raises(ValueError, match="scale_b must be a float32"):
        group_gemm(a8, b8, offs, scale_a=torch.ones(10, 2), scale_b=torch.ones(3, 2, 2, dtype=torch.float16))
    with pytest.raises(ValueError, match="fp8 inputs only"):
        group_gemm(a, b, offs, scale_a=torch.ones(10, 2))


def test_pick_group_config():
    from triton_dist.ops.moe_gemm import SIM_CONFIG, pick_group_config

    assert pick_group_config(1024, 128, 1536, 2048, on_gpu=False) == SIM_CONFIG
    decode = pick_group_config(1024, 128, 1536, 2048, on_gpu=True)  # 8 rows per expert
    assert (decode.BLOCK_M, decode.BLOCK_N, decode.BLOCK_K, decode.num_warps, decode.num_stages) == (64, 128, 128, 4, 4)
    prefill = pick_group_config(65536, 128, 1536, 2048, on_gpu=True)  # 512 rows per expert, bf16
    assert (prefill.BLOCK_M, prefill.BLOCK_N, prefill.BLOCK_K, prefill.num_warps, prefill.num_stages) == \
        (128, 256, 64, 8, 4)
    narrow = pick_group_config(65536, 128, 192, 2048, on_gpu=True)
    assert (narrow.BLOCK_M, narrow.BLOCK_N) == (128, 128)
    fp8 = pick_group_config(65536, 128, 1536, 2048, on_gpu=True, elem_bytes=1, block_scaled=True)
    assert (fp8.BLOCK_M, fp8.BLOCK_N, fp8.BLOCK_K) == (128, 128, 128)


_COMPILE_SCRIPT = r"""
import os
os.environ["TRITON_INTERPRET"] = "1"
import torch
from triton_dist import ops

def layer(x, w, offs):
    h = ops.group_gemm(x, w, offs)
    return torch.cat([torch.relu(h) * 2, ops.moe_silu_gate(h, offs)], dim=1)

torch.manual_seed(0)
x = (torch.randint(-4, 5, (12, 32)).float() / 4).to(torch.bfloat16)
w = (torch.randint(-4, 5, (3, 32, 16)).float() / 4).to(torch.bfloat16)
offs = torch.tensor([4, 4, 10], dtype=torch.int32)
eager = layer(x, w, offs)
compiled = torch.compile(layer, backend="aot_eager", fullgraph=True)(x, w, offs)
print("SAME", torch.equal(eager[:10], compiled[:10]))
"""


def test_group_gemm_under_torch_compile_fullgraph():
    assert_script_says(_COMPILE_SCRIPT, "SAME True")


# a, b, c, offsets, scale_a, scale_b, ROWS, E, N, K, stride_am, stride_be, stride_bk, stride_bn (1), stride_cm,
# stride_sam, stride_sak, stride_sbe, stride_sbk, stride_sbn
SIG = "*bf16:16, *bf16:16, *bf16:16, *i32:16, *fp32, *fp32, i32, i32, i32:16, i32:16, i32:16, i32:16, i32:16, 1, " \
      "i32:16, i32, i32, i32, i32, i32"


@pytest.mark.parametrize("target,sig,extra,expect", [
    ("cuda:90", SIG, ", 128, 128, 64, True, False, False",
     ["cp.async.bulk.tensor.2d", "cp.async.bulk.tensor.3d", "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16"]),
    # [E, N, K] weights through a transpose: the B tile is loaded K-contiguous and fed to wgmma transposed
    ("cuda:90", SIG.replace("i32:16, 1, i32:16, i32, i32, i32", "1, i32:16, i32:16, i32, i32, i32"),
     ", 128, 128, 64, True, True, False", ["cp.async.bulk.tensor.3d", "wgmma.mma_async"]),
    ("cuda:90", SIG.replace("*bf16:16, *bf16:16, *bf16:16", "*fp8e4nv:16, *fp8e4nv:16, *bf16:16")
     .replace("*fp32, *fp32", "*fp32:16, *fp32:16"), ", 128, 128, 128, True, False, True",
     ["wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3"]),
    ("hip:gfx942", SIG, ", 128, 128, 64, False, False, False", ["v_mfma_f32"]),
])
def test_group_gemm_compiles_for_every_target(target, sig, extra, expect):
    res = compile_kernel("group_gemm.py", "group_gemm_kernel", sig + extra, target, "--num-warps", "8",
                         "--num-stages", "3" if target != "hip:gfx942" else "2")
    assert res.returncode == 0, res.stderr[-3000:]
    for s in expect:
        assert s in res.stdout, (target, s)


_GATE_SCRIPT = r"""
import os
os.environ["TRITON_INTERPRET"] = "1"
import torch
from triton_dist import ops

fails = []
torch.manual_seed(0)
for dtype in (torch.bfloat16, torch.float16, torch.float32):
    rows, inter = 13, 20  # several row and column blocks, both partial
    h = (torch.randn(rows, 2 * inter) * 3).to(dtype)
    g, u = h[:, :inter].float(), h[:, inter:].float()
    want = (g * torch.sigmoid(g) * u).to(dtype)
    got = ops.moe_silu_gate(h)
    err = (got.float() - want.float()).abs().max().item()
    if got.dtype != dtype or got.shape != (rows, inter) or err > (1e-5 if dtype == torch.float32 else 0.02):
        fails.append(f"{dtype}: no offsets: max err {err}")
    # with the layout's offsets: rows at or past offsets[-1] are neither computed nor written
    for end in (9, 0, 100):
        offs = torch.tensor([3, 3, end], dtype=torch.int32)
        out = torch.full((rows, inter), float("nan"), dtype=dtype)
        got = ops.moe_silu_gate(h, offs, out=out)
        n = min(end, rows)
        if got is not out or not torch.equal(got[:n], ops.moe_silu_gate(h)[:n]) or not bool(got[n:].isnan().all()):
            fails.append(f"{dtype}: offsets ending at {end}")
print("FAILS", fails)
"""


def test_moe_silu_gate_under_interpreter():
    """fp32 inside, one rounding; with offsets only the routed rows are written (a static capacity's padding is not
    touched; an end past the rows is clamped)."""
    assert_script_says(_GATE_SCRIPT, "FAILS []")


@pytest.mark.parametrize("args,kw,words", [
    ((torch.zeros(4, 7), ), {}, ["[rows, 2 * I]"]),
    ((torch.zeros(4, 8, dtype=torch.int32), ), {}, ["must be one of"]),
    ((torch.zeros(8, 4).t(), ), {}, ["unit column stride"]),
    ((torch.zeros(4, 8), torch.tensor([1, 4])), {}, ["int32"]),
    ((torch.zeros(4, 8), torch.zeros(0, dtype=torch.int32)), {}, ["non-empty"]),
    ((torch.zeros(4, 8), ), {"out": torch.zeros(4, 8)}, ["out must be"]),
    ((torch.zeros(4, 8), ), {"out": torch.zeros(4, 4, dtype=torch.bfloat16)}, ["out must be"]),
])
def test_moe_silu_gate_rejects_bad_input_before_launch(args, kw, words):
    from triton_dist.ops import moe_silu_gate

    with pytest.raises(ValueError) as err:
        moe_silu_gate(*args, **kw)
    for w in words:
        assert w in str(err.value), str(err.value)


def test_moe_silu_gate_compiles_for_every_target():
    # h, out, offsets, ROWS, INTER, stride_h, stride_out, E, HAS_OFFSETS, BLOCK_R, BLOCK_C
    sig = "*bf16:16, *bf16:16, *i32:16, i32, i32:16, i32:16, i32:16, i32, True, 16, 256"
    for target in ("cuda:90", "hip:gfx942"):
        res = compile_kernel("group_gemm.py", "silu_gate_kernel", sig, target, "--num-warps", "4")
        assert res.returncode == 0, res.stderr[-3000:]
        assert ("ex2.approx" in res.stdout) if target == "cuda:90" else ("v_exp_f32" in res.stdout), target
