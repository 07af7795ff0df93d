"""Where a benchmark or recorded run came from: the git commit and the versions of everything that matters.

Shared by every script in benchmarks/ so their JSON records name the same facts the same way.
"""
from __future__ import annotations

import os
import platform
import subprocess

HERE = os.path.dirname(os.path.abspath(__file__))
_PACKAGES = ("nvidia-nvshmem-cu12", "nvidia-nvshmem-cu13", "nvshmem4py-cu12", "nvshmem4py-cu13")


def git_commit() -> str:
    """``TRITON_DIST_GIT_COMMIT`` if set (the GPU machine gets a copy of the tree without .git), else HEAD."""
    commit = os.environ.get("TRITON_DIST_GIT_COMMIT")
    if commit:
        return commit
    try:
        out = subprocess.check_output(["git", "rev-parse", "HEAD"], cwd=HERE, stderr=subprocess.DEVNULL)
        return out.decode().strip()
    except Exception:  # noqa: BLE001 - provenance must never fail the run
        return "unknown"


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
