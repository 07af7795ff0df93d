"""Rank-side functions of test_sp_attention_sim.py (module level, so rank processes import them by reference). Each
returns a list of failure strings (empty = pass) and a count of checks.

Every rank derives the full sequences of every request (q, K, V) from one seed and cuts each request's tokens into
``world`` contiguous slices of lengths chosen per case (0 allowed: a rank without tokens of that request); rank ``r``
builds its own paged cache (pages shuffled) from slice ``r`` only and checks the result of ``sp_flash_decode``
against ``flash_decode_reference`` over the whole (concatenated) sequence."""
from __future__ import annotations

import torch


def _init():
    import triton_dist.utils as u

    u.initialize_distributed()
    import torch.distributed as dist

    return dist.get_rank(), dist.get_world_size()


def _full(seed, B, Hq, Hkv, D, lens, dtype):
    """q [B, Hq, D] and per request K, V [len, Hkv, D] (dtype)."""
    g = torch.Generator().manual_seed(seed)
    q = torch.randn((B, Hq, D), generator=g).to(dtype)
    kv = [(torch.randn((n, Hkv, D), generator=g).to(dtype), torch.randn((n, Hkv, D), generator=g).to(dtype))
          for n in lens]
    return q, kv


def _paged(kv_slices, page, Hkv, D, dtype, seed):
    """A paged cache holding ``kv_slices`` (per request ``(k, v)`` of any length), pages in a shuffled order:
    ``(k_cache, v_cache, block_table, seq_lens)``."""
    B = len(kv_slices)
    npages = [-(-k.shape[0] // page) for k, _ in kv_slices]
    total = max(sum(npages), 1)
    width = max(max(npages, default=0), 1)
    perm = torch.randperm(total, generator=torch.Generator().manual_seed(seed))
    kc = torch.randn((total, page, Hkv, D)).to(dtype)  # garbage where no token lives
    vc = torch.randn((total, page, Hkv, D)).to(dtype)
    bt = torch.zeros((B, width), dtype=torch.int32)
    nxt = 0
    for b, (k, v) in enumerate(kv_slices):
        for p in range(npages[b]):
            pid = int(perm[nxt])
            nxt += 1
            bt[b, p] = pid
            rows = k[p * page:(p + 1) * page]
            kc[pid, :rows.shape[0]] = rows
            vc[pid, :rows.shape[0]] = v[p * page:(p + 1) * page]
    seq_lens = torch.tensor([k.shape[0] for k, _ in kv_slices], dtype=torch.int32)
    return kc, vc, bt, seq_lens


def _reference(q, kv, page, Hkv, D, dtype):
    from triton_dist.ops.attention import flash_decode_reference

    kc, vc, bt, sl = _paged(kv, page, Hkv, D, dtype, 0)
    return flash_decode_reference(q, kc, vc, bt, sl)


def _close(fails, tag, got, want, tol):
    got, want = got.float(), want.float()
    if got.shape != want.shape:
        fails.append(f"{tag}: shape {tuple(got.shape)} != {tuple(want.shape)}")
        return
    inf_g, inf_w = torch.isinf(got), torch.isinf(want)
    if not torch.equal(inf_g, inf_w) or not torch.equal(got[inf_g], want[inf_w]):
        fails.append(f"{tag}: -inf pattern differs")
        return
    err = (got[~inf_g] - want[~inf_w]).abs().max().item() if (~inf_g).any() else 0.0
    if not err <= tol:
        fails.append(f"{tag}: max err {err} > {tol}")


def decode_cases(cases):
    """For each case ``(Hq, Hkv, D, page, slices)`` (``slices[b][r]``: rank r's token count of request b): one
    context and three calls on it (signals reused), each with other data; the third passes ``out=``."""
    from triton_dist.ops import attention_sp as ops

    rank, world = _init()
    fails, checks = [], 0
    dtype = torch.bfloat16
    for ci, (Hq, Hkv, D, page, slices) in enumerate(cases):
        B = len(slices)
        ctx = ops.create_sp_decode_ctx(B + 1, Hq, D, dtype)
        try:
            for call in range(3):
                lens = [sum(s) for s in slices]
                q, kv = _full(1000 * ci + call, B, Hq, Hkv, D, lens, dtype)
                mine = []
                for b, s in enumerate(slices):
                    lo = sum(s[:rank])
                    k, v = kv[b]
                    mine.append((k[lo:lo + s[rank]], v[lo:lo + s[rank]]))
                kc, vc, bt, sl = _paged(mine, page, Hkv, D, dtype, 7 * rank + call)
                want_o, want_l = _reference(q, kv, page, Hkv, D, dtype)
                tag = f"case {ci} call {call} rank {rank}"
                if call == 2:
                    buf = torch.full((B, Hq, D), float("nan"), dtype=dtype)
                    o, lse = ops.sp_flash_decode(q, kc, vc, bt, sl, ctx, out=buf)
                    if o is not buf:
                        fails.append(f"{tag}: out= was not returned")
                else:
                    o, lse = ops.sp_flash_decode(q, kc, vc, bt, sl, ctx)
                if o.dtype != dtype or lse.dtype != torch.float32:
                    fails.append(f"{tag}: dtypes {o.dtype}, {lse.dtype}")
                _close(fails, tag + " out", o, want_o, 2e-2)
                _close(fails, tag + " lse", lse, want_l, 1e-4)
                for b, n in enumerate(lens):
                    if n == 0 and (o[b].float().abs().max().item() != 0 or not torch.isneginf(lse[b]).all()):
                        fails.append(f"{tag}: request {b} is empty everywhere: out {o[b].abs().max()}, lse "
                                     f"{lse[b]}")
                checks += 1
            if ctx.epoch != 3:
                fails.append(f"case {ci}: epoch {ctx.epoch} after three calls")
        finally:
            ctx.close()
    return fails, checks


def bad_input_cases():
    """Every bad argument gets a one-line ValueError before any launch (on every rank alike, so nobody waits); a
    good call afterwards still works (the epochs did not move)."""
    from triton_dist.ops import attention_sp as ops

    rank, world = _init()
    fails = []
    B, Hq, Hkv, D, page = 2, 4, 1, 64, 16
    ctx = ops.create_sp_decode_ctx(B, Hq, D, torch.bfloat16)
    q = torch.randn((B, Hq, D)).to(torch.bfloat16)
    kc = torch.randn((3, page, Hkv, D)).to(torch.bfloat16)
    vc = torch.randn((3, page, Hkv, D)).to(torch.bfloat16)
    bt = torch.tensor([[0, 1], [2, 0]], dtype=torch.int32)
    sl = torch.tensor([20, 5], dtype=torch.int32)

    def expect(what, fn, *needles):
        try:
            fn()
        except ValueError as exc:
            msg = str(exc)
            if "\n" in msg or not msg.startswith(("sp_flash_decode: ", "create_sp_decode_ctx: ")) or \
                    not all(n in msg for n in needles):
                fails.append(f"{what}: message {msg!r} lacks {needles}")
            return
        except Exception as exc:  # noqa: BLE001
            fails.append(f"{what}: {type(exc).__name__}: {exc}")
            return
        fails.append(f"{what}: no error")

    sp = ops.sp_flash_decode
    expect("batch > max_batch", lambda: sp(torch.randn((3, Hq, D)).to(torch.bfloat16), kc, vc,
                                           torch.zeros((3, 2), dtype=torch.int32),
                                           torch.zeros(3, dtype=torch.int32), ctx), "max_batch=2")
    expect("heads", lambda: sp(torch.randn((B, 8, D)).to(torch.bfloat16), kc, vc, bt, sl, ctx), "num_q_heads=4")
    expect("q dtype", lambda: sp(q.half(), kc.half(), vc.half(), bt, sl, ctx), "context's dtype")
    expect("q fp32", lambda: sp(q.float(), kc, vc, bt, sl, ctx), "q.dtype=torch.float32")
    expect("cache dtype", lambda: sp(q, kc.half(), vc, bt, sl, ctx), "k_cache.dtype")
    expect("GQA", lambda: sp(q, torch.randn((3, page, 3, D)).to(torch.bfloat16),
                             torch.randn((3, page, 3, D)).to(torch.bfloat16), bt, sl, ctx), "multiple")
    expect("seq_lens dtype", lambda: sp(q, kc, vc, bt, sl.long(), ctx), "seq_lens must be int32")
    expect("scale", lambda: sp(q, kc, vc, bt, sl, ctx, scale=float("nan")), "scale")
    expect("out", lambda: sp(q, kc, vc, bt, sl, ctx, out=torch.empty((B, Hq, D))), "out must be")
    expect("ctx", lambda: sp(q, kc, vc, bt, sl, object()), "create_sp_decode_ctx")
    expect("bad lens (check_lens)", lambda: sp(q, kc, vc, bt, torch.tensor([40, 5], dtype=torch.int32), ctx,
                                               check_lens=True), "seq_lens[0]=40")
    expect("ctx head_dim", lambda: ops.create_sp_decode_ctx(2, 4, 96), "head_dim=96")
    expect("ctx dtype", lambda: ops.create_sp_decode_ctx(2, 4, 64, torch.float32), "dtype")
    o, lse = sp(q, kc, vc, bt, sl, ctx)
    if o.shape != (B, Hq, D) or ctx.epoch != 1:
        fails.append(f"good call after bad ones: shape {tuple(o.shape)}, epoch {ctx.epoch}")
    ctx.close()
    expect("closed", lambda: sp(q, kc, vc, bt, sl, ctx), "closed")
    return fails, 1


def compile_case():
    """Under ``torch.compile(fullgraph=True, backend="aot_eager")`` ``sp_flash_decode`` is the registered
    ``triton_dist::sp_flash_decode`` op: the traced graph holds it, the compiled call equals an eager one (same
    kernels, same inputs) and the reference over the whole sequence; the epoch counts both calls."""
    from triton_dist.ops import attention_sp as ops

    rank, world = _init()
    fails = []
    Hq, Hkv, D, page = 4, 1, 64, 16
    slices = [[5 + r for r in range(world)], [0] * (world - 1) + [9]]
    lens = [sum(s) for s in slices]
    q, kv = _full(11, len(slices), Hq, Hkv, D, lens, torch.bfloat16)
    mine = []
    for b, s in enumerate(slices):
        lo = sum(s[:rank])
        mine.append((kv[b][0][lo:lo + s[rank]], kv[b][1][lo:lo + s[rank]]))
    kc, vc, bt, sl = _paged(mine, page, Hkv, D, torch.bfloat16, rank)
    ctx = ops.create_sp_decode_ctx(len(slices), Hq, D, torch.bfloat16)
    seen = []

    def backend(gm, example_inputs):
        seen.extend(str(n.target) for n in gm.graph.nodes if n.op == "call_function")
        return torch._dynamo.lookup_backend("aot_eager")(gm, example_inputs)

    def step(q, kc, vc, bt, sl):
        o, lse = ops.sp_flash_decode(q, kc, vc, bt, sl, ctx)
        return o * 2, lse

    try:
        co, cl = torch.compile(step, backend=backend, fullgraph=True)(q, kc, vc, bt, sl)
        eo, el = step(q, kc, vc, bt, sl)
        if not any("sp_flash_decode" in t for t in seen):
            fails.append(f"the traced graph lacks triton_dist.sp_flash_decode: {seen}")
        if not torch.equal(co, eo) or not torch.equal(cl, el):
            fails.append("compiled call differs from the eager one")
        want, want_lse = _reference(q, kv, page, Hkv, D, torch.bfloat16)
        _close(fails, "compiled", co.float() / 2, want, 2e-2)
        _close(fails, "compiled lse", cl, want_lse, 1e-3)
        if ctx.epoch != 2:
            fails.append(f"epoch {ctx.epoch} after two calls")
    finally:
        ctx.close()
    return fails, 1
