"""``triton_dist.language.extra.libshmem_device``: the NVSHMEM / rocSHMEM device API for Triton kernels.

Source-compatible with Triton-distributed's module of the same name. Each function is declared once here (argument
checks); the lowering is the registered backend's ``LibshmemLowering`` (``triton_dist.language._backend``), picked at
trace time: the NVIDIA and AMD backends call their SHMEM library's device functions, the simulator acts on the
shared heap.

Arguments: pointers may be typed Triton pointers (scalar, any element type) or int64 addresses; byte counts
(``size_t``) and PE / team numbers (``int``) accept Python ints and integer scalars of any width (converted to
i64 / i32). ``sig_op``, ``cmp`` and ``team`` take the constants below (NVSHMEM's values on every target; a target
whose library numbers them differently translates them, and may then require compile-time constants).

Who executes: the C function's rule, as in a CUDA / HIP kernel and in Triton-distributed. Scalar code of a Triton
program runs in every thread of the program (one program = one CTA / work-group), so a call is executed by every
thread that reaches it, each with its own argument values (which may depend on ``tid``):

* thread variants (no suffix), e.g. ``getmem``, ``putmem``, ``putmem_signal``, ``signal_op``, ``barrier_all``,
  ``<type>_p``: one call per thread that reaches it. Unguarded, a put is issued once per thread (the same bytes
  ``num_threads`` times) and ``signal_op(ADD)`` adds once per thread; ``if tid(0) == 0:``
  (``triton_dist.language.extra.language_extra.tid``) makes it one call per program, and ``if tid(0) < n:`` with
  ``tid``-dependent arguments gives per-thread transfers. Barriers / collectives (``barrier_all``, ``barrier``,
  ``sync_all``, ``team_sync``, ``broadcast*`` / ``fcollect*`` without suffix) must be called by ONE thread per PE:
  guard them with ``if tid(0) == 0:`` (then ``__syncthreads()`` after the ``if`` if the other threads must wait
  for it) or use the ``_block`` variant.
* ``*_warp`` (``*_wave`` on AMD's naming) variants: one call per warp that reaches it; every lane of the warp must
  call it with the same arguments. Guard with ``if tid(0) // warp_size == 0:`` for one call per program.
* ``*_block`` (``*_wg``) variants: every thread of the program calls it with the same arguments.
* queries (``my_pe`` ...), ``remote_ptr`` and ``signal_wait_until`` run in every thread, each getting the result.

Nothing is added around a call: no predicate, and no CTA barrier (a barrier inside ``if tid(0) == 0:`` would
deadlock the threads that skip it). Data written by other threads of the program before a put / signal needs a
``__syncthreads()`` first, as in CUDA.

The ``*_wg`` / ``*_wave`` names (rocSHMEM's) are the ``*_block`` / ``*_warp`` functions under another name, on every
target.

Completion: blocking put/get return when the local buffer may be reused (put) / holds the data (get); ``*_nbi``
variants return at once and complete at the next ``quiet`` (or barrier). ``putmem_signal*``: the data is delivered
before the signal is raised (a PE that sees the signal sees the data). ``fence`` orders this PE's puts to each PE;
``quiet`` completes them all.

Device-side barriers and collectives (``barrier_all*``, ``barrier*``, ``sync_all*``, ``team_sync*``, ``broadcast*``,
``fcollect*``) wait for other PEs: a kernel that uses them with more than one program must be launched
cooperatively (``launch_cooperative_grid=True``) or it can deadlock; ``triton_dist.jit`` refuses such a launch
before it happens. NVSHMEM / rocSHMEM also require that a given team's collective be called by ONE thread / warp /
block per PE at a time (guard with ``if tl.program_id(0) == 0:``).
"""
from __future__ import annotations

import triton.language as tl

from ... import _compat
from ..._compat import unwrap_constexpr as _c
from .._backend import backend_for
from .. import _libshmem
from .._libshmem import CMP_NAMES, SCALAR_TYPES, SIGNAL_NAMES, TEAM_INVALID, TEAM_NAMES, value_of

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



# ---------------------------------------------------------------------------------------------------------------
# argument conversion
# ---------------------------------------------------------------------------------------------------------------
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


def _count(op, name, v):
    """A byte or element count (``size_t``): :func:`_int` as int64, and a Python int must not be negative."""
    n = _int(op, name, v, tl.int64)
    if isinstance(n, int) and n < 0:
        raise ValueError(f"libshmem_device.{op}: {name}={n} must be >= 0")
    return n


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
    Thread variant: every thread that reaches it calls it, and ONE thread per PE may: guard it with
    ``if tid(0) == 0:`` (then ``__syncthreads()`` for the rest of the program to wait), or use
    :func:`barrier_all_block`. Collective: needs a cooperative launch when the grid has > 1 program."""
    return _sync("barrier_all", "thread", _semantic, _generator)


@_compat.builtin
def barrier_all_block(_semantic=None, _generator=None):
    """Block variant of :func:`barrier_all` (``nvshmemx_barrier_all_block``): every
    thread of the program calls it."""
    return _sync("barrier_all_block", "block", _semantic, _generator)


@_compat.builtin
def barrier_all_warp(_semantic=None, _generator=None):
    """Warp variant of :func:`barrier_all` (``nvshmemx_barrier_all_warp``): every lane of the calling warp calls it;
    one warp per PE may (guard with ``if tid(0) // 32 == 0:`` on NVIDIA)."""
    return _sync("barrier_all_warp", "warp", _semantic, _generator)


@_compat.builtin
def barrier(team, _semantic=None, _generator=None):
    """Barrier over the PEs of ``team`` completing this PE's outstanding operations (``nvshmem_barrier``).
    Thread variant: one thread per PE calls it (guard with ``if tid(0) == 0:``)."""
    return _sync("barrier", "thread", _semantic, _generator, team=team)


@_compat.builtin
def sync_all(_semantic=None, _generator=None):
    """Barrier over all PEs ordering (not completing) earlier memory operations (``nvshmem_sync_all``). Thread
    variant: one thread per PE calls it (guard with ``if tid(0) == 0:``)."""
    return _sync("sync_all", "thread", _semantic, _generator)


@_compat.builtin
def quiet(_semantic=None, _generator=None):
    """Complete every put / get / signal this PE issued (incl. ``*_nbi``), as seen by all PEs (``nvshmem_quiet``).
    Every thread that reaches it calls it (harmless unguarded); it covers the operations issued before it by the
    calling thread (``__syncthreads()`` first to cover the whole program's)."""
    return _sync("quiet", "thread", _semantic, _generator)


@_compat.builtin
def fence(_semantic=None, _generator=None):
    """Order this PE's puts / signals to each PE: those before the fence are delivered before those after
    (``nvshmem_fence``). Every thread that reaches it calls it."""
    return _sync("fence", "thread", _semantic, _generator)


# ---------------------------------------------------------------------------------------------------------------
# RMA
# ---------------------------------------------------------------------------------------------------------------
def _rma(op, kind, scope, blocking, dest, source, nbytes, pe, _semantic, _generator):
    d = _ptr(op, "dest", dest)
    s = _ptr(op, "source", source)
    n = _count(op, "bytes", nbytes)
    r = _int(op, "pe", pe, tl.int32)
    impl, kw = _lowering(_semantic, _generator)
    impl.rma(op, kind, scope, blocking, d, s, n, r, **kw)
    return None


_RMA_DOC = """{what} ``bytes`` bytes: ``dest`` (symmetric on PE ``pe`` for puts, local for gets) <- ``source`` (local
    for puts, symmetric on ``pe`` for gets). {who} {completion} Returns nothing."""


def _doc(what, who, completion):
    return _RMA_DOC.format(what=what, who=who, completion=completion)


_BLOCK = "Every thread of the program calls it (block variant)."
_WARP = "Every warp that reaches it executes it, all lanes with the same arguments (warp variant)."
_THREAD = ("Every thread that reaches it executes it with its own arguments (thread variant: guard with "
           "``if tid(0) == 0:`` for one call per program).")
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
    (getmem_nbi, "Get", _THREAD, _NBI), (getmem, "Get", _THREAD, _BLOCKING_GET),
    (putmem_block, "Put", _BLOCK, _BLOCKING_PUT), (putmem_nbi_block, "Put", _BLOCK, _NBI),
    (putmem_warp, "Put", _WARP, _BLOCKING_PUT), (putmem_nbi_warp, "Put", _WARP, _NBI),
    (putmem, "Put", _THREAD, _BLOCKING_PUT), (putmem_nbi, "Put", _THREAD, _NBI),
]:
    _f.__doc__ = _doc(_what, _who, _comp)


# ---------------------------------------------------------------------------------------------------------------
# signals
# ---------------------------------------------------------------------------------------------------------------
def _put_signal(op, blocking, dest, source, nelems, sig_addr, signal, sig_op, pe, _semantic, _generator,
                elem_bytes=1, lowered=None):
    d = _ptr(op, "dest", dest)
    s = _ptr(op, "source", source)
    n = _count(op, "bytes" if elem_bytes == 1 else "nelems", nelems)
    a = _ptr(op, "sig_addr", sig_addr)
    v = _int(op, "signal", signal, tl.uint64)
    o = _const(op, "sig_op", sig_op, SIGNAL_NAMES)
    r = _int(op, "pe", pe, tl.int32)
    impl, kw = _lowering(_semantic, _generator)
    impl.putmem_signal(lowered or op, blocking, d, s, n, elem_bytes, a, v, o, r, **kw)
    return None


def _put_signal_function(op, lowered=None, alias_note="rocSHMEM's name"):
    """``putmem_signal[_nbi][_warp|_block]`` (or another name of one, lowered as ``lowered``; ``alias_note`` says
    which, default: rocSHMEM's ``_wave`` / ``_wg`` name)."""
    blocking = "_nbi" not in op
    who = {"block": _BLOCK, "warp": _WARP, "thread": _THREAD}[_libshmem.scope_of(lowered or op)]

    def fn(dest, source, bytes, sig_addr, signal, sig_op, pe, _semantic=None, _generator=None):
        return _put_signal(op, blocking, dest, source, bytes, sig_addr, signal, sig_op, pe, _semantic, _generator,
                           lowered=lowered)

    fn.__doc__ = (f"Put ``bytes`` bytes from local ``source`` to symmetric ``dest`` on ``pe``, then update the 64-bit "
                  f"signal at symmetric ``sig_addr`` on ``pe`` (``sig_op``: ``NVSHMEM_SIGNAL_SET`` / "
                  f"``NVSHMEM_SIGNAL_ADD`` with ``signal``); the data is delivered before the signal update is "
                  f"visible. {_BLOCKING_PUT if blocking else _NBI} {who}"
                  + (f" Same function as :func:`{lowered}` ({alias_note})."
                     if lowered else ""))
    return _named(fn, op)


def _named(fn, name):
    fn.__name__ = fn.__qualname__ = name
    fn.__module__ = __name__
    return _compat.builtin(fn)


putmem_signal_nbi_block = _put_signal_function("putmem_signal_nbi_block")
putmem_signal_block = _put_signal_function("putmem_signal_block")
putmem_signal_nbi_warp = _put_signal_function("putmem_signal_nbi_warp")
putmem_signal_warp = _put_signal_function("putmem_signal_warp")
putmem_signal_nbi = _put_signal_function("putmem_signal_nbi")
putmem_signal = _put_signal_function("putmem_signal")
putmem_signal_nbi_wg = _put_signal_function("putmem_signal_nbi_wg", "putmem_signal_nbi_block")
putmem_signal_wg = _put_signal_function("putmem_signal_wg", "putmem_signal_block")
putmem_signal_nbi_wave = _put_signal_function("putmem_signal_nbi_wave", "putmem_signal_nbi_warp")
putmem_signal_wave = _put_signal_function("putmem_signal_wave", "putmem_signal_warp")


@_compat.builtin
def ulong_put_signal(dest, source, nelems, sig_addr, signal, sig_op, pe, _semantic=None, _generator=None):
    """:func:`putmem_signal` of ``nelems`` 64-bit (``unsigned long``) elements (``nvshmem_ulong_put_signal``:
    ``nelems * 8`` bytes). Thread variant: every thread that reaches it executes it."""
    return _put_signal("ulong_put_signal", True, dest, source, nelems, sig_addr, signal, sig_op, pe, _semantic,
                       _generator, elem_bytes=8, lowered="putmem_signal")


@_compat.builtin
def signal_op(sig_addr, signal, sig_op, pe, _semantic=None, _generator=None):
    """Atomically update the 64-bit signal at symmetric ``sig_addr`` on ``pe`` (SET / ADD ``signal``)
    (``nvshmemx_signal_op``). Every thread that reaches it executes it (an unguarded ADD adds once per thread:
    guard with ``if tid(0) == 0:``). Like OpenSHMEM's signal update it does NOT
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
_NOT_AMD = " Not in rocSHMEM's device API (a compile-time error on AMD: its collectives are work-group calls)."


def _elem_bytes(op, dest, source):
    """The element size of a typed collective: ``dest`` and ``source`` must point to the same element type."""
    if not (dest.dtype.is_ptr() and source.dtype.is_ptr()) or dest.dtype.element_ty != source.dtype.element_ty:
        raise TypeError(f"libshmem_device.{op}: dest and source must be typed pointers to the same element type "
                        f"(the type is the function's), got {dest.type} and {source.type}")
    return dest.dtype.element_ty.primitive_bitwidth // 8


def _broadcast_function(op, lowered, typed):
    who = {"block": _BLOCK, "warp": _WARP, "thread": _THREAD}[_libshmem.scope_of(lowered)]
    unit = "elements of ``dest``'s type" if typed else "BYTES"

    def fn(team, dest, source, nelems, pe_root, _semantic=None, _generator=None):
        t = _team(op, team)
        d = _ptr(op, "dest", dest)
        s = _ptr(op, "source", source)
        n = _count(op, "nelems", nelems)
        r = _int(op, "pe_root", pe_root, tl.int32)
        impl, kw = _lowering(_semantic, _generator)
        return impl.broadcast(lowered, t, d, s, n, _elem_bytes(op, d, s) if typed else 1, r, **kw)

    fn.__doc__ = (f"Copy ``nelems`` {unit} of ``source`` on the team's PE ``pe_root`` (team-relative) into ``dest`` "
                  f"on every PE of ``team`` (root included). ``dest`` / ``source`` symmetric. Collective over "
                  f"``team``: every PE calls it with the same arguments, one caller per PE. {who} Returns 0 (int32) "
                  f"on success."
                  + (f" Lowered as :func:`{lowered}` of ``nelems * sizeof(type)`` bytes (the same transfer)."
                     if typed else "") + ("" if lowered.endswith("_block") else _NOT_AMD))
    return _named(fn, op)


def _fcollect_function(op, lowered, typed):
    who = {"block": _BLOCK, "warp": _WARP, "thread": _THREAD}[_libshmem.scope_of(lowered)]
    unit = "elements of ``dest``'s type" if typed else "BYTES"

    def fn(team, dest, source, nelems, _semantic=None, _generator=None):
        t = _team(op, team)
        d = _ptr(op, "dest", dest)
        s = _ptr(op, "source", source)
        n = _count(op, "nelems", nelems)
        impl, kw = _lowering(_semantic, _generator)
        return impl.fcollect(lowered, t, d, s, n, _elem_bytes(op, d, s) if typed else 1, **kw)

    fn.__doc__ = (f"Concatenate ``nelems`` {unit} of ``source`` from every PE of ``team`` into ``dest`` on every "
                  f"PE, in team order (``dest`` holds ``team_n_pes * nelems``). Collective over ``team``, one caller "
                  f"per PE. {who} Returns 0 (int32)."
                  + (f" Lowered as :func:`{lowered}` of ``nelems * sizeof(type)`` bytes (the same transfer)."
                     if typed else "") + ("" if lowered.endswith("_block") else _NOT_AMD))
    return _named(fn, op)


broadcastmem_block = _broadcast_function("broadcastmem_block", "broadcastmem_block", False)
broadcastmem_warp = _broadcast_function("broadcastmem_warp", "broadcastmem_warp", False)
broadcastmem = _broadcast_function("broadcastmem", "broadcastmem", False)
broadcast_block = _broadcast_function("broadcast_block", "broadcastmem_block", True)
broadcast_warp = _broadcast_function("broadcast_warp", "broadcastmem_warp", True)
broadcast = _broadcast_function("broadcast", "broadcastmem", True)
fcollectmem_block = _fcollect_function("fcollectmem_block", "fcollectmem_block", False)
fcollectmem_warp = _fcollect_function("fcollectmem_warp", "fcollectmem_warp", False)
fcollectmem = _fcollect_function("fcollectmem", "fcollectmem", False)
fcollect_block = _fcollect_function("fcollect_block", "fcollectmem_block", True)
fcollect_warp = _fcollect_function("fcollect_warp", "fcollectmem_warp", True)
fcollect = _fcollect_function("fcollect", "fcollectmem", True)


# ---------------------------------------------------------------------------------------------------------------
# team translation, team-scoped sync, rocSHMEM's names of the block / warp functions
# ---------------------------------------------------------------------------------------------------------------
@_compat.builtin
def team_translate_pe(src_team, pe_in_src_team, dest_team, _semantic=None, _generator=None):
    """The number in ``dest_team`` of the PE whose number in ``src_team`` is ``pe_in_src_team``; -1 when that PE
    is not in ``dest_team`` (``nvshmem_team_translate_pe``), int32. A number out of ``src_team``'s range is outside
    the contract: the simulator returns -1, NVSHMEM does not check it (on 2x H200 it returned a PE number). Every
    thread executes it (a query)."""
    op = "team_translate_pe"
    s = _team(op, src_team)
    r = _int(op, "pe_in_src_team", pe_in_src_team, tl.int32)
    d = _team(op, dest_team)
    impl, kw = _lowering(_semantic, _generator)
    return impl.team_translate_pe(s, r, d, **kw)


def _team_sync_function(op, doc, lowered=None):
    scope = _libshmem.scope_of(lowered or op)

    def fn(team, _semantic=None, _generator=None):
        return _sync(lowered or op, scope, _semantic, _generator, team=team)

    fn.__doc__ = doc
    return _named(fn, op)


def _sync_function(op, doc, lowered=None):
    scope = _libshmem.scope_of(lowered or op)

    def fn(_semantic=None, _generator=None):
        return _sync(lowered or op, scope, _semantic, _generator)

    fn.__doc__ = doc
    return _named(fn, op)


barrier_block = _team_sync_function("barrier_block", "Block variant of :func:`barrier`: "
                                    "every thread of the program calls it. Collective.")
barrier_warp = _team_sync_function("barrier_warp", "Warp variant of :func:`barrier`: "
                                   "every lane of the calling warp calls it, one warp per PE. Collective.")
team_sync = _team_sync_function("team_sync", "Barrier over ``team`` ordering (not completing) earlier memory "
                                "operations. Thread variant: one thread per PE calls it "
                                "(guard with ``if tid(0) == 0:``). Collective.")
team_sync_block = _team_sync_function("team_sync_block", "Block variant of :func:`team_sync` "
                                      "(NVSHMEM's block variant): every thread of the program calls it. "
                                      "Collective.")
team_sync_warp = _team_sync_function("team_sync_warp", "Warp variant of :func:`team_sync` "
                                     "(NVSHMEM's warp variant): every lane of the calling warp calls it. "
                                     "Collective.")
sync_all_block = _sync_function("sync_all_block", "Block variant of :func:`sync_all`: "
                                "every thread of the program calls it. Collective.")
sync_all_warp = _sync_function("sync_all_warp", "Warp variant of :func:`sync_all`: "
                               "every lane of the calling warp calls it. Collective.")
barrier_all_wg = _sync_function("barrier_all_wg", ":func:`barrier_all_block` under rocSHMEM's name "
                                "(the work-group variant): every thread of the program calls it.",
                                "barrier_all_block")
barrier_all_wave = _sync_function("barrier_all_wave", ":func:`barrier_all_warp` under rocSHMEM's name "
                                  "(the wavefront variant): every lane of the calling warp calls it.",
                                  "barrier_all_warp")


def _rma_alias(op, lowered, alias_note="rocSHMEM's name (work-group = block, wavefront = warp)"):
    kind = "get" if op.startswith("get") else "put"

    def fn(dest, source, bytes, pe, _semantic=None, _generator=None):
        return _rma(lowered, kind, _libshmem.scope_of(lowered), "_nbi" not in op, dest, source, bytes, pe,
                    _semantic, _generator)

    fn.__doc__ = f":func:`{lowered}` under {alias_note}."
    return _named(fn, op)


getmem_wg = _rma_alias("getmem_wg", "getmem_block")
getmem_nbi_wg = _rma_alias("getmem_nbi_wg", "getmem_nbi_block")
getmem_wave = _rma_alias("getmem_wave", "getmem_warp")
getmem_nbi_wave = _rma_alias("getmem_nbi_wave", "getmem_nbi_warp")
putmem_wg = _rma_alias("putmem_wg", "putmem_block")
putmem_nbi_wg = _rma_alias("putmem_nbi_wg", "putmem_nbi_block")
putmem_wave = _rma_alias("putmem_wave", "putmem_warp")
putmem_nbi_wave = _rma_alias("putmem_nbi_wave", "putmem_nbi_warp")


# ---------------------------------------------------------------------------------------------------------------
# the reference's other names: its proxy-path puts, quiet_pe, barrier_all_vec, uint64_wait_until_equals and the
# rocSHMEM context setter, each lowered as the function with the same semantics (docs/libshmem_device.md)
# ---------------------------------------------------------------------------------------------------------------
_PROXY = ("the reference's proxy-path name (it issues the put through NVSHMEM's internal transfer path, which "
          "only a bitcode built from NVSHMEM's sources has; the semantics are the ordinary put's, and so is the call)")
for _scope in ("", "_warp", "_block"):
    for _nbi in ("", "_nbi"):
        globals()[f"putmem_rma{_nbi}{_scope}"] = _rma_alias(f"putmem_rma{_nbi}{_scope}", f"putmem{_nbi}{_scope}",
                                                            _PROXY)
        globals()[f"putmem_signal_rma{_nbi}{_scope}"] = _put_signal_function(
            f"putmem_signal_rma{_nbi}{_scope}", f"putmem_signal{_nbi}{_scope}", _PROXY)
del _scope, _nbi


@_compat.builtin
def quiet_pe(pe=None, _semantic=None, _generator=None):
    """Complete this PE's outstanding puts / gets / signals to PE ``pe`` (optional; the reference's form takes none).
    Lowered as :func:`quiet`, which completes those to every PE: a superset, so whatever the caller relies on
    holds (it may wait for more). Every thread that reaches it calls it, as :func:`quiet`."""
    if _c(pe) is not None:
        _int("quiet_pe", "pe", pe, tl.int32)
    return _sync("quiet", "thread", _semantic, _generator)


@_compat.builtin
def barrier_all_vec(_semantic=None, _generator=None):
    """The reference's barrier over all PEs named for Ascend's vector cores (``aclshmemx_barrier_all_vec``: the
    vector cores of every PE meet). On a GPU a program plays the vector core's part: lowered as
    :func:`barrier_all_block` (every thread of the program calls it; it completes this PE's outstanding operations).
    As every device barrier: one program per PE at a time (guard with ``if tl.program_id(0) == 0:``), and a
    cooperative launch when the grid has more than one program."""
    return _sync("barrier_all_block", "block", _semantic, _generator)


@_compat.builtin
def uint64_wait_until_equals(addr, val, _semantic=None, _generator=None):
    """Wait until the local 64-bit word at symmetric ``addr`` equals ``val`` and return it (uint64, == ``val``).
    Lowered as :func:`signal_wait_until` with ``NVSHMEM_CMP_EQ`` (same polling, ordering and bounded-wait mode).
    Every thread of the program waits."""
    op = "uint64_wait_until_equals"
    a = _ptr(op, "addr", addr)
    v = _int(op, "val", val, tl.uint64)
    impl, kw = _lowering(_semantic, _generator)
    return impl.signal_wait_until(a, value_of(CMP_NAMES, "eq"), v, **kw)


@_compat.builtin
def set_rocshmem_ctx(ctx, _semantic=None, _generator=None):
    """The reference's rocSHMEM context setter: a no-op on every target. Our calls use the library's default
    context (NVSHMEM has none to set; the AMD lowering calls rocSHMEM's default-context functions; the simulator has
    none), so a kernel that sets the context it was given runs on the default one. ``ctx`` must still be a scalar
    pointer or integer (checked, then unused)."""
    c = _c(ctx)
    if not (isinstance(c, int) and not isinstance(c, bool)):
        if not (isinstance(c, tl.tensor) and (c.dtype.is_ptr() or c.dtype.is_int()) and not c.type.is_block()):
            raise TypeError(f"libshmem_device.set_rocshmem_ctx: ctx must be a scalar pointer or integer, got "
                            f"{getattr(c, 'type', type(c).__name__)}")
    return None


# ---------------------------------------------------------------------------------------------------------------
# typed scalar put / get: <type>_p(dest, value, pe), <type>_g(source, pe)
# ---------------------------------------------------------------------------------------------------------------
def _scalar_put(type_name):
    op = f"{type_name}_p"

    def fn(dest, value, pe, _semantic=None, _generator=None):
        d = _ptr(op, "dest", dest)
        v = _c(value)
        if isinstance(v, bool) or not (isinstance(v, (int, float)) or
                                       (isinstance(v, tl.tensor) and not v.type.is_block())):
            raise TypeError(f"libshmem_device.{op}: value must be a number or a scalar, got "
                            f"{getattr(v, 'type', type(v).__name__)}")
        r = _int(op, "pe", pe, tl.int32)
        impl, kw = _lowering(_semantic, _generator)
        return impl.p(op, d, v, r, **kw)

    fn.__doc__ = (f"Store ``value`` (converted to {SCALAR_TYPES[type_name]}, as ``tl.cast`` converts) at symmetric "
                  f"``dest`` on PE ``pe`` (OpenSHMEM's ``<type>_p``). Thread variant: every thread that reaches it stores "
                  f"its own value. Completes like a non-blocking put (``quiet`` / ``fence`` order it). Returns "
                  f"nothing.")
    return _named(fn, op)


def _scalar_get(type_name):
    op = f"{type_name}_g"

    def fn(source, pe, _semantic=None, _generator=None):
        s = _ptr(op, "source", source)
        r = _int(op, "pe", pe, tl.int32)
        impl, kw = _lowering(_semantic, _generator)
        return impl.g(op, s, r, **kw)

    fn.__doc__ = (f"Load the {SCALAR_TYPES[type_name]} at symmetric ``source`` on PE ``pe`` and return it "
                  f"(OpenSHMEM's ``<type>_g``, blocking). Thread variant: every thread that reaches it loads.")
    return _named(fn, op)


for _t in SCALAR_TYPES:
    globals()[f"{_t}_p"] = _scalar_put(_t)
    globals()[f"{_t}_g"] = _scalar_get(_t)
del _t

#: the functions, in the order of the docs' table
FUNCTIONS = (
    "my_pe", "n_pes", "team_my_pe", "team_n_pes", "team_translate_pe", "remote_ptr", "remote_mc_ptr",
    "barrier_all", "barrier_all_block", "barrier_all_warp", "barrier_all_wg", "barrier_all_wave",
    "barrier", "barrier_block", "barrier_warp", "sync_all", "sync_all_block", "sync_all_warp",
    "team_sync", "team_sync_block", "team_sync_warp", "quiet", "fence",
    "getmem_nbi_block", "getmem_block", "getmem_nbi_warp", "getmem_warp", "getmem_nbi", "getmem",
    "getmem_wg", "getmem_nbi_wg", "getmem_wave", "getmem_nbi_wave",
    "putmem_block", "putmem_nbi_block", "putmem_warp", "putmem_nbi_warp", "putmem", "putmem_nbi",
    "putmem_wg", "putmem_nbi_wg", "putmem_wave", "putmem_nbi_wave",
    "putmem_signal_nbi_block", "putmem_signal_block", "putmem_signal_nbi_warp", "putmem_signal_warp",
    "putmem_signal_nbi", "putmem_signal", "putmem_signal_nbi_wg", "putmem_signal_wg", "putmem_signal_nbi_wave",
    "putmem_signal_wave", "ulong_put_signal", "signal_op", "signal_wait_until",
    "broadcastmem", "broadcastmem_warp", "broadcastmem_block", "broadcast", "broadcast_warp", "broadcast_block",
    "fcollectmem", "fcollectmem_warp", "fcollectmem_block", "fcollect", "fcollect_warp", "fcollect_block",
    "putmem_rma", "putmem_rma_nbi", "putmem_rma_warp", "putmem_rma_nbi_warp", "putmem_rma_block",
    "putmem_rma_nbi_block", "putmem_signal_rma", "putmem_signal_rma_nbi", "putmem_signal_rma_warp",
    "putmem_signal_rma_nbi_warp", "putmem_signal_rma_block", "putmem_signal_rma_nbi_block", "quiet_pe",
    "barrier_all_vec", "uint64_wait_until_equals", "set_rocshmem_ctx",
) + tuple(f"{t}_{k}" for t in SCALAR_TYPES for k in ("p", "g"))

__all__ = list(FUNCTIONS) + [
    "NVSHMEM_CMP_EQ", "NVSHMEM_CMP_NE", "NVSHMEM_CMP_GT", "NVSHMEM_CMP_LE", "NVSHMEM_CMP_LT", "NVSHMEM_CMP_GE",
    "NVSHMEM_SIGNAL_SET", "NVSHMEM_SIGNAL_ADD", "NVSHMEM_TEAM_INVALID", "NVSHMEM_TEAM_WORLD", "NVSHMEM_TEAM_SHARED",
    "NVSHMEMX_TEAM_NODE",
]
