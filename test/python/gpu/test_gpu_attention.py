"""GPU tier of the attention family (docs/attention.md), run under torchrun at any world size >= 2 (ranks may share a
GPU: ``scripts/launch.sh --ranks-per-gpu auto``)::

    scripts/launch.sh --ranks-per-gpu auto --nproc_per_node 2 -m pytest -q test/python/gpu/test_gpu_attention.py

The CPU tier (test_flash_decode.py, test_flash_attention.py, test_sp_attention_sim.py) runs the same ops through the
interpreter at toy sizes; this one runs the compiled kernels at real sizes.

* ``ops.flash_decode``: GQA 4 (32 q / 8 kv heads), D 128, page sizes 1 / 16 / 64, a batch whose lengths include 0,
  1, lengths off the page and the tile, and one of ~8K tokens, pages shuffled, bf16 and fp16, several split counts,
  against ``flash_decode_reference`` (fp32 torch); a CUDA graph of one call replayed with new lengths, block tables
  and queries copied into the captured tensors (each replay equal to the reference and to an eager call); the
  launch choices (int32 / int64 K/V offsets bit-identical, ``resident``, ``merge_block_s``; the device's register
  count: at least 3 split programs per SM on sm_90).
* ``ops.merge_attention_partials`` with ``-inf`` partials (NaN outputs behind them) and all-empty rows.
* ``ops.flash_attention`` causal at 1K / 2K tokens, D 64 and 128, GQA and MHA, against an fp32 reference and
  against ``torch.nn.functional.scaled_dot_product_attention`` (tolerance); K/V in chunks merged with
  ``merge_chunk_partials`` equal to one call; ``q_start`` / ``kv_start`` offsets (the last query rows alone equal
  the one call's rows).
* ``ops.sp_ag_attention`` at the torchrun world (2048 tokens per rank, 32 q / 8 kv heads, D 128, bf16): every rank
  derives the whole sequence from one seed and holds its chunk; its rows are checked against SDPA over the whole
  sequence (flash backend, lower-right causal mask; and not causal), against ``flash_attention`` over the
  concatenated K/V with ``q_start``, and two heads against fp32; ten calls on one context (causal and not, smaller
  batch and chunks off the tile, ``out=``, strided k / v); a CUDA graph of one call replayed with new inputs; bad
  input refused before any launch, then a good call.
* ``ops.sp_flash_decode`` at the torchrun world: every rank derives every request's whole sequence from one seed and
  holds a contiguous slice of it (0 tokens on some ranks) in its own paged cache; the result on every rank is checked
  against ``flash_decode_reference`` over the concatenated sequence (computed on the rank itself: no NCCL, so it holds
  where ranks share a GPU); ten calls on one context; a CUDA graph of one call replayed with new inputs; bad input
  refused with a one-line ValueError before any launch, then a good call.
* Ulysses' ``ops.pre_attn_all_to_all`` / ``post_attn_all_to_all`` at the torchrun world (skipped where 32 q / 8 kv
  heads do not divide by it), B 1 (and 2), 4096 tokens per rank, D 128, bf16: exact against the head groups of the
  global tensors (derived alike on every rank: no communication in the reference) and against the torch.distributed
  formulation (all_to_all_single + permutes; gloo on host copies where ranks share a GPU), k / v with 8 heads and
  strided views on the q context, post(pre(q)) == q; ten calls on one context; one layer's calls (pre q, pre k,
  post) captured into a CUDA graph and replayed with new inputs; bad input.
* ``layers.SPAttention`` (prefill through "ag" and "ulysses", decode) at the torchrun world against the plain torch
  references ``sp_attention_prefill_torch`` / ``sp_attention_decode_torch`` and fp32 attention over the whole sequence.

The one-device tests run on every rank (each checks its own device). Ranks collect failures and assert after the
cleanup (a rank that failed early still closes its context, so no peer waits for it).
"""
from __future__ import annotations

import os
import sys

import pytest
import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # test/python

from _expect import one_line_checker  # noqa: E402
from _torchrun_shmem import DEVICE  # noqa: E402

pytestmark = pytest.mark.gpu
os.environ.setdefault("NVSHMEM_SYMMETRIC_SIZE", "1G")

HQ, HKV, D = 32, 8, 128  # GQA 4


def _device():
    dev = torch.device("cuda", DEVICE)
    torch.cuda.set_device(dev)
    return dev


def _init():
    import torch.distributed as dist

    import triton_dist.utils as tdu

    tdu.initialize_distributed()
    torch.cuda.set_device(DEVICE)
    return dist.get_rank(), dist.get_world_size()


# ------------------------------------------------------------------------------------------------------- helpers
def _sequences(seed, lens, Hkv, Dh, dtype, device, B=None, Hq=None):
    """``q [B, Hq, D]`` and per request ``(k, v) [n, Hkv, D]`` from ``seed`` (a host generator: the same values on
    every rank), on ``device``."""
    g = torch.Generator().manual_seed(seed)
    B = len(lens) if B is None else B
    q = torch.randn((B, Hq or HQ, Dh), generator=g).to(dtype).to(device)
    kv = [(torch.randn((n, Hkv, Dh), generator=g).to(dtype).to(device),
           torch.randn((n, Hkv, Dh), generator=g).to(dtype).to(device)) for n in lens]
    return q, kv


def _paged(kv, page, seed, width=None, spare=3):
    """A paged cache holding the requests ``kv`` (``(k, v) [n, Hkv, D]`` each), pages in a shuffled order, ``spare``
    pages of garbage beyond them: ``(k_cache, v_cache, block_table [B, width] int32, seq_lens [B] int32)``; table
    entries past a request's pages point at page 0 (never read)."""
    dev, dtype = kv[0][0].device, kv[0][0].dtype
    Hkv, Dh = kv[0][0].shape[1], kv[0][0].shape[2]
    npages = [-(-k.shape[0] // page) for k, _ in kv]
    total = sum(npages) + spare
    width = max(max(npages), 1) if width is None else width
    g = torch.Generator().manual_seed(seed)
    perm = torch.randperm(total, generator=g).to(dev)
    kc = (torch.randn((total, page, Hkv, Dh), generator=g) * 100).to(dtype).to(dev)  # garbage where no token is
    vc = (torch.randn((total, page, Hkv, Dh), generator=g) * 100).to(dtype).to(dev)
    bt = torch.zeros((len(kv), width), dtype=torch.int32, device=dev)
    start = 0
    for b, (k, v) in enumerate(kv):
        n, m = k.shape[0], npages[b]
        if m == 0:
            continue
        ids = perm[start:start + m]
        start += m
        bt[b, :m] = ids.to(torch.int32)
        pad = m * page - n
        kp = torch.cat([k, kc[ids].reshape(-1, Hkv, Dh)[n:n + pad]]) if pad else k
        vp = torch.cat([v, vc[ids].reshape(-1, Hkv, Dh)[n:n + pad]]) if pad else v
        kc[ids] = kp.reshape(m, page, Hkv, Dh)
        vc[ids] = vp.reshape(m, page, Hkv, Dh)
    sl = torch.tensor([k.shape[0] for k, _ in kv], dtype=torch.int32, device=dev)
    return kc, vc, bt, sl


def _err(got, want, rtol=0.0):
    """Max over the finite elements of ``|got - want| - rtol * |want|``; None (a failure) where the shapes or the
    ``-inf`` patterns differ or ``got`` holds NaN."""
    got, want = got.float(), want.float()
    if got.shape != want.shape:
        return None
    if torch.isnan(got).any() or not torch.equal(torch.isinf(got), torch.isinf(want)):
        return None
    inf = torch.isinf(want)
    if not torch.equal(got[inf], want[inf]):
        return None
    fin = ~inf
    if not fin.any():
        return 0.0
    return ((got[fin] - want[fin]).abs() - rtol * want[fin].abs()).max().item()


def _check(fails, tag, got, want, tol, rtol=1e-2):
    """``|got - want| <= tol + rtol * |want|`` everywhere (``-inf`` where ``want`` has it), else a failure line."""
    e = _err(got, want, rtol)
    if e is None or not e <= tol:
        fails.append(f"{tag}: max err beyond {rtol} x |want| {e if e is not None else 'pattern/shape/NaN'} > {tol}")


def _tol(dtype):
    return 2e-2 if dtype == torch.bfloat16 else 5e-3


# ---------------------------------------------------------------------------------------------- flash_decode
#: lengths of the decode batch: empty, one token, off the page and the tile, a long one (~8K)
LENS = [0, 1, 17, 1000, 8190, 333]


@pytest.mark.parametrize("page", [1, 16, 64])
@pytest.mark.parametrize("dtname", ["bfloat16", "float16"])
def test_flash_decode_real_sizes(page, dtname):
    """GQA 4, D 128, the batch of LENS (0 and ~8K included), shuffled pages, against the fp32 reference at several
    split counts (the default, one split: the direct path, 3, 16) and with ``out=`` / ``lse=`` buffers."""
    from triton_dist import ops
    from triton_dist.ops.attention import flash_decode_reference

    dev = _device()
    dtype = getattr(torch, dtname)
    q, kv = _sequences(7 + page, LENS, HKV, D, dtype, dev)
    kc, vc, bt, sl = _paged(kv, page, page)
    want_o, want_l = flash_decode_reference(q, kc, vc, bt, sl)
    fails = []
    for splits in (None, 1, 3, 16):
        o, lse = ops.flash_decode(q, kc, vc, bt, sl, num_splits=splits)
        tag = f"page {page} {dtname} splits {splits}"
        if o.dtype != dtype or lse.dtype != torch.float32:
            fails.append(f"{tag}: dtypes {o.dtype} {lse.dtype}")
        _check(fails, tag + " out", o, want_o, _tol(dtype))
        _check(fails, tag + " lse", lse, want_l, 2e-3, rtol=1e-4)
        if o[0].float().abs().max().item() != 0 or not torch.isneginf(lse[0]).all():
            fails.append(f"{tag}: the empty request got out {o[0].abs().max().item()} lse {lse[0, :2].tolist()}")
    out = torch.full_like(q, float("nan"))
    lse_buf = torch.empty((len(LENS), HQ), dtype=torch.float32, device=dev)
    o, lse = ops.flash_decode(q, kc, vc, bt, sl, out=out, lse=lse_buf)
    if o is not out or lse is not lse_buf:
        fails.append("out= / lse= buffers not returned")
    _check(fails, "out= buffers", o, want_o, _tol(dtype))
    torch.cuda.synchronize()
    assert not fails, fails


def test_flash_decode_launch_choices():
    """The DecodeConfig knobs of docs/attention.md, "Occupancy and the split rule", at real sizes (LENS, page 16,
    bf16): the int32 K/V row offsets (the default) and the int64 ones (``wide_offsets``) give the same bits at the
    same split count; ``resident=3`` (splits in whole waves) and ``merge_block_s=64`` (the merge in one step)
    against the reference; the device's ptxas gives the default split kernel no spills and at least 3 programs per
    SM (sm_90)."""
    import dataclasses

    from triton_dist import ops
    from triton_dist.ops.attention import flash_decode_reference, last_split_kernel_resources, pick_decode_config

    dev = _device()
    q, kv = _sequences(11, LENS, HKV, D, torch.bfloat16, dev)
    kc, vc, bt, sl = _paged(kv, 16, 16)
    want_o, want_l = flash_decode_reference(q, kc, vc, bt, sl)
    base = pick_decode_config(D, HQ // HKV, on_gpu=True)
    fails = []
    o, lse = ops.flash_decode(q, kc, vc, bt, sl, num_splits=16, config=base)
    res = last_split_kernel_resources()
    if res is None or (torch.cuda.get_device_capability(dev) == (9, 0) and
                       (res["spills"] or res["programs_per_sm"] < 3)):
        fails.append(f"default split kernel on this device: {res}")
    wo, wl = ops.flash_decode(q, kc, vc, bt, sl, num_splits=16, config=dataclasses.replace(base, wide_offsets=True))
    if not torch.equal(o, wo) or not torch.equal(lse, wl):
        fails.append("wide_offsets: the int64 offsets' result differs from the int32 ones'")
    for cfg in (dataclasses.replace(base, resident=3), dataclasses.replace(base, merge_block_s=64),
                dataclasses.replace(base, resident=3, merge_block_s=64)):
        o, lse = ops.flash_decode(q, kc, vc, bt, sl, config=cfg)
        tag = f"resident {cfg.resident} merge_block_s {cfg.merge_block_s}"
        _check(fails, tag + " out", o, want_o, _tol(torch.bfloat16))
        _check(fails, tag + " lse", lse, want_l, 2e-3, rtol=1e-4)
    torch.cuda.synchronize()
    assert not fails, fails


def test_flash_decode_graph_replay_follows_new_lengths_and_tables():
    """One ``flash_decode`` call captured into a CUDA graph (after a warm-up call) on fixed ``q`` / cache / table /
    length tensors; three replays with new queries, tables and lengths (0 and ~8K among them) copied into the
    captured tensors: each equals the reference and an eager call bit for bit."""
    from triton_dist import ops
    from triton_dist.ops.attention import flash_decode_reference

    dev = _device()
    dtype, page, B, width = torch.bfloat16, 16, 4, 8192 // 16 + 4
    npages = B * width
    kc = torch.zeros((npages, page, HKV, D), dtype=dtype, device=dev)
    vc = torch.zeros_like(kc)
    q = torch.zeros((B, HQ, D), dtype=dtype, device=dev)
    bt = torch.zeros((B, width), dtype=torch.int32, device=dev)
    sl = torch.zeros((B, ), dtype=torch.int32, device=dev)

    def load(seed, lens):
        qn, kv = _sequences(seed, lens, HKV, D, dtype, dev)
        k2, v2, b2, s2 = _paged(kv, page, seed, width=width, spare=npages - sum(-(-n // page) for n in lens))
        q.copy_(qn)
        kc.copy_(k2)
        vc.copy_(v2)
        bt.copy_(b2)
        sl.copy_(s2)

    fails = []
    load(1, [5, 100, 2000, 64])
    ops.flash_decode(q, kc, vc, bt, sl)  # warm-up: compiles outside the capture
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        o, lse = ops.flash_decode(q, kc, vc, bt, sl)
    for seed, lens in ((2, [0, 8190, 1, 300]), (3, [4096, 0, 0, 17]), (4, [8192, 8192, 1000, 16])):
        load(seed, lens)
        graph.replay()
        torch.cuda.synchronize()
        got_o, got_l = o.clone(), lse.clone()
        want_o, want_l = flash_decode_reference(q, kc, vc, bt, sl)
        _check(fails, f"replay {lens} out", got_o, want_o, _tol(dtype))
        _check(fails, f"replay {lens} lse", got_l, want_l, 2e-3, rtol=1e-4)
        eo, el = ops.flash_decode(q, kc, vc, bt, sl)
        if not torch.equal(eo, got_o) or _err(el, got_l) != 0.0:
            fails.append(f"replay {lens}: differs from an eager call")
    del graph
    assert not fails, fails


def test_merge_attention_partials_with_empty_partials():
    """Four partials of 3 x 32 rows: some partials empty (``-inf``, NaN behind them), one row empty in every
    partial (out 0, lse -inf); fp32 and bf16 partials; against the LSE-weighted merge in torch."""
    from triton_dist import ops

    dev = _device()
    S, B, H = 4, 3, HQ
    g = torch.Generator().manual_seed(3)
    outs = torch.randn((S, B, H, D), generator=g).to(dev)
    lses = (torch.randn((S, B, H), generator=g) * 4).to(dev)
    lses[1] = float("-inf")  # a whole partial empty
    lses[0, 1, ::2] = float("-inf")
    lses[:, 2, 5] = float("-inf")  # a row empty everywhere
    outs[lses == float("-inf")] = float("nan")
    m = lses.max(0).values
    safe_m = torch.where(torch.isinf(m), torch.zeros_like(m), m)
    w = torch.exp(lses - safe_m)  # 0 for the empty partials
    tot = w.sum(0)
    want_l = torch.where(tot > 0, safe_m + torch.log(tot), torch.full_like(tot, float("-inf")))
    want_o = (torch.nan_to_num(outs) * w[..., None]).sum(0) / torch.where(tot > 0, tot, 1.0)[..., None]
    fails = []
    for dtype in (torch.float32, torch.bfloat16):
        o, lse = ops.merge_attention_partials(outs.to(dtype), lses)
        _check(fails, f"{dtype} out", o, want_o, 1e-5 if dtype == torch.float32 else 2e-2,
               rtol=1e-5 if dtype == torch.float32 else 1e-2)
        _check(fails, f"{dtype} lse", lse, want_l, 1e-5, rtol=1e-6)
        if o[2, 5].float().abs().max().item() != 0:
            fails.append(f"{dtype}: the empty row is not 0")
    assert not fails, fails


# ------------------------------------------------------------------------------------------- flash_attention
def _attention_reference(q, k, v, q_start=0, kv_start=0):
    """Causal attention in fp32 by global positions: ``(out [B, Lq, Hq, D], lse [B, Hq, Lq])``."""
    B, Lq, Hq, Dh = q.shape
    Lkv, Hkv = k.shape[1], k.shape[2]
    kk = k.float().repeat_interleave(Hq // Hkv, dim=2)
    vv = v.float().repeat_interleave(Hq // Hkv, dim=2)
    s = torch.einsum("bqhd,bkhd->bhqk", q.float(), kk) * Dh ** -0.5
    qpos = torch.arange(Lq, device=q.device)[:, None] + q_start
    kpos = torch.arange(Lkv, device=q.device)[None, :] + kv_start
    s = s.masked_fill(kpos > qpos, float("-inf"))
    lse = torch.logsumexp(s, dim=-1)
    p = torch.softmax(s, dim=-1).nan_to_num(0.0)
    return torch.einsum("bhqk,bkhd->bqhd", p, vv), lse


def _qkv(seed, B, L, Hq, Hkv, Dh, dtype, dev):
    g = torch.Generator(device=dev).manual_seed(seed)
    return tuple(torch.randn((B, L, h, Dh), generator=g, device=dev).to(dtype) for h in (Hq, Hkv, Hkv))


@pytest.mark.parametrize("L,Dh,Hq,Hkv", [(1024, 128, 8, 2), (2048, 64, 8, 8), (2048, 128, 8, 2), (1000, 128, 4, 4)])
def test_flash_attention_causal_vs_fp32_and_sdpa(L, Dh, Hq, Hkv):
    """Causal ``flash_attention`` (bf16, batch 2) against the fp32 reference (out and lse) and against
    ``scaled_dot_product_attention`` (is_causal; K/V heads repeated for GQA) within bf16 tolerance."""
    from triton_dist import ops

    dev = _device()
    q, k, v = _qkv(L + Dh, 2, L, Hq, Hkv, Dh, torch.bfloat16, dev)
    want_o, want_l = _attention_reference(q, k, v)
    o, lse = ops.flash_attention(q, k, v, return_lse=True)
    fails = []
    _check(fails, "out vs fp32", o, want_o, 2e-2)
    _check(fails, "lse vs fp32", lse, want_l, 2e-3, rtol=1e-4)
    G = Hq // Hkv
    sd = torch.nn.functional.scaled_dot_product_attention(
        q.transpose(1, 2), k.repeat_interleave(G, dim=2).transpose(1, 2), v.repeat_interleave(G, dim=2).transpose(1, 2),
        is_causal=True).transpose(1, 2)
    _check(fails, "out vs sdpa", o, sd, 3e-2)
    assert not fails, fails


def test_flash_attention_chunks_and_offsets():
    """K/V of 2048 tokens in three chunks (kv_start 0, 640, 1408) merged with ``merge_chunk_partials`` = one call
    (out within bf16 rounding, lse within fp32); the last 512 query rows alone (``q_start=1536``) = the one call's
    rows; a chunk wholly after the queries gives 0 / -inf."""
    from triton_dist import ops

    dev = _device()
    L, Hq, Hkv, Dh = 2048, 8, 2, 128
    q, k, v = _qkv(11, 1, L, Hq, Hkv, Dh, torch.bfloat16, dev)
    full_o, full_l = ops.flash_attention(q, k, v, return_lse=True)
    want_o, want_l = _attention_reference(q, k, v)
    fails = []
    _check(fails, "one call vs fp32", full_o, want_o, 2e-2)
    outs, lses = [], []
    for lo, hi in ((0, 640), (640, 1408), (1408, L)):
        o, lse = ops.flash_attention_partial(q, k[:, lo:hi], v[:, lo:hi], kv_start=lo)
        outs.append(o.float())
        lses.append(lse)
        _, cl = _attention_reference(q, k[:, lo:hi], v[:, lo:hi], kv_start=lo)
        _check(fails, f"chunk [{lo}, {hi}) lse", lse, cl, 2e-3, rtol=1e-4)
    mo, ml = ops.merge_chunk_partials(outs, lses, out_dtype=torch.bfloat16)
    _check(fails, "merged chunks vs one call", mo, full_o, 2e-2)
    _check(fails, "merged chunks vs fp32", mo, want_o, 2e-2)
    _check(fails, "merged lse vs one call", ml, full_l, 2e-3, rtol=1e-4)
    qs = 1536
    o, lse = ops.flash_attention(q[:, qs:], k, v, q_start=qs, return_lse=True)
    _check(fails, "q_start rows vs one call", o, full_o[:, qs:], 2e-2)
    _check(fails, "q_start lse vs one call", lse, full_l[:, :, qs:], 2e-3, rtol=1e-4)
    o, lse = ops.flash_attention(q[:, :256], k[:, 1024:], v[:, 1024:], kv_start=1024, return_lse=True)
    if o.float().abs().max().item() != 0 or not torch.isneginf(lse).all():
        fails.append("a chunk wholly after the queries: not 0 / -inf")
    assert not fails, fails


# ------------------------------------------------------------------------------------------- sp_flash_decode
def _cut(total, world, mode, rank):
    """Rank ``rank``'s ``[lo, hi)`` of ``total`` tokens cut into ``world`` contiguous slices: ``even``, ``first``
    (all on rank 0), ``last`` (all on the last rank), ``skew`` (3/4 on rank 0, the rest spread)."""
    if mode == "first":
        bounds = [0] + [total] * world
    elif mode == "last":
        bounds = [0] * world + [total]
    elif mode == "skew" and world > 1:
        head = total * 3 // 4
        rest = total - head
        bounds = [0] + [head + rest * i // (world - 1) for i in range(world)]
    else:
        bounds = [total * i // world for i in range(world + 1)]
    return bounds[rank], bounds[rank + 1]


#: (total length, how it is cut over the ranks) per request: empty everywhere, one token, a long one, ...
SP_BATCH = [(0, "even"), (1, "last"), (8190, "even"), (3000, "skew"), (517, "first"), (64, "even")]


def _sp_inputs(seed, rank, world, batch, page, dtype, dev):
    """``(q, mine, whole)``: the query, this rank's paged slice and the whole sequences' paged cache (for the
    reference), all derived from ``seed`` alike on every rank."""
    lens = [n for n, _ in batch]
    q, kv = _sequences(seed, lens, HKV, D, dtype, dev)
    parts = []
    for (n, mode), (k, v) in zip(batch, kv):
        lo, hi = _cut(n, world, mode, rank)
        parts.append((k[lo:hi], v[lo:hi]))
    return q, _paged(parts, page, 100 * seed + rank), _paged(kv, 16, seed)


def test_sp_flash_decode_against_the_whole_sequence():
    """Page sizes 16 and 64 (and 1 for a short batch), bf16 and fp16 contexts: every rank's result against
    ``flash_decode_reference`` over the concatenated sequence; requests empty on some ranks and on all."""
    from triton_dist import ops
    from triton_dist.ops.attention import flash_decode_reference

    rank, world = _init()
    dev = torch.device("cuda", DEVICE)
    fails = []
    for dtype in (torch.bfloat16, torch.float16):
        ctx = ops.create_sp_decode_ctx(8, HQ, D, dtype)
        try:
            for page, batch in ((16, SP_BATCH), (64, SP_BATCH), (1, [(40, "even"), (0, "even"), (700, "skew")])):
                q, (kc, vc, bt, sl), whole = _sp_inputs(page, rank, world, batch, page, dtype, dev)
                o, lse = ops.sp_flash_decode(q, kc, vc, bt, sl, ctx)
                want_o, want_l = flash_decode_reference(q, *whole)
                tag = f"{dtype} page {page} rank {rank}"
                _check(fails, tag + " out", o, want_o, _tol(dtype))
                _check(fails, tag + " lse", lse, want_l, 2e-3, rtol=1e-4)
        except Exception as exc:  # noqa: BLE001 - recorded; the context is closed on every rank below
            fails.append(f"{dtype}: {type(exc).__name__}: {exc}")
        finally:
            torch.cuda.synchronize()
            ctx.close()
    assert not fails, (rank, fails)


def test_sp_flash_decode_ten_calls_on_one_context():
    """Ten calls on one context (symmetric slots and signals reused), the data, the batch size (6 or 3) and the cuts
    changing every call, ``out=`` on every other call; the epoch counts ten."""
    from triton_dist import ops
    from triton_dist.ops.attention import flash_decode_reference

    rank, world = _init()
    dev = torch.device("cuda", DEVICE)
    dtype = torch.bfloat16
    ctx = ops.create_sp_decode_ctx(8, HQ, D, dtype)
    fails = []
    modes = ("even", "skew", "first", "last")
    try:
        for call in range(10):
            batch = [(n, modes[(call + i) % 4]) for i, (n, _) in enumerate(SP_BATCH)]
            batch = batch if call % 3 else batch[2:5]
            q, (kc, vc, bt, sl), whole = _sp_inputs(50 + call, rank, world, batch, 16, dtype, dev)
            buf = torch.full_like(q, float("nan")) if call % 2 else None
            o, lse = ops.sp_flash_decode(q, kc, vc, bt, sl, ctx, out=buf)
            if buf is not None and o is not buf:
                fails.append(f"call {call}: out= not returned")
            want_o, want_l = flash_decode_reference(q, *whole)
            _check(fails, f"call {call} out", o, want_o, _tol(dtype))
            _check(fails, f"call {call} lse", lse, want_l, 2e-3, rtol=1e-4)
        if ctx.epoch != 10:
            fails.append(f"epoch {ctx.epoch} after ten calls")
    except Exception as exc:  # noqa: BLE001
        fails.append(f"{type(exc).__name__}: {exc}")
    finally:
        torch.cuda.synchronize()
        ctx.close()
    assert not fails, (rank, fails)


def test_sp_flash_decode_graph_replay():
    """One ``sp_flash_decode`` call captured into a CUDA graph on every rank after a warm-up call; three replays with
    new queries, slices, tables and lengths copied into the captured tensors: each matches the reference over the
    whole sequence and an eager call on the same inputs."""
    from triton_dist import ops
    from triton_dist.ops.attention import flash_decode_reference

    rank, world = _init()
    dev = torch.device("cuda", DEVICE)
    dtype, page, B, width = torch.bfloat16, 16, 4, 8192 // 16 + 2
    npages = B * width
    ctx = ops.create_sp_decode_ctx(B, HQ, D, dtype)
    kc = torch.zeros((npages, page, HKV, D), dtype=dtype, device=dev)
    vc = torch.zeros_like(kc)
    q = torch.zeros((B, HQ, D), dtype=dtype, device=dev)
    bt = torch.zeros((B, width), dtype=torch.int32, device=dev)
    sl = torch.zeros((B, ), dtype=torch.int32, device=dev)

    def load(seed, batch):
        qn, kv = _sequences(seed, [n for n, _ in batch], HKV, D, dtype, dev)
        parts = []
        for (n, mode), (k, v) in zip(batch, kv):
            lo, hi = _cut(n, world, mode, rank)
            parts.append((k[lo:hi], v[lo:hi]))
        used = sum(-(-(p[0].shape[0]) // page) for p in parts)
        k2, v2, b2, s2 = _paged(parts, page, seed * 10 + rank, width=width, spare=npages - used)
        for dst, src in ((q, qn), (kc, k2), (vc, v2), (bt, b2), (sl, s2)):
            dst.copy_(src)
        return _paged(kv, 16, seed)

    fails = []
    graph = None
    try:
        load(1, [(100, "even"), (40, "first"), (2000, "skew"), (5, "last")])
        ops.sp_flash_decode(q, kc, vc, bt, sl, ctx)  # warm-up: compiles outside the capture
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            o, lse = ops.sp_flash_decode(q, kc, vc, bt, sl, ctx)
        for seed, batch in ((2, [(0, "even"), (8190, "even"), (1, "last"), (300, "skew")]),
                            (3, [(4096, "first"), (0, "even"), (17, "even"), (8000, "last")])):
            whole = load(seed, batch)
            graph.replay()
            torch.cuda.synchronize()
            got_o, got_l = o.clone(), lse.clone()
            want_o, want_l = flash_decode_reference(q, *whole)
            _check(fails, f"replay seed {seed} out", got_o, want_o, _tol(dtype))
            _check(fails, f"replay seed {seed} lse", got_l, want_l, 2e-3, rtol=1e-4)
            eo, el = ops.sp_flash_decode(q, kc, vc, bt, sl, ctx)
            if not torch.equal(eo, got_o):
                fails.append(f"replay seed {seed}: differs from an eager call")
    except Exception as exc:  # noqa: BLE001
        fails.append(f"{type(exc).__name__}: {exc}")
    finally:
        torch.cuda.synchronize()
        del graph
        ctx.close()
    assert not fails, (rank, fails)


def test_sp_flash_decode_bad_input():
    """Bad arguments: a one-line ValueError naming the problem before any launch, on every rank alike; then a good
    call runs (epoch 1)."""
    from triton_dist import ops

    rank, world = _init()
    dev = torch.device("cuda", DEVICE)
    B, page = 2, 16
    ctx = ops.create_sp_decode_ctx(B, HQ, D, torch.bfloat16)
    bf = torch.bfloat16
    q = torch.randn((B, HQ, D), device=dev).to(bf)
    kc = torch.randn((3, page, HKV, D), device=dev).to(bf)
    vc = torch.randn((3, page, HKV, D), device=dev).to(bf)
    bt = torch.tensor([[0, 1], [2, 0]], dtype=torch.int32, device=dev)
    sl = torch.tensor([20, 5], dtype=torch.int32, device=dev)
    fails = []

    expect = one_line_checker(fails)

    sp = ops.sp_flash_decode
    try:
        expect("batch > max_batch", lambda: sp(torch.zeros((3, HQ, D), dtype=bf, device=dev), kc, vc,
                                               torch.zeros((3, 2), dtype=torch.int32, device=dev),
                                               torch.zeros(3, dtype=torch.int32, device=dev), ctx), "max_batch=2")
        expect("heads", lambda: sp(q[:, :16].contiguous(), kc, vc, bt, sl, ctx), f"num_q_heads={HQ}")
        expect("q dtype", lambda: sp(q.half(), kc.half(), vc.half(), bt, sl, ctx), "context's dtype")
        expect("cache dtype", lambda: sp(q, kc.half(), vc, bt, sl, ctx), "k_cache.dtype")
        expect("cache on the host", lambda: sp(q, kc.cpu(), vc.cpu(), bt, sl, ctx), "")
        expect("seq_lens dtype", lambda: sp(q, kc, vc, bt, sl.long(), ctx), "seq_lens must be int32")
        expect("scale", lambda: sp(q, kc, vc, bt, sl, ctx, scale=float("nan")), "scale")
        expect("out dtype", lambda: sp(q, kc, vc, bt, sl, ctx, out=torch.empty((B, HQ, D), device=dev)),
               "out must be")
        expect("ctx", lambda: sp(q, kc, vc, bt, sl, object()), "create_sp_decode_ctx")
        expect("lengths (check_lens)", lambda: sp(q, kc, vc, bt, torch.tensor([40, 5], dtype=torch.int32,
                                                                             device=dev), ctx, check_lens=True),
               "seq_lens[0]=40")
        expect("ctx head_dim", lambda: ops.create_sp_decode_ctx(2, 4, 96), "head_dim=96")
        o, _ = sp(q, kc, vc, bt, sl, ctx)
        torch.cuda.synchronize()
        if tuple(o.shape) != (B, HQ, D) or not bool(torch.isfinite(o.float()).all()) or ctx.epoch != 1:
            fails.append(f"good call after bad ones: shape {tuple(o.shape)}, epoch {ctx.epoch}")
    finally:
        torch.cuda.synchronize()
        ctx.close()
    expect("closed", lambda: sp(q, kc, vc, bt, sl, ctx), "closed")
    assert not fails, (rank, fails)



# ------------------------------------------------------------------------------------------- Ulysses all-to-alls
#: the realistic shape: batch 1, 4096 tokens per rank, 32 q heads / 8 kv heads of 128, bf16
UL_B, UL_L, UL_HKV = 1, 4096, 8


def _ulysses_global(seed, B, S, H, dev, dtype=torch.bfloat16):
    """A global ``[B, S, H, D]`` tensor, the same on every rank (a CUDA generator seeded alike: Philox, so equal on
    every GPU of the job)."""
    g = torch.Generator(device=dev).manual_seed(seed)
    return torch.randn((B, S, H, D), generator=g, device=dev).to(dtype)


def _ulysses_skip(world):
    if HQ % world or UL_HKV % world:
        pytest.skip(f"Ulysses needs the heads ({HQ} q, {UL_HKV} kv) to divide by the world size {world}")


def test_ulysses_against_torch_slices_and_all_to_all_single():
    """At the realistic shape (B 1, 4096 tokens per rank, 32 q / 8 kv heads of 128, bf16): every rank's
    ``pre_attn_all_to_all`` of q, k (8 heads, the same context) and v (a strided view of a fused qkv tensor) equals
    the head group of the global tensor exactly (a torch slice: no communication in the reference), and equals the
    torch.distributed formulation (all_to_all_single + permutes: NCCL, or gloo on host copies where ranks share a
    GPU); ``post_attn_all_to_all`` gives q back exactly, also through ``out=``; batch 2 as well."""
    from triton_dist import ops
    from triton_dist.ops import attention_ulysses as uly

    rank, world = _init()
    _ulysses_skip(world)
    dev = torch.device("cuda", DEVICE)
    fails = []
    ctx = ops.create_ulysses_ctx(2, UL_L, HQ, D, torch.bfloat16)
    try:
        for B in (UL_B, 2):
            S, Hg, Hkg = world * UL_L, HQ // world, UL_HKV // world
            qkv = _ulysses_global(300 + B, B, S, HQ + 2 * UL_HKV, dev)
            mine = qkv[:, rank * UL_L:(rank + 1) * UL_L]
            q = mine[:, :, :HQ].contiguous()
            k, v = mine[:, :, HQ:HQ + UL_HKV], mine[:, :, HQ + UL_HKV:]  # strided views
            tag = f"B {B} rank {rank}"
            qh = ops.pre_attn_all_to_all(q, ctx)
            kh = ops.pre_attn_all_to_all(k, ctx)
            vh = ops.pre_attn_all_to_all(v, ctx)
            for name, got, lo, n in (("q", qh, 0, Hg), ("k", kh, HQ, Hkg), ("v", vh, HQ + UL_HKV, Hkg)):
                want = qkv[:, :, lo + rank * n:lo + (rank + 1) * n]
                if tuple(got.shape) != tuple(want.shape) or not torch.equal(got, want):
                    fails.append(f"{tag}: pre({name}) differs from the global tensor's head group")
            if not torch.equal(uly.pre_attn_all_to_all_torch(q, ctx.group), qh):
                fails.append(f"{tag}: pre(q) differs from all_to_all_single + permutes")
            back = torch.full_like(q, float("nan"))
            if ops.post_attn_all_to_all(qh, ctx, out=back) is not back or not torch.equal(back, q):
                fails.append(f"{tag}: post(pre(q), out=) is not q")
            if not torch.equal(uly.post_attn_all_to_all_torch(qh, ctx.group), q):
                fails.append(f"{tag}: the torch formulation of post is not q")
    except Exception as exc:  # noqa: BLE001 - recorded; the context is closed on every rank below
        fails.append(f"{type(exc).__name__}: {exc}")
    finally:
        torch.cuda.synchronize()
        ctx.close()
    assert not fails, (rank, fails)


def test_ulysses_ten_calls_and_graph_replay():
    """Ten eager calls on one context (pre q, pre k, pre v, post, ... with new data every round, ``out=`` on every
    other call; the epoch counts them), then one layer's worth of calls (pre q, pre k, post of a head-local
    function of q's result) captured into a CUDA graph after a warm-up, replayed three times with new inputs copied
    into the captured tensors: every replay equals the torch slices of the new global tensors and an eager run."""
    from triton_dist import ops

    rank, world = _init()
    _ulysses_skip(world)
    dev = torch.device("cuda", DEVICE)
    S, Hg, Hkg = world * UL_L, HQ // world, UL_HKV // world
    ctx = ops.create_ulysses_ctx(UL_B, UL_L, HQ, D, torch.bfloat16)
    fails = []
    graph = None
    calls = 0
    try:
        for rnd in range(3):
            gq = _ulysses_global(400 + rnd, UL_B, S, HQ, dev)
            gk = _ulysses_global(500 + rnd, UL_B, S, UL_HKV, dev)
            q, k = gq[:, rank * UL_L:(rank + 1) * UL_L], gk[:, rank * UL_L:(rank + 1) * UL_L]
            for name, x, g, n in (("q", q, gq, Hg), ("k", k, gk, Hkg), ("v", k, gk, Hkg)):
                out = torch.empty((UL_B, S, n, D), dtype=x.dtype, device=dev) if calls % 2 else None
                got = ops.pre_attn_all_to_all(x, ctx, out=out)
                calls += 1
                if not torch.equal(got, g[:, :, rank * n:(rank + 1) * n]):
                    fails.append(f"round {rnd}: pre({name}) differs")
            if rnd < 1:
                got = ops.post_attn_all_to_all(gq[:, :, rank * Hg:(rank + 1) * Hg], ctx)
                calls += 1
                if not torch.equal(got, q):
                    fails.append(f"round {rnd}: post differs")
        torch.cuda.synchronize()
        if ctx.epoch != calls or calls != 10:
            fails.append(f"epoch {ctx.epoch} after {calls} calls")
        xq = torch.zeros((UL_B, UL_L, HQ, D), dtype=torch.bfloat16, device=dev)
        xk = torch.zeros((UL_B, UL_L, UL_HKV, D), dtype=torch.bfloat16, device=dev)

        def layer():
            qh = ops.pre_attn_all_to_all(xq, ctx)
            kh = ops.pre_attn_all_to_all(xk, ctx)
            return qh, kh, ops.post_attn_all_to_all(qh * 2, ctx)

        layer()  # warm-up: compiles outside the capture
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            res = layer()
        for seed in (7, 8, 9):
            gq = _ulysses_global(seed, UL_B, S, HQ, dev)
            gk = _ulysses_global(seed + 50, UL_B, S, UL_HKV, dev)
            xq.copy_(gq[:, rank * UL_L:(rank + 1) * UL_L])
            xk.copy_(gk[:, rank * UL_L:(rank + 1) * UL_L])
            graph.replay()
            torch.cuda.synchronize()
            got = [t.clone() for t in res]
            want = (gq[:, :, rank * Hg:(rank + 1) * Hg], gk[:, :, rank * Hkg:(rank + 1) * Hkg], xq * 2)
            for name, g, w in zip(("pre q", "pre k", "post"), got, want):
                if not torch.equal(g, w):
                    fails.append(f"replay seed {seed}: {name} differs from the torch slices")
            eager = layer()
            if not all(torch.equal(g, e) for g, e in zip(got, eager)):
                fails.append(f"replay seed {seed}: differs from an eager run")
    except Exception as exc:  # noqa: BLE001
        fails.append(f"{type(exc).__name__}: {exc}")
    finally:
        torch.cuda.synchronize()
        del graph
        ctx.close()
    assert not fails, (rank, fails)


def test_ulysses_bad_input():
    """Bad arguments: a one-line ValueError naming the problem before any launch, on every rank alike (heads not
    divisible by the world size included); then a good call runs (epoch 1)."""
    from triton_dist import ops

    rank, world = _init()
    dev = torch.device("cuda", DEVICE)
    bf = torch.bfloat16
    B, L, H = 1, 64, 4 * world
    ctx = ops.create_ulysses_ctx(B, L, H, D, bf)
    x = torch.randn((B, L, H, D), device=dev).to(bf)
    fails = []

    expect = one_line_checker(fails)

    pre, post = ops.pre_attn_all_to_all, ops.post_attn_all_to_all
    try:
        if world > 1:
            expect("heads % world", lambda: pre(torch.zeros((B, L, H + 1, D), dtype=bf, device=dev), ctx),
                   f"world size {world}")
        expect("batch", lambda: pre(torch.zeros((B + 1, L, H, D), dtype=bf, device=dev), ctx), "max_batch")
        expect("tokens", lambda: pre(torch.zeros((B, L + 1, H, D), dtype=bf, device=dev), ctx), "max_seq_per_rank")
        expect("dtype", lambda: pre(x.half(), ctx), "context's dtype")
        expect("on the host", lambda: pre(x.cpu(), ctx), "cuda")
        expect("out", lambda: pre(x, ctx, out=torch.empty_like(x, dtype=torch.float32)), "out must be")
        expect("post heads", lambda: post(torch.zeros((B, world * L, 2 * H, D), dtype=bf, device=dev), ctx),
               "head group")
        got = pre(x, ctx)
        torch.cuda.synchronize()
        if tuple(got.shape) != (B, world * L, H // world, D) or ctx.epoch != 1:
            fails.append(f"good call after bad ones: shape {tuple(got.shape)}, epoch {ctx.epoch}")
    finally:
        torch.cuda.synchronize()
        ctx.close()
    assert not fails, (rank, fails)


# ------------------------------------------------------------------------------------------- sp_ag_attention
SP_L = 2048  # tokens per rank


def _sdpa_rows(q, k, v, q_start, causal):
    """``scaled_dot_product_attention`` of the query rows ``q [B, L, Hq, D]`` at global positions ``q_start + i``
    over ``k, v [B, S, Hkv, D]`` (positions 0 ..; causal: the keys up to each row, through ``causal_lower_right``
    on the visible prefix, which SDPA runs on its flash backend), K/V heads repeated for GQA: ``[B, L, Hq, D]``."""
    F = torch.nn.functional
    G = q.shape[2] // k.shape[2]
    S = q_start + q.shape[1] if causal else k.shape[1]
    q4 = q.transpose(1, 2)
    k4 = k[:, :S].repeat_interleave(G, dim=2).transpose(1, 2)
    v4 = v[:, :S].repeat_interleave(G, dim=2).transpose(1, 2)
    if causal:
        from torch.nn.attention.bias import causal_lower_right

        o = F.scaled_dot_product_attention(q4, k4, v4, attn_mask=causal_lower_right(q.shape[1], S))
    else:
        o = F.scaled_dot_product_attention(q4, k4, v4)
    return o.transpose(1, 2)


def _sp_chunk(seed, rank, world, B, L, Hq, Hkv, dtype, dev):
    """``(q, k, v, K, V)``: this rank's chunk ``[rank * L, (rank + 1) * L)`` of sequences of ``world * L`` tokens
    derived from ``seed`` alike on every rank (so each rank holds the whole K / V for its reference: no NCCL)."""
    qa, ka, va = _qkv(seed, B, world * L, Hq, Hkv, D, dtype, dev)
    lo, hi = rank * L, (rank + 1) * L
    return qa[:, lo:hi].contiguous(), ka[:, lo:hi].contiguous(), va[:, lo:hi].contiguous(), ka, va


def test_sp_ag_attention_against_sdpa_and_fp32():
    """B=1, 2048 tokens per rank, 32 q / 8 kv heads, D 128, bf16, causal and not: every rank's rows against SDPA
    over the whole sequence (flash backend, lower-right causal mask), against ``flash_attention`` over the
    concatenated K/V with ``q_start`` (out within bf16 rounding, lse within fp32), and two heads (0 and 31: K/V
    heads 0 and 7) against an fp32 reference."""
    from triton_dist import ops

    rank, world = _init()
    dev = torch.device("cuda", DEVICE)
    ctx = ops.create_sp_attention_ctx(1, SP_L, HKV, D, torch.bfloat16)
    fails = []
    try:
        for causal in (True, False):
            q, k, v, K, V = _sp_chunk(5 + causal, rank, world, 1, SP_L, HQ, HKV, torch.bfloat16, dev)
            o, lse = ops.sp_ag_attention(q, k, v, ctx, causal=causal, return_lse=True)
            tag = f"{'causal' if causal else 'full'} rank {rank}"
            _check(fails, tag + " vs sdpa", o, _sdpa_rows(q, K, V, rank * SP_L, causal), 3e-2)
            fo, fl = ops.flash_attention(q, K, V, causal=causal, q_start=rank * SP_L, return_lse=True)
            _check(fails, tag + " vs flash_attention", o, fo, 2e-2)
            _check(fails, tag + " lse vs flash_attention", lse, fl, 2e-3, rtol=1e-4)
            if causal:
                heads = [0, HQ - 1]
                wo, wl = _attention_reference(q[:, :, heads], K[:, :, [0, HKV - 1]], V[:, :, [0, HKV - 1]],
                                              q_start=rank * SP_L)
                _check(fails, tag + " vs fp32 (2 heads)", o[:, :, heads], wo, 2e-2)
                _check(fails, tag + " lse vs fp32 (2 heads)", lse[:, heads], wl, 2e-3, rtol=1e-4)
    except Exception as exc:  # noqa: BLE001 - recorded; the context is closed on every rank below
        fails.append(f"{type(exc).__name__}: {exc}")
    finally:
        torch.cuda.synchronize()
        ctx.close()
    assert not fails, (rank, fails)


def test_sp_ag_attention_ten_calls_on_one_context():
    """Ten calls on one context (capacity B=2, 2048 tokens per rank): causal and not alternating, batch 1 or 2,
    chunk lengths 2048, 1000 and 129 (not multiples of the tile), ``out=`` on every other call, strided k / v
    (heads-major storage) on every third; each against SDPA over the whole sequence; the epoch counts ten."""
    from triton_dist import ops

    rank, world = _init()
    dev = torch.device("cuda", DEVICE)
    dtype = torch.bfloat16
    ctx = ops.create_sp_attention_ctx(2, SP_L, HKV, D, dtype)
    fails = []
    try:
        for call in range(10):
            causal = call % 2 == 0
            B, L = (1 + call % 2), (SP_L, 1000, 129)[call % 3]
            q, k, v, K, V = _sp_chunk(40 + call, rank, world, B, L, HQ, HKV, dtype, dev)
            if call % 3 == 1:
                k = k.transpose(1, 2).contiguous().transpose(1, 2)
                v = v.transpose(1, 2).contiguous().transpose(1, 2)
            buf = torch.full_like(q, float("nan")) if call % 2 else None
            o = ops.sp_ag_attention(q, k, v, ctx, causal=causal, out=buf)
            if buf is not None and o is not buf:
                fails.append(f"call {call}: out= not returned")
            _check(fails, f"call {call} (causal {causal}, B {B}, L {L})", o, _sdpa_rows(q, K, V, rank * L, causal),
                   3e-2)
        if ctx.epoch != 10:
            fails.append(f"epoch {ctx.epoch} after ten calls")
    except Exception as exc:  # noqa: BLE001
        fails.append(f"{type(exc).__name__}: {exc}")
    finally:
        torch.cuda.synchronize()
        ctx.close()
    assert not fails, (rank, fails)


def test_sp_ag_attention_graph_replay():
    """One causal call captured into a CUDA graph on every rank after a warm-up call; three replays with new q / k /
    v copied into the captured tensors: each matches SDPA over the whole sequence and an eager call bit for bit."""
    from triton_dist import ops

    rank, world = _init()
    dev = torch.device("cuda", DEVICE)
    dtype, B, L = torch.bfloat16, 1, SP_L
    ctx = ops.create_sp_attention_ctx(B, L, HKV, D, dtype)
    q = torch.zeros((B, L, HQ, D), dtype=dtype, device=dev)
    k = torch.zeros((B, L, HKV, D), dtype=dtype, device=dev)
    v = torch.zeros_like(k)
    fails = []
    graph = None
    try:
        for dst, src in zip((q, k, v), _sp_chunk(1, rank, world, B, L, HQ, HKV, dtype, dev)):
            dst.copy_(src)
        ops.sp_ag_attention(q, k, v, ctx)  # warm-up: compiles outside the capture
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            o = ops.sp_ag_attention(q, k, v, ctx)
        for seed in (2, 3, 4):
            qn, kn, vn, K, V = _sp_chunk(seed, rank, world, B, L, HQ, HKV, dtype, dev)
            for dst, src in ((q, qn), (k, kn), (v, vn)):
                dst.copy_(src)
            graph.replay()
            torch.cuda.synchronize()
            got = o.clone()
            _check(fails, f"replay seed {seed}", got, _sdpa_rows(q, K, V, rank * L, True), 3e-2)
            if not torch.equal(ops.sp_ag_attention(q, k, v, ctx), got):
                fails.append(f"replay seed {seed}: differs from an eager call")
        if ctx.epoch != 7:  # the capture itself runs nothing
            fails.append(f"epoch {ctx.epoch} after the warm-up call, 3 replays and 3 eager calls")
    except Exception as exc:  # noqa: BLE001
        fails.append(f"{type(exc).__name__}: {exc}")
    finally:
        torch.cuda.synchronize()
        del graph
        ctx.close()
    assert not fails, (rank, fails)


def test_sp_ag_attention_bad_input():
    """Bad arguments: a one-line ValueError naming the problem before any launch, on every rank alike; then a good
    call runs (epoch 1)."""
    from triton_dist import ops

    rank, world = _init()
    dev = torch.device("cuda", DEVICE)
    bf = torch.bfloat16
    B, L = 1, 256
    ctx = ops.create_sp_attention_ctx(B, L, HKV, D, bf)
    q = torch.randn((B, L, HQ, D), device=dev).to(bf)
    k = torch.randn((B, L, HKV, D), device=dev).to(bf)
    v = torch.randn((B, L, HKV, D), device=dev).to(bf)
    fails = []

    def expect(what, fn, *needles):
        try:
            fn()
        except ValueError as exc:
            msg = str(exc)
            if "\n" in msg or not all(n in msg for n in needles):
                fails.append(f"{what}: message {msg!r} lacks {needles}")
            return
        except Exception as exc:  # noqa: BLE001
            fails.append(f"{what}: {type(exc).__name__}: {exc}")
            return
        fails.append(f"{what}: no error")

    f = ops.sp_ag_attention
    try:
        expect("batch", lambda: f(q.expand(2, -1, -1, -1), k.expand(2, -1, -1, -1), v.expand(2, -1, -1, -1), ctx),
               "max_batch=1")
        expect("length", lambda: f(torch.cat([q, q], 1), torch.cat([k, k], 1), torch.cat([v, v], 1), ctx),
               f"max_seq_per_rank={L}")
        expect("q / kv lengths", lambda: f(q[:, :100], k, v, ctx), "same length")
        expect("kv heads", lambda: f(q, k[:, :, :4], v[:, :, :4], ctx), f"num_kv_heads={HKV}")
        expect("dtype", lambda: f(q.half(), k.half(), v.half(), ctx), "context's dtype")
        expect("mixed dtypes", lambda: f(q, k.half(), v, ctx), "share a dtype")
        expect("on the host", lambda: f(q, k.cpu(), v.cpu(), ctx), "")
        expect("scale", lambda: f(q, k, v, ctx, scale=0.0), "scale")
        expect("out", lambda: f(q, k, v, ctx, out=torch.empty((B, L, HQ, D), device=dev)), "out must be")
        expect("ctx", lambda: f(q, k, v, object()), "create_sp_attention_ctx")
        expect("ctx head_dim", lambda: ops.create_sp_attention_ctx(1, 16, 1, 96), "head_dim=96")
        expect("ctx programs", lambda: ops.create_sp_attention_ctx(1, 16, 1, 64, programs=4000), "SMs")
        o = f(q, k, v, ctx)
        torch.cuda.synchronize()
        if tuple(o.shape) != (B, L, HQ, D) or not bool(torch.isfinite(o.float()).all()) or ctx.epoch != 1:
            fails.append(f"good call after bad ones: shape {tuple(o.shape)}, epoch {ctx.epoch}")
    finally:
        torch.cuda.synchronize()
        ctx.close()
    expect("closed", lambda: f(q, k, v, ctx), "closed")
    assert not fails, (rank, fails)


# ------------------------------------------------------------------------------------------- layers.SPAttention
LAYER_L = 1024  # tokens per rank


@pytest.mark.parametrize("method", ["ag", "ulysses"])
def test_sp_attention_layer_against_the_torch_references(method):
    """``layers.SPAttention`` at the torchrun world (1024 tokens per rank, 32 q / 8 kv heads, D 128, bf16): prefill
    through ``method`` (causal and not, two calls) against ``sp_attention_prefill_torch`` (K/V gathered with
    torch.distributed, fp32 attention) and against fp32 attention over the whole sequence every rank derives itself;
    decode over slices of every rank (one request empty on rank 0) against ``sp_attention_decode_torch``."""
    from triton_dist.layers import SPAttention, sp_attention_decode_torch, sp_attention_prefill_torch

    rank, world = _init()
    if method == "ulysses" and (HQ % world or HKV % world):
        pytest.skip(f"Ulysses needs {HQ} q and {HKV} kv heads divisible by the world size {world}")
    dev = _device()
    bf = torch.bfloat16
    layer = SPAttention(HQ, HKV, D, max_batch=1, max_seq_per_rank=LAYER_L, prefill_method=method,
                        max_decode_batch=2)
    fails = []
    try:
        for call, causal in enumerate((True, False)):
            qa, ka, va = _qkv(40 + call, 1, world * LAYER_L, HQ, HKV, D, bf, dev)
            lo = rank * LAYER_L
            q, k, v = (t[:, lo:lo + LAYER_L].contiguous() for t in (qa, ka, va))
            got = layer(q, k, v, causal=causal)
            tag = f"{method} {'causal' if causal else 'full'} rank {rank}"
            _check(fails, tag + " vs torch reference", got, sp_attention_prefill_torch(q, k, v, causal=causal), 3e-2)
            heads = [0, HQ - 1]
            if causal:
                want, _ = _attention_reference(q[:, :, heads], ka[:, :, [0, HKV - 1]], va[:, :, [0, HKV - 1]],
                                               q_start=lo)
                _check(fails, tag + " vs fp32 (2 heads)", got[:, :, heads], want, 3e-2)
        g = torch.Generator(device=dev).manual_seed(77)
        qd = torch.randn((2, HQ, D), generator=g, device=dev).to(bf)
        mine = [(torch.randn((0 if rank == 0 else 300, HKV, D), generator=g, device=dev).to(bf),
                 torch.randn((0 if rank == 0 else 300, HKV, D), generator=g, device=dev).to(bf)),
                (torch.randn((513 + rank, HKV, D), generator=g, device=dev).to(bf),
                 torch.randn((513 + rank, HKV, D), generator=g, device=dev).to(bf))]
        kc, vc, bt, sl = _paged(mine, 16, rank)
        out, lse = layer.decode(qd, kc, vc, bt, sl, return_lse=True)
        ref, ref_lse = sp_attention_decode_torch(qd, kc, vc, bt, sl)
        _check(fails, f"decode rank {rank}", out, ref, 2e-2)
        _check(fails, f"decode lse rank {rank}", lse, ref_lse, 2e-3, rtol=1e-4)
    finally:
        layer.close()
    assert not fails, (rank, fails)
