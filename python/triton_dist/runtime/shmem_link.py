"""SHMEM device library for every kernel Triton compiles, ``@triton.jit`` ones included.

``@triton_dist.jit`` offers the NVSHMEM / rocSHMEM device bitcode in ``extern_libs`` at each launch. A kernel made by
stock ``triton.jit`` that calls ``dl.*`` or ``libshmem_device`` gets no such option, and without this module its
SHMEM calls stay unresolved (``ptxas fatal: Unresolved extern function 'nvshmem_my_pe'``). :func:`install`, run by
``import triton_dist`` (no GPU needed), makes such kernels work through two of Triton's public hooks:

* **Link, at compile time** (``knobs.runtime.add_stages_inspection_hook``, :func:`_compat.current_stages_inspection_hook`):
  the TTGIR -> LLVM IR stage of every module is wrapped. When the module's TTGIR calls an NVSHMEM function
  (``nvshmem_*`` / ``nvshmemx_*``, CUDA target) or a rocSHMEM one (``rocshmem_*``, HIP target) and its options carry
  no SHMEM library yet, the stage runs with the target's SHMEM bitcode added to ``extern_libs`` -- the same library
  ``@triton_dist.jit`` would offer (CUDA: the smallest of the slim library, the wide one and the whole bitcode
  that has every called function; HIP: the target arch's rocSHMEM bitcode). A module that was offered our slim
  library but calls functions outside it gets the level that has them instead (:func:`larger_offered_library`). Any other module runs the backend's own stage unchanged, so
  its LLVM IR, PTX and cubin are identical; the one extra step is a scan of its TTGIR text, once per compile (a
  cache hit runs no stage at all). Launches never pass through this code. Where the bitcode is not installed the
  stage is left alone and the link fails naming the function, as for ``@triton_dist.jit``;
  ``TRITON_DIST_NO_SHMEM_BITCODE=1`` leaves the calls unresolved on purpose (compile-only inspection).
  The same step links the SIMT tile scratch (:func:`simt_tiles_library`) into modules whose SIMT regions index tiles
  per thread (``triton_dist_simt_*`` calls, ``language/_simt_tiles.py``), for every kernel.
* **Refuse, before ptxas** (CUDA, the same hook): a module whose PTX still declares NVSHMEM functions
  (``.extern .func nvshmem_*``: no library resolved them) on a machine where the NVSHMEM device bitcode cannot be
  found raises :class:`~triton_dist.runtime.bitcode.BitcodeError` naming the functions and what to install
  (:func:`check_nvshmem_resolvable`), instead of ptxas's ``Unresolved extern function 'nvshmem_my_pe'``. Where the
  bitcode is found, ptxas runs as before; ``TRITON_DIST_NO_SHMEM_BITCODE=1`` skips the check (the calls are left unresolved on purpose).
* **Initialise, at load time** (``knobs.runtime.kernel_load_end_hook``): :func:`module_init.install_hooks`, so a
  loaded module that uses the library is initialised once per device (``nvshmemx_cumodule_init`` /
  ``rocshmem_hipmodule_init``), whoever compiled it. A module that does not is recognised from its PTX / AMDGCN once
  per module load (cached by hash), never per launch.

* **Assemble, on AMD** (the same hook): the AMDGCN stage's text gets the module-wide resource symbol that the LLVM
  of Triton 3.6 refers to but does not define when a kernel calls a function no library resolved (rocSHMEM compiled
  without its bitcode): :func:`_compat.amdgcn_with_module_resource_symbols`. Without it, assembling the hsaco of
  any such kernel aborts the process; with it the hsaco keeps the rocSHMEM functions as undefined symbols
  (inspection only: a GPU run needs the bitcode linked). Text of any other module is unchanged.

The inspection hook is one slot in Triton, not a chain: :func:`install` keeps a hook already there and calls it
after ours; a hook assigned later must call the previous value (as ``triton_dist.tools.compile`` does), or plain
``triton.jit`` kernels lose the link step (``@triton_dist.jit`` kernels do not need it).

Not in a stock kernel's cache key (Triton computes it): the SHMEM library's identity. After changing the installed
NVSHMEM / rocSHMEM, clear Triton's cache (``TRITON_CACHE_DIR``) for plain ``triton.jit`` kernels that call it.
"""
from __future__ import annotations

import re
from typing import Dict, FrozenSet, Optional, Tuple

from .. import _compat
from . import module_init

__all__ = ["install", "shmem_symbols", "libraries_for", "larger_offered_library", "simt_tile_sizes", "simt_tiles_library_text",
           "simt_tiles_library", "unresolved_nvshmem", "check_nvshmem_resolvable", "move_simt_scratch_to_dynamic_shared",
           "LINK_HOOK_MARK"]

#: attribute set on the inspection hook :func:`install` puts in Triton's slot
LINK_HOOK_MARK = "_triton_dist_shmem_link"
#: the link step's name in Triton's compilation cache key (Triton 3.7+ asks the hook for one)
LINK_CACHE_KEY = "triton_dist-shmem-link"

#: the extern function names that belong to a SHMEM library, per Triton backend
_SYMBOL_PATTERNS = {"cuda": r"nvshmemx?_\w+", "hip": r"rocshmem_\w+"}
_SYMBOL_RES = {kind: re.compile(r'\bsymbol = "(' + pat + r')"') for kind, pat in _SYMBOL_PATTERNS.items()}


def shmem_symbols(ttgir: str, backend: str) -> FrozenSet[str]:
    """The SHMEM device functions that the TTGIR text ``ttgir`` calls through ``tt.extern_elementwise`` (how
    ``dl.*`` and ``libshmem_device`` reach the library) for Triton backend ``backend`` (``"cuda"``: ``nvshmem_*`` /
    ``nvshmemx_*``; ``"hip"``: ``rocshmem_*``); empty for any other backend."""
    pattern = _SYMBOL_RES.get(backend)
    if pattern is None:
        return frozenset()
    return frozenset(pattern.findall(ttgir))


def _lib_name(backend: str):
    from ..jit import NVSHMEM_LIB_NAME, ROCSHMEM_LIB_NAME

    return {"cuda": NVSHMEM_LIB_NAME, "hip": ROCSHMEM_LIB_NAME}.get(backend)


def libraries_for(backend: str, arch, symbols) -> Dict[str, str]:
    """``{extern_libs name: path}`` to link into a module of ``backend`` / ``arch`` that calls the SHMEM functions
    ``symbols``: what ``@triton_dist.jit`` offers (``triton_dist.jit.shmem_extern_libs``); on CUDA the smallest
    library of ``runtime.bitcode.SHMEM_LIBRARIES`` that defines them all. Empty when the library is not installed or
    ``TRITON_DIST_NO_SHMEM_BITCODE=1``."""
    from ..jit import shmem_extern_libs

    return shmem_extern_libs(backend, arch, library=_smallest_library(backend, symbols))


def _smallest_library(backend: str, symbols) -> str:
    """The smallest level of ``runtime.bitcode.SHMEM_LIBRARIES`` defining every function of ``symbols`` ("slim"
    outside CUDA, where there is one library)."""
    if backend != "cuda":
        return "slim"
    from .bitcode import nvshmem_functions

    symbols = set(symbols)
    if symbols <= set(nvshmem_functions()):
        return "slim"
    return "wide" if symbols <= set(nvshmem_functions(wide=True)) else "whole"


def larger_offered_library(backend: str, arch, offered_path: str, symbols) -> Optional[str]:
    """The NVSHMEM library to link *instead of* ``offered_path`` into a module calling ``symbols``, or None to keep
    it. ``@triton_dist.jit`` offers the slim library (its own level, ``DistJITFunction._shmem_library``); a module
    calling a function outside it (``FULL_LIBRARY_ONLY``: typed put / get, thread / warp byte collectives) would fail
    at ptxas and be compiled a second time against the next level. Reading the calls in the TTGIR, the link step
    takes the level that has them at once (:func:`libraries_for`), so the module compiles once. Only ever a larger
    level of *our* libraries: a path that is not one of them (a user's own file) is kept, and so is a level already
    large enough. The kernel's Triton cache key still names the offered file (the request), and the result is the
    same for that request every time."""
    if backend != "cuda" or not symbols:
        return None
    from ..jit import shmem_extern_libs
    from .bitcode import SHMEM_LIBRARIES

    needed = SHMEM_LIBRARIES.index(_smallest_library(backend, symbols))
    if needed == 0:
        return None  # the slim level has them: any level offered does (nothing else is made or read)
    name = _lib_name(backend)
    for library in SHMEM_LIBRARIES[:needed]:  # offered one of our smaller levels: move up
        path = shmem_extern_libs(backend, arch, library=library).get(name)
        if path is not None and path == offered_path:
            bigger = shmem_extern_libs(backend, arch, library=SHMEM_LIBRARIES[needed]).get(name)
            return bigger if bigger != path else None
    return None


#: LLVM target triple of the SIMT tile scratch library, per Triton backend
_TRIPLES = {"cuda": "nvptx64-nvidia-cuda", "hip": "amdgcn-amd-amdhsa"}
_SIMT_TILES_RE = re.compile(r'\bsymbol = "triton_dist_simt_tiles_(\d+)"')


def simt_tile_sizes(ttgir: str) -> FrozenSet[int]:
    """The scratch sizes (bytes) the SIMT regions of a module ask for (``triton_dist_simt_tiles_<nbytes>`` calls in
    its TTGIR, ``language/_simt_tiles.py``)."""
    return frozenset(int(n) for n in _SIMT_TILES_RE.findall(ttgir))


def simt_tiles_library_text(backend: str, sizes) -> str:
    """LLVM IR of the SIMT tile scratch library for Triton backend ``backend``: ONE shared-memory buffer (address
    space 3: CUDA shared memory / AMD LDS; regions run one after another, so they share it) of ``max(sizes)``
    bytes, 16-byte aligned; ``triton_dist_simt_tiles_<n>`` for each size returns its 32-bit shared address;
    ``triton_dist_simt_ld_<b>`` / ``triton_dist_simt_st_<b>`` (b = 8, 16, 32, 64) load / store one element at such an
    address (volatile: kept in program order between the barriers the region places). All always inlined."""
    size = max(sizes)
    lines = [f'target triple = "{_TRIPLES[backend]}"', "",
             f"@triton_dist_simt_scratch = internal addrspace(3) global [{size} x i8] undef, align 16", ""]
    for n in sorted(sizes):
        lines += [f"define i32 @triton_dist_simt_tiles_{n}(i32 %unused) #0 {{",
                  "  ret i32 ptrtoint (ptr addrspace(3) @triton_dist_simt_scratch to i32)", "}"]
    for bits in (8, 16, 32, 64):
        align = bits // 8
        lines += [f"define i{bits} @triton_dist_simt_ld_{bits}(i32 %addr) #0 {{",
                  "  %p = inttoptr i32 %addr to ptr addrspace(3)",
                  f"  %v = load volatile i{bits}, ptr addrspace(3) %p, align {align}",
                  f"  ret i{bits} %v", "}",
                  f"define i32 @triton_dist_simt_st_{bits}(i32 %addr, i{bits} %v) #0 {{",
                  "  %p = inttoptr i32 %addr to ptr addrspace(3)",
                  f"  store volatile i{bits} %v, ptr addrspace(3) %p, align {align}",
                  "  ret i32 0", "}"]
    lines += ["", "attributes #0 = { alwaysinline nounwind }", ""]
    return "\n".join(lines)


def simt_tiles_library(backend: str, sizes) -> str:
    """Path of :func:`simt_tiles_library_text` written once into triton_dist's cache folder (named by its content;
    written atomically)."""
    import hashlib
    import os

    from .bitcode import cache_dir

    text = simt_tiles_library_text(backend, sizes)
    path = os.path.join(cache_dir(), f"simt-tiles-{hashlib.sha256(text.encode()).hexdigest()[:20]}.ll")
    if not os.path.isfile(path):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        tmp = f"{path}.{os.getpid()}.tmp"
        with open(tmp, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    return path


#: an NVSHMEM function the PTX declares but does not define (``.extern .func (.param ...) nvshmem_my_pe``)
_UNRESOLVED_PTX_RE = re.compile(r"^\s*\.extern\s+\.func\s*(?:\([^)]*\)\s*)?(nvshmemx?_\w+)", re.M)


def unresolved_nvshmem(ptx: str) -> FrozenSet[str]:
    """The NVSHMEM functions that the PTX text ``ptx`` declares without defining (no library linked them)."""
    return frozenset(_UNRESOLVED_PTX_RE.findall(ptx))


def check_nvshmem_resolvable(ptx: str, arch, kernel: str) -> None:
    """Raise :class:`~triton_dist.runtime.bitcode.BitcodeError` when ``ptx`` (of ``kernel``, CUDA ``arch``) calls
    NVSHMEM functions no library resolved and the NVSHMEM device bitcode cannot be found: one error naming the
    functions and what to install, where ptxas would stop at ``Unresolved extern function``. Nothing to do when
    every call is resolved, when the bitcode is found (ptxas decides), or under ``TRITON_DIST_NO_SHMEM_BITCODE=1``."""
    from . import bitcode

    missing = unresolved_nvshmem(ptx)
    if not missing or bitcode.shmem_bitcode_disabled():
        return
    try:
        bitcode.find_nvshmem_bitcode(arch)
    except bitcode.BitcodeError as exc:
        raise bitcode.BitcodeError(f"kernel {kernel!r} calls NVSHMEM ({', '.join(sorted(missing))}) and cannot be "
                                   f"assembled without NVSHMEM's device bitcode: {exc}") from None


_SCRATCH_DEF_RE = re.compile(r"^@triton_dist_simt_scratch = [^\n]*\n", re.M)
_GLOBAL_SMEM_RE = re.compile(r"^@global_smem = ", re.M)


def move_simt_scratch_to_dynamic_shared(llir: str, shared: int, capability) -> Tuple[str, int]:
    """CUDA, for SIMT tile scratch above the 48 KiB a block may declare statically: the LLVM IR ``llir`` of a module
    that links the scratch library (:func:`simt_tiles_library_text`) with its buffer placed in the block's dynamic
    shared memory instead -- Triton's ``@global_smem``, at the first 16-byte boundary after the ``shared`` bytes
    Triton's own allocations use -- and the kernel's new dynamic shared size (``metadata["shared"]``, which Triton's
    launcher requests and opts in to above 48 KiB). Unchanged when the scratch fits the static limit. Raises
    ValueError when Triton's memory and the tiles together exceed what a block of ``capability`` gets."""
    from ..backends.nvidia.extra import SIMT_STATIC_SCRATCH_LIMIT, max_block_shared_memory

    m = re.search(r"^@triton_dist_simt_scratch = internal addrspace\(3\) global \[(\d+) x i8\]", llir, re.M)
    if m is None or int(m.group(1)) <= SIMT_STATIC_SCRATCH_LIMIT:
        return llir, shared
    nbytes = int(m.group(1))
    offset = (shared + 15) // 16 * 16
    limit = max_block_shared_memory(capability)
    if offset + nbytes > limit:
        raise ValueError(f"simt_exec_region: the kernel's own shared memory ({shared} bytes) and its per-thread tiles "
                         f"({nbytes} bytes) need {offset + nbytes} bytes, more than the {limit} bytes a block gets on "
                         f"sm_{capability}; index smaller tiles, or move the data through global memory")
    text = _SCRATCH_DEF_RE.sub("", llir, count=1)
    if not _GLOBAL_SMEM_RE.search(text):  # a kernel with no shared memory of its own: declare Triton's buffer
        first_global = re.search(r"^(@|define |declare )", text, re.M)
        decl = "@global_smem = external addrspace(3) global [0 x i8], align 16\n"
        text = text[:first_global.start()] + decl + text[first_global.start():] if first_global else decl + text
    where = "@global_smem" if offset == 0 else f"getelementptr (i8, ptr addrspace(3) @global_smem, i32 {offset})"
    return re.sub(r"@triton_dist_simt_scratch\b", where, text), offset + nbytes


def _wrap_cubin_stage(backend, stages) -> None:
    if backend.target.backend != "cuda" or "cubin" not in stages:
        return
    stock = stages["cubin"]

    def cubin(src, metadata):
        check_nvshmem_resolvable(str(src), backend.target.arch, metadata.get("name", "?"))
        return stock(src, metadata)

    stages["cubin"] = cubin


def _wrap_llir_stage(backend, stages, options, capability) -> None:
    kind = backend.target.backend
    lib_name = _lib_name(kind)
    if lib_name is None or "llir" not in stages:
        return  # not a GPU target this module knows
    offered = dict(options.extern_libs or ())
    stock = stages["llir"]

    def llir(src, metadata):
        text = str(src)
        libs = {}
        symbols = shmem_symbols(text, kind)
        if lib_name not in offered:  # @triton_dist.jit and the compile tool offer the SHMEM library themselves
            if symbols:
                libs.update(libraries_for(kind, backend.target.arch, symbols))
        else:  # offered: the slim level unless the kernel needs more (one compile, not a failed one and a retry)
            larger = larger_offered_library(kind, backend.target.arch, offered[lib_name], symbols)
            if larger:
                libs[lib_name] = larger
        sizes = simt_tile_sizes(text)
        if sizes:
            from ..language._simt_tiles import LIB_NAME as SIMT_LIB

            libs[SIMT_LIB] = simt_tiles_library(kind, sizes)
        if not libs:
            return stock(src, metadata)
        out = _compat.llir_stage_with_extern_libs(backend, options, capability, libs)(src, metadata)
        if sizes and kind == "cuda":
            out, metadata["shared"] = move_simt_scratch_to_dynamic_shared(out, metadata["shared"],
                                                                          backend.target.arch)
        return out

    stages["llir"] = llir


def install() -> None:
    """Put the link step in Triton's stage-inspection slot (keeping and calling a hook already there) and the
    module-init hook in its load chain. Idempotent; needs no GPU."""
    module_init.install_hooks()
    previous = _compat.current_stages_inspection_hook()
    if getattr(previous, LINK_HOOK_MARK, False):
        return

    def link_shmem_library(*args):
        if not args:  # Triton 3.7+: the cache-key suffix of this edit (after the previous hook's)
            return _compat.stages_hook_cache_key(LINK_CACHE_KEY, previous)
        backend, stages, options, language, capability = args
        _wrap_llir_stage(backend, stages, options, capability)
        _wrap_cubin_stage(backend, stages)
        if backend.target.backend == "hip":
            _compat.wrap_hip_amdgcn_stage(stages)
        if previous is not None:
            previous(*args)

    setattr(link_shmem_library, LINK_HOOK_MARK, True)
    _compat.set_stages_inspection_hook(link_shmem_library)
