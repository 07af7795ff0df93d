"""Rank-side functions of test_moe_tp_sim.py (module level, so rank processes import them by reference). Each
returns a list of failure strings (empty = pass) and a count of checks.

Every rank derives every rank's tokens, routing and weight slices from the same seeds, so each checks its results
against a plain torch reference of the whole world. The ops are checked with *linear* experts (no gate between the
GEMMs) whose weights are small integers distinct per expert: values stay integers (or multiples of 1/8 after the top-k
weights) small enough that every product and sum is exact in fp32 and every documented rounding to the context's
dtype (``h`` and ``y`` per row, each peer's partial sum) can be reproduced exactly, so a row sent to the wrong
expert, gathered from the wrong token or combined with the wrong weight fails. The layer (SiLU gate) is checked
against ``layers.moe_reference`` and ``layers.tp_moe_torch`` with a bf16 tolerance."""
from __future__ import annotations

import torch

from _expect import one_line_checker


def _init():
    import triton_dist.utils as u

    u.initialize_distributed()
    import torch.distributed as dist

    return dist.get_rank(), dist.get_world_size()


def _routing(g, T, k, E, mode):
    if mode == "one_expert":  # every token to the same experts (slot j -> expert j % E): the others get no rows
        return (torch.arange(k) % E).repeat(T, 1)
    if mode == "skewed":  # the last experts only
        lo = E - max(k, E // 4)
        return torch.stack([torch.randperm(E - lo, generator=g)[:k] + lo for _ in range(T)])
    return torch.stack([torch.randperm(E, generator=g)[:k] for _ in range(T)])


def _inputs(seed, world, T, H, k, E, N, dtype, mode):
    """Every rank's ``(x [T, H], idx [T, k], w [T, k])`` and the full weights ``W1 [E, H, world * N]`` (rank ``q``'s
    slice: columns ``[q * N, (q + 1) * N)``) and ``W2 [E, world * N, H]`` (rows ``[q * N, (q + 1) * N)``)."""
    g = torch.Generator().manual_seed(seed)
    ranks = []
    for _ in range(world):
        x = torch.randint(-3, 4, (T, H), generator=g).to(dtype)
        idx = _routing(g, T, k, E, mode).to(torch.int32 if seed % 2 else torch.int64)
        w = torch.randint(1, 9, (T, k), generator=g).float() / 8
        ranks.append((x, idx, w))
    W1 = torch.randint(-1, 2, (E, H, world * N), generator=g).to(dtype)
    W2 = torch.randint(-1, 2, (E, world * N, H), generator=g).to(dtype)
    return ranks, W1, W2


def _reference_layout(ranks, E):
    """The TP layout of the gathered tokens: ``(pairs, offsets)``: per expert, (source rank, token, slot) in order."""
    T, k = ranks[0][1].shape
    pairs, offs = [], []
    for e in range(E):
        for s, (_x, idx, _w) in enumerate(ranks):
            for t in range(T):
                for j in range(k):
                    if int(idx[t, j]) == e:
                        pairs.append((s, t, j))
        offs.append(len(pairs))
    return pairs, offs


def _check_ops(ctx, rank, world, ranks, W1, W2, N, tag, transposed):
    from triton_dist import ops

    fails = []
    dtype = ctx.dtype
    E = ctx.num_experts
    x, idx, w = ranks[rank]
    w1 = W1[:, :, rank * N:(rank + 1) * N]
    w1 = w1.transpose(1, 2).contiguous().transpose(1, 2) if transposed else w1.contiguous()
    h, offsets, handle = ops.ag_group_gemm(x, idx, w, w1, ctx)
    pairs, ref_offs = _reference_layout(ranks, E)
    if offsets.tolist() != ref_offs:
        fails.append(f"{tag}: expert_offsets {offsets.tolist()} != {ref_offs}")
        return fails
    # h_q for every rank q (each rank's slice), rounded to the dtype as the op stores it
    hq = []
    for q in range(world):
        rows = [ranks[s][0][t].float() @ W1[int(ranks[s][1][t, j]), :, q * N:(q + 1) * N].float()
                for (s, t, j) in pairs]
        hq.append(torch.stack(rows).to(dtype) if rows else torch.empty((0, N), dtype=dtype))
    n = len(pairs)
    if not torch.equal(h[:n], hq[rank]):
        fails.append(f"{tag}: h differs from x_g @ w[e] in {int((h[:n] != hq[rank]).any(1).sum())} of {n} rows")
        return fails
    out = ops.group_gemm_rs(h, W2[:, rank * N:(rank + 1) * N, :].contiguous(), handle, ctx)
    # y_q rows rounded to the dtype; each rank's partial per token summed in fp32 in slot order; the peers' partials
    # rounded to the dtype, the own kept in fp32; summed, rounded once
    H = x.shape[1]
    T = x.shape[0]
    want = torch.zeros((T, H), dtype=torch.float32)
    for q in range(world):
        yq = [(hq[q][r].float() @ W2[int(ranks[s][1][t, j]), q * N:(q + 1) * N, :].float()).to(dtype).float()
              for r, (s, t, j) in enumerate(pairs)]
        part = torch.zeros((T, H), dtype=torch.float32)
        for r, (s, t, j) in enumerate(pairs):
            if s == rank:
                part[t] += ranks[s][2][t, j] * yq[r]
        want += part if q == rank else part.to(dtype).float()
    want = want.to(dtype)
    if out.shape != (T, H) or not torch.equal(out, want):
        err = (out.float() - want.float()).abs().max().item() if out.shape == want.shape else "shape"
        fails.append(f"{tag}: group_gemm_rs output differs (max err {err})")
    return fails


#: (E, k, H, N, T, dtype, mode)
def op_cases(world_cases):
    """For each case: a context, then three calls of ag_group_gemm + group_gemm_rs on it (the signals and buffers
    reused across calls), the second with the weights passed as ``[E, N, K]`` through ``.transpose(1, 2)``."""
    from triton_dist import ops

    rank, world = _init()
    fails, checks = [], 0
    for ci, (E, k, H, N, T, dtname, mode) in enumerate(world_cases):
        dtype = getattr(torch, dtname)
        ctx = ops.create_tp_moe_ctx(T + 1, H, k, E, dtype)
        try:
            for call in range(3):
                ranks, W1, W2 = _inputs(ci * 10 + call, world, T, H, k, E, N, dtype, mode)
                fails += _check_ops(ctx, rank, world, ranks, W1, W2, N,
                                    f"case {ci} E={E} k={k} T={T} {dtname} {mode} call {call}", call == 1)
                checks += 1
        finally:
            ctx.close()
    return fails, checks


def layer_case(E, k, H, inter, T):
    """``layers.TPMoE`` / ``tp_moe_forward`` against ``layers.moe_reference`` of the whole layer and against
    ``layers.tp_moe_torch`` (all_gather + per-expert matmuls + reduce_scatter), bf16 tolerance; then a call with 0
    tokens on every rank."""
    from triton_dist import ops
    from triton_dist.layers import TPMoE, moe_reference, tp_moe_forward, tp_moe_slices, tp_moe_torch

    rank, world = _init()
    g = torch.Generator().manual_seed(7)
    w_gate_up = (torch.randn((E, H, 2 * inter), generator=g) / 4).to(torch.bfloat16)
    w_down = (torch.randn((E, inter, H), generator=g) / 4).to(torch.bfloat16)
    fails = []
    layer = TPMoE(H, inter, E, k, T, torch.bfloat16).load_full_weights(w_gate_up, w_down)
    for seed in (1, 2):
        ranks, _, _ = _inputs(seed, world, T, H, k, E, 16, torch.bfloat16, "random")
        x, idx, w = ranks[rank]
        x = x / 4
        y = layer(x, idx, w)
        ref = moe_reference(x, idx, w, w_gate_up, w_down)
        gu, down = tp_moe_slices(w_gate_up, w_down, rank, world)
        base = tp_moe_torch(x, idx, w, gu, down)
        if not torch.allclose(base.float(), ref, rtol=3e-2, atol=3e-2):
            fails.append(f"seed {seed}: the torch TP layer differs from the reference")
        if y.shape != ref.shape or not torch.allclose(y.float(), ref, rtol=3e-2, atol=3e-2):
            fails.append(f"seed {seed}: TPMoE max err {(y.float() - ref).abs().max().item()}")
        y2 = tp_moe_forward(x, idx, w, gu, down, layer.ctx)
        if not torch.equal(y2, y):
            fails.append(f"seed {seed}: tp_moe_forward differs from the module")
        if seed == 1:  # traced whole (the registered ops and their fake implementations), the same result
            try:
                compiled = torch.compile(lambda *a: tp_moe_forward(*a, layer.ctx), backend="aot_eager",
                                         fullgraph=True)
                if not torch.equal(compiled(x, idx, w, gu, down), y):
                    fails.append("torch.compile(fullgraph=True) of tp_moe_forward differs from eager")
            except Exception as exc:  # noqa: BLE001 - reported to the test
                fails.append(f"torch.compile: {type(exc).__name__}: {str(exc)[:400]}")
    empty = torch.empty((0, H), dtype=torch.bfloat16)
    y0 = layer(empty, torch.empty((0, k), dtype=torch.int64), torch.empty((0, k)))
    if y0.shape != (0, H):
        fails.append(f"0 tokens: shape {tuple(y0.shape)}")
    # still usable after the empty call
    ranks, _, _ = _inputs(3, world, T, H, k, E, 16, torch.bfloat16, "one_expert")
    x, idx, w = ranks[rank]
    if not torch.allclose(layer(x / 4, idx, w).float(), moe_reference(x / 4, idx, w, w_gate_up, w_down), rtol=3e-2,
                          atol=3e-2):
        fails.append("after the empty call: differs from the reference")
    layer.close()
    _ = ops
    return fails, 1


def bad_input_cases():
    """Every bad argument gets a one-line ValueError before any launch (on every rank alike, so nobody waits)."""
    from triton_dist import ops

    rank, world = _init()
    fails = []
    E, k, H, N, T = 4, 2, 16, 16, 3
    ctx = ops.create_tp_moe_ctx(T, H, k, E, torch.bfloat16)
    x = torch.ones((T, H), dtype=torch.bfloat16)
    idx = torch.zeros((T, k), dtype=torch.int64)
    w = torch.ones((T, k))
    w1 = torch.ones((E, H, N), dtype=torch.bfloat16)
    w2 = torch.ones((E, N, H), dtype=torch.bfloat16)

    expect = one_line_checker(fails)

    bad_idx = idx.clone()
    bad_idx[1, 1] = E
    expect("id out of range", lambda: ops.ag_group_gemm(x, bad_idx, w, w1, ctx), "rank 0's topk_idx[1, 1]=4",
           "[0, 4)")
    # one rank's bad id: every rank raises (the ids are checked once gathered), naming that rank; nobody waits
    if world > 1:
        one_bad = bad_idx if rank == world - 1 else idx
        expect("one rank's id out of range", lambda: ops.ag_group_gemm(x, one_bad, w, w1, ctx),
               f"rank {world - 1}'s topk_idx[1, 1]=4")
    expect("too many tokens", lambda: ops.ag_group_gemm(torch.ones((T + 1, H), dtype=torch.bfloat16),
                                                         torch.zeros((T + 1, k), dtype=torch.int64),
                                                         torch.ones((T + 1, k)), w1, ctx), "max_tokens=3")
    expect("dtype", lambda: ops.ag_group_gemm(x.float(), idx, w, w1, ctx), "dtype")
    expect("hidden", lambda: ops.ag_group_gemm(torch.ones((T, 32), dtype=torch.bfloat16), idx, w, w1, ctx),
           "hidden=16")
    expect("topk", lambda: ops.ag_group_gemm(x, idx[:, :1].contiguous(), w[:, :1].contiguous(), w1, ctx),
           "topk=2")
    expect("w experts", lambda: ops.ag_group_gemm(x, idx, w, w1[:2], ctx), "[4, 16, N]")
    expect("w dtype", lambda: ops.ag_group_gemm(x, idx, w, w1.half(), ctx), "w.dtype")
    expect("w alignment", lambda: ops.ag_group_gemm(x, idx, w, torch.ones((E, H, 5), dtype=torch.bfloat16), ctx),
           "multiples of 8")
    expect("ctx", lambda: ops.ag_group_gemm(x, idx, w, w1, object()), "create_tp_moe_ctx")
    h, offs, handle = ops.ag_group_gemm(x, idx, w, w1, ctx)
    expect("a rows", lambda: ops.group_gemm_rs(h[:-1], w2, handle, ctx), f"[{world * T * k}, K]")
    expect("w2 N", lambda: ops.group_gemm_rs(h, torch.ones((E, N, 32), dtype=torch.bfloat16), handle, ctx),
           "hidden=16")
    expect("w2 K", lambda: ops.group_gemm_rs(h, torch.ones((E, 32, H), dtype=torch.bfloat16), handle, ctx),
           f"[{E}, {N}, N]")
    expect("handle", lambda: ops.group_gemm_rs(h, w2, object(), ctx), "TPMoEHandle")
    expect("out", lambda: ops.group_gemm_rs(h, w2, handle, ctx, out=torch.empty((T, H))), "out.dtype")
    y = ops.group_gemm_rs(h, w2, handle, ctx)  # the good call still runs after the refused ones
    if y.shape != (T, H):
        fails.append(f"good call after bad ones: shape {tuple(y.shape)}")
    expect("creation", lambda: ops.create_tp_moe_ctx(0, H, k, E), "max_tokens=0")
    expect("programs", lambda: ops.create_tp_moe_ctx(T, H, k, E, reduce_programs=0), "reduce_programs=0")
    expect("ctx dtype", lambda: ops.create_tp_moe_ctx(T, H, k, E, torch.float32), "dtype")
    ctx.close()
    expect("closed", lambda: ops.ag_group_gemm(x, idx, w, w1, ctx), "closed")
    return fails, 1


def bench_tiny(out_dir):
    """``benchmarks/bench_moe_tp.py --tiny --out out_dir`` in this rank process (its ``main``, as torchrun runs it):
    on the simulator every implementation is checked against the torch reference layer and rank 0 writes the JSON;
    a failed check exits with status 1 (SystemExit: the rank's failure)."""
    import os
    import sys

    bench = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "benchmarks")
    if bench not in sys.path:
        sys.path.insert(0, bench)
    import bench_moe_tp

    bench_moe_tp.main(["--tiny", "--out", out_dir])
    return [], 1
