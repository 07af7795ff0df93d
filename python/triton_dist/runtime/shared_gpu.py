"""Ranks that share a GPU: several ranks (NVSHMEM PEs) on one GPU, their kernels resident together under CUDA MPS.

What it is for: running multi-rank kernels on a real GPU and its memory model when a machine has fewer GPUs than
ranks (one GPU at a desk, a one-GPU CI runner). What it does not show: NVLink bandwidth and latency, or ordering
across NVLink -- every "peer" access is a load or store to the same GPU's memory.

The mode (docs/runtime.md, "Develop on one GPU"):

* **Switch**: ``TRITON_DIST_RANKS_PER_GPU=N`` (N >= 1; ``scripts/launch.sh --ranks-per-gpu N`` sets it). 1 (the
  default) is the ordinary one rank per GPU.
* **Binding rule**: local rank ``r`` uses GPU ``r // N`` (consecutive local ranks share a GPU: at N = 2, ranks 0 and 1
  on GPU 0, ranks 2 and 3 on GPU 1). The node needs ``ceil(LOCAL_WORLD_SIZE / N)`` visible GPUs.
* **Process group**: gloo only (NCCL refuses two ranks on one GPU). Torch-side collectives on CUDA tensors go through
  :mod:`triton_dist.runtime.torch_collectives`, which uses NCCL where the group has it and gloo on host copies
  otherwise.
* **SM shares**: each rank must get at most ``1 / N`` of its GPU's SMs (CUDA MPS,
  ``CUDA_MPS_ACTIVE_THREAD_PERCENTAGE = 100 // N``, which the launcher sets), so that every rank's persistent or
  cooperative kernel is resident at once: a kernel that spins on a peer's signal while the peer's kernel cannot be
  scheduled would never finish. :func:`check_sm_shares` verifies this at initialisation, before any launch, from
  what each rank's CUDA context reports (``multi_processor_count`` is the MPS-limited count) against the GPU's
  physical SM count (:func:`physical_sm_count`); without a physical count it checks the MPS percentages instead.
  ``TRITON_DIST_SM_SHARE_CHECK=0`` skips the check (the ranks then may time-slice, or deadlock in a persistent
  kernel; meant for child jobs that run outside the MPS server on purpose).
* Everything that sizes a grid to "one program per SM" reads ``multi_processor_count`` of its device, which under
  MPS is the rank's share: the collectives, the overlapped GEMMs, cooperative launches and the mega kernel's workers
  size themselves to the SMs the rank has.

Nothing here needs a GPU except :func:`local_gpu_record` and :func:`physical_sm_count`.
"""
from __future__ import annotations

import os
from typing import Dict, List, Optional, Sequence

from .env import get_bool_env, get_int_env

__all__ = ["RANKS_PER_GPU_ENV", "SM_SHARE_CHECK_ENV", "MPS_PERCENT_ENV", "GPU_SM_COUNT_ENV", "ranks_per_gpu",
           "device_for_local_rank", "mps_percentage", "gpus_used", "check_sm_shares", "ranks_by_gpu", "local_gpu_record",
           "physical_sm_count", "cores_per_sm"]

RANKS_PER_GPU_ENV = "TRITON_DIST_RANKS_PER_GPU"
SM_SHARE_CHECK_ENV = "TRITON_DIST_SM_SHARE_CHECK"
MPS_PERCENT_ENV = "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"
#: override of the physical SM count of the GPUs (where NVML cannot tell it)
GPU_SM_COUNT_ENV = "TRITON_DIST_GPU_SM_COUNT"


def ranks_per_gpu() -> int:
    """``TRITON_DIST_RANKS_PER_GPU`` (default 1). Anything but an integer >= 1 raises ValueError naming it."""
    n = get_int_env(RANKS_PER_GPU_ENV, 1)
    if n < 1:
        raise ValueError(f"{RANKS_PER_GPU_ENV}={os.environ.get(RANKS_PER_GPU_ENV)!r}: the ranks that share one GPU "
                         f"must be an integer >= 1")
    return n


def gpus_used(local_world: int, per_gpu: int) -> int:
    """How many GPUs ``local_world`` ranks use on a node at ``per_gpu`` ranks per GPU."""
    return -(-int(local_world) // int(per_gpu))


def device_for_local_rank(local_rank: int, local_world: int, visible_gpus: int, per_gpu: int) -> int:
    """The GPU index of local rank ``local_rank`` by the binding rule (``local_rank // per_gpu``). Raises
    RuntimeError, naming what to change, when the node has too few visible GPUs for ``local_world`` ranks."""
    if per_gpu < 1:
        raise ValueError(f"{RANKS_PER_GPU_ENV}={per_gpu}: must be >= 1")
    need = gpus_used(local_world, per_gpu)
    if visible_gpus < need:
        if visible_gpus == 0:
            hint = "fix CUDA_VISIBLE_DEVICES, or run on the CPU simulator (TRITON_DIST_BACKEND=sim)"
        elif per_gpu == 1:
            hint = (f"lower --nproc_per_node, fix CUDA_VISIBLE_DEVICES, or let ranks share GPUs: "
                    f"{RANKS_PER_GPU_ENV}={-(-local_world // visible_gpus)} "
                    f"(scripts/launch.sh --ranks-per-gpu N)")
        else:
            hint = f"lower --nproc_per_node or raise {RANKS_PER_GPU_ENV}"
        raise RuntimeError(f"LOCAL_WORLD_SIZE={local_world} at {per_gpu} rank(s) per GPU needs {need} visible "
                           f"GPU(s) on this node but torch sees {visible_gpus}: {hint}")
    if not 0 <= local_rank < local_world:
        raise ValueError(f"LOCAL_RANK={local_rank} is outside [0, LOCAL_WORLD_SIZE={local_world})")
    return local_rank // per_gpu


def mps_percentage(per_gpu: int) -> int:
    """The MPS active-thread percentage that gives each of ``per_gpu`` ranks its share: ``100 // per_gpu``."""
    if per_gpu < 1:
        raise ValueError(f"ranks per GPU must be >= 1, got {per_gpu}")
    return 100 // per_gpu


#: CUDA cores per SM by compute capability major (and minor where it differs), for the physical SM count from
#: NVML's core count. Volta / Turing / A100: 64; GA10x, Ada, Hopper, Blackwell: 128.
_CORES_PER_SM = {(7, None): 64, (8, 0): 64, (8, None): 128, (9, None): 128, (10, None): 128, (11, None): 128,
                 (12, None): 128}


def cores_per_sm(major: int, minor: int) -> Optional[int]:
    """CUDA cores per SM of compute capability ``major.minor`` (None when unknown)."""
    return _CORES_PER_SM.get((major, minor), _CORES_PER_SM.get((major, None)))


def physical_sm_count(device_index: int) -> Optional[int]:
    """The SMs GPU ``device_index`` has, whatever share this process was given: ``TRITON_DIST_GPU_SM_COUNT`` if set,
    else NVML's core count (NVML sees the whole GPU, MPS or not) over the cores per SM; None when neither is
    available. Needs a GPU."""
    forced = get_int_env(GPU_SM_COUNT_ENV, 0)
    if forced > 0:
        return forced
    import torch

    from .device_info import _nvml, _nvml_handle

    nvml = _nvml()
    if nvml is None:
        return None
    try:
        props = torch.cuda.get_device_properties(device_index)
        cores = int(nvml.nvmlDeviceGetNumGpuCores(_nvml_handle(nvml, device_index)))
        per = cores_per_sm(props.major, props.minor)
        if per and cores > 0 and cores % per == 0:
            return cores // per
    except Exception:
        pass
    return None


def local_gpu_record(rank: int, device_index: int) -> Dict[str, object]:
    """What this rank tells the others about its GPU for :func:`check_sm_shares`: the GPU's identity (UUID, else
    PCI address), the SMs this rank's context has, the GPU's physical SM count (None if unknown) and the MPS
    active-thread percentage from the environment (None if unset). Needs a GPU."""
    import torch

    props = torch.cuda.get_device_properties(device_index)
    uuid = str(getattr(props, "uuid", "") or "")
    gpu = uuid or f"{props.pci_domain_id:04x}:{props.pci_bus_id:02x}:{props.pci_device_id:02x}"
    pct = os.environ.get(MPS_PERCENT_ENV)
    try:
        pct_value = int(pct) if pct not in (None, "") else None
    except ValueError:
        pct_value = None
    return {"rank": int(rank), "gpu": gpu, "device": int(device_index), "sms": int(props.multi_processor_count),
            "physical_sms": physical_sm_count(device_index), "mps_percent": pct_value,
            "host": os.uname().nodename}


def _records_by_gpu(records: Sequence[Dict[str, object]]) -> Dict[str, List[Dict[str, object]]]:
    by_gpu: Dict[str, List[Dict[str, object]]] = {}
    for r in records:
        by_gpu.setdefault(f"{r.get('host', '')}/{r['gpu']}", []).append(r)
    return by_gpu


def ranks_by_gpu(records: Sequence[Dict[str, object]]) -> Dict[str, List[int]]:
    """``{"host/gpu id": [ranks]}`` from every rank's :func:`local_gpu_record`: which ranks use which GPU."""
    return {key: sorted(int(r["rank"]) for r in recs) for key, recs in _records_by_gpu(records).items()}


def _fix_hint(per_gpu: int) -> str:
    return (f"start the ranks through scripts/launch.sh --ranks-per-gpu {per_gpu} (it runs a CUDA MPS daemon and "
            f"sets {MPS_PERCENT_ENV}={mps_percentage(per_gpu)} for each rank), or run an MPS daemon "
            f"(nvidia-cuda-mps-control -d) and start each rank with {MPS_PERCENT_ENV}={mps_percentage(per_gpu)}; "
            f"{SM_SHARE_CHECK_ENV}=0 skips this check")


def check_sm_shares(records: Sequence[Dict[str, object]]) -> Dict[str, List[int]]:
    """Verify that the ranks sharing each GPU can all be resident at once; returns ``{gpu: [ranks]}``.

    ``records``: every rank's :func:`local_gpu_record`. For each GPU (per host) that several ranks use, the SMs
    their contexts report must add up to at most the GPU's physical SM count; where that count is unknown, their
    MPS percentages must add up to at most 100 (an unset percentage counts as 100). Raises RuntimeError naming the
    GPU, the ranks, what each has and how to fix it otherwise. Pure function (tested on the CPU)."""
    for key, recs in _records_by_gpu(records).items():
        ranks = sorted(int(r["rank"]) for r in recs)
        if len(recs) < 2:
            continue
        n = len(recs)
        phys = [r["physical_sms"] for r in recs if r.get("physical_sms")]
        gpu_name = key.split("/", 1)[1]
        if phys:
            total = sum(int(r["sms"]) for r in recs)
            if total > int(phys[0]):
                each = ", ".join(f"rank {r['rank']}: {r['sms']}" for r in sorted(recs, key=lambda r: r["rank"]))
                raise RuntimeError(
                    f"ranks {ranks} share GPU {gpu_name} ({phys[0]} SMs) but their CUDA contexts have {total} SMs "
                    f"together ({each}): their kernels cannot all be resident at once, so a kernel that waits on a "
                    f"peer could wait forever (no CUDA MPS, or MPS shares above 1/{n} each). Fix: {_fix_hint(n)}")
        else:
            pcts = [100 if r.get("mps_percent") is None else int(r["mps_percent"]) for r in recs]
            if sum(pcts) > 100:
                each = ", ".join(f"rank {r['rank']}: {p}%" for r, p in zip(recs, pcts))
                raise RuntimeError(
                    f"ranks {ranks} share GPU {gpu_name} but their MPS active-thread percentages add up to "
                    f"{sum(pcts)}% ({each}; unset counts as 100): their kernels cannot all be resident at once. "
                    f"Fix: {_fix_hint(n)}")
    return ranks_by_gpu(records)


def share_check_enabled() -> bool:
    """``TRITON_DIST_SM_SHARE_CHECK`` (default on)."""
    return get_bool_env(SM_SHARE_CHECK_ENV, True)
