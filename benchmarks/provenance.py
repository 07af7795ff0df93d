"""Where a benchmark or recorded run came from: the git commit and the versions of everything that matters.

Shared by every script in benchmarks/ so their JSON records name the same facts the same way.
"""
from __future__ import annotations

import os
import platform
import subprocess

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


if __name__ == "__main__":
    print(f"git_commit {git_commit()}\ntree_fingerprint {tree_fingerprint()}")
