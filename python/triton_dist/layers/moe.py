"""MoE building blocks on one device, and the plain torch reference every MoE test and benchmark checks against.

An expert is a SiLU-gated MLP, Qwen3 / DeepSeek style: ``expert_e(x) = (silu(x @ Wg_e) * (x @ Wu_e)) @ Wd_e``, with
``w_gate_up [E, H, 2 * I]`` (gate columns first, then up) and ``w_down [E, I, H]`` in the ops' ``[K, N]`` layout
(docs/ops.md). A token's output is ``sum_j topk_weights[t, j] * expert_{topk_idx[t, j]}(x[t])``.

:func:`moe_forward` is that layer at expert parallelism 1 on this library's ops (``moe_route`` -> ``group_gemm``
-> SiLU gate -> ``group_gemm`` -> ``moe_combine``); :func:`ep_moe_forward` the layer at expert parallelism
``world`` (``ep_dispatch`` -> the same two grouped GEMMs over this rank's experts -> ``ep_combine``);
:func:`moe_reference` is the same computation written plainly (a loop over experts of ``torch.matmul`` in fp32).
"""
from __future__ import annotations

import torch

from .. import ops as _ops


def moe_reference(x: torch.Tensor, topk_idx: torch.Tensor, topk_weights: torch.Tensor, w_gate_up: torch.Tensor,
                  w_down: torch.Tensor) -> torch.Tensor:
    """The MoE layer in fp32, one expert at a time (module docstring); returns ``[T, H]`` fp32."""
    x32 = x.float()
    out = torch.zeros(x.shape[0], w_down.shape[2], dtype=torch.float32, device=x.device)
    inter = w_down.shape[1]
    for e in range(w_gate_up.shape[0]):
        tok, slot = torch.nonzero(topk_idx == e, as_tuple=True)
        if tok.numel() == 0:
            continue
        h = x32[tok] @ w_gate_up[e].float()
        y = (torch.nn.functional.silu(h[:, :inter]) * h[:, inter:]) @ w_down[e].float()
        out.index_add_(0, tok, y * topk_weights[tok, slot].float()[:, None])
    return out


def moe_forward(x: torch.Tensor, topk_idx: torch.Tensor, topk_weights: torch.Tensor, w_gate_up: torch.Tensor,
                w_down: torch.Tensor, check_ids: bool = True) -> torch.Tensor:
    """The MoE layer at expert parallelism 1 with this library's ops; ``[T, H]`` in ``x``'s dtype. The gated
    activation runs in torch between the two grouped GEMMs (on rows of the layout; padding-free: the layout has
    exactly ``T * k`` rows). ``check_ids``: ``moe_route``'s (one host synchronisation per eager call)."""
    tokens, offsets, _, routing = _ops.moe_route(x, topk_idx, topk_weights, w_gate_up.shape[0], check_ids=check_ids)
    return _ops.moe_combine(_gated_experts(tokens, offsets, w_gate_up, w_down, x.dtype), routing)


def _gated_experts(tokens, offsets, w_gate_up, w_down, dtype):
    h = _ops.group_gemm(tokens, w_gate_up, offsets, check_offsets=False)
    inter = w_down.shape[1]
    a = (torch.nn.functional.silu(h[:, :inter].float()) * h[:, inter:].float()).to(dtype)
    return _ops.group_gemm(a, w_down, offsets, check_offsets=False)


def ep_moe_forward(x: torch.Tensor, topk_idx: torch.Tensor, topk_weights: torch.Tensor, w_gate_up: torch.Tensor,
                   w_down: torch.Tensor, ctx, check_ids: bool = True) -> torch.Tensor:
    """Collective: the MoE layer at expert parallelism ``world`` (every rank calls it with its own tokens).
    ``w_gate_up [E_local, H, 2 * I]`` and ``w_down [E_local, I, H]`` are this rank's experts (global ids ``[rank *
    E_local, (rank + 1) * E_local)``); ``topk_idx`` holds global ids; ``ctx`` an :func:`~triton_dist.ops.create_ep_ctx`
    context of ``x``'s dtype and shape. Returns ``[T, H]`` in ``x``'s dtype: ``ep_dispatch``, the two grouped GEMMs
    (with the SiLU gate in torch between them) over the received layout's full capacity -- rows past the experts' are
    neither computed nor read -- then ``ep_combine``. No host synchronisation but the optional id check."""
    if w_gate_up.shape[0] != ctx.experts_per_rank or w_down.shape[0] != ctx.experts_per_rank:
        raise ValueError(f"ep_moe_forward: this rank holds {ctx.experts_per_rank} experts (num_experts / world), got "
                         f"w_gate_up {tuple(w_gate_up.shape)} and w_down {tuple(w_down.shape)}")
    tokens, offsets, _, handle = _ops.ep_dispatch(x, topk_idx, topk_weights, ctx, check_ids=check_ids)
    y = _gated_experts(tokens, offsets, w_gate_up, w_down, x.dtype)
    return _ops.ep_combine(y, handle, ctx)


__all__ = ["moe_reference", "moe_forward", "ep_moe_forward"]
