"""Placing the step's tasks on the workers (the persistent programs, one or more per SM).

Static queues (the default): each worker gets its own queue, in increasing task index (a topological order), so
with every worker resident no queue can block another forever: the lowest unfinished task heads its queue and
everything it waits for has a lower index, hence has finished. Two policies:

* ``"balanced"``: list scheduling on estimated costs (bytes moved plus a fixed per-task overhead): a task goes to the
  worker on which it can start first (``max(worker free, its dependencies' estimated finish)``);
* ``"round_robin"``: task ``i`` to worker ``i % num_workers``.

The dynamic queue (``dynamic=True`` in the builder) is not placed here: every program takes the next task index
from an atomic ticket counter, in the same topological order.
"""
from __future__ import annotations

from typing import List, Sequence

from .task import Task

__all__ = ["POLICIES", "assign", "TASK_OVERHEAD_BYTES"]

POLICIES = ("balanced", "round_robin")

#: Fixed cost of a task for the balanced policy, in bytes of traffic (~1 us of one SM's share of HBM bandwidth).
TASK_OVERHEAD_BYTES = 32 * 1024


def assign(tasks: Sequence[Task], num_workers: int, policy: str = "balanced") -> List[List[int]]:
    """Per-worker queues of task indices (each increasing); sets ``task.worker``."""
    if policy not in POLICIES:
        raise ValueError(f"scheduler policy {policy!r} is not supported; accepted: {', '.join(map(repr, POLICIES))}")
    if num_workers < 1:
        raise ValueError(f"num_workers must be >= 1, got {num_workers}")
    queues: List[List[int]] = [[] for _ in range(num_workers)]
    if policy == "round_robin":
        for t in tasks:
            t.worker = t.index % num_workers
            queues[t.worker].append(t.index)
        return queues
    free = [0.0] * num_workers
    finish = [0.0] * len(tasks)
    for t in tasks:
        ready = max((finish[d] for d in t.deps), default=0.0)
        best = min(range(num_workers), key=lambda w: (max(free[w], ready), w))
        start = max(free[best], ready)
        finish[t.index] = start + t.cost + TASK_OVERHEAD_BYTES
        free[best] = finish[t.index]
        t.worker = best
        queues[best].append(t.index)
    return queues
