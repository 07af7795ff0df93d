"""The one timing and recording harness of every benchmark and probe in benchmarks/, so every implementation and
baseline is measured, checked and recorded the same way.

Timing: each sample starts after a host barrier and a device-side rendezvous (all ranks' GPUs begin the sample
together, whatever the host-side skew), is measured with CUDA events, and the median of the samples is reduced to the
max over ranks (a collective finishes when its slowest rank does). Where the process group has no NCCL (ranks that
share a GPU: a gloo-only group), the device-side rendezvous is an NVSHMEM barrier on the current stream instead of a
one-element NCCL all-reduce (:func:`rendezvous_kind` names the one used), and the max over ranks travels as a host
tensor over gloo. In a single process without torch.distributed (bench_gemm, the mega-kernel probe) a sample starts
after a device synchronisation and nothing is reduced.

Capture: :func:`capture_calls` builds a CUDA graph of ``k`` back-to-back calls after eager warm-up calls outside it;
:func:`capture_agreed` does so on every rank and agrees on the outcome (a capture that failed anywhere is recorded in
the failures list and the implementation is timed eagerly on every rank, so cross-rank kernels pair up).
:func:`time_interleaved` times a set of implementations from their graphs (or eagerly where capture failed), the
samples interleaved round-robin in an order rotated by one per round, so clock and temperature drift falls on all of
them alike; :func:`time_eager` is the eager column (host launch cost included).

Result check: :func:`close` (relative error of a result against a reference) and :func:`drop_failing` (run each
implementation once, drop the ones that raise or, given a reference, disagree with it on any rank).

Result header: :func:`result_header` is the provenance every results JSON starts with (benchmark, command, UTC stamp,
git commit, tree fingerprint, versions, devices, world size, topology / shared_gpu, the device rendezvous);
:func:`results_dir` is where results go (``$TRITON_DIST_RESULTS_DIR``, default benchmarks/results/) and
:func:`write_json` writes one. Probes are options of the benches (``--probe NAME``, :func:`split_probe`)."""
from __future__ import annotations

import contextlib
import datetime
import json
import os
import statistics
import sys

import torch
import torch.distributed as dist

HERE = os.path.dirname(os.path.abspath(__file__))

_RENDEZVOUS = []
#: capture failures of :func:`capture_agreed` calls that passed no list of their own: ``{"impl", "error"}``
GRAPH_FAILURES = []


# ------------------------------------------------------------------------------------------------ ranks and timing
def distributed() -> bool:
    """Whether torch.distributed has a default process group in this process."""
    return dist.is_available() and dist.is_initialized()


def group_has_nccl() -> bool:
    """Whether the default process group runs CUDA tensors through NCCL (False where ranks share a GPU)."""
    from triton_dist.runtime.torch_collectives import group_has_nccl as has

    return has()


def max_over_ranks(v: float) -> float:
    """``v``'s maximum over the ranks of the default process group (a CUDA tensor over NCCL, else a host tensor over
    gloo); ``v`` itself without a process group."""
    if not distributed():
        return float(v)
    t = torch.tensor([v], device="cuda" if group_has_nccl() else "cpu", dtype=torch.float64)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return float(t.item())


def min_over_ranks(v: float) -> float:
    """``v``'s minimum over the ranks (see :func:`max_over_ranks`)."""
    return -max_over_ranks(-v)


def rendezvous_kind():
    """What :func:`device_rendezvous` does in this process: ``"nccl_all_reduce"``, ``"nvshmem_barrier_on_stream"``
    (no NCCL: ranks share a GPU), ``"host_barrier_only"`` (no NCCL and no SHMEM: the samples start after the host
    barrier alone), or None (no process group, or no CUDA device: the simulator)."""
    if not distributed() or not torch.cuda.is_available():
        return None
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
        if distributed():
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


def eager_call_us(fn, warmup: int = 2, calls: int = 1) -> float:
    """This rank's us per eager call of ``fn``: ``warmup`` calls (compile, allocate), then ``calls`` back-to-back
    calls between two CUDA events. A quick size estimate (what sets ``k``), not a measurement."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(calls):
        fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) * 1e3 / calls


def calls_per_sample(fn, sample_us: float, lo: int = 3, hi: int = 50, warmup: int = 2) -> int:
    """``k`` for the timing helpers: enough back-to-back calls of ``fn`` that one sample lasts about ``sample_us``
    (:func:`eager_call_us`, at least 1 us per call), clamped to ``[lo, hi]``."""
    return max(lo, min(hi, int(sample_us / max(eager_call_us(fn, warmup), 1.0))))


def time_eager(fn, k: int, reps: int, warmup: int = 2) -> float:
    """The eager column: ``warmup`` calls, then the median us per call of ``k`` back-to-back eager calls (CUDA events,
    host launch cost included), max over ranks."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    return eager_median_us(fn, k, reps)


# ------------------------------------------------------------------------------------------------------ capture
def capture_calls(fn, k: int, stream, warmup: int = 2):
    """``k`` back-to-back calls of ``fn`` captured in one CUDA graph on ``stream`` and returned (synchronized, not yet
    replayed). First, after the current stream's work, ``warmup`` eager calls on ``stream`` outside the graph: they
    compile, autotune and allocate workspaces, none of which may happen during capture."""
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(warmup):
            fn()
    torch.cuda.current_stream().wait_stream(stream)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=stream):
        for _ in range(k):
            fn()
    torch.cuda.synchronize()
    return graph


def capture_agreed(name, fn, k, stream=None, failures=None, warmup: int = 2):
    """:func:`capture_calls` of ``fn`` on every rank, replayed twice (the first replay uploads the graph); None when
    the capture failed on any rank (the ranks agree), and then ``{"impl": name, "error": ...}`` is appended to
    ``failures`` (default :data:`GRAPH_FAILURES`)."""
    stream = torch.cuda.Stream() if stream is None else stream
    g, err = None, None
    try:
        g = capture_calls(fn, k, stream, warmup)
    except Exception as exc:  # noqa: BLE001
        err = f"{type(exc).__name__}: {exc}"[:300]
        g = None
        with contextlib.suppress(Exception):
            torch.cuda.synchronize()
    if max_over_ranks(1.0 if err else 0.0):
        (GRAPH_FAILURES if failures is None else failures).append(
            {"impl": name, "error": err or "capture failed on another rank"})
        return None
    if distributed():
        dist.barrier()
    for _ in range(2):
        g.replay()
    torch.cuda.synchronize()
    return g


def time_graph(name, fn, k, reps, failures=None):
    """``(median us per call, graphed)``: ``k`` calls captured in one CUDA graph (:func:`capture_agreed`), replayed
    ``reps`` times, max over ranks; eager timing (``graphed`` False) where the capture failed on any rank."""
    g = capture_agreed(name, fn, k, failures=failures)
    if g is None:
        return time_eager(fn, k, reps), False
    t = median_us(g.replay, k, reps)
    torch.cuda.synchronize()
    if distributed():
        dist.barrier()
    del g
    return t, True


def time_interleaved(fns, k, reps, failures=None):
    """``{name: (median us per call, graphed)}`` for every ``fns[name]``: each captured as ``k`` calls in one CUDA
    graph (:func:`capture_agreed`; eager calls where that failed on any rank), then ``reps`` rounds of
    :func:`interleaved_medians`, so implementations compared with each other are measured side by side, not minutes
    apart."""
    runs = {}
    for name, fn in fns.items():
        g = capture_agreed(name, fn, k, failures=failures)
        if g is None:
            for _ in range(2):
                fn()

            def calls(fn=fn):
                for _ in range(k):
                    fn()
            runs[name] = (calls, False, None)
        else:
            runs[name] = (g.replay, True, g)
    times = interleaved_medians({n: r[0] for n, r in runs.items()}, k, reps)
    out = {n: (times[n], runs[n][1]) for n in runs}
    torch.cuda.synchronize()
    if distributed():
        dist.barrier()
    return out


# ------------------------------------------------------------------------------------------------- result check
def rel_error(out, ref, norm: str = "fro") -> float:
    """The error of ``out`` against ``ref`` relative to ``ref``: the Frobenius norms' ratio (``norm="fro"``) or the
    largest absolute difference over the largest absolute reference value (``"max"``); computed in fp32."""
    diff = out.float() - ref.float()
    if norm == "max":
        return diff.abs().max().item() / max(ref.float().abs().max().item(), 1e-30)
    return diff.norm().item() / (ref.float().norm().item() + 1e-6)


def close(out, ref, tol: float = 2e-2, norm: str = "fro"):
    """``(ok, rel)``: whether ``out`` is within ``tol`` of ``ref`` (:func:`rel_error`) and finite, and the error."""
    rel = rel_error(out, ref, norm)
    return rel <= tol and bool(torch.isfinite(out.float()).all()), rel


def drop_failing(fns, ref=None):
    """Call every ``fns[name]`` once (a warm-up that also compiles); drop from ``fns`` the ones that raise and return
    ``{name: "Type: message"}`` for them (recorded beside the timings). With ``ref`` (a tensor), that call's result
    must also be :func:`close` to it on every rank (the ranks agree, max over ranks, so they keep the same
    implementations); one that is not is dropped as ``"wrong result: ..."``. Also on the simulator (CPU tensors, no
    CUDA device: nothing to synchronise)."""
    errors = {}
    for name, fn in list(fns.items()):
        try:
            out = fn()
            _sync()
            if ref is not None:
                ok, rel = close(out, ref)
                if not ok:
                    errors[name] = f"wrong result: rel err {rel:.3g} (this rank)"
        except Exception as exc:  # noqa: BLE001
            errors[name] = f"{type(exc).__name__}: {exc}"[:200]
            _sync()
        bad = name in errors
        if ref is not None and max_over_ranks(1.0 if bad else 0.0) and not bad:
            errors[name] = "wrong result or error on another rank"
        if name in errors:
            fns.pop(name)
    return errors


def _sync() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def rand(shape, seed, dtype=torch.bfloat16, device="cuda"):
    """A reproducible tensor of ``shape`` on ``device`` (default CUDA; ``"cpu"`` on the simulator): normal values / 8
    from a generator of that device seeded with ``seed``, as ``dtype``."""
    g = torch.Generator(device=device).manual_seed(seed)
    return (torch.randn(shape, device=device, generator=g) / 8).to(dtype)


# ------------------------------------------------------------------------------------------------ result header
def on_simulator() -> bool:
    """Whether triton_dist runs on its CPU simulator in this process (``TRITON_DIST_BACKEND=sim``, or no GPU)."""
    try:
        from triton_dist.runtime import select

        return select.backend_name() == "sim"
    except Exception:  # noqa: BLE001 - provenance must never fail the run
        return not torch.cuda.is_available()


def utc_stamp() -> str:
    """The current UTC time as results name it (``20261204T231500Z``)."""
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")


def results_dir(default=None) -> str:
    """Where results go: ``$TRITON_DIST_RESULTS_DIR``, else ``default``, else benchmarks/results/."""
    return os.environ.get("TRITON_DIST_RESULTS_DIR") or default or os.path.join(HERE, "results")


def result_header(benchmark: str, topo=None, stamp=None, **extra) -> dict:
    """The provenance every results JSON opens with: ``benchmark``, ``command``, ``timestamp_utc`` (``stamp``, default
    now), ``git_commit``, ``tree`` (the tree fingerprint: recompute it with ``python benchmarks/provenance.py``),
    ``versions``, ``devices`` (``["cpu-simulator"]`` on the simulator), ``world_size``, ``topology`` / ``shared_gpu``
    (``topo``, default :func:`provenance.topology`; shared_gpu true: ranks shared a GPU, no NVLink figures) and
    ``device_rendezvous`` (:func:`rendezvous_kind`); then ``extra``. Collective-free: rank 0 may call it alone."""
    from provenance import git_commit, topology, topology_fields, tree_fingerprint, versions

    topo = topology() if topo is None else topo
    gpu = torch.cuda.is_available() and not on_simulator()
    doc = {"benchmark": benchmark, "command": " ".join([os.path.basename(sys.executable)] + sys.argv),
           "timestamp_utc": stamp or utc_stamp(), "git_commit": git_commit(), "tree": tree_fingerprint(),
           "versions": versions(),
           "devices": ([torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())] if gpu else
                       ["cpu-simulator"]),
           "world_size": dist.get_world_size() if distributed() else topo.get("world_size", 1),
           **topology_fields(topo), "device_rendezvous": rendezvous_kind() if gpu else None}
    doc.update(extra)
    return doc


def write_json(path: str, doc: dict) -> str:
    """Write ``doc`` to ``path`` (its folder created), indented as every result is; returns ``path``."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as f:
        json.dump(doc, f, indent=1)
    return path


# ------------------------------------------------------------------------------------------------- arguments
def names_arg(ap, flag: str, text: str, known, what: str) -> list:
    """The comma-separated names of option ``flag`` (``text``), each one of ``known``; ``ap.error`` (exit 2) naming
    the first unknown ``what`` (e.g. "model") and the known ones otherwise."""
    names = [n for n in text.split(",") if n]
    for n in names:
        if n not in known:
            ap.error(f"{flag}: unknown {what} {n!r}; known: {', '.join(known)}")
    return names


def counts_arg(ap, flag: str, text: str) -> list:
    """The comma-separated positive integers of option ``flag`` (``text``); ``ap.error`` (exit 2) otherwise."""
    try:
        counts = [int(t) for t in text.split(",") if t]
    except ValueError:
        ap.error(f"{flag}: expected integers, got {text!r}")
    if any(t < 1 for t in counts):
        ap.error(f"{flag}: every count must be >= 1")
    return counts


# ------------------------------------------------------------------------------------------------------ probes
def split_probe(argv, probes: dict):
    """``(name, rest)`` where ``argv`` (a bench's command line) starts with ``--probe NAME`` (or ``--probe=NAME``):
    the probe's name (one of ``probes``) and the options that follow, which are the probe's own; None otherwise.
    Probes are one-off measurements folded into a bench as options: ``bench_overlap.py --probe rs-own --help``."""
    if not argv or not argv[0].startswith("--probe"):
        return None
    if argv[0].startswith("--probe="):
        name, rest = argv[0].split("=", 1)[1], list(argv[1:])
    elif len(argv) > 1:
        name, rest = argv[1], list(argv[2:])
    else:
        name, rest = "", []
    if name not in probes:
        raise SystemExit(f"--probe {name!r}: unknown; accepted: {', '.join(probes)}")
    return name, rest
