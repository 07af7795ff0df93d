"""Sample timing shared by the distributed benchmarks, so every implementation and baseline is timed the same way:
each sample starts after a host barrier and a device-side rendezvous (all ranks' GPUs begin the sample together,
whatever the host-side skew), is measured with CUDA events, and the median of the samples is reduced to the max over
ranks (a collective finishes when its slowest rank does).

Where the process group has no NCCL (ranks that share a GPU: a gloo-only group), the device-side rendezvous is an
NVSHMEM barrier on the current stream instead of a one-element NCCL all-reduce (:func:`rendezvous_kind` names the
one used), and the max over ranks travels as a host tensor over gloo."""
from __future__ import annotations

import statistics

import torch
import torch.distributed as dist

_RENDEZVOUS = []


def group_has_nccl() -> bool:
    """Whether the default process group runs CUDA tensors through NCCL (False where ranks share a GPU)."""
    from triton_dist.runtime.torch_collectives import group_has_nccl as has

    return has()


def max_over_ranks(v: float) -> float:
    """``v``'s maximum over the ranks of the default process group (a CUDA tensor over NCCL, else a host tensor over
    gloo)."""
    t = torch.tensor([v], device="cuda" if group_has_nccl() else "cpu", dtype=torch.float64)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return float(t.item())


def rendezvous_kind() -> str:
    """What :func:`device_rendezvous` does in this process: ``"nccl_all_reduce"``, ``"nvshmem_barrier_on_stream"``
    (no NCCL: ranks share a GPU) or ``"host_barrier_only"`` (no NCCL and no SHMEM: the samples start after the host
    barrier alone)."""
    if group_has_nccl():
        return "nccl_all_reduce"
    from triton_dist.utils import is_shmem_initialized

    return "nvshmem_barrier_on_stream" if is_shmem_initialized() else "host_barrier_only"


def device_rendezvous() -> None:
    """A one-element NCCL all-reduce on the current stream: the GPUs of all ranks leave it within microseconds of
    each other, so work enqueued after it starts together on every rank, whatever the host-side skew after the
    barrier (which can be hundreds of us and would otherwise be charged to the first call of a sample). Without
    NCCL in the group (ranks that share a GPU): an NVSHMEM barrier on the current stream, which does the same."""
    kind = rendezvous_kind()
    if kind == "nccl_all_reduce":
        if not _RENDEZVOUS:
            _RENDEZVOUS.append(torch.zeros(1, device="cuda"))
        dist.all_reduce(_RENDEZVOUS[0])
    elif kind == "nvshmem_barrier_on_stream":
        from triton_dist.utils import nvshmem_barrier_all_on_stream

        nvshmem_barrier_all_on_stream()


def median_us(run, k: int, reps: int, reduce: bool = True) -> float:
    """Median over ``reps`` samples of ``run()`` (``k`` calls' worth of work, enqueued on every rank after a barrier
    and started together on the GPUs after a device-side rendezvous) in us per call, CUDA events; max over ranks
    (``reduce=False``: this rank's)."""
    samples = []
    for _ in range(reps):
        dist.barrier()
        torch.cuda.synchronize()
        a = torch.cuda.Event(enable_timing=True)
        b = torch.cuda.Event(enable_timing=True)
        device_rendezvous()
        a.record()
        run()
        b.record()
        b.synchronize()
        samples.append(a.elapsed_time(b) * 1e3 / k)
    med = statistics.median(samples)
    return max_over_ranks(med) if reduce else med


def eager_median_us(fn, k: int, reps: int, reduce: bool = True) -> float:
    """:func:`median_us` of samples of ``k`` back-to-back eager calls of ``fn`` (host launch cost included): us per
    call."""
    def calls():
        for _ in range(k):
            fn()
    return median_us(calls, k, reps, reduce)


def interleaved_medians(runs: dict, k: int, reps: int) -> dict:
    """``{name: us per call}`` for ``runs = {name: run}`` (each ``run()`` does ``k`` calls' worth of work): ``reps``
    rounds, each taking one :func:`median_us` sample of every run in an order rotated by one per round, so clock and
    temperature drift falls on all of them alike; median per name, max over ranks."""
    names = list(runs)
    samples = {n: [] for n in names}
    for i in range(reps):
        for n in names[i % len(names):] + names[:i % len(names)]:
            samples[n].append(median_us(runs[n], k, 1, reduce=False))
    return {n: max_over_ranks(statistics.median(samples[n])) for n in names}
