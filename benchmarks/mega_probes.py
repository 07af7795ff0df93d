"""One-off measurements of the mega kernel, run as options of the mega bench (``--probe NAME`` first, then the
probe's own options). ``linear-chain`` was the script ``benchmarks/probe_mega.py`` (the results READMEs cite it by
that name; its JSON is still recognised by make_results.py as ``probe_mega``).

Single-GPU probe of the mega kernel's Linear / Normalization / Elementwise tasks on Qwen3-8B decode shapes (no
attention, no communication): ``L`` layers of rms_norm -> qkv_proj -> o_proj-shaped linear -> add -> rms_norm ->
fused fc1+silu -> fc2 -> add, as ONE mega kernel step, against the same math in torch (cuBLAS GEMV + torch
elementwise), both replayed from CUDA graphs (``benchmarks/harness.py``), plus a device copy for the HBM bandwidth.
Reports us per step, weight bytes / time and the ratio; checks the mega result against torch. Sweeps
``--workers-per-sm`` x ``--num-warps``.

    python benchmarks/bench_mega.py --probe linear-chain --layers 8 --out probe.json
    TRITON_DIST_BACKEND=sim python benchmarks/bench_mega.py --probe linear-chain --tiny      # CPU smoke run
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402


def build_weights(layers, hidden, qkv, inter, device, seed=0):
    g = torch.Generator(device="cpu").manual_seed(seed)

    def rnd(*shape, fan_in):
        return (torch.randn(*shape, generator=g) / fan_in ** 0.5).to(torch.bfloat16).to(device)

    ws = []
    for _ in range(layers):
        ws.append(dict(n1=(1 + 0.1 * torch.randn(hidden, generator=g)).bfloat16().to(device),
                       wqkv=rnd(qkv, hidden, fan_in=hidden), wo=rnd(hidden, qkv, fan_in=qkv),
                       n2=(1 + 0.1 * torch.randn(hidden, generator=g)).bfloat16().to(device),
                       w13=rnd(2 * inter, hidden, fan_in=hidden), w2=rnd(hidden, inter, fan_in=inter)))
    return ws


def torch_step(x, ws, eps=1e-6):
    def rms(v, w):
        vf = v.float()
        return (vf * torch.rsqrt(vf.pow(2).mean(-1, keepdim=True) + eps) * w.float()).to(v.dtype)

    for w in ws:
        h = rms(x, w["n1"])
        q = F.linear(h, w["wqkv"])
        o = F.linear(q, w["wo"])
        x = x + o
        h = rms(x, w["n2"])
        gu = F.linear(h, w["w13"])
        inter = gu.shape[-1] // 2
        a = (F.silu(gu[:, :inter].float()) * gu[:, inter:].float()).to(x.dtype)
        x = x + F.linear(a, w["w2"])
    return x


def gemv_inputs(x, qkv, inter):
    """``--mode gemv``: one input row per K (hidden, qkv, intermediate), made once, outside the timed steps."""
    wide = x.repeat(1, -(-max(qkv, inter) // x.shape[1]))
    return {x.shape[1]: x, qkv: wide[:, :qkv].contiguous(), inter: wide[:, :inter].contiguous()}


def gemv_only(xin, ws):
    """``--mode gemv``: each layer's four weights applied to the fixed input rows ``xin`` (no chain): pure weight
    streaming."""
    return [F.linear(xin[w[k].shape[1]], w[k]) for w in ws for k in ("wqkv", "wo", "w13", "w2")]


def mega_builder(x, ws, num_workers, num_warps, hidden, qkv, inter, profile=False, mode="chain"):
    from triton_dist.mega_triton_kernel import ModelBuilder

    dev = x.device
    b = ModelBuilder(num_warps=num_warps, num_workers=num_workers, enable_profiling=profile)
    cur = x
    bufs = []
    if mode == "gemv":
        xin = gemv_inputs(x, qkv, inter)
        for i, w in enumerate(ws):
            for k in ("wqkv", "wo", "w13", "w2"):
                W = w[k]
                o = torch.empty(1, W.shape[0], dtype=x.dtype, device=dev)
                b.make_linear(xin[W.shape[1]], W, o, layer_id=i)
                bufs.append(o)
        b.compile()
        b._bufs = bufs + list(xin.values())
        return b, o, 0.0
    for i, w in enumerate(ws):
        h = torch.empty(1, hidden, dtype=x.dtype, device=dev)
        q = torch.empty(1, qkv, dtype=x.dtype, device=dev)
        o = torch.empty(1, hidden, dtype=x.dtype, device=dev)
        x1 = torch.empty(1, hidden, dtype=x.dtype, device=dev)
        h2 = torch.empty(1, hidden, dtype=x.dtype, device=dev)
        a = torch.empty(1, inter, dtype=x.dtype, device=dev)
        d = torch.empty(1, hidden, dtype=x.dtype, device=dev)
        x2 = torch.empty(1, hidden, dtype=x.dtype, device=dev)
        b.make_rms_norm(cur, w["n1"], h, layer_id=i)
        b.make_qkv_proj(h, w["wqkv"], q, layer_id=i)
        b.make_o_proj(q, w["wo"], o, layer_id=i)
        b.make_add(cur, o, x1, layer_id=i)
        b.make_rms_norm(x1, w["n2"], h2, layer_id=i)
        b.make_fused_fc1_silu_mul_up(h2, w["w13"], a, layer_id=i)
        b.make_fc2(a, w["w2"], d, layer_id=i)
        b.make_add(x1, d, x2, layer_id=i)
        bufs += [h, q, o, x1, h2, a, d, x2]
        cur = x2
    t0 = time.time()
    b.compile()
    b._bufs = bufs
    return b, cur, time.time() - t0


def graph_us(fn, iters=20, reps=5):
    """Median us per call of ``fn`` captured ``iters`` times in one CUDA graph (``harness.capture_calls``, replayed
    ``reps`` times, ``harness.median_us``)."""
    g = harness.capture_calls(fn, iters, torch.cuda.Stream())
    g.replay()
    torch.cuda.synchronize()
    return harness.median_us(g.replay, iters, reps, reduce=False)


def copy_bw(nbytes=2 << 30):
    a = torch.empty(nbytes, dtype=torch.uint8, device="cuda")
    b = torch.empty_like(a)
    us = graph_us(lambda: b.copy_(a), iters=5, reps=5)
    return 2 * nbytes / (us * 1e-6)


def probe_linear_chain(argv=None):
    """The Linear chain (or pure GEMV streaming, ``--mode gemv``) as one mega kernel against torch, per workers x
    warps configuration (the module docstring says more). ``--out``: the results JSON (the harness's header, then
    the layer shapes, the bandwidths and one row per configuration)."""
    p = argparse.ArgumentParser(prog="bench_mega.py --probe linear-chain", description=__doc__.split("\n\n")[1],
                                formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--layers", type=int, default=8)
    p.add_argument("--hidden", type=int, default=4096)
    p.add_argument("--qkv", type=int, default=6144)
    p.add_argument("--inter", type=int, default=12288)
    p.add_argument("--workers-per-sm", type=int, nargs="+", default=[1, 2])
    p.add_argument("--num-warps", type=int, nargs="+", default=[4, 8])
    p.add_argument("--mode", choices=["chain", "gemv"], default="chain",
                   help="chain: the decoder-like chain; gemv: every weight applied to one input (streaming only)")
    p.add_argument("--tiny", action="store_true", help="simulator smoke run: 2 layers of hidden 128")
    p.add_argument("--profile", default=None, help="directory for a trace of the first configuration")
    p.add_argument("--out", default=None)
    a = p.parse_args(argv)
    import triton_dist  # noqa: F401  (selects the backend)
    from triton_dist.utils import get_shmem_backend

    sim = get_shmem_backend() == "sim"
    if a.tiny:
        a.layers, a.hidden, a.qkv, a.inter = 2, 128, 192, 256
    dev = torch.device("cpu" if sim else "cuda")
    ws = build_weights(a.layers, a.hidden, a.qkv, a.inter, dev)
    x = (torch.randn(1, a.hidden) * 0.5).bfloat16().to(dev)
    ref = torch_step(x, ws) if a.mode == "chain" else None
    from provenance import label_json, topology, topology_line

    topo = topology()  # one process; recorded so every results JSON says where it ran
    res = harness.result_header("probe_mega", topo, layers=a.layers, hidden=a.hidden, qkv=a.qkv, inter=a.inter,
                                rows=[])
    print(f"bench_mega --probe linear-chain: {topology_line(topo)}", flush=True)
    wbytes = sum(t.numel() * t.element_size() for w in ws for t in w.values())
    res["weight_bytes"] = wbytes
    if sim:
        b, out, ct = mega_builder(x, ws, 1, 4, a.hidden, a.qkv, a.inter, profile=bool(a.profile), mode=a.mode)
        b.run()
        if a.profile:
            print(json.dumps(b.profile_summary()))
        if ref is None:
            return 0
        err = (out.float() - ref.float()).abs().max().item()
        print(f"sim: {len(b.tasks)} tasks, compile {ct:.1f}s, max|mega - torch| = {err:.4g}")
        return 0 if err < 0.05 * ref.float().abs().max().item() + 0.05 else 1
    nsm = torch.cuda.get_device_properties(0).multi_processor_count
    bw = copy_bw()
    big = torch.ones(1 << 30, dtype=torch.bfloat16, device="cuda")
    read_bw = 2 * big.numel() / (graph_us(lambda: big.sum(), iters=5, reps=5) * 1e-6)
    res["copy_bytes_per_s"] = bw
    res["read_bytes_per_s"] = read_bw
    print(f"read (sum) {read_bw / 1e12:.2f} TB/s", flush=True)
    xin = gemv_inputs(x, a.qkv, a.inter)
    t_torch = graph_us((lambda: torch_step(x, ws)) if a.mode == "chain" else (lambda: gemv_only(xin, ws)))
    res["torch_graph_us"] = t_torch
    print(f"copy {bw / 1e12:.2f} TB/s; torch graph {t_torch:.1f} us ({wbytes / t_torch / 1e6:.2f} TB/s)", flush=True)
    first = True
    for wps in a.workers_per_sm:
        for nw in a.num_warps:
            try:
                b, out, ct = mega_builder(x, ws, wps * nsm, nw, a.hidden, a.qkv, a.inter, mode=a.mode)
                b.run()
                torch.cuda.synchronize()
                err = (out.float() - ref.float()).abs().max().item() if ref is not None else 0.0
                rel = err / max(ref.float().abs().max().item(), 1e-6) if ref is not None else 0.0
                t = graph_us(b.run)
                row = dict(workers=wps * nsm, num_warps=nw, us=t, tb_s=wbytes / t / 1e6, ratio=t_torch / t,
                           max_err=err, rel_err=rel, tasks=len(b.tasks), compile_s=ct)
                if a.profile:
                    del b
                    b, out, ct = mega_builder(x, ws, wps * nsm, nw, a.hidden, a.qkv, a.inter, profile=True,
                                              mode=a.mode)
                    for _ in range(3):
                        b.run()
                    torch.cuda.synchronize()
                    os.environ["MEGA_KERNEL_PROFILER_DIR"] = a.profile
                    if first:
                        row["trace"] = b.dump_trace(f"probe_{wps}_{nw}")
                        label_json(row["trace"], topo)
                    row["profile"] = b.profile_summary()
            except Exception as e:  # report and go on with the sweep
                row = dict(workers=wps * nsm, num_warps=nw, error=repr(e)[:400])
            first = False
            res["rows"].append(row)
            print(json.dumps(row), flush=True)
    if a.out:
        harness.write_json(a.out, res)
    return 0


#: ``bench_mega.py --probe NAME``: the probe's entry point (called with the options after the name)
PROBES = {"linear-chain": probe_linear_chain}


if __name__ == "__main__":
    sys.exit("mega_probes is not run directly: bench_mega.py --probe NAME (" + ", ".join(PROBES) + ")")
