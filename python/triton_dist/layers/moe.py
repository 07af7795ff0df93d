"""MoE building blocks on one device, and the plain torch reference every MoE test and benchmark checks against.

An expert is a SiLU-gated MLP, Qwen3 / DeepSeek style: ``expert_e(x) = (silu(x @ Wg_e) * (x @ Wu_e)) @ Wd_e``, with
``w_gate_up [E, H, 2 * I]`` (gate columns first, then up) and ``w_down [E, I, H]`` in the ops' ``[K, N]`` layout
(docs/ops.md). A token's output is ``sum_j topk_weights[t, j] * expert_{topk_idx[t, j]}(x[t])``.

:func:`moe_forward` is that layer at expert parallelism 1 on this library's ops (``moe_route`` -> ``group_gemm``
-> SiLU gate -> ``group_gemm`` -> ``moe_combine``); :func:`moe_reference` is the same computation written plainly
(a loop over experts of ``torch.matmul`` in fp32).
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
    h = _ops.group_gemm(tokens, w_gate_up, offsets, check_offsets=False)
    inter = w_down.shape[1]
    a = (torch.nn.functional.silu(h[:, :inter].float()) * h[:, inter:].float()).to(x.dtype)
    y = _ops.group_gemm(a, w_down, offsets, check_offsets=False)
    return _ops.moe_combine(y, routing)


__all__ = ["moe_reference", "moe_forward"]
