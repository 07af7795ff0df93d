"""AG+GEMM at a tiling (2 GPUs, torchrun): ``ag_gemm`` methods ``sm`` (also with ``--comm-programs`` push programs)
and ``ce`` and our GEMM alone (the gathered
``A`` times this rank's ``B``), each at every ``--configs`` tiling, against cuBLAS and torch's sequential path, all
timed interleaved as ``bench_overlap.py``'s final table is (CUDA-graph replay of k calls, median of reps, max over
ranks). The table's AG+GEMM tilings at Llama-3-8B came from the sweep, which times each tiling alone; this checks
them side by side with cuBLAS, at the shapes where AG+GEMM misses its bound (8B, M = 2048 and 4096).

    torchrun --nproc_per_node 2 benchmarks/probe_ag.py [--shapes llama3-8b:2048,llama3-8b:4096]
        [--configs 128x256x64x8x3,128x128x64x4x4f,...]

Prints one JSON line per shape (rank 0) and writes ``probe_ag-<stamp>.json`` into ``--out``.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import sys

import torch
import torch.distributed as dist

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.path.join(HERE, "results"))
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--shapes", default="llama3-8b:2048,llama3-8b:4096", help="model:M,... (bench_overlap's MODELS)")
    ap.add_argument("--configs", default="128x256x64x8x3,128x256x64x8x3f,128x128x64x4x4f,128x128x64x8x4",
                    help="tilings (BMxBNxBKxWARPSxSTAGES[f]) of the fused kernels and of our GEMM alone")
    ap.add_argument("--comm-programs", type=lambda v: [int(x) for x in v.split(",") if x], default=[],
                    help="also sm with these push-program counts (default context: 8)")
    args = ap.parse_args()

    import bench_overlap as bo
    from provenance import git_commit, versions

    import triton_dist.utils as tdu
    from triton_dist.kernels import gemm as g
    from triton_dist.ops import overlap as ov

    tdu.initialize_distributed()
    rank, W = dist.get_rank(), dist.get_world_size()
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    os.makedirs(args.out, exist_ok=True)
    g.ensure_tma_allocator()
    records = []
    for spec in args.shapes.split(","):
        model, m = spec.split(":")
        M = int(m)
        K, N_tot, _, _ = bo.MODELS[model]
        N = N_tot // W
        ctx = ov.create_ag_gemm_context(M // W, K, torch.bfloat16)
        # sm with fewer push programs: more GEMM programs (contexts of their own: the signals are per push program)
        ctx_g = {G: ov.create_ag_gemm_context(M // W, K, torch.bfloat16, methods=("sm", ), comm_programs=G)
                 for G in args.comm_programs}
        a, b = bo.rand((M // W, K), 1 + rank), bo.rand((K, N), 100 + rank)
        full = bo.rand((M, K), 7)
        c = torch.empty((M, N), dtype=torch.bfloat16, device="cuda")
        fns = {"cublas": lambda: torch.matmul(full, b, out=c),
               "torch_seq": lambda: ov.ag_gemm(a, b, ctx, method="torch")}
        for cfg in args.configs.split(","):
            tc = g.TileConfig.parse(cfg)
            fns[f"gemm_ours@{cfg}"] = lambda tc=tc: g.matmul(full, b, out=c, config=tc)
            for meth in ("sm", "ce"):
                fns[f"{meth}@{cfg}"] = bo._with_config(lambda meth=meth: ov.ag_gemm(a, b, ctx, method=meth), cfg)
            for G, cg in ctx_g.items():
                fns[f"sm_g{G}@{cfg}"] = bo._with_config(lambda cg=cg: ov.ag_gemm(a, b, cg, method="sm"), cfg)
        errors = bo.drop_failing(fns)
        res = {n: round(t, 1) for n, (t, _) in bo.time_interleaved(fns, args.k, args.reps).items()}
        rec = {"model": model, "M": M, "K": K, "N_per_rank": N, "k": args.k, "reps": args.reps, "us": res,
               "over_cublas": {n: round(t / res["cublas"], 3) for n, t in res.items()}, "errors": errors}
        records.append(rec)
        if rank == 0:
            print(json.dumps({"model": model, "M": M, **dict(sorted(res.items(), key=lambda kv: kv[1])),
                              "errors": errors}), flush=True)
        ctx.close()
        for cg in ctx_g.values():
            cg.close()
    if rank == 0:
        path = os.path.join(args.out, f"probe_ag-{stamp}.json")
        with open(path, "w") as f:
            json.dump({"benchmark": "probe_ag", "command": " ".join(sys.argv), "git_commit": git_commit(),
                       "versions": versions(), "timing": "bench_overlap.time_interleaved (CUDA-graph replay of k "
                       "calls, median of reps, max over ranks)", "records": records}, f, indent=1)
        print("results:", path)
    dist.barrier()
    tdu.finalize_distributed()


if __name__ == "__main__":
    main()
