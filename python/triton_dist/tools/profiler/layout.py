"""Alias of :mod:`triton_dist.profiler_layout` (the buffer layout shared by the device-side recorder and
the host side); kept so that ``triton_dist.tools.profiler.layout`` keeps working."""
from ...profiler_layout import *  # noqa: F401,F403  (re-exports)
