"""``triton_dist.language.extra``: ``language_extra`` (per-thread SIMT primitives) and ``libshmem_device``
(device-side SHMEM calls). ``libshmem_device`` is imported on first access, so this package imports without it."""
import importlib

from . import language_extra  # noqa: F401

__all__ = ["language_extra", "libshmem_device"]


def __getattr__(name):
    if name == "libshmem_device":
        try:
            return importlib.import_module(f"{__name__}.libshmem_device")
        except ModuleNotFoundError as e:
            if e.name != f"{__name__}.libshmem_device":
                raise
            raise ImportError("triton_dist.language.extra.libshmem_device is not available in this build") from e
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
