"""Rank-side functions for test_mega_core.py (module level, so simulator rank processes can import them). Each
returns a list of failure strings (empty = pass)."""
from __future__ import annotations

import os

import torch


def _chain(fusion=True, **kw):
    """A decoder-like chain (rms_norm -> qkv -> o -> add -> rms_norm -> fused fc1+silu -> fc2 -> add) on fresh
    seeded tensors; returns (builder, tensors, reference outputs computed op by op in torch)."""
    from triton_dist.mega_triton_kernel import ModelBuilder

    torch.manual_seed(0)
    H, N, INTER = 128, 192, 256

    def bf(*s, scale=1.0):
        return (torch.randn(*s) * scale).bfloat16()

    x, g = bf(1, H), (1 + 0.1 * torch.randn(H)).bfloat16()
    w1, w2, w3, w4 = bf(N, H, scale=H ** -0.5), bf(H, N, scale=N ** -0.5), bf(2 * INTER, H, scale=H ** -0.5), bf(
        H, INTER, scale=INTER ** -0.5)
    outs = [torch.zeros(1, n).bfloat16() for n in (H, N, H, H, H, INTER, H, H)]
    h, q, o, x1, h2, a, d, x2 = outs
    b = ModelBuilder(enable_fusion=fusion, **kw)
    b.make_rms_norm(x, g, h)
    b.make_qkv_proj(h, w1, q)
    b.make_o_proj(q, w2, o)
    b.make_add(x, o, x1)
    b.make_rms_norm(x1, g, h2)
    b.make_fused_fc1_silu_mul_up(h2, w3, a)
    b.make_fc2(a, w4, d)
    b.make_add(d, x1, x2)

    def rms(v):
        vf = v.float()
        return (vf * torch.rsqrt(vf.pow(2).mean(-1, keepdim=True) + 1e-6) * g.float()).bfloat16()

    def lin(v, w):
        return (v.float() @ w.float().T).bfloat16()

    rh = rms(x)
    rq = lin(rh, w1)
    ro = lin(rq, w2)
    rx1 = (x.float() + ro.float()).bfloat16()
    rh2 = rms(rx1)
    gu = rh2.float() @ w3.float().T
    ra = (torch.nn.functional.silu(gu[:, :INTER]) * gu[:, INTER:]).bfloat16()
    rd = lin(ra, w4)
    rx2 = (rd.float() + rx1.float()).bfloat16()
    return b, outs, [rh, rq, ro, rx1, rh2, ra, rd, rx2]


def _close(name, got, ref, fails, tol=0.02):
    err = (got.float() - ref.float()).abs().max().item()
    bound = tol * max(ref.float().abs().max().item(), 1.0)
    if not err <= bound:
        fails.append(f"{name}: max error {err:.4g} > {bound:.4g}")


def chain_runs():
    """Results against torch, several steps on one builder (the epoch advances, no host reset), fused ==
    unfused bit for bit, every scheduling variant bit-identical to the default."""
    fails = []
    b, outs, refs = _chain()
    b.compile()
    names = ["h", "q", "o", "x1", "h2", "a", "d", "x2"]
    for step in range(1, 4):
        for t in outs:
            t.zero_()
        b.run()
        for n, t, r in zip(names, outs, refs):
            _close(f"step {step} {n}", t, r, fails)
        if b.counter[0].item() != step or set(b.scoreboard.tolist()) != {step}:
            fails.append(f"step {step}: counter {b.counter.tolist()}, scoreboard {sorted(set(b.scoreboard.tolist()))}")
    if [op.name for op in b.compiled_ops] != ["L0.rms_norm", "L0.rms_norm+L0.qkv_proj", "L0.o_proj+L0.add",
                                             "L0.rms_norm", "L0.rms_norm+L0.mlp_fc1_silu_mul_up",
                                             "L0.mlp_fc2+L0.add"]:
        fails.append(f"fused ops: {[op.name for op in b.compiled_ops]}")
    base = [t.clone() for t in outs]
    for kw in (dict(fusion=False), dict(enable_runtime_scheduler=True), dict(enable_dep_opt=False),
               dict(policy="round_robin")):
        v, vouts, _ = _chain(**kw)
        v.compile()
        v.run()
        v.run()
        for n, t, r in zip(names, vouts, base):
            if not torch.equal(t, r):
                fails.append(f"{kw}: {n} differs from the default build")
    # GEMVs whose rows outlast their first chunk, without and with an L2 prefetch budget: the same bits; only the
    # GEMV that waits for a non-Linear op (the add) keeps its budget, the one after it (waiting for a GEMV) does not
    from triton_dist.mega_triton_kernel import ModelBuilder

    torch.manual_seed(1)
    x, w = torch.randn(1, 1024).bfloat16(), (torch.randn(1024, 1024) * 0.03).bfloat16()
    got = []
    for pf in (0, 65536):
        s_, o, o2 = torch.zeros(1, 1024).bfloat16(), torch.zeros(1, 1024).bfloat16(), torch.zeros(1, 1024).bfloat16()
        g = ModelBuilder(gemv_prefetch_bytes=pf)
        g.make_add(x, x, s_)
        g.make_linear(s_, w, o)
        g.make_linear(o, w, o2)
        g.compile()
        g.run()
        got.append((o, o2))
        pfs = [op.constexprs.get("PF_ROW") for op in g.compiled_ops]
        if (pfs[1] > 0) != (pf > 0) or pfs[2] != 0:
            fails.append(f"gemv_prefetch_bytes={pf}: PF_ROW per op {pfs}")
    if not (torch.equal(got[0][0], got[1][0]) and torch.equal(got[0][1], got[1][1])):
        fails.append("the prefetching GEMVs differ from the plain ones")
    ref = (2 * x.float()).bfloat16().float() @ w.float().T
    _close("prefetching gemv", got[1][0], ref, fails)
    # a norm prologue over rows longer than the GEMV's weight chunk: fused == unfused bit for bit (the fused GEMV
    # sums the squares in the norm task's chunks, not in its own)
    # (fp32 throughout, so that a last-bit difference of the row's rstd shows)
    gs, xf = 1 + 0.1 * torch.randn(1024), torch.randn(1, 1024) * 3
    outs_ = []
    for fusion in (False, True):
        h_, o_ = torch.zeros(1, 1024), torch.zeros(1, 1024)
        g = ModelBuilder(enable_fusion=fusion)
        g.make_rms_norm(xf, gs, h_)
        g.make_linear(h_, w.float(), o_)
        g.compile()
        g.run()
        outs_.append(o_)
        fused = [op.constexprs.get("NORM") for op in g.compiled_ops if op.family == "Linear"]
        if fused != [fusion] or (fusion and g.compiled_ops[1].constexprs["BLOCK_K"] >= 1024):
            fails.append(f"norm prologue test setup: NORM {fused}, ops {[op.name for op in g.compiled_ops]}")
    if not torch.equal(outs_[0], outs_[1]):
        fails.append("the norm-prologue GEMV differs from rms_norm + GEMV at K = 1024")
    return fails


def small_m_linears():
    """The small-M Linear tile (batched decode, ``1 < M <= 16``) against torch: plain and fused (silu * up), row
    counts that do not divide N (N = 200: two tiles of 100 rows on the simulator's one worker), K not a multiple
    of the chunk; each op streams ``pick_gemv_rows`` rows per tile
    for all M rows (``BLOCK_M`` 16), and M = 17 keeps the 64-row ``tl.dot`` tiles."""
    from triton_dist.mega_triton_kernel import ModelBuilder
    from triton_dist.mega_triton_kernel.tasks.linear import pick_gemv_rows

    fails = []
    torch.manual_seed(2)
    for M, N, K, fused in ((3, 200, 1000, False), (8, 96, 320, True), (16, 70, 64, False), (17, 80, 96, False)):
        x = torch.randn(M, K).bfloat16()
        w = (torch.randn((2 if fused else 1) * N, K) * K ** -0.5).bfloat16()
        out = torch.zeros(M, N).bfloat16()
        b = ModelBuilder()
        (b.make_fused_fc1_silu_mul_up if fused else b.make_linear)(x, w, out)
        b.compile()
        b.run()
        ref = x.float() @ w.float().T
        if fused:
            ref = torch.nn.functional.silu(ref[:, :N]) * ref[:, N:]
        _close(f"M={M} N={N} K={K} fused={fused}", out, ref.bfloat16(), fails)
        c = b.compiled_ops[0].constexprs
        want = pick_gemv_rows(N, b.num_workers, K * 2 * (2 if fused else 1)) if M <= 16 else 64
        if c["BLOCK_M"] != (16 if M <= 16 else 32) or c["ROWS"] != want:
            fails.append(f"M={M}: BLOCK_M {c['BLOCK_M']}, ROWS {c['ROWS']} (want {want})")
    return fails


def strict_error_names_tasks():
    """A queue whose order breaks a dependency (a task moved ahead of what it waits for) stops the step with an
    error naming both tasks."""
    from triton_dist.mega_triton_kernel import MegaKernelDependencyError

    fails = []
    b, outs, _ = _chain(fusion=False)
    b.compile()
    q = b.queue_tensor
    n = int(b.queue_len[0])
    # move the last task (the final add) to the front of the only queue
    rows = q[0, :n].clone()
    q[0, :n] = torch.cat([rows[-1:], rows[:-1]])
    try:
        b.run()
        fails.append("no error for a task run before its dependencies")
    except MegaKernelDependencyError as e:
        msg = str(e)
        last = len(b.tasks) - 1
        # the final add (op 7) ran first; the first of its dependencies it checks is the first add (op 3)
        if (f"task {last} (op 7 L0.add, tile 0 of 1) found its dependency" not in msg or "(op 3 L0.add, tile 0 of 1)"
                not in msg or "not done" not in msg):
            fails.append(f"message does not name the tasks: {msg}")
    return fails


def profile_trace(out_dir):
    """A profiled step: the summary counts every task once per type and the trace files are written."""
    fails = []
    b, outs, _ = _chain(enable_profiling=True)
    b.compile()
    b.run()
    s = b.profile_summary()
    counts = {k: v["count"] for k, v in s["types"].items()}
    want = {}
    for op in b.compiled_ops:
        key = f"{op.family}:{op.op_type}"
        want[key] = want.get(key, 0) + len(op.tiles)
    for k, v in want.items():
        if counts.get(k) != v:
            fails.append(f"profile counts {k}: {counts.get(k)} != {v}")
    tl_ = b.op_timeline()
    if [o["name"] for o in tl_] != [op.name for op in b.compiled_ops]:
        fails.append(f"op_timeline names: {[o['name'] for o in tl_]}")
    for o, op in zip(tl_, b.compiled_ops):
        if o["tiles"] != len(op.tiles) or o["bytes"] != sum(t.cost for t in op.tiles) or \
                not 0 <= o["start_us"] <= o["end_us"] or o["busy_us"] <= 0 or o["first_tile_us"] <= 0:
            fails.append(f"op_timeline entry {o}")
    ends = [o["end_us"] for o in tl_]
    if ends != sorted(ends):  # one worker: the ops end in program order
        fails.append(f"op_timeline ends out of order: {ends}")
    os.environ["MEGA_KERNEL_PROFILER_DIR"] = out_dir
    path = b.dump_trace("t", gantt=False)
    if not path or not os.path.exists(path):
        fails.append(f"no trace written: {path}")
    return fails
