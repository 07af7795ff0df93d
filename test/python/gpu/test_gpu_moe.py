"""GPU tier of the MoE family on one device: ``ops.group_gemm`` at real model shapes: random routings with empty experts,
every row to one expert, both weight layouts, fp8 with block scales, against per-expert fp32 matmuls and against
``torch._grouped_mm``; determinism; CUDA-graph capture with the routing changed between replays (nothing is read on
the host); padding rows left untouched. ``ops.moe_route`` / ``ops.moe_combine`` against a stable sort in torch, and
the MoE layer at expert parallelism 1 (``layers.moe_forward``) against the plain torch reference, eager and replayed
from one CUDA graph with new routings. No communication: ``torchrun --nproc_per_node 2 -m pytest
test/python/gpu/test_gpu_moe.py`` (each rank checks its own device; ranks may share a GPU), or on one GPU as a
script::

    python test/python/gpu/test_gpu_moe.py
"""
import os
import sys

import pytest
import torch

from triton_dist import ops
from triton_dist.layers import moe_forward, moe_reference
from triton_dist.ops import group_gemm

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # as a script: test/python

from _torchrun_shmem import DEVICE  # noqa: E402

pytestmark = pytest.mark.gpu

#: (name, experts, K, N, tokens, top-k): Qwen3-30B-A3B's gate+up and down projections (128 experts, hidden 2048,
#: expert intermediate 768) and a DeepSeek-V3-sized expert (hidden 7168, intermediate 2048) with fewer experts
SHAPES = [("qwen3-30b-a3b gate_up", 128, 2048, 1536, 128, 8), ("qwen3-30b-a3b down", 128, 768, 2048, 1024, 8),
          ("deepseek-v3 gate_up (16 experts)", 16, 7168, 4096, 256, 8), ("one token", 8, 512, 256, 1, 2)]


def _device():
    dev = torch.device("cuda", DEVICE)
    torch.cuda.set_device(dev)
    return dev


def routing(tokens, topk, experts, dev, seed, empty=(), only=None, pad=64):
    """``(rows, offsets)`` of a random top-k routing (``empty`` experts get no rows; ``only``: every row to that
    expert), ``rows`` = tokens * topk + ``pad`` padding rows."""
    gen = torch.Generator().manual_seed(seed)
    if only is not None:
        counts = torch.zeros(experts, dtype=torch.int64)
        counts[only] = tokens * topk
    else:
        scores = torch.rand(tokens, experts, generator=gen)
        scores[:, list(empty)] = -1.0
        counts = torch.bincount(scores.topk(topk, dim=1).indices.flatten(), minlength=experts)
    return int(counts.sum()) + pad, counts.cumsum(0).to(torch.int32).to(dev)


def reference(a, w, offsets):
    out = torch.zeros(a.shape[0], w.shape[2], dtype=torch.float32, device=a.device)
    start = 0
    for e, end in enumerate(offsets.tolist()):
        if end > start:
            out[start:end] = a[start:end].float() @ w[e].float()
        start = end
    return out


def _rel(got, want, n):
    return ((got[:n].float() - want[:n]).norm() / (want[:n].norm() + 1e-6)).item()


@pytest.mark.parametrize("name,E,K,N,T,topk", SHAPES)
def test_group_gemm_matches_per_expert_matmuls(name, E, K, N, T, topk):
    dev = _device()
    rows, offs = routing(T, topk, E, dev, seed=E + K, empty=(0, E // 2))
    gen = torch.Generator(device=dev).manual_seed(1)
    a = (torch.randn(rows, K, device=dev, generator=gen) / 8).to(torch.bfloat16)
    w = (torch.randn(E, K, N, device=dev, generator=gen) / 8).to(torch.bfloat16)
    n = int(offs[-1])
    want = reference(a, w, offs)
    for layout, b in (("[E, K, N]", w), ("[E, N, K] transposed", w.transpose(1, 2).contiguous().transpose(1, 2))):
        out = torch.full((rows, N), 3.0, dtype=torch.bfloat16, device=dev)
        got = group_gemm(a, b, offs, out=out)
        again = group_gemm(a, b, offs)
        torch.cuda.synchronize()
        assert _rel(got, want, n) < 1e-2, (name, layout, _rel(got, want, n))
        assert torch.equal(got[:n], again[:n]), f"{name} {layout}: not deterministic"
        assert bool((got[n:] == 3.0).all()), f"{name} {layout}: padding rows were written"
    if hasattr(torch, "_grouped_mm"):
        theirs = torch._grouped_mm(a[:n], w, offs=offs, out_dtype=torch.bfloat16)
        assert _rel(theirs, want, n) < 1e-2
        assert ((got[:n].float() - theirs.float()).abs().max() <= 2.0 ** -6 * theirs.float().abs().max() + 1e-3)


def test_every_row_to_one_expert_and_no_rows():
    dev = _device()
    E, K, N = 32, 1024, 512
    w = (torch.randn(E, K, N, device=dev) / 8).to(torch.bfloat16)
    for only in (0, 17, E - 1):
        rows, offs = routing(64, 4, E, dev, seed=only, only=only)
        a = (torch.randn(rows, K, device=dev) / 8).to(torch.bfloat16)
        got = group_gemm(a, w, offs)
        assert _rel(got, reference(a, w, offs), int(offs[-1])) < 1e-2, only
    empty = torch.zeros(E, dtype=torch.int32, device=dev)
    out = torch.full((16, N), 2.0, dtype=torch.bfloat16, device=dev)
    group_gemm(torch.zeros(16, K, dtype=torch.bfloat16, device=dev), w, empty, out=out)
    torch.cuda.synchronize()
    assert bool((out == 2.0).all())


def test_fp8_block_scales():
    dev = _device()
    E, K, N, T, topk = 32, 2048, 1536, 256, 8
    rows, offs = routing(T, topk, E, dev, seed=5, empty=(3, ))
    f8 = torch.float8_e4m3fn
    a = (torch.randn(rows, K, device=dev) * 4).to(f8)
    w = (torch.randn(E, K, N, device=dev) * 4).to(f8)
    sa = torch.rand(rows, K // 128, device=dev) / 64 + 1e-3
    sb = torch.rand(E, K // 128, N // 128, device=dev) / 64 + 1e-3
    got = group_gemm(a, w, offs, scale_a=sa, scale_b=sb)
    a_deq = a.float() * sa.repeat_interleave(128, dim=1)
    w_deq = w.float() * sb.repeat_interleave(128, dim=1).repeat_interleave(128, dim=2)
    n = int(offs[-1])
    assert got.dtype == torch.bfloat16
    assert _rel(got, reference(a_deq, w_deq, offs), n) < 1e-2


def test_graph_replay_follows_the_routing_on_the_device():
    """One capture, three routings written into the same offsets tensor between replays: each replay's result is
    that routing's (the launch reads nothing of the routing on the host)."""
    dev = _device()
    E, K, N, T, topk = 64, 2048, 768, 128, 8
    rows = T * topk
    a = (torch.randn(rows, K, device=dev) / 8).to(torch.bfloat16)
    w = (torch.randn(E, K, N, device=dev) / 8).to(torch.bfloat16)
    offs = torch.zeros(E, dtype=torch.int32, device=dev)
    out = torch.zeros(rows, N, dtype=torch.bfloat16, device=dev)
    _, first = routing(T, topk, E, dev, seed=0, pad=0)
    offs.copy_(first)
    group_gemm(a, w, offs, out=out)  # compile outside the capture
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=stream):
        group_gemm(a, w, offs, out=out)
    for seed in (1, 2, 3):
        _, new = routing(T, topk, E, dev, seed=seed, empty=(seed, ), pad=0)
        offs.copy_(new)
        graph.replay()
        torch.cuda.synchronize()
        assert _rel(out, reference(a, w, offs), rows) < 1e-2, seed


def topk_routing(T, k, E, dev, seed, empty=()):
    gen = torch.Generator(device=dev).manual_seed(seed)
    scores = torch.rand(T, E, device=dev, generator=gen)
    scores[:, list(empty)] = -1.0
    top = scores.topk(k, dim=1)
    return top.indices, torch.softmax(top.values, dim=1)


@pytest.mark.parametrize("T,k,E,H", [(128, 8, 128, 2048), (4096, 8, 256, 7168), (1, 1, 4, 256), (333, 2, 7, 136)])
def test_route_and_combine(T, k, E, H):
    dev = _device()
    idx, w = topk_routing(T, k, E, dev, seed=T + E, empty=(1, ))
    x = torch.randn(T, H, device=dev).to(torch.bfloat16)
    tokens, offs, _, r = ops.moe_route(x, idx, w, E)
    flat = idx.flatten()
    order = torch.sort(flat, stable=True).indices
    assert torch.equal(offs, torch.bincount(flat, minlength=E).cumsum(0).to(torch.int32))
    assert torch.equal(tokens, x.repeat_interleave(k, dim=0)[order])
    scale = torch.repeat_interleave(torch.arange(E, device=dev) + 1, torch.bincount(flat, minlength=E))
    got = ops.moe_combine(tokens.float() * scale[:, None], r)
    want = (w * (idx.float() + 1)).sum(1, keepdim=True) * x.float()
    assert torch.allclose(got, want, rtol=1e-5, atol=1e-4), (got - want).abs().max().item()


def test_route_and_combine_past_2_31_elements():
    """40,000 tokens x top-8 at hidden 7168: the layout has 2.3e9 elements (64-bit row offsets); spot checks of the
    rows and a combine that scales each expert by e + 1."""
    dev = _device()
    T, k, E, H = 40000, 8, 256, 7168
    idx, w = topk_routing(T, k, E, dev, seed=4)
    x = torch.randn(T, H, device=dev).to(torch.bfloat16)
    tokens, offs, _, r = ops.moe_route(x, idx, w, E)
    assert tokens.numel() > 2 ** 31
    for t in (0, 1, T // 2, T - 1):
        for j in range(k):
            assert torch.equal(tokens[int(r.dest_rows[t, j])], x[t]), (t, j)
    counts = torch.bincount(idx.flatten(), minlength=E)
    assert torch.equal(offs, counts.cumsum(0).to(torch.int32))
    scale = torch.repeat_interleave(torch.arange(E, device=dev, dtype=torch.bfloat16) + 1, counts)
    tokens.mul_(scale[:, None])  # in bf16 (one rounding per element): compared with a tolerance
    got = ops.moe_combine(tokens, r)
    want = (w * (idx.float() + 1)).sum(1, keepdim=True) * x.float()
    assert ((got.float() - want).norm() / want.norm()).item() < 1e-2


def test_fp8_route_feeds_the_fp8_grouped_gemm():
    """moe_route(quant="fp8") -> group_gemm with the route's scales as scale_a: against the bf16 route and an fp32
    reference of the dequantized operands."""
    dev = _device()
    T, k, E, H, N = 256, 8, 64, 2048, 1536
    idx, w = topk_routing(T, k, E, dev, seed=9)
    x = torch.randn(T, H, device=dev).to(torch.bfloat16)
    t8, offs, sc, r = ops.moe_route(x, idx, w, E, quant="fp8")
    plain, offs2, none, _ = ops.moe_route(x, idx, w, E)
    assert none is None and torch.equal(offs, offs2) and t8.dtype == torch.float8_e4m3fn
    deq = t8.float() * sc.repeat_interleave(128, dim=1)
    excess = (deq - plain.float()).abs() - plain.float().abs() * 2.0 ** -4 - sc.repeat_interleave(128, 1) * 2.0 ** -10
    assert excess.max().item() <= 0
    w8 = torch.randn(E, H, N, device=dev).to(torch.float8_e4m3fn)
    sb = torch.rand(E, H // 128, N // 128, device=dev) / 16 + 1e-3
    got = group_gemm(t8, w8, offs, scale_a=sc, scale_b=sb)
    w_deq = w8.float() * sb.repeat_interleave(128, dim=1).repeat_interleave(128, dim=2)
    assert _rel(got, reference(deq, w_deq, offs), T * k) < 1e-2


def test_moe_layer_eager_and_replayed_with_new_routings():
    """Qwen3-30B-A3B's expert shapes at 64 tokens: moe_forward against moe_reference eagerly, then captured once and
    replayed with three routings written into the same index / weight tensors."""
    dev = _device()
    T, k, E, H, inter = 64, 8, 128, 2048, 768
    x = (torch.randn(T, H, device=dev) / 4).to(torch.bfloat16)
    wgu = (torch.randn(E, H, 2 * inter, device=dev) / 32).to(torch.bfloat16)
    wd = (torch.randn(E, inter, H, device=dev) / 32).to(torch.bfloat16)
    idx, w = topk_routing(T, k, E, dev, seed=0)
    got = moe_forward(x, idx, w, wgu, wd)
    want = moe_reference(x, idx, w, wgu, wd)
    assert ((got.float() - want).norm() / want.norm()).item() < 2e-2
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=stream):
        out = moe_forward(x, idx, w, wgu, wd)
    for seed in (1, 2, 3):
        new_idx, new_w = topk_routing(T, k, E, dev, seed=seed, empty=(seed, ))
        idx.copy_(new_idx)
        w.copy_(new_w)
        graph.replay()
        torch.cuda.synchronize()
        want = moe_reference(x, idx, w, wgu, wd)
        assert ((out.float() - want).norm() / want.norm()).item() < 2e-2, seed


if __name__ == "__main__":
    for shape in SHAPES:
        test_group_gemm_matches_per_expert_matmuls(*shape)
    test_every_row_to_one_expert_and_no_rows()
    test_fp8_block_scales()
    test_graph_replay_follows_the_routing_on_the_device()
    for case in [(128, 8, 128, 2048), (4096, 8, 256, 7168), (1, 1, 4, 256), (333, 2, 7, 136)]:
        test_route_and_combine(*case)
    test_route_and_combine_past_2_31_elements()
    test_fp8_route_feeds_the_fp8_grouped_gemm()
    test_moe_layer_eager_and_replayed_with_new_routings()
    print("test_gpu_moe: all passed")
