"""The AMD host runtime: rocSHMEM's host API through ctypes on ``librocshmem.so`` (written to the rocSHMEM docs;
no AMD GPU exists where this project is developed, so this path is untested — see docs/runtime.md).

Bootstrap mirrors NVSHMEM's unique-id method: rank 0 calls ``rocshmem_get_uniqueid``, the bytes are broadcast over
torch.distributed, every rank calls ``rocshmem_set_attr_uniqueid_args`` + ``rocshmem_init_attr(
ROCSHMEM_INIT_WITH_UNIQUEID, &attr)``. Memory: ``rocshmem_malloc`` / ``rocshmem_free`` / ``rocshmem_ptr``.
Library lookup: ``TRITON_DIST_ROCSHMEM_LIB``, ``ROCSHMEM_HOME/lib``, ``ROCM_PATH/lib`` (default /opt/rocm/lib).

Module init: a JIT-loaded code object that uses rocSHMEM's device library has its own copies of the device state
(``ROCSHMEM_CTX_DEFAULT``, ``ROCSHMEM_TEAM_WORLD``, ``ROCSHMEM_TEAM_SHARED``); ``rocshmem_hipmodule_init(hipModule_t,
hipStream_t)`` copies the library's values into them (:meth:`RocshmemBackend.module_init`, called by the load hook
of ``triton_dist.runtime.module_init``), like ``nvshmemx_cumodule_init`` on NVIDIA.
"""
from __future__ import annotations

import ctypes
import os
import sys
from typing import List, Optional, Sequence

import torch

from .backend import LibraryHeapBackend
from .bitcode import rocshmem_lib_dirs
from .device_memory import malloc_tensor, wrap_device_pointer

UNIQUEID_BYTES = 128  # sizeof(rocshmem_uniqueid_t) (opaque)
INIT_ATTR_BYTES = 1024  # generous opaque buffer for rocshmem_init_attr_t
ROCSHMEM_INIT_WITH_UNIQUEID = 1
#: Exported names of ``int rocshmem_hipmodule_init(hipModule_t module, hipStream_t stream = nullptr)`` (0 = success;
#: ``stream == nullptr`` means ``hipStreamPerThread``; the copies are stream-ordered, not waited for). rocSHMEM
#: declares it in ``namespace rocshmem`` with C++ linkage (``include/rocshmem/rocshmem.hpp``), so a stock library
#: exports the Itanium-mangled name; the plain name is tried first for builds / wrappers that export it as C.
HIPMODULE_INIT_SYMBOLS = ("rocshmem_hipmodule_init",
                          "_ZN8rocshmem23rocshmem_hipmodule_initEP12ihipModule_tP12ihipStream_t")
#: Functions load_librocshmem binds when the library has them (else the attribute is None): rocSHMEM releases
#: without ``rocshmem_hipmodule_init`` still load; module_init then says what is missing.
_OPTIONAL_SYMBOLS = {"rocshmem_hipmodule_init": HIPMODULE_INIT_SYMBOLS}
#: (module, function) a script finalises rocSHMEM with itself: the reference's Python binding, whose scripts end
#: with ``pyrocshmem.rocshmem_finalize()``; wrapped while rocSHMEM is up when the script has imported that module
SCRIPT_FINALIZE = ("pyrocshmem", "rocshmem_finalize")


def find_librocshmem() -> str:
    cands = []
    if os.environ.get("TRITON_DIST_ROCSHMEM_LIB"):
        cands.append(os.environ["TRITON_DIST_ROCSHMEM_LIB"])
    cands += [os.path.join(lib, "librocshmem.so") for lib in rocshmem_lib_dirs()]
    for c in cands:
        if os.path.isfile(c):
            return c
    raise RuntimeError(f"librocshmem.so not found (looked in: {', '.join(cands)}); build/install rocSHMEM and set "
                       f"ROCSHMEM_HOME (or TRITON_DIST_ROCSHMEM_LIB)")


def load_librocshmem(path: Optional[str] = None):
    lib = ctypes.CDLL(path or find_librocshmem(), mode=ctypes.RTLD_GLOBAL)
    vp, i, sz = ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t
    sigs = {
        "rocshmem_get_uniqueid": ([vp], i),
        "rocshmem_set_attr_uniqueid_args": ([i, i, vp, vp], i),
        "rocshmem_init_attr": ([ctypes.c_uint, vp], i),
        "rocshmem_finalize": ([], None),
        "rocshmem_my_pe": ([], i),
        "rocshmem_n_pes": ([], i),
        "rocshmem_malloc": ([sz], vp),
        "rocshmem_free": ([vp], None),
        "rocshmem_ptr": ([vp, i], vp),
        "rocshmem_barrier_all": ([], None),
        "rocshmem_hipmodule_init": ([vp, vp], i),
    }
    for name, (args, res) in sigs.items():
        fn = None
        for exported in _OPTIONAL_SYMBOLS.get(name, (name, )):
            try:
                fn = getattr(lib, exported)
                break
            except AttributeError:
                continue
        if fn is None:
            if name not in _OPTIONAL_SYMBOLS:
                raise AttributeError(f"{getattr(lib, '_name', 'librocshmem')}: undefined symbol {name}")
            setattr(lib, name, None)
            continue
        fn.argtypes, fn.restype = args, res
        setattr(lib, name, fn)
    return lib


class RocshmemBackend(LibraryHeapBackend):
    """rocSHMEM host runtime (one PE per process). Exit is clean after the script's own
    ``pyrocshmem.rocshmem_finalize()`` (:data:`SCRIPT_FINALIZE`, wrapped while rocSHMEM is up when the script
    imported ``pyrocshmem`` before :func:`~triton_dist.utils.initialize_distributed`;
    :class:`~triton_dist.runtime.backend.LibraryHeapBackend`). rocSHMEM's host API has no status query (NVSHMEM's
    ``init_status``), so a finalize by another path (e.g. ``rocshmem_finalize`` called through ctypes) is not seen."""

    name = "rocshmem"

    def __init__(self):
        super().__init__()
        self._lib = None
        self._device = None
        self.module_inits = 0

    def init(self, group) -> None:
        if self._initialized:
            return
        import torch.distributed as dist

        self._lib = load_librocshmem()
        self._device = torch.cuda.current_device()
        rank, nranks = dist.get_rank(group), dist.get_world_size(group)
        uid = (ctypes.c_uint8 * UNIQUEID_BYTES)()
        if rank == 0:
            rc = self._lib.rocshmem_get_uniqueid(ctypes.addressof(uid))
            if rc:
                raise RuntimeError(f"rocshmem_get_uniqueid failed ({rc})")
        objs = [bytes(uid)]
        dist.broadcast_object_list(objs, src=dist.get_global_rank(group, 0), group=group)
        ctypes.memmove(uid, objs[0], UNIQUEID_BYTES)
        attr = (ctypes.c_uint8 * INIT_ATTR_BYTES)()
        rc = self._lib.rocshmem_set_attr_uniqueid_args(rank, nranks, ctypes.addressof(uid), ctypes.addressof(attr))
        rc = rc or self._lib.rocshmem_init_attr(ROCSHMEM_INIT_WITH_UNIQUEID, ctypes.addressof(attr))
        if rc:
            raise RuntimeError(f"rocSHMEM unique-id init failed ({rc})")
        self._initialized = True
        module, attr = SCRIPT_FINALIZE
        if callable(getattr(sys.modules.get(module), attr, None)):
            self._hook_library_finalize(sys.modules[module], attr)
        dist.barrier(group=group)

    def my_pe(self) -> int:
        return int(self._lib.rocshmem_my_pe())

    def n_pes(self) -> int:
        return int(self._lib.rocshmem_n_pes())

    def create_tensor(self, shape: Sequence[int], dtype: torch.dtype) -> torch.Tensor:
        return malloc_tensor(lambda nbytes: self._lib.rocshmem_malloc(nbytes), self._allocs, shape, dtype,
                             self._device, "rocshmem_malloc", " (symmetric heap exhausted?)")

    def create_tensors(self, shape, dtype, rank, local_world_size) -> List[torch.Tensor]:
        t = self.create_tensor(shape, dtype)
        first = rank - rank % local_world_size
        out = []
        for pe in range(first, first + local_world_size):
            if pe == rank:
                out.append(t)
                continue
            p = self._lib.rocshmem_ptr(t.data_ptr(), pe)
            if not p:
                raise RuntimeError(f"rocshmem_ptr returned NULL for PE {pe}")
            out.append(wrap_device_pointer(int(p), t.shape, t.dtype, self._device))
        return out

    def free_tensor(self, tensor: torch.Tensor) -> None:
        base = tensor.untyped_storage().data_ptr()
        if base not in self._allocs:
            raise ValueError("tensor was not created by nvshmem_create_tensor(s) or was already freed")
        torch.cuda.synchronize()
        self._lib.rocshmem_free(base)
        del self._allocs[base]

    def barrier_all_on_stream(self, stream=None) -> None:
        # rocSHMEM's host barrier is not stream-ordered: drain the stream first.
        (stream or torch.cuda.current_stream()).synchronize()
        self._lib.rocshmem_barrier_all()

    def module_init(self, module_handle: int) -> None:
        """``rocshmem_hipmodule_init`` on a loaded ``hipModule_t``: copies the library's ``ROCSHMEM_CTX_DEFAULT``,
        ``ROCSHMEM_TEAM_WORLD`` / ``ROCSHMEM_TEAM_SHARED`` (and ``rocshmem::constmem`` when the module has it) into
        the module. The copies go on the current stream; outside graph capture they are waited for (once per
        module), so a launch on any stream sees them."""
        if not self._initialized or self._lib is None:
            raise RuntimeError("rocshmem_hipmodule_init needs an initialised rocSHMEM: call "
                               "triton_dist.utils.initialize_distributed() first")
        fn = getattr(self._lib, "rocshmem_hipmodule_init", None)
        if fn is None:
            raise RuntimeError(f"{getattr(self._lib, '_name', 'librocshmem')} exports no rocshmem_hipmodule_init "
                               f"(looked for {', '.join(HIPMODULE_INIT_SYMBOLS)}): this rocSHMEM cannot initialise "
                               f"JIT-loaded modules that use its device library; use a rocSHMEM that has it")
        capturing = torch.cuda.is_current_stream_capturing()
        stream = int(torch.cuda.current_stream().cuda_stream)
        rc = fn(int(module_handle), stream or None)
        if rc not in (None, 0):
            raise RuntimeError(f"rocshmem_hipmodule_init failed with status {rc} for module {int(module_handle):#x}: "
                               f"the module must define ROCSHMEM_CTX_DEFAULT, ROCSHMEM_TEAM_WORLD and "
                               f"ROCSHMEM_TEAM_SHARED with the library's sizes (rocSHMEM's log names the one that "
                               f"failed)")
        if not capturing:
            torch.cuda.synchronize()  # the null stream handle means hipStreamPerThread inside rocSHMEM
        self.module_inits += 1

    def _free_allocation(self, ptr: int) -> None:
        self._lib.rocshmem_free(ptr)

    def _finalize_library(self) -> None:
        self._lib.rocshmem_finalize()
