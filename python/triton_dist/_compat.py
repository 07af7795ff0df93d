"""Every assumption triton_dist makes about Triton internals, in one place.

Each function here names the Triton behaviour it relies on; ``test/python/test_compat.py`` has one test per
assumption so that a Triton upgrade that breaks one fails loudly in CI instead of mis-lowering kernels.
Nothing outside this module imports private Triton modules.
"""
from __future__ import annotations

import triton
import triton.language as tl
from triton.language import core as tl_core

TRITON_VERSION = tuple(int(p) for p in triton.__version__.split("+")[0].split(".")[:3])

#: Marks a Python function as a Triton builtin: the code generator then calls it with ``_semantic=``.
builtin = tl_core.builtin
#: The ``tl.tensor`` class and ``constexpr`` helpers.
tensor = tl_core.tensor
constexpr = tl_core.constexpr


def unwrap_constexpr(value):
    """Return the Python value behind a ``tl.constexpr`` (or the value itself)."""
    return tl_core._unwrap_if_constexpr(value)


def is_interpreter_semantic(semantic) -> bool:
    """True when ``semantic`` belongs to Triton's interpreter (``TRITON_INTERPRET=1``).

    Assumption: the interpreter's builder is ``triton.runtime.interpreter.InterpreterBuilder``.
    """
    if semantic is None:
        return True
    from triton.runtime.interpreter import InterpreterBuilder

    return isinstance(getattr(semantic, "builder", None), InterpreterBuilder)


def interpreter_semantic():
    """The interpreter's module-level ``TritonSemantic`` (used by sim lowerings called without ``_semantic``).

    Assumption: ``triton.runtime.interpreter.interpreter_semantic`` exists.
    """
    from triton.runtime import interpreter

    return interpreter.interpreter_semantic


def compile_options(semantic):
    """The backend options object of the kernel being traced (``CUDAOptions`` / ``HIPOptions``).

    Assumption: the code generator stores them on ``semantic.builder.options`` before tracing.
    """
    return getattr(semantic.builder, "options", None)


def interpret_enabled() -> bool:
    """Whether ``triton.jit`` currently produces interpreted functions (``TRITON_INTERPRET``)."""
    return bool(triton.knobs.runtime.interpret)


def kernel_load_end_hooks():
    """The hook chain Triton calls after loading a compiled module: ``hook(module, function, name,
    metadata_group, hash)``. Assumption: ``knobs.runtime.kernel_load_end_hook`` is a ``HookChain`` (3.5+)."""
    return triton.knobs.runtime.kernel_load_end_hook


def cache_invalidating_env_vars() -> dict:
    """Env vars Triton folds into its compilation cache key."""
    from triton._C.libtriton import get_cache_invalidating_env_vars

    return get_cache_invalidating_env_vars()
