"""Module initialisation: every loaded GPU module that uses a SHMEM device library is initialised once per device
before its first launch -- ``nvshmemx_cumodule_init`` for NVSHMEM, ``rocshmem_hipmodule_init`` for rocSHMEM, through
the active backend's ``module_init`` (:class:`~triton_dist.runtime.backend.ShmemBackend`).

A ``kernel_load_end_hook`` added to Triton's hook chain (:func:`install_hooks`; user hooks keep working) does it.
``import triton_dist`` adds it (``runtime/shmem_link.py``, which also links the library into plain ``triton.jit``
kernels that call it); the first compiled launch of a ``@triton_dist.jit`` kernel and SHMEM bootstrap add it again
(idempotent), should it have been removed. The hook is global: plain ``triton.jit`` kernels that link NVSHMEM /
rocSHMEM are initialised too; any other module costs one scan of its PTX / AMDGCN per load (cached by hash), and
launches never run it.

Which modules: decided by what a module links and uses, never by its name -- its PTX reads NVSHMEM's device state
(``backends.nvidia.shmem_state.ptx_uses_nvshmem``, the rule the AOT tool applies too), its AMDGCN references
rocSHMEM's (``backends.amd.shmem_state.amdgcn_uses_rocshmem``); with no assembly in the module's files, its cubin /
hsaco naming the symbol.
"""
from __future__ import annotations

import threading
from typing import Callable, Dict, Optional, Set, Tuple

from .. import _compat

__all__ = ["install_hooks", "forget_modules", "module_init_count", "module_links_nvshmem", "module_links_rocshmem",
           "module_shmem_library"]

_lock = threading.Lock()
_links_cache: Dict[str, bool] = {}
_rocshmem_links_cache: Dict[str, bool] = {}
_initialised_modules: Set[Tuple[int, int]] = set()
_init_count = 0


def _module_uses(metadata_group: Dict[str, str], cache: Dict[str, bool], cache_key: Optional[str], text_ext: str,
                 text_uses: Callable[[str], bool], binary_ext: str, symbols: Tuple[str, ...]) -> bool:
    """Scan a module's files (``metadata_group``: file name -> path, as Triton passes it to load hooks): any
    ``text_ext`` file for which ``text_uses(text)``; with no such file, any ``binary_ext`` file naming one of
    ``symbols``. Cached by ``cache_key`` in ``cache``."""
    if cache_key is not None and cache_key in cache:
        return cache[cache_key]
    found = False
    paths = list((metadata_group or {}).values())
    texts = [p for p in paths if str(p).endswith(text_ext)]
    binaries = [p for p in paths if str(p).endswith(binary_ext)]
    for p in texts:
        try:
            with open(p, "r", errors="replace") as f:
                if text_uses(f.read()):
                    found = True
                    break
        except OSError:
            continue
    if not texts:
        for p in binaries:
            try:
                with open(p, "rb") as f:
                    data = f.read()
            except OSError:
                continue
            if any(sym.encode() in data for sym in symbols):
                found = True
                break
    if cache_key is not None:
        cache[cache_key] = found
    return found


def module_links_nvshmem(metadata_group: Dict[str, str], cache_key: Optional[str] = None) -> bool:
    """Whether the compiled module described by ``metadata_group`` (file name -> path, as Triton passes it to
    load hooks) uses NVSHMEM's device library: its PTX reads ``nvshmemi_device_state_d`` (``ptx_uses_nvshmem``);
    with no PTX in the group, its cubin mentions the symbol."""
    from ..backends.nvidia.shmem_state import NVSHMEM_STATE_SYMBOL, ptx_uses_nvshmem

    return _module_uses(metadata_group, _links_cache, cache_key, ".ptx", ptx_uses_nvshmem, ".cubin",
                        (NVSHMEM_STATE_SYMBOL, ))


def module_links_rocshmem(metadata_group: Dict[str, str], cache_key: Optional[str] = None) -> bool:
    """Whether the compiled AMD module described by ``metadata_group`` uses rocSHMEM's device library: its
    ``.amdgcn`` assembly references ``ROCSHMEM_CTX_DEFAULT`` / ``ROCSHMEM_TEAM_WORLD`` / ``ROCSHMEM_TEAM_SHARED``
    (``amdgcn_uses_rocshmem``); with no assembly in the group, its ``.hsaco`` names one of them."""
    from ..backends.amd.shmem_state import ROCSHMEM_STATE_SYMBOLS, amdgcn_uses_rocshmem

    return _module_uses(metadata_group, _rocshmem_links_cache, cache_key, ".amdgcn", amdgcn_uses_rocshmem, ".hsaco",
                        ROCSHMEM_STATE_SYMBOLS)


#: library name in messages -> (ShmemBackend.name that can initialise its modules, detector)
_SHMEM_LIBRARIES = {"NVSHMEM": ("nvshmem", module_links_nvshmem), "rocSHMEM": ("rocshmem", module_links_rocshmem)}
_SHMEM_BACKENDS = frozenset(b for b, _ in _SHMEM_LIBRARIES.values())


def module_shmem_library(metadata_group: Dict[str, str], cache_key: Optional[str] = None) -> Optional[str]:
    """``"NVSHMEM"`` / ``"rocSHMEM"`` when the module described by ``metadata_group`` uses that SHMEM device library
    (NVIDIA: PTX / cubin, :func:`module_links_nvshmem`; AMD: AMDGCN / hsaco, :func:`module_links_rocshmem`), else
    None."""
    for lib, (_, detect) in _SHMEM_LIBRARIES.items():
        if detect(metadata_group, cache_key):
            return lib
    return None


def _current_device() -> int:
    return int(_compat.active_driver().get_current_device())


def _on_kernel_load(module, function, name, metadata_group, hash, *, _device: Optional[int] = None) -> None:
    """``kernel_load_end_hook``: initialise modules that use a SHMEM device library, once per module per device —
    ``nvshmemx_cumodule_init`` (NVSHMEM) or ``rocshmem_hipmodule_init`` (rocSHMEM), through the active backend's
    ``module_init``. Before ``initialize_distributed()`` (or under a backend without a device library, the
    simulator) such a load raises RuntimeError, and the kernel is left unloaded so a later launch retries instead
    of running uninitialised."""
    global _init_count
    if module is None:
        return
    lib = module_shmem_library(metadata_group, hash)
    if lib is None:
        return
    from .state import STATE

    backend = STATE.backend
    if backend is None or not backend.is_initialized() or backend.module_init is None:
        _compat.reset_loading_compiled_kernel()
        raise RuntimeError(f"kernel {name!r} links the {lib} device library, but {lib} is not initialised in this "
                           f"process: call triton_dist.utils.initialize_distributed() first")
    wanted = _SHMEM_LIBRARIES[lib][0]
    active = backend.name
    if active in _SHMEM_BACKENDS and active != wanted:
        _compat.reset_loading_compiled_kernel()
        raise RuntimeError(f"kernel {name!r} links the {lib} device library, but this process initialised the "
                           f"{active!r} SHMEM backend, which cannot initialise it (TRITON_DIST_BACKEND={wanted} "
                           f"selects the right one)")
    device = _current_device() if _device is None else _device
    key = (int(module), device)
    with _lock:
        if key in _initialised_modules:
            return
        backend.module_init(int(module))
        _initialised_modules.add(key)
        _init_count += 1


def module_init_count() -> int:
    """How many modules this process has initialised for NVSHMEM / rocSHMEM (tests)."""
    return _init_count


def forget_modules() -> None:
    """Forget initialised modules (called at SHMEM finalize: a new init needs new module inits)."""
    with _lock:
        _initialised_modules.clear()


def install_hooks() -> None:
    """Add the module-init hook to Triton's ``kernel_load_end_hook`` chain (idempotent: the chain adds a hook once;
    user hooks keep working). Called by ``import triton_dist``, every compiled ``@triton_dist.jit`` launch and SHMEM
    bootstrap."""
    _compat.kernel_load_end_hooks().add(_on_kernel_load)
