"""Developer tools: ``compile`` (compile a kernel for any target and print a stage), ``profiler`` (intra-kernel
profiler with Perfetto export), ``aot`` (ahead-of-time compilation into C launchers), ``precompile`` (compile the
kernel requests a job recorded into Triton's cache, in parallel: ``python -m triton_dist.tools.precompile DIR``).

Public names are loaded lazily, so ``import triton_dist.tools`` imports nothing heavy (no torch, no matplotlib, no
compiler) until one is used.
"""
import importlib
import warnings

_EXPORTS = {
    # profiler
    "Profiler": "profiler", "alloc_profiler_buffer": "profiler", "reset_profiler_buffer": "profiler",
    "ProfilerBuffer": "profiler", "parse_to_tracks": "profiler", "export_to_perfetto_trace": "profiler",
    "render_gantt_png": "profiler", "measure_clock_offset": "profiler", "gather_profiles": "profiler",
    # ahead-of-time compilation
    "aot_compile_spaces": "aot", "aot_compile_kernel": "aot", "make_ast_source": "aot", "kernel_name_suffix": "aot",
    "materialize_c_params": "aot", "dump_c_code": "aot", "dump_dispatcher": "aot",
}

__all__ = sorted(_EXPORTS) + ["apply_triton340_inductor_patch"]


def apply_triton340_inductor_patch():
    """Kept for source compatibility with Triton-distributed, where it patched PyTorch Inductor to work with that
    project's Triton 3.4.0 fork. triton-dist runs on the stock Triton wheel, so there is nothing to patch: this is a
    no-op. It warns when the installed Triton is not 3.4.0 (the version the original patch targeted), so callers
    relying on it notice. Returns False (nothing was patched)."""
    import triton

    if triton.__version__.split("+")[0] != "3.4.0":
        warnings.warn(f"apply_triton340_inductor_patch: installed Triton is {triton.__version__}, not 3.4.0; "
                      f"triton-dist uses stock Triton and applies no patch (this call does nothing)",
                      RuntimeWarning, stacklevel=2)
    return False


def __getattr__(name):
    sub = _EXPORTS.get(name)
    if sub is None:
        if name in ("compile", "profiler", "aot", "precompile"):
            return importlib.import_module(f"{__name__}.{name}")
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{sub}"), name)
    globals()[name] = value
    return value
