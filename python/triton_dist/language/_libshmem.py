"""The ``libshmem_device`` functions as the GPU targets call them: each C signature declared once, the constants'
values (stated once here for every target), and the lowering steps the NVIDIA and AMD tables share. Symbol names
live in ``triton_dist.backends.{nvidia,amd}.libshmem``.

Pointers pass as their 64-bit generic address (``i64``; pointer results come back as ``i64``), ``size_t`` is ``i64``,
``int`` and team handles are ``i32``, ``uint64_t`` is ``u64``; a void result is ``None``."""
from __future__ import annotations

import importlib

import triton.language as tl

from .. import _compat
from ._extern import Extern

# ----------------------------------------------------------------------------------------------------------------
# constants: NVSHMEM 3.4.5's values (headers under nvidia/nvshmem/include). They are the API's values on every target:
# ``libshmem_device`` exports them as its ``NVSHMEM_*`` constexprs and checks arguments against these tables, the
# NVIDIA lowering passes them through, the simulator reads them (``triton_dist.backends.sim.libshmem``) and the AMD
# lowering translates them to rocSHMEM's enums (``triton_dist.backends.amd.libshmem``).
# ----------------------------------------------------------------------------------------------------------------
#: value -> name, enum nvshmemi_cmp_type (device_host_transport/nvshmem_constants.h; note LE = 3 comes before LT = 4)
CMP_NAMES = {0: "eq", 1: "ne", 2: "gt", 3: "le", 4: "lt", 5: "ge"}
#: value -> name, nvshmemx_signal_op_t (device_host_transport/nvshmem_common_transport.h)
SIGNAL_NAMES = {9: "set", 10: "add"}
#: value -> name, predefined team handles (device_host/nvshmem_common.cuh)
TEAM_NAMES = {0: "world", 1: "shared", 2: "node"}
#: NVSHMEM_TEAM_INVALID (device_host/nvshmem_common.cuh): not a team, refused wherever a team is expected
TEAM_INVALID = -1


def value_of(names, name: str) -> int:
    """The value whose name is ``name`` in a ``*_NAMES`` table (e.g. ``value_of(SIGNAL_NAMES, "set") == 9``)."""
    for value, n in names.items():
        if n == name:
            return value
    raise KeyError(name)


_P, _S, _I, _U = tl.int64, tl.int64, tl.int32, tl.uint64  # pointer, size_t, int, uint64_t
_RMA = (_P, _P, _S, _I)  # (dest, source, bytes, pe)

#: libshmem_device function -> (argument types, result type).
SIGNATURES = {
    # PE info
    "my_pe": ((), tl.int32),
    "n_pes": ((), tl.int32),
    "team_my_pe": ((_I, ), tl.int32),
    "team_n_pes": ((_I, ), tl.int32),
    # memory: ptr(const void *dest, int pe); mc_ptr(team, const void *ptr)
    "ptr": ((_P, _I), tl.int64),
    "mc_ptr": ((_I, _P), tl.int64),
    # sync
    "barrier_all": ((), None),
    "barrier_all_block": ((), None),
    "barrier_all_warp": ((), None),
    "barrier": ((_I, ), None),
    "sync_all": ((), None),
    "quiet": ((), None),
    "fence": ((), None),
    # get / put
    "getmem_nbi_block": (_RMA, None),
    "getmem_block": (_RMA, None),
    "getmem_nbi_warp": (_RMA, None),
    "getmem_warp": (_RMA, None),
    "getmem_nbi": (_RMA, None),
    "getmem": (_RMA, None),
    "putmem_block": (_RMA, None),
    "putmem_nbi_block": (_RMA, None),
    "putmem_warp": (_RMA, None),
    "putmem_nbi_warp": (_RMA, None),
    "putmem": (_RMA, None),
    "putmem_nbi": (_RMA, None),
    # signal: (dest, source, bytes, sig_addr, signal, sig_op, pe)
    "putmem_signal_nbi_block": ((_P, _P, _S, _P, _U, _I, _I), None),
    "putmem_signal_block": ((_P, _P, _S, _P, _U, _I, _I), None),
    # signal_op(uint64_t *sig_addr, uint64_t signal, int sig_op, int pe)
    "signal_op": ((_P, _U, _I, _I), None),
    # uint64_t signal_wait_until(uint64_t *sig_addr, int cmp, uint64_t cmp_val)
    "signal_wait_until": ((_P, _I, _U), tl.uint64),
    # collectives (byte counts): int broadcastmem_block(team, dest, source, nelems, pe_root)
    "broadcastmem_block": ((_I, _P, _P, _S, _I), tl.int32),
    "fcollectmem_block": ((_I, _P, _P, _S), tl.int32),
}

#: Functions that block until other PEs (or every block of a launch) arrive: a kernel calling any of them must be
#: launched cooperatively when it has more than one program (see ``triton_dist.jit.check_cooperative_launch``).
COLLECTIVES = ("barrier_all", "barrier_all_block", "barrier_all_warp", "barrier", "sync_all", "broadcastmem_block",
               "fcollectmem_block")


def externs(symbol_of, returns=None):
    """``{name: Extern}`` for every function of :data:`SIGNATURES`, named ``symbol_of(name)``; ``returns`` maps a
    name to the result type a target's library declares instead (``None``: void)."""
    returns = returns or {}
    return {name: Extern(symbol_of(name), args, returns.get(name, ret)) for name, (args, ret) in SIGNATURES.items()}


# ----------------------------------------------------------------------------------------------------------------
# lowering
# ----------------------------------------------------------------------------------------------------------------
def builtin(shmem, name):
    """A builtin that calls ``shmem.call(name, *args)``, for a backend's ``@jit`` helpers."""

    def call(*args, _semantic=None):
        return shmem.call(name, *args, _semantic=_semantic)

    call.__name__ = call.__qualname__ = f"_{name}"
    return _compat.builtin(call)


@_compat.builtin
def _call(shmem, name, args, _semantic=None):
    shmem = importlib.import_module(_compat.unwrap_constexpr(shmem))
    return shmem.call(_compat.unwrap_constexpr(name), *list(args), _semantic=_semantic)


@_compat.builtin
def _thread_id(shmem, _semantic=None):
    return importlib.import_module(_compat.unwrap_constexpr(shmem)).thread_id(_semantic)


@_compat.builtin
def _barrier(_semantic=None):
    _semantic.debug_barrier()


@_compat.jit_function
def _guarded(args, SHMEM: tl.constexpr, NAME: tl.constexpr, LIMIT: tl.constexpr, SYNC_BEFORE: tl.constexpr,
             SYNC_AFTER: tl.constexpr):
    # threads tid < LIMIT of the program execute the call (1: thread 0; warp size: warp / wavefront 0)
    if SYNC_BEFORE:
        _barrier()
    if _thread_id(SHMEM) < LIMIT:
        _call(SHMEM, NAME, args)
    if SYNC_AFTER:
        _barrier()


def lower(shmem, name, args, scope, *, sync_before=False, sync_after=False, _semantic, _generator=None,
          target=None):
    """Emit function ``name`` of ``shmem`` (a ``triton_dist.backends.<target>.libshmem`` module: ``call``,
    ``EXTERNS``, ``thread_id``, ``WARP_SIZE``) with converted ``args`` (already i64 / i32 / u64 tensors).

    ``scope``: "block" (every thread of the program calls), "warp" (threads of warp 0 call), "thread" (thread 0
    alone calls), "all" (every thread calls; queries and waits). Returns the result (None for void)."""
    if scope in ("block", "all"):
        if sync_before:
            _semantic.debug_barrier()
        res = shmem.call(name, *args, _semantic=_semantic)
        if sync_after:
            _semantic.debug_barrier()
        return None if shmem.EXTERNS[name].ret is None else res
    if _generator is None:
        raise RuntimeError(f"libshmem_device.{name}: needs the code generator (call it from a kernel)")
    limit = 1 if scope == "thread" else (target.warp_size if target is not None else shmem.WARP_SIZE)
    _compat.call_jit(_generator, _guarded, [tl.tuple(list(args)), tl.constexpr(shmem.__name__), tl.constexpr(name),
                                            tl.constexpr(limit), tl.constexpr(bool(sync_before)),
                                            tl.constexpr(bool(sync_after))])
    return None


# ----------------------------------------------------------------------------------------------------------------
# the libshmem_device lowering of a GPU target
# ----------------------------------------------------------------------------------------------------------------
def address(ptr, _semantic):
    """A pointer operand (scalar typed pointer or int64 / uint64 address) as the i64 address the C functions take."""
    return ptr if ptr.dtype == tl.int64 else _semantic.cast(ptr, tl.int64)


def c_int(value, ty, _semantic):
    """An integer operand (a Python int that fits ``ty``, or an integer scalar) as C type ``ty`` (i32 / i64 / u64);
    a Python int at or above 2**63 passes to u64 as its two's-complement bits."""
    if isinstance(value, int):
        if ty == tl.uint64 and value >= (1 << 63):
            value -= 1 << 64
        value = _semantic.to_tensor(value)
    return value if value.dtype == ty else _semantic.cast(value, ty)


def pointer_like(address_i64, like, _semantic):
    """The i64 result of a pointer query converted to ``like``'s pointer type (i64 stays i64), marked 16-aligned
    (symmetric allocations are) so accesses through it vectorise."""
    if like.dtype == tl.int64:
        return address_i64
    out = _semantic.cast(address_i64, like.type)
    return _compat.set_divisibility(out, 16)


class GpuLibshmemLowering:
    """The ``LibshmemLowering`` (``triton_dist.language._backend``) of a GPU target, written once over the target's
    table module ``shmem`` (``triton_dist.backends.<target>.libshmem``), which provides ``lower(name, args, scope,
    ...)`` (see :func:`lower`) and ``constant(kind, value, op)``: the library's value of a public (NVSHMEM) team /
    sig_op / cmp constant. A target whose library differs in a function overrides that method.

    Operands are converted to the C types of :data:`SIGNATURES` in the order the declaration lists them, constants
    last (the order of the emitted conversions is part of the generated code)."""

    def __init__(self, shmem):
        self.shmem = shmem

    def constant_operand(self, kind, value, op, _semantic):
        """A validated team / sig_op / cmp constant as the library's i32 operand."""
        value = self.shmem.constant(kind, value, op)
        if isinstance(value, int):
            return _semantic.to_tensor(value)
        return value if value.dtype == tl.int32 else _semantic.cast(value, tl.int32)

    def my_pe(self, *, target, _semantic, _generator):
        return self.shmem.lower("my_pe", [], "all", _semantic=_semantic, target=target)

    def n_pes(self, *, target, _semantic, _generator):
        return self.shmem.lower("n_pes", [], "all", _semantic=_semantic, target=target)

    def team_my_pe(self, team, *, target, _semantic, _generator):
        t = self.constant_operand("team", team, "team_my_pe", _semantic)
        return self.shmem.lower("team_my_pe", [t], "all", _semantic=_semantic, target=target)

    def team_n_pes(self, team, *, target, _semantic, _generator):
        t = self.constant_operand("team", team, "team_n_pes", _semantic)
        return self.shmem.lower("team_n_pes", [t], "all", _semantic=_semantic, target=target)

    def remote_ptr(self, local_ptr, pe, *, target, _semantic, _generator):
        args = [address(local_ptr, _semantic), c_int(pe, tl.int32, _semantic)]
        res = self.shmem.lower("ptr", args, "all", _semantic=_semantic, target=target)
        return pointer_like(res, local_ptr, _semantic)

    def remote_mc_ptr(self, team, ptr, *, target, _semantic, _generator):
        args = [self.constant_operand("team", team, "remote_mc_ptr", _semantic), address(ptr, _semantic)]
        res = self.shmem.lower("mc_ptr", args, "all", _semantic=_semantic, target=target)
        return pointer_like(res, ptr, _semantic)

    def sync(self, name, scope, team, *, target, _semantic, _generator):
        args = [] if team is None else [self.constant_operand("team", team, name, _semantic)]
        self.shmem.lower(name, args, scope, sync_before=scope != "block", sync_after=scope != "block",
                         _semantic=_semantic, _generator=_generator, target=target)
        return None

    def rma(self, name, kind, scope, blocking, dest, source, nbytes, pe, *, target, _semantic, _generator):
        args = [address(dest, _semantic), address(source, _semantic), c_int(nbytes, tl.int64, _semantic),
                c_int(pe, tl.int32, _semantic)]
        sync = {} if scope == "block" else {"sync_before": kind == "put", "sync_after": blocking}
        self.shmem.lower(name, args, scope, _semantic=_semantic, _generator=_generator, target=target, **sync)
        return None

    def putmem_signal(self, name, blocking, dest, source, nbytes, sig_addr, signal, sig_op, pe, *, target, _semantic,
                      _generator):
        d, s = address(dest, _semantic), address(source, _semantic)
        n = c_int(nbytes, tl.int64, _semantic)
        a = address(sig_addr, _semantic)
        v = c_int(signal, tl.uint64, _semantic)
        r = c_int(pe, tl.int32, _semantic)
        o = self.constant_operand("sig_op", sig_op, name, _semantic)
        self.shmem.lower(name, [d, s, n, a, v, o, r], "block", _semantic=_semantic, _generator=_generator,
                         target=target)
        return None

    def signal_op(self, sig_addr, signal, sig_op, pe, *, target, _semantic, _generator):
        a = address(sig_addr, _semantic)
        v = c_int(signal, tl.uint64, _semantic)
        r = c_int(pe, tl.int32, _semantic)
        o = self.constant_operand("sig_op", sig_op, "signal_op", _semantic)
        self.shmem.lower("signal_op", [a, v, o, r], "thread", sync_before=True, _semantic=_semantic,
                         _generator=_generator, target=target)
        return None

    def signal_wait_until(self, sig_addr, cmp, cmp_val, *, target, _semantic, _generator):
        a = address(sig_addr, _semantic)
        v = c_int(cmp_val, tl.uint64, _semantic)
        c = self.constant_operand("cmp", cmp, "signal_wait_until", _semantic)
        return self.shmem.lower("signal_wait_until", [a, c, v], "all", _semantic=_semantic, _generator=_generator,
                                target=target)

    def broadcastmem_block(self, team, dest, source, nbytes, pe_root, *, target, _semantic, _generator):
        args = [self.constant_operand("team", team, "broadcastmem_block", _semantic), address(dest, _semantic),
                address(source, _semantic), c_int(nbytes, tl.int64, _semantic), c_int(pe_root, tl.int32, _semantic)]
        res = self.shmem.lower("broadcastmem_block", args, "block", _semantic=_semantic, _generator=_generator,
                               target=target)
        return res if res is not None else _semantic.to_tensor(0)

    def fcollectmem_block(self, team, dest, source, nbytes, *, target, _semantic, _generator):
        args = [self.constant_operand("team", team, "fcollectmem_block", _semantic), address(dest, _semantic),
                address(source, _semantic), c_int(nbytes, tl.int64, _semantic)]
        res = self.shmem.lower("fcollectmem_block", args, "block", _semantic=_semantic, _generator=_generator,
                               target=target)
        return res if res is not None else _semantic.to_tensor(0)
