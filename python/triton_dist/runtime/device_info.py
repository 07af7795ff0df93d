"""GPU and platform queries (torch, NVML through ``pynvml``, the CUDA runtime / driver through ``cuda-bindings``).

Each needs a GPU where it says so: without one it returns the documented value or raises ``RuntimeError("... needs a
CUDA GPU")``. NVML and cuda-bindings are optional and imported lazily. Internal: the public names are re-exported by
:mod:`triton_dist.utils` (import them from there).
"""
from __future__ import annotations

import functools
import numbers
import os
import warnings
from typing import Optional

import torch

from . import select as _select
from .env import get_bool_env

__all__ = ["is_cuda", "is_hip", "has_tma", "get_numa_node", "get_max_gpu_clock_rate_in_khz",
           "get_current_gpu_clock_rate_in_khz", "get_device_max_shared_memory_size", "has_fullmesh_nvlink",
           "supports_p2p_native_atomic", "is_nvshmem_multimem_supported", "CUDA_CHECK", "requires_p2p_native_atomic",
           "rank_sm_count"]

#: class names of the status enums of cuda-python (``cuda.bindings.driver.CUresult``,
#: ``cuda.bindings.runtime.cudaError_t``; the same names in the older ``cuda.cuda`` / ``cuda.cudart``)
_CUDA_STATUS_TYPES = ("CUresult", "cudaError_t")


def _cuda_error_text(err) -> str:
    """``cuGetErrorName`` / ``cudaGetErrorString`` of ``err`` when cuda-bindings is importable, else ''."""
    try:
        if type(err).__name__ == "CUresult":
            from cuda.bindings import driver
            res = driver.cuGetErrorName(err)
        else:
            from cuda.bindings import runtime
            res = runtime.cudaGetErrorString(err)
    except Exception:
        return ""
    text = res[-1] if isinstance(res, tuple) else res
    return text.decode(errors="replace") if isinstance(text, bytes) else str(text)


def CUDA_CHECK(err):
    """Check the status of a cuda-python call (the name and behaviour of Triton-distributed's ``CUDA_CHECK``).

    ``err`` is a driver ``CUresult`` or a runtime ``cudaError_t``: a status other than success (0) raises
    ``RuntimeError("Cuda Error: <status>: <error name>")``; success returns None. As a convenience ``err`` may also
    be a call's whole result tuple ``(status, *values)``: the status is checked the same way and the values are
    returned (none: None, one: the value, more: a tuple), e.g. ``dev = CUDA_CHECK(driver.cuDeviceGet(0))``.
    Anything else (a plain int, None, ...) raises ``RuntimeError("Unknown error type: ...")``, as the reference
    does. Needs no GPU and no import of cuda-bindings (the status is recognised by its enum class name)."""
    if isinstance(err, tuple):
        if not err:
            raise RuntimeError("CUDA_CHECK: got an empty tuple; expected a cuda-python result (status, *values)")
        CUDA_CHECK(err[0])
        values = err[1:]
        if not values:
            return None
        return values[0] if len(values) == 1 else values
    if type(err).__name__ not in _CUDA_STATUS_TYPES or not isinstance(getattr(err, "value", err), numbers.Integral):
        raise RuntimeError(f"Unknown error type: {err!r} ({type(err).__name__}); CUDA_CHECK expects a cuda-python "
                           f"CUresult or cudaError_t (or a call's result tuple)")
    if int(getattr(err, "value", err)) != 0:
        name = getattr(err, "name", None)
        status = f"{type(err).__name__}.{name} ({int(getattr(err, 'value', err))})" if name else str(err)
        text = _cuda_error_text(err)
        raise RuntimeError(f"Cuda Error: {status}: {text}" if text else f"Cuda Error: {status}")
    return None



def is_cuda() -> bool:
    """True when torch is a CUDA build and sees an NVIDIA GPU."""
    return _select._torch_gpu_kind() == "cuda"


def is_hip() -> bool:
    """True when torch is a ROCm build and sees an AMD GPU."""
    return _select._torch_gpu_kind() == "hip"


def _need_gpu(what: str):
    if not torch.cuda.is_available():
        raise RuntimeError(f"{what} needs a CUDA GPU (none is visible to torch)")


def has_tma() -> bool:
    """True on NVIDIA GPUs with compute capability >= 9 (Hopper+); False elsewhere (also without a GPU)."""
    return is_cuda() and torch.cuda.get_device_capability()[0] >= 9


def rank_sm_count(device, simulated: int = 1) -> int:
    """The SMs this rank's grids may fill on CUDA ``device`` while every other rank on the same GPU fills its own:
    ``multi_processor_count`` of its context (the whole GPU, or an MPS limit) divided by the ranks that share the
    GPU (:func:`triton_dist.runtime.shared_gpu.ranks_on_this_gpu`; 1 at one rank per GPU), less
    ``TRITON_DIST_SM_MARGIN``. Ranks that share a GPU run as clients of one MPS server, which puts every client on
    the same SMs (measured: :mod:`triton_dist.runtime.shared_gpu`), so only grids that together fit the one pool are
    all resident at once. Everything that sizes a grid to "one program per SM" (collectives, overlapped GEMMs, the
    fused MoE and attention kernels, cooperative launches, mega-kernel workers) reads this. On a device that is not
    CUDA (the simulator, where a program is a thread) ``simulated``: the caller's choice of how many programs a
    persistent grid gets there (1 for the collectives and the mega kernel's workers, 2 for the GEMM so its tile
    loop runs with more than one program)."""
    if torch.device(device).type != "cuda":
        return simulated
    from .shared_gpu import ranks_on_this_gpu

    sms = int(torch.cuda.get_device_properties(device).multi_processor_count)
    sharing = ranks_on_this_gpu()
    return max(1, sms // sharing - sm_margin(sharing))


def waiting_grid_programs(device, per_sm: int, simulated: int = 1) -> int:
    """Most programs for a grid whose programs spin-wait for peers and need no co-residency, ``per_sm`` per SM of
    this rank's share (:func:`rank_sm_count`) where the GPU is this rank's alone, but one per SM of the share where
    ranks share a GPU. There the hardware spreads a grid over every SM of the GPU: more programs than the share put
    a waiting program on every SM, and a peer's kernel that needs a whole SM's registers or shared memory (a cuBLAS
    GEMM: 384 threads holding most of the register file) finds none, while the waiting programs wait for that very
    kernel's result (2026-12-06: gemm_rs ``chunked`` hung at 2 ranks on one H100, one rank's 256 waiting programs
    spread over the 132 SMs, and the peer's push, which follows its cuBLAS GEMM, never landed). On a device that is
    not CUDA: ``per_sm`` x ``simulated``. (:func:`programs_within_share` of ``per_sm`` x the share.)"""
    return programs_within_share(device, per_sm * rank_sm_count(device, simulated=simulated))


def programs_within_share(device, programs: int) -> int:
    """``programs`` (a grid size the caller was given: a collective context's ``num_programs``, the mega kernel's
    ``num_workers``, the AG+GEMM's push programs) where the GPU is this rank's alone or ``device`` is not CUDA, but at
    most this rank's share (:func:`rank_sm_count`) where ranks share a GPU. Such grids spin on the peers' signals,
    and there a grid larger than the share puts a waiting program on (nearly) every SM of the GPU: the peer's kernel
    that would raise those signals, or a cuBLAS GEMM it runs first, finds no SM with room, and the wait never ends
    (the hang :func:`waiting_grid_programs` avoids for the grids sized here)."""
    programs = int(programs)
    if torch.device(device).type != "cuda":
        return programs
    from .shared_gpu import ranks_on_this_gpu

    return min(programs, rank_sm_count(device)) if ranks_on_this_gpu() > 1 else programs


#: SMs of its share a rank leaves unused in every "one program per SM" grid: overrides the default of
#: :func:`sm_margin` (0 at one rank per GPU, :data:`SHARED_GPU_SM_MARGIN` where ranks share one)
SM_MARGIN_ENV = "TRITON_DIST_SM_MARGIN"

#: SMs each rank leaves free where ranks share a GPU. A rank's persistent grid rarely runs alone: one-program
#: waits and signals on its side streams, and the peers' work, run beside it, and the hardware places them on any
#: SM. With every rank's grid at exactly its share, such a kernel takes an SM that a peer's full grid needs (or finds
#: none while every SM spins), and a wait that depends on it never ends: the overlap tier's ``ce`` GEMM+RS hung at 2
#: ranks on one H100 with both ranks' 66 programs waiting for a peer's raise (2026-12-06); with this margin that
#: shape passed. (A rank's copies into a peer's memory are not the cause: they progress while the peer's blocks
#: hold every SM, measured by ``python -m triton_dist.tools.sm_probe``'s copy-progress part the same day.)
SHARED_GPU_SM_MARGIN = 2


def sm_margin(sharing: int = 1) -> int:
    """SMs a rank leaves out of its "one program per SM" grids when ``sharing`` ranks share its GPU:
    ``TRITON_DIST_SM_MARGIN`` as a non-negative int where set, else 0 at one rank per GPU and
    :data:`SHARED_GPU_SM_MARGIN` where ranks share one. A bad value is a ValueError naming the variable."""
    text = os.environ.get(SM_MARGIN_ENV, "").strip()
    if not text:
        return SHARED_GPU_SM_MARGIN if sharing > 1 else 0
    if not text.isdigit():
        raise ValueError(f"{SM_MARGIN_ENV}={text!r}: expected a number of SMs (integer >= 0)")
    return int(text)


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


def _p2p_native_atomic_ok() -> bool:
    """Whether this process's ranks have native atomics on each other's memory: always on the CPU simulator (its
    ranks share host memory), else :func:`supports_p2p_native_atomic`."""
    if _select.backend_name() == "sim":
        return True
    return supports_p2p_native_atomic()


def requires_p2p_native_atomic(fn):
    """Decorator (Triton-distributed's name and behaviour): each call of ``fn`` first checks that the GPUs support
    native atomics over P2P and, when they do not, emits a ``UserWarning`` naming ``fn`` (the result may be wrong:
    atomics on a peer's memory are then not atomic); ``fn`` runs either way. On the CPU simulator the check passes
    (ranks share host memory); on a GPU it is :func:`supports_p2p_native_atomic` (cached)."""
    if not callable(fn):
        raise TypeError(f"requires_p2p_native_atomic decorates a function, got {type(fn).__name__}")

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        if not _p2p_native_atomic_ok():
            warnings.warn(f"{getattr(fn, '__qualname__', fn)} requires native atomics over P2P between the GPUs, "
                          f"which this platform does not support: its atomics on peer memory may not be atomic",
                          stacklevel=2)
        return fn(*args, **kwargs)

    return wrapper
