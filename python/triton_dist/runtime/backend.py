"""The host-side SHMEM runtime interface every backend implements (NVSHMEM, ROCSHMEM, the CPU simulator).

``triton_dist.utils`` is a facade over the one active :class:`ShmemBackend`; the backend is chosen once per
process by :func:`triton_dist.runtime.select.backend_name` (``TRITON_DIST_BACKEND`` = ``nvshmem`` | ``rocshmem`` |
``sim``; default: ``nvshmem`` when CUDA GPUs are visible, ``rocshmem`` under ROCm, else ``sim``).
"""
from __future__ import annotations

import abc
from typing import Callable, List, Optional, Sequence

import torch


class ShmemBackend(abc.ABC):
    """One process's view of the symmetric heap. Methods run on the host; none launches a kernel except
    ``barrier_all_on_stream`` (which enqueues on ``stream``)."""

    #: ``TRITON_DIST_BACKEND`` value of this backend (``nvshmem``, ``rocshmem``, ``sim``).
    name: str = "abstract"

    #: ``module_init(module_handle)``: initialise a loaded GPU module (``CUmodule`` / ``hipModule_t``) that uses this
    #: backend's SHMEM device library, before its first launch (``triton_dist.runtime.module_init`` calls it once per
    #: module per device from Triton's load hook). None for a backend without a device library (the simulator).
    module_init: Optional[Callable[[int], None]] = None

    @abc.abstractmethod
    def init(self, group) -> None:
        """Bootstrap SHMEM over the torch process group ``group`` (every rank calls it). Idempotent per process."""

    @abc.abstractmethod
    def is_initialized(self) -> bool:
        ...

    @abc.abstractmethod
    def my_pe(self) -> int:
        ...

    @abc.abstractmethod
    def n_pes(self) -> int:
        ...

    @abc.abstractmethod
    def create_tensor(self, shape: Sequence[int], dtype: torch.dtype) -> torch.Tensor:
        """Collective: allocate a symmetric tensor (same shape/dtype on every rank); returns this rank's view."""

    @abc.abstractmethod
    def create_tensors(self, shape: Sequence[int], dtype: torch.dtype, rank: int,
                       local_world_size: int) -> List[torch.Tensor]:
        """Collective: allocate one symmetric tensor; return views of it on each same-node rank (index = local rank)."""

    @abc.abstractmethod
    def free_tensor(self, tensor: torch.Tensor) -> None:
        """Collective: free a tensor from create_tensor(s) after a barrier on every rank."""

    @abc.abstractmethod
    def barrier_all_on_stream(self, stream: Optional[object] = None) -> None:
        """All ranks synchronise; on GPUs ordered on ``stream`` (default: the current stream)."""

    @abc.abstractmethod
    def finalize(self) -> None:
        """Free everything this backend allocated and tear SHMEM down. Safe to call twice."""
