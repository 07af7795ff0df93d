"""Which host SHMEM runtime this process uses, chosen once per process.

``TRITON_DIST_BACKEND`` = ``nvshmem`` | ``rocshmem`` | ``sim`` picks it explicitly. Otherwise: ``nvshmem`` when torch
is a CUDA build and sees a GPU, ``rocshmem`` when torch is a ROCm build and sees a GPU, else ``sim`` (the CPU
simulator). Nothing here touches a GPU driver beyond ``torch.cuda.is_available()``.

Interpreter switch: under a launcher (torchrun sets ``RANK`` and ``WORLD_SIZE``) on a machine without a GPU, or with
``TRITON_DIST_BACKEND=sim`` set explicitly, ``import triton_dist`` turns Triton's interpreter on
(``TRITON_INTERPRET=1`` and ``triton.knobs.runtime.interpret``) so kernels defined afterwards run on the simulator.
A plain import (no launcher variables, no explicit ``sim``) never changes it: the compile tool and the lit tests
import triton_dist on CPU and compile for real targets.
"""
from __future__ import annotations

import functools
import os

BACKENDS = ("nvshmem", "rocshmem", "sim")
ENV = "TRITON_DIST_BACKEND"


def _torch_gpu_kind():
    """``"cuda"``, ``"hip"`` or ``None``: what torch can drive on this machine."""
    try:
        import torch
    except ImportError:  # pragma: no cover
        return None
    try:
        available = torch.cuda.is_available()
    except Exception:  # pragma: no cover - broken driver installs
        available = False
    if not available:
        return None
    if getattr(torch.version, "hip", None):
        return "hip"
    if getattr(torch.version, "cuda", None):
        return "cuda"
    return None


def explicit_backend():
    """The validated value of ``TRITON_DIST_BACKEND`` or None when unset/empty."""
    value = os.environ.get(ENV, "").strip().lower()
    if not value:
        return None
    if value not in BACKENDS:
        raise ValueError(f"{ENV}={os.environ.get(ENV)!r} is not a triton_dist backend: choose one of "
                         f"{', '.join(BACKENDS)}")
    return value


def detect_backend() -> str:
    """The backend this process would use (not cached)."""
    value = explicit_backend()
    if value is not None:
        return value
    kind = _torch_gpu_kind()
    return {"cuda": "nvshmem", "hip": "rocshmem"}.get(kind, "sim")


@functools.lru_cache(maxsize=None)
def backend_name() -> str:
    """The backend of this process; decided on first call and then fixed (``reset()`` clears it for tests)."""
    return detect_backend()


def reset() -> None:
    """Forget the cached choice (tests only)."""
    backend_name.cache_clear()


def under_launcher() -> bool:
    """True when torchrun-style runtime variables (RANK and WORLD_SIZE) are present."""
    return "RANK" in os.environ and "WORLD_SIZE" in os.environ


def should_interpret() -> bool:
    """Whether ``import triton_dist`` must turn Triton's interpreter on (see the module docstring)."""
    if explicit_backend() == "sim":
        return True
    if explicit_backend() is not None:
        return False
    return under_launcher() and _torch_gpu_kind() is None


def maybe_enable_interpreter() -> bool:
    """Turn the interpreter on when :func:`should_interpret`; returns whether it did. Whenever the interpreter is on
    afterwards (turned on here, or already by ``TRITON_INTERPRET=1``), the simulator's interpreter fixes are
    installed too (``runtime.sim.interpreter.install_interpreter_fixes``), so that a user's plain ``@triton.jit``
    kernel runs right away: runtime-bound ``for`` loops, bf16 ``tl.dot``, calls of ``@triton.jit`` functions made
    before the switch (``tl.cdiv``). With the interpreter off nothing is installed (not even imported)."""
    from .. import _compat

    try:
        wanted = should_interpret()
    except ValueError:
        wanted = False  # a bad TRITON_DIST_BACKEND is reported by initialize_distributed(), not at import
    if wanted:
        _compat.set_interpret(True)
    if _compat.interpret_enabled():
        from .sim.interpreter import install_interpreter_fixes

        install_interpreter_fixes()
    return wanted


def make_backend(name=None):
    """A fresh :class:`~triton_dist.runtime.backend.ShmemBackend` instance for ``name`` (default: this process's)."""
    name = name or backend_name()
    if name == "nvshmem":
        from .nvshmem import NvshmemBackend

        return NvshmemBackend()
    if name == "rocshmem":
        from .rocshmem import RocshmemBackend

        return RocshmemBackend()
    if name == "sim":
        try:
            from .sim.backend import SimBackend
        except ImportError as e:
            raise RuntimeError("the triton_dist simulator runtime (triton_dist.runtime.sim.backend) is not "
                               f"available: {e}") from e
        return SimBackend()
    raise ValueError(f"unknown triton_dist backend {name!r}: choose one of {', '.join(BACKENDS)}")
