"""Argument checks shared by the task builders: every bad input is a Python error at build time, naming the op and
the argument, before anything is compiled or launched."""
from __future__ import annotations

from typing import Optional, Sequence

import torch

__all__ = ["check_tensor", "check_same_device", "ALIGN_BYTES"]

#: Every tensor of a task must start at a multiple of this (vector loads).
ALIGN_BYTES = 16


def check_tensor(op: str, name: str, t, *, dim: Optional[int] = None, dtype=None, shape: Optional[Sequence] = None,
                 contiguous: bool = True) -> torch.Tensor:
    """``t`` must be a tensor with ``dim`` dimensions, dtype ``dtype`` (one or a tuple), ``shape`` (None entries
    free), contiguous and 16-byte aligned."""
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{op}: {name} must be a torch.Tensor, got {type(t).__name__}")
    if dim is not None and t.dim() != dim:
        raise ValueError(f"{op}: {name} must have {dim} dimensions, got shape {tuple(t.shape)}")
    if dtype is not None:
        accepted = dtype if isinstance(dtype, tuple) else (dtype,)
        if t.dtype not in accepted:
            raise TypeError(f"{op}: {name} must be {' or '.join(map(str, accepted))}, got {t.dtype}")
    if shape is not None:
        if len(shape) != t.dim() or any(s is not None and s != d for s, d in zip(shape, t.shape)):
            want = "[" + ", ".join("*" if s is None else str(s) for s in shape) + "]"
            raise ValueError(f"{op}: {name} must have shape {want}, got {list(t.shape)}")
    if contiguous and not t.is_contiguous():
        raise ValueError(f"{op}: {name} must be contiguous (shape {list(t.shape)}, strides {list(t.stride())})")
    if t.numel() and t.data_ptr() % ALIGN_BYTES:
        raise ValueError(f"{op}: {name} must start at a multiple of {ALIGN_BYTES} bytes (address {t.data_ptr():#x})")
    return t


def check_same_device(op: str, device: torch.device, **tensors) -> None:
    for name, t in tensors.items():
        if t.device != device:
            raise ValueError(f"{op}: {name} is on {t.device}, the builder's device is {device}")
