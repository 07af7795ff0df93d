"""Tail splits in our GEMM (``kernels.gemm.gemm_kernel``, ``SPLIT_TAIL``): at the overlap shapes whose tiles leave
a partial last round, each tiling with whole tiles, with the flattened loop and with the tail split that
``tail_split`` picks, against the autotuned ``matmul`` (which also tries 2- and 3-way splits; the config it chose
is printed) and cuBLAS. Runs on every rank of a torchrun launch (one GPU each; rank 0 prints and writes).

    torchrun --nproc_per_node 2 benchmarks/probe_split_tail.py [--shapes MxNxK,...] [--out DIR]

Timing: bench_overlap's (CUDA-graph replay of ``--k`` calls, samples interleaved across implementations, median of
``--reps``, max over ranks). Every variant is checked against the fp32 product first.
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

#: AG+GEMM 8B M=2048 / 1024 / 4096 (gathered rows x N per rank x K), 70B M=2048, GEMM+RS 8B own rows at M=2048
SHAPES = "2048x7168x4096,1024x7168x4096,4096x7168x4096,2048x14336x8192,1024x4096x3584"
TILINGS = ("128x256x64x8x3", "128x128x64x4x4")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.path.join(HERE, "results"))
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--reps", type=int, default=9)
    ap.add_argument("--shapes", default=SHAPES)
    args = ap.parse_args()

    import bench_overlap as bo
    from provenance import git_commit, versions

    import triton
    import triton_dist.utils as tdu
    from triton_dist.kernels import gemm as g

    tdu.initialize_distributed()
    rank = dist.get_rank()
    g.ensure_tma_allocator()
    sms = g.num_sms(torch.device("cuda"))
    records = []
    for spec in args.shapes.split(","):
        M, N, K = (int(x) for x in spec.split("x"))
        a, b = bo.rand((M, K), 1 + rank), bo.rand((K, N), 100 + rank)
        c = torch.empty((M, N), dtype=torch.bfloat16, device="cuda")
        ref = a.float() @ b.float()
        fns, splits = {}, {}
        for text in TILINGS:
            cfg = g.TileConfig.parse(text)
            tiles = triton.cdiv(M, cfg.BLOCK_M) * triton.cdiv(N, cfg.BLOCK_N)
            grid = (min(sms, tiles), )
            split = g.tail_split(tiles, grid[0], triton.cdiv(K, cfg.BLOCK_K))
            splits[text] = split
            ws, cnt = g.tail_buffers(a.device, grid[0], max(split, 1), cfg.BLOCK_M, cfg.BLOCK_N)

            def launch(flat, sp, cfg=cfg, grid=grid, ws=ws, cnt=cnt):
                extra = dict(SPLIT_TAIL=sp, ws_ptr=ws, cnt_ptr=cnt) if sp > 1 else {}

                def run():
                    g.gemm_kernel[grid](a, b, c, c, M, N, K, K, 1, N, 1, N, 1, **cfg.meta(), NUM_SMS=grid[0],
                                        USE_TMA=True, HAS_SCALE=False, FLATTEN=flat, **extra, **cfg.launch())
                    return c
                return run

            fns[f"{text}/whole"] = launch(False, 1)
            fns[f"{text}/flat"] = launch(True, 1)
            if split > 1:
                fns[f"{text}/split{split}"] = launch(False, split)
        fns["matmul_autotuned"] = lambda: g.matmul(a, b, out=c)
        fns["cublas"] = lambda: torch.matmul(a, b, out=c)
        errors = {}
        for name, fn in list(fns.items()):
            try:
                err = ((fn().float() - ref).abs() - 2.0 ** -7 * ref.abs()).max().item()
                torch.cuda.synchronize()
                if err > 1e-2:
                    errors[name] = f"wrong result: max excess error {err:g}"
            except Exception as exc:  # noqa: BLE001
                errors[name] = f"{type(exc).__name__}: {exc}"[:200]
                fns.pop(name)
                torch.cuda.synchronize()
        chosen = {str(k): str(v) for k, v in getattr(g.gemm_autotuned(), "cache", {}).items()
                  if isinstance(k, tuple) and tuple(k[:3]) == (M, N, K)}
        res = {n: t for n, (t, _) in bo.time_interleaved(fns, args.k, args.reps).items()}
        rec = {"M": M, "N": N, "K": K, "splits": splits, "autotune_choice": chosen, "us": res, "errors": errors}
        records.append(rec)
        if rank == 0:
            print(json.dumps({"shape": spec, "splits": splits, "autotune_choice": list(chosen.values()),
                              **{k: round(v, 1) for k, v in sorted(res.items(), key=lambda kv: kv[1])},
                              "errors": errors}), flush=True)
    if rank == 0:
        os.makedirs(args.out, exist_ok=True)
        stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
        path = os.path.join(args.out, f"probe_split_tail-{stamp}.json")
        with open(path, "w") as f:
            json.dump({"benchmark": "probe_split_tail", "command": " ".join(sys.argv), "git_commit": git_commit(),
                       "versions": versions(), "timing": "CUDA-graph replay of k calls, interleaved, median of reps, "
                       "max over ranks", "k": args.k, "reps": args.reps, "records": records}, f, indent=1)
        print("results:", path)
    dist.barrier()
    tdu.finalize_distributed()


if __name__ == "__main__":
    main()
