"""triton-dist: device-side communication for stock Triton kernels.

Importing this package needs no GPU, driver, NVSHMEM or ROCm. Submodules: ``language`` (``dl``),
``language.extra`` (``language_extra``, ``libshmem_device``), ``utils`` (bootstrap, symmetric tensors),
``runtime``, ``backends`` (per-target lowerings), ``kernels``, ``ops``, ``tools``.

What importing it does:

* under a launcher without a GPU (or with ``TRITON_DIST_BACKEND=sim``) it turns Triton's interpreter on, so that
  kernels defined afterwards run on the simulator (``runtime/select.py``);
* it adds two hooks to Triton (``runtime/shmem_link.py``): a compile step that links the SHMEM device library into
  any kernel calling it, ``@triton.jit`` ones included (other kernels compile exactly as before), and the load hook
  that initialises such modules. Neither touches a GPU.
"""
__version__ = "0.1.0"

from . import _compat  # noqa: E402,F401  first: an unsupported Triton fails here, with one ImportError
from .jit import jit  # noqa: E402,F401
from .runtime import select as _select  # noqa: E402
from .runtime import shmem_link as _shmem_link  # noqa: E402

_shmem_link.install()

_select.maybe_enable_interpreter()

__all__ = ["jit", "__version__"]
