"""The MoE layer at tensor parallelism ``world`` (every rank holds a ``1 / world`` column slice of every expert: the
expert intermediate split over the ranks), run under torchrun at any world size, 1 included::

    scripts/launch.sh --ranks-per-gpu auto --nproc_per_node 2 benchmarks/bench_moe_tp.py
        [--models qwen3-30b-a3b,deepseek-v3] [--tokens 128,1024,8192] [--no-compile] [--out DIR]
    scripts/launch.sh --nproc_per_node 2 benchmarks/bench_moe_tp.py --tiny      # no GPU: the simulator, checks only

Shapes: the expert shapes of bench_group_gemm (Qwen3-30B-A3B: 128 experts, top-8, hidden 2048, intermediate 768;
DeepSeek-V3: 256 experts, top-8, hidden 7168, intermediate 2048), the intermediate split over the ``world`` ranks.
``--tokens`` are the routed tokens of the whole world per call (default 128, 1024, 8192); each rank holds ``tokens /
world`` of them (a sequence shard) and routes them at random (top-k of random scores, softmax weights).

Columns (us per layer call, max over ranks):
  ``ours``: ``layers.TPMoE`` forward (``ops.ag_group_gemm`` -> ``ops.moe_silu_gate`` -> ``ops.group_gemm_rs``);
  ``ours/ag_group_gemm``: ``ag_group_gemm`` alone (the tokens' all-gather inside the first grouped GEMM);
  ``ours/group_gemm_rs``: ``group_gemm_rs`` alone (the second grouped GEMM, top-k sum and reduce-scatter), on the
  gated activation of one ``ag_group_gemm`` call. The two op columns are the breakdown of ours: no baseline of
  their own, the ratios are the layer's.
Baselines, in the same process, timed the same way:
  ``torch``: ``layers.tp_moe_torch``, the torch reference layer (``all_gather_into_tensor``, the experts on the
  slices through ``torch._grouped_mm``, ``reduce_scatter_tensor``; NCCL, or gloo on host copies where ranks share a
  GPU). It counts the rows per expert with ``torch.bincount``, which reads a size on the host, and gloo copies
  through the host: it cannot be captured, so its graph column is eager (``graphed`` false; the capture error is in
  ``graph_failures``, the printed table marks it ``*``) and only its eager ratio is given;
  ``torch/capturable``: the same layer with no host synchronisation, so a CUDA graph holds it: at world 1
  bench_group_gemm's ``torch_moe_layer`` (a stable argsort of the slots, ``index_select``, ``torch._grouped_mm``
  twice, ``index_add_``); at world > 1 the tokens and their routing all-gathered with NCCL
  (``all_gather_into_tensor``), that layer on the slices, its output reduce-scattered (``reduce_scatter_tensor``).
  Only where the group has NCCL (real GPUs, one per rank): ranks that share a GPU have gloo only, which cannot be
  captured (``baselines_unavailable`` says so);
  ``torch.compile``: world 1 only: ``torch.compile`` of ``torch_moe_layer`` (static shapes, compiled afresh per
  shape), the strongest plain torch layer a user would pick (``--no-compile`` leaves it out).
Every implementation is checked against ``torch`` (relative Frobenius error <= 2e-2, every rank) before the timing;
one that fails is dropped from the timing and named in ``errors`` (an ``ours*`` column failing exits with status 1
after the JSON is written). ``ours/ag_group_gemm`` is checked through ``ours/group_gemm_rs``, which runs on its
output. Ratios: ``<baseline>_over_ours`` = baseline time / ours (> 1: ours faster), like with like: the graph column's
only where both were captured, ``eager_<baseline>_over_ours`` from the eager columns; ``best_baseline_over_ours`` /
``eager_best_baseline_over_ours`` against the fastest baseline of each column.

Timing (benchmarks/harness.py): CUDA-graph replay of ``k`` back-to-back calls where capture works, interleaved, and
eager calls of every implementation as their own column. Ranks that share a GPU (``shared_gpu`` true in the JSON;
``launch.sh --ranks-per-gpu``) have no NVLink between them: those figures say what the kernels cost on one GPU,
never what they would on several, and are never mixed with NVLink figures. ``--tiny``: a tiny shape (4 experts,
top-2, hidden 16, intermediate 32, 4 tokens); on the simulator (no GPU) the only mode, and there nothing is timed:
every implementation that runs on the CPU is checked and the record written (``timing`` in the JSON says so).
Writes ``moe_tp-<stamp>.json`` to ``--out`` (default ``$TRITON_DIST_RESULTS_DIR`` or benchmarks/results).
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
from bench_group_gemm import MODELS, torch_moe_layer  # noqa: E402  (the expert shapes; the capturable torch layer)

TOKENS = [128, 1024, 8192]
#: --tiny's shape (the simulator's): the intermediate splits over up to 4 ranks into 16-byte rows of bf16
TINY = {"tiny": dict(experts=4, topk=2, hidden=16, inter=32)}
TINY_TOKENS = [4]
SAMPLE_US = 2000.0
REPS = 15
#: the baselines of the layer, in the order the table prints them
BASELINES = ("torch", "torch/capturable", "torch.compile")
#: every column, in the order the table prints them
ORDER = ("ours", "ours/ag_group_gemm", "ours/group_gemm_rs") + BASELINES


def torch_tp_layer(x, idx, w, wgu, wd, world):
    """The torch TP layer with no host synchronisation (CUDA-graph capturable where the group has NCCL): at world 1
    ``torch_moe_layer`` alone; else the tokens and their routing (ids as float32, exact below 2**24, beside the
    weights: one gather) all-gathered, ``torch_moe_layer`` of every gathered token on this rank's slices, and its
    output (in ``x``'s dtype, as ``tp_moe_torch``'s partial sums) reduce-scattered back to the tokens' owners."""
    if world == 1:
        return torch_moe_layer(x, idx, w, wgu, wd)
    from triton_dist.runtime.torch_collectives import all_gather_into_tensor, reduce_scatter_tensor

    T, k = idx.shape
    xs = torch.empty((world * T, x.shape[1]), dtype=x.dtype, device=x.device)
    all_gather_into_tensor(xs, x)
    routes = torch.empty((world * T, 2 * k), dtype=torch.float32, device=x.device)
    all_gather_into_tensor(routes, torch.cat([idx.to(torch.float32), w.to(torch.float32)], dim=1))
    y = torch_moe_layer(xs, routes[:, :k].long(), routes[:, k:], wgu, wd)
    out = torch.empty_like(x)
    reduce_scatter_tensor(out, y)
    return out


def fill(param, seed, dev, scale=4.0):
    """``param`` (``[E, ...]``) <- reproducible values (``harness.rand / scale``), a chunk of experts at a time
    (DeepSeek-V3's gate_up slice at world 1 has 7.5e9 elements: one fp32 temporary of it would take 30 GB)."""
    per = max(1, (1 << 28) // max(1, param[0].numel()))
    with torch.no_grad():
        for i, e0 in enumerate(range(0, param.shape[0], per)):
            chunk = param[e0:e0 + per]
            chunk.copy_(harness.rand(tuple(chunk.shape), seed * 1000 + i, device=dev) / scale)


def bench_one(name, model, total, rank, world, gpu, compile_torch=True, seed=0):
    from triton_dist import ops
    from triton_dist.layers import TPMoE, tp_moe_torch
    from triton_dist.runtime.torch_collectives import group_has_nccl

    E, k, H, inter = model["experts"], model["topk"], model["hidden"], model["inter"]
    T, i_loc = total // world, inter // world
    dev = "cuda" if gpu else "cpu"
    gen = torch.Generator(device=dev).manual_seed(seed * 1000 + rank)
    top = torch.rand(T, E, device=dev, generator=gen).topk(k, dim=1)
    idx, w = top.indices, torch.softmax(top.values, dim=1)
    x = harness.rand((T, H), seed + 1 + 17 * rank, device=dev)
    # check_ids=False: the torch layers check nothing either (and the check is one host synchronisation per call)
    layer = TPMoE(H, inter, E, k, T, torch.bfloat16, check_ids=False)
    fill(layer.w_gate_up, seed + 2 + 17 * rank, dev)  # this rank's slices (distinct per rank)
    fill(layer.w_down, seed + 3 + 17 * rank, dev)
    wgu, wd, ctx = layer.w_gate_up, layer.w_down, layer.ctx
    nccl = group_has_nccl(None)

    h, offs, handle = ops.ag_group_gemm(x, idx, w, wgu, ctx, check_ids=False)
    a = ops.moe_silu_gate(h, offs)  # group_gemm_rs alone runs on this call's gated activation and handle
    fns = {"ours": lambda: layer(x, idx, w),
           "ours/ag_group_gemm": lambda: ops.ag_group_gemm(x, idx, w, wgu, ctx, check_ids=False),
           "ours/group_gemm_rs": lambda: ops.group_gemm_rs(a, wd, handle, ctx),
           "torch": lambda: tp_moe_torch(x, idx, w, wgu, wd)}
    unavailable = {}
    if world == 1 or nccl or not gpu:  # the simulator: gloo on CPU tensors, checked (never timed)
        fns["torch/capturable"] = lambda: torch_tp_layer(x, idx, w, wgu, wd, world)
    else:
        unavailable["torch/capturable"] = ("no NCCL: ranks share a GPU (gloo-only process group), whose collectives "
                                           "copy through the host and cannot be captured")
    if world > 1:
        unavailable["torch.compile"] = "world > 1: timed at world 1 only"
    elif not compile_torch:
        unavailable["torch.compile"] = "--no-compile"
    elif not gpu:
        unavailable["torch.compile"] = "the simulator: not compiled (a CPU build says nothing of the GPU's)"
    else:
        import torch._dynamo as dynamo

        dynamo.reset()  # compiled afresh for this shape: static, not the dynamic graph of a recompile
        fns["torch.compile"] = torch.compile(lambda: torch_moe_layer(x, idx, w, wgu, wd), dynamic=False)
    ref = tp_moe_torch(x, idx, w, wgu, wd)
    ag = {"ours/ag_group_gemm": fns.pop("ours/ag_group_gemm")}
    errors = harness.drop_failing(fns, ref)  # every rank keeps the same implementations
    errors.update(harness.drop_failing(ag))
    fns.update(ag)
    fns = {n: fns[n] for n in ORDER if n in fns}  # the table's order: ours, its two ops, the baselines
    rel = {n: harness.max_over_ranks(harness.rel_error(fns[n](), ref)) for n in ("ours", "ours/group_gemm_rs")
           if n in fns}
    rec = {"name": name, "world": world, "tokens": total, "tokens_per_rank": T, "experts": E, "topk": k, "hidden": H,
           "inter": inter, "inter_per_rank": i_loc, "rel_error_vs_torch": rel.get("ours"),
           "ops_rel_error_vs_torch": rel.get("ours/group_gemm_rs"), "errors": errors,
           "baselines_unavailable": unavailable, "torch_collectives_backend": "nccl" if nccl else "gloo"}
    if gpu:
        lead = fns.get("ours") or next(iter(fns.values()))
        k_calls = harness.calls_per_sample(lead, SAMPLE_US)
        graphed = harness.time_interleaved(fns, k_calls, REPS)
        eager = {impl: harness.time_eager(fn, k_calls, REPS) for impl, fn in fns.items()}
        rec.update({"calls_per_sample": k_calls, "us": {i: t for i, (t, _) in graphed.items()},
                    "graphed": {i: g for i, (_, g) in graphed.items()}, "eager_us": eager})
        rec.update(ratios(rec))
    else:
        rec.update({"calls_per_sample": None, "us": {}, "graphed": {}, "eager_us": {}, "checked": list(fns)})
    layer.close()
    return rec


def ratios(rec) -> dict:
    """``<baseline>_over_ours`` (graph column; only where both were captured), ``eager_<baseline>_over_ours`` and
    the same against the fastest baseline of each column (``best_baseline`` names it)."""
    us, eager, graphed = rec["us"], rec["eager_us"], rec["graphed"]
    out = {}
    if "ours" not in us:
        return out
    like = [b for b in BASELINES if b in us and graphed.get(b) and graphed.get("ours")]
    for b in like:
        out[f"{b}_over_ours"] = us[b] / us["ours"]
    for b in (b for b in BASELINES if b in eager):
        out[f"eager_{b}_over_ours"] = eager[b] / eager["ours"]
    if like:
        best = min(like, key=lambda b: us[b])
        out.update(best_baseline=best, best_baseline_over_ours=us[best] / us["ours"])
    in_eager = [b for b in BASELINES if b in eager]
    if in_eager:
        best = min(in_eager, key=lambda b: eager[b])
        out.update(eager_best_baseline=best, eager_best_baseline_over_ours=eager[best] / eager["ours"])
    return out


def table_lines(rec, shared=False) -> list:
    """The printed rows of one record: the graph column (``*``: eager, capture impossible) and the eager column,
    then the ratios and the checks; ``shared``: ranks share a GPU (said on the record's first line)."""
    head = (f"{rec['name']:14s} TP={rec['world']} T={rec['tokens']:5d} ({rec['tokens_per_rank']}/rank)"
            + ("  [SHARED GPU: no NVLink]" if shared else ""))
    checks = (f"err ours {_g(rec['rel_error_vs_torch'])}  err ops {_g(rec['ops_rel_error_vs_torch'])}"
              + (f"  errors {rec['errors']}" if rec["errors"] else ""))
    if not rec["us"]:
        done = ", ".join(n for n in rec["checked"] if n != "torch")
        return [f"{head}  simulator: checked {done} against torch (no timing)  {checks}"]
    graph = "  ".join(f"{n} {v:.1f}{'' if rec['graphed'][n] else '*'}" for n, v in rec["us"].items())
    eager = "  ".join(f"{n} {v:.1f}" for n, v in rec["eager_us"].items())
    ratio = "  ".join(f"x {b} {rec[f'{b}_over_ours']:.2f}" for b in BASELINES if f"{b}_over_ours" in rec)
    eratio = "  ".join(f"x {b} {rec[f'eager_{b}_over_ours']:.2f}" for b in BASELINES
                       if f"eager_{b}_over_ours" in rec)
    pad = " " * 4
    return [f"{head}", f"{pad}graph us: {graph}", f"{pad}eager us: {eager}",
            f"{pad}graph {ratio or '-'} | eager {eratio or '-'}  (x B: B's time / ours)  {checks}"]


def _g(v):
    return "-" if v is None else f"{v:.1e}"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default=None, help=f"comma-separated, of {', '.join(MODELS)} (default all; with "
                                                   f"--tiny: tiny)")
    ap.add_argument("--tokens", default=None, help=f"routed tokens of the whole world per call, comma-separated, each "
                                                   f"a multiple of the world size (default "
                                                   f"{','.join(map(str, TOKENS))}; with --tiny "
                                                   f"{','.join(map(str, TINY_TOKENS))})")
    ap.add_argument("--tiny", action="store_true", help="the tiny shape (the simulator's: checks only, no timing)")
    ap.add_argument("--no-compile", action="store_true", help="leave out the torch.compile baseline (world 1)")
    ap.add_argument("--out", default=None, help="results folder (default $TRITON_DIST_RESULTS_DIR or "
                                                "benchmarks/results)")
    args = ap.parse_args(argv)
    known = TINY if args.tiny else MODELS
    models = harness.names_arg(ap, "--models", args.models or ",".join(known), known, "model")
    tokens = harness.counts_arg(ap, "--tokens", args.tokens or ",".join(map(str, TINY_TOKENS if args.tiny else
                                                                             TOKENS)))
    if not models or not tokens:
        ap.error("--models / --tokens: nothing to run")
    gpu = not harness.on_simulator()
    if not gpu and not args.tiny:
        raise SystemExit("bench_moe_tp: no GPU (the simulator): only --tiny runs there (checks, no timing); the "
                         "timing needs CUDA GPUs: start it under scripts/launch.sh on a GPU machine")
    # the symmetric heap per rank: the largest context (8192 tokens of DeepSeek-V3's hidden) takes ~0.25 GB
    os.environ.setdefault("NVSHMEM_SYMMETRIC_SIZE", "2G")
    os.environ.setdefault("TRITON_DIST_SIM_SYMMETRIC_SIZE", "64M")  # the simulator's (--tiny)
    import torch.distributed as dist

    import triton_dist.utils as tdu
    from provenance import topology, topology_line

    tdu.initialize_distributed()
    rank, world = dist.get_rank(), dist.get_world_size()
    for t in tokens:
        if t % world:
            ap.error(f"--tokens: {t} routed tokens do not divide over {world} ranks")
    for m in models:
        if known[m]["inter"] % world:
            ap.error(f"{m}: the intermediate {known[m]['inter']} does not divide over {world} ranks")
    topo = topology()
    if rank == 0:
        print(f"bench_moe_tp: {topology_line(topo)}", flush=True)
        if gpu:
            print("bench_moe_tp: us per call, max over ranks; graph: CUDA-graph replay (* eager: the capture failed, "
                  "see graph_failures); x B: B's time / ours (> 1: ours faster), graph against graph, eager against "
                  "eager; err: relative error against torch (tp_moe_torch)", flush=True)
    records = []
    for m in models:
        for t in tokens:
            rec = bench_one(m, known[m], t, rank, world, gpu, compile_torch=not args.no_compile)
            records.append(rec)
            if rank == 0:
                for line in table_lines(rec, bool(topo.get("shared_gpu"))):
                    print(line, flush=True)
            if gpu:
                torch.cuda.empty_cache()
    failed = sorted({n for r in records for n in r["errors"] if n.startswith("ours")})
    if rank == 0:
        stamp = harness.utc_stamp()
        timing = ("CUDA-graph replay of calls_per_sample calls (us; graphed false: eager), and eager calls "
                  "(eager_us); median of samples, max over ranks" if gpu else
                  "none: the simulator (CPU), every implementation checked against torch, nothing timed")
        doc = harness.result_header("bench_moe_tp", topo=topo, stamp=stamp, timing=timing,
                                    ratios="baseline time / ours (> 1: ours faster), graph against graph and eager "
                                           "against eager only", records=records)
        doc["graph_failures"] = harness.GRAPH_FAILURES  # why a column's "graphed" is false (eager instead)
        if gpu and any(not r["graphed"].get("torch", True) for r in records):
            print("bench_moe_tp: * eager: torch (tp_moe_torch) cannot be captured (host read of torch.bincount's "
                  "size; gloo host copies where ranks share a GPU): only its eager ratio is given", flush=True)
        for f in harness.GRAPH_FAILURES:
            print(f"bench_moe_tp: graph capture failed: {f['impl']}: {f['error']}", flush=True)
        path = harness.write_json(os.path.join(harness.results_dir(args.out), f"moe_tp-{stamp}.json"), doc)
        print(f"bench_moe_tp: wrote {path}", flush=True)
        if failed:
            print(f"bench_moe_tp: FAILED the check against torch: {', '.join(failed)}", flush=True)
    dist.barrier()
    if failed:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
