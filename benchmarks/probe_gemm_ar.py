"""Where the time of a decode GEMM+AR goes (2 GPUs, torchrun): the fused kernel at a few tilings, with TMA and with
the pointer path, against the same tiling's GEMM alone (our ``gemm_kernel``, no communication), cuBLAS and the
one-shot all-reduce alone, at K_per_rank in {128, 3584, 7168} (K=128: the kernel's fixed cost, almost no weights),
M=1 and 16, N=8192. Every number: CUDA-graph replay of ``--k`` calls, samples interleaved across implementations,
median of ``--reps``, max over ranks (bench_overlap's timing).

    torchrun --nproc_per_node 2 benchmarks/probe_gemm_ar.py [--out DIR]

Writes ``probe_gemm_ar-<stamp>.json`` (and prints one line per shape) so the split between the weight stream
(``gemm@cfg`` vs the HBM floor ``bytes(B) / 4.3 TB/s``), the fixed cost and the all-reduce tail can be read off.
Ranks that share a GPU (no NCCL in the group): ``torch_seq`` (gloo on host copies, not capturable) is skipped (the
record's ``skipped`` says why); ``one_shot`` (cuBLAS + our one-shot all-reduce) is the sequential path there.
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

CFGS = ["16x64x128x4x4", "16x64x128x4x6", "16x64x256x4x3", "16x32x256x4x4", "16x128x128x4x4k2",
        "16x64x128x8x4"]
PTR_CFGS = ["16x64x128x4x4", "16x64x64x4x8"]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.path.join(HERE, "results"))
    ap.add_argument("--k", type=int, default=20)
    ap.add_argument("--reps", type=int, default=9)
    ap.add_argument("--ks", default="128,3584,7168")
    ap.add_argument("--ms", default="1,16")
    args = ap.parse_args()

    import bench_overlap as bo
    from probe_common import NO_NCCL, no_nccl
    from provenance import git_commit, topology_fields, topology_line, versions
    from timing import rendezvous_kind

    import triton_dist.utils as tdu
    from triton_dist.kernels import gemm as g
    from triton_dist.kernels import gemm_config as gc
    from triton_dist.ops import overlap as ov
    from triton_dist.ops.collectives import all_reduce

    tdu.initialize_distributed()
    rank = dist.get_rank()
    shared = no_nccl()  # ranks share a GPU
    if rank == 0:
        print(f"probe_gemm_ar: {topology_line()}", flush=True)
    N = 8192
    ctx = ov.create_gemm_ar_context(16, N, torch.bfloat16)
    sms = ctx.num_sms
    gc.ensure_tma_allocator()
    records = []
    for K in [int(x) for x in args.ks.split(",")]:
        for M in [int(x) for x in args.ms.split(",")]:
            a = bo.rand((M, K), 1 + rank)
            b = bo.rand((K, N), 100 + rank)
            c = torch.empty((M, N), dtype=torch.bfloat16, device="cuda")
            fns = {}

            def fused(cfg):
                def run():
                    with bo.overlap_config(cfg):
                        return ov.gemm_ar(a, b, ctx, method="fused")
                return run

            def gemm_only(cfg):
                tc = gc.TileConfig.parse(cfg)
                grid = (min(sms, -(-M // tc.BLOCK_M) * -(-N // tc.BLOCK_N)), )

                def run():
                    g.gemm_kernel[grid](a, b, c, c, M, N, K, a.stride(0), 1, b.stride(0), 1, c.stride(0), 1,
                                        **tc.meta(), NUM_SMS=grid[0], USE_TMA=True, HAS_SCALE=False, **tc.launch())
                return run

            for cfg in CFGS:
                fns[f"fused@{cfg}"] = fused(cfg)
                if "k" not in cfg:
                    fns[f"gemm@{cfg}"] = gemm_only(cfg)
            for cfg in PTR_CFGS:  # the same tilings with pointer loads (the "p" suffix)
                fns[f"fused_ptr@{cfg}"] = fused(cfg + "p")
            fns["one_shot"] = lambda: ov.gemm_ar(a, b, ctx, method="one_shot")
            fns["cublas"] = lambda: torch.matmul(a, b, out=c)
            fns["ar_one_shot"] = lambda: all_reduce(c, ctx.ar_ctx, method="one_shot")
            if not shared:
                fns["torch_seq"] = lambda: ov.gemm_ar(a, b, ctx, method="torch")
            ok = bo.drop_failing(fns)
            res = {n: t for n, (t, _) in bo.time_interleaved(fns, args.k, args.reps).items()}
            rec = {"M": M, "K": K, "N": N, "us": res, "errors": ok,
                   "hbm_floor_us_at_4.3TBps": K * N * 2 / 4.3e6}
            if shared:
                rec["skipped"] = {"torch_seq": NO_NCCL}
            records.append(rec)
            if rank == 0:
                print(json.dumps({"M": M, "K": K, **{k: round(v, 1) for k, v in sorted(res.items(),
                                                                                      key=lambda kv: kv[1])},
                                  "errors": ok}), flush=True)
    if rank == 0:
        os.makedirs(args.out, exist_ok=True)
        stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
        path = os.path.join(args.out, f"probe_gemm_ar-{stamp}.json")
        with open(path, "w") as f:
            json.dump({"benchmark": "probe_gemm_ar", "command": " ".join(sys.argv), "git_commit": git_commit(),
                       "versions": versions(), **topology_fields(), "device_rendezvous": rendezvous_kind(),
                       "timing": "CUDA-graph replay of k calls, interleaved, median of reps, "
                       "max over ranks", "k": args.k, "reps": args.reps, "records": records}, f, indent=1)
        print("results:", path)
    ctx.close()
    dist.barrier()
    tdu.finalize_distributed()


if __name__ == "__main__":
    main()
