"""Which compiled NVIDIA modules need NVSHMEM's module initialisation (``nvshmemx_cumodule_init``), decided from
their PTX: the one rule both the JIT's load hook (``triton_dist.runtime.module_init``) and the AOT tool
(``triton_dist.tools.aot``) apply."""
from __future__ import annotations

import re

__all__ = ["NVSHMEM_STATE_SYMBOL", "ptx_uses_nvshmem"]

#: The symbol every module that links NVSHMEM's device library defines (bound by ``nvshmemx_cumodule_init``).
NVSHMEM_STATE_SYMBOL = "nvshmemi_device_state_d"

_DECL_RE = re.compile(r"^\s*(\.(visible|extern|weak)\s+)?\.(const|global)\b")


def ptx_uses_nvshmem(ptx: str) -> bool:
    """True when some PTX instruction references ``nvshmemi_device_state_d`` (the device state every NVSHMEM device
    function reads). A mere definition of the symbol — what linking the bitcode into a kernel that calls only
    libdevice leaves behind — does not count: such a module never reads the state and needs no init."""
    for line in ptx.splitlines():
        if NVSHMEM_STATE_SYMBOL in line and not _DECL_RE.match(line):
            return True
    return False
