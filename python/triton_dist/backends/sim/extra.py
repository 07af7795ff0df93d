"""Simulator lowering of ``language_extra`` / ``simt_exec_region`` (Triton interpreter, ``TRITON_INTERPRET=1``).

A program is modelled as ONE thread: ``tid == 0``, ``num_threads == num_warps == 1``, ``__syncthreads`` is a no-op.
That is a GPU's result only for some uses of the thread index (stride loops, ``tid == 0`` guards): a kernel using it
otherwise is refused when it first asks for it (:mod:`.simt_check`).
Values are the interpreter's tensors (numpy data; pointers are uint64 addresses). Loads/stores use the interpreter's
C++ raw-memory load/store; ``acquire`` loads, ``release`` stores and all atomics use its C++ atomics (real hardware
atomics, so they order and synchronise across rank processes that map the same shared memory).
"""
from __future__ import annotations

import threading
import time

import numpy as np
import triton.language as tl

from ... import _compat
from ...language._gpu import int_of as _int_view
from ...language.simt import _join_bits, _split_bits, vector
from . import context as sim_context
from .simt_check import check_caller

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


def tid(axis, *, target, _semantic):
    check_caller("tid()")
    return _isem().to_tensor(0)


def ntid(axis, *, target, _semantic):
    check_caller("ntid()")
    return _isem().to_tensor(1)


def num_warps(*, target, _semantic):
    check_caller("num_warps()")
    return 1


def num_threads(*, target, _semantic):
    check_caller("num_threads()")
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


#: a program's loads of one address seeing one value, at least this many times in a row and for longer than the
#: simulator's wait timeout, are a spin that will not end (``_bound_spin``)
SPIN_MIN_LOADS = 100

_spin = threading.local()


def _bound_spin(addr: int, bits, elem, scope, semantic) -> None:
    """Bound hand-written spin loops (``while ld(flag) != v: pass``) like the simulator's own waits: the calling
    program (thread) loading the same address and seeing the same value :data:`SPIN_MIN_LOADS` times in a row for
    longer than the context's ``wait_timeout_s`` raises its ``SimWaitTimeout`` (naming the kernel, the address and
    why a value the host sets after the launch is never seen); it also stops when another program of the launch
    failed. Any other load in between starts the count again."""
    key = (addr, int(bits))
    last = getattr(_spin, "last", None)
    if last is None or last[0] != key:
        _spin.last = [key, time.monotonic(), 1]
        return
    last[2] += 1
    if last[2] < SPIN_MIN_LOADS:
        return
    ctx = sim_context.current() if sim_context.is_active() else sim_context.LocalContext()
    op = f"ld(scope={scope}, semantic={semantic}) in a loop"

    def state():
        return f"value at {ctx.describe_addr(addr)}: last seen {_scalar_text(bits, elem)}, unchanged"

    ctx.check_abort(op, state)
    if time.monotonic() - last[1] > ctx.wait_timeout_s:
        _spin.last = None
        raise ctx.timeout_error(op, ctx.wait_timeout_s, state())


def _scalar_text(bits, elem):
    v = np.asarray(bits).reshape(-1)[:1].view(_np_dtype(elem))[0]
    return str(v.item())


def ld(ptr, elem, scope, semantic, *, target, _semantic):
    p = _ptr_data(ptr)
    if semantic == "acquire":
        npi = _np_dtype(_int_view(elem))
        if elem.primitive_bitwidth >= 32:  # atomic OR with 0: a real acquire load that never changes memory
            old = _compat.raw_atomic_rmw("or", p, np.zeros(1, npi), "acquire")
        else:
            old = _cas_loop(p, npi, lambda cur: cur, "acquire")
        old = np.asarray(old).view(_np_dtype(elem))
    else:
        old = np.asarray(_compat.raw_load(p, _np_dtype(elem)))
    _bound_spin(int(p[0]), old.reshape(-1)[:1].view(_np_dtype(_int_view(elem)))[0], elem, scope, semantic)
    return _scalar(old, elem)


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


_region = threading.local()


def in_simt_region() -> bool:
    """Whether the calling program (thread of the simulator) is inside a ``simt_exec_region`` body."""
    return getattr(_region, "depth", 0) > 0


def enter_simt_region(values, *, target, _semantic):
    """The interpreter runs the with statement as plain Python: the tuple unpacks itself. Inside the body, tiles
    take per-thread element reads and writes (``t[i, k]``, ``t[i, k] = v``: :func:`tile_getitem` /
    :func:`tile_setitem`); a program is one thread, so no scratch is needed."""
    _region.depth = getattr(_region, "depth", 0) + 1

    def undo():
        _region.depth -= 1

    return values, undo


def _scalar_indices(tensor, idx):
    """``[int, ...]`` when ``idx`` is one integer scalar per dimension of the block ``tensor``, else None."""
    if not isinstance(tensor, tl.tensor) or not tensor.type.is_block():
        return None
    parts = list(idx) if isinstance(idx, (tuple, list, tl.tuple)) else [idx]
    if len(parts) != len(tensor.shape):
        return None
    out = []
    for p in parts:
        p = _compat.unwrap_constexpr(p)
        if isinstance(p, bool):
            return None
        if isinstance(p, (int, np.integer)):
            out.append(int(p))
        elif isinstance(p, tl.tensor) and not p.type.is_block() and p.dtype.is_int():
            out.append(int(np.asarray(p.handle.data).reshape(-1)[0]))
        else:
            return None
    if not (tensor.dtype.is_int() or tensor.dtype.is_floating()):
        raise TypeError(f"simt_exec_region: a tile of {tensor.dtype} cannot be indexed per thread (integer and "
                        f"floating-point tiles can); index an integer offset tile and add it to the pointer")
    for d, (i, n) in enumerate(zip(out, tensor.shape)):
        if not 0 <= i < int(_compat.unwrap_constexpr(n)):
            raise IndexError(f"SIMT tile: index {i} out of range for dimension {d} of size {n}")
    return out


def tile_getitem(stock):
    """``tl.tensor.__getitem__`` under the interpreter: inside a SIMT region, one integer scalar per dimension reads
    that element (as a scalar); anything else is Triton's own indexing (``stock``)."""

    def __getitem__(self, idx, *args, **kwargs):
        if in_simt_region():
            where = _scalar_indices(self, idx)
            if where is not None:
                data = np.asarray(self.handle.data)
                return _compat.interpreter_value(data[tuple(where)].reshape(1).copy(), self.dtype)
        return stock(self, idx, *args, **kwargs)

    return __getitem__


def tile_setitem(stock):
    """``tl.tensor.__setitem__`` under the interpreter: inside a SIMT region, ``t[i, k] = v`` writes that element of
    ``t`` (the tensor the name holds: other names bound to the same value see it too, unlike a compiled kernel,
    where the name is rebound after the region). Outside a region, item assignment is refused as in Triton."""

    def __setitem__(self, idx, value):
        where = _scalar_indices(self, idx) if in_simt_region() else None
        if where is None:
            raise TypeError("tensor item assignment (t[i, ...] = v) is only supported inside simt_exec_region, with "
                            "one integer scalar index per dimension")
        data = self.handle.data
        if not data.flags.writeable:
            data = self.handle.data = data.copy()
        if not isinstance(value, tl.tensor):
            value = _isem().to_tensor(_compat.unwrap_constexpr(value))
        value = tl.cast(value, self.dtype, _semantic=_isem())
        data[tuple(where)] = np.asarray(value.handle.data).reshape(-1)[0]

    return __setitem__


def extract_element(input, flat_index, shape, *, target, _semantic, _generator):
    """Read the element directly (a reduction needs the code generator, which the interpreter has not)."""
    i = int(np.asarray(flat_index.handle.data).reshape(-1)[0])
    data = np.asarray(input.handle.data).reshape(-1)
    if not 0 <= i < data.size:
        raise IndexError(f"extract: flat index {i} out of range for shape {shape}")
    return _compat.interpreter_value(data[i:i + 1].copy(), input.dtype)
