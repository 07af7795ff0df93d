"""Elementwise family: ``add`` (``output = lhs + rhs``, fp32 math, any shape, flattened), one task per chunk of
``CHUNK`` elements."""
from __future__ import annotations

import triton
import triton.language as tl

import triton_dist
from ..core.checks import check_tensor
from ..core.device import arg
from ..core.registry import register_task
from ..core.task import Op, Tile, region

__all__ = ["add_task", "CHUNK"]

#: Elements per add task.
CHUNK = 4096


@triton_dist.jit
def add_task(args, tile, step, N: tl.constexpr, CHUNK: tl.constexpr, BLOCK: tl.constexpr, DT: tl.constexpr):
    a_ptr = arg(args, 0, DT)
    b_ptr = arg(args, 1, DT)
    o_ptr = arg(args, 2, DT)
    for c0 in range(tile * CHUNK, tl.minimum(tile * CHUNK + CHUNK, N), BLOCK):
        offs = c0 + tl.arange(0, BLOCK)
        m = offs < N
        a = tl.load(a_ptr + offs, mask=m, other=0.0).to(tl.float32)
        b = tl.load(b_ptr + offs, mask=m, other=0.0).to(tl.float32)
        tl.store(o_ptr + offs, (a + b).to(DT), mask=m)


@register_task("add", "Elementwise")
def build_add(builder, layer_id, lhs, rhs, output) -> Op:
    import torch

    name = "make_add"
    dts = (torch.bfloat16, torch.float16, torch.float32)
    check_tensor(name, "lhs", lhs, dtype=dts)
    check_tensor(name, "rhs", rhs, dtype=lhs.dtype, shape=list(lhs.shape))
    check_tensor(name, "output", output, dtype=lhs.dtype, shape=list(lhs.shape))
    a, b, o = lhs.reshape(-1), rhs.reshape(-1), output.reshape(-1)
    n = a.numel()
    if n == 0:
        raise ValueError(f"{name}: empty tensors")
    tiles = []
    for t in range(triton.cdiv(n, CHUNK)):
        s = slice(t * CHUNK, min(n, (t + 1) * CHUNK))
        tiles.append(Tile(reads=region(a, s) + region(b, s), writes=region(o, s),
                          cost=3 * (s.stop - s.start) * a.element_size()))
    return Op("Elementwise", "add", layer_id, add_task, [a, b, o],
              dict(N=n, CHUNK=CHUNK, BLOCK=min(CHUNK, triton.next_power_of_2(n)), DT=lhs.dtype), tiles)
