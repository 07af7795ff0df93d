"""Our Triton GEMM (``kernels.gemm.gemm_kernel``) against cuBLAS on one GPU, at the shapes the overlapped GEMMs run.

    python benchmarks/bench_gemm.py [--shapes MxNxK,...] [--configs BMxBNxBKxWARPSxSTAGES,...] [--out DIR]
        [--write-table [--table-out PATH]]
    python benchmarks/bench_gemm.py --table-from RESULTS.json [--table-out PATH]      # no GPU needed

For every shape: cuBLAS (``torch.matmul``), ``ops.matmul`` as users get it (``ours/auto``: the measured
table's entry for this GPU, bf16 and this exact shape if there is one, else for M <= 128 the decode rule
(``kernels.gemm_config.pick_decode_config``: small tiles, split-K), else Triton's autotuner) and every tiling of
``--configs`` in the loop/epilogue forms it has (``ours/<tiling>/<form>``, ``kernels.gemm_config.variant_forms``):
``plain`` (a tile loop around a K loop, pointer stores), ``flat`` (``FLATTEN``: one fused, software-pipelined
loop), ``tma`` (``TMA_STORE``: the epilogue stores through a tensor descriptor), ``flat+tma``; a ``p`` tiling
(pointer loads) has no TMA store, a ``kS`` tiling (split-K kernel) is ``plain`` only. Where ``ours/auto`` runs a
table entry or the decode rule (named in the record as ``auto_variant`` / ``auto_rule``), ``ours/autotune``
(``kernels.gemm_config.launch_autotuned``: the autotuner alone) is timed too, so one run shows their effect. Every variant is checked against cuBLAS first (fp32 reference) and then timed the same way as
cuBLAS: CUDA-graph replay of ``k`` back-to-back calls (about 2 ms per sample), all variants of a shape captured first
and sampled round-robin (order rotated per round), median over rounds. Writes ``gemm-<stamp>.json`` (per shape: us
per variant, the best of ours, its ratio to cuBLAS) and prints a table.

``--write-table`` then merges this run into the measured table ``python/triton_dist/kernels/gemm_table.json`` (or
``--table-out``): per shape, the fastest of our fixed variants (or the table entry ``ours/auto`` ran, when that was
fastest), with the results JSON, commit, timestamp and the us of it and of cuBLAS; a shape where the autotuner was
fastest gets no entry (its pick is not known). An existing entry that the run timed too stays unless the fastest
beats it by more than ``--margin`` (default 1.5%; run-to-run noise is about 0.5-2%). ``--table-from JSON`` does the
same from an earlier run's results JSON and exits (``kernels.gemm_table.build_gemm_table``). Both fixed variants and table
entries launch through ``kernels.gemm_config.launch_variant``: what is timed here is what ``matmul`` runs.
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
from triton_dist.kernels import gemm_config as gc  # noqa: E402
from triton_dist.kernels import gemm_table as gt  # noqa: E402
from triton_dist.ops.gemm import matmul  # noqa: E402
from triton_dist.runtime.dispatch_table import check_margin  # noqa: E402

#: (M, N, K): AG+GEMM 8B M=2048/4096 and 70B M=2048 (gathered rows, N and K per rank), GEMM+RS 8B at M=2048 and the
#: own halves of M=2048/8192, GEMM+RS 70B at the own halves of M=2048/4096 (TP=2, K per rank)
DEFAULT_SHAPES = ["2048x7168x4096", "4096x7168x4096", "2048x14336x8192", "2048x4096x3584", "1024x4096x3584",
                  "4096x4096x3584", "1024x8192x7168", "2048x8192x7168"]
DEFAULT_CONFIGS = ["128x256x64x8x3", "128x256x64x8x4", "128x128x64x8x4", "128x128x64x4x4"]
FORMS = gc.GEMM_FORMS
SAMPLE_US = 2000
ROUNDS = 9
#: --margin's default: an entry stays unless beaten by more than 1.5% in the run (entries flipped within 0.5% from run
#: to run when the fastest always won: benchmarks/results/2026-12-01-decode-gemm)
MARGIN = 0.015


def parse_shape(text):
    try:
        m, n, k = (int(v) for v in text.lower().split("x"))
    except ValueError:
        raise SystemExit(f"bench_gemm: shape {text!r}: expected MxNxK") from None
    return m, n, k


def launcher(a, b, c, variant):
    """A zero-argument launch of one variant (tiling + form, TMA loads): ``kernels.gemm_config.launch_variant``, the launch
    ``matmul`` runs for a table entry."""
    sms = gc.num_sms(a.device)

    def run():
        return gc.launch_variant(a, b, c, variant, sms=sms)
    return run


def parse_config(text):
    try:
        return gc.variant_config(text)
    except ValueError as exc:
        raise SystemExit(f"bench_gemm: --configs: {exc}") from None


def source_name(path):
    """A results path as recorded in the table: relative to the repository root when inside it."""
    root = os.path.abspath(os.path.join(HERE, ".."))
    ap = os.path.abspath(path)
    return os.path.relpath(ap, root) if ap.startswith(root + os.sep) else ap


def write_table(doc, source, out_path, margin=0.0):
    """Merge the results document ``doc`` (from ``source``) into the table at ``out_path`` (created if missing; a
    malformed one is an error, not overwritten; ``margin``: ``kernels.gemm_table.build_gemm_table``'s). Returns ``(path,
    report lines)``."""
    found = gt.GEMM_TABLE.read(out_path)
    old = None if found is None else found[0]
    table, report = gt.build_gemm_table(doc, source, old, margin=margin)
    with open(out_path, "w") as f:
        f.write(gt.dump_gemm_table(table))
    return os.path.normpath(out_path), report


def print_table_written(path, report):
    print(f"GEMM table: {path}")
    for line in report:
        print(f"   {line}")


def time_variants(fns):
    """``{name: median us per call}``: each ``fns[name]`` captured ``k`` times in one CUDA graph (k from a timed
    eager call, the same for all), then ``ROUNDS`` rounds, one replay of each per round in rotated order."""
    k = harness.calls_per_sample(next(iter(fns.values())), SAMPLE_US, warmup=3)
    graphs = {}
    stream = torch.cuda.Stream()
    for name, fn in fns.items():
        graph = harness.capture_calls(fn, k, stream, warmup=1)
        graph.replay()
        torch.cuda.synchronize()
        graphs[name] = graph
    return harness.interleaved_medians({n: g.replay for n, g in graphs.items()}, k, ROUNDS), k


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shapes", default=",".join(DEFAULT_SHAPES))
    ap.add_argument("--configs", default=",".join(DEFAULT_CONFIGS))
    ap.add_argument("--out", default=os.environ.get("TRITON_DIST_RESULTS_DIR", os.path.join(HERE, "results")))
    ap.add_argument("--write-table", action="store_true",
                    help="after timing, merge the fastest variant per shape into the measured GEMM table")
    ap.add_argument("--table-out", default=gt.GEMM_TABLE_PATH,
                    help=f"table path (default {os.path.relpath(gt.GEMM_TABLE_PATH)})")
    ap.add_argument("--table-from", default=None, metavar="JSON",
                    help="no GPU: write the table from an earlier run's results JSON (gemm-<stamp>.json) and exit")
    ap.add_argument("--margin", type=float, default=MARGIN,
                    help=f"keep an existing entry the run timed unless the fastest beats it by more than this "
                         f"fraction (default {MARGIN}; 0: the fastest always wins)")
    args = ap.parse_args()
    try:
        check_margin(args.margin, "--margin")  # the range every table merge accepts (runtime.dispatch_table)
    except ValueError as exc:
        ap.error(str(exc))
    if args.table_from:
        with open(args.table_from) as f:
            doc = json.load(f)
        print_table_written(*write_table(doc, source_name(args.table_from), args.table_out, args.margin))
        return
    shapes = [parse_shape(s) for s in args.shapes.split(",") if s]
    configs = [parse_config(c) for c in args.configs.split(",") if c]
    if not torch.cuda.is_available():
        raise SystemExit("bench_gemm: needs a CUDA GPU (sm_90 for the TMA forms)")
    gc.ensure_tma_allocator()
    device = torch.cuda.get_device_name()
    from provenance import topology, topology_line

    topo = topology()  # one process on one GPU (recorded so every results JSON says where it ran)
    print(f"bench_gemm: {topology_line(topo)}", flush=True)
    use_tma = gc.use_tma_for(torch.device("cuda"))
    gt.load_gemm_table()  # a malformed table fails here, before any timing
    torch.manual_seed(0)
    records = []
    for M, N, K in shapes:
        a = torch.randn(M, K, device="cuda").to(torch.bfloat16)
        b = torch.randn(K, N, device="cuda").to(torch.bfloat16)
        ref = a.float() @ b.float()
        fns = {"cublas": lambda: torch.matmul(a, b), "ours/auto": lambda: matmul(a, b)}
        kind, picked = gt.select_matmul_launch(M, N, K, a.dtype, device, use_tma=use_tma, num_sms=gc.num_sms(a.device))
        auto_variant = str(picked) if kind == "table" else None
        auto_rule = str(picked) if kind == "decode" else None
        if kind != "autotune":  # the autotuner alone, as the reference of the table entry / the decode rule
            c_at = torch.empty(M, N, device="cuda", dtype=torch.bfloat16)
            fns["ours/autotune"] = lambda: gc.launch_autotuned(a, b, c_at, use_tma=use_tma)
        errors = {}
        for name in [n for n in fns if n.startswith("ours/")]:  # still timed when wrong; never best, never in a table
            err = harness.rel_error(fns[name](), ref, norm="max")
            if err > 2e-2:
                errors[name] = f"wrong result: max relative error {err:.3g}"
        for cfg in configs:
            for form in gc.variant_forms(cfg):
                flat, tma = FORMS[form]
                name = f"ours/{cfg}/{form}"
                c = torch.empty(M, N, device="cuda", dtype=torch.bfloat16)
                run = launcher(a, b, c, gc.GemmVariant(cfg, flat, tma))
                try:
                    err = harness.rel_error(run(), ref, norm="max")
                except Exception as exc:  # noqa: BLE001  (a tiling that does not compile here is reported)
                    errors[name] = f"{type(exc).__name__}: {exc}"[:200]
                    continue
                if err > 2e-2:
                    errors[name] = f"wrong result: max relative error {err:.3g}"
                    continue
                fns[name] = run
        us, k = time_variants(fns)
        ours = {n: t for n, t in us.items() if n.startswith("ours/") and n not in errors} or \
            {n: t for n, t in us.items() if n.startswith("ours/")}
        best = min(ours, key=ours.get)
        rec = {"M": M, "N": N, "K": K, "k": k, "us": us, "errors": errors, "best": best,
               "best_vs_cublas": us["cublas"] / ours[best], "auto_vs_cublas": us["cublas"] / us["ours/auto"],
               "auto_variant": auto_variant, "auto_rule": auto_rule, "tflops_cublas": 2.0 * M * N * K / us["cublas"] / 1e6}
        records.append(rec)
        ran = f"table {auto_variant}" if auto_variant else (f"decode rule {auto_rule}" if auto_rule else "autotuner")
        tuned = f", ours/autotune {us['ours/autotune']:.1f}" if "ours/autotune" in us else ""
        print(f"{M}x{N}x{K}: cuBLAS {us['cublas']:.1f} us ({rec['tflops_cublas']:.0f} TFLOP/s), ours/auto "
              f"{us['ours/auto']:.1f} ({rec['auto_vs_cublas']:.3f}x, {ran}{tuned}), best {best} {ours[best]:.1f} "
              f"({rec['best_vs_cublas']:.3f}x)", flush=True)
        for form in FORMS:
            row = [f"{us[n]:.1f}" if n in us else "-" for n in (f"ours/{c}/{form}" for c in configs)]
            print(f"   {form:9s} " + "  ".join(f"{c}={v}" for c, v in zip(configs, row)), flush=True)
        for n, e in errors.items():
            print(f"   {n}: {e}", flush=True)
    stamp = harness.utc_stamp()
    doc = harness.result_header("gemm", topo, stamp, device=device, dtype="bfloat16",
                                configs=[str(c) for c in configs], forms=list(FORMS),
                                table=source_name(gt.gemm_table_path()),
                                timing=f"CUDA-graph replay of k calls, {ROUNDS} interleaved rounds, median",
                                records=records)
    path = harness.write_json(os.path.join(args.out, f"gemm-{stamp}.json"), doc)
    print(f"wrote {path}")
    if args.write_table:
        print_table_written(*write_table(doc, source_name(path), args.table_out, args.margin))


if __name__ == "__main__":
    main()
