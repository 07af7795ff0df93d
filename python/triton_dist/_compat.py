"""Every assumption triton_dist makes about Triton internals, in one place.

Each function here names the Triton behaviour it relies on; ``test/python/test_compat.py`` has one test per
assumption so that a Triton upgrade that breaks one fails loudly in CI instead of mis-lowering kernels.
Nothing outside this module imports private Triton modules. What triton_dist builds on these assumptions lives with
its users (the simulator's executor and interpreter workarounds: ``triton_dist.runtime.sim.interpreter``).
"""
from __future__ import annotations

import os
import re

import triton

#: The Triton releases triton_dist supports: ``SUPPORTED_TRITON[0] <= version < SUPPORTED_TRITON[1]``, i.e. 3.6.x
#: through 3.9.x. ``pyproject.toml``'s ``triton`` requirement says the same (test_compat checks that they agree);
#: CI runs the full tier on 3.6.0 and the matrix subset on the newest patch of 3.7, 3.8 and 3.9
#: (``scripts/triton_matrix.sh``).
SUPPORTED_TRITON = ((3, 6, 0), (3, 10, 0))


def parse_triton_version(text: str) -> tuple:
    """``(major, minor, patch)`` of a Triton version string (``"3.7.1"``, ``"3.8.0+git1234"``, ``"3.9.0rc1"``:
    local and pre-release suffixes are ignored; a missing part is 0)."""
    import re

    parts = [int(re.match(r"\d*", p).group(0) or 0) for p in text.split("+")[0].split(".")[:3]]
    return tuple(parts + [0] * (3 - len(parts)))


def supported_triton_spec() -> str:
    """The supported range as a pip requirement specifier (``>=3.6,<3.10``)."""
    lo, hi = SUPPORTED_TRITON
    return f">={lo[0]}.{lo[1]},<{hi[0]}.{hi[1]}"


def check_triton_version(text: str) -> tuple:
    """The parsed ``text`` (a ``triton.__version__``) when it lies in :data:`SUPPORTED_TRITON`; otherwise one
    ``ImportError`` naming the installed version and the supported range (raised by ``import triton_dist``, before
    anything touches Triton's internals)."""
    version = parse_triton_version(text)
    if not SUPPORTED_TRITON[0] <= version < SUPPORTED_TRITON[1]:
        raise ImportError(
            f"triton_dist supports triton{supported_triton_spec()} (3.6.x to 3.9.x); the installed triton is {text} "
            f"({os.path.dirname(getattr(triton, '__file__', None) or '?')}). Install a supported triton, e.g. the one "
            f"your torch pins (torch 2.11 -> 3.6.0, 2.12.1/2.13 -> 3.7.1, 2.14 -> 3.8.0, 2.15 -> 3.9.0): "
            f"pip install \"triton{supported_triton_spec()}\"")
    return version


TRITON_VERSION = check_triton_version(triton.__version__)

from triton.language import core as tl_core  # noqa: E402  (after the version check: its layout is version-bound)

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


#: The ``tl.tensor`` class and ``constexpr`` helpers.
tensor = tl_core.tensor
constexpr = tl_core.constexpr


def hip_links_extern_lib(lib_name: str, undefined_symbols) -> bool:
    """Whether Triton's HIP backend links the ``extern_libs`` entry ``lib_name`` into a module whose undefined
    functions are ``undefined_symbols``. Assumption (``make_llir`` + ``amd.need_extern_lib``): an entry is linked
    only when one undefined function's name contains ``lib_name``; the CUDA backend links every entry. Textual
    LLVM IR is accepted as well as bitcode (``llvm.link_extern_libs`` parses either)."""
    return any(lib_name in sym for sym in undefined_symbols)


_NAMED_BARRIER_MAX = "amdgpu.max_num_named_barrier"
_NAMED_BARRIER_SET_RE = re.compile(r"^\s*\.set\s+amdgpu\.max_num_named_barrier\s*,", re.M)
# a function's own named-barrier count: ".set F.num_named_barrier, N" or ".set F.num_named_barrier, max(N, ...)"
_FN_NAMED_BARRIERS_RE = re.compile(r"^\s*\.set\s+\S+\.num_named_barrier\s*,\s*(?:max\(\s*)?(\d+)", re.M)


def amdgcn_with_module_resource_symbols(asm: str) -> str:
    """AMDGCN text ``asm`` with ``amdgpu.max_num_named_barrier`` defined where LLVM refers to it but never defines it.

    LLVM's AMDGPU resource accounting treats a call to a function the module only declares (an extern that no
    library resolved, e.g. a rocSHMEM function compiled without rocSHMEM's bitcode) as an indirect call: the
    caller's resource symbols become ``max(own count, amdgpu.max_num_<resource>)``, module-wide maxima that the
    printer defines at the end of the module. The LLVM bundled with Triton 3.6 defines ``amdgpu.max_num_vgpr`` /
    ``_agpr`` / ``_sgpr`` but not ``amdgpu.max_num_named_barrier`` (added by llvm-project PR 169851, which Triton
    3.7+ bundle), so assembling the text aborts the process (``LLVM ERROR: cannot evaluate equated symbol
    '<kernel>.num_named_barrier'``). The definition appended here has the value LLVM gives it: the largest
    named-barrier count of the module's own functions (0 on gfx9, which has no named barriers). Text that does not
    refer to the symbol, or defines it already, is returned unchanged. Tested in test_compat.py: Triton 3.6 needs
    it and the result assembles; on 3.7+ it changes nothing."""
    if _NAMED_BARRIER_MAX not in asm or _NAMED_BARRIER_SET_RE.search(asm):
        return asm
    value = max((int(n) for n in _FN_NAMED_BARRIERS_RE.findall(asm)), default=0)
    return asm + ("" if asm.endswith("\n") else "\n") + f"\t.set {_NAMED_BARRIER_MAX}, {value}\n"


def wrap_hip_amdgcn_stage(stages) -> None:
    """Make the HIP pipeline's ``amdgcn`` stage (``stages``: the ordered dict an inspection hook edits) return
    :func:`amdgcn_with_module_resource_symbols` of its text, so that ``hsaco`` assembles a kernel with unresolved
    extern calls. Assumption: the HIP stages are named ``amdgcn`` (LLVM IR -> AMDGCN text) then ``hsaco``."""
    stock = stages.get("amdgcn")
    if stock is None or getattr(stock, "_triton_dist_resource_symbols", False):
        return

    def amdgcn(src, metadata):
        return amdgcn_with_module_resource_symbols(stock(src, metadata))

    amdgcn._triton_dist_resource_symbols = True
    stages["amdgcn"] = amdgcn


#: What the LLVM IR stage (``make_llir``) records in a compilation's metadata, with the value of a kernel that uses
#: none of it; ``triton.compile`` needs ``shared`` (the backends' ``pack_metadata``) even when the stages that set it
#: were skipped (``tools.compile --stage ttir``). Tested in test_compat.py (stopping after ttir / ttgir).
LLIR_METADATA_DEFAULTS = {"shared": 0, "tmem_size": 0, "global_scratch_size": 0, "global_scratch_align": 1,
                          "profile_scratch_size": 0, "profile_scratch_align": 1}


def fill_skipped_stage_metadata(metadata) -> None:
    """Give ``metadata`` (a compilation's metadata dict) the fields of :data:`LLIR_METADATA_DEFAULTS` it lacks."""
    for key, value in LLIR_METADATA_DEFAULTS.items():
        metadata.setdefault(key, value)


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


def interpret_enabled() -> bool:
    """Whether ``triton.jit`` currently produces interpreted functions (``TRITON_INTERPRET``)."""
    return bool(triton.knobs.runtime.interpret)


def set_interpret(on: bool) -> None:
    """Turn Triton's interpreter on or off for this process: ``TRITON_INTERPRET`` (``"1"`` / ``"0"``, inherited by
    processes started afterwards) and ``triton.knobs.runtime.interpret`` (what ``triton.jit`` reads).

    Assumption: ``triton.knobs.runtime.interpret`` is assignable and overrides the variable."""
    os.environ["TRITON_INTERPRET"] = "1" if on else "0"
    triton.knobs.runtime.interpret = bool(on)


def allocator_is_unset() -> bool:
    """Whether no Triton allocator (``triton.set_allocator``) is installed for this context: device-side tensor
    descriptors then have no scratch memory. Triton 3.6 keeps the allocator in ``triton.runtime._allocation``
    (a context variable holding a ``NullAllocator`` until set)."""
    from triton.runtime import _allocation

    return isinstance(_allocation._allocator.get(), _allocation.NullAllocator)


def interpreter_np_dtype(dtype):
    """The numpy dtype the interpreter stores a Triton ``dtype`` as (Triton 3.6:
    ``triton.runtime.interpreter._get_np_dtype``)."""
    from triton.runtime.interpreter import _get_np_dtype

    return _get_np_dtype(dtype)


def kernel_load_end_hooks():
    """The hook chain Triton calls after loading a compiled module: ``hook(module, function, name,
    metadata_group, hash)``. Assumption: ``knobs.runtime.kernel_load_end_hook`` is a ``HookChain`` (3.5+)."""
    return triton.knobs.runtime.kernel_load_end_hook


def stages_inspection_hook(edit_stages, cache_key: str, previous=None):
    """A value for ``triton.knobs.runtime.add_stages_inspection_hook`` that lets ``edit_stages(stages)`` change the
    backend's pipeline (the ordered dict ``stage name -> fn(src, metadata)``) of every compilation while it is
    installed, after ``previous`` (the hook installed before, or None) has run. ``cache_key`` names the edit:
    kernels compiled with it are cached apart from stock ones.

    Assumptions (tested in test_compat.py): the backend's ``add_stages`` calls the hook as ``hook(backend, stages,
    options, language, capability)`` after filling ``stages`` (Triton 3.5+); from Triton 3.7 on, ``triton.compile``
    and ``JITFunction.run`` also call it with no arguments first and expect ``(key_suffix, hash)`` back, which they
    add to the compilation cache key."""
    def hook(*args):
        if not args:
            return stages_hook_cache_key(cache_key, previous)
        if previous is not None:
            previous(*args)
        edit_stages(args[1])

    return hook


def stages_hook_cache_key(cache_key: str, previous=None):
    """What a stage-inspection hook returns when Triton 3.7+ calls it with no arguments: ``(key_suffix, hash)``
    for the compilation cache key, naming this hook's edit (``cache_key``) after the one of ``previous`` (the hook
    it chains to, or None)."""
    import hashlib

    key = cache_key
    if previous is not None and TRITON_VERSION >= (3, 7, 0):
        key = f"{previous()[0]}+{cache_key}"
    return key, hashlib.sha256(key.encode()).hexdigest()


def cache_invalidating_env_vars() -> dict:
    """Env vars Triton folds into its compilation cache key."""
    from triton._C.libtriton import get_cache_invalidating_env_vars

    return get_cache_invalidating_env_vars()


#: The NVIDIA compute capabilities the installed Triton compiles to cubin for. ``parse_target`` accepts only these,
#: so a typo fails in one line instead of in ptxas. Triton 3.6 (ptxas 12.8 and ptxas-blackwell) compiles sm_101 and
#: refuses sm_110; from 3.7 on (CUDA 13 ptxas) Thor is sm_110 and sm_101 is refused. sm_88 is refused by all (3.8+
#: abort the process in LLVM for it). Tested per capability in test_compat.py.
CUDA_CAPABILITIES = ((70, 72, 75, 80, 86, 87, 89, 90, 100, 101, 103, 120, 121) if TRITON_VERSION < (3, 7, 0) else
                     (70, 72, 75, 80, 86, 87, 89, 90, 100, 103, 110, 120, 121))


#: Whether the installed Triton has block pointers (``tl.make_block_ptr`` / ``tl.advance``): 3.6-3.8 do; 3.9 removed
#: them in favour of tensor descriptors (its ``make_block_ptr`` raises ``NotImplementedError``), so
#: ``dl.consume_token`` on a block pointer exists only where this is true. Tested in test_compat.py.
HAS_BLOCK_POINTERS = TRITON_VERSION < (3, 9, 0)

#: Whether the installed Triton has the public ``tl.atomic_poll(ptr, expected, sem, scope, timeout_ns)`` (3.9 on;
#: ``tl.atomic_load`` / ``tl.atomic_store`` came with it). Where true, the NVIDIA ``dl.wait`` on ONE signal without a
#: bound uses it instead of its inline-asm spin. Assumptions (tested in test_compat.py, per version): the attribute
#: exists exactly where this is true, and on a scalar pointer for cuda the op lowers to thread 0 spinning on
#: ``ld.relaxed.<scope>`` until the value equals ``expected``, then ``fence.acquire.<scope>`` (acquire only) and
#: ``bar.sync 0`` -- the same scope, acquire ordering and CTA barrier as the emulation (``ld.acquire.<scope>`` spin
#: in thread 0, ``bar.sync 0``). ``tl.atomic_load`` / ``atomic_store`` are NOT used for ``language_extra.ld`` /
#: ``st``: on a scalar pointer they run in thread 0 only, behind ``bar.sync`` (results broadcast through shared
#: memory), where ``ld`` / ``st`` run in every thread and must not synchronise (they are used in divergent SIMT code).
HAS_ATOMIC_POLL = TRITON_VERSION >= (3, 9, 0)


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


def _hip_archs(version) -> tuple:
    """The gfx processors Triton ``version``'s HIP backend compiles for: Triton 3.6 and 3.7's LLVM reject gfx906,
    gfx940 and gfx941; 3.8 accepts gfx906 again; 3.9 drops gfx1030."""
    archs = ["gfx908", "gfx90a", "gfx942", "gfx950", "gfx1030", "gfx1100", "gfx1101", "gfx1102", "gfx1103",
             "gfx1150", "gfx1151", "gfx1152", "gfx1153", "gfx1200", "gfx1201", "gfx1250"]
    if version >= (3, 8, 0):
        archs.insert(0, "gfx906")
    if version >= (3, 9, 0):
        archs.remove("gfx1030")
    return tuple(archs)


#: The AMD gfx processors the installed Triton's HIP backend compiles for. Tested per arch in test_compat.py.
HIP_ARCHS = _hip_archs(TRITON_VERSION)


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


def llvm_type_name(dtype) -> str:
    """The LLVM integer type a ``tl`` integer dtype passes as in an extern call (``i32``, ``i64``; signedness is not
    part of an LLVM type)."""
    return f"i{dtype.primitive_bitwidth}"


def llvm_ir_to_asm(llvm_ir: str, triple: str, proc: str, features: str = "") -> str:
    """Assembly text of the textual LLVM IR ``llvm_ir`` compiled by the LLVM inside Triton for ``triple`` /
    ``proc`` (no extra flags, no FP fusion), as Triton's backends do before calling ptxas or the AMD linker.

    Assumption (tested in test_compat.py): ``triton._C.libtriton.llvm.translate_to_asm(ir, triple, proc, features,
    flags, enable_fp_fusion, is_object)``; Triton 3.8 added an eighth argument ``canonicalize_gep`` (False: what
    the backends pass unless an instrumentation mode asks for it)."""
    from triton._C.libtriton import llvm

    llvm.init_targets()
    extra = (False, ) if TRITON_VERSION >= (3, 8, 0) else ()
    return llvm.translate_to_asm(llvm_ir, triple, proc, features, [], False, False, *extra)


def extract_library_functions(lib_path: str, functions, triple: str, proc: str, features: str = "") -> str:
    """Textual LLVM IR of a module that defines ``functions`` (``{symbol: (arg_type_names, ret_type_name)}``, e.g.
    ``{"nvshmem_ptr": (("i64", "i32"), "i64")}``) exactly as ``lib_path`` defines them, plus every function and
    global those definitions need, and nothing else of the library.

    Made with the linker Triton itself links ``extern_libs`` with, so a kernel that links the result compiles to the
    same code as one that links ``lib_path`` (checked on compiled PTX by the tests). Assumptions, each tested in
    ``test_compat.py``: ``ir.parse_mlir_module(path, context)`` parses an LLVM-dialect file; ``llvm.to_module``
    translates it; ``llvm.attach_datalayout`` needs ``llvm.init_targets()`` first; ``llvm.link_extern_libs`` links
    only what the module declares (``LinkOnlyNeeded``) and gives every function it linked in internal linkage;
    ``str(llvm_module)`` is IR text that ``link_extern_libs`` parses back (it accepts text as well as bitcode). The
    requested functions get their external linkage back (a textual edit of their ``define internal`` lines), so
    the result can itself be linked by ``link_extern_libs``."""
    import re
    import tempfile

    from triton._C.libtriton import ir, llvm

    lines = ["module {"]
    for sym, (args, ret) in sorted(functions.items()):
        lines.append(f"  llvm.func @{sym}({', '.join(args)}) -> {ret}")
    lines.append("}")
    with tempfile.TemporaryDirectory() as tmp:
        path = f"{tmp}/declarations.mlir"
        with open(path, "w") as f:
            f.write("\n".join(lines) + "\n")
        context = ir.context()
        ir.load_dialects(context)
        mlir_module = ir.parse_mlir_module(path, context)
        llvm_context = llvm.context()
        module = llvm.to_module(mlir_module, llvm_context)
    llvm.init_targets()
    llvm.attach_datalayout(module, triple, proc, features)
    llvm.link_extern_libs(module, [lib_path])
    text = str(module)
    wanted = set(functions)

    def external(m):
        return m.group(0).replace("define internal ", "define ", 1) if m.group(1) in wanted else m.group(0)

    return re.sub(r"^define internal [^@\n]*@([A-Za-z0-9_.$]+)\(", external, text, flags=re.M)


# ---------------------------------------------------------------------------------------------------------------
# Triton's interpreter, as the simulator uses it: its C++ memory helpers on raw addresses, its program id, the frame
# of one launch. What the simulator builds on them (program threads, workarounds) is triton_dist.runtime.sim.interpreter.
# ---------------------------------------------------------------------------------------------------------------

def interp_atomics():
    """Triton's interpreter C++ helpers on raw addresses (``triton._C.libtriton.interpreter``).

    Assumptions: the module exposes ``load(ptrs_u64, mask, other, np_dtype)``, ``store(ptrs_u64, values, mask)``,
    ``atomic_rmw(RMW_OP, ptrs_u64, values, mask, MEM_SEMANTIC)`` returning the old values and
    ``atomic_cas(ptrs_u64, cmp, val, MEM_SEMANTIC)`` returning the old values. Integer 32/64-bit and fp32/fp64
    RMW/CAS are hardware atomics (``std::atomic`` on the address), hence atomic across processes mapping the same
    memory. Caveat (Triton's implementation): fp16/bf16 ``FADD`` and types without a lock-free ``std::atomic`` use a
    process-local mutex, so they are NOT atomic across rank processes.
    """
    from triton._C.libtriton import interpreter as _interp

    return _interp


def _np_u64(addrs):
    import numpy as np

    return np.ascontiguousarray(np.asarray(addrs, dtype=np.uint64).reshape(-1))


def _mem_semantic(m, sem: str):
    sems = {"relaxed": m.MEM_SEMANTIC.RELAXED, "acquire": m.MEM_SEMANTIC.ACQUIRE, "release": m.MEM_SEMANTIC.RELEASE,
            "acq_rel": m.MEM_SEMANTIC.ACQUIRE_RELEASE, "acquire_release": m.MEM_SEMANTIC.ACQUIRE_RELEASE}
    if sem not in sems:
        raise ValueError(f"unknown memory semantic {sem!r}; accepted: {sorted(sems)}")
    return sems[sem]


def raw_atomic_rmw(op: str, addrs, values, sem: str = "acq_rel"):
    """Atomic read-modify-write at raw address(es) (ints or arrays, same length as ``values``); returns old values.

    ``op``: add | fadd | and | or | xor | xchg | max | min | umax | umin; ``sem``: relaxed | acquire | release |
    acq_rel (or acquire_release). The element width is ``values``' numpy dtype. ``fadd`` on fp16/bf16 is atomic
    within one process only (see :func:`interp_atomics`)."""
    import numpy as np

    m = interp_atomics()
    ops = {"add": m.RMW_OP.ADD, "fadd": m.RMW_OP.FADD, "and": m.RMW_OP.AND, "or": m.RMW_OP.OR, "xor": m.RMW_OP.XOR,
           "xchg": m.RMW_OP.XCHG, "max": m.RMW_OP.MAX, "min": m.RMW_OP.MIN, "umax": m.RMW_OP.UMAX,
           "umin": m.RMW_OP.UMIN}
    sems = {sem: _mem_semantic(m, sem)}
    if op not in ops:
        raise ValueError(f"raw_atomic_rmw: unknown op {op!r}; accepted: {sorted(ops)}")
    ptrs = _np_u64(addrs)
    vals = np.ascontiguousarray(np.asarray(values).reshape(-1))
    if vals.size == 1 and ptrs.size > 1:
        vals = np.full(ptrs.shape, vals[0], dtype=vals.dtype)
    mask = np.ones(ptrs.shape, dtype=bool)
    return m.atomic_rmw(ops[op], ptrs, vals, mask, sems[sem])


def raw_atomic_cas(addrs, cmp, val, sem: str = "acq_rel"):
    """Atomic compare-and-swap at raw address(es); returns the old values (width = ``cmp``'s numpy dtype)."""
    import numpy as np

    m = interp_atomics()
    ptrs = _np_u64(addrs)
    c = np.ascontiguousarray(np.asarray(cmp).reshape(-1))
    v = np.ascontiguousarray(np.asarray(val, dtype=c.dtype).reshape(-1))
    return m.atomic_cas(ptrs, c, v, _mem_semantic(m, sem))


def raw_load(addrs, np_dtype):
    """Plain (non-atomic) load of ``np_dtype`` element(s) at raw address(es) through the interpreter's helper."""
    import numpy as np

    m = interp_atomics()
    ptrs = _np_u64(addrs)
    dt = np.dtype(np_dtype)
    return m.load(ptrs, np.ones(ptrs.shape, dtype=bool), np.zeros(ptrs.shape, dtype=dt), dt)


def raw_store(addrs, values) -> None:
    """Plain (non-atomic) store of ``values`` (numpy, its dtype is the width) at raw address(es)."""
    import numpy as np

    ptrs = _np_u64(addrs)
    vals = np.ascontiguousarray(np.asarray(values).reshape(-1))
    interp_atomics().store(ptrs, vals, np.ones(ptrs.shape, dtype=bool))


_grid_tls_installed = False


def install_thread_local_grid_idx():
    """Make the interpreter's program id thread-local, so programs of one launch can run in separate threads.

    Assumptions: the interpreter has ONE module-level ``interpreter_builder`` (an ``InterpreterBuilder``) whose
    ``grid_idx`` attribute (written by ``set_grid_idx``, read by ``create_get_program_id`` / ``create_print``) is
    the only per-program state; builtins are bound to it by ``_patch_lang``. We switch that instance's class to a
    subclass whose ``grid_idx`` is a property backed by ``threading.local`` (a thread that never set it reads the
    last value set by any thread, which keeps the stock sequential executor's behaviour). Idempotent.
    """
    global _grid_tls_installed
    if _grid_tls_installed:
        return
    import threading

    from triton.runtime import interpreter as _it

    builder = _it.interpreter_builder
    base_cls = type(builder)

    class _ThreadLocalGridBuilder(base_cls):
        _tls = threading.local()

        @property
        def grid_idx(self):
            v = getattr(_ThreadLocalGridBuilder._tls, "grid_idx", _MISSING_GRID)
            if v is _MISSING_GRID:
                return self.__dict__.get("_shared_grid_idx")
            return v

        @grid_idx.setter
        def grid_idx(self, value):
            _ThreadLocalGridBuilder._tls.grid_idx = value
            self.__dict__["_shared_grid_idx"] = value

    builder.__dict__["_shared_grid_idx"] = builder.__dict__.pop("grid_idx", None)
    builder.__class__ = _ThreadLocalGridBuilder
    _grid_tls_installed = True


_MISSING_GRID = object()


def interpreted_launch(fn, arg_names, grid, pre_run_hooks, args_dev, kwargs, run_programs) -> None:
    """One launch of the rewritten interpreted kernel ``fn`` exactly as Triton's interpreter performs it, except for
    who runs the programs: the arguments are copied to the host, ``pre_run_hooks`` run, ``tl`` is patched for the
    interpreter, the arguments are bound (tensors become their base pointers, constexprs stay as given), ``grid`` is
    evaluated (a callable gets the bound arguments) and padded to three dimensions, and the grid size is set; then
    ``run_programs(grid, call_args, set_program_id)`` runs the programs -- each one ``set_program_id(x, y, z)``
    followed by ``fn(**call_args)``, from a frame declared with :func:`interpreted_program_runner` -- and finally the
    patch is undone and the arguments are copied back (for CPU tensors a copy of a storage onto itself: a no-op).

    Assumptions (tested in test_compat.py): ``GridExecutor(fn, arg_names, grid, pre_run_hooks)`` computes
    ``constexprs`` and has ``_init_args_hst(args, kwargs) -> (args_hst, kwargs_hst)`` and
    ``_restore_args_dev(args_dev, args_hst, kwargs, kwargs_hst)``; the module-level ``_patch_lang(fn)`` returns a
    scope with ``restore()``, ``_implicit_cvt`` converts an argument, and ``interpreter_builder`` has
    ``set_grid_dim`` / ``set_grid_idx``; CPU tensors reach the interpreter without a copy (programs see each other's
    writes at once).
    """
    import inspect

    from triton.runtime import interpreter as _it

    stock = _it.GridExecutor(fn, arg_names, grid, pre_run_hooks)
    spec = inspect.getfullargspec(fn)
    kwargs = {k: v for k, v in kwargs.items() if k in spec.args}
    args_hst, kwargs_hst = stock._init_args_hst(args_dev, kwargs)
    for hook in pre_run_hooks:
        hook(*args_hst, **kwargs_hst)
    scope = _it._patch_lang(fn)
    try:
        bound = inspect.getcallargs(fn, *args_hst, **kwargs_hst)
        call_args = {name: value if name in stock.constexprs else _it._implicit_cvt(value)
                     for name, value in bound.items()}
        size = tuple(grid(call_args) if callable(grid) else grid)
        if len(size) > 3:
            raise ValueError(f"grid must have at most 3 dimensions, got {size}")
        size = size + (1, ) * (3 - len(size))
        builder = _it.interpreter_builder
        builder.set_grid_dim(*size)
        run_programs(size, call_args, builder.set_grid_idx)
    finally:
        scope.restore()
    stock._restore_args_dev(args_dev, args_hst, kwargs, kwargs_hst)


def interpreter_program_error(message: str, exc: BaseException) -> BaseException:
    """What Triton's interpreter raises for a program that raised ``exc``: ``exc`` itself when
    ``triton.knobs.compilation.front_end_debugging`` is on, else ``InterpreterError(message)`` (to be raised
    ``from exc``). Assumption: ``triton.runtime.interpreter.InterpreterError`` exists."""
    if triton.knobs.compilation.front_end_debugging:
        return exc
    from triton.runtime.interpreter import InterpreterError

    return InterpreterError(message)


def interpreter_error_origin(exc: BaseException) -> BaseException:
    """The exception a program of an interpreted launch actually raised, beneath the interpreter's wrapping.

    Triton's interpreter re-raises an exception ``e`` of a device-function call, and of a program, as
    ``InterpreterError(repr(e)) from e``, so an error inside a device function reaches the launch nested, with
    escaped quotes (``InterpreterError('InterpreterError(\\'...\\')')``). Following ``__cause__`` through the
    ``InterpreterError`` layers gives the original; anything else is returned as is. Assumption (tested in
    test_compat.py): the wrapping is ``InterpreterError`` raised ``from`` the original."""
    from triton.runtime.errors import InterpreterError

    seen = set()
    while isinstance(exc, InterpreterError) and exc.__cause__ is not None and id(exc) not in seen:
        seen.add(id(exc))
        exc = exc.__cause__
    return exc


# ---- helper A (language ops) -------------------------------------------------------------------------------------

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




# --- helper B: `with` targets, interpreter atomics (simt_exec_region / language_extra) -----------------------------

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












def reset_loading_compiled_kernel() -> bool:
    """From inside a ``kernel_load_end_hook``: mark the ``CompiledKernel`` being loaded as not loaded, so that its
    next launch loads it again and re-runs the hooks (used when a hook refuses a module, e.g. NVSHMEM not yet
    initialised). Returns whether it found the kernel.

    Assumption: Triton calls the hook from ``CompiledKernel._init_handles`` (a frame whose ``self`` is the
    kernel), which returns early while ``self.module`` is set, and ``run`` reloads while ``self._run`` is None.
    """
    import sys

    from triton.compiler.compiler import CompiledKernel

    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_code.co_name == "_init_handles" and isinstance(frame.f_locals.get("self"), CompiledKernel):
            kernel = frame.f_locals["self"]
            kernel.module = None
            kernel.function = None
            kernel._run = None
            return True
        frame = frame.f_back
    return False


def interpreter_value(data, dtype):
    """A ``tl.tensor`` of the interpreter holding numpy ``data`` with Triton type ``dtype`` (scalar or block type;
    0-d data becomes shape (1,), as the interpreter keeps scalars).

    Assumption: interpreter values are ``tl.tensor(TensorHandle(np_array, scalar_dtype), type)``."""
    import numpy as np
    from triton.runtime.interpreter import TensorHandle

    arr = np.asarray(data)
    if arr.ndim == 0:
        arr = arr.reshape(1)
    return tensor(TensorHandle(arr, dtype.scalar if hasattr(dtype, "scalar") else dtype), dtype)


def interpreter_data(value):
    """The numpy array behind an interpreter ``tl.tensor`` (or ``np.asarray(value)`` for Python scalars)."""
    import numpy as np

    handle = getattr(value, "handle", None)
    if handle is not None and hasattr(handle, "data"):
        return handle.data
    return np.asarray(unwrap_constexpr(value))


# --- helper E (tools: profiler / AOT) -------------------------------------------------------------------------------

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


# --- interpreted launches: plain @triton.jit callees --------------------------------------------------------------

_interpreted_twins: dict = {}


def _interpreted_twin(fn):
    from triton.runtime.interpreter import InterpretedFunction

    twin = _interpreted_twins.get(fn)
    if twin is None:
        twin = _interpreted_twins.setdefault(fn, InterpretedFunction(fn))
    return twin


_twin_lock = None
_twin_state = {"active": 0, "modules": set(), "scopes": []}


def _language_modules(fn):
    import triton.language as tl

    return {id(v) for v in fn.__globals__.values() if v is tl or v is tl_core}


def _call_interpreted_twin(fn, args, kwargs):
    """A device-function call of ``fn`` by an interpreted program, with the language patches it needs held only while
    some program is inside such a call (see :func:`install_interpreted_jit_calls`)."""
    import threading

    from triton.runtime import interpreter as _it
    from triton.runtime.errors import InterpreterError

    global _twin_lock
    if _twin_lock is None:
        _twin_lock = threading.Lock()
    state = _twin_state
    with _twin_lock:
        mods = _language_modules(fn)
        if not mods <= state["modules"]:
            state["scopes"].append(_it._patch_lang(fn))
            state["modules"] |= mods
        state["active"] += 1
    try:
        rewritten = _interpreted_twin(fn).rewrite()
        try:
            return rewritten(*args, **kwargs)
        except InterpreterError:
            raise
        except Exception as e:
            raise InterpreterError(repr(e)) from e
    finally:
        with _twin_lock:
            state["active"] -= 1
            if state["active"] == 0:
                for scope in reversed(state["scopes"]):
                    scope.restore()
                state["scopes"].clear()
                state["modules"].clear()


def install_interpreted_jit_calls() -> None:
    """From now on, a plain ``JITFunction`` called as a device function from a program of an interpreted launch
    runs through an ``InterpretedFunction`` of the same Python function instead of raising. Such JITFunctions exist
    whenever a function was decorated while the interpreter was off: ``tl.cdiv``, ``tl.sum`` and the rest of
    Triton's standard library when ``triton`` was imported before ``import triton_dist`` turned the interpreter on,
    or a user's ``@triton.jit`` helper defined then. Called anywhere else (outside an interpreted program, and in
    every compiled launch, whose code generator never calls a JITFunction) a JITFunction raises as before.
    Idempotent; thread-safe (programs of a simulator launch run as threads).

    The interpreter's own device-function call patches the callee's ``triton.language`` modules and never undoes
    it (its launch undoes only what the launch patched), so a later compile in the process would trace with
    interpreter builtins (``tl.zeros`` is such a callee: ``ir.value has no attribute dtype``). Here the patches live
    while some program is inside such a call and are undone when the last one leaves (counted under a lock: the
    simulator's programs are threads).

    Assumptions (tested in test_compat.py): ``JITFunction.__call__`` only raises ("Cannot call @triton.jit'd outside
    of the scope of a kernel") and the code generator never calls it; the interpreter's device-function call is
    ``_patch_lang(fn)`` (returning a scope with ``restore()``), then ``InterpretedFunction(fn).rewrite()(*args)``,
    errors wrapped in ``InterpreterError(repr(e))``; :func:`in_interpreted_program` tells a program of an interpreted
    launch."""
    from triton.runtime.jit import JITFunction

    stock = JITFunction.__dict__["__call__"]
    if getattr(stock, "_triton_dist_interpreted_calls", False):
        return

    def __call__(self, *args, **kwargs):
        if in_interpreted_program():
            return _call_interpreted_twin(self.fn, args, kwargs)
        return stock(self, *args, **kwargs)

    __call__._triton_dist_interpreted_calls = True
    __call__.__wrapped__ = stock
    JITFunction.__call__ = __call__


# --- interpreter hook points (the simulator's workarounds: triton_dist.runtime.sim.interpreter) --------------------

_tensor_overrides: dict = {}


def override_interpreter_tensor_attr(name: str, value) -> None:
    """From now on, whenever Triton's interpreter patches ``tl.tensor`` for a launch (it installs its own operators
    and ``__index__`` on the class for the launch's duration), it installs ``value`` as attribute ``name`` instead
    of its own; the interpreter's own is never installed, not even briefly (programs may run as threads). A second
    call for the same name replaces the first.

    Assumptions (tested in test_compat.py): the interpreter module has ``_patch_lang_tensor(tensor, scope)``, called
    by ``_patch_lang`` through the module global, and sets each attribute with ``scope.set_attr(obj, name, value)``.
    """
    from triton.runtime import interpreter as _it

    _tensor_overrides[name] = value
    orig = _it._patch_lang_tensor
    if getattr(orig, "_triton_dist_overrides", False):
        return

    class _OverridingScope:
        """Forwards to the interpreter's patch scope, substituting the overridden attributes."""

        def __init__(self, scope):
            self._scope = scope

        def set_attr(self, obj, attr, val):
            self._scope.set_attr(obj, attr, _tensor_overrides.get(attr, val))

        def __getattr__(self, attr):
            return getattr(self._scope, attr)

    def patched(tensor, scope):
        orig(tensor, _OverridingScope(scope))

    patched._triton_dist_overrides = True
    _it._patch_lang_tensor = patched


def convert_interpreter_dot_operands(convert) -> None:
    """From now on ``tl.dot`` under Triton's interpreter passes its operand handles through ``convert(a, b) -> (a,
    b)`` before the product (handles as :func:`interpreter_handle` makes them). Idempotent for one ``convert``.

    Assumptions (tested in test_compat.py): ``interpreter.InterpreterBuilder.create_dot(self, a, b, d,
    input_precision, max_num_imprecise_acc)`` computes every interpreted ``tl.dot``, on ``TensorHandle`` operands.
    """
    from triton.runtime import interpreter as _it

    cls = _it.InterpreterBuilder
    orig = cls.create_dot
    if getattr(orig, "_triton_dist_convert", None) is convert:
        return

    def create_dot(self, a, b, d, input_precision, max_num_imprecise_acc):
        a, b = convert(a, b)
        return orig(self, a, b, d, input_precision, max_num_imprecise_acc)

    create_dot._triton_dist_convert = convert
    cls.create_dot = create_dot


def wrap_interpreter_builder_ops(names, wrap) -> None:
    """From now on each ``InterpreterBuilder.<name>`` (for ``name`` in ``names``) is ``wrap(original)``: the
    interpreter computes every element-wise op of an interpreted kernel through these methods, with operand handles
    as :func:`interpreter_handle` makes them and non-handle arguments (``propagate_nans``) passed through.
    Idempotent for one ``wrap`` (a name already wrapped by it is left alone).

    Assumptions (tested in test_compat.py): ``triton.runtime.interpreter.InterpreterBuilder`` has these methods as
    class attributes (``create_fadd``, ``create_fcmpOLT``, ``create_fma``, ``create_exp``, ...) and the semantic
    layer calls them through the instance (so a class attribute set later is the one used)."""
    from triton.runtime import interpreter as _it

    cls = _it.InterpreterBuilder
    for name in names:
        orig = getattr(cls, name)
        if getattr(orig, "_triton_dist_wrap", None) is wrap:
            continue
        new = wrap(orig)
        new._triton_dist_wrap = wrap
        setattr(cls, name, new)


def wrap_interpreter_reduce_sum(wrap) -> None:
    """From now on ``tl.sum`` under the interpreter runs ``wrap(original)(reduce_op, input)``; ``reduce_op`` has
    ``.axis``, ``.keep_dims`` and ``.to_tensor(numpy_data, tl_dtype)`` (a ``tl.tensor`` of that data), ``input`` is
    the ``tl.tensor`` reduced. Idempotent for one ``wrap``.

    Assumptions (tested in test_compat.py): ``triton.runtime.interpreter.ReduceOps.sum(self, input)`` computes every
    interpreted ``tl.sum`` (``np.sum`` of the raw handle data), with ``axis`` / ``keep_dims`` / ``to_tensor``."""
    from triton.runtime import interpreter as _it

    cls = _it.ReduceOps
    orig = cls.sum
    if getattr(orig, "_triton_dist_wrap", None) is wrap:
        return
    new = wrap(orig)
    new._triton_dist_wrap = wrap
    cls.sum = new


def interpreter_handle(data, dtype):
    """An interpreter value handle: ``TensorHandle(data, dtype)`` (``data`` a numpy array, ``dtype`` the scalar
    ``tl`` dtype; read back as ``handle.data`` / ``handle.dtype``). The interpreter stores bfloat16 as raw
    ``uint16`` bits (:func:`interpreter_np_dtype`). Assumption: ``triton.runtime.interpreter.TensorHandle``."""
    from triton.runtime.interpreter import TensorHandle

    return TensorHandle(data, dtype)


# ---------------------------------------------------------------------------------------------------------------
# lean launches (triton_dist.jit.BoundLaunch)
# ---------------------------------------------------------------------------------------------------------------
def specialization_binder(fn, target=None):
    """A function ``binder(*args, **kwargs) -> (bound_args, specialization, options)`` computing how Triton
    specializes a launch of the ``JITFunction`` ``fn`` on ``target`` (a ``GPUTarget``; default: the active
    driver's). ``specialization`` is a list with one hashable ``(type, attribute)`` pair per parameter: two launches
    with equal lists and equal options run the same compiled kernel.

    Assumption (Triton 3.5-3.6): ``triton.runtime.jit.create_function_from_signature(signature, params, backend)``
    builds the binder ``JITFunction.run`` uses (native ``specialize_impl``)."""
    from triton.compiler import make_backend
    from triton.runtime.jit import create_function_from_signature

    if target is None:
        from triton.runtime import driver

        target = driver.active.get_current_target()
    return create_function_from_signature(fn.signature, fn.params, make_backend(target))


def device_and_stream_getters():
    """``(get_device, get_stream)``: the active driver's functions that ``JITFunction.run`` calls on every launch,
    ``get_device() -> index`` and ``get_stream(index) -> raw stream handle`` (Triton 3.5-3.6: the ``GPUDriver``
    attributes ``get_current_device`` / ``get_current_stream``, bound to torch's current device and stream)."""
    from triton.runtime import driver

    drv = driver.active
    return drv.get_current_device, drv.get_current_stream


def compiled_kernel_launcher(kernel):
    """``launch(grid3, stream, *all_args)`` for a compiled kernel returned by a ``JITFunction`` launch: starts it
    on ``stream`` with ``grid3 = (x, y, z)``; ``all_args`` are every parameter's value in declaration order,
    constexprs included (what ``JITFunction.run`` passes). Launch hooks (``knobs.runtime.launch_enter_hook`` /
    ``launch_exit_hook``) are honoured as in ``JITFunction.run``.

    Assumptions (Triton 3.5-3.6): a launch may return a future with ``result()`` (parallel compile); a
    ``CompiledKernel`` has ``run`` (the backend launcher, called as ``run(gx, gy, gz, stream, function,
    packed_metadata, launch_metadata, enter_hook, exit_hook, *args)``), ``function``, ``packed_metadata`` and
    ``launch_metadata(grid, stream, *args)``; the handles are loaded by ``run``'s first access."""
    if hasattr(kernel, "result"):
        kernel = kernel.result()
    run = kernel.run  # loads the module on first access
    function, packed = kernel.function, kernel.packed_metadata
    meta = kernel.launch_metadata
    rt = triton.knobs.runtime

    def launch(grid3, stream, *args):
        enter = rt.launch_enter_hook
        lm = meta(grid3, stream, *args) if enter is not None else None
        run(grid3[0], grid3[1], grid3[2], stream, function, packed, lm, enter, rt.launch_exit_hook, *args)

    return launch


# ---------------------------------------------------------------------------------------------------------------
# compile pipeline: linking the SHMEM device library into plain triton.jit kernels (runtime/shmem_link.py)
# ---------------------------------------------------------------------------------------------------------------
def current_stages_inspection_hook():
    """The hook every Triton backend calls at the end of ``add_stages`` (None when unset).

    Assumption (Triton 3.5-3.9): ``knobs.runtime.add_stages_inspection_hook`` is ONE assignable slot (not a chain),
    called by the CUDA and HIP backends as ``hook(backend, stages, options, language, capability)`` after they fill
    ``stages`` (an ordered ``{name: fn(src, metadata)}``; the TTGIR module reaches ``stages["llir"]``) and before
    any stage runs; a replaced entry is the one that runs. From 3.7 on it is also called with no arguments (see
    :func:`stages_hook_cache_key`)."""
    return triton.knobs.runtime.add_stages_inspection_hook


def set_stages_inspection_hook(hook) -> None:
    """Put ``hook`` in the slot :func:`current_stages_inspection_hook` reads."""
    triton.knobs.runtime.add_stages_inspection_hook = hook


def llir_stage_with_extern_libs(backend, options, capability, extern_libs):
    """The backend's TTGIR -> LLVM IR stage, ``fn(src, metadata)``, compiled with ``extern_libs`` (``{name: path}``)
    added to ``options.extern_libs``; every other option unchanged.

    Assumptions (Triton 3.6): the options are a frozen dataclass whose ``__post_init__`` accepts ``extern_libs`` as
    a dict and stores it as a tuple of pairs (``dataclasses.replace`` re-runs it); the stage is
    ``CUDABackend.make_llir(src, metadata, options, capability)`` on NVIDIA and the static
    ``HIPBackend.make_llir(src, metadata, options)`` on AMD, and it links ``options.extern_libs``."""
    import dataclasses

    merged = dict(options.extern_libs or ())
    merged.update(extern_libs)
    opts = dataclasses.replace(options, extern_libs=merged)
    if backend.target.backend == "cuda":
        return lambda src, metadata: backend.make_llir(src, metadata, opts, capability)
    if backend.target.backend == "hip":
        return lambda src, metadata: backend.make_llir(src, metadata, opts)
    raise ValueError(f"no LLVM IR stage known for Triton backend {backend.target.backend!r}")


# ---------------------------------------------------------------------------------------------------------------
# SIMT regions: tiles indexed per thread (language/_gpu.py, backends/sim/extra.py)
# ---------------------------------------------------------------------------------------------------------------
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


_tensor_extensions: dict = {}
_tensor_extensions_installed = False


def extend_interpreter_tensor(name: str, make) -> None:
    """From now on, whenever Triton's interpreter patches ``tl.tensor`` for a launch, it also sets attribute ``name``
    to ``make(current)``, where ``current`` is the attribute as the interpreter just left it (None when the class
    has none); restored with the interpreter's own patches when the launch ends. A second call for ``name``
    replaces the first.

    Assumptions (tested in test_compat.py): as :func:`override_interpreter_tensor_attr` (``_patch_lang_tensor(tensor,
    scope)`` called through the module global after the builtins of ``tl.tensor`` were wrapped, and the scope's
    ``set_attr`` restores what it set, deleting an attribute the class did not have)."""
    from triton.runtime import interpreter as _it

    global _tensor_extensions_installed
    _tensor_extensions[name] = make
    if _tensor_extensions_installed:
        return
    _tensor_extensions_installed = True
    orig = _it._patch_lang_tensor

    def patched(tensor, scope):
        orig(tensor, scope)
        for attr, mk in list(_tensor_extensions.items()):
            current = getattr(tensor, attr, None)
            # A patch that is never undone (the interpreter's device-function calls, see
            # install_interpreted_jit_calls) leaves our wrapper installed: wrap what IT wrapped, never a wrapper,
            # or every helper call would nest one more level until indexing hits the recursion limit.
            current = getattr(current, "_triton_dist_extends", current)
            wrapper = mk(current)
            if wrapper is not current:
                try:
                    wrapper._triton_dist_extends = current
                except AttributeError:  # not a function: nothing will wrap it
                    pass
            scope.set_attr(tensor, attr, wrapper)

    _it._patch_lang_tensor = patched
