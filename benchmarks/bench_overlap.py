"""Benchmark the overlapped GEMMs against torch in the same run (2 GPUs, bf16, TP=2 Llama-3 MLP shapes).

    torchrun --nproc_per_node 2 benchmarks/bench_overlap.py [--quick] [--write-table] [--ops ag_gemm,gemm_rs,gemm_ar]

For every shape and implementation: a correctness check against torch's sequential path first, then timing.

* ``ours/<method>``: ``triton_dist.ops.overlap`` fused kernels (AG+GEMM: ``sm`` = push programs inside the GEMM
  launch, ``ce`` = copy engine on a side stream; GEMM+RS / GEMM+AR: ``fused``).
* ``torch_seq``: (a) sequential NCCL + cuBLAS: ``all_gather_into_tensor`` + ``torch.matmul`` /
  ``torch.matmul`` + ``reduce_scatter_tensor`` / ``torch.matmul`` + ``all_reduce``.
* ``torch_symm``: (b) torch's fused symmetric-memory ops (``torch.distributed._symmetric_memory``
  ``fused_all_gather_matmul`` / ``fused_matmul_reduce_scatter``) where available (multicast stays off:
  ``TORCH_SYMM_MEM_DISABLE_MULTICAST=1``); any failure is recorded, not fatal.
* ``gemm_ours`` / ``gemm_cublas``: the local GEMM alone (our autotuned persistent GEMM, cuBLAS).
* ``comm_nccl``: the communication alone (NCCL all_gather of A / reduce_scatter or all_reduce of C).
* ``overlap_eff`` = max(t_gemm, t_comm) / t_fused with t_gemm = cuBLAS GEMM, t_comm = NCCL (1.0 = perfect overlap;
  > 1 means the fused op beats even the perfectly overlapped sum of the baselines' parts).

Timing: CUDA events around ``iters`` back-to-back calls after a warm-up; median over ``reps`` samples per rank;
the reported value is the max over ranks. Shapes (global M; TP=2):

* Llama-3-70B MLP: AG+GEMM M=8192, K=8192, N=28672 (14336 per rank); GEMM+RS M=8192, K=14336 (7168 per rank),
  N=8192.
* Llama-3-8B MLP: AG+GEMM M=8192, K=4096, N=14336 (7168 per rank); GEMM+RS M=8192, K=7168 (3584 per rank), N=4096.
* Small M for both: 128, 512, 1024, 2048. GEMM+AR (decode): M in 1, 16, 128, 512 with the GEMM+RS weights.

Output: JSON in ``$TRITON_DIST_RESULTS_DIR`` (default ``benchmarks/results/``) + a bar chart PNG (speed-up over
torch_seq per shape). ``--write-table`` (rank 0) writes the measured crossover into
``python/triton_dist/ops/overlap_table.json`` (``status: measured``), which ``method="auto"`` reads.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import sys
import traceback
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))

os.environ.setdefault("NVSHMEM_SYMMETRIC_SIZE", "16G")
os.environ.setdefault("NVSHMEM_DISABLE_NVLS", "1")
os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
os.environ.setdefault("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1")

import torch  # noqa: E402
from provenance import git_commit, tree_fingerprint, versions  # noqa: E402
import torch.distributed as dist  # noqa: E402

MODELS = {
    # name: (K for AG+GEMM, N total for AG+GEMM, K total for GEMM+RS, N for GEMM+RS)
    "llama3-70b": (8192, 28672, 14336, 8192),
    "llama3-8b": (4096, 14336, 7168, 4096),
}
FULL_M = [128, 512, 1024, 2048, 8192]
QUICK_M = [512, 2048, 8192]
AR_M = [1, 16, 128, 512]


def time_us(fn, iters, reps, warmup=3):
    """Median microseconds per call on this rank (CUDA events around ``iters`` calls), max over ranks."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    samples = []
    for _ in range(reps):
        dist.barrier()
        torch.cuda.synchronize()
        a = torch.cuda.Event(enable_timing=True)
        b = torch.cuda.Event(enable_timing=True)
        a.record()
        for _ in range(iters):
            fn()
        b.record()
        b.synchronize()
        samples.append(a.elapsed_time(b) * 1e3 / iters)
    t = torch.tensor([statistics.median(samples)], device="cuda")
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return float(t.item())


def rand(shape, seed):
    g = torch.Generator(device="cuda").manual_seed(seed)
    return (torch.randn(shape, device="cuda", generator=g) / 8).to(torch.bfloat16)


def close(a, b, tol=2e-2):
    err = (a.float() - b.float()).abs().max().item()
    scale = b.float().abs().max().item() + 1e-6
    return err <= tol * scale, err / scale


def check_and_time(rec, impls, ref, args):
    """Check each implementation against ``ref``, then time it (``rec["results"]``); a wrong result or an
    exception goes to ``rec["errors"]`` instead."""
    for name, fn in impls.items():
        try:
            ok, rel = close(fn(), ref)
            torch.cuda.synchronize()
            if not ok:
                rec["errors"][name] = f"wrong result: rel err {rel:.3g}"
                continue
            rec["results"][name] = time_us(fn, args.iters, args.reps)
        except Exception as exc:  # noqa: BLE001
            rec["errors"][name] = f"{type(exc).__name__}: {exc}"[:400]


def time_baselines(rec, args, **fns):
    """Time each baseline (no correctness check, exceptions propagate) into ``rec["results"]``, in order."""
    for name, fn in fns.items():
        rec["results"][name] = time_us(fn, args.iters, args.reps)


def symm_group_name():
    try:
        import torch.distributed._symmetric_memory as symm

        name = dist.group.WORLD.group_name
        with warnings.catch_warnings():  # needed before torch 2.11, a FutureWarning (one per rank) since
            warnings.simplefilter("ignore", FutureWarning)
            symm.enable_symm_mem_for_group(name)
        torch.ops.symm_mem.fused_all_gather_matmul  # noqa: B018  (availability)
        return name, None
    except Exception as exc:  # noqa: BLE001
        return None, f"{type(exc).__name__}: {exc}"[:300]


def bench_ag(model, M, args, rank, W, gname, out):
    from triton_dist.kernels.gemm import matmul
    from triton_dist.ops.overlap import ag_gemm, create_ag_gemm_context

    K, N_tot, _, _ = MODELS[model]
    N = N_tot // W
    m_loc = M // W
    rec = {"op": "ag_gemm", "model": model, "M": M, "K": K, "N_per_rank": N, "results": {}, "errors": {}}
    a = rand((m_loc, K), 1 + rank)
    b = rand((K, N), 100 + rank)
    ctx = create_ag_gemm_context(m_loc, K, torch.bfloat16)
    try:
        ref = ag_gemm(a, b, ctx, method="torch")
        impls = {
            "ours/sm": lambda: ag_gemm(a, b, ctx, method="sm"),
            "ours/ce": lambda: ag_gemm(a, b, ctx, method="ce"),
            "ours/auto": lambda: ag_gemm(a, b, ctx, method="auto"),
            "torch_seq": lambda: ag_gemm(a, b, ctx, method="torch"),
        }
        if gname is not None:
            impls["torch_symm"] = lambda: torch.ops.symm_mem.fused_all_gather_matmul(a, [b], 0, gname,
                                                                                      return_A=False)[1][0]
        check_and_time(rec, impls, ref, args)
        full = torch.empty((M, K), dtype=torch.bfloat16, device="cuda")
        time_baselines(rec, args, gemm_ours=lambda: matmul(full, b), gemm_cublas=lambda: torch.matmul(full, b),
                       comm_nccl=lambda: dist.all_gather_into_tensor(full, a))
    finally:
        ctx.close()
    out.append(finish(rec, flops=2.0 * M * K * N))


def bench_partials(op, model, M, args, rank, W, gname, out):
    """GEMM+RS (``op="gemm_rs"``) or GEMM+AR (``"gemm_ar"``): A [M, K/W] @ B [K/W, N] per rank, partials summed
    across ranks (scattered by rows, or all-reduced)."""
    from triton_dist.kernels.gemm import matmul
    from triton_dist.ops import overlap as ov

    rs = op == "gemm_rs"
    fused = ov.gemm_rs if rs else ov.gemm_ar
    _, _, K_tot, N = MODELS[model]
    K = K_tot // W
    rec = {"op": op, "model": model, "M": M, "K_per_rank": K, "N": N, "results": {}, "errors": {}}
    a = rand((M, K), 1 + rank)
    b = rand((K, N), 100 + rank)
    ctx = ov.create_gemm_rs_context(M, N, torch.bfloat16) if rs else ov.create_gemm_ar_context(max(M, 16), N,
                                                                                               torch.bfloat16)
    try:
        ref = fused(a, b, ctx, method="torch")
        impls = {
            "ours/fused": lambda: fused(a, b, ctx, method="fused"),
            "ours/auto": lambda: fused(a, b, ctx, method="auto"),
            "torch_seq": lambda: fused(a, b, ctx, method="torch"),
        }
        if rs and gname is not None:
            impls["torch_symm"] = lambda: torch.ops.symm_mem.fused_matmul_reduce_scatter(a, b, "sum", 0, gname)
        check_and_time(rec, impls, ref, args)
        c = torch.empty((M, N), dtype=torch.bfloat16, device="cuda")
        if rs:
            shard = torch.empty((M // W, N), dtype=torch.bfloat16, device="cuda")
            comm = lambda: dist.reduce_scatter_tensor(shard, c)  # noqa: E731
        else:
            comm = lambda: dist.all_reduce(c)  # noqa: E731
        time_baselines(rec, args, gemm_ours=lambda: matmul(a, b), gemm_cublas=lambda: torch.matmul(a, b, out=c),
                       comm_nccl=comm)
    finally:
        ctx.close()
    out.append(finish(rec, flops=2.0 * M * K * N))


def finish(rec, flops):
    r = rec["results"]
    ours = {k: v for k, v in r.items() if k.startswith("ours/") and k != "ours/auto"}
    if ours:
        best = min(ours, key=ours.get)
        rec["best_ours"] = best
        t_fused = ours[best]
        if "torch_seq" in r:
            rec["speedup_vs_torch_seq"] = r["torch_seq"] / t_fused
        if "torch_symm" in r:
            rec["speedup_vs_torch_symm"] = r["torch_symm"] / t_fused
        if "gemm_cublas" in r and "comm_nccl" in r:
            rec["overlap_eff"] = max(r["gemm_cublas"], r["comm_nccl"]) / t_fused
        rec["tflops_fused"] = flops / (t_fused * 1e-6) / 1e12
    if "gemm_ours" in r and "gemm_cublas" in r:
        rec["gemm_ours_vs_cublas"] = r["gemm_cublas"] / r["gemm_ours"]
    return rec


def crossover_table(records, world):
    """Smallest M from which the best fused method beats torch_seq for every model at that M and every larger M."""
    ops = {}
    for op in ("ag_gemm", "gemm_rs", "gemm_ar"):
        rs = [r for r in records if r["op"] == op and "speedup_vs_torch_seq" in r]
        if not rs:
            continue
        ms = sorted({r["M"] for r in rs})
        wins = {m: all(r["speedup_vs_torch_seq"] > 1.0 for r in rs if r["M"] == m) for m in ms}
        cross = None
        for i, m in enumerate(ms):
            if all(wins[x] for x in ms[i:]):
                cross = m
                break
        fused = "fused"
        if op == "ag_gemm" and cross is not None:  # the fused method that won most often from the crossover on
            best = [r.get("best_ours", "ours/fused").split("/")[1] for r in rs if r["M"] >= cross]
            fused = max(set(best), key=best.count)
        if cross is None:
            rules = [{"max_m": None, "method": "torch"}]
        elif cross == ms[0]:
            rules = [{"max_m": None, "method": fused}]
        else:
            rules = [{"max_m": cross - 1, "method": "torch"}, {"max_m": None, "method": fused}]
        ops[op] = {str(world): rules, "default": rules}
    return ops


def plot(records, path):
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except Exception:  # noqa: BLE001
        return False
    rows = [r for r in records if "speedup_vs_torch_seq" in r]
    if not rows:
        return False
    labels = [f"{r['op']}\n{r['model'].replace('llama3-', '')} M={r['M']}" for r in rows]
    fig, ax = plt.subplots(figsize=(max(8, 0.7 * len(rows)), 4.5))
    xs = range(len(rows))
    ax.bar([x - 0.2 for x in xs], [r["speedup_vs_torch_seq"] for r in rows], 0.4, label="vs NCCL + cuBLAS")
    ax.bar([x + 0.2 for x in xs], [r.get("speedup_vs_torch_symm", 0) for r in rows], 0.4,
           label="vs torch symm-mem fused")
    ax.axhline(1.0, color="k", lw=0.8)
    ax.set_xticks(list(xs))
    ax.set_xticklabels(labels, fontsize=6, rotation=90)
    ax.set_ylabel("speed-up of best fused method")
    ax.set_title("triton_dist overlapped GEMMs, 2 GPUs, bf16")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    return True


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="fewer shapes / samples")
    ap.add_argument("--ops", default="ag_gemm,gemm_rs,gemm_ar")
    ap.add_argument("--models", default="llama3-70b,llama3-8b")
    ap.add_argument("--m", default=None, help="comma list of global M (default: 128,512,1024,2048,8192)")
    ap.add_argument("--iters", type=int, default=None)
    ap.add_argument("--reps", type=int, default=None)
    ap.add_argument("--write-table", action="store_true", help="write the measured dispatch table (rank 0)")
    ap.add_argument("--tag", default="")
    args = ap.parse_args()
    unknown = [op for op in args.ops.split(",") if op not in ("ag_gemm", "gemm_rs", "gemm_ar")]
    if unknown:
        ap.error(f"--ops: unknown {unknown}; accepted: ag_gemm, gemm_rs, gemm_ar")
    args.iters = args.iters or (3 if args.quick else 10)
    args.reps = args.reps or (5 if args.quick else 15)
    ms = [int(x) for x in args.m.split(",")] if args.m else (QUICK_M if args.quick else FULL_M)
    ar_ms = [16, 128] if args.quick else AR_M

    import triton_dist.utils as tdu

    tdu.initialize_distributed()
    rank, W = dist.get_rank(), dist.get_world_size()
    gname, symm_err = symm_group_name()
    records, failures = [], []
    for model in args.models.split(","):
        for op in args.ops.split(","):
            for M in (ar_ms if op == "gemm_ar" else ms):
                try:
                    if op == "ag_gemm":
                        bench_ag(model, M, args, rank, W, gname, records)
                    else:
                        bench_partials(op, model, M, args, rank, W, gname, records)
                    if rank == 0:
                        r = records[-1]
                        print(json.dumps({k: r[k] for k in r if k not in ("errors", )}), flush=True)
                        if r["errors"]:
                            print("  errors:", r["errors"], flush=True)
                except Exception as exc:  # noqa: BLE001
                    failures.append({"op": op, "model": model, "M": M, "error": traceback.format_exc()[-2000:]})
                    if rank == 0:
                        print(f"FAILED {op} {model} M={M}: {exc}", flush=True)
    if rank == 0:
        stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
        outdir = os.environ.get("TRITON_DIST_RESULTS_DIR", os.path.join(HERE, "results"))
        os.makedirs(outdir, exist_ok=True)
        base = os.path.join(outdir, f"overlap-{stamp}{('-' + args.tag) if args.tag else ''}")
        doc = {"benchmark": "bench_overlap", "command": " ".join(sys.argv), "world_size": W, "quick": args.quick,
               "iters": args.iters, "reps": args.reps, "git_commit": git_commit(),
               "tree": tree_fingerprint(), "versions": versions(),
               "env": {k: os.environ.get(k) for k in ("NVSHMEM_DISABLE_NVLS", "NCCL_NVLS_ENABLE",
                                                       "TORCH_SYMM_MEM_DISABLE_MULTICAST")},
               "torch_symm_available": gname is not None, "torch_symm_error": symm_err,
               "records": records, "failures": failures}
        table = crossover_table(records, W)
        doc["crossover_table"] = table
        with open(base + ".json", "w") as f:
            json.dump(doc, f, indent=1)
        if plot(records, base + ".png"):
            print("plot:", base + ".png")
        print("results:", base + ".json")
        if args.write_table and table:
            from triton_dist.ops import overlap as ov

            new = {"status": "measured", "source": os.path.basename(base) + ".json", "git_commit": doc["git_commit"],
                   "gpu": doc["versions"].get("gpu"), "note": "crossover M per op from benchmarks/bench_overlap.py",
                   "ops": {**ov.DEFAULT_TABLE["ops"], **table}}
            with open(ov.TABLE_PATH, "w") as f:
                json.dump(new, f, indent=1)
            print("dispatch table:", ov.TABLE_PATH)
    dist.barrier()
    tdu.finalize_distributed()


if __name__ == "__main__":
    main()
