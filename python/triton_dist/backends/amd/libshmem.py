"""rocSHMEM device functions for the AMD lowerings: a table of extern symbols + one generic call, and the lowering of
``triton_dist.language.extra.libshmem_device``.

The C signatures are the NVIDIA table's (``triton_dist.language._libshmem``: pointers as 64-bit addresses,
``size_t`` = i64, ``int`` = i32, void results declared with a dummy int32), with the AMD differences below. The
rocSHMEM device bitcode is linked by ``triton_dist.jit`` when present. rocSHMEM's device API is C++ (``namespace
rocshmem``, mangled); the bitcode must export these names unmangled. No AMD GPU / bitcode exists here: the AMD path is
compile-tested to AMDGCN / hsaco with the calls unresolved (test/lit, test_amd_hsaco.py) and linked against a stub
generated from ``EXTERNS`` (test/python/_rocshmem_stub.py).

Checked against rocSHMEM's public sources (ROCm/rocm-systems ``projects/rocshmem``; commits in docs/runtime.md):

* Exported unmangled by rocSHMEM itself (``src/device/rocshmem_wrapper.cc``, its ``extern "C"`` wrapper for
  JIT / bitcode users), same names, parameter order and C types as here: ``rocshmem_my_pe``, ``rocshmem_n_pes``,
  ``rocshmem_ptr(const void *, int) -> void *``, ``rocshmem_{put,get}mem{,_nbi}{,_wg,_wave}(dest, source, size_t
  nbytes, int pe)``, ``rocshmem_putmem_signal{,_nbi}_wg(dest, source, size_t, uint64_t *sig_addr, uint64_t signal,
  int sig_op, int pe)``, ``rocshmem_barrier_all{,_wg,_wave}()``, ``rocshmem_barrier()`` (NO team: TEAM_WORLD only),
  ``rocshmem_sync_all()``, ``rocshmem_quiet()``, ``rocshmem_fence()`` -- all void except my_pe / n_pes / ptr.
* rocSHMEM C++ device functions that its wrapper does not export, so a wrapper of ours must forward to them:
  ``rocshmem_team_my_pe`` / ``rocshmem_team_n_pes(rocshmem_team_t) -> int``; ``rocshmem_signal_set`` /
  ``rocshmem_signal_add(uint64_t *sig_addr, uint64_t signal, int pe)`` and ``rocshmem_signal_wait_until(uint64_t
  *sig_addr, int cmp, uint64_t cmp_value) -> uint64_t`` (rocSHMEM >= 3.8); ``rocshmem_team_sync{,_wg,_wave}(team)``,
  ``rocshmem_team_translate_pe(src_team, int pe, dest_team) -> int``, ``rocshmem_sync_all_{wg,wave}()``,
  ``rocshmem_putmem_signal{,_nbi}{,_wave}`` (same parameters as the ``_wg`` ones) and the typed
  ``rocshmem_<T>_p(T *dest, T value, int pe)`` / ``rocshmem_<T>_g(const T *source, int pe) -> T`` for the C types
  (``ROC_SCALAR_TYPE`` maps NVSHMEM's other type names to them).
* No ctx-less rocSHMEM function: the names below are ours (a wrapper forwards with ``ROCSHMEM_CTX_DEFAULT``):
  ``rocshmem_broadcastmem_wg(team, dest, source, nbytes, pe_root)`` -> ``rocshmem_ctx_broadcastmem_wg(ctx, team,
  void *, const void *, int nelems, int pe_root)`` (void); ``rocshmem_fcollectmem_wg(team, dest, source, nbytes)``
  -> ``rocshmem_ctx_fcollectmem_wg(ctx, team, void *, const void *, int nelems)`` (void; rocSHMEM's byte counts
  are ``int``); ``rocshmem_team_barrier{,_wg,_wave}(team)`` -> ``rocshmem_ctx_barrier{,_wg,_wave}(ctx, team)``,
  used for ``barrier[_block|_warp](team)`` on a team other than the world (the world team calls rocSHMEM's
  ``rocshmem_barrier{,_wg,_wave}()``).
* Not in rocSHMEM (a compile-time error naming the function): ``broadcastmem`` / ``fcollectmem`` of thread and
  warp scope (and the typed ``broadcast`` / ``fcollect`` lowered to them): rocSHMEM's collectives are work-group
  calls.
* Nothing to call: rocSHMEM has no multicast (``remote_mc_ptr`` is the null pointer, as NVSHMEM returns where
  multicast is unavailable) and no ``signal_op`` with a run-time ``sig_op`` (``signal_op`` / ``dl.notify``
  inter_node call ``rocshmem_signal_set`` / ``rocshmem_signal_add``, so ``sig_op`` must be a compile-time constant).

Teams: ``rocshmem_team_t`` is ``uint64_t *``; ``ROCSHMEM_TEAM_WORLD`` / ``ROCSHMEM_TEAM_SHARED`` are device
variables (set at init), ``ROCSHMEM_TEAM_INVALID`` is ``nullptr``. A kernel cannot name them, so team arguments are
int32 indices that the wrapper maps to the handles: world 0 (rocSHMEM's own wrapper passes ``int team`` with 0 =
``ROCSHMEM_TEAM_WORLD`` for its reductions), shared 1; NVSHMEMX_TEAM_NODE maps to shared (``ROCSHMEM_TEAM_SHARED``
is the PEs sharing a memory domain, i.e. the node).

Constants (``include/rocshmem/rocshmem_common.hpp``): ``enum ROCSHMEM_SIGNAL_OPS {ROCSHMEM_SIGNAL_SET,
ROCSHMEM_SIGNAL_ADD}`` = 0, 1; ``enum rocshmem_cmps {EQ, NE, GT, GE, LT, LE}`` = 0..5 (a different order from
NVSHMEM's). The public ``libshmem_device`` constants are NVSHMEM's; the AMD lowering translates them at compile
time (sig_op / cmp / team must then be compile-time constants).
"""
from __future__ import annotations

import sys

import triton.language as tl

from ...language import _libshmem
from ...language._extern import Extern, call_extern

LIB_NAME = "rocshmem"  # == triton_dist.jit.ROCSHMEM_LIB_NAME (the HIP backend links by this substring)
LIB_PATH = ""

#: enum ROCSHMEM_SIGNAL_OPS (rocshmem_common.hpp)
SIGNAL_OPS = {"set": 0, "add": 1}
#: enum rocshmem_cmps (rocshmem_common.hpp)
CMP = {"eq": 0, "ne": 1, "gt": 2, "ge": 3, "lt": 4, "le": 5}
#: int32 team indices the wrapper maps to rocSHMEM's team handles (world 0 = ROCSHMEM_TEAM_WORLD, as in rocSHMEM's
#: own extern "C" wrapper; 1 = ROCSHMEM_TEAM_SHARED, which also stands for NVSHMEMX_TEAM_NODE)
TEAMS = {"world": 0, "shared": 1, "node": 1}


#: NVSHMEM scalar type names rocSHMEM's typed put / get (``rocshmem_<T>_p`` / ``_g``) do not have -> the rocSHMEM
#: type of the same width and signedness (``half`` / ``bfloat16`` travel as their 16 bits, as on NVIDIA)
ROC_SCALAR_TYPE = {"int8": "schar", "int16": "short", "int32": "int", "int64": "longlong", "uint8": "uchar",
                   "uint16": "ushort", "uint32": "uint", "uint64": "ulonglong", "size": "ulonglong",
                   "ptrdiff": "longlong", "half": "ushort", "bfloat16": "ushort"}


def _symbol(name: str) -> str:
    if name.endswith(("_p", "_g")) and name[:-2] in _libshmem.SCALAR_TYPES:
        return f"rocshmem_{ROC_SCALAR_TYPE.get(name[:-2], name[:-2])}{name[-2:]}"
    for suffix, roc in (("_block", "_wg"), ("_warp", "_wave")):
        if name.endswith(suffix):
            name = name[:-len(suffix)] + roc
    return "rocshmem_" + name


#: libshmem_device functions with no rocSHMEM function to call (see the module docstring)
NO_EXTERN = {
    "mc_ptr": "rocSHMEM has no multicast: lowered to the null pointer",
    "signal_op": "rocSHMEM has no signal op taking sig_op: lowered to rocshmem_signal_set / rocshmem_signal_add",
    **{n: "rocSHMEM's broadcast / fcollect are work-group calls only (use the _block variant)"
       for n in ("broadcastmem", "broadcastmem_warp", "fcollectmem", "fcollectmem_warp")},
}

#: name -> Extern (symbol, argument types, result type)
EXTERNS = {
    n: e for n, e in _libshmem.externs(_symbol, returns={"broadcastmem_block": None, "fcollectmem_block": None}).items()
    if n not in NO_EXTERN
}
# rocSHMEM's device rocshmem_barrier{,_wg,_wave}() take no team (TEAM_WORLD); other teams go through the wrapper's
# team barriers (-> rocshmem_ctx_barrier{,_wg,_wave}(ROCSHMEM_CTX_DEFAULT, team))
for _name, _suffix in (("barrier", ""), ("barrier_block", "_wg"), ("barrier_warp", "_wave")):
    EXTERNS[_name] = Extern(f"rocshmem_barrier{_suffix}", (), None)
    EXTERNS[f"team_{_name}"] = Extern(f"rocshmem_team_barrier{_suffix}", (tl.int32, ), None)
del _name, _suffix
# libshmem_device.signal_op: the standalone signal APIs (rocSHMEM >= 3.8), chosen by the compile-time sig_op
EXTERNS["signal_set"] = Extern("rocshmem_signal_set", (tl.int64, tl.uint64, tl.int32), None)
EXTERNS["signal_add"] = Extern("rocshmem_signal_add", (tl.int64, tl.uint64, tl.int32), None)

#: see ``triton_dist.language._libshmem.COLLECTIVES``
COLLECTIVE_SYMBOLS = tuple(EXTERNS[n].symbol for n in _libshmem.COLLECTIVES if n in EXTERNS) + tuple(
    EXTERNS[f"team_{n}"].symbol for n in ("barrier", "barrier_block", "barrier_warp"))

#: NVSHMEM value (the public constants) -> rocSHMEM value
NV_SIGNAL_TO_ROC = {9: SIGNAL_OPS["set"], 10: SIGNAL_OPS["add"]}
NV_CMP_TO_ROC = {0: CMP["eq"], 1: CMP["ne"], 2: CMP["gt"], 3: CMP["le"], 4: CMP["lt"], 5: CMP["ge"]}
NV_TEAM_TO_ROC = {0: TEAMS["world"], 1: TEAMS["shared"], 2: TEAMS["node"]}


def call(name: str, *args, _semantic):
    if name not in EXTERNS:
        raise ValueError(f"libshmem_device.{name}: not in rocSHMEM, no device function to call on AMD"
                         + (f" ({NO_EXTERN[name]})" if name in NO_EXTERN else ""))
    return call_extern(LIB_NAME, LIB_PATH, EXTERNS[name], list(args), _semantic)


# ----------------------------------------------------------------------------------------------------------------
# libshmem_device lowering
# ----------------------------------------------------------------------------------------------------------------
def constant(kind: str, value, op: str):
    """rocSHMEM's value of a public team / sig_op / cmp constant (NVSHMEM's value, see the module docstring).
    ``value`` must be a compile-time int: rocSHMEM's enums differ, so a run-time value cannot be translated."""
    table = {"sig_op": NV_SIGNAL_TO_ROC, "cmp": NV_CMP_TO_ROC, "team": NV_TEAM_TO_ROC}[kind]
    if not isinstance(value, int) or value not in table:
        shown = value if isinstance(value, int) else None
        raise ValueError(f"libshmem_device.{op}: on AMD {kind} must be a compile-time constant, one of "
                         f"{sorted(table)} (the libshmem_device NVSHMEM_* constants), got {shown!r}")
    return table[value]


def lower(name, args, *, _semantic):
    """Emit libshmem_device function ``name``: see ``triton_dist.language._libshmem.lower``."""
    if name == "mc_ptr":  # no multicast in rocSHMEM: the null address
        return _semantic.cast(_semantic.to_tensor(0), tl.int64)
    return _libshmem.lower(sys.modules[__name__], name, args, _semantic=_semantic)


class _RocshmemLowering(_libshmem.GpuLibshmemLowering):
    """The GPU lowering over this table, except ``barrier(team)`` (rocSHMEM's ``rocshmem_barrier()`` takes no team)
    and ``signal_op`` (rocSHMEM has no signal op taking ``sig_op``)."""

    def sync(self, name, scope, team, *, target, _semantic, _generator):
        """``barrier[_block|_warp](team)``: the world team calls rocSHMEM's ``rocshmem_barrier[_wg|_wave]()``, any
        other team the wrapper's ``rocshmem_team_barrier[_wg|_wave](team)`` (the team is a compile-time constant on
        AMD)."""
        if name not in ("barrier", "barrier_block", "barrier_warp"):
            return super().sync(name, scope, team, target=target, _semantic=_semantic, _generator=_generator)
        t = constant("team", team, name)
        if t == TEAMS["world"]:
            lower(name, [], _semantic=_semantic)
        else:
            lower(f"team_{name}", [_semantic.to_tensor(t)], _semantic=_semantic)
        return None

    def signal_op(self, sig_addr, signal, sig_op, pe, *, target, _semantic, _generator):
        """``rocshmem_signal_set`` / ``rocshmem_signal_add``, chosen by the compile-time ``sig_op``."""
        a = _libshmem.address(sig_addr, _semantic)
        v = _libshmem.c_int(signal, tl.uint64, _semantic)
        r = _libshmem.c_int(pe, tl.int32, _semantic)
        constant("sig_op", sig_op, "signal_op")  # refuses a run-time sig_op
        lower(f"signal_{_libshmem.SIGNAL_NAMES[sig_op]}", [a, v, r], _semantic=_semantic)
        return None


#: the ``LibshmemLowering`` of the AMD backend
LOWERING = _RocshmemLowering(sys.modules[__name__])
