"""Per-thread (SIMT) device primitives: ``from triton_dist.language.extra.language_extra import tid, ld, st, ...``.

Every function here is executed by EVERY thread that reaches it (unlike a scalar ``tl.store`` / ``tl.atomic_*``,
which Triton executes in one thread of the program), so they are the memory operations to use inside
``with dl.simt_exec_region() as (tid, n):``. They also work outside a region, where each thread of the program
issues the same operation on the same address.

Arguments shared by the memory operations:

* ``scope``: ``"cta"`` (also ``"workgroup"``), ``"gpu"`` (``"agent"``) or ``"sys"`` (``"system"``): the set of
  threads the ordering is guaranteed against.
* ``semantic``: ``ld``: ``"relaxed"`` (also ``"monotonic"``), ``"acquire"``, ``"volatile"``; ``st``: ``"relaxed"``,
  ``"release"``, ``"volatile"``; atomics: ``"relaxed"``, ``"acquire"``, ``"release"``, ``"acq_rel"``.

Lowering (chosen when the kernel is traced): NVIDIA PTX (``ld.acquire.gpu.global.b32``, ``st.release.sys...``,
``atom.acq_rel.gpu.global.add.u32``, ``atom...cas.b32``, ``%tid.x``, ``bar.sync 0``); AMD gfx90a/gfx942/gfx950
AMDGCN following LLVM's AMDGPU memory model (cache bits, ``buffer_wbl2`` before releases, ``buffer_inv`` after
acquires); simulator: numpy on the interpreter's tensors with the interpreter's real (cross-process) atomics. On the
simulator a program is ONE thread: ``tid(0) == 0``, ``num_threads() == 1``, ``__syncthreads()`` does nothing; a
kernel using the thread index other than in stride loops and ``tid == 0`` / ``tid < K`` guards is refused there
(``backends/sim/simt_check.py``).
"""
from __future__ import annotations

import triton.language as tl

from ... import _compat
from ..._compat import semantic_or_interpreter as _sem, unwrap_constexpr as _u
from ...target import target_of
from .._backend import backend_for
from ..simt import vector

__all__ = [
    "tid",
    "ntid",
    "atomic_cas",
    "atomic_add",
    "__syncthreads",
    "ld",
    "st",
    "ld_vector",
    "st_vector",
    "pack",
    "unpack",
    "threads_per_warp",
    "num_threads",
    "num_warps",
]

_builtin = _compat.builtin

_SCOPES = {"cta": "cta", "workgroup": "cta", "gpu": "gpu", "agent": "gpu", "sys": "sys", "system": "sys"}
_LD_SEMANTICS = {"relaxed": "relaxed", "monotonic": "relaxed", "acquire": "acquire", "volatile": "volatile"}
_ST_SEMANTICS = {"relaxed": "relaxed", "monotonic": "relaxed", "release": "release", "volatile": "volatile"}
_ATOMIC_SEMANTICS = {
    "relaxed": "relaxed", "monotonic": "relaxed", "acquire": "acquire", "release": "release", "acq_rel": "acq_rel"
}


def _choice(op, what, value, table):
    v = _u(value)
    if not isinstance(v, str) or v not in table:
        raise ValueError(f"{op}: unsupported {what} {v!r}; accepted: {', '.join(repr(k) for k in table)}")
    return table[v]


def _check_ptr(op, ptr, bits=(16, 32, 64)):
    if not isinstance(ptr, tl.tensor) or not ptr.dtype.is_ptr():
        raise TypeError(f"{op}: ptr must be a pointer, got {ptr!r}")
    if ptr.type.is_block():
        raise TypeError(f"{op}: ptr must be a scalar pointer (one address per thread), got a block of pointers "
                        f"{ptr.type}")
    elem = ptr.dtype.element_ty
    if elem.primitive_bitwidth not in bits:
        raise TypeError(f"{op}: pointee type {elem} has {elem.primitive_bitwidth} bits; supported widths: "
                        f"{', '.join(str(b) for b in bits)}")
    return elem


def _as_scalar(op, name, val, dtype, _semantic):
    """``val`` (tl scalar, constexpr or Python number) converted to ``dtype``."""
    sem = _sem(_semantic)
    if isinstance(val, vector):
        raise TypeError(f"{op}: {name} must be a scalar, got a vector (use st_vector)")
    if not isinstance(val, tl.tensor):
        val = sem.to_tensor(_u(val))
    if val.type.is_block():
        raise TypeError(f"{op}: {name} must be a scalar, got a block {val.type}")
    return tl.cast(val, dtype, _semantic=sem)


@_builtin
def tid(axis=0, _semantic=None):
    """This thread's index within the program along ``axis`` (0, 1, 2) as int32 (Triton launches 1-D programs, so
    axes 1 and 2 are 0). Simulator: 0."""
    axis = _u(axis)
    if axis not in (0, 1, 2):
        raise ValueError(f"tid: unsupported axis {axis!r}; accepted: 0, 1, 2")
    target, backend = backend_for(_semantic)
    return backend.extra.tid(axis, target=target, _semantic=_semantic)


@_builtin
def ntid(axis=0, _semantic=None):
    """Number of threads of the program along ``axis`` as int32 (``num_threads()`` for axis 0, 1 otherwise)."""
    axis = _u(axis)
    if axis not in (0, 1, 2):
        raise ValueError(f"ntid: unsupported axis {axis!r}; accepted: 0, 1, 2")
    target, backend = backend_for(_semantic)
    return backend.extra.ntid(axis, target=target, _semantic=_semantic)


@_builtin
def __syncthreads(_semantic=None):
    """Barrier for all threads of the program (CUDA ``__syncthreads``): every write a thread made before it is
    visible to the program's other threads after it. All threads must reach it. Simulator: no-op."""
    target, backend = backend_for(_semantic)
    return backend.extra.syncthreads(target=target, _semantic=_semantic)


@_builtin
def ld(ptr, scope="gpu", semantic="relaxed", _semantic=None):
    """Load ``*ptr`` in this thread (16/32/64-bit pointee) with the given ordering; returns the value (pointee
    dtype). ``acquire``: no later memory access of this thread is performed before the load."""
    elem = _check_ptr("ld", ptr)
    scope = _choice("ld", "scope", scope, _SCOPES)
    semantic = _choice("ld", "semantic", semantic, _LD_SEMANTICS)
    target, backend = backend_for(_semantic)
    return backend.extra.ld(ptr, elem, scope, semantic, target=target, _semantic=_semantic)


@_builtin
def st(ptr, val, scope="gpu", semantic="relaxed", _semantic=None):
    """Store ``val`` (converted to the pointee dtype) to ``*ptr`` in EVERY thread that executes it. ``release``:
    all earlier memory accesses of this thread are visible (at ``scope``) before the store. A vector ``val`` is
    forwarded to :func:`st_vector`. Returns nothing useful."""
    if isinstance(val, vector):
        return st_vector(ptr, val, scope, semantic, _semantic=_semantic)
    elem = _check_ptr("st", ptr)
    scope = _choice("st", "scope", scope, _SCOPES)
    semantic = _choice("st", "semantic", semantic, _ST_SEMANTICS)
    val = _as_scalar("st", "val", val, elem, _semantic)
    target, backend = backend_for(_semantic)
    return backend.extra.st(ptr, val, elem, scope, semantic, target=target, _semantic=_semantic)


@_builtin
def atomic_add(ptr, val, scope="gpu", semantic="relaxed", _semantic=None):
    """Atomically ``*ptr += val`` in every thread that executes it (32/64-bit ints, fp32, fp64); returns the old
    value."""
    elem = _check_ptr("atomic_add", ptr, bits=(32, 64))
    scope = _choice("atomic_add", "scope", scope, _SCOPES)
    semantic = _choice("atomic_add", "semantic", semantic, _ATOMIC_SEMANTICS)
    val = _as_scalar("atomic_add", "val", val, elem, _semantic)
    target, backend = backend_for(_semantic)
    return backend.extra.atomic_add(ptr, val, elem, scope, semantic, target=target, _semantic=_semantic)


@_builtin
def atomic_cas(ptr, cmp_val, target_val, scope="gpu", semantic="relaxed", _semantic=None):
    """Atomically ``old = *ptr; if old == cmp_val: *ptr = target_val`` in every thread that executes it (32/64-bit
    pointee; 64-bit not on AMD yet); returns ``old``. ``semantic`` applies to the successful exchange; a failed
    compare is relaxed."""
    elem = _check_ptr("atomic_cas", ptr, bits=(32, 64))
    scope = _choice("atomic_cas", "scope", scope, _SCOPES)
    semantic = _choice("atomic_cas", "semantic", semantic, _ATOMIC_SEMANTICS)
    cmp_val = _as_scalar("atomic_cas", "cmp_val", cmp_val, elem, _semantic)
    target_val = _as_scalar("atomic_cas", "target_val", target_val, elem, _semantic)
    target, backend = backend_for(_semantic)
    return backend.extra.atomic_cas(ptr, cmp_val, target_val, elem, scope, semantic, target=target, _semantic=_semantic)


@_builtin
def ld_vector(ptr, vec_size=1, scope="gpu", semantic="relaxed", _semantic=None):
    """Load ``vec_size`` (constexpr) consecutive elements from ``ptr`` into a :class:`vector` in this thread.

    When the total width is a multiple of 128 bits it uses 128-bit loads (``ld.<sem>.<scope>.global.v4.b32``;
    AMD ``global_load_dwordx4``), so ``ptr`` must then be 16-byte aligned. Each 32-bit part is ordered as ``ld``
    with the same ``scope``/``semantic``; the whole vector is not one atomic access."""
    n = _u(vec_size)
    if not isinstance(n, int) or n < 1:
        raise ValueError(f"ld_vector: vec_size must be a positive constexpr int, got {n!r}")
    elem = _check_ptr("ld_vector", ptr, bits=(8, 16, 32, 64))
    scope = _choice("ld_vector", "scope", scope, _SCOPES)
    semantic = _choice("ld_vector", "semantic", semantic, _LD_SEMANTICS)
    target, backend = backend_for(_semantic)
    if elem.primitive_bitwidth < 16 and (elem.primitive_bitwidth * n) % 128:
        raise ValueError(f"ld_vector: {n} x {elem} is not a multiple of 128 bits; 8-bit elements need 128-bit "
                         f"vectors")
    return backend.extra.ld_vector(ptr, elem, n, scope, semantic, target=target, _semantic=_semantic)


@_builtin
def st_vector(ptr, vec, scope="gpu", semantic="relaxed", _semantic=None):
    """Store the :class:`vector` ``vec`` to consecutive elements at ``ptr`` in every thread that executes it
    (128-bit stores when the width allows: ``st.<sem>.<scope>.global.v4.b32``; AMD ``global_store_dwordx4``).
    ``release`` orders all earlier accesses of this thread before the first part."""
    if not isinstance(vec, vector):
        raise TypeError(f"st_vector: vec must be a vector (make_vector / ld_vector), got {vec!r}")
    elem = _check_ptr("st_vector", ptr, bits=(8, 16, 32, 64))
    if vec.dtype != elem:
        raise TypeError(f"st_vector: vector dtype {vec.dtype} differs from the pointee dtype {elem}")
    scope = _choice("st_vector", "scope", scope, _SCOPES)
    semantic = _choice("st_vector", "semantic", semantic, _ST_SEMANTICS)
    if elem.primitive_bitwidth < 16 and vec.type.vector_nbits % 128:
        raise ValueError(f"st_vector: {len(vec)} x {elem} is not a multiple of 128 bits; 8-bit elements need "
                         f"128-bit vectors")
    target, backend = backend_for(_semantic)
    return backend.extra.st_vector(ptr, vec, elem, scope, semantic, target=target, _semantic=_semantic)


@_builtin
def pack(src, dst_type, _semantic=None):
    """Concatenate the bits of vector ``src`` (element 0 in the lowest bits) into one scalar of ``dst_type``; the
    widths must match (e.g. 2 x int32 -> uint64, 4 x fp16 -> int64)."""
    dst_type = _u(dst_type)
    if not isinstance(src, vector):
        raise TypeError(f"pack: src must be a vector, got {src!r}")
    if src.type.vector_nbits != dst_type.primitive_bitwidth:
        raise ValueError(f"pack: {len(src)} x {src.dtype} is {src.type.vector_nbits} bits but {dst_type} has "
                         f"{dst_type.primitive_bitwidth}")
    target, backend = backend_for(_semantic)
    return backend.extra.pack(src, dst_type, target=target, _semantic=_semantic)


@_builtin
def unpack(src, dst_type, _semantic=None):
    """Split scalar ``src`` into a vector of ``dst_type`` pieces (lowest bits first): the inverse of :func:`pack`."""
    dst_type = _u(dst_type)
    if not isinstance(src, tl.tensor) or src.type.is_block():
        raise TypeError(f"unpack: src must be a scalar, got {src!r}")
    sb, db = src.dtype.primitive_bitwidth, dst_type.primitive_bitwidth
    if sb % db:
        raise ValueError(f"unpack: {src.dtype} ({sb} bits) is not a whole number of {dst_type} ({db} bits)")
    target, backend = backend_for(_semantic)
    return backend.extra.unpack(src, dst_type, target=target, _semantic=_semantic)


@_builtin
def threads_per_warp(_semantic=None):
    """Threads per warp of the target being compiled (constexpr): 32 NVIDIA, 64 AMD CDNA, 1 on the simulator."""
    return tl.constexpr(target_of(_semantic).warp_size)


@_builtin
def num_warps(_semantic=None):
    """``num_warps`` of the kernel being compiled (constexpr); 1 on the simulator."""
    target, backend = backend_for(_semantic)
    return tl.constexpr(backend.extra.num_warps(target=target, _semantic=_semantic))


@_builtin
def num_threads(_semantic=None):
    """Threads of the program (constexpr): ``num_warps * threads_per_warp``; 1 on the simulator."""
    target, backend = backend_for(_semantic)
    return tl.constexpr(backend.extra.num_threads(target=target, _semantic=_semantic))
