"""The ``ce`` GEMM+RS own-rows GEMM (``kernels.gemm_rs.rs_own_gemm_kernel``) alone, on one GPU (``torchrun
--nproc_per_node 1``): the launch at world 2 with the peer's partial already in the staging and its ready flags
already raised (re-raised before every call), so what is timed is the kernel's compute half: the own rows' main
loop plus the peer partial's load and add. Per own-rows shape (``rows x N x K``, the own half of a TP=2 GEMM+RS):
the autotuned kernel (what ``ce`` launches today; its pick is recorded), the kernel at every ``--variants`` variant
(``kernels.gemm_config.GemmVariant`` names, ``plain`` or ``flat``: the kernel has no TMA-store form), our GEMM alone
(``matmul``: the table) and cuBLAS (``torch.matmul``) on the same rows. Every call, GEMMs included, is preceded
by the same flag fill. Each result is checked against torch first. Timing: ``bench_overlap.time_interleaved``
(CUDA-graph replay of k calls, samples interleaved, median of reps).

    torchrun --nproc_per_node 1 benchmarks/probe_rs_own.py [--shapes 2048x4096x3584,...] [--variants ...]

Writes ``probe_rs_own-<stamp>.json`` into ``--out`` and prints one JSON line per shape.
"""
from __future__ import annotations

import json
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from probe_common import finish, probe_parser, start  # noqa: E402

#: own rows x N x K per rank of GEMM+RS at TP=2: 8B M=2048 / 4096 / 8192, 70B M=2048 / 4096 / 8192
SHAPES = "1024x4096x3584,2048x4096x3584,4096x4096x3584,1024x8192x7168,2048x8192x7168,4096x8192x7168"
VARIANTS = "128x256x64x8x3/plain,128x256x64x8x3/flat,128x256x64x8x4/flat,128x128x64x4x6/flat,128x128x64x4x4/flat"


def main():
    ap = probe_parser(__doc__, "", reps=9)
    ap.set_defaults(shapes=SHAPES)
    ap.add_argument("--variants", default=VARIANTS)
    args = ap.parse_args()

    import bench_overlap as bo

    from triton_dist.kernels import gemm_config as gc
    from triton_dist.ops.matmul import matmul
    from triton_dist.kernels import gemm_rs as rsk
    from triton_dist.ops.overlap import CE_PIECES_MAX

    rank, W, stamp = start(args.out)
    if W != 1:
        raise SystemExit("probe_rs_own: one process (torchrun --nproc_per_node 1)")
    world, sms = 2, gc.num_sms(torch.device("cuda"))
    device = torch.cuda.get_device_name()
    records = []
    for spec in args.shapes.split(","):
        rows, N, K = (int(v) for v in spec.split("x"))
        own, b = bo.rand((rows, K), 1), bo.rand((K, N), 2)
        cap = rows * N
        stage = torch.zeros(world * cap, dtype=torch.bfloat16, device="cuda")
        stage[cap:] = bo.rand((rows, N), 3).reshape(-1)  # peer 1's partial of this rank's rows
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
                raise SystemExit(f"probe_rs_own: {var}: rs_own_gemm_kernel has no TMA-store form")
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
        errors = bo.drop_failing(fns, ref)
        # the autotuner's pick for this shape (its cache is keyed on M_s, N, K first)
        pick = next((str(cfg) for key, cfg in tuned.cache.items() if tuple(key[:3]) == (rows, N, K)), None)
        fns.update({"gemm_ours/auto": ours, "cublas": cublas})
        res = {n: round(t, 1) for n, (t, _) in bo.time_interleaved(fns, args.k, args.reps).items()}
        rec = {"rows": rows, "N": N, "K": K, "k": args.k, "reps": args.reps, "us": res, "autotune_pick": pick,
               "over_cublas": {n: round(t / res["cublas"], 3) for n, t in res.items()}, "errors": errors}
        records.append(rec)
        print(json.dumps({"shape": spec, "autotune_pick": pick, **dict(sorted(res.items(), key=lambda kv: kv[1])),
                          "errors": errors}), flush=True)
    finish(args, "probe_rs_own", stamp, records, "bench_overlap.time_interleaved (CUDA-graph replay of k calls, "
           "median of reps; every call preceded by the same flag fill)", rank, device=device)


if __name__ == "__main__":
    main()
