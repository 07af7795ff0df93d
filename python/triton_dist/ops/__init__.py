"""Torch-facing distributed ops: collective contexts and functional calls (see :mod:`.collectives`), also
registered as ``torch.ops.triton_dist.{all_gather,reduce_scatter,all_reduce}`` for torch.compile."""
from .collectives import (AllGatherContext, AllReduceContext, P2PContext, ReduceScatterContext,  # noqa: F401
                          all_gather, all_reduce, create_allgather_ctx, create_allreduce_ctx, create_p2p_ctx,
                          create_reduce_scatter_ctx, get_context, recv, reduce_scatter, send)
from . import _library  # noqa: F401,E402  (registers torch.ops.triton_dist.*)

__all__ = ["AllGatherContext", "AllReduceContext", "P2PContext", "ReduceScatterContext", "all_gather", "all_reduce",
           "create_allgather_ctx", "create_allreduce_ctx", "create_p2p_ctx", "create_reduce_scatter_ctx",
           "get_context", "recv", "reduce_scatter", "send"]
