"""``triton_dist.jit``: ``triton.jit`` plus what distributed kernels need at launch.

:class:`DistJITFunction` is a ``triton.runtime.jit.JITFunction`` subclass, so Triton's code generator, the compile
tool, ``triton.autotune`` and ``triton.heuristics`` treat it as a normal JIT function. It adds:

* **Interpreter dispatch at launch time.** When Triton's interpreter is on at launch (``TRITON_INTERPRET`` /
  ``triton.knobs.runtime.interpret``) the launch — and device-function calls from interpreted kernels — run
  through an ``InterpretedFunction`` made (lazily) from the same Python function, whatever the mode was when the
  kernel was defined. While the simulator is initialised, the grid runs on its concurrent executor
  (``triton_dist.runtime.sim.launch.run_grid``: every program a thread, like a cooperative launch); otherwise on
  Triton's sequential one.
* **SHMEM device library.** On CUDA the NVSHMEM device library is offered in ``extern_libs`` as
  ``libnvshmem_device`` (HIP: ``rocshmem``, the target arch's ``librocshmem_device_<gfx>.bc``; the HIP backend links
  an entry only into modules calling a function whose name contains the key) when it is installed. On CUDA that is
  the *slim* library (``runtime.bitcode.slim_nvshmem_library``): the NVSHMEM functions triton_dist calls and what
  they need, cut once per machine from NVSHMEM's whole bitcode, which Triton would otherwise parse (about 6 s) for
  every kernel it compiles; the PTX is the same. A kernel that calls an NVSHMEM function outside that set links the
  *wide* library instead (every NVSHMEM function triton_dist calls, still a fraction of a second), or the whole
  bitcode for a function none of our lowerings calls: the link step reads the calls in the TTGIR
  (``runtime.shmem_link.larger_offered_library``), so it compiles once. A compile that still stops at ptxas on an
  unresolved NVSHMEM function is retried against the next level (:func:`missing_from_slim_library`,
  ``runtime.bitcode.SHMEM_LIBRARIES``), and the level reached is kept per JIT function. ``TRITON_DIST_SLIM_BITCODE=0`` always links the whole bitcode. Triton links ``extern_libs`` only for modules
  with external calls (``has_extern_deps``), so a kernel with no extern call compiles to exactly the same PTX. A
  DistJIT kernel that calls only libdevice functions links the library too: its PTX then also defines two unused
  constants (``nvshmemi_device_state_d``, ``nvshmemi_device_lib_version_d``); its code is unchanged and it needs no
  module init (see below). :meth:`DistJITFunction.compile_options_for` gives the same options to the compile tool.
* **Module initialisation.** Before its first compiled launch a DistJIT kernel makes sure the load hook of
  :mod:`triton_dist.runtime.module_init` is in Triton's hook chain: every loaded module that uses NVSHMEM / rocSHMEM
  (decided by what it links and uses, never by its name) is initialised once per device through the active
  backend's ``module_init``.
* **Cooperative-launch check.** A launch with more than one program and no ``launch_cooperative_grid=True`` of a
  kernel whose TTIR calls a SHMEM device collective (``libshmem_device`` barriers, sync, broadcast, fcollect) is
  refused with a RuntimeError naming the kernel, the functions and the fix
  (:func:`triton_dist.runtime.cooperative.check_cooperative_launch`); the compiled kernel is looked up first (a
  warm-up run: compile or cache hit, no launch). Once a function's first checked kernel is seen to call no
  collective, its later launches skip the check and pay nothing (a later specialization that adds a collective
  through a constexpr branch is then not checked).
* **Bounded-wait mode in the cache key.** ``TRITON_DIST_BOUNDED_WAIT`` (read when ``dl.wait`` is traced) is part
  of the disk cache key (``cache_key``) and selects the in-memory per-device cache, so toggling it recompiles.

Importing this module has no side effect. ``import triton_dist`` (``triton_dist/__init__.py``) makes the interpreter
switch under a launcher without a GPU and adds the module-init hook plus a compile step that links the SHMEM library
into plain ``@triton.jit`` kernels calling it (``runtime/shmem_link.py``; a DistJIT kernel's options already carry
the library, so that step leaves it alone); a compiled DistJIT launch re-adds the load hook should it be missing.
"""
from __future__ import annotations

import functools
import hashlib
import inspect
import os
import re
from collections import defaultdict
from typing import Callable, Dict, Optional, Tuple

from triton import JITFunction

from . import _compat
from .runtime import compile_record
from .runtime.cooperative import check_cooperative_launch, collective_calls
from .runtime.module_init import install_hooks
# re-exported: their home is runtime/module_init.py (importable from here as before)
from .runtime.module_init import (forget_modules, module_init_count, module_links_nvshmem,  # noqa: F401
                                  module_links_rocshmem, module_shmem_library)

#: ``extern_libs`` keys. Triton's CUDA backend links every entry; its HIP backend links an entry only into a module
#: that calls an undefined function whose name contains the key (``_compat.hip_links_extern_lib``), so the rocSHMEM
#: key must be a substring of every rocSHMEM symbol.
NVSHMEM_LIB_NAME = "libnvshmem_device"
ROCSHMEM_LIB_NAME = "rocshmem"


def bounded_wait_key() -> str:
    """The raw value of ``TRITON_DIST_BOUNDED_WAIT`` ("" when unset): part of every DistJITFunction cache key."""
    return os.environ.get(_bounded_wait_env(), "").strip()


@functools.lru_cache(maxsize=None)
def _bounded_wait_env() -> str:
    """``triton_dist.language.core.BOUNDED_WAIT_ENV`` (the variable ``dl.wait`` reads), imported on first use:
    ``import triton_dist`` must not import the language package, whose module-level ``triton.jit`` helpers have to
    be created after the interpreter switch at the end of this module (and after the compile tool turns it off)."""
    from .language.core import BOUNDED_WAIT_ENV

    return BOUNDED_WAIT_ENV


_LOWERING_DIRS = ("language", "backends", os.path.join("tools", "profiler"))
_lowering_fingerprint: Optional[str] = None


def lowering_fingerprint() -> str:
    """A hash of triton_dist's trace-time code (language declarations, per-target lowerings, profiler ops).

    Part of every DistJITFunction cache key: Triton hashes a kernel's own source and its @jit callees, not the Python
    builtins it calls, so without this an upgraded lowering would silently reuse kernels compiled by the old one."""
    global _lowering_fingerprint
    if _lowering_fingerprint is None:
        root = os.path.dirname(os.path.abspath(__file__))
        h = hashlib.sha256()
        for sub in _LOWERING_DIRS:
            for dirpath, dirnames, filenames in sorted(os.walk(os.path.join(root, sub))):
                dirnames.sort()
                for name in sorted(filenames):
                    if name.endswith(".py"):
                        path = os.path.join(dirpath, name)
                        h.update(os.path.relpath(path, root).encode())
                        with open(path, "rb") as f:
                            h.update(f.read())
        _lowering_fingerprint = h.hexdigest()[:16]
    return _lowering_fingerprint


# ----------------------------------------------------------------------------------------------------------------
# extern libraries
# ----------------------------------------------------------------------------------------------------------------
def shmem_extern_libs(backend: str, arch=None, library: str = "slim") -> Dict[str, str]:
    """``{lib_name: path}`` of the SHMEM device library to offer for Triton backend ``backend`` ("cuda"/"hip") and
    GPU ``arch`` (HIP: rocSHMEM installs one bitcode per gfx arch; CUDA: NVSHMEM >= 3.7 installs one per sm arch);
    empty when it is not installed (kernels that need it then fail to link with the lookup error from
    :mod:`triton_dist.runtime.bitcode`) or when ``TRITON_DIST_NO_SHMEM_BITCODE=1`` (compile-only checks of PTX that
    want the SHMEM calls left unresolved, and faster). CUDA: the slim NVSHMEM library
    (``runtime.bitcode.slim_nvshmem_library``: the functions triton_dist calls, same PTX, ~20x faster to link), or
    the level ``library`` of ``runtime.bitcode.SHMEM_LIBRARIES`` ("wide", "whole"); the whole bitcode under
    ``TRITON_DIST_SLIM_BITCODE=0``."""
    from .runtime import bitcode

    if bitcode.shmem_bitcode_disabled():
        return {}
    if backend == "cuda":
        path = bitcode.nvshmem_bitcode_or_none(arch)
        if path:
            path = bitcode.nvshmem_link_library(path, library)
        return {NVSHMEM_LIB_NAME: path} if path else {}
    if backend == "hip":
        path = bitcode.rocshmem_bitcode_or_none(arch)
        return {ROCSHMEM_LIB_NAME: path} if path else {}
    return {}


_launch_libs: Dict[Tuple[str, object, str], Dict[str, str]] = {}  # (backend, arch, library level)
_launch_target: Optional[Tuple[str, object]] = None


def _libs_for_launch(library: str = "slim") -> Dict[str, str]:
    """:func:`shmem_extern_libs` for the active driver's target (backend, arch), computed once per process (launch
    hot path)."""
    global _launch_target
    if _launch_target is None:
        target = _compat.active_driver().get_current_target()
        _launch_target = (target.backend, target.arch)
    key = _launch_target + (library, )
    libs = _launch_libs.get(key)
    if libs is None:
        libs = _launch_libs[key] = shmem_extern_libs(*_launch_target, library=library)
    return libs


_UNRESOLVED_NVSHMEM = re.compile(r"Unresolved extern function '(nvshmemx?_\w+)'")


def missing_from_slim_library(exc: BaseException) -> Optional[str]:
    """The NVSHMEM function a failed compile could not resolve (ptxas: ``Unresolved extern function 'nvshmem...'``),
    or None: a kernel calling an NVSHMEM function outside the linked library's set needs the next, larger one."""
    m = _UNRESOLVED_NVSHMEM.search(str(exc))
    return m.group(1) if m else None


def _merge_extern_libs(ours: Dict[str, str], user) -> Dict[str, str]:
    merged = dict(ours)
    if user:
        merged.update(dict(user))
    return merged


# ----------------------------------------------------------------------------------------------------------------
# the JIT function
# ----------------------------------------------------------------------------------------------------------------
def _install_interpreter_fixes():
    """What every interpreted launch needs from the simulator (``runtime.sim.interpreter.install_interpreter_fixes``:
    idempotent, a flag check after the first call)."""
    from .runtime.sim.interpreter import install_interpreter_fixes

    install_interpreter_fixes()


def _sim_run_grid():
    """The simulator's concurrent grid runner (``triton_dist.runtime.sim.launch.run_grid``) while the simulator is
    initialised in this process, else None (Triton's sequential executor is used)."""
    from .runtime.sim import context

    if not context.is_active():
        return None
    try:
        from .runtime.sim.launch import run_grid
    except ImportError:
        return None
    return run_grid


class DistJITFunction(JITFunction):
    """A ``JITFunction`` that also runs under the interpreter and links / initialises SHMEM (module docstring)."""

    def __init__(self, fn, **jit_kwargs):
        self._jit_kwargs = dict(jit_kwargs)
        self._interpreted = None
        #: None until the first checked launch; then whether this function's kernels call device collectives
        #: (libshmem_device barriers / broadcast / fcollect), which decides whether later launches are checked.
        self._calls_collectives = None
        #: the NVSHMEM library this function's kernels link (``runtime.bitcode.SHMEM_LIBRARIES``): "slim" until a
        #: kernel of it calls an NVSHMEM function the linked library lacks, then the next one
        self._shmem_library = "slim"
        super().__init__(fn, **jit_kwargs)

    # -- caches keyed by bounded-wait mode ------------------------------------------------------------------------
    @property
    def device_caches(self):
        by_mode = self.__dict__.setdefault("_caches_by_mode", {})
        key = bounded_wait_key()
        caches = by_mode.get(key)
        if caches is None:
            caches = by_mode[key] = defaultdict(self.create_binder)
        return caches

    @device_caches.setter
    def device_caches(self, value):
        self.__dict__.setdefault("_caches_by_mode", {})[bounded_wait_key()] = value

    @property
    def cache_key(self) -> str:
        base = JITFunction.cache_key.fget(self)
        key = f"{base}-triton_dist-{lowering_fingerprint()}-bw={bounded_wait_key()}"
        return hashlib.sha256(key.encode()).hexdigest()

    # -- interpreter ---------------------------------------------------------------------------------------------
    def interpreted(self):
        """The ``InterpretedFunction`` of the same Python function (created on first use; shares pre-run hooks)."""
        if self._interpreted is None:
            self._interpreted = _compat.interpreted_function(self.fn, **self._jit_kwargs)
        self._interpreted.pre_run_hooks = self.pre_run_hooks
        return self._interpreted

    def _run_interpreted(self, *args, grid, warmup, **kwargs):
        interp = self.interpreted()
        if warmup:
            return None
        _install_interpreter_fixes()
        run_grid = _sim_run_grid()
        if run_grid is None:
            return interp.run(*args, grid=grid, warmup=warmup, **kwargs)
        return run_grid(interp, grid, *args, **kwargs)

    # -- launch --------------------------------------------------------------------------------------------------
    def run(self, *args, grid, warmup, **kwargs):
        if _compat.interpret_enabled():
            return self._run_interpreted(*args, grid=grid, warmup=warmup, **kwargs)
        install_hooks()
        try:
            return self._run_compiled(args, grid, warmup, kwargs)
        except Exception as exc:
            # an NVSHMEM function outside the linked library's set: compile again against the next, larger library
            # (slim -> wide -> whole), skipping levels that are the same file (slimming off, HIP)
            if missing_from_slim_library(exc) is None:
                raise
            from .runtime.bitcode import SHMEM_LIBRARIES

            current = _libs_for_launch(self._shmem_library)
            for library in SHMEM_LIBRARIES[SHMEM_LIBRARIES.index(self._shmem_library) + 1:]:
                if _libs_for_launch(library) != current:
                    self._shmem_library = library
                    return self.run(*args, grid=grid, warmup=warmup, **kwargs)
            raise

    def _run_compiled(self, args, grid, warmup, kwargs):
        kwargs = dict(kwargs)
        ours = _libs_for_launch(self._shmem_library)
        if ours:
            kwargs["extern_libs"] = _merge_extern_libs(ours, kwargs.get("extern_libs"))
        if not warmup and not kwargs.get("launch_cooperative_grid") and self._calls_collectives is not False:
            # device-side collectives need every program resident: refuse before launching (see below). A function
            # whose first compiled kernel calls none is not checked again, so ordinary launches pay nothing.
            hooks, self.pre_run_hooks = self.pre_run_hooks, []  # the real run below calls them (once)
            try:
                kernel = super().run(*args, grid=grid, warmup=True, **kwargs)
            finally:
                self.pre_run_hooks = hooks
            if kernel is not None:
                _check_launch(self, kernel, grid, args, kwargs)
        return super().run(*args, grid=grid, warmup=warmup, **kwargs)

    def _do_compile(self, key, signature, device, constexprs, options, attrs, warmup):
        # Triton's per-specialization compile step (the first launch of a specialization in this process, a cache
        # hit or not; assumption tested in test_compat.py): with TRITON_DIST_COMPILE_RECORD set, record the request
        # for a later parallel replay (runtime.compile_record, tools/precompile.py)
        directory = compile_record.record_dir()
        if directory:
            try:
                target = self.device_caches[device][2]
                compile_record.record(directory, compile_record.request_of(self, target, signature, constexprs,
                                                                           attrs, options, bounded_wait_key()))
            except Exception as exc:  # a record that cannot be written must never fail the launch
                compile_record.warn_once(f"triton_dist: could not record a compile request in {directory} ({exc}); "
                                         f"launches go on unrecorded")
        return super()._do_compile(key, signature, device, constexprs, options, attrs, warmup)

    def __call__(self, *args, **kwargs):
        if _compat.interpret_enabled():
            return self.interpreted()(*args, **kwargs)
        return super().__call__(*args, **kwargs)

    def compile_options_for(self, target) -> dict:
        """Extra compile options for ``target`` (a :class:`triton_dist.target.Target`): the SHMEM bitcode in
        ``extern_libs`` when installed. Used by ``triton_dist.tools.compile``."""
        return compile_options_for_target(target, library=self._shmem_library)

    def bind_launch(self, grid, **kwargs) -> "BoundLaunch":
        """A lean launcher of this kernel with a fixed ``grid`` and fixed keyword arguments (constexprs and launch
        options such as ``num_warps``): ``bind_launch(grid, **kw)(*args)`` launches what ``self[grid](*args, **kw)``
        launches, on the current stream, with less host work per call (:class:`BoundLaunch`)."""
        return BoundLaunch(self, grid, kwargs)

    def __repr__(self):
        return f"DistJITFunction({self.module}:{self.fn.__qualname__})"


class BoundLaunch:
    """``launch = kernel.bind_launch(grid, **kw)``; ``launch(*args)`` is ``kernel[grid](*args, **kw)`` with the host
    work a repeated launch does not need left out (the eager hot path of the ops' contexts).

    * ``args`` are the kernel's leading parameters, positionally; every later parameter comes from ``kw`` (or its
      default). ``grid`` is a fixed tuple of 1-3 ints.
    * The first call of each *specialization* (what Triton keys its compiled kernels on: argument dtypes, pointer
      alignment, integer divisibility and width, as computed by Triton's own binder), bounded-wait mode and device
      goes through the normal launch: compile or cache lookup, SHMEM library and module initialisation, the
      cooperative-launch check, pre-run hooks. It remembers the compiled kernel; later calls with the same key
      start it directly on the current stream (Triton's launcher, launch hooks honoured).
    * Under the interpreter (simulator), or when the function has pre-run hooks, every call is a normal launch.
    * Returns None. What a later call does not re-read: Triton's global knobs that change compilation
      (``knobs.runtime.debug``, instrumentation mode) and changed globals of the kernel's module; a new
      ``bind_launch`` picks them up.
    * Not thread-safe for concurrent first calls (the cache fill is a plain dict store; a race compiles twice).
    """

    __slots__ = ("fn", "grid", "kwargs", "_npos", "_tail", "_grid3", "_binders", "_launchers", "_getters")

    def __init__(self, fn: "DistJITFunction", grid, kwargs):
        if callable(grid) or not isinstance(grid, (tuple, list)) or not 1 <= len(grid) <= 3:
            raise TypeError(f"{fn!r}.bind_launch: grid must be a tuple of 1 to 3 ints, got {grid!r}")
        names = [p.name for p in fn.params]
        bound_params = [n for n in kwargs if n in names]
        npos = 0
        while npos < len(names) and names[npos] not in kwargs:
            npos += 1
        tail = []
        for p in fn.params[npos:]:
            if p.name in kwargs:
                tail.append(kwargs[p.name])
            elif p.default is not inspect.Parameter.empty:
                tail.append(p.default)
            else:
                raise TypeError(f"{fn!r}.bind_launch: parameter {p.name!r} comes after the keyword-bound "
                                f"{bound_params[0]!r}; bind it by keyword too (positional arguments are the leading "
                                f"parameters {names[:npos]})")
        self.fn = fn
        self.grid = tuple(grid)
        self.kwargs = dict(kwargs)
        self._npos = npos
        self._tail = tuple(tail)
        self._grid3 = tuple(int(g) for g in grid) + (1, ) * (3 - len(grid))
        self._binders = {}
        self._launchers = {}
        self._getters = None

    def __call__(self, *args):
        if len(args) != self._npos:
            raise TypeError(f"{self.fn!r}: the bound launch takes the {self._npos} leading parameters "
                            f"{[p.name for p in self.fn.params[:self._npos]]} positionally, got {len(args)} arguments")
        fn = self.fn
        if fn.pre_run_hooks or _compat.interpret_enabled():
            return fn[self.grid](*args, **self.kwargs)
        getters = self._getters
        if getters is None:
            getters = self._getters = _compat.device_and_stream_getters()
        dev = getters[0]()
        binder = self._binders.get(dev)
        if binder is None:
            binder = self._binders[dev] = _compat.specialization_binder(fn)
        key = (dev, bounded_wait_key(), tuple(binder(*args, **self.kwargs)[1]))
        launch = self._launchers.get(key)
        if launch is None:
            kernel = fn[self.grid](*args, **self.kwargs)
            if kernel is not None:
                self._launchers[key] = _compat.compiled_kernel_launcher(kernel)
            return None
        launch(self._grid3, getters[1](dev), *args, *self._tail)
        return None


def jit(fn: Optional[Callable] = None, *, version=None, repr=None, launch_metadata=None, do_not_specialize=None,
        do_not_specialize_on_alignment=None, debug=None, noinline=None):
    """Decorator with ``triton.jit``'s forms (``@triton_dist.jit`` and ``@triton_dist.jit(...)``) returning a
    :class:`DistJITFunction` (whatever the interpreter mode is at definition time; it is checked at launch)."""

    def decorator(f):
        assert callable(f)
        return DistJITFunction(f, version=version, repr=repr, launch_metadata=launch_metadata,
                               do_not_specialize=do_not_specialize,
                               do_not_specialize_on_alignment=do_not_specialize_on_alignment, debug=debug,
                               noinline=noinline)

    return decorator(fn) if fn is not None else decorator


__all__ = ["jit", "DistJITFunction", "BoundLaunch", "check_cooperative_launch", "collective_calls", "module_init_count",
           "module_links_nvshmem", "module_links_rocshmem", "module_shmem_library", "compile_options_for_target",
           "bounded_wait_key", "shmem_extern_libs"]


def compile_options_for_target(target, library: str = "slim") -> dict:
    """Module-level form of :meth:`DistJITFunction.compile_options_for` (for kernels made by ``triton.jit``):
    ``extern_libs`` with the SHMEM bitcode of ``target`` (a :class:`triton_dist.target.Target`; the whole NVSHMEM
    bitcode at level ``library`` of ``runtime.bitcode.SHMEM_LIBRARIES``, the slim library by default) where
    installed; nothing for the simulator."""
    if target.is_sim:
        return {}
    libs = shmem_extern_libs(target.backend, target.arch, library=library)
    return {"extern_libs": libs} if libs else {}


# ----------------------------------------------------------------------------------------------------------------
# cooperative-launch check (the check itself: runtime/cooperative.py)
# ----------------------------------------------------------------------------------------------------------------
def _check_launch(fn: "DistJITFunction", kernel, grid, args, kwargs) -> None:
    if hasattr(kernel, "result"):
        kernel = kernel.result()
    if callable(grid):
        bound = {}
        for i, p in enumerate(fn.params):
            if i < len(args):
                bound[p.name] = args[i]
            elif p.name in kwargs:
                bound[p.name] = kwargs[p.name]
            elif p.default is not inspect.Parameter.empty:
                bound[p.name] = p.default
        grid = grid(bound)
    asm = getattr(kernel, "asm", {})
    if fn._calls_collectives is None:
        fn._calls_collectives = bool(collective_calls(asm))
    check_cooperative_launch(fn.fn.__name__, asm, tuple(grid), False)


#: Names that moved to the targets' backends (``backends.nvidia.shmem_state``, ``backends.amd.shmem_state``) and are
#: still importable from here; resolved on first use, so ``import triton_dist`` imports no backend.
_MOVED = {"NVSHMEM_STATE_SYMBOL": "nvidia", "ptx_uses_nvshmem": "nvidia", "ROCSHMEM_STATE_SYMBOL": "amd",
          "ROCSHMEM_STATE_SYMBOLS": "amd", "amdgcn_uses_rocshmem": "amd"}


def __getattr__(name):
    target = _MOVED.get(name)
    if target is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(f"{__package__}.backends.{target}.shmem_state"), name)
