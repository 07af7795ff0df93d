"""Activation family: ``silu_mul_up`` (``act_out[M, I] = silu(fc1_out[:, :I]) * fc1_out[:, I:]``, fp32 math;
``fc1_out [M, 2 I]``: the gate columns, then the up columns, as ``mlp_fc1`` writes them).

One task per ``ROWS x BLOCK_N`` tile of ``act_out`` (row-block major); it reads exactly its gate and up column
slices of those rows, so it waits only for the fc1 tiles that wrote them."""
from __future__ import annotations

import triton
import triton.language as tl

import triton_dist
from ..core.checks import check_tensor
from ..core.device import arg
from ..core.registry import register_task
from ..core.task import Op, Tile, region

__all__ = ["silu_mul_up_task", "silu_mul"]

#: Most columns per task.
MAX_BLOCK_N = 1024
#: Elements of ``act_out`` per task (rows x columns), at least one row.
TILE_ELEMS = 4096


@triton_dist.jit
def silu_mul(gate, up):
    """``silu(gate) * up`` in fp32 (``gate / (1 + exp(-gate)) * up``): the activation of this task and of the fused
    Linear (``mlp_fc1_silu_mul_up``), one expression so both round alike."""
    return gate / (1.0 + tl.exp(-gate)) * up


@triton_dist.jit
def silu_mul_up_task(args, tile, step, M: tl.constexpr, N: tl.constexpr, ROWS: tl.constexpr,
                     BLOCK_N: tl.constexpr, DT: tl.constexpr, ODT: tl.constexpr):
    """Tile ``tile`` of ``args``: fc1_out ``[M, 2 N]`` (``DT``), act_out ``[M, N]`` (``ODT``)."""
    f_ptr = arg(args, 0, DT)
    o_ptr = arg(args, 1, ODT)
    n_tiles: tl.constexpr = (N + BLOCK_N - 1) // BLOCK_N
    pm = tile // n_tiles
    cols = (tile % n_tiles) * BLOCK_N + tl.arange(0, BLOCK_N)
    cmask = cols < N
    r0 = pm * ROWS
    f_rows = f_ptr + r0.to(tl.int64) * (2 * N)
    o_rows = o_ptr + r0.to(tl.int64) * N
    for j in range(0, tl.minimum(ROWS, M - r0)):
        g = tl.load(f_rows + j * (2 * N) + cols, mask=cmask, other=0.0).to(tl.float32)
        u = tl.load(f_rows + j * (2 * N) + N + cols, mask=cmask, other=0.0).to(tl.float32)
        tl.store(o_rows + j * N + cols, silu_mul(g, u).to(ODT), mask=cmask)


@register_task("silu_mul_up", "Activation")
def build_silu_mul_up(builder, layer_id, fc1_out, act_out) -> Op:
    import torch

    name = "make_silu_mul_up"
    dts = (torch.bfloat16, torch.float16, torch.float32)
    check_tensor(name, "fc1_out", fc1_out, dim=2, dtype=dts)
    check_tensor(name, "act_out", act_out, dim=2, dtype=dts)
    M, two_i = fc1_out.shape
    if two_i % 2:
        raise ValueError(f"{name}: fc1_out has {two_i} columns, expected an even count (gate columns, then up)")
    N = two_i // 2  # the reference's I
    if list(act_out.shape) != [M, N]:
        raise ValueError(f"{name}: act_out must have shape [{M}, {N}] for fc1_out [{M}, {two_i}], got "
                         f"{list(act_out.shape)}")
    if M == 0 or N == 0:
        raise ValueError(f"{name}: empty tensors")
    bn = min(MAX_BLOCK_N, triton.next_power_of_2(N))
    rows = max(1, min(M, TILE_ELEMS // bn))
    es = fc1_out.element_size()
    tiles = []
    for pm in range(triton.cdiv(M, rows)):
        r = slice(pm * rows, min(M, (pm + 1) * rows))
        for pn in range(triton.cdiv(N, bn)):
            c0, c1 = pn * bn, min(N, (pn + 1) * bn)
            reads = region(fc1_out, r, slice(c0, c1)) + region(fc1_out, r, slice(N + c0, N + c1))
            tiles.append(Tile(reads=reads, writes=region(act_out, r, slice(c0, c1)),
                              cost=(r.stop - r.start) * (c1 - c0) * (2 * es + act_out.element_size())))
    return Op("Activation", "silu_mul_up", layer_id, silu_mul_up_task, [fc1_out, act_out],
              dict(M=M, N=N, ROWS=rows, BLOCK_N=bn, DT=fc1_out.dtype, ODT=act_out.dtype), tiles)
