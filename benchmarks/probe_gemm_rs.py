"""Where the time of the fused GEMM+ReduceScatter goes (2 GPUs, torchrun): the fused kernel with its peer tiles pushed
by TMA store and streamed in row pieces during the program's next main loop (``--pieces``), against the same tiling's GEMM alone (``gemm_kernel`` over all ``M`` rows, plain
and flattened loop, no communication), cuBLAS and the ``ce`` method, at Llama-3 TP=2 shapes; then one profiled fused
call per shape (``triton_dist.tools.profiler``), summarised per task type and per program.

    torchrun --nproc_per_node 2 benchmarks/probe_gemm_rs.py [--shapes llama3-8b:2048,...] [--out DIR]

Timing: CUDA-graph replay of ``--k`` calls, samples interleaved across implementations, median of ``--reps``, max
over ranks (bench_overlap's). The profile summary (rank 0 and 1) gives, per task type (``kernels.gemm_rs.TASKS``),
the count and the median / max duration, the call's span (first start to last end over the programs), and the span
of the programs' first and last tiles' main loops, so a gap between the GEMM alone and the fused call can be placed:
in the pushes, in the waits for the peer's tiles, or in the tiles' main loops themselves. Writes
``probe_gemm_rs-<stamp>.json`` and, per shape, the Perfetto JSON + Gantt PNG of the profiled call.
"""
from __future__ import annotations

import json
import os
import statistics
import sys

import torch
import torch.distributed as dist

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from probe_common import finish, int_list, probe_parser, rs_shapes, start  # noqa: E402


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


def main():
    ap = probe_parser(__doc__, "llama3-8b:2048,llama3-70b:2048,llama3-70b:8192", reps=9)
    ap.add_argument("--config", default=None, help="tiling of every launch (default: the context's for the shape)")
    ap.add_argument("--pieces", type=int_list, default=[4, 8, 16],
                    help="fused with the peer tiles streamed in this many row pieces, timed (comma list)")
    ap.add_argument("--profile-pieces", type=int_list, default=[8],
                    help="pieces values also profiled (traces exported)")
    ap.add_argument("--traces", type=int, default=1, help="0: no Perfetto JSON / Gantt PNG files")
    ap.add_argument("--ptr-variants", action="store_true",
                    help="also the round-5 variants: pointer push, pointer-load main loops, flattened GEMM")
    args = ap.parse_args()

    import bench_overlap as bo

    from triton_dist.kernels import gemm as g
    from triton_dist.kernels import gemm_config as gc
    from triton_dist.kernels import gemm_rs as rsk
    from triton_dist.ops import overlap as ov
    from triton_dist.tools.profiler import alloc_profiler_buffer, export_to_perfetto_trace, reset_profiler_buffer
    from triton_dist.tools.profiler.viewer import parse_to_tracks
    from provenance import label_json

    rank, W, stamp = start(args.out)
    buf = alloc_profiler_buffer(160 * 512)
    records = []
    for model, M, K, N in rs_shapes(args.shapes, W):
        ctx = ov.create_gemm_rs_context(M, N, torch.bfloat16)
        cfg = gc.TileConfig.parse(args.config) if args.config else ctx._cfg(M, N, K, 2)
        a, b = bo.rand((M, K), 1 + rank), bo.rand((K, N), 100 + rank)
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
               "cublas": lambda: torch.matmul(a, b, out=c), "ce_p1": lambda: ov.gemm_rs(a, b, ctx, method="ce", pieces=1)}
        for p in args.pieces:  # peer tiles streamed in p row pieces during the next main loop
            fns[f"fused_p{p}"] = fused(True, pieces=p)
        if args.ptr_variants:
            fns.update({"fused_ptr_push": fused(False), "fused_tma_push_ptr_loads": fused(True, ptr_cfg),
                        "fused_ptr_push_ptr_loads": fused(False, ptr_cfg), "gemm_same_tiling_flat": gemm_only(True),
                        "gemm_same_tiling_ptr_loads": gemm_only(False, False)})
        errors = bo.drop_failing(fns)
        res = {n: t for n, (t, _) in bo.time_interleaved(fns, args.k, args.reps).items()}
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
                              **{k: round(v, 1) for k, v in sorted(res.items(), key=lambda kv: kv[1])},
                              "errors": errors}), flush=True)
            for r, p in enumerate(profs):
                print(f"  rank {r} profile: {json.dumps(p)}", flush=True)
        ctx.close()
    finish(args, "probe_gemm_rs", stamp, records, "CUDA-graph replay of k calls, interleaved, median of reps, max over "
           "ranks", rank, k=args.k, reps=args.reps)

if __name__ == "__main__":
    main()
