"""What the overlap probes (``probe_gemm_rs``, ``probe_ag``, ``probe_timing``; 2 GPUs under torchrun) share: their
common arguments, the distributed start (NVSHMEM + TMA scratch allocator, a UTC stamp for file names, the topology
printed) and the results JSON written by rank 0 at the end (with ``topology`` / ``shared_gpu``: ranks that shared a
GPU measured no NVLink)."""
from __future__ import annotations

import argparse
import datetime
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def probe_parser(doc: str, shapes: str, reps: int = 7) -> argparse.ArgumentParser:
    """An argument parser with the probes' common options: ``--out`` (results folder), ``--k`` (calls per CUDA
    graph sample), ``--reps`` (samples) and ``--shapes`` (``model:M,...`` of ``bench_overlap.MODELS``)."""
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.path.join(HERE, "results"))
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--reps", type=int, default=reps)
    ap.add_argument("--shapes", default=shapes, help="model:M,... (bench_overlap's MODELS)")
    return ap


def int_list(v: str):
    """``"4,8"`` -> ``[4, 8]`` (an argparse type)."""
    return [int(x) for x in v.split(",") if x]


def rs_shapes(spec: str, world: int):
    """``"model:M,..."`` -> ``(model, M, K per rank, N)`` of GEMM+RS at each (``bench_overlap.MODELS``)."""
    import bench_overlap as bo

    for item in spec.split(","):
        model, m = item.split(":")
        _, _, k_tot, n = bo.MODELS[model]
        yield model, int(m), k_tot // world, n


def start(out: str):
    """Join the ranks (``triton_dist.utils.initialize_distributed``), create ``out``, install the TMA descriptor
    allocator, print the topology (rank 0); returns ``(rank, world, stamp)``."""
    import torch.distributed as dist

    import triton_dist.utils as tdu
    from provenance import topology_line
    from triton_dist.kernels import gemm_config as gc

    tdu.initialize_distributed()
    if dist.get_rank() == 0:
        print(f"{os.path.basename(sys.argv[0])}: {topology_line()}", flush=True)
    os.makedirs(out, exist_ok=True)
    gc.ensure_tma_allocator()
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    return dist.get_rank(), dist.get_world_size(), stamp


def finish(args, name: str, stamp: str, records, timing: str, rank: int, **extra) -> None:
    """Rank 0 writes ``<out>/<name>-<stamp>.json`` (command, git commit, versions, topology / shared_gpu, the device
    rendezvous, ``timing``, ``extra``, records) and prints its path; then every rank leaves the distributed setup."""
    import torch.distributed as dist

    import triton_dist.utils as tdu
    from provenance import git_commit, topology_fields, versions
    from timing import rendezvous_kind

    if rank == 0:
        path = os.path.join(args.out, f"{name}-{stamp}.json")
        with open(path, "w") as f:
            json.dump({"benchmark": name, "command": " ".join(sys.argv), "git_commit": git_commit(),
                       "versions": versions(), **topology_fields(), "device_rendezvous": rendezvous_kind(),
                       "timing": timing, **extra, "records": records}, f, indent=1)
        print("results:", path)
    dist.barrier()
    tdu.finalize_distributed()


def no_nccl() -> bool:
    """Whether the process group lacks NCCL (ranks share a GPU: gloo only), so NCCL / torch symm-mem baselines cannot
    run and torch's sequential path would run on host copies (never in a CUDA graph)."""
    from triton_dist.runtime.torch_collectives import group_has_nccl

    return not group_has_nccl()


#: why a probe skips its NCCL / torch baselines where ranks share a GPU
NO_NCCL = ("skipped: ranks share a GPU (gloo-only process group, no NCCL): NCCL, torch symmetric memory and torch's "
           "sequential path (host copies, not capturable) cannot be timed")
