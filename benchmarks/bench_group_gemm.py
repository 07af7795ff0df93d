"""The MoE grouped GEMM (``ops.group_gemm``) against ``torch._grouped_mm`` and a per-expert ``torch.matmul`` loop on
one GPU, at the expert shapes of Qwen3-30B-A3B and DeepSeek-V3 (expert parallelism 1: every expert local).

    python benchmarks/bench_group_gemm.py [--models qwen3-30b-a3b,deepseek-v3] [--tokens 128,1024,8192]
        [--projections gate_up,down] [--configs BMxBNxBKxWARPSxSTAGES,...] [--fp8] [--quick] [--out DIR]
    python benchmarks/bench_group_gemm.py --layer [--models ...] [--tokens ...] [--no-compile]

For every (model, projection, tokens): ``tokens`` tokens routed top-8 over all experts by random scores (so
``rows = 8 * tokens``, a few hundred experts with uneven and sometimes zero rows), the activations ``[rows, K]``
grouped by expert and the weights ``[E, K, N]`` (gate_up: ``K = hidden``, ``N = 2 x intermediate``; down: ``K =
intermediate``, ``N = hidden``). Implementations, each checked first against an fp32 per-expert reference:

* ``ours``: ``ops.group_gemm`` as users get it (the measured table's tiling for the shape and rows-per-expert
  bucket, else ``pick_group_config``'s rule: ``config`` / ``config_from`` in the record), ``check_offsets=False``
  (the check reads the offsets on the host: one synchronisation, what a capture skips anyway);
  ``ours/<tiling>``: each ``--configs`` tiling; ``ours/nk``: weights stored ``[E, N, K]`` (``nn.Linear``'s layout)
  and passed transposed;
* ``grouped_mm`` / ``grouped_mm/nk``: ``torch._grouped_mm`` with the two weight layouts; the faster of the two is the
  baseline the ratios use (the strongest a user would pick);
* ``loop``: one ``torch.matmul`` per expert with rows, the offsets known on the host in advance (the loop's best
  case: no synchronisation inside the timing);
* with ``--fp8``: ``ours/fp8`` (e4m3 with 128-channel block scales; informational: a different precision, no fp8
  baseline is timed, and the floor is the bf16 one).

``--layer``: the whole MoE layer at expert parallelism 1 instead (route, gate_up, SiLU gate, down, combine), ours
(``layers.moe_forward``, ``check_ids=False`` as the torch layer checks nothing) against ``torch``: the same layer written with torch ops a user would pick and that a CUDA
graph can hold (a stable argsort of the slots, ``index_select``, ``torch._grouped_mm`` twice, ``index_add_`` of the
weighted rows), and ``torch.compile`` of it (unless ``--no-compile``); all checked against ``layers.moe_reference``.

``--write-table`` then merges this run into the measured table ``python/triton_dist/kernels/group_gemm_table.json``
(or ``--table-out``): per (expert shape, rows-per-expert bucket), the fastest of ``ours`` and the ``--configs``
tilings, with the results JSON, commit, timestamp, its us and torch._grouped_mm's; an existing entry the run timed
too stays unless the fastest beats it by more than ``--margin`` (default 1.5%). ``--table-from JSON`` does the same
from an earlier run's results JSON, without a GPU (``kernels.group_gemm_table.build_group_gemm_table``).

Timing (benchmarks/harness.py): CUDA-graph replay of ``k`` back-to-back calls for every implementation, interleaved
round-robin, median; and an eager column (``k`` back-to-back eager calls, host launch cost included) for each.
Ratios: ``grouped_mm_over_ours`` (> 1: ours faster) and ``loop_over_ours``. The floor: HBM bytes (weights of the
experts with rows + activations + output) over the bandwidth ceiling ``--hbm-tbs``, and the flops
``2 x rows x K x N`` over ``--tflops``. Writes ``group_gemm-<stamp>.json`` and prints a table.
"""
from __future__ import annotations

import argparse
import json
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))

import harness  # noqa: E402

#: expert shapes: experts, top-k, hidden, expert intermediate
MODELS = {"qwen3-30b-a3b": dict(experts=128, topk=8, hidden=2048, inter=768),
          "deepseek-v3": dict(experts=256, topk=8, hidden=7168, inter=2048)}
TOKENS = [128, 1024, 8192]
PROJECTIONS = ["gate_up", "down"]
SAMPLE_US = 2000
REPS = 9
#: --write-table's default margin: an entry the run timed too stays unless the fastest beats it by more than this
MARGIN = 0.015
#: nominal (HBM TB/s, dense bf16 TFLOP/s) of the GPUs the floor knows, by a substring of the device name; the floor
#: uses the running GPU's unless --hbm-tbs / --tflops say otherwise (H200 figures for an unknown GPU)
CEILINGS = {"H200": (4.8, 989.0), "H100": (3.35, 989.0)}
HBM_TBS, TFLOPS = CEILINGS["H200"]


def device_ceilings():
    """``(HBM TB/s, bf16 TFLOP/s)`` of the current CUDA device from :data:`CEILINGS` (H200's when unknown)."""
    name = torch.cuda.get_device_name() if torch.cuda.is_available() else ""
    return next((v for k, v in CEILINGS.items() if k in name), (HBM_TBS, TFLOPS))


def projection_shape(model: dict, projection: str):
    """``(K, N)`` of one expert's matrix."""
    if projection == "gate_up":
        return model["hidden"], 2 * model["inter"]
    return model["inter"], model["hidden"]


def routing_counts(tokens: int, topk: int, experts: int, seed: int) -> torch.Tensor:
    """Rows per expert (int64, CPU) of a random top-k routing of ``tokens`` tokens."""
    gen = torch.Generator().manual_seed(seed)
    scores = torch.rand(tokens, experts, generator=gen)
    return torch.bincount(scores.topk(topk, dim=1).indices.flatten(), minlength=experts)


def floor_us(counts, K, N, rows, elem_bytes, hbm_tbs, tflops):
    """``(bytes, us)``: the HBM bytes a grouped GEMM must move (each expert with rows reads its weights once; the
    activations are read and the output written once) and the larger of the bandwidth and compute times."""
    used = int((counts > 0).sum())
    nbytes = used * K * N * elem_bytes + rows * K * elem_bytes + rows * N * 2
    return nbytes, max(nbytes / (hbm_tbs * 1e12), 2.0 * rows * K * N / (tflops * 1e12)) * 1e6


def bench_one(name, model, projection, tokens, configs, fp8, hbm_tbs, tflops, seed=0):
    from triton_dist.kernels.gemm_config import TileConfig
    from triton_dist.ops import group_gemm
    from triton_dist.kernels.group_gemm_table import device_name_of
    from triton_dist.ops.moe_gemm import select_group_config

    E, topk = model["experts"], model["topk"]
    K, N = projection_shape(model, projection)
    counts = routing_counts(tokens, topk, E, seed)
    rows = int(counts.sum())
    ends = counts.cumsum(0)
    offs = ends.to(torch.int32).cuda()
    bounds = [0] + ends.tolist()
    a = harness.rand((rows, K), seed + 1)
    w = harness.rand((E, K, N), seed + 2)
    w_nk = w.transpose(1, 2).contiguous()  # [E, N, K] storage
    out = torch.empty(rows, N, dtype=torch.bfloat16, device="cuda")
    ref = torch.empty(rows, N, dtype=torch.float32, device="cuda")
    for e in range(E):
        if bounds[e + 1] > bounds[e]:
            ref[bounds[e]:bounds[e + 1]] = a[bounds[e]:bounds[e + 1]].float() @ w[e].float()

    def loop():
        for e in range(E):
            s, t = bounds[e], bounds[e + 1]
            if t > s:
                torch.matmul(a[s:t], w[e], out=out[s:t])
        return out

    fns = {"ours": lambda: group_gemm(a, w, offs, out=out, check_offsets=False),
           "ours/nk": lambda: group_gemm(a, w_nk.transpose(1, 2), offs, out=out, check_offsets=False),
           "loop": loop}
    for cfg in configs:
        tc = TileConfig.parse(cfg)
        fns[f"ours/{cfg}"] = lambda tc=tc: group_gemm(a, w, offs, out=out, config=tc, check_offsets=False)
    if hasattr(torch, "_grouped_mm"):
        fns["grouped_mm"] = lambda: torch._grouped_mm(a, w, offs=offs, out_dtype=torch.bfloat16)
        fns["grouped_mm/nk"] = lambda: torch._grouped_mm(a, w_nk.transpose(1, 2), offs=offs, out_dtype=torch.bfloat16)
    if fp8:
        f8 = torch.float8_e4m3fn
        kb, nb = K // 128, N // 128
        a8 = (a.float() * 64).to(f8)
        w8 = (w.float() * 64).to(f8)
        sa = torch.full((rows, kb), 1 / 64, device="cuda")
        sb = torch.full((E, kb, nb), 1 / 64, device="cuda")
        fns["ours/fp8"] = lambda: group_gemm(a8, w8, offs, out=out, scale_a=sa, scale_b=sb, check_offsets=False)
    errors = {}
    for impl, fn in list(fns.items()):
        try:
            out.fill_(float("nan"))  # the variants share `out`: a variant that writes nothing must not pass
            got = fn()
            torch.cuda.synchronize()
            err = harness.rel_error(got, ref)
            if err > (5e-2 if impl == "ours/fp8" else 1e-2):
                errors[impl] = f"wrong result: relative error {err:.3g}"
        except Exception as exc:  # noqa: BLE001 - reported beside the timings
            errors[impl] = f"{type(exc).__name__}: {exc}"[:300]
        if impl in errors:
            fns.pop(impl)
    k = harness.calls_per_sample(fns["ours"], SAMPLE_US) if "ours" in fns else 3
    graphed = harness.time_interleaved(fns, k, REPS)
    eager = {impl: harness.time_eager(fn, k, REPS) for impl, fn in fns.items()}
    nbytes, floor = floor_us(counts, K, N, rows, 2, hbm_tbs, tflops)
    # what "ours" ran: the measured table's entry ("table") or the rule ("rule"), as group_gemm picks it
    ran_cfg, ran_from = select_group_config(rows, E, N, K, torch.bfloat16, device_name_of(torch.cuda.current_device()))
    rec = {"name": name, "projection": projection, "tokens": tokens, "rows": rows, "experts": E, "K": K, "N": N,
           "experts_with_rows": int((counts > 0).sum()), "max_rows_per_expert": int(counts.max()),
           "config": str(ran_cfg), "config_from": ran_from, "calls_per_sample": k,
           "us": {impl: t for impl, (t, _) in graphed.items()},
           "graphed": {impl: g for impl, (_, g) in graphed.items()}, "eager_us": eager, "errors": errors,
           "floor_bytes": nbytes, "floor_us": floor}
    us = rec["us"]
    base = min((us[n] for n in ("grouped_mm", "grouped_mm/nk") if n in us), default=None)
    if "ours" in us:
        rec["ours_over_floor"] = us["ours"] / floor
        rec["ours_tbs"] = nbytes / us["ours"] / 1e6
        if base is not None:
            rec["grouped_mm_over_ours"] = base / us["ours"]
        if "loop" in us:
            rec["loop_over_ours"] = us["loop"] / us["ours"]
        eb = min((eager[n] for n in ("grouped_mm", "grouped_mm/nk") if n in eager), default=None)
        if eb is not None:
            rec["eager_grouped_mm_over_ours"] = eb / eager["ours"]
    return rec


def torch_moe_layer(x, idx, w, wgu, wd):
    """The MoE layer at EP=1 in torch ops, capturable (no shape depends on the routing)."""
    T, k = idx.shape
    E, inter = wgu.shape[0], wd.shape[1]
    flat = idx.flatten()
    order = torch.argsort(flat, stable=True)
    counts = torch.zeros(E, dtype=torch.int64, device=x.device).scatter_add_(0, flat, torch.ones_like(flat))
    offs = torch.cumsum(counts, 0).to(torch.int32)
    src = order // k
    h = torch._grouped_mm(x.index_select(0, src), wgu, offs=offs, out_dtype=x.dtype)
    a = (torch.nn.functional.silu(h[:, :inter].float()) * h[:, inter:].float()).to(x.dtype)
    y = torch._grouped_mm(a, wd, offs=offs, out_dtype=x.dtype)
    out = torch.zeros(T, wd.shape[2], dtype=torch.float32, device=x.device)
    out.index_add_(0, src, y.float() * w.flatten()[order].float()[:, None])
    return out.to(x.dtype)


def bench_layer(name, model, tokens, compile_torch, seed=0):
    from triton_dist.layers import moe_forward, moe_reference

    E, k, H, inter = model["experts"], model["topk"], model["hidden"], model["inter"]
    gen = torch.Generator(device="cuda").manual_seed(seed)
    top = torch.rand(tokens, E, device="cuda", generator=gen).topk(k, dim=1)
    idx, w = top.indices, torch.softmax(top.values, dim=1)
    x = harness.rand((tokens, H), seed + 1)
    wgu = harness.rand((E, H, 2 * inter), seed + 2) / 4
    wd = harness.rand((E, inter, H), seed + 3) / 4
    ref = moe_reference(x, idx, w, wgu, wd)
    # check_ids=False: the torch layer checks nothing either (and the check is one host synchronisation per call)
    fns = {"ours": lambda: moe_forward(x, idx, w, wgu, wd, check_ids=False),
           "torch": lambda: torch_moe_layer(x, idx, w, wgu, wd)}
    if compile_torch:
        fns["torch.compile"] = torch.compile(lambda: torch_moe_layer(x, idx, w, wgu, wd))
    errors = harness.drop_failing(fns, ref)
    k_calls = harness.calls_per_sample(fns["ours"], SAMPLE_US) if "ours" in fns else 3
    graphed = harness.time_interleaved(fns, k_calls, REPS)
    eager = {impl: harness.time_eager(fn, k_calls, REPS) for impl, fn in fns.items()}
    rec = {"name": name, "layer": True, "tokens": tokens, "experts": E, "topk": k, "hidden": H, "inter": inter,
           "calls_per_sample": k_calls, "us": {i: t for i, (t, _) in graphed.items()},
           "graphed": {i: g for i, (_, g) in graphed.items()}, "eager_us": eager, "errors": errors}
    us = rec["us"]
    if "ours" in us:
        for base in ("torch", "torch.compile"):
            if base in us:
                rec[f"{base}_over_ours"] = us[base] / us["ours"]
                rec[f"eager_{base}_over_ours"] = eager[base] / eager["ours"]
    return rec


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default=",".join(MODELS), help=f"comma-separated, of {', '.join(MODELS)}")
    ap.add_argument("--tokens", default=",".join(map(str, TOKENS)), help="tokens per call (rows = top-k x tokens)")
    ap.add_argument("--projections", default=",".join(PROJECTIONS), help="gate_up, down")
    ap.add_argument("--configs", default="", help="extra tilings of ours to time, BMxBNxBKxWARPSxSTAGES,...")
    ap.add_argument("--fp8", action="store_true", help="also time ours with fp8 e4m3 block-scaled operands")
    ap.add_argument("--quick", action="store_true", help="qwen3-30b-a3b only, 128 and 8192 tokens")
    ap.add_argument("--layer", action="store_true", help="time the MoE layer at EP=1 (route, GEMMs, combine) instead")
    ap.add_argument("--no-compile", action="store_true", help="--layer: leave out the torch.compile column")
    ap.add_argument("--hbm-tbs", type=float, default=None, help="HBM bandwidth for the floor (default: the running "
                                                                "GPU's nominal, CEILINGS)")
    ap.add_argument("--tflops", type=float, default=None, help="bf16 TFLOP/s for the floor (default: the running "
                                                               "GPU's nominal)")
    ap.add_argument("--out", default=None, help="results folder (default $TRITON_DIST_RESULTS_DIR or "
                                                "benchmarks/results)")
    ap.add_argument("--write-table", action="store_true",
                    help="after timing, merge the fastest tiling per (shape, bucket) into the grouped-GEMM table")
    ap.add_argument("--table-out", default=None, help="table path (default kernels/group_gemm_table.json)")
    ap.add_argument("--table-from", default=None, metavar="JSON",
                    help="no GPU: merge an earlier run's results JSON (group_gemm-<stamp>.json) into the table, exit")
    ap.add_argument("--margin", type=float, default=MARGIN,
                    help=f"keep an existing entry the run timed unless the fastest beats it by more than this "
                         f"fraction (default {MARGIN}; 0: the fastest always wins)")
    args = ap.parse_args(argv)
    from triton_dist.runtime.dispatch_table import check_margin

    try:
        check_margin(args.margin, "--margin")
    except ValueError as exc:
        ap.error(str(exc))
    if args.table_from:
        with open(args.table_from) as f:
            doc = json.load(f)
        write_table(doc, source_name(args.table_from), args.table_out, args.margin)
        return
    models = harness.names_arg(ap, "--models", args.models, MODELS, "model")
    projections = harness.names_arg(ap, "--projections", args.projections, PROJECTIONS, "projection")
    tokens = harness.counts_arg(ap, "--tokens", args.tokens)
    configs = [c for c in args.configs.split(",") if c]
    from triton_dist.kernels.gemm_config import TileConfig

    for c in configs:
        try:
            TileConfig.parse(c)
        except ValueError as exc:
            ap.error(f"--configs: {exc}")
    if args.quick:
        models, tokens = ["qwen3-30b-a3b"], [128, 8192]
    if not torch.cuda.is_available():
        raise SystemExit("bench_group_gemm: needs a CUDA GPU (the baselines are CUDA kernels)")
    from provenance import topology, topology_line

    hbm, tf = device_ceilings()
    args.hbm_tbs = hbm if args.hbm_tbs is None else args.hbm_tbs
    args.tflops = tf if args.tflops is None else args.tflops
    topo = topology()
    print(f"bench_group_gemm: {topology_line(topo)}", flush=True)
    records = []
    for m in models if args.layer else []:
        for t in tokens:
            rec = bench_layer(m, MODELS[m], t, not args.no_compile)
            records.append(rec)
            cols = "  ".join(f"{n} {v:9.1f}" for n, v in rec["us"].items())
            print(f"{m:14s} layer    T={t:5d}  {cols}  torch/ours {rec.get('torch_over_ours', float('nan')):.3f}  "
                  f"torch.compile/ours {rec.get('torch.compile_over_ours', float('nan')):.3f}"
                  + (f"  errors {rec['errors']}" if rec["errors"] else ""), flush=True)
            torch.cuda.empty_cache()
    for m in [] if args.layer else models:
        for p in projections:
            for t in tokens:
                rec = bench_one(m, MODELS[m], p, t, configs, args.fp8, args.hbm_tbs, args.tflops)
                records.append(rec)
                us = rec["us"]
                cols = "  ".join(f"{n} {v:9.1f}" for n, v in us.items())
                print(f"{m:14s} {p:8s} T={t:5d} rows={rec['rows']:6d}  {cols}  floor {rec['floor_us']:8.1f}  "
                      f"grouped_mm/ours {rec.get('grouped_mm_over_ours', float('nan')):.3f}  "
                      f"loop/ours {rec.get('loop_over_ours', float('nan')):.2f}"
                      + (f"  errors {rec['errors']}" if rec["errors"] else ""), flush=True)
                torch.cuda.empty_cache()
    stamp = harness.utc_stamp()
    doc = harness.result_header("bench_group_gemm", topo=topo, stamp=stamp, hbm_tbs=args.hbm_tbs,
                                tflops=args.tflops, records=records)
    path = harness.write_json(os.path.join(harness.results_dir(args.out), f"group_gemm-{stamp}.json"), doc)
    print(f"bench_group_gemm: wrote {path}")
    if args.write_table and not args.layer:
        write_table(doc, source_name(path), args.table_out, args.margin)


def source_name(path):
    """A results path as the table records it: relative to the repository when inside it."""
    root = os.path.abspath(os.path.join(HERE, ".."))
    ap = os.path.abspath(path)
    return os.path.relpath(ap, root) if ap.startswith(root + os.sep) else ap


def write_table(doc, source, out_path=None, margin=MARGIN):
    """Merge the results document ``doc`` (from ``source``) into the grouped-GEMM table at ``out_path`` (default the
    shipped one; created if missing; a malformed one is an error, not overwritten) and print what changed."""
    from triton_dist.kernels import group_gemm_table as gt

    out_path = out_path or gt.GROUP_GEMM_TABLE_PATH
    found = gt.GROUP_GEMM_TABLE.read(out_path)
    table, report = gt.build_group_gemm_table(doc, source, None if found is None else found[0], margin=margin)
    with open(out_path, "w") as f:
        f.write(gt.dump_group_gemm_table(table))
    print(f"grouped-GEMM table: {os.path.normpath(out_path)}")
    for line in report:
        print(f"   {line}")
    return out_path, report


if __name__ == "__main__":
    main()
