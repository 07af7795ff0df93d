"""One-off measurements of the overlapped GEMMs, run as options of the overlap bench (2 GPUs under torchrun unless a
probe says otherwise; ``--probe NAME`` first, then the probe's own options):

    torchrun --nproc_per_node 2 benchmarks/bench_overlap.py --probe ag-gemm [--shapes ...] [--configs ...]
    torchrun --nproc_per_node 2 benchmarks/bench_overlap.py --probe gemm-ar [--ks ...] [--ms ...]
    torchrun --nproc_per_node 2 benchmarks/bench_overlap.py --probe gemm-rs [--shapes ...] [--pieces ...]
    torchrun --nproc_per_node 1 benchmarks/bench_overlap.py --probe rs-own [--shapes ...] [--variants ...]
    torchrun --nproc_per_node 2 benchmarks/bench_overlap.py --probe timing [--shapes ...] [--k 10]
    torchrun --nproc_per_node 2 benchmarks/bench_overlap.py --probe trace [--cases CASE,...] [--out DIR]

They were the scripts ``benchmarks/probe_ag.py``, ``probe_gemm_ar.py``, ``probe_gemm_rs.py``, ``probe_rs_own.py``,
``probe_timing.py`` and ``trace_overlap.py`` (the results READMEs cite them by those names); their JSON keeps its ``benchmark`` name
(``probe_ag``, ...) and file name (``<benchmark>-<stamp>.json`` in ``--out``). Every probe times through
benchmarks/harness.py (CUDA-graph replay of k calls, samples interleaved across implementations, median of reps, max
over ranks) and opens its JSON with the harness's result header (provenance, tree fingerprint, topology). Ranks that
share a GPU (no NCCL in the group): NCCL / torch baselines are skipped (each record's ``skipped`` says why) and our
collectives stand in where the probe says so."""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys

import torch
import torch.distributed as dist

import harness

HERE = os.path.dirname(os.path.abspath(__file__))

#: why a probe skips its NCCL / torch baselines where ranks share a GPU
NO_NCCL = ("skipped: ranks share a GPU (gloo-only process group, no NCCL): NCCL, torch symmetric memory and torch's "
           "sequential path (host copies, not capturable) cannot be timed")


# ------------------------------------------------------------------------------------------------ shared by the probes
def probe_parser(name: str, doc: str, shapes=None, reps: int = 7, k: int = 10) -> argparse.ArgumentParser:
    """An argument parser with the probes' common options: ``--out`` (results folder), ``--k`` (calls per CUDA
    graph sample), ``--reps`` (samples) and, where ``shapes`` is given, ``--shapes`` (``model:M,...`` of
    ``bench_overlap.MODELS``, default ``shapes``)."""
    ap = argparse.ArgumentParser(prog=f"bench_overlap.py --probe {name}", description=doc,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.path.join(HERE, "results"))
    ap.add_argument("--k", type=int, default=k)
    ap.add_argument("--reps", type=int, default=reps)
    if shapes is not None:
        ap.add_argument("--shapes", default=shapes, help="model:M,... (bench_overlap's MODELS)")
    return ap


def int_list(v: str):
    """``"4,8"`` -> ``[4, 8]`` (an argparse type)."""
    return [int(x) for x in v.split(",") if x]


def rs_shapes(spec: str, world: int):
    """``"model:M,..."`` -> ``(model, M, K per rank, N)`` of GEMM+RS at each (``bench_overlap.MODELS``)."""
    import bench_overlap as bo

    for item in spec.split(","):
        model, m = item.split(":")
        _, _, k_tot, n = bo.MODELS[model]
        yield model, int(m), k_tot // world, n


def start(out: str, name: str):
    """Join the ranks (``triton_dist.utils.initialize_distributed``), create ``out``, install the TMA descriptor
    allocator, print the topology (rank 0); returns ``(rank, world, stamp)``."""
    import triton_dist.utils as tdu
    from provenance import topology_line
    from triton_dist.kernels import gemm_config as gc

    tdu.initialize_distributed()
    if dist.get_rank() == 0:
        print(f"bench_overlap --probe {name}: {topology_line()}", flush=True)
    os.makedirs(out, exist_ok=True)
    gc.ensure_tma_allocator()
    return dist.get_rank(), dist.get_world_size(), harness.utc_stamp()


def finish(args, name: str, stamp: str, records, timing: str, rank: int, **extra) -> None:
    """Rank 0 writes ``<out>/<name>-<stamp>.json`` (the harness's result header, ``timing``, ``extra``, records) and
    prints its path; then every rank leaves the distributed setup."""
    import triton_dist.utils as tdu

    if rank == 0:
        doc = harness.result_header(name, stamp=stamp, timing=timing, **extra)
        doc["records"] = records
        print("results:", harness.write_json(os.path.join(args.out, f"{name}-{stamp}.json"), doc))
    dist.barrier()
    tdu.finalize_distributed()


def no_nccl() -> bool:
    """Whether the process group lacks NCCL (ranks share a GPU: gloo only), so NCCL / torch symm-mem baselines cannot
    run and torch's sequential path would run on host copies (never in a CUDA graph)."""
    return not harness.group_has_nccl()


def _rounded(res):
    return {n: round(t, 1) for n, (t, _) in res.items()}


# ---------------------------------------------------------------------------------------------------------- ag-gemm
def probe_ag_gemm(argv):
    """AG+GEMM at a tiling: ``ag_gemm`` methods ``sm`` (also with ``--comm-programs`` push programs) and ``ce`` and
    our GEMM alone (the gathered ``A`` times this rank's ``B``), each at every ``--configs`` tiling, against cuBLAS
    and torch's sequential path, all timed interleaved as bench_overlap's final table is. Checks the sweep's AG+GEMM
    tilings side by side with cuBLAS, at the shapes where AG+GEMM misses its bound (8B, M = 2048 and 4096).

``--shape-tp T`` (default: the world size) takes N per rank of TP=T (``N_total / T``): with one GPU
(``torchrun --nproc_per_node 1 ... --shape-tp 2``) each method runs the GEMM one rank runs at TP=2 (all ``M`` rows,
nothing to wait for): the fused kernels' compute half against our GEMM alone and cuBLAS at the same tiling. Every
implementation's result is checked against cuBLAS on the gathered rows first (a wrong one is recorded in ``errors``
and not timed). Prints one JSON line per shape (rank 0) and writes ``probe_ag-<stamp>.json`` into ``--out``.
Ranks that share a GPU: the gathered rows come from torch_collectives (gloo on host copies) and ``torch_seq`` is
replaced by ``ours_seq`` (our all-gather, auto, + cuBLAS)."""
    ap = probe_parser("ag-gemm", probe_ag_gemm.__doc__, "llama3-8b:2048,llama3-8b:4096")
    ap.add_argument("--configs", default="128x256x64x8x3,128x256x64x8x3f,128x128x64x4x4f,128x128x64x8x4",
                    help="tilings (BMxBNxBKxWARPSxSTAGES[f][t]) of the fused kernels and of our GEMM alone")
    ap.add_argument("--methods", default="sm,ce", help="ag_gemm methods timed at each tiling")
    ap.add_argument("--shape-tp", type=int, default=0, help="N per rank of this TP degree (default: the world size)")
    ap.add_argument("--plain-launch", action="store_true",
                    help="also each method on a context whose fused launches are not cooperative (name <method>_plain)")
    ap.add_argument("--comm-programs", type=int_list, default=[],
                    help="also sm with these push-program counts (default context: 8)")
    args = ap.parse_args(argv)

    import bench_overlap as bo
    from triton_dist.kernels import gemm_config as gc
    from triton_dist.ops.gemm import matmul
    from triton_dist.ops import overlap as ov
    from triton_dist.runtime import torch_collectives as TC

    rank, W, stamp = start(args.out, "ag-gemm")
    shared = no_nccl()
    tp = args.shape_tp or W
    records = []
    for spec in args.shapes.split(","):
        model, m = spec.split(":")
        M = int(m)
        K, N_tot, _, _ = bo.MODELS[model]
        N = N_tot // tp
        ctx = ov.create_ag_gemm_context(M // W, K, torch.bfloat16)
        # sm with fewer push programs: more GEMM programs (contexts of their own: the signals are per push program)
        ctx_g = {G: ov.create_ag_gemm_context(M // W, K, torch.bfloat16, methods=("sm", ), comm_programs=G)
                 for G in args.comm_programs}
        ctx_p = None
        if args.plain_launch:  # the same context kind with plain (not cooperative) launches of the fused kernel
            ctx_p = ov.create_ag_gemm_context(M // W, K, torch.bfloat16)
            ctx_p.cooperative = False
        a, b = harness.rand((M // W, K), 1 + rank), harness.rand((K, N), 100 + rank)
        full = torch.empty((M, K), dtype=torch.bfloat16, device="cuda")
        # the gathered rows (NCCL, or gloo on host copies where ranks share a GPU): cuBLAS on them is the reference
        TC.all_gather_into_tensor(full, a)
        c = torch.empty((M, N), dtype=torch.bfloat16, device="cuda")
        ref = torch.matmul(full, b)
        fns = {"cublas": lambda: torch.matmul(full, b, out=c)}
        seq = None
        if shared:
            seq = bo.SeqCollectives((M // W) * K, 0, 0)
            fns["ours_seq"] = lambda: torch.matmul(seq.all_gather(a), b)
        else:
            fns["torch_seq"] = lambda: ov.ag_gemm(a, b, ctx, method="torch")
        for cfg in args.configs.split(","):
            tc = gc.TileConfig.parse(cfg)
            fns[f"gemm_ours@{cfg}"] = lambda tc=tc: matmul(full, b, out=c, config=tc)
            for meth in args.methods.split(","):
                fns[f"{meth}@{cfg}"] = bo._with_config(lambda meth=meth: ov.ag_gemm(a, b, ctx, method=meth), cfg)
                if ctx_p is not None:
                    fns[f"{meth}_plain@{cfg}"] = bo._with_config(
                        lambda meth=meth: ov.ag_gemm(a, b, ctx_p, method=meth), cfg)
            for G, cg in ctx_g.items():
                fns[f"sm_g{G}@{cfg}"] = bo._with_config(lambda cg=cg: ov.ag_gemm(a, b, cg, method="sm"), cfg)
        errors = harness.drop_failing(fns, ref)
        res = _rounded(harness.time_interleaved(fns, args.k, args.reps))
        rec = {"model": model, "M": M, "K": K, "N_per_rank": N, "shape_tp": tp, "world": W, "k": args.k,
               "reps": args.reps, "us": res, "over_cublas": {n: round(t / res["cublas"], 3) for n, t in res.items()},
               "errors": errors}
        if shared:
            rec["skipped"] = {"torch_seq": NO_NCCL}
        records.append(rec)
        if rank == 0:
            print(json.dumps({"model": model, "M": M, **dict(sorted(res.items(), key=lambda kv: kv[1])),
                              "errors": errors}), flush=True)
        for cx in [ctx, seq, ctx_p, *ctx_g.values()]:
            if cx is not None:
                cx.close()
    finish(args, "probe_ag", stamp, records, "harness.time_interleaved (CUDA-graph replay of k calls, median of reps, "
           "max over ranks)", rank)


# ---------------------------------------------------------------------------------------------------------- gemm-ar
#: fused-kernel tilings of the gemm-ar probe (TMA loads), and those also tried with pointer loads (``p``)
AR_CFGS = ["16x64x128x4x4", "16x64x128x4x6", "16x64x256x4x3", "16x32x256x4x4", "16x128x128x4x4k2", "16x64x128x8x4"]
AR_PTR_CFGS = ["16x64x128x4x4", "16x64x64x4x8"]


def probe_gemm_ar(argv):
    """Where the time of a decode GEMM+AR goes: the fused kernel at a few tilings, with TMA and with the pointer path,
    against the same tiling's GEMM alone (our ``gemm_kernel``, no communication), cuBLAS and the one-shot all-reduce
    alone, at K_per_rank in ``--ks`` (K=128: the kernel's fixed cost, almost no weights), M in ``--ms``, N=8192.
    Writes ``probe_gemm_ar-<stamp>.json`` (one line per shape printed) so the split between the weight stream
    (``gemm@cfg`` vs the HBM floor ``bytes(B) / 4.3 TB/s``), the fixed cost and the all-reduce tail can be read off.
    Ranks that share a GPU: ``torch_seq`` is skipped; ``one_shot`` (cuBLAS + our one-shot all-reduce) is the
    sequential path there."""
    ap = probe_parser("gemm-ar", probe_gemm_ar.__doc__, reps=9, k=20)
    ap.add_argument("--ks", default="128,3584,7168")
    ap.add_argument("--ms", default="1,16")
    args = ap.parse_args(argv)

    from triton_dist.kernels import gemm as g
    from triton_dist.kernels import gemm_config as gc
    from triton_dist.ops import overlap as ov
    from triton_dist.ops.collectives import all_reduce

    import bench_overlap as bo

    rank, _, stamp = start(args.out, "gemm-ar")
    shared = no_nccl()
    N = 8192
    ctx = ov.create_gemm_ar_context(16, N, torch.bfloat16)
    sms = ctx.num_sms
    records = []
    for K in int_list(args.ks):
        for M in int_list(args.ms):
            a, b = harness.rand((M, K), 1 + rank), harness.rand((K, N), 100 + rank)
            c = torch.empty((M, N), dtype=torch.bfloat16, device="cuda")

            def fused(cfg):
                return bo._with_config(lambda: ov.gemm_ar(a, b, ctx, method="fused"), cfg)

            def gemm_only(cfg):
                tc = gc.TileConfig.parse(cfg)
                grid = (min(sms, -(-M // tc.BLOCK_M) * -(-N // tc.BLOCK_N)), )

                def run():
                    g.gemm_kernel[grid](a, b, c, c, M, N, K, a.stride(0), 1, b.stride(0), 1, c.stride(0), 1,
                                        **tc.meta(), NUM_SMS=grid[0], USE_TMA=True, HAS_SCALE=False, **tc.launch())
                return run

            fns = {}
            for cfg in AR_CFGS:
                fns[f"fused@{cfg}"] = fused(cfg)
                if "k" not in cfg:
                    fns[f"gemm@{cfg}"] = gemm_only(cfg)
            for cfg in AR_PTR_CFGS:  # the same tilings with pointer loads (the "p" suffix)
                fns[f"fused_ptr@{cfg}"] = fused(cfg + "p")
            fns["one_shot"] = lambda: ov.gemm_ar(a, b, ctx, method="one_shot")
            fns["cublas"] = lambda: torch.matmul(a, b, out=c)
            fns["ar_one_shot"] = lambda: all_reduce(c, ctx.ar_ctx, method="one_shot")
            if not shared:
                fns["torch_seq"] = lambda: ov.gemm_ar(a, b, ctx, method="torch")
            errors = harness.drop_failing(fns)
            res = {n: t for n, (t, _) in harness.time_interleaved(fns, args.k, args.reps).items()}
            rec = {"M": M, "K": K, "N": N, "us": res, "errors": errors, "hbm_floor_us_at_4.3TBps": K * N * 2 / 4.3e6}
            if shared:
                rec["skipped"] = {"torch_seq": NO_NCCL}
            records.append(rec)
            if rank == 0:
                print(json.dumps({"M": M, "K": K, **{n: round(v, 1) for n, v in sorted(res.items(),
                                                                                      key=lambda kv: kv[1])},
                                  "errors": errors}), flush=True)
    ctx.close()
    finish(args, "probe_gemm_ar", stamp, records, "CUDA-graph replay of k calls, interleaved, median of reps, max over "
           "ranks", rank, k=args.k, reps=args.reps)


# ---------------------------------------------------------------------------------------------------------- gemm-rs
def summarize(tracks, names):
    """Per task type: count, median and max duration (us); the span of the call and of the tiles' main loops."""
    by = {}
    for tr in tracks:
        for t in tr.tasks:
            by.setdefault(names[t.task_type], []).append(t.duration_ns / 1e3)
    out = {n: {"count": len(v), "median_us": round(statistics.median(v), 2), "max_us": round(max(v), 2),
               "sum_us": round(sum(v), 1)} for n, v in by.items()}
    starts = [t.start_ns for tr in tracks for t in tr.tasks]
    ends = [t.end_ns for tr in tracks for t in tr.tasks]
    if starts:
        t0 = min(starts)
        out["span_us"] = round((max(ends) - t0) / 1e3, 1)
        tiles = [[t for t in tr.tasks if names[t.task_type] == "tile"] for tr in tracks]
        firsts = [min(ts, key=lambda t: t.start_ns) for ts in tiles if ts]
        lasts = [max(ts, key=lambda t: t.end_ns) for ts in tiles if ts]
        out["first_tile_start_us"] = [round((min(t.start_ns for t in firsts) - t0) / 1e3, 1),
                                      round((max(t.start_ns for t in firsts) - t0) / 1e3, 1)]
        out["last_tile_end_us"] = [round((min(t.end_ns for t in lasts) - t0) / 1e3, 1),
                                   round((max(t.end_ns for t in lasts) - t0) / 1e3, 1)]
        prog_end = [max(t.end_ns for t in tr.tasks) for tr in tracks if tr.tasks]
        out["program_end_us"] = [round((min(prog_end) - t0) / 1e3, 1), round((max(prog_end) - t0) / 1e3, 1)]
        # between a program's consecutive main loops: its epilogue (push or waits + reduction, the signal)
        ordered = [sorted(ts, key=lambda t: t.start_ns) for ts in tiles]
        gaps = [(b.start_ns - a.end_ns) / 1e3 for ts in ordered for a, b in zip(ts, ts[1:])]
        if gaps:
            out["gap_between_tiles_us"] = {"median": round(statistics.median(gaps), 2), "max": round(max(gaps), 2)}
    return out


def probe_gemm_rs(argv):
    """Where the time of the fused GEMM+ReduceScatter goes: the fused kernel with its peer tiles pushed by TMA store
and streamed in row pieces during the program's next main loop (``--pieces``), against the same tiling's GEMM alone
(``gemm_kernel`` over all ``M`` rows, no communication), cuBLAS and the ``ce`` method, at Llama-3 TP=2 shapes; then
one profiled fused call per shape (``triton_dist.tools.profiler``), summarised per task type and per program: the
count and the median / max duration, the call's span, and the span of the programs' first and last tiles' main
loops, so a gap between the GEMM alone and the fused call can be placed (the pushes, the waits for the peer's tiles,
or the main loops themselves). Writes ``probe_gemm_rs-<stamp>.json`` and, per shape, the Perfetto JSON + Gantt PNG
of the profiled call."""
    ap = probe_parser("gemm-rs", probe_gemm_rs.__doc__, "llama3-8b:2048,llama3-70b:2048,llama3-70b:8192", reps=9)
    ap.add_argument("--config", default=None, help="tiling of every launch (default: the context's for the shape)")
    ap.add_argument("--pieces", type=int_list, default=[4, 8, 16],
                    help="fused with the peer tiles streamed in this many row pieces, timed (comma list)")
    ap.add_argument("--profile-pieces", type=int_list, default=[8],
                    help="pieces values also profiled (traces exported)")
    ap.add_argument("--traces", type=int, default=1, help="0: no Perfetto JSON / Gantt PNG files")
    ap.add_argument("--ptr-variants", action="store_true",
                    help="also the round-5 variants: pointer push, pointer-load main loops, flattened GEMM")
    args = ap.parse_args(argv)

    import bench_overlap as bo
    from provenance import label_json
    from triton_dist.kernels import gemm as g
    from triton_dist.kernels import gemm_config as gc
    from triton_dist.kernels import gemm_rs as rsk
    from triton_dist.ops import overlap as ov
    from triton_dist.tools.profiler import alloc_profiler_buffer, export_to_perfetto_trace, reset_profiler_buffer
    from triton_dist.tools.profiler.viewer import parse_to_tracks

    rank, W, stamp = start(args.out, "gemm-rs")
    buf = alloc_profiler_buffer(160 * 512)
    records = []
    for model, M, K, N in rs_shapes(args.shapes, W):
        ctx = ov.create_gemm_rs_context(M, N, torch.bfloat16)
        cfg = gc.TileConfig.parse(args.config) if args.config else ctx._cfg(M, N, K, 2)
        a, b = harness.rand((M, K), 1 + rank), harness.rand((K, N), 100 + rank)
        c = torch.empty((M, N), dtype=torch.bfloat16, device="cuda")
        sms = ctx.num_sms
        fit = ov._fit_smem(cfg, 2, ctx.smem_bytes)
        ptr_cfg = gc.TileConfig.parse(str(cfg).replace("f", "") + "p") if not cfg.pointer_loads else cfg

        def fused(push, tiling=cfg, pieces=0):
            def run():
                ctx.tma_push = push
                with bo.overlap_config(str(tiling)):
                    return ov.gemm_rs(a, b, ctx, method="fused", pieces=pieces)
            return run

        def gemm_only(flat, tma=True):
            grid = (min(sms, -(-M // cfg.BLOCK_M) * -(-N // cfg.BLOCK_N)), )

            def run():
                g.gemm_kernel[grid](a, b, c, c, M, N, K, a.stride(0), 1, b.stride(0), 1, c.stride(0), 1,
                                    **fit.meta(with_flatten=False), NUM_SMS=grid[0], USE_TMA=tma, HAS_SCALE=False,
                                    FLATTEN=flat, **fit.launch())
            return run

        # *_ptr_loads: the main loop's operands by pointer loads (cp.async), not TMA: does a TMA store draining over
        # NVLink hold up the next tile's TMA loads?
        fns = {"fused_tma_push": fused(True), "gemm_same_tiling": gemm_only(False),
               "cublas": lambda: torch.matmul(a, b, out=c),
               "ce_p1": lambda: ov.gemm_rs(a, b, ctx, method="ce", pieces=1)}
        for p in args.pieces:  # peer tiles streamed in p row pieces during the next main loop
            fns[f"fused_p{p}"] = fused(True, pieces=p)
        if args.ptr_variants:
            fns.update({"fused_ptr_push": fused(False), "fused_tma_push_ptr_loads": fused(True, ptr_cfg),
                        "fused_ptr_push_ptr_loads": fused(False, ptr_cfg), "gemm_same_tiling_flat": gemm_only(True),
                        "gemm_same_tiling_ptr_loads": gemm_only(False, False)})
        errors = harness.drop_failing(fns)
        res = {n: t for n, (t, _) in harness.time_interleaved(fns, args.k, args.reps).items()}
        prof = {}
        variants = [(True, cfg, 0)] + [(True, cfg, p) for p in args.profile_pieces]
        if args.ptr_variants:
            variants += [(False, cfg, 0), (True, ptr_cfg, 0)]
        for push, tiling, pieces in variants:
            ctx.tma_push = push
            with bo.overlap_config(str(tiling)):
                # compile the profiled variant on every rank first: a rank still compiling would show as the other's
                # wait (and an idle peer GPU slows the writes into its memory)
                ov.gemm_rs(a, b, ctx, method="fused", profiler_buffer=buf, pieces=pieces)
                for _ in range(3):
                    ov.gemm_rs(a, b, ctx, method="fused", pieces=pieces)
                torch.cuda.synchronize()
                dist.barrier()
                reset_profiler_buffer(buf)
                dist.barrier()
                for _ in range(3):  # steady state: the profiled call follows back-to-back calls
                    ov.gemm_rs(a, b, ctx, method="fused", pieces=pieces)
                ov.gemm_rs(a, b, ctx, method="fused", profiler_buffer=buf, pieces=pieces)
            torch.cuda.synchronize()
            key = (f"p{pieces}" if pieces else "tma_push" if push else "ptr_push") + \
                ("_ptr_loads" if tiling.pointer_loads else "")
            prof[key] = summarize(parse_to_tracks(buf, rank=rank), rsk.TASKS)
            if push and not tiling.pointer_loads and args.traces:
                base = os.path.join(args.out, f"probe_gemm_rs-{stamp}-{model}-{M}-{key}-r{rank}")
                label_json(export_to_perfetto_trace(buf, rsk.TASKS, base + ".json", gantt_png=base + ".png"))
        profs = [None] * W
        dist.all_gather_object(profs, prof)
        rec = {"model": model, "M": M, "K_per_rank": K, "N": N, "config": str(cfg), "launched_config": str(fit),
               "us": res, "errors": errors, "profile": profs}
        records.append(rec)
        if rank == 0:
            print(json.dumps({"model": model, "M": M, "config": str(fit),
                              **{n: round(v, 1) for n, v in sorted(res.items(), key=lambda kv: kv[1])},
                              "errors": errors}), flush=True)
            for r, p in enumerate(profs):
                print(f"  rank {r} profile: {json.dumps(p)}", flush=True)
        ctx.close()
    finish(args, "probe_gemm_rs", stamp, records, "CUDA-graph replay of k calls, interleaved, median of reps, max over "
           "ranks", rank, k=args.k, reps=args.reps)


# ----------------------------------------------------------------------------------------------------------- rs-own
#: own rows x N x K per rank of GEMM+RS at TP=2: 8B M=2048 / 4096 / 8192, 70B M=2048 / 4096 / 8192
RS_OWN_SHAPES = "1024x4096x3584,2048x4096x3584,4096x4096x3584,1024x8192x7168,2048x8192x7168,4096x8192x7168"
RS_OWN_VARIANTS = ("128x256x64x8x3/plain,128x256x64x8x3/flat,128x256x64x8x4/flat,128x128x64x4x6/flat,"
                   "128x128x64x4x4/flat")


def probe_rs_own(argv):
    """The ``ce`` GEMM+RS own-rows GEMM (``kernels.gemm_rs.rs_own_gemm_kernel``) alone, on one GPU (``torchrun
--nproc_per_node 1``): the launch at world 2 with the peer's partial already in the staging and its ready flags
already raised (re-raised before every call), so what is timed is the kernel's compute half: the own rows' main
loop plus the peer partial's load and add. Per own-rows shape (``rows x N x K``, the own half of a TP=2 GEMM+RS):
the autotuned kernel (what ``ce`` launches; its pick is recorded), the kernel at every ``--variants`` variant
(``kernels.gemm_config.GemmVariant`` names, ``plain`` or ``flat``: the kernel has no TMA-store form), our GEMM alone
(``matmul``: the table) and cuBLAS (``torch.matmul``) on the same rows. Every call, GEMMs included, is preceded by
the same flag fill. Each result is checked against torch first. Writes ``probe_rs_own-<stamp>.json`` into ``--out``
and prints one JSON line per shape."""
    ap = probe_parser("rs-own", probe_rs_own.__doc__, RS_OWN_SHAPES, reps=9)
    ap.add_argument("--variants", default=RS_OWN_VARIANTS)
    args = ap.parse_args(argv)

    from triton_dist.kernels import gemm_config as gc
    from triton_dist.ops.gemm import matmul
    from triton_dist.kernels import gemm_rs as rsk
    from triton_dist.ops.overlap import CE_PIECES_MAX

    rank, W, stamp = start(args.out, "rs-own")
    if W != 1:
        raise SystemExit("bench_overlap --probe rs-own: one process (torchrun --nproc_per_node 1)")
    world, sms = 2, gc.num_sms(torch.device("cuda"))
    device = torch.cuda.get_device_name()
    records = []
    for spec in args.shapes.split(","):
        rows, N, K = (int(v) for v in spec.split("x"))
        own, b = harness.rand((rows, K), 1), harness.rand((K, N), 2)
        cap = rows * N
        stage = torch.zeros(world * cap, dtype=torch.bfloat16, device="cuda")
        stage[cap:] = harness.rand((rows, N), 3).reshape(-1)  # peer 1's partial of this rank's rows
        flags = torch.ones(world * CE_PIECES_MAX, dtype=torch.int64, device="cuda")
        count = torch.zeros(1, dtype=torch.int64, device="cuda")
        out = torch.empty((rows, N), dtype=torch.bfloat16, device="cuda")
        ref = (own.float() @ b.float() + stage[cap:].view(rows, N).float())
        common = (own, b, out, stage, flags, count, rows, N, K, own.stride(0), b.stride(0), b.stride(1),
                  out.stride(0), cap, 0)

        def grid_for(bm, bn):  # the launch ce makes: one program per tile, at most one per SM
            return (max(1, min(sms, -(-rows // bm) * -(-N // bn))), )

        def fixed(var):
            cfg = var.config
            if var.tma_store:
                raise SystemExit(f"bench_overlap --probe rs-own: {var}: rs_own_gemm_kernel has no TMA-store form")
            grid = grid_for(cfg.BLOCK_M, cfg.BLOCK_N)

            def run():
                flags.fill_(1)
                rsk.rs_own_gemm_kernel[grid](*common, WORLD=world, PIECES=1, FLAG_STRIDE=CE_PIECES_MAX,
                                             **cfg.meta(with_flatten=False), NUM_SMS=sms, USE_TMA=not cfg.pointer_loads,
                                             FLATTEN=var.flatten, **cfg.launch())
                return out
            return run

        tuned = rsk.rs_own_gemm_autotuned()

        def autotuned():
            flags.fill_(1)
            tuned[lambda m: grid_for(m["BLOCK_M"], m["BLOCK_N"])](
                *common, WORLD=world, PIECES=1, FLAG_STRIDE=CE_PIECES_MAX, NUM_SMS=sms, USE_TMA=True)
            return out

        c = torch.empty_like(out)

        def cublas():
            flags.fill_(1)
            return torch.matmul(own, b, out=c)

        def ours():
            flags.fill_(1)
            return matmul(own, b, out=c)

        fns = {"rs_own/autotune": autotuned}
        for name in args.variants.split(","):
            fns.setdefault(f"rs_own/{name}", fixed(gc.GemmVariant.parse(name)))
        errors = harness.drop_failing(fns, ref)
        # the autotuner's pick for this shape (its cache is keyed on M_s, N, K first)
        pick = next((str(cfg) for key, cfg in tuned.cache.items() if tuple(key[:3]) == (rows, N, K)), None)
        fns.update({"gemm_ours/auto": ours, "cublas": cublas})
        res = _rounded(harness.time_interleaved(fns, args.k, args.reps))
        rec = {"rows": rows, "N": N, "K": K, "k": args.k, "reps": args.reps, "us": res, "autotune_pick": pick,
               "over_cublas": {n: round(t / res["cublas"], 3) for n, t in res.items()}, "errors": errors}
        records.append(rec)
        print(json.dumps({"shape": spec, "autotune_pick": pick, **dict(sorted(res.items(), key=lambda kv: kv[1])),
                          "errors": errors}), flush=True)
    finish(args, "probe_rs_own", stamp, records, "harness.time_interleaved (CUDA-graph replay of k calls, median of "
           "reps; every call preceded by the same flag fill)", rank, device=device)


# ----------------------------------------------------------------------------------------------------------- timing
def probe_timing(argv):
    """Does the timing mode change the GEMM+RS figures? The same implementations, cuBLAS included, timed in every mode
side by side (bench_overlap's tiling sweep once timed each tiling alone with k = 5 and its final table interleaved,
and the same kernel differed by up to 15%: results/2026-11-30-overlap-v6/):

* ``alone_k5`` / ``alone_k<K>``: each implementation by itself (``harness.time_graph``), k = 5 and k = ``--k``;
* ``interleaved_small``: cuBLAS, our GEMM and our GEMM+RS methods interleaved (k = ``--k``);
* ``interleaved_all``: the same plus NCCL reduce-scatter, torch sequential and torch's fused symmetric-memory op,
  as the benchmark's final table does.

Ranks that share a GPU: ``nccl_rs``, ``torch_seq`` and ``torch_symm`` are skipped and ``ours_rs`` (our
reduce-scatter, auto) and ``ours_seq`` (cuBLAS + it) are timed in their place. Prints one JSON line per shape (rank
0) and writes ``probe_timing-<stamp>.json`` into ``--out``."""
    args = probe_parser("timing", probe_timing.__doc__, "llama3-70b:2048,llama3-8b:4096").parse_args(argv)

    import bench_overlap as bo
    from triton_dist import ops
    from triton_dist.ops.gemm import matmul
    from triton_dist.ops import overlap as ov
    from triton_dist.runtime import torch_collectives as TC

    rank, W, stamp = start(args.out, "timing")
    shared = no_nccl()
    gname = None if shared else bo.symm_group_name()[0]
    records = []
    for model, M, K, N in rs_shapes(args.shapes, W):
        ctx = ov.create_gemm_rs_context(M, N, torch.bfloat16)
        rs_ctx = ops.create_reduce_scatter_ctx(M * N, torch.bfloat16) if shared else None
        a, b = harness.rand((M, K), 1 + rank), harness.rand((K, N), 100 + rank)
        c = torch.empty((M, N), dtype=torch.bfloat16, device="cuda")
        shard = torch.empty((M // W, N), dtype=torch.bfloat16, device="cuda")
        ours = {"cublas": lambda: torch.matmul(a, b, out=c), "gemm_ours": lambda: matmul(a, b),
                "fused": lambda: ov.gemm_rs(a, b, ctx, method="fused"),
                "fused_p8": lambda: ov.gemm_rs(a, b, ctx, method="fused", pieces=8),
                "ce": lambda: ov.gemm_rs(a, b, ctx, method="ce")}
        if shared:
            base = {"ours_rs": lambda: ops.reduce_scatter(c, rs_ctx, out=shard),
                    "ours_seq": lambda: ops.reduce_scatter(torch.matmul(a, b), rs_ctx)}
        else:
            base = {"nccl_rs": lambda: TC.dist_reduce_scatter_single(shard, c),
                    "torch_seq": lambda: ov.gemm_rs(a, b, ctx, method="torch")}
        if gname is not None:
            base["torch_symm"] = lambda: torch.ops.symm_mem.fused_matmul_reduce_scatter(a, b, "sum", 0, gname)
        errors = harness.drop_failing(ours)
        errors.update(harness.drop_failing(base))
        res = {}
        for k in sorted({5, args.k}):
            res[f"alone_k{k}"] = {n: round(harness.time_graph(n, fn, k, args.reps)[0], 1) for n, fn in ours.items()}
        res["interleaved_small"] = _rounded(harness.time_interleaved(ours, args.k, args.reps))
        res["interleaved_all"] = _rounded(harness.time_interleaved({**ours, **base}, args.k, args.reps))
        rec = {"model": model, "M": M, "K_per_rank": K, "N": N, "k": args.k, "reps": args.reps, "us": res,
               "errors": errors}
        if shared:
            rec["skipped"] = {n: NO_NCCL for n in ("nccl_rs", "torch_seq", "torch_symm")}
        records.append(rec)
        if rank == 0:
            print(json.dumps(rec), flush=True)
        ctx.close()
        if rs_ctx is not None:
            rs_ctx.close()
    finish(args, "probe_timing", stamp, records, "harness.time_graph / time_interleaved (CUDA-graph replay of k calls, "
           "median of reps, max over ranks)", rank)


# ------------------------------------------------------------------------------------------------------------ trace
#: the trace probe's default cases (``op:model:M:method[@variant][:nomemops]``)
TRACE_CASES = ["gemm_rs:llama3-8b:2048:ce", "gemm_rs:llama3-8b:2048:ce@p1", "gemm_rs:llama3-8b:8192:ce",
               "gemm_rs:llama3-70b:4096:ce", "gemm_rs:llama3-70b:2048:ce", "gemm_rs:comm-heavy:8192:ce@p4",
               "gemm_rs:llama3-70b:4096:chunked", "ag_gemm:llama3-8b:2048:chunked", "ag_gemm:llama3-8b:2048:ce",
               "ag_gemm:llama3-70b:2048:chunked@f0.25"]


def parse_case(text):
    """``op:model:M:method[@f<frac>|@s<S>][:nomemops]`` -> ``(op, model, M, rule, nomemops)``."""
    from bench_overlap import MODELS
    from triton_dist.ops.overlap_table import method_of

    parts = text.split(":")
    if len(parts) not in (4, 5) or parts[0] not in ("ag_gemm", "gemm_rs") or parts[1] not in MODELS:
        raise ValueError(f"case {text!r}: expected op:model:M:method[:nomemops] with op ag_gemm|gemm_rs and model "
                         f"one of {', '.join(MODELS)}")
    return parts[0], parts[1], int(parts[2]), method_of(parts[3]), len(parts) == 5 and parts[4] == "nomemops"


def _no_memops(ctx, memops):
    """``:nomemops`` cases: the fallbacks of the 0/1 flags (wait kernels, copy-engine raises)."""
    if not memops:
        ctx.memops_wait = ctx.memops_remote = False


def make_call(op, model, M, rule, memops, W, rank):
    """``(context, call)``: one overlap call of the case (its context to close afterwards)."""
    from bench_overlap import MODELS
    from triton_dist.ops import overlap as ov

    rand = harness.rand
    meth = rule["method"]
    if op == "ag_gemm":
        K, N_tot, _, _ = MODELS[model]
        m_loc = M // W
        ctx = ov.create_ag_gemm_context(m_loc, K, torch.bfloat16)
        _no_memops(ctx, memops)
        a, b = rand((m_loc, K), 1 + rank), rand((K, N_tot // W), 100 + rank)
        kw = {}
        if "first_frac" in rule:
            kw["first_rows"] = ov._first_rows(rule, m_loc)
        return ctx, lambda: ov.ag_gemm(a, b, ctx, method=meth, **kw)
    _, _, K_tot, N = MODELS[model]
    ctx = ov.create_gemm_rs_context(M, N, torch.bfloat16)
    _no_memops(ctx, memops)
    a, b = rand((M, K_tot // W), 1 + rank), rand((K_tot // W, N), 100 + rank)
    kw = {k: rule[k] for k in ("sub_chunks", "pieces") if k in rule}
    return ctx, lambda: ov.gemm_rs(a, b, ctx, method=meth, **kw)


def call_graph(call):
    """Three calls (each after a marker kernel) captured in one CUDA graph, replayed twice; returns the graph.
    Graph replay is how the benchmark times the methods: no host launch gaps, no launch skew between the ranks
    after the first call. The caller has warmed ``call`` up (no warm-up calls here: they would be traced)."""
    def marked():
        torch.cuda._sleep(100)  # marker kernel: where each call starts in the trace
        call()

    g = harness.capture_calls(marked, 3, torch.cuda.Stream(), warmup=0)
    for _ in range(2):
        dist.barrier()
        g.replay()
        torch.cuda.synchronize()
    return g


def timeline(trace_path):
    """GPU activities (kernels, memcpy, memset, sync) of the trace: [(stream, start_us, dur_us, name)] sorted."""
    with open(trace_path) as f:
        doc = json.load(f)
    acts = []
    for ev in doc.get("traceEvents", []):
        if ev.get("ph") != "X" or ev.get("cat") not in ("kernel", "gpu_memcpy", "gpu_memset", "cuda_sync"):
            continue
        acts.append((ev.get("args", {}).get("stream", ev.get("tid")), float(ev["ts"]), float(ev.get("dur", 0)),
                     ev.get("name", "?")))
    return sorted(acts, key=lambda x: x[1])


def probe_trace(argv):
    """Where the time of a host-composed overlap method goes: a GPU timeline per stream (torch profiler / CUPTI).

``triton_dist.tools.profiler`` records per-SM tasks inside our Triton kernels; the ``chunked`` / ``one_shot``
methods are sequences of cuBLAS GEMMs, copies and small signal kernels on three streams, which only a CUDA activity
trace shows. For each case
(``op:model:M:method[@f<frac>|@s<S>][:nomemops]``) the probe makes three warm-up calls, then records one
CUDA-graph replay of three back-to-back calls (``--eager``: three eager calls) and prints, for the last one on rank
0, every GPU activity with its stream, start (us from the call's first activity), duration and name, plus the
call's span. The Chrome traces of both ranks go to ``--out``, each with the run's ``topology`` / ``shared_gpu`` at its
top level (ranks that shared a GPU: no NVLink in the timeline)."""
    ap = argparse.ArgumentParser(prog="bench_overlap.py --probe trace", description=probe_trace.__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cases", default=",".join(TRACE_CASES))
    ap.add_argument("--eager", dest="graph", action="store_false",
                    help="trace eager calls (host launch gaps and skew included) instead of a graph replay")
    ap.add_argument("--out", default=harness.results_dir())
    args = ap.parse_args(argv)
    cases = [parse_case(c) for c in args.cases.split(",") if c]
    import triton_dist.utils as tdu
    from provenance import label_json, topology, topology_line

    tdu.initialize_distributed()
    rank, W = dist.get_rank(), dist.get_world_size()
    topo = topology()
    if rank == 0:
        print(f"bench_overlap --probe trace: {topology_line(topo)}", flush=True)
    os.makedirs(args.out, exist_ok=True)
    from torch.profiler import ProfilerActivity, profile

    for text, (op, model, M, rule, nomem) in zip(args.cases.split(","), cases):
        ctx, call = make_call(op, model, M, rule, not nomem, W, rank)
        try:
            for _ in range(3):
                call()
            torch.cuda.synchronize()
            graph = call_graph(call) if args.graph else None
            dist.barrier()
            with profile(activities=[ProfilerActivity.CUDA]) as prof:
                if graph is not None:
                    graph.replay()
                else:
                    for _ in range(3):
                        torch.cuda._sleep(100)  # marker kernel: where each call starts in the trace
                        call()
                torch.cuda.synchronize()
            path = os.path.join(args.out, f"trace-{text.replace(':', '_').replace('@', '-')}-rank{rank}.json")
            prof.export_chrome_trace(path)
            label_json(path, topo)
            acts = timeline(path)
            # the last call: everything after the last marker kernel
            marks = [i for i, a in enumerate(acts) if "spin" in a[3].lower() or "sleep" in a[3].lower()]
            last_call = acts[marks[-1] + 1:] if marks else acts[-len(acts) // 3:]
            if rank == 0 and last_call:
                t0 = last_call[0][1]
                span = max(a[1] + a[2] for a in last_call) - t0
                print(f"== {text}: last call spans {span:.1f} us (rank 0)", flush=True)
                for stream, ts, dur, name in last_call:
                    print(f"  s{stream!s:>4} {ts - t0:9.1f} {dur:9.1f}  {name[:90]}", flush=True)
        finally:
            torch.cuda.synchronize()
            ctx.close()
    dist.barrier()
    tdu.finalize_distributed()


#: ``bench_overlap.py --probe NAME``: the probe's entry point (called with the options after the name)
PROBES = {"ag-gemm": probe_ag_gemm, "gemm-ar": probe_gemm_ar, "gemm-rs": probe_gemm_rs, "rs-own": probe_rs_own,
          "timing": probe_timing, "trace": probe_trace}


if __name__ == "__main__":
    sys.exit("overlap_probes is not run directly: bench_overlap.py --probe NAME (" + ", ".join(PROBES) + ")")
