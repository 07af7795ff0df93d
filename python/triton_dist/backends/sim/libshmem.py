"""CPU-simulator implementation of ``triton_dist.language.extra.libshmem_device`` (Triton interpreter).

Each program of an interpreted launch is one Python thread (``triton_dist.runtime.sim.launch.run_grid``), so
"thread", "warp" and "block" variants coincide: the program executes the operation once. Memory is the shared
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
  repeated calls from one program, are fine. ``broadcastmem_block`` / ``fcollectmem_block``: team barrier, copy from the peers' partitions, team
  barrier (so sources are complete before anyone reads, and nobody reuses them before everyone has).
"""
from __future__ import annotations

import ctypes
from typing import Tuple

import numpy as np
import triton.language as tl

from ... import _compat
from ...language._libshmem import CMP_NAMES, SIGNAL_NAMES, TEAM_NAMES
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


def _signal(op, ctx, sig_addr, signal, sig_op, pe):
    o = _int(sig_op)
    if o not in SIGNAL_NAMES:
        raise ValueError(f"libshmem_device.{op}: sig_op={o}; accepted: NVSHMEM_SIGNAL_SET (9), NVSHMEM_SIGNAL_ADD (10)")
    a = _sym(op, "sig_addr", ctx, _u64(sig_addr), pe, 8)
    if a % 8:
        raise ValueError(f"libshmem_device.{op}: sig_addr {a:#x} is not 8-byte aligned")
    val = np.array([_u64(signal)], dtype=np.uint64)
    _compat.raw_atomic_rmw("xchg" if SIGNAL_NAMES[o] == "set" else "add", [a], val, "acq_rel")


def putmem_signal(name, blocking, dest, source, nbytes, sig_addr, signal, sig_op, pe, *, target, _semantic,
                  _generator):
    ctx = _ctx()
    _copy(name, "put", dest, source, nbytes, pe)  # data first: complete before the signal below
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


def broadcastmem_block(team, dest, source, nbytes, pe_root, *, target, _semantic, _generator):
    return _collective("broadcastmem_block", team, dest, source, nbytes, pe_root)


def fcollectmem_block(team, dest, source, nbytes, *, target, _semantic, _generator):
    return _collective("fcollectmem_block", team, dest, source, nbytes)


def _collective(op, *args):
    """Barriers (``barrier_all*``, ``sync_all``, ``barrier(team)``) and the byte collectives."""
    ctx = _ctx()
    if op in ("barrier_all", "barrier_all_block", "barrier_all_warp", "sync_all", "quiet", "fence"):
        if op in ("quiet", "fence"):
            return None  # every put / get / signal already completed when it returned
        _enter(op, ctx, "world")
        _team_barrier(ctx, "world", op)
        return None
    team = _team(op, args[0])
    _enter(op, ctx, team)
    idx, size, first = _team_layout(ctx, team)
    if op == "barrier":
        _team_barrier(ctx, team, op)
        return None
    dest, source, nbytes = _u64(args[1]), _u64(args[2]), _int(args[3])
    if nbytes < 0:
        raise ValueError(f"libshmem_device.{op}: nelems={nbytes} must be >= 0")
    if op == "broadcastmem_block":
        root = _int(args[4])
        if not 0 <= root < size:
            raise ValueError(f"libshmem_device.{op}: pe_root={root} out of range for team {team!r} of {size} PEs")
        _team_barrier(ctx, team, op)
        if nbytes:
            src = _sym(op, "source", ctx, source, first + root, nbytes)
            ctypes.memmove(dest, src, nbytes)
        _team_barrier(ctx, team, op)
        return _i32(0)
    if op == "fcollectmem_block":
        _team_barrier(ctx, team, op)
        if nbytes:
            for i in range(size):
                src = _sym(op, "source", ctx, source, first + i, nbytes)
                ctypes.memmove(dest + i * nbytes, src, nbytes)
        _team_barrier(ctx, team, op)
        return _i32(0)
    raise ValueError(f"libshmem_device: unknown collective {op!r}")
