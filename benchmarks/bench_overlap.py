"""Benchmark the overlapped GEMMs against torch in the same run (2 GPUs, bf16, TP=2 Llama-3 MLP shapes).

    torchrun --nproc_per_node 2 benchmarks/bench_overlap.py [--quick] [--sweep] [--write-table] [--mlp]
        [--profile DIR] [--ops ag_gemm,gemm_rs,gemm_ar] [--models llama3-70b,llama3-8b,comm-heavy]

For every shape and implementation: a correctness check against torch's sequential path first (fresh random
inputs), then timing.

* ``ours/<method>``: ``triton_dist.ops.overlap`` (AG+GEMM: ``sm`` = push programs inside the GEMM launch, ``ce`` =
  copy engine on a side stream + our GEMM, ``chunked`` = copy engine + cuBLAS per chunk; GEMM+RS: ``fused``,
  ``chunked`` = cuBLAS per row chunk + copy-engine push of the bf16 partials + a summing pass, ``ce`` = the same
  pushes in pieces, own rows by our GEMM adding the partials in its epilogue (``@p<P>``: P pieces); GEMM+AR:
  ``fused``, ``ll`` = the same kernel exchanging its partials as flagged words (no fence, no tile signal),
  ``one_shot`` = cuBLAS + our one-shot all-reduce). From M = 1024 also the measured variants
  ``ours/chunked@f<frac>`` (AG+GEMM: ``first_rows`` = that fraction of the local rows) and ``ours/chunked@s<S>``
  (GEMM+RS: ``sub_chunks=S``) and ``ours/fused@p<P>`` (GEMM+RS: ``pieces=P``, peer tiles streamed in P row pieces
  during the next main loop); ``--write-table`` stores the winner's parameter. ``ours/auto`` is what
  ``method="auto"`` does with the dispatch table in the tree (``python/triton_dist/ops/overlap_table.json``).
* ``torch_seq``: sequential NCCL + cuBLAS: ``all_gather_into_tensor`` + ``torch.matmul`` / ``torch.matmul`` +
  ``reduce_scatter_tensor`` / ``torch.matmul`` + ``all_reduce``.
* ``torch_symm``: torch's fused symmetric-memory ops (``torch.distributed._symmetric_memory``
  ``fused_all_gather_matmul`` / ``fused_matmul_reduce_scatter``) where available (multicast stays off:
  ``TORCH_SYMM_MEM_DISABLE_MULTICAST=1``); any failure is recorded, not fatal.
* ``gemm_ours`` / ``gemm_cublas``: the local GEMM alone (our autotuned persistent GEMM, cuBLAS);
  ``comm_nccl``: the communication alone (NCCL all_gather of A / reduce_scatter or all_reduce of C).

Timing (every implementation the same way, ``benchmarks/harness.py``; each sample starts after a barrier and a
device-side rendezvous, a one-element NCCL all-reduce, so the ranks' GPUs start it together): CUDA-graph replay of ``k`` back-to-back calls (``--k``; default per
shape: enough calls for about 4 ms, 5 to 40, the same for every implementation of the shape), CUDA events,
median of ``--reps`` replays per rank, max over ranks: ``results``. The implementations and baselines of one shape
are captured first and then sampled round-robin (one replay each per round, rotated order), so drift of clocks and
temperature during the run does not favour whichever was timed first. The same for eager calls (host launch overhead
included) as a separate column: ``eager``. Every implementation allocates its output per call (torch's way).
A capture that fails falls back to eager timing for that implementation and is listed in ``graph_failures``.

Ratios per record: ``bound`` = max(t_cuBLAS GEMM, t_NCCL comm); ``auto_over_bound`` = t_auto / bound;
``auto_vs_symm`` = t_torch_symm / t_auto; ``auto_vs_best_torch`` = min(t_torch_seq, t_torch_symm) / t_auto;
``auto_vs_seq`` = t_torch_seq / t_auto; ``gemm_ours_vs_cublas`` = t_cuBLAS / t_ours.

``--sweep``: the fused kernels' tilings (``TRITON_DIST_OVERLAP_CONFIG`` candidates) are timed per shape and the best
one is used for the ``ours/*`` timings (GEMM+AR: ``fused`` and ``ll`` each swept over the same tilings);
``--write-table`` (rank 0) then writes the fastest method per measured shape (and that method's tiling) into
``overlap_table.json`` (``status: measured``), which ``method="auto"`` reads; ``--margin F`` keeps a shape's old
rule (and tiling) that the run timed too unless the winner beats it by more than the fraction F (as bench_gemm.py's
``--margin``; default 0: the winner always replaces it; not bench_gemm's 0.015, because the committed
``overlap_table.json`` was derived at 0).
``--profile DIR``: one profiled call of AG+GEMM and GEMM+RS (Llama-3-70B, M=8192) -> Perfetto JSON + Gantt PNG.
``--mlp``: ``TPMLP`` (Llama-3-70B MLP, TP=2) against the same MLP with torch.matmul + NCCL.

Ranks that share a GPU (``TRITON_DIST_RANKS_PER_GPU`` > 1, CUDA MPS; the JSON's ``shared_gpu``: true, its
``topology`` says how many; no NVLink in these figures): the process group has no NCCL, so ``torch_seq`` is replaced
by ``ours_seq`` (our verified collectives, ``triton_dist.ops.all_gather`` / ``reduce_scatter`` / ``all_reduce`` with
method ``auto``, contexts created once for the run's largest call, + ``torch.matmul``; checked against the reference
like every implementation) and ``comm_nccl`` by ``comm_seq`` (the same collective alone; the bound is then
max(cuBLAS, comm_seq), named in ``bound_comm``); ``torch_symm`` is skipped (``torch_symm_error`` says why). The
reference stays ``method="torch"`` (torch_collectives: gloo on host copies, exact, eager only). ``--write-table``,
``--table-from`` and ``--eager-rules-from`` refuse shared-GPU timings: they must never replace the NVLink table.
The device-side rendezvous before each sample is an NVSHMEM barrier on the stream there (``device_rendezvous``).

Output: JSON in ``$TRITON_DIST_RESULTS_DIR`` (default ``benchmarks/results/``) + a bar chart PNG. Timing, capture,
the result check and the JSON header: ``benchmarks/harness.py``.

``--probe NAME [options]`` (the first option): a one-off measurement instead of the bench (``ag-gemm``, ``gemm-ar``,
``gemm-rs``, ``rs-own``, ``timing``, ``trace``: ``benchmarks/overlap_probes.py``; ``--probe NAME --help`` lists its
options).
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import traceback
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))

os.environ.setdefault("NVSHMEM_SYMMETRIC_SIZE", "8G")
os.environ.setdefault("NVSHMEM_DISABLE_NVLS", "1")
os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
os.environ.setdefault("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1")

import torch  # noqa: E402
from harness import (close, max_over_ranks as _max_over_ranks, min_over_ranks as _min_over_ranks, rand,  # noqa: E402
                     time_eager, time_interleaved)
import harness  # noqa: E402
from provenance import label_json, topology, topology_line  # noqa: E402
import torch.distributed as dist  # noqa: E402
from triton_dist.runtime import torch_collectives as TC  # noqa: E402

#: name: (K for AG+GEMM, N total for AG+GEMM, K total for GEMM+RS, N for GEMM+RS)
MODELS = {
    "llama3-70b": (8192, 28672, 14336, 8192),
    "llama3-8b": (4096, 14336, 7168, 4096),
    # communication at least half the GEMM: AG: A [8192, 8192] gathered, N per rank 1024; RS: K per rank 1024
    "comm-heavy": (8192, 2048, 2048, 8192),
}
FULL_M = [128, 512, 1024, 2048, 4096, 8192]
QUICK_M = [512, 2048, 8192]
COMM_HEAVY_M = [8192]
#: decode GEMM+AR: (K per rank, N) x M
AR_SHAPES = [(7168, 8192), (3584, 8192)]
AR_M = [1, 16, 64, 128]
#: fused-kernel tilings tried by --sweep (BMxBNxBKxWARPSxSTAGES)
#: 128x128x64x4x6: one warpgroup, 6 stages (cuBLAS's tiling at M = 256; the fastest of ours at 7 of the 12 M >= 2048
#: GEMM-table shapes, benchmarks/results/2026-12-01-decode-gemm/quality-c64ccaf)
SWEEP_LARGE = ["128x256x64x8x3", "128x256x64x8x4", "128x128x64x8x4", "128x128x64x4x4", "128x128x128x8x3",
               "128x128x64x4x6"]
SWEEP_SMALL = ["64x128x64x4x4", "64x64x128x4x4", "64x256x64x4x4", "128x128x64x8x4"]
SWEEP_DECODE = ["64x64x128x4x4", "64x128x64x4x4", "64x64x64x4x6", "64x128x128x4x3"]
#: GEMM+AR (decode M <= 128): 16- and 64-row tiles, K split over 1-8 programs (``kS``) so that the weight stream
#: covers the SMs, TMA or pointer loads (``p``: probe_gemm_ar measured them 2.7-3 us faster in this kernel);
#: 64x128x64x4x4 is the unsplit tiling of earlier rounds
SWEEP_AR = ["16x128x128x4x4k2", "16x64x128x4x4", "16x64x128x4x4p", "16x64x64x4x8p", "16x64x256x4x3",
            "64x128x128x4x4k2", "64x128x128x4x4pk2", "64x128x64x4x4", "64x128x64x4x4p", "128x128x64x8x3k2"]
#: flattened-loop (f) and TMA-store (t) tilings tried besides SWEEP_LARGE for the AG+GEMM ``ce`` kernel: bench_gemm
#: 1-4% faster flattened; on one H200 (benchmarks/results/2026-12-02-ag-compute, the kernel with nothing to wait
#: for) 128x128x64x4x6f was the fastest ce at 8B M=2048 (0.978x cuBLAS), ...ft at 8B M=8192 with 128x256x64x8x3ft
SWEEP_AG_FLAT = ["128x128x64x4x4f", "128x256x64x8x3f", "128x256x64x8x4f", "128x128x64x4x6f", "128x128x64x4x4ft",
                 "128x256x64x8x3ft", "128x128x64x4x6ft"]
#: method variants timed from this global M on: ag_gemm chunked with a smaller local slice first (fraction of the
#: local rows), gemm_rs chunked in row pieces (addmm_ on the received partial)
VARIANT_MIN_M = 1024
AG_FIRST_FRACS = (0.125, 0.25, 0.5)
RS_SUB_CHUNKS = (2, 4)
#: gemm_rs ce: push pieces timed besides the default (``ours/ce@p<P>``)
RS_CE_PIECES = (1, 4)
#: gemm_rs fused with its peer tiles streamed in P row pieces during the next main loop (``ours/fused@p<P>``)
RS_FUSED_PIECES = (4, 8)
#: default length of one timing sample (us): calls_per_sample picks k so that k calls last about this long
SAMPLE_US = 4000
#: --mlp: the Llama-3-70B MLP (hidden, intermediate)
MLP_SHAPE = (8192, 28672)
#: where ranks share a GPU (no NCCL): why torch's fused symmetric-memory ops are not timed
NO_SYMM = ("skipped: ranks share a GPU (gloo-only process group): torch symmetric memory needs a group with NCCL / "
           "CUDA IPC support")
#: ... and why no dispatch table is written from such a run
NO_TABLE = ("refused: the timings are from ranks that share a GPU (CUDA MPS, no NVLink): they must never replace the "
            "NVLink dispatch table; run with one GPU per rank")


def first_rows_of(frac, m_loc):
    """The rows ``ag_gemm`` ``auto`` computes first for a table rule with ``first_frac = frac``."""
    from triton_dist.ops.overlap import _first_rows

    return _first_rows({"first_frac": frac}, m_loc)




# ------------------------------------------------------------------------------------------------------------- timing
# timing, capture, the result check and the random inputs: benchmarks/harness.py (time_interleaved, time_eager,
# drop_failing, close, rand), shared with every other bench and probe


@contextlib.contextmanager
def overlap_config(cfg):
    """Force the fused kernels' tiling (None: the table / heuristic)."""
    old = os.environ.get("TRITON_DIST_OVERLAP_CONFIG")
    if cfg:
        os.environ["TRITON_DIST_OVERLAP_CONFIG"] = cfg
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("TRITON_DIST_OVERLAP_CONFIG", None)
        else:
            os.environ["TRITON_DIST_OVERLAP_CONFIG"] = old


def _with_config(fn, cfg):
    if not cfg:
        return fn

    def run():
        with overlap_config(cfg):
            return fn()
    return run


def calls_per_sample(ref_fn, args):
    """``--k``, or (default) enough back-to-back calls that one sample lasts about ``SAMPLE_US``: at least 5, at most
    40, from the per-call time of ``ref_fn`` (eager, max over ranks; the same k on every rank). A sample starts on
    both ranks after a barrier, so its first call absorbs the ranks' launch skew (tens of us); over milliseconds of
    back-to-back calls that is amortized as it is in a model's steady state, for every implementation alike."""
    if args.k:
        return args.k
    t = _max_over_ranks(harness.eager_call_us(ref_fn, warmup=1, calls=3))
    return int(min(40, max(5, -(-SAMPLE_US // max(t, 1.0)))))


def run_impls(rec, impls, ref_fn, args, check_inputs=None, baselines=None, k_impl=None):
    """Check each implementation against the reference (on fresh inputs from ``check_inputs()``), then time the
    correct ones and the ``baselines`` (no check) together with :func:`time_interleaved` (graph -> ``results``) and
    each one eagerly (-> ``eager``), ``rec["k"]`` calls per sample (:func:`calls_per_sample` of the implementation
    named ``k_impl`` when it passed its check, else of ``ref_fn``: where ranks share a GPU the reference runs on host
    copies, so the caller names ``ours_seq``); a wrong result or an exception goes to ``errors``."""
    timed = {}
    for name, (fn, cfg) in impls.items():
        try:
            with overlap_config(cfg):
                if check_inputs is not None:
                    check_inputs()
                ok, rel = close(fn(), ref_fn())
                torch.cuda.synchronize()
            bad = _max_over_ranks(0.0 if ok else 1.0)
            if bad:
                rec["errors"][name] = f"wrong result: rel err {rel:.3g} (this rank)"
                continue
            timed[name] = _with_config(fn, cfg)
        except Exception as exc:  # noqa: BLE001
            rec["errors"][name] = f"{type(exc).__name__}: {exc}"[:400]
            with contextlib.suppress(Exception):
                torch.cuda.synchronize()
            dist.barrier()
    for name, (fn, cfg) in (baselines or {}).items():
        timed[name] = _with_config(fn, cfg)
    k = rec["k"] = calls_per_sample(timed.get(k_impl) or ref_fn, args)
    try:
        for name, (t, graphed) in time_interleaved(timed, k, args.reps).items():
            rec["results"][name] = t
            if not graphed:
                rec.setdefault("eager_only", []).append(name)
    except Exception as exc:  # noqa: BLE001
        for name in timed:
            rec["errors"].setdefault(name, f"timing: {type(exc).__name__}: {exc}"[:400])
        with contextlib.suppress(Exception):
            torch.cuda.synchronize()
        dist.barrier()
    if args.eager:
        for name, fn in timed.items():
            try:
                rec["eager"][name] = time_eager(fn, k, max(3, args.reps // 2))
            except Exception as exc:  # noqa: BLE001
                rec["errors"].setdefault(name, f"eager: {type(exc).__name__}: {exc}"[:400])
                with contextlib.suppress(Exception):
                    torch.cuda.synchronize()
                dist.barrier()


def sweep(rec, name, fn, cfgs, args):
    """Time ``fn`` under each tiling, the tilings interleaved (:func:`time_interleaved`, k from
    :func:`calls_per_sample`: the final table's timing; timed one after the other with k = 5, the same kernel measured
    up to 15% faster than in the final table, and a tiling's rank could change with it,
    ``results/2026-11-30-overlap-v6/README.md``); returns the fastest (or None)."""
    res, fns = {}, {}
    for cfg in cfgs:
        try:
            with overlap_config(cfg):
                fn()
                torch.cuda.synchronize()
            fns[cfg] = _with_config(fn, cfg)
        except Exception as exc:  # noqa: BLE001
            res[cfg] = f"{type(exc).__name__}: {exc}"[:200]
            with contextlib.suppress(Exception):
                torch.cuda.synchronize()
    # a tiling that failed on one rank only is dropped on every rank (the interleaved samples are collective)
    mask = float(sum(1 << i for i, c in enumerate(cfgs) if c in fns))
    bad = _max_over_ranks(mask) != _min_over_ranks(mask)
    dist.barrier()
    if fns and not bad:
        try:
            k = args.k or calls_per_sample(next(iter(fns.values())), args)
            for cfg, (t, _) in time_interleaved(fns, k, max(3, args.reps // 2)).items():
                res[cfg] = t
        except Exception as exc:  # noqa: BLE001
            for cfg in fns:
                res[cfg] = f"timing: {type(exc).__name__}: {exc}"[:200]
            with contextlib.suppress(Exception):
                torch.cuda.synchronize()
            dist.barrier()
    elif bad:
        for cfg in fns:
            res[cfg] = "failed on another rank"
    rec.setdefault("sweep", {})[name] = res
    timed = {c: t for c, t in res.items() if isinstance(t, float)}
    return min(timed, key=timed.get) if timed else None


def sweep_list(op, M):
    if op == "gemm_ar":
        return SWEEP_AR
    if M <= 128:
        return SWEEP_DECODE
    return SWEEP_LARGE if M >= 1024 else SWEEP_SMALL


# -------------------------------------------------------------------------------------------------------- the ops
def symm_group_name():
    try:
        import torch.distributed._symmetric_memory as symm

        name = dist.group.WORLD.group_name
        with warnings.catch_warnings():  # needed before torch 2.11, a FutureWarning (one per rank) since
            warnings.simplefilter("ignore", FutureWarning)
            symm.enable_symm_mem_for_group(name)
        torch.ops.symm_mem.fused_all_gather_matmul  # noqa: B018  (availability)
        return name, None
    except Exception as exc:  # noqa: BLE001
        return None, f"{type(exc).__name__}: {exc}"[:300]


class SeqCollectives:
    """Where ranks share a GPU (no NCCL in the group): the collectives of the sequential baseline ``ours_seq`` and
    of ``comm_seq``, ``triton_dist.ops`` with method ``auto``, one context per op created once (collective) for the
    run's largest call (``ag_numel`` elements per rank, ``rs_numel`` / ``ar_numel`` input elements; 0: not
    needed)."""

    def __init__(self, ag_numel: int, rs_numel: int, ar_numel: int, dtype=torch.bfloat16):
        from triton_dist import ops

        self.ag = ops.create_allgather_ctx(ag_numel, dtype) if ag_numel else None
        self.rs = ops.create_reduce_scatter_ctx(rs_numel, dtype) if rs_numel else None
        self.ar = ops.create_allreduce_ctx(ar_numel, dtype) if ar_numel else None

    def all_gather(self, x, out=None):
        from triton_dist.ops import all_gather

        return all_gather(x, self.ag, out=out, method="auto")

    def reduce_scatter(self, x, out=None):
        from triton_dist.ops import reduce_scatter

        return reduce_scatter(x, self.rs, out=out, method="auto")

    def all_reduce(self, x, out=None):
        from triton_dist.ops import all_reduce

        return all_reduce(x, self.ar, out=out, method="auto")

    def close(self):
        """Collective: free the contexts' symmetric buffers."""
        for ctx in (self.ag, self.rs, self.ar):
            if ctx is not None:
                ctx.close()
        self.ag = self.rs = self.ar = None


def seq_capacity(todo, world, mlp_m=()):
    """``(ag_numel, rs_numel, ar_numel)`` that :class:`SeqCollectives` needs for every ``(op, model, M, shape)`` of
    ``todo`` and the ``--mlp`` token counts ``mlp_m``: the all-gather's largest per-rank input (A rows of AG+GEMM,
    the MLP's input rows), the reduce-scatter's and the all-reduce's largest input (C of GEMM+RS / the MLP's down
    projection, C of GEMM+AR), a multiple of the world size."""
    ag = rs = ar = 0
    for op, model, M, shape in todo:
        if op == "ag_gemm":
            ag = max(ag, (M // world) * MODELS[model][0])
        elif op == "gemm_rs":
            rs = max(rs, M * MODELS[model][3])
        elif op == "gemm_ar":
            ar = max(ar, M * shape[1])
    hidden = MLP_SHAPE[0]
    for T in mlp_m:
        ag, rs = max(ag, (T // world) * hidden), max(rs, T * hidden)
    return ag, -(-rs // world) * world, ar


def bench_ag(model, M, args, rank, W, gname, out, seq=None):
    from triton_dist.ops.gemm import matmul
    from triton_dist.ops.overlap import ag_gemm, create_ag_gemm_context

    K, N_tot, _, _ = MODELS[model]
    N = N_tot // W
    m_loc = M // W
    rec = {"op": "ag_gemm", "model": model, "M": M, "K": K, "N_per_rank": N, "results": {}, "eager": {},
           "errors": {}}
    io = {"a": rand((m_loc, K), 1 + rank), "b": rand((K, N), 100 + rank)}
    ctx = create_ag_gemm_context(m_loc, K, torch.bfloat16)
    seed = [0]

    def fresh():
        seed[0] += 1
        io["a"] = rand((m_loc, K), 1000 * seed[0] + rank)

    try:
        best = {}
        if args.sweep and M >= 2048:
            for meth in ("ce", "sm"):
                best[meth] = sweep(rec, f"ours/{meth}", lambda m=meth: ag_gemm(io["a"], io["b"], ctx, method=m),
                                   sweep_list("ag_gemm", M) + (SWEEP_AG_FLAT if meth == "ce" else []), args)
        impls = {
            "ours/sm": (lambda: ag_gemm(io["a"], io["b"], ctx, method="sm"), best.get("sm")),
            "ours/ce": (lambda: ag_gemm(io["a"], io["b"], ctx, method="ce"), best.get("ce")),
            "ours/chunked": (lambda: ag_gemm(io["a"], io["b"], ctx, method="chunked"), None),
        }
        if M >= VARIANT_MIN_M:  # chunked with a smaller local slice first (one large cuBLAS call after it)
            for frac in AG_FIRST_FRACS:
                rows = first_rows_of(frac, m_loc)
                if rows < m_loc:
                    impls[f"ours/chunked@f{frac}"] = (
                        lambda rows=rows: ag_gemm(io["a"], io["b"], ctx, method="chunked", first_rows=rows), None)
        impls["ours/auto"] = (lambda: ag_gemm(io["a"], io["b"], ctx, method="auto"), None)
        if seq is None:
            impls["torch_seq"] = (lambda: ag_gemm(io["a"], io["b"], ctx, method="torch"), None)
        else:  # no NCCL (ranks share a GPU): our all-gather (auto), then cuBLAS
            impls["ours_seq"] = (lambda: torch.matmul(seq.all_gather(io["a"]), io["b"]), None)
        if gname is not None:
            impls["torch_symm"] = (lambda: torch.ops.symm_mem.fused_all_gather_matmul(
                io["a"], [io["b"]], 0, gname, return_A=False)[1][0], None)
        rec["configs"] = {k: v for k, v in best.items() if v}
        full = torch.empty((M, K), dtype=torch.bfloat16, device="cuda")
        base = {"gemm_ours": (lambda: matmul(full, io["b"]), None),
                "gemm_cublas": (lambda: torch.matmul(full, io["b"]), None)}
        if seq is None:
            base["comm_nccl"] = (lambda: TC.dist_all_gather_single(full, io["a"]), None)
        else:
            base["comm_seq"] = (lambda: seq.all_gather(io["a"], out=full), None)
        run_impls(rec, impls, lambda: ag_gemm(io["a"], io["b"], ctx, method="torch"), args, fresh, base, "ours_seq")
    finally:
        ctx.close()
    out.append(finish(rec, flops=2.0 * M * K * N))


def bench_partials(op, model, M, args, rank, W, gname, out, shape=None, seq=None):
    """GEMM+RS (``op="gemm_rs"``) or GEMM+AR (``"gemm_ar"``): A [M, K_loc] @ B [K_loc, N] per rank, partials summed
    across ranks (scattered by rows, or all-reduced). ``shape``: (K_loc, N) for GEMM+AR. ``seq``: the
    :class:`SeqCollectives` of a run without NCCL (``ours_seq`` / ``comm_seq`` instead of ``torch_seq`` /
    ``comm_nccl``)."""
    from triton_dist.ops.gemm import matmul
    from triton_dist.ops import overlap as ov

    rs = op == "gemm_rs"
    fused = ov.gemm_rs if rs else ov.gemm_ar
    if shape is None:
        _, _, K_tot, N = MODELS[model]
        K = K_tot // W
    else:
        K, N = shape
    rec = {"op": op, "model": model, "M": M, "K_per_rank": K, "N": N, "results": {}, "eager": {}, "errors": {}}
    io = {"a": rand((M, K), 1 + rank), "b": rand((K, N), 100 + rank)}
    ctx = ov.create_gemm_rs_context(M, N, torch.bfloat16) if rs else ov.create_gemm_ar_context(max(M, 16), N,
                                                                                               torch.bfloat16)
    seed = [0]

    def fresh():
        seed[0] += 1
        io["a"] = rand((M, K), 1000 * seed[0] + rank)

    try:
        best = {}
        if args.sweep and (M >= 2048 or not rs):
            best["fused"] = sweep(rec, "ours/fused", lambda: fused(io["a"], io["b"], ctx, method="fused"),
                                  sweep_list(op, M), args)
            if not rs:  # GEMM+AR ll: the same kernel with another exchange, its own best of the same tilings
                best["ll"] = sweep(rec, "ours/ll", lambda: fused(io["a"], io["b"], ctx, method="ll"),
                                   sweep_list(op, M), args)
        impls = {"ours/fused": (lambda: fused(io["a"], io["b"], ctx, method="fused"), best.get("fused"))}
        if rs:
            impls["ours/chunked"] = (lambda: fused(io["a"], io["b"], ctx, method="chunked"), None)
            impls["ours/ce"] = (lambda: fused(io["a"], io["b"], ctx, method="ce"), None)
            for p in RS_CE_PIECES:
                impls[f"ours/ce@p{p}"] = (lambda p=p: fused(io["a"], io["b"], ctx, method="ce", pieces=p), None)
            if M >= VARIANT_MIN_M:  # every chunk in row pieces, the own pieces as addmm_ on the received partial
                for sub in RS_SUB_CHUNKS:
                    impls[f"ours/chunked@s{sub}"] = (
                        lambda sub=sub: fused(io["a"], io["b"], ctx, method="chunked", sub_chunks=sub), None)
                for p in RS_FUSED_PIECES:  # the fused kernel's tiling, peer tiles streamed in row pieces
                    impls[f"ours/fused@p{p}"] = (
                        lambda p=p: fused(io["a"], io["b"], ctx, method="fused", pieces=p), best.get("fused"))
        else:
            impls["ours/ll"] = (lambda: fused(io["a"], io["b"], ctx, method="ll"), best.get("ll"))
            impls["ours/one_shot"] = (lambda: fused(io["a"], io["b"], ctx, method="one_shot"), None)
        impls["ours/auto"] = (lambda: fused(io["a"], io["b"], ctx, method="auto"), None)
        if seq is None:
            impls["torch_seq"] = (lambda: fused(io["a"], io["b"], ctx, method="torch"), None)
        else:  # no NCCL (ranks share a GPU): cuBLAS, then our reduce-scatter / all-reduce (auto)
            seq_comm = seq.reduce_scatter if rs else seq.all_reduce
            impls["ours_seq"] = (lambda: seq_comm(torch.matmul(io["a"], io["b"])), None)
        if rs and gname is not None:
            impls["torch_symm"] = (lambda: torch.ops.symm_mem.fused_matmul_reduce_scatter(
                io["a"], io["b"], "sum", 0, gname), None)
        rec["configs"] = {k: v for k, v in best.items() if v}
        c = torch.empty((M, N), dtype=torch.bfloat16, device="cuda")
        base = {"gemm_ours": (lambda: matmul(io["a"], io["b"]), None),
                "gemm_cublas": (lambda: torch.matmul(io["a"], io["b"]), None)}
        if rs:
            shard = torch.empty((M // W, N), dtype=torch.bfloat16, device="cuda")
            if seq is None:
                base["comm_nccl"] = (lambda: TC.dist_reduce_scatter_single(shard, c), None)
            else:
                base["comm_seq"] = (lambda: seq.reduce_scatter(c, out=shard), None)
        else:
            if seq is None:
                base["comm_nccl"] = (lambda: dist.all_reduce(c), None)
            else:
                c_sum = torch.empty_like(c)
                base["comm_seq"] = (lambda: seq.all_reduce(c, out=c_sum), None)
            from triton_dist.ops.collectives import all_reduce

            base["comm_ours"] = (lambda: all_reduce(c, ctx.ar_ctx, method="one_shot"), None)
        run_impls(rec, impls, lambda: fused(io["a"], io["b"], ctx, method="torch"), args, fresh, base, "ours_seq")
    finally:
        ctx.close()
    out.append(finish(rec, flops=2.0 * M * K * N))


def finish(rec, flops):
    r = rec["results"]
    ours = {k: v for k, v in r.items() if k.startswith("ours/") and k != "ours/auto"}
    if ours:
        best = min(ours, key=ours.get)
        rec["best_ours"] = best
        rec["tflops_best"] = flops / (ours[best] * 1e-6) / 1e12
    t_auto = r.get("ours/auto")
    comm = next((k for k in ("comm_nccl", "comm_seq") if k in r), None)  # comm_seq: no NCCL (ranks share a GPU)
    if "gemm_cublas" in r and comm:
        rec["bound"] = max(r["gemm_cublas"], r[comm])
        rec["bound_comm"] = comm
        if t_auto:
            rec["auto_over_bound"] = t_auto / rec["bound"]
    if t_auto:
        if "torch_seq" in r:
            rec["auto_vs_seq"] = r["torch_seq"] / t_auto
        if "ours_seq" in r:
            rec["auto_vs_ours_seq"] = r["ours_seq"] / t_auto
        if "torch_symm" in r:
            rec["auto_vs_symm"] = r["torch_symm"] / t_auto
        torch_best = [r[k] for k in ("torch_seq", "torch_symm") if k in r]
        if torch_best:
            rec["auto_vs_best_torch"] = min(torch_best) / t_auto
    if "gemm_ours" in r and "gemm_cublas" in r:
        rec["gemm_ours_vs_cublas"] = r["gemm_cublas"] / r["gemm_ours"]
    return rec


# ------------------------------------------------------------------------------------------------ dispatch table
# The derivation of the table from the records (method_rules, merges, eager overrides) is the library's:
# triton_dist.ops.overlap_table. This bench measures, then calls it.


# ------------------------------------------------------------------------------------------------------ profile
def profile_calls(args, rank, W, outdir, stamp):
    """One profiled AG+GEMM and GEMM+RS call at Llama-3-70B, M=8192 -> Perfetto JSON + Gantt PNG per op."""
    from triton_dist.kernels import ag_gemm as agk
    from triton_dist.kernels import gemm_rs as rsk
    from triton_dist.ops import overlap as ov
    from triton_dist.tools.profiler import alloc_profiler_buffer, export_to_perfetto_trace, reset_profiler_buffer

    written = {}
    K, N_tot, K_tot, N_rs = MODELS["llama3-70b"]
    M = 8192
    buf = alloc_profiler_buffer(160 * 512)
    ag = ov.create_ag_gemm_context(M // W, K, torch.bfloat16)
    a, b = rand((M // W, K), 1 + rank), rand((K, N_tot // W), 100 + rank)
    for meth in ("ce", "sm"):
        try:
            ov.ag_gemm(a, b, ag, method=meth)
            reset_profiler_buffer(buf)
            torch.cuda.synchronize()
            dist.barrier()
            for _ in range(3):  # steady state: the profiled call follows back-to-back calls (no launch skew)
                ov.ag_gemm(a, b, ag, method=meth)
            ov.ag_gemm(a, b, ag, method=meth, profiler_buffer=buf)
            torch.cuda.synchronize()
            base = os.path.join(outdir, f"profile-{stamp}-ag_gemm-{meth}")
            label_json(export_to_perfetto_trace(buf, agk.TASKS, base + ".json", gantt_png=base + ".png"))
            written[f"ag_gemm/{meth}"] = base
        except Exception as exc:  # noqa: BLE001
            written[f"ag_gemm/{meth}"] = f"{type(exc).__name__}: {exc}"[:300]
    ag.close()
    rs = ov.create_gemm_rs_context(M, N_rs, torch.bfloat16)
    a, b = rand((M, K_tot // W), 1 + rank), rand((K_tot // W, N_rs), 100 + rank)
    try:
        ov.gemm_rs(a, b, rs, method="fused")
        reset_profiler_buffer(buf)
        torch.cuda.synchronize()
        dist.barrier()
        for _ in range(3):
            ov.gemm_rs(a, b, rs, method="fused")
        ov.gemm_rs(a, b, rs, method="fused", profiler_buffer=buf)
        torch.cuda.synchronize()
        base = os.path.join(outdir, f"profile-{stamp}-gemm_rs-fused")
        label_json(export_to_perfetto_trace(buf, rsk.TASKS, base + ".json", gantt_png=base + ".png"))
        written["gemm_rs/fused"] = base
    except Exception as exc:  # noqa: BLE001
        written["gemm_rs/fused"] = f"{type(exc).__name__}: {exc}"[:300]
    rs.close()
    return written


# ------------------------------------------------------------------------------------------------------------ MLP
def bench_mlp(args, rank, W, out, seq=None):
    """TPMLP (Llama-3-70B: hidden 8192, intermediate 28672) at T global tokens: ours (auto) vs torch.matmul + NCCL
    (the same layer with method="torch"). ``seq`` (no NCCL: ranks share a GPU): the sequential baseline is
    ``ours_seq`` instead, the same math with our all-gather and reduce-scatter (auto) around torch.matmul; the
    method="torch" layer (gloo on host copies) stays the reference."""
    from triton_dist.layers.tp_mlp import TPMLP

    H, inter = MLP_SHAPE
    Tmax = max(args.mlp_m)
    layers = {}
    for meth in ("auto", "torch"):
        layers[meth] = TPMLP(H, inter, max_tokens=Tmax, method=meth)
        g = torch.Generator(device="cuda").manual_seed(5)
        layers[meth].w_gate_up.copy_(torch.randn(layers[meth].w_gate_up.shape, device="cuda", generator=g) / 64)
        layers[meth].w_down.copy_(torch.randn(layers[meth].w_down.shape, device="cuda", generator=g) / 64)
    try:
        for T in args.mlp_m:
            rec = {"op": "tp_mlp", "model": "llama3-70b", "M": T, "results": {}, "eager": {}, "errors": {}}
            x = rand((T // W, H), 7 + rank)
            impls = {"ours/auto": (lambda: layers["auto"](x), None)}
            if seq is None:
                impls["torch_seq"] = (lambda: layers["torch"](x), None)
            else:
                impls["ours_seq"] = (lambda: seq_mlp(layers["torch"], x, seq), None)
            run_impls(rec, impls, lambda: layers["torch"](x), args, k_impl="ours_seq")
            r = rec["results"]
            if "ours/auto" in r and "torch_seq" in r:
                rec["auto_vs_seq"] = r["torch_seq"] / r["ours/auto"]
            if "ours/auto" in r and "ours_seq" in r:
                rec["auto_vs_ours_seq"] = r["ours_seq"] / r["ours/auto"]
            out.append(rec)
            if rank == 0:
                print(json.dumps({k: rec[k] for k in rec if k != "errors"}), rec["errors"] or "", flush=True)
    finally:
        for layer in layers.values():
            layer.close()


def seq_mlp(layer, x, seq):
    """``ours_seq`` of the MLP: ``layer``'s weights, our all-gather of ``x`` (auto), torch.matmul, the SiLU gate as
    ``TPMLP`` computes it, torch.matmul, our reduce-scatter (auto): this rank's rows of the output."""
    h = torch.matmul(seq.all_gather(x), layer.w_gate_up)
    i_loc = layer.i_loc
    act = (torch.nn.functional.silu(h[:, :i_loc].float()) * h[:, i_loc:].float()).to(x.dtype)
    return seq.reduce_scatter(torch.matmul(act, layer.w_down))


def plot(records, path, shared=False):
    """Ratios of ``ours/auto`` per record: against the sequential baseline (torch_seq, or ours_seq where ranks
    shared a GPU: ``shared``, titled so), torch symm-mem, and the overlap bound."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except Exception:  # noqa: BLE001
        return False
    seq_key = "auto_vs_ours_seq" if shared else "auto_vs_seq"
    rows = [r for r in records if seq_key in r]
    if not rows:
        return False
    labels = [f"{r['op']}\n{r['model'].replace('llama3-', '')} M={r['M']}" for r in rows]
    fig, ax = plt.subplots(figsize=(max(8, 0.55 * len(rows)), 4.8))
    xs = list(range(len(rows)))
    ax.bar([x - 0.27 for x in xs], [r[seq_key] for r in rows], 0.27,
           label="vs our collectives + cuBLAS (ours_seq)" if shared else "vs NCCL + cuBLAS (torch_seq)")
    ax.bar(xs, [r.get("auto_vs_symm", 0) for r in rows], 0.27, label="vs torch symm-mem fused")
    ax.bar([x + 0.27 for x in xs], [1.0 / r["auto_over_bound"] if r.get("auto_over_bound") else 0 for r in rows],
           0.27, label="bound / auto (1 = at the overlap bound)")
    ax.axhline(1.0, color="k", lw=0.8)
    ax.set_xticks(xs)
    ax.set_xticklabels(labels, fontsize=6, rotation=90)
    ax.set_ylabel("ratio (higher is better for ours/auto)")
    ax.set_title("triton_dist overlapped GEMMs, " + ("RANKS SHARING ONE GPU (CUDA MPS, no NVLink)" if shared else
                                                      "2x H200") + ", bf16, CUDA-graph replay")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    return True


def main(argv=None):
    from triton_dist.ops.overlap_table import method_rules
    from triton_dist.runtime.dispatch_table import check_margin

    from overlap_probes import PROBES

    argv = sys.argv[1:] if argv is None else list(argv)
    probe = harness.split_probe(argv, PROBES)
    if probe is not None:  # a one-off measurement: its own options, its own results JSON
        return PROBES[probe[0]](probe[1])
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--probe", choices=list(PROBES), default=None,
                    help="run a one-off probe instead (benchmarks/overlap_probes.py); the first option, the ones "
                         "after its name are the probe's (--probe NAME --help)")
    ap.add_argument("--quick", action="store_true", help="fewer shapes / samples")
    ap.add_argument("--ops", default="ag_gemm,gemm_rs,gemm_ar")
    ap.add_argument("--models", default="llama3-70b,llama3-8b,comm-heavy")
    ap.add_argument("--m", "--m-values", dest="m", default=None,
                    help="comma list of global M (default: 128,512,1024,2048,4096,8192); under torchrun write "
                         "--m-values (torchrun takes --m for an abbreviation of its own options)")
    ap.add_argument("--ar-m", default=None, help="comma list of M for GEMM+AR (default: 1,16,64,128)")
    ap.add_argument("--k", type=int, default=None, help="calls per CUDA graph / eager sample (default 5)")
    ap.add_argument("--reps", type=int, default=None)
    ap.add_argument("--no-eager", dest="eager", action="store_false", help="skip the eager column")
    ap.add_argument("--sweep", action="store_true", help="time the fused kernels' tilings per shape, use the best")
    ap.add_argument("--write-table", action="store_true", help="write the measured dispatch table (rank 0)")
    ap.add_argument("--margin", type=float, default=0.0,
                    help="--write-table / --table-from: keep a shape's rule the run timed too unless the winner beats "
                         "it by more than this fraction (bench_gemm.py's option). Default 0, the winner always "
                         "replaces it: unlike bench_gemm's 0.015, because the committed overlap_table.json was "
                         "derived at 0")
    ap.add_argument("--profile", default=None, metavar="DIR", help="profiled AG+GEMM / GEMM+RS calls -> DIR")
    ap.add_argument("--mlp", action="store_true", help="TPMLP end to end against torch")
    ap.add_argument("--mlp-m", default="128,2048,8192")
    ap.add_argument("--tag", default="")
    ap.add_argument("--table-from", default=None, metavar="JSON",
                    help="no GPU: write overlap_table.json from the records of an earlier --sweep run's JSON "
                         "(rules derived again by the current method_rules), and exit")
    ap.add_argument("--eager-rules-from", nargs="+", default=None, metavar="JSON",
                    help="no GPU: set the measured table's eager overrides from these results' eager timings (later "
                         "files win), and exit")
    args = ap.parse_args(argv)
    if args.probe:
        ap.error("--probe must be the first option (the options after its name are the probe's)")
    try:
        check_margin(args.margin, "--margin")
    except ValueError as exc:
        ap.error(str(exc))
    if args.eager_rules_from:
        path, count = add_eager_rules(args.eager_rules_from)
        print(f"dispatch table: {path} ({count} shape rules updated)")
        return
    if args.table_from:
        with open(args.table_from) as f:
            doc = json.load(f)
        if doc.get("shared_gpu"):
            raise SystemExit(f"bench_overlap --table-from {args.table_from}: {NO_TABLE}")
        # the rules are derived again from the records (the current method_rules), not copied from the file
        doc["dispatch_rules"], doc["dispatch_configs"] = method_rules(
            [r for r in doc.get("records", []) if r.get("op") != "tp_mlp"], doc.get("world_size", 2))
        print("dispatch table:", write_table(doc, os.path.basename(args.table_from), args.margin))
        return
    unknown = [op for op in args.ops.split(",") if op and op not in ("ag_gemm", "gemm_rs", "gemm_ar")]
    if unknown:
        ap.error(f"--ops: unknown {unknown}; accepted: ag_gemm, gemm_rs, gemm_ar")
    bad_models = [m for m in args.models.split(",") if m not in MODELS]
    if bad_models:
        ap.error(f"--models: unknown {bad_models}; accepted: {', '.join(MODELS)}")
    args.k = args.k or (3 if args.quick else None)  # None: calls_per_sample picks k per shape
    args.reps = args.reps or (5 if args.quick else 15)
    ms = [int(x) for x in args.m.split(",")] if args.m else (QUICK_M if args.quick else FULL_M)
    ar_ms = [int(x) for x in args.ar_m.split(",")] if args.ar_m else ([16, 128] if args.quick else AR_M)
    args.mlp_m = [int(x) for x in args.mlp_m.split(",")]

    import triton_dist.utils as tdu

    tdu.initialize_distributed()
    rank, W = dist.get_rank(), dist.get_world_size()
    from triton_dist.runtime.torch_collectives import group_has_nccl

    topo = topology()
    shared = not group_has_nccl()  # ranks share a GPU: a gloo-only group
    if rank == 0:
        base_line = ("ours_seq (our collectives, auto, + torch.matmul): no NCCL" if shared else
                     "torch_seq (NCCL + cuBLAS)")
        print(f"bench_overlap: {topology_line(topo)}; sequential baseline {base_line}", flush=True)
    if shared and args.write_table:
        tdu.finalize_distributed()
        raise SystemExit(f"bench_overlap --write-table: {NO_TABLE}")
    gname, symm_err = (None, NO_SYMM) if shared else symm_group_name()
    stamp = harness.utc_stamp()
    outdir = harness.results_dir()
    os.makedirs(outdir, exist_ok=True)
    records, failures = [], []
    ops = [op for op in args.ops.split(",") if op]
    todo = []
    for model in args.models.split(","):
        for op in ops:
            if op == "gemm_ar":
                continue
            for M in (COMM_HEAVY_M if model == "comm-heavy" else ms):
                todo.append((op, model, M, None))
    if "gemm_ar" in ops:
        for shape in AR_SHAPES:
            for M in ar_ms:
                todo.append(("gemm_ar", f"decode-k{shape[0]}-n{shape[1]}", M, shape))
    seq = SeqCollectives(*seq_capacity(todo, W, args.mlp_m if args.mlp else ())) if shared else None
    for op, model, M, shape in todo:
        try:
            if op == "ag_gemm":
                bench_ag(model, M, args, rank, W, gname, records, seq=seq)
            else:
                bench_partials(op, model, M, args, rank, W, gname, records, shape, seq=seq)
            if rank == 0:
                r = records[-1]
                print(json.dumps({k: (round(v, 3) if isinstance(v, float) else v) for k, v in r.items()
                                  if k not in ("errors", "sweep")}), flush=True)
                if r["errors"]:
                    print("  errors:", r["errors"], flush=True)
        except Exception as exc:  # noqa: BLE001
            failures.append({"op": op, "model": model, "M": M, "error": traceback.format_exc()[-2000:]})
            if rank == 0:
                print(f"FAILED {op} {model} M={M}: {exc}", flush=True)
    profiles = {}
    if args.profile:
        os.makedirs(args.profile, exist_ok=True)
        profiles = profile_calls(args, rank, W, args.profile, stamp)
    if args.mlp:
        try:
            bench_mlp(args, rank, W, records, seq=seq)
        except Exception as exc:  # noqa: BLE001
            failures.append({"op": "tp_mlp", "error": traceback.format_exc()[-2000:]})
            if rank == 0:
                print(f"FAILED tp_mlp: {exc}", flush=True)
    if rank == 0:
        base = os.path.join(outdir, f"overlap-{stamp}{('-' + args.tag) if args.tag else ''}")
        doc = harness.result_header(
            "bench_overlap", topo, stamp, world_size=W, quick=args.quick,
            k=args.k or "per shape (each record's k)", reps=args.reps,
            timing="CUDA-graph replay of k calls (results); eager k calls "
            "(eager); CUDA events, median of reps, max over ranks; graph samples of one shape interleaved "
            "round-robin across implementations and baselines")
        doc.update({
            "sequential_baseline": ("ours_seq: triton_dist.ops all_gather / reduce_scatter / all_reduce (auto) + "
                                    "torch.matmul, comm_seq the collective alone; no NCCL: ranks share a GPU"
                                    if shared else "torch_seq: NCCL + cuBLAS, comm_nccl the collective alone"),
            "env": {k: os.environ.get(k) for k in ("NVSHMEM_DISABLE_NVLS", "NCCL_NVLS_ENABLE",
                                                   "TORCH_SYMM_MEM_DISABLE_MULTICAST")},
            "torch_symm_available": gname is not None, "torch_symm_error": symm_err,
            "graph_failures": harness.GRAPH_FAILURES, "profiles": profiles, "records": records, "failures": failures})
        rules, configs = method_rules([r for r in records if r["op"] != "tp_mlp"], W)
        doc["dispatch_rules"] = rules
        doc["dispatch_configs"] = configs
        harness.write_json(base + ".json", doc)
        if plot([r for r in records], base + ".png", shared=shared):
            print("plot:", base + ".png")
        print("results:", base + ".json")
        summary(records)
        if args.write_table and rules:
            print("dispatch table:", write_table(doc, os.path.basename(base) + ".json", args.margin))
    dist.barrier()
    if seq is not None:
        seq.close()
    tdu.finalize_distributed()












def add_eager_rules(paths):
    """No GPU: set the ``"eager"`` entries of the measured table's shape rules from the eager timings in the result
    JSONs ``paths`` (``triton_dist.ops.overlap_table.apply_eager_rules``). Returns ``(path, updated rule count)``.
    Refuses (SystemExit, nothing written) when any of ``paths`` is from ranks that shared a GPU (``shared_gpu``)."""
    from triton_dist.ops import overlap_table as otab

    docs = []
    for path in paths:  # every file first: one from ranks sharing a GPU refuses the whole update
        with open(path) as f:
            docs.append(json.load(f))
        if docs[-1].get("shared_gpu"):
            raise SystemExit(f"bench_overlap --eager-rules-from {path}: {NO_TABLE}")
    table = otab.OVERLAP_TABLE.document(reload=True)
    if table is None or table.get("status") != "measured":
        raise SystemExit("--eager-rules-from: the table in the tree is not a measured one (run --write-table first)")
    count = otab.apply_eager_rules(table, docs, ", ".join(os.path.relpath(p, HERE) for p in paths))
    return otab.OVERLAP_TABLE.write(table), count


def write_table(doc, source, margin=0.0):
    """Write the overlap dispatch table (``triton_dist.ops.overlap_table.OVERLAP_TABLE``'s file) from a results
    document (its ``dispatch_rules`` / ``dispatch_configs``), merged into the table already there
    (``overlap_table.build_overlap_table``, with its ``margin``). Returns the path. Refuses (SystemExit) a document
    from ranks that shared a GPU (``shared_gpu``)."""
    from triton_dist.ops import overlap_table as otab

    if doc.get("shared_gpu"):
        raise SystemExit(f"bench_overlap --write-table: {NO_TABLE}")
    table = otab.build_overlap_table(doc, source, otab.OVERLAP_TABLE.document(reload=True), margin)
    return otab.OVERLAP_TABLE.write(table)


def summary(records):
    """One line per record: the ratios the targets are stated in. ``seq`` / ``comm`` / ``vs_seq``: torch_seq /
    comm_nccl, or ours_seq / comm_seq (marked ``*``) where ranks shared a GPU (no NCCL)."""
    print(f"{'op':8} {'model':22} {'M':>5} {'auto':>8} {'seq':>8} {'symm':>8} {'gemm':>8} {'comm':>8} "
          f"{'a/bound':>7} {'vs_seq':>6} {'vs_symm':>7} {'best':>12}")
    for r in records:
        res = r["results"]

        def g(*keys):
            v = next((res[k] for k in keys if k in res), None)
            star = "*" if any(k in res for k in keys[1:]) and keys[0] not in res else " "
            return f"{v:7.1f}{star}" if isinstance(v, float) else f"{'-':>8}"

        def f(*keys, w):
            v = next((r[k] for k in keys if k in r), None)
            return f"{v:{w}.3f}" if isinstance(v, float) else f"{'-':>{w}}"

        print(f"{r['op']:8} {r['model']:22} {r['M']:5d} {g('ours/auto')} {g('torch_seq', 'ours_seq')} "
              f"{g('torch_symm')} {g('gemm_cublas')} {g('comm_nccl', 'comm_seq')} {f('auto_over_bound', w=7)} "
              f"{f('auto_vs_seq', 'auto_vs_ours_seq', w=6)} {f('auto_vs_symm', w=7)} "
              f"{str(r.get('best_ours', '-')):>12}")


if __name__ == "__main__":
    main()
