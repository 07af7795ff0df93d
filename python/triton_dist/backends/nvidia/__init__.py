"""The NVIDIA backend (PTX, NVSHMEM): registered for ``Target.backend == "cuda"``."""
from ...language._backend import Backend, register_backend
from . import extra, language, libshmem, profiler

BACKEND = Backend(name="nvidia", language=language, extra=extra, libshmem=libshmem.LOWERING, profiler=profiler)
register_backend("cuda", BACKEND)
