"""One test per assumption triton_dist makes about Triton internals (python/triton_dist/_compat.py).

If a Triton upgrade breaks one of these, this file says which assumption moved. Helpers working on other parts
append their assumptions below, one test each.
"""
import triton
import triton.language as tl

from triton_dist import _compat
from triton_dist.target import parse_target
from triton_dist.tools.compile import CompileRequest, compile_kernel


def test_triton_version_in_supported_range():
    assert (3, 5, 0) <= _compat.TRITON_VERSION < (3, 7, 0)


_CALLS = []


@_compat.builtin
def _capture(_semantic=None):
    _CALLS.append(_semantic)


@triton.jit
def _k(p):
    _capture()
    tl.store(p, 0)


def test_code_generator_passes_semantic_to_marked_callables():
    _CALLS.clear()
    compile_kernel(CompileRequest(_k, parse_target("cuda:90"), ["*i32"]))
    assert len(_CALLS) == 1 and _CALLS[0] is not None
    assert not _compat.is_interpreter_semantic(_CALLS[0])


def test_compile_options_live_on_semantic_builder():
    _CALLS.clear()
    compile_kernel(CompileRequest(_k, parse_target("hip:gfx942"), ["*i32"]))
    opts = _compat.compile_options(_CALLS[0])
    assert opts.backend_name == "hip" and opts.arch == "gfx942"
    _CALLS.clear()
    compile_kernel(CompileRequest(_k, parse_target("cuda:90"), ["*i32"]))
    opts = _compat.compile_options(_CALLS[0])
    assert opts.backend_name == "cuda" and opts.arch == "sm90"


def test_interpreter_semantic_is_recognised():
    sem = _compat.interpreter_semantic()
    assert _compat.is_interpreter_semantic(sem)
    assert _compat.is_interpreter_semantic(None)


def test_builtin_marker_attribute_is_what_triton_checks():
    assert tl.core.is_builtin(_capture)


def test_kernel_load_end_hook_is_a_chain():
    chain = _compat.kernel_load_end_hooks()
    seen = []

    def hook(*args):
        seen.append(args)

    chain.add(hook)
    try:
        chain("module", "function", "name", {}, "hash")
        assert seen == [("module", "function", "name", {}, "hash")]
    finally:
        chain.remove(hook)
    assert hook not in chain.calls


def test_cache_invalidating_env_vars_is_a_dict():
    assert isinstance(_compat.cache_invalidating_env_vars(), dict)


def test_interpreter_restore_self_copy_is_a_noop():
    # The interpreter copies every tensor argument's storage back after a launch; for CPU tensors it copies a
    # storage onto itself. The simulator relies on that being a no-op: a real copy would race with peers
    # writing into this rank's symmetric buffers.
    import torch

    s = torch.arange(1 << 20, dtype=torch.int32).untyped_storage()
    before = s.data_ptr()
    s.copy_(s)
    assert s.data_ptr() == before
