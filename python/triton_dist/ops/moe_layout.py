"""The MoE routing layout on one device: ``moe_route`` groups each token's top-k copies by expert (the layout
:func:`~triton_dist.ops.group_gemm` consumes), ``moe_combine`` sums the experts' outputs back per token with the
top-k weights. Together with ``group_gemm`` they are an MoE layer at expert parallelism 1, and the local stages of
the expert-parallel dispatch / combine (docs/moe.md). Device code: :mod:`triton_dist.kernels.moe_route`.

Nothing is read on the host by a launch (the optional routing check below is skipped inside a CUDA-graph capture),
and no token is ever dropped: the layout has a row for every (token, slot) pair.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import triton

from ..kernels import moe_route as _k
from ..kernels.moe_route import (combine_kernel, route_block_scan_kernel, route_count_kernel,
                                 route_expert_scan_kernel, route_scatter_kernel)
from .context import capturing as _capturing

#: columns per fp8 scale (the kernels' constexpr, as a host int)
QUANT_GROUP = int(_k.QUANT_GROUP.value)
#: pairs per routing block (the stable rank of a pair is counted within its block: a BLOCK x BLOCK comparison)
ROUTE_BLOCK = 64
#: experts per step of the count and scan loops
EXPERTS_CHUNK = 64
#: blocks per step of an expert's scan loop
BLOCKS_CHUNK = 256
#: columns per program of the token copy and of combine
BLOCK_H = 256


@dataclass(frozen=True)
class MoERouting:
    """What :func:`moe_combine` needs of a :func:`moe_route` call: ``dest_rows [T, k]`` int32 (the layout row of
    each token's slot ``j``), the call's ``topk_idx`` and ``topk_weights``, and ``num_experts``. ``rows``: the
    layout's row count (``T * k``)."""

    dest_rows: object
    topk_idx: object
    topk_weights: object
    num_experts: int

    @property
    def num_tokens(self) -> int:
        return self.dest_rows.shape[0]

    @property
    def topk(self) -> int:
        return self.dest_rows.shape[1]

    @property
    def rows(self) -> int:
        return self.dest_rows.numel()


def check_routing(op: str, x, topk_idx, topk_weights, num_experts: int) -> None:
    """Host checks of :func:`moe_route`'s arguments' shapes, dtypes and devices before any launch (ValueError
    naming ``op``, the argument and what is accepted); the ids' *values* are :func:`check_expert_ids`'.
    ``topk_weights`` None: the routing alone (the torch.library op, which never sees the weights)."""
    import torch

    for name, t in (("x", x), ("topk_idx", topk_idx)) + ((("topk_weights", topk_weights), ) if topk_weights is not None
                                                          else ()):
        if not isinstance(t, torch.Tensor):
            raise ValueError(f"{op}: {name} must be a torch.Tensor, got {type(t).__name__}")
    if isinstance(num_experts, bool) or not isinstance(num_experts, int) or num_experts < 1:
        raise ValueError(f"{op}: num_experts={num_experts!r} must be a positive int")
    if x.dim() != 2:
        raise ValueError(f"{op}: x must be 2-D [tokens, hidden], got shape {tuple(x.shape)}")
    if topk_idx.dim() != 2 or topk_idx.shape[0] != x.shape[0]:
        raise ValueError(f"{op}: topk_idx must be [tokens={x.shape[0]}, k], got shape {tuple(topk_idx.shape)}")
    if topk_idx.dtype not in (torch.int32, torch.int64):
        raise ValueError(f"{op}: topk_idx.dtype={topk_idx.dtype}; accepted: int32, int64")
    if topk_idx.shape[1] < 1:
        raise ValueError(f"{op}: topk_idx has no slots (shape {tuple(topk_idx.shape)})")
    if topk_idx.device != x.device:
        raise ValueError(f"{op}: topk_idx is on {topk_idx.device}, x on {x.device}")
    if (x.stride(1) != 1 and x.shape[1] > 1 and x.numel()) or not topk_idx.is_contiguous():
        raise ValueError(f"{op}: x needs a unit column stride and topk_idx must be contiguous (call .contiguous())")
    if topk_weights is None:
        return
    if tuple(topk_weights.shape) != tuple(topk_idx.shape):
        raise ValueError(f"{op}: topk_weights has shape {tuple(topk_weights.shape)}, topk_idx "
                         f"{tuple(topk_idx.shape)}: one weight per routed slot")
    if not topk_weights.dtype.is_floating_point or topk_weights.dtype.itemsize == 1:
        raise ValueError(f"{op}: topk_weights.dtype={topk_weights.dtype}; accepted: float32, bfloat16, float16")
    if topk_weights.device != x.device:
        raise ValueError(f"{op}: topk_weights is on {topk_weights.device}, x on {x.device}")
    if topk_weights.stride(1) != 1 and topk_weights.shape[1] > 1 and topk_weights.numel():  # torch gives [0, 1] (1, 0)
        raise ValueError(f"{op}: topk_weights needs a unit column stride (call .contiguous())")


def check_expert_ids(op: str, topk_idx, num_experts: int) -> None:
    """Every id of ``topk_idx`` in ``[0, num_experts)`` (reads the tensor: one device synchronisation for device
    ids); ValueError naming the first bad token and slot otherwise."""
    import torch

    bad = (topk_idx < 0) | (topk_idx >= num_experts)
    if bool(bad.any()):
        t, j = (int(v) for v in torch.nonzero(bad)[0].tolist())
        raise ValueError(f"{op}: topk_idx[{t}, {j}]={int(topk_idx[t, j])} is not an expert id in [0, {num_experts})")


#: the ``quant`` values of :func:`moe_route`
QUANT_MODES = (None, "fp8")


def moe_route(x, topk_idx, topk_weights, num_experts: int, *, quant: Optional[str] = None, out=None,
              check_ids: bool = True):
    """Group each token's top-k copies by expert. Returns ``(tokens, expert_offsets, scales, routing)``:

    * ``tokens [T * k, H]`` (``out=`` receives it): row ``routing.dest_rows[t, j]`` holds ``x[t]`` for slot ``j`` of
      token ``t``; the rows of expert ``e`` are ``[expert_offsets[e - 1], expert_offsets[e])``, in token order, then
      slot order (a stable sort: the same layout every run). ``x``'s dtype, or fp8 e4m3 with ``quant="fp8"``;
    * ``expert_offsets [num_experts]`` int32: the cumulative end row of each expert (``torch._grouped_mm``'s
      ``offs``);
    * ``scales``: None, or with ``quant="fp8"`` float32 ``[T * k, H / 128]``: row ``r``'s columns ``[128 g, 128 (g +
      1))`` are ``tokens[r] * scales[r, g]`` (``scale = max |x| / 448`` over the group), the ``scale_a`` that
      ``group_gemm`` takes;
    * ``routing``: a :class:`MoERouting` for :func:`moe_combine`.

    ``x [T, H]`` (bf16 / fp16 / fp32 to quantize, any dtype to copy); ``topk_idx [T, k]`` int32 / int64 expert ids;
    ``topk_weights [T, k]`` floating (kept for combine). ``check_ids`` (default True): refuse ids outside ``[0,
    num_experts)`` before the launch (one device synchronisation; skipped inside a CUDA-graph capture and under
    torch.compile). Where it is skipped, a slot with such an id gets a row after every expert's (``[expert_offsets[-1],
    T * k)``), which ``group_gemm`` does not compute and ``moe_combine`` leaves out of the token's sum; nothing is read
    or written out of bounds. Four launches (count, per-expert scan, scan of the totals, scatter; the scatter
    quantizes), none reading anything on the host."""
    import torch

    if quant not in QUANT_MODES:
        raise ValueError(f"moe_route: quant={quant!r}; accepted: None, 'fp8' (e4m3, one scale per {QUANT_GROUP} "
                         f"columns)")
    check_routing("moe_route", x, topk_idx, topk_weights, num_experts)  # under torch.compile too: fake tensors do
    if torch.compiler.is_compiling():
        tokens, offsets, scales, dest = torch.ops.triton_dist.moe_route(x, topk_idx, num_experts, quant or "none")
        if out is not None:
            out.copy_(tokens)
            tokens = out
        return tokens, offsets, scales if quant else None, MoERouting(dest, topk_idx, topk_weights, num_experts)
    tokens, offsets, scales, dest = route_tokens(x, topk_idx, num_experts, quant, out, check_ids)
    return tokens, offsets, scales, MoERouting(dest, topk_idx, topk_weights, num_experts)


def route_tokens(x, topk_idx, num_experts: int, quant: Optional[str], out, check_ids: bool):
    """The launches of :func:`moe_route` on arguments :func:`check_routing` accepted: ``(tokens, expert_offsets,
    scales or None, dest_rows)``. Also what the torch.library op runs (it has no weights to carry)."""
    import torch

    T, H = x.shape
    k = topk_idx.shape[1]
    P = T * k
    tok_dtype = torch.float8_e4m3fn if quant == "fp8" else x.dtype
    if quant == "fp8":
        if x.dtype not in (torch.bfloat16, torch.float16, torch.float32):
            raise ValueError(f"moe_route: quant='fp8' quantizes bf16 / fp16 / fp32 tokens, x.dtype={x.dtype}")
        if H % QUANT_GROUP:
            raise ValueError(f"moe_route: quant='fp8' needs H ({H}) to be a multiple of {QUANT_GROUP} (one scale per "
                             f"{QUANT_GROUP} columns)")
    if out is None:
        out = torch.empty((P, H), dtype=tok_dtype, device=x.device)
    elif not isinstance(out, torch.Tensor) or tuple(out.shape) != (P, H) or out.dtype != tok_dtype or \
            out.device != x.device or out.stride(1) != 1:
        raise ValueError(f"moe_route: out must be a {tok_dtype} [{P}, {H}] tensor on {x.device} with unit column "
                         f"stride, got {getattr(out, 'dtype', type(out).__name__)} {tuple(getattr(out, 'shape', ()))}")
    if check_ids and not _capturing():
        check_expert_ids("moe_route", topk_idx, num_experts)
    offsets = torch.empty(num_experts, dtype=torch.int32, device=x.device)
    dest = torch.empty((T, k), dtype=torch.int32, device=x.device)
    scales = torch.empty((P, H // QUANT_GROUP), dtype=torch.float32, device=x.device) if quant else None
    if P == 0:
        offsets.zero_()
        return out, offsets, scales, dest
    blocks = triton.cdiv(P, ROUTE_BLOCK)
    counts = torch.empty((num_experts + 1, blocks), dtype=torch.int32, device=x.device)
    base = torch.empty_like(counts)
    totals = torch.empty(num_experts + 1, dtype=torch.int32, device=x.device)
    starts = torch.empty_like(totals)
    route_count_kernel[(blocks, )](topk_idx, counts, P, num_experts, blocks, BLOCK=ROUTE_BLOCK,
                                   EXPERTS_CHUNK=EXPERTS_CHUNK)
    route_block_scan_kernel[(num_experts + 1, )](counts, base, totals, blocks, BLOCKS_CHUNK=BLOCKS_CHUNK)
    route_expert_scan_kernel[(1, )](totals, starts, offsets, num_experts, EXPERTS_CHUNK=EXPERTS_CHUNK)
    grid = (blocks, max(1, triton.cdiv(H, BLOCK_H)))  # column chunks; one (that copies nothing) when H is 0
    sc = scales if quant else out
    route_scatter_kernel[grid](x, topk_idx, base, starts, out, dest, sc, P, k, num_experts, blocks, H, x.stride(0),
                               out.stride(0), sc.stride(0), BLOCK=ROUTE_BLOCK, BLOCK_H=BLOCK_H,
                               QUANT_FP8=quant == "fp8")
    return out, offsets, scales, dest


def check_combine_routing(op: str, routing: MoERouting) -> None:
    """The parts of a :class:`MoERouting` that combine reads: ``dest_rows`` int32 ``[T, k]`` contiguous,
    ``topk_idx`` int32 / int64 of that shape contiguous, ``topk_weights`` floating of that shape with a unit column
    stride, all on one device (a routing built by hand, or rebuilt by the torch.library op, gets the checks
    moe_route's arguments got). ValueError naming the field otherwise."""
    import torch

    d, i, w = routing.dest_rows, routing.topk_idx, routing.topk_weights
    for name, t in (("dest_rows", d), ("topk_idx", i), ("topk_weights", w)):
        if not isinstance(t, torch.Tensor):
            raise ValueError(f"{op}: routing.{name} must be a torch.Tensor, got {type(t).__name__}")
    if d.dim() != 2 or d.dtype != torch.int32 or not d.is_contiguous():
        raise ValueError(f"{op}: routing.dest_rows must be a contiguous int32 [T, k] tensor, got {d.dtype} "
                         f"{tuple(d.shape)}")
    if tuple(i.shape) != tuple(d.shape) or i.dtype not in (torch.int32, torch.int64) or not i.is_contiguous():
        raise ValueError(f"{op}: routing.topk_idx must be a contiguous int32 / int64 {tuple(d.shape)} tensor, got "
                         f"{i.dtype} {tuple(i.shape)}")
    if tuple(w.shape) != tuple(d.shape) or not w.dtype.is_floating_point or w.dtype.itemsize == 1 or \
            (w.numel() and w.stride(1) != 1):
        raise ValueError(f"{op}: routing.topk_weights must be a float32 / bf16 / fp16 {tuple(d.shape)} tensor with "
                         f"unit column stride, got {w.dtype} {tuple(w.shape)}")
    if i.device != d.device or w.device != d.device:
        raise ValueError(f"{op}: the routing's tensors are on {d.device}, {i.device}, {w.device}: one device")


def moe_combine(expert_out, routing: MoERouting, *, out=None):
    """``out[t] = sum_j topk_weights[t, j] * expert_out[routing.dest_rows[t, j]]`` for every token ``t`` of the
    :func:`moe_route` call that made ``routing`` (slots whose expert id was out of range left out), summed in slot
    order in fp32: deterministic. ``expert_out [T * k, H]`` (bf16 / fp16 / fp32; the rows of the layout, e.g.
    ``group_gemm``'s result); returns ``[T, H]`` in ``expert_out``'s dtype, or ``out=``'s."""
    import torch

    if not isinstance(routing, MoERouting):
        raise ValueError(f"moe_combine: routing must be the MoERouting that moe_route returned, got "
                         f"{type(routing).__name__}")
    check_combine_routing("moe_combine", routing)
    if torch.compiler.is_compiling():
        res = torch.ops.triton_dist.moe_combine(expert_out, routing.dest_rows, routing.topk_idx,
                                                routing.topk_weights, routing.num_experts)
        if out is not None:
            out.copy_(res)
            return out
        return res
    T, k = routing.num_tokens, routing.topk
    if not isinstance(expert_out, torch.Tensor) or expert_out.dim() != 2 or expert_out.shape[0] != T * k:
        raise ValueError(f"moe_combine: expert_out must be [{T * k}, H] (one row per routed slot), got "
                         f"{tuple(getattr(expert_out, 'shape', ()))}")
    if expert_out.dtype not in (torch.bfloat16, torch.float16, torch.float32) or expert_out.stride(1) != 1:
        raise ValueError(f"moe_combine: expert_out must be bf16 / fp16 / fp32 with unit column stride, got "
                         f"{expert_out.dtype}, strides {tuple(expert_out.stride())}")
    if expert_out.device != routing.dest_rows.device:
        raise ValueError(f"moe_combine: expert_out is on {expert_out.device}, the routing on "
                         f"{routing.dest_rows.device}")
    H = expert_out.shape[1]
    if out is None:
        out = torch.empty((T, H), dtype=expert_out.dtype, device=expert_out.device)
    elif not isinstance(out, torch.Tensor) or tuple(out.shape) != (T, H) or out.device != expert_out.device or \
            out.stride(1) != 1 or out.dtype not in (torch.bfloat16, torch.float16, torch.float32):
        raise ValueError(f"moe_combine: out must be a bf16 / fp16 / fp32 [{T}, {H}] tensor on {expert_out.device} "
                         f"with unit column stride")
    if T == 0 or H == 0:
        return out
    w = routing.topk_weights
    combine_kernel[(T, triton.cdiv(H, BLOCK_H))](expert_out, routing.dest_rows, routing.topk_idx, w, out, T * k, k,
                                                 routing.num_experts, H, expert_out.stride(0), w.stride(0),
                                                 out.stride(0), BLOCK_H=BLOCK_H)
    return out


__all__ = ["MoERouting", "moe_route", "moe_combine", "route_tokens", "check_routing", "check_expert_ids",
           "check_combine_routing",
           "QUANT_MODES"]
