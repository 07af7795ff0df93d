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
