"""Layers built on the ops: the tensor-parallel MLP on the overlapped kernels (:mod:`triton_dist.ops.overlap`) and the
MoE building blocks on one device (:mod:`.moe`)."""
from .moe import moe_forward, moe_reference  # noqa: F401
from .tp_mlp import TPMLP, mlp_reference  # noqa: F401

__all__ = ["TPMLP", "mlp_reference", "moe_forward", "moe_reference"]
