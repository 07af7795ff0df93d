"""Where a benchmark or recorded run came from: the git commit and the versions of everything that matters.

Shared by every script in benchmarks/ so their JSON records name the same facts the same way.
"""
from __future__ import annotations

import os
import platform
import subprocess
from typing import Optional

HERE = os.path.dirname(os.path.abspath(__file__))
_PACKAGES = ("nvidia-nvshmem-cu12", "nvidia-nvshmem-cu13", "nvshmem4py-cu12", "nvshmem4py-cu13")


ROOT = os.path.dirname(HERE)
#: the parts of the tree whose content decides what a run ran
_FINGERPRINTED = ("python", "test", "benchmarks", "scripts", "examples")


def git_commit() -> str:
    """``TRITON_DIST_GIT_COMMIT`` if set, else HEAD of the repository the project root itself holds, else
    "unknown". The GPU machine gets a copy of the tree: a ``.git`` found further up is not this tree's (the
    2026-11-30 suite run recorded a stale commit that way), so it is never asked; :func:`tree_fingerprint` names
    the tree whatever git says."""
    commit = os.environ.get("TRITON_DIST_GIT_COMMIT")
    if commit:
        return commit
    if not os.path.exists(os.path.join(ROOT, ".git")):
        return "unknown"
    try:
        out = subprocess.check_output(["git", "rev-parse", "HEAD"], cwd=ROOT, stderr=subprocess.DEVNULL)
        return out.decode().strip()
    except Exception:  # noqa: BLE001 - provenance must never fail the run
        return "unknown"


def tree_fingerprint() -> str:
    """sha256 (first 16 hex digits) over the path and bytes of every ``.py``/``.sh``/``.json`` source file under
    python/, test/, benchmarks/ (not results/), scripts/ and examples/: recompute it on a checkout to tell whether
    that checkout is what ran (``python benchmarks/provenance.py``)."""
    import hashlib

    h = hashlib.sha256()
    for top in _FINGERPRINTED:
        for dirpath, dirnames, filenames in os.walk(os.path.join(ROOT, top)):
            dirnames[:] = sorted(d for d in dirnames if d not in ("__pycache__", "results", "Output"))
            for name in sorted(filenames):
                if name.endswith((".py", ".sh", ".json")):
                    path = os.path.join(dirpath, name)
                    h.update(os.path.relpath(path, ROOT).encode() + b"\0")
                    with open(path, "rb") as f:
                        h.update(f.read())
    return h.hexdigest()[:16]


def versions() -> dict:
    """Python, torch (+ CUDA), triton, NVSHMEM packages, NCCL and GPU names; what is missing is left out."""
    v = {"python": platform.python_version()}
    try:
        import torch

        v["torch"], v["cuda"] = torch.__version__, torch.version.cuda
        if torch.cuda.is_available():
            v["nccl"] = ".".join(map(str, torch.cuda.nccl.version()))
            v["gpu"] = torch.cuda.get_device_name()
            v["gpus"] = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
    except Exception as e:  # noqa: BLE001
        v["torch_error"] = repr(e)
    try:
        import triton

        v["triton"] = triton.__version__
    except Exception as e:  # noqa: BLE001
        v["triton_error"] = repr(e)
    from importlib.metadata import PackageNotFoundError, version

    for pkg in _PACKAGES:
        try:
            v[pkg] = version(pkg)
        except PackageNotFoundError:
            pass
    return v


def topology_from_layout(gpu_ranks: dict) -> dict:
    """The run's topology from ``STATE.gpu_ranks`` (``{"host/gpu id": [ranks]}``, every rank of the group listed
    once): ``world_size`` (ranks), ``gpus`` (distinct GPUs used), ``ranks_per_gpu`` (the most ranks on one GPU) and
    ``shared_gpu`` (some GPU holds more than one rank: CUDA MPS on one GPU, no NVLink between those ranks). Pure."""
    counts = [len(v) for v in gpu_ranks.values()]
    per = max(counts)
    return {"world_size": sum(counts), "gpus": len(counts), "ranks_per_gpu": per, "shared_gpu": per > 1}


def topology_from_env(world_size: int, visible_gpus: int, per_gpu: Optional[int]) -> dict:
    """The topology where no layout was recorded (before SHMEM started, a single process without it, the simulator,
    a recorded command): ``world_size`` ranks at ``per_gpu`` ranks per GPU (``TRITON_DIST_RANKS_PER_GPU``) or, when
    that is None or < 1, spread over ``min(world_size, visible_gpus)`` GPUs; none on a GPU when ``visible_gpus`` is
    0 (then ``gpus`` 0 and ``ranks_per_gpu`` None). Pure."""
    world = max(1, int(world_size))
    if visible_gpus <= 0:
        return {"world_size": world, "gpus": 0, "ranks_per_gpu": None, "shared_gpu": False}
    if per_gpu is not None and per_gpu >= 1:
        gpus = -(-world // min(per_gpu, world))
    else:
        gpus = min(world, visible_gpus)
    per = -(-world // gpus)
    return {"world_size": world, "gpus": gpus, "ranks_per_gpu": per, "shared_gpu": per > 1}


def _env_int(name: str) -> Optional[int]:
    try:
        return int(os.environ[name])
    except (KeyError, ValueError):
        return None


def topology() -> dict:
    """``{"world_size", "gpus", "ranks_per_gpu", "shared_gpu"}`` of the running process's job (see
    :func:`topology_from_layout`). After ``initialize_distributed`` on a GPU: from the layout it recorded
    (``triton_dist.runtime.state.STATE.gpu_ranks``, every rank's GPU); otherwise (no SHMEM yet, after
    ``finalize_distributed``, a single-process benchmark, the simulator) from torch.distributed's world size (else
    ``WORLD_SIZE``), ``TRITON_DIST_RANKS_PER_GPU`` and the visible GPUs (:func:`topology_from_env`). Collective-free:
    any rank may call it. Never raises."""
    try:
        from triton_dist.runtime.state import STATE

        if STATE.gpu_ranks:
            return topology_from_layout(STATE.gpu_ranks)
    except Exception:  # noqa: BLE001 - provenance must never fail the run
        pass
    world, visible = _env_int("WORLD_SIZE") or 1, 0
    try:
        import torch
        import torch.distributed as dist

        if dist.is_available() and dist.is_initialized():
            world = dist.get_world_size()
        visible = torch.cuda.device_count() if torch.cuda.is_available() else 0
        from triton_dist.runtime import select

        if select.backend_name() == "sim":
            visible = 0
    except Exception:  # noqa: BLE001
        pass
    return topology_from_env(world, visible, _env_int("TRITON_DIST_RANKS_PER_GPU"))


def topology_fields(topo: Optional[dict] = None) -> dict:
    """What every benchmark and probe JSON header records: ``{"topology": topology(), "shared_gpu": <bool>}``
    (``shared_gpu`` true: ranks shared a GPU, so the figures are no NVLink figures; benchmarks/make_results.py keeps
    them in a section of their own)."""
    topo = topology() if topo is None else topo
    return {"topology": topo, "shared_gpu": bool(topo.get("shared_gpu"))}


def label_json(path: Optional[str], topo: Optional[dict] = None) -> bool:
    """Add :func:`topology_fields` to the top level of the JSON object in ``path`` (a Chrome / Perfetto trace the
    profiler or torch wrote: viewers ignore keys they do not know), so a trace says where it ran too. False (and
    nothing changed) when ``path`` is None, unreadable or not a JSON object; never raises."""
    if not path:
        return False
    try:
        import json

        with open(path) as f:
            doc = json.load(f)
        if not isinstance(doc, dict):
            return False
        doc.update(topology_fields(topo))
        with open(path, "w") as f:
            json.dump(doc, f)
        return True
    except Exception:  # noqa: BLE001 - provenance must never fail the run
        return False


def topology_line(topo: Optional[dict] = None) -> str:
    """The topology for a benchmark's opening log line, e.g. ``topology: world 4 on 1 GPU, 4 ranks per GPU --
    SHARED GPU (CUDA MPS, no NVLink: not NVLink figures)``."""
    t = topology() if topo is None else topo
    gpus = t.get("gpus")
    where = "the simulator (no GPU)" if not gpus else f"{gpus} GPU{'s' if gpus != 1 else ''}"
    line = f"topology: world {t.get('world_size')} on {where}"
    if gpus:
        per = t.get("ranks_per_gpu")
        line += f", {per} rank{'s' if per != 1 else ''} per GPU"
    if t.get("shared_gpu"):
        line += " -- SHARED GPU (CUDA MPS, no NVLink: not NVLink figures)"
    return line


if __name__ == "__main__":
    print(f"git_commit {git_commit()}\ntree_fingerprint {tree_fingerprint()}")
