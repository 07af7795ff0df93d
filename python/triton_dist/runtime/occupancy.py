"""How many programs (CUDA blocks) of a compiled kernel fit one SM at once, from the resources ptxas gave it.

Pure arithmetic, no GPU and no import beyond the standard library: the compile tool (``triton_dist.tools.compile
--resources``) and the ops' launch rules use it on any machine. The limits are NVIDIA's per compute capability
(CUDA C++ Programming Guide, "Technical Specifications per Compute Capability"; the allocation units from its
occupancy calculator): registers are allocated per warp in units of ``reg_unit``, shared memory per block with
``reserved_shared`` bytes that the system keeps per block.
"""
from __future__ import annotations

from typing import Dict, Optional, Tuple

#: compute capability -> per-SM limits that decide residency
SM_LIMITS: Dict[int, Dict[str, int]] = {
    90: {"regs": 65536, "reg_unit": 256, "shared": 233472, "reserved_shared": 1024, "threads": 2048, "blocks": 32},
}
#: sm_90 (H100 / H200): 64K registers, 228 KiB shared memory, 2,048 threads and 32 blocks an SM
SM90_LIMITS = SM_LIMITS[90]


def programs_per_sm(regs: int, shared: int, num_warps: int, capability: int = 90,
                    limits: Optional[Dict[str, int]] = None) -> Tuple[int, Dict[str, int]]:
    """``(programs, bound_by)``: how many programs of a kernel with ``regs`` registers a thread (ptxas' count),
    ``shared`` bytes of shared memory a program and ``num_warps`` warps are resident on one SM of compute
    capability ``capability`` (``limits`` overrides entries of :data:`SM_LIMITS`), and ``bound_by``: what registers,
    shared memory and threads each allow (the blocks-per-SM limit applies on top). E.g. 189 registers at 4 warps:
    6,144 a warp, 24,576 a program, 2 per SM; 126: 4,096 a warp, 4 per SM."""
    lim = dict(SM_LIMITS[capability], **(limits or {}))
    unit = lim["reg_unit"]
    per_warp = -(-max(regs, 1) * 32 // unit) * unit
    bound_by = {"regs": lim["regs"] // (per_warp * num_warps),
                "shared": lim["shared"] // (max(shared, 0) + lim["reserved_shared"]),
                "threads": lim["threads"] // (32 * num_warps)}
    return max(0, min(min(bound_by.values()), lim["blocks"])), bound_by


__all__ = ["SM_LIMITS", "SM90_LIMITS", "programs_per_sm"]
