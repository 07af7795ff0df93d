"""Layers built on the ops: the tensor-parallel MLP on the overlapped kernels (:mod:`triton_dist.ops.overlap`) and the
MoE layer at expert parallelism 1 and ``world`` (:mod:`.moe`), sequence-parallel attention (:mod:`.attention`)."""
from .attention import SPAttention, sp_attention_decode_torch, sp_attention_prefill_torch  # noqa: F401
from .moe import (EPMoE, TPMoE, ep_moe_forward, ep_moe_torch, moe_forward, moe_reference,  # noqa: F401
                  tp_moe_forward, tp_moe_slices, tp_moe_torch)
from .tp_mlp import TPMLP, mlp_reference  # noqa: F401

__all__ = ["TPMLP", "mlp_reference", "moe_forward", "moe_reference", "ep_moe_forward", "ep_moe_torch", "EPMoE",
           "tp_moe_forward", "tp_moe_slices", "tp_moe_torch", "TPMoE", "SPAttention", "sp_attention_prefill_torch",
           "sp_attention_decode_torch"]
