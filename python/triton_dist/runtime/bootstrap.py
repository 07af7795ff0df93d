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
from . import shared_gpu
from .env import get_int_env, process_group_layout
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
        local_world = min(world, max(torch.cuda.device_count(), 1) * shared_gpu.ranks_per_gpu())
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


def process_group_backend(name: str, per_gpu: int) -> str:
    """The torch process-group backend :func:`initialize_distributed` creates: ``gloo`` on the simulator and where
    ranks share a GPU (NCCL refuses two ranks on one GPU), else ``cpu:gloo,cuda:nccl``."""
    if name not in ("nvshmem", "rocshmem") or per_gpu > 1:
        return "gloo"
    return "cpu:gloo,cuda:nccl"


def initialize_distributed(seed: Optional[int] = None, initialize_shmem: bool = True):
    """Set up this rank: read RANK / LOCAL_RANK / WORLD_SIZE / LOCAL_WORLD_SIZE (torchrun's variables; LOCAL_WORLD_SIZE
    defaults to min(WORLD_SIZE, visible GPUs x ranks per GPU), or WORLD_SIZE on the simulator), bind this rank's GPU
    (``LOCAL_RANK // TRITON_DIST_RANKS_PER_GPU``: one rank per GPU by default; see
    :mod:`triton_dist.runtime.shared_gpu` for ranks that share a GPU), create the default process group
    (``cpu:gloo,cuda:nccl`` on GPUs, ``gloo`` on the simulator and where ranks share a GPU) unless one exists, seed
    RNGs with ``seed`` (default: the rank), and bootstrap SHMEM over it when ``initialize_shmem`` (where ranks share
    a GPU, after checking that their SM shares let all their kernels be resident at once). Returns the
    tensor-parallel group: the world group. Idempotent: a second call returns the same group."""
    import torch.distributed as dist

    name = _select.backend_name()
    if STATE.group is not None and (not initialize_shmem or shmem_initialized()):
        return STATE.group
    rank, world, local_rank, local_world = _read_launch_env(name)
    gpu = name in ("nvshmem", "rocshmem")
    per_gpu = shared_gpu.ranks_per_gpu() if gpu else 1
    if gpu:
        if per_gpu > 1 and name == "rocshmem":
            raise RuntimeError(f"{shared_gpu.RANKS_PER_GPU_ENV}={per_gpu}: ranks that share a GPU need CUDA MPS "
                               f"(NVIDIA); ROCm has no equivalent here: run one rank per GPU")
        n = torch.cuda.device_count() if torch.cuda.is_available() else 0
        device = shared_gpu.device_for_local_rank(local_rank, local_world, n, per_gpu)
        torch.cuda.set_device(device)
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
        backend = process_group_backend(name, per_gpu)
        kwargs = dict(backend=backend, rank=rank, world_size=world,
                      timeout=datetime.timedelta(seconds=get_int_env("TRITON_DIST_PG_TIMEOUT_S", 1800)))
        if gpu and "nccl" in backend:
            kwargs["device_id"] = torch.device("cuda", torch.cuda.current_device())
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


def _check_shared_gpus(name: str, group) -> None:
    """On a GPU backend: learn which ranks of ``group`` share a GPU (every rank's :func:`shared_gpu.local_gpu_record`
    over the group) and, unless ``TRITON_DIST_SM_SHARE_CHECK=0``, refuse SM shares that cannot keep all their kernels
    resident (:func:`shared_gpu.check_sm_shares`) -- before SHMEM starts or any kernel is launched. Records the
    layout in ``STATE.gpu_ranks`` / ``STATE.ranks_per_gpu``."""
    import torch.distributed as dist

    if name not in ("nvshmem", "rocshmem"):
        return
    mine = shared_gpu.local_gpu_record(dist.get_rank(), torch.cuda.current_device())
    records = [None] * dist.get_world_size(group)
    dist.all_gather_object(records, mine, group=group)
    if shared_gpu.share_check_enabled():
        shared_gpu.check_sm_shares(records)
    STATE.gpu_ranks = shared_gpu.ranks_by_gpu(records)
    STATE.ranks_per_gpu = max(len(v) for v in STATE.gpu_ranks.values())


def _init_shmem(name: str, group) -> None:
    if shmem_initialized():
        return
    _check_shared_gpus(name, group)
    backend = _select.make_backend(name)
    backend.init(group)
    STATE.backend = backend
    STATE.group = group
    if STATE.local_world_size is None:  # bootstrapped over the caller's group: the group's own node size
        STATE.local_world_size = process_group_layout(group)[3]
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
        STATE.gpu_ranks, STATE.ranks_per_gpu = {}, 1
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
