"""Triton's front end as triton_dist's language layer uses it: the builtin protocol, aggregates, the values a
lowering receives (``tl.tensor``, ``constexpr``, block pointers), ``TritonSemantic`` calls whose signature changed
between releases, and the code generator's frames (``with`` targets, local names, the kernel being traced).

Covers Triton 3.6-3.9 (``triton.language.core``, ``triton.language.semantic.TritonSemantic``,
``triton.compiler.code_generator.CodeGenerator``); each function's docstring names the behaviour it relies on and
``test/python/test_compat.py`` tests it (section "frontend"). Where a builtin runs under the interpreter is decided
here too (:func:`in_interpreted_program`: the frame of ``GridExecutor.__call__``), because :func:`builtin` needs it.
"""
from __future__ import annotations

from triton.language import core as tl_core

from .version import TRITON_VERSION


TRITON_BUILTIN_ATTR = tl_core.TRITON_BUILTIN


def builtin(fn):
    """Mark ``fn`` as a triton_dist builtin: a function a kernel calls, which runs at trace time. This is the one
    decorator for every triton_dist builtin (``dl.*``, ``language_extra``, ``libshmem_device``, SIMT vectors, the
    profiler); an aggregate's ``__init__`` takes :func:`aggregate_init` instead.

    * Traced by Triton's code generator: called with ``_semantic=<TritonSemantic>`` and, when its signature names it,
      ``_generator=<CodeGenerator>``.
    * Run by Triton's interpreter: called as plain Python without ``_semantic``, which arrives as None
      (``triton_dist.target.target_of`` reads None as the simulator target).
    * Called anywhere else (no ``_semantic`` and not from a program of an interpreted launch, see
      :func:`in_interpreted_program`): raises ``ValueError("<name>: called outside a @triton.jit /
      @triton_dist.jit kernel")`` instead of running a lowering on nothing.

    The result carries a ``cache_key``: a builtin passed to a kernel as a constexpr argument
    (``FN=libshmem_device.putmem``) is part of the kernel's disk cache key, and ``ASTSource.hash`` uses a constant's
    ``cache_key`` when it has one, else ``str()``, which for a function holds its address (different in every
    process).

    Assumptions: the code generator recognises builtins by the ``tl.core.TRITON_BUILTIN`` attribute and passes
    ``_semantic=`` / ``_generator=`` when the signature (``inspect.signature``, which follows ``__wrapped__``) names
    them; the interpreter calls builtins it did not patch (ours) without ``_semantic``.
    """
    import functools

    assert callable(fn)

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        if kwargs.get("_semantic") is None and not in_interpreted_program():
            raise ValueError(f"{fn.__name__}: called outside a @triton.jit / @triton_dist.jit kernel")
        return fn(*args, **kwargs)

    setattr(wrapper, TRITON_BUILTIN_ATTR, True)
    wrapper.cache_key = f"triton_dist-builtin:{fn.__module__}.{fn.__qualname__}"
    return wrapper


def aggregate_init(fn):
    """Mark the ``__init__`` of an :func:`aggregate` as a builtin WITHOUT :func:`builtin`'s outside-a-kernel check.

    Triton constructs an aggregate value through the class (``_aggregate``'s ``__new__`` calls ``__init__``, passing
    ``_semantic`` only when ``__init__`` names it), and builtins build values of it as plain Python while tracing, so
    a constructor is called without ``_semantic`` inside a compiled kernel too; it only stores fields. Assumption:
    ``_aggregate`` hashes ``__init__`` with the value's other methods, where a builtin is skipped and a plain
    function rejected."""
    assert callable(fn)
    setattr(fn, TRITON_BUILTIN_ATTR, True)
    return fn


def aggregate(cls):
    """Turn ``cls`` into a Triton aggregate value type (a struct of ``tl.tensor`` / ``tl.constexpr`` fields that a
    kernel can pass around, return from builtins, and carry through ``if`` / loops).

    Assumptions: ``triton.language.core._aggregate(cls)`` exists (3.4+); fields are ``cls.__annotations__`` and
    must all be set by ``__init__``; plain methods become methods of the value (called by the code generator with
    ``_semantic`` injected when they are marked builtins, and as ordinary Python under the interpreter); the code
    generator flattens the value into its tensor fields for control flow.
    """
    return tl_core._aggregate(cls)


#: Base class of every Triton value (``tl.tensor``, ``tl.constexpr``, aggregates); used as an aggregate field type
#: that admits both tensors and constexprs. Assumption: ``triton.language.core.base_value`` exists.
base_value = tl_core.base_value
#: The ``tl.tensor`` class and ``constexpr`` helpers.
tensor = tl_core.tensor
constexpr = tl_core.constexpr
#: Base class of every Triton type (``tl.dtype``, ``tl.block_type``, ...), for a value type of triton_dist's own (the
#: SIMT ``vector_type``). Assumption: ``triton.language.core.base_type`` exists (``mangle``, ``_flatten_ir_types``,
#: ``_unflatten_ir`` are what the code generator asks of a type).
base_type = tl_core.base_type
#: Base class of Triton's tensor descriptors (``tl.make_tensor_descriptor`` and host-made ones). Assumption:
#: ``triton.language.core.tensor_descriptor_base`` exists.
tensor_descriptor_base = tl_core.tensor_descriptor_base
#: ``int_dtype(bitwidth, signed)``: the ``tl`` integer dtype of that width and signedness (``(32, False)`` ->
#: ``tl.uint32``). Assumption: ``triton.language.core.get_int_dtype(bitwidth, signed)``.
int_dtype = tl_core.get_int_dtype
#: ``extern_elementwise(lib_name, lib_path, args, arg_type_symbol_dict, is_pure, _semantic=...)``: a call of an
#: external device function chosen by the argument types (what ``tl.extra.<lib>`` functions are made of).
#: Assumption: ``triton.language.core.extern_elementwise`` with this signature; ``lib_path`` is linked as an extern
#: library when non-empty.
extern_elementwise = tl_core.extern_elementwise


def unwrap_constexpr(value):
    """Return the Python value behind a ``tl.constexpr`` (or the value itself)."""
    return tl_core._unwrap_if_constexpr(value)


_program_runner_codes: set = set()
_grid_executor_call_code = None


def interpreted_program_runner(fn):
    """Declare ``fn`` a function that runs programs of an interpreted launch itself (it calls the kernel), for an
    executor that runs them somewhere other than Triton's ``GridExecutor.__call__`` (the simulator's program
    threads). Returns ``fn``."""
    _program_runner_codes.add(fn.__code__)
    return fn


def in_interpreted_program() -> bool:
    """Whether the caller runs inside a program of an interpreted launch: below a frame of Triton's
    ``GridExecutor.__call__`` or of a function declared with :func:`interpreted_program_runner`, in this thread.

    Independent of the interpreter switch (a kernel made while the interpreter was on is interpreted at launch
    whatever the switch says then). Cheap inside a kernel (the runner is a few frames up); walks the whole stack
    outside one.

    Assumption: Triton's interpreter runs each program of a launch by calling the kernel from
    ``GridExecutor.__call__`` in the launching thread (device-function calls, ``InterpretedFunction.__call__``,
    happen below it)."""
    import sys

    return _program_runner_frame(sys._getframe(1)) is not None


def _program_runner_frame(f):
    """``(runner frame, the frame it called)`` for the innermost program runner at or above frame ``f``, or None."""
    global _grid_executor_call_code
    if _grid_executor_call_code is None:
        from triton.runtime.interpreter import GridExecutor

        _grid_executor_call_code = GridExecutor.__call__.__code__
    stock, runners = _grid_executor_call_code, _program_runner_codes
    below = None
    while f is not None:
        code = f.f_code
        if code is stock or code in runners:
            return f, below
        f, below = f.f_back, f
    return None


def interpreted_kernel_name():
    """The name of the kernel whose program the caller runs (the function a program runner called: see
    :func:`in_interpreted_program`, same assumption: the runner calls the kernel itself), or None outside one."""
    import sys

    found = _program_runner_frame(sys._getframe(1))
    if found is None or found[1] is None:
        return None
    return found[1].f_code.co_name


def traced_kernel_name():
    """The name of the kernel Triton's code generator is compiling when the caller (a lowering, at trace time) runs,
    or None outside a compile. Assumption (``triton.compiler.code_generator``, 3.6-3.9): every function is traced by
    a ``CodeGenerator`` whose frames have it as ``self``; a called ``@jit`` function gets its own generator, and the
    kernel's (``is_kernel``, ``jit_fn``) is the outermost one on the stack."""
    import sys

    from triton.compiler.code_generator import CodeGenerator

    f, name = sys._getframe(1), None
    while f is not None:
        gen = f.f_locals.get("self")
        if isinstance(gen, CodeGenerator) and getattr(gen, "is_kernel", False):
            fn = getattr(gen, "jit_fn", None)
            name = getattr(getattr(fn, "fn", fn), "__name__", None) or name
        f = f.f_back
    return name


def semantic_load(semantic, ptr, mask=None, other=None):
    """What ``tl.load(ptr, mask, other)`` emits (default cache and eviction policy, not volatile), from a builtin
    holding the ``TritonSemantic`` ``semantic`` (compiled or interpreted).

    Assumption (tested in test_compat.py): ``TritonSemantic.load`` takes ``(ptr, mask, other, boundary_check,
    padding_option, cache_modifier, eviction_policy, is_volatile)`` up to Triton 3.8; 3.9 folds the cache options
    into one ``cache_policy`` (``tl.core._normalize_cache_policy(None, "", "")``): ``(ptr, mask, other,
    cache_policy, is_volatile)``."""
    if TRITON_VERSION >= (3, 9, 0):
        return semantic.load(ptr, mask, other, tl_core._normalize_cache_policy(None, "", ""), False)
    return semantic.load(ptr, mask, other, (), "", "", "", False)


def semantic_store(semantic, ptr, value, mask=None):
    """What ``tl.store(ptr, value, mask)`` emits (default cache and eviction policy), from a builtin holding
    ``semantic``. Assumption (tested in test_compat.py): ``TritonSemantic.store`` takes ``(ptr, value, mask,
    boundary_check, cache_modifier, eviction_policy)`` up to Triton 3.8 and ``(ptr, value, mask, cache_policy)`` from
    3.9 on."""
    if TRITON_VERSION >= (3, 9, 0):
        return semantic.store(ptr, value, mask, tl_core._normalize_cache_policy(None, "", ""))
    return semantic.store(ptr, value, mask, (), "", "")


def ir_value_parts_set_name(parts, builder, name: str) -> None:
    """Name the IR of a value that Triton sees as a ``tl.tensor`` but keeps its IR in ``parts`` (values with their
    own handles, e.g. a SIMT ``vector``), as Triton names a value bound to ``name``: part ``i`` gets
    ``name.i``. Triton 3.8 and later call ``value._set_name(builder, name)`` on every argument of a device function
    (and ``tl.tensor._set_name`` reads ``self.handle``, which such a value lacks); before 3.8 there is no naming and
    this does nothing. Such a class defines ``def _set_name(self, builder, name): _compat.ir_value_parts_set_name(
    self.<parts>, builder, name)``. Assumption (tested in test_compat.py): ``tl.tensor._set_name(builder, name)``
    exists from 3.8 on and not before."""
    if not hasattr(tl_core.tensor, "_set_name"):
        return
    for i, part in enumerate(parts):
        part._set_name(builder, f"{name}.{i}")


def compile_options(semantic):
    """The backend options object of the kernel being traced (``CUDAOptions`` / ``HIPOptions``).

    Assumption: the code generator stores them on ``semantic.builder.options`` before tracing.
    """
    return getattr(semantic.builder, "options", None)


def is_block_pointer(value) -> bool:
    """Whether the traced ``value`` is a block pointer (``tl.make_block_ptr``). Assumption (tested in
    test_compat.py): up to Triton 3.7 a block pointer is a ``tl.tensor`` whose type is a pointer to a block type;
    Triton 3.8 made it a front-end aggregate whose class carries ``__triton_block_ptr__ = True``."""
    if getattr(type(value), "__triton_block_ptr__", False):
        return True
    ty = getattr(value, "type", None)
    return isinstance(value, tl_core.tensor) and ty.is_ptr() and ty.element_ty.is_block()


def advance_block_pointer(value, offsets, semantic):
    """``tl.advance(value, offsets)`` from a builtin holding ``semantic``: up to Triton 3.7
    ``TritonSemantic.advance(value, offsets)``; from 3.8 the aggregate's ``advance(offsets, _semantic=...)``."""
    if getattr(type(value), "__triton_block_ptr__", False):
        return value.advance(offsets, _semantic=semantic)
    return semantic.advance(value, offsets)


def block_pointer_rank(value) -> int:
    """The number of dimensions of the block pointer ``value`` (see :func:`is_block_pointer`)."""
    if getattr(type(value), "__triton_block_ptr__", False):
        return len(value.block_shape)
    return len(value.type.element_ty.shape)


def type_from_name(name: str):
    """The ``tl`` dtype for a signature type name (``fp32``, ``bf16``, ``i64``, ``*fp16``, ...); ``KeyError`` for an
    unknown one. Assumption: ``triton.language.str_to_ty(name, None)`` parses signature type names."""
    from triton.language import str_to_ty

    return str_to_ty(name, None)


def compilation_error_line(exc: BaseException):
    """One line for Triton's front-end ``CompilationError`` ``exc`` (the offending source line and the error), or
    None for any other exception. Assumption: ``triton.compiler.errors.CompilationError`` carries ``src``, ``node``
    (an ``ast`` node with ``lineno``) and ``error_message`` (None when the cause is only in ``__cause__``)."""
    from triton.compiler.errors import CompilationError

    if not isinstance(exc, CompilationError):
        return None
    message = exc.error_message or (f"{type(exc.__cause__).__name__}: {exc.__cause__}" if exc.__cause__ else "")
    message = " ".join(str(message).split()) or type(exc).__name__
    lineno = getattr(exc.node, "lineno", None)
    lines = (exc.src or "").split("\n")
    if lineno and 0 < lineno <= len(lines) and lines[lineno - 1].strip():
        return f"{message} (at `{lines[lineno - 1].strip()}`)"
    return message


def jit_function(fn):
    """A real ``JITFunction`` for ``fn`` regardless of ``TRITON_INTERPRET`` (used for GPU-only helpers that
    builtins inline through :func:`call_jit`)."""
    from triton.runtime.jit import JITFunction

    return JITFunction(fn)


def call_jit(generator, fn, args, kwargs=None):
    """Emit a call to the ``JITFunction`` ``fn`` from inside a builtin, as if the kernel had called it.

    Assumption: the code generator passes itself as ``_generator`` to builtins that ask for it, and has
    ``call_JitFunction(fn, args, kwargs)``. Python ``str`` arguments are wrapped into ``constexpr``."""
    args = [constexpr(a) if isinstance(a, str) else a for a in args]
    return generator.call_JitFunction(fn, args, dict(kwargs or {}))


def set_divisibility(value, divisor: int):
    """Mark a scalar/1-D value's divisibility (``tt.divisibility`` attribute read by AxisInfo on any op)."""
    value.handle.set_attr("tt.divisibility", _ir().make_attr([divisor] * max(1, len(value.shape)),
                                                                value.handle.get_context()))
    return value


def _ir():
    from triton._C.libtriton import ir

    return ir


def _visit_with_frame():
    """The frame of ``CodeGenerator.visit_With`` that is calling a context manager's ``__enter__`` right now, or None.

    Assumption: stock Triton lowers ``with cm() as target:`` in ``CodeGenerator.visit_With`` by calling
    ``cm.__enter__()`` inside a loop whose locals are ``self`` (the generator) and ``item`` (the ``ast.withitem``),
    then binds ``self.visit(item.optional_vars)`` with ``set_value`` -- which, for a tuple target ``as (a, b)``,
    binds nothing usable (the key is a ``tl.tuple`` of names).
    """
    import sys

    from triton.compiler.code_generator import CodeGenerator

    code = CodeGenerator.visit_With.__code__
    f = sys._getframe(1)
    while f is not None:
        if f.f_code is code:
            return f
        f = f.f_back
    return None


def bind_with_tuple_target(values):
    """Called from a context manager's ``__enter__`` while Triton compiles a ``with``: when the statement's target
    is a tuple (``as (tid, n)``), bind each name to the matching element of ``values`` in the code generator and
    hide the target from ``visit_With`` (it would bind the tuple under a bogus key). Returns an undo callable for
    ``__exit__`` (restores the AST node), or None when there is nothing to do (``as name``, no target, or not
    called from ``visit_With``).
    """
    import ast

    frame = _visit_with_frame()
    if frame is None:
        return None
    gen, item = frame.f_locals.get("self"), frame.f_locals.get("item")
    target = getattr(item, "optional_vars", None)
    if not isinstance(target, (ast.Tuple, ast.List)):
        return None
    if len(target.elts) != len(values):
        raise ValueError(f"`with ... as (...)` unpacks {len(values)} values, got {len(target.elts)} names")
    gen.assignTarget(target, tl_core.tuple(list(values)))
    item.optional_vars = None

    def undo():
        item.optional_vars = target

    return undo


def with_statement_being_entered():
    """``(code generator, ast.With node)`` of the ``with`` statement whose context manager's ``__enter__`` runs right
    now in Triton's code generator, or None (not compiling, e.g. under the interpreter).

    Assumptions (tested in test_compat.py): as :func:`bind_with_tuple_target`, plus: ``visit_With``'s local ``node``
    is the ``ast.With`` and it reads ``node.body`` only after every ``__enter__`` returned (so the body may be edited
    from ``__enter__``); the generator's local names live in ``lscope`` (a dict) and ``set_value(name, value)``
    rebinds one; ``visit_Subscript_Load`` indexes a value that is not a Triton value with plain Python ``lhs[idx]``
    (``idx`` a ``tl.tuple`` for ``a[i, k]``); an attribute call ``obj.m(...)`` on such a value calls the bound method,
    passing ``_semantic`` when ``m`` is a builtin."""
    frame = _visit_with_frame()
    if frame is None:
        return None
    return frame.f_locals.get("self"), frame.f_locals.get("node")


def scope_value(generator, name: str):
    """The value the code generator has bound to local ``name`` (None when unbound)."""
    return generator.lscope.get(name)


def bind_scope_value(generator, name: str, value) -> None:
    """Rebind local ``name`` in the code generator (``CodeGenerator.set_value``)."""
    generator.set_value(name, value)
