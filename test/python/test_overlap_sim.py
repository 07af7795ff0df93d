"""Simulator executions of the overlapped kernels (AG+GEMM, GEMM+RS, GEMM+AR) and the TPMLP layer at 2 and 4
ranks, checked against torch, plus host-side validation (bad input -> ValueError before any launch).

Rank-side functions live in this module (rank processes import it by reference). Shapes are tiny (the interpreter
executes each 16x16x16 tile with numpy); each function checks several calls on one context, so signal epochs,
parity double-buffering and rank-rotated tile orders are all exercised.
"""
import os

import pytest
import torch

from _expect import expect_error as _expect  # ValueError with every needle, else a failure
from conftest_sim import sim_ranks  # noqa: F401  (fixture)

# same settings as test_collectives_sim.py, so a CI session reuses one rank pool per world size
# The wait bound only turns a hang into an error; generous so a loaded 2-core CI machine never trips it.
ENV = {"TRITON_DIST_SIM_WAIT_TIMEOUT": "240", "TRITON_DIST_SIM_SYMMETRIC_SIZE": "64M"}



def _use_overlap_table(table):
    """Make the overlap table document ``table`` (the format header added) the one in use, through
    ``$TRITON_DIST_OVERLAP_TABLE`` and a temporary file; returns the function that undoes it."""
    import json
    import tempfile

    from triton_dist.ops import overlap_table as otab

    fd, path = tempfile.mkstemp(suffix=".json")
    with os.fdopen(fd, "w") as f:
        json.dump({"format": otab.TABLE_FORMAT, **table}, f)
    saved = os.environ.get(otab.TABLE_ENV)
    os.environ[otab.TABLE_ENV] = path
    otab.dispatch_table(reload=True)

    def restore():
        if saved is None:
            os.environ.pop(otab.TABLE_ENV, None)
        else:
            os.environ[otab.TABLE_ENV] = saved
        os.unlink(path)
        otab.dispatch_table(reload=True)

    return restore


@pytest.fixture
def use_overlap_table():
    """``use(table)``: :func:`_use_overlap_table` for one test (undone after it)."""
    undo = []
    yield lambda table: undo.append(_use_overlap_table(table))
    for restore in undo:
        restore()


def _init():
    import torch.distributed as dist

    import triton_dist.utils as u

    u.initialize_distributed()
    return dist.get_rank(), dist.get_world_size()


def _rand(seed, shape, dtype):
    g = torch.Generator().manual_seed(seed)
    # small integers / 4: exact in bf16 and fp16, products and sums exact in fp32
    return (torch.randint(-4, 5, shape, generator=g).float() / 4).to(dtype)


def _close(got, ref, what, fails, atol=0.0, rtol=2.0**-7):
    """Inputs are exact in fp32; the only error allowed is the final rounding to 16 bits (the interpreter's
    fp32 -> bf16 conversion may truncate): ``|got - ref| <= atol + rtol * |ref|`` elementwise."""
    if got.shape != ref.shape:
        fails.append(f"{what}: shape {tuple(got.shape)} vs {tuple(ref.shape)}")
        return
    diff = (got.float() - ref.float()).abs()
    bad = diff > atol + rtol * ref.float().abs()
    if bool(bad.any()):
        err = diff.max().item()
        fails.append(f"{what}: shape {tuple(got.shape)} vs {tuple(ref.shape)}, max err {err}")


def rank_ag_gemm(dtype_name="bfloat16"):
    """AG+GEMM: two shard heights on one context (epochs 1..3), odd N, results exact."""
    from triton_dist.ops.overlap import ag_gemm, create_ag_gemm_context

    rank, W = _init()
    dtype = getattr(torch, dtype_name)
    fails = []
    K, N = 32, 40
    ctx = create_ag_gemm_context(24, K, dtype)
    for call, m_loc in enumerate((24, 8, 24)):
        shards = [_rand(100 * call + r, (m_loc, K), dtype) for r in range(W)]
        b = _rand(7 + call + 13 * rank, (K, N), dtype)  # weight shard differs per rank
        c = ag_gemm(shards[rank], b, ctx, method="sm")
        ref = (torch.cat(shards).float() @ b.float()).to(dtype)
        _close(c, ref, f"ag_gemm call {call} m_loc={m_loc} {dtype}", fails)
    ctx.close()
    return fails


def rank_ag_gemm_tma_store():
    """AG+GEMM with tensor descriptors forced on (the interpreter implements them) and a ``t`` tiling (TMA-store
    epilogue): the launch stores through the descriptor where the shard height is a multiple of BLOCK_M and through
    pointers where a chunk's last tile would overhang into the next chunk; exact either way, flattened loop or not."""
    import os

    import triton_dist.kernels.ag_gemm as agk
    import triton_dist.ops.overlap as ov

    rank, W = _init()
    dtype = torch.bfloat16
    fails, seen = [], []
    real = agk.ag_gemm_kernel

    class Spy:  # records each launch's TMA_STORE, then launches the real kernel
        def __getitem__(self, grid):
            def launch(*args, **kw):
                seen.append(kw.get("TMA_STORE"))
                return real[grid](*args, **kw)
            return launch

    K, N = 32, 40
    ctx = ov.create_ag_gemm_context(32, K, dtype)
    ctx._use_tma = lambda: True
    agk.ag_gemm_kernel = Spy()
    try:
        for cfg in ("16x16x16x4x1t", "16x16x16x4x1ft"):
            os.environ["TRITON_DIST_OVERLAP_CONFIG"] = cfg
            for call, m_loc in enumerate((32, 24, 16)):
                shards = [_rand(100 * call + r, (m_loc, K), dtype) for r in range(W)]
                b = _rand(7 + call + 13 * rank, (K, N), dtype)
                c = ov.ag_gemm(shards[rank], b, ctx, method="sm")
                _close(c, (torch.cat(shards).float() @ b.float()).to(dtype), f"{cfg} m_loc={m_loc}", fails)
                if seen[-1] != (m_loc % 16 == 0):
                    fails.append(f"{cfg} m_loc={m_loc}: TMA_STORE={seen[-1]}")
    finally:
        agk.ag_gemm_kernel = real
        os.environ.pop("TRITON_DIST_OVERLAP_CONFIG", None)
    ctx.close()
    return fails


def _rank_gemm_reduce(op):
    """GEMM+RS (``op="rs"``) / GEMM+AR (``op="ar"``): three calls on one context, the middle one with fewer rows;
    the result is the sum over ranks of A_r @ B_r (RS: this rank's slice of rows of it)."""
    from triton_dist.ops import overlap as ov

    rank, W = _init()
    fails = []
    K = 32
    if op == "rs":
        dtype, N, a_seed, b_seed, rows = torch.bfloat16, 24, 200, 300, [ms * W for ms in (16, 8, 16)]
        ctx, gemm = ov.create_gemm_rs_context(16 * W, N, dtype), ov.gemm_rs
    else:
        dtype, N, a_seed, b_seed, rows = torch.float16, 32, 400, 500, [24, 5, 24]
        ctx, gemm = ov.create_gemm_ar_context(24, N, dtype), ov.gemm_ar
    for call, M in enumerate(rows):
        a_all = [_rand(a_seed * call + r, (M, K), dtype) for r in range(W)]
        b_all = [_rand(b_seed * call + r, (K, N), dtype) for r in range(W)]
        out = gemm(a_all[rank], b_all[rank], ctx, method="fused")
        full = sum(a.float() @ b.float() for a, b in zip(a_all, b_all))
        if op == "rs":
            ms = M // W
            full = full[rank * ms:(rank + 1) * ms]
        _close(out, full.to(dtype), f"gemm_{op} call {call} M={M}", fails)
        if op == "rs":  # peer tiles streamed in row pieces during the program's next main loop (the simulator's 2
            # programs have 2-4 tiles each): more pieces than K blocks (the rest after the loop), one piece per K
            # block; with a program per tile no next loop: every peer tile is copied whole after its loop
            sms = ctx.num_sms
            try:
                for pieces, n_sms in ((4, sms), (2, sms), (1, sms), (4, 6)):
                    ctx.num_sms = n_sms
                    got = gemm(a_all[rank], b_all[rank], ctx, method="fused", pieces=pieces)
                    _close(got, full.to(dtype), f"gemm_rs pieces={pieces} sms={n_sms} call {call} M={M}", fails)
            finally:
                ctx.num_sms = sms
    ctx.close()
    return fails


def rank_gemm_rs():
    return _rank_gemm_reduce("rs")


def rank_gemm_ar():
    return _rank_gemm_reduce("ar")


def _same_on_every_rank(t, what, fails):
    """``t`` is bit-identical on every rank (gathered over the gloo group)."""
    import torch.distributed as dist

    got = [None] * dist.get_world_size()
    dist.all_gather_object(got, t.view(torch.int16).tolist())
    if any(g != got[0] for g in got):
        fails.append(f"{what}: results differ between ranks")


def _words_cleared(ctx, what, fails):
    """Right after an ``ll`` call every flagged word this rank received was consumed and cleared (the word buffer
    all zero again); then a barrier, so that no peer's next call writes words before every rank has looked (a peer
    may otherwise be one call ahead)."""
    import torch.distributed as dist

    left = int(torch.count_nonzero(ctx.words))
    if left:
        fails.append(f"{what}: {left} flagged words left uncleared")
    dist.barrier()


def _ll_checks(ll, fused, what, fails):
    """Method ``ll`` against ``fused`` on the same inputs: the same fp32 sums in the same order, so bit-identical
    results, on every rank."""
    if not torch.equal(ll.view(torch.int16), fused.view(torch.int16)):
        fails.append(f"{what}: ll differs from fused (max diff {(ll.float() - fused.float()).abs().max().item()})")
    _same_on_every_rank(ll, what, fails)


def rank_gemm_ar_ll():
    """GEMM+AR method ``ll`` (flagged words): back-to-back calls of several heights (an uneven last row tile) on one
    context, ``ll`` twice in a row and alternating with ``fused`` (both parities reused, the same epoch counter):
    exact against fp32, bit-identical to ``fused`` and on every rank, the word buffer cleared after every call; a
    last call whose result depends on summing the ranks' partials in rank order."""
    from triton_dist.ops import overlap as ov

    rank, W = _init()
    fails = []
    K, N, dtype = 32, 32, torch.float16
    ctx = ov.create_gemm_ar_context(24, N, dtype)
    try:
        shapes = ((24, ("ll", "ll")), (5, ("fused", "ll")), (17, ("ll", "fused", "ll")), (9, ("ll", "fused")))
        for call, (M, methods) in enumerate(shapes):
            a_all = [_rand(410 * call + r, (M, K), dtype) for r in range(W)]
            b_all = [_rand(510 * call + r, (K, N), dtype) for r in range(W)]
            if call == 3:  # rank r's partial is s_r everywhere: 256, -256, then 2**-20: only the sum in rank order
                # 0, 1, ..., W-1 keeps the small terms ((W - 2) * 2**-20; e.g. order 1, 2, ..., 0 gives 0)
                for r in range(W):
                    a_all[r].zero_()
                    a_all[r][:, 0] = 256.0 if r == 0 else (-256.0 if r == 1 else 2.0 ** -20)
                    b_all[r].zero_()
                    b_all[r][0, :] = 1.0
            full = sum(a.float() @ b.float() for a, b in zip(a_all, b_all)).to(dtype)
            outs = {}
            for i, method in enumerate(methods):
                outs[method] = ov.gemm_ar(a_all[rank], b_all[rank], ctx, method=method)
                _close(outs[method], full, f"gemm_ar {method} call {call}.{i} M={M}", fails)
                if method == "ll":
                    _words_cleared(ctx, f"gemm_ar ll call {call}.{i} M={M}", fails)
            _ll_checks(outs["ll"], outs.get("fused", outs["ll"]), f"gemm_ar ll call {call} M={M}", fails)
        calls = sum(len(m) for _, m in shapes)
        if ctx.epoch != calls:
            fails.append(f"gemm_ar ll: epoch {ctx.epoch} after {calls} kernel calls")
    finally:
        ctx.close()
    return fails


def rank_gemm_ar_ll_auto():
    """``auto`` runs ``ll`` where the measured table names it. The simulator's rule is always ``fused``
    (``select_rule``): here the table lookup is made as on a GPU, the shape's rule names ``ll``, and the ``ll`` path
    is the one that runs (exact, words cleared); another shape of the same table still runs ``fused``."""
    from triton_dist.ops import gemm_allreduce as gar
    from triton_dist.ops import overlap as ov
    from triton_dist.ops import overlap_context as octx

    rank, W = _init()
    fails = []
    K, N, dtype = 32, 16, torch.bfloat16
    table = {"status": "measured", "ops": {"gemm_ar": {str(W): [{"n": N, "k": K, "max_m": 16, "method": "ll"},
                                                                {"max_m": None, "method": "fused"}]}}}
    real_select, real_fused = octx.select_rule, gar._gemm_ar_fused
    ran = []  # the kernel launches of the calls: "ll" or "fused" (both paths launch through _gemm_ar_fused)
    restore_table = _use_overlap_table(table)
    octx.select_rule = lambda op, world, m, on_gpu, n=None, k=None, eager=False: real_select(op, world, m, True, n, k,
                                                                                            eager)
    gar._gemm_ar_fused = lambda *a, ll=False: (ran.append("ll" if ll else "fused"), real_fused(*a, ll=ll))[1]
    ctx = ov.create_gemm_ar_context(16, N, dtype)
    try:
        for call, (M, k, want) in enumerate(((16, K, "ll"), (3, K, "ll"), (16, 2 * K, "fused"))):
            a_all = [_rand(610 * call + r, (M, k), dtype) for r in range(W)]
            b_all = [_rand(710 * call + r, (k, N), dtype) for r in range(W)]
            out = ov.gemm_ar(a_all[rank], b_all[rank], ctx)
            full = sum(a.float() @ b.float() for a, b in zip(a_all, b_all))
            _close(out, full.to(dtype), f"gemm_ar auto call {call} M={M} K={k}", fails)
            if ran != [want]:
                fails.append(f"gemm_ar auto call {call} M={M} K={k}: ran {ran}, the table names {want}")
            ran.clear()
            if want == "ll":
                _words_cleared(ctx, f"gemm_ar auto call {call}", fails)
    finally:
        octx.select_rule, gar._gemm_ar_fused = real_select, real_fused
        restore_table()
        ctx.close()
    return fails


def rank_gemm_ar_split_k():
    """GEMM+AR with the K blocks of each tile split over programs (``SPLIT_K`` 2, 3 and 4 over 5 K blocks: uneven
    splits and an empty one), then unsplit, on one context: exact results, the tile counters back at zero after
    every call (the finisher resets them), and the split clamped to the K blocks there are. Methods ``fused`` and
    ``ll`` alternate (``ll``: bit-identical to ``fused`` on the same inputs and on every rank, words cleared)."""
    import os

    from triton_dist.ops import overlap as ov

    rank, W = _init()
    fails = []
    K, N = 80, 32  # 5 K blocks of 16
    ctx = ov.create_gemm_ar_context(24, N, torch.bfloat16)
    cfgs = ["16x16x16x1x1k2", "16x16x16x1x1k3", "16x16x16x1x1k4", "16x16x16x1x1k8",
            "16x16x16x1x1"]
    methods = [("fused", "ll"), ("ll", ), ("ll", "fused"), ("fused", ), ("ll", )]
    try:
        for call, (cfg, M, meths) in enumerate(zip(cfgs, (24, 5, 24, 17, 24), methods)):
            os.environ["TRITON_DIST_OVERLAP_CONFIG"] = cfg
            a_all = [_rand(800 * call + r, (M, K), torch.bfloat16) for r in range(W)]
            b_all = [_rand(900 * call + r, (K, N), torch.bfloat16) for r in range(W)]
            full = sum(a.float() @ b.float() for a, b in zip(a_all, b_all))
            outs = {}
            for method in meths:
                out = outs[method] = ov.gemm_ar(a_all[rank], b_all[rank], ctx, method=method)
                _close(out, full.to(torch.bfloat16), f"gemm_ar {method} split {cfg} M={M}", fails)
                if int(ctx.split_cnt.abs().sum()) != 0:
                    fails.append(f"gemm_ar {method} split {cfg}: tile counters not reset: {ctx.split_cnt.tolist()}")
                if method == "ll":
                    _words_cleared(ctx, f"gemm_ar ll split {cfg} M={M}", fails)
            if "ll" in outs:
                _ll_checks(outs["ll"], outs.get("fused", outs["ll"]), f"gemm_ar ll split {cfg} M={M}", fails)
        from triton_dist.kernels.gemm_config import TileConfig

        cfg = TileConfig.parse("16x16x16x1x1k8")
        if ctx.split_for(cfg, 24, N, K) != 5:
            fails.append(f"split_for did not clamp to the 5 K blocks: {ctx.split_for(cfg, 24, N, K)}")
    finally:
        os.environ.pop("TRITON_DIST_OVERLAP_CONFIG", None)
        ctx.close()
    return fails


def rank_tp_mlp():
    from triton_dist.layers import TPMLP, mlp_reference

    rank, W = _init()
    fails = []
    H, inter, T = 32, 16 * W, 16 * W
    g = torch.Generator().manual_seed(0)
    w_gate = (torch.randn(H, inter, generator=g) / 8).to(torch.bfloat16)
    w_up = (torch.randn(H, inter, generator=g) / 8).to(torch.bfloat16)
    w_down = (torch.randn(inter, H, generator=g) / 8).to(torch.bfloat16)
    mlp = TPMLP(H, inter, max_tokens=T, dtype=torch.bfloat16, device="cpu", method="fused").load_full_weights(
        w_gate, w_up, w_down)
    for call in range(2):
        x = torch.randn(T, H, generator=g).to(torch.bfloat16)
        t_loc = T // W
        y = mlp(x[rank * t_loc:(rank + 1) * t_loc])
        ref = mlp_reference(x, w_gate, w_up, w_down)[rank * t_loc:(rank + 1) * t_loc]
        _close(y, ref, f"tp_mlp call {call}", fails, atol=0.05 * max(1.0, ref.abs().max().item()))
    mlp.close()
    return fails


def rank_ag_gemm_fp8():
    """fp8 (e4m3) AG+GEMM with per-tensor scales: C = (A @ B) * scale_a * scale_b, bf16 output."""
    from triton_dist.ops.overlap import ag_gemm, create_ag_gemm_context

    rank, W = _init()
    f8 = torch.float8_e4m3fn
    fails = []
    K, N, m_loc = 32, 16, 16
    ctx = create_ag_gemm_context(m_loc, K, f8)
    for call in range(2):
        shards = [_rand(600 * call + r, (m_loc, K), torch.float32).to(f8) for r in range(W)]
        b = _rand(700 + call, (K, N), torch.float32).to(f8)
        sa, sb = 0.5, torch.tensor([2.0 + call])
        c = ag_gemm(shards[rank], b, ctx, scale_a=sa, scale_b=sb, method="sm")
        ref = torch.cat(shards).float() @ b.float() * sa * float(sb)
        if c.dtype != torch.bfloat16:
            fails.append(f"fp8 ag_gemm returned {c.dtype}")
        _close(c, ref, f"ag_gemm fp8 call {call}", fails)
    ctx.close()
    return fails


def rank_validation():
    """Bad input -> ValueError naming op and value, before any launch; the contexts stay usable afterwards."""
    from triton_dist.ops.overlap import (ag_gemm, create_ag_gemm_context, create_gemm_ar_context,
                                         create_gemm_rs_context, gemm_ar, gemm_rs)

    rank, W = _init()
    fails = []
    bf = torch.bfloat16
    ag = create_ag_gemm_context(16, 32, bf)
    rs = create_gemm_rs_context(16 * W, 16, bf)
    ar = create_gemm_ar_context(16, 16, bf)
    a = _rand(1, (16, 32), bf)
    b = _rand(2, (32, 16), bf)
    _expect(fails, "ag dtype", lambda: ag_gemm(a.half(), b.half(), ag), "ag_gemm", "dtype")
    _expect(fails, "ag fp32", lambda: ag_gemm(a.float(), b.float(), ag), "ag_gemm", "float32", "accepted")
    _expect(fails, "ag K", lambda: ag_gemm(_rand(1, (16, 24), bf), _rand(2, (24, 16), bf), ag), "K=24")
    _expect(fails, "ag inner", lambda: ag_gemm(a, _rand(2, (24, 16), bf), ag), "inner dimensions")
    _expect(fails, "ag rows", lambda: ag_gemm(_rand(1, (24, 32), bf), b, ag), "max_m_per_rank=16")
    _expect(fails, "ag method", lambda: ag_gemm(a, b, ag, method="tree"), "method='tree'", "accepted")
    _expect(fails, "ag ce on sim", lambda: ag_gemm(a, b, ag, method="ce"), "ce")
    _expect(fails, "ag scale on bf16", lambda: ag_gemm(a, b, ag, scale_a=1.0, scale_b=1.0), "fp8")
    _expect(fails, "ag 1-D", lambda: ag_gemm(a.reshape(-1), b, ag), "2-D")
    _expect(fails, "ag transposed b", lambda: ag_gemm(a, _rand(2, (16, 32), bf).t(), ag), "unit column stride")
    _expect(fails, "ag out shape", lambda: ag_gemm(a, b, ag, out=torch.empty(3, 3, dtype=bf)), "out")
    _expect(fails, "ag first_rows", lambda: ag_gemm(a, b, ag, method="sm", first_rows=4), "first_rows", "chunked")
    _expect(fails, "rs sub_chunks", lambda: gemm_rs(_rand(1, (16 * W, 32), bf), b, rs, method="fused", sub_chunks=2),
            "sub_chunks", "chunked")
    _expect(fails, "rs pieces method", lambda: gemm_rs(_rand(1, (16 * W, 32), bf), b, rs, method="torch", pieces=2),
            "pieces", "'ce' and 'fused'")
    _expect(fails, "rs fused pieces", lambda: gemm_rs(_rand(1, (16 * W, 32), bf), b, rs, method="fused", pieces=3),
            "pieces=3", "power of two", "'fused'")
    _expect(fails, "rs ce on sim", lambda: gemm_rs(_rand(1, (16 * W, 32), bf), b, rs, method="ce"), "'ce'",
            "needs GPUs")
    _expect(fails, "rs M % W", lambda: gemm_rs(_rand(1, (16 * W - 1, 32), bf), b, rs), "multiple of the world size")
    _expect(fails, "rs M cap", lambda: gemm_rs(_rand(1, (32 * W, 32), bf), b, rs), "max_m")
    _expect(fails, "rs N", lambda: gemm_rs(_rand(1, (16 * W, 32), bf), _rand(2, (32, 24), bf), rs), "n=16")
    _expect(fails, "ar M cap", lambda: gemm_ar(_rand(1, (17, 32), bf), b, ar), "max_m=16")
    _expect(fails, "ar ctx type", lambda: gemm_ar(a, b, rs), "create_gemm_ar_context")
    _expect(fails, "ar ll M cap", lambda: gemm_ar(_rand(1, (17, 32), bf), b, ar, method="ll"), "max_m=16")
    _expect(fails, "ar ll N", lambda: gemm_ar(a, _rand(2, (32, 24), bf), ar, method="ll"), "n=16")
    _expect(fails, "ar ll dtype", lambda: gemm_ar(a.half(), b.half(), ar, method="ll"), "gemm_ar", "dtype")
    _expect(fails, "ar method", lambda: gemm_ar(a, b, ar, method="tree"), "method='tree'", "accepted", "ll")
    _expect(fails, "ar one_shot on sim", lambda: gemm_ar(a, b, ar, method="one_shot"), "needs GPUs", "ll")
    _expect(fails, "ctx bad size", lambda: create_gemm_rs_context(0, 16, bf), "max_m=0")
    # still usable (no epoch consumed by the rejected calls): a correct call afterwards
    c = ag_gemm(a, b, ag, method="sm")
    _close(c, (torch.cat([a] * W).float() @ b.float()), "ag after errors", fails)
    for x in (ag, rs, ar):
        x.close()
    return fails


def rank_method_auto_sim():
    """method="auto" runs the fused kernels on the simulator; 'torch' goes through torch.distributed (gloo)."""
    from triton_dist.ops.overlap import ag_gemm, create_ag_gemm_context

    rank, W = _init()
    fails = []
    ctx = create_ag_gemm_context(16, 32, torch.float16)
    a = _rand(10 + rank, (16, 32), torch.float16)
    b = _rand(3, (32, 16), torch.float16)
    ref = torch.cat([_rand(10 + r, (16, 32), torch.float16) for r in range(W)]).float() @ b.float()
    _close(ag_gemm(a, b, ctx), ref, "auto", fails)
    _close(ag_gemm(a, b, ctx, method="torch"), ref, "torch", fails)
    _close(ag_gemm(a, b, ctx, method="fused"), ref, "fused after torch", fails)
    ctx.close()
    return fails


WORK = {2: ["rank_ag_gemm", "rank_gemm_rs", "rank_gemm_ar", "rank_gemm_ar_split_k", "rank_gemm_ar_ll",
            "rank_gemm_ar_ll_auto", "rank_tp_mlp", "rank_ag_gemm_fp8", "rank_validation", "rank_method_auto_sim",
            "rank_ag_gemm_tma_store"],
        4: ["rank_ag_gemm", "rank_gemm_rs", "rank_gemm_ar", "rank_gemm_ar_split_k", "rank_gemm_ar_ll", "rank_tp_mlp"]}


@pytest.mark.sim
@pytest.mark.parametrize("world,fn", [(w, f) for w, fs in WORK.items() for f in fs])
def test_overlap_on_simulator(sim_ranks, world, fn):  # noqa: F811
    res = sim_ranks.run(world, globals()[fn], timeout=300, env=ENV)
    assert not any(res), res


def test_dispatch_table_default_is_conservative_and_unmeasured():
    from triton_dist.ops import overlap as ov

    assert ov.DEFAULT_TABLE["status"] == "unmeasured"
    table = ov.dispatch_table(reload=True)
    assert table["status"] in ("unmeasured", "measured")
    if table.get("status") == "unmeasured":
        for op in ("ag_gemm", "gemm_rs", "gemm_ar"):
            assert ov.select_method(op, 2, 1023, on_gpu=True) == "torch"
            assert ov.select_method(op, 2, 1024, on_gpu=True) == "fused"
            assert ov.select_method(op, 2, 8192, on_gpu=True) == "fused"
    assert ov.select_method("ag_gemm", 2, 128, on_gpu=False) == "fused"  # the simulator runs our kernels


def test_measured_table_rules_match_shape_then_fall_back(use_overlap_table):
    """Shape-specific rules (from measured shapes) win for their (n, k); other shapes use the generic rules; the
    measured tiling is returned only for its shape and bf16/fp16."""
    from triton_dist.kernels.gemm_config import TileConfig
    from triton_dist.ops import overlap as ov

    table = {"status": "measured", "ops": {"gemm_ar": {"2": [
        {"n": 8192, "k": 7168, "max_m": 16, "method": "one_shot"},
        {"n": 8192, "k": 7168, "max_m": 128, "method": "fused"},
        {"max_m": 63, "method": "torch"}, {"max_m": None, "method": "fused"}]}},
        "configs": {"gemm_ar": {"2": [{"n": 8192, "k": 7168, "max_m": 128, "config": "64x64x128x4x4"}]}}}
    use_overlap_table(table)
    assert ov.select_method("gemm_ar", 2, 1, True, 8192, 7168) == "one_shot"
    assert ov.select_method("gemm_ar", 2, 64, True, 8192, 7168) == "fused"
    assert ov.select_method("gemm_ar", 2, 256, True, 8192, 7168) == "fused"  # past the measured M: generic
    assert ov.select_method("gemm_ar", 2, 16, True, 4096, 7168) == "torch"  # another shape: generic
    assert ov.select_method("gemm_ar", 2, 16, False, 8192, 7168) == "fused"  # the simulator runs our kernels
    assert ov.table_config("gemm_ar", 2, 64, 8192, 7168) == TileConfig(64, 64, 128, 8, 4, 4)
    assert ov.table_config("gemm_ar", 2, 256, 8192, 7168) is None
    assert ov.table_config("gemm_ar", 2, 64, 8192, 3584) is None
    assert ov.table_config("gemm_ar", 2, 64, 8192, 7168, elem_bytes=1) is None
    assert ov.table_config("gemm_ar", 4, 64, 8192, 7168) is None


def test_gemm_ar_table_rule_naming_ll_is_kept(use_overlap_table):
    """A measured gemm_ar rule naming ``ll`` is returned as is by :func:`select_rule` and by the context's
    ``select_rule`` (``ll`` has its buffers on every backend: never replaced by ``fused``); the built-in default
    table never names ``ll``; the simulator's rule stays ``fused``."""
    import types

    from triton_dist.ops import overlap as ov

    for rules in ov.DEFAULT_TABLE["ops"].values():
        assert all(r["method"] != "ll" for rs in rules.values() for r in rs)
    table = {"status": "measured", "ops": {"gemm_ar": {"2": [
        {"n": 8192, "k": 3584, "max_m": 16, "method": "ll"}, {"max_m": None, "method": "fused"}]}}}
    use_overlap_table(table)
    assert ov.select_method("gemm_ar", 2, 16, True, 8192, 3584) == "ll"
    assert ov.select_method("gemm_ar", 2, 17, True, 8192, 3584) == "fused"
    assert ov.select_method("gemm_ar", 2, 16, False, 8192, 3584) == "fused"
    ctx = types.SimpleNamespace(kind="gemm_ar", world_size=2, on_gpu=True, n=8192, ar_ctx=None)
    assert ov.GemmARContext.select_rule(ctx, 1, 3584)["method"] == "ll"
    assert ov.GemmARContext.select_rule(ctx, 1, 3584, eager=True)["method"] == "ll"
    assert "ll" in ov.GEMM_AR_METHODS


def test_table_rules_carry_method_parameters(use_overlap_table):
    """A measured rule's parameters (ag_gemm chunked ``first_frac``, gemm_rs chunked ``sub_chunks``) come back with
    its method; ``first_frac`` becomes rows in multiples of 64 (all rows when the shard is small or it is absent)."""
    from triton_dist.ops import overlap as ov

    table = {"status": "measured", "ops": {
        "ag_gemm": {"2": [{"n": 14336, "k": 8192, "max_m": 8192, "method": "chunked", "first_frac": 0.125},
                          {"max_m": None, "method": "ce"}]},
        "gemm_rs": {"2": [{"n": 4096, "k": 7168, "max_m": 8192, "method": "chunked", "sub_chunks": 2},
                          {"max_m": None, "method": "fused"}]}}}
    use_overlap_table(table)
    rule = ov.select_rule("ag_gemm", 2, 8192, True, 14336, 8192)
    assert rule["method"] == "chunked" and rule["first_frac"] == 0.125
    assert ov.select_rule("ag_gemm", 2, 8192, True, 7168, 8192) == {"max_m": None, "method": "ce"}
    assert ov.select_rule("gemm_rs", 2, 4096, True, 4096, 7168)["sub_chunks"] == 2
    assert ov.select_rule("gemm_rs", 2, 4096, False, 4096, 7168) == {"method": "fused"}
    table["ops"]["gemm_rs"]["2"].insert(0, {"n": 4096, "k": 3584, "max_m": 2048, "method": "fused", "pieces": 8})
    use_overlap_table(table)
    assert ov.select_rule("gemm_rs", 2, 2048, True, 4096, 3584)["pieces"] == 8
    assert ov._first_rows(rule, 4096) == 512
    assert ov._first_rows({"first_frac": 0.01}, 4096) == 64  # at least 64 rows
    assert ov._first_rows({"first_frac": 0.25}, 64) == 64  # small shard: all of it
    assert ov._first_rows({"method": "chunked"}, 4096) == 4096
    assert ov._first_rows(None, 1000) == 1000


def _load_bench(monkeypatch, name):
    """``benchmarks/bench_overlap.py`` imported as module ``name`` (the benchmarks folder on the path; the variables
    the bench sets at import undone after the test)."""
    import importlib.util
    import os

    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "benchmarks")
    monkeypatch.syspath_prepend(here)
    for var in ("NVSHMEM_SYMMETRIC_SIZE", "NVSHMEM_DISABLE_NVLS", "NCCL_NVLS_ENABLE", "TORCH_SYMM_MEM_DISABLE_MULTICAST"):
        monkeypatch.delenv(var, raising=False)  # the bench sets defaults at import: undone after the test
    spec = importlib.util.spec_from_file_location(name, os.path.join(here, "bench_overlap.py"))
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    return bench


def test_bench_sweep_tilings_parse(monkeypatch):
    """Every tiling bench_overlap --sweep tries is one TileConfig.parse accepts and writes back unchanged (a bad one
    would only show as an error entry of a GPU sweep); the TMA-store (t) ones load through descriptors."""
    from triton_dist.kernels.gemm_config import TileConfig

    bench = _load_bench(monkeypatch, "bench_overlap_sweeps")
    lists = [bench.SWEEP_LARGE, bench.SWEEP_SMALL, bench.SWEEP_DECODE, bench.SWEEP_AR, bench.SWEEP_AG_FLAT]
    for text in (t for lst in lists for t in lst):
        cfg = TileConfig.parse(text)
        assert str(cfg) == text and not (cfg.tma_store and cfg.pointer_loads)
    assert any(TileConfig.parse(t).tma_store for t in bench.SWEEP_AG_FLAT)
    assert "128x128x64x4x6" in bench.SWEEP_LARGE and len(set(bench.SWEEP_AG_FLAT)) == len(bench.SWEEP_AG_FLAT)


def test_bench_variant_names_map_to_table_rules():
    """bench_overlap's variant names (``ours/chunked@f<frac>``, ``@s<S>``, ``ours/fused@p<P>``) become the table's
    rule parameters; a winning method's swept tiling (gemm_rs ``fused@p``: the fused kernel's; gemm_ar ``ll``: its
    own sweep's) goes with it (the derivation is the library's: ``ops.overlap_table``)."""
    from triton_dist.ops import overlap_table as otab
    assert otab.method_of("ours/chunked@f0.25") == {"method": "chunked", "first_frac": 0.25}
    assert otab.method_of("ours/chunked@s2") == {"method": "chunked", "sub_chunks": 2}
    assert otab.method_of("ours/ce") == {"method": "ce"}
    assert otab.method_of("ours/ce@p4") == {"method": "ce", "pieces": 4}
    assert otab.method_of("ours/ce") == {"method": "ce"}
    assert otab.method_of("torch") == {"method": "torch"}
    assert otab.method_of("ours/fused@p8") == {"method": "fused", "pieces": 8}
    # a fused@p winner keeps the fused kernel's swept tiling
    ops, cfgs = otab.method_rules([{"op": "gemm_rs", "M": 2048, "K_per_rank": 3584, "N": 4096,
                                     "results": {"ours/fused": 110.0, "ours/fused@p8": 85.0, "ours/ce": 99.0},
                                     "configs": {"ce": "128x128x64x4x4f", "fused": "128x256x64x8x3"}}], 2)
    assert ops["gemm_rs"]["2"][0] == {"n": 4096, "k": 3584, "max_m": 2048, "method": "fused", "pieces": 8,
                                      "us": 85.0}
    assert cfgs["gemm_rs"]["2"][0]["config"] == "128x256x64x8x3"
    # gemm_ar ll (swept on its own): a winning ll keeps its own tiling, a winning fused its own
    ar = {"op": "gemm_ar", "M": 16, "K_per_rank": 3584, "N": 8192,
          "results": {"ours/fused": 24.3, "ours/ll": 21.0, "ours/one_shot": 24.0, "torch_seq": 27.4},
          "configs": {"fused": "16x64x256x4x3", "ll": "16x64x128x4x4pk2"}}
    ops, cfgs = otab.method_rules([ar], 2)
    assert ops["gemm_ar"]["2"][0] == {"n": 8192, "k": 3584, "max_m": 16, "method": "ll", "us": 21.0}
    assert cfgs["gemm_ar"]["2"][0]["config"] == "16x64x128x4x4pk2"
    assert all(r["method"] != "ll" for r in ops["gemm_ar"]["default"])  # unmeasured shapes never get ll
    ar["results"]["ours/fused"] = 20.0
    ops, cfgs = otab.method_rules([ar], 2)
    assert ops["gemm_ar"]["2"][0]["method"] == "fused" and cfgs["gemm_ar"]["2"][0]["config"] == "16x64x256x4x3"
    recs = [{"op": "gemm_rs", "M": 8192, "K_per_rank": 7168, "N": 4096,
             "results": {"ours/fused": 500.0, "ours/chunked": 354.0, "ours/chunked@s2": 330.0, "torch_seq": 480.0}}]
    ops, _ = otab.method_rules(recs, 2)
    assert ops["gemm_rs"]["2"][0] == {"n": 4096, "k": 7168, "max_m": 8192, "method": "chunked", "sub_chunks": 2,
                                      "us": 330.0}
    # ties (within 1%) go to torch, else to the plain method of a variant
    assert otab.pick_robust({"chunked": 100.0, "chunked@s2": 99.5, "fused": 120.0}) == "chunked"
    assert otab.pick_robust({"chunked": 100.0, "chunked@s2": 95.0}) == "chunked@s2"
    assert otab.pick_robust({"ce": 99.5, "torch": 100.0}) == "torch"
    assert otab.pick_robust({"ce": 90.0, "torch": 100.0}) == "ce"


def test_partial_run_updates_only_its_shapes_in_the_table(monkeypatch, tmp_path):
    """A bench run over some M of one op (``--ops gemm_rs --m 2048,4096``) rewrites those shapes' rules and tilings
    and keeps the rest of the measured table: other shapes of the op, their generic crossover, other ops."""
    import json

    from triton_dist.ops import overlap as ov
    from triton_dist.ops import overlap_table as otab

    bench = _load_bench(monkeypatch, "bench_overlap_for_merge")

    def rule(m, method):
        return {"n": 4096, "k": 3584, "max_m": m, "method": method}
    old_rs = [rule(128, "torch"), rule(2048, "chunked"), rule(4096, "ce"), rule(8192, "ce"),
              {"max_m": 511, "method": "torch"}, {"max_m": None, "method": "fused"}]
    table = {"format": otab.TABLE_FORMAT, "status": "measured",
             "ops": {"gemm_rs": {"2": old_rs}, "ag_gemm": {"2": [rule(128, "torch")]}},
             "configs": {"gemm_rs": {"2": [{"n": 4096, "k": 3584, "max_m": 2048, "config": "128x128x64x8x4"},
                                           {"n": 4096, "k": 3584, "max_m": 8192, "config": "128x256x64x8x3"}]}}}
    path = tmp_path / "overlap_table.json"
    path.write_text(json.dumps(table))
    monkeypatch.setenv(otab.TABLE_ENV, str(path))
    try:
        doc = {"dispatch_rules": {"gemm_rs": {"2": [rule(2048, "ce"), rule(4096, "chunked"),
                                                    {"max_m": None, "method": "fused"}],
                                              "default": [{"max_m": None, "method": "fused"}]}},
               "dispatch_configs": {"gemm_rs": {"2": [{"n": 4096, "k": 3584, "max_m": 2048,
                                                       "config": "128x128x64x4x4f"}]}}}
        bench.write_table(doc, "partial.json")
        new = json.loads(path.read_text())
        rs = new["ops"]["gemm_rs"]["2"]
        assert [(r.get("max_m"), r["method"]) for r in rs] == [(128, "torch"), (2048, "ce"), (4096, "chunked"),
                                                               (8192, "ce"), (511, "torch"), (None, "fused")]
        assert new["ops"]["ag_gemm"]["2"] == [rule(128, "torch")]
        assert [c["config"] for c in new["configs"]["gemm_rs"]["2"]] == ["128x128x64x4x4f", "128x256x64x8x3"]
        assert ov.select_method("gemm_rs", 2, 100, True, 4096, 3584) == "torch"
        assert ov.select_method("gemm_rs", 2, 3000, True, 4096, 3584) == "chunked"
        # a run that measured every shape the table had replaces the generic rules too
        full = [rule(128, "torch"), rule(2048, "ce"), rule(4096, "ce"), rule(8192, "ce"),
                {"max_m": None, "method": "ce"}]
        assert otab.merge_rules(old_rs, full) == full
    finally:
        monkeypatch.undo()
        ov.dispatch_table(reload=True)


def test_bench_overlap_passes_its_margin_to_the_table(monkeypatch, tmp_path):
    """``bench_overlap.py --table-from JSON --margin F`` (bench_gemm.py's option name) merges with that margin into
    the table in use (overlap_table.build_overlap_table): a winner 1% faster than the old rule's method keeps the old
    rule at 1.5% and replaces it at 0; a margin outside [0, 0.5) is refused before anything is read."""
    import json

    from triton_dist.ops import overlap as ov
    from triton_dist.ops import overlap_table as otab

    bench = _load_bench(monkeypatch, "bench_overlap_for_margin")
    old = {"format": otab.TABLE_FORMAT, "status": "measured",
           "ops": {"gemm_rs": {"2": [{"n": 8, "k": 8, "max_m": 128, "method": "ce"}, {"max_m": None,
                                                                                     "method": "fused"}]}}}
    run = tmp_path / "run.json"
    run.write_text(json.dumps({"world_size": 2, "records": [
        {"op": "gemm_rs", "M": 128, "K_per_rank": 8, "N": 8,
         "results": {"ours/fused": 9.9, "ours/ce": 10.0, "torch_seq": 20.0}}]}))
    path = tmp_path / "overlap_table.json"
    monkeypatch.setenv(otab.TABLE_ENV, str(path))
    try:
        for margin, want in (("0.015", "ce"), ("0", "fused")):
            path.write_text(json.dumps(old))
            bench.main(["--table-from", str(run), "--margin", margin])
            assert json.loads(path.read_text())["ops"]["gemm_rs"]["2"][0]["method"] == want, margin
        with pytest.raises(SystemExit):
            bench.main(["--table-from", str(tmp_path / "missing.json"), "--margin", "0.5"])
    finally:
        monkeypatch.undo()
        ov.dispatch_table(reload=True)


def test_gemm_ar_default_tiling_covers_the_sms():
    """Without a table entry the GEMM+AR kernel takes the measured decode rule: 16x64 tiles up to 16 rows (N / 64
    tiles already cover the SMs: no split), 64x128 tiles with K split so that the units cover the SMs up to 128 rows,
    never more splits than K blocks, no split above 128 rows; the simulator keeps its tiny tiling."""
    from triton_dist.kernels.gemm_config import SIM_CONFIG
    from triton_dist.kernels.gemm_ar import SPLIT_K_MAX, pick_ar_config

    def pick(m, n=8192, k=7168, sms=132):
        return str(pick_ar_config(m, n, k, num_sms=sms, on_gpu=True))

    assert pick(1) == pick(16) == "16x64x128x4x4"
    assert pick(64) == "64x128x128x4x4k2"
    assert pick(128) == "64x128x64x4x4"
    assert pick(512) == "64x128x64x4x4"
    assert pick(1, n=1024) == f"16x64x128x4x4k{SPLIT_K_MAX}"  # 16 tiles: the split is capped
    assert pick(1, n=1024, k=256) == "16x64x128x4x4k2"  # no more splits than K blocks
    assert pick_ar_config(1, 8192, 7168, num_sms=132, on_gpu=False) == SIM_CONFIG


def test_tile_config_round_trips_and_rejects_bad_text():
    from triton_dist.kernels.gemm_config import TileConfig

    cfg = TileConfig.parse("128x256x64x8x4")
    assert str(cfg) == "128x256x64x8x4" and TileConfig.parse(str(cfg)) == cfg
    flat = TileConfig.parse("128x128x64x4x4f")
    assert flat.flatten and str(flat) == "128x128x64x4x4f" and TileConfig.parse(str(flat)) == flat
    assert flat.meta()["FLATTEN"] is True and "FLATTEN" not in flat.meta(with_flatten=False)
    assert "FLATTEN" not in cfg.meta()
    split = TileConfig.parse("64x128x128x4x4k4")
    assert split.split_k == 4 and str(split) == "64x128x128x4x4k4" and TileConfig.parse(str(split)) == split
    assert split.meta(with_split=True)["SPLIT_K"] == 4 and "SPLIT_K" not in split.meta()
    both = TileConfig.parse("128x128x64x4x4fk2")
    assert both.flatten and both.split_k == 2 and str(both) == "128x128x64x4x4fk2"
    assert cfg.split_k == 1 and cfg.meta(with_split=True)["SPLIT_K"] == 1
    ptr = TileConfig.parse("64x128x128x4x4fpk2")
    assert ptr.flatten and ptr.pointer_loads and ptr.split_k == 2 and str(ptr) == "64x128x128x4x4fpk2"
    assert TileConfig.parse("16x64x128x4x4p").pointer_loads and not cfg.pointer_loads
    store = TileConfig.parse("128x128x64x4x6ft")
    assert store.tma_store and store.flatten and str(store) == "128x128x64x4x6ft" and TileConfig.parse("128x128x64x4x6t")
    assert "TMA_STORE" not in store.meta() and not cfg.tma_store  # the launch decides (kernel and output allow it)
    with pytest.raises(ValueError, match="TMA loads"):
        TileConfig(128, 128, 64, 8, 4, 4, pointer_loads=True, tma_store=True)
    for bad in ("128x256x64x8", "128x200x64x8x4", "axbxcxdxe", "128x256x64x8x0", "64x128x128x4x4k0",
                "64x128x128x4x4k", "16x64x128x4x4pf", "16x64x128x4x4k2p", "16x64x128x4x4tp", "16x64x128x4x4tf"):
        with pytest.raises(ValueError, match="tile config"):
            TileConfig.parse(bad)


def test_eager_calls_take_the_rules_eager_winner(monkeypatch, tmp_path):
    """A measured shape whose fastest method without a CUDA graph differs carries it as ``rule["eager"]``:
    ``method_rules`` derives it from the eager timings, ``--eager-rules-from`` adds it to the measured table from
    result JSONs (and drops a stale one), and ``select_rule(..., eager=True)`` (a call outside capture) returns it
    with the rule's shape, while capture (``eager=False``) keeps the graph rule and the simulator runs ``fused``."""
    import json

    from triton_dist.ops import overlap as ov
    from triton_dist.ops import overlap_table as otab

    bench = _load_bench(monkeypatch, "bench_overlap_for_eager")

    rec = {"op": "gemm_rs", "M": 4096, "K_per_rank": 3584, "N": 4096,
           "results": {"ours/fused": 205.0, "ours/fused@p4": 202.0, "ours/ce": 187.2, "torch_seq": 275.3},
           "eager": {"ours/fused": 245.1, "ours/fused@p4": 196.5, "ours/ce": 246.2, "ours/auto": 248.8,
                     "torch_seq": 266.7}}
    ops, _ = otab.method_rules([rec], 2)
    assert ops["gemm_rs"]["2"][0] == {"n": 4096, "k": 3584, "max_m": 4096, "method": "ce", "us": 187.2,
                                      "eager": {"method": "fused", "pieces": 4, "us": 196.5}}
    same = dict(rec, eager={"ours/ce": 190.0, "torch_seq": 266.7})
    assert "eager" not in otab.method_rules([same], 2)[0]["gemm_rs"]["2"][0]  # nothing to override
    assert otab.eager_rule({"op": "gemm_rs", "eager": {}}) is None

    table = {"format": otab.TABLE_FORMAT, "status": "measured", "note": "t.", "ops": {"gemm_rs": {"2": [
        {"n": 4096, "k": 3584, "max_m": 2048, "method": "fused", "pieces": 8, "eager": {"method": "torch"}},
        {"n": 4096, "k": 3584, "max_m": 4096, "method": "ce"}, {"max_m": None, "method": "fused"}]}}}
    path = tmp_path / "overlap_table.json"
    path.write_text(json.dumps(table))
    monkeypatch.setenv(otab.TABLE_ENV, str(path))
    res = tmp_path / "final.json"
    stale = {"op": "gemm_rs", "M": 2048, "K_per_rank": 3584, "N": 4096, "results": {},
             "eager": {"ours/fused@p8": 101.4, "ours/ce@p1": 204.8, "torch_seq": 143.8}}
    res.write_text(json.dumps({"world_size": 2, "records": [rec, stale]}))
    try:
        _, count = bench.add_eager_rules([str(res)])
        assert count == 2
        rules = json.loads(path.read_text())["ops"]["gemm_rs"]["2"]
        assert "eager" not in rules[0]  # fused@p8 is also the eager winner: the stale override goes
        assert rules[1]["eager"] == {"method": "fused", "pieces": 4, "us": 196.5}
        assert ov.select_rule("gemm_rs", 2, 4096, True, 4096, 3584) == rules[1]
        assert ov.select_rule("gemm_rs", 2, 4096, True, 4096, 3584, eager=True) == {
            "n": 4096, "k": 3584, "max_m": 4096, "method": "fused", "pieces": 4, "us": 196.5}
        assert ov.select_rule("gemm_rs", 2, 2048, True, 4096, 3584, eager=True)["pieces"] == 8
        assert ov.select_rule("gemm_rs", 2, 5000, True, 4096, 3584, eager=True) == {"max_m": None, "method": "fused"}
        assert ov.select_rule("gemm_rs", 2, 4096, False, 4096, 3584, eager=True) == {"method": "fused"}
        before = path.read_text()
        assert bench.add_eager_rules([str(res)])[1] == 2  # the same results again: the same table, note included
        assert path.read_text() == before and json.loads(before)["note"].count("Eager overrides") == 1
    finally:
        monkeypatch.undo()
        ov.dispatch_table(reload=True)
