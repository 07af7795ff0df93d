"""Where the time of a host-composed overlap method goes: a GPU timeline per stream (torch profiler / CUPTI).

    torchrun --nproc_per_node 2 benchmarks/trace_overlap.py [--cases CASE,...] [--out DIR]

``triton_dist.tools.profiler`` records per-SM tasks inside our Triton kernels; the ``chunked`` / ``one_shot``
methods are sequences of cuBLAS GEMMs, copies and small signal kernels on three streams, which only a CUDA activity
trace shows. For each case
(``op:model:M:method[@f<frac>|@s<S>][:nomemops]``) this script makes three warm-up calls, then records one
CUDA-graph replay of three back-to-back calls (``--eager``: three eager calls) and prints, for the last one on rank
0, every GPU activity with its stream, start (us from the call's first activity), duration and name, plus the
call's span. The Chrome traces of both ranks go to ``--out``, each with the run's ``topology`` / ``shared_gpu`` at its
top level (ranks that shared a GPU: no NVLink in the timeline).
"""
from __future__ import annotations

import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))
os.environ.setdefault("NVSHMEM_SYMMETRIC_SIZE", "8G")
os.environ.setdefault("NVSHMEM_DISABLE_NVLS", "1")
os.environ.setdefault("NCCL_NVLS_ENABLE", "0")

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

from bench_overlap import MODELS, method_of  # noqa: E402
from harness import rand  # noqa: E402
from provenance import label_json, topology, topology_line  # noqa: E402

DEFAULT_CASES = ["gemm_rs:llama3-8b:2048:ce", "gemm_rs:llama3-8b:2048:ce@p1", "gemm_rs:llama3-8b:8192:ce",
                 "gemm_rs:llama3-70b:4096:ce", "gemm_rs:llama3-70b:2048:ce", "gemm_rs:comm-heavy:8192:ce@p4",
                 "gemm_rs:llama3-70b:4096:chunked", "ag_gemm:llama3-8b:2048:chunked", "ag_gemm:llama3-8b:2048:ce",
                 "ag_gemm:llama3-70b:2048:chunked@f0.25"]


def parse_case(text):
    parts = text.split(":")
    if len(parts) not in (4, 5) or parts[0] not in ("ag_gemm", "gemm_rs") or parts[1] not in MODELS:
        raise ValueError(f"case {text!r}: expected op:model:M:method[:nomemops] with op ag_gemm|gemm_rs and model "
                         f"one of {', '.join(MODELS)}")
    return parts[0], parts[1], int(parts[2]), method_of(parts[3]), len(parts) == 5 and parts[4] == "nomemops"


def _no_memops(ctx, memops):
    """``:nomemops`` cases: the fallbacks of the 0/1 flags (wait kernels, copy-engine raises)."""
    if not memops:
        ctx.memops_wait = ctx.memops_remote = False


def make_call(op, model, M, rule, memops, W, rank):
    from triton_dist.ops import overlap as ov

    meth = rule["method"]
    if op == "ag_gemm":
        K, N_tot, _, _ = MODELS[model]
        m_loc = M // W
        ctx = ov.create_ag_gemm_context(m_loc, K, torch.bfloat16)
        _no_memops(ctx, memops)
        a, b = rand((m_loc, K), 1 + rank), rand((K, N_tot // W), 100 + rank)
        kw = {}
        if "first_frac" in rule:
            kw["first_rows"] = ov._first_rows(rule, m_loc)
        return ctx, lambda: ov.ag_gemm(a, b, ctx, method=meth, **kw)
    _, _, K_tot, N = MODELS[model]
    ctx = ov.create_gemm_rs_context(M, N, torch.bfloat16)
    _no_memops(ctx, memops)
    a, b = rand((M, K_tot // W), 1 + rank), rand((K_tot // W, N), 100 + rank)
    kw = {k: rule[k] for k in ("sub_chunks", "pieces") if k in rule}
    return ctx, lambda: ov.gemm_rs(a, b, ctx, method=meth, **kw)


def call_graph(call):
    """Three calls (each after a marker kernel) captured in one CUDA graph, replayed twice; returns the graph.
    Graph replay is how the benchmark times the methods: no host launch gaps, no launch skew between the ranks
    after the first call."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g, stream=stream):
        for _ in range(3):
            torch.cuda._sleep(100)
            call()
    torch.cuda.synchronize()
    for _ in range(2):
        dist.barrier()
        g.replay()
        torch.cuda.synchronize()
    return g


def timeline(trace_path):
    """GPU activities (kernels, memcpy, memset, sync) of the trace: [(stream, start_us, dur_us, name)] sorted."""
    with open(trace_path) as f:
        doc = json.load(f)
    acts = []
    for ev in doc.get("traceEvents", []):
        if ev.get("ph") != "X" or ev.get("cat") not in ("kernel", "gpu_memcpy", "gpu_memset", "cuda_sync"):
            continue
        acts.append((ev.get("args", {}).get("stream", ev.get("tid")), float(ev["ts"]), float(ev.get("dur", 0)),
                     ev.get("name", "?")))
    return sorted(acts, key=lambda x: x[1])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cases", default=",".join(DEFAULT_CASES))
    ap.add_argument("--eager", dest="graph", action="store_false",
                    help="trace eager calls (host launch gaps and skew included) instead of a graph replay")
    ap.add_argument("--out", default=os.environ.get("TRITON_DIST_RESULTS_DIR", os.path.join(HERE, "results")))
    args = ap.parse_args()
    cases = [parse_case(c) for c in args.cases.split(",") if c]
    import triton_dist.utils as tdu

    tdu.initialize_distributed()
    rank, W = dist.get_rank(), dist.get_world_size()
    topo = topology()
    if rank == 0:
        print(f"trace_overlap: {topology_line(topo)}", flush=True)
    os.makedirs(args.out, exist_ok=True)
    from torch.profiler import ProfilerActivity, profile

    for text, (op, model, M, rule, nomem) in zip(args.cases.split(","), cases):
        ctx, call = make_call(op, model, M, rule, not nomem, W, rank)
        try:
            for _ in range(3):
                call()
            torch.cuda.synchronize()
            graph = call_graph(call) if args.graph else None
            dist.barrier()
            with profile(activities=[ProfilerActivity.CUDA]) as prof:
                if graph is not None:
                    graph.replay()
                else:
                    for _ in range(3):
                        torch.cuda._sleep(100)  # marker kernel: where each call starts in the trace
                        call()
                torch.cuda.synchronize()
            path = os.path.join(args.out, f"trace-{text.replace(':', '_').replace('@', '-')}-rank{rank}.json")
            prof.export_chrome_trace(path)
            label_json(path, topo)
            acts = timeline(path)
            # the last call: everything after the last marker kernel
            marks = [i for i, a in enumerate(acts) if "spin" in a[3].lower() or "sleep" in a[3].lower()]
            last_call = acts[marks[-1] + 1:] if marks else acts[-len(acts) // 3:]
            if rank == 0 and last_call:
                t0 = last_call[0][1]
                span = max(a[1] + a[2] for a in last_call) - t0
                print(f"== {text}: last call spans {span:.1f} us (rank 0)", flush=True)
                for stream, ts, dur, name in last_call:
                    print(f"  s{stream!s:>4} {ts - t0:9.1f} {dur:9.1f}  {name[:90]}", flush=True)
        finally:
            torch.cuda.synchronize()
            ctx.close()
    dist.barrier()
    tdu.finalize_distributed()


if __name__ == "__main__":
    main()
