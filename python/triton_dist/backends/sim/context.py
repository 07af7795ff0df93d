"""The simulator state the sim lowerings read, as they need it: :class:`SimContext` declares it, the simulator runtime
implements it (``triton_dist.runtime.sim.heap.SimHeapContext``) and installs the running one with
:func:`set_current`. The lowerings reach it through :func:`current`, so the backend never imports the runtime."""
from __future__ import annotations

import threading
from typing import Optional


class SimContext:
    """Per-process simulator state. Attributes:

    ``rank``, ``world_size``, ``local_rank``, ``local_world_size``: this process's coordinates.
    ``heap_size``: bytes per rank partition. ``wait_timeout_s``: how long a spin-wait may take before it raises.
    ``abort_event``: set while a program of the running launch has failed; the context's spin-waits then stop
    (``run_grid`` sets it on the first failing program and clears it around each launch).
    """

    rank: int
    world_size: int
    local_rank: int
    local_world_size: int
    heap_size: int
    wait_timeout_s: float
    abort_event: threading.Event

    def base(self, rank: int) -> int:
        """Address (in this process) of ``rank``'s heap partition."""
        raise NotImplementedError  # implemented by the runtime's concrete context

    def translate(self, addr, peer):
        """Map address(es) in this rank's partition to the same offset in ``peer``'s partition.

        ``addr`` and ``peer`` are ints or numpy arrays (broadcast). An address outside this rank's partition
        raises ``ValueError`` naming it (the GPU analogue, ``nvshmem_ptr``, returns null there)."""
        raise NotImplementedError

    def owner_of(self, addr: int) -> Optional[int]:
        """Which rank's partition ``addr`` lies in, or None if it is not on the heap."""
        raise NotImplementedError


_current: Optional[SimContext] = None


def set_current(ctx: Optional[SimContext]) -> None:
    global _current
    _current = ctx


def is_active() -> bool:
    return _current is not None


def current() -> SimContext:
    """The running simulator context; raises a clear error when the simulator has not been initialised."""
    if _current is None:
        raise RuntimeError("triton_dist simulator is not initialised: call triton_dist.utils.initialize_distributed() "
                           "(with TRITON_DIST_BACKEND=sim or no GPU) before launching a distributed kernel")
    return _current


