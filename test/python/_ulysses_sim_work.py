"""Rank-side functions of test_ulysses_sim.py (module level, so rank processes import them by reference). Each returns
a list of failure strings (empty = pass) and a count of checks.

Every rank derives the GLOBAL q, k, v ``[B, world * L, heads, D]`` of a case from one seed (the same values on every
rank) and takes its own chunk of the sequence, ``[:, rank * L:(rank + 1) * L]``, as its input; the reference of
``pre_attn_all_to_all`` is then the global tensor's head group ``[:, :, rank * Hg:(rank + 1) * Hg]`` (a plain torch
slice) and that of ``post_attn_all_to_all`` the rank's own chunk. The ops move bytes, so every check is exact
(``torch.equal``)."""
from __future__ import annotations

import torch

from _expect import one_line_checker


def _init():
    import triton_dist.utils as u

    u.initialize_distributed()
    import torch.distributed as dist

    return dist.get_rank(), dist.get_world_size()


def _global(seed, B, S, H, D, dtype):
    g = torch.Generator().manual_seed(seed)
    return torch.randn((B, S, H, D), generator=g).to(dtype)


def _eq(fails, tag, got, want):
    if tuple(got.shape) != tuple(want.shape) or got.dtype != want.dtype:
        fails.append(f"{tag}: {got.dtype} {tuple(got.shape)} != {want.dtype} {tuple(want.shape)}")
    elif not torch.equal(got, want):
        bad = (got != want).nonzero()
        fails.append(f"{tag}: {bad.shape[0]} elements differ, first at {bad[0].tolist()}")


def _guarded(B, S, H, D, dtype):
    """``(big, view, inside)``: a NaN tensor with a margin on every side of a ``[B, S, H, D]`` view (a strided
    ``out=``); ``inside`` marks the view's elements, so a write past any of its edges shows as a non-NaN outside."""
    big = torch.full((B + 1, S + 2, H + 1, D + 16), float("nan"), dtype=dtype)
    inside = torch.zeros(big.shape, dtype=torch.bool)
    inside[:B, 1:S + 1, 1:, :D] = True
    return big, big[:B, 1:S + 1, 1:, :D], inside


def _untouched(fails, tag, big, inside):
    if not torch.isnan(big[~inside].float()).all():
        fails.append(f"{tag}: wrote outside out")


def a2a_cases(cases):
    """For each case ``(B, L, H, Hkv, D, dtype name)``: one context sized for ``H`` heads (batch and tokens one
    larger than the calls': the slots are not filled) and five calls on it: ``pre`` of q (a non-contiguous view of
    a fused qkv tensor), of k (``Hkv`` heads, the same context), of v with ``out=`` a strided view inside a NaN
    margin (nothing written past its edges: the tiles' masks), ``post`` of q's result (== q), ``post`` of a
    transposed attention output with ``out=`` a guarded view; the epoch counts five."""
    from triton_dist import ops
    from triton_dist.ops import attention_ulysses as uly

    rank, world = _init()
    fails, checks = [], 0
    for ci, (B, L, H, Hkv, D, dtname) in enumerate(cases):
        dtype = getattr(torch, dtname)
        S, Hg, Hkg = world * L, H // world, Hkv // world
        ctx = ops.create_ulysses_ctx(B + 1, L + 1, H, D, dtype)
        tag = f"case {ci} rank {rank}"
        try:
            qkv = _global(100 + ci, B, S, H + 2 * Hkv, D, dtype)  # [B, S, H + 2 Hkv, D]: q, k, v heads side by side
            gq, gk, gv = qkv[:, :, :H], qkv[:, :, H:H + Hkv], qkv[:, :, H + Hkv:]
            mine = qkv[:, rank * L:(rank + 1) * L]
            q, k, v = mine[:, :, :H], mine[:, :, H:H + Hkv], mine[:, :, H + Hkv:]
            if q.is_contiguous():
                fails.append(f"{tag}: the q view is contiguous (the case tests strided input)")
            qh = ops.pre_attn_all_to_all(q, ctx)
            _eq(fails, tag + " pre(q)", qh, gq[:, :, rank * Hg:(rank + 1) * Hg])
            kh = ops.pre_attn_all_to_all(k, ctx)
            _eq(fails, tag + " pre(k)", kh, gk[:, :, rank * Hkg:(rank + 1) * Hkg])
            big, view, inside = _guarded(B, S, Hkg, D, dtype)
            vh = ops.pre_attn_all_to_all(v, ctx, out=view)
            if vh.data_ptr() != view.data_ptr():
                fails.append(f"{tag}: pre(v, out=) did not return out")
            _eq(fails, tag + " pre(v, out=)", vh, gv[:, :, rank * Hkg:(rank + 1) * Hkg])
            _untouched(fails, tag + " pre(v, out=)", big, inside)
            _eq(fails, tag + " post(pre(q))", ops.post_attn_all_to_all(qh, ctx), q)
            # the torch.distributed formulation (the benchmark's baseline) agrees, both ways
            _eq(fails, tag + " torch pre(q)", uly.pre_attn_all_to_all_torch(q, ctx.group), qh)
            _eq(fails, tag + " torch post", uly.post_attn_all_to_all_torch(qh, ctx.group), q)
            # an "attention output" of this rank's head group: [B, S, Hg, D] as a transposed view of [B, Hg, S, D]
            go = _global(200 + ci, B, H, S, D, dtype).transpose(1, 2)  # global [B, S, H, D], non-contiguous
            y = go[:, :, rank * Hg:(rank + 1) * Hg]
            big, view, inside = _guarded(B, L, H, D, dtype)
            o = ops.post_attn_all_to_all(y, ctx, out=view)
            if o.data_ptr() != view.data_ptr():
                fails.append(f"{tag}: post(y, out=) did not return out")
            _eq(fails, tag + " post(y, out=)", o, go[:, rank * L:(rank + 1) * L])
            _untouched(fails, tag + " post(y, out=)", big, inside)
            if ctx.epoch != 5:
                fails.append(f"{tag}: epoch {ctx.epoch} after five calls")
            checks += 1
        finally:
            ctx.close()
    return fails, checks


def bad_input_cases():
    """Every bad argument gets a one-line ValueError before any launch (on every rank alike, so nobody waits); a good
    call afterwards still works (epoch 1); then a rank calling pre while its peer calls post with as many elements is
    reported by the tagged waits on both ranks (the direction is part of the tag), not waited for."""
    from triton_dist import ops
    from triton_dist.backends.sim.context import SimSignalMismatch

    rank, world = _init()
    fails = []
    B, L, H, D = 2, 4, 4, 64
    bf = torch.bfloat16
    ctx = ops.create_ulysses_ctx(B, L, H, D, bf)
    x = torch.randn((B, L, H, D)).to(bf)
    y = torch.randn((B, world * L, H // world, D)).to(bf)

    expect = one_line_checker(fails, prefix=("pre_attn_all_to_all: ", "post_attn_all_to_all: ", "create_ulysses_ctx: "))

    pre, post = ops.pre_attn_all_to_all, ops.post_attn_all_to_all
    expect("heads % world", lambda: pre(torch.randn((B, L, 3, D)).to(bf), ctx), "3 heads", f"world size {world}")
    expect("GQA kv heads % world", lambda: pre(torch.randn((B, L, 1, D)).to(bf), ctx), "1 heads", "Hkv % world")
    expect("batch", lambda: pre(torch.randn((B + 1, L, H, D)).to(bf), ctx), f"max_batch={B}")
    expect("tokens", lambda: pre(torch.randn((B, L + 1, H, D)).to(bf), ctx), f"max_seq_per_rank={L}")
    expect("width", lambda: pre(torch.randn((B, L, 2 * H, D)).to(bf), ctx), "num_heads x head_dim")
    expect("head dim", lambda: pre(torch.randn((1, 1, 2, 2048)).to(bf), ctx), "head dim 2048")
    expect("dtype", lambda: pre(x.half(), ctx), "context's dtype")
    expect("3-D", lambda: pre(x[0], ctx), "4-D")
    expect("not a tensor", lambda: pre(x.tolist(), ctx), "torch.Tensor")
    expect("ctx", lambda: pre(x, object()), "create_ulysses_ctx")
    expect("out shape", lambda: pre(x, ctx, out=torch.empty((B, L, H, D), dtype=bf)), "out must be")
    expect("out dtype", lambda: pre(x, ctx, out=torch.empty((B, world * L, H // world, D))), "out must be")
    expect("out expanded", lambda: pre(x, ctx, out=torch.empty((B, 1, H // world, D), dtype=bf).expand(
        B, world * L, H // world, D)), "expanded")
    if world > 1:
        expect("post tokens % world", lambda: post(torch.randn((B, world * L + 1, H // world, D)).to(bf), ctx),
               "not a multiple of the world size")
    expect("post all heads", lambda: post(torch.randn((B, world * L, 2 * H, D)).to(bf), ctx), "head group")
    expect("post tokens", lambda: post(torch.randn((B, world * (L + 1), H // world, D)).to(bf), ctx),
           f"max_seq_per_rank={L}")
    expect("post out", lambda: post(y, ctx, out=torch.empty((B, L, H, D + 1), dtype=bf)), "out must be")
    if world > 1:
        expect("ctx heads % world", lambda: ops.create_ulysses_ctx(1, 1, world + 1, D), "num_heads=")
    expect("ctx head_dim", lambda: ops.create_ulysses_ctx(1, 1, H, 4096), "head_dim=4096")
    expect("ctx dtype", lambda: ops.create_ulysses_ctx(1, 1, H, D, torch.int8), "dtype")
    expect("ctx batch", lambda: ops.create_ulysses_ctx(0, 1, H, D), "max_batch=0")
    got = pre(x, ctx)
    if tuple(got.shape) != (B, world * L, H // world, D) or ctx.epoch != 1:
        fails.append(f"good call after bad ones: shape {tuple(got.shape)}, epoch {ctx.epoch}")
    if not torch.equal(post(got, ctx), x):
        fails.append("post(pre(x)) != x after the bad calls")
    if world == 2:  # pre on rank 0, post on rank 1, the same element count: told apart by the direction tag
        t = torch.randn((1, 2, 2, D)).to(bf)  # pre: 2 tokens, 2 heads; post: 2 = world x 1 tokens, 2 heads per rank
        try:
            pre(t, ctx) if rank == 0 else post(t, ctx)
            fails.append("pre against post: no error")
        except SimSignalMismatch as exc:
            op = "pre_attn_all_to_all" if rank == 0 else "post_attn_all_to_all"
            msg = str(exc)
            if "\n" in msg or not msg.startswith(f"{op}: [triton_dist sim] rank {rank}: ranks disagree"):
                fails.append(f"pre against post: message {msg!r}")
    ctx.close()
    expect("closed", lambda: pre(x, ctx), "closed")
    return fails, 1


def compiled_ops():
    """The registered ops: ``torch.ops.triton_dist.pre_attn_all_to_all`` / ``post_attn_all_to_all`` equal the public
    calls, their fake implementations give the real outputs' shape, dtype and device, and a function calling the
    public ops (pre, a head-local computation, post) compiles with ``torch.compile(fullgraph=True)`` (aot_eager),
    emits both ops and matches its eager run bit for bit."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    from triton_dist import ops

    rank, world = _init()
    fails = []
    B, L, H, D = 1, 2, 2 * world, 64
    ctx = ops.create_ulysses_ctx(B, L, H, D, torch.bfloat16)
    T = torch.ops.triton_dist
    try:
        g = _global(7, B, world * L, H, D, torch.bfloat16)
        x = g[:, rank * L:(rank + 1) * L]
        want = g[:, :, rank * (H // world):(rank + 1) * (H // world)]
        for name, op, arg, ref in (("pre", T.pre_attn_all_to_all, x, want),
                                   ("post", T.post_attn_all_to_all, want, x)):
            real = op(arg, ctx.handle)
            _eq(fails, f"rank {rank} op {name}", real, ref)
            with FakeTensorMode() as mode:
                fake = op(mode.from_tensor(arg), ctx.handle)
            if (real.shape, real.dtype, real.device) != (fake.shape, fake.dtype, fake.device):
                fails.append(f"{name}: real {tuple(real.shape)} {real.dtype}, fake {tuple(fake.shape)} {fake.dtype}")

        def step(t):
            heads = ops.pre_attn_all_to_all(t, ctx)
            return ops.post_attn_all_to_all(heads * 2 + 1, ctx)

        traced = []

        def backend(gm, example_inputs):
            traced.extend(str(n.target) for n in gm.graph.nodes if n.op == "call_function")
            return torch._dynamo.lookup_backend("aot_eager")(gm, example_inputs)

        eager = step(x)
        _eq(fails, f"rank {rank} eager step", eager, x * 2 + 1)
        got = torch.compile(step, backend=backend, fullgraph=True)(x)
        _eq(fails, f"rank {rank} compiled step", got, eager)
        for op in ("pre_attn_all_to_all", "post_attn_all_to_all"):
            if not any(t.startswith(f"triton_dist.{op}") for t in traced):
                fails.append(f"the traced graph has no torch.ops.triton_dist.{op}: {traced}")
    finally:
        ctx.close()
    return fails, 1


def bench_tiny(out_dir):
    """``benchmarks/bench_attention.py --tiny --only ulysses --out out_dir`` in this rank process (its ``main``, as
    torchrun runs it): ours checked against the torch.distributed formulation and ``post(pre(x)) == x``, rank 0 writes
    the JSON; a failed check exits with status 1 (SystemExit: the rank's failure)."""
    import os
    import sys

    bench = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "benchmarks")
    if bench not in sys.path:
        sys.path.insert(0, bench)
    import bench_attention

    bench_attention.main(["--tiny", "--only", "ulysses", "--out", out_dir])
    return [], 1
