"""AMD (AMDGCN, CDNA gfx90a / gfx942 / gfx950) lowerings of the ``triton_dist.language`` ops.

Memory ordering: every inline-asm sequence comes from :mod:`.memory_model` (LLVM AMDGPUUsage "Memory Model GFX90A" /
"Memory Model GFX942"), the one table shared with ``language_extra``.
- ``wait``: thread t of the workgroup (``__ockl_get_local_id``) polls signals t, t+ntid, ... with an atomic load at
  the matching scope, NOT an RMW: "load atomic acquire" (e.g. gfx942 system scope: ``global_load ... sc0 sc1`` +
  ``s_waitcnt vmcnt(0)`` + ``buffer_inv sc0 sc1``) or "load atomic monotonic" (the load + ``s_waitcnt vmcnt(0)``,
  which the inline asm needs before the value is compared). Then a workgroup barrier (``s_barrier`` with workgroup
  fences), after which every thread runs the acquire-side invalidate at the wait's scope.
- ``notify``: workgroup barrier, then ONE thread (Triton's scalar atomics are issued by one thread) does an atomic
  exchange / add with release semantics at agent (gpu) or system (intra_node, on the ``rocshmem_ptr`` address)
  scope: LLVM emits the release sequence before the atomic. inter_node: barrier, system-scope "fence release",
  thread 0 calls ``rocshmem_signal_set`` / ``rocshmem_signal_add`` (rocSHMEM >= 3.8; rocSHMEM has no signal op taking
  ``sig_op``, so the call is chosen by the compile-time ``sig_op``).
"""
from __future__ import annotations

import functools

import triton.language as tl

from ... import _compat
from ...language import _gpu, _libshmem
from . import libshmem
from . import memory_model as mm

OCKL = "ockl"


def load_asm(sem: str, scope: str, bits: int, target) -> str:
    """dl.wait's poll: the memory model's "load atomic <sem>" at ``scope`` (see :mod:`.memory_model`)."""
    op = "global_load_dwordx2" if bits == 64 else "global_load_dword"
    return "\n".join(mm.load(mm.family(target, "dl.wait"), scope, sem, f"{op} $0, $1, off"))


def post_asm(sem: str, scope: str, target) -> str:
    """Run by every thread after the workgroup barrier: the acquire-side invalidate at the wait's scope (the cache
    step of "fence acquire"; its leading s_waitcnt is not needed: the paired atomic is the poll load, which the
    polling thread waited for before the barrier)."""
    inv = mm.invalidate(mm.family(target, "dl.wait"), scope) if sem == "acquire" else []
    return "\n".join(inv + ["s_mov_b32 $0, 0"])


def _wg_release_asm(fam: str) -> str:
    """Workgroup-scope release by every thread before the barrier: its own accesses have completed."""
    return "\n".join(mm.release_fence(fam, "cta") + ["s_mov_b32 $0, 0"])


@_compat.builtin
def _ockl(symbol, _semantic=None):
    from ...language._extern import Extern, call_extern

    v = call_extern(OCKL, "", Extern(_compat.unwrap_constexpr(symbol), (tl.int32, ), tl.int64, True), [0], _semantic)
    return _semantic.cast(v, tl.int32)


_TIMER_ASM = tl.constexpr("s_memrealtime $0\ns_waitcnt lgkmcnt(0)")  # 100 MHz constant clock on CDNA


_my_pe = _libshmem.builtin(libshmem, "my_pe")


@_compat.jit_function
def _not_there(v, value, floor, TAG_BITS: tl.constexpr):
    # untagged: the signal must equal the value; tagged: its epoch must reach this call's (signal >= floor)
    if TAG_BITS == 0:
        return v != value
    else:
        return v < floor


@_compat.jit_function
def _wait_spin(addr, n, value, BYTES: tl.constexpr, LOAD_ASM: tl.constexpr, VC: tl.constexpr,
               BOUND: tl.constexpr, TRAP_ASM: tl.constexpr, POST_ASM: tl.constexpr, TAG_BITS: tl.constexpr,
               TAG_MASK: tl.constexpr, MISMATCH_MSG: tl.constexpr):
    # thread t polls signals t, t + ntid, ...; dl.wait(tag_bits=k): poll until the signal's epoch reaches this
    # call's (signal >= floor), then the signal must equal the value; a signal that differs (the ranks made
    # different calls) is reported and traps.
    tid = _ockl("__ockl_get_local_id")
    ntid = _ockl("__ockl_get_local_size")
    floor = (value >> TAG_BITS) << TAG_BITS
    i = tid
    timed_out = 0
    if BOUND != 0:
        t0 = tl.inline_asm_elementwise(_TIMER_ASM, "=s", [], dtype=tl.int64, is_pure=False, pack=1)
    while i < n:
        p = addr + i.to(tl.int64) * BYTES
        v = tl.inline_asm_elementwise(LOAD_ASM, VC, [p], dtype=value.dtype, is_pure=False, pack=1)
        if BOUND == 0:
            while _not_there(v, value, floor, TAG_BITS):
                v = tl.inline_asm_elementwise(LOAD_ASM, VC, [p], dtype=value.dtype, is_pure=False, pack=1)
        else:
            while _not_there(v, value, floor, TAG_BITS) & (timed_out == 0):
                v = tl.inline_asm_elementwise(LOAD_ASM, VC, [p], dtype=value.dtype, is_pure=False, pack=1)
                t1 = tl.inline_asm_elementwise(_TIMER_ASM, "=s", [], dtype=tl.int64, is_pure=False, pack=1)
                if t1 - t0 > BOUND:
                    timed_out = 1
            if timed_out != 0:
                tl.device_print("triton_dist dl.wait TIMEOUT (TRITON_DIST_BOUNDED_WAIT): rank, program, address, "
                                "expected, seen =", _my_pe(), tl.program_id(0), p, value, v)
                tl.inline_asm_elementwise(TRAP_ASM, "=v", [], dtype=tl.int32, is_pure=False, pack=1)
        if TAG_BITS != 0:
            if v != value:
                tl.device_print(MISMATCH_MSG, _my_pe(), tl.program_id(0), p, value >> TAG_BITS,
                                value & TAG_MASK, v >> TAG_BITS, v & TAG_MASK)
                tl.inline_asm_elementwise(TRAP_ASM, "=v", [], dtype=tl.int32, is_pure=False, pack=1)
        i += ntid
    tl.debug_barrier()
    # every thread: its own acquire-side L1 invalidate, so loads of all waves after the barrier miss stale lines
    return tl.inline_asm_elementwise(POST_ASM, "=s", [], dtype=tl.int32, is_pure=False, pack=1)


@_compat.jit_function
def _wait_loop(addr, n, value, BYTES: tl.constexpr, LOAD_ASM: tl.constexpr, VC: tl.constexpr,
               BOUND: tl.constexpr, TRAP_ASM: tl.constexpr, POST_ASM: tl.constexpr, TAG_BITS: tl.constexpr,
               TAG_MASK: tl.constexpr, MISMATCH_MSG: tl.constexpr):
    # Guarded by an opaque (pure) "1" so that Triton's software pipeliner can predicate the wait (it predicates
    # scf.if, not side-effecting ops).
    on = tl.inline_asm_elementwise("s_mov_b32 $0, 1", "=s", [], dtype=tl.int32, is_pure=True, pack=1)
    tok = 0
    if on != 0:
        tok = _wait_spin(addr, n, value, BYTES, LOAD_ASM, VC, BOUND, TRAP_ASM, POST_ASM, TAG_BITS, TAG_MASK,
                         MISMATCH_MSG)
    return tok


def wait(ptr, n, scope, sem, value, bits, bound_ms, tag_bits, *, target, _semantic, _generator):
    if _generator is None:
        raise RuntimeError("dl.wait: the AMD lowering needs the code generator (call dl.wait from a kernel)")
    addr, n, value, _ = _gpu.wait_operands(ptr, n, value, bits, _semantic)
    bound_ticks = int(bound_ms) * 100_000
    return _compat.call_jit(_generator, _wait_loop, [
        addr, n, value, tl.constexpr(bits // 8), tl.constexpr(load_asm(sem, scope, bits, target)), tl.constexpr("=v,v"),
        tl.constexpr(bound_ticks), tl.constexpr("s_trap 2"), tl.constexpr(post_asm(sem, scope, target)),
        tl.constexpr(int(tag_bits)), tl.constexpr((1 << int(tag_bits)) - 1),
        tl.constexpr(_gpu.tag_mismatch_message(tag_bits))
    ])


# SGPR result: keeps consumed pointers uniform (no waterfall loops around buffer loads)
_ZERO_ASM = "s_mov_b32 $0, 0"


consume_token = functools.partial(_gpu.consume_token, _ZERO_ASM, "=s,s")


rank = functools.partial(_gpu.rank, libshmem)
num_ranks = functools.partial(_gpu.num_ranks, libshmem)
symm_at = functools.partial(_gpu.symm_at, libshmem)


_signal_set = _libshmem.builtin(libshmem, "signal_set")
_signal_add = _libshmem.builtin(libshmem, "signal_add")


@_compat.jit_function
def _notify_inter(addr, sig, pe, ADD: tl.constexpr, FENCE_ASM: tl.constexpr, WG_ASM: tl.constexpr):
    tl.inline_asm_elementwise(WG_ASM, "=s", [], dtype=tl.int32, is_pure=False, pack=1)
    tl.debug_barrier()
    tl.inline_asm_elementwise(FENCE_ASM + "\nv_mov_b32 $0, 0", "=v", [], dtype=tl.int32, is_pure=False, pack=1)
    if _ockl("__ockl_get_local_id") == 0:
        if ADD:
            _signal_add(addr, sig, pe)
        else:
            _signal_set(addr, sig, pe)


def notify(ptr, rank, signal, sig_op, comm_scope, *, target, _semantic, _generator):
    fam = mm.family(target, "dl.notify")
    rank = _semantic.cast(_semantic.to_tensor(rank), tl.int32)
    sig = _semantic.cast(_semantic.to_tensor(signal), tl.uint64)
    if comm_scope == "inter_node":
        if _generator is None:
            raise RuntimeError("dl.notify: inter_node needs the code generator (call it from a kernel)")
        addr = _semantic.cast(ptr, tl.int64)
        _compat.call_jit(_generator, _notify_inter,
                         [addr, sig, rank, tl.constexpr(sig_op == "add"),
                          tl.constexpr("\n".join(mm.release_fence(fam, "sys"))), tl.constexpr(_wg_release_asm(fam))])
        return None
    scope = "gpu"
    if comm_scope == "intra_node":
        ptr = symm_at(ptr, rank, target=target, _semantic=_semantic)
        scope = "sys"
    _gpu.asm(_wg_release_asm(fam), "=s", [], tl.int32, _semantic)
    _semantic.debug_barrier()
    sig = _semantic.cast(sig, ptr.dtype.element_ty)
    mask = _semantic.to_tensor(True)
    if sig_op == "set":
        _semantic.atomic_xchg(ptr, sig, mask, "release", scope)
    else:
        _semantic.atomic_add(ptr, sig, mask, "release", scope)
    return None


extern_call = _gpu.extern_call


# --------------------------------------------------------------------------------------------------- flagged words

@_compat.jit_function
def _store_flagged(ptr, value, flag, on):
    # one relaxed system-scope atomic per word: single-copy atomic 64 bits, no fence (global_atomic_swap_x2)
    tl.atomic_xchg(ptr, _gpu.flagged_word(value, flag).to(ptr.dtype.element_ty, bitcast=True), mask=on != 0,
                   sem="relaxed", scope="sys")


def store_flagged(ptr, value, flag, mask, *, target, _semantic, _generator):
    if _generator is None:
        raise RuntimeError("dl.store_flagged: the AMD lowering needs the code generator (call it from a kernel)")
    flag, on = _gpu.flagged_operands(ptr, flag, mask, _semantic)
    _compat.call_jit(_generator, _store_flagged, [ptr, value, flag, on])
    return None


def load_flagged(ptr, flag, mask, bound_ms, tag_bits, *, target, _semantic, _generator):
    if _generator is None:
        raise RuntimeError("dl.load_flagged: the AMD lowering needs the code generator (call it from a kernel)")
    report = bound_ms or tag_bits
    me = libshmem.call("my_pe", _semantic=_semantic) if report else 0
    tid = _ockl("__ockl_get_local_id", _semantic=_semantic) if report else 0
    # the poll: relaxed system-scope atomic "or 0" reads, all in flight at once
    return _gpu.load_flagged_call(ptr, flag, mask, me, tid, "", int(bound_ms) * 100_000, _TIMER_ASM.value, "=s",
                                  "s_trap 2\nv_mov_b32 $0, 0", "=v", tag_bits, _semantic=_semantic,
                                  _generator=_generator)


def prefetch_l2(ptr, num_bytes, mask, *, target, _semantic, _generator):
    """``dl.prefetch_l2``: CDNA has no instruction that fills L2 without a destination register, so the hint has no
    effect here (documented in the declaration)."""
    return None
