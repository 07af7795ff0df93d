"""triton-dist: device-side communication for stock Triton kernels.

Importing this package needs no GPU, driver, NVSHMEM or ROCm. Submodules: ``language`` (``dl``),
``language.extra`` (``language_extra``, ``libshmem_device``), ``utils`` (bootstrap, symmetric tensors),
``runtime``, ``backends`` (per-target lowerings), ``kernels``, ``ops``, ``tools``.

The one thing importing it does: under a launcher without a GPU (or with ``TRITON_DIST_BACKEND=sim``) it turns
Triton's interpreter on, so that kernels defined afterwards run on the simulator (``runtime/select.py``).
"""
__version__ = "0.1.0"

from . import _compat  # noqa: E402,F401  first: an unsupported Triton fails here, with one ImportError
from .jit import jit  # noqa: E402,F401
from .runtime import select as _select  # noqa: E402

_select.maybe_enable_interpreter()

__all__ = ["jit", "__version__"]
