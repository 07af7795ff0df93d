"""NVIDIA (PTX) lowerings of the ``triton_dist.language`` ops. Called by ``triton_dist.language.core`` at trace time.

Memory-ordering summary:
- ``wait``: every thread polls its share of the signals (thread t: t, t+ntid, ...) with ``ld.<sem>.<scope>.b32/b64``
  (plain loads, no RMW), then ``bar.sync 0`` so every thread of the CTA is ordered after all the acquires. One signal
  without a bound on a Triton with ``tl.atomic_poll`` (``_compat.HAS_ATOMIC_POLL``, 3.9+): Triton's op instead --
  thread 0 spins on ``ld.relaxed.<scope>``, then ``fence.acquire.<scope>`` (acquire) and ``bar.sync 0``: the same
  scope, ordering and barrier (a relaxed load followed by an acquire fence is an acquire pattern in the PTX memory
  model). A runtime or larger count (``tl.atomic_poll`` has no mask) and the bounded wait (it reports the value seen
  and the signal's address) keep the inline-asm spin.
- ``notify``: ``bar.sync 0``, then thread 0 alone: ``membar.gl`` + ``st.relaxed.gpu`` / ``atom.relaxed.gpu.add``
  (gpu), ``membar.sys`` + ``st.relaxed.sys`` / ``atom.relaxed.sys.add`` on the ``nvshmem_ptr`` address
  (intra_node), ``membar.sys`` + ``nvshmemx_signal_op`` (inter_node).
"""
from __future__ import annotations

import functools

import triton.language as tl

from ... import _compat
from ...language import _gpu, _libshmem
from . import libshmem

_PTX_SCOPE = {"cta": "cta", "gpu": "gpu", "sys": "sys"}

# --------------------------------------------------------------------------------------------------- wait

def _reporting_spin(bits: int, preds: int, timer0: str, spin: str, reports: str) -> str:
    """The frame of the spins that report what they saw (bounded and tagged): registers, the per-thread outer loop
    over signals ``t, t + ntid, ...``, ``spin`` (from label ``TDW_SPIN``: poll the signal at ``%tdw_a``, then take
    the next one or branch to a report), ``reports`` (labels that set $1 and jump to ``TDW_END``), then the normal
    end (barrier, $1 = 0). Operands: $0 token, $1 flag, $2 value seen, $3 index, $4 addr, $5 n, $6 value, [$7]."""
    b = bits
    return f"""{{
.reg .pred %tdw_p<{preds}>;
.reg .b32 %tdw_i, %tdw_n;
.reg .b64 %tdw_o, %tdw_a, %tdw_t0, %tdw_t1;
.reg .b{b} %tdw_v;
{timer0}mov.u32 %tdw_i, %tid.x;
mov.u32 %tdw_n, %ntid.x;
mov.b{b} %tdw_v, $6;
TDW_OUTER:
setp.ge.u32 %tdw_p0, %tdw_i, $5;
@%tdw_p0 bra TDW_DONE;
mul.wide.u32 %tdw_o, %tdw_i, {b // 8};
add.s64 %tdw_a, $4, %tdw_o;
TDW_SPIN:
{spin}{reports}TDW_DONE:
bar.sync 0;
mov.u32 $1, 0;
mov.b{b} $2, $6;
mov.u32 $3, 0;
TDW_END:
mov.u32 $0, 0;
}}"""


_TIMER0 = "mov.u64 %tdw_t0, %globaltimer;\n"


def _timer_check(bound_ns: int) -> str:
    """Inside a spin: branch to ``TDW_TIMEOUT`` once ``bound_ns`` have passed since ``%tdw_t0``."""
    return (f"mov.u64 %tdw_t1, %globaltimer;\nsub.u64 %tdw_t1, %tdw_t1, %tdw_t0;\n"
            f"setp.gt.u64 %tdw_p2, %tdw_t1, {bound_ns};\n@%tdw_p2 bra TDW_TIMEOUT;\n")


def _wait_asm(scope: str, sem: str, bits: int, bound_ns: int) -> str:
    """PTX for the spin. Operands: unbounded: $0 token, $1 addr, $2 n, $3 value.
    Bounded: $0 token, $1 timed-out flag, $2 last seen value, $3 index, $4 addr, $5 n, $6 value."""
    b = bits
    ld = f"ld.{sem}.{_PTX_SCOPE[scope]}.b{b}"
    if not bound_ns:
        return f"""{{
.reg .pred %tdw_p<2>;
.reg .b32 %tdw_i, %tdw_n;
.reg .b64 %tdw_o, %tdw_a;
.reg .b{b} %tdw_v;
mov.u32 %tdw_i, %tid.x;
mov.u32 %tdw_n, %ntid.x;
TDW_OUTER:
setp.ge.u32 %tdw_p0, %tdw_i, $2;
@%tdw_p0 bra TDW_DONE;
mul.wide.u32 %tdw_o, %tdw_i, {b // 8};
add.s64 %tdw_a, $1, %tdw_o;
TDW_SPIN:
{ld} %tdw_v, [%tdw_a];
setp.ne.b{b} %tdw_p1, %tdw_v, $3;
@%tdw_p1 bra TDW_SPIN;
add.u32 %tdw_i, %tdw_i, %tdw_n;
bra TDW_OUTER;
TDW_DONE:
bar.sync 0;
mov.u32 $0, 0;
}}"""
    spin = (f"{ld} %tdw_v, [%tdw_a];\nsetp.eq.b{b} %tdw_p1, %tdw_v, $6;\n@%tdw_p1 bra TDW_NEXT;\n"
            f"{_timer_check(bound_ns)}bra TDW_SPIN;\nTDW_NEXT:\nadd.u32 %tdw_i, %tdw_i, %tdw_n;\nbra TDW_OUTER;\n")
    reports = f"TDW_TIMEOUT:\nmov.u32 $1, 1;\nmov.b{b} $2, %tdw_v;\nmov.u32 $3, %tdw_i;\nbra TDW_END;\n"
    return _reporting_spin(b, 3, _TIMER0, spin, reports)


def _wait_tagged_asm(scope: str, sem: str, bits: int, bound_ns: int) -> str:
    """PTX of the tagged spin (``tag_bits``): poll each signal until ``signal >= floor`` (its epoch reached this
    call's), then compare it with the value; report the first signal that differs instead of passing the barrier.
    Operands: $0 token, $1 flag (0 ok, 1 timed out, 2 differs), $2 value seen, $3 index, $4 addr, $5 n, $6 value,
    $7 floor. The hot path is the untagged spin's (one load and one compare per poll, then one compare)."""
    b = bits
    ld = f"ld.{sem}.{_PTX_SCOPE[scope]}.b{b}"
    timer = _timer_check(bound_ns) if bound_ns else ""
    timeout = "TDW_TIMEOUT:\nmov.u32 $1, 1;\nbra TDW_REPORT;\n" if bound_ns else ""
    spin = (f"{ld} %tdw_v, [%tdw_a];\nsetp.ge.s{b} %tdw_p1, %tdw_v, $7;\n@%tdw_p1 bra TDW_CHECK;\n"
            f"{timer}bra TDW_SPIN;\nTDW_CHECK:\nsetp.ne.b{b} %tdw_p3, %tdw_v, $6;\n@%tdw_p3 bra TDW_DIFFERS;\n"
            f"add.u32 %tdw_i, %tdw_i, %tdw_n;\nbra TDW_OUTER;\n")
    reports = (f"{timeout}TDW_DIFFERS:\nmov.u32 $1, 2;\nTDW_REPORT:\nmov.b{b} $2, %tdw_v;\nmov.u32 $3, %tdw_i;\n"
               f"bra TDW_END;\n")
    return _reporting_spin(b, 4, _TIMER0 if bound_ns else "", spin, reports)


_my_pe = _libshmem.builtin(libshmem, "my_pe")


#: A pure "1" the compiler cannot fold: the spin is emitted inside ``if on != 0`` so that Triton's software
#: pipeliner can predicate it (it predicates scf.if by AND-ing its condition; a bare side-effecting inline asm
#: makes the pipeliner fail with "doesn't know how to predicate this op").
_ON_ASM = "mov.u32 $0, 1;"


@_compat.jit_function
def _wait_guarded(addr, n, value, ASM: tl.constexpr, CONSTRAINTS: tl.constexpr, ON_ASM: tl.constexpr,
                  BOUNDED: tl.constexpr, DTYPES: tl.constexpr, BYTES: tl.constexpr, TRAP_ASM: tl.constexpr):
    on = tl.inline_asm_elementwise(ON_ASM, "=r", [], dtype=tl.int32, is_pure=True, pack=1)
    tok = 0
    if on != 0:
        if BOUNDED:
            tok, flag, seen, idx = tl.inline_asm_elementwise(ASM, CONSTRAINTS, [addr, n, value],
                                                             dtype=DTYPES,
                                                             is_pure=False, pack=1)
            if flag != 0:  # only the thread(s) that timed out: report, then trap (the host gets an error)
                tl.device_print("triton_dist dl.wait TIMEOUT (TRITON_DIST_BOUNDED_WAIT): rank, program, address, "
                                "expected, seen =", _my_pe(), tl.program_id(0), addr + idx.to(tl.int64) * BYTES,
                                value, seen)
                tl.inline_asm_elementwise(TRAP_ASM, "=r", [], dtype=tl.int32, is_pure=False, pack=1)
        else:
            tok = tl.inline_asm_elementwise(ASM, CONSTRAINTS, [addr, n, value], dtype=tl.int32, is_pure=False,
                                            pack=1)
    return tok


@_compat.jit_function
def _wait_tagged(addr, n, value, ASM: tl.constexpr, CONSTRAINTS: tl.constexpr, ON_ASM: tl.constexpr,
                 DTYPES: tl.constexpr, BYTES: tl.constexpr, TRAP_ASM: tl.constexpr, TAG_BITS: tl.constexpr,
                 TAG_MASK: tl.constexpr, MISMATCH_MSG: tl.constexpr):
    on = tl.inline_asm_elementwise(ON_ASM, "=r", [], dtype=tl.int32, is_pure=True, pack=1)
    tok = 0
    floor = (value >> TAG_BITS) << TAG_BITS  # the first signal value of this call's epoch
    if on != 0:
        tok, flag, seen, idx = tl.inline_asm_elementwise(ASM, CONSTRAINTS, [addr, n, value, floor], dtype=DTYPES,
                                                         is_pure=False, pack=1)
        if flag != 0:  # only the thread(s) that saw it: report, then trap (the host gets an error)
            if flag == 2:
                tl.device_print(MISMATCH_MSG, _my_pe(), tl.program_id(0), addr + idx.to(tl.int64) * BYTES,
                                value >> TAG_BITS, value & TAG_MASK, seen >> TAG_BITS, seen & TAG_MASK)
            else:
                tl.device_print("triton_dist dl.wait TIMEOUT (TRITON_DIST_BOUNDED_WAIT): rank, program, address, "
                                "expected, seen =", _my_pe(), tl.program_id(0), addr + idx.to(tl.int64) * BYTES,
                                value, seen)
            tl.inline_asm_elementwise(TRAP_ASM, "=r", [], dtype=tl.int32, is_pure=False, pack=1)
    return tok


@_compat.jit_function
def _poll_guarded(ptr, value, SEM: tl.constexpr, SCOPE: tl.constexpr, ON_ASM: tl.constexpr, ZERO_ASM: tl.constexpr):
    # Triton's own poll (HAS_ATOMIC_POLL) in the same pipeliner guard as the spin. The token is a side-effecting
    # zero after the poll: the poll's boolean is constant without a timeout, so it cannot carry the dependency.
    on = tl.inline_asm_elementwise(ON_ASM, "=r", [], dtype=tl.int32, is_pure=True, pack=1)
    tok = 0
    if on != 0:
        tl.atomic_poll(ptr, value, sem=SEM, scope=SCOPE)
        tok = tl.inline_asm_elementwise(ZERO_ASM, "=r", [], dtype=tl.int32, is_pure=False, pack=1)
    return tok


def wait(ptr, n, scope, sem, value, bits, bound_ms, tag_bits, *, target, _semantic, _generator):
    if _generator is None:
        raise RuntimeError("dl.wait: must be called from inside a kernel being compiled")
    if tag_bits:
        addr, n, value, vty = _gpu.wait_operands(ptr, n, value, bits, _semantic)
        vc = "l" if bits == 64 else "r"
        return _compat.call_jit(_generator, _wait_tagged, [
            addr, n, value,
            tl.constexpr(_wait_tagged_asm(scope, sem, bits, int(bound_ms) * 1_000_000)),
            tl.constexpr(f"=r,=r,={vc},=r,l,r,{vc},{vc}"), tl.constexpr(_ON_ASM),
            tl.constexpr((tl.int32, tl.int32, vty, tl.int32)), tl.constexpr(bits // 8), tl.constexpr("trap;"),
            tl.constexpr(int(tag_bits)), tl.constexpr((1 << int(tag_bits)) - 1),
            tl.constexpr(_gpu.tag_mismatch_message(tag_bits))])
    if _compat.HAS_ATOMIC_POLL and not bound_ms and isinstance(n, int) and n == 1:
        return _compat.call_jit(_generator, _poll_guarded, [ptr, value, tl.constexpr(sem), tl.constexpr(scope),
                                                            tl.constexpr(_ON_ASM), tl.constexpr(_ZERO_ASM)])
    addr, n, value, vty = _gpu.wait_operands(ptr, n, value, bits, _semantic)
    vc = "l" if bits == 64 else "r"
    if not bound_ms:
        asm, cons = _wait_asm(scope, sem, bits, 0), f"=r,l,r,{vc}"
    else:
        asm, cons = _wait_asm(scope, sem, bits, int(bound_ms) * 1_000_000), f"=r,=r,={vc},=r,l,r,{vc}"
    return _compat.call_jit(_generator, _wait_guarded, [
        addr, n, value, tl.constexpr(asm), tl.constexpr(cons), tl.constexpr(_ON_ASM), tl.constexpr(bool(bound_ms)),
        tl.constexpr((tl.int32, tl.int32, vty, tl.int32)), tl.constexpr(bits // 8), tl.constexpr("trap;")])


# --------------------------------------------------------------------------------------------------- tokens

_ZERO_ASM = "mov.u32 $0, 0;"


consume_token = functools.partial(_gpu.consume_token, _ZERO_ASM, "=r,r")


# --------------------------------------------------------------------------------------------------- shmem

rank = functools.partial(_gpu.rank, libshmem)
num_ranks = functools.partial(_gpu.num_ranks, libshmem)
symm_at = functools.partial(_gpu.symm_at, libshmem)


#: sm_90+: every thread first waits for the completion (writes included, not only the shared-memory reads) of the
#: bulk asynchronous copies it issued, i.e. the TMA stores of tensor-descriptor ``store``s: those writes go through
#: the async proxy and are not ordered by ``bar.sync`` + ``membar`` until ``cp.async.bulk.wait_group 0`` has made them
#: visible to the issuing thread. A thread with no bulk group outstanding passes at once.
_BULK_WAIT = "cp.async.bulk.wait_group 0;\n"


def _bulk_wait(target) -> str:
    """:data:`_BULK_WAIT` where the target has bulk asynchronous copies (sm_90 and newer), else nothing."""
    return _BULK_WAIT if isinstance(target.arch, int) and target.arch >= 90 else ""


def _notify_asm(scope: str, sig_op: str, bulk_wait: str = "") -> str:
    """[sm_90+: cp.async.bulk.wait_group 0;] bar.sync 0; then thread 0: membar.{gl|sys}; st.relaxed /
    atom.relaxed.add. Operands $0 dummy, $1 addr, $2 sig."""
    membar = "membar.gl" if scope == "gpu" else "membar.sys"
    if sig_op == "set":
        op = f"@%tdn_p st.relaxed.{scope}.b64 [$1], $2;"
    else:
        op = f"@%tdn_p atom.relaxed.{scope}.add.u64 %tdn_old, [$1], $2;"
    return f"""{{
.reg .pred %tdn_p;
.reg .b32 %tdn_t;
.reg .b64 %tdn_old;
{bulk_wait}bar.sync 0;
mov.u32 %tdn_t, %tid.x;
setp.eq.u32 %tdn_p, %tdn_t, 0;
@%tdn_p {membar};
{op}
mov.u32 $0, 0;
}}"""


def _fence_asm(bulk_wait: str = "") -> str:
    """Every thread: [sm_90+: cp.async.bulk.wait_group 0;] bar.sync 0; membar.sys (before an inter-node signal)."""
    return f"""{{
{bulk_wait}bar.sync 0;
membar.sys;
mov.u32 $0, 0;
}}"""


_TID_ASM = "mov.u32 $0, %tid.x;"


_signal_op = _libshmem.builtin(libshmem, "signal_op")


@_compat.jit_function
def _notify_inter(addr, sig, op, pe, FENCE_ASM: tl.constexpr, TID_ASM: tl.constexpr):
    # every thread: barrier + system fence; thread 0 alone: the signal op.
    tl.inline_asm_elementwise(FENCE_ASM, "=r", [], dtype=tl.int32, is_pure=False, pack=1)
    tid = tl.inline_asm_elementwise(TID_ASM, "=r", [], dtype=tl.int32, is_pure=False, pack=1)
    if tid == 0:
        _signal_op(addr, sig, op, pe)


def notify(ptr, rank, signal, sig_op, comm_scope, *, target, _semantic, _generator):
    rank = _semantic.cast(_semantic.to_tensor(rank), tl.int32)
    sig = _semantic.cast(_semantic.to_tensor(signal), tl.uint64)
    if comm_scope == "inter_node":
        addr = _semantic.cast(ptr, tl.int64)
        op = _semantic.to_tensor(libshmem.SIGNAL_OPS[sig_op])
        if _generator is None:
            raise RuntimeError("dl.notify: inter_node needs the code generator (call it from a kernel)")
        _compat.call_jit(_generator, _notify_inter, [addr, sig, op, rank, tl.constexpr(_fence_asm(_bulk_wait(target))),
                                                      tl.constexpr(_TID_ASM)])
        return None
    if comm_scope == "intra_node":
        ptr = symm_at(ptr, rank, target=target, _semantic=_semantic)
        scope = "sys"
    else:
        scope = "gpu"
    addr = _semantic.cast(ptr, tl.int64)
    _gpu.asm(_notify_asm(scope, sig_op, _bulk_wait(target)), "=r,l,l", [addr, sig], tl.int32, _semantic)
    return None


extern_call = _gpu.extern_call


# --------------------------------------------------------------------------------------------------- flagged words

#: one flagged word per element, predicated by the int32 mask: ``st.relaxed.sys.b64`` (single-copy atomic, system
#: scope, no fence). Operands: $0 dummy, $1 address, $2 word, $3 mask.
_STORE_FLAGGED_ASM = """{
.reg .pred %tdf_p;
setp.ne.b32 %tdf_p, $3, 0;
@%tdf_p st.relaxed.sys.b64 [$1], $2;
mov.u32 $0, 0;
}"""

#: the poll's load: ``ld.relaxed.sys.b64`` where the mask is set, 0 elsewhere. Operands: $0 word, $1 address, $2 mask.
_LOAD_FLAGGED_ASM = """{
.reg .pred %tdf_p;
setp.ne.b32 %tdf_p, $2, 0;
mov.b64 $0, 0;
@%tdf_p ld.relaxed.sys.b64 $0, [$1];
}"""

_GLOBALTIMER_ASM = "mov.u64 $0, %globaltimer;"


@_compat.jit_function
def _store_flagged(ptr, value, flag, on, ASM: tl.constexpr):
    word = _gpu.flagged_word(value, flag)
    tl.inline_asm_elementwise(ASM, "=r,l,l,r", [ptr.to(tl.int64), word, on], dtype=tl.int32, is_pure=False, pack=1)


def store_flagged(ptr, value, flag, mask, *, target, _semantic, _generator):
    if _generator is None:
        raise RuntimeError("dl.store_flagged: must be called from inside a kernel being compiled")
    flag, on = _gpu.flagged_operands(ptr, flag, mask, _semantic)
    _compat.call_jit(_generator, _store_flagged, [ptr, value, flag, on, tl.constexpr(_STORE_FLAGGED_ASM)])
    return None


def load_flagged(ptr, flag, mask, bound_ms, tag_bits, *, target, _semantic, _generator):
    if _generator is None:
        raise RuntimeError("dl.load_flagged: must be called from inside a kernel being compiled")
    report = bound_ms or tag_bits
    me = libshmem.call("my_pe", _semantic=_semantic) if report else 0
    tid = _gpu.asm(_TID_ASM, "=r", [], tl.int32, _semantic) if report else 0
    return _gpu.load_flagged_call(ptr, flag, mask, me, tid, _LOAD_FLAGGED_ASM, int(bound_ms) * 1_000_000,
                                  _GLOBALTIMER_ASM, "=l", "trap; mov.u32 $0, 0;", "=r", tag_bits,
                                  _semantic=_semantic, _generator=_generator)


# --------------------------------------------------------------------------------------------------- L2 prefetch

#: sm_90+: one bulk L2 prefetch, by the program's first thread, where the int32 predicate is set (every thread
#: runs a scalar's asm). Operands: $0 dummy, $1 start (16-byte aligned), $2 size in bytes (a multiple of 16),
#: $3 predicate.
_PREFETCH_L2_ASM = """{
.reg .pred %tdp_p;
.reg .b32 %tdp_t;
mov.u32 %tdp_t, %tid.x;
setp.eq.u32 %tdp_p, %tdp_t, 0;
setp.ne.and.b32 %tdp_p, $3, 0, %tdp_p;
@%tdp_p cp.async.bulk.prefetch.L2.global [$1], $2;
mov.u32 $0, 0;
}"""


@_compat.jit_function
def _prefetch_l2(ptr, num_bytes, on, ASM: tl.constexpr):
    a = ptr.to(tl.int64)
    start = a & -16
    size = (((a + num_bytes + 15) & -16) - start).to(tl.int32)
    on = on & (num_bytes > 0).to(tl.int32)
    tl.inline_asm_elementwise(ASM, "=r,l,r,r", [start, size, on], dtype=tl.int32, is_pure=False, pack=1)


def prefetch_l2(ptr, num_bytes, mask, *, target, _semantic, _generator):
    if not (isinstance(target.arch, int) and target.arch >= 90):
        return None  # no bulk prefetch before sm_90: the hint has no effect (documented)
    if _generator is None:
        raise RuntimeError("dl.prefetch_l2: must be called from inside a kernel being compiled")
    on = _semantic.to_tensor(1) if mask is None else _semantic.cast(mask, tl.int32)
    n = _semantic.cast(_semantic.to_tensor(num_bytes), tl.int64)
    _compat.call_jit(_generator, _prefetch_l2, [ptr, n, on, tl.constexpr(_PREFETCH_L2_ASM)])
    return None
