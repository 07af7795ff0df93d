"""Torch tensors over raw GPU memory from a SHMEM allocator (shared by the NVSHMEM and rocSHMEM backends)."""
from __future__ import annotations

from typing import Callable, Dict, Sequence

import torch


class _CudaArray:
    """A ``__cuda_array_interface__`` view of raw device memory (no ownership)."""

    def __init__(self, ptr: int, nbytes: int):
        self.__cuda_array_interface__ = {"shape": (nbytes, ), "typestr": "|u1", "data": (ptr, False), "version": 3,
                                         "strides": None, "stream": None}


def tensor_nbytes(shape: Sequence[int], dtype: torch.dtype) -> int:
    """Bytes of a dense tensor of ``shape``/``dtype`` (0 when a dimension is 0)."""
    numel = 1
    for s in shape:
        numel *= int(s)
    return numel * torch.empty((), dtype=dtype).element_size()


def wrap_device_pointer(ptr: int, shape: Sequence[int], dtype: torch.dtype, device: int) -> torch.Tensor:
    """A torch tensor of ``shape``/``dtype`` over device memory at ``ptr`` (not owned by torch)."""
    nbytes = tensor_nbytes(shape, dtype)
    raw = torch.as_tensor(_CudaArray(ptr, max(nbytes, 1)), device=f"cuda:{device}")
    return raw[:nbytes].view(dtype).view(tuple(int(s) for s in shape))


def malloc_tensor(malloc: Callable[[int], object], allocs: Dict[int, int], shape: Sequence[int], dtype: torch.dtype,
                  device: int, malloc_name: str, failure_hint: str) -> torch.Tensor:
    """``create_tensor`` of the GPU backends: device sync, ``malloc(nbytes)`` (at least 1 byte), record the pointer
    in ``allocs`` (pointer -> bytes) and wrap it. A NULL pointer raises
    ``RuntimeError("<malloc_name>(<nbytes>) failed<failure_hint>")``."""
    nbytes = max(tensor_nbytes(shape, dtype), 1)
    torch.cuda.synchronize()
    ptr = malloc(nbytes)
    if not ptr:
        raise RuntimeError(f"{malloc_name}({nbytes}) failed{failure_hint}")
    allocs[int(ptr)] = nbytes
    return wrap_device_pointer(int(ptr), shape, dtype, device)
