"""Intra-kernel profiler: ``Profiler`` (device side) records per-task start/end stamps into a buffer; the host side
allocates the buffer, parses it into tracks and exports a Perfetto-readable trace (Chrome JSON) and a Gantt PNG.

Names are loaded lazily, so ``import triton_dist.tools.profiler`` stays light (no torch / matplotlib until used).
"""
import importlib

_EXPORTS = {
    "Profiler": "language", "timestamp": "language", "sm_id": "language", "ticks_per_second": "language",
    "alloc_profiler_buffer": "host", "reset_profiler_buffer": "host", "ProfilerBuffer": "host",
    "measure_clock_offset": "host", "gather_profiles": "host", "set_export_trace_on": "host",
    "set_export_trace_off": "host", "get_export_trace_on": "host",
    "parse_to_tracks": "viewer", "export_to_perfetto_trace": "viewer", "build_trace": "viewer",
    "load_trace": "viewer", "render_gantt_png": "viewer", "Task": "viewer", "Track": "viewer", "RankProfile": "host",
    "layout": None,
}

__all__ = sorted(_EXPORTS)


def __getattr__(name):
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    sub = _EXPORTS[name]
    if sub is None:
        return importlib.import_module(f"{__name__}.{name}")
    value = getattr(importlib.import_module(f"{__name__}.{sub}"), name)
    globals()[name] = value
    return value
