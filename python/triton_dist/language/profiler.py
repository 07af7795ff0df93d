"""Device side of the intra-kernel profiler: ``Profiler`` (use it inside ``@triton.jit`` / ``@triton_dist.jit``).

    profiler = Profiler.create(profiler_buffer, group_id=0, num_groups=1, is_leader=True, ENABLE_PROFILING=True)
    profiler = profiler.record(is_start=True, task_type=0)
    ...                                      # the task
    profiler = profiler.record(is_start=False, task_type=0)

``record`` returns the updated profiler (Triton values are immutable): always re-assign it. Each program (and
group, when a program runs several independent groups of warps) is one *track*; ``record`` appends one record
(tag, SM id, timestamp) to the track — the layout is in :mod:`triton_dist.profiler_layout`. Records past the
track's capacity are dropped, never written out of bounds.

``ENABLE_PROFILING`` is a compile-time switch: when it is False ``create`` and ``record`` emit nothing at all (no
clock or SM-id reads, no loads or stores), so instrumented kernels cost nothing when profiling is off.

Clock and SM id come from the target's lowering (``ProfilerLowering`` of ``triton_dist.language._backend``), picked
at trace time: NVIDIA ``%globaltimer`` / ``%smid``; AMD ``s_memrealtime`` / ``HW_ID``; the simulator the host's
monotonic clock and the program id. The program id of the leader thread writes; ``is_leader`` lets a kernel narrow that further
(e.g. ``tid(0) == 0`` inside a SIMT region).

Memory ordering: the clock read is preceded by a CTA-scope fence (NVIDIA) / ``s_waitcnt`` (AMD), so a stamp is not
taken before the program's earlier memory operations; records are plain stores, visible to the host after the
kernel completes.
"""
# No ``from __future__ import annotations``: Triton's aggregates check field values against the annotations.
import triton.language as tl

from .. import _compat
from .._compat import semantic_or_interpreter as _sem, unwrap_constexpr as _c
from ._backend import backend_for
from .. import profiler_layout as layout

__all__ = ["Profiler", "timestamp", "sm_id", "ticks_per_second"]


@_compat.builtin
def timestamp(_semantic=None):
    """int64 scalar: the target's device clock now (ticks; see :func:`ticks_per_second`). Not pure."""
    target, backend = backend_for(_semantic)
    return backend.profiler.timestamp(target=target, _semantic=_semantic)


@_compat.builtin
def sm_id(_semantic=None):
    """int32 scalar: the SM (NVIDIA) / CU (AMD) running this program; the simulator returns the program id."""
    target, backend = backend_for(_semantic)
    return backend.profiler.sm_id(target=target, _semantic=_semantic)


@_compat.builtin
def ticks_per_second(_semantic=None):
    """constexpr: the frequency of :func:`timestamp`'s clock for the target being traced."""
    target, backend = backend_for(_semantic)
    return tl.constexpr(backend.profiler.ticks_per_second(target=target, _semantic=_semantic))


def _as_i64(x, sem):
    x = x if isinstance(x, tl.tensor) else sem.to_tensor(_c(x))
    return x if x.dtype == tl.int64 else sem.cast(x, tl.int64)


def _check_task(op, is_start, task_type):
    s = _c(is_start)
    if not isinstance(s, tl.tensor) and not isinstance(s, (bool, int)):
        raise TypeError(f"Profiler.{op}: is_start must be a bool (or an integer scalar), got {type(s).__name__}")
    t = _c(task_type)
    if isinstance(t, tl.tensor):
        if not t.dtype.is_int() or t.type.is_block():
            raise TypeError(f"Profiler.{op}: task_type must be an integer scalar, got {t.type}")
    elif isinstance(t, bool) or not isinstance(t, int) or not 0 <= t <= layout.MAX_TASK_TYPE:
        raise ValueError(f"Profiler.{op}: task_type={t!r} is not supported; accepted: integers 0..{layout.MAX_TASK_TYPE}")


def _linear_pid(sem):
    x, y, z = (_as_i64(sem.program_id(a), sem) for a in range(3))
    nx, ny, nz = (_as_i64(sem.num_programs(a), sem) for a in range(3))
    pid = sem.add(x, sem.mul(nx, sem.add(y, sem.mul(ny, z, True), True), True), True)
    return pid, sem.mul(sem.mul(nx, ny, True), nz, True)


def _leader_mask(is_leader, sem):
    v = _c(is_leader)
    if isinstance(v, tl.tensor):
        if v.type.is_block():
            raise TypeError(f"Profiler.create: is_leader must be a scalar predicate, got {v.type}")
        return v if v.dtype == tl.int1 else sem.not_equal(v, sem.to_tensor(0))
    if not isinstance(v, (bool, int)):
        raise TypeError(f"Profiler.create: is_leader must be a bool or a scalar predicate, got {type(v).__name__}")
    return None if v else False


@_compat.aggregate
class Profiler:
    """Per-track profiler state (see the module docstring). Fields are constexpr zeros when profiling is off."""

    buffer: _compat.base_value  # pointer<int64> to this track's first record slot
    slot: _compat.base_value  # int32: index of the next record
    capacity: _compat.base_value  # int32: record slots of this track
    tag_hi: _compat.base_value  # int64: sm_id << 32
    is_leader: _compat.base_value  # int1 predicate (constexpr True/False when given as a Python bool)
    ENABLE_PROFILING: tl.constexpr

    @_compat.aggregate_init  # Triton hashes an aggregate's methods: builtins are skipped, plain functions rejected
    def __init__(self, buffer, slot, capacity, tag_hi, is_leader, ENABLE_PROFILING):
        self.buffer = buffer
        self.slot = slot
        self.capacity = capacity
        self.tag_hi = tag_hi
        self.is_leader = is_leader
        self.ENABLE_PROFILING = tl.constexpr(bool(_c(ENABLE_PROFILING)))

    @_compat.builtin
    def create(profiler_buffer, group_id=0, num_groups=1, is_leader=True, num_blocks=None, ENABLE_PROFILING=True,
               _semantic=None):
        """Start profiling this program: returns its ``Profiler``. Program 0 (group 0) writes the buffer header
        (grid size, groups, clock frequency). ``num_blocks`` overrides the number of programs that share the buffer
        (default: the launch grid). With ``ENABLE_PROFILING=False`` nothing is emitted."""
        enable = _c(ENABLE_PROFILING)
        if not isinstance(enable, (bool, int)):
            raise TypeError(f"Profiler.create: ENABLE_PROFILING must be a compile-time bool, got {type(enable).__name__}")
        zero = tl.constexpr(0)
        if not enable:
            return Profiler(zero, zero, zero, zero, tl.constexpr(False), False)
        ng = _c(num_groups)
        if isinstance(ng, bool) or not isinstance(ng, int) or ng < 1:
            raise ValueError(f"Profiler.create: num_groups={ng!r} is not supported; accepted: a compile-time int >= 1")
        gid = _c(group_id)
        if isinstance(gid, int) and not isinstance(gid, bool) and not 0 <= gid < ng:
            raise ValueError(f"Profiler.create: group_id={gid} is out of range for num_groups={ng}")
        buf = _c(profiler_buffer)
        if not isinstance(buf, tl.tensor) or not buf.dtype.is_ptr() or buf.type.is_block() \
                or buf.dtype.element_ty not in (tl.int64, tl.uint64):
            shown = getattr(buf, "type", type(buf).__name__)
            raise TypeError(f"Profiler.create: profiler_buffer must be a pointer to int64/uint64 (a torch.int64 "
                            f"tensor from alloc_profiler_buffer), got {shown}")
        sem = _sem(_semantic)
        target, backend = backend_for(_semantic)
        low = backend.profiler
        if buf.dtype.element_ty != tl.int64:
            buf = sem.bitcast(buf, tl.pointer_type(tl.int64))
        pid, nprog = _linear_pid(sem)
        if num_blocks is not None and _c(num_blocks) is not None:
            nprog = _as_i64(num_blocks, sem)
        leader = _leader_mask(is_leader, sem)
        gid_t = _as_i64(gid, sem)
        ng_t = sem.to_tensor(ng)
        # header: written by program 0 / group 0
        first = sem.equal(sem.add(pid, gid_t, True), sem.to_tensor(0))
        hmask = first if leader is None else sem.and_(first, leader) if leader is not False else None
        if hmask is not None:
            grid_word = sem.or_(nprog, sem.shl(_as_i64(ng_t, sem), _as_i64(32, sem)))
            _compat.semantic_store(sem, sem.add(buf, layout.W_GRID, True), grid_word, hmask)
            ticks = low.ticks_per_second(target=target, _semantic=_semantic)
            _compat.semantic_store(sem, sem.add(buf, layout.W_TICKS, True), _as_i64(ticks, sem), hmask)
        total = _compat.semantic_load(sem, sem.add(buf, layout.W_TOTAL, True))
        tracks = sem.mul(nprog, _as_i64(ng_t, sem), True)
        cap = sem.floordiv(sem.sub(total, _as_i64(layout.HEADER_WORDS, sem), True),
                           sem.mul(tracks, _as_i64(layout.WORDS_PER_RECORD, sem), True))
        # a program / group outside the declared grid (num_blocks smaller than the launch, a runtime group_id out
        # of range) gets no slots instead of writing past the buffer
        inside = sem.and_(sem.less_than(pid, nprog),
                          sem.and_(sem.less_than(gid_t, _as_i64(ng_t, sem)),
                                   sem.greater_equal(gid_t, _as_i64(0, sem))))
        cap = sem.where(inside, cap, _as_i64(0, sem))
        track = sem.add(sem.mul(pid, _as_i64(ng_t, sem), True), gid_t, True)
        first_word = sem.add(sem.mul(sem.mul(track, cap, True), _as_i64(layout.WORDS_PER_RECORD, sem), True),
                             _as_i64(layout.HEADER_WORDS, sem), True)
        base = sem.add(buf, first_word, True)
        smid = low.sm_id(target=target, _semantic=_semantic)
        tag_hi = sem.shl(_as_i64(smid, sem), _as_i64(32, sem))
        leader_v = tl.constexpr(leader is None) if not isinstance(leader, tl.tensor) else leader
        return Profiler(base, sem.to_tensor(0), sem.cast(cap, tl.int32), tag_hi, leader_v, True)

    @_compat.builtin
    def record(self, is_start, task_type, _semantic=None):
        """Append ``(task_type << 1 | is_start, sm_id, now)`` to this track and return the advanced profiler.
        Emits nothing when profiling is off."""
        _check_task("record", is_start, task_type)
        if not self.ENABLE_PROFILING:
            return self
        sem = _sem(_semantic)
        target, backend = backend_for(_semantic)
        now = backend.profiler.timestamp(target=target, _semantic=_semantic)
        start = _c(is_start)
        start_t = _as_i64(1 if start else 0, sem) if isinstance(start, (bool, int)) else _as_i64(start, sem)
        low_word = sem.or_(sem.shl(_as_i64(task_type, sem), _as_i64(1, sem)), start_t)
        tag = sem.or_(self.tag_hi, low_word)
        mask = sem.less_than(self.slot, self.capacity)
        leader = _c(self.is_leader)
        if isinstance(leader, tl.tensor):
            mask = sem.and_(mask, leader)
        elif not leader:
            mask = None
        if mask is not None:
            ptr = sem.add(self.buffer, sem.mul(_as_i64(self.slot, sem), _as_i64(layout.WORDS_PER_RECORD, sem), True),
                          True)
            _compat.semantic_store(sem, ptr, tag, mask)
            _compat.semantic_store(sem, sem.add(ptr, 1, True), _as_i64(now, sem), mask)
        nxt = sem.add(self.slot, sem.to_tensor(1), True)
        return Profiler(self.buffer, nxt, self.capacity, self.tag_hi, self.is_leader, True)
