"""Host-side API of triton_dist (source-compatible with Triton-distributed's ``triton_dist.utils``).

Everything here runs on the host. SHMEM functions dispatch to the process's backend (``nvshmem``, ``rocshmem`` or
the CPU simulator ``sim``, chosen by :mod:`triton_dist.runtime.select`); calling one before
:func:`initialize_distributed` raises ``RuntimeError("... call initialize_distributed() first")``. Device queries
need a GPU: without one they return a documented sane value or raise ``RuntimeError("... needs a CUDA GPU")``.
Heavy or optional modules (torch.distributed, nvshmem4py, pynvml, cuda-bindings) are imported lazily.
"""
from __future__ import annotations

import atexit
import datetime
import functools
import os
import random
import time
from typing import List, Optional

import torch

from .runtime import module_init
from .runtime import select as _select
from .runtime.state import STATE, require_backend, shmem_initialized

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
    "get_shmem_backend", "perf_func", "launch_cooperative_grid_options", "is_fp8_dtype",
]


# ----------------------------------------------------------------------------------------------------------------
# environment helpers
# ----------------------------------------------------------------------------------------------------------------
_TRUE = ("1", "true", "on", "yes")
_FALSE = ("0", "false", "off", "no")


def get_bool_env(name: str, default: bool) -> bool:
    """``True`` for 1/true/on/yes, ``False`` for 0/false/off/no (any case); ``default`` when unset. Any other value
    raises ValueError naming the variable and the accepted values."""
    value = os.environ.get(name)
    if value is None or value.strip() == "":
        return default
    v = value.strip().lower()
    if v in _TRUE:
        return True
    if v in _FALSE:
        return False
    raise ValueError(f"{name}={value!r} is not a boolean: use one of 1/0, true/false, on/off, yes/no")


def get_int_env(name: str, default: int) -> int:
    """The integer value of ``name``; ``default`` when unset. A non-integer raises ValueError naming it."""
    value = os.environ.get(name)
    if value is None or value.strip() == "":
        return default
    try:
        return int(value.strip(), 0)
    except ValueError:
        raise ValueError(f"{name}={value!r} is not an integer") from None


# ----------------------------------------------------------------------------------------------------------------
# platform queries
# ----------------------------------------------------------------------------------------------------------------
def is_cuda() -> bool:
    """True when torch is a CUDA build and sees an NVIDIA GPU."""
    return _select._torch_gpu_kind() == "cuda"


def is_hip() -> bool:
    """True when torch is a ROCm build and sees an AMD GPU."""
    return _select._torch_gpu_kind() == "hip"


def get_shmem_backend() -> str:
    """``"nvshmem"``, ``"rocshmem"`` or ``"sim"`` — this process's backend (see runtime/select.py)."""
    return _select.backend_name()


def _need_gpu(what: str):
    if not torch.cuda.is_available():
        raise RuntimeError(f"{what} needs a CUDA GPU (none is visible to torch)")


def has_tma() -> bool:
    """True on NVIDIA GPUs with compute capability >= 9 (Hopper+); False elsewhere (also without a GPU)."""
    return is_cuda() and torch.cuda.get_device_capability()[0] >= 9


def _nvml():
    try:
        import pynvml

        pynvml.nvmlInit()
        return pynvml
    except Exception:
        return None


def _nvml_handle(nvml, device_id: int):
    """NVML handle of torch device ``device_id`` (matched by PCI bus id: CUDA_VISIBLE_DEVICES may renumber)."""
    props = torch.cuda.get_device_properties(device_id)
    bus = f"{props.pci_domain_id:08x}:{props.pci_bus_id:02x}:{props.pci_device_id:02x}.0"
    try:
        return nvml.nvmlDeviceGetHandleByPciBusId(bus.encode())
    except Exception:
        return nvml.nvmlDeviceGetHandleByIndex(device_id)


def _cudart():
    try:
        from cuda.bindings import runtime
        return runtime
    except ImportError:
        try:
            from cuda import cudart  # old cuda-python
            return cudart
        except ImportError:
            return None


def _cudart_attr(attr_name: str, device_id: int) -> Optional[int]:
    rt = _cudart()
    if rt is None:
        return None
    err, value = rt.cudaDeviceGetAttribute(getattr(rt.cudaDeviceAttr, attr_name), device_id)
    return int(value) if int(err) == 0 else None


def get_numa_node(device_id: int = 0) -> int:
    """NUMA node of GPU ``device_id`` (from sysfs by PCI address; 0 when the platform reports none)."""
    _need_gpu("get_numa_node")
    props = torch.cuda.get_device_properties(device_id)
    bus = f"{props.pci_domain_id:04x}:{props.pci_bus_id:02x}:{props.pci_device_id:02x}.0"
    try:
        with open(f"/sys/bus/pci/devices/{bus}/numa_node") as f:
            return max(int(f.read().strip()), 0)
    except (OSError, ValueError):
        return 0


def get_max_gpu_clock_rate_in_khz(device_id: int = 0) -> int:
    """Maximum SM clock of GPU ``device_id`` in kHz (NVML, else the CUDA runtime attribute)."""
    _need_gpu("get_max_gpu_clock_rate_in_khz")
    nvml = _nvml()
    if nvml is not None:
        try:
            return int(nvml.nvmlDeviceGetMaxClockInfo(_nvml_handle(nvml, device_id), nvml.NVML_CLOCK_SM)) * 1000
        except Exception:
            pass
    value = _cudart_attr("cudaDevAttrClockRate", device_id)
    if value is None:
        raise RuntimeError("get_max_gpu_clock_rate_in_khz needs pynvml (nvidia-ml-py) or cuda-bindings")
    return value


def get_current_gpu_clock_rate_in_khz(device_id: int = 0) -> int:
    """Current SM clock of GPU ``device_id`` in kHz (NVML); the maximum clock when NVML is unavailable."""
    _need_gpu("get_current_gpu_clock_rate_in_khz")
    nvml = _nvml()
    if nvml is not None:
        try:
            return int(nvml.nvmlDeviceGetClockInfo(_nvml_handle(nvml, device_id), nvml.NVML_CLOCK_SM)) * 1000
        except Exception:
            pass
    return get_max_gpu_clock_rate_in_khz(device_id)


def get_device_max_shared_memory_size(device_id: int = 0) -> int:
    """Opt-in maximum shared memory per block of GPU ``device_id``, in bytes."""
    _need_gpu("get_device_max_shared_memory_size")
    props = torch.cuda.get_device_properties(device_id)
    value = getattr(props, "shared_memory_per_block_optin", None)
    if value:
        return int(value)
    value = _cudart_attr("cudaDevAttrMaxSharedMemoryPerBlockOptin", device_id)
    if value is None:
        raise RuntimeError("get_device_max_shared_memory_size: neither torch nor cuda-bindings report it")
    return value


@functools.lru_cache(maxsize=None)
def has_fullmesh_nvlink() -> bool:
    """True when every pair of visible GPUs is connected by NVLink (NVML); without NVML, when every pair has
    peer access (an approximation). One GPU: True. No GPU: False."""
    if not is_cuda():
        return False
    n = torch.cuda.device_count()
    if n <= 1:
        return True
    nvml = _nvml()
    if nvml is not None and hasattr(nvml, "nvmlDeviceGetP2PStatus"):
        try:
            handles = [_nvml_handle(nvml, i) for i in range(n)]
            for i in range(n):
                for j in range(i + 1, n):
                    status = nvml.nvmlDeviceGetP2PStatus(handles[i], handles[j], nvml.NVML_P2P_CAPS_INDEX_NVLINK)
                    if status != nvml.NVML_P2P_STATUS_OK:
                        return False
            return True
        except Exception:
            pass
    return all(torch.cuda.can_device_access_peer(i, j) for i in range(n) for j in range(n) if i != j)


@functools.lru_cache(maxsize=None)
def supports_p2p_native_atomic() -> bool:
    """True when GPU 0 and 1 support native atomics over P2P (one GPU: True; no GPU: False)."""
    if not is_cuda():
        return False
    if torch.cuda.device_count() <= 1:
        return True
    rt = _cudart()
    if rt is None:
        return all(torch.cuda.can_device_access_peer(i, j) for i, j in ((0, 1), (1, 0)))
    rt.cudaFree(0)
    err, support = rt.cudaDeviceGetP2PAttribute(rt.cudaDeviceP2PAttr.cudaDevP2PAttrNativeAtomicSupported, 0, 1)
    return int(err) == 0 and int(support) == 1


def is_nvshmem_multimem_supported() -> bool:
    """Whether NVSHMEM multicast (NVLS) objects can be used: False whenever ``NVSHMEM_DISABLE_NVLS`` is set to a
    true value — and also when it is unset, because triton_dist sets it to 1 by default — or
    ``NVSHMEM_DISABLE_CUDA_VMM`` is true; otherwise it needs sm_90+, the driver's multicast attribute and NVLink
    between all GPUs."""
    if get_bool_env("NVSHMEM_DISABLE_NVLS", True) or get_bool_env("NVSHMEM_DISABLE_CUDA_VMM", False):
        return False
    if not is_cuda() or torch.cuda.get_device_capability()[0] < 9 or not has_fullmesh_nvlink():
        return False
    try:
        from cuda.bindings import driver
    except ImportError:
        return False
    driver.cuInit(0)
    err, dev = driver.cuDeviceGet(torch.cuda.current_device())
    if int(err) != 0:
        return False
    err, value = driver.cuDeviceGetAttribute(driver.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_MULTICAST_SUPPORTED, dev)
    return int(err) == 0 and int(value) == 1


# ----------------------------------------------------------------------------------------------------------------
# seeds, printing, random data
# ----------------------------------------------------------------------------------------------------------------
def init_seed(seed: int = 0) -> None:
    """Seed Python, numpy and torch (CPU and all GPUs) with ``seed``; make cuDNN deterministic."""
    import numpy as np

    random.seed(seed)
    np.random.seed(seed % (2**32))
    torch.manual_seed(seed)
    if torch.cuda.is_available():
        torch.cuda.manual_seed_all(seed)
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False


def _env_rank() -> int:
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        return dist.get_rank()
    return int(os.environ.get("RANK", 0))


def _env_world() -> int:
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        return dist.get_world_size()
    return int(os.environ.get("WORLD_SIZE", 1))


def dist_print(*args, allowed_ranks=(0, ), prefix: bool = False, need_sync: bool = False, **kwargs) -> None:
    """``print`` on the ranks in ``allowed_ranks`` (a list, or ``"all"``). ``prefix`` prepends ``[rank:N]``.
    ``need_sync`` makes the allowed ranks print in order, with a barrier over the default group before each (every
    rank must then call it)."""
    rank, world = _env_rank(), _env_world()
    if isinstance(allowed_ranks, str):
        if allowed_ranks != "all":
            raise ValueError(f"dist_print: allowed_ranks={allowed_ranks!r}: pass a list of ranks or 'all'")
        allowed_ranks = list(range(world))
    if isinstance(allowed_ranks, int):
        allowed_ranks = [allowed_ranks]
    for r in allowed_ranks:
        if need_sync:
            import torch.distributed as dist

            if dist.is_available() and dist.is_initialized():
                dist.barrier()
        if rank == r:
            if prefix:
                print(f"[rank:{rank}]", end="")
            print(*args, **kwargs)


def is_fp8_dtype(dtype: torch.dtype) -> bool:
    return dtype.is_floating_point and torch.empty((), dtype=dtype).element_size() == 1


def rand_tensor(shape, dtype: torch.dtype, device="cuda") -> torch.Tensor:
    """Random tensor: floats uniform in [-1, 1) (fp8 via bf16); signed ints uniform over their full range
    (int64: over the int32 range), unsigned ints over [0, max], bool fair coin."""
    if isinstance(shape, int):
        shape = (shape, )
    if dtype.is_floating_point:
        if is_fp8_dtype(dtype):
            return (torch.rand(shape, dtype=torch.bfloat16, device=device) * 2 - 1).to(dtype)
        return torch.rand(shape, dtype=dtype, device=device) * 2 - 1
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, device=device).bool()
    if dtype in _WIDE_UNSIGNED:
        return torch.randint(0, 2**31, shape, dtype=torch.int64, device=device).to(dtype)
    info = torch.iinfo(dtype)
    lo, hi = (info.min, info.max) if dtype != torch.int64 else (-2**31, 2**31 - 1)
    return torch.randint(lo, hi + 1, shape, dtype=torch.int64, device=device).to(dtype)


_WIDE_UNSIGNED = tuple(getattr(torch, n) for n in ("uint32", "uint64") if hasattr(torch, n))


def check_signal_tensor(t: torch.Tensor, what: str = "signal") -> torch.Tensor:
    """Ops that take SHMEM signals call this: signals must be int64 (``NVSHMEM_SIGNAL_DTYPE``) tensors."""
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{what} must be a torch.Tensor of dtype {NVSHMEM_SIGNAL_DTYPE}, got {type(t).__name__}")
    if t.dtype != NVSHMEM_SIGNAL_DTYPE:
        raise ValueError(f"{what} tensor has dtype {t.dtype}; SHMEM signals must be {NVSHMEM_SIGNAL_DTYPE} "
                         f"(create it with nvshmem_create_tensor(shape, NVSHMEM_SIGNAL_DTYPE))")
    return t


def perf_func(func, iters: int, warmup_iters: int):
    """Run ``func`` ``warmup_iters`` + ``iters`` times; returns ``(last output, mean ms per iteration)`` (CUDA events
    on GPU, wall clock otherwise)."""
    for _ in range(warmup_iters):
        out = func()
    if torch.cuda.is_available():
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        start.record()
        for _ in range(iters):
            out = func()
        stop.record()
        torch.cuda.synchronize()
        return out, start.elapsed_time(stop) / max(iters, 1)
    t0 = time.perf_counter()
    out = None
    for _ in range(iters):
        out = func()
    return out, (time.perf_counter() - t0) * 1e3 / max(iters, 1)


def launch_cooperative_grid_options() -> dict:
    """Compile options for a cooperative-grid launch (Triton >= 3.3)."""
    return {"launch_cooperative_grid": True}


# ----------------------------------------------------------------------------------------------------------------
# bootstrap / teardown
# ----------------------------------------------------------------------------------------------------------------
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
        from . import _compat

        _compat.set_interpret(True)
    STATE.local_world_size = local_world
    if not dist.is_initialized():
        if "MASTER_ADDR" not in os.environ or "MASTER_PORT" not in os.environ:
            if world != 1:
                raise RuntimeError("MASTER_ADDR / MASTER_PORT are not set: launch with torchrun (or set them)")
            from .runtime.sim.launch import free_port

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


def init_nvshmem_by_torch_process_group(pg) -> None:
    """Bootstrap NVSHMEM over the existing torch process group ``pg`` (unique-id method); the GPU must already be
    set (``torch.cuda.set_device``). No-op if SHMEM is already initialised."""
    _init_shmem("nvshmem", pg)


def init_rocshmem_by_torch_process_group(pg) -> None:
    """Bootstrap rocSHMEM over the existing torch process group ``pg`` (unique-id method)."""
    _init_shmem("rocshmem", pg)


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
