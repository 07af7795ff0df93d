"""Our Triton GEMM (``kernels.gemm.gemm_kernel``) against cuBLAS on one GPU, at the shapes the overlapped GEMMs run.

    python benchmarks/bench_gemm.py [--shapes MxNxK,...] [--configs BMxBNxBKxWARPSxSTAGES,...] [--out DIR]

For every shape: cuBLAS (``torch.matmul``), the autotuned ``kernels.gemm.matmul`` (``ours/auto``) and every tiling of
``--configs`` in four loop/epilogue forms (``ours/<tiling>/<form>``): ``plain`` (a tile loop around a K loop,
pointer stores), ``flat`` (``FLATTEN``: one fused, software-pipelined loop), ``tma`` (``TMA_STORE``: the epilogue
stores through a tensor descriptor), ``flat+tma``. Every variant is checked against cuBLAS first (fp32 reference)
and then timed the same way as cuBLAS: CUDA-graph replay of ``k`` back-to-back calls (about 2 ms per sample), all
variants of a shape captured first and sampled round-robin (order rotated per round), median over rounds. Writes
``gemm-<stamp>.json`` (per shape: us per variant, the best of ours, its ratio to cuBLAS) and prints a table.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))

from graph_capture import capture_calls  # noqa: E402

#: (M, N, K): AG+GEMM 8B M=2048/4096 and 70B M=2048 (gathered rows, N and K per rank), GEMM+RS 8B at M=2048 and the
#: own halves of M=2048/8192, GEMM+RS 70B at the own halves of M=2048/4096 (TP=2, K per rank)
DEFAULT_SHAPES = ["2048x7168x4096", "4096x7168x4096", "2048x14336x8192", "2048x4096x3584", "1024x4096x3584",
                  "4096x4096x3584", "1024x8192x7168", "2048x8192x7168"]
DEFAULT_CONFIGS = ["128x256x64x8x3", "128x256x64x8x4", "128x128x64x8x4", "128x128x64x4x4"]
FORMS = {"plain": (False, False), "flat": (True, False), "tma": (False, True), "flat+tma": (True, True)}
SAMPLE_US = 2000
ROUNDS = 9


def parse_shape(text):
    try:
        m, n, k = (int(v) for v in text.lower().split("x"))
    except ValueError:
        raise SystemExit(f"bench_gemm: shape {text!r}: expected MxNxK") from None
    return m, n, k


def launcher(a, b, c, cfg, flatten, tma_store):
    """A zero-argument launch of ``gemm_kernel`` with one tiling and form (TMA loads, as ``matmul`` on sm_90)."""
    import triton

    from triton_dist.kernels import gemm as g

    M, K = a.shape
    N = b.shape[1]
    sms = g.num_sms(a.device)
    grid = (min(sms, triton.cdiv(M, cfg.BLOCK_M) * triton.cdiv(N, cfg.BLOCK_N)), )

    def run():
        g.gemm_kernel[grid](a, b, c, c, M, N, K, a.stride(0), 1, b.stride(0), 1, c.stride(0), 1,
                            **cfg.meta(with_flatten=False), NUM_SMS=sms, USE_TMA=True, HAS_SCALE=False,
                            FLATTEN=flatten, TMA_STORE=tma_store, **cfg.launch())
        return c
    return run


def time_variants(fns):
    """``{name: median us per call}``: each ``fns[name]`` captured ``k`` times in one CUDA graph (k from a timed
    eager call, the same for all), then ``ROUNDS`` rounds, one replay of each per round in rotated order."""
    ref = next(iter(fns.values()))
    for _ in range(3):
        ref()
    torch.cuda.synchronize()
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    e0.record()
    ref()
    e1.record()
    e1.synchronize()
    k = max(3, min(50, int(SAMPLE_US / max(e0.elapsed_time(e1) * 1e3, 1.0))))
    graphs = {}
    stream = torch.cuda.Stream()
    for name, fn in fns.items():
        graph = capture_calls(fn, k, stream, warmup=1)
        graph.replay()
        torch.cuda.synchronize()
        graphs[name] = graph
    names = list(graphs)
    samples = {n: [] for n in names}
    for i in range(ROUNDS):
        for n in names[i % len(names):] + names[:i % len(names)]:
            e0.record()
            graphs[n].replay()
            e1.record()
            e1.synchronize()
            samples[n].append(e0.elapsed_time(e1) * 1e3 / k)
    return {n: statistics.median(v) for n, v in samples.items()}, k


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shapes", default=",".join(DEFAULT_SHAPES))
    ap.add_argument("--configs", default=",".join(DEFAULT_CONFIGS))
    ap.add_argument("--out", default=os.environ.get("TRITON_DIST_RESULTS_DIR", os.path.join(HERE, "results")))
    args = ap.parse_args()
    shapes = [parse_shape(s) for s in args.shapes.split(",") if s]
    from triton_dist.kernels import gemm as g

    configs = [g.TileConfig.parse(c) for c in args.configs.split(",") if c]
    if not torch.cuda.is_available():
        raise SystemExit("bench_gemm: needs a CUDA GPU (sm_90 for the TMA forms)")
    g.ensure_tma_allocator()
    torch.manual_seed(0)
    records = []
    for M, N, K in shapes:
        a = torch.randn(M, K, device="cuda").to(torch.bfloat16)
        b = torch.randn(K, N, device="cuda").to(torch.bfloat16)
        ref = a.float() @ b.float()
        fns = {"cublas": lambda: torch.matmul(a, b), "ours/auto": lambda: g.matmul(a, b)}
        errors = {}
        for cfg in configs:
            for form, (flat, tma) in FORMS.items():
                name = f"ours/{cfg}/{form}"
                c = torch.empty(M, N, device="cuda", dtype=torch.bfloat16)
                run = launcher(a, b, c, cfg, flat, tma)
                try:
                    err = (run().float() - ref).abs().max().item() / ref.abs().max().item()
                except Exception as exc:  # noqa: BLE001  (a tiling that does not compile here is reported)
                    errors[name] = f"{type(exc).__name__}: {exc}"[:200]
                    continue
                if err > 2e-2:
                    errors[name] = f"wrong result: max relative error {err:.3g}"
                    continue
                fns[name] = run
        us, k = time_variants(fns)
        ours = {n: t for n, t in us.items() if n.startswith("ours/")}
        best = min(ours, key=ours.get)
        rec = {"M": M, "N": N, "K": K, "k": k, "us": us, "errors": errors, "best": best,
               "best_vs_cublas": us["cublas"] / ours[best], "auto_vs_cublas": us["cublas"] / us["ours/auto"],
               "tflops_cublas": 2.0 * M * N * K / us["cublas"] / 1e6}
        records.append(rec)
        print(f"{M}x{N}x{K}: cuBLAS {us['cublas']:.1f} us ({rec['tflops_cublas']:.0f} TFLOP/s), ours/auto "
              f"{us['ours/auto']:.1f} ({rec['auto_vs_cublas']:.3f}x), best {best} {ours[best]:.1f} "
              f"({rec['best_vs_cublas']:.3f}x)", flush=True)
        for form in FORMS:
            row = [f"{us[n]:.1f}" if n in us else "-" for n in (f"ours/{c}/{form}" for c in configs)]
            print(f"   {form:9s} " + "  ".join(f"{c}={v}" for c, v in zip(configs, row)), flush=True)
        for n, e in errors.items():
            print(f"   {n}: {e}", flush=True)
    os.makedirs(args.out, exist_ok=True)
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    path = os.path.join(args.out, f"gemm-{stamp}.json")
    doc = {"benchmark": "gemm", "device": torch.cuda.get_device_name(), "git_commit":
           os.environ.get("TRITON_DIST_GIT_COMMIT"), "configs": [str(c) for c in configs], "forms": list(FORMS),
           "timing": f"CUDA-graph replay of k calls, {ROUNDS} interleaved rounds, median", "records": records}
    with open(path, "w") as f:
        json.dump(doc, f, indent=1)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
