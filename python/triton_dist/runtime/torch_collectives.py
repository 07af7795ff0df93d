"""torch.distributed collectives on CUDA tensors that work whatever the process group's backend: NCCL where the group
has it, gloo on host copies where it has not (ranks that share a GPU: NCCL refuses two ranks on one GPU, so their
group is gloo-only; see :mod:`triton_dist.runtime.shared_gpu`).

Used by the ops' torch / NCCL methods (``method="nccl"`` of the collectives, ``method="torch"`` of the overlapped
GEMMs), by the torch reference models and by the tests' and benchmarks' references.

Semantics of the host path: the input is copied to the host (the caller's stream is synchronised), reduced or
gathered over gloo, and copied back into the output on the current stream. Reductions of floating-point tensors run
in float32 and are rounded once to the output dtype (an exact reference for the 2-rank sums the tests check;
NCCL's own order of roundings may differ in the last bit at more ranks); gathers move the bytes unchanged (fp8
included). It synchronises the host and so cannot be captured into a CUDA graph: inside a capture it raises
RuntimeError at once instead of breaking the capture.
"""
from __future__ import annotations

import torch

__all__ = ["group_has_nccl", "all_gather_into_tensor", "reduce_scatter_tensor", "all_reduce",
           "host_all_gather_into_tensor", "host_reduce_scatter_tensor", "host_all_reduce",
           "dist_all_gather_single", "dist_reduce_scatter_single", "all_to_all_single"]


def dist_all_gather_single(out: torch.Tensor, x: torch.Tensor, group=None):
    """torch.distributed's one-tensor all-gather under the name the installed torch prefers: ``all_gather_single``
    where it exists (torch 2.13 deprecates ``all_gather_into_tensor`` with a FutureWarning per call site), else
    ``all_gather_into_tensor``. Same semantics either way; the backend (NCCL) runs it, no host path."""
    import torch.distributed as dist

    fn = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
    return fn(out, x, group=group)


def dist_reduce_scatter_single(out: torch.Tensor, x: torch.Tensor, group=None):
    """torch.distributed's one-tensor sum reduce-scatter: ``reduce_scatter_single`` where the installed torch has it,
    else ``reduce_scatter_tensor`` (see :func:`dist_all_gather_single`)."""
    import torch.distributed as dist

    fn = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor
    return fn(out, x, group=group)


def group_has_nccl(group=None) -> bool:
    """Whether ``group`` (default: the world group) runs CUDA tensors through NCCL."""
    import torch.distributed as dist

    try:
        backend = str(dist.get_backend(group))
    except Exception:  # noqa: BLE001 - an unusual group object: let torch decide, it raises clearly
        return True
    return "nccl" in backend.lower()


def _refuse_capture(op: str) -> None:
    if torch.cuda.is_available() and torch.cuda.is_current_stream_capturing():
        raise RuntimeError(f"{op}: the process group has no NCCL (ranks share a GPU: gloo only), so this collective "
                           f"runs on host copies, which cannot be captured into a CUDA graph; use a triton_dist "
                           f"method (or 'auto') inside the capture")


def _host(x: torch.Tensor) -> torch.Tensor:
    return x.detach().to("cpu", copy=True).contiguous()


def _as_bytes(x: torch.Tensor) -> torch.Tensor:
    return x.contiguous().view(-1).view(torch.uint8)


def _reduce_dtype(dtype: torch.dtype) -> torch.dtype:
    return torch.float32 if dtype.is_floating_point else dtype


def all_gather_into_tensor(out: torch.Tensor, x: torch.Tensor, group=None) -> torch.Tensor:
    """``out`` (``world * x.numel()`` elements) <- every rank's ``x`` in rank order; returns ``out``. Any dtype."""

    if group_has_nccl(group) or not x.is_cuda:
        if x.element_size() == 1 and x.dtype != torch.uint8 and x.dtype != torch.int8:
            dist_all_gather_single(out.view(torch.uint8), x.view(torch.uint8), group=group)
        else:
            dist_all_gather_single(out, x, group=group)
        return out
    _refuse_capture("all_gather_into_tensor")
    return host_all_gather_into_tensor(out, x, group)


def host_all_gather_into_tensor(out: torch.Tensor, x: torch.Tensor, group=None) -> torch.Tensor:
    """The host path of :func:`all_gather_into_tensor` (any device; gloo on host copies, bytes unchanged)."""
    import torch.distributed as dist

    world = dist.get_world_size(group)
    if out.numel() != x.numel() * world:
        raise ValueError(f"all_gather_into_tensor: output has {out.numel()} elements, input {x.numel()}: the output "
                         f"needs world ({world}) x the input's")
    mine = _host(_as_bytes(x))
    parts = [torch.empty_like(mine) for _ in range(world)]
    dist.all_gather(parts, mine, group=group)
    out.view(-1).view(torch.uint8).copy_(torch.cat(parts).to(out.device))
    return out


def all_reduce(t: torch.Tensor, group=None) -> torch.Tensor:
    """``t`` <- the sum of every rank's ``t``, in place; returns ``t``."""
    import torch.distributed as dist

    if group_has_nccl(group) or not t.is_cuda:
        dist.all_reduce(t, group=group)
        return t
    _refuse_capture("all_reduce")
    return host_all_reduce(t, group)


def host_all_reduce(t: torch.Tensor, group=None) -> torch.Tensor:
    """The host path of :func:`all_reduce` (any device; floating sums in fp32, rounded once)."""
    import torch.distributed as dist

    acc = _host(t).to(_reduce_dtype(t.dtype))
    dist.all_reduce(acc, group=group)
    t.copy_(acc.to(t.dtype).view(t.shape).to(t.device))
    return t


def reduce_scatter_tensor(out: torch.Tensor, x: torch.Tensor, group=None) -> torch.Tensor:
    """``out`` (``x.numel() / world`` elements) <- this rank's slice of the sum of every rank's ``x``; returns
    ``out``."""

    if group_has_nccl(group) or not x.is_cuda:
        dist_reduce_scatter_single(out, x, group=group)
        return out
    _refuse_capture("reduce_scatter_tensor")
    return host_reduce_scatter_tensor(out, x, group)


def host_reduce_scatter_tensor(out: torch.Tensor, x: torch.Tensor, group=None) -> torch.Tensor:
    """The host path of :func:`reduce_scatter_tensor` (any device; floating sums in fp32, rounded once)."""
    import torch.distributed as dist

    world, rank = dist.get_world_size(group), dist.get_rank(group)
    if x.numel() != out.numel() * world:
        raise ValueError(f"reduce_scatter_tensor: input has {x.numel()} elements, output {out.numel()}: the input "
                         f"needs world ({world}) x the output's")
    acc = _host(x).to(_reduce_dtype(x.dtype)).view(-1)
    dist.all_reduce(acc, group=group)
    n = out.numel()
    out.copy_(acc[rank * n:(rank + 1) * n].to(out.dtype).view(out.shape).to(out.device))
    return out


def all_to_all_single(out: torch.Tensor, x: torch.Tensor, out_splits=None, in_splits=None, group=None) -> torch.Tensor:
    """``out`` <- the rows every rank sent this rank, in rank order: rank ``r`` sends rows ``x[sum(in_splits[:d]):
    +in_splits[d]]`` to rank ``d`` (``torch.distributed.all_to_all_single``'s semantics: splits along dim 0, equal
    splits when None); returns ``out``. Any dtype; the host path (gloo, ranks that share a GPU) sends host copies'
    bytes unchanged and cannot be captured."""
    import torch.distributed as dist

    if group_has_nccl(group) or not x.is_cuda:
        dist.all_to_all_single(out, x, out_splits, in_splits, group=group)
        return out
    _refuse_capture("all_to_all_single")
    hx = _host(x)
    hout = torch.empty(out.shape, dtype=out.dtype)
    dist.all_to_all_single(hout, hx, out_splits, in_splits, group=group)
    out.copy_(hout.to(out.device))
    return out
