"""NVIDIA lowering of the intra-kernel profiler's clock reads (``triton_dist.tools.profiler``).

* ``timestamp``: ``%globaltimer``, a 64-bit nanosecond timer of the GPU (one value for the whole chip; on the
  machines we measured it ticks in ns with a resolution of tens of ns). A ``fence.sc.cta`` first, so the stamp is
  not taken before the program's earlier memory operations have been performed (as seen by the CTA).
* ``sm_id``: ``%smid``, the SM the CTA runs on.
"""
from __future__ import annotations

import triton.language as tl

#: ``%globaltimer`` counts nanoseconds.
TICKS_PER_SECOND = 1_000_000_000

_TIMER_ASM = "fence.sc.cta;\nmov.u64 $0, %globaltimer;"
_SMID_ASM = "mov.u32 $0, %smid;"


def timestamp(*, target, _semantic):
    """int64 scalar: the global timer now (ns). Not pure: every call reads the clock again."""
    return tl.inline_asm_elementwise(_TIMER_ASM, "=l", [], tl.int64, False, 1, _semantic=_semantic)


def sm_id(*, target, _semantic):
    """int32 scalar: the id of the SM running this program."""
    return tl.inline_asm_elementwise(_SMID_ASM, "=r", [], tl.int32, False, 1, _semantic=_semantic)


def ticks_per_second(*, target, _semantic):
    return TICKS_PER_SECOND
