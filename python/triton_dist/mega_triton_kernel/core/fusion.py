"""Compile-time fusions of adjacent ops (``ModelBuilder(enable_fusion=True)``, the default). Each removes a
few-task op from the critical path of a decode step (the RMS norm and residual add of the step's rows: a handful
of microseconds each, during which every other worker waits) and is bit-identical to the unfused ops:

1. **norm prologue** -- ``rms_norm`` immediately followed by a streaming Linear (the one-row GEMV, or the small-M
   tile of batched decode: up to 16 rows) reading its output: the Linear's tiles compute the normalised rows
   themselves (from the norm's input, rounded as the norm task rounds) and no longer wait for the norm task, which
   still runs (its output may have other readers);
2. **residual epilogue** -- a streaming Linear immediately followed by an ``add`` of its output and another tensor:
   the Linear's tiles also store the sum of their columns; the add op is removed;
3. **rope prologue** -- a decode step's ``qk_norm_rope_update_kvcache`` (one token per sequence) immediately
   followed by the flash-decode split reading its queries and caches: each split task computes its group's queries
   itself, the last split of each (sequence, kv head) also writes the new k / v (and split 0 the queries, for other
   readers); the rope op is removed, and with it one task and one dependency hop per layer on the attention chain.

The rewrites are done by the op families, which register them as rules (``core.registry.register_fusion``:
``tasks.linear`` 1 and 2, ``tasks.flash_decode`` 3); this module only walks the adjacent pairs and applies the first
rule that matches.
"""
from __future__ import annotations

from typing import List, Sequence

from .registry import fusion_rules
from .task import Op

__all__ = ["fuse"]


def fuse(ops: Sequence[Op]) -> List[Op]:
    """``ops`` with the registered fusion rules applied (a new list; fused ops are new objects): each op meets the
    last op kept so far, and the first rule that applies replaces the pair."""
    rules = fusion_rules()
    out: List[Op] = []
    for op in ops:
        replacement = None
        if out:
            replacement = next((r for r in (rule(out[-1], op) for rule in rules) if r is not None), None)
        if replacement is None:
            out.append(op)
        else:
            out[-1:] = list(replacement)
    return out
