"""GPU tier of the MoE tensor parallelism (``ops.ag_group_gemm`` / ``ops.group_gemm_rs``, ``layers.TPMoE``), run under
torchrun at any world size >= 2 (ranks may share a GPU: ``scripts/launch.sh --ranks-per-gpu auto``)::

    scripts/launch.sh --ranks-per-gpu auto --nproc_per_node 2 -m pytest -q test/python/gpu/test_gpu_moe_tp.py

The simulator tier (test_moe_tp_sim.py) runs the same ops at toy sizes; this one runs the compiled kernels (TMA and
wgmma on Hopper, push programs and reduce programs co-resident with the GEMM programs in one cooperative launch)
at sizes with several tiles per expert and source.

Every rank derives every rank's tokens, routing and weight slices from the same seeds and checks its results
against a torch reference of the whole world computed on the host (no NCCL needed, so it holds where ranks share a
GPU). The ops are checked with *linear* experts (no gate between the GEMMs) whose weights are in {-1, 0, 1} and
tokens small integers: both GEMMs' fp32 sums are exact integers, the top-k weights are eighths (exact products),
and the reference reproduces every documented rounding to the context's dtype and every fp32 addition in the
kernels' order (``h`` and ``y`` per row; each rank's partial summed over the slots in order; the peers' partials
rounded, added to the own one in the order ``rank + 1, rank + 2, ...``; rounded once), so the comparison is
bit-exact: a row sent to the wrong expert, gathered from the wrong token or source, combined with the wrong weight,
or a partial read before it was written fails it. Also the layout itself (expert offsets, the per-(expert, source)
segment ends, each row's pair). Routings: random, every token to the same experts (the other experts get no rows),
only the last experts, top-1 and top-8; bf16 and fp16; weights passed as [E, N, K] through ``.transpose(1, 2)``;
ten calls on one context (signals and buffers reused, ``out=`` buffers on every other call). The layer (SiLU gate)
against ``layers.moe_reference`` and ``layers.tp_moe_torch`` (bf16 tolerance), 0 tokens, a CUDA graph of one
whole ``TPMoE`` forward replayed with new tokens and routings copied into the captured tensors, and bad input
refused with ValueError before any launch.
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
os.environ.setdefault("NVSHMEM_SYMMETRIC_SIZE", "2G")


def _init():
    import torch.distributed as dist

    import triton_dist.utils as tdu

    tdu.initialize_distributed()
    torch.cuda.set_device(DEVICE)
    return dist.get_rank(), dist.get_world_size()


def _routing(g, seed, T, k, E, mode):
    """``[T, k]`` int64 expert ids, ``k`` distinct per token."""
    if mode == "one_expert":  # every token to the same k experts: the others get no rows
        return ((seed + torch.arange(k)) % E).repeat(T, 1)
    if mode == "skewed":  # the last experts only
        m = max(k, E // 4)
        return torch.rand(T, m, generator=g).topk(k, dim=1).indices + (E - m)
    return torch.rand(T, E, generator=g).topk(k, dim=1).indices


def _inputs(seed, world, T, H, k, E, N, dtype, mode):
    """Every rank's ``(x [T, H], idx [T, k], w [T, k])`` on the host, and the full weights ``W1 [E, H, world * N]``
    (rank ``q``'s slice: columns ``[q * N, (q + 1) * N)``) and ``W2 [E, world * N, H]`` (rows ``[q * N, (q + 1) *
    N)``). ids int32 for odd seeds, int64 for even ones."""
    g = torch.Generator().manual_seed(seed)
    ranks = []
    for _ in range(world):
        x = torch.randint(-3, 4, (T, H), generator=g).to(dtype)
        idx = _routing(g, seed, T, k, E, mode).to(torch.int32 if seed % 2 else torch.int64)
        w = torch.randint(1, 9, (T, k), generator=g).float() / 8
        ranks.append((x, idx, w))
    W1 = torch.randint(-1, 2, (E, H, world * N), generator=g).to(dtype)
    W2 = torch.randint(-1, 2, (E, world * N, H), generator=g).to(dtype)
    return ranks, W1, W2


def _per_expert(rows, counts, weights):
    """``rows [n, K] @ weights[e]`` for the consecutive runs of ``counts[e]`` rows (fp32, on the host)."""
    out = torch.empty((rows.shape[0], weights.shape[2]), dtype=torch.float32)
    start = 0
    for e, c in enumerate(counts):
        out[start:start + c] = rows[start:start + c] @ weights[e].float()
        start += c
    return out


def _reference(ranks, W1, W2, N, rank, dtype):
    """The TP layout of all ``world * T`` gathered tokens and this rank's results, as the ops compute them:
    ``(row_pairs, expert_offsets, seg_offsets, h, out)``. ``row_pairs [rows]``: the gathered pair ``g * k + j`` of
    each layout row (a stable sort of the pairs by expert: per expert by source rank, token, slot);
    ``seg_offsets [E * world]``: the cumulative ends of the segments (expert ``e``, source ``s``) at ``e * world +
    s``; ``h [rows, N]`` this rank's first GEMM (rounded to ``dtype``); ``out [T, H]`` its tokens' reduce-scattered
    sums (module docstring)."""
    world = len(ranks)
    T, k = ranks[0][1].shape
    E, H = W1.shape[0], W1.shape[1]
    xs = torch.cat([x for x, _, _ in ranks]).float()
    flat = torch.cat([i.long() for _, i, _ in ranks]).flatten()
    order = torch.sort(flat, stable=True).indices  # row -> pair
    counts = torch.bincount(flat, minlength=E).tolist()
    source = torch.arange(world * T).repeat_interleave(k) // T  # pair -> source rank
    seg = torch.bincount(flat * world + source, minlength=E * world).cumsum(0)
    n = order.numel()
    # the first GEMM of every rank's slice at once (rounding is per element, so slicing after it is the same)
    h_all = _per_expert(xs[order // k], counts, W1).to(dtype)
    ys = []  # y_q [rows, H] of every rank q, rounded to dtype as the op stores it
    for q in range(world):
        ys.append(_per_expert(h_all[:, q * N:(q + 1) * N].float(), counts, W2[:, q * N:(q + 1) * N, :])
                  .to(dtype).float())
    row_of_pair = torch.empty(n, dtype=torch.int64)
    row_of_pair[order] = torch.arange(n)
    mine = row_of_pair.view(world, T, k)[rank]  # the rows of this rank's tokens' slots
    w = ranks[rank][2].float()
    parts = []
    for q in range(world):  # rank q's partial of this rank's tokens: fp32, slots in order, from 0
        acc = torch.zeros((T, H), dtype=torch.float32)
        for j in range(k):
            acc = acc + w[:, j:j + 1] * ys[q][mine[:, j]]
        parts.append(acc)
    out = parts[rank]  # the own partial in fp32, then each peer's rounded to dtype, in the order rank + 1, ...
    for i in range(1, world):
        out = out + parts[(rank + i) % world].to(dtype).float()
    return order, torch.tensor(counts).cumsum(0), seg, h_all[:, rank * N:(rank + 1) * N], out.to(dtype)


def _slice(W, rank, N, dim, transposed):
    """Rank ``rank``'s slice of the full ``W`` along ``dim`` on this GPU, row-major or (``transposed``) as the
    ``[E, N, K]`` tensor's ``.transpose(1, 2)`` view (unit stride along K)."""
    w = W.narrow(dim, rank * N, N).contiguous().cuda()
    return w.transpose(1, 2).contiguous().transpose(1, 2) if transposed else w


def _check_ops(ctx, rank, world, ranks, W1, W2, N, tag, transposed=False, outs=None):
    """One ``ag_group_gemm`` + ``group_gemm_rs`` call (``h`` passed on as ``a``: linear experts) checked bit for bit
    against :func:`_reference`; returns the failures."""
    from triton_dist import ops

    fails = []
    dtype = ctx.dtype
    x, idx, w = (t.cuda() for t in ranks[rank])
    w1 = _slice(W1, rank, N, 2, transposed)
    w2 = _slice(W2, rank, N, 1, transposed)
    h_out, o_out = outs if outs is not None else (None, None)
    h, offsets, handle = ops.ag_group_gemm(x, idx, w, w1, ctx, out=h_out)
    out = ops.group_gemm_rs(h, w2, handle, ctx, out=o_out)
    order, ref_offs, seg, ref_h, want = _reference(ranks, W1, W2, N, rank, dtype)
    if outs is not None and (h is not h_out or out is not o_out):
        fails.append(f"{tag}: out= buffers not returned")
    if offsets.tolist() != ref_offs.tolist():
        return fails + [f"{tag}: expert_offsets {offsets.tolist()} != {ref_offs.tolist()}"]
    if handle.seg_offsets.tolist() != seg.tolist():
        return fails + [f"{tag}: seg_offsets differ from the (expert, source) segment ends"]
    if not torch.equal(handle.row_pairs.cpu().long(), order):
        fails.append(f"{tag}: row_pairs differ from the stable per-expert order of the gathered pairs")
    n = order.numel()
    if tuple(h.shape) != (n, N) or not torch.equal(h.cpu(), ref_h):
        bad = int((h.cpu() != ref_h).any(1).sum()) if tuple(h.shape) == (n, N) else "shape"
        fails.append(f"{tag}: h differs from x_g @ w[e] in {bad} of {n} rows")
    T, H = x.shape
    if tuple(out.shape) != (T, H) or not torch.equal(out.cpu(), want):
        err = (out.cpu().float() - want.float()).abs().max().item() if tuple(out.shape) == (T, H) else "shape"
        fails.append(f"{tag}: group_gemm_rs output differs (max err {err})")
    return fails


# (E, k, H, N, T, dtype, mode): top-4 random and to one set of experts, top-1, top-8, fp16 on the last experts
CASES = [(16, 4, 256, 128, 64, "bfloat16", "random"), (16, 4, 256, 128, 64, "bfloat16", "one_expert"),
         (16, 1, 256, 128, 64, "bfloat16", "random"), (16, 8, 256, 128, 64, "bfloat16", "random"),
         (8, 2, 64, 64, 32, "float16", "skewed")]


@pytest.mark.parametrize("E,k,H,N,T,dtname,mode", CASES)
def test_ag_group_gemm_and_group_gemm_rs_exact(E, k, H, N, T, dtname, mode):
    """Three calls per context (T below the context's max_tokens), the second with both weights transposed."""
    from triton_dist import ops

    rank, world = _init()
    dtype = getattr(torch, dtname)
    ctx = ops.create_tp_moe_ctx(T + 16, H, k, E, dtype)
    fails = []
    try:
        for call in range(3):
            ranks, W1, W2 = _inputs(10 * call + k, world, T, H, k, E, N, dtype, mode)
            fails += _check_ops(ctx, rank, world, ranks, W1, W2, N, f"{mode} call {call}", transposed=call == 1)
    finally:
        torch.cuda.synchronize()
        ctx.close()
    assert not fails, (rank, fails)


def test_ten_calls_on_one_context():
    """Ten calls on one context (every signal, the gathered tokens' and the stage's buffers reused; T equal to
    max_tokens), routings changing from call to call, weights transposed on some calls, ``out=`` buffers on every
    other call; then the epoch counters of both ops count ten launches and the per-source tile counts are zero."""
    from triton_dist import ops

    rank, world = _init()
    E, k, H, N, T = 16, 4, 256, 128, 64
    dtype = torch.bfloat16
    ctx = ops.create_tp_moe_ctx(T, H, k, E, dtype)
    outs = (torch.empty((world * T * k, N), dtype=dtype, device="cuda"), torch.empty((T, H), dtype=dtype,
                                                                                      device="cuda"))
    modes = ("random", "one_expert", "skewed")
    fails = []
    try:
        for call in range(10):
            ranks, W1, W2 = _inputs(100 + call, world, T, H, k, E, N, dtype, modes[call % 3])
            fails += _check_ops(ctx, rank, world, ranks, W1, W2, N, f"call {call} {modes[call % 3]}",
                                transposed=call % 4 == 3, outs=outs if call % 2 else None)
        torch.cuda.synchronize()
        if ctx.epoch != 10 or int(ctx.rs_counter[0]) != 10:
            fails.append(f"epochs after 10 calls: ag_group_gemm {ctx.epoch}, group_gemm_rs {int(ctx.rs_counter[0])}")
        if bool(ctx.done.any()):
            fails.append(f"per-source tile counts not reset: {ctx.done.tolist()}")
    finally:
        torch.cuda.synchronize()
        ctx.close()
    assert not fails, (rank, fails)


def _layer_weights(E, H, inter):
    g = torch.Generator().manual_seed(5)
    w_gate_up = (torch.randn((E, H, 2 * inter), generator=g) / 16).to(torch.bfloat16).cuda()
    w_down = (torch.randn((E, inter, H), generator=g) / 16).to(torch.bfloat16).cuda()
    return w_gate_up, w_down


def _layer_inputs(seed, rank, T, H, k, E, mode="random"):
    """Rank ``rank``'s ``(x bf16 in quarters, idx, w)`` for ``seed`` on the host."""
    g = torch.Generator().manual_seed(seed * 1009 + rank)
    x = (torch.randint(-4, 5, (T, H), generator=g) / 4).to(torch.bfloat16)
    idx = _routing(g, seed, T, k, E, mode).to(torch.int32 if seed % 2 else torch.int64)
    w = torch.randint(1, 9, (T, k), generator=g).float() / 8
    return x, idx, w


def _close(a, b):
    return a.shape == b.shape and bool(torch.allclose(a.float(), b.float(), rtol=2e-2, atol=2e-2))


def _max_err(a, b):
    return (a.float() - b.float()).abs().max().item() if a.shape == b.shape and a.numel() else "shape"


def test_tp_layer_matches_the_references():
    """``layers.TPMoE`` (bf16, SiLU-gated experts) against the per-expert fp32 reference of the whole layer
    (``moe_reference``, full weights) and the plain torch TP layer (``tp_moe_torch``: all-gather, per-expert
    GEMMs, reduce-scatter; NCCL, or gloo where ranks share a GPU); ``tp_moe_forward`` on the same slices gives
    the module's bits; then 0 tokens on every rank, and a call after it."""
    from triton_dist.layers import TPMoE, moe_reference, tp_moe_forward, tp_moe_slices, tp_moe_torch

    rank, world = _init()
    E, k, H, inter, T = 16, 4, 512, 256, 48
    w_gate_up, w_down = _layer_weights(E, H, inter)
    layer = TPMoE(H, inter, E, k, T, torch.bfloat16).load_full_weights(w_gate_up, w_down)
    gu, down = tp_moe_slices(w_gate_up, w_down, rank, world)
    fails = []
    try:
        for seed, mode in ((1, "random"), (2, "one_expert"), (3, "skewed")):
            x, idx, w = (t.cuda() for t in _layer_inputs(seed, rank, T, H, k, E, mode))
            y = layer(x, idx, w)
            ref = moe_reference(x, idx, w, w_gate_up, w_down)
            base = tp_moe_torch(x, idx, w, gu, down)
            if not _close(y, ref):
                fails.append(f"seed {seed}: TPMoE vs moe_reference max err {_max_err(y, ref)}")
            if not _close(base, ref):
                fails.append(f"seed {seed}: tp_moe_torch vs moe_reference max err {_max_err(base, ref)}")
            if not _close(y, base):
                fails.append(f"seed {seed}: TPMoE vs tp_moe_torch max err {_max_err(y, base)}")
            y2 = tp_moe_forward(x, idx, w, gu, down, layer.ctx)
            if not torch.equal(y2, y):
                fails.append(f"seed {seed}: tp_moe_forward differs from the module")
        empty = torch.empty((0, H), dtype=torch.bfloat16, device="cuda")
        y0 = layer(empty, torch.empty((0, k), dtype=torch.int64, device="cuda"), torch.empty((0, k), device="cuda"))
        if tuple(y0.shape) != (0, H):
            fails.append(f"0 tokens: shape {tuple(y0.shape)}")
        x, idx, w = (t.cuda() for t in _layer_inputs(4, rank, T, H, k, E))
        y = layer(x, idx, w)
        ref = moe_reference(x, idx, w, w_gate_up, w_down)
        if not _close(y, ref):
            fails.append(f"after the empty call: max err {_max_err(y, ref)}")
    finally:
        torch.cuda.synchronize()
        layer.close()
    assert not fails, (rank, fails)


def test_graph_replay_of_the_layer_follows_new_inputs():
    """One whole ``TPMoE`` forward (routing all-gather, the layout's routing kernels, ag_group_gemm, the SiLU gate,
    group_gemm_rs) captured into a CUDA graph after one warm-up call, replayed three times with new tokens, routings
    and weights copied into the captured tensors (nothing read on the host): every replay matches the reference, and
    equals an eager call of the module on the same inputs bit for bit."""
    from triton_dist.layers import TPMoE, moe_reference

    rank, world = _init()
    E, k, H, inter, T = 16, 4, 512, 256, 64
    w_gate_up, w_down = _layer_weights(E, H, inter)
    layer = TPMoE(H, inter, E, k, T, torch.bfloat16).load_full_weights(w_gate_up, w_down)
    x = torch.zeros((T, H), dtype=torch.bfloat16, device="cuda")
    idx = torch.zeros((T, k), dtype=torch.int64, device="cuda")
    w = torch.zeros((T, k), dtype=torch.float32, device="cuda")

    def load(seed, mode="random"):
        xr, ir, wr = _layer_inputs(seed, rank, T, H, k, E, mode)
        x.copy_(xr)
        idx.copy_(ir.long())
        w.copy_(wr)

    fails = []
    try:
        load(100)
        layer(x, idx, w)  # warm-up: compiles and loads every kernel outside the capture
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            y = layer(x, idx, w)
        for seed, mode in ((101, "random"), (102, "one_expert"), (103, "skewed")):
            load(seed, mode)
            graph.replay()
            torch.cuda.synchronize()
            got = y.clone()
            ref = moe_reference(x, idx, w, w_gate_up, w_down)
            if not _close(got, ref):
                fails.append(f"replay seed {seed}: max err {_max_err(got, ref)} against moe_reference")
            eager = layer(x, idx, w)
            if not torch.equal(got, eager):
                fails.append(f"replay seed {seed}: differs from an eager call (max err {_max_err(got, eager)})")
    finally:
        torch.cuda.synchronize()
        layer.close()
    assert not fails, (rank, fails)


def test_bad_input_is_refused_before_any_launch():
    """Every bad argument gets a one-line ValueError before any launch, on every rank alike (nobody is left
    waiting), naming what is wrong; a good call still runs after them (and gives ``world * k * H * N`` everywhere
    with all-ones operands)."""
    from triton_dist import ops

    rank, world = _init()
    E, k, H, N, T = 4, 2, 16, 16, 3
    bf16 = torch.bfloat16
    ctx = ops.create_tp_moe_ctx(T, H, k, E, bf16)
    x = torch.ones((T, H), dtype=bf16, device="cuda")
    idx = torch.zeros((T, k), dtype=torch.int64, device="cuda")
    w = torch.ones((T, k), device="cuda")
    w1 = torch.ones((E, H, N), dtype=bf16, device="cuda")
    w2 = torch.ones((E, N, H), dtype=bf16, device="cuda")
    fails = []

    expect = one_line_checker(fails)

    try:
        bad_idx = idx.clone()
        bad_idx[1, 1] = E
        expect("id out of range", lambda: ops.ag_group_gemm(x, bad_idx, w, w1, ctx), "rank 0's topk_idx[1, 1]=4",
               "[0, 4)")
        if world > 1:  # one rank's bad id: every rank raises (checked once gathered), nobody is left waiting
            one_bad = bad_idx if rank == world - 1 else idx
            expect("one rank's id out of range", lambda: ops.ag_group_gemm(x, one_bad, w, w1, ctx),
                   f"rank {world - 1}'s topk_idx[1, 1]=4")
        expect("too many tokens", lambda: ops.ag_group_gemm(torch.ones((T + 1, H), dtype=bf16, device="cuda"),
                                                             torch.zeros((T + 1, k), dtype=torch.int64, device="cuda"),
                                                             torch.ones((T + 1, k), device="cuda"), w1, ctx),
               "max_tokens=3")
        expect("dtype", lambda: ops.ag_group_gemm(x.float(), idx, w, w1, ctx), "dtype")
        expect("hidden", lambda: ops.ag_group_gemm(torch.ones((T, 32), dtype=bf16, device="cuda"), idx, w, w1, ctx),
               "hidden=16")
        expect("topk", lambda: ops.ag_group_gemm(x, idx[:, :1].contiguous(), w[:, :1].contiguous(), w1, ctx),
               "topk=2")
        expect("x on the host", lambda: ops.ag_group_gemm(x.cpu(), idx.cpu(), w.cpu(), w1, ctx), "x is on")
        expect("w on the host", lambda: ops.ag_group_gemm(x, idx, w, w1.cpu(), ctx), "w is on")
        expect("w experts", lambda: ops.ag_group_gemm(x, idx, w, w1[:2], ctx), "[4, 16, N]")
        expect("w dtype", lambda: ops.ag_group_gemm(x, idx, w, w1.half(), ctx), "w.dtype")
        expect("w alignment", lambda: ops.ag_group_gemm(x, idx, w, torch.ones((E, H, 5), dtype=bf16, device="cuda"),
                                                         ctx), "multiples of 8")
        expect("ctx", lambda: ops.ag_group_gemm(x, idx, w, w1, object()), "create_tp_moe_ctx")
        h, _, handle = ops.ag_group_gemm(x, idx, w, w1, ctx)
        expect("a rows", lambda: ops.group_gemm_rs(h[:-1], w2, handle, ctx), f"[{world * T * k}, K]")
        expect("w2 N", lambda: ops.group_gemm_rs(h, torch.ones((E, N, 32), dtype=bf16, device="cuda"), handle, ctx),
               "hidden=16")
        expect("w2 K", lambda: ops.group_gemm_rs(h, torch.ones((E, 32, H), dtype=bf16, device="cuda"), handle, ctx),
               f"[{E}, {N}, N]")
        expect("handle", lambda: ops.group_gemm_rs(h, w2, object(), ctx), "TPMoEHandle")
        expect("out", lambda: ops.group_gemm_rs(h, w2, handle, ctx, out=torch.empty((T, H), device="cuda")),
               "out.dtype")
        y = ops.group_gemm_rs(h, w2, handle, ctx)  # the good call still runs after the refused ones
        torch.cuda.synchronize()
        if tuple(y.shape) != (T, H) or not bool((y.float() == world * k * H * N).all()):
            fails.append(f"good call after bad ones: {tuple(y.shape)} {y.float().unique().tolist()}")
        expect("creation", lambda: ops.create_tp_moe_ctx(0, H, k, E), "max_tokens=0")
        expect("programs", lambda: ops.create_tp_moe_ctx(T, H, k, E, reduce_programs=0), "reduce_programs=0")
        expect("ctx dtype", lambda: ops.create_tp_moe_ctx(T, H, k, E, torch.float32), "dtype")
    finally:
        torch.cuda.synchronize()
        ctx.close()
    expect("closed", lambda: ops.ag_group_gemm(x, idx, w, w1, ctx), "closed")
    assert not fails, (rank, fails)
