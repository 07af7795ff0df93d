"""The AMD backend (AMDGCN for CDNA, rocSHMEM): registered for ``Target.backend == "hip"``."""
from ...language._backend import Backend, register_backend
from . import extra, language, libshmem, profiler

BACKEND = Backend(name="amd", language=language, extra=extra, libshmem=libshmem.LOWERING, profiler=profiler)
register_backend("hip", BACKEND)
