"""The NVIDIA host runtime: NVSHMEM through nvshmem4py (``nvshmem.core`` / ``nvshmem.bindings``), imported lazily.

Bootstrap: the unique-id method. Rank 0 of the group asks NVSHMEM for a unique id, it is broadcast over
torch.distributed, and every rank calls ``nvshmem.core.init(uid=..., rank=..., nranks=..., device=...)``.
Symmetric tensors are torch tensors over ``nvshmem_malloc`` memory (freed collectively by ``free_tensor`` or at
``finalize``); peer views come from ``nvshmem_ptr``.

Environment defaults set here (only when the variable is unset; documented in docs/runtime.md):
``NVSHMEM_DISABLE_NVLS=1`` (never enable NVLink multicast unless the user sets 0) and, for multi-node jobs,
``NVSHMEM_BOOTSTRAP_UID_SOCK_IFNAME`` = the interface whose address routes to ``MASTER_ADDR``.
"""
from __future__ import annotations

import ipaddress
import os
import socket
import struct
from typing import List, Optional, Sequence

import torch

from .backend import LibraryHeapBackend
from .device_memory import malloc_tensor, wrap_device_pointer

_NOT_INSTALLED = ("nvshmem4py is not installed: pip install nvshmem4py-cu12 (CUDA 12) or nvshmem4py-cu13 (CUDA 13), "
                  "together with nvidia-nvshmem-cu12/cu13 >=3.3,<3.7")


def import_nvshmem():
    """``(nvshmem.core, nvshmem.bindings)``; raises RuntimeError naming what to install."""
    try:
        import nvshmem.bindings as bindings
        import nvshmem.core as core
    except ImportError as e:
        raise RuntimeError(f"{_NOT_INSTALLED} ({e})") from e
    return core, bindings


def apply_env_defaults() -> None:
    """NVLink multicast stays off unless the user asked for it; multi-node bootstrap picks the right NIC."""
    os.environ.setdefault("NVSHMEM_DISABLE_NVLS", "1")
    if not os.environ.get("NVSHMEM_BOOTSTRAP_UID_SOCK_IFNAME"):
        ifname = interface_for(os.environ.get("MASTER_ADDR", ""))
        if ifname:
            os.environ["NVSHMEM_BOOTSTRAP_UID_SOCK_IFNAME"] = ifname


def _is_loopback(host: str) -> bool:
    if not host or host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _iface_ipv4(name: str) -> Optional[str]:
    """IPv4 address of interface ``name`` (SIOCGIFADDR), or None."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - non-Linux
        return None
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        res = fcntl.ioctl(s.fileno(), 0x8915, struct.pack("256s", name.encode()[:15]))
        return socket.inet_ntoa(res[20:24])
    except OSError:
        return None
    finally:
        s.close()


def interface_for(master_addr: str) -> Optional[str]:
    """The local interface whose address routes to ``master_addr`` (None for loopback / unresolvable)."""
    if _is_loopback(master_addr):
        return None
    try:
        target = socket.gethostbyname(master_addr)
    except OSError:
        return None
    if _is_loopback(target):
        return None
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        s.connect((target, 9))  # UDP connect sends nothing; it only selects the route
        local = s.getsockname()[0]
    except OSError:
        return None
    finally:
        s.close()
    for _, name in socket.if_nameindex():
        if _iface_ipv4(name) == local:
            return name
    return None


#: ``NVSHMEM_STATUS_IS_INITIALIZED`` of ``nvshmemx_init_status_t`` (device_host_transport/nvshmem_constants.h): a
#: status below it means NVSHMEM is not (or no longer) initialised
_STATUS_IS_INITIALIZED = 2


def finalized_elsewhere(core) -> bool:
    """Whether NVSHMEM reports itself no longer initialised (``nvshmem.core.init_status()`` below
    ``IS_INITIALIZED``): someone else finalised it. False where the status cannot be read (an nvshmem4py without
    ``init_status``)."""
    query = getattr(core, "init_status", None)
    if query is None:
        return False
    try:
        status = query()
        return int(getattr(status, "value", status)) < _STATUS_IS_INITIALIZED
    except Exception:  # noqa: BLE001 - an unreadable status: assume initialised, as before
        return False


class NvshmemBackend(LibraryHeapBackend):
    """NVSHMEM host runtime (one PE per process, bound to ``torch.cuda.current_device()``). Exit is clean after the
    script's own ``nvshmem.core.finalize()`` (wrapped while NVSHMEM is up) or a finalize seen through
    ``nvshmem.core.init_status()`` (:class:`~triton_dist.runtime.backend.LibraryHeapBackend`)."""

    name = "nvshmem"

    def __init__(self):
        super().__init__()
        self._device: Optional[int] = None
        self._core = None
        self._bindings = None
        self.module_inits = 0

    # -- lifecycle -----------------------------------------------------------------------------------------------
    def init(self, group) -> None:
        if self._initialized:
            return
        import torch.distributed as dist

        apply_env_defaults()
        core, bindings = import_nvshmem()
        try:
            from cuda.core import Device
        except ImportError:  # older cuda-python
            from cuda.core.experimental import Device
        self._device = torch.cuda.current_device()
        torch.cuda.synchronize()
        rank, nranks = dist.get_rank(group), dist.get_world_size(group)
        uid = core.get_unique_id(empty=(rank != 0))
        objs = [uid]
        dist.broadcast_object_list(objs, src=dist.get_global_rank(group, 0), group=group)
        dev = Device(self._device)
        dev.set_current()
        core.init(device=dev, uid=objs[0], rank=rank, nranks=nranks, initializer_method="uid")
        self._core, self._bindings = core, bindings
        self._initialized = True
        self._hook_library_finalize(core, "finalize")
        dist.barrier(group=group)

    def _finalized_elsewhere(self) -> bool:
        return finalized_elsewhere(self._core)

    def my_pe(self) -> int:
        return int(self._bindings.my_pe())

    def n_pes(self) -> int:
        return int(self._bindings.n_pes())

    # -- memory --------------------------------------------------------------------------------------------------
    def create_tensor(self, shape: Sequence[int], dtype: torch.dtype) -> torch.Tensor:
        return malloc_tensor(lambda nbytes: int(self._bindings.malloc(nbytes)), self._allocs, shape, dtype,
                             self._device, "nvshmem_malloc",
                             ": symmetric heap exhausted? (raise NVSHMEM_SYMMETRIC_SIZE)")

    def peer_tensor(self, tensor: torch.Tensor, pe: int) -> torch.Tensor:
        """View of ``tensor`` (symmetric) on PE ``pe`` through ``nvshmem_ptr``; raises if not load/store reachable."""
        if pe == self.my_pe():
            return tensor
        peer = int(self._bindings.ptr(tensor.data_ptr(), pe))
        if not peer:
            raise RuntimeError(f"nvshmem_ptr returned NULL for PE {pe}: it is not reachable by load/store "
                               f"(different node or no P2P)")
        return wrap_device_pointer(peer, tensor.shape, tensor.dtype, self._device)

    def create_tensors(self, shape, dtype, rank, local_world_size) -> List[torch.Tensor]:
        t = self.create_tensor(shape, dtype)
        first = rank - rank % local_world_size
        return [self.peer_tensor(t, first + i) for i in range(local_world_size)]

    def _base_of(self, tensor: torch.Tensor) -> int:
        base = tensor.untyped_storage().data_ptr()
        if base not in self._allocs:
            raise ValueError("nvshmem_free_tensor_sync: tensor was not created by nvshmem_create_tensor(s) "
                             "(or was already freed); pass this rank's tensor, not a peer view")
        return base

    def free_tensor(self, tensor: torch.Tensor) -> None:
        base = self._base_of(tensor)
        torch.cuda.synchronize()
        self._bindings.free(base)
        del self._allocs[base]
        torch.cuda.synchronize()

    def barrier_all_on_stream(self, stream=None) -> None:
        stream = stream if stream is not None else torch.cuda.current_stream()
        handle = stream.cuda_stream if hasattr(stream, "cuda_stream") else int(stream)
        self._bindings.barrier_all_on_stream(int(handle))

    def _free_allocation(self, ptr: int) -> None:
        self._bindings.free(ptr)

    def _finalize_library(self) -> None:
        self._core.finalize()

    # -- modules -------------------------------------------------------------------------------------------------
    def module_init(self, module_handle: int) -> None:
        """``nvshmemx_cumodule_init`` on a loaded ``CUmodule`` (binds ``nvshmemi_device_state_d`` in it)."""
        status = self._bindings.cumodule_init(int(module_handle))
        if status not in (None, 0):
            raise RuntimeError(f"nvshmemx_cumodule_init failed with status {status}")
        self.module_inits += 1


def libnvshmem_host_path() -> Optional[str]:
    """Path of ``libnvshmem_host.so.3`` from the wheel / NVSHMEM_HOME (for diagnostics)."""
    from .bitcode import nvshmem_lib_dirs

    for _, lib in nvshmem_lib_dirs():
        for name in ("libnvshmem_host.so.3", "libnvshmem_host.so"):
            p = os.path.join(lib, name)
            if os.path.isfile(p):
                return p
    return None


__all__ = ["NvshmemBackend", "import_nvshmem", "finalized_elsewhere", "interface_for", "apply_env_defaults", "wrap_device_pointer",
           "libnvshmem_host_path"]
