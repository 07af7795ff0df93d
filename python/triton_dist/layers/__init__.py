"""Tensor-parallel layers built on the overlapped kernels of :mod:`triton_dist.ops.overlap`."""
from .tp_mlp import TPMLP, mlp_reference  # noqa: F401

__all__ = ["TPMLP", "mlp_reference"]
