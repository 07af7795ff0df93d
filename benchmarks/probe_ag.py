"""AG+GEMM at a tiling (2 GPUs, torchrun): ``ag_gemm`` methods ``sm`` (also with ``--comm-programs`` push programs)
and ``ce`` and our GEMM alone (the gathered
``A`` times this rank's ``B``), each at every ``--configs`` tiling, against cuBLAS and torch's sequential path, all
timed interleaved as ``bench_overlap.py``'s final table is (CUDA-graph replay of k calls, median of reps, max over
ranks). The table's AG+GEMM tilings at Llama-3-8B came from the sweep, which times each tiling alone; this checks
them side by side with cuBLAS, at the shapes where AG+GEMM misses its bound (8B, M = 2048 and 4096).

    torchrun --nproc_per_node 2 benchmarks/probe_ag.py [--shapes llama3-8b:2048,llama3-8b:4096]
        [--configs 128x256x64x8x3,128x128x64x4x4f,128x128x64x4x6ft,...] [--shape-tp 2]

``--shape-tp T`` (default: the world size) takes N per rank of TP=T (``N_total / T``): with one GPU
(``torchrun --nproc_per_node 1 ... --shape-tp 2``) each method runs the GEMM one rank runs at TP=2 (all ``M`` rows,
nothing to wait for): the fused kernels' compute half against our GEMM alone and cuBLAS at the same tiling. Every
implementation's result is checked against cuBLAS on the gathered rows first (a wrong one is recorded in ``errors``
and not timed). Prints one JSON line per shape (rank 0) and writes ``probe_ag-<stamp>.json`` into ``--out``.
Ranks that share a GPU (no NCCL in the group): the gathered rows come from torch_collectives (gloo on host copies)
and ``torch_seq`` (host copies: not capturable) is replaced by ``ours_seq`` (our all-gather, auto, + cuBLAS); the
record's ``skipped`` says why.
"""
from __future__ import annotations

import json
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from probe_common import NO_NCCL, finish, int_list, no_nccl, probe_parser, start  # noqa: E402


def main():
    ap = probe_parser(__doc__, "llama3-8b:2048,llama3-8b:4096")
    ap.add_argument("--configs", default="128x256x64x8x3,128x256x64x8x3f,128x128x64x4x4f,128x128x64x8x4",
                    help="tilings (BMxBNxBKxWARPSxSTAGES[f][t]) of the fused kernels and of our GEMM alone")
    ap.add_argument("--methods", default="sm,ce", help="ag_gemm methods timed at each tiling")
    ap.add_argument("--shape-tp", type=int, default=0, help="N per rank of this TP degree (default: the world size)")
    ap.add_argument("--plain-launch", action="store_true",
                    help="also each method on a context whose fused launches are not cooperative (name <method>_plain)")
    ap.add_argument("--comm-programs", type=int_list, default=[],
                    help="also sm with these push-program counts (default context: 8)")
    args = ap.parse_args()

    import bench_overlap as bo

    from triton_dist.kernels import gemm_config as gc
    from triton_dist.ops.matmul import matmul
    from triton_dist.ops import overlap as ov

    from triton_dist.runtime import torch_collectives as TC

    rank, W, stamp = start(args.out)
    shared = no_nccl()  # ranks share a GPU

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
        a, b = bo.rand((M // W, K), 1 + rank), bo.rand((K, N), 100 + rank)
        full = torch.empty((M, K), dtype=torch.bfloat16, device="cuda")
        # the gathered rows (NCCL, or gloo on host copies where ranks share a GPU): cuBLAS on them is the reference
        # and a baseline
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
        errors = bo.drop_failing(fns, ref)
        res = {n: round(t, 1) for n, (t, _) in bo.time_interleaved(fns, args.k, args.reps).items()}
        rec = {"model": model, "M": M, "K": K, "N_per_rank": N, "shape_tp": tp, "world": W, "k": args.k,
               "reps": args.reps, "us": res, "over_cublas": {n: round(t / res["cublas"], 3) for n, t in res.items()},
               "errors": errors}
        if shared:
            rec["skipped"] = {"torch_seq": NO_NCCL}
        records.append(rec)
        if rank == 0:
            print(json.dumps({"model": model, "M": M, **dict(sorted(res.items(), key=lambda kv: kv[1])),
                              "errors": errors}), flush=True)
        ctx.close()
        if seq is not None:
            seq.close()
        if ctx_p is not None:
            ctx_p.close()
        for cg in ctx_g.values():
            cg.close()
    finish(args, "probe_ag", stamp, records, "bench_overlap.time_interleaved (CUDA-graph replay of k calls, median "
           "of reps, max over ranks)", rank)

if __name__ == "__main__":
    main()
