"""Tail splits in the AG+GEMM kernel and the plain GEMM (2 GPUs, torchrun): ``sm`` and ``ce`` with the last round of
tiles split over programs (``SPLIT_TAIL``, ``kernels.gemm.tail_split``) and without, our GEMM over the gathered rows
with and without the split (same tiling), the autotuned ``matmul`` and cuBLAS, at Llama-3 TP=2 AG+GEMM shapes.

    torchrun --nproc_per_node 2 benchmarks/probe_ag_split.py [--shapes llama3-8b:2048,...] [--out DIR]

Timing: bench_overlap's (CUDA-graph replay of ``--k`` calls, samples interleaved across implementations, median of
``--reps``, max over ranks). Every variant is checked against torch's result first. Writes
``probe_ag_split-<stamp>.json`` and prints one line per shape.
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
    ap.add_argument("--reps", type=int, default=9)
    ap.add_argument("--shapes", default="llama3-8b:2048,llama3-8b:1024,llama3-8b:4096,llama3-70b:2048",
                    help="model:M,... (bench_overlap's MODELS; M = gathered rows)")
    args = ap.parse_args()

    import bench_overlap as bo
    from provenance import git_commit, versions

    import triton
    import triton_dist.utils as tdu
    from triton_dist.kernels import gemm as g
    from triton_dist.ops import overlap as ov

    tdu.initialize_distributed()
    rank, W = dist.get_rank(), dist.get_world_size()
    g.ensure_tma_allocator()
    records = []
    for spec in args.shapes.split(","):
        model, m = spec.split(":")
        M = int(m)
        K, N_tot, _, _ = bo.MODELS[model]
        N = N_tot // W
        ctx = ov.create_ag_gemm_context(M // W, K, torch.bfloat16)
        a = bo.rand((M // W, K), 1 + rank)
        b = bo.rand((K, N), 100 + rank)
        full = bo.rand((M, K), 7)
        c = torch.empty((M, N), dtype=torch.bfloat16, device="cuda")
        cfg = ctx._cfg(M, N, K, 2)
        sms = ctx.num_sms
        tiles = triton.cdiv(M, cfg.BLOCK_M) * triton.cdiv(N, cfg.BLOCK_N)
        grid = (min(sms, tiles), )
        split = g.tail_split(tiles, grid[0], triton.cdiv(K, cfg.BLOCK_K))
        ws, cnt = g.tail_buffers(full.device, grid[0], max(split, 1), cfg.BLOCK_M, cfg.BLOCK_N)

        def ag(method, on):
            def run():
                ctx.split_tail = on
                return ov.ag_gemm(a, b, ctx, method=method)
            return run

        def gemm(sp):
            extra = dict(SPLIT_TAIL=sp, ws_ptr=ws, cnt_ptr=cnt) if sp > 1 else {}

            def run():
                g.gemm_kernel[grid](full, b, c, c, M, N, K, full.stride(0), 1, b.stride(0), 1, c.stride(0), 1,
                                    **cfg.meta(with_flatten=False), NUM_SMS=grid[0], USE_TMA=True, HAS_SCALE=False,
                                    **extra, **cfg.launch())
                return c
            return run

        fns = {"sm_split": ag("sm", True), "sm_whole": ag("sm", False), "ce_split": ag("ce", True),
               "ce_whole": ag("ce", False), f"gemm_split{split}": gemm(split), "gemm_whole": gemm(1),
               "matmul_autotuned": lambda: g.matmul(full, b, out=c), "cublas": lambda: torch.matmul(full, b, out=c)}
        errors = {}
        ref_ag = ov.ag_gemm(a, b, ctx, method="torch").float()
        ref_full = (full.float() @ b.float())
        for name, fn in list(fns.items()):
            try:
                got = fn().float()
                ref = ref_ag if name.startswith(("sm", "ce")) else ref_full
                err = ((got - ref).abs() - 2.0 ** -7 * ref.abs()).max().item()
                if err > 1e-2:
                    errors[name] = f"wrong result: max excess error {err:g}"
                torch.cuda.synchronize()
            except Exception as exc:  # noqa: BLE001
                errors[name] = f"{type(exc).__name__}: {exc}"[:200]
                fns.pop(name)
                torch.cuda.synchronize()
        res = {n: t for n, (t, _) in bo.time_interleaved(fns, args.k, args.reps).items()}
        programs = {"sm": ctx.num_sms - ctx.comm_programs, "ce": ctx.num_sms - 1}
        rec = {"model": model, "M": M, "K": K, "N": N, "config": str(cfg), "tiles": tiles,
               "splits": {meth: g.tail_split(tiles, p, triton.cdiv(K, cfg.BLOCK_K)) for meth, p in programs.items()},
               "gemm_split": split, "us": res, "errors": errors}
        records.append(rec)
        if rank == 0:
            print(json.dumps({"model": model, "M": M, "config": str(cfg), "tiles": tiles, "splits": rec["splits"],
                              **{k: round(v, 1) for k, v in sorted(res.items(), key=lambda kv: kv[1])},
                              "errors": errors}), flush=True)
        ctx.close()
    if rank == 0:
        os.makedirs(args.out, exist_ok=True)
        stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
        path = os.path.join(args.out, f"probe_ag_split-{stamp}.json")
        with open(path, "w") as f:
            json.dump({"benchmark": "probe_ag_split", "command": " ".join(sys.argv), "git_commit": git_commit(),
                       "versions": versions(), "timing": "CUDA-graph replay of k calls, interleaved, median of reps, "
                       "max over ranks", "k": args.k, "reps": args.reps, "records": records}, f, indent=1)
        print("results:", path)
    dist.barrier()
    tdu.finalize_distributed()


if __name__ == "__main__":
    main()
