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
* **SM shares**: the ranks on a GPU run as clients of one CUDA MPS server (``scripts/launch.sh`` starts a private
  control daemon for the job), so that their kernels run side by side instead of time-slicing, and each rank sizes
  every "one program per SM" grid to ``1 / N`` of the SMs its context has (``device_info.rank_sm_count``). Why ``1 / N`` of a pool every rank shares, and not an MPS active-thread percentage per rank:
  measured on an H100 (2026-12-06, ``python -m triton_dist.tools.sm_probe``), a percentage does not give clients separate
  SMs -- at 50 % both ranks' blocks ran on the *same* 66 SMs (and the other 66 stayed idle), at 25 % all four on the
  same 32; the MPS documentation says as much ("does not reserve dedicated resources"). Grids of one block per SM
  sized to such a share (66 + 66 blocks on 66 SMs) can never all be resident, and the fused kernels that wait on a
  peer's programs hung. So the job runs MPS without a limit (each context sees the whole GPU) and the ranks split
  it by grid size: N grids of ``SMs / N`` blocks fit the GPU together, whatever SMs the hardware puts them on. (An
  MPS static SM partition, nvidia-cuda-mps-control -S from MPS 13.1 on, would give disjoint SMs; the lent driver's
  MPS 13.0 has none.) :func:`check_sm_shares` verifies at initialisation, before any launch, that every rank on a
  shared GPU is an MPS client (:func:`mps_client_status`) and that their contexts see the same SM pool (MPS gives
  every client the same SMs up to its limit); ``TRITON_DIST_SM_SHARE_CHECK=0`` skips the check (meant for child
  jobs that run outside the MPS server on purpose).
* Everything that sizes a grid to "one program per SM" reads :func:`~triton_dist.runtime.device_info.rank_sm_count`:
  the collectives, the overlapped GEMMs, the fused MoE and attention kernels, cooperative launches and the mega
  kernel's workers.

Nothing here needs a GPU except :func:`local_gpu_record` and :func:`physical_sm_count`.
"""
from __future__ import annotations

import os
from typing import Dict, List, Optional, Sequence

from .env import get_bool_env, get_int_env

__all__ = ["RANKS_PER_GPU_ENV", "SM_SHARE_CHECK_ENV", "MPS_PERCENT_ENV", "GPU_SM_COUNT_ENV", "ranks_per_gpu",
           "ranks_on_this_gpu", "device_for_local_rank", "gpus_used", "check_sm_shares", "ranks_by_gpu",
           "local_gpu_record", "mps_client_status", "physical_sm_count", "cores_per_sm"]

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


def ranks_on_this_gpu() -> int:
    """How many ranks share this process's GPU: what initialisation measured (``STATE.ranks_per_gpu``, the most on
    any GPU of the job) once it ran on a GPU backend, else ``TRITON_DIST_RANKS_PER_GPU`` capped at
    ``LOCAL_WORLD_SIZE``. 1 at one rank per GPU."""
    from .state import STATE

    if STATE.gpu_ranks:
        return max(1, int(STATE.ranks_per_gpu))
    n = ranks_per_gpu()
    local = get_int_env("LOCAL_WORLD_SIZE", 0)
    return max(1, min(n, local) if local > 0 else n)


def mps_client_status(pid: Optional[int] = None, timeout_s: float = 10.0, attempts: int = 8, rounds: int = 6) -> str:
    """``"client"`` when process ``pid`` (default: this one) is a client of a CUDA MPS server that answers at
    ``CUDA_MPS_PIPE_DIRECTORY`` (default /tmp/nvidia-mps): the control daemon's ``get_server_list`` and
    ``get_client_list`` name it. Otherwise a short reason starting with ``"not an MPS client"``. Call it after the
    process created its CUDA context (a process becomes a client then). Runs ``nvidia-cuda-mps-control``; no GPU
    call of its own. A query that fails is retried (``attempts`` times, 0.1-0.8 s apart): the control daemon
    answered only one of two ranks that asked at the same moment (H100, 2026-12-06). An answer that does not name
    this process is asked again (``rounds`` times, 0.25-1 s apart, ~4 s in all): when 4 ranks started at once, the
    daemon named no server at all to two of them (H100, 2026-12-06, the 4-rank overlap tier's first test), though
    every rank was a client of it moments later."""
    import shutil
    import subprocess
    import time

    pid = os.getpid() if pid is None else int(pid)
    pipe = os.environ.get("CUDA_MPS_PIPE_DIRECTORY", "/tmp/nvidia-mps")
    tool = shutil.which("nvidia-cuda-mps-control")
    if tool is None:
        return "not an MPS client: nvidia-cuda-mps-control is not on PATH"

    last = [""]

    def ask(command: str) -> Optional[str]:
        for attempt in range(max(1, attempts)):
            if attempt:
                time.sleep(min(0.8, 0.1 * 2 ** (attempt - 1)))
            try:
                done = subprocess.run([tool], input=command + "\n", capture_output=True, text=True,
                                      timeout=timeout_s)
            except (OSError, subprocess.TimeoutExpired) as e:
                last[0] = f"{type(e).__name__}: {e}"
                continue
            if done.returncode == 0:
                return done.stdout
            said = " ".join((done.stderr or done.stdout or "").split())[-160:]
            last[0] = f"exit {done.returncode}" + (f": {said}" if said else "")
        return None

    why = ""
    for round_ in range(max(1, rounds)):
        if round_:
            time.sleep(min(1.0, 0.25 * 2 ** (round_ - 1)))
        servers = ask("get_server_list")
        if servers is None:
            return (f"not an MPS client: no MPS control daemon answers at CUDA_MPS_PIPE_DIRECTORY={pipe} "
                    f"(nvidia-cuda-mps-control get_server_list, {attempts} tries; last: {last[0]})")
        server_pids = [w for w in servers.split() if w.isdigit()]
        for server in server_pids:
            clients = ask(f"get_client_list {server}") or ""
            if str(pid) in clients.split():
                return "client"
        why = (f"not an MPS client: process {pid} is not among the clients of the MPS server(s) "
               f"{server_pids or 'none running'} at CUDA_MPS_PIPE_DIRECTORY={pipe} (asked {round_ + 1} times)")
    return why


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
    PCI address), the SMs this rank's context has and, where ranks share GPUs (``TRITON_DIST_RANKS_PER_GPU`` > 1)
    and the check is on, :func:`mps_client_status` (None otherwise: a child job outside MPS with the check off does
    not wait for a daemon that is not there). Needs a GPU."""
    import torch

    torch.empty(1, device=torch.device("cuda", device_index))  # the CUDA context exists: an MPS client by now
    props = torch.cuda.get_device_properties(device_index)
    uuid = str(getattr(props, "uuid", "") or "")
    gpu = uuid or f"{props.pci_domain_id:04x}:{props.pci_bus_id:02x}:{props.pci_device_id:02x}"
    return {"rank": int(rank), "gpu": gpu, "device": int(device_index), "sms": int(props.multi_processor_count),
            "mps": mps_client_status() if ranks_per_gpu() > 1 and share_check_enabled() else None,
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
    return (f"start the ranks through scripts/launch.sh --ranks-per-gpu {per_gpu} (it runs a private CUDA MPS daemon "
            f"for the job), or start an MPS control daemon yourself (nvidia-cuda-mps-control -d) with the same "
            f"CUDA_MPS_PIPE_DIRECTORY and {RANKS_PER_GPU_ENV}={per_gpu} for every rank; {SM_SHARE_CHECK_ENV}=0 "
            f"skips this check")


def check_sm_shares(records: Sequence[Dict[str, object]]) -> Dict[str, List[int]]:
    """Verify that the ranks sharing each GPU can all be resident at once; returns ``{gpu: [ranks]}``.

    ``records``: every rank's :func:`local_gpu_record`. For each GPU (per host) that several ranks use: the ranks
    must know they share it (``TRITON_DIST_RANKS_PER_GPU`` > 1: their records carry an MPS status), every one must
    be a CUDA MPS client (without MPS the contexts time-slice), and their contexts must report the same SM count
    (MPS gives every client the same SMs up to its limit, so the pool is shared and ``SMs // ranks`` is each rank's
    grid budget; different limits would let one rank's grid cover another's whole pool). Raises RuntimeError
    naming the GPU, the ranks, what each has and how to fix it otherwise. Pure function (tested on the CPU)."""
    for key, recs in _records_by_gpu(records).items():
        ranks = sorted(int(r["rank"]) for r in recs)
        if len(recs) < 2:
            continue
        n = len(recs)
        gpu_name = key.split("/", 1)[1]
        recs = sorted(recs, key=lambda r: int(r["rank"]))
        unaware = [int(r["rank"]) for r in recs if r.get("mps") is None]
        if unaware:
            raise RuntimeError(
                f"ranks {ranks} share GPU {gpu_name} but ranks {unaware} were started as one rank per GPU "
                f"({RANKS_PER_GPU_ENV} unset or 1): their kernels cannot all be resident at once, so a kernel that "
                f"waits on a peer could wait forever. Fix: {_fix_hint(n)}")
        outside = [(int(r["rank"]), str(r["mps"])) for r in recs if r.get("mps") != "client"]
        if outside:
            each = "; ".join(f"rank {rank}: {why}" for rank, why in outside)
            raise RuntimeError(
                f"ranks {ranks} share GPU {gpu_name} but not all of them run under CUDA MPS ({each}): without MPS "
                f"their kernels time-slice, they cannot all be resident at once, and a kernel that waits on a peer "
                f"could wait forever. Fix: {_fix_hint(n)}")
        pools = sorted({int(r["sms"]) for r in recs})
        if len(pools) > 1:
            each = ", ".join(f"rank {r['rank']}: {r['sms']}" for r in recs)
            raise RuntimeError(
                f"ranks {ranks} share GPU {gpu_name} but their CUDA contexts see different SM counts ({each}; "
                f"different CUDA_MPS_ACTIVE_THREAD_PERCENTAGE values?): MPS puts every client on the same SMs up to "
                f"its limit, so a rank that sizes its grids to a larger pool can fill a smaller one and its kernels "
                f"cannot all be resident at once. Fix: the same limit (or none) for every rank; {_fix_hint(n)}")
        if pools[0] < n:
            raise RuntimeError(f"ranks {ranks} share GPU {gpu_name} whose contexts see {pools[0]} SMs: fewer SMs than "
                               f"ranks, so their kernels cannot all be resident at once. Fix: fewer ranks per GPU")
    return ranks_by_gpu(records)


def share_check_enabled() -> bool:
    """``TRITON_DIST_SM_SHARE_CHECK`` (default on)."""
    return get_bool_env(SM_SHARE_CHECK_ENV, True)
