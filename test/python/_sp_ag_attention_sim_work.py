"""Rank-side functions of test_sp_ag_attention_sim.py (module level, so rank processes import them by reference).
Each returns a list of failure strings (empty = pass) and a count of checks.

Every rank derives the whole sequences (q, K, V of ``world * L`` tokens each) from one seed and keeps its chunk
``[rank * L, (rank + 1) * L)`` of each; the result of ``sp_ag_attention`` on every rank is checked against a plain
fp32 torch attention (explicit mask by global position, softmax) of that chunk's query rows over the concatenated
K/V."""
from __future__ import annotations

import torch


def _init():
    import triton_dist.utils as u

    u.initialize_distributed()
    import torch.distributed as dist

    return dist.get_rank(), dist.get_world_size()


def _whole(seed, B, Ltot, Hq, Hkv, D, dtype):
    g = torch.Generator().manual_seed(seed)
    return tuple(torch.randn((B, Ltot, h, D), generator=g).to(dtype) for h in (Hq, Hkv, Hkv))


def reference(q, k, v, causal, scale, q_start):
    """fp32 attention of ``q [B, Lq, Hq, D]`` (rows at global positions ``q_start + i``) over ``k, v [B, S, Hkv,
    D]`` (positions ``0 .. S - 1``): ``(out [B, Lq, Hq, D], lse [B, Hq, Lq])``."""
    G = q.shape[2] // k.shape[2]
    kk = k.float().repeat_interleave(G, dim=2)
    vv = v.float().repeat_interleave(G, dim=2)
    s = torch.einsum("bihd,bjhd->bhij", q.float(), kk) * scale
    if causal:
        qpos = q_start + torch.arange(q.shape[1])[:, None]
        kpos = torch.arange(k.shape[1])[None, :]
        s = s.masked_fill(kpos > qpos, float("-inf"))
    lse = torch.logsumexp(s, dim=-1)
    p = torch.softmax(s, dim=-1)
    return torch.einsum("bhij,bjhd->bihd", p, vv), lse


def _close(fails, tag, got, want, tol):
    got, want = got.float(), want.float()
    if got.shape != want.shape:
        fails.append(f"{tag}: shape {tuple(got.shape)} != {tuple(want.shape)}")
        return
    if not bool(torch.isfinite(got).all()):
        fails.append(f"{tag}: non-finite values")
        return
    err = (got - want).abs().max().item() if got.numel() else 0.0
    if not err <= tol:
        fails.append(f"{tag}: max err {err} > {tol}")


def attention_cases(cases):
    """For each case ``(B, L, Hq, Hkv, D, calls)`` one context of capacity ``(B, L)``, then one call per entry of
    ``calls``: ``(causal, batch, length, how)`` with ``how`` in ``plain`` (returns out), ``lse`` (return_lse),
    ``out`` (out= given, lse too), ``strided`` (k / v non-contiguous views, q and out strided too). Each call has
    other data; every result is checked against :func:`reference`; the epoch counts the calls."""
    from triton_dist.ops import attention_sp_ag as sp

    rank, world = _init()
    fails, checks = [], 0
    dtype = torch.bfloat16
    for ci, (B, L, Hq, Hkv, D, calls) in enumerate(cases):
        ctx = sp.create_sp_attention_ctx(B, L, Hkv, D, dtype)
        try:
            for call, (causal, b, n, how) in enumerate(calls):
                qa, ka, va = _whole(100 * ci + call, b, world * n, Hq, Hkv, D, dtype)
                lo, hi = rank * n, (rank + 1) * n
                q, k, v = qa[:, lo:hi], ka[:, lo:hi], va[:, lo:hi]
                if how == "strided":  # heads-major storage seen as [B, L, H, D]: no unit stride but along D
                    q = q.transpose(1, 2).contiguous().transpose(1, 2)
                    k = k.transpose(1, 2).contiguous().transpose(1, 2)
                    v = torch.cat([v, v], dim=3)[..., :D]
                    if k.is_contiguous() or v.is_contiguous() or q.is_contiguous():
                        fails.append(f"case {ci} call {call}: the strided views are contiguous")
                else:
                    q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
                want_o, want_l = reference(q, ka, va, causal, D ** -0.5, lo)
                tag = f"case {ci} call {call} ({'causal' if causal else 'full'}, B={b}, L={n}, {how}) rank {rank}"
                lse = None
                if how == "plain":
                    o = sp.sp_ag_attention(q, k, v, ctx, causal=causal)
                elif how == "lse":
                    o, lse = sp.sp_ag_attention(q, k, v, ctx, causal=causal, return_lse=True)
                else:
                    buf = torch.full((b, n, Hq, D), float("nan"), dtype=dtype)
                    if how == "strided":
                        buf = torch.full((b, Hq, n, D), float("nan"), dtype=dtype).transpose(1, 2)
                    o, lse = sp.sp_ag_attention(q, k, v, ctx, causal=causal, out=buf, return_lse=True)
                    if o is not buf:
                        fails.append(f"{tag}: out= was not returned")
                if o.dtype != dtype:
                    fails.append(f"{tag}: out dtype {o.dtype}")
                _close(fails, tag + " out", o, want_o, 3e-2)
                if lse is not None:
                    if lse.dtype != torch.float32:
                        fails.append(f"{tag}: lse dtype {lse.dtype}")
                    _close(fails, tag + " lse", lse, want_l, 1e-4)
                checks += 1
            if ctx.epoch != len(calls):
                fails.append(f"case {ci}: epoch {ctx.epoch} after {len(calls)} calls")
        finally:
            ctx.close()
    return fails, checks


def bad_input_cases():
    """Every bad argument gets a one-line ValueError naming the problem before any launch (every rank alike, so
    nobody waits); a good call afterwards still works (the epoch did not move)."""
    from triton_dist.ops import attention_sp_ag as sp

    rank, world = _init()
    fails = []
    B, L, Hq, Hkv, D = 2, 16, 4, 2, 64
    bf = torch.bfloat16
    ctx = sp.create_sp_attention_ctx(B, L, Hkv, D, bf)
    q = torch.randn((B, L, Hq, D)).to(bf)
    k = torch.randn((B, L, Hkv, D)).to(bf)
    v = torch.randn((B, L, Hkv, D)).to(bf)

    def expect(what, fn, *needles):
        try:
            fn()
        except ValueError as exc:
            msg = str(exc)
            if "\n" in msg or not msg.startswith(("sp_ag_attention: ", "create_sp_attention_ctx: ")) or \
                    not all(n in msg for n in needles):
                fails.append(f"{what}: message {msg!r} lacks {needles}")
            return
        except Exception as exc:  # noqa: BLE001
            fails.append(f"{what}: {type(exc).__name__}: {exc}")
            return
        fails.append(f"{what}: no error")

    f = sp.sp_ag_attention
    expect("batch > max_batch", lambda: f(torch.cat([q, q[:1]]), torch.cat([k, k[:1]]), torch.cat([v, v[:1]]), ctx),
           "max_batch=2")
    expect("L > max_seq_per_rank", lambda: f(torch.cat([q, q], 1), torch.cat([k, k], 1), torch.cat([v, v], 1), ctx),
           "max_seq_per_rank=16")
    expect("q / kv lengths", lambda: f(q[:, :8], k, v, ctx), "same length")
    expect("k / v shapes", lambda: f(q, k, v[:, :8], ctx), "same shape")
    expect("kv heads", lambda: f(q, k[:, :, :1], v[:, :, :1], ctx), "num_kv_heads=2")
    expect("GQA", lambda: f(q[:, :, :3], k, v, ctx), "multiple")
    expect("head dim", lambda: f(torch.randn((B, L, Hq, 96)).to(bf), torch.randn((B, L, Hkv, 96)).to(bf),
                                 torch.randn((B, L, Hkv, 96)).to(bf), ctx), "D=96")
    expect("q dtype", lambda: f(q.half(), k, v, ctx), "share a dtype")
    expect("context dtype", lambda: f(q.half(), k.half(), v.half(), ctx), "context's dtype")
    expect("fp32", lambda: f(q.float(), k.float(), v.float(), ctx), "float32")
    expect("D stride", lambda: f(q, torch.randn((B, L, Hkv, 2 * D)).to(bf)[..., ::2], v, ctx), "unit stride")
    expect("scale", lambda: f(q, k, v, ctx, scale=-1.0), "scale=-1.0")
    expect("scale nan", lambda: f(q, k, v, ctx, scale=float("nan")), "scale")
    expect("causal", lambda: f(q, k, v, ctx, causal=1), "causal must be a bool")
    expect("out dtype", lambda: f(q, k, v, ctx, out=torch.empty((B, L, Hq, D))), "out must be")
    expect("out shape", lambda: f(q, k, v, ctx, out=torch.empty((B, L, Hq, D // 2)).to(bf)), "out must be")
    expect("ctx", lambda: f(q, k, v, object()), "create_sp_attention_ctx")
    expect("q not a tensor", lambda: f(q.tolist(), k, v, ctx), "q must be a torch.Tensor")
    expect("ctx head_dim", lambda: sp.create_sp_attention_ctx(2, 16, 2, 96), "head_dim=96")
    expect("ctx dtype", lambda: sp.create_sp_attention_ctx(2, 16, 2, 64, torch.float32), "dtype")
    expect("ctx max_seq", lambda: sp.create_sp_attention_ctx(2, 0, 2, 64), "max_seq_per_rank=0")
    expect("ctx programs", lambda: sp.create_sp_attention_ctx(2, 16, 2, 64, programs=0), "programs=0")
    o = f(q, k, v, ctx)
    if o.shape != (B, L, Hq, D) or not bool(torch.isfinite(o.float()).all()) or ctx.epoch != 1:
        fails.append(f"good call after bad ones: shape {tuple(o.shape)}, epoch {ctx.epoch}")
    ctx.close()
    expect("closed", lambda: f(q, k, v, ctx), "closed")
    return fails, 1


def mismatch_cases():
    """Ranks that disagree are reported by the tagged waits, not waited for: (1) chunk lengths 8 and 9 (not
    causal: every rank waits for the other's chunk, so both report); (2) rank 0 causal, rank 1 not (rank 1 waits
    for chunk 0 and sees the causal tag; rank 0 reads no peer chunk and returns). Returns ``{case: (type,
    message) or None}`` for this rank."""
    import torch.distributed as dist

    from triton_dist.ops import attention_sp_ag as sp

    rank, world = _init()
    bf = torch.bfloat16
    res = {}
    for name, n, causal in (("length", 8 + rank, False), ("causal", 8, rank == 0)):
        ctx = sp.create_sp_attention_ctx(1, 16, 1, 64, bf)
        q, k, v = (torch.randn((1, n, 2, 64)).to(bf), torch.randn((1, n, 1, 64)).to(bf),
                   torch.randn((1, n, 1, 64)).to(bf))
        try:
            sp.sp_ag_attention(q, k, v, ctx, causal=causal)
            res[name] = None
        except Exception as exc:  # noqa: BLE001 - reported to the test
            res[name] = (type(exc).__name__, str(exc))
        dist.barrier()
        ctx.close()
    return res


def compile_case():
    """Under ``torch.compile(fullgraph=True, backend="aot_eager")`` the call is the registered
    ``triton_dist::sp_ag_attention`` op: the traced graph holds it, and the compiled call equals an eager one (same
    kernel, same inputs) and the reference; the epoch counts both calls."""
    from triton_dist.ops import attention_sp_ag as sp

    rank, world = _init()
    fails = []
    B, L, Hq, Hkv, D = 1, 16, 2, 1, 64
    bf = torch.bfloat16
    ctx = sp.create_sp_attention_ctx(B, L, Hkv, D, bf)
    qa, ka, va = _whole(7, B, world * L, Hq, Hkv, D, bf)
    q, k, v = (t[:, rank * L:(rank + 1) * L].contiguous() for t in (qa, ka, va))
    seen = []

    def backend(gm, example_inputs):
        seen.extend(str(n.target) for n in gm.graph.nodes if n.op == "call_function")
        return torch._dynamo.lookup_backend("aot_eager")(gm, example_inputs)

    def step(q, k, v):
        o, lse = sp.sp_ag_attention(q, k, v, ctx, return_lse=True)
        return o * 2, lse

    try:
        co, cl = torch.compile(step, backend=backend, fullgraph=True)(q, k, v)
        eo, el = step(q, k, v)
        if not any("sp_ag_attention" in t for t in seen):
            fails.append(f"the traced graph lacks triton_dist.sp_ag_attention: {seen}")
        if not torch.equal(co, eo) or not torch.equal(cl, el):
            fails.append("compiled call differs from the eager one")
        want_o, _ = reference(q, ka, va, True, D ** -0.5, rank * L)
        _close(fails, "compiled", co.float() / 2, want_o, 3e-2)
        if ctx.epoch != 2:
            fails.append(f"epoch {ctx.epoch} after two calls")
    finally:
        ctx.close()
    return fails, 1
