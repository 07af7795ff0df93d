"""``triton_dist.mega_triton_kernel``: a whole model step as ONE persistent Triton kernel.

The model is described op by op with :class:`ModelBuilder` (``make_linear``, ``make_rms_norm``, ...); each op is
split into tile tasks (``tasks/``, nine families), tile-level dependencies are derived from the bytes each task
reads and writes (``core/graph.py``), tasks are placed on per-worker queues (``core/scheduler.py``) and one
generated kernel loops fetch -> wait -> run -> release (``core/codegen.py``, ``core/device.py``). Docs:
``docs/mega_kernel.md``.
"""
from .builder import MegaKernelDependencyError, ModelBuilder

__all__ = ["ModelBuilder", "MegaKernelDependencyError"]
