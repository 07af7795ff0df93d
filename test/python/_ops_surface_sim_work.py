"""Rank-side functions for test_ops_surface_sim.py (module level, so rank processes import them by reference):
torch.compile of a TP MLP over the public ops, the fake implementations against the real ops, the capture guard of
the collectives and p2p, the naming convention's aliases (docs/ops.md). Each returns a list of failure strings."""
from __future__ import annotations

import torch

from _collectives_sim_work import _init
from _expect import expect_error

BF = torch.bfloat16


def _rand(seed, shape, dtype=BF):
    g = torch.Generator().manual_seed(seed)
    return (torch.randint(-4, 5, shape, generator=g).float() / 4).to(dtype)  # exact in bf16; sums exact in fp32


def _close(got, ref, what, fails, rtol=2.0**-6):
    if got.shape != ref.shape:
        fails.append(f"{what}: shape {tuple(got.shape)} vs {tuple(ref.shape)}")
        return
    err = (got.float() - ref.float()).abs().max().item()
    if err > rtol * max(1.0, ref.float().abs().max().item()):
        fails.append(f"{what}: max err {err}")


def compiled_tp_mlp():
    """A small tensor-parallel block compiled with ``torch.compile(fullgraph=True)``: the TPMLP (ag_gemm, gemm_rs),
    an all_gather of its rows, gemm_ar of the gathered rows with a row-parallel weight, a local matmul, and a ring
    send / recv. Checked against a plain torch computation of the whole block, and bit-for-bit against the same
    block run eagerly (the ops are the same computation)."""
    from triton_dist import ops
    from triton_dist.layers import TPMLP, mlp_reference

    rank, W = _init()
    fails = []
    H, inter, T, N = 32, 16 * W, 8 * W, 16
    t_loc, h_loc = T // W, H // W
    w_gate, w_up, w_down = _rand(1, (H, inter)), _rand(2, (H, inter)), _rand(3, (inter, H))
    w_ar, w_mm = _rand(4, (H, N)), _rand(5, (N, N))
    mlp = TPMLP(H, inter, max_tokens=T, device="cpu", method="fused")
    mlp.load_linear_weights(w_gate.t().contiguous(), w_up.t().contiguous(), w_down.t().contiguous())
    ag = ops.create_allgather_context(t_loc * H)
    ar = ops.create_gemm_ar_context(max_m=T, n=N)
    p2p = ops.create_p2p_context(t_loc * N)
    w_ar_loc = w_ar[rank * h_loc:(rank + 1) * h_loc].contiguous()
    nxt, prv = (rank + 1) % W, (rank - 1) % W

    def block(x_loc):
        y = mlp(x_loc)                                          # [t_loc, H]: this rank's rows
        full = torch.empty(T, H, dtype=BF)
        ops.all_gather(y, ag, out=full)                         # [T, H]; out= under compile: a copy of the op's
        z = ops.gemm_ar(full[:, rank * h_loc:(rank + 1) * h_loc].contiguous(), w_ar_loc, ar)  # [T, N]
        m = ops.matmul(z, w_mm)                                 # [T, N], local
        ops.send(m[rank * t_loc:(rank + 1) * t_loc].contiguous(), nxt, p2p)
        got = ops.recv((t_loc, N), prv, p2p)                    # the previous rank's rows of m
        return y, m, got

    x = _rand(6, (T, H))
    x_loc = x[rank * t_loc:(rank + 1) * t_loc]
    ys = mlp_reference(x, w_gate, w_up, w_down).to(BF)         # [T, H], the block's reference in torch
    m_ref = ((ys.float() @ w_ar.float()).to(BF).float() @ w_mm.float()).to(BF)
    eager = block(x_loc)
    traced = []

    def backend(gm, example_inputs):  # aot_eager, recording the ops of the one graph dynamo traced
        traced.extend(str(n.target) for n in gm.graph.nodes if n.op == "call_function")
        return torch._dynamo.lookup_backend("aot_eager")(gm, example_inputs)

    compiled = torch.compile(block, backend=backend, fullgraph=True)
    for call in range(2):
        got = compiled(x_loc)
        for name, g, e in zip(("mlp", "matmul", "recv"), got, eager):
            if not torch.equal(g, e):
                fails.append(f"call {call}: compiled {name} differs from the eager block")
        _close(got[0], ys[rank * t_loc:(rank + 1) * t_loc], f"call {call}: mlp vs torch", fails)
        _close(got[1], m_ref, f"call {call}: matmul vs torch", fails)
        _close(got[2], m_ref[prv * t_loc:(prv + 1) * t_loc], f"call {call}: recv vs torch", fails)
    for op in ("ag_gemm", "gemm_rs", "all_gather", "gemm_ar", "matmul", "send", "recv"):
        if not any(t.startswith(f"triton_dist.{op}") for t in traced):
            fails.append(f"the traced graph has no torch.ops.triton_dist.{op}: {traced}")
    for c in (mlp, ag, ar, p2p):
        c.close()
    return fails


def fake_shapes():
    """Every registered op: the fake implementation's output (shape, dtype, device) equals the real op's."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    from triton_dist import ops

    rank, W = _init()
    fails = []
    T = torch.ops.triton_dist
    ctxs = dict(ag=ops.create_allgather_context(64), rs=ops.create_reduce_scatter_context(64 * W),
                ar=ops.create_allreduce_context(64), p2p=ops.create_p2p_context(64),
                agg=ops.create_ag_gemm_context(8, 32), rsg=ops.create_gemm_rs_context(8 * W, 16),
                arg=ops.create_gemm_ar_context(8, 16))
    h = {k: c.handle for k, c in ctxs.items()}
    x, a, b, bw = _rand(1, (4, 8)), _rand(2, (8, 32)), _rand(3, (32, 16)), _rand(4, (8 * W, 32))
    cases = {  # name -> (op, args); the real op runs the computation, the fake one only shapes
        "all_gather": lambda t: T.all_gather(t(x), h["ag"], "auto"),
        "reduce_scatter": lambda t: T.reduce_scatter(t(_rand(5, (2 * W, 8))), h["rs"], "auto"),
        "all_reduce": lambda t: T.all_reduce(t(x), h["ar"], "two_shot"),
        "ag_gemm": lambda t: T.ag_gemm(t(a), t(b), h["agg"], "auto", None, None, None),
        "ag_gemm out_dtype": lambda t: T.ag_gemm(t(a), t(b), h["agg"], "auto", None, None, torch.float32),
        "gemm_rs": lambda t: T.gemm_rs(t(bw), t(b), h["rsg"], "auto"),
        "gemm_ar": lambda t: T.gemm_ar(t(a), t(b), h["arg"], "auto"),
        "matmul": lambda t: T.matmul(t(a), t(b), None, True, True),
    }
    token = ctxs["p2p"].token
    if rank == 0:
        cases["send"] = lambda t: T.send(t(x), t(token), h["p2p"], 1)
    if rank == 1:
        cases["recv"] = lambda t: T.recv(t(token), [4, 8], h["p2p"], 0)
    for name, call in cases.items():
        real = call(lambda v: v)
        with FakeTensorMode() as mode:
            fake = call(mode.from_tensor)
        if real is None or fake is None:
            if not (real is None and fake is None):
                fails.append(f"{name}: real {real!r}, fake {fake!r}")
            continue
        if (real.shape, real.dtype, real.device) != (fake.shape, fake.dtype, fake.device):
            fails.append(f"{name}: real {tuple(real.shape)} {real.dtype} {real.device}, fake {tuple(fake.shape)} "
                         f"{fake.dtype} {fake.device}")
    for c in ctxs.values():
        c.close()
    return fails


def capture_guard():
    """The collectives and p2p under CUDA-graph capture (the capture predicate monkeypatched on the simulator): a
    call whose kernel specialization this context never launched outside capture raises one line saying how to warm
    up, before any launch on any rank; after a warm-up call of the same shape the captured call runs."""
    from triton_dist import ops
    from triton_dist.ops import context

    rank, W = _init()
    fails = []
    ar, ag = ops.create_allreduce_context(256), ops.create_allgather_context(256)
    rs, p2p = ops.create_reduce_scatter_context(256 * W), ops.create_p2p_context(256)
    xs = [_rand(10 + r, (96, )) for r in range(W)]
    ref = torch.stack([t.float() for t in xs]).sum(0).to(BF)
    calls = {"all_reduce": lambda: ops.all_reduce(xs[rank], ar, method="one_shot"),
             "all_gather": lambda: ops.all_gather(xs[rank], ag, method="push"),
             "reduce_scatter": lambda: ops.reduce_scatter(torch.cat(xs), rs, method="direct_push"),
             "send" if rank == 0 else "recv": (lambda: ops.send(xs[0], 1, p2p)) if rank == 0 else
             (lambda: ops.recv((96, ), 0, p2p))}
    real = context.capturing
    context.capturing = lambda: True
    try:
        for op, call in calls.items():
            expect_error(fails, f"{op} cold in capture", call, op, "CUDA-graph capture", "warm up", exc=RuntimeError)
            try:
                call()
            except RuntimeError as exc:
                if "\n" in str(exc):
                    fails.append(f"{op}: the guard's message has several lines: {exc!r}")
        ar.check_peers = True
        expect_error(fails, "check_peers in capture", lambda: ops.all_reduce(xs[rank], ar), "check_peers",
                     exc=RuntimeError)
        ar.check_peers = False
    finally:
        context.capturing = real
    warm = {op: call() for op, call in calls.items()}  # the warm-up, outside capture
    context.capturing = lambda: True
    try:
        for op, call in calls.items():
            got = call()
            if op in ("all_reduce", "all_gather", "reduce_scatter") and not torch.equal(got, warm[op]):
                fails.append(f"{op}: the captured call after warm-up differs from the warm-up")
            if op == "recv" and not torch.equal(got, xs[0]):
                fails.append("recv: the captured call after warm-up received other data")
        if not torch.equal(calls["all_reduce"](), ref):
            fails.append("all_reduce in capture after warm-up: wrong sum")
        # another element count with the same specialization (a multiple of 16, as 96) needs no new warm-up
        other = ops.all_reduce(xs[rank][:80], ar, method="one_shot")
        if not torch.equal(other, ref[:80]):
            fails.append("all_reduce in capture, same specialization: wrong sum")
        expect_error(fails, "all_reduce new specialization", lambda: ops.all_reduce(xs[rank][:90], ar,
                                                                                    method="one_shot"),
                     "warm up", exc=RuntimeError)
    finally:
        context.capturing = real
    for c in (ar, ag, rs, p2p):
        c.close()
    return fails


def conventions():
    """docs/ops.md's convention on live contexts: the context's default method and the torch / nccl alias, the
    capacity aliases (``max_m_per_rank``, the reference's ``max_M``), the dtype default and gemm_rs's ``output_dtype``
    alias, ``finalize`` as ``close``, and a default method that differs across ranks refused at creation on every
    rank."""
    from triton_dist import ops

    rank, W = _init()
    fails = []
    xs = [_rand(20 + r, (64, )) for r in range(W)]
    ref = torch.stack([t.float() for t in xs]).sum(0).to(BF)
    ar = ops.create_allreduce_context(64, method="torch")
    if ar.dtype != BF or ar.method != "nccl":  # the collectives spell the fallback "nccl" inside
        fails.append(f"allreduce context: dtype {ar.dtype}, method {ar.method}")
    for method in (None, "torch", "nccl", "two_shot"):
        if not torch.equal(ops.all_reduce(xs[rank], ar, method=method), ref):
            fails.append(f"all_reduce method={method!r} on a method='torch' context")
    ar.finalize()
    expect_error(fails, "closed by finalize", lambda: ops.all_reduce(xs[rank], ar), "closed")
    agg = ops.create_ag_gemm_context(max_m_per_rank=8, k=32, method="nccl")
    if agg.max_m_per_rank != 8 or agg.method != "torch":
        fails.append(f"ag_gemm context: max_m_per_rank {agg.max_m_per_rank}, method {agg.method}")
    a, b = _rand(30 + rank, (8, 32)), _rand(31, (32, 16))
    want = (torch.cat([_rand(30 + r, (8, 32)) for r in range(W)]).float() @ b.float()).to(BF)
    for method in (None, "fused", "nccl"):
        _close(ops.ag_gemm(a, b, agg, method=method), want, f"ag_gemm method={method!r}", fails)
    agg.close()
    # the reference's max_M counts rows of the GEMM's M: for ag_gemm the gathered rows (world * M_loc, so the context
    # holds ceil(max_M / world) per rank), for gemm_rs / gemm_ar the rows of a
    for fac, kw, want_cap in ((ops.create_ag_gemm_context, dict(max_M=8 * W - 1, k=32), 8),
                              (ops.create_gemm_rs_context, dict(max_M=8 * W, n=16), 8 * W),
                              (ops.create_gemm_ar_context, dict(max_M=8, n=16), 8)):
        ctx = fac(**kw)
        cap = getattr(ctx, "max_m_per_rank", None) or ctx.max_m
        if cap != want_cap:
            fails.append(f"{fac.__name__}(max_M={kw['max_M']}): capacity {cap}, expected {want_cap}")
        ctx.close()
    expect_error(fails, "two capacities", lambda: ops.create_ag_gemm_context(8, 32, max_m_per_rank=8), "max_m",
                 "max_m_per_rank")
    # the reference's output_dtype for gemm_rs's dtype: a live fp16 context, and a call in that dtype
    rsg = ops.create_gemm_rs_context(max_M=8 * W, n=16, output_dtype=torch.float16)
    if rsg.dtype != torch.float16 or rsg.output_dtype != torch.float16:
        fails.append(f"create_gemm_rs_context(output_dtype=float16): dtype {rsg.dtype}")
    a16, b16 = _rand(30 + rank, (8 * W, 16), torch.float16), _rand(40 + rank, (16, 16), torch.float16)
    got = ops.gemm_rs(a16, b16, rsg, method="torch")
    if got.dtype != torch.float16 or got.shape != (8, 16):
        fails.append(f"gemm_rs on the output_dtype=float16 context: {got.dtype} {tuple(got.shape)}")
    rsg.close()
    expect_error(fails, "two dtypes", lambda: ops.create_gemm_rs_context(8 * W, 16, torch.bfloat16,
                                                                         output_dtype=torch.float16),
                 "dtype", "output_dtype")
    expect_error(fails, "method per rank", lambda: ops.create_allreduce_context(
        64, method="one_shot" if rank == 0 else "two_shot"), "ranks disagree")
    return fails
