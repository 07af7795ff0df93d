"""``python -m triton_dist.tools.sm_probe``: which SMs each rank's kernels use where ranks share a GPU, and whether
their full-SM grids are resident together.

    scripts/launch.sh --ranks-per-gpu auto --nproc_per_node 2 -m triton_dist.tools.sm_probe --out DIR

The facts behind the co-residency rule of ``runtime/shared_gpu.py`` (H100, 2026-12-06): under an MPS
active-thread percentage of 100 / N every rank's blocks ran on the *same* SMs (66 at 2 ranks, 32 at 4), so full-SM
grids sized to that share could not all be resident; without a percentage each context may use all 132 SMs, and N
grids of 132 / N blocks run side by side. Three measurements, each with blocks that hold most of an SM's shared memory (one block per SM):

* ``alone``: each rank in turn (the others idle) launches 2 x (physical SMs) spinning blocks; the distinct ``%smid``
  values are the SMs that rank's context may use;
* ``together``: all ranks at once launch ``rank_sm_count`` spinning blocks (what the fused kernels launch);
  per-block start/end stamps show whether they ran side by side or one after another;
* the overlap of the ranks' SM sets.

Writes ``DIR/sm_sets.json`` (rank 0) and prints a summary (``together_concurrent``: whether every rank's blocks
were running at one moment, from the GPU-wide ``%globaltimer`` stamps). No waiting between ranks inside a kernel, so
it cannot hang.
"""
import argparse
import json
import os
import time

import torch
import torch.distributed as dist
import triton.language as tl

import triton_dist
import triton_dist.utils as U
from triton_dist.language.profiler import sm_id, timestamp
from triton_dist.runtime import shared_gpu
from triton_dist.runtime.device_info import rank_sm_count


@triton_dist.jit
def occupy_most_shared_memory(a_ptr, b_ptr, c_ptr, K0):
    """Make the calling block hold most of an SM's shared memory, so that at most one such block fits an SM: a
    software-pipelined 128x64 @ 64x256 bf16 dot loop over ``K0`` columns (call it with ``K0`` = 0 at run time: it
    runs no iteration, but its stage buffers, ``num_stages`` x 48 KiB, are allocated for the whole block). Also
    used by test_gpu_shared_gpu.py's full-SM cross-rank barrier."""
    offs_m = tl.arange(0, 128)
    offs_n = tl.arange(0, 256)
    offs_k = tl.arange(0, 64)
    acc = tl.zeros((128, 256), dtype=tl.float32)
    for k in range(0, K0, 64):
        a = tl.load(a_ptr + offs_m[:, None] * K0 + (k + offs_k)[None, :])
        b = tl.load(b_ptr + (k + offs_k)[:, None] * 256 + offs_n[None, :])
        acc = tl.dot(a, b, acc)
    if K0 > 0:
        tl.store(c_ptr + offs_m[:, None] * 256 + offs_n[None, :], acc)


def _occupy_operands():
    """The (A / B, C) operands :func:`occupy_most_shared_memory` is launched with (``K0`` = 0: never read)."""
    return (torch.zeros(128 * 256, dtype=torch.bfloat16, device="cuda"),
            torch.zeros(128 * 256, dtype=torch.float32, device="cuda"))


@triton_dist.jit
def k_sm_probe(smids, starts, ends, spin, a_ptr, b_ptr, c_ptr, K0):
    """Record this block's SM and its start / end clock; spin ``spin`` ticks. :func:`occupy_most_shared_memory`
    (``K0`` = 0) makes it one block per SM."""
    pid = tl.program_id(0)
    occupy_most_shared_memory(a_ptr, b_ptr, c_ptr, K0)
    t0 = timestamp()
    now = t0
    while now - t0 < spin:
        now = timestamp()
    tl.store(smids + pid, sm_id())
    tl.store(starts + pid, t0)
    tl.store(ends + pid, now)


@triton_dist.jit
def k_spin_until_flag(flag, seen_ns, t0_ns, deadline_ns, a_ptr, b_ptr, c_ptr, K0):
    """Hold one SM per block (:func:`occupy_most_shared_memory`) and poll the int64 word ``flag`` (volatile loads)
    until it is nonzero or ``deadline_ns`` of the GPU clock have passed; block 0 stores the clock at which it saw the
    flag (``seen_ns``, -1: never) and its start (``t0_ns``). Polls, never waits unboundedly: it cannot hang."""
    occupy_most_shared_memory(a_ptr, b_ptr, c_ptr, K0)
    t0 = timestamp()
    now = t0
    seen = tl.load(flag, volatile=True)
    while (seen == 0) & (now - t0 < deadline_ns):
        seen = tl.load(flag, volatile=True)
        now = timestamp()
    if tl.program_id(0) == 0:
        tl.store(seen_ns, tl.where(seen != 0, now, -1))
        tl.store(t0_ns, t0)


#: how a peer's flag is raised in copy_progress: what the overlapped GEMMs' pushes and raises do
COPY_VARIANTS = ("copy_8B", "copy_16MiB_then_flag", "write_value")


def copy_progress(rank, world, phys, deadline_ms=1500.0):
    """Whether work a rank enqueues into a PEER's memory progresses while that peer's kernel holds every SM of the
    GPU: rank 1 launches ``phys`` SM-filling blocks polling its flag (:func:`k_spin_until_flag`); 200 ms later rank
    0 raises that flag through its peer view in each way of :data:`COPY_VARIANTS` (an 8-byte ``copy_``, a 16 MiB
    ``copy_`` into the peer's buffer followed by the 8-byte one, a stream write-value). Across GPUs such copies run
    on copy engines; between ranks of ONE GPU (MPS) a device-to-device copy could have been a kernel that needs an
    SM, which a peer spinning on every SM would wait for forever. Measured on one H100 (2026-12-06): all three land
    while the peer holds every SM, so they are not what the SM margin of ranks sharing a GPU is for
    (``runtime/device_info.py``). Returns ``{variant: {"seen": bool, "latency_ms": float | None,
    "raiser_ms": float}}`` on ranks 0 and 1 (the same dict), ``{}`` elsewhere or at world size 1."""
    if world < 2:
        return {}
    from triton_dist.runtime import stream_ops

    flags = U.nvshmem_create_tensors((1, ), torch.int64, rank, world)
    bufs = U.nvshmem_create_tensors((8 << 20, ), torch.bfloat16, rank, world)
    src = torch.ones(8 << 20, dtype=torch.bfloat16, device="cuda")
    one = torch.ones(1, dtype=torch.int64, device="cuda")
    seen = torch.full((1, ), -1, dtype=torch.int64, device="cuda")
    t0 = torch.zeros(1, dtype=torch.int64, device="cuda")
    dummy, out = _occupy_operands()
    side = torch.cuda.Stream()
    result = {}
    for variant in COPY_VARIANTS:
        if variant == "write_value" and not stream_ops.supported(torch.cuda.current_device()):
            continue
        flags[rank].zero_()
        torch.cuda.synchronize()
        dist.barrier()
        raiser_ms = 0.0
        if rank == 1:
            k_spin_until_flag[(phys, )](flags[rank], seen, t0, int(deadline_ms * 1e6), dummy, dummy, out, 0,
                                        num_warps=8, num_stages=4)
        dist.barrier()
        if rank == 0:
            time.sleep(0.2)  # the peer's blocks hold every SM by now
            t = time.perf_counter()
            with torch.cuda.stream(side):
                if variant == "copy_16MiB_then_flag":
                    bufs[1].copy_(src)
                if variant == "write_value":
                    stream_ops.write_value64(side, flags[1], 1)
                else:
                    flags[1].copy_(one)
            side.synchronize()
            raiser_ms = (time.perf_counter() - t) * 1e3
        torch.cuda.synchronize()
        got = [None, None]
        if rank == 1:
            s, start = int(seen.item()), int(t0.item())
            got = [s >= 0, (s - start) / 1e6 if s >= 0 else None]
        facts = [None] * world
        dist.all_gather_object(facts, (got, raiser_ms))
        result[variant] = {"seen": facts[1][0][0], "latency_ms": facts[1][0][1], "raiser_ms": facts[0][1]}
    dist.barrier()
    for views in (flags, bufs):
        U.nvshmem_free_tensor_sync(views[rank])
    return result


def summarize(every, spin_ms):
    """The probe's summary from every rank's facts (rank order): how many SMs each rank's blocks used alone and
    together, how many SMs those sets share, each rank's span, and ``together_concurrent``: whether there was a
    moment when every block of every rank ran (the latest start before the earliest end, GPU-wide clock).
    Pure function."""
    sets = [set(f["alone_sms"]) for f in every]
    tog = [set(f["together"]["sms"]) for f in every]
    return {
        "alone_counts": [len(s) for s in sets],
        "alone_overlap": len(set.intersection(*sets)),
        "alone_union": len(set.union(*sets)),
        "together_counts": [len(s) for s in tog],
        "together_overlap": len(set.intersection(*tog)),
        "together_span_ms": [f["together"]["span_ms"] for f in every],
        "together_start_spread_ms": [f["together"]["start_spread_ms"] for f in every],
        "spin_ms": spin_ms,
        "together_concurrent": max(f["together"]["last_start"] for f in every) <
        min(f["together"]["first_end"] for f in every),
    }


def launch(blocks, spin_ns):
    smids = torch.full((blocks, ), -1, dtype=torch.int32, device="cuda")
    starts = torch.zeros(blocks, dtype=torch.int64, device="cuda")
    ends = torch.zeros(blocks, dtype=torch.int64, device="cuda")
    dummy, out = _occupy_operands()
    kern = k_sm_probe[(blocks, )](smids, starts, ends, spin_ns, dummy, dummy, out, 0, num_warps=8, num_stages=4)
    torch.cuda.synchronize()
    return smids.cpu().tolist(), starts.cpu().tolist(), ends.cpu().tolist(), kern.metadata.shared


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    ap.add_argument("--spin-ms", type=float, default=50.0, help="how long each block of 'together' spins")
    ap.add_argument("--no-copies", dest="copies", action="store_false",
                    help="skip the copy-progress measurement (copy_progress: does a peer's raise progress while "
                         "this rank's kernel fills every SM)")
    args = ap.parse_args()
    U.initialize_distributed(seed=0)
    rank, world = dist.get_rank(), dist.get_world_size()
    dev = torch.cuda.current_device()
    phys = shared_gpu.physical_sm_count(dev) or torch.cuda.get_device_properties(dev).multi_processor_count
    share = rank_sm_count(dev)
    facts = {"rank": rank, "world": world, "ranks_per_gpu": shared_gpu.ranks_per_gpu(), "physical_sms": phys,
             "rank_sm_count": share, "context_sms": torch.cuda.get_device_properties(dev).multi_processor_count,
             "mps_percent": os.environ.get(shared_gpu.MPS_PERCENT_ENV)}
    launch(4, 1000)  # compile and warm up
    alone = None
    for r in range(world):
        dist.barrier()
        if r == rank:
            smids, starts, ends, shared = launch(2 * phys, 2_000_000)
            alone = sorted(set(smids))
            facts["shared_bytes_per_block"] = shared
            facts["alone_ms"] = (max(ends) - min(starts)) / 1e6
        dist.barrier()
    dist.barrier()
    time.sleep(0.2)
    dist.barrier()
    smids, starts, ends, _ = launch(share, int(args.spin_ms * 1e6))
    facts["alone_sms"] = alone
    facts["together"] = {"sms": sorted(set(smids)), "first_start": min(starts), "last_start": max(starts),
                         "first_end": min(ends), "last_end": max(ends), "span_ms": (max(ends) - min(starts)) / 1e6,
                         "start_spread_ms": (max(starts) - min(starts)) / 1e6}
    every = [None] * world
    dist.all_gather_object(every, facts)
    progress = copy_progress(rank, world, phys) if args.copies else {}
    if rank == 0:
        summary = summarize(every, args.spin_ms)
        if progress:
            summary["peer_raise_while_peer_fills_the_gpu"] = progress
        print(json.dumps({k: v for k, v in every[0].items() if k not in ("alone_sms", "together")}))
        print("SUMMARY", json.dumps(summary))
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, "sm_sets.json"), "w") as f:
            json.dump({"summary": summary, "ranks": every}, f, indent=1)
    dist.barrier()
    U.finalize_distributed()


if __name__ == "__main__":
    main()
