"""Compile-time fusions of adjacent ops (``ModelBuilder(enable_fusion=True)``, the default). Each removes a
single-task op from the critical path of a decode step (the one-row RMS norm and residual add: a handful of
microseconds each, during which every other worker waits) and is bit-identical to the unfused ops:

1. **norm prologue** -- ``rms_norm`` of one row immediately followed by a one-row Linear reading its output: the
   Linear's tiles compute the normalised row themselves (from the norm's input, rounded as the norm task rounds)
   and no longer wait for the norm task, which still runs (its output may have other readers);
2. **residual epilogue** -- a one-row Linear immediately followed by an ``add`` of its output and another tensor:
   the Linear's tiles also store the sum of their columns; the add op is removed;
3. **rope prologue** -- a decode step's ``qk_norm_rope_update_kvcache`` (one token per sequence) immediately
   followed by the flash-decode split reading its queries and caches: each split task computes its group's queries
   itself, the last split of each (sequence, kv head) also writes the new k / v (and split 0 the queries, for other
   readers); the rope op is removed, and with it one task and one dependency hop per layer on the attention chain.

The rewrites are done by the op families (``tasks.linear.fuse_norm_prologue`` / ``fuse_residual_epilogue``,
``tasks.flash_decode.fuse_rope_prologue``); this module only finds the adjacent pairs.
"""
from __future__ import annotations

from typing import List, Sequence

from .task import Op

__all__ = ["fuse"]


def fuse(ops: Sequence[Op]) -> List[Op]:
    """``ops`` with the fusions of the module docstring applied (a new list; fused Linear ops are new objects)."""
    from ..tasks import flash_decode, linear

    out: List[Op] = []
    for op in ops:
        prev = out[-1] if out else None
        if (prev is not None and op.op_type != "rms_norm" and op.family == "Linear" and prev.op_type == "rms_norm"
                and linear.can_fuse_norm(prev, op)):
            out.append(linear.fuse_norm_prologue(prev, op))
            continue
        if (prev is not None and op.op_type == "add" and prev.family == "Linear"
                and linear.can_fuse_residual(prev, op)):
            out[-1] = linear.fuse_residual_epilogue(prev, op)
            continue
        if prev is not None and flash_decode.can_fuse_rope(prev, op):
            out[-1] = flash_decode.fuse_rope_prologue(prev, op)
            continue
        out.append(op)
    return out
