"""The host-side SHMEM runtime interface every backend implements (NVSHMEM, ROCSHMEM, the CPU simulator).

``triton_dist.utils`` is a facade over the one active :class:`ShmemBackend`; the backend is chosen once per
process by :func:`triton_dist.runtime.select.backend_name` (``TRITON_DIST_BACKEND`` = ``nvshmem`` | ``rocshmem`` |
``sim``; default: ``nvshmem`` when CUDA GPUs are visible, ``rocshmem`` under ROCm, else ``sim``).
"""
from __future__ import annotations

import abc
from typing import Callable, Dict, List, Optional, Sequence

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


class LibraryHeapBackend(ShmemBackend):
    """A backend over a SHMEM library's symmetric heap (NVSHMEM, rocSHMEM): the allocations it made (``_allocs``:
    base pointer -> bytes, freed at :meth:`finalize`) and exit that is clean whoever finalises the library first.

    Scripts written for the reference end with the library's own finalize (``nvshmem.core.finalize()``,
    ``pyrocshmem.rocshmem_finalize()``), which releases the whole heap; freeing our tensors after it (at exit)
    aborts the process (NVSHMEM: "mutex lock failed", status 255). So while the library is initialised, the Python
    function a script calls for that (:meth:`_hook_library_finalize`) is wrapped: a call first makes this backend
    forget its allocations and count as finalised, then runs the library's finalize; a finalize by another path is
    seen where the library can say so (:meth:`_finalized_elsewhere`). Subclasses free one allocation
    (:meth:`_free_allocation`) and finalise the library (:meth:`_finalize_library`)."""

    def __init__(self):
        self._initialized = False
        self._allocs: Dict[int, int] = {}
        self._library_finalize = None  # (owner, attribute, the original function) while ours wraps it

    def is_initialized(self) -> bool:
        return self._initialized

    def _hook_library_finalize(self, owner, attr: str) -> None:
        """Wrap ``owner.<attr>`` (the library's finalize as a script calls it) until this backend finalises."""
        original = getattr(owner, attr)

        def finalize(*args, **kwargs):
            self._forget_heap()
            return original(*args, **kwargs)

        finalize.__wrapped__ = original
        self._library_finalize = (owner, attr, original)
        setattr(owner, attr, finalize)

    def _unhook_library_finalize(self) -> None:
        """Put the library's finalize back (unless something replaced our wrapper since)."""
        if self._library_finalize is not None:
            owner, attr, original = self._library_finalize
            if getattr(getattr(owner, attr, None), "__wrapped__", None) is original:
                setattr(owner, attr, original)
            self._library_finalize = None

    def _forget_heap(self) -> None:
        """The library was (or is being) finalised by someone else: its heap is gone with it, so nothing of ours may
        be freed or finalised again."""
        self._unhook_library_finalize()
        self._allocs.clear()
        self._initialized = False

    def _finalized_elsewhere(self) -> bool:
        """Whether the library reports itself finalised (by a path other than the wrapped function). False where
        it cannot say."""
        return False

    @abc.abstractmethod
    def _free_allocation(self, ptr: int) -> None:
        """Return the allocation at base pointer ``ptr`` to the library."""

    @abc.abstractmethod
    def _finalize_library(self) -> None:
        """Finalise the library (its own finalize, not the wrapper)."""

    def finalize(self) -> None:
        """Free our symmetric tensors and finalise the library, unless it was finalised already (the script's own
        finalize, seen through the wrapper or :meth:`_finalized_elsewhere`): then nothing is left to free and
        calling the library again would abort the process. Safe to call twice."""
        if not self._initialized:
            return
        if self._finalized_elsewhere():
            self._forget_heap()
            return
        self._unhook_library_finalize()
        try:
            torch.cuda.synchronize()
        except Exception:  # noqa: BLE001 - a device already in error: free and finalise all the same
            pass
        for ptr in list(self._allocs):
            self._free_allocation(ptr)
            del self._allocs[ptr]
        self._finalize_library()
        self._initialized = False
