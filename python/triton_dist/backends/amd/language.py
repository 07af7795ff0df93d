"""AMD (AMDGCN, CDNA gfx90a / gfx94x / gfx950) lowerings of the ``triton_dist.language`` ops.

Memory-ordering summary (AMDGPU memory model, "load atomic acquire" / "store atomic release" sequences):
- ``wait``: thread t of the workgroup (``__ockl_get_local_id``) polls signals t, t+ntid, ... with an atomic load at
  the matching scope, NOT an RMW: gfx94x acquire = ``global_load ... sc0 sc1`` (system) / ``sc1`` (agent) /
  ``sc0`` (workgroup) + ``s_waitcnt vmcnt(0)`` + ``buffer_inv sc0 sc1`` / ``buffer_inv sc1``; relaxed = the load
  alone. Then a workgroup barrier (``s_barrier`` with workgroup fences) orders every thread after the wait.
- ``notify``: workgroup barrier, then ONE thread (Triton's scalar atomics are issued by one thread) does an atomic
  exchange / add with release semantics at agent (gpu) or system (intra_node, on the ``rocshmem_ptr`` address)
  scope: LLVM emits ``buffer_wbl2`` + ``s_waitcnt`` before the atomic. inter_node: barrier, system release fence,
  thread 0 calls ``rocshmem_signal_set`` / ``rocshmem_signal_add`` (rocSHMEM >= 3.8; rocSHMEM has no signal op taking
  ``sig_op``, so the call is chosen by the compile-time ``sig_op``).
"""
from __future__ import annotations

import functools

import triton.language as tl

from ... import _compat
from ...language import _gpu, _libshmem
from . import libshmem

OCKL = "ockl"

# (sem, scope) -> (cache-policy bits on the load, sequence after it); gfx94x / gfx950
_GFX94_LOAD = {
    ("relaxed", "cta"): ("sc0", ""),
    ("relaxed", "gpu"): ("sc1", ""),
    ("relaxed", "sys"): ("sc0 sc1", ""),
    ("acquire", "cta"): ("sc0", "s_waitcnt vmcnt(0)"),
    ("acquire", "gpu"): ("sc1", "s_waitcnt vmcnt(0)\nbuffer_inv sc1"),
    ("acquire", "sys"): ("sc0 sc1", "s_waitcnt vmcnt(0)\nbuffer_inv sc0 sc1"),
}
# gfx90a: glc loads, L1 invalidate with buffer_wbinvl1_vol for agent/system acquire
_GFX90A_LOAD = {
    ("relaxed", "cta"): ("glc", ""),
    ("relaxed", "gpu"): ("glc", ""),
    ("relaxed", "sys"): ("glc", ""),
    ("acquire", "cta"): ("glc", "s_waitcnt vmcnt(0)"),
    ("acquire", "gpu"): ("glc", "s_waitcnt vmcnt(0)\nbuffer_wbinvl1_vol"),
    ("acquire", "sys"): ("glc", "s_waitcnt vmcnt(0)\nbuffer_wbinvl1_vol"),
}
_RELEASE_SYS_FENCE = {"gfx94": "buffer_wbl2 sc0 sc1\ns_waitcnt vmcnt(0) lgkmcnt(0)",
                      "gfx90a": "buffer_wbl2\ns_waitcnt vmcnt(0) lgkmcnt(0)"}


def _family(target) -> str:
    arch = str(getattr(target, "arch", "") or "")
    if arch.startswith(("gfx94", "gfx95")):
        return "gfx94"
    if arch.startswith("gfx90a"):
        return "gfx90a"
    raise ValueError(f"triton_dist: AMD arch {arch!r} is not supported by dl.wait/dl.notify "
                     f"(supported: gfx90a, gfx940/941/942, gfx950)")


def load_asm(sem: str, scope: str, bits: int, target) -> str:
    table = _GFX94_LOAD if _family(target) == "gfx94" else _GFX90A_LOAD
    cpol, after = table[(sem, scope)]
    op = "global_load_dwordx2" if bits == 64 else "global_load_dword"
    return f"{op} $0, $1, off {cpol}\n{after}".strip()


def post_asm(sem: str, scope: str, target) -> str:
    """Run by every thread after the workgroup barrier: the acquire-side invalidate at the wait's scope."""
    if sem != "acquire" or scope == "cta":
        return "s_mov_b32 $0, 0"
    inv = ("buffer_inv sc0 sc1" if scope == "sys" else "buffer_inv sc1") if _family(target) == "gfx94" \
        else "buffer_wbinvl1_vol"
    return f"{inv}\ns_mov_b32 $0, 0"


#: workgroup-scope release by every thread before the barrier: its own stores have completed (left the wave).
_WG_RELEASE_ASM = "s_waitcnt vmcnt(0) lgkmcnt(0)\ns_mov_b32 $0, 0"


@_compat.dist_builtin
def _ockl(symbol, _semantic=None):
    from ...language._extern import Extern, call_extern

    v = call_extern(OCKL, "", Extern(_compat.unwrap_constexpr(symbol), (tl.int32, ), tl.int64, True), [0], _semantic)
    return _semantic.cast(v, tl.int32)


_TIMER_ASM = tl.constexpr("s_memrealtime $0\ns_waitcnt lgkmcnt(0)")  # 100 MHz constant clock on CDNA


_my_pe = _libshmem.builtin(libshmem, "my_pe")


@_compat.jit_function
def _wait_spin(addr, n, value, BYTES: tl.constexpr, LOAD_ASM: tl.constexpr, VC: tl.constexpr,
               BOUND: tl.constexpr, TRAP_ASM: tl.constexpr, POST_ASM: tl.constexpr):
    tid = _ockl("__ockl_get_local_id")
    ntid = _ockl("__ockl_get_local_size")
    i = tid
    timed_out = 0
    if BOUND != 0:
        t0 = tl.inline_asm_elementwise(_TIMER_ASM, "=s", [], dtype=tl.int64, is_pure=False, pack=1)
    while i < n:
        p = addr + i.to(tl.int64) * BYTES
        v = tl.inline_asm_elementwise(LOAD_ASM, VC, [p], dtype=value.dtype, is_pure=False, pack=1)
        if BOUND == 0:
            while v != value:
                v = tl.inline_asm_elementwise(LOAD_ASM, VC, [p], dtype=value.dtype, is_pure=False, pack=1)
        else:
            while (v != value) & (timed_out == 0):
                v = tl.inline_asm_elementwise(LOAD_ASM, VC, [p], dtype=value.dtype, is_pure=False, pack=1)
                t1 = tl.inline_asm_elementwise(_TIMER_ASM, "=s", [], dtype=tl.int64, is_pure=False, pack=1)
                if t1 - t0 > BOUND:
                    timed_out = 1
            if timed_out != 0:
                tl.device_print("triton_dist dl.wait TIMEOUT (TRITON_DIST_BOUNDED_WAIT): rank, program, address, "
                                "expected, seen =", _my_pe(), tl.program_id(0), p, value, v)
                tl.inline_asm_elementwise(TRAP_ASM, "=v", [], dtype=tl.int32, is_pure=False, pack=1)
        i += ntid
    tl.debug_barrier()
    # every thread: its own acquire-side L1 invalidate, so loads of all waves after the barrier miss stale lines
    return tl.inline_asm_elementwise(POST_ASM, "=s", [], dtype=tl.int32, is_pure=False, pack=1)


@_compat.jit_function
def _wait_loop(addr, n, value, BYTES: tl.constexpr, LOAD_ASM: tl.constexpr, VC: tl.constexpr,
               BOUND: tl.constexpr, TRAP_ASM: tl.constexpr, POST_ASM: tl.constexpr):
    # Guarded by an opaque (pure) "1" so that Triton's software pipeliner can predicate the wait (it predicates
    # scf.if, not side-effecting ops).
    on = tl.inline_asm_elementwise("s_mov_b32 $0, 1", "=s", [], dtype=tl.int32, is_pure=True, pack=1)
    tok = 0
    if on != 0:
        tok = _wait_spin(addr, n, value, BYTES, LOAD_ASM, VC, BOUND, TRAP_ASM, POST_ASM)
    return tok


def wait(ptr, n, scope, sem, value, bits, bound_ms, *, _semantic, _generator=None, target=None):
    if _generator is None:
        raise RuntimeError("dl.wait: the AMD lowering needs the code generator (call dl.wait from a kernel)")
    addr, n, value, _ = _gpu.wait_operands(ptr, n, value, bits, _semantic)
    bound_ticks = int(bound_ms) * 100_000
    return _compat.call_jit(_generator, _wait_loop, [
        addr, n, value, tl.constexpr(bits // 8), tl.constexpr(load_asm(sem, scope, bits, target)), tl.constexpr("=v,v"),
        tl.constexpr(bound_ticks), tl.constexpr("s_trap 2"), tl.constexpr(post_asm(sem, scope, target))
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


def notify(ptr, rank, signal, sig_op, comm_scope, *, _semantic, _generator=None, target=None):
    rank = _semantic.cast(_semantic.to_tensor(rank), tl.int32)
    sig = _semantic.cast(_semantic.to_tensor(signal), tl.uint64)
    if comm_scope == "inter_node":
        if _generator is None:
            raise RuntimeError("dl.notify: inter_node needs the code generator (call it from a kernel)")
        addr = _semantic.cast(ptr, tl.int64)
        _compat.call_jit(_generator, _notify_inter,
                         [addr, sig, rank, tl.constexpr(sig_op == "add"),
                          tl.constexpr(_RELEASE_SYS_FENCE[_family(target)]), tl.constexpr(_WG_RELEASE_ASM)])
        return None
    scope = "gpu"
    if comm_scope == "intra_node":
        ptr = symm_at(ptr, rank, _semantic=_semantic)
        scope = "sys"
    _gpu.asm(_WG_RELEASE_ASM, "=s", [], tl.int32, _semantic)
    _semantic.debug_barrier()
    sig = _semantic.cast(sig, ptr.dtype.element_ty)
    mask = _semantic.to_tensor(True)
    if sig_op == "set":
        _semantic.atomic_xchg(ptr, sig, mask, "release", scope)
    else:
        _semantic.atomic_add(ptr, sig, mask, "release", scope)
    return None


extern_call = _gpu.extern_call
