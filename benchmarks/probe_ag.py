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

import json
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from probe_common import finish, int_list, probe_parser, start  # noqa: E402


def main():
    ap = probe_parser(__doc__, "llama3-8b:2048,llama3-8b:4096")
    ap.add_argument("--configs", default="128x256x64x8x3,128x256x64x8x3f,128x128x64x4x4f,128x128x64x8x4",
                    help="tilings (BMxBNxBKxWARPSxSTAGES[f]) of the fused kernels and of our GEMM alone")
    ap.add_argument("--comm-programs", type=int_list, default=[],
                    help="also sm with these push-program counts (default context: 8)")
    args = ap.parse_args()

    import bench_overlap as bo

    from triton_dist.kernels import gemm as g
    from triton_dist.ops import overlap as ov

    rank, W, stamp = start(args.out)
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
    finish(args, "probe_ag", stamp, records, "bench_overlap.time_interleaved (CUDA-graph replay of k calls, median "
           "of reps, max over ranks)", rank)

if __name__ == "__main__":
    main()
