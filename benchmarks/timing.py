"""Sample timing shared by the distributed benchmarks, so every implementation and baseline is timed the same way:
each sample starts after a host barrier and a device-side rendezvous (all ranks' GPUs begin the sample together,
whatever the host-side skew), is measured with CUDA events, and the median of the samples is reduced to the max over
ranks (a collective finishes when its slowest rank does)."""
from __future__ import annotations

import statistics

import torch
import torch.distributed as dist

_RENDEZVOUS = []


def max_over_ranks(v: float) -> float:
    """``v``'s maximum over the ranks of the default process group."""
    t = torch.tensor([v], device="cuda", dtype=torch.float64)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return float(t.item())


def device_rendezvous() -> None:
    """A one-element NCCL all-reduce on the current stream: the GPUs of all ranks leave it within microseconds of
    each other, so work enqueued after it starts together on every rank, whatever the host-side skew after the
    barrier (which can be hundreds of us and would otherwise be charged to the first call of a sample)."""
    if not _RENDEZVOUS:
        _RENDEZVOUS.append(torch.zeros(1, device="cuda"))
    dist.all_reduce(_RENDEZVOUS[0])


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
