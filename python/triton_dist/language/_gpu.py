"""Target-independent pieces of the GPU lowerings (no asm, no SHMEM symbols: those come in as arguments from
``triton_dist.backends.{nvidia,amd}``). ``consume_token``, ``symm_at``, ``rank`` and ``num_ranks`` take those
first (the opaque-zero asm and constraints; the target's libshmem module), then the backend lowering's
signature: a backend binds them with ``functools.partial``."""
from __future__ import annotations

import triton.language as tl

from .. import _compat

#: Divisibility re-asserted on opaque zeros and translated symmetric bases (symmetric heaps are >= 16-byte aligned).
ALIGN = 16


def asm(text, constraints, args, dtype, _semantic, is_pure=False):
    return tl.inline_asm_elementwise(text, constraints, args, dtype, is_pure, 1, _semantic=_semantic)


def tag_mismatch_message(tag_bits: int, op: str = "dl.wait") -> str:
    """The device_print prefix of a tagged ``dl.wait`` (``op``: or ``dl.load_flagged``) that saw a signal differing
    from its value (then: rank, program, address, this call's epoch and tag, the signal's epoch and tag), naming the
    kernel being compiled."""
    kernel = _compat.traced_kernel_name()
    where = f" in kernel {kernel}" if kernel else ""
    return (f"triton_dist {op}{where}: RANKS DISAGREE (a peer's signal differs from this call's; the collectives "
            f"tag it with the element count mod 2**{int(tag_bits)}: every rank must make the same calls with the "
            f"same shapes): rank, program, address, this call's epoch, tag, the signal's epoch, tag =")


def wait_operands(ptr, n, value, bits, _semantic):
    """``dl.wait``'s operands: the address as i64, the count as i32, the value as i32 / i64 (returned last)."""
    vty = tl.int64 if bits == 64 else tl.int32
    addr = _semantic.cast(ptr, tl.int64)
    n = _semantic.cast(_semantic.to_tensor(n), tl.int32)
    value = _semantic.cast(_semantic.to_tensor(value), vty)
    return addr, n, value, vty


def opaque_zero(token, zero_asm, zero_constraints, _semantic):
    """An int32 0 the compiler cannot see through, data-dependent on ``token``, marked 16-divisible."""
    z = asm(zero_asm, zero_constraints, [token], tl.int32, _semantic, is_pure=True)
    return _compat.set_divisibility(z, ALIGN)


def consume_token(zero_asm, zero_constraints, value, token, *, target, _semantic):
    if _compat.is_block_pointer(value):
        zero = opaque_zero(token, zero_asm, zero_constraints, _semantic)
        return _compat.advance_block_pointer(value, [zero] * _compat.block_pointer_rank(value), _semantic)
    if not isinstance(value, tl.tensor):  # a Python number (e.g. a descriptor coordinate)
        value = _semantic.to_tensor(value)
    zero = opaque_zero(token, zero_asm, zero_constraints, _semantic)
    ty = value.type
    dt = value.dtype
    if dt.is_ptr():
        return _semantic.add(value, zero, True)
    if dt.is_int() and dt.primitive_bitwidth == 1:
        return _semantic.or_(value, _semantic.cast(zero, tl.int1))
    if dt.is_int():
        return _semantic.add(value, _semantic.cast(zero, dt), True)
    if dt.is_floating():
        ity = {16: tl.int16, 32: tl.int32, 64: tl.int64}.get(dt.primitive_bitwidth)
        if ity is None:
            raise TypeError(f"dl.consume_token: unsupported value dtype {dt}")
        as_int = _semantic.bitcast(value, ity)
        as_int = _semantic.add(as_int, _semantic.cast(zero, ity), True)
        return _semantic.bitcast(as_int, dt)
    raise TypeError(f"dl.consume_token: unsupported value type {ty}")


def symm_at(shmem, ptr, rank, *, target, _semantic):
    """Translate with ``shmem.call("ptr", addr, rank)``. A scalar pointer is translated once and re-marked
    16-divisible (symmetric allocations are aligned), so ``symm_at(base, r) + offsets`` vectorises like a local
    access; a null result (peer not load/store-reachable) stays null. A tensor of pointers is translated element
    by element (correct, but its axis info is lost: translate the scalar base instead)."""
    ptr_ty = ptr.type
    rank = _semantic.to_tensor(rank)
    rank = _semantic.cast(rank, tl.int32) if rank.dtype != tl.int32 else rank
    addr = _semantic.cast(ptr, tl.int64)
    out = shmem.call("ptr", addr, rank, _semantic=_semantic)
    if ptr_ty.is_block():
        return _semantic.cast(out, ptr.dtype)
    res = _semantic.cast(out, ptr_ty)  # int_to_ptr: AxisInfo takes the hint on this op
    return _compat.set_divisibility(res, ALIGN)


def rank(shmem, *, target, _semantic):
    return shmem.call("my_pe", _semantic=_semantic)


def num_ranks(shmem, *, target, _semantic):
    return shmem.call("n_pes", _semantic=_semantic)


def extern_call(lib_name, lib_path, args, arg_type_symbol_dict, is_pure, *, target, _semantic):
    from ._extern import Extern, call_extern

    conv = [a if isinstance(a, tl.tensor) else _semantic.to_tensor(a) for a in args]
    key = tuple(a.dtype for a in conv)
    if key not in arg_type_symbol_dict:
        raise TypeError(f"dl.extern_call: no entry for argument dtypes {key} in arg_type_symbol_dict "
                        f"(has: {list(arg_type_symbol_dict)})")
    symbol, ret = arg_type_symbol_dict[key]
    return call_extern(lib_name, lib_path, Extern(symbol, key, ret, is_pure), conv, _semantic)


def enter_simt_region(tile_scratch_limit, values, *, target, _semantic):
    """``with simt_exec_region() as (tid, n)`` in a compiled kernel: the code generator binds each name to its element
    of ``values`` (``_compat.bind_with_tuple_target``), and every tile the body indexes per thread is backed by the
    shared scratch (``_simt_tiles.open_tiles``, at most ``tile_scratch_limit`` bytes: the target binds it); returns
    the tuple and the undo for ``__exit__`` (tiles first, then the names)."""
    from ._simt_tiles import open_tiles

    undo_names = _compat.bind_with_tuple_target(values)
    close_tiles = open_tiles(tile_scratch_limit, _semantic)
    if close_tiles is None:
        return tl.tuple(list(values)), undo_names

    def undo():
        close_tiles()
        if undo_names is not None:
            undo_names()

    return tl.tuple(list(values)), undo


def int_of(dtype):
    """The unsigned integer type of ``dtype``'s width (the bits a 16/32/64-bit ld/st/atomic moves)."""
    return _compat.int_dtype(dtype.primitive_bitwidth, False)


def as_int_ptr(ptr, elem, _semantic):
    """``(ptr as a pointer to int_of(elem), int_of(elem))``; ``ptr`` itself when it already points to that type."""
    it = int_of(elem)
    return ptr if elem == it else tl.cast(ptr, tl.pointer_type(it), _semantic=_semantic), it


# ------------------------------------------------------------------------------------------- flagged words (LL)

@_compat.jit_function
def flagged_word(value, flag):
    """``dl.store_flagged``'s word: ``(uint32(flag) << 32) | bits32(value)`` as int64 (value's shape)."""
    bits = value.to(tl.uint32, bitcast=True).to(tl.int64)
    return bits | (flag.to(tl.int64) << 32)


@_compat.jit_function
def _load_words(ptr, on, LOAD_ASM: tl.constexpr):
    # relaxed system-scope reads of the words where on != 0 (0 elsewhere): the target's load asm or, with LOAD_ASM
    # == "", an atomic "or 0" (a read that cannot modify the word; used on AMD, where Triton turns a volatile
    # tl.load into a buffer load without the system-coherence bits)
    if LOAD_ASM == "":
        return tl.where(on != 0, tl.atomic_or(ptr, 0, mask=on != 0, sem="relaxed", scope="sys"), 0)
    else:
        return tl.inline_asm_elementwise(LOAD_ASM, "=l,l,r", [ptr.to(tl.int64), on], dtype=tl.int64,
                                         is_pure=False, pack=1)


@_compat.jit_function
def _word_state(w, flag, on, TAG_BITS: tl.constexpr):
    # per word: 0 there (or masked off), 1 not yet, 2 there with another tag (TAG_BITS: its epoch bits equal flag's)
    wflag = (w >> 32).to(tl.int32)
    if TAG_BITS == 0:
        state = (wflag != flag).to(tl.int32)
    else:
        arrived = (wflag >> TAG_BITS) == (flag >> TAG_BITS)
        state = tl.where(arrived, (wflag != flag).to(tl.int32) * 2, 1)
    return tl.where(on != 0, state, 0)


@_compat.jit_function
def _first_word(ptr, w, state, STATE: tl.constexpr, IS_BLOCK: tl.constexpr):
    # the lowest address whose state is STATE and the word there (a block: reductions, program-uniform)
    addr = ptr.to(tl.int64)
    if IS_BLOCK:
        first = tl.min(tl.where(state == STATE, addr, 0x7FFFFFFFFFFFFFFF))
        seen = tl.max(tl.where(addr == first, w, -0x7FFFFFFFFFFFFFFF))
    else:
        first = addr
        seen = w
    return first, seen


@_compat.jit_function
def load_flagged_spin(ptr, flag, on, me, tid, IS_BLOCK: tl.constexpr, LOAD_ASM: tl.constexpr, BOUND: tl.constexpr,
                      TIMER_ASM: tl.constexpr, TIMER_C: tl.constexpr, TRAP_ASM: tl.constexpr, TRAP_C: tl.constexpr,
                      TAG_BITS: tl.constexpr, MISMATCH_MSG: tl.constexpr):
    """``dl.load_flagged`` on a GPU: load every word (where ``on``), then re-load the missing ones until none is
    missing; one block-wide max per round (of the words' states: 0 there, 1 missing, 2 there with another tag) keeps
    the loop program-uniform and tells a tag mismatch at the same time. ``BOUND`` (timer ticks, 0: none): on timeout
    thread ``tid == 0`` prints rank ``me``, the program, the first missing address and the word seen there, then
    traps (which ends the grid). ``TAG_BITS``: a word of this epoch with another tag is reported at once
    (``MISMATCH_MSG``, by thread ``tid == 0``: rank, program, address, both epochs and tags), which then traps."""
    w = _load_words(ptr, on, LOAD_ASM)
    state = _word_state(w, flag, on, TAG_BITS)
    if BOUND != 0:
        t0 = tl.inline_asm_elementwise(TIMER_ASM, TIMER_C, [], dtype=tl.int64, is_pure=False, pack=1)
    if IS_BLOCK:
        worst = tl.max(state)
    else:
        worst = state
    while worst == 1:
        w2 = _load_words(ptr, on * (state == 1).to(tl.int32), LOAD_ASM)
        w = tl.where(state == 1, w2, w)
        state = _word_state(w, flag, on, TAG_BITS)
        if IS_BLOCK:
            worst = tl.max(state)
        else:
            worst = state
        if BOUND != 0:
            t1 = tl.inline_asm_elementwise(TIMER_ASM, TIMER_C, [], dtype=tl.int64, is_pure=False, pack=1)
            late = (t1 - t0 > BOUND).to(tl.int32)
            if IS_BLOCK:  # the clock is read per thread: agree on it before the reductions below
                late = tl.max(on * 0 + late)
            if (worst == 1) & (late != 0):
                first, seen = _first_word(ptr, w, state, 1, IS_BLOCK)
                if tid == 0:  # report and trap in one thread: a trap elsewhere could end the kernel before
                    # this thread's report is written (the trap ends every thread of the grid)
                    tl.device_print("triton_dist dl.load_flagged TIMEOUT (TRITON_DIST_BOUNDED_WAIT): rank, program, "
                                    "first unflagged address, expected flag, word seen =", me, tl.program_id(0),
                                    first, flag, seen)
                    tl.inline_asm_elementwise(TRAP_ASM, TRAP_C, [], dtype=tl.int32, is_pure=False, pack=1)
    if TAG_BITS != 0:
        if worst == 2:  # a word of this call with another tag: the ranks disagree (a cold branch)
            first, word = _first_word(ptr, w, state, 2, IS_BLOCK)
            seen = (word >> 32).to(tl.int32)
            if tid == 0:  # report and trap in one thread (see the timeout above)
                tl.device_print(MISMATCH_MSG, me, tl.program_id(0), first, flag >> TAG_BITS,
                                flag & ((1 << TAG_BITS) - 1), seen >> TAG_BITS, seen & ((1 << TAG_BITS) - 1))
                tl.inline_asm_elementwise(TRAP_ASM, TRAP_C, [], dtype=tl.int32, is_pure=False, pack=1)
    return w.to(tl.int32)


def flagged_operands(ptr, flag, mask, _semantic):
    """``(flag as int32, mask as int32 of ptr's shape: 1 where the word is stored / read)`` for the flagged-word
    lowerings (an absent mask is all ones)."""
    if mask is not None:
        on = _semantic.cast(mask, tl.int32)
    elif ptr.type.is_block():
        on = _semantic.full(list(ptr.shape), 1, tl.int32)
    else:
        on = _semantic.to_tensor(1)
    return _semantic.cast(_semantic.to_tensor(flag), tl.int32), on


def load_flagged_call(ptr, flag, mask, me, tid, load_asm, bound_ticks, timer_asm, timer_c, trap_asm, trap_c, tag_bits,
                      *, _semantic, _generator):
    """Emit :func:`load_flagged_spin` for ``dl.load_flagged`` (the backend gives its asm, clock and trap)."""
    is_block = ptr.type.is_block()
    flag, on = flagged_operands(ptr, flag, mask, _semantic)
    me = _semantic.cast(_semantic.to_tensor(me), tl.int32)
    tid = _semantic.cast(_semantic.to_tensor(tid), tl.int32)
    return _compat.call_jit(_generator, load_flagged_spin, [
        ptr, flag, on, me, tid, tl.constexpr(is_block), tl.constexpr(load_asm), tl.constexpr(int(bound_ticks)),
        tl.constexpr(timer_asm), tl.constexpr(timer_c), tl.constexpr(trap_asm), tl.constexpr(trap_c),
        tl.constexpr(int(tag_bits)), tl.constexpr(tag_mismatch_message(tag_bits, "dl.load_flagged") if tag_bits else "")])
