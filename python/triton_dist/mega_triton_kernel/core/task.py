"""The task IR of the mega kernel: :class:`Region` (bytes a tile touches), :class:`Tile` (one unit of work),
:class:`Op` (one model op split into tiles, with the device function that runs a tile) and :class:`Task` (a tile
placed in the step: its global index and the tasks it waits for).

Contract between a task family and the code generator (``tasks/*.py`` implement it):

* the family's builder returns an :class:`Op`: ``tensors`` (the device function receives their addresses, in this
  order, as ``args[0], args[1], ...`` of an int64 row), ``constexprs`` (static configuration: shapes, block sizes,
  dtypes, epsilons; each distinct (device function, constexprs) pair becomes one branch of the generated kernel)
  and ``tiles``;
* each :class:`Tile` names the bytes it reads and writes (:func:`region`); the graph derives the tile-level
  dependencies from them (read-after-write, write-after-read, write-after-write on overlapping bytes, in the order
  the ops were added), so a family never states a dependency by hand;
* the device function has the signature ``fn(args, tile, step, <constexprs by name>)``: ``args`` is an int64
  pointer to the op's row of the op table (load an address with
  :func:`triton_dist.mega_triton_kernel.core.device.arg`), ``tile`` the tile's index in ``Op.tiles`` (int32),
  ``step`` the step's epoch (int32 >= 1, one more per run; for flags that must not be reset between runs). It runs on every thread of one program (CTA-uniform control
  flow, any ``num_warps``), after every task it depends on has released, and before this task is released (the
  generated loop does both). It must not return early and must not wait for a later task of the same rank; it
  may wait for the task of the same index on another rank (every rank builds the same task list).
* a builder may return several ops (e.g. flash decode: split, then combine); they are added in order.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

import torch

__all__ = ["FAMILIES", "Region", "region", "logical_region", "same_tensor", "Tile", "Op", "Task"]

#: The nine task families (the reference's API page); every registered op type belongs to one.
FAMILIES = ("Activation", "AllReduce", "Barrier", "Elementwise", "FlashAttention", "FlashDecode", "Linear",
            "Normalization", "Prefetch")


@dataclass(frozen=True)
class Region:
    """Bytes ``[lo, hi)`` of the storage whose first byte is at address ``storage`` (views of one storage alias)."""
    storage: int
    lo: int
    hi: int

    def overlaps(self, other: "Region") -> bool:
        return self.storage == other.storage and self.lo < other.hi and other.lo < self.hi


def _runs(t: torch.Tensor) -> List[Tuple[int, int]]:
    """Contiguous byte runs ``(start, stop)`` (absolute addresses) covered by the view ``t``."""
    if t.numel() == 0:
        return []
    es = t.element_size()
    if t.is_contiguous():
        return [(t.data_ptr(), t.data_ptr() + t.numel() * es)]
    # peel leading dimensions until the rest is contiguous
    runs = []
    for i in range(t.shape[0]):
        runs.extend(_runs(t[i]))
    merged = []
    for a, b in sorted(runs):
        if merged and a <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], b))
        else:
            merged.append((a, b))
    return merged


def region(t: torch.Tensor, *index) -> List[Region]:
    """The regions of ``t[index]`` (``index`` as for tensor indexing: ints and slices; none = the whole tensor)."""
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"region: expected a torch.Tensor, got {type(t).__name__}")
    view = t[index] if index else t
    base = t.untyped_storage().data_ptr()
    return [Region(base, a - base, b - base) for a, b in _runs(view)]


def same_tensor(a: torch.Tensor, b: torch.Tensor) -> bool:
    """``a`` and ``b`` are the same elements: same address, element count and dtype (what a fusion checks before it
    lets one op read what another wrote)."""
    return a.data_ptr() == b.data_ptr() and a.numel() == b.numel() and a.dtype == b.dtype


def logical_region(t: torch.Tensor, space: str, lo: int, hi: int) -> List[Region]:
    """A region ``[lo, hi)`` in a named index space of ``t`` instead of its bytes, for tensors whose touched bytes are
    only known on the device (a paged KV cache: which pages a sequence uses is in ``block_tables``). Two logical
    regions overlap when they name the same tensor storage and space and their ranges intersect; they never overlap
    byte regions, so every task touching such a tensor must describe it in the same space (e.g. ``"kv_head"``)."""
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"logical_region: expected a torch.Tensor, got {type(t).__name__}")
    if not 0 <= lo < hi:
        raise ValueError(f"logical_region: empty or negative range [{lo}, {hi})")
    key = hash((t.untyped_storage().data_ptr(), space)) | (1 << 63)  # never a real address
    return [Region(key, lo, hi)]


@dataclass
class Tile:
    """One unit of work of an op. ``reads`` / ``writes``: the regions it touches (dependencies are derived from
    them). ``cost``: estimated bytes moved (the static scheduler balances it). ``waits``: False for tasks that never
    wait (prefetch: nothing depends on them and they read constant data)."""
    reads: List[Region] = field(default_factory=list)
    writes: List[Region] = field(default_factory=list)
    cost: float = 1.0
    waits: bool = True


@dataclass
class Op:
    """One model op: ``family`` (one of :data:`FAMILIES`), ``op_type`` (the builder's name for it), the device
    function ``kernel`` (a ``@triton_dist.jit`` function defined at module level), its ``tensors`` and
    ``constexprs``, and its ``tiles``. ``name`` is what traces and errors show."""
    family: str
    op_type: str
    layer_id: int
    kernel: Any
    tensors: List[torch.Tensor]
    constexprs: Dict[str, Any]
    tiles: List[Tile]
    name: str = ""
    #: The device function waits for the tile's dependencies itself (see ``core/codegen.py``).
    waits_inside: bool = False

    def __post_init__(self):
        if self.family not in FAMILIES:
            raise ValueError(f"Op {self.op_type!r}: unknown task family {self.family!r}; families: {', '.join(FAMILIES)}")
        if not self.tiles:
            raise ValueError(f"Op {self.op_type!r} (layer {self.layer_id}) has no tiles")
        if not self.name:
            self.name = f"L{self.layer_id}.{self.op_type}"


@dataclass
class Task:
    """A tile placed in the step: ``index`` (its scoreboard slot; tasks are numbered in program order, which is a
    topological order), its op's index ``op`` and the tile's index ``tile``, and ``deps``: the indices of the tasks
    it waits for (each lower than ``index``)."""
    index: int
    op: int
    tile: int
    deps: List[int]
    cost: float
    waits: bool = True
    worker: Optional[int] = None
