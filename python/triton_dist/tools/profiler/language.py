"""Alias of :mod:`triton_dist.language.profiler` (the device-side recorder lives in the language layer, so library
kernels can use it without importing ``tools``); kept so that ``triton_dist.tools.profiler.language`` imports keep
working. The clock-reading kernel is :func:`triton_dist.tools.profiler.clock.read_device_clock`."""
from ...language.profiler import Profiler, sm_id, ticks_per_second, timestamp  # noqa: F401  (re-exports)
from .clock import read_device_clock  # noqa: F401  (re-export)

__all__ = ["Profiler", "timestamp", "sm_id", "ticks_per_second", "read_device_clock"]
