"""Benchmark triton_dist collectives against NCCL (torch.distributed) in the same run.

    scripts/launch.sh --nproc_per_node 2 benchmarks/bench_collectives.py [--quick] [--ops all_reduce,all_gather,...]

For every op, size and method: a correctness check against NCCL's result first, then timing. Each timed sample is a
CUDA-graph replay of ``k`` back-to-back calls measured with CUDA events (graphs for ours AND for NCCL, so host
launch overhead is excluded from both); the reported latency is the median over samples divided by ``k``. Up to
1 MiB the public API's "auto" and NCCL are also timed eagerly (``eager_us`` / ``nccl_eager_us``: host launch
overhead included).
Sizes are the NCCL-tests convention: all_gather = output bytes, reduce_scatter = input bytes, all_reduce = buffer
bytes. busbw: all_gather / reduce_scatter ``S / t * (W - 1) / W``; all_reduce ``2 * S / t * (W - 1) / W``.
"auto" is the public API's default choice (it may fall back to NCCL, reported as such).
Writes JSON to ``$TRITON_DIST_RESULTS_DIR`` (default benchmarks/results/).
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))

os.environ.setdefault("NVSHMEM_SYMMETRIC_SIZE", "20G")
os.environ.setdefault("TRITON_DIST_SIM_SYMMETRIC_SIZE", "256M")  # simulator smoke runs
os.environ.setdefault("NVSHMEM_DISABLE_NVLS", "1")
os.environ.setdefault("NCCL_NVLS_ENABLE", "0")

import torch  # noqa: E402
from graph_capture import capture_calls  # noqa: E402
from provenance import git_commit, tree_fingerprint, versions  # noqa: E402
import torch.distributed as dist  # noqa: E402

KB, MB, GB = 1 << 10, 1 << 20, 1 << 30
FULL_SIZES = [4 * KB, 8 * KB, 16 * KB, 64 * KB, 256 * KB, 1 * MB, 4 * MB, 16 * MB, 64 * MB, 256 * MB, 1 * GB]
QUICK_SIZES = [4 * KB, 8 * KB, 64 * KB, 1 * MB, 16 * MB, 256 * MB]
METHODS = {
    "all_gather": ["push", "pull", "push_pipe", "ce", "auto"],
    "reduce_scatter": ["direct", "direct_push", "push_pipe", "ring", "auto"],
    "all_reduce": ["one_shot", "two_shot", "two_shot_pipe", "auto"],
}






GPU = torch.cuda.is_available()
DEV = "cuda" if GPU else "cpu"  # CPU: simulator smoke run (eager wall-clock timing, gloo as the baseline)


def sync():
    if GPU:
        torch.cuda.synchronize()


def busbw(op, nbytes, us, world):
    if us <= 0:
        return 0.0
    algbw = nbytes / (us * 1e-6) / 1e9
    f = 2 * (world - 1) / world if op == "all_reduce" else (world - 1) / world
    return algbw * f


def time_eager(fn, nbytes, reps):
    k = int(max(1, min(20, (64 * MB) // max(nbytes, 1)))) if GPU else 1
    for _ in range(3 if GPU else 1):
        fn()
    sync()
    dist.barrier()
    times = []
    for _ in range(reps):
        if not GPU:
            t0 = time.perf_counter()
            fn()
            times.append((time.perf_counter() - t0) * 1e6)
            continue
        a = torch.cuda.Event(enable_timing=True)
        b = torch.cuda.Event(enable_timing=True)
        a.record()
        for _ in range(k):
            fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) * 1e3 / k)
    dist.barrier()
    times.sort()
    return times[len(times) // 2]


GRAPH_FAILURES = []
#: eager (no CUDA graph, host launch overhead included) timing of "auto" and NCCL up to this size
EAGER_MAX_BYTES = 1 * MB


def time_graph(fn, nbytes, reps, stream):
    """Median microseconds per call: capture k calls of fn in a CUDA graph, replay reps times (eager timing if
    capture fails; recorded in GRAPH_FAILURES)."""
    if not GPU:
        return time_eager(fn, nbytes, reps)
    try:
        return _time_graph(fn, nbytes, reps, stream)
    except Exception as exc:  # noqa: BLE001
        GRAPH_FAILURES.append(f"{type(exc).__name__}: {exc}"[:300])
        sync()
        dist.barrier()
        return time_eager(fn, nbytes, reps)


def _time_graph(fn, nbytes, reps, stream):
    k = int(max(1, min(20, (64 * MB) // max(nbytes, 1))))
    g = capture_calls(fn, k, stream)
    dist.barrier()
    for _ in range(3):
        g.replay()
    torch.cuda.synchronize()
    dist.barrier()
    times = []
    for _ in range(reps):
        a = torch.cuda.Event(enable_timing=True)
        b = torch.cuda.Event(enable_timing=True)
        a.record()
        g.replay()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) * 1e3 / k)
    torch.cuda.synchronize()
    dist.barrier()
    del g
    times.sort()
    return times[len(times) // 2]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="fewer sizes and iterations (~3 minutes on 2x H200)")
    ap.add_argument("--ops", default="all_reduce,all_gather,reduce_scatter")
    ap.add_argument("--sizes", default=None, help="comma list of byte sizes (overrides the size list)")
    ap.add_argument("--reps", type=int, default=None)
    ap.add_argument("--dtype", default="bfloat16")
    ap.add_argument("--tag", default="")
    ap.add_argument("--methods", default=None, help="comma list: only these methods (e.g. push,push_pipe,auto)")
    # tuning knobs of the contexts (defaults: the library's), for GPU sweeps
    ap.add_argument("--block-bytes", type=int, default=None, help="bytes per block (library default 16384)")
    ap.add_argument("--num-warps", type=int, default=None, help="warps per program (library default 8)")
    ap.add_argument("--pipe-pushers", type=int, default=None,
                    help="push_pipe / two_shot_pipe: programs that push (default half the grid; the rest copy out / "
                    "reduce)")
    ap.add_argument("--pipe-segments", type=int, default=None, help="push_pipe: most segments per call (16)")
    ap.add_argument("--pipe-seg-blocks", type=int, default=None,
                    help="push_pipe: least blocks per segment and pusher (4)")
    args = ap.parse_args()

    import triton_dist.utils as tdu
    from triton_dist import ops

    tdu.initialize_distributed()
    rank, world = dist.get_rank(), dist.get_world_size()
    dtype = getattr(torch, args.dtype)
    esize = torch.empty((), dtype=dtype).element_size()
    sizes = [int(s) for s in args.sizes.split(",")] if args.sizes else (QUICK_SIZES if args.quick else FULL_SIZES)
    reps = args.reps or (10 if args.quick else 30)
    opnames = args.ops.split(",")
    maxb = max(sizes)
    stream = torch.cuda.Stream() if GPU else None
    results = []
    log = (lambda *a: print(*a, flush=True)) if rank == 0 else (lambda *a: None)
    t_start = time.time()

    knobs = {k: v for k, v in (("block_bytes", args.block_bytes), ("num_warps", args.num_warps),
                                ("pipe_pushers", args.pipe_pushers), ("pipe_segments", args.pipe_segments),
                                ("pipe_seg_blocks", args.pipe_seg_blocks)) if v is not None}
    only = args.methods.split(",") if args.methods else None
    for op in opnames:
        if op == "all_gather":
            ctx = ops.create_allgather_ctx(maxb // esize // world, dtype, **knobs)
        elif op == "reduce_scatter":
            ctx = ops.create_reduce_scatter_ctx(maxb // esize, dtype, **knobs)
        else:
            ctx = ops.create_allreduce_ctx(maxb // esize, dtype, one_shot_max_numel=min(maxb, 256 * MB) // esize,
                                           methods=("one_shot", "two_shot", "two_shot_pipe"), **knobs)
        for nbytes in sizes:
            n = nbytes // esize
            if op == "all_gather":
                x = torch.randn(n // world, device=DEV).to(dtype)
                out = torch.empty(n, dtype=dtype, device=DEV)
                ref = torch.empty(n, dtype=dtype, device=DEV)
                nccl = lambda: dist.all_gather_into_tensor(ref, x)  # noqa: E731
                ours = lambda m: ops.all_gather(x, ctx, out=out, method=m)  # noqa: E731
            elif op == "reduce_scatter":
                x = torch.randn(n, device=DEV).to(dtype)
                out = torch.empty(n // world, dtype=dtype, device=DEV)
                ref = torch.empty(n // world, dtype=dtype, device=DEV)
                nccl = lambda: dist.reduce_scatter_tensor(ref, x)  # noqa: E731
                ours = lambda m: ops.reduce_scatter(x, ctx, out=out, method=m)  # noqa: E731
            else:
                x = torch.randn(n, device=DEV).to(dtype)
                out = torch.empty(n, dtype=dtype, device=DEV)
                ref = torch.empty(n, dtype=dtype, device=DEV)

                def nccl():
                    ref.copy_(x)
                    dist.all_reduce(ref)

                ours = lambda m: ops.all_reduce(x, ctx, out=out, method=m)  # noqa: E731
            nccl()
            sync()
            nccl_ref = ref.clone()
            t_nccl = time_graph(nccl, nbytes, reps, stream)
            t_nccl_eager = time_eager(nccl, nbytes, reps) if nbytes <= EAGER_MAX_BYTES else None
            row_base = dict(op=op, bytes=nbytes, dtype=args.dtype, world=world, nccl_us=t_nccl,
                            nccl_busbw_gbs=busbw(op, nbytes, t_nccl, world), nccl_eager_us=t_nccl_eager)
            for m in METHODS[op]:
                if op == "all_reduce" and m == "one_shot" and n > ctx.one_shot_cap:
                    continue
                if (m not in ctx.methods and m != "auto") or (only and m not in only):
                    continue
                resolved = m
                if m == "auto":
                    resolved = ctx.select(nbytes)
                try:
                    out.zero_()
                    ours(m)
                    sync()
                    err = (out.float() - nccl_ref.float()).abs().max().item() if out.numel() else 0.0
                    tol = 0.0 if op == "all_gather" else 0.05 * max(1.0, nccl_ref.float().abs().max().item())
                    ok = err <= tol
                    t = time_graph(lambda: ours(m), nbytes, reps, stream)
                    t_eager = (time_eager(lambda: ours(m), nbytes, reps)
                               if m == "auto" and nbytes <= EAGER_MAX_BYTES else None)
                except Exception as exc:  # noqa: BLE001
                    log(f"ERROR {op} {m} {nbytes}: {type(exc).__name__}: {exc}")
                    results.append(dict(row_base, method=m, error=f"{type(exc).__name__}: {exc}"))
                    continue
                row = dict(row_base, method=m, resolved=resolved, us=t, busbw_gbs=busbw(op, nbytes, t, world),
                           speedup=t_nccl / t if t > 0 else 0.0, correct=bool(ok), max_err=err, eager_us=t_eager)
                results.append(row)
                log(f"{op:15s} {m:12s} {nbytes:>11d} B  ours {t:9.2f} us ({row['busbw_gbs']:7.1f} GB/s)  nccl "
                    f"{t_nccl:9.2f} us ({row_base['nccl_busbw_gbs']:7.1f} GB/s)  x{row['speedup']:.2f}  "
                    f"{'ok' if ok else 'WRONG err=%g' % err}")
            # Release this size's buffers before the next one is allocated. Not `del`: ruff (F821) then reports
            # every use of these names inside the closures above as undefined.
            x = out = ref = nccl_ref = None
        dist.barrier()
        ctx.close()
        if GPU:
            torch.cuda.empty_cache()

    if rank == 0:
        outdir = os.environ.get("TRITON_DIST_RESULTS_DIR", os.path.join(HERE, "results"))
        os.makedirs(outdir, exist_ok=True)
        stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
        doc = {
            "benchmark": "bench_collectives",
            "command": " ".join([os.path.basename(sys.executable)] + sys.argv),
            "mode": "quick" if args.quick else "full",
            "timestamp_utc": stamp,
            "git_commit": git_commit(), "tree": tree_fingerprint(),
            "versions": versions(),
            "devices": ([torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())] if GPU else
                        ["cpu-simulator"]),
            "world_size": world,
            "env": {k: os.environ.get(k) for k in ("NVSHMEM_DISABLE_NVLS", "NCCL_NVLS_ENABLE", "NVSHMEM_SYMMETRIC_SIZE")},
            "timing": ("CUDA-graph replay of k calls, CUDA events, median of reps samples / k" if GPU else
                       "simulator smoke run: eager wall clock (not a performance figure)"),
            "wall_s": time.time() - t_start,
            "context_knobs": knobs,
            "graph_capture_failures": GRAPH_FAILURES,
            "results": results,
        }
        path = os.path.join(outdir, f"collectives_{stamp}{('_' + args.tag) if args.tag else ''}.json")
        with open(path, "w") as f:
            json.dump(doc, f, indent=1)
        print(f"wrote {path}", flush=True)
    dist.barrier()
    tdu.finalize_distributed()


if __name__ == "__main__":
    main()
