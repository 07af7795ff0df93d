"""Rank-side functions of test_sp_attention_layer_sim.py: ``layers.SPAttention`` (prefill through ``"ag"`` and
``"ulysses"``, decode) against the plain torch references ``sp_attention_prefill_torch`` /
``sp_attention_decode_torch`` (K/V gathered with torch.distributed, fp32 attention written out), and those
references against attention over the whole sequence each rank derives from one seed (so a wrong reference cannot
pass either). Each function returns ``(failures, checks)``."""
from __future__ import annotations

import torch

from _expect import expect_error
from _sp_attention_sim_work import _close, _init, _paged


def _whole(seed, B, S, Hq, Hkv, D, dtype):
    g = torch.Generator().manual_seed(seed)
    return tuple(torch.randn((B, S, h, D), generator=g).to(dtype) for h in (Hq, Hkv, Hkv))


def _attend(q, K, V, q_start, causal, scale):
    """fp32 attention of ``q [B, L, Hq, D]`` at positions ``q_start + i`` over ``K, V [B, S, Hkv, D]``."""
    G = q.shape[2] // K.shape[2]
    s = torch.einsum("blhd,bshd->bhls", q.float(), K.float().repeat_interleave(G, dim=2)) * scale
    if causal:
        pos = q_start + torch.arange(q.shape[1])
        s = s.masked_fill(torch.arange(K.shape[1])[None, :] > pos[:, None], float("-inf"))
    return torch.einsum("bhls,bshd->blhd", torch.softmax(s, dim=-1), V.float().repeat_interleave(G, dim=2))


def prefill_cases(cases):
    """``cases``: ``(method, Hq, Hkv, D, B, L)``; causal and not, two calls each on one layer."""
    from triton_dist.layers import SPAttention, sp_attention_prefill_torch

    rank, world = _init()
    fails, checks = [], 0
    for ci, (method, Hq, Hkv, D, B, L) in enumerate(cases):
        layer = SPAttention(Hq, Hkv, D, max_batch=B, max_seq_per_rank=L, prefill_method=method, decode=False)
        try:
            for call, causal in enumerate((True, False)):
                tag = f"{method} case {ci} {'causal' if causal else 'full'} rank {rank}"
                Q, K, V = _whole(100 * ci + call, B, world * L, Hq, Hkv, D, torch.bfloat16)
                lo = rank * L
                q, k, v = (t[:, lo:lo + L].contiguous() for t in (Q, K, V))
                got = layer(q, k, v, causal=causal)
                want = _attend(q, K, V, lo, causal, D ** -0.5)
                ref = sp_attention_prefill_torch(q, k, v, causal=causal)
                _close(fails, tag + " layer vs whole-sequence fp32", got, want, 2e-2)
                _close(fails, tag + " torch reference vs whole-sequence fp32", ref, want, 2e-2)
                checks += 2
        finally:
            layer.close()
    return fails, checks


def decode_cases(cases):
    """``cases``: ``(Hq, Hkv, D, page, slices)`` (``slices[b][r]``: rank r's tokens of request b); two calls."""
    from triton_dist.layers import SPAttention, sp_attention_decode_torch
    from triton_dist.ops.attention import flash_decode_reference

    rank, world = _init()
    fails, checks = [], 0
    for ci, (Hq, Hkv, D, page, slices) in enumerate(cases):
        B = len(slices)
        layer = SPAttention(Hq, Hkv, D, max_batch=B, max_seq_per_rank=16, prefill=False)
        try:
            for call in range(2):
                tag = f"decode case {ci} call {call} rank {rank}"
                g = torch.Generator().manual_seed(1000 * ci + call)
                q = torch.randn((B, Hq, D), generator=g).to(torch.bfloat16)
                whole = [(torch.randn((sum(s), Hkv, D), generator=g).to(torch.bfloat16),
                          torch.randn((sum(s), Hkv, D), generator=g).to(torch.bfloat16)) for s in slices]
                mine = []
                for b, s in enumerate(slices):
                    lo = sum(s[:rank])
                    mine.append((whole[b][0][lo:lo + s[rank]], whole[b][1][lo:lo + s[rank]]))
                kc, vc, bt, sl = _paged(mine, page, Hkv, D, torch.bfloat16, rank + 7 * call)
                got, lse = layer.decode(q, kc, vc, bt, sl, return_lse=True)
                ref, ref_lse = sp_attention_decode_torch(q, kc, vc, bt, sl)
                wk, wv, wt, wl = _paged(whole, page, Hkv, D, torch.bfloat16, 3)
                want, want_lse = flash_decode_reference(q, wk, wv, wt, wl)
                _close(fails, tag + " layer", got, want, 2e-2)
                _close(fails, tag + " layer lse", lse, want_lse, 1e-3)
                _close(fails, tag + " torch reference", ref, want, 2e-2)
                _close(fails, tag + " torch reference lse", ref_lse, want_lse, 1e-3)
                checks += 4
        finally:
            layer.close()
    return fails, checks


def bad_input_cases():
    """One-line ValueErrors before anything is created or launched; a layer with one direction refuses the other."""
    from triton_dist.layers import SPAttention

    _init()
    fails, checks = [], 0

    def expect(what, fn, needle):
        nonlocal checks
        checks += 1
        expect_error(fails, what, fn, needle, one_line=True)

    expect("GQA", lambda: SPAttention(6, 4, 64, max_batch=1, max_seq_per_rank=8), "multiple of num_kv_heads")
    expect("method", lambda: SPAttention(4, 2, 64, max_batch=1, max_seq_per_rank=8, prefill_method="ring"),
           "prefill_method")
    expect("ulysses heads", lambda: SPAttention(3, 1, 64, max_batch=1, max_seq_per_rank=8, prefill_method="ulysses"),
           "divisible by the world size")
    expect("nothing", lambda: SPAttention(4, 2, 64, max_batch=1, max_seq_per_rank=8, prefill=False, decode=False),
           "nothing to run")
    layer = SPAttention(4, 2, 64, max_batch=1, max_seq_per_rank=8, prefill=False)
    try:
        x = torch.zeros((1, 8, 4, 64), dtype=torch.bfloat16)
        expect("prefill on a decode-only layer", lambda: layer.prefill(x, x[:, :, :2], x[:, :, :2]), "prefill=False")
    finally:
        layer.close()
    return fails, checks
