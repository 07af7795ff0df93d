"""Tile-level dependencies derived from what each tile reads and writes.

Tasks are numbered in the order their ops were added (the program order of the model step). A task depends on

* the last earlier task that wrote any byte it reads (read after write),
* the last earlier writer and every reader since of any byte it writes (write after write, write after read),

so buffers may be reused within a step (e.g. one activation buffer for every layer) and the result is the one of
running the ops one after another. Per storage, an interval map keeps, for each byte range, its last writer and its
readers since that write; a write replaces the range's record, so the map stays as small as the set of live
ranges, not the number of tasks.
"""
from __future__ import annotations

import bisect
from typing import Dict, List, Sequence, Tuple

from .task import Op, Task

__all__ = ["build_tasks", "dep_ranges"]


class _Segments:
    """Disjoint byte ranges of one storage: ``starts`` sorted, ``segs[i] = [lo, hi, writer, readers]``."""

    def __init__(self):
        self.starts: List[int] = []
        self.segs: List[list] = []

    def _split_at(self, x: int) -> None:
        i = bisect.bisect_right(self.starts, x) - 1
        if i >= 0:
            lo, hi, w, rd = self.segs[i]
            if lo < x < hi:
                self.segs[i] = [lo, x, w, list(rd)]
                self.segs.insert(i + 1, [x, hi, w, list(rd)])
                self.starts.insert(i + 1, x)

    def _cover(self, lo: int, hi: int) -> List[list]:
        """Split so that ``[lo, hi)`` is a union of segments (filling gaps with empty ones); return them."""
        self._split_at(lo)
        self._split_at(hi)
        i = bisect.bisect_left(self.starts, lo)
        out, pos = [], lo
        while pos < hi:
            if i < len(self.segs) and self.segs[i][0] == pos:
                seg = self.segs[i]
                out.append(seg)
                pos = seg[1]
                i += 1
            else:
                nxt = self.segs[i][0] if i < len(self.segs) else hi
                stop = min(nxt, hi)
                seg = [pos, stop, None, []]
                self.segs.insert(i, seg)
                self.starts.insert(i, pos)
                out.append(seg)
                pos = stop
                i += 1
        return out

    def overlapping(self, lo: int, hi: int):
        i = max(bisect.bisect_right(self.starts, lo) - 1, 0)
        while i < len(self.segs) and self.segs[i][0] < hi:
            if self.segs[i][1] > lo:
                yield self.segs[i]
            i += 1


def build_tasks(ops: Sequence[Op]) -> List[Task]:
    """Number the tiles of ``ops`` in order and derive each one's dependencies (see the module docstring)."""
    maps: Dict[int, _Segments] = {}
    tasks: List[Task] = []
    for op_index, op in enumerate(ops):
        first = len(tasks)
        for tile_index, tile in enumerate(op.tiles):
            idx = first + tile_index
            deps = set()
            for r in tile.reads:
                for seg in maps.setdefault(r.storage, _Segments()).overlapping(r.lo, r.hi):
                    if seg[2] is not None:
                        deps.add(seg[2])
            for w in tile.writes:
                for seg in maps.setdefault(w.storage, _Segments()).overlapping(w.lo, w.hi):
                    if seg[2] is not None:
                        deps.add(seg[2])
                    deps.update(seg[3])
            deps.discard(idx)
            if deps and not tile.waits:
                raise ValueError(f"{op.name} tile {tile_index}: a tile that never waits (waits=False) touches bytes "
                                 f"written or read by earlier tasks {sorted(deps)[:4]}")
            tasks.append(Task(index=idx, op=op_index, tile=tile_index, deps=sorted(deps), cost=tile.cost,
                              waits=tile.waits))
            for r in tile.reads:
                for seg in maps[r.storage]._cover(r.lo, r.hi):
                    if not seg[3] or seg[3][-1] != idx:
                        seg[3].append(idx)
            for w in tile.writes:
                for seg in maps[w.storage]._cover(w.lo, w.hi):
                    seg[2] = idx
                    seg[3] = []
    return tasks


def dep_ranges(deps: Sequence[int]) -> List[Tuple[int, int]]:
    """Sorted task indices as runs ``(first, count)`` of consecutive indices (one scoreboard wait per run)."""
    runs: List[Tuple[int, int]] = []
    for d in deps:
        if runs and runs[-1][0] + runs[-1][1] == d:
            runs[-1] = (runs[-1][0], runs[-1][1] + 1)
        else:
            runs.append((d, 1))
    return runs
