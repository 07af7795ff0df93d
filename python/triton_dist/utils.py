"""Host-side API of triton_dist (source-compatible with Triton-distributed's ``triton_dist.utils``).

Everything here runs on the host. SHMEM functions dispatch to the process's backend (``nvshmem``, ``rocshmem`` or
the CPU simulator ``sim``, chosen by :mod:`triton_dist.runtime.select`); calling one before
:func:`initialize_distributed` raises ``RuntimeError("... call initialize_distributed() first")``. Device queries
need a GPU: without one they return a documented sane value or raise ``RuntimeError("... needs a CUDA GPU")``.
Heavy or optional modules (torch.distributed, nvshmem4py, pynvml, cuda-bindings) are imported lazily.

This module is the facade: the symmetric-memory calls and signal checks are defined here; the rest is implemented in
``triton_dist.runtime`` and re-exported unchanged -- bootstrap and teardown (``runtime/bootstrap.py``), GPU and
platform queries (``runtime/device_info.py``), environment variables (``runtime/env.py``), and the helpers for tests
and benchmarks (``runtime/testing.py``).
"""
from __future__ import annotations

from typing import List

import torch

from .runtime import select as _select
from .runtime.bootstrap import (finalize_distributed, get_triton_dist_local_world_size,  # noqa: F401
                                get_triton_dist_world, init_nvshmem_by_torch_process_group,
                                init_rocshmem_by_torch_process_group, initialize_distributed, is_shmem_initialized)
from .runtime.device_info import (CUDA_CHECK, get_current_gpu_clock_rate_in_khz,  # noqa: F401
                                  get_device_max_shared_memory_size, get_max_gpu_clock_rate_in_khz, get_numa_node,
                                  has_fullmesh_nvlink, has_tma, is_cuda, is_hip, is_nvshmem_multimem_supported,
                                  requires_p2p_native_atomic, supports_p2p_native_atomic)
from .runtime.env import get_bool_env, get_int_env  # noqa: F401
from .runtime.state import require_backend
from .runtime.testing import (dist_print, generate_data, init_seed, is_fp8_dtype, perf_func, rand_tensor,  # noqa: F401
                              sleep_async)

#: dtype of NVSHMEM signals (nvshmem4py has no uint64 tensors; signals are 64-bit).
NVSHMEM_SIGNAL_DTYPE = torch.int64

__all__ = [
    "initialize_distributed", "init_nvshmem_by_torch_process_group", "init_rocshmem_by_torch_process_group",
    "finalize_distributed", "is_shmem_initialized", "nvshmem_create_tensor", "nvshmem_create_tensors",
    "nvshmem_free_tensor_sync", "nvshmem_barrier_all_on_stream", "rocshmem_barrier_all_on_stream", "is_cuda",
    "is_hip", "has_tma", "is_nvshmem_multimem_supported", "get_numa_node", "get_max_gpu_clock_rate_in_khz",
    "get_current_gpu_clock_rate_in_khz", "get_device_max_shared_memory_size", "has_fullmesh_nvlink",
    "supports_p2p_native_atomic", "dist_print", "rand_tensor", "init_seed", "get_bool_env", "get_int_env",
    "NVSHMEM_SIGNAL_DTYPE", "check_signal_tensor", "get_triton_dist_world", "get_triton_dist_local_world_size",
    "get_shmem_backend", "perf_func", "launch_cooperative_grid_options", "is_fp8_dtype", "CUDA_CHECK",
    "sleep_async", "requires_p2p_native_atomic", "generate_data",
]


def get_shmem_backend() -> str:
    """``"nvshmem"``, ``"rocshmem"`` or ``"sim"`` — this process's backend (see runtime/select.py)."""
    return _select.backend_name()


def check_signal_tensor(t: torch.Tensor, what: str = "signal") -> torch.Tensor:
    """Ops that take SHMEM signals call this: signals must be int64 (``NVSHMEM_SIGNAL_DTYPE``) tensors."""
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{what} must be a torch.Tensor of dtype {NVSHMEM_SIGNAL_DTYPE}, got {type(t).__name__}")
    if t.dtype != NVSHMEM_SIGNAL_DTYPE:
        raise ValueError(f"{what} tensor has dtype {t.dtype}; SHMEM signals must be {NVSHMEM_SIGNAL_DTYPE} "
                         f"(create it with nvshmem_create_tensor(shape, NVSHMEM_SIGNAL_DTYPE))")
    return t


def launch_cooperative_grid_options() -> dict:
    """Compile options for a cooperative-grid launch (Triton >= 3.3)."""
    return {"launch_cooperative_grid": True}


# ----------------------------------------------------------------------------------------------------------------
# symmetric memory
# ----------------------------------------------------------------------------------------------------------------
def _shape(shape) -> tuple:
    if isinstance(shape, int):
        shape = (shape, )
    shape = tuple(int(s) for s in shape)
    if any(s < 0 for s in shape):
        raise ValueError(f"nvshmem_create_tensor: negative dimension in shape {shape}")
    return shape


def nvshmem_create_tensor(shape, dtype: torch.dtype) -> torch.Tensor:
    """Collective: allocate a symmetric tensor (same shape and dtype on every rank) and return this rank's view.
    fp8 tensors are allocated as int8 and viewed."""
    backend = require_backend()
    shape = _shape(shape)
    if not isinstance(dtype, torch.dtype):
        raise TypeError(f"nvshmem_create_tensor: dtype must be a torch.dtype, got {dtype!r}")
    if is_fp8_dtype(dtype):
        return backend.create_tensor(shape, torch.int8).view(dtype)
    return backend.create_tensor(shape, dtype)


def nvshmem_create_tensors(shape, dtype: torch.dtype, rank: int, local_world_size: int) -> List[torch.Tensor]:
    """Collective: allocate one symmetric tensor; return its views on every rank of this node, indexed by local
    rank (entry ``rank % local_world_size`` is this rank's own tensor; free only that one)."""
    backend = require_backend()
    shape = _shape(shape)
    if local_world_size < 1:
        raise ValueError(f"nvshmem_create_tensors: local_world_size={local_world_size} must be >= 1")
    n = backend.n_pes()
    if not 0 <= rank < n:
        raise ValueError(f"nvshmem_create_tensors: rank={rank} is outside [0, {n})")
    if is_fp8_dtype(dtype):
        return [t.view(dtype) for t in backend.create_tensors(shape, torch.int8, rank, local_world_size)]
    return backend.create_tensors(shape, dtype, rank, local_world_size)


def nvshmem_free_tensor_sync(tensor: torch.Tensor) -> None:
    """Collective: synchronise the device, then free ``tensor`` (from ``nvshmem_create_tensor(s)``) on every rank."""
    require_backend().free_tensor(tensor)


def nvshmem_barrier_all_on_stream(stream=None) -> None:
    """All ranks synchronise, ordered on ``stream`` (default: the current stream)."""
    require_backend().barrier_all_on_stream(stream)


def rocshmem_barrier_all_on_stream(stream=None) -> None:
    """rocSHMEM spelling of :func:`nvshmem_barrier_all_on_stream` (same backend dispatch)."""
    require_backend().barrier_all_on_stream(stream)
