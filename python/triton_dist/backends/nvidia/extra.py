"""NVIDIA (PTX) lowering of ``triton_dist.language.extra.language_extra`` and ``simt_exec_region``.

Every operation is one ``tl.inline_asm_elementwise`` on scalars with ``is_pure=False``, so each thread that reaches
it executes it (Triton does not mask inline asm to one thread). PTX forms (PTX ISA, ld/st/atom):
``ld.{relaxed|acquire}.{cta|gpu|sys}.global[.v4].b32``, ``ld.volatile.global``, ``st.{relaxed|release}.<scope>
.global``, ``atom.<sem>.<scope>.global.{add,cas}``, ``mov.u32 %tid.x``, ``bar.sync 0``.
"""
from __future__ import annotations

import triton.language as tl

from ... import _compat
from ...language import _gpu
from ...language._gpu import as_int_ptr as _as_int_ptr, int_of as _int_of
from ...language.simt import _join_bits, _split_bits, select_element, vector

_CONSTRAINT = {16: "h", 32: "r", 64: "l"}


def _asm(asm, constraints, args, dtype, _semantic, is_pure=False):
    return tl.inline_asm_elementwise(asm, constraints, args, dtype, is_pure=is_pure, pack=1, _semantic=_semantic)


def _qual(semantic, scope):
    """PTX ordering qualifiers: ``.relaxed.gpu`` / ``.acquire.sys`` / ``.volatile``."""
    return ".volatile" if semantic == "volatile" else f".{semantic}.{scope}"


def tid(axis, *, target, _semantic):
    return _asm(f"mov.u32 $0, %tid.{'xyz'[axis]};", "=r", [], tl.int32, _semantic, is_pure=True)


def ntid(axis, *, target, _semantic):
    return _asm(f"mov.u32 $0, %ntid.{'xyz'[axis]};", "=r", [], tl.int32, _semantic, is_pure=True)


def num_warps(*, target, _semantic):
    return int(_compat.compile_options(_semantic).num_warps)


def num_threads(*, target, _semantic):
    return num_warps(target=target, _semantic=_semantic) * target.warp_size


def syncthreads(*, target, _semantic):
    # Triton's barrier op lowers to the convergent NVVM barrier intrinsic (``barrier.sync 0`` / ``bar.sync 0``).
    # An inline-asm ``bar.sync`` is not convergent to LLVM, which may then tail-duplicate it into both sides of a
    # per-thread branch: threads of one warp at different ``bar.sync`` (``.aligned``) instructions hang.
    tl.debug_barrier(_semantic=_semantic)


def ld(ptr, elem, scope, semantic, *, target, _semantic):
    iptr, it = _as_int_ptr(ptr, elem, _semantic)
    bits = elem.primitive_bitwidth
    out = _asm(f"ld{_qual(semantic, scope)}.global.b{bits} $0, [$1];", f"={_CONSTRAINT[bits]},l", [iptr], it,
               _semantic)
    return out if it == elem else tl.cast(out, elem, bitcast=True, _semantic=_semantic)


def st(ptr, val, elem, scope, semantic, *, target, _semantic):
    iptr, it = _as_int_ptr(ptr, elem, _semantic)
    bits = elem.primitive_bitwidth
    ival = val if it == elem else tl.cast(val, it, bitcast=True, _semantic=_semantic)
    _asm(f"st{_qual(semantic, scope)}.global.b{bits} [$1], $2;\n\tmov.u32 $0, 0;", f"=r,l,{_CONSTRAINT[bits]}",
         [iptr, ival], tl.int32, _semantic)


def atomic_add(ptr, val, elem, scope, semantic, *, target, _semantic):
    bits = elem.primitive_bitwidth
    iptr, it = _as_int_ptr(ptr, elem, _semantic)
    if elem.is_floating():
        # inline asm cannot mix pointer and float operands in Triton: pass the float's bits in an int register
        c = _CONSTRAINT[bits]
        asm = (f"{{\n\t.reg .f{bits} a, o;\n\tmov.b{bits} a, $2;\n\t"
               f"atom.{semantic}.{scope}.global.add.f{bits} o, [$1], a;\n\tmov.b{bits} $0, o;\n\t}}")
        old = _asm(asm, f"={c},l,{c}", [ptr, tl.cast(val, it, bitcast=True, _semantic=_semantic)], it, _semantic)
        return tl.cast(old, elem, bitcast=True, _semantic=_semantic)
    ival = tl.cast(val, it, bitcast=True, _semantic=_semantic)
    c = _CONSTRAINT[bits]
    old = _asm(f"atom.{semantic}.{scope}.global.add.u{bits} $0, [$1], $2;", f"={c},l,{c}", [iptr, ival], it,
               _semantic)
    return tl.cast(old, elem, bitcast=True, _semantic=_semantic)


def atomic_cas(ptr, cmp_val, target_val, elem, scope, semantic, *, target, _semantic):
    bits = elem.primitive_bitwidth
    iptr, it = _as_int_ptr(ptr, elem, _semantic)
    c = _CONSTRAINT[bits]
    args = [iptr] + [tl.cast(v, it, bitcast=True, _semantic=_semantic) for v in (cmp_val, target_val)]
    old = _asm(f"atom.{semantic}.{scope}.global.cas.b{bits} $0, [$1], $2, $3;", f"={c},l,{c},{c}", args, it,
               _semantic)
    return tl.cast(old, elem, bitcast=True, _semantic=_semantic)


def _v4_ptrs(ptr, nbits, _semantic):
    p32 = tl.cast(ptr, tl.pointer_type(tl.int32), _semantic=_semantic)
    return [p32.__add__(4 * i, _semantic=_semantic) if i else p32 for i in range(nbits // 128)]


def ld_vector(ptr, elem, n, scope, semantic, *, target, _semantic):
    nbits = elem.primitive_bitwidth * n
    if nbits % 128 == 0:
        words = []
        for p in _v4_ptrs(ptr, nbits, _semantic):
            words.extend(
                _asm(f"ld{_qual(semantic, scope)}.global.v4.b32 {{$0, $1, $2, $3}}, [$4];", "=r,=r,=r,=r,l", [p],
                     [tl.int32] * 4, _semantic))
        return vector(words).recast(elem, _semantic=_semantic)
    return vector([ld(ptr.__add__(i, _semantic=_semantic) if i else ptr, elem, scope, semantic, target=target,
                      _semantic=_semantic) for i in range(n)])


def st_vector(ptr, vec, elem, scope, semantic, *, target, _semantic):
    nbits = vec.type.vector_nbits
    if nbits % 128 == 0:
        words = vec.recast(tl.int32, _semantic=_semantic).values
        for i, p in enumerate(_v4_ptrs(ptr, nbits, _semantic)):
            _asm(f"st{_qual(semantic, scope)}.global.v4.b32 [$1], {{$2, $3, $4, $5}};\n\tmov.u32 $0, 0;",
                 "=r,l,r,r,r,r", [p] + list(words[4 * i:4 * i + 4]), tl.int32, _semantic)
        return
    for i, v in enumerate(vec.values):
        st(ptr.__add__(i, _semantic=_semantic) if i else ptr, v, elem, scope, semantic, target=target,
           _semantic=_semantic)


def pack(src, dst_type, *, target, _semantic):
    eb = src.dtype.primitive_bitwidth
    db = dst_type.primitive_bitwidth
    if eb in (16, 32) and db in (32, 64) and db > eb:
        ints = [tl.cast(v, _int_of(src.dtype), bitcast=True, _semantic=_semantic) for v in src.values]
        ops = ", ".join(f"${i + 1}" for i in range(len(ints)))
        out = _asm(f"mov.b{db} $0, {{{ops}}};", ",".join([f"={_CONSTRAINT[db]}"] + [_CONSTRAINT[eb]] * len(ints)),
                   ints, _int_of(dst_type), _semantic, is_pure=True)
        return tl.cast(out, dst_type, bitcast=True, _semantic=_semantic)
    if db == eb:
        return tl.cast(src.values[0], dst_type, bitcast=True, _semantic=_semantic)
    return _join_bits(src.values, dst_type, _semantic)


def unpack(src, dst_type, *, target, _semantic):
    sb = src.dtype.primitive_bitwidth
    db = dst_type.primitive_bitwidth
    if db in (16, 32) and sb in (32, 64) and sb > db:
        k = sb // db
        ops = ", ".join(f"${i}" for i in range(k))
        parts = _asm(f"mov.b{sb} {{{ops}}}, ${k};", ",".join([f"={_CONSTRAINT[db]}"] * k + [_CONSTRAINT[sb]]),
                     [tl.cast(src, _int_of(src.dtype), bitcast=True, _semantic=_semantic)], [_int_of(dst_type)] * k,
                     _semantic, is_pure=True)
        return vector([tl.cast(p, dst_type, bitcast=True, _semantic=_semantic) for p in parts])
    if db == sb:
        return vector([tl.cast(src, dst_type, bitcast=True, _semantic=_semantic)])
    return vector(_split_bits(src, dst_type, _semantic))


#: bytes of statically declared shared memory a block may have (CUDA's limit, every arch): SIMT tile scratch up to
#: this size is a static buffer; a larger one lives in the block's dynamic shared memory
#: (``runtime.shmem_link.move_simt_scratch_to_dynamic_shared``)
SIMT_STATIC_SCRATCH_LIMIT = 48 * 1024
#: compute capability -> the most shared memory one block may use, with the opt-in for dynamic shared memory above
#: 48 KiB that Triton's launcher makes (CUDA C++ Programming Guide, "Technical Specifications per Compute
#: Capability": 96 / 64 / 163 / 99 / 227 KB)
MAX_BLOCK_SHARED_MEMORY = {70: 98304, 72: 98304, 75: 65536, 80: 166912, 86: 101376, 87: 166912, 89: 101376,
                           90: 232448, 100: 232448, 103: 232448, 120: 101376, 121: 101376}


def max_block_shared_memory(capability) -> int:
    """The shared memory a block of compute capability ``capability`` (``90``) may use, in bytes; 48 KiB, which
    every CUDA GPU gives, for a capability the table does not know."""
    return MAX_BLOCK_SHARED_MEMORY.get(int(capability) if capability is not None else None,
                                       SIMT_STATIC_SCRATCH_LIMIT)


def enter_simt_region(values, *, target, _semantic):
    """The SIMT region of :mod:`triton_dist.language._gpu`; its tiles may use all the shared memory a block of
    ``target`` gets (:func:`max_block_shared_memory`)."""
    return _gpu.enter_simt_region(max_block_shared_memory(target.arch), values, target=target, _semantic=_semantic)


extract_element = select_element
