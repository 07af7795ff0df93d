"""AMD (AMDGCN) lowering of ``triton_dist.language.extra.language_extra`` and ``simt_exec_region``.

Memory operations are ``tl.inline_asm_elementwise`` AMDGCN that every thread executes. Their instruction sequences
(cache-policy bits, ``buffer_wbl2`` before releases, ``buffer_inv`` / ``buffer_wbinvl1_vol`` after acquires, the
``s_waitcnt`` that LLVM's wait-count pass cannot add for inline asm) come from :mod:`.memory_model`, the one table of
LLVM's AMDGPU memory model shared with ``dl.wait`` / ``dl.notify``; targets: gfx90a, gfx942, gfx950.

Thread id: ``llvm.amdgcn.workitem.id.{x,y,z}``; barrier: Triton's (convergent) ``s_barrier`` with workgroup fences.
"""
from __future__ import annotations

import functools
import triton.language as tl

from ... import _compat
from ...language import _gpu
from ...language._gpu import as_int_ptr as _as_int_ptr
from ...language.simt import _join_bits, _split_bits, select_element, vector
from . import memory_model as mm

_LOAD_OP = {16: "global_load_ushort", 32: "global_load_dword", 64: "global_load_dwordx2"}
_STORE_OP = {16: "global_store_short", 32: "global_store_dword", 64: "global_store_dwordx2"}


def _asm(lines, constraints, args, dtype, _semantic, is_pure=False):
    text = "\n\t".join(line for line in lines if line)
    return tl.inline_asm_elementwise(text, constraints, args, dtype, is_pure=is_pure, pack=1, _semantic=_semantic)


def _intrinsic(name, _semantic, is_pure=True):
    return _compat.extern_elementwise("", "", [], {(): (name, tl.int32)}, is_pure=is_pure, _semantic=_semantic)


def tid(axis, *, target, _semantic):
    return _intrinsic(f"llvm.amdgcn.workitem.id.{'xyz'[axis]}", _semantic)


def num_warps(*, target, _semantic):
    return int(_compat.compile_options(_semantic).num_warps)


def num_threads(*, target, _semantic):
    return num_warps(target=target, _semantic=_semantic) * target.warp_size


def ntid(axis, *, target, _semantic):
    n = num_threads(target=target, _semantic=_semantic) if axis == 0 else 1
    return _semantic.to_tensor(n)


def syncthreads(*, target, _semantic):
    # Triton's barrier op: workgroup release fence + convergent ``llvm.amdgcn.s.barrier`` + acquire fence. An inline
    # asm ``s_barrier`` is not convergent to LLVM and could be duplicated into both sides of a divergent branch,
    # which a wave would then execute twice.
    tl.debug_barrier(_semantic=_semantic)


def ld(ptr, elem, scope, semantic, *, target, _semantic):
    fam = mm.family(target, "language_extra")
    iptr, it = _as_int_ptr(ptr, elem, _semantic)
    bits = elem.primitive_bitwidth
    out = _asm(mm.load(fam, scope, semantic, f"{_LOAD_OP[bits]} $0, $1, off"), "=&v,v", [iptr], it, _semantic)
    return out if it == elem else tl.cast(out, elem, bitcast=True, _semantic=_semantic)


def st(ptr, val, elem, scope, semantic, *, target, _semantic):
    fam = mm.family(target, "language_extra")
    iptr, it = _as_int_ptr(ptr, elem, _semantic)
    bits = elem.primitive_bitwidth
    ival = val if it == elem else tl.cast(val, it, bitcast=True, _semantic=_semantic)
    _asm(mm.store(fam, scope, semantic, f"{_STORE_OP[bits]} $1, $2, off") + ["v_mov_b32 $0, 0"], "=&v,v,v",
         [iptr, ival], tl.int32, _semantic)


def _atomic(opcode, ptr, data, out_ty, scope, semantic, target, _semantic):
    fam = mm.family(target, "language_extra")
    return _asm(mm.rmw(fam, scope, semantic, f"{opcode} $0, $1, $2, off"), "=&v,v,v", [ptr, data], out_ty,
                _semantic)


def atomic_add(ptr, val, elem, scope, semantic, *, target, _semantic):
    bits = elem.primitive_bitwidth
    iptr, it = _as_int_ptr(ptr, elem, _semantic)
    if elem.is_floating():  # VGPRs are untyped: pass the float's bits (Triton asm cannot mix ptr and float args)
        op = f"global_atomic_add_f{bits}"
        ptr_arg = ptr
    else:
        op = "global_atomic_add" if bits == 32 else "global_atomic_add_x2"
        ptr_arg = iptr
    old = _atomic(op, ptr_arg, tl.cast(val, it, bitcast=True, _semantic=_semantic), it, scope, semantic, target,
                  _semantic)
    return tl.cast(old, elem, bitcast=True, _semantic=_semantic)


def atomic_cas(ptr, cmp_val, target_val, elem, scope, semantic, *, target, _semantic):
    if elem.primitive_bitwidth != 32:
        raise NotImplementedError(f"atomic_cas: {elem.primitive_bitwidth}-bit compare-and-swap is not implemented "
                                  f"for AMD yet (32-bit only)")
    iptr, it = _as_int_ptr(ptr, elem, _semantic)
    # global_atomic_cmpswap takes one 64-bit data operand: new value in the low half, compare value in the high
    new = tl.cast(tl.cast(target_val, it, bitcast=True, _semantic=_semantic), tl.uint64, _semantic=_semantic)
    cmp = tl.cast(tl.cast(cmp_val, it, bitcast=True, _semantic=_semantic), tl.uint64, _semantic=_semantic)
    data = new.__or__(cmp.__lshift__(tl.cast(32, tl.uint64, _semantic=_semantic), _semantic=_semantic),
                      _semantic=_semantic)
    old = _atomic("global_atomic_cmpswap", iptr, data, it, scope, semantic, target, _semantic)
    return tl.cast(old, elem, bitcast=True, _semantic=_semantic)


# 128-bit accesses go through v[0:3] (clobbered): Triton's inline asm has no 128-bit operand type.
_QUAD_CLOBBER = "~{v0},~{v1},~{v2},~{v3}"


def _v4_ptrs(ptr, nbits, _semantic):
    p32 = tl.cast(ptr, tl.pointer_type(tl.int32), _semantic=_semantic)
    return [p32.__add__(4 * i, _semantic=_semantic) if i else p32 for i in range(nbits // 128)]


def ld_vector(ptr, elem, n, scope, semantic, *, target, _semantic):
    fam = mm.family(target, "language_extra")
    nbits = elem.primitive_bitwidth * n
    if nbits % 128 == 0:
        words = []
        for p in _v4_ptrs(ptr, nbits, _semantic):
            lines = mm.load(fam, scope, semantic, "global_load_dwordx4 v[0:3], $4, off")
            lines += [f"v_mov_b32 ${i}, v{i}" for i in range(4)]
            words.extend(_asm(lines, "=&v,=&v,=&v,=&v,v," + _QUAD_CLOBBER, [p], [tl.int32] * 4, _semantic))
        return vector(words).recast(elem, _semantic=_semantic)
    return vector([ld(ptr.__add__(i, _semantic=_semantic) if i else ptr, elem, scope, semantic, target=target,
                      _semantic=_semantic) for i in range(n)])


def st_vector(ptr, vec, elem, scope, semantic, *, target, _semantic):
    fam = mm.family(target, "language_extra")
    nbits = vec.type.vector_nbits
    if nbits % 128 == 0:
        words = vec.recast(tl.int32, _semantic=_semantic).values
        for i, p in enumerate(_v4_ptrs(ptr, nbits, _semantic)):
            lines = [f"v_mov_b32 v{j}, ${j + 2}" for j in range(4)]
            lines += mm.store(fam, scope, semantic, "global_store_dwordx4 $1, v[0:3], off")
            lines += ["v_mov_b32 $0, 0"]
            _asm(lines, "=&v,v,v,v,v,v," + _QUAD_CLOBBER, [p] + list(words[4 * i:4 * i + 4]), tl.int32, _semantic)
        return
    for i, v in enumerate(vec.values):
        st(ptr.__add__(i, _semantic=_semantic) if i else ptr, v, elem, scope, semantic, target=target,
           _semantic=_semantic)


def pack(src, dst_type, *, target, _semantic):
    if src.type.vector_nbits == src.dtype.primitive_bitwidth:
        return tl.cast(src.values[0], dst_type, bitcast=True, _semantic=_semantic)
    return _join_bits(src.values, dst_type, _semantic)  # LLVM turns the shifts into register moves


def unpack(src, dst_type, *, target, _semantic):
    if src.dtype.primitive_bitwidth == dst_type.primitive_bitwidth:
        return vector([tl.cast(src, dst_type, bitcast=True, _semantic=_semantic)])
    return vector(_split_bits(src, dst_type, _semantic))


#: bytes of SIMT tile scratch a region may use: LDS per workgroup on CDNA (gfx90a / gfx942 / gfx950)
SIMT_TILE_SCRATCH_LIMIT = 64 * 1024
enter_simt_region = functools.partial(_gpu.enter_simt_region, SIMT_TILE_SCRATCH_LIMIT)
extract_element = select_element
