"""Every assumption triton_dist makes about Triton's internals, in one package, one module per concern:

* :mod:`.version` -- the supported releases (3.6.x-3.9.x) and the per-release facts (checked on import: an
  unsupported Triton fails here, with one ``ImportError``);
* :mod:`.frontend` -- the builtin protocol, aggregates, ``TritonSemantic`` calls, the code generator's frames;
* :mod:`.compiler` -- the stage pipeline and its hook, extern libraries, the LLVM inside Triton, ``GPUTarget`` /
  ``ASTSource``, the kernel-load hooks;
* :mod:`.launcher` -- the specialization binder, the active driver, a compiled kernel's launcher, the allocator;
* :mod:`.interpreter` -- the interpreter switch, its values, raw-address memory helpers, one interpreted launch,
  device-function calls and the hook points of the simulator's workarounds.

Each function names the Triton behaviour it relies on; ``test/python/test_compat.py`` has one test per assumption
(sections in the order above) so that a Triton upgrade that breaks one fails loudly in CI instead of mis-lowering
kernels. Callers use ``from triton_dist import _compat`` and ``_compat.<name>``: this module only re-exports.

The rule for the rest of triton_dist: Triton's public API is what ``triton`` and ``triton.language`` export (their
``__all__``, e.g. ``triton.jit``, ``triton.JITFunction``, ``tl.tensor``) and the modules ``triton.language.extra``,
``triton.language.math``, ``triton.testing`` and ``triton.knobs``; any other Triton module (``triton.runtime.*``,
``triton.compiler.*``, ``triton.backends.*``, ``triton._C.*``, ``triton.language.core``, ...) and any ``_`` name is
private and is reached only through this package, or is on the reasoned allow-list of
``test/python/test_private_triton_imports.py``, which enforces the rule.
"""
from .version import (  # noqa: F401
    SUPPORTED_TRITON, parse_triton_version, supported_triton_spec, check_triton_version, TRITON_VERSION,
    CUDA_CAPABILITIES, HAS_BLOCK_POINTERS, HAS_ATOMIC_POLL, HIP_ARCHS)
from .frontend import (  # noqa: F401
    TRITON_BUILTIN_ATTR, builtin, aggregate_init, aggregate, base_value, tensor, constexpr, base_type,
    tensor_descriptor_base, int_dtype, extern_elementwise, unwrap_constexpr,
    interpreted_program_runner, in_interpreted_program, interpreted_kernel_name, traced_kernel_name, semantic_load,
    semantic_store, ir_value_parts_set_name, compile_options, is_block_pointer, advance_block_pointer,
    block_pointer_rank, type_from_name, compilation_error_line, jit_function, call_jit, set_divisibility,
    bind_with_tuple_target, with_statement_being_entered, scope_value, bind_scope_value)
from .compiler import (  # noqa: F401
    hip_links_extern_lib, amdgcn_with_module_resource_symbols, wrap_hip_amdgcn_stage, LLIR_METADATA_DEFAULTS,
    fill_skipped_stage_metadata, kernel_load_end_hooks, reset_loading_compiled_kernel,
    current_stages_inspection_hook, set_stages_inspection_hook, stages_inspection_hook, stages_hook_cache_key,
    llir_stage_with_extern_libs, cache_invalidating_env_vars, llvm_type_name, llvm_ir_to_asm,
    extract_library_functions, gpu_target, ptxas_for, ast_source)
from .launcher import (  # noqa: F401
    allocator_is_unset, specialization_binder, device_and_stream_getters, compiled_kernel_launcher, active_driver)
from .interpreter import (  # noqa: F401
    interpret_enabled, set_interpret, is_interpreter_semantic, interpreter_semantic, semantic_or_interpreter,
    interpreter_np_dtype,
    interpreter_handle, interpreter_value, interpreter_data, interp_atomics, raw_atomic_rmw, raw_atomic_cas,
    raw_load, raw_store, install_thread_local_grid_idx, interpreted_launch, interpreter_program_error,
    interpreter_error_origin, install_interpreted_jit_calls, override_interpreter_tensor_attr,
    extend_interpreter_tensor, convert_interpreter_dot_operands, wrap_interpreter_builder_ops,
    wrap_interpreter_reduce_sum, interpreted_function, is_interpreted_function, standard_library_globals)
