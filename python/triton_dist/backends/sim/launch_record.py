"""Per-launch state for the sim lowerings: which interpreted launch, and which program of it, the calling thread runs.

The simulator's grid executor (``triton_dist.runtime.sim.interpreter.ConcurrentGridExecutor``) runs every program of
a launch in its own thread and binds each thread to the launch's :class:`LaunchRecord` with :func:`bind_program`;
the lowerings read it back with :func:`current_launch`, so they can keep per-launch state (e.g. which program
issues device collectives) decided by program, not by thread timing.
"""
from __future__ import annotations

import threading

__all__ = ["LaunchRecord", "bind_program", "current_launch"]


class LaunchRecord:
    """One interpreted launch: ``state`` is a dict the lowerings share across its programs, guarded by ``lock``."""

    __slots__ = ("lock", "state")

    def __init__(self):
        self.lock = threading.Lock()
        self.state = {}


def bind_program(thread: threading.Thread, launch: LaunchRecord, program) -> None:
    """Mark ``thread`` (before it starts) as running program ``program`` (``(x, y, z)``) of ``launch``."""
    thread.triton_dist_launch = launch
    thread.triton_dist_program = program


def current_launch():
    """``(LaunchRecord, program index)`` of the calling program thread, or ``(None, None)`` outside one (the stock
    sequential executor binds no record)."""
    t = threading.current_thread()
    return getattr(t, "triton_dist_launch", None), getattr(t, "triton_dist_program", None)
