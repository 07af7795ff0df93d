"""CPU-simulator implementation of ``triton_dist.language.extra.libshmem_device`` (Triton interpreter).

Each program of an interpreted launch is one Python thread (``triton_dist.runtime.sim.launch.run_grid``) and is
modelled as ONE thread (``tid == 0``, one warp; ``triton_dist.backends.sim.extra``). A call is executed by every
thread that reaches it (the GPU rule, ``triton_dist.language._libshmem.lower``): here by the program, once, so
"thread", "warp" and "block" variants coincide. Memory is the shared
symmetric heap every rank process maps (``triton_dist.runtime.sim``):

* put / get (all variants): a ``memmove`` between the local buffer and the peer's partition at the same symmetric
  offset. Blocking and ``*_nbi`` variants complete before returning (``quiet`` / ``fence`` have nothing left to do),
  which is a valid (strongest) schedule of the NVSHMEM semantics.
* signals: real 64-bit hardware atomics on the shared pages (exchange for SET, add for ADD, acquire-release), after
  the data copy, so a peer that sees the signal sees the data. ``signal_wait_until`` polls with acquire loads
  through the runtime's waiter (timeout -> ``SimWaitTimeout`` naming address, comparison and last value); in the
  bounded-wait mode (``TRITON_DIST_BOUNDED_WAIT=<ms>``) it times out after that bound, like ``dl.wait``.
* ``remote_ptr``: the peer partition's address; null (0) for an address off this rank's partition or a peer on
  another simulated node (``nvshmem_ptr`` is null there too). ``remote_mc_ptr``: always null (no multicast).
* barriers / collectives -- the model: each call is ONE arrival of this PE at the team's barrier; each rank's k-th
  barrier on a team meets every other rank's k-th (count-based, ``ctx.barrier_all`` / ``ctx.barrier_node``).
  NVSHMEM / rocSHMEM require a team's collective to be called by one thread / warp / block per PE at a time
  (rocSHMEM: "from only one thread/wavefront/workgroup within the grid"), so a launch whose programs call
  collectives concurrently (e.g. every program calls ``barrier_all_block``) has no defined meaning on the GPU
  either. The simulator refuses it with a clear error, decided per launch (not by timing): a collective called
  by a program after ANOTHER program of the same launch on this rank called one on the same team raises
  ``RuntimeError`` (guard the call with ``if tl.program_id(0) == 0``). Calls from different launches, or
  repeated calls from one program, are fine. ``broadcastmem*`` / ``fcollectmem*`` (and the typed ``broadcast*``
  / ``fcollect*``, in bytes): team barrier, copy from the peers' partitions, team barrier (so sources are complete before anyone reads, and nobody reuses them before everyone has).
"""
from __future__ import annotations

import ctypes
from typing import Tuple

import numpy as np
import triton.language as tl

from ... import _compat
from ...language._libshmem import CMP_NAMES, SCALAR_TYPES, SIGNAL_NAMES, TEAM_NAMES
from ...language.core import bounded_wait_ms
from . import context as sim_context
from .language import bounded_wait_timeout


def _ctx():
    return sim_context.current()


def _int(v) -> int:
    if isinstance(v, (int, np.integer)):
        return int(v)
    arr = np.asarray(_compat.interpreter_data(v)).reshape(-1)
    if arr.size != 1:
        raise TypeError(f"libshmem_device: expected a scalar, got an array of shape {arr.shape}")
    return int(arr[0])


def _u64(v) -> int:
    return _int(v) & 0xFFFFFFFFFFFFFFFF


def _i32(x):
    return _compat.interpreter_value(np.array([x], dtype=np.int32), tl.int32)


def _check_pe(op, ctx, pe):
    if not 0 <= pe < ctx.world_size:
        raise ValueError(f"libshmem_device.{op}: pe={pe} out of range [0, {ctx.world_size})")


def _on_my_partition(ctx, addr) -> bool:
    base = ctx.base(ctx.rank)
    return base <= addr < base + ctx.heap_size


def _sym(op, name, ctx, addr, pe, nbytes=0) -> int:
    """``addr`` (symmetric, in this rank's partition) translated to ``pe``'s partition."""
    if not _on_my_partition(ctx, addr) or (nbytes and not _on_my_partition(ctx, addr + nbytes - 1)):
        desc = ctx.describe_addr(addr)
        raise ValueError(f"libshmem_device.{op}: {name} {desc} (+{nbytes} bytes) is not a symmetric buffer of rank "
                         f"{ctx.rank} (allocate it with triton_dist's symmetric allocator)")
    return int(ctx.translate(int(addr), int(pe)))


# ---------------------------------------------------------------------------------------------------------------
# teams
# ---------------------------------------------------------------------------------------------------------------
def _team(op, team) -> str:
    t = _int(team)
    if t not in TEAM_NAMES:
        raise ValueError(f"libshmem_device.{op}: team={t} is not a valid team; accepted: "
                         + ", ".join(f"{k} ({v})" for k, v in TEAM_NAMES.items()))
    return "world" if t == 0 else "node"  # NVSHMEM_TEAM_SHARED = the node's PEs (all load/store reachable)


def _team_layout(ctx, team: str) -> Tuple[int, int, int]:
    """(my index in the team, team size, global rank of team member 0)."""
    if team == "world":
        return ctx.rank, ctx.world_size, 0
    lw = ctx.local_world_size
    return ctx.rank % lw, lw, (ctx.rank // lw) * lw


def my_pe(*, target, _semantic, _generator):
    return _i32(_ctx().rank)


def n_pes(*, target, _semantic, _generator):
    return _i32(_ctx().world_size)


def team_my_pe(team, *, target, _semantic, _generator):
    return _i32(_team_layout(_ctx(), _team("team_my_pe", team))[0])


def team_n_pes(team, *, target, _semantic, _generator):
    return _i32(_team_layout(_ctx(), _team("team_n_pes", team))[1])


def team_translate_pe(src_team, pe, dest_team, *, target, _semantic, _generator):
    """The number in ``dest_team`` of ``src_team``'s PE ``pe``; -1 when ``pe`` is out of ``src_team``'s range or
    the PE is not in ``dest_team`` (as ``nvshmem_team_translate_pe``)."""
    ctx = _ctx()
    _, src_size, src_first = _team_layout(ctx, _team("team_translate_pe", src_team))
    _, dst_size, dst_first = _team_layout(ctx, _team("team_translate_pe", dest_team))
    pe = _int(pe)
    if not 0 <= pe < src_size:
        return _i32(-1)
    world = src_first + pe
    out = world - dst_first
    return _i32(out if 0 <= out < dst_size else -1)


# ---------------------------------------------------------------------------------------------------------------
# memory
# ---------------------------------------------------------------------------------------------------------------
def _ptr_result(addr: int, like):
    return _compat.interpreter_value(np.array([addr], dtype=np.uint64), like.type)


def remote_ptr(local_ptr, pe, *, target, _semantic, _generator):
    ctx = _ctx()
    pe = _int(pe)
    _check_pe("remote_ptr", ctx, pe)
    addr = _int(local_ptr) & 0xFFFFFFFFFFFFFFFF
    same_node = pe // ctx.local_world_size == ctx.rank // ctx.local_world_size
    out = int(ctx.translate(addr, pe)) if (_on_my_partition(ctx, addr) and same_node) else 0
    return _ptr_result(out, local_ptr)


def remote_mc_ptr(team, ptr, *, target, _semantic, _generator):
    _team("remote_mc_ptr", team)
    return _ptr_result(0, ptr)


# ---------------------------------------------------------------------------------------------------------------
# RMA and signals
# ---------------------------------------------------------------------------------------------------------------
def rma(name, kind, scope, blocking, dest, source, nbytes, pe, *, target, _semantic, _generator):
    """Every variant (thread / warp / block, blocking or not) copies at once: see the module docstring."""
    return _copy(name, kind, dest, source, nbytes, pe)


def _copy(op, kind, dest, source, nbytes, pe):
    ctx = _ctx()
    pe, n = _int(pe), _int(nbytes)
    _check_pe(op, ctx, pe)
    if n < 0:
        raise ValueError(f"libshmem_device.{op}: bytes={n} must be >= 0")
    d, s = _u64(dest), _u64(source)
    if n == 0:
        return None
    if kind == "put":
        d = _sym(op, "dest", ctx, d, pe, n)
    else:
        s = _sym(op, "source", ctx, s, pe, n)
    ctypes.memmove(d, s, n)
    return None


#: numpy storage of the typed put / get values (bfloat16 as its 16 bits, as the interpreter stores it)
_NP = {tl.float32: np.float32, tl.float64: np.float64, tl.float16: np.float16, tl.bfloat16: np.uint16,
       tl.int8: np.int8, tl.int16: np.int16, tl.int32: np.int32, tl.int64: np.int64, tl.uint8: np.uint8,
       tl.uint16: np.uint16, tl.uint32: np.uint32, tl.uint64: np.uint64}


def _as_number(value):
    """A Python int / float of a put's value (a Python number or an interpreter scalar of any dtype)."""
    if isinstance(value, (int, float, np.number)):
        return value
    arr = np.asarray(_compat.interpreter_data(value)).reshape(-1)[:1]
    if getattr(value, "dtype", None) == tl.bfloat16:  # stored as the upper 16 bits of a float32
        arr = (arr.astype(np.uint32) << 16).view(np.float32)
    return arr[0].item()


def _scalar_bytes(name, value) -> bytes:
    """The bytes a typed put stores: ``value`` converted to the type (as ``tl.cast`` converts: floats round to
    nearest even, integers wrap)."""
    ty = SCALAR_TYPES[name[:-2]]
    if getattr(value, "dtype", None) == ty and not isinstance(value, (int, float)):
        return np.asarray(_compat.interpreter_data(value)).reshape(-1)[:1].astype(_NP[ty]).tobytes()
    v = _as_number(value)
    if ty == tl.bfloat16:
        bits = int(np.array([v], dtype=np.float32).view(np.uint32)[0])
        return np.array([(bits + 0x7FFF + ((bits >> 16) & 1)) >> 16], dtype=np.uint16).tobytes()
    if ty.is_floating():
        return np.array([v], dtype=_NP[ty]).tobytes()
    bits = ty.primitive_bitwidth
    return np.array([int(v) & ((1 << bits) - 1)], dtype=np.uint64).astype(_NP[ty]).tobytes()


def p(name, dest, value, pe, *, target, _semantic, _generator):
    """Typed scalar put: the value's bytes into ``pe``'s partition (as ``tl.cast`` converts it to the type)."""
    ctx = _ctx()
    pe = _int(pe)
    _check_pe(name, ctx, pe)
    data = _scalar_bytes(name, value)
    d = _sym(name, "dest", ctx, _u64(dest), pe, len(data))
    ctypes.memmove(d, data, len(data))
    return None


def g(name, source, pe, *, target, _semantic, _generator):
    """Typed scalar get: the value at symmetric ``source`` on ``pe``."""
    ctx = _ctx()
    pe = _int(pe)
    _check_pe(name, ctx, pe)
    ty = SCALAR_TYPES[name[:-2]]
    out = np.zeros(1, dtype=_NP[ty])
    s = _sym(name, "source", ctx, _u64(source), pe, out.itemsize)
    ctypes.memmove(out.ctypes.data, s, out.itemsize)
    return _compat.interpreter_value(out, ty)


def _signal(op, ctx, sig_addr, signal, sig_op, pe):
    o = _int(sig_op)
    if o not in SIGNAL_NAMES:
        raise ValueError(f"libshmem_device.{op}: sig_op={o}; accepted: NVSHMEM_SIGNAL_SET (9), NVSHMEM_SIGNAL_ADD (10)")
    a = _sym(op, "sig_addr", ctx, _u64(sig_addr), pe, 8)
    if a % 8:
        raise ValueError(f"libshmem_device.{op}: sig_addr {a:#x} is not 8-byte aligned")
    val = np.array([_u64(signal)], dtype=np.uint64)
    _compat.raw_atomic_rmw("xchg" if SIGNAL_NAMES[o] == "set" else "add", [a], val, "acq_rel")


def putmem_signal(name, blocking, dest, source, nelems, elem_bytes, sig_addr, signal, sig_op, pe, *, target,
                  _semantic, _generator):
    ctx = _ctx()
    _copy(name, "put", dest, source, _int(nelems) * elem_bytes, pe)  # data first: complete before the signal below
    _signal(name, ctx, sig_addr, signal, sig_op, _int(pe))
    return None


def signal_op(sig_addr, signal, sig_op, pe, *, target, _semantic, _generator):
    ctx = _ctx()
    pe = _int(pe)
    _check_pe("signal_op", ctx, pe)
    _signal("signal_op", ctx, sig_addr, signal, sig_op, pe)
    return None


def signal_wait_until(sig_addr, cmp, cmp_val, *, target, _semantic, _generator):
    ctx = _ctx()
    c = _int(cmp)
    if c not in CMP_NAMES:
        raise ValueError(f"libshmem_device.signal_wait_until: cmp_={c}; accepted: NVSHMEM_CMP_EQ/NE/GT/LE/LT/GE (0-5)")
    a = _u64(sig_addr)
    # the bounded-wait mode bounds this wait like dl.wait's (read at trace time, which is now under the interpreter)
    seen = ctx.spin_wait(a, np.uint64(_u64(cmp_val)), nbytes=8, cmp=CMP_NAMES[c], signed=False,
                         op=f"libshmem_device.signal_wait_until(cmp={CMP_NAMES[c]}, cmp_val={_u64(cmp_val)})",
                         **bounded_wait_timeout(bounded_wait_ms()))
    value = int(np.asarray(seen).reshape(-1)[0])
    return _compat.interpreter_value(np.array([value], dtype=np.uint64), tl.uint64)


# ---------------------------------------------------------------------------------------------------------------
# barriers and collectives
# ---------------------------------------------------------------------------------------------------------------
def _enter(op: str, ctx, team: str) -> None:
    """Refuse device collectives on one team issued by two different programs of one launch on this rank (see
    module doc). Decided per launch, not by timing: the second distinct program to call one raises, always."""
    from .launch_record import current_launch

    launch, me = current_launch()
    if launch is None:
        return
    with launch.lock:
        callers = launch.state.setdefault(("collective-caller", id(ctx), team), {})
        if me not in callers and callers:
            first, first_op = next(iter(callers.items()))
            raise RuntimeError(
                f"libshmem_device.{op}: program {me} calls a device collective on team {team!r} after program "
                f"{first} of the same launch on rank {ctx.rank} called one ({first_op}). NVSHMEM/rocSHMEM "
                f"collectives on a team must be called by one thread/warp/block per PE (the simulator matches "
                f"each rank's k-th call with every other rank's k-th call); call it from one program, e.g. "
                f"`if tl.program_id(0) == 0: libshmem_device.{op}(...)`")
        callers.setdefault(me, op)


def _team_barrier(ctx, team: str, op: str) -> None:
    if team == "world":
        ctx.barrier_all(op=f"libshmem_device.{op}")
    else:
        ctx.barrier_node(op=f"libshmem_device.{op}")


def sync(name, scope, team, *, target, _semantic, _generator):
    """Barriers (``barrier_all*``, ``sync_all``, ``barrier(team)``): one arrival of this PE whatever ``scope`` (see
    the module docstring); ``quiet`` / ``fence``: nothing to do, every operation completed when it returned."""
    return _collective(name, *([] if team is None else [team]))


def broadcast(name, team, dest, source, nelems, elem_bytes, pe_root, *, target, _semantic, _generator):
    return _collective(name, team, dest, source, _int(nelems) * elem_bytes, pe_root)


def fcollect(name, team, dest, source, nelems, elem_bytes, *, target, _semantic, _generator):
    return _collective(name, team, dest, source, _int(nelems) * elem_bytes)


def _collective(op, *args):
    """Barriers (``barrier_all*``, ``sync_all``, ``barrier(team)``) and the byte collectives."""
    ctx = _ctx()
    if op in ("barrier_all", "barrier_all_block", "barrier_all_warp", "sync_all", "sync_all_block", "sync_all_warp",
              "quiet", "fence"):
        if op in ("quiet", "fence"):
            return None  # every put / get / signal already completed when it returned
        _enter(op, ctx, "world")
        _team_barrier(ctx, "world", op)
        return None
    team = _team(op, args[0])
    _enter(op, ctx, team)
    idx, size, first = _team_layout(ctx, team)
    if op.startswith(("barrier", "team_sync")):
        _team_barrier(ctx, team, op)
        return None
    dest, source, nbytes = _u64(args[1]), _u64(args[2]), _int(args[3])
    if nbytes < 0:
        raise ValueError(f"libshmem_device.{op}: nelems={nbytes} must be >= 0")
    if op.startswith("broadcastmem"):
        root = _int(args[4])
        if not 0 <= root < size:
            raise ValueError(f"libshmem_device.{op}: pe_root={root} out of range for team {team!r} of {size} PEs")
        _team_barrier(ctx, team, op)
        if nbytes:
            src = _sym(op, "source", ctx, source, first + root, nbytes)
            ctypes.memmove(dest, src, nbytes)
        _team_barrier(ctx, team, op)
        return _i32(0)
    if op.startswith("fcollectmem"):
        _team_barrier(ctx, team, op)
        if nbytes:
            for i in range(size):
                src = _sym(op, "source", ctx, source, first + i, nbytes)
                ctypes.memmove(dest + i * nbytes, src, nbytes)
        _team_barrier(ctx, team, op)
        return _i32(0)
    raise ValueError(f"libshmem_device: unknown collective {op!r}")
