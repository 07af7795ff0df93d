"""Per-target lowerings. ``triton_dist.backends.{nvidia,amd,sim}`` are the only modules that contain PTX, AMDGCN,
SHMEM symbol names or simulator code; the language layer picks one at trace time through :func:`lowering_for`."""
from __future__ import annotations

import importlib

from ..target import Target, target_of

_PACKAGE_OF_BACKEND = {"cuda": "nvidia", "hip": "amd", "sim": "sim"}


def lowering_for(_semantic, area: str):
    """Return ``(target, module)`` where ``module`` is ``triton_dist.backends.<pkg>.<area>`` for the kernel being
    traced (``area`` is e.g. ``"language"`` or ``"libshmem"``)."""
    target = target_of(_semantic)
    return target, importlib.import_module(f"{__name__}.{_PACKAGE_OF_BACKEND[target.backend]}.{area}")


__all__ = ["Target", "target_of", "lowering_for"]
