"""``TPMLP``: a tensor-parallel (sequence-parallel in/out) gated MLP, Llama style.

    y = (silu(x @ W_gate) * (x @ W_up)) @ W_down

Sharding over ``world`` ranks (intermediate size ``I``, hidden size ``H``):

* input ``x``: rows sharded (``[T / world, H]`` per rank, sequence parallel);
* gate_up: column-parallel, this rank holds ``W_gate[:, r*I/w:(r+1)*I/w]`` and the same columns of ``W_up``,
  concatenated as ``w_gate_up [H, 2 * I / world]``; computed with :func:`triton_dist.ops.ag_gemm`
  (all-gather of ``x`` overlapped with the GEMM) -> ``[T, 2 * I / world]``;
* SiLU-gate on the local columns -> ``[T, I / world]``;
* down: row-parallel, ``w_down [I / world, H]``; computed with :func:`triton_dist.ops.gemm_rs`
  (GEMM overlapped with the reduce-scatter) -> ``[T / world, H]``, this rank's rows of ``y``.

Weights are kept in the ops' layout ``[K, N]`` (``x @ w``, docs/ops.md); :meth:`TPMLP.load_linear_weights` takes
``torch.nn.Linear``'s ``[N, K]`` (``out_features, in_features``) and transposes once at load time. The module
calls the public ops, so ``torch.compile(mlp, fullgraph=True)`` traces it (the ops become
``torch.ops.triton_dist.*``).
"""
from __future__ import annotations

from typing import Optional

import torch

from .. import ops as _ops
from ..ops import overlap as _ov


def mlp_reference(x: torch.Tensor, w_gate: torch.Tensor, w_up: torch.Tensor, w_down: torch.Tensor) -> torch.Tensor:
    """Single-device reference in fp32: ``(silu(x @ w_gate) * (x @ w_up)) @ w_down``."""
    x, w_gate, w_up, w_down = (t.float() for t in (x, w_gate, w_up, w_down))
    return (torch.nn.functional.silu(x @ w_gate) * (x @ w_up)) @ w_down


class TPMLP(torch.nn.Module):
    """Tensor-parallel gated MLP over the whole triton_dist world (module docstring).

    ``forward(x)`` takes this rank's ``[T_loc, hidden]`` rows and returns this rank's ``[T_loc, hidden]`` rows of the
    output. Collective: every rank must call it with the same ``T_loc``. ``method`` is passed to both overlapped
    ops (``auto`` / ``fused`` / ``torch``). Contexts are created once (``max_tokens`` global rows).
    """

    def __init__(self, hidden: int, intermediate: int, max_tokens: int, dtype: torch.dtype = torch.bfloat16,
                 device=None, method: str = "auto", ag_kwargs: Optional[dict] = None,
                 rs_kwargs: Optional[dict] = None):
        super().__init__()
        from ..runtime.state import require_backend

        backend = require_backend()
        self.rank, self.world_size = backend.my_pe(), backend.n_pes()
        W = self.world_size
        if intermediate % W:
            raise ValueError(f"TPMLP: intermediate={intermediate} must be a multiple of the world size {W}")
        if max_tokens % W:
            raise ValueError(f"TPMLP: max_tokens={max_tokens} must be a multiple of the world size {W}")
        if method not in _ov.FUSED_METHODS + ("nccl", ):
            raise ValueError(f"TPMLP: method={method!r} is not supported; accepted: {', '.join(_ov.FUSED_METHODS)} "
                             f"('nccl' is an alias of 'torch')")
        self.hidden, self.intermediate, self.max_tokens = hidden, intermediate, max_tokens
        self.i_loc = intermediate // W
        self.dtype = dtype
        self.method = method
        if device is None:
            device = torch.device("cuda", torch.cuda.current_device()) if torch.cuda.is_available() else "cpu"
        self.w_gate_up = torch.nn.Parameter(torch.empty(hidden, 2 * self.i_loc, dtype=dtype, device=device),
                                            requires_grad=False)
        self.w_down = torch.nn.Parameter(torch.empty(self.i_loc, hidden, dtype=dtype, device=device),
                                         requires_grad=False)
        self.ag_ctx = _ops.create_ag_gemm_context(max_tokens // W, hidden, dtype, **(ag_kwargs or {}))
        self.rs_ctx = _ops.create_gemm_rs_context(max_tokens, hidden, dtype, **(rs_kwargs or {}))

    @torch.no_grad()
    def load_full_weights(self, w_gate: torch.Tensor, w_up: torch.Tensor, w_down: torch.Tensor) -> "TPMLP":
        """Shard unsharded weights (``w_gate``, ``w_up``: ``[hidden, intermediate]``; ``w_down``:
        ``[intermediate, hidden]``, the same on every rank) into this rank's parameters."""
        H, inter = self.hidden, self.intermediate
        for name, t, shape in (("w_gate", w_gate, (H, inter)), ("w_up", w_up, (H, inter)),
                               ("w_down", w_down, (inter, H))):
            if tuple(t.shape) != shape:
                raise ValueError(f"TPMLP.load_full_weights: {name} has shape {tuple(t.shape)}, expected {shape}")
        lo, hi = self.rank * self.i_loc, (self.rank + 1) * self.i_loc
        self.w_gate_up[:, :self.i_loc].copy_(w_gate[:, lo:hi])
        self.w_gate_up[:, self.i_loc:].copy_(w_up[:, lo:hi])
        self.w_down.copy_(w_down[lo:hi, :])
        return self

    @torch.no_grad()
    def load_linear_weights(self, gate_proj: torch.Tensor, up_proj: torch.Tensor,
                            down_proj: torch.Tensor) -> "TPMLP":
        """:meth:`load_full_weights` from ``torch.nn.Linear`` weights (``[out_features, in_features]``, as in a
        Llama checkpoint): ``gate_proj`` / ``up_proj`` ``[intermediate, hidden]``, ``down_proj`` ``[hidden,
        intermediate]``, unsharded, the same on every rank."""
        return self.load_full_weights(gate_proj.t(), up_proj.t(), down_proj.t())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dim() != 2 or x.shape[1] != self.hidden:
            raise ValueError(f"TPMLP: x must be [tokens_per_rank, {self.hidden}], got {tuple(x.shape)}")
        if x.shape[0] * self.world_size > self.max_tokens:
            raise ValueError(f"TPMLP: {x.shape[0]} rows per rank x {self.world_size} ranks exceeds max_tokens="
                             f"{self.max_tokens}")
        h = _ops.ag_gemm(x.contiguous(), self.w_gate_up, self.ag_ctx, method=self.method)
        act = (torch.nn.functional.silu(h[:, :self.i_loc].float()) * h[:, self.i_loc:].float()).to(self.dtype)
        return _ops.gemm_rs(act, self.w_down, self.rs_ctx, method=self.method)

    def close(self) -> None:
        """Collective: free the symmetric buffers of both contexts (idempotent)."""
        self.ag_ctx.close()
        self.rs_ctx.close()

    def finalize(self) -> None:
        """The reference's name of :meth:`close`."""
        self.close()
