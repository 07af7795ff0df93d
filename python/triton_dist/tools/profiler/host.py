"""Host side of the intra-kernel profiler: buffers, clock alignment across ranks, gathering.

Clock alignment: every rank measures ``clock_offset_ns``, the difference between its device clock (converted to
ns) and the host's ``time.time_ns()`` (CLOCK_REALTIME): it launches a one-program kernel that stores the device
clock and brackets it with host reads; the sample with the tightest bracket wins and the kernel is assumed to have
read the clock at the bracket's midpoint (error <= half the bracket, a few microseconds). ``device_ns -
clock_offset_ns`` is then a CLOCK_REALTIME time, common to every process on a node (and NTP-close across nodes),
so slices of all ranks line up in one trace whatever each GPU's timer origin is. On the simulator the device clock
is CLOCK_MONOTONIC and the offset is measured on the host directly.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import List, Optional, Sequence

from ... import profiler_layout as layout

_export_trace_on = True


def set_export_trace_on():
    """Let :class:`ProfilerBuffer` write its trace on exit (the default)."""
    global _export_trace_on
    _export_trace_on = True


def set_export_trace_off():
    """Make :class:`ProfilerBuffer` skip writing traces (e.g. in benchmarks' warm-up)."""
    global _export_trace_on
    _export_trace_on = False


def get_export_trace_on() -> bool:
    return _export_trace_on


def _default_device():
    import torch

    from ... import _compat

    if _compat.interpret_enabled() or not torch.cuda.is_available():
        return torch.device("cpu")
    return torch.device("cuda", torch.cuda.current_device())


def alloc_profiler_buffer(max_num_profile_slots: int, device=None):
    """A zero-initialised profiler buffer (``torch.int64``) with room for ``max_num_profile_slots`` records in total
    (split evenly between the tracks of the kernel that uses it). ``device`` defaults to the current CUDA device, or
    the CPU under the simulator / without a GPU."""
    import torch

    n = int(max_num_profile_slots)
    if n <= 0:
        raise ValueError(f"alloc_profiler_buffer: max_num_profile_slots={max_num_profile_slots!r} must be > 0")
    buf = torch.empty(layout.words_for_slots(n), dtype=torch.int64, device=device if device is not None else _default_device())
    return reset_profiler_buffer(buf)


def reset_profiler_buffer(buf):
    """Empty ``buf`` for a new profile: header = (MAGIC, length, 0, ...), every record slot ``-1``. Returns ``buf``."""
    import torch

    if not isinstance(buf, torch.Tensor) or buf.dtype not in (torch.int64, torch.uint64) or buf.dim() != 1:
        raise TypeError(f"reset_profiler_buffer: expected a 1-D torch.int64 tensor, got "
                        f"{getattr(buf, 'dtype', type(buf).__name__)}")
    if buf.numel() < layout.HEADER_WORDS + layout.WORDS_PER_RECORD:
        raise ValueError(f"reset_profiler_buffer: buffer of {buf.numel()} words is too small "
                         f"(header {layout.HEADER_WORDS} words + 2 per record)")
    view = buf.view(torch.int64) if buf.dtype != torch.int64 else buf
    view.fill_(layout.EMPTY)
    header = torch.zeros(layout.HEADER_WORDS, dtype=torch.int64)
    header[layout.W_MAGIC] = layout.MAGIC
    header[layout.W_TOTAL] = buf.numel()
    view[:layout.HEADER_WORDS].copy_(header)
    return buf


# ---------------------------------------------------------------------------------------------------- clocks

def measure_clock_offset(device=None, samples: int = 8) -> int:
    """``device_ns - host_realtime_ns`` for this process's device clock (see the module docstring). ``device``:
    ``"cpu"`` (simulator) or a CUDA device; default as :func:`alloc_profiler_buffer`."""
    import torch

    dev = torch.device(device) if device is not None else _default_device()
    best = None
    if dev.type == "cpu":
        from ...backends.sim import profiler as simp

        for _ in range(max(1, samples)):
            t0 = time.time_ns()
            m = simp.now_ns()
            t1 = time.time_ns()
            cand = (t1 - t0, m - (t0 + t1) // 2)
            best = cand if best is None or cand < best else best
        return int(best[1])
    from .clock import read_device_clock as kernel

    out = torch.zeros(2, dtype=torch.int64, device=dev)
    with torch.cuda.device(dev):
        kernel[(1, )](out)  # compile + load outside the timed samples
        torch.cuda.synchronize()
        for _ in range(max(1, samples)):
            t0 = time.time_ns()
            kernel[(1, )](out)
            torch.cuda.synchronize()
            t1 = time.time_ns()
            ticks, tps = (int(v) for v in out.cpu().tolist())
            dev_ns = ticks * 1_000_000_000 // max(1, tps)
            cand = (t1 - t0, dev_ns - (t0 + t1) // 2)
            best = cand if best is None or cand < best else best
    return int(best[1])


@dataclass
class RankProfile:
    """One rank's raw profile: the buffer words (numpy int64) and its measured clock offset (ns)."""
    rank: int
    words: "object"
    clock_offset_ns: int = 0


def _to_numpy(buf):
    import numpy as np

    try:
        import torch

        if isinstance(buf, torch.Tensor):
            t = buf.detach()
            if t.dtype != torch.int64:
                t = t.view(torch.int64)
            return t.cpu().numpy().copy()
    except ImportError:  # pragma: no cover
        pass
    return np.asarray(buf, dtype=np.int64).copy()


def _dist():
    try:
        import torch.distributed as dist
    except ImportError:  # pragma: no cover
        return None
    if dist.is_available() and dist.is_initialized():
        return dist
    return None


def gather_profiles(profiler_buffer, clock_offset_ns: Optional[int] = None, group=None) -> List[RankProfile]:
    """Every rank's (buffer, clock offset), in rank order, on every rank (``all_gather_object``). Without an
    initialised process group: this process alone, as rank 0. Collective: all ranks of ``group`` must call it.
    ``clock_offset_ns`` defaults to :func:`measure_clock_offset` on the buffer's device."""
    words = _to_numpy(profiler_buffer)
    if clock_offset_ns is None:
        dev = getattr(profiler_buffer, "device", None)
        clock_offset_ns = measure_clock_offset(dev)
    dist = _dist()
    if dist is None or dist.get_world_size(group) == 1:
        rank = dist.get_rank() if dist is not None else 0
        return [RankProfile(rank, words, int(clock_offset_ns))]
    mine = (dist.get_rank(), words, int(clock_offset_ns))
    out: List[object] = [None] * dist.get_world_size(group)
    dist.all_gather_object(out, mine, group=group)
    return [RankProfile(r, w, off) for (r, w, off) in out]


class ProfilerBuffer:
    """``with ProfilerBuffer(max_num_profile_slots, trace_file, task_names) as buf:`` — allocates (and resets on
    enter) a profiler buffer and, on a clean exit, exports the trace of every rank into ``trace_file`` (rank 0
    writes; with a process group this is collective) and, when ``gantt_png`` is given, a Gantt chart."""

    def __init__(self, max_num_profile_slots: int, trace_file: str, task_names: Sequence[str], device=None,
                 gantt_png: Optional[str] = None, track_by: str = "sm"):
        self.trace_file = trace_file
        self.task_names = list(task_names)
        self.gantt_png = gantt_png
        self.track_by = track_by
        self.profiler_buffer = alloc_profiler_buffer(max_num_profile_slots, device=device)
        self.clock_offset_ns = None
        self.written = None

    def __enter__(self):
        reset_profiler_buffer(self.profiler_buffer)
        return self.profiler_buffer

    def __exit__(self, exc_type, exc, tb):
        if exc_type is not None or not get_export_trace_on():
            return False
        from .viewer import export_to_perfetto_trace

        self.written = export_to_perfetto_trace(self.profiler_buffer, self.task_names, self.trace_file,
                                                gantt_png=self.gantt_png, track_by=self.track_by)
        return False
