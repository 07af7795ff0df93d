"""Simulator lowering of ``language_extra`` / ``simt_exec_region`` (Triton interpreter, ``TRITON_INTERPRET=1``).

A program is modelled as ONE thread: ``tid == 0``, ``num_threads == num_warps == 1``, ``__syncthreads`` is a no-op.
Values are the interpreter's tensors (numpy data; pointers are uint64 addresses). Loads/stores use the interpreter's
C++ raw-memory load/store; ``acquire`` loads, ``release`` stores and all atomics use its C++ atomics (real hardware
atomics, so they order and synchronise across rank processes that map the same shared memory).
"""
from __future__ import annotations

import numpy as np
import triton.language as tl

from ... import _compat
from ...language.simt import _join_bits, _split_bits, vector

_SEM = {"relaxed": "relaxed", "acquire": "acquire", "release": "release", "acq_rel": "acquire_release"}


def _isem():
    return _compat.interpreter_semantic()


def _np_dtype(dtype):
    return _compat.interpreter_np_dtype(dtype)


def _ptr_data(ptr):
    return np.asarray(ptr.handle.data, dtype=np.uint64).reshape(1)


def _val_data(val, np_dtype):
    return np.asarray(val.handle.data, dtype=np_dtype).reshape(1)


def _scalar(data, dtype):
    return _compat.interpreter_value(np.asarray(data).reshape(1), dtype)


def _int_view(elem):
    return tl.core.get_int_dtype(elem.primitive_bitwidth, False)


def tid(axis, *, target, _semantic):
    return _isem().to_tensor(0)


def ntid(axis, *, target, _semantic):
    return _isem().to_tensor(1)


def num_warps(*, target, _semantic):
    return 1


def num_threads(*, target, _semantic):
    return 1


def syncthreads(*, target, _semantic):
    return None


def _cas_loop(p, npi, new_of, sem):
    """Atomically replace ``*p`` (viewed as integer type ``npi``) by ``new_of(old)`` with a CAS loop; returns the
    old bits. Used for 16-bit elements, for which the interpreter has CAS but no atomic RMW."""
    cur = np.asarray(_compat.raw_load(p, npi)).reshape(1)
    while True:
        old = np.asarray(_compat.raw_atomic_cas(p, cur, new_of(cur), sem)).reshape(1)
        if old[0] == cur[0]:
            return old
        cur = old


def ld(ptr, elem, scope, semantic, *, target, _semantic):
    p = _ptr_data(ptr)
    if semantic == "acquire":
        npi = _np_dtype(_int_view(elem))
        if elem.primitive_bitwidth >= 32:  # atomic OR with 0: a real acquire load that never changes memory
            old = _compat.raw_atomic_rmw("or", p, np.zeros(1, npi), "acquire")
        else:
            old = _cas_loop(p, npi, lambda cur: cur, "acquire")
        return _scalar(np.asarray(old).view(_np_dtype(elem)), elem)
    return _scalar(_compat.raw_load(p, _np_dtype(elem)), elem)


def st(ptr, val, elem, scope, semantic, *, target, _semantic):
    p = _ptr_data(ptr)
    if semantic == "release":
        npi = _np_dtype(_int_view(elem))
        bits = _val_data(val, _np_dtype(elem)).view(npi)
        if elem.primitive_bitwidth >= 32:
            _compat.raw_atomic_rmw("xchg", p, bits, "release")
        else:
            _cas_loop(p, npi, lambda cur: bits, "release")
        return None
    _compat.raw_store(p, _val_data(val, _np_dtype(elem)))
    return None


def atomic_add(ptr, val, elem, scope, semantic, *, target, _semantic):
    op = "fadd" if elem.is_floating() else "add"
    old = _compat.raw_atomic_rmw(op, _ptr_data(ptr), _val_data(val, _np_dtype(elem)), _SEM[semantic])
    return _scalar(old, elem)


def atomic_cas(ptr, cmp_val, target_val, elem, scope, semantic, *, target, _semantic):
    it = _int_view(elem)
    npt, npi = _np_dtype(elem), _np_dtype(it)
    old = _compat.raw_atomic_cas(_ptr_data(ptr), _val_data(cmp_val, npt).view(npi),
                                         _val_data(target_val, npt).view(npi), _SEM[semantic])
    return _scalar(np.asarray(old).view(npt), elem)


def _offset(ptr, i):
    return ptr.__add__(i, _semantic=_isem()) if i else ptr


def ld_vector(ptr, elem, n, scope, semantic, *, target, _semantic):
    return vector([ld(_offset(ptr, i), elem, scope, semantic, target=target, _semantic=_semantic) for i in range(n)])


def st_vector(ptr, vec, elem, scope, semantic, *, target, _semantic):
    for i, v in enumerate(vec.values):
        st(_offset(ptr, i), v, elem, scope, semantic, target=target, _semantic=_semantic)


def pack(src, dst_type, *, target, _semantic):
    sem = _isem()
    if src.type.vector_nbits == src.dtype.primitive_bitwidth:
        return tl.cast(src.values[0], dst_type, bitcast=True, _semantic=sem)
    return _join_bits(src.values, dst_type, sem)


def unpack(src, dst_type, *, target, _semantic):
    sem = _isem()
    if src.dtype.primitive_bitwidth == dst_type.primitive_bitwidth:
        return vector([tl.cast(src, dst_type, bitcast=True, _semantic=sem)])
    return vector(_split_bits(src, dst_type, sem))


def enter_simt_region(values, *, target, _semantic):
    return values, None  # the interpreter runs the with statement as plain Python: the tuple unpacks itself


def extract_element(input, flat_index, shape, *, target, _semantic, _generator):
    """Read the element directly (a reduction needs the code generator, which the interpreter has not)."""
    i = int(np.asarray(flat_index.handle.data).reshape(-1)[0])
    data = np.asarray(input.handle.data).reshape(-1)
    if not 0 <= i < data.size:
        raise IndexError(f"extract: flat index {i} out of range for shape {shape}")
    return _compat.interpreter_value(data[i:i + 1].copy(), input.dtype)
