"""torch.library registration of the collectives (``torch.ops.triton_dist.*``) so torch.compile can trace around
them: each op takes the context's integer ``handle`` and has a fake (meta) implementation that only computes the
output shape. The real implementation calls the functional API of :mod:`triton_dist.ops.collectives`."""
from __future__ import annotations

import torch

from . import collectives as _c


@torch.library.custom_op("triton_dist::all_gather", mutates_args=())
def all_gather_op(x: torch.Tensor, handle: int, method: str) -> torch.Tensor:
    ctx = _c.get_context(handle)
    out = torch.empty(_c._gather_out_shape(x, ctx.world_size), dtype=x.dtype, device=x.device)
    return _c.all_gather(x, ctx, out=out, method=method)


@all_gather_op.register_fake
def _all_gather_fake(x, handle, method):
    ctx = _c.get_context(handle)
    return x.new_empty(_c._gather_out_shape(x, ctx.world_size))


@torch.library.custom_op("triton_dist::reduce_scatter", mutates_args=())
def reduce_scatter_op(x: torch.Tensor, handle: int, method: str) -> torch.Tensor:
    ctx = _c.get_context(handle)
    out = torch.empty((x.shape[0] // ctx.world_size, ) + tuple(x.shape[1:]), dtype=x.dtype, device=x.device)
    return _c.reduce_scatter(x, ctx, out=out, method=method)


@reduce_scatter_op.register_fake
def _reduce_scatter_fake(x, handle, method):
    ctx = _c.get_context(handle)
    return x.new_empty((x.shape[0] // ctx.world_size, ) + tuple(x.shape[1:]))


@torch.library.custom_op("triton_dist::all_reduce", mutates_args=())
def all_reduce_op(x: torch.Tensor, handle: int, method: str) -> torch.Tensor:
    ctx = _c.get_context(handle)
    return _c.all_reduce(x, ctx, out=torch.empty_like(x), method=method)


@all_reduce_op.register_fake
def _all_reduce_fake(x, handle, method):
    return torch.empty_like(x)


__all__ = ["all_gather_op", "reduce_scatter_op", "all_reduce_op"]
