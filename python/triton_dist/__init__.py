"""triton-dist: device-side communication for stock Triton kernels.

Importing this package needs no GPU, driver, NVSHMEM or ROCm. Submodules: ``language`` (``dl``),
``language.extra`` (``language_extra``, ``libshmem_device``), ``utils`` (bootstrap, symmetric tensors),
``runtime``, ``backends`` (per-target lowerings), ``kernels``, ``ops``, ``tools``.
"""
__version__ = "0.1.0"

from .jit import jit  # noqa: E402,F401

__all__ = ["jit", "__version__"]
