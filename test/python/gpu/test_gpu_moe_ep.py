"""GPU tier of the MoE expert parallelism (``ops.ep_dispatch`` / ``ops.ep_combine``, ``layers.ep_moe_forward``), run
under torchrun at any world size >= 2 (ranks may share a GPU: ``scripts/launch.sh --ranks-per-gpu auto``)::

    scripts/launch.sh --ranks-per-gpu auto --nproc_per_node 2 -m pytest -q test/python/gpu/test_gpu_moe_ep.py

Every rank derives every rank's tokens and routing from the same seeds, so it checks its received layout against a
torch reference of the whole world (a stable sort by expert of all ranks' pairs in rank, token, slot order) and its
combined output against ``sum_j w[t, j] * (g_j + 1) * x[t]`` (expert ``g`` scales its rows by ``g + 1``; fp32
small integers and weights in eighths: exact). Real sizes (Qwen3-30B-A3B's 128 experts, top-8, hidden 2048, at 128
tokens per rank), uneven token counts (0 included), every token to one expert, CUDA-graph capture of dispatch ->
experts -> combine replayed with new routings written into the same tensors, and the layer against the per-expert
reference in bf16. Method ``normal`` (each token once per rank) in the dispatch test (its layout also equal to
push's of the same inputs bit for bit; fp32, so its per-rank partials are exact) and in the graph test with two
dispatches in flight; method ``ll`` (one launch per direction, decode sizes) in the same two tests (its layout also
equal to push's bit for bit, its combine exact as push's), and it is what ``auto`` takes in the others (contexts of at
most 256 tokens).
"""
from __future__ import annotations

import os
import sys

import pytest
import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # test/python

from _torchrun_shmem import DEVICE  # noqa: E402

pytestmark = pytest.mark.gpu
os.environ.setdefault("NVSHMEM_SYMMETRIC_SIZE", "2G")


def _init():
    import torch.distributed as dist

    import triton_dist.utils as tdu

    tdu.initialize_distributed()
    torch.cuda.set_device(DEVICE)
    return dist.get_rank(), dist.get_world_size()


def _inputs(seed, r, T, H, k, E, dtype, mode="random"):
    """Rank ``r``'s ``(x, topk_idx, topk_weights)`` for ``seed`` on the CPU (every rank makes every rank's)."""
    g = torch.Generator().manual_seed(seed * 1009 + r)
    x = torch.randint(-4, 5, (T, H), generator=g).to(dtype)
    if mode == "one_expert":
        idx = ((seed + torch.arange(k)) % E).repeat(T, 1)
    else:
        idx = torch.rand(T, E, generator=g).topk(k, dim=1).indices if T else torch.empty((0, k), dtype=torch.int64)
    w = torch.randint(1, 9, (T, k), generator=g).float() / 8
    return x, idx.to(torch.int32 if seed % 2 else torch.int64), w


def _tokens(seed, r, world, T):
    return [T, 0, T // 2 + 1, 1][(seed + r) % 4] if seed % 3 == 0 else T


def _reference(inputs, rank, e_loc, H):
    """(rows [N, H], offsets list) of rank ``rank``'s layout, and every rank's combined output."""
    xs = torch.cat([x for x, _, _ in inputs])
    ids = torch.cat([i.long() for _, i, _ in inputs])
    k = ids.shape[1]
    tok = torch.arange(ids.shape[0]).repeat_interleave(k)
    order = torch.sort(ids.flatten(), stable=True)
    lo, hi = rank * e_loc, (rank + 1) * e_loc
    keep = (order.values >= lo) & (order.values < hi)
    rows = xs[tok[order.indices[keep]]]
    counts = torch.bincount(order.values[keep] - lo, minlength=e_loc)
    return rows, counts.cumsum(0).tolist()


def _experts(tokens, offsets, rank, e_loc):
    """Expert ``g`` scales its rows by ``g + 1`` (the rows past the experts' stay as they are: never read)."""
    out = tokens.clone()
    start = 0
    for le, end in enumerate(offsets.tolist()):
        out[start:end] *= rank * e_loc + le + 1
        start = end
    return out


def _want(x, idx, w):
    want = torch.zeros(x.shape, dtype=torch.float32)
    for j in range(idx.shape[1]):
        want += w[:, j:j + 1] * (idx[:, j:j + 1].float() + 1) * x.float()
    return want


@pytest.mark.parametrize("method", ["push", "normal", "ll"])
@pytest.mark.parametrize("E,k,H,T,mode", [(128, 8, 2048, 128, "random"), (32, 2, 512, 64, "random"),
                                          (16, 1, 256, 48, "one_expert"), (8, 8, 128, 7, "random")])
def test_dispatch_layout_and_combine(E, k, H, T, mode, method):
    from triton_dist import ops

    rank, world = _init()
    if E % world:
        pytest.skip(f"{E} experts over {world} ranks")
    e_loc = E // world
    ctx = ops.create_ep_ctx(T, H, k, E, torch.float32, method=method)
    fails = []
    try:
        for seed in (1, 2, 3, 4):
            inputs = [_inputs(seed, r, _tokens(seed, r, world, T), H, k, E, torch.float32, mode) for r in range(world)]
            x, idx, w = (t.cuda() for t in inputs[rank])
            tokens, offsets, scales, handle = ops.ep_dispatch(x, idx, w, ctx)
            ref_rows, ref_offs = _reference(inputs, rank, e_loc, H)
            if offsets.tolist() != ref_offs:
                fails.append(f"seed {seed}: offsets differ")
            elif not torch.equal(tokens[:ref_offs[-1]].cpu(), ref_rows):
                fails.append(f"seed {seed}: received rows differ")
            if handle.method != method:
                fails.append(f"seed {seed}: dispatched with {handle.method}")
            y = ops.ep_combine(_experts(tokens, offsets, rank, e_loc), handle, ctx)
            if not torch.equal(y.cpu(), _want(*inputs[rank])):
                fails.append(f"seed {seed}: combined output differs")
            if method != "push":  # the same inputs through push on the same context: the same layout, bit for bit
                n = ref_offs[-1]
                mine = (tokens[:n].clone(), offsets.clone())
                t2, o2, _, h2 = ops.ep_dispatch(x, idx, w, ctx, method="push")
                if not torch.equal(o2, mine[1]) or not torch.equal(t2[:n], mine[0]):
                    fails.append(f"seed {seed}: {method}'s layout differs from push's")
                ops.ep_combine(t2, h2, ctx)
    finally:
        ctx.close()
    assert not fails, (rank, fails)


def test_two_dispatches_in_flight():
    """Micro-batches: dispatch A, dispatch B (the other buffer set), then combine A and B in order."""
    from triton_dist import ops

    rank, world = _init()
    E, k, H, T = 8 * world, 4, 512, 96
    ctx = ops.create_ep_ctx(T, H, k, E, torch.float32)
    try:
        for rnd in range(3):
            calls = []
            for seed in (10 + 2 * rnd, 11 + 2 * rnd):
                inputs = [_inputs(seed, r, _tokens(seed, r, world, T), H, k, E, torch.float32) for r in range(world)]
                x, idx, w = (t.cuda() for t in inputs[rank])
                calls.append((inputs, ops.ep_dispatch(x, idx, w, ctx)))
            for inputs, (tokens, offsets, _, handle) in calls:
                y = ops.ep_combine(_experts(tokens, offsets, rank, E // world), handle, ctx)
                assert torch.equal(y.cpu(), _want(*inputs[rank])), (rank, rnd)
    finally:
        ctx.close()


def test_graph_replay_follows_new_routings():
    """dispatch -> experts -> combine captured once into a CUDA graph, replayed with new tokens / routings written
    into the captured tensors (nothing read on the host): every replay matches the reference."""
    from triton_dist import ops

    rank, world = _init()
    E, k, H, T = 16 * world, 8, 1024, 64
    e_loc = E // world
    ctx = ops.create_ep_ctx(T, H, k, E, torch.float32)
    x = torch.zeros((T, H), device="cuda")
    idx = torch.zeros((T, k), dtype=torch.int64, device="cuda")
    w = torch.zeros((T, k), device="cuda")
    scale = (torch.arange(E, device="cuda", dtype=torch.float32) + 1)[rank * e_loc:(rank + 1) * e_loc]

    def step():
        tokens, offsets, _, handle = ops.ep_dispatch(x, idx, w, ctx, check_ids=False)
        # the experts on the device: row r of local expert le scales by (rank * e_loc + le + 1)
        rows = torch.arange(ctx.rows, device="cuda", dtype=torch.int32)
        le = torch.searchsorted(offsets, rows, right=True).clamp(max=e_loc - 1)
        return ops.ep_combine(tokens * scale[le][:, None], handle, ctx)

    def load(seed):
        inputs = [_inputs(seed, r, T, H, k, E, torch.float32) for r in range(world)]
        xr, ir, wr = inputs[rank]
        x.copy_(xr)
        idx.copy_(ir.long())
        w.copy_(wr)
        return _want(xr, ir, wr)

    try:
        load(100)
        step()  # warm-up: compiles and loads every kernel outside the capture
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            y = step()
        for seed in range(101, 106):
            want = load(seed)
            graph.replay()
            torch.cuda.synchronize()
            assert torch.equal(y.cpu(), want), (rank, seed)
    finally:
        torch.cuda.synchronize()
        ctx.close()


def test_ep_layer_matches_the_reference():
    """``layers.ep_moe_forward`` (bf16, SiLU-gated experts) against the per-expert fp32 reference of the whole layer."""
    from triton_dist import ops
    from triton_dist.layers import ep_moe_forward, moe_reference

    rank, world = _init()
    E, k, H, inter, T = 8 * world, 4, 1024, 512, 80
    e_loc = E // world
    g = torch.Generator().manual_seed(5)
    w_gate_up = (torch.randn((E, H, 2 * inter), generator=g) / 32).to(torch.bfloat16).cuda()
    w_down = (torch.randn((E, inter, H), generator=g) / 32).to(torch.bfloat16).cuda()
    ctx = ops.create_ep_ctx(T, H, k, E, torch.bfloat16)
    try:
        for seed in (1, 3):
            x, idx, w = (t.cuda() for t in _inputs(seed, rank, _tokens(seed, rank, world, T), H, k, E, torch.bfloat16))
            x = x / 4
            y = ep_moe_forward(x, idx, w, w_gate_up[rank * e_loc:(rank + 1) * e_loc],
                               w_down[rank * e_loc:(rank + 1) * e_loc], ctx)
            ref = moe_reference(x, idx, w, w_gate_up, w_down)
            torch.testing.assert_close(y.float(), ref, rtol=2e-2, atol=2e-2)
    finally:
        ctx.close()


def test_fp8_dispatch_matches_moe_route_quantiser():
    """``quant="fp8"``: the received codes and scales equal ``moe_route(quant="fp8")``'s of the reference rows, and the
    fp8 layout feeds ``group_gemm`` with block scales."""
    from triton_dist import ops

    rank, world = _init()
    E, k, H, T = 8 * world, 4, 2048, 64
    e_loc = E // world
    ctx = ops.create_ep_ctx(T, H, k, E, torch.bfloat16, quant="fp8")
    try:
        for seed in (1, 3):
            inputs = []
            for r in range(world):
                _, idx, w = _inputs(seed, r, _tokens(seed, r, world, T), H, k, E, torch.bfloat16)
                g = torch.Generator().manual_seed(seed * 31 + r)
                inputs.append(((torch.randn((idx.shape[0], H), generator=g) * 3).to(torch.bfloat16), idx, w))
            x, idx, w = (t.cuda() for t in inputs[rank])
            tokens, offsets, scales, handle = ops.ep_dispatch(x, idx, w, ctx)
            ref_rows, ref_offs = _reference(inputs, rank, e_loc, H)
            assert offsets.tolist() == ref_offs, (rank, seed)
            n = ref_offs[-1]
            if n:
                one = torch.zeros((n, 1), dtype=torch.int64, device="cuda")
                q, _, s, _ = ops.moe_route(ref_rows.cuda(), one, torch.ones((n, 1), device="cuda"), 1, quant="fp8")
                assert torch.equal(tokens[:n].view(torch.uint8), q.view(torch.uint8)), (rank, seed)
                assert torch.equal(scales[:n], s), (rank, seed)
                w8 = (torch.randn((e_loc, H, 256), device="cuda") / 8).to(torch.float8_e4m3fn)
                sb = torch.ones((e_loc, H // 128, 2), device="cuda")
                got = ops.group_gemm(tokens, w8, offsets, scale_a=scales, scale_b=sb)[:n].float()
                deq = tokens[:n].float() * scales[:n].repeat_interleave(128, dim=1)
                start, want = 0, []
                for le, end in enumerate(offsets.tolist()):
                    want.append(deq[start:end] @ w8[le].float())
                    start = end
                want = torch.cat(want)
                assert ((got - want).norm() / want.norm()).item() < 1e-2, (rank, seed)
            ops.ep_combine(torch.zeros((ctx.rows, H), dtype=torch.bfloat16, device="cuda"), handle, ctx)
    finally:
        ctx.close()


@pytest.mark.parametrize("method", ["push", "normal", "ll"])
def test_graph_with_two_in_flight_and_a_quiet_rank(method):
    """One CUDA graph holding dispatch A, dispatch B, combine A, combine B, replayed with new routings; the last rank
    has no tokens and on odd replays every other rank routes only to its own experts (no rows between ranks: only the
    count exchange orders them)."""
    from triton_dist import ops

    rank, world = _init()
    E, k, H = 4 * world, 2, 256
    e_loc = E // world
    T = 0 if rank == world - 1 else 32
    ctx = ops.create_ep_ctx(32, H, k, E, torch.float32, method=method)
    bufs = [(torch.zeros((T, H), device="cuda"), torch.zeros((T, k), dtype=torch.int64, device="cuda"),
             torch.zeros((T, k), device="cuda")) for _ in range(2)]
    scale = (torch.arange(E, device="cuda", dtype=torch.float32) + 1)[rank * e_loc:(rank + 1) * e_loc]

    def experts(tokens, offsets):
        rows = torch.arange(ctx.rows, device="cuda", dtype=torch.int32)
        return tokens * scale[torch.searchsorted(offsets, rows, right=True).clamp(max=e_loc - 1)][:, None]

    def step():
        a = ops.ep_dispatch(*bufs[0], ctx, check_ids=False)
        b = ops.ep_dispatch(*bufs[1], ctx, check_ids=False)
        return ops.ep_combine(experts(a[0], a[1]), a[3], ctx), ops.ep_combine(experts(b[0], b[1]), b[3], ctx)

    def load(seed):
        wants = []
        for i, (x, idx, w) in enumerate(bufs):
            xr, ir, wr = _inputs(seed * 2 + i, rank, T, H, k, E, torch.float32)
            if seed % 2:
                ir = rank * e_loc + (ir % e_loc)  # own experts only
            x.copy_(xr)
            idx.copy_(ir.long())
            w.copy_(wr)
            wants.append(_want(xr, ir, wr))
        return wants

    try:
        load(200)
        step()
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            ya, yb = step()
        for seed in range(201, 207):
            wa, wb = load(seed)
            graph.replay()
            torch.cuda.synchronize()
            assert torch.equal(ya.cpu(), wa) and torch.equal(yb.cpu(), wb), (rank, seed)
    finally:
        torch.cuda.synchronize()
        ctx.close()
