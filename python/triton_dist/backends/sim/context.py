"""The simulator state the sim lowerings read, as they need it: :class:`SimContext` declares it, the simulator runtime
implements it (``triton_dist.runtime.sim.heap.SimHeapContext``) and installs the running one with
:func:`set_current`. The lowerings reach it through :func:`current`, so the backend never imports the runtime."""
from __future__ import annotations

import os
import threading
import time
from typing import Callable, Optional, Tuple

import numpy as np

from ... import _compat


class SimWaitTimeout(RuntimeError):
    """A simulator spin-wait (signal wait, barrier, collective) exceeded its timeout (``wait_timeout_s``,
    ``TRITON_DIST_SIM_WAIT_TIMEOUT``, or the bounded-wait mode's ``TRITON_DIST_BOUNDED_WAIT``)."""


class SimAborted(RuntimeError):
    """A spin-wait was abandoned because another program of the same launch failed."""


class SimPeerExited(RuntimeError):
    """A spin-wait was abandoned because a peer rank's process has exited (it can never raise the awaited value).
    ``peer``: that rank; ``op``: the waiting operation."""

    def __init__(self, message: str, peer: int = -1, op: str = ""):
        super().__init__(message)
        self.peer, self.op = peer, op


class SimSignalMismatch(RuntimeError):
    """A tagged ``dl.wait`` (``tag_bits``) saw a signal of its epoch (or a later one) that differs from the value it
    waits for: the ranks made different calls. Fields: ``rank``, ``kernel`` (or None), ``tag_bits``,
    ``expected_epoch`` / ``expected_tag`` (this rank's call), ``seen_epoch`` / ``seen_tag`` (the signal's)."""

    def __init__(self, message: str, **fields):
        super().__init__(message)
        self.__dict__.update(fields)


#: the spin-wait bound without ``TRITON_DIST_SIM_WAIT_TIMEOUT``
DEFAULT_WAIT_TIMEOUT_S = 60.0
#: how often (seconds of waiting) a spin-wait checks that the peer ranks' processes are still alive
PEER_CHECK_S = 0.25
WAIT_TIMEOUT_ENV = "TRITON_DIST_SIM_WAIT_TIMEOUT"

#: Why a wait inside a kernel may never end on the simulator although the same program ends on a GPU.
SYNC_LAUNCH_NOTE = ("If the host sets it after launching the kernel: simulator launches are synchronous (the launch "
                    "returns when the kernel has finished; on a GPU they are asynchronous per stream), so the kernel "
                    "never sees it; set it before the launch, or from another rank.")


def wait_timeout_from_env() -> float:
    """Seconds a simulator spin-wait may take: ``TRITON_DIST_SIM_WAIT_TIMEOUT`` (> 0), default 60."""
    text = os.environ.get(WAIT_TIMEOUT_ENV)
    if not text:
        return DEFAULT_WAIT_TIMEOUT_S
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"{WAIT_TIMEOUT_ENV}={text!r} is not a number of seconds") from None
    if value <= 0:
        raise ValueError(f"{WAIT_TIMEOUT_ENV}={text!r} must be > 0")
    return value


_CMPS = {"eq": np.equal, "ne": np.not_equal, "ge": np.greater_equal, "gt": np.greater, "le": np.less_equal,
         "lt": np.less}
_SYM = {"eq": "==", "ne": "!=", "ge": ">=", "gt": ">", "le": "<=", "lt": "<"}


class SimContext:
    """Per-process simulator state. Attributes:

    ``rank``, ``world_size``, ``local_rank``, ``local_world_size``: this process's coordinates.
    ``heap_size``: bytes per rank partition. ``wait_timeout_s``: how long a spin-wait may take before it raises.
    ``abort_event``: set while a program of the running launch has failed; the context's spin-waits then stop
    (``run_grid`` sets it on the first failing program and clears it around each launch); None: never aborted.

    The runtime implements :meth:`base`, :meth:`translate` and :meth:`owner_of`; the atomics, the waits and the
    address descriptions below are written once here over those and Triton's interpreter atomics (raw addresses,
    real hardware atomics: they work across processes on a shared mapping).
    """

    rank: int
    world_size: int
    local_rank: int
    local_world_size: int
    heap_size: int
    wait_timeout_s: float = 60.0
    abort_event: Optional[threading.Event] = None

    def exited_peer(self) -> Optional[Tuple[int, int]]:
        """``(rank, pid)`` of a peer rank whose process has exited, or None (all alive, or not known). The runtime's
        context records every rank's process; this default knows of none."""
        return None

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

    def describe_addr(self, addr: int) -> str:
        """``addr`` as error messages name it: its offset in its owner's partition, or that it is off the heap."""
        addr = int(addr)
        owner = self.owner_of(addr)
        if owner is None:
            return f"0x{addr:x} (not on the symmetric heap)"
        return f"0x{addr:x} (symmetric offset 0x{addr - self.base(owner):x} in rank {owner}'s partition)"

    # ----------------------------------------------------------------- atomics on raw addresses
    def atomic_load(self, addrs, np_dtype=np.uint64) -> np.ndarray:
        """Acquire load(s) of 32/64-bit words at raw address(es) (an atomic ``or 0``)."""
        return _compat.raw_atomic_rmw("or", addrs, np.zeros(1, dtype=np_dtype), "acquire")

    def atomic_store(self, addrs, values, np_dtype=np.uint64) -> None:
        """Release store(s) (an atomic exchange)."""
        _compat.raw_atomic_rmw("xchg", addrs, np.asarray(values, dtype=np_dtype), "release")

    def atomic_add(self, addrs, values, np_dtype=np.uint64, sem="acq_rel") -> np.ndarray:
        return _compat.raw_atomic_rmw("add", addrs, np.asarray(values, dtype=np_dtype), sem)

    # ----------------------------------------------------------------- waiting
    def spin_until(self, predicate: Callable[[], bool], describe: Callable[[], str], op: str = "wait",
                   timeout_s: Optional[float] = None, timeout_hint: Optional[str] = None) -> None:
        """Poll ``predicate()`` (yielding, then sleeping up to 1 ms between polls) until it is true.

        Raises :class:`SimWaitTimeout` after ``timeout_s`` (default ``self.wait_timeout_s``) with
        ``describe()`` in the message, :class:`SimAborted` when ``abort_event`` is set, or :class:`SimPeerExited`
        when a peer rank's process has exited (checked every :data:`PEER_CHECK_S` seconds of waiting). The timeout
        message ends with ``timeout_hint``, how to wait longer: give it with ``timeout_s`` when the bound is not the
        context's own (e.g. the bounded-wait mode's); default: the variable that sets ``wait_timeout_s``."""
        if predicate():
            return
        timeout = self.wait_timeout_s if timeout_s is None else timeout_s
        start = time.monotonic()
        next_peer_check = start + PEER_CHECK_S
        delay = 0.0
        polls = 0
        while True:
            time.sleep(delay)
            if predicate():
                return
            polls += 1
            if polls > 20:
                delay = min(max(delay * 2, 2e-5), 1e-3)
            self.check_abort(op, describe)
            now = time.monotonic()
            if now >= next_peer_check:
                next_peer_check = now + PEER_CHECK_S
                self.check_peers_alive(op, describe)
            if now - start > timeout:
                raise self.timeout_error(op, timeout, describe(), timeout_hint)

    def check_peers_alive(self, op: str, describe: Callable[[], str]) -> None:
        """Raise :class:`SimPeerExited` (one line: this rank, the waiting op and kernel, the exited peer and the
        fix) when a peer rank's process has exited: the value this rank waits for can then never come."""
        gone = self.exited_peer()
        if gone is None:
            return
        peer, pid = gone
        kernel = _compat.interpreted_kernel_name()
        where = f" in kernel {kernel}" if kernel else ""
        raise SimPeerExited(f"[triton_dist sim] rank {self.rank}: {op}{where} waits for peer rank {peer}, whose "
                            f"process (pid {pid}) has exited ({describe()}); every rank must make the same "
                            f"collective calls: find why rank {peer} stopped early (its own error or exit), or launch "
                            f"with torchrun, which stops every rank when one fails", peer=peer, op=op)

    def check_abort(self, op: str, describe: Callable[[], str]) -> None:
        """Raise :class:`SimAborted` when another program of the running launch failed (``abort_event``)."""
        if self.abort_event is not None and self.abort_event.is_set():
            raise SimAborted(f"[triton_dist sim] rank {self.rank}: {op} abandoned because another program of "
                             f"this launch failed; state: {describe()}")

    def timeout_error(self, op: str, timeout: float, state: str, timeout_hint: Optional[str] = None):
        """The :class:`SimWaitTimeout` of a wait ``op`` that gave up after ``timeout`` s in state ``state``. Inside a
        kernel it names the kernel and says why a value the host sets after the launch is never seen
        (:data:`SYNC_LAUNCH_NOTE`); it ends with how to wait longer (``timeout_hint``, default: the variable)."""
        kernel = _compat.interpreted_kernel_name()
        where = f" in kernel {kernel}" if kernel else ""
        note = f" {SYNC_LAUNCH_NOTE}" if kernel else ""
        hint = timeout_hint or f"Set {WAIT_TIMEOUT_ENV} (seconds) to wait longer."
        return SimWaitTimeout(f"[triton_dist sim] rank {self.rank}: {op} timed out after {timeout:g} s{where}: "
                              f"{state}.{note} {hint}")

    def spin_wait(self, addr, expected, nbytes: int = 8, cmp: str = "eq", op: str = "wait", signed: bool = False,
                  timeout_s: Optional[float] = None, timeout_hint: Optional[str] = None) -> np.ndarray:
        """Spin until the ``nbytes``-wide word(s) at ``addr`` (int or array) compare ``cmp`` to ``expected``
        (scalar or per-address array), reading with acquire semantics. Returns the last values seen."""
        if cmp not in _CMPS:
            raise ValueError(f"spin_wait: cmp={cmp!r}; accepted: {sorted(_CMPS)}")
        if nbytes not in (4, 8):
            raise ValueError(f"spin_wait: nbytes={nbytes}; accepted: 4, 8")
        dt = {(4, False): np.uint32, (8, False): np.uint64, (4, True): np.int32, (8, True): np.int64}[(nbytes, signed)]
        addrs = np.asarray(addr, dtype=np.uint64).reshape(-1)
        exp = np.asarray(expected).astype(dt)
        seen = [None]

        def ok():
            seen[0] = self.atomic_load(addrs, dt)
            return bool(np.all(_CMPS[cmp](seen[0], exp)))

        def describe():
            vals = seen[0]
            bad = np.nonzero(~_CMPS[cmp](vals, exp))[0] if vals is not None else range(len(addrs))
            parts = []
            for i in list(bad)[:8]:
                e = exp.reshape(-1)[i] if exp.size > 1 else exp.reshape(-1)[0]
                parts.append(f"value at {self.describe_addr(int(addrs[i]))}: expected {_SYM[cmp]} {int(e)}, "
                             f"last seen {int(vals[i]) if vals is not None else '?'}")
            more = f" (+{len(bad) - 8} more)" if len(bad) > 8 else ""
            return "; ".join(parts) + more

        self.spin_until(ok, describe, op=op, timeout_s=timeout_s, timeout_hint=timeout_hint)
        return seen[0]


class LocalContext(SimContext):
    """What the sim lowerings wait through when no simulator is initialised (an interpreted kernel outside a
    distributed launch): rank 0 of 1, no symmetric heap, the default timeout."""

    rank, world_size, local_rank, local_world_size, heap_size = 0, 1, 0, 1, 0

    def __init__(self):
        self.wait_timeout_s = wait_timeout_from_env()

    def base(self, rank: int) -> int:
        return 0

    def translate(self, addr, peer):
        raise ValueError("no simulator is initialised: there is no symmetric heap to translate into")

    def owner_of(self, addr: int) -> Optional[int]:
        return None


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


