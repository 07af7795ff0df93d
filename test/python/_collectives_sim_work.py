"""Rank-side functions for test_collectives_sim.py / test_ops_api.py (module level, so rank processes can import
them by reference). Each returns a list of failure strings (empty = pass) plus counts, so one spawn checks a lot."""
from __future__ import annotations

import random
import time

import torch

from _expect import expect_error


def _init():
    import triton_dist.utils as u

    u.initialize_distributed()
    import torch.distributed as dist

    return dist.get_rank(), dist.get_world_size()


def _inputs(seed, rank, n, dtype):
    g = torch.Generator().manual_seed(seed * 1000 + rank)
    if dtype.is_floating_point and dtype.itemsize == 1:
        return (torch.randn(n, generator=g) * 4).to(dtype)
    # small integers: sums are exact in every dtype, so results can be compared exactly
    return torch.randint(-8, 9, (n, ), generator=g).to(dtype)


def _all_inputs(seed, world, n, dtype):
    return [_inputs(seed, r, n, dtype) for r in range(world)]


def _eq(a, b):
    if a.dtype.itemsize == 1 and a.dtype.is_floating_point:
        return torch.equal(a.view(torch.uint8), b.view(torch.uint8))
    return torch.equal(a, b)


def check_ag(rank, world, ctx, seed, n, method):
    from triton_dist.ops import all_gather

    xs = _all_inputs(seed, world, n, ctx.dtype)
    out = all_gather(xs[rank], ctx, method=method)
    ref = torch.cat(xs)
    return [] if _eq(out.view(-1), ref) else [f"all_gather {method} n={n} {ctx.dtype}"]


def check_rs(rank, world, ctx, seed, n, method):
    from triton_dist.ops import reduce_scatter

    xs = _all_inputs(seed, world, n, ctx.dtype)
    out = reduce_scatter(xs[rank], ctx, method=method)
    ref = torch.stack([x.float() for x in xs]).sum(0).to(ctx.dtype)
    s = n // world
    return [] if torch.equal(out, ref[rank * s:(rank + 1) * s]) else [f"reduce_scatter {method} n={n} {ctx.dtype}"]


def check_ar(rank, world, ctx, seed, n, method):
    from triton_dist.ops import all_reduce

    xs = _all_inputs(seed, world, n, ctx.dtype)
    out = all_reduce(xs[rank], ctx, method=method)
    ref = torch.stack([x.float() for x in xs]).sum(0).to(ctx.dtype)
    return [] if torch.equal(out, ref) else [f"all_reduce {method} n={n} {ctx.dtype}: max err "
                                             f"{(out.float() - ref.float()).abs().max().item()}"]


def every_kernel(sizes=(1, 96, 1000, 4096), dtypes=("bfloat16", "float16", "float32")):
    """Every kernel / method at several sizes and dtypes, each twice (epoch reuse); returns (failures, checks).
    Above 2 ranks: bf16 only (the protocols' multi-peer paths; the dtype coverage is the 2-rank run's, as in
    :func:`push_pipe_cases`: the kernels' dtype handling does not depend on the rank count, and the 4-rank run of
    three dtypes was the slowest test of the CPU tier)."""
    from triton_dist.ops import (create_allgather_ctx, create_allreduce_ctx, create_p2p_ctx,
                                 create_reduce_scatter_ctx, recv, send)

    rank, world = _init()
    if world > 2:
        dtypes = dtypes[:1]
    fails, checks = [], 0
    for dn in dtypes:
        dtype = getattr(torch, dn)
        maxn = max(sizes) * world
        ag = create_allgather_ctx(max(sizes), dtype)
        rs = create_reduce_scatter_ctx(maxn, dtype)
        ar = create_allreduce_ctx(maxn, dtype, one_shot_max_numel=maxn)
        for rep in range(2):
            for n in sizes:
                seed = rep * 100 + n
                for m in ("push", "pull", "ll", "auto"):
                    fails += check_ag(rank, world, ag, seed, n, m)
                    checks += 1
                for m in ("direct", "direct_push", "ring", "ll", "auto"):
                    fails += check_rs(rank, world, rs, seed, n * world, m)
                    checks += 1
                for m in ("one_shot", "two_shot", "ll", "auto"):
                    fails += check_ar(rank, world, ar, seed, n * world - 3 if n > 1 else n, m)
                    checks += 1
        for c in (ag, rs, ar):
            c.close()
    # fp8 all-gather
    f8 = torch.float8_e4m3fn
    ag = create_allgather_ctx(512, f8)
    for rep in range(2):
        for m in ("push", "pull", "ll"):
            fails += check_ag(rank, world, ag, rep, 512, m)
            checks += 1
        fails += check_ag(rank, world, ag, rep, 509, "ll")  # a partial last word (1-byte elements, 4 per word)
        checks += 1
    ag.close()
    # p2p: ring exchange (send to next, receive from previous), twice, different sizes
    p2p = create_p2p_ctx(2048, torch.bfloat16)
    nxt, prv = (rank + 1) % world, (rank - 1) % world
    for rep, n in enumerate((2048, 77, 1024)):
        x = _inputs(rep, rank, n, torch.bfloat16)
        send(x, nxt, p2p)
        y = recv((n, ), prv, p2p)
        checks += 1
        if not torch.equal(y, _inputs(rep, prv, n, torch.bfloat16)):
            fails.append(f"p2p rep={rep} n={n}")
    p2p.close()
    return fails, checks


def _randn(seed, rank, n, dtype):
    g = torch.Generator().manual_seed(seed * 1000 + rank)
    return torch.randn(n, generator=g).to(dtype)


def push_pipe_cases(sizes=(1, 96, 777, 1000, 4096), dtypes=("bfloat16", "float32")):
    """The pipelined methods (all-gather / reduce-scatter ``push_pipe``) with small blocks (128 elements) and
    segments of one block, so 1 segment (n=1, 96), several, ragged last segments and odd counts all happen at tiny
    sizes; two channel shapes: 2 pushers + 2 copiers, and 3 pushers + 2 copiers (a copier serving two pushers).
    All-gather results must equal the reference and ``push``'s; reduce-scatter results (random floats) must be
    bit-identical to ``direct_push``'s. Calls alternate methods on one context and change size every call (the
    number of segments changes between calls). Above 2 ranks: the first dtype and one repetition (the protocol's
    multi-peer paths; the dtype and repeat coverage is the 2-rank run's, which keeps CI minutes down). Returns
    (failures, checks)."""
    from triton_dist.ops import (all_gather, all_reduce, create_allgather_ctx, create_allreduce_ctx,
                                 create_reduce_scatter_ctx, reduce_scatter)

    rank, world = _init()
    reps = 2
    if world > 2:
        dtypes, reps = dtypes[:1], 1
    fails, checks = [], 0
    for dn in dtypes:
        dtype = getattr(torch, dn)
        esize = torch.empty((), dtype=dtype).element_size()
        for nprog, pushers in ((4, None), (5, 3)):
            kw = dict(num_programs=nprog, block_bytes=128 * esize, pipe_pushers=pushers, pipe_segments=4,
                      pipe_seg_blocks=1)
            ag = create_allgather_ctx(max(sizes), dtype, methods=("push", "push_pipe"), **kw)
            rs = create_reduce_scatter_ctx(max(sizes) * world, dtype, methods=("direct_push", "push_pipe"), **kw)
            ar = create_allreduce_ctx(max(sizes) * world, dtype, methods=("two_shot", "two_shot_pipe"), **kw)
            P = ag.push_pipe.pushers
            if ag.push_pipe.num_programs != nprog or P != (pushers or nprog // 2):
                fails.append(f"push_pipe channel shape {ag.push_pipe.num_programs} programs, {P} pushers")
            for rep in range(reps):
                for n in sizes:
                    seed = rep * 100 + n
                    xs = _all_inputs(seed, world, n, dtype)
                    ref = torch.cat(xs)
                    a = all_gather(xs[rank], ag, method="push_pipe").view(-1)
                    b = all_gather(xs[rank], ag, method="push").view(-1)
                    a2 = all_gather(xs[rank], ag, method="push_pipe").view(-1)
                    checks += 3
                    if not (_eq(a, ref) and _eq(b, ref) and _eq(a2, ref)):
                        fails.append(f"all_gather push_pipe n={n} {dtype} programs={nprog}")
                    xr = _randn(seed, rank, n * world, dtype)
                    p = reduce_scatter(xr, rs, method="push_pipe")
                    d = reduce_scatter(xr, rs, method="direct_push")
                    p2 = reduce_scatter(xr, rs, method="push_pipe")
                    xi = _all_inputs(seed, world, n * world, dtype)
                    ri = reduce_scatter(xi[rank], rs, method="push_pipe")
                    rref = torch.stack([x.float() for x in xi]).sum(0).to(dtype)[rank * n:(rank + 1) * n]
                    checks += 4
                    if not (torch.equal(p, d) and torch.equal(p2, d)):
                        fails.append(f"reduce_scatter push_pipe != direct_push n={n} {dtype} programs={nprog}: max "
                                     f"diff {(p.float() - d.float()).abs().max().item()}")
                    if not torch.equal(ri, rref):
                        fails.append(f"reduce_scatter push_pipe n={n} {dtype} programs={nprog}")
                    # all-reduce: odd count (ragged last shard), bit-identical to two_shot, and in place
                    na = max(1, n * world - 3)
                    xa = _randn(seed, rank, na, dtype)
                    t = all_reduce(xa, ar, method="two_shot")
                    u = all_reduce(xa, ar, method="two_shot_pipe")
                    xin = xa.clone()
                    all_reduce(xin, ar, out=xin, method="two_shot_pipe")
                    checks += 3
                    if not (torch.equal(t, u) and torch.equal(xin, t)):
                        fails.append(f"all_reduce two_shot_pipe != two_shot n={na} {dtype} programs={nprog}")
                    fails += check_ar(rank, world, ar, seed, na, "two_shot_pipe")
                    checks += 1
            ag.close()
            rs.close()
            ar.close()
    # fp8 all-gather (moved as bytes)
    f8 = create_allgather_ctx(512, torch.float8_e4m3fn, methods=("push_pipe", ), block_bytes=128, pipe_segments=4,
                              pipe_seg_blocks=1)
    for rep in range(2):
        fails += check_ag(rank, world, f8, rep, 512 - rep, "push_pipe")
        checks += 1
    f8.close()
    return fails, checks


def stress(calls, seed=0, max_elems=512):
    """Randomised op/size/dtype/method sequence (same on every rank), every result verified."""
    from triton_dist.ops import create_allgather_ctx, create_allreduce_ctx, create_reduce_scatter_ctx

    rank, world = _init()
    rng = random.Random(seed)
    dtypes = [torch.bfloat16, torch.float16, torch.float32]
    ctxs = {}
    for dt in dtypes:
        ctxs[("ag", dt)] = create_allgather_ctx(max_elems, dt)
        ctxs[("rs", dt)] = create_reduce_scatter_ctx(max_elems * world, dt)
        ctxs[("ar", dt)] = create_allreduce_ctx(max_elems * world, dt, one_shot_max_numel=max_elems,
                                                methods=("one_shot", "two_shot", "two_shot_pipe", "ll"))
    fails, t0 = [], time.time()
    for i in range(calls):
        dt = rng.choice(dtypes)
        op = rng.choice(["ag", "rs", "ar"])
        n = rng.randint(1, max_elems)
        if op == "ag":
            fails += check_ag(rank, world, ctxs[(op, dt)], i, n, rng.choice(["push", "pull", "push_pipe", "ll", "auto"]))
        elif op == "rs":
            fails += check_rs(rank, world, ctxs[(op, dt)], i, n * world, rng.choice(["direct", "direct_push",
                                                                                      "push_pipe", "ll", "ring",
                                                                                      "auto"]))
        else:
            m = rng.choice(["one_shot", "two_shot", "two_shot_pipe", "ll", "auto"])
            nn = rng.randint(1, max_elems if m == "one_shot" else max_elems * world)
            fails += check_ar(rank, world, ctxs[(op, dt)], i, nn, m)
        if len(fails) > 5:
            break
    for c in ctxs.values():
        c.close()
    return fails, calls, time.time() - t0




def api_checks():
    """Validation before launch, torch.library ops (real + fake + torch.compile), auto selection, check_peers,
    fingerprint mismatch, out= and in-place use. Returns a list of failures."""
    import torch.distributed as dist

    from triton_dist import ops
    from triton_dist.ops import collectives as C

    rank, world = _init()
    fails = []
    bf = torch.bfloat16
    ar = ops.create_allreduce_ctx(1024, bf)
    ag = ops.create_allgather_ctx(256, bf)
    rs = ops.create_reduce_scatter_ctx(256 * world, bf)
    p2p = ops.create_p2p_ctx(64, bf)
    x = _inputs(1, rank, 100, bf)
    # --- validation (nothing is launched: a launch on one rank only would hang the peers' next call)
    expect_error(fails, "dtype", lambda: ops.all_reduce(x.float(), ar), "all_reduce", "float32", "bfloat16")
    expect_error(fails, "too big", lambda: ops.all_reduce(torch.zeros(2048, dtype=bf), ar), "2048", "1024")
    expect_error(fails, "method", lambda: ops.all_reduce(x, ar, method="tree"), "tree", "one_shot")
    expect_error(fails, "noncontig", lambda: ops.all_reduce(torch.zeros(8, 8, dtype=bf).t(), ar),
                        "contiguous")
    expect_error(fails, "wrong ctx", lambda: ops.all_reduce(x, ag), "create_allreduce_ctx")
    expect_error(fails, "not tensor", lambda: ops.all_gather([1, 2], ag), "torch.Tensor")
    expect_error(fails, "ag out", lambda: ops.all_gather(x, ag, out=torch.empty(3, dtype=bf)), "out")
    expect_error(fails, "ag ce on sim", lambda: ops.all_gather(x, ag, method="ce"), "ce")
    expect_error(fails, "rs rows", lambda: ops.reduce_scatter(torch.zeros(world * 2 + 1, dtype=bf), rs),
                        "multiple of the world size")
    expect_error(fails, "rs ctx size", lambda: ops.create_reduce_scatter_ctx(world * 8 + 1, bf),
                        "multiple of the world size")
    expect_error(fails, "ctx dtype", lambda: ops.create_allreduce_ctx(16, torch.int32), "int32", "bfloat16")
    expect_error(fails, "fp8 reduce", lambda: ops.create_allreduce_ctx(16, torch.float8_e4m3fn),
                        "float8_e4m3fn")
    expect_error(fails, "ctx size", lambda: ops.create_allgather_ctx(0, bf), "max_numel")
    expect_error(fails, "send to self", lambda: ops.send(x[:8], rank, p2p), "dst")
    expect_error(fails, "recv big", lambda: ops.recv((65, ), (rank + 1) % world, p2p), "65")
    expect_error(fails, "one_shot cap", lambda: ops.all_reduce(
        torch.zeros(1024, dtype=bf), ops.create_allreduce_ctx(1024, bf, one_shot_max_numel=256), method="one_shot"),
        "one_shot_max_numel")
    # --- the ops still work after all those rejected calls (no half-launched state)
    xs = _all_inputs(5, world, 100, bf)
    ref = torch.stack([t.float() for t in xs]).sum(0).to(bf)
    y = ops.all_reduce(xs[rank], ar)
    if not torch.equal(y, ref):
        fails.append("all_reduce after rejected calls")
    # in place (out is x) and 2-D shapes
    z = xs[rank].clone().view(10, 10)
    ops.all_reduce(z, ar, out=z, method="two_shot")
    if not torch.equal(z.view(-1), ref):
        fails.append("in-place two_shot")
    g = ops.all_gather(xs[rank].view(10, 10), ag)
    if g.shape != (10 * world, 10) or not torch.equal(g.view(-1), torch.cat(xs)):
        fails.append(f"all_gather 2-D shape {tuple(g.shape)}")
    r = ops.reduce_scatter(torch.cat(xs).view(world * 10, 10)[:world * 10], rs) if False else None  # noqa: F841
    big = _inputs(9, rank, world * 64, bf).view(world * 8, 8)
    allb = [_inputs(9, q, world * 64, bf) for q in range(world)]
    r = ops.reduce_scatter(big, rs)
    rref = torch.stack([t.float() for t in allb]).sum(0).to(bf)[rank * 64:(rank + 1) * 64]
    if r.shape != (8, 8) or not torch.equal(r.view(-1), rref):
        fails.append(f"reduce_scatter 2-D shape {tuple(r.shape)}")
    # --- auto selection follows the table; NCCL fallback ranges are honoured (gloo here)
    if C._select_method("all_reduce", 2, 1024, True) != "one_shot":
        fails.append("auto small != one_shot")
    ar.method = "nccl"  # the context's default method (docs/ops.md: how to force a method)
    try:
        y = ops.all_reduce(xs[rank], ar)  # -> torch.distributed (gloo on the simulator)
        if not torch.equal(y, ref):
            fails.append("nccl fallback result")
    finally:
        ar.method = "auto"
    # --- torch.library: registered ops, fake implementation, real call, torch.compile tracing around them
    for name in ("all_gather", "reduce_scatter", "all_reduce"):
        if not hasattr(torch.ops.triton_dist, name):
            fails.append(f"torch.ops.triton_dist.{name} missing")
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        fx = torch.empty(10, 10, dtype=bf)
        if torch.ops.triton_dist.all_gather(fx, ag.handle, "auto").shape != (10 * world, 10):
            fails.append("fake all_gather shape")
        if torch.ops.triton_dist.all_reduce(fx, ar.handle, "auto").shape != (10, 10):
            fails.append("fake all_reduce shape")
        if torch.ops.triton_dist.reduce_scatter(torch.empty(world * 4, 3, dtype=bf), rs.handle,
                                                "auto").shape != (4, 3):
            fails.append("fake reduce_scatter shape")
    y = torch.ops.triton_dist.all_reduce(xs[rank], ar.handle, "one_shot")
    if not torch.equal(y, ref):
        fails.append("torch.ops all_reduce result")

    def f(t):
        return ops.all_reduce(t * 2, ar) + 1

    try:
        cf = torch.compile(f, backend="aot_eager", fullgraph=True)
        y = cf(xs[rank])
        if not torch.equal(y, (ref.float() * 2 + 1).to(bf)):
            fails.append("torch.compile result")
    except Exception as exc:  # noqa: BLE001
        fails.append(f"torch.compile: {type(exc).__name__}: {str(exc)[:300]}")
    # --- methods=: only the requested buffers are allocated; other methods are refused, auto adapts
    rs_ring = ops.create_reduce_scatter_ctx(8 * world, bf, methods=("ring", ))
    expect_error(fails, "unallocated method", lambda: ops.reduce_scatter(torch.zeros(8 * world, dtype=bf),
                                                                                rs_ring, method="direct"),
                        "not allocated", "ring")
    xr = [_inputs(11, q, 8 * world, bf) for q in range(world)]
    got = ops.reduce_scatter(xr[rank], rs_ring)
    if not torch.equal(got, torch.stack([t.float() for t in xr]).sum(0).to(bf)[rank * 8:(rank + 1) * 8]):
        fails.append("methods=('ring',) auto result")
    if rs_ring.select(64) != "ring" or rs_ring.direct is not None:
        fails.append("methods=('ring',) allocation/selection")
    rs_ring.close()
    expect_error(fails, "bad methods", lambda: ops.create_allreduce_ctx(16, bf, methods=("tree", )), "tree")
    expect_error(fails, "pipe knob", lambda: ops.create_allgather_ctx(16, bf, pipe_segments=0), "pipe_segments")
    expect_error(fails, "pipe knob", lambda: ops.create_reduce_scatter_ctx(16 * world, bf, pipe_pushers=-1),
                        "pipe_pushers")
    # --- check_peers: a cross-rank shape mismatch becomes a ValueError on every rank (host check)
    ar.check_peers = True
    bad = torch.zeros(16 + rank, dtype=bf)
    expect_error(fails, "check_peers", lambda: ops.all_reduce(bad, ar), "different arguments")
    ar.check_peers = False
    # --- fingerprint: contexts created with different arguments are refused on every rank, before allocation
    expect_error(fails, "fingerprint", lambda: ops.create_allgather_ctx(128 + rank, bf), "disagree")
    # all contexts still usable
    y = ops.all_reduce(xs[rank], ar)
    if not torch.equal(y, ref):
        fails.append("all_reduce at the end")
    dist.barrier()
    for c in (ar, ag, rs, p2p):
        c.close()
    return fails


def size_mismatch():
    """Ranks call all_reduce with different sizes (no check_peers): the tagged ready waits see the peer's signal for
    the same call with another size tag and raise at once (no timeout), naming the op and both tags."""
    from triton_dist import ops

    rank, world = _init()
    ar = ops.create_allreduce_ctx(1024, torch.bfloat16)
    ops.all_reduce(torch.ones(100 + rank, dtype=torch.bfloat16), ar, method="one_shot")
    return "no error"


def rank_mismatch_every_op():
    """Every collective (and send/recv) called with 100 elements on rank 0 and 101 on rank 1, each on a fresh
    context: returns ``{case: (error type, message, seconds)}`` for this rank (``None`` where the call returned)."""
    import torch.distributed as dist

    from triton_dist import ops

    rank, world = _init()
    dt = torch.float32
    n = 100 + rank
    x = torch.ones(n * world, dtype=dt)
    cases = {
        "all_reduce one_shot": (ops.create_allreduce_ctx, lambda c: ops.all_reduce(x[:n], c, method="one_shot")),
        "all_reduce two_shot": (ops.create_allreduce_ctx, lambda c: ops.all_reduce(x[:n], c, method="two_shot")),
        "all_reduce two_shot_pipe": (lambda cap, dt: ops.create_allreduce_ctx(cap, dt, methods=("two_shot_pipe", )),
                                     lambda c: ops.all_reduce(x[:n * world], c, method="two_shot_pipe")),
        "all_gather push": (ops.create_allgather_ctx, lambda c: ops.all_gather(x[:n], c, method="push")),
        "all_gather push_pipe": (ops.create_allgather_ctx, lambda c: ops.all_gather(x[:n], c, method="push_pipe")),
        "reduce_scatter direct": (ops.create_reduce_scatter_ctx,
                                  lambda c: ops.reduce_scatter(x[:n * world], c, method="direct")),
        "reduce_scatter ring": (ops.create_reduce_scatter_ctx,
                                lambda c: ops.reduce_scatter(x[:n * world], c, method="ring")),
        "all_reduce ll": (ops.create_allreduce_ctx, lambda c: ops.all_reduce(x[:n], c, method="ll")),
        "all_gather ll": (ops.create_allgather_ctx, lambda c: ops.all_gather(x[:n], c, method="ll")),
        "reduce_scatter ll": (ops.create_reduce_scatter_ctx,
                              lambda c: ops.reduce_scatter(x[:n * world], c, method="ll")),
        "send/recv": (ops.create_p2p_ctx, lambda c: ops.send(x[:100], 1, c) if rank == 0 else ops.recv((101, ), 0, c)),
    }
    out = {}
    for name, (make, call) in cases.items():
        ctx = make(1024, dt)
        t0 = time.monotonic()
        try:
            call(ctx)
            out[name] = None
        except Exception as exc:  # noqa: BLE001 - reported to the test
            out[name] = (type(exc).__name__, str(exc), time.monotonic() - t0)
        dist.barrier()
        ctx.close()
    return out


def peer_exits():
    """Rank 1 exits (its process ends) after creating the context; rank 0 then calls all_reduce, whose wait can
    never end: the simulator notices that rank 1's process is gone and raises within a second or two."""
    import os

    from triton_dist import ops

    rank, world = _init()
    ar = ops.create_allreduce_ctx(1024, torch.bfloat16)
    if rank == 1:
        os._exit(3)
    ops.all_reduce(torch.ones(100, dtype=torch.bfloat16), ar, method="one_shot")
    return "no error"


def ll_buffer_starts_empty():
    """The ll words are signals: a new context's must be empty whatever its memory held. NVSHMEM does not zero
    allocations (the simulator's heap does): symmetric allocations are made to return memory full of words whose
    flag reads as epoch 1 with another tag, then an all_gather runs on the context. Returns failures."""
    import triton_dist.utils as U
    from triton_dist import ops

    rank, world = _init()
    dt = torch.float32
    make = U.nvshmem_create_tensor

    def dirty(shape, dtype):
        t = make(shape, dtype)
        t.view(torch.uint8).fill_(0)
        if dtype == torch.int64:
            t.fill_((((1 << 16) | 999) << 32) | 5)  # epoch 1, tag 999: another call's words
        return t

    U.nvshmem_create_tensor = dirty
    try:
        ctx = ops.create_allgather_ctx(256, dt, methods=("ll", ))
    finally:
        U.nvshmem_create_tensor = make
    fails = [] if int(ctx.ll.buf.count_nonzero()) == 0 else ["the ll buffer of a new context is not empty"]
    xs = _all_inputs(3, world, 256, dt)
    try:
        out = ops.all_gather(xs[rank], ctx, method="ll")
        if not torch.equal(out.view(-1), torch.cat(xs)):
            fails.append("all_gather ll: wrong result")
    except Exception as exc:  # noqa: BLE001 - reported to the test
        fails.append(f"all_gather ll: {type(exc).__name__}: {exc}"[:300])
    ctx.close()
    return fails
