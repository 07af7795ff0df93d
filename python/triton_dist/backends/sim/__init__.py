"""The CPU-simulator backend (Triton's interpreter, the shared symmetric heap): registered for
``Target.backend == "sim"``. The simulator runtime installs its state through :mod:`.context`."""
from ...language._backend import Backend, register_backend
from . import extra, language, libshmem, profiler

BACKEND = Backend(name="sim", language=language, extra=extra, libshmem=libshmem, profiler=profiler)
register_backend("sim", BACKEND)
