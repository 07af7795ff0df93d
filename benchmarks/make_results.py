"""Regenerate benchmarks/RESULTS.md (and PNG plots) from every JSON file in benchmarks/results/.

    python benchmarks/make_results.py [--results DIR] [--out benchmarks/RESULTS.md]

Collective runs (``"benchmark": "bench_collectives"``) get, per op: a table (size, ours per method, NCCL, speed-up,
bus bandwidth, correctness) and a PNG with latency vs size and bus bandwidth vs size, ours vs NCCL. JSON files
from other benchmarks are listed with their command and commit (their owners add sections). Needs matplotlib for
the plots (tables are written without it).
"""
from __future__ import annotations

import argparse
import glob
import json
import os

HERE = os.path.dirname(os.path.abspath(__file__))


def fmt_size(b):
    for unit, s in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if b >= s and b % s == 0:
            return f"{b // s} {unit}"
    return f"{b} B"


def load(results_dir):
    docs = []
    for path in sorted(glob.glob(os.path.join(results_dir, "**", "*.json"), recursive=True)):
        try:
            with open(path) as f:
                doc = json.load(f)
        except (OSError, ValueError) as exc:
            print(f"skip {path}: {exc}")
            continue
        doc["_path"] = os.path.relpath(path, HERE)
        docs.append(doc)
    return docs


def plot(doc, op, rows, methods, png_path):
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    sizes = sorted({r["bytes"] for r in rows})
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
    nccl = {r["bytes"]: (r["nccl_us"], r["nccl_busbw_gbs"]) for r in rows}
    for ax, idx, ylabel in ((axes[0], 0, "latency (us)"), (axes[1], 1, "bus bandwidth (GB/s)")):
        ax.plot(sizes, [nccl[s][idx] for s in sizes], "k--o", label="NCCL", linewidth=2)
        for m in methods:
            pts = [(r["bytes"], r["us"] if idx == 0 else r["busbw_gbs"]) for r in rows
                   if r.get("method") == m and "us" in r]
            if pts:
                pts.sort()
                ax.plot([p[0] for p in pts], [p[1] for p in pts], "-o", label=f"triton_dist {m}", markersize=3)
        ax.set_xscale("log", base=2)
        if idx == 0:
            ax.set_yscale("log")
        ax.set_xlabel("size (bytes)")
        ax.set_ylabel(ylabel)
        ax.grid(True, which="both", alpha=0.3)
    axes[0].legend(fontsize=8)
    dev = (doc.get("devices") or ["?"])[0]
    fig.suptitle(f"{op}: {doc.get('world_size')} x {dev} ({doc.get('mode')}, {doc.get('timestamp_utc')})")
    fig.tight_layout()
    fig.savefig(png_path, dpi=90)
    plt.close(fig)
    return True


def collective_section(doc, plots_dir):
    lines = []
    lines.append(f"### {doc.get('timestamp_utc')} ({doc.get('mode')}) — `{doc['_path']}`\n")
    lines.append(f"- command: `{doc.get('command')}`; git commit `{doc.get('git_commit')}`")
    lines.append(f"- devices: {', '.join(doc.get('devices', []))}; world size {doc.get('world_size')}")
    v = doc.get("versions", {})
    lines.append("- versions: " + ", ".join(f"{k} {val}" for k, val in v.items()))
    lines.append(f"- timing: {doc.get('timing')}")
    if doc.get("graph_capture_failures"):
        lines.append(f"- graph capture failed (eager timing used) {len(doc['graph_capture_failures'])} time(s): "
                     f"`{doc['graph_capture_failures'][0]}`")
    lines.append("")
    res = doc.get("results", [])
    for op in ("all_reduce", "all_gather", "reduce_scatter"):
        rows = [r for r in res if r.get("op") == op]
        if not rows:
            continue
        methods = []
        for r in rows:
            if r.get("method") not in methods:
                methods.append(r.get("method"))
        lines.append(f"#### {op}\n")
        head = "| size | NCCL us (busbw GB/s) | " + " | ".join(f"{m} us (busbw)" for m in methods)
        head += " | best ours / NCCL | auto / NCCL | auto picks | eager auto / NCCL us |"
        lines.append(head)
        lines.append("|" + "---|" * (head.count("|") - 1))
        for size in sorted({r["bytes"] for r in rows}):
            rs = [r for r in rows if r["bytes"] == size]
            base = rs[0]
            cells = [fmt_size(size), f"{base['nccl_us']:.1f} ({base['nccl_busbw_gbs']:.0f})"]
            best = None
            auto = None
            for m in methods:
                r = next((r for r in rs if r.get("method") == m), None)
                if r is None:
                    cells.append("-")
                elif "error" in r:
                    cells.append("error")
                else:
                    mark = "" if r.get("correct", True) else " WRONG"
                    cells.append(f"{r['us']:.1f} ({r['busbw_gbs']:.0f}){mark}")
                    if m != "auto" and (best is None or r["us"] < best):
                        best = r["us"]
                    if m == "auto":
                        auto = r
            cells.append(f"{base['nccl_us'] / best:.2f}x" if best else "-")
            cells.append(f"{auto['speedup']:.2f}x" if auto else "-")
            cells.append(auto.get("resolved", "") if auto else "-")
            if auto and auto.get("eager_us") and base.get("nccl_eager_us"):
                cells.append(f"{auto['eager_us']:.1f} / {base['nccl_eager_us']:.1f}")
            else:
                cells.append("-")
            lines.append("| " + " | ".join(cells) + " |")
        lines.append("")
        png = os.path.join(plots_dir, f"{os.path.splitext(os.path.basename(doc['_path']))[0]}_{op}.png")
        if plot(doc, op, [r for r in rows if "us" in r], methods, png):
            lines.append(f"![{op}]({os.path.relpath(png, HERE)})\n")
    return lines


def run_section(doc):
    """A GPU test-tier record: machine, versions, commands, commit, what passed and what failed."""
    res = doc.get("results", {})
    out = [f"### {doc.get('name', '?')} — {doc.get('date', '?')}", "",
           f"- machine: {doc.get('machine', '?')}",
           f"- versions: {', '.join(f'{k} {v}' for k, v in doc.get('versions', {}).items())}",
           f"- commit: {doc.get('git_commit', '?')}",
           f"- record: `{doc['_path']}`"]
    out += [f"- command: `{c}`" for c in doc.get("commands", [])]
    if doc.get("caveat"):
        out.append(f"- **caveat**: {doc['caveat']}")
    for key, value in res.items():
        if isinstance(value, dict):
            out.append(f"- {key}:")
            out += [f"  - `{k}`: {v}" for k, v in value.items()]
        elif isinstance(value, list):
            out.append(f"- {key}:")
            out += [f"  - {v}" for v in value]
        else:
            out.append(f"- {key}: {value}")
    return out + [""]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--results", default=os.path.join(HERE, "results"))
    ap.add_argument("--out", default=os.path.join(HERE, "RESULTS.md"))
    args = ap.parse_args()
    docs = load(args.results)
    plots_dir = os.path.join(args.results, "plots")
    os.makedirs(plots_dir, exist_ok=True)
    lines = ["# Benchmark results", "",
             "Generated by `benchmarks/make_results.py` from `benchmarks/results/**/*.json` — do not edit by hand.", "",
             "Speed-ups are NCCL time / our time measured in the same run (> 1 means faster than NCCL).", ""]
    coll = [d for d in docs if d.get("benchmark") == "bench_collectives"]
    if coll:
        lines += ["## Collectives (`benchmarks/bench_collectives.py`)", ""]
        for d in sorted(coll, key=lambda d: d.get("timestamp_utc", ""), reverse=True):
            lines += collective_section(d, plots_dir)
    runs = [d for d in docs if "benchmark" not in d and "results" in d]
    if runs:
        lines += ["## GPU test runs", "",
                  "Pass/fail records of GPU test tiers (logs beside each JSON). What failed, and why, is part of the "
                  "record.", ""]
        for d in sorted(runs, key=lambda d: d.get("date", "")):
            lines += run_section(d)
    other = [d for d in docs if d.get("benchmark") != "bench_collectives" and d not in runs]
    if other:
        lines += ["## Other result files", ""]
        for d in other:
            lines.append(f"- `{d['_path']}`: {d.get('benchmark', '?')} — command `{d.get('command', '?')}`, commit "
                         f"`{d.get('git_commit', '?')}`")
        lines.append("")
    with open(args.out, "w") as f:
        f.write("\n".join(lines) + "\n")
    print(f"wrote {args.out} ({len(coll)} collective runs, {len(other)} other files)")


if __name__ == "__main__":
    main()
