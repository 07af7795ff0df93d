"""NVSHMEM device functions for the NVIDIA lowerings: a table of extern symbols + one generic call, and the
lowering of ``triton_dist.language.extra.libshmem_device``.

Pointers are passed as their 64-bit generic address (``i64``) so the declaration matches NVSHMEM's ``void *``
parameters whatever Triton's pointer address space is; results that are pointers come back as ``i64`` and are
converted back by the caller. ``size_t`` is ``i64``, ``int`` / ``nvshmem_team_t`` are ``i32``, ``uint64_t`` is
``u64``. The bitcode (``libnvshmem_device.bc``, NVSHMEM 3.4.5 wheel) is linked by ``triton_dist.jit``; every symbol
below was checked to be present in it, and test/lit/libshmem links a call to each into a cubin.

Constants (NVSHMEM 3.4.5 headers, ``nvidia/nvshmem/include``):
- ``device_host_transport/nvshmem_common_transport.h``: ``NVSHMEM_SIGNAL_SET = 9``, ``NVSHMEM_SIGNAL_ADD = 10``.
- ``device_host_transport/nvshmem_constants.h``: ``NVSHMEM_CMP_EQ = 0, NE = 1, GT = 2, LE = 3, LT = 4, GE = 5``.
- ``device_host/nvshmem_common.cuh``: ``NVSHMEM_TEAM_WORLD = 0``, ``NVSHMEM_TEAM_SHARED = 1``,
  ``NVSHMEMX_TEAM_NODE = 2``, ``NVSHMEM_TEAM_INVALID = -1``.
"""
from __future__ import annotations

import triton.language as tl

from ... import _compat
from ...language._extern import Extern, call_extern

LIB_NAME = "libnvshmem_device"
LIB_PATH = ""  # linked through the kernel's extern_libs by triton_dist.jit

#: NVSHMEM_SIGNAL_SET / NVSHMEM_SIGNAL_ADD (nvshmem_common_transport.h). NVSHMEM treats any value other than SET as
#: ADD on its load/store path, so a wrong SET value silently adds.
SIGNAL_OPS = {"set": 9, "add": 10}
#: nvshmemx_cmp_type_t (nvshmem_constants.h)
CMP = {"eq": 0, "ne": 1, "gt": 2, "le": 3, "lt": 4, "ge": 5}
#: nvshmem_team_t handles (nvshmem_common.cuh)
TEAMS = {"world": 0, "shared": 1, "node": 2}

_P, _S, _I, _U = tl.int64, tl.int64, tl.int32, tl.uint64  # pointer, size_t, int, uint64_t

EXTERNS = {
    # PE info
    "my_pe": Extern("nvshmem_my_pe", (), tl.int32),
    "n_pes": Extern("nvshmem_n_pes", (), tl.int32),
    "team_my_pe": Extern("nvshmem_team_my_pe", (_I, ), tl.int32),
    "team_n_pes": Extern("nvshmem_team_n_pes", (_I, ), tl.int32),
    # memory: void *nvshmem_ptr(const void *dest, int pe); void *nvshmemx_mc_ptr(nvshmem_team_t team, const void *ptr)
    "ptr": Extern("nvshmem_ptr", (_P, _I), tl.int64),
    "mc_ptr": Extern("nvshmemx_mc_ptr", (_I, _P), tl.int64),
    # sync
    "barrier_all": Extern("nvshmem_barrier_all", (), None),
    "barrier_all_block": Extern("nvshmemx_barrier_all_block", (), None),
    "barrier_all_warp": Extern("nvshmemx_barrier_all_warp", (), None),
    "barrier": Extern("nvshmem_barrier", (_I, ), None),
    "sync_all": Extern("nvshmem_sync_all", (), None),
    "quiet": Extern("nvshmem_quiet", (), None),
    "fence": Extern("nvshmem_fence", (), None),
    # get / put: (dest, source, bytes, pe)
    "getmem_nbi_block": Extern("nvshmemx_getmem_nbi_block", (_P, _P, _S, _I), None),
    "getmem_block": Extern("nvshmemx_getmem_block", (_P, _P, _S, _I), None),
    "getmem_nbi_warp": Extern("nvshmemx_getmem_nbi_warp", (_P, _P, _S, _I), None),
    "getmem_warp": Extern("nvshmemx_getmem_warp", (_P, _P, _S, _I), None),
    "getmem_nbi": Extern("nvshmem_getmem_nbi", (_P, _P, _S, _I), None),
    "getmem": Extern("nvshmem_getmem", (_P, _P, _S, _I), None),
    "putmem_block": Extern("nvshmemx_putmem_block", (_P, _P, _S, _I), None),
    "putmem_nbi_block": Extern("nvshmemx_putmem_nbi_block", (_P, _P, _S, _I), None),
    "putmem_warp": Extern("nvshmemx_putmem_warp", (_P, _P, _S, _I), None),
    "putmem_nbi_warp": Extern("nvshmemx_putmem_nbi_warp", (_P, _P, _S, _I), None),
    "putmem": Extern("nvshmem_putmem", (_P, _P, _S, _I), None),
    "putmem_nbi": Extern("nvshmem_putmem_nbi", (_P, _P, _S, _I), None),
    # signal: (dest, source, bytes, sig_addr, signal, sig_op, pe)
    "putmem_signal_nbi_block": Extern("nvshmemx_putmem_signal_nbi_block", (_P, _P, _S, _P, _U, _I, _I), None),
    "putmem_signal_block": Extern("nvshmemx_putmem_signal_block", (_P, _P, _S, _P, _U, _I, _I), None),
    # void nvshmemx_signal_op(uint64_t *sig_addr, uint64_t signal, int sig_op, int pe)
    "signal_op": Extern("nvshmemx_signal_op", (_P, _U, _I, _I), None),
    # uint64_t nvshmem_signal_wait_until(uint64_t *sig_addr, int cmp, uint64_t cmp_val)
    "signal_wait_until": Extern("nvshmem_signal_wait_until", (_P, _I, _U), tl.uint64),
    # collectives (byte counts): int nvshmemx_broadcastmem_block(team, dest, source, nelems, pe_root)
    "broadcastmem_block": Extern("nvshmemx_broadcastmem_block", (_I, _P, _P, _S, _I), tl.int32),
    "fcollectmem_block": Extern("nvshmemx_fcollectmem_block", (_I, _P, _P, _S), tl.int32),
}

#: Functions that block until other PEs (or every block of a launch) arrive: a kernel calling any of them must be
#: launched cooperatively when it has more than one program (see ``triton_dist.jit.check_cooperative_launch``).
COLLECTIVE_SYMBOLS = tuple(EXTERNS[n].symbol for n in ("barrier_all", "barrier_all_block", "barrier_all_warp",
                                                       "barrier", "sync_all", "broadcastmem_block",
                                                       "fcollectmem_block"))


def call(name: str, *args, _semantic):
    """Call table entry ``name`` (e.g. ``call("my_pe", _semantic=s)``)."""
    return call_extern(LIB_NAME, LIB_PATH, EXTERNS[name], list(args), _semantic)


# ----------------------------------------------------------------------------------------------------------------
# libshmem_device lowering
# ----------------------------------------------------------------------------------------------------------------
_TID_ASM = "mov.u32 $0, %tid.x;"


@_compat.dist_builtin
def _call(name, args, _semantic=None):
    name = _compat.unwrap_constexpr(name)
    return call(name, *list(args), _semantic=_semantic)


@_compat.dist_builtin
def _barrier(_semantic=None):
    _semantic.debug_barrier()


@_compat.jit_function
def _guarded(args, NAME: tl.constexpr, LIMIT: tl.constexpr, SYNC_BEFORE: tl.constexpr, SYNC_AFTER: tl.constexpr,
             TID_ASM: tl.constexpr):
    # threads tid < LIMIT of the program execute the call (1: thread 0; 32: warp 0)
    if SYNC_BEFORE:
        _barrier()
    tid = tl.inline_asm_elementwise(TID_ASM, "=r", [], dtype=tl.int32, is_pure=False, pack=1)
    if tid < LIMIT:
        _call(NAME, args)
    if SYNC_AFTER:
        _barrier()


def lower(name, args, scope, *, sync_before=False, sync_after=False, _semantic, _generator=None, target=None):
    """Emit libshmem_device function ``name`` with converted ``args`` (already i64 / i32 / u64 tensors).

    ``scope``: "block" (every thread of the program calls), "warp" (threads of warp 0 call), "thread" (thread 0
    alone calls), "all" (every thread calls; queries and waits). Returns the result (None for void)."""
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
    limit = 1 if scope == "thread" else (target.warp_size if target is not None else 32)
    _compat.call_jit(_generator, _guarded, [tl.tuple(list(args)), tl.constexpr(name), tl.constexpr(limit),
                                            tl.constexpr(bool(sync_before)), tl.constexpr(bool(sync_after)),
                                            tl.constexpr(_TID_ASM)])
    return None
