"""Barrier family: ``barrier_all_intra_node`` (every rank waits until every rank reached this point of the step).

One task per op. The builder allocates (collectively) a per-op symmetric int64 flag array ``[2 (parity), WORLD]``.
In step ``step`` the task stores ``step`` into slot ``[step % 2, RANK]`` of every peer's array
(``kernels.common.notify_peers``: system-scope release, so every write this rank's program made before is visible to
a rank that sees the flag), then waits (``kernels.common.wait_peers``: system scope, acquire) until the peers' slots
``[step % 2, src]`` of its own array hold ``step`` (its own slot is never used).

Why two parities: a rank that passed the barrier of step ``e`` may run on and signal the barrier of step ``e + 1``
while a slower rank still polls for ``e``; with one slot per rank that signal would overwrite the ``e`` it waits for
(the wait is an equality). It goes to the other parity instead, and the next write of parity ``e % 2`` (step ``e +
2``) comes after the writer passed the barrier of step ``e + 1``, which needs every rank's step-``e + 1`` signal,
raised only after that rank's step-``e`` wait ended. Flags hold the step epoch (never reset; a run can be replayed
in a CUDA graph); every rank must run the builder the same number of times.

Regions: the task reads and writes every tensor of ``wait_inputs``, so it runs after the tasks of this rank that
write them and before the later tasks that read or write them; the tasks that touch none of them are not ordered
by it.
"""
from __future__ import annotations

import triton.language as tl

import triton_dist
from triton_dist.kernels.common import notify_peers, wait_peers
from ..core.device import arg
from ..core.registry import register_task
from ..core.task import Op, Tile, region

__all__ = ["barrier_task"]


@triton_dist.jit
def barrier_task(args, tile, step, RANK: tl.constexpr, WORLD: tl.constexpr):
    """``args``: the symmetric int64 flag array ``[2, WORLD]``. See the module docstring."""
    flags = arg(args, 0, tl.int64) + (step % 2) * WORLD
    notify_peers(flags, RANK, WORLD, step)
    wait_peers(flags, RANK, WORLD, step)


@register_task("barrier_all_intra_node", "Barrier")
def build_barrier(builder, layer_id, wait_inputs) -> Op:
    import torch

    name = "make_barrier_all_intra_node"
    if builder.world_size < 2:
        raise ValueError(f"{name}: needs world_size > 1 (got {builder.world_size})")
    if not isinstance(wait_inputs, (list, tuple)):
        raise TypeError(f"{name}: wait_inputs must be a list of tensors, got {type(wait_inputs).__name__}")
    regions = []
    for i, t in enumerate(wait_inputs):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name}: wait_inputs[{i}] must be a torch.Tensor, got {type(t).__name__}")
        if t.device != builder.device:
            raise ValueError(f"{name}: wait_inputs[{i}] is on {t.device}, the builder's device is {builder.device}")
        regions += region(t)
    flags = builder.create_symm_tensor((2, builder.world_size), torch.int64)
    return Op("Barrier", "barrier_all_intra_node", layer_id, barrier_task, [flags],
              dict(RANK=builder.rank, WORLD=builder.world_size),
              [Tile(reads=list(regions), writes=list(regions), cost=8 * builder.world_size)])
