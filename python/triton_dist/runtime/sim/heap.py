"""The simulator's symmetric heap: one shared file mapping, a symmetric allocator, barriers and spin-waits.

Layout of the shared segment (every rank maps it whole, so every partition has an address in every process)::

    [ header (control block) | partition 0 | partition 1 | ... | partition world_size-1 ]

The header holds per-rank barrier arrival words and the records that collective calls (create/free) compare.
All cross-process synchronisation uses real hardware atomics on the shared pages, through Triton's interpreter
helpers (``triton_dist._compat.raw_atomic_*``): 64-bit ``std::atomic`` operations on a ``MAP_SHARED`` mapping are
atomic across processes, which a lock file or a ``multiprocessing`` primitive created before fork could not give
to a torchrun launch (no common parent) and which also lets sim lowerings poll words written by peers' kernels.
"""
from __future__ import annotations

import ctypes
import mmap
import os
import re
import threading
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from .context import SimAborted, SimContext, SimWaitTimeout  # noqa: F401  (the waits' errors, re-exported)
from ...backends.sim.context import DEFAULT_WAIT_TIMEOUT_S, wait_timeout_from_env  # noqa: F401

ALIGN = 256  #: allocation alignment in bytes (128-bit and wider accesses are aligned)
DEFAULT_HEAP_SIZE = 256 << 20  #: bytes per rank partition unless TRITON_DIST_SIM_SYMMETRIC_SIZE says otherwise
_MAGIC = 0x7472697473696D31  # "tritsim1"

# barrier slots in the header
SLOT_HOST = 0  #: barrier_all_on_stream
SLOT_DEVICE = 1  #: ctx.barrier_all() (sim lowering of libshmem barrier_all)
SLOT_NODE0 = 2  #: ctx.barrier_node(): one slot per node from here

_REC_WORDS = 8  # u64 words per collective record


class SimHeapExhausted(MemoryError):
    """The symmetric heap partition has no free block large enough."""


class SimCollectiveMismatch(ValueError):
    """Ranks made different collective heap calls (sizes, dtypes or order differ)."""


def parse_size(text: str, var: str = "size") -> int:
    """Parse ``"256M"``, ``"1G"``, ``"64MiB"``, ``"1048576"`` into bytes (K/M/G/T are powers of 1024)."""
    m = re.fullmatch(r"\s*(\d+)\s*([kKmMgGtT]?)(i?[bB])?\s*", str(text))
    if not m:
        raise ValueError(f"{var}={text!r} is not a size; use bytes or a K/M/G/T suffix (e.g. 64M, 1G)")
    mult = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}[m.group(2).lower()]
    return int(m.group(1)) * mult


def heap_size_from_env() -> Tuple[int, str]:
    """Bytes per rank partition and the variable it came from (TRITON_DIST_SIM_SYMMETRIC_SIZE, then
    NVSHMEM_SYMMETRIC_SIZE, then the default)."""
    for var in ("TRITON_DIST_SIM_SYMMETRIC_SIZE", "NVSHMEM_SYMMETRIC_SIZE"):
        if os.environ.get(var):
            size = parse_size(os.environ[var], var)
            if size <= 0:
                raise ValueError(f"{var}={os.environ[var]!r} must be positive")
            return size, var
    return DEFAULT_HEAP_SIZE, "default"


def _round_up(x: int, a: int) -> int:
    return (x + a - 1) // a * a


def header_bytes(world_size: int, num_nodes: int) -> int:
    nslots = SLOT_NODE0 + num_nodes
    words = 16 + nslots * world_size + 2 * world_size * _REC_WORDS + 2 * world_size  # ..., process table
    return _round_up(words * 8, 1 << 16)


def process_identity(pid: int) -> Optional[int]:
    """The start time of process ``pid`` (clock ticks since boot, ``/proc/<pid>/stat`` field 22), 0 where /proc
    is missing (then only the pid identifies it), or None when no such process is running (gone, or a zombie that
    its parent has not reaped yet: it has exited)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
    except FileNotFoundError:
        return None
    except OSError:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return None
        except PermissionError:
            pass
        return 0
    if fields[0] in (b"Z", b"X"):
        return None
    return int(fields[19])


def segment_dirs() -> List[str]:
    """Where segments may live, in order of preference (``TRITON_DIST_SIM_SHM_DIR`` overrides)."""
    if os.environ.get("TRITON_DIST_SIM_SHM_DIR"):
        return [os.environ["TRITON_DIST_SIM_SHM_DIR"]]
    return [d for d in ("/dev/shm", "/tmp") if os.path.isdir(d)]


def segment_prefix(port) -> str:
    return f"triton_dist_sim_{port}_"


def create_segment(total: int, name: str, var: str) -> str:
    """Create the (sparse, zero-filled) segment file; pick /dev/shm unless it has less free space than ``total``
    (pages are only used when touched, but touching past a full tmpfs kills the process with SIGBUS)."""
    tried = []
    for d in segment_dirs():
        st = os.statvfs(d)
        free = st.f_bavail * st.f_frsize
        if free < total:
            tried.append(f"{d} ({free >> 20} MiB free)")
            continue
        path = os.path.join(d, name)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            os.ftruncate(fd, total)
        finally:
            os.close(fd)
        return path
    raise MemoryError(f"triton_dist sim: no room for the symmetric heap segment of {total >> 20} MiB; tried "
                      f"{', '.join(tried) or 'no directory'}. Lower {var if var != 'default' else 'TRITON_DIST_SIM_SYMMETRIC_SIZE'} "
                      f"or set TRITON_DIST_SIM_SHM_DIR to a directory with more space")


class _Allocator:
    """First-fit free-list allocator over offsets [0, size). Deterministic: equal call sequences on every rank
    give equal offsets (the symmetric property)."""

    def __init__(self, size: int):
        self.size = size
        self.free: List[List[int]] = [[0, size]]
        self.used: Dict[int, int] = {}

    def find(self, nbytes: int) -> Optional[int]:
        for off, sz in self.free:
            if sz >= nbytes:
                return off
        return None

    def commit(self, off: int, nbytes: int) -> None:
        for i, (o, sz) in enumerate(self.free):
            if o == off:
                if sz == nbytes:
                    del self.free[i]
                else:
                    self.free[i] = [o + nbytes, sz - nbytes]
                self.used[off] = nbytes
                return
        raise AssertionError(f"offset {off} is not the start of a free block")

    def release(self, off: int) -> None:
        nbytes = self.used.pop(off)
        self.free.append([off, nbytes])
        self.free.sort()
        merged: List[List[int]] = []
        for o, sz in self.free:
            if merged and merged[-1][0] + merged[-1][1] == o:
                merged[-1][1] += sz
            else:
                merged.append([o, sz])
        self.free = merged

    def free_bytes(self) -> int:
        return sum(sz for _, sz in self.free)

    def largest_free(self) -> int:
        return max((sz for _, sz in self.free), default=0)


class SimHeapContext(SimContext):
    """Concrete simulator context over a mapped segment. Construct with :meth:`attach` (see ``SimBackend``)."""

    def __init__(self, *, rank: int, world_size: int, local_rank: int, local_world_size: int, heap_size: int,
                 heap_size_var: str, path: str, mm: mmap.mmap, header: int):
        self.rank = rank
        self.world_size = world_size
        self.local_rank = local_rank
        self.local_world_size = local_world_size
        self.heap_size = heap_size
        self.heap_size_var = heap_size_var
        self.wait_timeout_s = wait_timeout_from_env()
        self.path = path
        self._mm = mm
        self._header = header
        holder = ctypes.c_char.from_buffer(mm)
        self.map_addr = ctypes.addressof(holder)
        del holder  # the address stays valid while the mapping is open
        self._map_end = self.map_addr + len(mm)
        self._heap_start = self.map_addr + header
        self.alloc = _Allocator(heap_size)
        self._gens: Dict[int, int] = {}
        self._coll_seq = 0
        self._lock = threading.RLock()
        #: set when a program of the running launch failed: every spin-wait of this process then raises SimAborted
        self.abort_event = threading.Event()

    # ----------------------------------------------------------------- addresses
    @property
    def num_nodes(self) -> int:
        return self.world_size // self.local_world_size

    def base(self, rank: int) -> int:
        if not 0 <= int(rank) < self.world_size:
            raise ValueError(f"rank {rank} out of range [0, {self.world_size})")
        return self._heap_start + int(rank) * self.heap_size

    def owner_of(self, addr: int) -> Optional[int]:
        addr = int(addr)
        if not self._heap_start <= addr < self._heap_start + self.world_size * self.heap_size:
            return None
        return (addr - self._heap_start) // self.heap_size

    def offset_of(self, addr: int) -> Optional[int]:
        """Symmetric offset of ``addr`` inside its owner's partition, or None off the heap."""
        owner = self.owner_of(addr)
        return None if owner is None else int(addr) - self.base(owner)

    def translate(self, addr, peer):
        mine = self.base(self.rank)
        if isinstance(addr, np.ndarray) or isinstance(peer, np.ndarray):
            a = np.asarray(addr, dtype=np.uint64)
            p = np.asarray(peer).astype(np.int64)
            if p.size and (p.min() < 0 or p.max() >= self.world_size):
                raise ValueError(f"symm_at: peer rank(s) {np.unique(p).tolist()} out of range [0, {self.world_size})")
            bad = (a < np.uint64(mine)) | (a >= np.uint64(mine + self.heap_size))
            if bad.any():
                first = int(a[bad].reshape(-1)[0]) if a.ndim else int(a)
                raise ValueError(f"symm_at: address {self.describe_addr(first)} is not in rank {self.rank}'s "
                                 f"symmetric heap partition")
            return (a - np.uint64(mine)) + (np.uint64(self._heap_start)
                                            + p.astype(np.uint64) * np.uint64(self.heap_size))
        addr = int(addr)
        if not mine <= addr < mine + self.heap_size:
            raise ValueError(f"symm_at: address {self.describe_addr(addr)} is not in rank {self.rank}'s symmetric "
                             f"heap partition")
        return addr - mine + self.base(int(peer))

    # ----------------------------------------------------------------- header words
    def _word(self, index: int) -> int:
        return self.map_addr + 8 * index

    def _arrival_addr(self, slot: int, rank: int) -> int:
        return self._word(16 + slot * self.world_size + rank)

    def _record_addr(self, parity: int, rank: int) -> int:
        nslots = SLOT_NODE0 + self.num_nodes
        return self._word(16 + nslots * self.world_size + (parity * self.world_size + rank) * _REC_WORDS)

    def _process_addr(self, rank: int) -> int:
        """Two words per rank after the records: the rank's pid and its start time (:func:`process_identity`)."""
        nslots = SLOT_NODE0 + self.num_nodes
        return self._word(16 + nslots * self.world_size + 2 * self.world_size * _REC_WORDS + 2 * rank)

    def publish_process(self) -> None:
        """Record this rank's process in the header (at attach, before the ranks' first barrier), so that a peer's
        spin-wait can tell that this process has exited (:meth:`exited_peer`)."""
        pid = os.getpid()
        self.atomic_store(np.array([self._process_addr(self.rank), self._process_addr(self.rank) + 8],
                                   dtype=np.uint64), np.array([pid, process_identity(pid) or 0], dtype=np.uint64))

    def exited_peer(self) -> Optional[Tuple[int, int]]:
        """``(rank, pid)`` of the first peer rank whose recorded process is no longer running (gone, a zombie, or
        the pid now belongs to another process), or None."""
        for r in range(self.world_size):
            if r == self.rank:
                continue
            addr = self._process_addr(r)
            pid, start = (int(v) for v in self.atomic_load(np.array([addr, addr + 8], dtype=np.uint64)))
            if pid == 0:
                continue  # not recorded (yet)
            now = process_identity(pid)
            if now is None or (start and now and now != start):
                return r, pid
        return None

    def write_header_identity(self) -> None:
        words = np.frombuffer(self._mm, dtype=np.uint64, count=4)
        words[:] = [_MAGIC, self.world_size, self.heap_size, self._header]
        del words

    def check_header_identity(self) -> None:
        words = np.frombuffer(self._mm, dtype=np.uint64, count=4).copy()
        expect = [_MAGIC, self.world_size, self.heap_size, self._header]
        if words.tolist() != expect:
            raise RuntimeError(f"triton_dist sim: segment {self.path} header {words.tolist()} does not match this "
                               f"rank's (magic, world_size, heap_size, header) {expect}: ranks disagree on "
                               f"{self.heap_size_var} or WORLD_SIZE")

    # ----------------------------------------------------------------- atomics
    # ----------------------------------------------------------------- barriers
    def _barrier(self, slot: int, ranks: Sequence[int], op: str) -> None:
        with self._lock:
            gen = self._gens.get(slot, 0) + 1
            self._gens[slot] = gen
            self.atomic_store(self._arrival_addr(slot, self.rank), gen)
            addrs = np.array([self._arrival_addr(slot, r) for r in ranks], dtype=np.uint64)
            seen = [None]

            def ok():
                seen[0] = self.atomic_load(addrs)
                return bool(np.all(seen[0] >= gen))

            def describe():
                missing = [r for r, v in zip(ranks, seen[0]) if v < gen]
                return f"barrier #{gen}: rank(s) {missing} have not arrived (arrival counts {seen[0].tolist()})"

            self.spin_until(ok, describe, op=op)

    def barrier_all(self, op: str = "barrier_all") -> None:
        """All ranks meet (the sim lowering of ``libshmem_device.barrier_all``; call it once per rank per
        barrier, e.g. from one program). Release/acquire: writes before it are visible after it on every rank."""
        self._barrier(SLOT_DEVICE, range(self.world_size), op)

    def barrier_node(self, op: str = "barrier_node") -> None:
        """The ranks of this node meet (``local_world_size`` of them)."""
        node = self.rank // self.local_world_size
        first = node * self.local_world_size
        self._barrier(SLOT_NODE0 + node, range(first, first + self.local_world_size), op)

    def host_barrier(self, op: str = "barrier_all_on_stream") -> None:
        """The host-side barrier (``barrier_all_on_stream``); separate counters from :meth:`barrier_all`."""
        self._barrier(SLOT_HOST, range(self.world_size), op)

    # ----------------------------------------------------------------- collectives
    def collective_check(self, kind: int, words: Sequence[int], what: str, describe: Callable[[List[int]], str]):
        """Every rank publishes ``(seq, kind, *words)``; after a host barrier each compares all ranks' records.
        Raises :class:`SimCollectiveMismatch` (on every rank) when they differ. Double-buffered by sequence parity,
        so one barrier per call suffices."""
        with self._lock:
            self._coll_seq += 1
            seq = self._coll_seq
            rec = [seq, kind] + [int(w) & 0xFFFFFFFFFFFFFFFF for w in words]
            rec += [0] * (_REC_WORDS - len(rec))
            base = self._record_addr(seq & 1, self.rank)
            self.atomic_store(np.arange(_REC_WORDS, dtype=np.uint64) * np.uint64(8) + np.uint64(base),
                              np.array(rec, dtype=np.uint64))
            self._barrier(SLOT_HOST, range(self.world_size), what)
            records = []
            for r in range(self.world_size):
                b = self._record_addr(seq & 1, r)
                records.append(self.atomic_load(np.arange(_REC_WORDS, dtype=np.uint64) * np.uint64(8)
                                                + np.uint64(b)).tolist())
            if any(rr != records[0] for rr in records):
                lines = "\n".join(f"  rank {r}: {describe(rr)}" for r, rr in enumerate(records))
                raise SimCollectiveMismatch(f"triton_dist sim: {what} is collective and ranks disagree "
                                            f"(every rank must make the same calls in the same order):\n{lines}")

    def reset_sync_state(self) -> None:
        """Forget barrier generations and collective sequence numbers (caller zeroes the header words under an
        external barrier, see ``SimBackend.reset``)."""
        with self._lock:
            self._gens.clear()
            self._coll_seq = 0

    def zero_header_sync_words(self) -> None:
        start = 16 * 8
        end = self._record_addr(1, self.world_size - 1) - self.map_addr + _REC_WORDS * 8
        view = np.frombuffer(self._mm, dtype=np.uint8, count=end - start, offset=start)
        view[:] = 0
        del view

    def close(self) -> None:
        """Unmap (when no tensor still references the mapping; otherwise the OS unmaps at exit)."""
        mm, self._mm = self._mm, None
        if mm is None:
            return
        try:
            mm.close()
        except BufferError:
            _orphaned_mappings.append(mm)  # live tensors still view it; it goes away with them / at exit


_orphaned_mappings: List[mmap.mmap] = []
