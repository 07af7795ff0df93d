"""Simulator lowering of the intra-kernel profiler's clock reads (``triton_dist.tools.profiler``).

* ``timestamp``: ``time.monotonic_ns()`` — CLOCK_MONOTONIC, one clock for every rank process of the machine, in ns.
* ``sm_id``: there are no SMs; the linear program id stands in for one (each program is its own "SM").
"""
from __future__ import annotations

import time

import numpy as np
import triton.language as tl

from ... import _compat

#: ``time.monotonic_ns`` counts nanoseconds.
TICKS_PER_SECOND = 1_000_000_000


def now_ns() -> int:
    """The simulator's device clock, read on the host (used to align ranks)."""
    return time.monotonic_ns()


def timestamp(*, target, _semantic):
    """int64 scalar: the host's monotonic clock now (ns)."""
    return _compat.interpreter_value(np.array([now_ns()], dtype=np.int64), tl.int64)


def sm_id(*, target, _semantic):
    """int32 scalar: the linear program id (x fastest) of the calling program."""
    sem = _compat.interpreter_semantic()
    x, y, z = (int(sem.program_id(a).handle.data.reshape(-1)[0]) for a in range(3))
    nx, ny = (int(sem.num_programs(a).handle.data.reshape(-1)[0]) for a in range(2))
    return _compat.interpreter_value(np.array([x + nx * (y + ny * z)], dtype=np.int32), tl.int32)


def ticks_per_second(*, target, _semantic):
    return TICKS_PER_SECOND
