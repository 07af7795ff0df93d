"""Timing helpers under Triton-distributed's module name ``triton_dist.profiler_utils``.

``perf_func(func, iters, warmup_iters)`` returns ``(output of the last call, mean ms per call)`` (CUDA events on a
GPU, the wall clock without one) and ``sleep_async(duration_ms)`` enqueues a device-side sleep on the current
stream. Both are the functions of :mod:`triton_dist.utils` (defined in ``runtime/testing.py``), re-exported so that
scripts written for the reference (``from triton_dist.profiler_utils import perf_func``) run unchanged. Not to be
confused with the device-side profiler (``triton_dist.tools.profiler``, buffer layout in ``profiler_layout``).
"""
from __future__ import annotations

from .runtime.testing import perf_func, sleep_async  # noqa: F401

__all__ = ["perf_func", "sleep_async"]
