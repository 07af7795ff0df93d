"""Parse profiler buffers into tracks and export them: a Chrome-JSON trace that the Perfetto UI
(https://ui.perfetto.dev) and ``chrome://tracing`` open, and a Gantt PNG (matplotlib, imported lazily).

Trace format (Chrome "Trace Event Format", JSON object form): ``traceEvents`` holds

* one process per rank: ``pid = rank + 1`` with ``process_name`` = ``"rank <r>"`` and ``process_sort_index`` = r;
* one thread (track) per SM: ``thread_name`` = ``"SM <id>"``; programs that ran on the same SM at overlapping times
  get extra lanes ``"SM <id> #<lane>"`` so slices never overlap on a track (``track_by="program"`` gives one track per
  program / group instead);
* one complete event (``ph: "X"``) per task: ``name`` = the task name, ``ts`` / ``dur`` in microseconds (fractional:
  ns precision), ``args`` = program, group, SM, task type.

Times are aligned across ranks: each rank's device clock is converted to ns and its measured offset to host
CLOCK_REALTIME is subtracted (see :mod:`triton_dist.tools.profiler.host`), then the earliest slice of the whole trace
is time 0; ``otherData.origin_realtime_ns`` keeps that origin.
"""
from __future__ import annotations

import json
import warnings
from dataclasses import dataclass, field
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

from ... import profiler_layout as layout


@dataclass
class Task:
    """One slice: ``task_type`` ran from ``start_ns`` to ``end_ns`` (aligned ns) in a program on an SM of a rank."""
    task_type: int
    start_ns: int
    end_ns: int
    sm_id: int
    program_id: int
    group_id: int = 0
    rank: int = 0

    @property
    def duration_ns(self) -> int:
        return self.end_ns - self.start_ns


@dataclass
class Track:
    """The records of one program (and group) of one rank, paired into tasks."""
    rank: int
    program_id: int
    group_id: int
    sm_id: int
    tasks: List[Task] = field(default_factory=list)
    num_records: int = 0
    capacity: int = 0
    unmatched: int = 0

    @property
    def full(self) -> bool:
        """True when the track used every slot (later records were dropped on the device)."""
        return self.capacity > 0 and self.num_records >= self.capacity


def _words(buf):
    from .host import _to_numpy

    return _to_numpy(buf)


def parse_to_tracks(profiler_buffer, rank: int = 0, clock_offset_ns: int = 0) -> List[Track]:
    """Decode one rank's buffer (torch tensor / numpy array / sequence of int64 words) into tracks, one per
    (program, group) that recorded anything, ordered by program then group. Starts and ends of the same task type
    are paired last-in-first-out (so tasks of one type may nest); an end without a start and a start without an end
    are counted in ``Track.unmatched`` and dropped. Times are ns: ``ticks * 1e9 / ticks_per_second - clock_offset_ns``.
    Raises ValueError when the buffer is not a profiler buffer."""
    import numpy as np

    w = _words(profiler_buffer).reshape(-1)
    if w.size < layout.HEADER_WORDS or int(w[layout.W_MAGIC]) != layout.MAGIC:
        raise ValueError("parse_to_tracks: not a profiler buffer (bad magic word; allocate it with "
                         "alloc_profiler_buffer / reset it with reset_profiler_buffer)")
    total = int(w[layout.W_TOTAL])
    if total != w.size:
        raise ValueError(f"parse_to_tracks: header says {total} words but the buffer has {w.size}")
    grid = int(w[layout.W_GRID])
    if grid in (0, layout.EMPTY):
        return []  # no profiled program ran (or profiling was disabled)
    nprog, ngroups = grid & 0xFFFF_FFFF, (grid >> 32) & 0xFFFF_FFFF
    tps = int(w[layout.W_TICKS]) or 1_000_000_000
    tracks_n = nprog * ngroups
    cap = layout.capacity_per_track(total, tracks_n)
    recs = w[layout.HEADER_WORDS:layout.HEADER_WORDS + tracks_n * cap * layout.WORDS_PER_RECORD]
    recs = recs.reshape(tracks_n, cap, layout.WORDS_PER_RECORD) if cap else np.zeros((tracks_n, 0, 2), np.int64)
    out: List[Track] = []
    truncated = 0
    for t in range(tracks_n):
        rows = recs[t]
        used = rows[:, 0] != layout.EMPTY
        n = int(used.sum())
        if n == 0:
            continue
        pid, gid = divmod(t, ngroups)
        track = Track(rank, pid, gid, -1, num_records=n, capacity=cap)
        open_: Dict[int, List[int]] = {}
        for tag, ticks in rows[used]:
            is_start, ttype, sm = layout.decode_tag(int(tag))
            track.sm_id = sm
            ns = int(ticks) * 1_000_000_000 // tps - int(clock_offset_ns)
            if is_start:
                open_.setdefault(ttype, []).append(ns)
            elif open_.get(ttype):
                start = open_[ttype].pop()
                track.tasks.append(Task(ttype, start, ns, sm, pid, gid, rank))
            else:
                track.unmatched += 1
        track.unmatched += sum(len(v) for v in open_.values())
        track.tasks.sort(key=lambda x: (x.start_ns, -x.end_ns))
        truncated += track.full
        out.append(track)
    if truncated:
        warnings.warn(f"profiler: {truncated} track(s) of rank {rank} filled all {cap} slots; later records were "
                      f"dropped (allocate a larger buffer)", RuntimeWarning, stacklevel=2)
    return out


def _task_name(task_names: Optional[Sequence[str]], t: int) -> str:
    if task_names is not None and 0 <= t < len(task_names):
        return str(task_names[t])
    return f"task_{t}"


def _lanes(tasks: List[Task]) -> List[int]:
    """Greedy interval colouring: the lane of each task (sorted by start) so tasks on one lane never overlap."""
    ends: List[int] = []
    lanes = []
    for task in tasks:
        for i, e in enumerate(ends):
            if e <= task.start_ns:
                ends[i] = task.end_ns
                lanes.append(i)
                break
        else:
            ends.append(task.end_ns)
            lanes.append(len(ends) - 1)
    return lanes


def _rows(tracks: Iterable[Track], track_by: str):
    """``{(rank, row_key): (row_name, [tasks])}`` with non-overlapping tasks per row."""
    if track_by not in ("sm", "program"):
        raise ValueError(f"track_by={track_by!r} is not supported; accepted: 'sm', 'program'")
    rows: Dict[Tuple[int, Tuple], Tuple[str, List[Task]]] = {}
    if track_by == "program":
        for tr in tracks:
            name = f"program {tr.program_id}" + (f" group {tr.group_id}" if tr.group_id else "") + f" (SM {tr.sm_id})"
            rows[(tr.rank, (tr.program_id, tr.group_id, 0))] = (name, list(tr.tasks))
        return rows
    per_sm: Dict[Tuple[int, int], List[Task]] = {}
    for tr in tracks:
        for task in tr.tasks:
            per_sm.setdefault((tr.rank, task.sm_id), []).append(task)
    for (rank, sm), tasks in per_sm.items():
        tasks.sort(key=lambda x: (x.start_ns, -x.end_ns))
        for task, lane in zip(tasks, _lanes(tasks)):
            key = (rank, (sm, lane, 0))
            if key not in rows:
                rows[key] = (f"SM {sm}" + (f" #{lane}" if lane else ""), [])
            rows[key][1].append(task)
    return rows


def build_trace(tracks: Iterable[Track], task_names: Optional[Sequence[str]] = None, track_by: str = "sm",
                metadata: Optional[dict] = None) -> dict:
    """The Chrome-JSON trace (a dict) of ``tracks`` (of any number of ranks): see the module docstring."""
    tracks = list(tracks)
    rows = _rows(tracks, track_by)
    all_tasks = [t for _, ts in rows.values() for t in ts]
    origin = min((t.start_ns for t in all_tasks), default=0)
    events: List[dict] = []
    ranks = sorted({tr.rank for tr in tracks} | {r for (r, _) in rows})
    for r in ranks:
        events.append({"ph": "M", "name": "process_name", "pid": r + 1, "tid": 0, "args": {"name": f"rank {r}"}})
        events.append({"ph": "M", "name": "process_sort_index", "pid": r + 1, "tid": 0, "args": {"sort_index": r}})
    tid_of: Dict[Tuple[int, Tuple], int] = {}
    for idx, key in enumerate(sorted(rows)):
        rank, _ = key
        tid = idx + 1
        tid_of[key] = tid
        name, _tasks = rows[key]
        events.append({"ph": "M", "name": "thread_name", "pid": rank + 1, "tid": tid, "args": {"name": name}})
        events.append({"ph": "M", "name": "thread_sort_index", "pid": rank + 1, "tid": tid,
                       "args": {"sort_index": tid}})
    for key in sorted(rows):
        rank, _ = key
        for t in rows[key][1]:
            events.append({"ph": "X", "name": _task_name(task_names, t.task_type), "cat": "triton_dist",
                           "pid": rank + 1, "tid": tid_of[key], "ts": (t.start_ns - origin) / 1000.0,
                           "dur": max(0, t.end_ns - t.start_ns) / 1000.0,
                           "args": {"program": t.program_id, "group": t.group_id, "sm": t.sm_id,
                                    "task_type": t.task_type}})
    other = {"source": "triton_dist.tools.profiler", "time_unit": "us", "origin_realtime_ns": origin,
             "ranks": ranks, "track_by": track_by,
             "unmatched_records": sum(tr.unmatched for tr in tracks),
             "full_tracks": sum(1 for tr in tracks if tr.full)}
    if metadata:
        other.update(metadata)
    return {"traceEvents": events, "displayTimeUnit": "ns", "otherData": other}


def load_trace(path: str) -> dict:
    """Read a trace written by :func:`export_to_perfetto_trace`."""
    with open(path, "r", encoding="utf-8") as f:
        return json.load(f)


def _collect(profiler_buffer, clock_offset_ns, gather, rank):
    """Tracks of every rank to export, or None on ranks that do not write."""
    from .host import RankProfile, _dist, gather_profiles

    if isinstance(profiler_buffer, (list, tuple)) and profiler_buffer and isinstance(profiler_buffer[0], RankProfile):
        profiles = list(profiler_buffer)
    elif gather and _dist() is not None:
        profiles = gather_profiles(profiler_buffer, clock_offset_ns)
        if _dist().get_rank() != 0:
            return None
    else:
        r = rank if rank is not None else (_dist().get_rank() if _dist() is not None else 0)
        profiles = [RankProfile(r, _words(profiler_buffer), int(clock_offset_ns or 0))]
    tracks: List[Track] = []
    for p in profiles:
        tracks.extend(parse_to_tracks(p.words, rank=p.rank, clock_offset_ns=p.clock_offset_ns))
    return tracks


def export_to_perfetto_trace(profiler_buffer, task_names: Sequence[str], file_name: str, *, rank: Optional[int] = None,
                             clock_offset_ns: Optional[int] = None, gather: bool = True, track_by: str = "sm",
                             gantt_png: Optional[str] = None, verbose: bool = False) -> Optional[str]:
    """Write the trace of ``profiler_buffer`` to ``file_name`` (Chrome JSON; open it in ui.perfetto.dev).

    ``profiler_buffer`` is this rank's buffer, or a list of :class:`~triton_dist.tools.profiler.host.RankProfile`.
    With an initialised torch.distributed group and ``gather=True`` this is collective: every rank's buffer and
    clock offset are gathered and rank 0 writes one file with a process per rank (other ranks return None).
    ``clock_offset_ns`` (this rank's) defaults to a fresh measurement when gathering, 0 otherwise.
    Also renders ``gantt_png`` when given. Returns the path written."""
    tracks = _collect(profiler_buffer, clock_offset_ns, gather, rank)
    if tracks is None:
        return None
    trace = build_trace(tracks, task_names, track_by=track_by)
    with open(file_name, "w", encoding="utf-8") as f:
        json.dump(trace, f)
    if gantt_png:
        render_gantt_png(tracks, gantt_png, task_names=task_names, track_by=track_by)
    if verbose:
        n = sum(len(tr.tasks) for tr in tracks)
        print(f"triton_dist profiler: {n} slices on {len(tracks)} tracks -> {file_name}")
    return file_name


def render_gantt_png(tracks: Sequence[Track], path: str, task_names: Optional[Sequence[str]] = None,
                     track_by: str = "sm", title: Optional[str] = None) -> str:
    """Draw ``tracks`` as a Gantt chart (one row per trace track, grouped by rank, time in µs from the first slice,
    one colour per task type) into the PNG ``path``. Needs matplotlib (``pip install matplotlib``)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.patches import Patch
    except ImportError as e:  # pragma: no cover
        raise ImportError("render_gantt_png needs matplotlib: pip install matplotlib") from e
    rows = _rows(list(tracks), track_by)
    keys = sorted(rows)
    all_tasks = [t for k in keys for t in rows[k][1]]
    origin = min((t.start_ns for t in all_tasks), default=0)
    types = sorted({t.task_type for t in all_tasks})
    cmap = plt.get_cmap("tab10")
    colour = {tt: cmap(i % 10) for i, tt in enumerate(types)}
    height = max(2.0, 0.3 * len(keys) + 1.2)
    fig, ax = plt.subplots(figsize=(12, height))
    for y, key in enumerate(keys):
        bars = [((t.start_ns - origin) / 1000.0, max(t.end_ns - t.start_ns, 1) / 1000.0) for t in rows[key][1]]
        cols = [colour[t.task_type] for t in rows[key][1]]
        if bars:
            ax.broken_barh(bars, (y - 0.4, 0.8), facecolors=cols, edgecolor="black", linewidth=0.3)
    ax.set_yticks(range(len(keys)))
    ax.set_yticklabels([f"r{k[0]} {rows[k][0]}" for k in keys], fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("time (µs, aligned across ranks)")
    ax.set_title(title or "triton_dist intra-kernel profile")
    ax.legend(handles=[Patch(color=colour[t], label=_task_name(task_names, t)) for t in types], loc="upper right",
              fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
