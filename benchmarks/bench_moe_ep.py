"""The MoE layer at expert parallelism ``world`` (every rank holds ``num_experts / world`` experts), run under
torchrun at any world size, 1 included::

    scripts/launch.sh --ranks-per-gpu auto --nproc_per_node 2 benchmarks/bench_moe_ep.py [--models qwen3-30b-a3b]
        [--tokens 128,1024] [--methods push,normal,ll] [--out DIR]

Columns (us per layer call, max over ranks):
  ``ours``: ``layers.ep_moe_forward`` (``ep_dispatch``, grouped GEMM, SiLU gate, grouped GEMM, ``ep_combine``) with
  the EP method ``push``; ``ours/normal``: the same with method ``normal`` (each token crosses once per rank holding
  one of its experts; the receiver routes locally); ``ours/ll``: method ``ll`` (one launch per direction; timed only
  at token counts up to ``ops.moe_ep.MAX_LL_TOKENS`` = 256 and top-k <= 8, left out of the record elsewhere);
  ``ours/a2a``, ``ours/a2a/normal``, ``ours/a2a/ll``: ``ep_dispatch`` + ``ep_combine`` alone (the experts replaced
  by the identity): the communication, per method;
  ``--methods`` picks the methods timed (default all; each gets its own context with only its buffers);
  ``torch``: ``layers.ep_moe_torch``, the same layer in torch ops with ``all_to_all_single`` (NCCL, or gloo on host
  copies where ranks share a GPU) and ``torch._grouped_mm``; it reads the split sizes on the host, so it cannot be
  captured: its graph column is eager (``graphed`` false), and the eager columns compare like with like.
Timing (benchmarks/harness.py): CUDA-graph replay of ``k`` back-to-back calls where capture works, interleaved, and
eager calls of every implementation as their own column. Each rank routes its own tokens at random (top-k of random
scores, softmax weights). Ranks that share a GPU (``shared_gpu`` true in the JSON) have no NVLink between them:
those figures say what the kernels cost on one GPU, never what they would on several.
"""
from __future__ import annotations

import argparse
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "python"))

import harness  # noqa: E402
from bench_group_gemm import MODELS  # noqa: E402  (the expert shapes: experts, top-k, hidden, intermediate)

TOKENS = [128, 1024]
SAMPLE_US = 2000.0
REPS = 15


#: the EP methods a run may time (ops.moe_ep.EP_METHODS), and the column suffix of each
METHODS = ("push", "normal", "ll")


def _col(base, method):
    """The column of ``base`` ("ours" or "ours/a2a") for ``method``: push keeps the plain names."""
    return base if method == "push" else f"{base}/{method}"


def bench_one(name, model, tokens, rank, world, seed=0, methods=METHODS):
    from triton_dist import ops
    from triton_dist.layers import ep_moe_forward, ep_moe_torch

    from triton_dist.ops.moe_ep import MAX_LL_TOKENS, MAX_LL_TOPK

    E, k, H, inter = model["experts"], model["topk"], model["hidden"], model["inter"]
    e_loc = E // world
    skipped = [m for m in methods if m == "ll" and (tokens > MAX_LL_TOKENS or k > MAX_LL_TOPK)]
    methods = tuple(m for m in methods if m not in skipped) or ("push", )  # ll alone past its limits: push
    gen = torch.Generator(device="cuda").manual_seed(seed * 1000 + rank)
    top = torch.rand(tokens, E, device="cuda", generator=gen).topk(k, dim=1)
    idx, w = top.indices, torch.softmax(top.values, dim=1)
    x = harness.rand((tokens, H), seed + 1 + 17 * rank)
    wgu = harness.rand((e_loc, H, 2 * inter), seed + 2 + 17 * rank) / 4
    wd = harness.rand((e_loc, inter, H), seed + 3 + 17 * rank) / 4
    ctxs = {m: ops.create_ep_ctx(tokens, H, k, E, torch.bfloat16, method=m, methods=(m, )) for m in methods}

    def layer(ctx):
        return lambda: ep_moe_forward(x, idx, w, wgu, wd, ctx, check_ids=False)

    def a2a(ctx):
        def run():
            t, _, _, handle = ops.ep_dispatch(x, idx, w, ctx, check_ids=False)
            return ops.ep_combine(t, handle, ctx)
        return run

    fns = {}
    for m, ctx in ctxs.items():
        fns[_col("ours", m)] = layer(ctx)
        fns[_col("ours/a2a", m)] = a2a(ctx)
    fns["torch"] = lambda: ep_moe_torch(x, idx, w, wgu, wd, E)
    ref = ep_moe_torch(x, idx, w, wgu, wd, E)
    ident = (x.float() * w.float().sum(1, keepdim=True)).to(x.dtype)
    err = {m: harness.max_over_ranks(harness.rel_error(fns[_col("ours", m)](), ref)) for m in methods}
    a2a_err = {m: harness.max_over_ranks(harness.rel_error(fns[_col("ours/a2a", m)](), ident)) for m in methods}
    primary = _col("ours", methods[0])
    k_calls = harness.calls_per_sample(fns[primary], SAMPLE_US)
    graphed = harness.time_interleaved(fns, k_calls, REPS)
    eager = {impl: harness.time_eager(fn, k_calls, REPS) for impl, fn in fns.items()}
    for ctx in ctxs.values():
        ctx.close()
    rec = {"name": name, "tokens_per_rank": tokens, "experts": E, "experts_per_rank": e_loc, "topk": k, "hidden": H,
           "inter": inter, "methods": list(methods), "calls_per_sample": k_calls,
           "us": {i: t for i, (t, _) in graphed.items()}, "graphed": {i: g for i, (_, g) in graphed.items()},
           "eager_us": eager, "rel_error_vs_torch": err[methods[0]], "a2a_rel_error": a2a_err[methods[0]],
           "rel_error_vs_torch_by_method": err, "a2a_rel_error_by_method": a2a_err, "methods_skipped": skipped}
    us = rec["us"]
    # the torch layer's all_to_all_single backend: "gloo" (host copies) where ranks share a GPU, so its ratios then
    # say nothing of NCCL
    from triton_dist.runtime.torch_collectives import group_has_nccl
    rec["torch_a2a_backend"] = "nccl" if group_has_nccl(None) else "gloo"
    rec["torch_over_ours"] = us["torch"] / us[primary]  # the first method's ("ours" where push is timed)
    rec["eager_torch_over_ours"] = eager["torch"] / eager[primary]
    return rec


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default="qwen3-30b-a3b", help=f"comma-separated, of {', '.join(MODELS)}")
    ap.add_argument("--tokens", default=",".join(map(str, TOKENS)), help="tokens per rank and call")
    ap.add_argument("--methods", default=",".join(METHODS), help=f"comma-separated EP methods to time, of "
                                                                  f"{', '.join(METHODS)} (the first one's layer "
                                                                  f"column gives torch/ours)")
    ap.add_argument("--out", default=None, help="results folder (default $TRITON_DIST_RESULTS_DIR or "
                                                "benchmarks/results)")
    args = ap.parse_args(argv)
    models = harness.names_arg(ap, "--models", args.models, MODELS, "model")
    tokens = harness.counts_arg(ap, "--tokens", args.tokens)
    if not tokens:
        ap.error("--tokens: every count must be >= 1")
    methods = tuple(dict.fromkeys(m for m in args.methods.split(",") if m))
    if not methods or any(m not in METHODS for m in methods):
        ap.error(f"--methods: {args.methods!r}; known: {', '.join(METHODS)}")
    if not torch.cuda.is_available():
        raise SystemExit("bench_moe_ep: needs CUDA GPUs (the baselines are CUDA / NCCL); start it under "
                         "scripts/launch.sh")
    import torch.distributed as dist

    import triton_dist.utils as tdu
    from provenance import topology, topology_line

    tdu.initialize_distributed()
    rank, world = dist.get_rank(), dist.get_world_size()
    for m in models:
        if MODELS[m]["experts"] % world:
            ap.error(f"{m}: {MODELS[m]['experts']} experts do not divide over {world} ranks")
    topo = topology()
    if rank == 0:
        print(f"bench_moe_ep: {topology_line(topo)}", flush=True)
    records = []
    for m in models:
        for t in tokens:
            rec = bench_one(m, MODELS[m], t, rank, world, methods=methods)
            records.append(rec)
            if rank == 0:
                cols = "  ".join(f"{n} {v:9.1f}" for n, v in rec["us"].items())
                print(f"{m:14s} EP={world} T/rank={t:5d}  {cols}  torch/ours {rec['torch_over_ours']:.2f}  "
                      f"eager torch/ours {rec['eager_torch_over_ours']:.2f}  err {rec['rel_error_vs_torch']:.1e}",
                      flush=True)
            torch.cuda.empty_cache()
    if rank == 0:
        stamp = harness.utc_stamp()
        doc = harness.result_header("bench_moe_ep", topo=topo, stamp=stamp, records=records)
        doc["graph_failures"] = harness.GRAPH_FAILURES  # why a column's "graphed" is false (eager instead)
        for f in harness.GRAPH_FAILURES:
            print(f"bench_moe_ep: graph capture failed: {f['impl']}: {f['error']}", flush=True)
        path = harness.write_json(os.path.join(harness.results_dir(args.out), f"moe_ep-{stamp}.json"), doc)
        print(f"bench_moe_ep: wrote {path}", flush=True)
    dist.barrier()


if __name__ == "__main__":
    main()
