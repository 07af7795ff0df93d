"""Process bootstrap and teardown: the launcher's variables, the GPU, the torch process group, the SHMEM backend
(which also adds the module-init hook, ``runtime/module_init.py``), and finalisation at exit.

Internal: the public names are re-exported by :mod:`triton_dist.utils` (import them from there).
"""
from __future__ import annotations

import atexit
import datetime
import os
from typing import Optional

import torch

from . import module_init
from . import select as _select
from .env import get_int_env
from .state import STATE, shmem_initialized
from .testing import init_seed

__all__ = ["initialize_distributed", "init_nvshmem_by_torch_process_group", "init_rocshmem_by_torch_process_group",
           "finalize_distributed", "is_shmem_initialized", "get_triton_dist_world",
           "get_triton_dist_local_world_size"]


def _read_launch_env(name: str):
    rank = get_int_env("RANK", 0)
    world = get_int_env("WORLD_SIZE", 1)
    local_rank = get_int_env("LOCAL_RANK", rank)
    if "LOCAL_WORLD_SIZE" in os.environ:
        local_world = get_int_env("LOCAL_WORLD_SIZE", world)
    elif name in ("nvshmem", "rocshmem"):
        local_world = min(world, max(torch.cuda.device_count(), 1))
    else:
        local_world = world
    if world < 1 or not 0 <= rank < world:
        raise ValueError(f"RANK={rank} / WORLD_SIZE={world}: need 0 <= RANK < WORLD_SIZE")
    if local_world < 1 or not 0 <= local_rank < local_world:
        raise ValueError(f"LOCAL_RANK={local_rank} / LOCAL_WORLD_SIZE={local_world}: need 0 <= LOCAL_RANK < "
                         f"LOCAL_WORLD_SIZE")
    return rank, world, local_rank, local_world


def _register_atexit():
    if not STATE.atexit_registered:
        atexit.register(_finalize_at_exit)
        STATE.atexit_registered = True


def _finalize_at_exit():
    try:
        finalize_distributed()
    except Exception:  # never turn a clean exit into a traceback
        pass


def initialize_distributed(seed: Optional[int] = None, initialize_shmem: bool = True):
    """Set up this rank: read RANK / LOCAL_RANK / WORLD_SIZE / LOCAL_WORLD_SIZE (torchrun's variables; LOCAL_WORLD_SIZE
    defaults to min(WORLD_SIZE, visible GPUs), or WORLD_SIZE on the simulator), bind the GPU LOCAL_RANK, create the
    default process group (``cpu:gloo,cuda:nccl`` on GPUs, ``gloo`` on the simulator) unless one exists, seed RNGs
    with ``seed`` (default: the rank), and bootstrap SHMEM over it when ``initialize_shmem``. Returns the
    tensor-parallel group: the world group. Idempotent: a second call returns the same group."""
    import torch.distributed as dist

    name = _select.backend_name()
    if STATE.group is not None and (not initialize_shmem or shmem_initialized()):
        return STATE.group
    rank, world, local_rank, local_world = _read_launch_env(name)
    gpu = name in ("nvshmem", "rocshmem")
    if gpu:
        n = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if n < local_world or local_rank >= n:
            raise RuntimeError(f"LOCAL_WORLD_SIZE={local_world} (LOCAL_RANK={local_rank}) needs {local_world} visible "
                               f"GPUs on this node but torch sees {n}; lower --nproc_per_node or fix "
                               f"CUDA_VISIBLE_DEVICES")
        torch.cuda.set_device(local_rank)
    else:
        from .. import _compat

        _compat.set_interpret(True)
    STATE.local_world_size = local_world
    if not dist.is_initialized():
        if "MASTER_ADDR" not in os.environ or "MASTER_PORT" not in os.environ:
            if world != 1:
                raise RuntimeError("MASTER_ADDR / MASTER_PORT are not set: launch with torchrun (or set them)")
            from .sim.launch import free_port

            os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
            os.environ.setdefault("MASTER_PORT", str(free_port()))
        kwargs = dict(backend="cpu:gloo,cuda:nccl" if name == "nvshmem" else
                      ("cpu:gloo,cuda:nccl" if name == "rocshmem" else "gloo"), rank=rank, world_size=world,
                      timeout=datetime.timedelta(seconds=get_int_env("TRITON_DIST_PG_TIMEOUT_S", 1800)))
        if gpu:
            kwargs["device_id"] = torch.device("cuda", local_rank)
        dist.init_process_group(**kwargs)
        STATE.created_process_group = True
    group = dist.group.WORLD
    STATE.group = group
    _register_atexit()
    dist.barrier(group=group)
    init_seed(seed if seed is not None else rank)
    if initialize_shmem:
        _init_shmem(name, group)
    return group


def _init_shmem(name: str, group) -> None:
    if shmem_initialized():
        return
    backend = _select.make_backend(name)
    backend.init(group)
    STATE.backend = backend
    STATE.group = group
    if STATE.local_world_size is None:
        STATE.local_world_size = get_int_env("LOCAL_WORLD_SIZE", group.size() if hasattr(group, "size") else 1)
    module_init.install_hooks()
    _register_atexit()


def _init_shmem_by_group(requested: str, pg) -> None:
    """``requested``'s SHMEM over ``pg``, or the simulator's when this process runs on the simulator (the selected
    backend is ``sim``: ``TRITON_DIST_BACKEND=sim`` or no GPU), with the interpreter on as
    :func:`initialize_distributed` would set it: scripts written for the reference system call
    ``init_nvshmem_by_torch_process_group`` themselves, and NVSHMEM cannot start without a GPU."""
    name = _select.backend_name()
    if name == "sim":
        from .. import _compat

        _compat.set_interpret(True)
        _init_shmem("sim", pg)
    else:
        _init_shmem(requested, pg)


def init_nvshmem_by_torch_process_group(pg) -> None:
    """Bootstrap NVSHMEM over the existing torch process group ``pg`` (unique-id method); the GPU must already be
    set (``torch.cuda.set_device``). On the simulator (``TRITON_DIST_BACKEND=sim`` or no GPU) the simulator's SHMEM
    is bootstrapped over ``pg`` instead. No-op if SHMEM is already initialised."""
    _init_shmem_by_group("nvshmem", pg)


def init_rocshmem_by_torch_process_group(pg) -> None:
    """Bootstrap rocSHMEM over the existing torch process group ``pg`` (unique-id method); the simulator's SHMEM on
    the simulator, as :func:`init_nvshmem_by_torch_process_group`."""
    _init_shmem_by_group("rocshmem", pg)


def is_shmem_initialized() -> bool:
    return shmem_initialized()


def finalize_distributed() -> None:
    """Free every symmetric tensor triton_dist allocated, finalize SHMEM, and destroy the process group if
    triton_dist created it. Idempotent; also runs at interpreter exit if the user forgot."""
    backend, STATE.backend = STATE.backend, None
    try:
        if backend is not None:
            module_init.forget_modules()
            backend.finalize()
    finally:
        STATE.group = None
        if STATE.created_process_group:
            STATE.created_process_group = False
            import torch.distributed as dist

            if dist.is_available() and dist.is_initialized():
                dist.destroy_process_group()


def get_triton_dist_world():
    """The group SHMEM was bootstrapped over (None before init)."""
    return STATE.group


def get_triton_dist_local_world_size() -> Optional[int]:
    return STATE.local_world_size
