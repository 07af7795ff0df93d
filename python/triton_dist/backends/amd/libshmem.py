"""rocSHMEM device functions for the AMD lowerings: a table of extern symbols + one generic call, and the lowering of
``triton_dist.language.extra.libshmem_device``.

The C signatures are the NVIDIA table's (``triton_dist.language._libshmem``: pointers as 64-bit addresses,
``size_t`` = i64, ``int`` = i32, void results declared with a dummy int32), except that ``broadcastmem_block`` /
``fcollectmem_block`` are declared void here. The rocSHMEM device bitcode is linked by ``triton_dist.jit`` when
present; it must export these names unmangled (rocSHMEM declares its device API in C++, so a thin ``extern "C"``
wrapper bitcode is the usual way). No AMD GPU / bitcode exists here: the AMD path is compile-tested to LLIR only
(test/lit/libshmem).

Names (rocSHMEM device API docs, rocm.docs.amd.com/projects/rocSHMEM): ``rocshmem_<name>`` with ``_block`` ->
``_wg`` (work-group variant) and ``_warp`` -> ``_wave`` (wavefront variant); no suffix = one thread.
``rocshmem_barrier_all{,_wg,_wave}``, ``rocshmem_barrier(team)``, ``rocshmem_sync_all``,
``rocshmem_{put,get}mem{,_nbi}{,_wg,_wave}``, ``rocshmem_putmem_signal{,_nbi}_wg``, ``rocshmem_signal_set`` /
``rocshmem_signal_add`` / ``rocshmem_signal_wait_until`` (rocSHMEM >= 3.8), ``rocshmem_team_my_pe`` /
``rocshmem_team_n_pes``, ``rocshmem_ptr``. NOT in the device docs (documented there only as typed
``rocshmem_ctx_TYPENAME_broadcast_wg`` / ``..._fcollect_wg`` with a context): ``rocshmem_broadcastmem_wg``,
``rocshmem_fcollectmem_wg`` and the multicast ``rocshmem_mc_ptr`` (rocSHMEM has no multicast: expect null) --
these names follow the ctx-less convention and are unverified against a real bitcode, as is
``rocshmemx_signal_op`` (kept for ``dl.notify``'s inter_node path).
Team handles are passed as int32 (world 0, shared / node 1); a rocSHMEM whose ``rocshmem_team_t`` is a pointer
needs the C wrapper to map them.

Constants: rocSHMEM's own enums (rocshmem_common.hpp): ``ROCSHMEM_SIGNAL_SET = 0``, ``ROCSHMEM_SIGNAL_ADD = 1``;
``ROCSHMEM_CMP_EQ = 0, NE = 1, GT = 2, GE = 3, LT = 4, LE = 5`` (a different order from NVSHMEM's);
``ROCSHMEM_TEAM_WORLD = 0``. The public ``libshmem_device`` constants are NVSHMEM's; the AMD lowering translates
them at compile time (sig_op / cmp must then be compile-time constants).
"""
from __future__ import annotations

import sys

import triton.language as tl

from ...language import _libshmem
from ...language._extern import Extern, call_extern

LIB_NAME = "rocshmem"  # == triton_dist.jit.ROCSHMEM_LIB_NAME (the HIP backend links by this substring)
LIB_PATH = ""

#: ROCSHMEM_SIGNAL_SET / ROCSHMEM_SIGNAL_ADD (rocshmem_common.hpp)
SIGNAL_OPS = {"set": 0, "add": 1}
#: rocshmem_cmps (rocshmem_common.hpp)
CMP = {"eq": 0, "ne": 1, "gt": 2, "ge": 3, "lt": 4, "le": 5}
#: team handles: ROCSHMEM_TEAM_WORLD = 0; node/shared teams are mapped onto ROCSHMEM_TEAM_SHARED's handle value 1
TEAMS = {"world": 0, "shared": 1, "node": 1}
#: threads that run a "warp" call (wavefront 0) when the target does not say
WARP_SIZE = 64


def _symbol(name: str) -> str:
    if name == "signal_op":  # the pre-existing dl.notify inter_node lowering uses this name
        return "rocshmemx_signal_op"
    for suffix, roc in (("_block", "_wg"), ("_warp", "_wave")):
        if name.endswith(suffix):
            name = name[:-len(suffix)] + roc
    return "rocshmem_" + name


#: name -> Extern (symbol, argument types, result type)
EXTERNS = _libshmem.externs(_symbol, returns={"broadcastmem_block": None, "fcollectmem_block": None})
# libshmem_device.signal_op: the standalone signal APIs (rocSHMEM >= 3.8 CHANGELOG), chosen by sig_op
EXTERNS["signal_set"] = Extern("rocshmem_signal_set", (tl.int64, tl.uint64, tl.int32), None)
EXTERNS["signal_add"] = Extern("rocshmem_signal_add", (tl.int64, tl.uint64, tl.int32), None)

#: see ``triton_dist.language._libshmem.COLLECTIVES``
COLLECTIVE_SYMBOLS = tuple(EXTERNS[n].symbol for n in _libshmem.COLLECTIVES)

#: NVSHMEM value (the public constants) -> rocSHMEM value
NV_SIGNAL_TO_ROC = {9: SIGNAL_OPS["set"], 10: SIGNAL_OPS["add"]}
NV_CMP_TO_ROC = {0: CMP["eq"], 1: CMP["ne"], 2: CMP["gt"], 3: CMP["le"], 4: CMP["lt"], 5: CMP["ge"]}
NV_TEAM_TO_ROC = {0: TEAMS["world"], 1: TEAMS["shared"], 2: TEAMS["node"]}


def call(name: str, *args, _semantic):
    return call_extern(LIB_NAME, LIB_PATH, EXTERNS[name], list(args), _semantic)


# ----------------------------------------------------------------------------------------------------------------
# libshmem_device lowering
# ----------------------------------------------------------------------------------------------------------------
def thread_id(_semantic):
    """The thread's index in the work-group (``__ockl_get_local_id(0)``), int32."""
    v = call_extern("ockl", "", Extern("__ockl_get_local_id", (tl.int32, ), tl.int64, True), [0], _semantic)
    return _semantic.cast(v, tl.int32)


def translate_constant(kind: str, value, op: str):
    """Map an NVSHMEM constant (the public ``libshmem_device`` value) to rocSHMEM's; ``value`` must be an int."""
    table = {"sig_op": NV_SIGNAL_TO_ROC, "cmp": NV_CMP_TO_ROC, "team": NV_TEAM_TO_ROC}[kind]
    if not isinstance(value, int) or value not in table:
        raise ValueError(f"libshmem_device.{op}: on AMD {kind} must be a compile-time constant, one of "
                         f"{sorted(table)} (the libshmem_device NVSHMEM_* constants), got {value!r}")
    return table[value]


def lower(name, args, scope, **kwargs):
    """Emit libshmem_device function ``name``: see ``triton_dist.language._libshmem.lower`` ("warp": wavefront 0
    of the work-group)."""
    return _libshmem.lower(sys.modules[__name__], name, args, scope, **kwargs)
