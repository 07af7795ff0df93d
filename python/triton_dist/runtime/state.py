"""Process-wide runtime state shared by ``triton_dist.utils`` and the module-init hook (``runtime/module_init.py``)."""
from __future__ import annotations

from typing import Optional


class RuntimeState:
    """What ``initialize_distributed`` set up in this process.

    ``backend``: the active :class:`ShmemBackend` once SHMEM is initialised (else None). ``group``: the torch
    process group SHMEM was bootstrapped over. ``created_process_group``: whether triton_dist created the default
    process group (and so destroys it in ``finalize_distributed``). ``local_world_size``: ranks on this node.
    ``ranks_per_gpu``: the most ranks of the group that share one GPU (1: a GPU each; set when SHMEM starts on a GPU).
    ``gpu_ranks``: ``{"host/gpu id": [ranks]}``, which ranks use which GPU (empty on the simulator).
    """

    def __init__(self):
        self.backend = None
        self.group = None
        self.created_process_group = False
        self.local_world_size: Optional[int] = None
        self.atexit_registered = False
        self.ranks_per_gpu = 1
        self.gpu_ranks: dict = {}


STATE = RuntimeState()

NOT_INITIALIZED = "triton_dist SHMEM is not initialised: call initialize_distributed() first"


def require_backend():
    """The active backend; raises ``RuntimeError("... call initialize_distributed() first")`` before init."""
    if STATE.backend is None or not STATE.backend.is_initialized():
        raise RuntimeError(NOT_INITIALIZED)
    return STATE.backend


def shmem_initialized() -> bool:
    return STATE.backend is not None and STATE.backend.is_initialized()
