"""GPU tier: the overlapped GEMMs (AG+GEMM, GEMM+RS, GEMM+AR), the Triton GEMM and TPMLP on real GPUs, at any
world size >= 2 (TP=2 and TP=4 tested; ranks may share a GPU).

    torchrun --nproc_per_node 2 -m pytest -q test/python/gpu/test_gpu_overlap.py

Every rank runs the same tests in the same order (the ops are collective). Inputs are multiples of 1/4 in [-1, 1]
(``_q``), so every product and every fp32 partial sum below 2**20 is exact: a reference computed in fp32 is the
exact result, and the error of a bf16/fp16 output is rounding alone.

* AG+GEMM (one GEMM, no reduction over ranks): compared with the op's ``torch`` path (all-gather + cuBLAS) on the
  same inputs.
* GEMM+RS / GEMM+AR (a sum over ranks): compared with the exact fp32 reference ``sum_r A_r.float() @ B_r.float()``
  (fp32 partials and their magnitudes summed over the ranks: exact whatever the order). The fused GEMM+AR adds fp32 partials and rounds once, so it
  must be within one rounding of it: ``|out - ref| <= u * |ref|``, ``u = 2**-8`` (bf16's unit roundoff). The
  ``torch`` path rounds each rank's partial to bf16 (cuBLAS output) and then NCCL adds in bf16, rounding again:
  its bound is ``(u + gamma_{W-1} * (1 + u)) * sum_r |P_r|`` (``gamma_n = n u / (1 - n u)``), which with
  cancellation between ranks is far above ``u * |ref|`` -- why the 2026-11-30 tests, which compared fused against
  torch with a relative tolerance, failed while fused was exact. GEMM+RS's methods (fused included: its peers push
  bf16 partial tiles) round each peer's partial once and the sum once, within that same bound. Each test prints how
  both paths did.

torch.distributed on CUDA tensors goes through ``runtime.torch_collectives``: NCCL, or -- where ranks share a GPU (a
gloo-only process group) -- gloo on host copies (the ``torch`` methods too, eagerly: fp32 sums rounded once, within
the bound above). Only triton_dist methods are captured into CUDA graphs here.
"""
from __future__ import annotations

import contextlib
import os

import pytest
import torch

pytestmark = pytest.mark.gpu

os.environ.setdefault("NVSHMEM_DISABLE_NVLS", "1")
os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
os.environ.setdefault("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1")
os.environ.setdefault("NVSHMEM_SYMMETRIC_SIZE", "8G")


def _init():
    import torch.distributed as dist

    import triton_dist.utils as tdu

    tdu.initialize_distributed()
    return dist.get_rank(), dist.get_world_size()


def _q(shape, dtype, seed):
    g = torch.Generator(device="cuda").manual_seed(seed)
    return (torch.randint(-4, 5, shape, device="cuda", generator=g).float() / 4).to(dtype)


def _assert_close(got, ref, what, rtol=2.0 ** -8):
    diff = (got.float() - ref.float()).abs()
    bad = diff > rtol * ref.float().abs() + 1e-6
    assert not bool(bad.any()), f"{what}: {int(bad.sum())} elements off, max err {diff.max().item()}"


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_gemm_matches_cublas(dtype):
    from triton_dist.ops.gemm import matmul

    _init()
    for (M, N, K) in ((8192, 8192, 8192), (1000, 4104, 520), (64, 14336, 4096)):
        a, b = _q((M, K), dtype, M), _q((K, N), dtype, N)
        _assert_close(matmul(a, b), (a.float() @ b.float()), f"matmul {M}x{N}x{K}")
        _assert_close(matmul(a, b, autotune=False), (a.float() @ b.float()), f"matmul fixed {M}x{N}x{K}")


def test_gemm_table_entries_run_and_match():
    """Every entry of the measured GEMM table for this GPU (kernels/gemm_table.json) is what ``matmul`` launches at
    its shape, and its result matches the fp32 reference (the bench measured these launches; this checks them)."""
    from triton_dist.kernels import gemm_config as gc
    from triton_dist.kernels import gemm_table as gt
    from triton_dist.ops.gemm import matmul

    _init()
    dev = torch.cuda.get_device_name()
    entries = [(key[1:], var) for key, var in gt.load_gemm_table().items() if key[0] == dev]
    if not entries:
        pytest.skip(f"the GEMM table has no entry for {dev!r}")
    for (dt, M, N, K), var in entries:
        dtype = getattr(torch, dt)
        a, b = _q((M, K), dtype, M + 1), _q((K, N), dtype, N + 2)
        out = torch.empty((M, N), dtype=dtype, device="cuda")
        kind, what = gt.select_matmul_launch(M, N, K, dtype, dev, use_tma=gc.use_tma_for(a.device),
                                             num_sms=gc.num_sms(a.device), tma_store_ok=gc.tma_store_ok(out))
        assert (kind, what) == ("table", var), (M, N, K, kind, what)
        _assert_close(matmul(a, b, out=out), a.float() @ b.float(), f"table entry {var} at {M}x{N}x{K}")


def _ag_gemm_matches_torch(m_loc, k, n, calls):
    """Consecutive calls on one context (epochs), fresh data each time: ``ag_gemm(**calls[i])`` against its torch
    path (all-gather + cuBLAS) on the same inputs."""
    import torch.distributed as dist

    from triton_dist.ops.overlap import ag_gemm, create_ag_gemm_context

    rank, W = _init()
    ctx = create_ag_gemm_context(m_loc, k, torch.bfloat16)
    try:
        for call, kw in enumerate(calls):
            a = _q((m_loc, k), torch.bfloat16, 100 * call + rank)
            b = _q((k, n), torch.bfloat16, 7 + call)
            kw = dict(kw)
            if kw.pop("_fallbacks", False):  # wait kernels and copy-engine raises instead of stream memory operations
                memops = (ctx.memops_wait, ctx.memops_remote)
                ctx.memops_wait = ctx.memops_remote = False
                try:
                    c = ag_gemm(a, b, ctx, **kw)
                finally:
                    ctx.memops_wait, ctx.memops_remote = memops
            else:
                c = ag_gemm(a, b, ctx, **kw)
            ref = ag_gemm(a, b, ctx, method="torch")
            torch.cuda.synchronize()
            _assert_close(c, ref, f"ag_gemm {kw} call {call}", rtol=2.0 ** -7)
        dist.barrier()
    finally:
        ctx.close()


@pytest.mark.parametrize("method", ["sm", "ce", "chunked"])
@pytest.mark.parametrize("m_loc,k,n", [(4096, 8192, 14336), (64, 4096, 7168), (1000, 1024, 1032)])
def test_ag_gemm(method, m_loc, k, n):
    _ag_gemm_matches_torch(m_loc, k, n, [{"method": method}] * 3)


@pytest.mark.parametrize("method", ["ce", "sm"])
@pytest.mark.parametrize("m_loc,k,n", [(1024, 4096, 7168), (1000, 1024, 1032)])
def test_ag_gemm_flattened_tiling(method, m_loc, k, n, monkeypatch):
    """The AG+GEMM kernel with its tile and K loops fused (a tiling with the ``f`` suffix, as the sweep may store
    in the table) gives torch's result; the waits for the peers' chunks stay inside the fused loop."""
    monkeypatch.setenv("TRITON_DIST_OVERLAP_CONFIG", "128x128x64x4x4f")
    _ag_gemm_matches_torch(m_loc, k, n, [{"method": method}] * 3)


@pytest.mark.parametrize("m_loc,k,n", [(4096, 8192, 14336), (1000, 1024, 1032)])
def test_ag_gemm_chunked_first_rows(m_loc, k, n):
    """``chunked`` with a local slice first: the rest of the shard is copied into the gathered buffer and joins the
    neighbouring chunk in one cuBLAS call; every split point (one row, a quarter, all but one) gives torch's result."""
    _ag_gemm_matches_torch(m_loc, k, n, [{"method": "chunked", "first_rows": f}
                                         for f in (1, m_loc // 4, m_loc - 1, m_loc // 4)])


@pytest.mark.parametrize("m_loc,k,n", [(1024, 4096, 7168), (1000, 1024, 1032)])
def test_ag_gemm_methods_interleaved_on_one_context(m_loc, k, n):
    """Every method on one context in turn (chunked has its own buffer and 0/1 flags, ce / sm share the epoch
    signals), and chunked with its fallbacks (wait kernels, copy-engine flag raises): each call gives torch's result."""
    from triton_dist.ops.overlap import create_ag_gemm_context

    _init()
    probe = create_ag_gemm_context(8, 64, torch.bfloat16)
    remote = probe.memops_remote
    probe.close()
    print(f"stream write-value into a peer's memory: {'yes' if remote else 'no (copy-engine raises)'}")
    _ag_gemm_matches_torch(m_loc, k, n, [{"method": "chunked"}, {"method": "ce"}, {"method": "chunked"},
                                         {"method": "sm"}, {"method": "chunked", "first_rows": m_loc // 4},
                                         {"method": "chunked", "_fallbacks": True}, {"method": "ce"},
                                         {"method": "chunked"}])


@pytest.mark.parametrize("rows,n,k,pieces", [(1024, 4096, 3584, 2), (1000, 1032, 520, 3), (64, 4096, 3584, 4)])
def test_ce_own_gemm_adds_the_raised_pieces_and_zeroes_the_flags(rows, n, k, pieces):
    """gemm_rs ``ce``'s own-rows kernel on one GPU, its peer simulated: the peer's partial is in the staging and all
    its piece flags are raised; the kernel (autotuned, FLATTEN on or off) returns ``A @ B + partial`` rounded once,
    and its last program zeroes the flags and the count."""
    import types

    from triton_dist.ops import overlap as ov

    _init()
    W, rank = 2, 0
    a, b = _q((rows, k), torch.bfloat16, 1), _q((k, n), torch.bfloat16, 2)
    cap = rows * n
    stage = torch.zeros(W * cap, dtype=torch.bfloat16, device="cuda")
    stage[cap:] = _q((rows, n), torch.bfloat16, 3).reshape(-1)
    from triton_dist.kernels import gemm_config as gc

    def use_tma():
        tma = gc.use_tma_for(a.device)
        if tma:
            gc.ensure_tma_allocator()
        return tma

    ctx = types.SimpleNamespace(world_size=W, rank=rank, device=a.device, num_sms=gc.num_sms(a.device), _ce_tuned=set(),
                                ce_count=torch.zeros(1, dtype=torch.int64, device="cuda"), _use_tma=use_tma)
    for call in range(2):  # the first call tunes on scratch flags, the second runs on the tuned tiling directly
        flags = torch.zeros(W * ov.CE_PIECES_MAX, dtype=torch.int64, device="cuda")
        flags[ov.CE_PIECES_MAX:ov.CE_PIECES_MAX + pieces] = 1  # peer 1 raised its pieces
        out = torch.empty(rows, n, dtype=torch.bfloat16, device="cuda")
        ov._rs_own_gemm(ctx, a, b, out, stage, flags, cap, pieces)
        torch.cuda.synchronize()
        ref = a.float() @ b.float() + stage[cap:].float().view(rows, n)
        _rounding_check(out, ref, U_BF16 * ref.abs(), f"ce own gemm {rows}x{n}x{k} pieces={pieces} call {call}")
        assert int(flags.abs().sum()) == 0 and int(ctx.ce_count.item()) == 0, (flags.tolist(), ctx.ce_count.item())


def test_stream_wait_value_orders_work_without_an_sm():
    """runtime.stream_ops: a copy enqueued after a wait-value runs only once another stream has written the value
    (that stream first sleeps on the GPU and snapshots the destination); supported on this machine (CUDA >= 12
    driver). The writer is enqueued first: the driver may serve both streams from one hardware queue in enqueue
    order, and a wait enqueued ahead of the write it needs would never be satisfied (the ops rely on that order)."""
    from triton_dist.runtime import stream_ops

    _init()
    assert stream_ops.supported(torch.device("cuda", torch.cuda.current_device())), \
        "stream memory operations unavailable: gemm_rs chunked falls back to wait kernels"
    word = torch.zeros(1, dtype=torch.int64, device="cuda")
    x = torch.arange(1 << 20, dtype=torch.float32, device="cuda")
    y = torch.zeros_like(x)
    s1, s2 = torch.cuda.Stream(), torch.cuda.Stream()
    torch.cuda.synchronize()
    with torch.cuda.stream(s2):
        torch.cuda._sleep(50_000_000)  # tens of ms
        z = y.clone()  # y before the value is written
    stream_ops.write_value64(s2, word, 5)
    stream_ops.wait_value64(s1, word, 5, "eq")
    with torch.cuda.stream(s1):
        y.copy_(x)
    torch.cuda.synchronize()
    assert bool((z == 0).all()), "the copy ran before the value was written"
    assert torch.equal(y, x) and int(word.item()) == 5


def test_ag_gemm_fp8():
    from triton_dist.ops.overlap import ag_gemm, create_ag_gemm_context

    rank, W = _init()
    f8 = torch.float8_e4m3fn
    ctx = create_ag_gemm_context(512, 1024, f8)
    try:
        for method in ("sm", "ce"):
            a = _q((512, 1024), torch.float32, rank).to(f8)
            b = _q((1024, 2048), torch.float32, 5).to(f8)
            c = ag_gemm(a, b, ctx, scale_a=0.5, scale_b=torch.tensor([2.0], device="cuda"), method=method)
            ref = ag_gemm(a, b, ctx, scale_a=0.5, scale_b=2.0, method="torch")
            _assert_close(c, ref, f"fp8 {method}", rtol=2.0 ** -7)
    finally:
        ctx.close()


U_BF16 = 2.0 ** -8  # unit roundoff of bf16 (8 significant bits): round-to-nearest error <= U * |x|


def _exact_partials_reference(a, b):
    """``(sum_r P_r, sum_r |P_r|)`` in fp32 with ``P_r = A_r.float() @ B_r.float()`` (exact for ``_q`` inputs;
    TF32 off), each summed over the ranks by an fp32 all-reduce (``runtime.torch_collectives``: NCCL, or gloo on
    host copies). Exact in any order: every ``P_r`` entry is a multiple of 1/16 below 2**13 in magnitude, so every
    partial sum over <= 8 ranks fits fp32's 24 bits."""
    from triton_dist.runtime import torch_collectives as tc

    tf32 = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    try:
        p = a.float() @ b.float()
    finally:
        torch.backends.cuda.matmul.allow_tf32 = tf32
    mag = tc.all_reduce(p.abs())
    ref = tc.all_reduce(p)
    return ref, mag


def _rounding_check(got, ref, bound, what):
    """Assert ``|got - ref| <= bound`` elementwise; returns ``(elements beyond one rounding, max |err|)``."""
    err = (got.float() - ref).abs()
    bad = err > bound
    assert not bool(bad.any()), (f"{what}: {int(bad.sum())} of {err.numel()} elements beyond the bound, max err "
                                 f"{err.max().item()} (e.g. got {got.float()[bad][:3].tolist()}, exact "
                                 f"{ref[bad][:3].tolist()})")
    return int((err > U_BF16 * ref.abs()).sum()), err.max().item()


def _assert_same_on_every_rank(t, what):
    """Assert that ``t`` is bit-identical on every rank (its bytes all-gathered: ``runtime.torch_collectives``)."""
    import torch.distributed as dist

    from triton_dist.runtime import torch_collectives as tc

    mine = t.contiguous()
    gathered = torch.empty((dist.get_world_size(), *mine.shape), dtype=mine.dtype, device=mine.device)
    tc.all_gather_into_tensor(gathered, mine)
    gathered = gathered.view(torch.uint8) if mine.element_size() == 1 else gathered
    assert all(torch.equal(g, gathered[0]) for g in gathered), f"{what}: ranks differ"


@contextlib.contextmanager
def _cublas_fp32_reduction():
    """cuBLAS bf16 GEMMs with fp32 split-K reductions (no reduced-precision reduction), so the ``torch`` path rounds
    each rank's partial exactly once, as its bound assumes."""
    flag = torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction
    torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = flag


def _torch_bound(ref, mag, world):
    gamma = (world - 1) * U_BF16 / (1 - (world - 1) * U_BF16)
    return (U_BF16 + gamma * (1 + U_BF16)) * mag


# (m, k_loc, n): two large shapes at tile multiples, and two whose every dimension is off the tile sizes
PARTIAL_SHAPES = [(8192, 7168, 8192), (8192, 3584, 4096), (1000, 520, 1032), (1998, 1000, 1000)]


@pytest.mark.parametrize("m,k_loc,n", PARTIAL_SHAPES)
def test_gemm_rs(m, k_loc, n):
    from triton_dist.ops.overlap import create_gemm_rs_context, gemm_rs

    rank, W = _init()
    m = m - m % W
    rows = m // W
    ctx = create_gemm_rs_context(m, n, torch.bfloat16)
    try:
        for call in range(3):  # consecutive calls on one context, fresh data each time
            a = _q((m, k_loc), torch.bfloat16, 10 * call + rank)
            b = _q((k_loc, n), torch.bfloat16, 20 * call + rank)
            out = gemm_rs(a, b, ctx, method="fused")
            # peer tiles streamed during the next main loop: one piece, and a count the table may pick
            streamed = {p: gemm_rs(a, b, ctx, method="fused", pieces=p) for p in (1, 8)}
            with _cublas_fp32_reduction():
                seq = gemm_rs(a, b, ctx, method="torch")
                chunked = gemm_rs(a, b, ctx, method="chunked")
                subs = {s: gemm_rs(a, b, ctx, method="chunked", sub_chunks=s) for s in (2, 4)}
                ce = {p: gemm_rs(a, b, ctx, method="ce", pieces=p) for p in (1, 2, 3, 4)}
                memops = (ctx.memops_wait, ctx.memops_remote)
                ctx.memops_wait = ctx.memops_remote = False  # the fallbacks: wait kernels, copy-engine raises
                try:
                    subs["2/kernel-wait"] = gemm_rs(a, b, ctx, method="chunked", sub_chunks=2)
                    ce["2/kernel-wait"] = gemm_rs(a, b, ctx, method="ce", pieces=2)
                finally:
                    ctx.memops_wait, ctx.memops_remote = memops
            ref, mag = _exact_partials_reference(a, b)
            ref, mag = ref[rank * rows:(rank + 1) * rows], mag[rank * rows:(rank + 1) * rows]
            torch.cuda.synchronize()
            # fused: the peers' partials rounded to bf16 once (pushed by TMA store on sm_90 at world 2), added to the
            # own fp32 product, rounded once: torch's bound
            f_over, f_max = _rounding_check(out, ref, _torch_bound(ref, mag, W), f"gemm_rs fused call {call}")
            t_over, t_max = _rounding_check(seq, ref, _torch_bound(ref, mag, W), f"gemm_rs torch call {call}")
            for p, got in streamed.items():  # the same roundings as fused pushing at once
                _rounding_check(got, ref, _torch_bound(ref, mag, W), f"gemm_rs fused pieces={p} call {call}")
            # chunked: each partial rounded to bf16 once by cuBLAS, summed in fp32, rounded once: torch's bound
            _rounding_check(chunked, ref, _torch_bound(ref, mag, W), f"gemm_rs chunked call {call}")
            # sub_chunks: own partial (fp32, in cuBLAS) + the peer's bf16 partial, rounded once (world 2)
            for sub, got in subs.items():
                _rounding_check(got, ref, _torch_bound(ref, mag, W), f"gemm_rs chunked sub_chunks={sub} call {call}")
            # ce: the peers' partials rounded to bf16 once by cuBLAS, added to the own fp32 product, rounded once
            for p, got in ce.items():
                _rounding_check(got, ref, _torch_bound(ref, mag, W), f"gemm_rs ce pieces={p} call {call}")
            print(f"gemm_rs {m}x{k_loc}x{n} call {call}: fused max err {f_max:g} ({f_over} beyond one rounding); "
                  f"torch max err {t_max:g} ({t_over} of {ref.numel()} beyond one rounding, within its bound)")
    finally:
        ctx.close()


def _check_ll(ll, fused, what):
    """gemm_ar ``ll`` next to ``fused`` on the same inputs: the same fp32 sums in the same order, so bit-identical
    (and therefore within one rounding and the same on every rank as ``fused``)."""
    assert torch.equal(ll, fused), (f"{what}: ll differs from fused in {int((ll != fused).sum())} elements, max diff "
                                    f"{(ll.float() - fused.float()).abs().max().item()}")


def _assert_words_cleared(ctx, what):
    """After the last ``ll`` call on ``ctx`` (and a device sync) every flagged word was consumed and cleared."""
    torch.cuda.synchronize()
    left = int(torch.count_nonzero(ctx.words))
    assert left == 0, f"{what}: {left} flagged words left uncleared"


@pytest.mark.parametrize("m,k_loc,n", [(1, 7168, 8192), (16, 7168, 8192), (128, 3584, 8192), (512, 7168, 8192),
                                       (77, 1000, 1000)])
def test_gemm_ar(m, k_loc, n):
    """Methods fused, ll, torch and one_shot on the same inputs, three calls on one context; ll (flagged words) is
    checked as fused is and bit-identical to it."""

    from triton_dist.ops.overlap import create_gemm_ar_context, gemm_ar

    rank, W = _init()
    ctx = create_gemm_ar_context(512, n, torch.bfloat16)
    try:
        for call in range(3):
            a = _q((m, k_loc), torch.bfloat16, 30 * call + rank)
            b = _q((k_loc, n), torch.bfloat16, 40 * call + rank)
            out = gemm_ar(a, b, ctx, method="fused")
            ll = gemm_ar(a, b, ctx, method="ll")
            with _cublas_fp32_reduction():
                seq = gemm_ar(a, b, ctx, method="torch")
                one = gemm_ar(a, b, ctx, method="one_shot")
            ref, mag = _exact_partials_reference(a, b)
            torch.cuda.synchronize()
            f_over, f_max = _rounding_check(out, ref, U_BF16 * ref.abs(), f"gemm_ar m={m} fused call {call}")
            _rounding_check(ll, ref, U_BF16 * ref.abs(), f"gemm_ar m={m} ll call {call}")
            _check_ll(ll, out, f"gemm_ar m={m} call {call}")
            t_over, t_max = _rounding_check(seq, ref, _torch_bound(ref, mag, W), f"gemm_ar m={m} torch call {call}")
            # one_shot: cuBLAS rounds each partial once, the all-reduce sums them in fp32 and rounds once: the torch
            # path's bound holds for it too
            o_over, o_max = _rounding_check(one, ref, _torch_bound(ref, mag, W), f"gemm_ar m={m} one_shot call {call}")
            print(f"gemm_ar {m}x{k_loc}x{n} call {call}: fused max err {f_max:g} ({f_over} beyond one rounding); "
                  f"one_shot max err {o_max:g} ({o_over} beyond one rounding); torch max err {t_max:g} ({t_over} of "
                  f"{ref.numel()} beyond one rounding, within its bound)")
            # identical on every rank (fp32 sum in rank order)
            _assert_same_on_every_rank(out, f"gemm_ar m={m} fused call {call}")
            _assert_same_on_every_rank(ll, f"gemm_ar m={m} ll call {call}")
            if W == 2:  # one_shot adds own + peers (commutative only for two ranks)
                _assert_same_on_every_rank(one, f"gemm_ar m={m} one_shot call {call}")
        _assert_words_cleared(ctx, f"gemm_ar m={m}")
    finally:
        ctx.close()


@pytest.mark.parametrize("cfg", ["16x128x128x4x4k4", "16x64x128x4x4k2", "64x128x128x4x4k2", "64x128x64x4x4k8",
                                 "16x128x128x4x4", "16x64x64x4x8p", "64x128x128x4x4pk2"])
@pytest.mark.parametrize("m,k_loc,n", [(1, 3584, 8192), (16, 7168, 8192), (64, 3584, 8192), (128, 1000, 1000)])
def test_gemm_ar_split_k(m, k_loc, n, cfg, monkeypatch):
    """The fused GEMM+AR with each tile's K blocks split over programs (decode tilings of the sweep): within one
    rounding of the exact sum, bit-identical on every rank, three calls on one context (the tile counters are
    reset by their finishers). Method ll (same kernel and tiling, flagged words) after each fused call: checked
    the same way, bit-identical to fused, its words cleared."""

    from triton_dist.ops.overlap import create_gemm_ar_context, gemm_ar

    rank, W = _init()
    monkeypatch.setenv("TRITON_DIST_OVERLAP_CONFIG", cfg)
    ctx = create_gemm_ar_context(128, n, torch.bfloat16)
    try:
        for call in range(3):
            a = _q((m, k_loc), torch.bfloat16, 50 * call + rank)
            b = _q((k_loc, n), torch.bfloat16, 60 * call + rank)
            out = gemm_ar(a, b, ctx, method="fused")
            ll = gemm_ar(a, b, ctx, method="ll")
            ref, _ = _exact_partials_reference(a, b)
            torch.cuda.synchronize()
            _rounding_check(out, ref, U_BF16 * ref.abs(), f"gemm_ar {cfg} m={m} call {call}")
            _rounding_check(ll, ref, U_BF16 * ref.abs(), f"gemm_ar ll {cfg} m={m} call {call}")
            _check_ll(ll, out, f"gemm_ar {cfg} m={m} call {call}")
            _assert_same_on_every_rank(out, f"gemm_ar {cfg} m={m} call {call}")
            _assert_same_on_every_rank(ll, f"gemm_ar ll {cfg} m={m} call {call}")
            assert int(ctx.split_cnt.abs().sum()) == 0, f"gemm_ar {cfg}: tile counters not reset"
        _assert_words_cleared(ctx, f"gemm_ar {cfg} m={m}")
    finally:
        ctx.close()


def _graph_of(fn, calls):
    """Capture ``calls`` calls of ``fn`` (after one warm-up call) in a CUDA graph; returns (graph, outputs)."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        fn()
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    outs = []
    with torch.cuda.graph(g, stream=side):
        for _ in range(calls):
            outs.append(fn())
    torch.cuda.synchronize()
    return g, outs


@pytest.mark.parametrize("op,method,kw", [("ag_gemm", "sm", {}), ("ag_gemm", "ce", {}), ("ag_gemm", "chunked", {}),
                                          ("ag_gemm", "chunked", {"first_rows": 128}), ("gemm_rs", "fused", {}),
                                          ("gemm_rs", "fused", {"pieces": 8}),
                                          ("gemm_rs", "chunked", {}), ("gemm_rs", "chunked", {"sub_chunks": 2}),
                                          ("gemm_rs", "ce", {}), ("gemm_rs", "ce", {"pieces": 4}),
                                          ("gemm_ar", "fused", {}), ("gemm_ar", "ll", {}),
                                          ("gemm_ar", "one_shot", {})])
def test_overlap_ops_replay_in_a_cuda_graph(op, method, kw):
    """Two calls captured once, replayed with new inputs each time: the epochs advance in device memory (no host
    counter baked into the graph), so every replay is right, and eager calls on the same context still are."""
    import torch.distributed as dist

    from triton_dist.ops import overlap as ov

    rank, W = _init()
    m, k, n = (1024, 1024, 2048) if op != "gemm_ar" else (16, 2048, 4096)
    if op == "ag_gemm":
        ctx = ov.create_ag_gemm_context(m // W, k, torch.bfloat16)
        a = _q((m // W, k), torch.bfloat16, rank)
        run = lambda: ov.ag_gemm(a, b, ctx, method=method, **kw)  # noqa: E731
        ref_of = lambda: (ov.ag_gemm(a, b, ctx, method="torch").float(), None)  # noqa: E731
        rtol = 2.0 ** -7
    else:
        ctx = (ov.create_gemm_rs_context(m, n, torch.bfloat16) if op == "gemm_rs"
               else ov.create_gemm_ar_context(m, n, torch.bfloat16))
        fn = ov.gemm_rs if op == "gemm_rs" else ov.gemm_ar
        a = _q((m, k), torch.bfloat16, rank)
        run = lambda: fn(a, b, ctx, method=method, **kw)  # noqa: E731

        def ref_of():
            ref, mag = _exact_partials_reference(a, b)
            rows = m // W
            if op == "gemm_rs":
                ref, mag = ref[rank * rows:(rank + 1) * rows], mag[rank * rows:(rank + 1) * rows]
            # gemm_ar fused / ll: fp32 partials, one rounding; gemm_rs fused, one_shot, chunked, ce: each partial
            # rounded once, then one rounding of the sum
            exact = op == "gemm_ar" and method in ("fused", "ll")
            return ref, (U_BF16 * ref.abs() if exact else _torch_bound(ref, mag, W))
        rtol = None
    b = _q((k, n), torch.bfloat16, 99 + rank)
    try:
        g, outs = _graph_of(run, 2)
        for rep in range(4):
            a.copy_(_q(tuple(a.shape), torch.bfloat16, 1000 * rep + rank))
            b.copy_(_q(tuple(b.shape), torch.bfloat16, 2000 * rep + rank))
            torch.cuda.synchronize()
            dist.barrier()
            g.replay()
            torch.cuda.synchronize()
            ref, bound = ref_of()
            for i, out in enumerate(outs):
                what = f"{op}/{method} replay {rep} call {i}"
                if bound is None:
                    _assert_close(out, ref, what, rtol=rtol)
                else:
                    _rounding_check(out, ref, bound, what)
        got = run()
        ref, bound = ref_of()
        if bound is None:
            _assert_close(got, ref, f"{op}/{method} eager after replays", rtol=rtol)
        else:
            _rounding_check(got, ref, bound, f"{op}/{method} eager after replays")
        # the epoch counts the calls of the methods that use it (one_shot runs cuBLAS + the all-reduce context, with
        # its own counters; ag_gemm chunked and gemm_rs ce use 0/1 flags and no epoch)
        if (op, method) not in (("gemm_ar", "one_shot"), ("ag_gemm", "chunked"), ("gemm_rs", "ce")):
            assert ctx.epoch == 1 + 4 * 2 + 1, f"{op}/{method}: {ctx.epoch} fused calls completed, expected 10"
        if method == "ll":  # every replayed call consumed and cleared its flagged words
            _assert_words_cleared(ctx, f"{op}/{method} after replays")
    finally:
        torch.cuda.synchronize()
        ctx.close()


def test_auto_eager_then_captured_runs_each_modes_rule():
    """``auto`` eagerly takes a shape's eager rule and in capture its graph rule (``ops.overlap.select_rule``): at a
    table shape where they differ for GEMM+RS (graph ``ce``, eager ``fused``), the first eager call also tunes
    ``ce``'s GEMM, so capturing ``auto`` right after works; both give torch's precision, eagerly and on replay."""
    import torch.distributed as dist

    from triton_dist.ops import overlap as ov

    rank, W = _init()
    m, k, n = 4096, 3584, 4096
    ctx = ov.create_gemm_rs_context(m, n, torch.bfloat16)
    try:
        graph_rule, eager_rule = ctx.select_rule(m, k), ctx.select_rule(m, k, eager=True)
        if graph_rule["method"] != "ce" or eager_rule["method"] == "ce":
            pytest.skip(f"the table has no ce-in-graphs / other-method-eagerly shape here ({graph_rule}, "
                        f"{eager_rule})")
        a = _q((m, k), torch.bfloat16, rank)
        b = _q((k, n), torch.bfloat16, 99 + rank)
        rows = m // W
        ref, mag = _exact_partials_reference(a, b)
        ref, mag = ref[rank * rows:(rank + 1) * rows], mag[rank * rows:(rank + 1) * rows]
        eager = ov.gemm_rs(a, b, ctx)  # first call of the shape: eager rule, and ce tuned for the capture
        torch.cuda.synchronize()
        _rounding_check(eager, ref, _torch_bound(ref, mag, W), "auto eager")
        g, outs = _graph_of(lambda: ov.gemm_rs(a, b, ctx), 2)
        dist.barrier()
        g.replay()
        torch.cuda.synchronize()
        for i, out in enumerate(outs):
            _rounding_check(out, ref, _torch_bound(ref, mag, W), f"auto captured call {i}")
    finally:
        torch.cuda.synchronize()
        ctx.close()


def test_profiler_buffer_records_ag_gemm_and_gemm_rs_tasks():
    from triton_dist.kernels import ag_gemm as agk
    from triton_dist.kernels import gemm_rs as rsk
    from triton_dist.ops import overlap as ov
    from triton_dist.tools.profiler import alloc_profiler_buffer, parse_to_tracks, reset_profiler_buffer

    rank, W = _init()
    buf = alloc_profiler_buffer(64 * 1024)
    ag = ov.create_ag_gemm_context(1024, 1024, torch.bfloat16)
    rs = ov.create_gemm_rs_context(2048, 2048, torch.bfloat16)
    try:
        for name, call, tasks in (
                ("ag_gemm/sm", lambda: ov.ag_gemm(_q((1024, 1024), torch.bfloat16, rank), _q((1024, 2048),
                                                  torch.bfloat16, 1), ag, method="sm", profiler_buffer=buf),
                 agk.TASKS),
                ("gemm_rs", lambda: ov.gemm_rs(_q((2048, 1024), torch.bfloat16, rank), _q((1024, 2048),
                                               torch.bfloat16, 1), rs, method="fused", profiler_buffer=buf),
                 rsk.TASKS)):
            reset_profiler_buffer(buf)
            call()
            torch.cuda.synchronize()
            tracks = parse_to_tracks(buf, rank=rank)
            seen = {t.task_type for tr in tracks for t in tr.tasks}
            assert tracks and 0 in seen, (name, len(tracks), seen)
            assert all(t.end_ns >= t.start_ns for tr in tracks for t in tr.tasks), name
            print(f"{name}: {len(tracks)} tracks, tasks seen {[tasks[i] for i in sorted(seen)]}")
        with pytest.raises(ValueError, match="profiler_buffer must be an int64 tensor"):
            ov.gemm_rs(_q((2048, 1024), torch.bfloat16, rank), _q((1024, 2048), torch.bfloat16, 1), rs,
                       method="fused", profiler_buffer=torch.zeros(8, device="cuda"))
    finally:
        ag.close()
        rs.close()


def test_tp_mlp_matches_single_device_reference():
    from triton_dist.layers import TPMLP, mlp_reference

    rank, W = _init()
    H, inter, T = 4096, 14336, 2048
    g = torch.Generator(device="cuda").manual_seed(0)
    w_gate = (torch.randn(H, inter, device="cuda", generator=g) / 64).to(torch.bfloat16)
    w_up = (torch.randn(H, inter, device="cuda", generator=g) / 64).to(torch.bfloat16)
    w_down = (torch.randn(inter, H, device="cuda", generator=g) / 64).to(torch.bfloat16)
    x = torch.randn(T, H, device="cuda", generator=g).to(torch.bfloat16)
    ref = mlp_reference(x, w_gate, w_up, w_down)
    t_loc = T // W
    for method in ("fused", "torch"):
        mlp = TPMLP(H, inter, max_tokens=T, method=method).load_full_weights(w_gate, w_up, w_down)
        try:
            y = mlp(x[rank * t_loc:(rank + 1) * t_loc])
            torch.cuda.synchronize()
            r = ref[rank * t_loc:(rank + 1) * t_loc]
            err = (y.float() - r).abs().max().item()
            assert err <= 0.02 * r.abs().max().item() + 1e-3, (method, err)
        finally:
            mlp.close()


def test_validation_before_launch():
    from triton_dist.ops.overlap import ag_gemm, create_ag_gemm_context

    _init()
    ctx = create_ag_gemm_context(128, 256, torch.bfloat16)
    try:
        a = _q((128, 256), torch.bfloat16, 0)
        with pytest.raises(ValueError, match="inner dimensions"):
            ag_gemm(a, _q((128, 64), torch.bfloat16, 1), ctx)
        with pytest.raises(ValueError, match="max_m_per_rank"):
            ag_gemm(_q((256, 256), torch.bfloat16, 0), _q((256, 64), torch.bfloat16, 1), ctx)
        with pytest.raises(ValueError, match="the context.s buffers are on"):
            ag_gemm(a.cpu(), _q((256, 64), torch.bfloat16, 1).cpu(), ctx)
        c = ag_gemm(a, _q((256, 64), torch.bfloat16, 1), ctx, method="sm")  # still usable
        assert c.shape == (128 * ctx.world_size, 64)
    finally:
        ctx.close()
