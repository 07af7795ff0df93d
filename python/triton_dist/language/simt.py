"""SIMT (per-thread) regions and per-thread vectors.

``with dl.simt_exec_region() as (tid, num_threads):`` opens a region whose body is CUDA-style per-thread code:
``tid`` is this thread's index in the program (0 .. num_threads-1) and ``num_threads`` the program's thread count
(``num_warps * threads_per_warp``). Inside, scalar values may differ between threads and ``if``/``while`` branch
per thread. Memory access must go through :mod:`triton_dist.language.extra.language_extra` (``ld``, ``st``,
``atomic_add``, ...), which every thread executes: a plain scalar ``tl.store`` / ``tl.atomic_*`` is executed by ONE
thread of the program in Triton, so it must not be used for per-thread writes.

On the simulator (``TRITON_INTERPRET=1``) each program is modelled as ONE thread: ``tid == 0`` and
``num_threads == 1``; a region using them other than in stride loops (``range(tid, N, num_threads)``) and
``tid == 0`` / ``tid < K`` guards is refused there (``backends/sim/simt_check.py``).

A :class:`vector` is a fixed-size list of scalars held by one thread (an aggregate of ``tl`` scalars, unrolled at
trace time). It works on every target, including the interpreter.
"""
from __future__ import annotations

import builtins
from typing import List, Sequence

import triton
import triton.language as tl

from .. import _compat
from .._compat import semantic_or_interpreter as _sem
from ._backend import backend_for

__all__ = ["simt_exec_region", "vector", "vector_type", "make_vector", "zeros_vector", "extract", "insert"]

_builtin = _compat.builtin


class simt_exec_region:
    """``with simt_exec_region() as (tid, num_threads):`` -- a per-thread (SIMT) region.

    ``tid`` (int32) is this thread's index within the program, ``num_threads`` (constexpr int) the number of threads
    of the program. NVIDIA: ``%tid.x`` and ``num_warps * 32``; AMD CDNA: workitem id and ``num_warps * 64``;
    simulator: ``0`` and ``1`` (a program is one thread there). Stores inside must use ``language_extra.st`` /
    ``st_vector`` / atomics (executed by every thread); ``tl.store`` of a scalar is executed by one thread only.
    """

    __triton_builtin__ = True  # lets Triton's code generator reach it as a global

    def __init__(self, _semantic=None):
        self._semantic = _semantic
        self._undo = None
        self._target, self._backend = backend_for(_semantic)
        extra = self._backend.extra
        self._values = (extra.tid(0, target=self._target, _semantic=_semantic),
                        tl.constexpr(extra.num_threads(target=self._target, _semantic=_semantic)))

    def __enter__(self):
        bound, self._undo = self._backend.extra.enter_simt_region(self._values, target=self._target,
                                                                  _semantic=self._semantic)
        return bound

    def __exit__(self, exc_type, exc_value, traceback):
        if self._undo is not None:
            self._undo()
            self._undo = None
        return False


# --------------------------------------------------------------------------------------------------------------------
# vector
# --------------------------------------------------------------------------------------------------------------------


class vector_type(_compat.base_type):
    """Type of a :class:`vector`: ``vec_size`` scalars of ``elem_type``."""

    def __init__(self, elem_type, vec_size: int):
        self.elem_type = elem_type
        self.vec_size = vec_size
        self.element_nbits = elem_type.primitive_bitwidth
        self.vector_nbits = self.element_nbits * vec_size
        self.name = f"{elem_type}_v{vec_size}"
        self.scalar = elem_type

    def __str__(self):
        return self.name

    def __eq__(self, other):
        return type(self) is type(other) and self.elem_type == other.elem_type and self.vec_size == other.vec_size

    def __hash__(self):
        return hash(self.name)

    def is_block(self):
        return False

    def _flatten_ir_types(self, builder, out):
        for _ in range(self.vec_size):
            self.elem_type._flatten_ir_types(builder, out)

    def _unflatten_ir(self, handles, cursor):
        values = []
        for _ in range(self.vec_size):
            value, cursor = self.elem_type._unflatten_ir(handles, cursor)
            values.append(value)
        return vector(values), cursor

    def mangle(self):
        return "VEC" + self.elem_type.mangle() + f"x{self.vec_size}"


def _check_scalar(v, what):
    if not isinstance(v, tl.tensor) or isinstance(v, vector) or v.type.is_block():
        raise TypeError(f"{what}: vector elements must be scalar tl values, got {v!r}")
    return v


class vector(tl.tensor):
    """A per-thread vector: ``vec_size`` scalars of one dtype.

    ``v[i]`` (constexpr ``i``) reads an element, ``v[a:b]`` slices; ``v[i] = x`` works from Python helpers and the
    interpreter (in a compiled kernel use ``v = insert(v, x, i)``: Triton's code generator has no subscript
    assignment). ``v + w``, ``v - w``, ``v * w`` work elementwise with a vector or a scalar on the right.
    ``recast(dtype)`` reinterprets the bits (4 x fp16 -> 2 x int32, element 0 in the low bits); ``to(dtype, ...)``
    converts each element like ``tl.cast``.

    It subclasses ``tl.tensor`` only so that Triton's code generator dispatches ``+ - *`` to it; it has no single
    IR handle (it flattens to its elements' handles, so it can be carried through ``if``/``for`` and passed to
    ``@triton.jit`` functions).
    """

    def __init__(self, args: Sequence):
        values = [i for i in args]
        if not values:
            raise ValueError("vector: needs at least one element")
        for v in values:
            _check_scalar(v, "vector")
        dt = values[0].dtype
        for v in values:
            if v.dtype != dt:
                raise TypeError(f"vector: all elements must have one dtype, got {dt} and {v.dtype}")
        self.values = values
        self.type = vector_type(dt, len(values))
        self.dtype = dt
        self.shape = ()
        self.numel = tl.constexpr(len(values))

    def _set_name(self, builder, name):
        # Triton 3.8+ names every device-function argument; a vector has no single handle: name its elements
        _compat.ir_value_parts_set_name(self.values, builder, name)

    @property
    def vec_size(self):
        return self.type.vec_size

    def _flatten_ir(self, handles):
        for v in self.values:
            v._flatten_ir(handles)

    def __str__(self):
        return f"vector<{self.type}>"

    @_builtin
    def __getitem__(self, idx, _semantic=None):
        idx = _compat.unwrap_constexpr(idx)
        if isinstance(idx, (builtins.slice, tl.slice)):
            start, stop, step = (_compat.unwrap_constexpr(x) for x in (idx.start, idx.stop, idx.step))
            return vector(self.values[start:stop:step])
        if isinstance(idx, tl.tensor):
            raise TypeError("vector index must be a compile-time constant (constexpr), got a runtime value")
        return self.values[int(idx)]

    def __setitem__(self, idx, value):
        idx = int(_compat.unwrap_constexpr(idx))
        value = tl.cast(value, self.dtype, _semantic=_sem(None)) if not isinstance(value, tl.tensor) else value
        if value.dtype != self.dtype:
            raise TypeError(f"vector.__setitem__: value dtype {value.dtype} != vector dtype {self.dtype}")
        self.values[idx] = value

    def __iter__(self):
        return iter(self.values)

    def __len__(self):
        return len(self.values)

    def __hash__(self):
        return id(self)

    def __repr__(self):
        return f"vector({', '.join(repr(v) for v in self.values)})"

    def _binop(self, other, name, _semantic):
        sem = _sem(_semantic)
        if isinstance(other, vector):
            if len(other) != len(self):
                raise ValueError(f"vector {name}: sizes differ ({len(self)} vs {len(other)})")
            return vector([getattr(a, name)(b, _semantic=sem) for a, b in zip(self.values, other.values)])
        return vector([getattr(a, name)(other, _semantic=sem) for a in self.values])

    @_builtin
    def __add__(self, other, _semantic=None):
        return self._binop(other, "__add__", _semantic)

    @_builtin
    def __sub__(self, other, _semantic=None):
        return self._binop(other, "__sub__", _semantic)

    @_builtin
    def __mul__(self, other, _semantic=None):
        return self._binop(other, "__mul__", _semantic)

    @_builtin
    def recast(self, dtype, _semantic=None):
        """Reinterpret the vector's bits as elements of ``dtype`` (little-endian: element 0 is the low part)."""
        dtype = _compat.unwrap_constexpr(dtype)
        sem = _sem(_semantic)
        old_bits, new_bits = self.dtype.primitive_bitwidth, dtype.primitive_bitwidth
        if (old_bits * len(self)) % new_bits:
            raise ValueError(f"vector.recast: {len(self)} x {self.dtype} ({old_bits * len(self)} bits) is not a "
                             f"whole number of {dtype} ({new_bits} bits)")
        if old_bits == new_bits:
            return vector([tl.cast(v, dtype, bitcast=True, _semantic=sem) for v in self.values])
        out = []
        if old_bits > new_bits:
            for v in self.values:
                out.extend(_split_bits(v, dtype, sem))
        else:
            ratio = new_bits // old_bits
            for i in range(0, len(self), ratio):
                out.append(_join_bits(self.values[i:i + ratio], dtype, sem))
        return vector(out)

    @_builtin
    def to(self, dtype, fp_downcast_rounding=None, bitcast=False, _semantic=None):
        """Convert each element with ``tl.cast(v, dtype, fp_downcast_rounding, bitcast)``."""
        sem = _sem(_semantic)
        dtype = _compat.unwrap_constexpr(dtype)
        return vector([
            tl.cast(v, dtype, fp_downcast_rounding=fp_downcast_rounding, bitcast=bitcast, _semantic=sem)
            for v in self.values
        ])


def _uint(bits):
    return _compat.int_dtype(bits, False)


def _split_bits(v, dtype, sem) -> List:
    """Split one scalar into ``old/new`` pieces of ``dtype``, low bits first (pure integer ops, every target)."""
    old_bits, new_bits = v.dtype.primitive_bitwidth, dtype.primitive_bitwidth
    u = tl.cast(v, _uint(old_bits), bitcast=True, _semantic=sem)
    pieces = []
    for j in range(old_bits // new_bits):
        shifted = u.__rshift__(tl.cast(j * new_bits, _uint(old_bits), _semantic=sem), _semantic=sem) if j else u
        piece = tl.cast(shifted, _uint(new_bits), _semantic=sem)  # truncation keeps the low bits
        pieces.append(tl.cast(piece, dtype, bitcast=True, _semantic=sem))
    return pieces


def _join_bits(parts, dtype, sem):
    """Concatenate scalars (element 0 lowest) into one ``dtype`` scalar."""
    new_bits = dtype.primitive_bitwidth
    old_bits = parts[0].dtype.primitive_bitwidth
    acc = None
    for j, p in enumerate(parts):
        u = tl.cast(tl.cast(p, _uint(old_bits), bitcast=True, _semantic=sem), _uint(new_bits), _semantic=sem)
        if j:
            u = u.__lshift__(tl.cast(j * old_bits, _uint(new_bits), _semantic=sem), _semantic=sem)
            acc = acc.__or__(u, _semantic=sem)
        else:
            acc = u
    return tl.cast(acc, dtype, bitcast=True, _semantic=sem)


@_builtin
def make_vector(args, _semantic=None):
    """A :class:`vector` of the given scalars (all of one dtype)."""
    args = _compat.unwrap_constexpr(args)
    return vector(list(args))


@_builtin
def zeros_vector(vec_size, dtype, _semantic=None):
    """A :class:`vector` of ``vec_size`` (constexpr) zeros of ``dtype``."""
    n = _compat.unwrap_constexpr(vec_size)
    if not isinstance(n, int) or n < 1:
        raise ValueError(f"zeros_vector: vec_size must be a positive constexpr int, got {n!r}")
    dtype = _compat.unwrap_constexpr(dtype)
    sem = _sem(_semantic)
    zero = sem.to_tensor(0) if not dtype.is_floating() else sem.to_tensor(0.0)
    return vector([tl.cast(zero, dtype, _semantic=sem) for _ in range(n)])


def _single_index(indices, op):
    idx = _compat.unwrap_constexpr(indices)
    if isinstance(idx, (list, builtins.tuple, tl.tuple)):
        idx = [_compat.unwrap_constexpr(i) for i in idx]
        if len(idx) != 1:
            raise ValueError(f"{op}: a vector takes one index, got {len(idx)}")
        idx = idx[0]
    return idx


def _flat_index(input, indices, op, sem):
    """Row-major flat index (a scalar int32 tensor) of ``indices`` into block tensor ``input``."""
    idx = _compat.unwrap_constexpr(indices)
    if not isinstance(idx, (list, builtins.tuple, tl.tuple)):
        idx = [idx]
    shape = [int(_compat.unwrap_constexpr(s)) for s in input.shape]
    if len(idx) != len(shape):
        raise ValueError(f"{op}: tensor of rank {len(shape)} needs {len(shape)} indices, got {len(idx)}")
    flat = None
    stride = 1
    for i, s in reversed(list(zip(idx, shape))):
        term = sem.to_tensor(_compat.unwrap_constexpr(i)) if not isinstance(i, tl.tensor) else i
        term = tl.cast(term, tl.int32, _semantic=sem)
        if stride != 1:
            term = term.__mul__(stride, _semantic=sem)
        flat = term if flat is None else flat.__add__(term, _semantic=sem)
        stride *= s
    return flat, shape


def _iota(shape, sem):
    n = 1
    for s in shape:
        n *= s
    r = tl.arange(0, n, _semantic=sem)
    return tl.reshape(r, shape, _semantic=sem) if len(shape) > 1 else r


@triton.jit
def _sum_combine(a, b):
    return a + b


@_builtin
def extract(input, indices, _semantic=None, _generator=None):
    """The element of ``input`` at ``indices``.

    For a :class:`vector`, ``indices`` is one constexpr (or a one-element list) and this is ``input[i]``. For a
    block tensor, ``indices`` lists one (runtime or constexpr) index per dimension; the index must be the same in
    every thread of the program (it is computed with a program-wide masked reduction, so do not call it under a
    per-thread branch).
    """
    if isinstance(input, vector):
        return input[_single_index(indices, "extract")]
    sem = _sem(_semantic)
    if not isinstance(input, tl.tensor) or not input.type.is_block():
        raise TypeError(f"extract: input must be a vector or a block tensor, got {input!r}")
    flat, shape = _flat_index(input, indices, "extract", sem)
    target, backend = backend_for(_semantic)
    return backend.extra.extract_element(input, flat, shape, target=target, _semantic=_semantic,
                                         _generator=_generator)


def select_element(input, flat_index, shape, *, target, _semantic, _generator):
    """``extract`` for a compiled kernel: mask every element but the one at ``flat_index`` and sum the block (a
    program-wide reduction, so ``flat_index`` must be uniform)."""
    sem = _semantic
    hit = _iota(shape, sem).__eq__(flat_index, _semantic=sem)
    work = tl.int32 if input.dtype.is_int1() else input.dtype
    vals = tl.cast(input, work, _semantic=sem)
    zero = tl.cast(sem.to_tensor(0), work, _semantic=sem)
    # exactly one element survives the mask, so the sum is that element (x + 0 == x, also for floats)
    picked = tl.reduce(tl.where(hit, vals, zero, _semantic=sem), None, _sum_combine, _semantic=sem,
                       _generator=_generator)
    return tl.cast(picked, input.dtype, _semantic=sem)


@_builtin
def insert(input, scalar, indices, _semantic=None):
    """``input`` with the element at ``indices`` replaced by ``scalar`` (a new value; ``input`` is unchanged).

    Vector: ``indices`` is one constexpr. Block tensor: one index per dimension, uniform across the program.
    """
    sem = _sem(_semantic)
    if isinstance(input, vector):
        i = int(_single_index(indices, "insert"))
        if not 0 <= i < len(input):
            raise IndexError(f"insert: index {i} out of range for a vector of {len(input)}")
        if not isinstance(scalar, tl.tensor):
            scalar = sem.to_tensor(_compat.unwrap_constexpr(scalar))
        vals = list(input.values)
        vals[i] = tl.cast(scalar, input.dtype, _semantic=sem)
        return vector(vals)
    if not isinstance(input, tl.tensor) or not input.type.is_block():
        raise TypeError(f"insert: input must be a vector or a block tensor, got {input!r}")
    flat, shape = _flat_index(input, indices, "insert", sem)
    hit = _iota(shape, sem).__eq__(flat, _semantic=sem)
    if not isinstance(scalar, tl.tensor):
        scalar = sem.to_tensor(_compat.unwrap_constexpr(scalar))
    return tl.where(hit, tl.cast(scalar, input.dtype, _semantic=sem), input, _semantic=sem)
