"""Does the timing mode change the GEMM+RS figures? (2 GPUs, torchrun.) The sweep of ``bench_overlap.py`` times each
tiling alone (``time_graph``, k=5) and its final table times every implementation interleaved with the baselines
(``time_interleaved``, k from ``calls_per_sample``); for the same fused kernel and tiling they differed by up to 15%
at Llama-3 70B shapes (``results/2026-11-30-overlap-v6/rs-779b200``). This probe times the same implementations,
cuBLAS included, in every mode side by side:

* ``alone_k5`` / ``alone_k<K>``: each implementation by itself, k = 5 and k = ``--k`` calls per sample;
* ``interleaved_small``: cuBLAS, our GEMM and our GEMM+RS methods interleaved (k = ``--k``);
* ``interleaved_all``: the same plus NCCL reduce-scatter, torch sequential and torch's fused symmetric-memory op,
  as the benchmark's final table does.

    torchrun --nproc_per_node 2 benchmarks/probe_timing.py [--shapes llama3-70b:2048,llama3-8b:4096] [--k 10]

Ranks that share a GPU (no NCCL in the group): ``nccl_rs``, ``torch_seq`` and ``torch_symm`` are skipped (the
record's ``skipped`` says why) and ``ours_rs`` (our reduce-scatter, auto) and ``ours_seq`` (cuBLAS + it) are timed
in their place.

Prints one JSON line per shape (rank 0) and writes ``probe_timing-<stamp>.json`` into ``--out``.
"""
from __future__ import annotations

import json
import os
import sys

import torch
import torch.distributed as dist

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from probe_common import NO_NCCL, finish, no_nccl, probe_parser, rs_shapes, start  # noqa: E402


def main():
    args = probe_parser(__doc__, "llama3-70b:2048,llama3-8b:4096").parse_args()

    import bench_overlap as bo

    from triton_dist import ops
    from triton_dist.ops.matmul import matmul
    from triton_dist.ops import overlap as ov

    rank, W, stamp = start(args.out)
    shared = no_nccl()  # ranks share a GPU
    gname = None if shared else bo.symm_group_name()[0]
    records = []
    for model, M, K, N in rs_shapes(args.shapes, W):
        ctx = ov.create_gemm_rs_context(M, N, torch.bfloat16)
        rs_ctx = ops.create_reduce_scatter_ctx(M * N, torch.bfloat16) if shared else None
        a, b = bo.rand((M, K), 1 + rank), bo.rand((K, N), 100 + rank)
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
            base = {"nccl_rs": lambda: dist.reduce_scatter_tensor(shard, c),
                    "torch_seq": lambda: ov.gemm_rs(a, b, ctx, method="torch")}
        if gname is not None:
            base["torch_symm"] = lambda: torch.ops.symm_mem.fused_matmul_reduce_scatter(a, b, "sum", 0, gname)
        errors = bo.drop_failing(ours)
        errors.update(bo.drop_failing(base))
        res = {}
        for k in sorted({5, args.k}):
            res[f"alone_k{k}"] = {n: round(bo.time_graph(n, fn, k, args.reps)[0], 1) for n, fn in ours.items()}
        res["interleaved_small"] = {n: round(t, 1) for n, (t, _) in
                                    bo.time_interleaved(ours, args.k, args.reps).items()}
        res["interleaved_all"] = {n: round(t, 1) for n, (t, _) in
                                  bo.time_interleaved({**ours, **base}, args.k, args.reps).items()}
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
    finish(args, "probe_timing", stamp, records, "bench_overlap.time_graph / time_interleaved (CUDA-graph replay of k "
           "calls, median of reps, max over ranks)", rank)

if __name__ == "__main__":
    main()
