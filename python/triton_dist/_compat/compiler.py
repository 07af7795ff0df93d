"""Triton's compiler as triton_dist drives it: the stage pipeline and its inspection hook, the LLVM IR stage with
extra ``extern_libs``, the metadata of skipped stages, the HIP backend's extern linking and AMDGCN text, the LLVM
inside Triton (``triton._C.libtriton``), the kernel-load hook chain, and the compiler's own types (``GPUTarget``,
``ASTSource``).

Covers Triton 3.6-3.9 (``triton.compiler``, ``triton.backends.*``, ``triton._C.libtriton.llvm`` / ``ir``,
``triton.knobs.runtime`` hooks); the differences between releases are gated on
:data:`~triton_dist._compat.version.TRITON_VERSION` (the inspection hook's cache-key call from 3.7, the eighth
argument of ``translate_to_asm`` from 3.8, the named-barrier symbol LLVM in 3.6 leaves undefined). Each assumption
is tested in ``test/python/test_compat.py`` (section "compiler").
"""
from __future__ import annotations

import re

import triton

from .version import TRITON_VERSION


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


def kernel_load_end_hooks():
    """The hook chain Triton calls after loading a compiled module: ``hook(module, function, name,
    metadata_group, hash)``. Assumption: ``knobs.runtime.kernel_load_end_hook`` is a ``HookChain`` (3.5+)."""
    return triton.knobs.runtime.kernel_load_end_hook


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


def cache_invalidating_env_vars() -> dict:
    """Env vars Triton folds into its compilation cache key."""
    from triton._C.libtriton import get_cache_invalidating_env_vars

    return get_cache_invalidating_env_vars()


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


def gpu_target(backend: str, arch, warp_size: int):
    """Triton's description of a compilation target, ``GPUTarget(backend, arch, warp_size)`` (what
    ``triton.compile`` and ``make_backend`` take). Assumption: ``triton.backends.compiler.GPUTarget`` is a dataclass
    of these three fields, in this order."""
    from triton.backends.compiler import GPUTarget

    return GPUTarget(backend, arch, warp_size)


def ptxas_for(capability: int):
    """``(path, gpu_name)``: the ptxas Triton uses for NVIDIA compute capability ``capability`` and the
    ``--gpu-name`` it passes (e.g. ``sm_90a`` for 90), so a tool can run ``ptxas -v`` as Triton's cubin stage would.
    Assumptions: ``triton.backends.nvidia.compiler.get_ptxas(capability)`` returns an object with the binary's
    ``.path``, and ``sm_arch_from_capability(capability)`` the gpu name."""
    from triton.backends.nvidia.compiler import get_ptxas, sm_arch_from_capability

    return get_ptxas(capability).path, sm_arch_from_capability(capability)


def ast_source(fn, signature, constexprs, attrs):
    """Triton's compilation source for the ``JITFunction`` ``fn``: ``ASTSource(fn=fn, signature=signature,
    constexprs=constexprs, attrs=attrs)`` (``signature`` ``{name: type name}``, ``constexprs`` ``{(index, ): value}``,
    ``attrs`` ``{(index, ): [[attribute, value]]}``), what ``triton.compile`` compiles. Assumption:
    ``triton.compiler.ASTSource`` takes these keyword arguments."""
    from triton.compiler import ASTSource

    return ASTSource(fn=fn, signature=signature, constexprs=constexprs, attrs=attrs)
