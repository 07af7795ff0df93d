"""Tiles indexed per thread inside ``simt_exec_region`` on GPU targets (target-independent; issue 16, point 4).

Inside ``with dl.simt_exec_region() as (tid, n):`` a block tensor bound to a local name before the region may be
indexed with one scalar per dimension, each thread with its own indices, as in the reference::

    buf = tl.zeros((T, T), tl.float32)
    with dl.simt_exec_region() as (tid, n):
        for j in range(tid, T, n):
            buf[j, i] = tile[i, j]      # per-thread read and write of single elements
    tl.store(out + offs, buf)           # after the region: every thread's writes

A tile lives in a program's registers, spread over its threads, so a thread cannot address another thread's
element. While a region is traced, every name the region's body subscripts with scalar indices is backed by the
program's SIMT tile scratch, a shared-memory buffer (CUDA shared memory / AMD LDS) that the compile step of
``triton_dist.runtime.shmem_link`` links in (``triton_dist_simt_*`` functions; static, or on CUDA above 48 KiB part of
the block's dynamic shared memory):

* entry (all threads): barrier, each tile stored to its slot of the scratch, barrier; the name is rebound to a
  :class:`SimtTile` for the region's body;
* ``t[i, k]``: a load of that element by the thread that executes it; ``t[i, k] = v`` (and ``+=`` ...): a store by
  the thread that executes it. Two threads writing one element race (one of the values wins), as on the reference;
  a write is visible to other threads' reads after ``__syncthreads()`` (or after the region);
* exit (all threads): barrier; a tile that the body writes is loaded back from the scratch and its name rebound to
  the new value; one that is only read gets its old value back.

Limits: only the region's own body is rewritten (a ``@jit`` function it calls sees ordinary tensors); the region
must be entered by every thread of the program (not under a per-thread branch); indices are
not range-checked at run time (constexpr ones are, at compile time); the tiles of one region share at most
``limit`` bytes (the shared memory a block gets on the target: 227 KiB on sm_90, 64 KiB of LDS on gfx942; on top of
what Triton allocates itself, checked when the kernel is linked); the name is a view only inside the body: using it as a whole
tensor there (``tl.sum(t)``) is an error. Element types of 1 to 64 bits (``int1`` is kept as a byte).
"""
from __future__ import annotations

import ast
import builtins
import copy

import triton.language as tl

from .. import _compat
from ._extern import Extern, call_extern

#: ``extern_libs`` key of the scratch library; a substring of every function name (Triton's HIP backend links an
#: entry only into modules calling a function whose name contains the key)
LIB_NAME = "triton_dist_simt"
#: ``triton_dist_simt_tiles_<nbytes>(i32) -> i32``: the scratch's shared-memory address (>= nbytes bytes)
TILES_SYMBOL = "triton_dist_simt_tiles_{nbytes}"
#: ``triton_dist_simt_ld_<bits>(i32 addr) -> i<bits>`` and ``triton_dist_simt_st_<bits>(i32 addr, i<bits>) -> i32``
LOAD_SYMBOL = "triton_dist_simt_ld_{bits}"
STORE_SYMBOL = "triton_dist_simt_st_{bits}"
_SLOT_ALIGN = 16
_INT = {8: tl.int8, 16: tl.int16, 32: tl.int32, 64: tl.int64}


def _storage_bits(dtype) -> int:
    bits = dtype.primitive_bitwidth
    return 8 if bits == 1 else bits


def _to_storage(value, dtype, sem):
    bits = dtype.primitive_bitwidth
    if bits == 1:
        return tl.cast(value, tl.int8, _semantic=sem)
    return tl.cast(value, _INT[bits], bitcast=True, _semantic=sem)


def _from_storage(value, dtype, sem):
    if dtype.primitive_bitwidth == 1:
        return tl.cast(value, dtype, _semantic=sem)
    return tl.cast(value, dtype, bitcast=True, _semantic=sem)


def _load(addr, dtype, sem):
    bits = _storage_bits(dtype)
    raw = call_extern(LIB_NAME, "", Extern(LOAD_SYMBOL.format(bits=bits), (tl.int32, ), _INT[bits]), [addr], sem)
    return _from_storage(raw, dtype, sem)


def _store(addr, value, dtype, sem):
    bits = _storage_bits(dtype)
    call_extern(LIB_NAME, "", Extern(STORE_SYMBOL.format(bits=bits), (tl.int32, _INT[bits]), tl.int32),
                [addr, _to_storage(value, dtype, sem)], sem)


class SimtTile:
    """A block tensor inside a SIMT region, held in the program's shared scratch (module docstring)."""

    def __init__(self, name, value, addr, sem):
        self.name = name
        self.value = value
        self.addr = addr  # int32 scalar: the tile's first element in the scratch
        # _shape / _dtype, not shape / dtype: Triton code handed the view (tl.sum(t), ...) reads those names, and
        # must reach __getattr__'s message instead of a list or dtype it misuses ('tuple index out of range')
        self._shape = [int(_compat.unwrap_constexpr(s)) for s in value.shape]
        self._dtype = value.dtype
        self.nbytes = _storage_bits(self._dtype) // 8
        self.written = False
        self._sem = sem

    def _element_addr(self, idx, sem):
        idx = _compat.unwrap_constexpr(idx)
        idx = list(idx) if isinstance(idx, (tl.tuple, builtins.tuple, list)) else [idx]
        if len(idx) != len(self._shape):
            raise IndexError(f"SIMT tile {self.name!r} of shape {self._shape}: {len(idx)} indices given, one scalar "
                             f"per dimension needed")
        flat = None
        stride = 1
        for d in reversed(range(len(self._shape))):
            i = _compat.unwrap_constexpr(idx[d])
            if isinstance(i, (builtins.slice, tl.slice)) or i is None:
                raise IndexError(f"SIMT tile {self.name!r}: inside simt_exec_region a tile takes one scalar index "
                                 f"per dimension (slices and None are for whole tensors, outside the region)")
            if isinstance(i, int):
                if not 0 <= i < self._shape[d]:
                    raise IndexError(f"SIMT tile {self.name!r}: index {i} out of range for dimension {d} of size "
                                     f"{self._shape[d]}")
                term = sem.to_tensor(i * stride)
            elif isinstance(i, tl.tensor) and not i.type.is_block() and i.dtype.is_int():
                term = tl.cast(i, tl.int32, _semantic=sem)
                if stride != 1:
                    term = term.__mul__(stride, _semantic=sem)
            else:
                raise IndexError(f"SIMT tile {self.name!r}: index {i!r} is not an integer scalar")
            flat = term if flat is None else flat.__add__(term, _semantic=sem)
            stride *= self._shape[d]
        offset = flat.__mul__(self.nbytes, _semantic=sem) if self.nbytes != 1 else flat
        return self.addr.__add__(tl.cast(offset, tl.int32, _semantic=sem), _semantic=sem)

    def __getitem__(self, idx):
        sem = self._sem
        return _load(self._element_addr(idx, sem), self._dtype, sem)

    @_compat.builtin
    def _simt_store(self, value, idx, _semantic=None):
        """``self[idx] = value`` (the region rewrites subscript assignments to this call)."""
        sem = _semantic
        value = value if isinstance(value, tl.tensor) else sem.to_tensor(_compat.unwrap_constexpr(value))
        if value.type.is_block():
            raise TypeError(f"SIMT tile {self.name!r}: an element assignment takes a scalar, got {value.type}")
        _store(self._element_addr(idx, sem), tl.cast(value, self._dtype, _semantic=sem), self._dtype, sem)
        self.written = True

    def __getattr__(self, attr):
        raise AttributeError(f"{self.name!r} is a per-thread view of a tile inside simt_exec_region: only t[i, ...] reads "
                        f"and t[i, ...] = v writes are supported there (no .{attr}); use the whole tensor outside the "
                        f"region")


def _block_addresses(tile: SimtTile, sem):
    n = 1
    for s in tile._shape:
        n *= s
    flat = tl.arange(0, n, _semantic=sem)
    if len(tile._shape) > 1:
        flat = tl.reshape(flat, tile._shape, _semantic=sem)
    offs = flat.__mul__(tile.nbytes, _semantic=sem) if tile.nbytes != 1 else flat
    return offs.__add__(tile.addr, _semantic=sem)


def _subscripted_names(body):
    """Names assigned through a subscript, or read with neither a slice nor None in the subscript, anywhere in
    ``body`` (a read like ``t[:, None]`` is whole-tensor indexing and leaves ``t`` alone)."""
    names = set()
    for stmt in body:
        for node in ast.walk(stmt):
            if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name):
                parts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
                whole = any(isinstance(p, ast.Slice) or (isinstance(p, ast.Constant) and p.value is None)
                            for p in parts)
                if isinstance(node.ctx, ast.Store) or not whole:
                    names.add(node.value.id)
            elif isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Subscript) and \
                    isinstance(node.target.value, ast.Name):
                names.add(node.target.value.id)
    return names


def _store_call(name, index, value, like):
    call = ast.Expr(ast.Call(func=ast.Attribute(value=ast.Name(id=name, ctx=ast.Load()), attr="_simt_store",
                                                ctx=ast.Load()), args=[value, index], keywords=[]))
    ast.copy_location(call, like)
    ast.fix_missing_locations(call)
    return call


def _rewrite_stores(body, tiles, edits):
    """Replace ``t[idx] = v`` / ``t[idx] op= v`` on a tile name by ``t._simt_store(v, idx)`` in ``body`` and nested
    statement lists; ``edits`` records ``(list, position, original)`` to undo."""
    for pos, stmt in enumerate(body):
        new = None
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Subscript):
            t = stmt.targets[0]
            if isinstance(t.value, ast.Name) and t.value.id in tiles:
                new = _store_call(t.value.id, t.slice, stmt.value, stmt)
        elif isinstance(stmt, ast.AugAssign) and isinstance(stmt.target, ast.Subscript):
            t = stmt.target
            if isinstance(t.value, ast.Name) and t.value.id in tiles:
                load = ast.Subscript(value=ast.Name(id=t.value.id, ctx=ast.Load()), slice=copy.deepcopy(t.slice),
                                     ctx=ast.Load())
                new = _store_call(t.value.id, t.slice, ast.BinOp(left=load, op=stmt.op, right=stmt.value), stmt)
        if new is not None:
            edits.append((body, pos, stmt))
            body[pos] = new
            continue
        for field in ("body", "orelse", "finalbody"):
            inner = getattr(stmt, field, None)
            if isinstance(inner, list) and inner and isinstance(inner[0], ast.stmt):
                _rewrite_stores(inner, tiles, edits)


def open_tiles(limit: int, _semantic):
    """At ``simt_exec_region.__enter__`` in a compiled kernel: back every tile the region's body indexes with the
    scratch (module docstring). Returns the undo for ``__exit__`` (None when the body indexes no tile, or when not
    compiling)."""
    found = _compat.with_statement_being_entered()
    if found is None:
        return None
    gen, node = found
    if gen is None or node is None:
        return None
    from .simt import vector

    sem = _semantic
    names = []
    for name in sorted(_subscripted_names(node.body)):
        v = _compat.scope_value(gen, name)
        if isinstance(v, tl.tensor) and not isinstance(v, vector) and v.type.is_block():
            names.append(name)
    if not names:
        return None
    offsets, total = {}, 0
    for name in names:
        v = _compat.scope_value(gen, name)
        if not (v.dtype.is_int() or v.dtype.is_floating()):
            raise TypeError(f"simt_exec_region: tile {name!r} of {v.dtype} cannot be indexed per thread (integer and "
                            f"floating-point tiles can); index an integer offset tile and add it to the pointer")
        n = 1
        for s in v.shape:
            n *= int(_compat.unwrap_constexpr(s))
        offsets[name] = total
        total += (n * _storage_bits(v.dtype) // 8 + _SLOT_ALIGN - 1) // _SLOT_ALIGN * _SLOT_ALIGN
    if total > limit:
        sizes = ", ".join(f"{n!r}" for n in names)
        raise ValueError(f"simt_exec_region: the tiles indexed per thread in this region ({sizes}) need {total} "
                         f"bytes of shared memory, more than the {limit} bytes a block gets on this target; index "
                         f"smaller tiles, or move the data through global memory (language_extra.ld / st)")
    base = call_extern(LIB_NAME, "", Extern(TILES_SYMBOL.format(nbytes=total), (tl.int32, ), tl.int32, True),
                       [sem.to_tensor(0)], sem)
    tiles = {}
    tl.debug_barrier(_semantic=sem)  # a previous region's threads may still read the scratch
    for name in names:
        v = _compat.scope_value(gen, name)
        tile = SimtTile(name, v, base.__add__(offsets[name], _semantic=sem) if offsets[name] else base, sem)
        _store(_block_addresses(tile, sem), v, tile._dtype, sem)
        tiles[name] = tile
    tl.debug_barrier(_semantic=sem)
    for name, tile in tiles.items():
        _compat.bind_scope_value(gen, name, tile)
    edits = []
    _rewrite_stores(node.body, tiles, edits)

    def close():
        for body, pos, original in reversed(edits):
            body[pos] = original
        written = [t for t in tiles.values() if t.written]
        if written:
            tl.debug_barrier(_semantic=sem)
        for name, tile in tiles.items():
            value = _load(_block_addresses(tile, sem), tile._dtype, sem) if tile.written else tile.value
            _compat.bind_scope_value(gen, name, value)

    return close
