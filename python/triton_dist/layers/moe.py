"""MoE building blocks on one device, and the plain torch reference every MoE test and benchmark checks against.

An expert is a SiLU-gated MLP, Qwen3 / DeepSeek style: ``expert_e(x) = (silu(x @ Wg_e) * (x @ Wu_e)) @ Wd_e``, with
``w_gate_up [E, H, 2 * I]`` (gate columns first, then up) and ``w_down [E, I, H]`` in the ops' ``[K, N]`` layout
(docs/ops.md). A token's output is ``sum_j topk_weights[t, j] * expert_{topk_idx[t, j]}(x[t])``.

:func:`moe_forward` is that layer at expert parallelism 1 on this library's ops (``moe_route`` -> ``group_gemm``
-> SiLU gate -> ``group_gemm`` -> ``moe_combine``); :func:`ep_moe_forward` the layer at expert parallelism
``world`` (``ep_dispatch`` -> the same two grouped GEMMs over this rank's experts -> ``ep_combine``);
:func:`tp_moe_forward` the layer at tensor parallelism ``world`` (``ag_group_gemm`` -> SiLU gate ->
``group_gemm_rs``, every rank a column slice of every expert);
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
    activation between the two grouped GEMMs is ``ops.moe_silu_gate`` (one launch, fp32 inside; the layout has
    exactly ``T * k`` rows). ``check_ids``: ``moe_route``'s (one host synchronisation per eager call)."""
    tokens, offsets, _, routing = _ops.moe_route(x, topk_idx, topk_weights, w_gate_up.shape[0], check_ids=check_ids)
    return _ops.moe_combine(_gated_experts(tokens, offsets, w_gate_up, w_down), routing)


def _gated_experts(tokens, offsets, w_gate_up, w_down):
    h = _ops.group_gemm(tokens, w_gate_up, offsets, check_offsets=False)
    a = _ops.moe_silu_gate(h, offsets)  # fp32 inside, one rounding; rows past offsets[-1] skipped
    return _ops.group_gemm(a, w_down, offsets, check_offsets=False)


def ep_moe_forward(x: torch.Tensor, topk_idx: torch.Tensor, topk_weights: torch.Tensor, w_gate_up: torch.Tensor,
                   w_down: torch.Tensor, ctx, check_ids: bool = True) -> torch.Tensor:
    """Collective: the MoE layer at expert parallelism ``world`` (every rank calls it with its own tokens).
    ``w_gate_up [E_local, H, 2 * I]`` and ``w_down [E_local, I, H]`` are this rank's experts (global ids ``[rank *
    E_local, (rank + 1) * E_local)``); ``topk_idx`` holds global ids; ``ctx`` an :func:`~triton_dist.ops.create_ep_ctx`
    context of ``x``'s dtype and shape. Returns ``[T, H]`` in ``x``'s dtype: ``ep_dispatch``, the two grouped GEMMs
    over the received layout (rows past the experts' are not computed by them nor read by combine), the SiLU gate between them
    (``ops.moe_silu_gate``: one launch, only the routed rows), then ``ep_combine``. No host synchronisation but the optional id check."""
    if ctx.quant is not None:
        raise ValueError("ep_moe_forward: the layer runs in the context's dtype; make its context without quant (an "
                         "fp8 dispatch feeds group_gemm with fp8 weights and block scales directly)")
    if w_gate_up.shape[0] != ctx.experts_per_rank or w_down.shape[0] != ctx.experts_per_rank:
        raise ValueError(f"ep_moe_forward: this rank holds {ctx.experts_per_rank} experts (num_experts / world), got "
                         f"w_gate_up {tuple(w_gate_up.shape)} and w_down {tuple(w_down.shape)}")
    tokens, offsets, _, handle = _ops.ep_dispatch(x, topk_idx, topk_weights, ctx, check_ids=check_ids)
    y = _gated_experts(tokens, offsets, w_gate_up, w_down)
    return _ops.ep_combine(y, handle, ctx)


def ep_moe_torch(x: torch.Tensor, topk_idx: torch.Tensor, topk_weights: torch.Tensor, w_gate_up: torch.Tensor,
                 w_down: torch.Tensor, num_experts: int, group=None) -> torch.Tensor:
    """Collective: the layer of :func:`ep_moe_forward` written plainly in torch: pairs sorted by expert, per-rank
    counts exchanged with ``all_to_all_single``, their sizes read on the host (one synchronisation), the rows sent
    with ``all_to_all_single``, regrouped by local expert, the experts run (``torch._grouped_mm`` on a GPU, else
    one ``torch.matmul`` per expert), the rows sent back, the slots summed with their weights in fp32. NCCL where the
    group has it, gloo on host copies where ranks share a GPU (``runtime.torch_collectives``); not capturable. The
    benchmarks' torch baseline of the EP layer; ids must be valid."""
    import torch.distributed as dist

    from ..runtime.torch_collectives import all_to_all_single

    world = dist.get_world_size(group)
    e_loc = num_experts // world
    T, k = topk_idx.shape
    H, inter = x.shape[1], w_down.shape[1]
    flat = topk_idx.flatten().long()
    order = torch.argsort(flat, stable=True)
    src_tok = order // k
    send_counts = torch.bincount(flat, minlength=num_experts).view(world, e_loc)
    recv_counts = torch.empty_like(send_counts)
    all_to_all_single(recv_counts, send_counts, group=group)
    rc = recv_counts.tolist()
    in_splits = send_counts.sum(1).tolist()
    out_splits = [sum(r) for r in rc]
    recv = torch.empty((sum(out_splits), H), dtype=x.dtype, device=x.device)
    all_to_all_single(recv, x.index_select(0, src_tok), out_splits, in_splits, group=group)
    starts, pos = [], 0  # received rows: source rank, then its rows by local expert; regroup by local expert
    for r in range(world):
        row = []
        for le in range(e_loc):
            row.append(pos)
            pos += rc[r][le]
        starts.append(row)
    perm = torch.cat([torch.arange(starts[r][le], starts[r][le] + rc[r][le]) for le in range(e_loc)
                      for r in range(world)] or [torch.empty(0, dtype=torch.int64)]).to(x.device)
    grouped = recv.index_select(0, perm)
    per_expert = [sum(rc[r][le] for r in range(world)) for le in range(e_loc)]
    if x.is_cuda and hasattr(torch, "_grouped_mm") and x.dtype == torch.bfloat16:
        offs = torch.tensor(per_expert, device=x.device).cumsum(0).to(torch.int32)
        h = torch._grouped_mm(grouped, w_gate_up, offs=offs, out_dtype=x.dtype)
        a = (torch.nn.functional.silu(h[:, :inter].float()) * h[:, inter:].float()).to(x.dtype)
        y = torch._grouped_mm(a, w_down, offs=offs, out_dtype=x.dtype)
    else:
        y = torch.empty((grouped.shape[0], H), dtype=x.dtype, device=x.device)
        start = 0
        for le, n in enumerate(per_expert):
            h = grouped[start:start + n].float() @ w_gate_up[le].float()
            a = (torch.nn.functional.silu(h[:, :inter]) * h[:, inter:]).to(x.dtype)
            y[start:start + n] = (a.float() @ w_down[le].float()).to(x.dtype)
            start += n
    back_rows = torch.empty_like(recv)
    back_rows.index_copy_(0, perm, y)
    back = torch.empty((T * k, H), dtype=x.dtype, device=x.device)
    all_to_all_single(back, back_rows, in_splits, out_splits, group=group)
    out = torch.zeros((T, H), dtype=torch.float32, device=x.device)
    out.index_add_(0, src_tok, back.float() * topk_weights.flatten()[order].float()[:, None])
    return out.to(x.dtype)


class _ContextLayer(torch.nn.Module):
    """What the MoE layers over a context share: the full-weight shape check of ``load_full_weights`` and the
    collective ``close`` / ``finalize`` of the context."""

    def _check_full_weights(self, w_gate_up: torch.Tensor, w_down: torch.Tensor) -> None:
        E, H, inter = self.num_experts, self.hidden, self.intermediate
        for name, t, shape in (("w_gate_up", w_gate_up, (E, H, 2 * inter)), ("w_down", w_down, (E, inter, H))):
            if tuple(t.shape) != shape:
                raise ValueError(f"{type(self).__name__}.load_full_weights: {name} has shape {tuple(t.shape)}, "
                                 f"expected {shape}")

    def close(self) -> None:
        """Collective: free the context's symmetric buffers (idempotent)."""
        self.ctx.close()

    def finalize(self) -> None:
        """The reference's name of :meth:`close`."""
        self.close()


class EPMoE(_ContextLayer):
    """The MoE layer at expert parallelism ``world`` as a module: rank ``r`` holds experts ``[r * E_local, (r + 1) *
    E_local)`` (``E_local = num_experts / world``) as ``w_gate_up [E_local, hidden, 2 * intermediate]`` and ``w_down
    [E_local, intermediate, hidden]`` (the ops' ``[K, N]`` layout; gate columns first).

    ``forward(x, topk_idx, topk_weights)`` takes this rank's ``[T, hidden]`` tokens (``T <= max_tokens``; ranks may
    differ) with the router's top-k global expert ids and weights and returns ``[T, hidden]`` in ``dtype``
    (:func:`ep_moe_forward`). Collective: every rank calls it, the same number of times. The context is created
    once (``create_ep_ctx``); :meth:`close` frees it (collective). ``method`` / ``methods``: the context's
    (:func:`~triton_dist.ops.create_ep_ctx`): the EP protocol of every call (default ``"auto"``) and the protocols
    whose buffers are allocated (default all: pass ``methods=("push", )`` and ``method="push"`` to hold one
    protocol's buffers only)."""

    def __init__(self, hidden: int, intermediate: int, num_experts: int, topk: int, max_tokens: int,
                 dtype: torch.dtype = torch.bfloat16, device=None, check_ids: bool = True, *, method: str = "auto",
                 methods=None):
        super().__init__()
        self.ctx = _ops.create_ep_ctx(max_tokens, hidden, topk, num_experts, dtype, method=method, methods=methods)
        self.rank, self.world_size = self.ctx.rank, self.ctx.world_size
        self.hidden, self.intermediate, self.num_experts, self.topk = hidden, intermediate, num_experts, topk
        self.experts_per_rank = self.ctx.experts_per_rank
        self.check_ids = check_ids
        if device is None:
            device = self.ctx.device
        e = self.experts_per_rank
        self.w_gate_up = torch.nn.Parameter(torch.empty(e, hidden, 2 * intermediate, dtype=dtype, device=device),
                                            requires_grad=False)
        self.w_down = torch.nn.Parameter(torch.empty(e, intermediate, hidden, dtype=dtype, device=device),
                                         requires_grad=False)

    @torch.no_grad()
    def load_full_weights(self, w_gate_up: torch.Tensor, w_down: torch.Tensor) -> "EPMoE":
        """Take this rank's experts from every expert's weights (``w_gate_up [E, hidden, 2 * intermediate]``,
        ``w_down [E, intermediate, hidden]``, the same on every rank)."""
        self._check_full_weights(w_gate_up, w_down)
        lo, hi = self.rank * self.experts_per_rank, (self.rank + 1) * self.experts_per_rank
        self.w_gate_up.copy_(w_gate_up[lo:hi])
        self.w_down.copy_(w_down[lo:hi])
        return self

    def forward(self, x: torch.Tensor, topk_idx: torch.Tensor, topk_weights: torch.Tensor) -> torch.Tensor:
        return ep_moe_forward(x, topk_idx, topk_weights, self.w_gate_up, self.w_down, self.ctx,
                              check_ids=self.check_ids)


def tp_moe_forward(x: torch.Tensor, topk_idx: torch.Tensor, topk_weights: torch.Tensor, w_gate_up: torch.Tensor,
                   w_down: torch.Tensor, ctx, check_ids: bool = True) -> torch.Tensor:
    """Collective: the MoE layer at tensor parallelism ``world`` (every rank calls it with its own ``T`` tokens, the
    same ``T`` everywhere). ``w_gate_up [E, H, 2 * I_local]`` (this rank's slice of every expert's gate columns, then
    the matching up columns: :func:`tp_moe_slices`) and ``w_down [E, I_local, H]``; ``ctx`` a
    :func:`~triton_dist.ops.create_tp_moe_ctx` context of ``x``'s dtype and shape. Returns ``[T, H]`` in ``x``'s
    dtype: ``ag_group_gemm`` (the tokens' all-gather inside the first grouped GEMM), the SiLU gate
    (``ops.moe_silu_gate``, only the routed rows), ``group_gemm_rs`` (the second grouped GEMM, top-k sum and
    reduce-scatter in one launch). No host synchronisation but the optional id check."""
    h, offsets, handle = _ops.ag_group_gemm(x, topk_idx, topk_weights, w_gate_up, ctx, check_ids=check_ids)
    a = _ops.moe_silu_gate(h, offsets)
    return _ops.group_gemm_rs(a, w_down, handle, ctx)


def tp_moe_slices(w_gate_up: torch.Tensor, w_down: torch.Tensor, rank: int, world: int):
    """Rank ``rank``'s tensor-parallel slices of every expert's weights (``w_gate_up [E, H, 2 * I]``, gate columns
    first; ``w_down [E, I, H]``; ``I`` a multiple of ``world``): ``(w_gate_up [E, H, 2 * I / world]`` = its gate
    columns then its up columns, ``w_down [E, I / world, H])``, contiguous."""
    inter = w_down.shape[1]
    if inter % world:
        raise ValueError(f"tp_moe_slices: the intermediate size {inter} is not a multiple of the world size {world}")
    i_loc = inter // world
    lo, hi = rank * i_loc, (rank + 1) * i_loc
    gu = torch.cat([w_gate_up[:, :, lo:hi], w_gate_up[:, :, inter + lo:inter + hi]], dim=2).contiguous()
    return gu, w_down[:, lo:hi, :].contiguous()


def tp_moe_torch(x: torch.Tensor, topk_idx: torch.Tensor, topk_weights: torch.Tensor, w_gate_up: torch.Tensor,
                 w_down: torch.Tensor, group=None) -> torch.Tensor:
    """Collective: the layer of :func:`tp_moe_forward` written plainly in torch, on this rank's slices: the tokens
    and their routing all-gathered (``all_gather_into_tensor``), every gathered token's experts run on the slices
    (``torch._grouped_mm`` on a GPU in bf16, else one ``torch.matmul`` per expert), the slots summed with their
    weights, and the partial sums reduce-scattered (``reduce_scatter_tensor``). NCCL where the group has it, gloo on
    host copies where ranks share a GPU (``runtime.torch_collectives``); not capturable. The benchmarks' torch
    baseline of the TP layer and the tests' reference; ids must be valid."""
    import torch.distributed as dist

    from ..runtime.torch_collectives import all_gather_into_tensor, reduce_scatter_tensor

    world = dist.get_world_size(group)
    T, k = topk_idx.shape
    H, i_loc = x.shape[1], w_down.shape[1]
    xs = torch.empty((world * T, H), dtype=x.dtype, device=x.device)
    all_gather_into_tensor(xs, x.contiguous(), group=group)
    ids = torch.empty((world * T, k), dtype=torch.int64, device=x.device)
    all_gather_into_tensor(ids, topk_idx.long().contiguous(), group=group)
    ws = torch.empty((world * T, k), dtype=torch.float32, device=x.device)
    all_gather_into_tensor(ws, topk_weights.float().contiguous(), group=group)
    flat = ids.flatten()
    order = torch.argsort(flat, stable=True)
    src_tok = order // k
    counts = torch.bincount(flat, minlength=w_gate_up.shape[0])
    grouped = xs.index_select(0, src_tok)
    if x.is_cuda and hasattr(torch, "_grouped_mm") and x.dtype == torch.bfloat16:
        offs = counts.cumsum(0).to(torch.int32)
        h = torch._grouped_mm(grouped, w_gate_up, offs=offs, out_dtype=x.dtype)
        a = (torch.nn.functional.silu(h[:, :i_loc].float()) * h[:, i_loc:].float()).to(x.dtype)
        y = torch._grouped_mm(a, w_down, offs=offs, out_dtype=x.dtype)
    else:
        y = torch.empty((grouped.shape[0], H), dtype=x.dtype, device=x.device)
        start = 0
        for e, n in enumerate(counts.tolist()):
            h = grouped[start:start + n].float() @ w_gate_up[e].float()
            a = (torch.nn.functional.silu(h[:, :i_loc]) * h[:, i_loc:]).to(x.dtype)
            y[start:start + n] = (a.float() @ w_down[e].float()).to(x.dtype)
            start += n
    part = torch.zeros((world * T, H), dtype=torch.float32, device=x.device)
    part.index_add_(0, src_tok, y.float() * ws.flatten()[order][:, None])
    out = torch.empty((T, H), dtype=x.dtype, device=x.device)
    reduce_scatter_tensor(out, part.to(x.dtype), group=group)
    return out


class TPMoE(_ContextLayer):
    """The MoE layer at tensor parallelism ``world`` as a module: every rank holds a ``1 / world`` column slice of
    every expert (``w_gate_up [E, hidden, 2 * intermediate / world]``: its gate columns then its up columns;
    ``w_down [E, intermediate / world, hidden]``) and takes a sequence shard of the tokens.

    ``forward(x, topk_idx, topk_weights)`` takes this rank's ``[T, hidden]`` tokens (``T <= max_tokens``, the same
    ``T`` on every rank) with the router's top-k expert ids and weights and returns ``[T, hidden]`` in ``dtype``
    (:func:`tp_moe_forward`). Collective: every rank calls it, the same number of times. The context is created once
    (``create_tp_moe_ctx``); :meth:`close` frees it (collective)."""

    def __init__(self, hidden: int, intermediate: int, num_experts: int, topk: int, max_tokens: int,
                 dtype: torch.dtype = torch.bfloat16, device=None, check_ids: bool = True, **ctx_kw):
        super().__init__()
        self.ctx = _ops.create_tp_moe_ctx(max_tokens, hidden, topk, num_experts, dtype, **ctx_kw)
        self.rank, self.world_size = self.ctx.rank, self.ctx.world_size
        if intermediate % self.world_size:
            self.ctx.close()
            raise ValueError(f"TPMoE: intermediate={intermediate} is not a multiple of the world size "
                             f"{self.world_size}")
        self.hidden, self.intermediate, self.num_experts, self.topk = hidden, intermediate, num_experts, topk
        self.intermediate_per_rank = intermediate // self.world_size
        self.check_ids = check_ids
        if device is None:
            device = self.ctx.device
        i_loc = self.intermediate_per_rank
        self.w_gate_up = torch.nn.Parameter(torch.empty(num_experts, hidden, 2 * i_loc, dtype=dtype, device=device),
                                            requires_grad=False)
        self.w_down = torch.nn.Parameter(torch.empty(num_experts, i_loc, hidden, dtype=dtype, device=device),
                                         requires_grad=False)

    @torch.no_grad()
    def load_full_weights(self, w_gate_up: torch.Tensor, w_down: torch.Tensor) -> "TPMoE":
        """Take this rank's slices (:func:`tp_moe_slices`) of every expert's weights (``w_gate_up [E, hidden, 2 *
        intermediate]``, ``w_down [E, intermediate, hidden]``, the same on every rank)."""
        self._check_full_weights(w_gate_up, w_down)
        gu, down = tp_moe_slices(w_gate_up, w_down, self.rank, self.world_size)
        self.w_gate_up.copy_(gu)
        self.w_down.copy_(down)
        return self

    def forward(self, x: torch.Tensor, topk_idx: torch.Tensor, topk_weights: torch.Tensor) -> torch.Tensor:
        return tp_moe_forward(x, topk_idx, topk_weights, self.w_gate_up, self.w_down, self.ctx,
                              check_ids=self.check_ids)


__all__ = ["moe_reference", "moe_forward", "ep_moe_forward", "ep_moe_torch", "EPMoE", "tp_moe_forward",
           "tp_moe_slices", "tp_moe_torch", "TPMoE"]
