"""rocSHMEM device functions for the AMD lowerings: a table of extern symbols + one generic call, and the lowering of
``triton_dist.language.extra.libshmem_device``.

Same conventions as ``triton_dist.backends.nvidia.libshmem`` (pointers as 64-bit addresses, ``size_t`` = i64,
``int`` = i32, void results declared with a dummy int32). The rocSHMEM device bitcode is linked by
``triton_dist.jit`` when present; it must export these names unmangled (rocSHMEM declares its device API in C++,
so a thin ``extern "C"`` wrapper bitcode is the usual way). No AMD GPU / bitcode exists here: the AMD path is
compile-tested to LLIR only (test/lit/libshmem).

Names (rocSHMEM device API docs, rocm.docs.amd.com/projects/rocSHMEM): ``_wg`` = work-group (block) variant, ``_wave``
= wavefront variant, no suffix = one thread. ``rocshmem_barrier_all{,_wg,_wave}``, ``rocshmem_barrier(team)``,
``rocshmem_sync_all``, ``rocshmem_{put,get}mem{,_nbi}{,_wg,_wave}``, ``rocshmem_putmem_signal{,_nbi}_wg``,
``rocshmem_signal_set`` / ``rocshmem_signal_add`` / ``rocshmem_signal_wait_until`` (rocSHMEM >= 3.8),
``rocshmem_team_my_pe`` / ``rocshmem_team_n_pes``,
``rocshmem_ptr``. NOT in the device docs (documented there only as typed ``rocshmem_ctx_TYPENAME_broadcast_wg`` /
``..._fcollect_wg`` with a context): ``rocshmem_broadcastmem_wg``, ``rocshmem_fcollectmem_wg`` and the multicast
``rocshmem_mc_ptr`` (rocSHMEM has no multicast: expect null) -- these names follow the ctx-less convention and
are unverified against a real bitcode, as is ``rocshmemx_signal_op`` (kept for ``dl.notify``'s inter_node path).
Team handles are passed as int32 (world 0, shared / node 1); a rocSHMEM whose ``rocshmem_team_t`` is a pointer
needs the C wrapper to map them.

Constants: rocSHMEM's own enums (rocshmem_common.hpp): ``ROCSHMEM_SIGNAL_SET = 0``, ``ROCSHMEM_SIGNAL_ADD = 1``;
``ROCSHMEM_CMP_EQ = 0, NE = 1, GT = 2, GE = 3, LT = 4, LE = 5`` (a different order from NVSHMEM's);
``ROCSHMEM_TEAM_WORLD = 0``. The public ``libshmem_device`` constants are NVSHMEM's; the AMD lowering translates
them at compile time (sig_op / cmp must then be compile-time constants).
"""
from __future__ import annotations

import triton.language as tl

from ... import _compat
from ...language._extern import Extern, call_extern

LIB_NAME = "rocshmem"  # == triton_dist.jit.ROCSHMEM_LIB_NAME (the HIP backend links by this substring)
LIB_PATH = ""

#: ROCSHMEM_SIGNAL_SET / ROCSHMEM_SIGNAL_ADD (rocshmem_common.hpp)
SIGNAL_OPS = {"set": 0, "add": 1}
#: rocshmem_cmps (rocshmem_common.hpp)
CMP = {"eq": 0, "ne": 1, "gt": 2, "ge": 3, "lt": 4, "le": 5}
#: team handles: ROCSHMEM_TEAM_WORLD = 0; node/shared teams are mapped onto ROCSHMEM_TEAM_SHARED's handle value 1
TEAMS = {"world": 0, "shared": 1, "node": 1}

_P, _S, _I, _U = tl.int64, tl.int64, tl.int32, tl.uint64

EXTERNS = {
    "my_pe": Extern("rocshmem_my_pe", (), tl.int32),
    "n_pes": Extern("rocshmem_n_pes", (), tl.int32),
    "team_my_pe": Extern("rocshmem_team_my_pe", (_I, ), tl.int32),
    "team_n_pes": Extern("rocshmem_team_n_pes", (_I, ), tl.int32),
    "ptr": Extern("rocshmem_ptr", (_P, _I), tl.int64),
    "mc_ptr": Extern("rocshmem_mc_ptr", (_I, _P), tl.int64),
    "barrier_all": Extern("rocshmem_barrier_all", (), None),
    "barrier_all_block": Extern("rocshmem_barrier_all_wg", (), None),
    "barrier_all_warp": Extern("rocshmem_barrier_all_wave", (), None),
    "barrier": Extern("rocshmem_barrier", (_I, ), None),
    "sync_all": Extern("rocshmem_sync_all", (), None),
    "quiet": Extern("rocshmem_quiet", (), None),
    "fence": Extern("rocshmem_fence", (), None),
    "getmem_nbi_block": Extern("rocshmem_getmem_nbi_wg", (_P, _P, _S, _I), None),
    "getmem_block": Extern("rocshmem_getmem_wg", (_P, _P, _S, _I), None),
    "getmem_nbi_warp": Extern("rocshmem_getmem_nbi_wave", (_P, _P, _S, _I), None),
    "getmem_warp": Extern("rocshmem_getmem_wave", (_P, _P, _S, _I), None),
    "getmem_nbi": Extern("rocshmem_getmem_nbi", (_P, _P, _S, _I), None),
    "getmem": Extern("rocshmem_getmem", (_P, _P, _S, _I), None),
    "putmem_block": Extern("rocshmem_putmem_wg", (_P, _P, _S, _I), None),
    "putmem_nbi_block": Extern("rocshmem_putmem_nbi_wg", (_P, _P, _S, _I), None),
    "putmem_warp": Extern("rocshmem_putmem_wave", (_P, _P, _S, _I), None),
    "putmem_nbi_warp": Extern("rocshmem_putmem_nbi_wave", (_P, _P, _S, _I), None),
    "putmem": Extern("rocshmem_putmem", (_P, _P, _S, _I), None),
    "putmem_nbi": Extern("rocshmem_putmem_nbi", (_P, _P, _S, _I), None),
    "putmem_signal_nbi_block": Extern("rocshmem_putmem_signal_nbi_wg", (_P, _P, _S, _P, _U, _I, _I), None),
    "putmem_signal_block": Extern("rocshmem_putmem_signal_wg", (_P, _P, _S, _P, _U, _I, _I), None),
    # the pre-existing dl.notify inter_node lowering uses this name
    "signal_op": Extern("rocshmemx_signal_op", (_P, _U, _I, _I), None),
    # libshmem_device.signal_op: the standalone signal APIs (rocSHMEM >= 3.8 CHANGELOG), chosen by sig_op
    "signal_set": Extern("rocshmem_signal_set", (_P, _U, _I), None),
    "signal_add": Extern("rocshmem_signal_add", (_P, _U, _I), None),
    "signal_wait_until": Extern("rocshmem_signal_wait_until", (_P, _I, _U), tl.uint64),
    "broadcastmem_block": Extern("rocshmem_broadcastmem_wg", (_I, _P, _P, _S, _I), None),
    "fcollectmem_block": Extern("rocshmem_fcollectmem_wg", (_I, _P, _P, _S), None),
}

COLLECTIVE_SYMBOLS = tuple(EXTERNS[n].symbol for n in ("barrier_all", "barrier_all_block", "barrier_all_warp",
                                                       "barrier", "sync_all", "broadcastmem_block",
                                                       "fcollectmem_block"))

#: NVSHMEM value (the public constants) -> rocSHMEM value
NV_SIGNAL_TO_ROC = {9: SIGNAL_OPS["set"], 10: SIGNAL_OPS["add"]}
NV_CMP_TO_ROC = {0: CMP["eq"], 1: CMP["ne"], 2: CMP["gt"], 3: CMP["le"], 4: CMP["lt"], 5: CMP["ge"]}
NV_TEAM_TO_ROC = {0: TEAMS["world"], 1: TEAMS["shared"], 2: TEAMS["node"]}


def call(name: str, *args, _semantic):
    return call_extern(LIB_NAME, LIB_PATH, EXTERNS[name], list(args), _semantic)


# ----------------------------------------------------------------------------------------------------------------
# libshmem_device lowering
# ----------------------------------------------------------------------------------------------------------------

@_compat.dist_builtin
def _call(name, args, _semantic=None):
    return call(_compat.unwrap_constexpr(name), *list(args), _semantic=_semantic)


@_compat.dist_builtin
def _barrier(_semantic=None):
    _semantic.debug_barrier()


@_compat.dist_builtin
def _local_id(_semantic=None):
    v = call_extern("ockl", "", Extern("__ockl_get_local_id", (tl.int32, ), tl.int64, True), [0], _semantic)
    return _semantic.cast(v, tl.int32)


@_compat.jit_function
def _guarded(args, NAME: tl.constexpr, LIMIT: tl.constexpr, SYNC_BEFORE: tl.constexpr, SYNC_AFTER: tl.constexpr):
    if SYNC_BEFORE:
        _barrier()
    if _local_id() < LIMIT:
        _call(NAME, args)
    if SYNC_AFTER:
        _barrier()


def translate_constant(kind: str, value, op: str):
    """Map an NVSHMEM constant (the public ``libshmem_device`` value) to rocSHMEM's; ``value`` must be an int."""
    table = {"sig_op": NV_SIGNAL_TO_ROC, "cmp": NV_CMP_TO_ROC, "team": NV_TEAM_TO_ROC}[kind]
    if not isinstance(value, int) or value not in table:
        raise ValueError(f"libshmem_device.{op}: on AMD {kind} must be a compile-time constant, one of "
                         f"{sorted(table)} (the libshmem_device NVSHMEM_* constants), got {value!r}")
    return table[value]


def lower(name, args, scope, *, sync_before=False, sync_after=False, _semantic, _generator=None, target=None):
    """See ``triton_dist.backends.nvidia.libshmem.lower``; "warp" = wavefront 0 of the work-group."""
    ext = EXTERNS[name]
    if scope in ("block", "all"):
        if sync_before:
            _semantic.debug_barrier()
        res = call(name, *args, _semantic=_semantic)
        if sync_after:
            _semantic.debug_barrier()
        return None if ext.ret is None else res
    if _generator is None:
        raise RuntimeError(f"libshmem_device.{name}: needs the code generator (call it from a kernel)")
    limit = 1 if scope == "thread" else (target.warp_size if target is not None else 64)
    _compat.call_jit(_generator, _guarded, [tl.tuple(list(args)), tl.constexpr(name), tl.constexpr(limit),
                                            tl.constexpr(bool(sync_before)), tl.constexpr(bool(sync_after))])
    return None
