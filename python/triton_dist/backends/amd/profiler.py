"""AMD (CDNA) lowering of the intra-kernel profiler's clock reads (``triton_dist.tools.profiler``).

* ``timestamp``: ``s_memrealtime``, the 64-bit "real time" counter, a constant 100 MHz clock on CDNA
  (gfx90a / gfx942 / gfx950) that does not change with the shader clock; ``s_waitcnt`` before (so earlier memory
  operations have completed) and after (the SMEM read returns through lgkmcnt).
* ``sm_id``: a compute-unit id built from ``HW_REG_HW_ID`` (gfx9 layout: CU_ID bits 11:8, SH_ID bit 12, SE_ID bits
  15:13) and, on gfx94x / gfx95x, ``HW_REG_XCC_ID`` (bits 3:0): ``xcc << 8 | se << 5 | sh << 4 | cu``. It is unique
  per CU but not dense: the trace shows it as a track name, nothing indexes by it.
"""
from __future__ import annotations

import triton.language as tl

#: ``s_memrealtime`` counts at 100 MHz on CDNA.
TICKS_PER_SECOND = 100_000_000

_TIMER_ASM = "s_waitcnt vmcnt(0) lgkmcnt(0)\ns_memrealtime $0\ns_waitcnt lgkmcnt(0)"
# HW_ID fields: CU_ID 11:8, SH_ID 12, SE_ID 15:13 -> bits 15:8 hold se|sh|cu in that order already.
_HWID_ASM = "s_getreg_b32 $0, hwreg(HW_REG_HW_ID, 8, 8)"
_XCC_ASM = "s_getreg_b32 $0, hwreg(HW_REG_XCC_ID, 0, 4)"


def _has_xcc(target) -> bool:
    arch = str(getattr(target, "arch", "") or "")
    return arch.startswith(("gfx94", "gfx95"))


def timestamp(*, target, _semantic):
    """int64 scalar: the real-time counter now (100 MHz ticks)."""
    return tl.inline_asm_elementwise(_TIMER_ASM, "=s", [], tl.int64, False, 1, _semantic=_semantic)


def sm_id(*, target, _semantic):
    """int32 scalar: ``xcc << 8 | se << 5 | sh << 4 | cu`` of the CU running this program."""
    cu = tl.inline_asm_elementwise(_HWID_ASM, "=s", [], tl.int32, False, 1, _semantic=_semantic)
    if not _has_xcc(target):
        return cu
    xcc = tl.inline_asm_elementwise(_XCC_ASM, "=s", [], tl.int32, False, 1, _semantic=_semantic)
    return _semantic.or_(_semantic.shl(xcc, _semantic.to_tensor(8)), cu)


def ticks_per_second(*, target, _semantic):
    return TICKS_PER_SECOND
