"""libshmem_device bandwidth and latency on the GPUs, against a torch peer copy measured in the same run.

    scripts/launch.sh --nproc_per_node 2 benchmarks/bench_shmem.py [--quick] [--sweep] [--samples N]

Timing (``benchmarks/harness.py``, as every bench): every figure is a CUDA-graph replay of ``k`` back-to-back launches
(``harness.capture_calls``), CUDA events, median of ``--samples`` replays / k; every sample starts after a barrier
and a device-side rendezvous (a one-element NCCL all-reduce, or an NVSHMEM barrier on the stream where ranks share a
GPU), so the ranks' GPUs start it together. Figures are rank 0's (not reduced over ranks). The same launches are also timed eagerly (``--iters`` back-to-back launches, host
launch cost included: the method before graph timing) as their own ``*_eager_*`` fields. If a capture fails the row
falls back to eager timing and the failure is listed in ``graph_capture_failures``.

Bandwidth (both ranks send at once, each to the next rank; numbers are per rank = per direction):
* ``putmem_block`` / ``putmem_nbi_block`` (+ ``quiet``) / ``getmem_block`` / ``getmem_nbi_block`` (+ ``quiet``):
  the buffer is split over G programs of ``num_warps`` warps, each moving its contiguous chunk (a multiple of 16 B)
  with one block-variant call. The plain run uses ``BEST_KNOWN`` per method; ``--sweep`` also tries num_warps in
  {4, 8, 16, 32} x programs in {1, 2, 4} x #SMs (fewer where the chunk would drop below ``SWEEP_MIN_CHUNK``) and
  reports the best configuration per (method, size) next to the default's figure. 1 KiB .. 256 MiB.
* baseline: ``peer_view.copy_(src)``: torch's copy into the peer's symmetric tensor (the "peer copy"), timed the
  same two ways at every size.

Latency:
* ``put_quiet``: 1 KiB ``putmem_block`` + ``quiet`` from ONE program, one launch per operation (graph: the GPU's
  launch-to-launch time is included, host launch cost is not).
* ping-pong between rank 0 and 1 inside ONE launch (``--pp-iters`` round trips; one-way = round trip / 2):
  ``putmem_signal_block`` + ``signal_wait_until`` (8 B .. 64 KiB payloads); ``signal_op`` + ``signal_wait_until``
  (the 8 B signal alone, no data); ``dl.notify`` (release store through ``symm_at``) + ``dl.wait`` (acquire loads):
  the hardware's path without NVSHMEM's functions; ``dl.store_flagged`` + ``dl.load_flagged`` (the 4-byte round
  number as the data of one flagged word: no barrier, no fence).

Writes ``shmem_bench_<time>.json`` to ``$TRITON_DIST_RESULTS_DIR`` (default benchmarks/results/). Needs >= 2 ranks on
CUDA GPUs (exits with a message otherwise). Ranks may share a GPU (``TRITON_DIST_RANKS_PER_GPU``, CUDA MPS: each rank
binds GPU ``local rank // ranks per GPU``); the record's ``shared_gpu`` / ``topology`` say so, and such figures are
same-GPU copies, no NVLink.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))
sys.path.insert(0, HERE)

import torch  # noqa: E402
import triton.language as tl  # noqa: E402

import triton_dist  # noqa: E402
import triton_dist.language as dl  # noqa: E402
from triton_dist.language.extra import libshmem_device as shmem  # noqa: E402
from triton_dist.language.extra.language_extra import tid  # noqa: E402

KB, MB = 1 << 10, 1 << 20
FULL_SIZES = [1 * KB, 4 * KB, 16 * KB, 64 * KB, 256 * KB, 1 * MB, 4 * MB, 16 * MB, 64 * MB, 256 * MB]
QUICK_SIZES = [1 * KB, 64 * KB, 1 * MB, 16 * MB, 256 * MB]
METHODS = ["putmem_block", "putmem_nbi_block", "getmem_block", "getmem_nbi_block"]
#: smallest chunk per program of the plain run (below: fewer programs), and of the sweep's candidates
MIN_CHUNK = 64 * KB
SWEEP_MIN_CHUNK = 4 * KB
SWEEP_WARPS = (4, 8, 16, 32)
SWEEP_PROGRAMS_PER_SM = (1, 2, 4)
#: method -> (num_warps, programs per SM) of the plain run: the ``suggested_default`` of the 2x H200 sweep in
#: benchmarks/results/2026-11-30-collectives/sweep-bb9e595/ (best summed GB/s at >= 16 MiB). NVSHMEM 3.4.5's P2P block
#: copy is a loop of one 16-byte step per thread, so bandwidth grows with the threads in flight: the 2026-11-30 quick
#: run's 4 warps x 1 program per SM reached 0.83x (put) / 0.55x (get) of the peer copy at 256 MiB; 32 x 4 (put) and
#: 16 x 4 (get) reach 0.94x / 0.86x in that sweep.
BEST_KNOWN = {"putmem_block": (32, 4), "putmem_nbi_block": (32, 4), "getmem_block": (16, 4),
              "getmem_nbi_block": (16, 4)}
#: graph replays hold at most this many launches, and at most ~64 MiB moved per replay
MAX_K = 20
PUT_QUIET_BYTES = 1 * KB
PP_PAYLOADS = (8, 1 * KB, 64 * KB)
#: ping-pong kinds: how the two roles signal each other
PP_MODES = {"putmem_signal_block": 0, "signal_op": 1, "dl": 2, "flagged": 3}


# --------------------------------------------------------------------------------------------------- kernels

@triton_dist.jit
def k_rma_bw(dst, src, nbytes, chunk, pe, GET: tl.constexpr, NBI: tl.constexpr):
    """Program p moves bytes [p*chunk, min((p+1)*chunk, nbytes)) with one block-variant call (dst/src are u8)."""
    start = tl.program_id(0).to(tl.int64) * chunk
    n = tl.minimum(chunk, nbytes - start)
    if n > 0:
        if GET:
            if NBI:
                shmem.getmem_nbi_block(dst + start, src + start, n, pe)
            else:
                shmem.getmem_block(dst + start, src + start, n, pe)
        else:
            if NBI:
                shmem.putmem_nbi_block(dst + start, src + start, n, pe)
            else:
                shmem.putmem_block(dst + start, src + start, n, pe)
    if NBI:
        shmem.quiet()


@triton_dist.jit
def k_put_quiet(dst, src, nbytes, pe):
    """One program: a blocking block put, then ``quiet`` (the put is delivered when the launch ends)."""
    shmem.putmem_block(dst, src, nbytes, pe)
    shmem.quiet()


@triton_dist.jit
def k_ping_pong(buf, src, sig, iters, nbytes, peer, IS_PING: tl.constexpr, MODE: tl.constexpr):
    """``iters`` round trips between two ranks. Round i: ping sends i, pong waits for i and sends it back.
    MODE 0: ``putmem_signal_block`` (``nbytes`` of data + signal) / ``signal_wait_until``; 1: ``signal_op`` /
    ``signal_wait_until`` (no data); 2: ``dl.notify`` / ``dl.wait`` (no data, no NVSHMEM function); 3:
    ``dl.store_flagged`` / ``dl.load_flagged`` on the 8-byte word ``sig`` (round ``i`` as data and flag).
    Back-to-back launches need no reset: each waits for equality with 1, 2, ... and the peer's last value
    (``iters``) differs from 1. A while loop: the interpreter (simulator) cannot iterate over a range of a scalar
    argument."""
    i = tl.full((), 1, tl.int32)
    while i <= iters:
        if not IS_PING:
            if MODE == 2:
                dl.wait(sig, 1, "sys", "acquire", i)
            elif MODE == 3:
                dl.load_flagged(sig, i)
            else:
                shmem.signal_wait_until(sig, shmem.NVSHMEM_CMP_EQ, i)
        if MODE == 0:
            shmem.putmem_signal_block(buf, src, nbytes, sig, i, shmem.NVSHMEM_SIGNAL_SET, peer)
        elif MODE == 1:
            if tid(0) == 0:  # a thread-scope call runs in every thread that reaches it: one signal per program
                shmem.signal_op(sig, i, shmem.NVSHMEM_SIGNAL_SET, peer)
        elif MODE == 2:
            dl.notify(sig, peer, i, "set", "intra_node")
        else:
            dl.store_flagged(dl.symm_at(sig, peer), i, i)
        if IS_PING:
            if MODE == 2:
                dl.wait(sig, 1, "sys", "acquire", i)
            elif MODE == 3:
                dl.load_flagged(sig, i)
            else:
                shmem.signal_wait_until(sig, shmem.NVSHMEM_CMP_EQ, i)
        i += 1


# --------------------------------------------------------------------------------------------------- pure helpers

def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="sizes " + ",".join(str(s) for s in QUICK_SIZES))
    ap.add_argument("--sizes", default=None, help="comma list of byte sizes (overrides --quick)")
    ap.add_argument("--sweep", action="store_true",
                    help="also try every launch configuration (num_warps x programs per SM) for put/get bandwidth")
    ap.add_argument("--samples", type=int, default=5, help="timed graph replays (and eager batches) per figure")
    ap.add_argument("--iters", type=int, default=20, help="back-to-back eager launches per eager sample")
    ap.add_argument("--pp-iters", type=int, default=2000, help="ping-pong round trips per launch")
    args = ap.parse_args(argv)
    if args.sizes:
        try:
            args.sizes = [int(s) for s in args.sizes.split(",")]
        except ValueError:
            ap.error(f"--sizes: comma list of integers expected, got {args.sizes!r}")
    else:
        args.sizes = QUICK_SIZES if args.quick else FULL_SIZES
    if any(s <= 0 for s in args.sizes):
        ap.error(f"--sizes: byte sizes must be positive, got {args.sizes}")
    for name in ("samples", "iters", "pp_iters"):
        if getattr(args, name) < 1:
            ap.error(f"--{name.replace('_', '-')} must be >= 1")
    if args.pp_iters < 2:
        ap.error("--pp-iters must be >= 2 (back-to-back ping-pong launches rely on it)")
    return args


def grid_for(nbytes: int, sms: int, per_sm: int, min_chunk: int):
    """``(programs, chunk)``: at most ``per_sm * sms`` programs, none with less than ``min_chunk`` bytes (at least
    one program), chunk rounded up to 16 B, and no program left without bytes."""
    programs = max(1, min(per_sm * sms, nbytes // min_chunk))
    chunk = -(-nbytes // programs)
    chunk = -(-chunk // 16) * 16
    return -(-nbytes // chunk), chunk


def launch_config(nbytes: int, sms: int, num_warps: int, per_sm: int, min_chunk: int) -> dict:
    programs, chunk = grid_for(nbytes, sms, per_sm, min_chunk)
    return {"num_warps": num_warps, "programs_per_sm": per_sm, "programs": programs, "chunk": chunk}


def default_config(method: str, nbytes: int, sms: int) -> dict:
    """The plain run's configuration for ``method`` at ``nbytes`` (``BEST_KNOWN``, ``MIN_CHUNK``)."""
    warps, per_sm = BEST_KNOWN[method]
    return launch_config(nbytes, sms, warps, per_sm, MIN_CHUNK)


def sweep_configs(nbytes: int, sms: int) -> list:
    """Distinct launch configurations to try at ``nbytes``: num_warps x programs per SM (chunks of at least
    ``SWEEP_MIN_CHUNK``; several per-SM counts that give the same grid are tried once)."""
    out, seen = [], set()
    for warps in SWEEP_WARPS:
        for per_sm in SWEEP_PROGRAMS_PER_SM:
            cfg = launch_config(nbytes, sms, warps, per_sm, SWEEP_MIN_CHUNK)
            key = (warps, cfg["programs"], cfg["chunk"])
            if key not in seen:
                seen.add(key)
                out.append(cfg)
    return out


def graph_k(nbytes: int) -> int:
    """Launches per graph replay: MAX_K, fewer for big transfers (about 64 MiB per replay at most)."""
    return int(max(1, min(MAX_K, (64 * MB) // max(nbytes, 1))))


def best_of(results: list):
    """The fastest correct entry of ``results`` (dicts with ``GBps`` and ``ok``), or None."""
    good = [r for r in results if r.get("ok") and r.get("GBps")]
    return max(good, key=lambda r: r["GBps"]) if good else None


def suggested_default(sweep: list, min_bytes: int = 16 * MB) -> dict:
    """method -> (num_warps, programs_per_sm) with the highest summed bandwidth over the sizes >= ``min_bytes``
    (where the bandwidth targets are set) among configurations measured correct at every such size; a method with
    no such size is left out. ``sweep``: entries with method, bytes, num_warps, programs_per_sm, GBps, ok."""
    out = {}
    for m in METHODS:
        rows = [r for r in sweep if r["method"] == m and r["bytes"] >= min_bytes]
        sizes = {r["bytes"] for r in rows}
        score = {}
        for r in rows:
            key = (r["num_warps"], r["programs_per_sm"])
            score.setdefault(key, {})[r["bytes"]] = r["GBps"] if r.get("ok") else None
        full = {k: sum(v.values()) for k, v in score.items() if set(v) == sizes and None not in v.values()}
        if full:
            out[m] = max(full, key=full.get)
    return out


def bandwidth_row(nbytes: int, peer: dict, per_method: dict, sweep: dict = None) -> dict:
    """One JSON row of the bandwidth table. ``peer``: {us, eager_us} of the peer copy (or {}); ``per_method``:
    method -> {us, eager_us, ok, num_warps, programs} of the default configuration; ``sweep``: method -> best entry
    of the sweep (or None). Field names of the rows before graph timing are kept (``<m>_us``, ``<m>_GBps``,
    ``<m>_ok``, ``<m>_vs_peer_copy``, ``peer_copy_*``, ``programs``), now holding the graph figures."""
    def gbps(us):
        return nbytes / us / 1e3 if us else None

    row = {"bytes": nbytes}
    first = per_method[next(iter(per_method))] if per_method else {}
    if "programs" in first:
        row["programs"] = first["programs"]
    if peer:
        row["peer_copy_us"], row["peer_copy_GBps"] = peer["us"], gbps(peer["us"])
        row["peer_copy_eager_us"], row["peer_copy_eager_GBps"] = peer.get("eager_us"), gbps(peer.get("eager_us"))
    for m, r in per_method.items():
        row[f"{m}_us"], row[f"{m}_GBps"], row[f"{m}_ok"] = r["us"], gbps(r["us"]), r["ok"]
        row[f"{m}_eager_us"], row[f"{m}_eager_GBps"] = r.get("eager_us"), gbps(r.get("eager_us"))
        row[f"{m}_num_warps"], row[f"{m}_programs"] = r.get("num_warps"), r.get("programs")
        row[f"{m}_timing"] = "graph" if r.get("graphed", True) else "eager (graph capture failed)"
        if peer and row[f"{m}_GBps"] and row["peer_copy_GBps"]:
            row[f"{m}_vs_peer_copy"] = row[f"{m}_GBps"] / row["peer_copy_GBps"]
        if peer and row[f"{m}_eager_GBps"] and row["peer_copy_eager_GBps"]:
            row[f"{m}_eager_vs_peer_copy"] = row[f"{m}_eager_GBps"] / row["peer_copy_eager_GBps"]
        best = (sweep or {}).get(m)
        if best:
            row[f"{m}_best_GBps"] = best["GBps"]
            row[f"{m}_best_num_warps"], row[f"{m}_best_programs"] = best["num_warps"], best["programs"]
            if peer and row["peer_copy_GBps"]:
                row[f"{m}_best_vs_peer_copy"] = best["GBps"] / row["peer_copy_GBps"]
    return row


def latency_row(kind: str, payload: int, rt_us, eager_rt_us, final_signal, expect_signal) -> dict:
    return {"kind": kind, "payload_bytes": payload, "round_trip_us": rt_us,
            "one_way_us": None if rt_us is None else rt_us / 2, "eager_round_trip_us": eager_rt_us,
            "final_signal": final_signal, "ok": final_signal == expect_signal}


# --------------------------------------------------------------------------------------------------- GPU timing

class Timer:
    """Graph and eager timing with the ranks started together (``benchmarks/harness.py``: a barrier and a device-side
    rendezvous before each sample, as every bench times); capture failures recorded (every rank agrees on
    graph-or-eager, so cross-rank kernels pair up). Figures are this rank's (rank 0 writes the record)."""

    def __init__(self, samples, iters):
        self.samples, self.iters = samples, iters
        self.stream = torch.cuda.Stream()
        self.failures = []

    def _median(self, run, per):
        from harness import median_us

        return median_us(run, per, self.samples, reduce=False)

    def _agree(self, err) -> bool:
        """True where no rank's capture failed (``err``: this rank's message or None); every rank records every
        rank's failure (rank 0 writes the record). Objects travel over the group's gloo half."""
        import torch.distributed as dist
        errs = [None] * dist.get_world_size()
        dist.all_gather_object(errs, err)
        self.failures += [f"rank {r}: {e}" for r, e in enumerate(errs) if e]
        return not any(errs)

    def graph_us(self, fn, k, what):
        """Median us per call of a graph of ``k`` calls of ``fn`` (``fn`` None: this rank only joins the
        barriers); eager timing where any rank's capture failed (then returns (us, False))."""
        from harness import capture_calls
        g, err = None, None
        if fn is not None:
            try:
                g = capture_calls(fn, k, self.stream)
            except Exception as exc:  # noqa: BLE001
                err = f"{what}: {type(exc).__name__}: {exc}"[:300]
                torch.cuda.synchronize()
        if not self._agree(err):
            return self.eager_us(fn, k), False
        if fn is None:
            self._median(lambda: None, 1)
            return None, True
        g.replay()  # the first replay uploads the graph: not timed
        torch.cuda.synchronize()
        us = self._median(g.replay, k)
        del g
        return us, True

    def eager_us(self, fn, iters=None):
        """Median us per call of ``iters`` back-to-back eager calls (host launch cost included)."""
        iters = iters or self.iters
        if fn is None:
            self._median(lambda: None, 1)
            return None

        def run():
            for _ in range(iters):
                fn()
        return self._median(run, iters)


def main(argv=None) -> int:
    args = parse_args(argv)
    if not torch.cuda.is_available():
        raise SystemExit("bench_shmem: needs CUDA GPUs (>= 2 ranks under torchrun / scripts/launch.sh); none "
                         "visible here. Simulator coverage of its kernels: test/python/test_bench_shmem.py")
    os.environ.setdefault("NVSHMEM_SYMMETRIC_SIZE", "4G")
    os.environ.setdefault("NVSHMEM_DISABLE_NVLS", "1")
    os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
    import harness
    from provenance import topology, topology_line

    import triton_dist.utils as U
    from triton_dist.runtime import shared_gpu

    t_start = time.time()
    rank, world = int(os.environ.get("RANK", 0)), int(os.environ.get("WORLD_SIZE", 1))
    local_rank = int(os.environ.get("LOCAL_RANK", 0))
    lw = int(os.environ.get("LOCAL_WORLD_SIZE", world))
    # the binding rule initialize_distributed applies (local rank // ranks per GPU): ranks may share a GPU
    device = shared_gpu.device_for_local_rank(local_rank, lw, torch.cuda.device_count(), shared_gpu.ranks_per_gpu())
    torch.cuda.set_device(device)
    U.initialize_distributed(seed=0)
    if world < 2:
        raise SystemExit("bench_shmem needs >= 2 ranks")
    nxt, prv = (rank + 1) % world, (rank - 1) % world
    from triton_dist.runtime.device_info import rank_sm_count

    sms = rank_sm_count(device)  # this rank's part of the GPU where ranks share it (runtime/shared_gpu.py)
    sizes = args.sizes
    biggest = max(max(sizes), PUT_QUIET_BYTES, max(PP_PAYLOADS))
    log = (lambda *a: print(*a, flush=True)) if rank == 0 else (lambda *a: None)
    topo = topology()
    log(f"bench_shmem: {topology_line(topo)}; {sms} SMs on this rank's device")

    def barrier():
        U.nvshmem_barrier_all_on_stream()
        torch.cuda.synchronize()

    timer = Timer(args.samples, args.iters)
    src = U.nvshmem_create_tensor((biggest, ), torch.uint8)
    views = U.nvshmem_create_tensors((biggest, ), torch.uint8, rank, lw)
    dst = views[rank % lw]
    src.copy_((torch.arange(biggest, device="cuda") * 7 + rank).to(torch.uint8))
    barrier()

    def launcher(m, size, cfg):
        get, nbi = m.startswith("get"), "nbi" in m
        pe = prv if get else nxt

        def launch():
            k_rma_bw[(cfg["programs"], )](dst, src, size, cfg["chunk"], pe, GET=get, NBI=nbi,
                                          num_warps=cfg["num_warps"])
        return launch

    def check(launch, size):
        launch()  # compile once
        barrier()
        dst.zero_()
        barrier()
        launch()
        barrier()
        # puts bring the previous rank's src into our dst; gets read the previous rank's src into it
        expect = (torch.arange(size, device="cuda") * 7 + prv).to(torch.uint8)
        return bool(torch.equal(dst[:size], expect))

    rows, sweep_all = [], []
    for size in sizes:
        k = graph_k(size)
        peer_dst = views[nxt % lw] if nxt // lw == rank // lw else None
        peer = {}
        if peer_dst is not None:
            copy = lambda: peer_dst[:size].copy_(src[:size])  # noqa: E731
            peer["us"], _ = timer.graph_us(copy, k, f"peer copy {size}")
            peer["eager_us"] = timer.eager_us(copy)
        per_method, best = {}, {}
        for m in METHODS:
            cfg = default_config(m, size, sms)
            launch = launcher(m, size, cfg)
            ok = check(launch, size)
            us, graphed = timer.graph_us(launch, k, f"{m} {size}")
            per_method[m] = dict(cfg, us=us, eager_us=timer.eager_us(launch), ok=ok, graphed=graphed)
            if args.sweep:
                tried, matched = [], False
                for c in sweep_configs(size, sms):
                    same = (c["num_warps"], c["programs"], c["chunk"]) == (cfg["num_warps"], cfg["programs"],
                                                                            cfg["chunk"])
                    if same:
                        c_us, c_ok, matched = us, ok, True
                    else:
                        la = launcher(m, size, c)
                        c_ok = check(la, size)
                        c_us, _ = timer.graph_us(la, k, f"{m} {size} sweep")
                    tried.append(dict(c, method=m, bytes=size, us=c_us, GBps=size / c_us / 1e3, ok=c_ok))
                sweep_all += tried
                # the default's own figure competes too (its chunking may differ from every candidate's)
                own = [] if matched else [dict(cfg, GBps=size / us / 1e3, ok=ok)]
                best[m] = best_of(tried + own)
        row = bandwidth_row(size, peer, per_method, best)
        rows.append(row)
        log(json.dumps(row))

    # latency (a): 1 KiB put + quiet from one program, one launch per operation
    put_quiet = []
    pq = lambda: k_put_quiet[(1, )](dst, src, PUT_QUIET_BYTES, nxt)  # noqa: E731
    pq_ok = check(pq, PUT_QUIET_BYTES)
    pq_us, graphed = timer.graph_us(pq, MAX_K, "put_quiet")
    put_quiet.append({"bytes": PUT_QUIET_BYTES, "us": pq_us, "eager_us": timer.eager_us(pq), "ok": pq_ok,
                      "timing": "graph" if graphed else "eager (graph capture failed)"})
    log(json.dumps({"put_quiet": put_quiet[-1]}))

    # latency (b), (c): ping-pong between ranks 0 and 1 in one launch (other ranks only join the barriers)
    lat = []
    sig = U.nvshmem_create_tensor((1, ), torch.int64)
    cases = [("putmem_signal_block", p) for p in PP_PAYLOADS] + [("signal_op", 8), ("dl", 8), ("flagged", 8)]
    for kind, payload in cases:
        sig.zero_()
        barrier()
        def ping_pong(kind=kind, payload=payload):
            k_ping_pong[(1, )](dst, src, sig, args.pp_iters, payload, 1 - rank, IS_PING=(rank == 0),
                               MODE=PP_MODES[kind])
        fn = ping_pong if rank < 2 else None
        # the first launches compile (at different times on the two ranks) inside capture_calls' warm-up
        launch_us, graphed = timer.graph_us(fn, 1, f"ping-pong {kind} {payload}")
        eager_us = timer.eager_us(fn, 1)
        barrier()
        if rank < 2:
            rt = launch_us / args.pp_iters
            final = int(sig.item())
            if kind == "flagged":  # (flag << 32) | data, both the last round number
                final = final & 0xFFFFFFFF if (final >> 32) == (final & 0xFFFFFFFF) else -1
            lat.append(dict(latency_row(kind, payload, rt, eager_us / args.pp_iters, final, args.pp_iters),
                            timing="graph" if graphed else "eager (graph capture failed)"))
            log(json.dumps(lat[-1]))

    record = harness.result_header("bench_shmem", topo)
    record.update({
        "time_utc": datetime.datetime.now(datetime.timezone.utc).isoformat(),
        "env": {k: os.environ.get(k) for k in ("NVSHMEM_DISABLE_NVLS", "NCCL_NVLS_ENABLE",
                                                                         "NVSHMEM_SYMMETRIC_SIZE")},
        "device": torch.cuda.get_device_name(device), "sms": sms,
        "timing": "graph",
        "method": {"bandwidth": "per rank, both ranks sending concurrently to the next rank; CUDA-graph replay of k "
                                "launches, median of samples / k (eager: back-to-back launches, *_eager_*)",
                   "latency": "ping-pong in one launch (graph of 1 launch / round trips; eager: the same launch)",
                   "put_quiet": "1 program, graph of k launches / k"},
        "default_config": {m: {"num_warps": w, "programs_per_sm": p, "min_chunk": MIN_CHUNK}
                           for m, (w, p) in BEST_KNOWN.items()},
        "bandwidth": rows, "latency": lat, "put_quiet": put_quiet,
        "graph_capture_failures": timer.failures, "wall_s": time.time() - t_start,
    })
    if args.sweep:
        record["sweep"] = sweep_all
        record["suggested_default"] = {m: {"num_warps": w, "programs_per_sm": p}
                                       for m, (w, p) in suggested_default(sweep_all).items()}
        log("suggested BEST_KNOWN = " + repr({m: tuple(v) for m, v in suggested_default(sweep_all).items()}))
    if rank == 0:
        stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%d-%H%M%S")
        path = harness.write_json(os.path.join(harness.results_dir(), f"shmem_bench_{stamp}.json"), record)
        print(f"wrote {path} ({record['wall_s']:.0f} s)")
    barrier()
    U.nvshmem_free_tensor_sync(sig)
    U.nvshmem_free_tensor_sync(src)
    U.nvshmem_free_tensor_sync(dst)
    U.finalize_distributed()
    return 0


if __name__ == "__main__":
    sys.exit(main())
