"""Regenerate benchmarks/RESULTS.md (and PNG plots) from every JSON file in benchmarks/results/.

    python benchmarks/make_results.py [--results DIR] [--out benchmarks/RESULTS.md]

The file opens with one screen, "At a glance" (:func:`glance`): per family the newest run's figures against each
baseline timed in that run, the machine, the date and links (GitHub heading anchors) to the details. Then the
sections, one per kind of record:
* ``"benchmark": "bench_collectives"``: per op and dtype, a table (size; NCCL, each of our methods, auto and torch
  symm-mem: CUDA-graph time and bus bandwidth; speed-ups; auto / best of ours and NCCL; auto's pick; eager time of
  each) and a PNG next to the JSON (``<json>_<op>_<dtype>.png``): latency and bus bandwidth vs size, log-x.
* ``"benchmark": "bench_shmem"``: put/get bandwidth per size and method against the peer-copy figure of the same
  run (graph and eager timing, launch configuration, the sweep's best), the 1 KiB put + quiet, and the ping-pong
  round trips (putmem_signal / signal_op / dl.notify+dl.wait).
* ``"benchmark": "bench_mega"``: the mega kernel decode step against the torch model; ``bench_mega.py --probe
  linear-chain`` documents (``probe_mega``, formerly probe_mega.py: ``weight_bytes`` + ``rows``): the Linear chain
  per configuration.
* ``"benchmark": "gemm"``: our GEMM against cuBLAS per shape (``matmul``'s auto path: the measured table's entry,
  else the decode rule at M <= 128, else the autotuner; and the best tiling / loop form).
* ``"benchmark": "bench_group_gemm"`` (section "Mixture of experts", after the GEMM one; :func:`moe_section`): the
  grouped GEMM per (model, projection, tokens) against ``torch._grouped_mm`` (the faster of its two weight layouts),
  the per-expert loop and the floor (recomputed where the run took another GPU's HBM figure), and the EP=1 layer
  (``--layer``) against torch and torch.compile; one PNG, ``results/moe_group_gemm.png`` (:func:`plot_moe`).
  ``"benchmark": "bench_moe_ep"`` (:func:`moe_ep_section`): the layer at expert parallelism over ranks, every
  ``ours*`` column graph and eager, the torch layer with its all_to_all backend (no ratio where it is gloo).
  ``"benchmark": "bench_moe_tp"`` (:func:`moe_tp_section`): the layer at tensor parallelism, ours and its two ops
  against the torch TP layer, its capturable form and (world 1) torch.compile, graph and eager.
* ``"benchmark": "bench_attention"`` (section "Attention"; :func:`attention_section`; one PNG,
  ``results/attention.png``: :func:`plot_attention`): decode bandwidth and SDPA
  ratios, prefill against SDPA's flash backend, the sequence-parallel decode's parts.
* ``"benchmark": "bench_overlap"``: per op / model / M, the best fused method against sequential NCCL + cuBLAS and
  torch's fused symmetric-memory op, overlap efficiency max(t_gemm, t_comm) / t_fused, our GEMM vs cuBLAS.
* GPU suite steps (``benchmarks/record_run.py``: ``name`` + ``exit_code``): one table row per step.
* hand-written GPU test records (``"results"``) and anything else: listed.
* anything whose JSON says ``shared_gpu: true`` (a benchmark header, or its ``topology``; a record_run step): ranks
  that shared one GPU under CUDA MPS, so no NVLink was measured. Those go to their own section, "Ranks sharing one
  GPU (CUDA MPS, no NVLink)", with their world size, GPUs and ranks per GPU, rendered as their kind is, and are never
  placed in the NVLink tables above it or in the headline figures (the mega kernel plot).
Needs matplotlib for the plots (tables are written without it).
"""
from __future__ import annotations

import argparse
import glob
import re
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
        if isinstance(doc, list):  # a trace in the JSON-array form
            doc = {"_list": doc}
        doc["_path"] = os.path.relpath(path, HERE)
        docs.append(doc)
    return docs


def is_shared(doc) -> bool:
    """Whether a results document comes from ranks that shared a GPU (CUDA MPS, no NVLink): ``shared_gpu`` true at
    its top level (benchmark headers, record_run steps) or in its ``topology``."""
    return bool(doc.get("shared_gpu") or (doc.get("topology") or {}).get("shared_gpu"))


def topology_of(doc) -> dict:
    """``{"world_size", "gpus", "ranks_per_gpu", "mps"}`` of a results document (its ``topology``, else the fields
    at its top level, as record_run writes them); missing values are None."""
    t = doc.get("topology") or {}
    out = {k: t.get(k, doc.get(k) if not isinstance(doc.get(k), (list, dict)) else None)
           for k in ("world_size", "gpus", "ranks_per_gpu")}
    out["mps"] = t.get("mps", doc.get("mps"))
    return out


def _series(rows):
    """Implementation names of a collectives op/dtype in display order: our methods, auto, torch symm-mem."""
    names = []
    for r in rows:
        if r.get("method") not in names:
            names.append(r.get("method"))
    ours = [m for m in names if m != "auto" and not str(m).startswith("torch_symm")]
    return ours + [m for m in names if m == "auto"] + [m for m in names if str(m).startswith("torch_symm")]


def plot_collectives(doc, op, dtype, rows, png_path):
    """Latency and bus bandwidth vs size (log-x) of one op and dtype of a ``bench_collectives`` document: NCCL,
    each of our methods, ``auto`` and each torch symm-mem baseline (CUDA-graph timings). Returns False without
    matplotlib or without timed rows."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    rows = [r for r in rows if "us" in r]
    if not rows:
        return False
    sizes = sorted({r["bytes"] for r in rows})
    # the baseline: NCCL (graph timing), or where ranks shared a GPU torch_collectives' gloo host path (eager)
    key, label = ("nccl", "NCCL") if all(r.get("nccl_us") is not None for r in rows) else \
        ("gloo_host", "gloo host path (eager)")
    base = {r["bytes"]: (r.get(f"{key}_us"), r.get(f"{key}_busbw_gbs")) for r in rows}
    fig, axes = plt.subplots(1, 2, figsize=(13, 4.8))
    for ax, idx, ylabel in ((axes[0], 0, "latency (us)"), (axes[1], 1, "bus bandwidth (GB/s)")):
        pts = [(x, base[x][idx]) for x in sizes if base[x][idx] is not None]
        if pts:
            ax.plot([q[0] for q in pts], [q[1] for q in pts], "k--o", label=label, linewidth=2, markersize=4)
        for m in _series(rows):
            pts = sorted((r["bytes"], r["us"] if idx == 0 else r["busbw_gbs"]) for r in rows if r["method"] == m)
            style = ":s" if str(m).startswith("torch_symm") else ("-D" if m == "auto" else "-o")
            label = m if str(m).startswith("torch_symm") else f"triton_dist {m}"
            ax.plot([q[0] for q in pts], [q[1] for q in pts], style, label=label, markersize=3,
                    linewidth=2.2 if m == "auto" else 1.2)
        ax.set_xscale("log", base=2)
        if idx == 0:
            ax.set_yscale("log")
        ax.set_xlabel("size (bytes, NCCL-tests convention)")
        ax.set_ylabel(ylabel)
        ax.grid(True, which="both", alpha=0.3)
    axes[0].legend(fontsize=7)
    dev = (doc.get("devices") or ["?"])[0]
    where = f"{doc.get('world_size')} x {dev}"
    if is_shared(doc):
        t = topology_of(doc)
        where = f"SHARED GPU: {t['world_size']} ranks on {t['gpus']} x {dev}, {t['ranks_per_gpu']} per GPU, no NVLink"
    fig.suptitle(f"{op} {dtype}: {where} ({doc.get('mode')}, {doc.get('timestamp_utc')}), CUDA-graph replay")
    fig.tight_layout()
    fig.savefig(png_path, dpi=90)
    plt.close(fig)
    return True


def collective_section(doc, out_dir=HERE):
    """One ``bench_collectives`` document: per op and dtype, a table (graph timings of NCCL, our methods, auto and
    torch symm-mem, best ours / NCCL, auto / NCCL, auto / best of ours and NCCL, auto's pick, then the eager
    timings) and the plot (PNG next to the JSON, linked relative to ``out_dir``)."""
    lines = []
    lines.append(f"### {doc.get('timestamp_utc')} ({doc.get('mode')}) — `{doc['_path']}`\n")
    lines.append(f"- command: `{doc.get('command')}`; git commit `{doc.get('git_commit')}`")
    lines.append(f"- devices: {', '.join(doc.get('devices', []))}; world size {doc.get('world_size')}")
    v = doc.get("versions", {})
    lines.append("- versions: " + ", ".join(f"{k} {val}" for k, val in v.items()))
    lines.append(f"- timing: {doc.get('timing')}")
    symm = doc.get("torch_symm") or {}
    if symm.get("unavailable"):
        lines.append(f"- torch symm-mem baselines: {symm['unavailable']}")
    if doc.get("auto_check"):
        w = doc["auto_check"]
        lines.append(f"- auto check: worst auto / best(ours, NCCL) = {w['ratio']:.3f} at {w['op']} {w['dtype']} "
                     f"{fmt_size(w['bytes'])} (best {w['best']}, auto picked {w.get('auto_picked')})")
    if doc.get("graph_capture_failures"):
        lines.append(f"- graph capture failed (eager timing used) {len(doc['graph_capture_failures'])} time(s): "
                     f"`{doc['graph_capture_failures'][0]}`")
    lines.append("")
    res = doc.get("results", [])
    json_abs = os.path.join(HERE, doc["_path"])
    for op in ("all_reduce", "all_gather", "reduce_scatter"):
        dtypes = []
        for r in res:
            if r.get("op") == op and r.get("dtype", "bfloat16") not in dtypes:
                dtypes.append(r.get("dtype", "bfloat16"))
        for dt in dtypes:
            rows = [r for r in res if r.get("op") == op and r.get("dtype", "bfloat16") == dt]
            lines += _collective_table(op, dt, rows)
            png = f"{os.path.splitext(json_abs)[0]}_{op}_{dt}.png"
            if plot_collectives(doc, op, dt, rows, png):
                lines.append(f"![{op} {dt}]({os.path.relpath(png, out_dir)})\n")
    return lines


def _collective_table(op, dt, rows):
    """One op and dtype. Rows without an NCCL column (ranks that shared a GPU: ``nccl_us`` null) show the eager
    ``gloo_host_us`` baseline in its place and no ratio against it."""
    methods = _series(rows)
    eager_cols = [m for m in methods if any(r.get("method") == m and r.get("eager_us") for r in rows)]
    has_nccl = all(r.get("nccl_us") is not None for r in rows)
    lines = [f"#### {op} {dt}\n"]
    head = ("| size | NCCL us (busbw GB/s) | " if has_nccl else "| size | gloo host path, eager us (busbw GB/s) | ")
    head += " | ".join(f"{m} us (busbw)" for m in methods)
    head += " | best ours / NCCL | auto / NCCL | auto / best | auto picks |"
    if eager_cols:
        head += (" eager NCCL us | " if has_nccl else " ") + " | ".join(f"eager {m} us" for m in eager_cols) + " |"
    lines.append(head)
    lines.append("|" + "---|" * (head.count("|") - 1))
    for size in sorted({r["bytes"] for r in rows}):
        rs = [r for r in rows if r["bytes"] == size]
        base = rs[0]
        nccl = base.get("nccl_us") if has_nccl else None
        if has_nccl:
            cells = [fmt_size(size), f"{base['nccl_us']:.1f} ({base['nccl_busbw_gbs']:.0f})"]
        else:
            cells = [fmt_size(size), f"{_f(base.get('gloo_host_us'), '{:.1f}')} "
                                     f"({_f(base.get('gloo_host_busbw_gbs'), '{:.0f}')})"]
        best = auto = None
        for m in methods:
            r = next((r for r in rs if r.get("method") == m), None)
            if r is None:
                cells.append("-")
            elif "error" in r:
                cells.append("error")
            else:
                mark = "" if r.get("correct", True) else " WRONG"
                cells.append(f"{r['us']:.1f} ({r['busbw_gbs']:.0f}){mark}")
                if m == "auto":
                    auto = r
                elif not str(m).startswith("torch_symm") and r.get("correct", True) and (best is None or r["us"] < best):
                    best = r["us"]
        cells.append(f"{nccl / best:.2f}x" if best and nccl else "-")
        cells.append(f"{auto['speedup']:.2f}x" if auto and auto.get("speedup") is not None else "-")
        ratio = auto.get("auto_over_best") if auto else None
        if auto and ratio is None and best:
            ratio = auto["us"] / (min(best, nccl) if nccl else best)
        cells.append(f"{ratio:.3f}" if ratio is not None else "-")
        cells.append(auto.get("resolved", "") if auto else "-")
        if eager_cols:
            if has_nccl:
                cells.append(_f(base.get("nccl_eager_us"), "{:.1f}"))
            for m in eager_cols:
                r = next((r for r in rs if r.get("method") == m), None)
                cells.append(_f(r.get("eager_us") if r else None, "{:.1f}"))
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    return lines


def _f(x, fmt="{:.2f}"):
    return "—" if x is None else fmt.format(x)


def _shmem_methods(rows):
    """Methods of bench_shmem rows, in order of appearance: every ``<m>_ok`` key (records of every date have one)."""
    methods = []
    for r in rows:
        for k in r:
            if k.endswith("_ok") and k[:-3] not in methods:
                methods.append(k[:-3])
    return methods


def _eager_note(x):
    return "" if x.get("timing", "graph") == "graph" else " (eager: capture failed)"


def _cfg(warps, programs):
    return "—" if warps is None else f"{warps}w x {programs}"


def shmem_section(doc):
    """bench_shmem: bandwidth per method vs the peer-copy figure of the same run (graph and eager timing, the
    sweep's best launch configuration), the 1 KiB put + quiet, and the signal round-trip latencies. Records from
    before graph timing (no ``*_eager_*`` fields) keep their one-row-per-size table."""
    rows = doc.get("bandwidth", [])
    methods = _shmem_methods(rows)
    out = [f"### {doc.get('time_utc', '?')} — {doc.get('world_size', '?')} ranks, commit `{doc.get('git_commit', '?')}`",
           "", f"- record: `{doc['_path']}`", f"- command: `{doc.get('command', '?')}`",
           f"- method: {doc.get('method', {}).get('bandwidth', '?')}"]
    fails = doc.get("graph_capture_failures") or []
    if fails:
        more = f" (and {len(fails) - 3} more)" if len(fails) > 3 else ""
        out.append(f"- graph capture failed {len(fails)} time(s), eager figures instead: {'; '.join(fails[:3])}{more}")
    if doc.get("suggested_default"):
        sug = ", ".join(f"{m}: {v['num_warps']}w x {v['programs_per_sm']}/SM"
                        for m, v in doc["suggested_default"].items())
        out.append(f"- sweep's suggested default (best summed GB/s at >= 16 MiB): {sug}")
    out.append("")
    graphed = any(k.endswith("_eager_GBps") for r in rows for k in r)
    if rows and not graphed:
        head = "| size | peer copy GB/s | " + " | ".join(f"{m} GB/s (x peer copy)" for m in methods) + " | all correct |"
        out += [head, "|" + "---|" * (head.count("|") - 1)]
        for r in rows:
            cells = [fmt_size(r["bytes"]), _f(r.get("peer_copy_GBps"), "{:.0f}")]
            for m in methods:
                bw, ratio = r.get(f"{m}_GBps"), r.get(f"{m}_vs_peer_copy")
                cells.append(f"{_f(bw, '{:.0f}')} ({_f(ratio)})")
            oks = [r[k] for k in r if k.endswith("_ok")]
            cells.append("yes" if oks and all(oks) else ("NO" if oks else "—"))
            out.append("| " + " | ".join(cells) + " |")
        out.append("")
    elif rows:
        out += ["GB/s per rank; `x peer` against the peer copy timed the same way (graph / eager); config = warps x "
                "programs; best = the sweep's fastest correct configuration.", "",
                "| size | method | config | graph GB/s (x peer) | eager GB/s (x peer) | best config | best GB/s (x peer) "
                "| correct |", "|---|---|---|---|---|---|---|---|"]
        for r in rows:
            peer = (f"{_f(r.get('peer_copy_GBps'), '{:.0f}')} / {_f(r.get('peer_copy_eager_GBps'), '{:.0f}')}")
            out.append(f"| {fmt_size(r['bytes'])} | peer copy | — | {peer} | | | | |")
            for m in methods:
                if f"{m}_ok" not in r:
                    continue
                cells = [fmt_size(r["bytes"]), m, _cfg(r.get(f"{m}_num_warps"), r.get(f"{m}_programs")),
                         f"{_f(r.get(f'{m}_GBps'), '{:.0f}')} ({_f(r.get(f'{m}_vs_peer_copy'))})",
                         f"{_f(r.get(f'{m}_eager_GBps'), '{:.0f}')} ({_f(r.get(f'{m}_eager_vs_peer_copy'))})",
                         _cfg(r.get(f"{m}_best_num_warps"), r.get(f"{m}_best_programs")),
                         f"{_f(r.get(f'{m}_best_GBps'), '{:.0f}')} ({_f(r.get(f'{m}_best_vs_peer_copy'))})",
                         "yes" if r[f"{m}_ok"] else "NO"]
                if r.get(f"{m}_timing", "graph") != "graph":
                    cells[3] += " (eager: capture failed)"
                out.append("| " + " | ".join(cells) + " |")
        out.append("")
    pq = doc.get("put_quiet", [])
    if pq:
        out += ["| put + quiet, one program | graph us | eager us | correct |", "|---|---|---|---|"]
        out += [f"| {fmt_size(x['bytes'])} | {_f(x.get('us'))}{_eager_note(x)} | {_f(x.get('eager_us'))} | "
                f"{'yes' if x.get('ok') else 'NO'} |" for x in pq]
        out.append("")
    lat = doc.get("latency", [])
    if lat:
        out += ["| payload | round trip us | one way us | eager round trip us | signalling |", "|---|---|---|---|---|"]
        out += [f"| {fmt_size(x['payload_bytes'])} | {x['round_trip_us']:.2f}{_eager_note(x)} | {x['one_way_us']:.2f} | "
                f"{_f(x.get('eager_round_trip_us'))} | {x.get('kind', 'putmem_signal_block')}"
                f"{'' if x.get('ok', True) else ' (WRONG final signal)'} |" for x in lat]
        out.append("")
    return out


def run_stamp(doc):
    """Sort key of a benchmark document: the UTC stamp in its file name (``...-20261130T104856Z-...``; the
    directory names do not sort by time), else its path."""
    m = re.search(r"\d{8}T\d{6}Z", os.path.basename(doc.get("_path", "")))
    return (m.group(0) if m else "", doc.get("_path", ""))


def describe_other(doc):
    """One line for a result file that is not a benchmark or a test record: traces and dispatch tables."""
    if "traceEvents" in doc or isinstance(doc.get("_list"), list):
        n = len(doc.get("traceEvents", doc.get("_list", [])))
        return f"- `{doc['_path']}`: Chrome/Perfetto trace, {n} events (open in ui.perfetto.dev)"
    if "ops" in doc and "status" in doc:
        return (f"- `{doc['_path']}`: overlap dispatch table ({doc.get('status')}, from `{doc.get('source', '?')}`, "
                f"commit `{doc.get('git_commit', '?')}`)")
    return (f"- `{doc['_path']}`: {doc.get('benchmark', '?')} — command `{doc.get('command', '?')}`, commit "
            f"`{doc.get('git_commit', '?')}`")


def overlap_section(doc):
    """bench_overlap: one row per (op, model, M): best fused vs baselines, overlap efficiency, GEMM vs cuBLAS."""
    out = [f"### {doc.get('_path')} — {doc.get('world_size', '?')} ranks, commit `{doc.get('git_commit', '?')}`"
           f"{' (quick)' if doc.get('quick') else ''}", "", f"- command: `{doc.get('command', '?')}`",
           f"- GPU: {doc.get('versions', {}).get('gpu', '?')}", ""]
    recs = doc.get("records", [])
    if recs and any("auto_vs_seq" in r or "bound" in r for r in recs):
        return out + overlap_ratio_rows(doc, recs)
    if recs:
        head = ("| op | model | M | best fused | fused us | torch seq us | x torch seq | x torch symm | overlap eff | "
                "TFLOP/s | our GEMM / cuBLAS | errors |")
        out += [head, "|" + "---|" * (head.count("|") - 1)]
        for r in recs:
            res = r.get("results", {})
            best = r.get("best_ours")
            errs = "; ".join(f"{k}: {v}" for k, v in r.get("errors", {}).items()).replace("|", "/")[:160]
            out.append("| " + " | ".join([
                r.get("op", "?"), r.get("model", "?"), str(r.get("M", "?")), best or "—",
                _f(res.get(best) if best else None, "{:.0f}"), _f(res.get("torch_seq"), "{:.0f}"),
                _f(r.get("speedup_vs_torch_seq")), _f(r.get("speedup_vs_torch_symm")),
                _f(r.get("overlap_eff"), "{:.0%}") if r.get("overlap_eff") is not None else "—",
                _f(r.get("tflops_fused"), "{:.0f}"), _f(r.get("gemm_ours_vs_cublas")), errs or ""]) + " |")
        out.append("")
    for fail in doc.get("failures", []):
        out.append(f"- FAILED {fail.get('op')} {fail.get('model')} M={fail.get('M')}: "
                   f"`{fail.get('error', '').strip().splitlines()[-1] if fail.get('error') else '?'}`")
    if doc.get("crossover_table"):
        out += ["", f"- measured dispatch crossover: `{json.dumps(doc['crossover_table'])}`"]
    return out + [""]


def overlap_ratio_rows(doc, recs):
    """Rows of a bench_overlap run that times everything by CUDA-graph replay (``results``) and eager (``eager``):
    what ``method="auto"`` did, both torch baselines, the overlap bound and the ratios the targets are stated in.
    A run whose ranks shared a GPU (no NCCL) has ``ours_seq`` / ``comm_seq`` (our collectives) in the sequential
    and comm columns, labelled so."""
    out = [f"- timing: {doc.get('timing', 'CUDA-graph replay')}; graph capture failures: "
           f"{len(doc.get('graph_failures', []))}", ""]
    png = os.path.splitext(doc.get("_path", ""))[0] + ".png"
    if doc.get("_path") and os.path.exists(os.path.join(HERE, "results", png)):
        out += [f"![overlap ratios](results/{png})", ""]
    shared = is_shared(doc)
    seq, comm, vs_seq = (("ours_seq", "comm_seq", "auto_vs_ours_seq") if shared else
                         ("torch_seq", "comm_nccl", "auto_vs_seq"))
    seq_name, comm_name = (("ours seq (our collectives + cuBLAS)", "our comm (auto)") if shared else
                           ("torch seq", "NCCL comm"))
    head = (f"| op | model | M | auto us | best ours | {seq_name} us | torch symm us | cuBLAS GEMM us | {comm_name} us "
            f"| auto / bound | x {seq_name.split(' (')[0]} | x torch symm | our GEMM / cuBLAS | eager: auto / seq us "
            f"| errors |")
    out += [head, "|" + "---|" * (head.count("|") - 1)]
    for r in recs:
        res, eag = r.get("results", {}), r.get("eager", {})
        errs = "; ".join(f"{k}: {v}" for k, v in r.get("errors", {}).items()).replace("|", "/")[:120]
        eager = (f"{eag['ours/auto']:.0f} / {eag[seq]:.0f}" if "ours/auto" in eag and seq in eag else "—")
        out.append("| " + " | ".join([
            r.get("op", "?"), r.get("model", "?"), str(r.get("M", "?")), _f(res.get("ours/auto"), "{:.1f}"),
            (r.get("best_ours") or "—").replace("ours/", ""), _f(res.get(seq), "{:.1f}"),
            _f(res.get("torch_symm"), "{:.1f}"), _f(res.get("gemm_cublas"), "{:.1f}"),
            _f(res.get(comm), "{:.1f}"), _f(r.get("auto_over_bound"), "{:.3f}"), _f(r.get(vs_seq)),
            _f(r.get("auto_vs_symm")), _f(r.get("gemm_ours_vs_cublas")), eager, errs]) + " |")
    return out + [""]


def _tree(facts):
    return f" (tree `{facts['tree']}`)" if facts.get("tree") else ""


def suite_steps_section(steps):
    """benchmarks/record_run.py records (scripts/gpu_suite.sh steps): one row each."""
    head = ("| step | date | exit | timed out | wall s | exit after summary s | left behind | exit noise lines | "
            "pytest | commit | record |")
    out = [head, "|" + "---|" * (head.count("|") - 1)]
    for d in sorted(steps, key=lambda d: (d.get("date", ""), d.get("name", ""))):
        if "skipped" in d:
            out.append(f"| {d.get('name')} | — | — | — | — | — | — | — | skipped: {d['skipped']} | — | "
                       f"`{d['_path']}` |")
            continue
        facts = d.get("facts", {})
        summary = "; ".join(d.get("pytest_summary", [])) or "—"
        left = d.get("left_behind")
        out.append(f"| {d.get('name')} | {d.get('date', '?')} | {d.get('exit_code')} | "
                   f"{'yes' if d.get('timed_out') else 'no'} | {d.get('wall_s', '?')} | "
                   f"{_f(d.get('exit_after_summary_s'), '{:.1f}')} | {'—' if left is None else len(left)} | "
                   f"{d.get('exit_noise_lines', '—')} | {summary} | "
                   f"`{str(facts.get('git_commit', '?'))[:12]}`{_tree(facts)} | `{d['_path']}` |")
    return out + [""]


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


def gemm_section(doc):
    """Our GEMM vs cuBLAS (``benchmarks/bench_gemm.py``): per shape, cuBLAS, ``matmul``'s auto path and what it ran
    (the measured table's entry for the shape, else the decode rule at M <= 128, else the autotuner), the autotuner
    alone where the run timed it, and the best tiling / loop form, with their ratios (cuBLAS time / ours: > 1 means
    ours is faster)."""
    lines = [f"### {doc.get('device', '?')}, commit `{doc.get('git_commit') or '?'}` (`{doc['_path']}`)", "",
             "| M x N x K | cuBLAS us | TFLOP/s | ours auto us | x cuBLAS | auto ran | autotuner alone us | "
             "best tiling / form | us | x cuBLAS |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in doc.get("records", []):
        us = r.get("us", {})
        best = r.get("best", "")
        ran = (f"table `{r['auto_variant']}`" if r.get("auto_variant")
               else f"decode rule `{r['auto_rule']}`" if r.get("auto_rule") else "autotuner")
        lines.append(f"| {r['M']} x {r['N']} x {r['K']} | {_f(us.get('cublas'), '{:.1f}')} | "
                     f"{_f(r.get('tflops_cublas'), '{:.0f}')} | {_f(us.get('ours/auto'), '{:.1f}')} | "
                     f"{_f(r.get('auto_vs_cublas'), '{:.3f}')} | {ran} | "
                     f"{_f(us.get('ours/autotune'), '{:.1f}') if 'ours/autotune' in us else '-'} | "
                     f"`{best.split('/', 1)[-1]}` | "
                     f"{_f(us.get(best), '{:.1f}')} | {_f(r.get('best_vs_cublas'), '{:.3f}')} |")
    return lines + [""]


# ------------------------------------------------------------------------------------------------ mixture of experts
#: nominal HBM TB/s by a substring of the GPU name, as bench_group_gemm.CEILINGS has them (kept here: this script needs
#: no torch); a run whose header's ``hbm_tbs`` is not its GPU's gets its floor recomputed (see :func:`_moe_floor`)
MOE_HBM_TBS = {"H200": 4.8, "H100": 3.35}


def _m(x, fmt="{:.1f}"):
    """``fmt`` of a number, "-" where the run has no such figure (older runs lack some columns)."""
    return "-" if not isinstance(x, (int, float)) else fmt.format(x)


def gpu_of(doc) -> str:
    """The GPU a results document ran on: ``versions.gpu``, else its first device, else ``facts.gpu`` / ``device``."""
    return ((doc.get("versions") or {}).get("gpu") or (doc.get("devices") or [None])[0]
            or (doc.get("facts") or {}).get("gpu") or doc.get("device") or "?")


def _moe_floor(doc, r):
    """``(floor us, recomputed)`` of a grouped-GEMM record. bench_group_gemm took H200's 4.8 TB/s for every GPU
    before 6d5610f: where the header's ``hbm_tbs`` is not the nominal of the GPU the header names (and the command
    did not set ``--hbm-tbs``), the floor is recomputed as the bench computes it, max(bytes / HBM, flops / TFLOP/s),
    with that GPU's HBM figure (``recomputed`` True: the table footnotes it)."""
    floor = r.get("floor_us")
    gpu, hbm = gpu_of(doc), doc.get("hbm_tbs")
    nominal = next((v for k, v in MOE_HBM_TBS.items() if k in gpu), None)
    if (floor is None or nominal is None or not isinstance(hbm, (int, float)) or abs(hbm - nominal) < 1e-9
            or "--hbm-tbs" in str(doc.get("command", ""))):
        return floor, False
    nbytes, rows, K, N, tflops = (r.get("floor_bytes"), r.get("rows"), r.get("K"), r.get("N"), doc.get("tflops"))
    if all(isinstance(v, (int, float)) for v in (nbytes, rows, K, N, tflops)):
        return max(nbytes / (nominal * 1e12), 2.0 * rows * K * N / (tflops * 1e12)) * 1e6, True
    return floor * hbm / nominal, True  # the bandwidth term scaled (the floor at these shapes is bandwidth-bound)


def _grouped_base(us):
    """``(us, name)`` of the torch._grouped_mm baseline of a record's ``us``: the faster of its two weight layouts
    (``grouped_mm``: [E, K, N]; ``grouped_mm/nk``: [E, N, K] passed transposed), as the bench's ratio takes it."""
    cands = [(us[n], n) for n in ("grouped_mm", "grouped_mm/nk") if isinstance(us.get(n), (int, float))]
    return min(cands) if cands else (None, None)


def _moe_ratio(r, key, num, den="ours"):
    """A record's ``key`` ratio, else computed from its ``us`` (``num`` / ``den``), else None."""
    if isinstance(r.get(key), (int, float)):
        return r[key]
    us = r.get("us") or {}
    a, b = (us.get(num) if isinstance(num, str) else num), us.get(den)
    return a / b if isinstance(a, (int, float)) and isinstance(b, (int, float)) and b > 0 else None


def _moe_grouped_records(doc):
    return [r for r in doc.get("records", []) if not r.get("layer") and "projection" in r]


def _moe_layer_records(doc):
    return [r for r in doc.get("records", []) if r.get("layer")]


def moe_section(doc):
    """bench_group_gemm (one GPU, expert parallelism 1): the grouped GEMM per (model, projection, tokens) against
    ``torch._grouped_mm`` (the faster of its two weight layouts) and a per-expert ``torch.matmul`` loop, with the
    bandwidth / compute floor and the best ``--configs`` tiling; and the whole MoE layer (``--layer``) against the
    torch layer and its torch.compile. Ratios are baseline time / ours (> 1: ours faster); "-" where the run has no
    such column."""
    out = [f"### {gpu_of(doc)}, commit `{doc.get('git_commit') or '?'}`, {_when(doc)} (`{doc['_path']}`)", "",
           f"- command: `{doc.get('command', '?')}`"]
    not_graphed = sorted({c for r in doc.get("records", []) for c, g in (r.get("graphed") or {}).items() if not g})
    if not_graphed:
        out.append(f"- graph capture failed for {', '.join(f'`{c}`' for c in not_graphed)}: eager time in its place")
    out.append("")
    grouped = _moe_grouped_records(doc)
    if grouped:
        floors = [_moe_floor(doc, r) for r in grouped]
        recomputed = any(f[1] for f in floors)
        out += ["| model | projection | tokens (rows) | ours us (tiling) | torch._grouped_mm us | loop us | floor us | "
                "ours / floor | grouped_mm / ours | loop / ours | best `--configs` tiling us (grouped_mm / it) | "
                "errors |", "|" + "---|" * 12]
        for r, (floor, fixed) in zip(grouped, floors):
            us = r.get("us") or {}
            base, base_name = _grouped_base(us)
            tilings = {k: v for k, v in us.items() if k.startswith("ours/") and k not in ("ours/nk", "ours/fp8")
                       and isinstance(v, (int, float))}
            best = min(tilings, key=tilings.get) if tilings else None
            best_cell = (f"`{best[5:]}` {tilings[best]:.1f} ({_m(base / tilings[best] if base else None, '{:.3f}')})"
                         if best else "-")
            ours = us.get("ours")
            errs = "; ".join(f"{k}: {v}" for k, v in (r.get("errors") or {}).items()).replace("|", "/")[:120]
            out.append("| " + " | ".join([
                str(r.get("name", "?")), str(r.get("projection", "?")), f"{r.get('tokens', '?')} ({r.get('rows', '?')})",
                f"{_m(ours)}" + (f" (`{r['config']}`)" if r.get("config") else ""),
                _m(base) + (" (nk)" if base_name == "grouped_mm/nk" else ""), _m(us.get("loop")),
                _m(floor) + ("*" if fixed else ""),
                _m(ours / floor if isinstance(ours, (int, float)) and floor else None, "{:.2f}"),
                _m(_moe_ratio(r, "grouped_mm_over_ours", base), "{:.3f}"),
                _m(_moe_ratio(r, "loop_over_ours", "loop"), "{:.2f}"), best_cell, errs or ""]) + " |")
        out.append("")
        if recomputed:
            nominal = next((v for k, v in MOE_HBM_TBS.items() if k in gpu_of(doc)), None)
            out += [f"\\* floor recomputed with the {gpu_of(doc)}'s nominal {nominal} TB/s: the run recorded "
                    f"`hbm_tbs` {doc.get('hbm_tbs')} (H200's, taken for every GPU before 6d5610f), so its own "
                    f"`floor_us` (e.g. {_m(grouped[0].get('floor_us'))} us in the first row) is too low.", ""]
    layer = _moe_layer_records(doc)
    if layer:
        out += ["The whole layer at EP=1 (route, gate_up, SiLU gate, down, combine): ours (`layers.moe_forward`) "
                "against the same layer in torch ops (`torch._grouped_mm` twice) and torch.compile of it.", "",
                "| model | tokens | ours us | torch us | torch.compile us | torch / ours | torch.compile / ours | "
                "eager: torch / ours | eager: torch.compile / ours | errors |", "|" + "---|" * 10]
        for r in layer:
            us = r.get("us") or {}
            errs = "; ".join(f"{k}: {v}" for k, v in (r.get("errors") or {}).items()).replace("|", "/")[:120]
            out.append("| " + " | ".join([
                str(r.get("name", "?")), str(r.get("tokens", "?")), _m(us.get("ours")), _m(us.get("torch")),
                _m(us.get("torch.compile")), _m(_moe_ratio(r, "torch_over_ours", "torch"), "{:.3f}"),
                _m(_moe_ratio(r, "torch.compile_over_ours", "torch.compile"), "{:.3f}"),
                _m(r.get("eager_torch_over_ours"), "{:.3f}"), _m(r.get("eager_torch.compile_over_ours"), "{:.3f}"),
                errs or ""]) + " |")
        out.append("")
    return out


def _ep_columns(recs):
    """The ``ours*`` columns of bench_moe_ep records in order of appearance (``ours``, ``ours/a2a``, ``ours/<method>``,
    ``ours/a2a/<method>``: any method, ``ll`` included)."""
    cols = []
    for r in recs:
        for c in list(r.get("us") or {}) + list(r.get("eager_us") or {}):
            if c.startswith("ours") and c not in cols:
                cols.append(c)
    return cols


def _ep_backend(doc, r):
    """``(backend, note)`` of the torch baseline's all_to_all_single: the record's ``torch_a2a_backend``; where it
    is missing (records before it was written), "gloo" for ranks that shared a GPU (their process group has no
    NCCL), else unknown."""
    b = r.get("torch_a2a_backend")
    if b:
        return b, ""
    return ("gloo", " (not recorded; no NCCL where ranks share a GPU)") if is_shared(doc) else ("?", " (not recorded)")


def moe_ep_section(doc):
    """bench_moe_ep: the MoE layer at expert parallelism ``world`` per tokens per rank: every ``ours*`` column's
    CUDA-graph and eager us (``ours`` / ``ours/<method>``: the layer; ``ours/a2a...``: dispatch + combine alone), the
    torch layer (its all_to_all_single backend; it reads split sizes on the host, so it is never graphed), torch /
    ours per layer column, the errors, and which columns ran eager because capture failed. Where the torch baseline
    ran over gloo (host copies: ranks sharing a GPU) its ratio says nothing of NCCL and is shown as not comparable."""
    recs = doc.get("records", [])
    t = topology_of(doc)
    out = [f"### bench_moe_ep, EP={t['world_size'] or doc.get('world_size', '?')}, {gpu_of(doc)}, commit "
           f"`{doc.get('git_commit') or '?'}`, {_when(doc)} (`{doc['_path']}`)", "",
           f"- command: `{doc.get('command', '?')}`"]
    cols = _ep_columns(recs)
    graph = {}
    for r in recs:
        for c, g in (r.get("graphed") or {}).items():
            graph.setdefault(c, set()).add(bool(g))
    yes = [c for c in cols + ["torch"] if graph.get(c) == {True}]
    no = [c for c in cols + ["torch"] if c in graph and graph[c] != {True}]
    out.append(f"- CUDA-graph replay: {', '.join(f'`{c}`' for c in yes) or 'none'}; eager in the graph column "
               f"(capture failed, or the torch layer, which reads split sizes on the host): "
               f"{', '.join(f'`{c}`' for c in no) or 'none'}")
    fails = {}
    for f in doc.get("graph_failures") or []:
        key = (f.get("impl", "?"), str(f.get("error", "?")).replace("|", "/")[:160]) if isinstance(f, dict) \
            else ("?", str(f)[:160])
        fails[key] = fails.get(key, 0) + 1
    for (impl, err), n in fails.items():
        out.append(f"- graph capture failed ({n}x) for `{impl}`: `{err}`")
    backends = sorted({_ep_backend(doc, r)[0] + _ep_backend(doc, r)[1] for r in recs})
    gloo = any(_ep_backend(doc, r)[0] == "gloo" for r in recs)
    out.append(f"- torch baseline's all_to_all_single: {', '.join(backends) or '?'}"
               + (": host copies through gloo, so torch / ours is not a speed-up over NCCL and is not shown"
                  if gloo else ""))
    out.append("")
    layers = [c for c in cols if not c.startswith("ours/a2a")]
    head = ("| model | tokens / rank | experts / rank | " + " | ".join(f"`{c}` graph / eager us" for c in cols)
            + " | `torch` us (eager) | " + " | ".join(f"torch / `{c}` (eager / eager)" for c in layers)
            + " | rel. error vs torch | dispatch+combine rel. error |")
    out += [head, "|" + "---|" * (head.count("|") - 1)]
    for r in recs:
        us, eager, g = r.get("us") or {}, r.get("eager_us") or {}, r.get("graphed") or {}
        cells = [str(r.get("name", "?")), str(r.get("tokens_per_rank", "?")), str(r.get("experts_per_rank", "?"))]
        for c in cols:
            cells.append(f"{_m(us.get(c))}{'' if g.get(c, True) else ' (not graphed)'} / {_m(eager.get(c))}")
        torch_us = eager.get("torch", us.get("torch"))
        backend = _ep_backend(doc, r)[0]
        cells.append(f"{_m(torch_us)} ({backend})")
        for c in layers:
            if backend == "gloo":
                cells.append("n/a (gloo host path)")
            else:
                e = _moe_ratio({"us": eager}, "", "torch", c)
                cells.append(_m(e, "{:.2f}"))
        def errs(key, single):
            by = r.get(key) or {}
            if by:
                return ", ".join(f"{m} {_m(v, '{:.1e}')}" for m, v in by.items())
            return _m(r.get(single), "{:.1e}")
        cells += [errs("rel_error_vs_torch_by_method", "rel_error_vs_torch"),
                  errs("a2a_rel_error_by_method", "a2a_rel_error")]
        out.append("| " + " | ".join(cells) + " |")
    return out + [""]


#: bench_moe_tp's baselines in its table order
TP_BASELINES = ("torch", "torch/capturable", "torch.compile")


def moe_tp_section(doc):
    """bench_moe_tp: the MoE layer at tensor parallelism ``world`` per routed tokens: ``ours`` (the layer) and its
    two ops graph / eager us, each baseline's graph / eager us (``torch``, the reference layer, never graphed: it
    reads sizes on the host), baseline / ours graph against graph (only where both were captured) and eager against
    eager, the relative errors, and the baselines a run could not have (``baselines_unavailable``). Where the torch
    collectives ran over gloo (ranks sharing a GPU: host copies) the torch ratios say nothing of NCCL and are shown
    as not comparable."""
    recs = doc.get("records", [])
    t = topology_of(doc)
    out = [f"### bench_moe_tp, TP={t['world_size'] or doc.get('world_size', '?')}, {gpu_of(doc)}, commit "
           f"`{doc.get('git_commit') or '?'}`, {_when(doc)} (`{doc['_path']}`)", "",
           f"- command: `{doc.get('command', '?')}`"]
    timed = [r for r in recs if r.get("us") or r.get("eager_us")]
    if not timed:
        return out + ["- not timed (the simulator: every implementation checked against torch)", ""]
    unavailable = {}
    for r in recs:
        for b, why in (r.get("baselines_unavailable") or {}).items():
            unavailable.setdefault(b, why)
    for b, why in unavailable.items():
        out.append(f"- `{b}` not run: {why}")
    ours = [c for c in ("ours", "ours/ag_group_gemm", "ours/group_gemm_rs") if any(c in (r.get("eager_us") or {})
                                                                                   for r in timed)]
    bases = [b for b in TP_BASELINES if any(b in (r.get("eager_us") or {}) for r in timed)]
    out.append("")
    head = ("| model | tokens (per rank) | " + " | ".join(f"`{c}` graph / eager us" for c in ours + bases)
            + " | " + " | ".join(f"`{b}` / ours graph / eager" for b in bases) + " | rel. error vs torch |")
    out += [head, "|" + "---|" * (head.count("|") - 1)]
    for r in timed:
        us, eager, g = r.get("us") or {}, r.get("eager_us") or {}, r.get("graphed") or {}
        gloo = r.get("torch_collectives_backend") == "gloo" and (r.get("world") or 1) > 1
        cells = [str(r.get("name", "?")), f"{r.get('tokens', '?')} ({r.get('tokens_per_rank', '?')})"]
        for c in ours + bases:
            cells.append(f"{_m(us.get(c))}{'' if g.get(c, True) else ' (eager)'} / {_m(eager.get(c))}")
        for b in bases:
            if gloo and b.startswith("torch") and b != "torch.compile":
                cells.append("n/a (gloo host path)")
                continue
            cells.append(f"{_m(r.get(f'{b}_over_ours'), '{:.2f}')} / {_m(r.get(f'eager_{b}_over_ours'), '{:.2f}')}")
        cells.append(_m(r.get("rel_error_vs_torch"), "{:.1e}"))
        out.append("| " + " | ".join(cells) + " |")
    return out + [""]


def attention_section(doc):
    """bench_attention: per record part, the decode kernel's K/V bandwidth (GB/s and the fraction of the run's read
    ceiling) against SDPA, prefill against SDPA's flash backend (TFLOP/s), the sequence-parallel decode split into
    its local decode and its exchange, Ulysses' all-to-alls against all_to_all_single + permutes, the
    sequence-parallel prefill with the fused all-gather (``sp_ag``) against the unfused all-gather + flash_attention
    and SDPA's flash backend on pre-gathered K/V (TFLOP/s per GPU; a shared GPU marked). Graph / eager us per column
    (``(eager)``: capture failed), ratios baseline /
    ours (> 1: ours faster)."""
    recs = doc.get("records", [])
    t = topology_of(doc)
    out = [f"### bench_attention, {t['world_size'] or doc.get('world_size', '?')} rank(s), {gpu_of(doc)}, commit "
           f"`{doc.get('git_commit') or '?'}`, {_when(doc)} (`{doc['_path']}`)", "",
           f"- command: `{doc.get('command', '?')}`"]
    ceiling = doc.get("hbm") or {}
    if ceiling.get("read_ceiling_gbs"):
        out.append(f"- read ceiling {ceiling['read_ceiling_gbs']:.0f} GB/s ({ceiling.get('how', '')})")
    timed = [r for r in recs if r.get("us")]
    if not timed:
        return out + ["- not timed (the simulator: every column checked against the reference)", ""]

    def col(r, c):
        g = (r.get("graphed") or {}).get(c, True)
        return f"{_m((r.get('us') or {}).get(c))}{'' if g else ' (eager)'} / {_m((r.get('eager_us') or {}).get(c))}"

    for part, title in (("decode", "decode"), ("prefill", "prefill (causal)"), ("sp", "sequence-parallel decode"),
                        ("ulysses", "Ulysses all-to-alls (torch: all_to_all_single + permutes)"),
                        ("sp_ag", "sequence-parallel prefill, all-gather fused (causal)")):
        rows = [r for r in timed if r.get("part") == part]
        if not rows:
            continue
        cols = []
        for r in rows:
            cols += [c for c in r["us"] if c not in cols]
        out += ["", f"{title}:", ""]
        if part == "decode":
            head = ("| batch | tokens | page | " + " | ".join(f"`{c}` graph / eager us" for c in cols)
                    + " | ours GB/s (fraction of read) | sdpa / ours graph / eager |")
        elif part == "prefill":
            head = ("| tokens | heads q/kv | " + " | ".join(f"`{c}` graph / eager us" for c in cols)
                    + " | TFLOP/s ours / sdpa | sdpa / ours graph / eager |")
        elif part == "sp":
            head = ("| world | batch | tokens (per rank) | " + " | ".join(f"`{c}` graph / eager us" for c in cols)
                    + " | (local + exchange) / together |")
        elif part == "sp_ag":
            head = ("| world | batch | tokens (per rank) | " + " | ".join(f"`{c}` graph / eager us" for c in cols)
                    + " | TFLOP/s per GPU ours | ag+flash / ours graph / eager | sdpa_flash / ours graph / eager |")
        else:
            head = ("| world | tokens (per rank) | heads | " + " | ".join(f"`{c}` graph / eager us" for c in cols)
                    + " | bus GB/s pre / post | torch / ours pre, post (graph) | torch backend |")
        out += [head, "|" + "---|" * (head.count("|") - 1)]
        for r in rows:
            if part == "decode":
                cells = [str(r.get("batch")), str(r.get("tokens")), str(r.get("page_size"))]
                cells += [col(r, c) for c in cols]
                frac = (r.get("kv_fraction") or {}).get("ours")
                cells.append(f"{_m((r.get('kv_gbs') or {}).get('ours'), '{:.0f}')} ({_m(frac, '{:.2f}')})")
                cells.append(f"{_m(r.get('sdpa_over_ours'), '{:.2f}')} / {_m(r.get('eager_sdpa_over_ours'), '{:.2f}')}")
            elif part == "prefill":
                tf = r.get("tflops") or {}
                cells = [str(r.get("tokens")), f"{r.get('q_heads')}/{r.get('kv_heads')}"]
                cells += [col(r, c) for c in cols]
                cells.append(f"{_m(tf.get('ours'), '{:.0f}')} / {_m(tf.get('sdpa_flash'), '{:.0f}')}")
                cells.append(f"{_m(r.get('sdpa_flash_over_ours'), '{:.2f}')} / "
                             f"{_m(r.get('eager_sdpa_flash_over_ours'), '{:.2f}')}")
            elif part == "sp":
                cells = [str(r.get("world")), str(r.get("batch")), f"{r.get('tokens')} ({r.get('tokens_per_rank')})"]
                cells += [col(r, c) for c in cols]
                cells.append(_m(r.get("sum_over_together"), "{:.2f}"))
            elif part == "sp_ag":
                cells = [str(r.get("world")) + (" (shared GPU)" if r.get("shared_gpu") else ""), str(r.get("batch")),
                         f"{r.get('tokens')} ({r.get('tokens_per_rank')})"]
                cells += [col(r, c) for c in cols]
                cells.append(_m((r.get("tflops_per_gpu") or {}).get("ours"), "{:.0f}"))
                for b in ("ag+flash", "sdpa_flash"):
                    cells.append(f"{_m(r.get(f'{b}_over_ours'), '{:.2f}')} / {_m(r.get(f'eager_{b}_over_ours'), '{:.2f}')}")
            else:
                bus = r.get("bus_gbs") or {}
                cells = [str(r.get("world")), f"{r.get('tokens')} ({r.get('tokens_per_rank')})", str(r.get("heads"))]
                cells += [col(r, c) for c in cols]
                cells.append(f"{_m(bus.get('pre'), '{:.0f}')} / {_m(bus.get('post'), '{:.0f}')}")
                cells.append(f"{_m(r.get('torch_pre_over_pre'), '{:.2f}')}, "
                             f"{_m(r.get('torch_post_over_post'), '{:.2f}')}")
                cells.append(f"{r.get('torch_a2a_backend', '?')}" + (" (shared GPU)" if r.get("shared_gpu") else ""))
            out.append("| " + " | ".join(cells) + " |")
    return out + [""]


def plot_moe(docs, png_path):
    """Per GPU, the newest bench_group_gemm run with grouped-GEMM records: bars of ``torch._grouped_mm / ours`` and
    ``loop / ours`` per (projection, tokens); and, where a run timed the layer (``--layer``), the newest such run's
    ``torch.compile / ours`` and ``torch / ours`` per tokens; a line at 1 (above it: ours faster). Into
    ``png_path``; returns False without matplotlib or without such records."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    newest = {}
    for kind, having in (("grouped", _moe_grouped_records), ("layer", _moe_layer_records)):
        for gpu in sorted({gpu_of(d) for d in docs}):
            d = _newest([x for x in docs if gpu_of(x) == gpu], lambda x: bool(having(x)))
            if d is not None:
                newest.setdefault(gpu, {})[kind] = d
    if not newest:
        return False
    gpus = sorted(newest)
    ncols = 2 if any("layer" in v for v in newest.values()) else 1
    fig, axes = plt.subplots(len(gpus), ncols, figsize=(6.5 * ncols, 3.8 * len(gpus)), squeeze=False)

    def bars(ax, labels, series, title):
        width = 0.8 / max(1, len(series))
        top = 1.0
        for i, (name, vals, color) in enumerate(series):
            xs = [j + (i - (len(series) - 1) / 2) * width for j, v in enumerate(vals) if v is not None]
            ys = [v for v in vals if v is not None]
            if xs:
                b = ax.bar(xs, ys, width, label=name, color=color)
                ax.bar_label(b, fmt="%.2f", fontsize=7)
                top = max(top, *ys)
        ax.set_ylim(0, top * 1.25)  # room for the legend above the bars
        ax.axhline(1.0, color="k", linewidth=1, linestyle="--")
        ax.set_xticks(range(len(labels)))
        ax.set_xticklabels(labels, fontsize=8)
        ax.set_ylabel("baseline time / ours (> 1: ours faster)", fontsize=8)
        ax.set_title(title, fontsize=9)
        ax.grid(True, axis="y", alpha=0.3)
        ax.legend(fontsize=7, loc="upper left")

    for row, gpu in enumerate(gpus):
        d = newest[gpu].get("grouped")
        ax = axes[row][0]
        if d is not None:
            recs = _moe_grouped_records(d)
            models = {r.get("name") for r in recs}
            labels = [(f"{r.get('name')}\n" if len(models) > 1 else "") + f"{r.get('projection')}\nT={r.get('tokens')}"
                      for r in recs]
            series = [("torch._grouped_mm / ours",
                       [_moe_ratio(r, "grouped_mm_over_ours", _grouped_base(r.get("us") or {})[0]) for r in recs],
                       "tab:blue"),
                      ("per-expert loop / ours", [_moe_ratio(r, "loop_over_ours", "loop") for r in recs], "tab:orange")]
            bars(ax, labels, series, f"grouped GEMM ({', '.join(sorted(map(str, models)))}), {gpu}\ncommit "
                                     f"{d.get('git_commit', '?')}, {_when(d)}")
        else:
            ax.set_axis_off()
        if ncols == 2:
            ax = axes[row][1]
            d = newest[gpu].get("layer")
            if d is None:
                ax.set_axis_off()
                continue
            recs = _moe_layer_records(d)
            series = [("torch.compile / ours", [_moe_ratio(r, "torch.compile_over_ours", "torch.compile")
                                                for r in recs], "tab:green"),
                      ("torch ops / ours", [_moe_ratio(r, "torch_over_ours", "torch") for r in recs], "tab:red")]
            series = [s for s in series if any(v is not None for v in s[1])]
            bars(ax, [f"T={r.get('tokens')}" for r in recs], series,
                 f"MoE layer, EP=1 ({', '.join(sorted({str(r.get('name')) for r in recs}))}), {gpu}\ncommit "
                 f"{d.get('git_commit', '?')}, {_when(d)}")
    fig.suptitle("MoE on one GPU: CUDA-graph replay, baseline time / ours", fontsize=10)
    fig.tight_layout()
    fig.savefig(png_path, dpi=90)
    plt.close(fig)
    return True


def _mega_roofline(r, name="mega", read=False):
    """``<name>_roofline[_read]_fraction`` of a bench_mega result (``<name>_roofline[_read]`` in results written
    before the key was renamed), or None."""
    suffix = "_roofline_read" if read else "_roofline"
    return r.get(f"{name}{suffix}_fraction", r.get(f"{name}{suffix}"))


def _mega_compile(doc):
    """The torch.compile cell pair of a bench_mega result: ``(us, x over mega)`` texts; where the run has no
    torch.compile figure (results before it was measured, ``--no-compile``, a failed compile) the first says why."""
    r = doc.get("results", {})
    if r.get("torch_compile_us"):
        return _f(r["torch_compile_us"], "{:.1f}"), _f(r.get("torch_compile_over_mega"))
    why = (doc.get("skipped") or {}).get("torch_compile") or "not measured"
    return why.replace("|", "/"), "-"


def mega_section(doc):
    """bench_mega: one row per run (preset, TP, batch, context): the mega kernel step against the torch model under
    CUDA-graph replay in the same process (eager ops, and torch.compile'd where the run has it), the roofline
    fraction and the correctness pass."""
    r, c, m = doc.get("results", {}), doc.get("correctness", {}), doc.get("mega", {})
    cfg = doc.get("config", {})
    ours = r.get("torch_ours_us")
    comp_us, comp_x = _mega_compile(doc)
    roof_read = _mega_roofline(r, read=True)
    ctx = doc.get("contexts") or doc.get("context")
    ctx = ",".join(map(str, ctx)) if isinstance(ctx, list) else ctx
    row = (f"| {doc.get('preset')} ({cfg.get('num_layers', '?')} layers) | {doc.get('world_size')} | "
           f"{doc.get('batch', 1)} | {ctx} | {_f(r.get('mega_us'), '{:.1f}')} | {comp_us} | {comp_x} | "
           f"{_f(r.get('torch_nccl_us'), '{:.1f}')} | "
           f"{_f(r.get('torch_nccl_over_mega'))} | {_f(ours, '{:.1f}') if ours else '-'} | "
           f"{_f(r.get('torch_ours_over_mega')) if ours else '-'} | "
           f"{r.get('bytes_per_step', {}).get('total', 0) / 1e9:.2f} | {_f(_mega_roofline(r))} | "
           f"{'-' if roof_read is None else _f(roof_read)} | "
           f"{_f(c.get('min_cosine'), '{:.5f}')} / {_f(c.get('top1_rate'), '{:.3f}')} ({c.get('steps')} steps) |")
    pf = m.get("gemv_prefetch_bytes")
    return [f"`{doc['_path']}` (commit {doc.get('git_commit', '?')}, {m.get('tasks')} tasks on "
            f"{m.get('num_workers')} workers x {m.get('num_warps')} warps, fused MLP {m.get('fused_mlp')}"
            f"{'' if pf is None else f', GEMV L2 prefetch {pf} B'}):", "",
            "| model | TP | batch | context | mega us | torch.compile us | x torch.compile | torch+NCCL us | x torch | "
            "torch+ours us | x torch+ours | GB/step | roofline (copy) | roofline (read) | min cosine / top-1 |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|", row, ""] + _mega_variants(doc)


def _mega_variants(doc):
    """The ``--variant`` rows of a bench_mega result (other mega builds timed in the same samples as ``mega``):
    options, step us, speedup over mega (> 1: faster), roofline fraction, and whether its logits were mega's bits;
    nothing for a run without variants."""
    variants, r = doc.get("variants") or {}, doc.get("results", {})
    if not variants:
        return []
    checks = (doc.get("correctness") or {}).get("variants") or {}
    lines = ["A/B in the same samples (`--variant`):", "",
             "| variant | options | us | x mega (> 1: faster) | roofline (copy) | same bits as mega |",
             "|---|---|---|---|---|---|"]
    for name, v in variants.items():
        opts = ", ".join(f"{k}={val}" for k, val in (v.get("options") or {}).items())
        same = (checks.get(name) or {}).get("same_bits_as_mega")
        lines.append(f"| {name} | {opts} | {_f(r.get(f'{name}_us'), '{:.1f}')} | "
                     f"{_f(r.get(f'{name}_speedup_over_mega'), '{:.4f}')} | {_f(_mega_roofline(r, name))} | "
                     f"{'-' if same is None else same} |")
    return lines + [""]


def _attention_timed(doc, part):
    return [r for r in doc.get("records", []) if r.get("part") == part and r.get("us")]


def plot_attention(docs, png_path):
    """Per GPU, the newest bench_attention run with timed decode records and the newest with timed prefill records
    (one process: shared-GPU runs never reach here): decode bars of the K/V read fraction of the run's read ceiling,
    ours and SDPA, per (batch, tokens, page), with the issue's 0.85 target; prefill bars of SDPA flash's time / ours
    per tokens, with the 0.9 target and a line at 1. Into ``png_path``; returns False without matplotlib or without
    such records."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    rows = []
    for gpu in sorted({gpu_of(d) for d in docs}):
        mine = [d for d in docs if gpu_of(d) == gpu]
        dec = _newest(mine, lambda d: bool(_attention_timed(d, "decode")))
        pre = _newest(mine, lambda d: bool(_attention_timed(d, "prefill")))
        if dec is not None or pre is not None:
            rows.append((gpu, dec, pre))
    if not rows:
        return False
    fig, axes = plt.subplots(len(rows), 2, figsize=(13, 3.8 * len(rows)), squeeze=False,
                             gridspec_kw={"width_ratios": [3, 1]})
    for row, (gpu, dec, pre) in enumerate(rows):
        ax = axes[row][0]
        if dec is not None:
            recs = _attention_timed(dec, "decode")
            labels = [f"B={r.get('batch')}\n{(r.get('tokens') or 0) // 1024}K p{r.get('page_size')}" for r in recs]
            for i, (name, color) in enumerate((("ours", "tab:blue"), ("sdpa", "tab:gray"))):
                xs = [j + (i - 0.5) * 0.4 for j in range(len(recs))]
                ys = [(r.get("kv_fraction") or {}).get(name) or 0.0 for r in recs]
                b = ax.bar(xs, ys, 0.4, label=name, color=color)
                ax.bar_label(b, fmt="%.2f", fontsize=6)
            ax.axhline(0.85, color="tab:red", linewidth=1, linestyle="--", label="target 0.85")
            ax.set_xticks(range(len(recs)))
            ax.set_xticklabels(labels, fontsize=7)
            ax.set_ylim(0, 1.2)
            ax.set_ylabel("K/V bytes / time / read ceiling", fontsize=8)
            ax.set_title(f"decode (graph replay), {gpu}, commit {str(dec.get('git_commit', '?'))[:8]}, {_when(dec)}",
                         fontsize=9)
            ax.legend(fontsize=7, loc="upper left", ncol=3)
            ax.grid(True, axis="y", alpha=0.3)
        else:
            ax.set_axis_off()
        ax = axes[row][1]
        if pre is not None:
            recs = _attention_timed(pre, "prefill")
            ys = [r.get("sdpa_flash_over_ours") or 0.0 for r in recs]
            b = ax.bar(range(len(recs)), ys, 0.6, color="tab:blue")
            ax.bar_label(b, fmt="%.2f", fontsize=7)
            ax.axhline(0.9, color="tab:red", linewidth=1, linestyle="--", label="target 0.9")
            ax.axhline(1.0, color="k", linewidth=1, linestyle=":")
            ax.set_xticks(range(len(recs)))
            ax.set_xticklabels([f"{(r.get('tokens') or 0) // 1024}K" for r in recs], fontsize=8)
            ax.set_ylim(0, max([1.2] + [y * 1.2 for y in ys]))
            ax.set_ylabel("SDPA flash time / ours (> 1: ours faster)", fontsize=8)
            ax.set_title(f"causal prefill, commit {str(pre.get('git_commit', '?'))[:8]}", fontsize=9)
            ax.legend(fontsize=7, loc="lower right")
            ax.grid(True, axis="y", alpha=0.3)
        else:
            ax.set_axis_off()
    fig.tight_layout()
    fig.savefig(png_path, dpi=110)
    plt.close(fig)
    return True


def plot_mega(docs, png_path):
    """Step latency of one ``bench_mega`` run per (preset, TP, layers, batch), the newest of those that checked the most
    teacher-forced steps (a headline run checks 64, a sweep's variants fewer), one bar group per result file (mega,
    torch.compile, torch, torch + ours), into ``png_path``. Returns False without matplotlib or without timed runs."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    # per (preset, TP, layers, batch): the newest of the runs that checked the most steps (every run is in the tables)
    runs, seen = [], set()
    for d in sorted(docs, key=lambda d: (d.get("correctness", {}).get("steps") or 0, d.get("timestamp_utc", "")),
                    reverse=True):
        key = (d.get("preset"), d.get("world_size"), d.get("config", {}).get("num_layers"), d.get("batch") or 1)
        if d.get("results", {}).get("mega_us") and key not in seen:
            seen.add(key)
            runs.append(d)
    if not runs:
        return False
    names = [("mega_us", "mega kernel"), ("torch_compile_us", "torch.compile (max-autotune, no cudagraphs)"),
             ("torch_nccl_us", "torch (+NCCL when TP > 1)"), ("torch_ours_us", "torch + triton_dist all-reduce")]
    fig, ax = plt.subplots(figsize=(max(6, 1.6 * len(runs) + 2), 4.2))
    width = 0.8 / len(names)
    for i, (key, label) in enumerate(names):
        xs = [j + (i - (len(names) - 1) / 2) * width for j, d in enumerate(runs) if d["results"].get(key)]
        ys = [d["results"][key] / 1e3 for d in runs if d["results"].get(key)]
        if xs:
            ax.bar(xs, ys, width, label=label)
    ax.set_xticks(range(len(runs)))
    ax.set_xticklabels([f"{os.path.basename(d['_path'])[:-5]}\nTP={d.get('world_size')}, b{d.get('batch') or 1}, "
                        f"{d.get('config', {}).get('num_layers')} layers" for d in runs], fontsize=7)
    ax.set_ylabel("decode step (ms), CUDA-graph replay")
    ax.legend(fontsize=8)
    ax.grid(True, axis="y", alpha=0.3)
    fig.suptitle("Qwen3 decode step: mega kernel vs torch (same process)")
    fig.tight_layout()
    fig.savefig(png_path, dpi=90)
    plt.close(fig)
    return True


def probe_mega_section(doc):
    """probe_mega.py: the Linear chain (or pure GEMV streaming) as one mega kernel vs torch, per configuration."""
    lines = [f"`{doc['_path']}`: {doc.get('layers')} layers of hidden {doc.get('hidden')} / qkv {doc.get('qkv')} / "
             f"intermediate {doc.get('inter')} ({doc.get('weight_bytes', 0) / 1e9:.2f} GB of weights); torch "
             f"{_f(doc.get('torch_graph_us'), '{:.1f}')} us; read bandwidth "
             f"{_f((doc.get('read_bytes_per_s') or 0) / 1e12)} TB/s", "",
             "| workers | warps | mega us | weight TB/s | x torch |", "|---|---|---|---|---|"]
    for row in doc.get("rows", []):
        if "error" in row:
            lines.append(f"| {row.get('workers')} | {row.get('num_warps')} | error: {row['error'][:80]} | | |")
        else:
            lines.append(f"| {row['workers']} | {row['num_warps']} | {row['us']:.1f} | {row['tb_s']:.2f} | "
                         f"{row['ratio']:.2f} |")
    return lines + [""]


# ------------------------------------------------------------------------------------------------- the opening screen
#: title of the opening screen (the first thing RESULTS.md shows)
GLANCE_TITLE = "At a glance"
_STAMP = re.compile(r"\d{8}T\d{6}Z")


def doc_time(doc) -> str:
    """When a results document was made, as a sortable UTC stamp (``20261201T004301Z``): its ``timestamp_utc``, else
    the stamp in its file name, else its ISO ``time_utc`` / ``date``; "" when none says."""
    ts = doc.get("timestamp_utc")
    if isinstance(ts, str) and _STAMP.fullmatch(ts):
        return ts
    stamp = run_stamp(doc)[0]
    if stamp:
        return stamp
    for key in ("time_utc", "date"):
        m = re.match(r"(\d{4})-(\d\d)-(\d\d)T(\d\d):(\d\d):(\d\d)", str(doc.get(key) or ""))
        if m:
            return "{}{}{}T{}{}{}Z".format(*m.groups())
    return ""


def _when(doc) -> str:
    t = doc_time(doc)
    return f"{t[:4]}-{t[4:6]}-{t[6:8]} {t[9:11]}:{t[11:13]} UTC" if t else "?"


def machine_of(doc) -> str:
    """``<ranks> x <GPU>`` of a results document (``<ranks> ranks on <gpus> x <GPU>`` where ranks shared a GPU)."""
    gpu = ((doc.get("versions") or {}).get("gpu") or (doc.get("facts") or {}).get("gpu") or doc.get("device")
           or (doc.get("devices") or [None])[0] or "?")
    t = topology_of(doc)
    world = t["world_size"] or 1
    if is_shared(doc):
        return f"{world} ranks on {t['gpus'] or 1} x {gpu}"
    return f"{world} x {gpu}"


def _span(vals, fmt="{:.2f}", suffix="x") -> str:
    """``lo–hi`` (or one value where both print alike) of the numbers in ``vals``, each with ``suffix``."""
    vals = [v for v in vals if isinstance(v, (int, float))]
    if not vals:
        return "—"
    lo, hi = fmt.format(min(vals)), fmt.format(max(vals))
    return f"{lo}{suffix}" if lo == hi else f"{lo}–{hi}{suffix}"


def github_anchor(heading: str) -> str:
    """The anchor GitHub gives a Markdown heading's text: lower case, punctuation dropped (letters, digits, ``_``,
    ``-`` and spaces kept), spaces as ``-``."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def heading_anchors(lines) -> list:
    """``[(line index, anchor)]`` of every heading in ``lines``, in order, a repeated anchor numbered ``-1``, ``-2``,
    ... as GitHub numbers them."""
    seen, out = {}, []
    for i, line in enumerate(lines):
        m = re.match(r"#{1,6} (.*)", line)
        if not m:
            continue
        base = github_anchor(m.group(1))
        n = seen.get(base, 0)
        seen[base] = n + 1
        out.append((i, base if n == 0 else f"{base}-{n}"))
    return out


def _anchor_of(doc, lines, anchors) -> str:
    """The anchor of the heading above the first line of ``lines`` that names ``doc``'s file (its run's heading, or
    its section's where runs have none); "" when the file is not named."""
    idx = next((i for i, line in enumerate(lines) if doc["_path"] in line), None)
    if idx is None:
        return ""
    above = [a for i, a in anchors if i <= idx]
    return above[-1] if above else ""


def _newest(docs, having):
    """The newest of ``docs`` for which ``having(doc)`` is true (None if none)."""
    found = [d for d in docs if having(d)]
    return max(found, key=lambda d: (doc_time(d), d["_path"])) if found else None


def _glance_collectives(docs):
    rows = []
    for op in ("all_reduce", "all_gather", "reduce_scatter"):
        def timed(d, op=op):
            return [r for r in d.get("results", []) if r.get("op") == op and "us" in r and r.get("nccl_us")]
        d = _newest(docs, lambda d: any(r.get("method") == "auto" for r in timed(d)))
        if d is None:
            continue
        rs = timed(d)
        dt = "bfloat16" if any(r.get("dtype", "bfloat16") == "bfloat16" for r in rs) else rs[0].get("dtype")
        rs = [r for r in rs if r.get("dtype", "bfloat16") == dt]
        autos = [r for r in rs if r.get("method") == "auto" and r["us"] > 0]
        symm = []
        for a in autos:
            base = [r["us"] for r in rs if str(r.get("method")).startswith("torch_symm") and r["bytes"] == a["bytes"]
                    and r.get("correct", True)]
            if base:
                symm.append(min(base) / a["us"])
        sizes = sorted(r["bytes"] for r in autos)
        text = (f"auto {_span([r['nccl_us'] / r['us'] for r in autos])} NCCL"
                + (f", {_span(symm)} torch symm-mem" if symm else "")
                + f" ({dt}, {fmt_size(sizes[0])}–{fmt_size(sizes[-1])})")
        rows.append((f"{op}", text, d))
    return rows


def _glance_gemm(docs):
    d = _newest(docs, lambda d: any("auto_vs_cublas" in r for r in d.get("records", [])))
    if d is None:
        return []
    recs = [r for r in d["records"] if "auto_vs_cublas" in r]
    return [("`matmul`", f"auto {_span([r['auto_vs_cublas'] for r in recs])} cuBLAS, best tiling "
             f"{_span([r.get('best_vs_cublas') for r in recs])} ({len(recs)} shapes, bf16)", d)]


def _glance_overlap(docs):
    rows = []
    for op, name in (("ag_gemm", "AG+GEMM"), ("gemm_rs", "GEMM+RS"), ("gemm_ar", "GEMM+AR"), ("tp_mlp", "TP MLP")):
        def recs(d, op=op):
            return [r for r in d.get("records", []) if r.get("op") == op and "auto_vs_seq" in r]
        d = _newest(docs, lambda d: bool(recs(d)))
        if d is None:
            continue
        rs = recs(d)
        text = f"auto {_span([r['auto_vs_seq'] for r in rs])} torch seq (NCCL + cuBLAS)"
        if any("auto_vs_symm" in r for r in rs):
            text += f", {_span([r.get('auto_vs_symm') for r in rs])} torch symm-mem"
        if any("auto_over_bound" in r for r in rs):
            text += f"; auto / bound {_span([r.get('auto_over_bound') for r in rs], suffix='')}"
        rows.append((name, text + f" ({len(rs)} shapes)", d))
    return rows


def _glance_mega(docs):
    """Per model and TP: the newest of the whole-model runs that checked the most decode steps (a sweep's variants
    check fewer, a quick run keeps fewer layers)."""
    rows = []
    timed = [d for d in docs if (d.get("results") or {}).get("mega_us")]
    def key(d):
        return str(d.get("preset")), d.get("world_size") or 1, d.get("batch") or 1

    for preset, world, batch in sorted({key(d) for d in timed}):
        d = max((d for d in timed if key(d) == (preset, world, batch)),
                key=lambda d: ((d.get("config") or {}).get("num_layers") or 0,
                               (d.get("correctness") or {}).get("steps") or 0, doc_time(d)))
        r = d["results"]
        text = f"step {r['mega_us']:.0f} us"
        # the headline: against the torch.compile'd model (what a user would run), where the run measured it
        if r.get("torch_compile_over_mega"):
            text += f", {r['torch_compile_over_mega']:.2f}x torch.compile"
        else:
            text += ", no torch.compile figure in this run"
        if r.get("torch_nccl_over_mega"):
            text += f", {r['torch_nccl_over_mega']:.2f}x torch" + (" + NCCL" if world > 1 else "")
        if r.get("torch_ours_over_mega"):
            text += f", {r['torch_ours_over_mega']:.2f}x torch + our all-reduce"
        if _mega_roofline(r) is not None:
            text += f"; roofline {_mega_roofline(r):.2f} of copy bandwidth"
        layers = (d.get("config") or {}).get("num_layers", "?")
        rows.append((f"{preset} TP={world}" + (f" batch {batch}" if batch > 1 else ""),
                     text + f" ({layers} layers, context {d.get('context')})", d))
    return rows


def _glance_shmem(docs):
    d = _newest(docs, lambda d: any(r.get("peer_copy_GBps") for r in d.get("bandwidth", [])))
    if d is None:
        return []
    row = max((r for r in d["bandwidth"] if r.get("peer_copy_GBps")), key=lambda r: r["bytes"])
    bw = ", ".join(f"{m} {_span([row.get(f'{m}_vs_peer_copy')])}" for m in _shmem_methods([row])
                   if row.get(f"{m}_vs_peer_copy") is not None)
    out = [("put / get bandwidth", f"{bw} peer copy ({fmt_size(row['bytes'])})", d)]
    lat = {}
    for x in d.get("latency", []):
        if x.get("payload_bytes") == 8 and x.get("one_way_us") is not None:
            lat.setdefault(x.get("kind", "putmem_signal_block"), x["one_way_us"])
    if lat:
        out.append(("signal latency", "one way (8 B): " + ", ".join(f"{k} {v:.2f} us" for k, v in lat.items()), d))
    return out


def _glance_moe(docs):
    """The newest grouped-GEMM run (x torch._grouped_mm, x the per-expert loop), the newest EP=1 layer run (x
    torch.compile, x torch) and the newest bench_moe_ep run of one GPU per rank (x torch, eager against eager: the
    torch layer is never graphed)."""
    rows = []
    d = _newest(docs, lambda d: bool(_moe_grouped_records(d)))
    if d is not None:
        recs = _moe_grouped_records(d)
        gm = [_moe_ratio(r, "grouped_mm_over_ours", _grouped_base(r.get("us") or {})[0]) for r in recs]
        loop = [_moe_ratio(r, "loop_over_ours", "loop") for r in recs]
        toks = sorted({r.get("tokens") for r in recs if isinstance(r.get("tokens"), int)})
        rows.append(("grouped GEMM", f"{_span(gm)} torch._grouped_mm, {_span(loop)} per-expert loop ({len(recs)} "
                     f"shapes, {toks[0] if toks else '?'}–{toks[-1] if toks else '?'} tokens, bf16)", d))
    d = _newest(docs, lambda d: bool(_moe_layer_records(d)))
    if d is not None:
        recs = _moe_layer_records(d)
        comp = [_moe_ratio(r, "torch.compile_over_ours", "torch.compile") for r in recs]
        text = (f"{_span(comp)} torch.compile, " if any(v is not None for v in comp) else "no torch.compile in this "
                "run, ") + f"{_span([_moe_ratio(r, 'torch_over_ours', 'torch') for r in recs])} torch"
        toks = sorted({r.get("tokens") for r in recs if isinstance(r.get("tokens"), int)})
        rows.append(("MoE layer, EP=1", text + f" ({toks[0] if toks else '?'}–{toks[-1] if toks else '?'} tokens)", d))
    d = _newest(docs, lambda d: d.get("benchmark") == "bench_moe_ep" and bool(d.get("records")))
    if d is not None:
        recs = d["records"]
        if any(_ep_backend(d, r)[0] == "gloo" for r in recs):
            text = "torch baseline over gloo: no ratio"
        else:
            text = (f"{_span([_moe_ratio({'us': r.get('eager_us') or {}}, '', 'torch', 'ours') for r in recs])} "
                    f"torch (eager / eager; {_ep_backend(d, recs[0])[0]})")
        rows.append((f"MoE layer, EP={topology_of(d)['world_size'] or d.get('world_size', '?')}", text, d))
    return rows


def _glance_shared(shared, anchors, body) -> str:
    """The opening screen's row of the results of ranks that shared a GPU: how many, how many ranks per GPU, the
    suite steps' outcome and the other kinds of result; machine and date of the newest."""
    newest = max(shared, key=lambda d: (doc_time(d), d["_path"]))
    per = sorted({topology_of(d)["ranks_per_gpu"] for d in shared} - {None})
    steps = [d for d in shared if _kind(d) == "suite step"]
    skipped = sum(1 for d in steps if "skipped" in d)
    passed = sum(1 for d in steps if "skipped" not in d and d.get("exit_code") == 0 and not d.get("timed_out"))
    text = (f"{', '.join(map(str, per)) or '?'} ranks per GPU (CUDA MPS), no NVLink figures: suite steps {passed} "
            f"passed, {len(steps) - passed - skipped} failed or cut by their time limit, {skipped} skipped")
    others = sorted({_kind(d) for d in shared} - {"suite step"})
    if others:
        text += f"; also {', '.join(others)}"
    sec = next((a for i, a in anchors if body[i] == f"## {SHARED_TITLE}"), "")
    return (f"| Shared GPU | {len(shared)} results | {text} | {machine_of(newest)} | {_when(newest)} | "
            f"[all results](#{sec}) |")


def glance(nvlink, shared, body) -> list:
    """The opening screen of RESULTS.md: per family (collectives, GEMM, overlapped GEMMs, mega kernel, SHMEM
    primitives, ranks sharing a GPU) the newest run's figures against each baseline of that run, the machine and
    date, and links to the run's details in ``body`` (the lines that follow it; GitHub's heading anchors).
    ``nvlink`` / ``shared``: the documents of one GPU per rank and of ranks that shared a GPU."""
    anchors = heading_anchors(body)
    section = {}
    for i, a in anchors:
        if body[i].startswith("## "):
            section.setdefault(body[i][3:].split(" (", 1)[0], a)

    def by(kind):
        return [d for d in nvlink if _kind(d) == kind]

    families = [("Collectives", "Collectives", _glance_collectives(by("bench_collectives"))),
                ("GEMM", "Our GEMM vs cuBLAS", _glance_gemm(by("gemm"))),
                ("MoE", "Mixture of experts", _glance_moe(by("bench_group_gemm") + by("bench_moe_ep"))),
                ("Overlapped GEMMs", "Overlapped GEMMs", _glance_overlap(by("bench_overlap"))),
                ("Mega kernel", "Mega kernel", _glance_mega(by("bench_mega"))),
                ("SHMEM primitives", "SHMEM put/get and signalling", _glance_shmem(by("bench_shmem")))]
    out = [f"## {GLANCE_TITLE}", "",
           "The newest run of each family against the baselines timed in that same run: `x` = baseline time / ours "
           "(> 1: ours faster; SHMEM: our bandwidth / the peer copy's), `auto / bound` = our time over max(GEMM "
           "alone, communication alone) (1 = perfect overlap). Ranges span the run's sizes or shapes; the links "
           "lead to the full tables below.", "",
           "| family | what | latest figures | machine | date | details |", "|---|---|---|---|---|---|"]
    for family, title, rows in families:
        sec = section.get(title, "")
        for what, text, d in rows:
            run = _anchor_of(d, body, anchors)
            link = f"[run](#{run})" if run and run != sec else ""
            link += (" · " if link else "") + (f"[all runs](#{sec})" if sec else "")
            out.append(f"| {family} | {what} | {text} | {machine_of(d)} | {_when(d)} | {link} |")
    if shared:
        out.append(_glance_shared(shared, anchors, body))
    return out + [""]


#: title of the section of results from ranks that shared a GPU
SHARED_TITLE = "Ranks sharing one GPU (CUDA MPS, no NVLink)"


def _kind(doc) -> str:
    if doc.get("benchmark"):
        return str(doc["benchmark"])
    if ("exit_code" in doc and "name" in doc) or "skipped" in doc:
        return "suite step"
    if "weight_bytes" in doc and "rows" in doc:
        return "probe_mega"
    if "traceEvents" in doc or isinstance(doc.get("_list"), list):
        return "trace"
    return "test run" if "results" in doc else "other"


def shared_section(docs, out_dir=HERE):
    """Every result of ranks that shared a GPU (:func:`is_shared`), apart from the NVLink figures: an overview
    table (kind, world size, GPUs, ranks per GPU, how MPS was provided), then each result rendered as its kind is
    (the suite steps in one table). Returns the lines (none without such results)."""
    if not docs:
        return []
    out = [f"## {SHARED_TITLE}", "",
           "Several ranks on ONE GPU under CUDA MPS (each with its share of the SMs): every \"peer\" access is a load "
           "or store to that GPU's own memory, so these runs show the kernels working on a real GPU and its memory "
           "model, not NVLink bandwidth or latency. They are never compared with the NVLink tables above and never "
           "enter the headline figures. The process group has no NCCL there: the NCCL / torch baselines are replaced "
           "by our collectives (`ours_seq`, `comm_seq`, `torch_ours`) or timed through torch_collectives' gloo host "
           "path (eager only, `gloo_host_us`), as each record says.", "",
           "| record | kind | world size | GPUs | ranks per GPU | MPS |", "|---|---|---|---|---|---|"]
    docs = sorted(docs, key=lambda d: (_kind(d), run_stamp(d)))
    for d in docs:
        t = topology_of(d)
        out.append(f"| `{d['_path']}` | {_kind(d)} | {_f(t['world_size'], '{}')} | {_f(t['gpus'], '{}')} | "
                   f"{_f(t['ranks_per_gpu'], '{}')} | {t['mps'] or '—'} |")
    out.append("")
    steps = [d for d in docs if _kind(d) == "suite step"]
    if steps:
        out += ["### Suite steps (ranks sharing a GPU)", ""] + suite_steps_section(steps)
    for d in docs:
        kind = _kind(d)
        if kind == "suite step":
            continue
        t = topology_of(d)
        out += [f"**{kind}, shared GPU: {t['world_size']} ranks on {t['gpus']} GPU(s), {t['ranks_per_gpu']} per GPU "
                f"(no NVLink)** — `{d['_path']}`", ""]
        for what, why in (d.get("skipped") or {}).items() if isinstance(d.get("skipped"), dict) else ():
            out.append(f"- {what}: {why}")
        if kind == "bench_collectives":
            out += collective_section(d, out_dir)
        elif kind == "bench_shmem":
            out += shmem_section(d)
        elif kind == "bench_overlap":
            out += overlap_section(d)
        elif kind == "gemm":
            out += gemm_section(d)
        elif kind == "bench_group_gemm":
            out += moe_section(d)
        elif kind == "bench_moe_ep":
            out += moe_ep_section(d)
        elif kind == "bench_moe_tp":
            out += moe_tp_section(d)
        elif kind == "bench_attention":
            out += attention_section(d)
        elif kind == "bench_mega":
            out += mega_section(d)
        elif kind == "probe_mega":
            out += probe_mega_section(d)
        elif kind == "test run":
            out += run_section(d)
        else:
            out += [describe_other(d), ""]
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--results", default=os.path.join(HERE, "results"))
    ap.add_argument("--out", default=os.path.join(HERE, "RESULTS.md"))
    args = ap.parse_args()
    docs = load(args.results)
    # ranks that shared a GPU measured no NVLink: their own section at the end, nowhere else
    shared = [d for d in docs if is_shared(d)]
    docs = [d for d in docs if not is_shared(d)]
    head = ["# Benchmark results", "",
            "Generated by `benchmarks/make_results.py` from `benchmarks/results/**/*.json` — do not edit by hand.", ""]
    lines = ["Speed-ups are NCCL time / our time measured in the same run (> 1 means faster than NCCL).", ""]
    coll = [d for d in docs if d.get("benchmark") == "bench_collectives"]
    if coll:
        lines += ["## Collectives (`benchmarks/bench_collectives.py`)", ""]
        for d in sorted(coll, key=lambda d: d.get("timestamp_utc", ""), reverse=True):
            lines += collective_section(d, os.path.dirname(os.path.abspath(args.out)))
    kind = {"bench_shmem": [], "bench_overlap": [], "gemm": [], "bench_group_gemm": [], "bench_moe_ep": [],
            "bench_moe_tp": [], "bench_attention": [], "bench_mega": []}
    for d in docs:
        b = d.get("benchmark")
        if b in kind:
            kind[b].append(d)
    if kind["bench_shmem"]:
        lines += ["## SHMEM put/get and signalling (`benchmarks/bench_shmem.py`)", "",
                  "Bandwidth per rank with both ranks sending at once; `x peer copy` is against a "
                  "`copy_` between peer-mapped buffers measured the same way in the same run. Records with graph "
                  "and eager columns are CUDA-graph timed; older ones timed eager launches (each record's method "
                  "line says).", ""]
        for d in sorted(kind["bench_shmem"], key=lambda d: d.get("time_utc", ""), reverse=True):
            lines += shmem_section(d)
    if kind["bench_overlap"]:
        lines += ["## Overlapped GEMMs (`benchmarks/bench_overlap.py`)", "",
                  "Newest run first. `auto / bound`: what `method=\"auto\"` takes over max(cuBLAS GEMM alone, NCCL "
                  "collective alone), same run; `x torch seq` / `x torch symm`: torch's time / ours (> 1: ours "
                  "faster). Older runs (before CUDA-graph timing) show `x torch seq` of the best fused kernel and "
                  "`overlap eff` = max(t_gemm, t_comm) / t_fused.", ""]
        for d in sorted(kind["bench_overlap"], key=run_stamp, reverse=True):
            lines += overlap_section(d)
    if kind["gemm"]:
        lines += ["## Our GEMM vs cuBLAS (`benchmarks/bench_gemm.py`)", "",
                  "One GPU, both timed the same way (CUDA-graph replay, interleaved rounds). `x cuBLAS` = cuBLAS time "
                  "/ ours (> 1: ours faster). `ours auto` is `matmul` as users get it: the measured "
                  "`kernels/gemm_table.json` entry for the GPU, dtype and exact shape, else (since 2026-12-01 evening) "
                  "the decode rule at M <= 128 (small tiles, pointer loads, split-K), else Triton's autotuner. Runs "
                  "before 2026-12-01 had no table and no decode rule: there it is the autotuner. Newest run first.", ""]
        for d in sorted(kind["gemm"], key=run_stamp, reverse=True):
            lines += gemm_section(d)
    moe = kind["bench_group_gemm"] + kind["bench_moe_ep"] + kind["bench_moe_tp"]  # one GPU per rank only: shared runs are in shared_section
    if moe:
        lines += ["## Mixture of experts (`benchmarks/bench_group_gemm.py`, `benchmarks/bench_moe_ep.py`)", "",
                  "Every ratio is the baseline's time / ours in the same run (> 1: ours faster), CUDA-graph replay "
                  "unless a column says eager. The grouped GEMM (`ops.group_gemm`, expert parallelism 1, tokens "
                  "routed top-8 at random) against `torch._grouped_mm` (the faster of its two weight layouts) and a "
                  "per-expert `torch.matmul` loop; the floor is max(HBM bytes / nominal bandwidth, flops / nominal "
                  "TFLOP/s). The layer (route, gate_up, SiLU gate, down, combine) against the same layer in torch ops "
                  "and its torch.compile. bench_moe_ep (expert parallelism over ranks with one GPU each) against the "
                  "torch layer with NCCL all_to_all_single, eager against eager (the torch layer reads split sizes "
                  "on the host and cannot be graphed). Newest run first.", ""]
        png = os.path.join(os.path.dirname(os.path.abspath(args.out)), "results", "moe_group_gemm.png")
        if plot_moe(kind["bench_group_gemm"], png):
            lines += ["![MoE grouped GEMM and layer ratios](results/moe_group_gemm.png)", ""]
        for d in sorted(kind["bench_group_gemm"], key=doc_time, reverse=True):
            lines += moe_section(d)
        for d in sorted(kind["bench_moe_ep"], key=doc_time, reverse=True):
            lines += moe_ep_section(d)
        for d in sorted(kind["bench_moe_tp"], key=doc_time, reverse=True):
            lines += moe_tp_section(d)
    if kind["bench_attention"]:
        lines += ["## Attention (`benchmarks/bench_attention.py`)", "",
                  "Decode over a paged KV cache: K/V bytes / time against the read ceiling measured in the same run "
                  "and against `scaled_dot_product_attention` on contiguous K/V; causal prefill against SDPA's flash "
                  "backend; the sequence-parallel decode split into its local decode and its exchange. Ratios: "
                  "SDPA's time / ours (> 1: ours faster). Newest run first.", ""]
        png = os.path.join(os.path.dirname(os.path.abspath(args.out)), "results", "attention.png")
        if plot_attention(kind["bench_attention"], png):
            lines += ["![decode read fraction and prefill ratio](results/attention.png)", ""]
        for d in sorted(kind["bench_attention"], key=doc_time, reverse=True):
            lines += attention_section(d)
    probes = [d for d in docs if _kind(d) == "probe_mega"]  # bench_mega --probe linear-chain (was probe_mega.py)
    if kind["bench_mega"] or probes:
        lines += ["## Mega kernel (`benchmarks/bench_mega.py`, `benchmarks/probe_mega.py`)", "",
                  "A whole decode step as one persistent kernel against the same model in plain torch, both replayed "
                  "from CUDA graphs in the same process. `x torch` = torch time / mega time (> 1: mega faster); "
                  "`roofline (copy)` = weight + KV bytes per step / step time / the bandwidth of a device copy "
                  "measured in the same run; `roofline (read)`: against a read-only stream of the same run.", ""]
        mega_runs = sorted(kind["bench_mega"], key=lambda d: d.get("timestamp_utc", ""), reverse=True)
        png = os.path.join(os.path.dirname(os.path.abspath(args.out)), "results", "mega_steps.png")
        if plot_mega(mega_runs, png):
            lines += ["![mega kernel step times](results/mega_steps.png)", ""]
        for d in mega_runs:
            lines += mega_section(d)
        for d in sorted(probes, key=lambda d: d["_path"]):
            lines += probe_mega_section(d)
    steps = [d for d in docs if ("exit_code" in d and "name" in d) or "skipped" in d]
    if steps:
        lines += ["## GPU suite steps (`scripts/gpu_suite.sh`, `benchmarks/record_run.py`)", ""]
        lines += suite_steps_section(steps)
    runs = [d for d in docs if "benchmark" not in d and "results" in d and d not in steps]
    if runs:
        lines += ["## GPU test runs", "",
                  "Pass/fail records of GPU test tiers (logs beside each JSON). What failed, and why, is part of the "
                  "record.", ""]
        for d in sorted(runs, key=lambda d: d.get("date", "")):
            lines += run_section(d)
    done = (coll + kind["bench_shmem"] + kind["bench_overlap"] + kind["gemm"] + moe + kind["bench_mega"] + probes
            + steps + runs)
    other = [d for d in docs if not any(d is x for x in done)]
    if other:
        lines += ["## Other result files", ""]
        for d in other:
            lines.append(describe_other(d))
        lines.append("")
    lines += shared_section(shared, os.path.dirname(os.path.abspath(args.out)))
    # the opening screen first: its anchors are the body's, counted after its own heading
    lines = head + glance(docs, shared, head + ["## " + GLANCE_TITLE] + lines) + lines
    with open(args.out, "w") as f:
        f.write("\n".join(lines) + "\n")
    print(f"wrote {args.out} ({len(coll)} collective, {len(kind['bench_shmem'])} shmem, {len(kind['bench_overlap'])} "
          f"overlap runs, {len(moe)} MoE runs, {len(steps)} suite steps, {len(other)} other files, {len(shared)} shared-GPU results)")


if __name__ == "__main__":
    main()
