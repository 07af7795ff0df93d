"""Trace-time target dispatch.

Every distributed builtin receives ``_semantic`` from Triton's code generator. :func:`target_of` turns it into a
:class:`Target` describing what the kernel being traced is compiled for: an NVIDIA arch, an AMD gfx, or the CPU
simulator (Triton's interpreter, which calls our builtins without ``_semantic``). Nothing here looks at the
machine: the same kernel object compiles for ``cuda:90`` or ``hip:gfx942`` on a laptop with no GPU.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Union

from . import _compat

__all__ = ["Target", "target_of", "parse_target", "SIM", "BACKEND_PACKAGES"]


@dataclass(frozen=True)
class Target:
    """What a kernel is being compiled for.

    ``backend`` is ``"cuda"``, ``"hip"`` or ``"sim"``; ``arch`` is the compute capability as an int for CUDA
    (``90``), the gfx name for HIP (``"gfx942"``), ``None`` for the simulator; ``warp_size`` is 32 (NVIDIA),
    64 (CDNA) or 1 for the simulator, where each program is one sequential thread of numpy code.
    """

    backend: str
    arch: Union[int, str, None] = None
    warp_size: int = 32

    @property
    def is_cuda(self) -> bool:
        return self.backend == "cuda"

    @property
    def is_hip(self) -> bool:
        return self.backend == "hip"

    @property
    def is_sim(self) -> bool:
        return self.backend == "sim"

    def __str__(self) -> str:
        return self.backend if self.arch is None else f"{self.backend}:{self.arch}"


SIM = Target("sim", None, 1)

#: ``Target.backend`` -> the package that lowers kernels for it: it implements the backend contract of the language
#: layer (``triton_dist.language._backend``) and registers itself when imported. The registry imports it the first
#: time a kernel for that target is traced (an entry point: the language layer names no backend, and ``import
#: triton_dist`` creates no lowering's ``triton.jit`` helpers before the interpreter switch).
BACKEND_PACKAGES = {"cuda": "triton_dist.backends.nvidia", "hip": "triton_dist.backends.amd",
                    "sim": "triton_dist.backends.sim"}

# AMD gfx families whose wavefront is 32 lanes (RDNA); CDNA (gfx9xx) uses 64.
_WAVE32_PREFIXES = ("gfx10", "gfx11", "gfx12")


def _hip_warp_size(gfx: str) -> int:
    return 32 if gfx.startswith(_WAVE32_PREFIXES) else 64


def target_of(_semantic) -> Target:
    """The target of the kernel being traced; ``_semantic`` is what the builtin received (``None`` under the
    interpreter)."""
    if _compat.is_interpreter_semantic(_semantic):
        return SIM
    opts = _compat.compile_options(_semantic)
    if opts is None:
        raise RuntimeError("triton_dist: a distributed builtin was traced without compile options; "
                           "call it from inside a @triton.jit / @triton_dist.jit kernel")
    backend = getattr(opts, "backend_name", None)
    arch = getattr(opts, "arch", None)
    if backend == "cuda":
        cc = int(re.sub(r"[^0-9]", "", str(arch)) or 0)
        return Target("cuda", cc, 32)
    if backend == "hip":
        return Target("hip", str(arch), int(getattr(opts, "warp_size", 0) or _hip_warp_size(str(arch))))
    raise RuntimeError(f"triton_dist: unsupported Triton backend {backend!r} (supported: cuda, hip, interpreter)")


_TARGET_RE = re.compile(r"^(cuda|hip):([A-Za-z0-9_]+)$")


def parse_target(text: str) -> Target:
    """Parse ``cuda:<cc>`` (``cuda:90``, ``cuda:sm_90``) or ``hip:<gfx>`` (``hip:gfx942``). Raises ValueError."""
    m = _TARGET_RE.match(text.strip())
    if not m:
        raise ValueError(f"unknown target {text!r}: expected cuda:<compute capability> (e.g. cuda:90) "
                         f"or hip:<gfx arch> (e.g. hip:gfx942)")
    backend, arch = m.groups()
    if backend == "cuda":
        digits = re.sub(r"^sm_?", "", arch)
        if not digits.isdigit() or int(digits) < 70:
            raise ValueError(f"unknown target {text!r}: CUDA compute capability must be a number >= 70 (e.g. cuda:90)")
        if int(digits) not in _compat.CUDA_CAPABILITIES:
            raise ValueError(f"unknown target {text!r}: the installed Triton compiles for compute capabilities "
                             f"{', '.join(map(str, _compat.CUDA_CAPABILITIES))}")
        return Target("cuda", int(digits), 32)
    if not re.match(r"^gfx[0-9a-f]{3,4}$", arch):
        raise ValueError(f"unknown target {text!r}: HIP arch must look like gfx942 / gfx90a / gfx950")
    if arch not in _compat.HIP_ARCHS:
        raise ValueError(f"unknown target {text!r}: the installed Triton's AMD backend compiles for "
                         f"{', '.join(_compat.HIP_ARCHS)}")
    return Target("hip", arch, _hip_warp_size(arch))


def to_gpu_target(t: Target):
    """The ``triton.backends.compiler.GPUTarget`` for ``t`` (not for the simulator)."""
    if t.is_sim:
        raise ValueError("the simulator has no GPUTarget; it runs kernels through TRITON_INTERPRET")
    return _compat.gpu_target(t.backend, t.arch, t.warp_size)
