"""``triton_dist.language.extra.libshmem_device``: the NVSHMEM / rocSHMEM device API for Triton kernels.

Source-compatible with Triton-distributed's module of the same name. Each function is declared once here (argument
checks); the lowering is the registered backend's ``LibshmemLowering`` (``triton_dist.language._backend``), picked at
trace time: the NVIDIA and AMD backends call their SHMEM library's device functions, the simulator acts on the
shared heap.

Arguments: pointers may be typed Triton pointers (scalar, any element type) or int64 addresses; byte counts
(``size_t``) and PE / team numbers (``int``) accept Python ints and integer scalars of any width (converted to
i64 / i32). ``sig_op``, ``cmp`` and ``team`` take the constants below (NVSHMEM's values on every target; a target
whose library numbers them differently translates them, and may then require compile-time constants).

Who executes (OpenSHMEM / NVSHMEM semantics mapped onto a Triton program = one CTA / work-group):

* ``*_block`` variants: called by every thread of the program (NVSHMEM ``nvshmemx_*_block``).
* ``*_warp`` variants: executed by warp (wavefront) 0 of the program only.
* thread variants (no suffix): executed by thread 0 of the program only (on stock Triton a scalar call runs in
  every thread, so the call is predicated on ``tid == 0``). Around them the program synchronises so the call has
  program-level meaning: puts and ``signal_op`` are preceded by a CTA barrier (a source written by any thread of the
  program is complete before thread 0 reads it); ``quiet`` / ``fence`` / barriers are preceded by one too (the
  program's earlier operations are issued, and the library's fences in thread 0 are cumulative over them); blocking
  gets / puts, barriers, ``quiet`` and ``fence`` are followed by a CTA barrier (every thread of the program is
  ordered after them).
* queries (``my_pe`` ...), ``remote_ptr`` and ``signal_wait_until`` run in every thread (no side effects;
  every thread gets the result).

Completion: blocking put/get return when the local buffer may be reused (put) / holds the data (get); ``*_nbi``
variants return at once and complete at the next ``quiet`` (or barrier). ``putmem_signal*``: the data is delivered
before the signal is raised (a PE that sees the signal sees the data). ``fence`` orders this PE's puts to each PE;
``quiet`` completes them all.

Device-side barriers and collectives (``barrier_all*``, ``barrier``, ``sync_all``, ``broadcastmem_block``,
``fcollectmem_block``) wait for other PEs: a kernel that uses them with more than one program must be launched
cooperatively (``launch_cooperative_grid=True``) or it can deadlock; ``triton_dist.jit`` refuses such a launch
before it happens. NVSHMEM / rocSHMEM also require that a given team's collective be called by ONE thread / warp /
block per PE at a time (guard with ``if tl.program_id(0) == 0:``).
"""
from __future__ import annotations

import triton.language as tl

from ... import _compat
from .._backend import backend_for
from .._libshmem import CMP_NAMES, SIGNAL_NAMES, TEAM_INVALID, TEAM_NAMES, value_of

# ---------------------------------------------------------------------------------------------------------------
# constants: NVSHMEM's values, stated once in the tables of ``triton_dist.language._libshmem`` (NVSHMEM 3.4.5
# headers under nvidia/nvshmem/include)
# ---------------------------------------------------------------------------------------------------------------
# device_host_transport/nvshmem_constants.h: enum nvshmemi_cmp_type (note LE = 3 comes before LT = 4)
NVSHMEM_CMP_EQ = tl.constexpr(value_of(CMP_NAMES, "eq"))
NVSHMEM_CMP_NE = tl.constexpr(value_of(CMP_NAMES, "ne"))
NVSHMEM_CMP_GT = tl.constexpr(value_of(CMP_NAMES, "gt"))
NVSHMEM_CMP_LE = tl.constexpr(value_of(CMP_NAMES, "le"))
NVSHMEM_CMP_LT = tl.constexpr(value_of(CMP_NAMES, "lt"))
NVSHMEM_CMP_GE = tl.constexpr(value_of(CMP_NAMES, "ge"))
# device_host_transport/nvshmem_common_transport.h: nvshmemx_signal_op_t
NVSHMEM_SIGNAL_SET = tl.constexpr(value_of(SIGNAL_NAMES, "set"))
NVSHMEM_SIGNAL_ADD = tl.constexpr(value_of(SIGNAL_NAMES, "add"))
# device_host/nvshmem_common.cuh: predefined team handles
NVSHMEM_TEAM_INVALID = tl.constexpr(TEAM_INVALID)
NVSHMEM_TEAM_WORLD = tl.constexpr(value_of(TEAM_NAMES, "world"))
NVSHMEM_TEAM_SHARED = tl.constexpr(value_of(TEAM_NAMES, "shared"))
NVSHMEMX_TEAM_NODE = tl.constexpr(value_of(TEAM_NAMES, "node"))

__all__ = [
    "my_pe", "n_pes", "team_my_pe", "team_n_pes", "remote_ptr", "remote_mc_ptr",
    "barrier_all", "barrier_all_block", "barrier_all_warp", "barrier", "sync_all", "quiet", "fence",
    "getmem_nbi_block", "getmem_block", "getmem_nbi_warp", "getmem_warp", "getmem_nbi", "getmem",
    "putmem_block", "putmem_nbi_block", "putmem_warp", "putmem_nbi_warp", "putmem", "putmem_nbi",
    "putmem_signal_nbi_block", "putmem_signal_block", "signal_op", "signal_wait_until",
    "broadcastmem_block", "fcollectmem_block",
    "NVSHMEM_CMP_EQ", "NVSHMEM_CMP_NE", "NVSHMEM_CMP_GT", "NVSHMEM_CMP_LE", "NVSHMEM_CMP_LT", "NVSHMEM_CMP_GE",
    "NVSHMEM_SIGNAL_SET", "NVSHMEM_SIGNAL_ADD", "NVSHMEM_TEAM_INVALID", "NVSHMEM_TEAM_WORLD", "NVSHMEM_TEAM_SHARED",
    "NVSHMEMX_TEAM_NODE",
]


# ---------------------------------------------------------------------------------------------------------------
# argument conversion
# ---------------------------------------------------------------------------------------------------------------
def _c(v):
    return _compat.unwrap_constexpr(v)


def _ptr(op, name, v):
    """A pointer argument: a scalar typed pointer or an int64 address, returned as given."""
    v = _c(v)
    if isinstance(v, tl.tensor):
        if v.type.is_block():
            raise TypeError(f"libshmem_device.{op}: {name} must be a scalar pointer (the start of the buffer), got "
                            f"a block {v.type}")
        if v.dtype.is_ptr() or (v.dtype.is_int() and v.dtype.primitive_bitwidth == 64):
            return v
    raise TypeError(f"libshmem_device.{op}: {name} must be a pointer (or an int64 address), got "
                    f"{getattr(v, 'type', type(v).__name__)}")


def _int(op, name, v, ty):
    """An integer argument (Python int or integer scalar of any width) for a parameter of C type ``ty`` (i32 / i64
    / u64), returned as given; a Python int must fit ``ty``."""
    v = _c(v)
    if isinstance(v, bool) or not (isinstance(v, int) or (isinstance(v, tl.tensor) and v.dtype.is_int())):
        raise TypeError(f"libshmem_device.{op}: {name} must be an integer (Python int or integer scalar), got "
                        f"{getattr(v, 'type', type(v).__name__)}")
    if isinstance(v, tl.tensor) and v.type.is_block():
        raise TypeError(f"libshmem_device.{op}: {name} must be a scalar, got a block {v.type}")
    if isinstance(v, int):
        if ty == tl.uint64:
            lo, hi = -(1 << 63), (1 << 64) - 1
        elif ty == tl.int64:
            lo, hi = -(1 << 63), (1 << 63) - 1
        else:
            lo, hi = -(1 << 31), (1 << 31) - 1
        if not lo <= v <= hi:
            raise ValueError(f"libshmem_device.{op}: {name}={v} does not fit the C type ({ty})")
    return v


def _const(op, name, v, names):
    """A sig_op / cmp / team constant: a Python int (compile time) from ``names``, or a runtime integer scalar."""
    v = _c(v)
    if isinstance(v, int) and not isinstance(v, bool):
        if v not in names:
            raise ValueError(f"libshmem_device.{op}: {name}={v} is not supported; accepted: "
                             + ", ".join(f"{k} ({n})" for k, n in names.items()))
        return v
    if isinstance(v, tl.tensor) and v.dtype.is_int() and not v.type.is_block():
        return v
    raise TypeError(f"libshmem_device.{op}: {name} must be one of the libshmem_device constants, got "
                    f"{getattr(v, 'type', type(v).__name__)}")


def _team(op, team):
    return _const(op, "team", team, TEAM_NAMES)


def _lowering(_semantic, _generator):
    """``(the target's LibshmemLowering, the keyword arguments every one of its methods takes)``."""
    target, backend = backend_for(_semantic)
    return backend.libshmem, {"target": target, "_semantic": _semantic, "_generator": _generator}


# ---------------------------------------------------------------------------------------------------------------
# PE info
# ---------------------------------------------------------------------------------------------------------------
@_compat.builtin
def my_pe(_semantic=None, _generator=None):
    """This PE's number in the world team (int32). Every thread executes it (a query)."""
    impl, kw = _lowering(_semantic, _generator)
    return impl.my_pe(**kw)


@_compat.builtin
def n_pes(_semantic=None, _generator=None):
    """Number of PEs in the world team (int32). Every thread executes it."""
    impl, kw = _lowering(_semantic, _generator)
    return impl.n_pes(**kw)


@_compat.builtin
def team_my_pe(team, _semantic=None, _generator=None):
    """This PE's number in ``team`` (``NVSHMEM_TEAM_WORLD`` / ``NVSHMEM_TEAM_SHARED`` / ``NVSHMEMX_TEAM_NODE``),
    int32. Every thread executes it."""
    t = _team("team_my_pe", team)
    impl, kw = _lowering(_semantic, _generator)
    return impl.team_my_pe(t, **kw)


@_compat.builtin
def team_n_pes(team, _semantic=None, _generator=None):
    """Number of PEs in ``team`` (int32). Every thread executes it."""
    t = _team("team_n_pes", team)
    impl, kw = _lowering(_semantic, _generator)
    return impl.team_n_pes(t, **kw)


# ---------------------------------------------------------------------------------------------------------------
# memory
# ---------------------------------------------------------------------------------------------------------------
@_compat.builtin
def remote_ptr(local_ptr, pe, _semantic=None, _generator=None):
    """The address of symmetric ``local_ptr`` on PE ``pe`` for direct loads/stores (``nvshmem_ptr``), same
    pointer type; null (0) when ``pe`` is not load/store reachable (e.g. another node) or ``local_ptr`` is not
    symmetric. Every thread executes it; no memory ordering."""
    p = _ptr("remote_ptr", "local_ptr", local_ptr)
    r = _int("remote_ptr", "pe", pe, tl.int32)
    impl, kw = _lowering(_semantic, _generator)
    return impl.remote_ptr(p, r, **kw)


@_compat.builtin
def remote_mc_ptr(team, ptr, _semantic=None, _generator=None):
    """The NVLink multicast address of symmetric ``ptr`` for ``team`` (``nvshmemx_mc_ptr``), same pointer type;
    null (0) where multicast is unsupported or disabled (``NVSHMEM_DISABLE_NVLS=1``, as on our GPU machine;
    rocSHMEM; always on the simulator). Compile-tested only. Every thread executes it."""
    t = _team("remote_mc_ptr", team)
    p = _ptr("remote_mc_ptr", "ptr", ptr)
    impl, kw = _lowering(_semantic, _generator)
    return impl.remote_mc_ptr(t, p, **kw)


# ---------------------------------------------------------------------------------------------------------------
# synchronisation
# ---------------------------------------------------------------------------------------------------------------
def _sync(op, scope, _semantic, _generator, team=None):
    t = None if team is None else _team(op, team)
    impl, kw = _lowering(_semantic, _generator)
    impl.sync(op, scope, t, **kw)
    return None


@_compat.builtin
def barrier_all(_semantic=None, _generator=None):
    """Barrier over all PEs that also completes every outstanding put/get of this PE (``nvshmem_barrier_all``).
    Thread variant: thread 0 calls it between two CTA barriers, so the whole program waits. Collective: needs a
    cooperative launch when the grid has > 1 program, and one caller per PE at a time."""
    return _sync("barrier_all", "thread", _semantic, _generator)


@_compat.builtin
def barrier_all_block(_semantic=None, _generator=None):
    """Block variant of :func:`barrier_all` (``nvshmemx_barrier_all_block``): every
    thread of the program calls it."""
    return _sync("barrier_all_block", "block", _semantic, _generator)


@_compat.builtin
def barrier_all_warp(_semantic=None, _generator=None):
    """Warp variant of :func:`barrier_all`: warp 0 of the program calls it, between two CTA barriers."""
    return _sync("barrier_all_warp", "warp", _semantic, _generator)


@_compat.builtin
def barrier(team, _semantic=None, _generator=None):
    """Barrier over the PEs of ``team`` completing this PE's outstanding operations (``nvshmem_barrier``).
    Thread variant (thread 0, between CTA barriers)."""
    return _sync("barrier", "thread", _semantic, _generator, team=team)


@_compat.builtin
def sync_all(_semantic=None, _generator=None):
    """Barrier over all PEs ordering (not completing) earlier memory operations (``nvshmem_sync_all``). Thread
    variant (thread 0, between CTA barriers)."""
    return _sync("sync_all", "thread", _semantic, _generator)


@_compat.builtin
def quiet(_semantic=None, _generator=None):
    """Complete every put / get / signal this PE issued (incl. ``*_nbi``), as seen by all PEs (``nvshmem_quiet``).
    Thread 0 calls it between two CTA barriers (the barrier before makes the program's earlier operations
    part of what it completes)."""
    return _sync("quiet", "thread", _semantic, _generator)


@_compat.builtin
def fence(_semantic=None, _generator=None):
    """Order this PE's puts / signals to each PE: those before the fence are delivered before those after
    (``nvshmem_fence``). Thread 0, between two CTA barriers."""
    return _sync("fence", "thread", _semantic, _generator)


# ---------------------------------------------------------------------------------------------------------------
# RMA
# ---------------------------------------------------------------------------------------------------------------
def _rma(op, kind, scope, blocking, dest, source, nbytes, pe, _semantic, _generator):
    d = _ptr(op, "dest", dest)
    s = _ptr(op, "source", source)
    n = _int(op, "bytes", nbytes, tl.int64)
    r = _int(op, "pe", pe, tl.int32)
    if isinstance(n, int) and n < 0:
        raise ValueError(f"libshmem_device.{op}: bytes={n} must be >= 0")
    impl, kw = _lowering(_semantic, _generator)
    impl.rma(op, kind, scope, blocking, d, s, n, r, **kw)
    return None


_RMA_DOC = """{what} ``bytes`` bytes: ``dest`` (symmetric on PE ``pe`` for puts, local for gets) <- ``source`` (local
    for puts, symmetric on ``pe`` for gets). {who} {completion} Returns nothing."""


def _doc(what, who, completion):
    return _RMA_DOC.format(what=what, who=who, completion=completion)


_BLOCK = "Every thread of the program calls it (block variant)."
_WARP = "Warp 0 of the program executes it (warp variant)."
_THREAD = "Thread 0 of the program executes it (thread variant; a put is preceded by a CTA barrier)."
_BLOCKING_GET = "Blocking: returns when ``dest`` holds the data."
_BLOCKING_PUT = "Blocking: returns when ``source`` may be reused (delivery is guaranteed by ``quiet``)."
_NBI = "Non-blocking: completes at the next ``quiet`` / barrier."


@_compat.builtin
def getmem_nbi_block(dest, source, bytes, pe, _semantic=None, _generator=None):
    return _rma("getmem_nbi_block", "get", "block", False, dest, source, bytes, pe, _semantic, _generator)


@_compat.builtin
def getmem_block(dest, source, bytes, pe, _semantic=None, _generator=None):
    return _rma("getmem_block", "get", "block", True, dest, source, bytes, pe, _semantic, _generator)


@_compat.builtin
def getmem_nbi_warp(dest, source, bytes, pe, _semantic=None, _generator=None):
    return _rma("getmem_nbi_warp", "get", "warp", False, dest, source, bytes, pe, _semantic, _generator)


@_compat.builtin
def getmem_warp(dest, source, bytes, pe, _semantic=None, _generator=None):
    return _rma("getmem_warp", "get", "warp", True, dest, source, bytes, pe, _semantic, _generator)


@_compat.builtin
def getmem_nbi(dest, source, bytes, pe, _semantic=None, _generator=None):
    return _rma("getmem_nbi", "get", "thread", False, dest, source, bytes, pe, _semantic, _generator)


@_compat.builtin
def getmem(dest, source, bytes, pe, _semantic=None, _generator=None):
    return _rma("getmem", "get", "thread", True, dest, source, bytes, pe, _semantic, _generator)


@_compat.builtin
def putmem_block(dest, source, bytes, pe, _semantic=None, _generator=None):
    return _rma("putmem_block", "put", "block", True, dest, source, bytes, pe, _semantic, _generator)


@_compat.builtin
def putmem_nbi_block(dest, source, bytes, pe, _semantic=None, _generator=None):
    return _rma("putmem_nbi_block", "put", "block", False, dest, source, bytes, pe, _semantic, _generator)


@_compat.builtin
def putmem_warp(dest, source, bytes, pe, _semantic=None, _generator=None):
    return _rma("putmem_warp", "put", "warp", True, dest, source, bytes, pe, _semantic, _generator)


@_compat.builtin
def putmem_nbi_warp(dest, source, bytes, pe, _semantic=None, _generator=None):
    return _rma("putmem_nbi_warp", "put", "warp", False, dest, source, bytes, pe, _semantic, _generator)


@_compat.builtin
def putmem(dest, source, bytes, pe, _semantic=None, _generator=None):
    return _rma("putmem", "put", "thread", True, dest, source, bytes, pe, _semantic, _generator)


@_compat.builtin
def putmem_nbi(dest, source, bytes, pe, _semantic=None, _generator=None):
    return _rma("putmem_nbi", "put", "thread", False, dest, source, bytes, pe, _semantic, _generator)


for _f, _what, _who, _comp in [
    (getmem_nbi_block, "Get", _BLOCK, _NBI), (getmem_block, "Get", _BLOCK, _BLOCKING_GET),
    (getmem_nbi_warp, "Get", _WARP, _NBI), (getmem_warp, "Get", _WARP, _BLOCKING_GET),
    (getmem_nbi, "Get", _THREAD, _NBI), (getmem, "Get", _THREAD, _BLOCKING_GET + " A CTA barrier follows."),
    (putmem_block, "Put", _BLOCK, _BLOCKING_PUT), (putmem_nbi_block, "Put", _BLOCK, _NBI),
    (putmem_warp, "Put", _WARP, _BLOCKING_PUT), (putmem_nbi_warp, "Put", _WARP, _NBI),
    (putmem, "Put", _THREAD, _BLOCKING_PUT), (putmem_nbi, "Put", _THREAD, _NBI),
]:
    _f.__doc__ = _doc(_what, _who, _comp)


# ---------------------------------------------------------------------------------------------------------------
# signals
# ---------------------------------------------------------------------------------------------------------------
def _put_signal(op, blocking, dest, source, nbytes, sig_addr, signal, sig_op, pe, _semantic, _generator):
    d = _ptr(op, "dest", dest)
    s = _ptr(op, "source", source)
    n = _int(op, "bytes", nbytes, tl.int64)
    a = _ptr(op, "sig_addr", sig_addr)
    v = _int(op, "signal", signal, tl.uint64)
    o = _const(op, "sig_op", sig_op, SIGNAL_NAMES)
    r = _int(op, "pe", pe, tl.int32)
    impl, kw = _lowering(_semantic, _generator)
    impl.putmem_signal(op, blocking, d, s, n, a, v, o, r, **kw)
    return None


@_compat.builtin
def putmem_signal_nbi_block(dest, source, bytes, sig_addr, signal, sig_op, pe, _semantic=None, _generator=None):
    """Put ``bytes`` bytes from local ``source`` to symmetric ``dest`` on ``pe``, then update the 64-bit signal at
    symmetric ``sig_addr`` on ``pe`` (``sig_op``: ``NVSHMEM_SIGNAL_SET`` / ``NVSHMEM_SIGNAL_ADD`` with ``signal``).
    The data is delivered before the signal update is visible. Non-blocking (``source`` reusable after ``quiet``).
    Every thread of the program calls it (block variant)."""
    return _put_signal("putmem_signal_nbi_block", False, dest, source, bytes, sig_addr, signal, sig_op, pe,
                       _semantic, _generator)


@_compat.builtin
def putmem_signal_block(dest, source, bytes, sig_addr, signal, sig_op, pe, _semantic=None, _generator=None):
    """Blocking form of :func:`putmem_signal_nbi_block` (returns when ``source`` may be reused)."""
    return _put_signal("putmem_signal_block", True, dest, source, bytes, sig_addr, signal, sig_op, pe, _semantic,
                       _generator)


@_compat.builtin
def signal_op(sig_addr, signal, sig_op, pe, _semantic=None, _generator=None):
    """Atomically update the 64-bit signal at symmetric ``sig_addr`` on ``pe`` (SET / ADD ``signal``)
    (``nvshmemx_signal_op``). Thread 0 executes it after a CTA barrier. Like OpenSHMEM's signal update it does NOT
    order earlier puts / stores to ``pe`` (NVSHMEM's load/store path is a plain store / atomic): call ``fence()`` or
    ``quiet()`` first, or use ``putmem_signal*`` (or ``dl.notify``, which fences)."""
    op = "signal_op"
    a = _ptr(op, "sig_addr", sig_addr)
    v = _int(op, "signal", signal, tl.uint64)
    o = _const(op, "sig_op", sig_op, SIGNAL_NAMES)
    r = _int(op, "pe", pe, tl.int32)
    impl, kw = _lowering(_semantic, _generator)
    impl.signal_op(a, v, o, r, **kw)
    return None


@_compat.builtin
def signal_wait_until(sig_addr, cmp_, cmp_val, _semantic=None, _generator=None):
    """Wait until the local 64-bit signal at symmetric ``sig_addr`` satisfies ``*sig_addr <cmp_> cmp_val``
    (``NVSHMEM_CMP_EQ/NE/GT/GE/LT/LE``, unsigned compare) and return the value that satisfied it (uint64).
    Every thread of the program waits (read-only polling); loads after it observe what the signalling PE
    delivered before the signal (put-with-signal / fence / quiet ordering). The bounded-wait mode
    (``TRITON_DIST_BOUNDED_WAIT``) bounds it on the simulator, like ``dl.wait``; on a GPU it is the library's own,
    unbounded wait."""
    op = "signal_wait_until"
    a = _ptr(op, "sig_addr", sig_addr)
    c = _const(op, "cmp_", cmp_, CMP_NAMES)
    v = _int(op, "cmp_val", cmp_val, tl.uint64)
    impl, kw = _lowering(_semantic, _generator)
    return impl.signal_wait_until(a, c, v, **kw)


# ---------------------------------------------------------------------------------------------------------------
# collectives
# ---------------------------------------------------------------------------------------------------------------
@_compat.builtin
def broadcastmem_block(team, dest, source, nelems, pe_root, _semantic=None, _generator=None):
    """Copy ``nelems`` BYTES of ``source`` on the team's PE ``pe_root`` (team-relative) into ``dest`` on every PE
    of ``team`` (root included). ``dest`` / ``source`` symmetric. Collective over ``team``: every PE calls it with
    the same arguments; every thread of the calling program calls it (block variant). Returns 0 (int32) on
    success (NVIDIA: NVSHMEM's return code)."""
    op = "broadcastmem_block"
    t = _team(op, team)
    d = _ptr(op, "dest", dest)
    s = _ptr(op, "source", source)
    n = _int(op, "nelems", nelems, tl.int64)
    r = _int(op, "pe_root", pe_root, tl.int32)
    impl, kw = _lowering(_semantic, _generator)
    return impl.broadcastmem_block(t, d, s, n, r, **kw)


@_compat.builtin
def fcollectmem_block(team, dest, source, nelems, _semantic=None, _generator=None):
    """Concatenate ``nelems`` BYTES of ``source`` from every PE of ``team`` into ``dest`` on every PE, in team
    order (``dest`` holds ``n_pes * nelems`` bytes). Collective over ``team``; block variant. Returns 0 (int32)."""
    op = "fcollectmem_block"
    t = _team(op, team)
    d = _ptr(op, "dest", dest)
    s = _ptr(op, "source", source)
    n = _int(op, "nelems", nelems, tl.int64)
    impl, kw = _lowering(_semantic, _generator)
    return impl.fcollectmem_block(t, d, s, n, **kw)
