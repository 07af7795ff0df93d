"""Prefetch family: ``prefetch`` (pull ``weight`` into L2 ahead of the task that reads it).

One task per block of ``ROWS`` rows (about ``TILE_BYTES``), built with ``Tile(waits=False)``: it waits for nothing
and nothing waits for it (its regions are empty: the weight is constant during the step, and the checksum below is
scratch nobody reads), so a worker that would otherwise idle runs it early and the later task reading those rows
hits in L2. The rows are loaded with ``cache_modifier=".cg"`` (cache in L2, not L1). So that the loads are not
dead code the compiler could drop, the task folds them into one checksum word (the XOR of the elements' bits) and
stores it to its slot of a small int32 scratch tensor ``[tiles]`` that the builder allocates (``op.tensors[1]``).
"""
from __future__ import annotations

import triton
import triton.language as tl

import triton_dist
from ..core.checks import check_tensor
from ..core.device import arg
from ..core.registry import register_task
from ..core.task import Op, Tile

__all__ = ["prefetch_task", "TILE_BYTES"]

#: Bytes of weight per prefetch task (at least one row).
TILE_BYTES = 256 * 1024
#: Elements per load.
BLOCK = 2048


@triton_dist.jit
def prefetch_task(args, tile, step, M: tl.constexpr, K: tl.constexpr, ROWS: tl.constexpr, BLOCK: tl.constexpr,
                  DT: tl.constexpr, IDT: tl.constexpr):
    """Rows ``tile * ROWS ...`` of ``args``: weight ``[M, K]`` (``DT``; ``IDT`` the integer type of its width),
    checksum scratch int32 ``[tiles]``."""
    w_ptr = arg(args, 0, DT)
    s_ptr = arg(args, 1, tl.int32)
    start = tile.to(tl.int64) * (ROWS * K)
    end = tl.minimum(start + ROWS * K, M * K)
    acc = tl.zeros([BLOCK], dtype=tl.int32)
    for o in range(start, end, BLOCK):
        offs = o + tl.arange(0, BLOCK)
        v = tl.load(w_ptr + offs, mask=offs < end, other=0, cache_modifier=".cg")
        acc = acc ^ v.to(IDT, bitcast=True).to(tl.int32)
    tl.store(s_ptr + tile, tl.xor_sum(acc, axis=0))




@register_task("prefetch", "Prefetch")
def build_prefetch(builder, layer_id, weight) -> Op:
    import torch

    name = "make_prefetch"
    ints = {1: torch.int8, 2: torch.int16, 4: torch.int32}
    dts = (torch.bfloat16, torch.float16, torch.float32, torch.int8, torch.uint8, torch.float8_e4m3fn,
           torch.float8_e5m2)
    check_tensor(name, "weight", weight, dim=2, dtype=dts)
    M, K = weight.shape
    if M == 0 or K == 0:
        raise ValueError(f"{name}: empty weight {list(weight.shape)}")
    rows = max(1, min(M, TILE_BYTES // (K * weight.element_size())))
    n_tiles = triton.cdiv(M, rows)
    scratch = torch.zeros(n_tiles, dtype=torch.int32, device=builder.device)
    tiles = [Tile(cost=(min(M, (t + 1) * rows) - t * rows) * K * weight.element_size(), waits=False)
             for t in range(n_tiles)]
    return Op("Prefetch", "prefetch", layer_id, prefetch_task, [weight, scratch],
              dict(M=M, K=K, ROWS=rows, BLOCK=min(BLOCK, triton.next_power_of_2(rows * K)), DT=weight.dtype,
                   IDT=ints[weight.element_size()]), tiles)
