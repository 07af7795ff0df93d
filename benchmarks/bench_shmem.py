"""libshmem_device bandwidth and latency on the GPUs, against a torch peer copy measured in the same run.

    scripts/launch.sh --nproc_per_node 2 benchmarks/bench_shmem.py [--quick] [--iters N]

Bandwidth (both ranks send at once, each to the next rank; numbers are per rank = per direction):
* ``putmem_block`` / ``putmem_nbi_block`` (+ ``quiet``) / ``getmem_block`` / ``getmem_nbi_block`` (+ ``quiet``):
  the buffer is split over G programs (G = min(#SMs, bytes / 64 KiB), at least 1), each moving its contiguous
  chunk with one block-variant call. 1 KiB .. 256 MiB.
* baseline: ``peer_view.copy_(src)`` -- torch's copy into the peer's symmetric tensor (the "peer copy" figure, about
  371 GB/s on our 2x H200), timed the same way at every size.
Each time is the median of ``--samples`` CUDA-event measurements of ``--iters`` back-to-back launches / copies
(host launch cost included for both, amortised over the iterations).

Latency: ``putmem_signal_block`` + ``signal_wait_until`` ping-pong between rank 0 and 1 inside ONE kernel launch
(``--pp-iters`` round trips of 8 B .. 64 KiB payloads); one-way latency = round trip / 2.

Writes ``shmem_bench_<time>.json`` to ``$TRITON_DIST_RESULTS_DIR`` (default benchmarks/results/).
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))

os.environ.setdefault("NVSHMEM_SYMMETRIC_SIZE", "4G")
os.environ.setdefault("NVSHMEM_DISABLE_NVLS", "1")
os.environ.setdefault("NCCL_NVLS_ENABLE", "0")

import torch  # noqa: E402
from provenance import git_commit, tree_fingerprint, versions  # noqa: E402
import triton.language as tl  # noqa: E402

import triton_dist  # noqa: E402
from triton_dist.language.extra import libshmem_device as shmem  # noqa: E402

KB, MB = 1 << 10, 1 << 20
FULL_SIZES = [1 * KB, 4 * KB, 16 * KB, 64 * KB, 256 * KB, 1 * MB, 4 * MB, 16 * MB, 64 * MB, 256 * MB]
QUICK_SIZES = [1 * KB, 64 * KB, 1 * MB, 16 * MB, 256 * MB]
METHODS = ["putmem_block", "putmem_nbi_block", "getmem_block", "getmem_nbi_block"]
MIN_CHUNK = 64 * KB


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
def k_ping_pong(buf, src, sig, iters, nbytes, peer, IS_PING: tl.constexpr):
    for i in range(1, iters + 1):
        if IS_PING:
            shmem.putmem_signal_block(buf, src, nbytes, sig, i, shmem.NVSHMEM_SIGNAL_SET, peer)
            shmem.signal_wait_until(sig, shmem.NVSHMEM_CMP_EQ, i)
        else:
            shmem.signal_wait_until(sig, shmem.NVSHMEM_CMP_EQ, i)
            shmem.putmem_signal_block(buf, src, nbytes, sig, i, shmem.NVSHMEM_SIGNAL_SET, peer)






def timed_us(fn, iters, samples, barrier):
    """Median over ``samples`` of (CUDA-event time of ``iters`` calls) / iters, in microseconds."""
    times = []
    for _ in range(samples):
        barrier()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(iters):
            fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) * 1000.0 / iters)
    times.sort()
    return times[len(times) // 2]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--samples", type=int, default=5)
    ap.add_argument("--pp-iters", type=int, default=2000)
    args = ap.parse_args(argv)

    import triton_dist.utils as U

    local_rank = int(os.environ.get("LOCAL_RANK", 0))
    torch.cuda.set_device(local_rank)
    U.initialize_distributed(seed=0)
    rank, world = int(os.environ.get("RANK", 0)), int(os.environ.get("WORLD_SIZE", 1))
    lw = int(os.environ.get("LOCAL_WORLD_SIZE", world))
    if world < 2:
        raise SystemExit("bench_shmem needs >= 2 ranks")
    nxt, prv = (rank + 1) % world, (rank - 1) % world
    sms = torch.cuda.get_device_properties(local_rank).multi_processor_count
    sizes = QUICK_SIZES if args.quick else FULL_SIZES
    biggest = max(sizes)

    def barrier():
        U.nvshmem_barrier_all_on_stream()
        torch.cuda.synchronize()

    src = U.nvshmem_create_tensor((biggest, ), torch.uint8)
    views = U.nvshmem_create_tensors((biggest, ), torch.uint8, rank, lw)
    dst = views[rank % lw]
    src.copy_((torch.arange(biggest, device="cuda") * 7 + rank).to(torch.uint8))
    barrier()

    rows = []
    for size in sizes:
        grid_n = max(1, min(sms, size // MIN_CHUNK))
        chunk = (size + grid_n - 1) // grid_n
        chunk = (chunk + 15) // 16 * 16
        peer_dst = views[nxt % lw] if nxt // lw == rank // lw else None
        row = {"bytes": size, "programs": grid_n}
        if peer_dst is not None:
            us = timed_us(lambda: peer_dst[:size].copy_(src[:size]), args.iters, args.samples, barrier)
            row["peer_copy_us"], row["peer_copy_GBps"] = us, size / us / 1e3
        for m in METHODS:
            get = m.startswith("get")
            nbi = "nbi" in m
            pe = prv if get else nxt

            def launch(get=get, nbi=nbi, pe=pe):
                k_rma_bw[(grid_n, )](dst, src, size, chunk, pe, GET=get, NBI=nbi)

            launch()  # compile + check once
            barrier()
            dst.zero_()
            barrier()
            launch()
            barrier()
            # puts bring the previous rank's src into our dst; gets read the previous rank's src into it
            expect = (torch.arange(size, device="cuda") * 7 + prv).to(torch.uint8)
            ok = bool(torch.equal(dst[:size], expect))
            us = timed_us(launch, args.iters, args.samples, barrier)
            row[f"{m}_us"], row[f"{m}_GBps"], row[f"{m}_ok"] = us, size / us / 1e3, ok
            if "peer_copy_GBps" in row:
                row[f"{m}_vs_peer_copy"] = row[f"{m}_GBps"] / row["peer_copy_GBps"]
        rows.append(row)
        if rank == 0:
            print(json.dumps(row), flush=True)

    # latency: put-with-signal ping-pong between ranks 0 and 1
    lat = []
    sig = U.nvshmem_create_tensor((1, ), torch.int64)
    for payload in (8, 1 * KB, 64 * KB):
        sig.zero_()
        barrier()
        if rank < 2:
            peer = 1 - rank
            for _ in range(2):  # the first launch compiles (at different times on the two ranks): time the second
                sig.zero_()
                U.nvshmem_barrier_all_on_stream()  # both ranks start together
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                k_ping_pong[(1, )](dst, src, sig, args.pp_iters, payload, peer, IS_PING=(rank == 0))
                end.record()
                torch.cuda.synchronize()
            rt_us = start.elapsed_time(end) * 1000.0 / args.pp_iters
            lat.append({"payload_bytes": payload, "round_trip_us": rt_us, "one_way_us": rt_us / 2,
                        "final_signal": int(sig.item())})
        else:
            for _ in range(2):
                sig.zero_()
                torch.cuda.synchronize()
                U.nvshmem_barrier_all_on_stream()
        barrier()
    if rank == 0:
        for x in lat:
            print(json.dumps(x), flush=True)

    record = {
        "benchmark": "bench_shmem", "command": " ".join([sys.executable] + sys.argv), "git_commit": git_commit(),
        "tree": tree_fingerprint(),
        "time_utc": datetime.datetime.now(datetime.timezone.utc).isoformat(), "world_size": world,
        "versions": versions(), "env": {k: os.environ.get(k) for k in ("NVSHMEM_DISABLE_NVLS", "NCCL_NVLS_ENABLE",
                                                                         "NVSHMEM_SYMMETRIC_SIZE")},
        "method": {"bandwidth": "per rank, both ranks sending concurrently to the next rank; median of samples of "
                                "back-to-back launches (CUDA events)", "latency": "ping-pong in one launch"},
        "bandwidth": rows, "latency": lat,
    }
    if rank == 0:
        out_dir = os.environ.get("TRITON_DIST_RESULTS_DIR") or os.path.join(HERE, "results")
        os.makedirs(out_dir, exist_ok=True)
        stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%d-%H%M%S")
        path = os.path.join(out_dir, f"shmem_bench_{stamp}.json")
        with open(path, "w") as f:
            json.dump(record, f, indent=1)
        print(f"wrote {path}")
    barrier()
    U.nvshmem_free_tensor_sync(sig)
    U.nvshmem_free_tensor_sync(src)
    U.nvshmem_free_tensor_sync(dst)
    U.finalize_distributed()
    return 0


if __name__ == "__main__":
    sys.exit(main())
