"""One-off measurements of the collectives, run as options of the collectives bench (``--probe NAME`` first, then
the probe's own options). ``host-path`` was the script ``benchmarks/profile_host_path.py`` (the results READMEs and
docs cite it by that name; its JSON keeps ``"benchmark": "profile_host_path"`` and ``host_path_<stamp>.json``).

``host-path``: where an eager collective call's host microseconds go: each layer of the all-reduce call path timed
alone.

    scripts/launch.sh --nproc_per_node 2 benchmarks/bench_collectives.py --probe host-path [--bytes 8192] [--calls 400]

Every case is ``--calls`` back-to-back eager calls on every rank (same sequence on every rank, a barrier between
cases). Per case: ``host_us`` = the Python loop's wall time / calls (what the host spends submitting one call) and
``eager_us`` = CUDA-event time of the same loop / calls (what a caller waits per call: host and GPU, whichever is
slower). Cases, from the bare launch up to the public op:

* ``triton_empty``: a ``triton.jit`` kernel with the one-shot all-reduce's parameter list and an empty body,
  ``kernel[grid](...)`` (Triton's own launch path).
* ``dist_empty``: the same kernel as ``triton_dist.jit``; ``dist_empty_bound``: through ``bind_launch``.
* ``ar_kernel``: the one-shot all-reduce kernel launched as ``kernel[grid](...)``; ``ar_kernel_bound``: through the
  context's bound launch (``ctx._launch``).
* ``all_reduce_one_shot``: ``all_reduce(x, ctx, out=out, method="one_shot")``; ``all_reduce_auto``:
  ``all_reduce(x, ctx)`` (picks the method, allocates ``out``).
* ``graph_replay``: replay of a CUDA graph holding one one-shot all-reduce (the floor of a graphed call);
  ``all_reduce_one_shot_graph_calls`` / ``all_reduce_auto_out_graph_calls``: the public call with
  ``ctx.graph_calls = True`` and a fixed ``out`` (replays the context's graph of that call).
* ``nccl``: ``dist.all_reduce(x)``; ``torch_symm_one_shot``: ``torch.ops.symm_mem.one_shot_all_reduce`` on a
  symmetric tensor (when this torch has it). Where ranks share a GPU (no NCCL in the process group; the JSON's
  ``shared_gpu``: true): ``gloo_host`` (``torch_collectives.all_reduce``: gloo on host copies) instead of ``nccl``, and
  no ``torch_symm_one_shot``; ``unavailable`` says why for both.

Also writes the top functions of a cProfile of ``all_reduce_auto`` calls (rank 0). JSON to
``$TRITON_DIST_RESULTS_DIR`` (default benchmarks/results/). GPU only.
"""
from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))
os.environ.setdefault("NVSHMEM_DISABLE_NVLS", "1")
os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
os.environ.setdefault("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1")

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402
import harness  # noqa: E402
from provenance import topology, topology_line  # noqa: E402

import triton_dist  # noqa: E402


def _empty_body(x_ptr, out_ptr, buf_ptr, ready_ptr, counter_ptr, N, CAP, tag, rank, WORLD: tl.constexpr,
                BLOCK: tl.constexpr):
    pass


triton_empty = triton.jit(_empty_body)
dist_empty = triton_dist.jit(_empty_body)


def time_case(fn, calls: int, barrier) -> dict:
    for _ in range(5):
        fn()
    torch.cuda.synchronize()
    barrier()
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    t1 = time.perf_counter()
    b.record()
    b.synchronize()
    barrier()
    return {"host_us": (t1 - t0) * 1e6 / calls, "eager_us": a.elapsed_time(b) * 1e3 / calls}


def probe_host_path(argv=None) -> int:
    """Each layer of the eager all-reduce call path timed alone (host and CUDA-event time per call), plus a cProfile
    of ``all_reduce(x, ctx)`` calls; the module docstring lists the cases."""
    ap = argparse.ArgumentParser(prog="bench_collectives.py --probe host-path",
                                 description="Where an eager collective call's host microseconds go: each layer of "
                                             "the all-reduce call path timed alone.")
    ap.add_argument("--bytes", type=int, default=8192, help="all-reduce size in bytes (bf16)")
    ap.add_argument("--calls", type=int, default=400)
    ap.add_argument("--tag", default="")
    args = ap.parse_args(argv)
    if not torch.cuda.is_available():
        raise SystemExit("bench_collectives --probe host-path measures GPU launches: run it on a GPU machine")

    import triton_dist.utils as tdu
    from triton_dist import ops

    tdu.initialize_distributed()
    rank, world = dist.get_rank(), dist.get_world_size()
    from triton_dist.runtime import torch_collectives as TC

    topo = topology()
    nccl = TC.group_has_nccl()  # False: ranks share a GPU (gloo-only group)
    if rank == 0:
        print(f"bench_collectives --probe host-path: {topology_line(topo)}", flush=True)
    n = args.bytes // 2
    ctx = ops.create_allreduce_ctx(max(n, 1 << 16), torch.bfloat16)
    x = torch.randn(n, device="cuda").to(torch.bfloat16)
    out = torch.empty_like(x)

    def barrier():
        torch.cuda.synchronize()
        dist.barrier()

    ch = ctx.one_shot_small if n <= ctx.small_cap else ctx.one_shot
    cap = ctx.small_cap if ch is ctx.one_shot_small else ctx.one_shot_cap
    grid = (ch.num_programs, )
    kargs = (x, out, ch.buf, ch.ready, ch.counter, n, cap, n % (1 << 24), rank)
    kw = dict(WORLD=world, BLOCK=ch.block, num_warps=ch.num_warps)
    from triton_dist.kernels import allreduce as _ar

    bound_empty = dist_empty.bind_launch(grid, **kw)
    cases = {
        "triton_empty": lambda: triton_empty[grid](*kargs, **kw),
        "dist_empty": lambda: dist_empty[grid](*kargs, **kw),
        "dist_empty_bound": lambda: bound_empty(*kargs),
        "ar_kernel": lambda: _ar.allreduce_one_shot_kernel[grid](*kargs, **kw),
        "ar_kernel_bound": lambda: ctx._launch(_ar.allreduce_one_shot_kernel, ch, *kargs[:-1]),
        "all_reduce_one_shot": lambda: ops.all_reduce(x, ctx, out=out, method="one_shot"),
        "all_reduce_auto": lambda: ops.all_reduce(x, ctx),
    }
    unavailable = {}
    if nccl:
        cases["nccl"] = lambda: dist.all_reduce(out)
    else:
        cases["gloo_host"] = lambda: TC.all_reduce(out)
        unavailable["nccl"] = ("no NCCL: ranks share a GPU (gloo-only process group); timed instead: gloo_host "
                               "(torch_collectives on host copies)")
    graph = torch.cuda.CUDAGraph()  # the floor of a graphed call: one replay of a one-kernel graph
    ops.all_reduce(x, ctx, out=out, method="one_shot")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        graph.capture_begin()
        ops.all_reduce(x, ctx, out=out, method="one_shot")
        graph.capture_end()
    torch.cuda.synchronize()
    cases["graph_replay"] = graph.replay

    cases["all_reduce_one_shot_graph_calls"] = cases["all_reduce_one_shot"]  # run with ctx.graph_calls = True
    cases["all_reduce_auto_out_graph_calls"] = lambda: ops.all_reduce(x, ctx, out=out)
    if not nccl:
        unavailable["torch_symm_one_shot"] = ("skipped: ranks share a GPU (gloo-only process group): torch symmetric "
                                              "memory needs a group with NCCL / CUDA IPC support")
    else:
        try:
            import torch.distributed._symmetric_memory as symm_mem

            sx = symm_mem.empty(n, dtype=torch.bfloat16, device="cuda")
            sx.copy_(x)
            group_name = dist.group.WORLD.group_name
            symm_mem.rendezvous(sx, group_name)
            op = torch.ops.symm_mem.one_shot_all_reduce
            cases["torch_symm_one_shot"] = lambda: op(sx, "sum", group_name)
        except Exception as exc:  # noqa: BLE001
            unavailable["torch_symm_one_shot"] = f"{type(exc).__name__}: {exc}"[:300]

    rows = {}
    for name, fn in cases.items():
        ctx.graph_calls = name.endswith("_graph_calls")
        r = time_case(fn, args.calls, barrier)
        t = torch.tensor([r["host_us"], r["eager_us"]], device="cuda" if nccl else "cpu")
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        rows[name] = {"host_us": r["host_us"], "eager_us": r["eager_us"], "max_host_us": t[0].item(),
                      "max_eager_us": t[1].item()}
        if rank == 0:
            print(f"{name:22s} host {r['host_us']:7.2f} us  eager {r['eager_us']:7.2f} us  (max over ranks "
                  f"{t[0].item():7.2f} / {t[1].item():7.2f})", flush=True)

    ctx.graph_calls = False
    prof = cProfile.Profile()
    fn = cases["all_reduce_auto"]
    barrier()
    prof.enable()
    for _ in range(args.calls):
        fn()
    prof.disable()
    barrier()
    s = io.StringIO()
    pstats.Stats(prof, stream=s).sort_stats("tottime").print_stats(25)
    if rank == 0:
        print(s.getvalue(), flush=True)
        stamp = harness.utc_stamp()
        doc = harness.result_header("profile_host_path", topo, stamp, bytes=args.bytes, calls=args.calls, cases=rows,
                                    unavailable=unavailable, cprofile_all_reduce_auto=s.getvalue())
        path = harness.write_json(os.path.join(harness.results_dir(),
                                               f"host_path_{stamp}{('_' + args.tag) if args.tag else ''}.json"), doc)
        print(f"wrote {path}", flush=True)
    barrier()
    ctx.close()
    tdu.finalize_distributed()
    return 0


#: ``bench_collectives.py --probe NAME``: the probe's entry point (called with the options after the name)
PROBES = {"host-path": probe_host_path}


if __name__ == "__main__":
    sys.exit("collectives_probes is not run directly: bench_collectives.py --probe NAME (" + ", ".join(PROBES) + ")")
