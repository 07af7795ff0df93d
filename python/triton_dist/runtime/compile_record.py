"""Record the kernel compiles a job makes, and make the same requests again later, in parallel, into Triton's cache.

A job's first run compiles every kernel specialization it launches, one after another, on one core per rank: a
triton-dist GPU test tier spends most of its first minutes there, and a server's first requests wait for it. With
``TRITON_DIST_COMPILE_RECORD=DIR`` (:data:`RECORD_ENV`) set, the first launch of each specialization of a
``@triton_dist.jit`` kernel in a process (compiled, or loaded from Triton's cache) appends its compile *request* as
one JSON line to ``DIR/compiles-<host>-<pid>.jsonl``: the kernel (module, qualified name, source file), its
signature, constexpr values, specialization attributes, the target, the compile options and the bounded-wait mode
(:func:`request_of`). ``python -m triton_dist.tools.precompile DIR --jobs N`` compiles the recorded requests in ``N``
processes into Triton's cache (``TRITON_CACHE_DIR``), so the job's next run finds every kernel there.

A replay (:func:`compile_request`) is ``triton.compile`` of the kernel *as its source is now* (a changed kernel is
compiled anew, under its new key), with the recorded signature, constexprs, attributes, target and options, except
the SHMEM library and libdevice paths, which become this machine's (the NVSHMEM library level recorded, slim / wide /
whole, is kept: :func:`local_extern_libs`): the cache key is then the one the JIT computes here for the same launch.
It needs no GPU. Recording costs one JSON line per specialization and process, nothing per launch.

Not replayable (recorded as such, with the reason, and counted by the replay): a kernel that cannot be imported by
name (defined inside a function), and a constexpr value other than plain data (None, bool, int, float, str, tuples
and lists of them), a ``tl.dtype``, a ``tl.constexpr`` or an importable function (``@jit`` or not: e.g. a
``libshmem_device`` function a test passes as a constexpr). Plain ``@triton.jit``
kernels are not recorded.
"""
from __future__ import annotations

import glob
import importlib
import importlib.util
import inspect
import json
import os
import socket
import sys
from typing import Dict, List, Optional, Tuple

__all__ = ["RECORD_ENV", "RECORD_FORMAT", "Unrecordable", "record_dir", "encode", "decode", "request_of", "record",
           "warn_once", "load_requests", "local_extern_libs", "compile_request", "kernel_of", "WORLD_CONSTEXPR"]

#: where compile requests are recorded (a directory; unset or empty: nothing is recorded)
RECORD_ENV = "TRITON_DIST_COMPILE_RECORD"
#: version of one recorded line's layout
RECORD_FORMAT = 1


class Unrecordable(ValueError):
    """A value of a compile request that a replay could not rebuild (the message says which)."""


def record_dir() -> Optional[str]:
    """The directory of :data:`RECORD_ENV`, or None when recording is off."""
    return os.environ.get(RECORD_ENV, "").strip() or None


# ---- the codec: the request's Python values <-> JSON, exactly (tuples stay tuples, dtypes stay dtypes) --------------
def _jit_name(fn) -> dict:
    return _function_name(fn.fn, "@jit function")


def _function_name(py, what: str = "function") -> dict:
    """How a replay finds ``py``: its module and qualified name, and the file that module was loaded from (for a
    test module pytest imported by path), when ``py`` was defined there (not a wrapper made elsewhere)."""
    qualname = py.__qualname__
    if "<locals>" in qualname or "<lambda>" in qualname:
        raise Unrecordable(f"{what} {qualname} is defined inside a function: a replay cannot import it")
    if py.__module__ == "__main__":
        raise Unrecordable(f"{what} {qualname} is defined in a script run as __main__: a replay would import itself "
                           "(or run the script) instead")
    module = sys.modules.get(py.__module__)
    path = getattr(module, "__file__", None)
    try:
        defined_in = inspect.getsourcefile(py)
    except TypeError:
        defined_in = None
    same = path and defined_in and os.path.abspath(path) == os.path.abspath(defined_in)
    return {"module": py.__module__, "qualname": qualname, "file": os.path.abspath(path) if same else None}


def encode(value):
    """A JSON-able form of ``value`` that :func:`decode` turns back into an equal value of the same types.
    Raises :class:`Unrecordable` for anything else."""
    import triton
    import triton.language as tl

    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, tuple):
        return {"tuple": [encode(v) for v in value]}
    if isinstance(value, list):
        return [encode(v) for v in value]
    if isinstance(value, dict):
        return {"dict": [[encode(k), encode(v)] for k, v in value.items()]}
    if type(value) is tl.dtype:
        return {"dtype": value.name}
    if isinstance(value, tl.constexpr):
        return {"constexpr": encode(value.value)}
    if isinstance(value, triton.JITFunction):
        return {"jit": _jit_name(value)}
    if inspect.isfunction(value):  # e.g. a libshmem_device function passed as a constexpr
        return {"function": _function_name(value)}
    raise Unrecordable(f"a {type(value).__name__} value ({value!r:.80})")


def decode(obj):
    """The value :func:`encode` made ``obj`` from (``{"jit": ...}`` imports the function: :func:`kernel_of`)."""
    if isinstance(obj, list):
        return [decode(v) for v in obj]
    if not isinstance(obj, dict):
        return obj
    (tag, body), = obj.items()
    if tag == "tuple":
        return tuple(decode(v) for v in body)
    if tag == "dict":
        return {decode(k): decode(v) for k, v in body}
    if tag == "dtype":
        import triton.language as tl

        return tl.dtype(body)
    if tag == "constexpr":
        import triton.language as tl

        return tl.constexpr(decode(body))
    if tag in ("jit", "function"):
        return kernel_of(body)
    raise ValueError(f"compile record: unknown value tag {tag!r}")


def kernel_of(name: dict):
    """The ``@jit`` function a record names (``{"module", "qualname", "file"}``): imported by module name, else from
    its source file under that module name (test modules pytest imported by file). Raises ImportError naming it."""
    module = sys.modules.get(name["module"])
    if module is None:
        try:
            module = importlib.import_module(name["module"])
        except ImportError as exc:
            path = name.get("file")
            if not path or not os.path.isfile(path):
                raise ImportError(f"kernel {name['module']}:{name['qualname']}: {exc}") from exc
            spec = importlib.util.spec_from_file_location(name["module"], path)
            module = importlib.util.module_from_spec(spec)
            sys.path.insert(0, os.path.dirname(path))  # its sibling imports, as pytest's rootdir-relative import
            sys.modules[name["module"]] = module
            spec.loader.exec_module(module)
    obj = module
    for part in name["qualname"].split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            raise ImportError(f"kernel {name['module']}:{name['qualname']}: no such name in {module.__file__}")
    return obj


# ---- recording ----------------------------------------------------------------------------------------------------
def request_of(fn, target, signature, constexprs, attrs, options, bounded_wait: str) -> dict:
    """One compile request as a JSON-able dict: what ``JITFunction._do_compile`` is given (``signature``
    ``{name: type}``, ``constexprs`` / ``attrs`` keyed by argument path, ``options`` the backend's options object)
    plus the target (``GPUTarget``) and the bounded-wait mode (part of a DistJIT kernel's key). A request with a
    value :func:`encode` refuses carries ``"unrecordable"`` (the reason) instead of its values."""
    rec = {"format": RECORD_FORMAT}
    try:
        rec["kernel"] = _jit_name(fn)
        rec.update(signature=encode(signature), constexprs=encode(constexprs), attrs=encode(attrs),
                   target=[target.backend, encode(target.arch), target.warp_size],
                   options=encode(dict(vars(options))), bounded_wait=bounded_wait)
    except Unrecordable as exc:
        rec = {"format": RECORD_FORMAT, "kernel": {"module": fn.fn.__module__, "qualname": fn.fn.__qualname__},
               "unrecordable": str(exc)}
    return rec


_warned = set()


def warn_once(message: str) -> None:
    """A RuntimeWarning with ``message``, once per process and message."""
    if message not in _warned:
        import warnings

        _warned.add(message)
        warnings.warn(message, RuntimeWarning, stacklevel=3)


def record(directory: str, request: dict) -> None:
    """Append ``request`` as one line to this process's file in ``directory`` (made if missing)."""
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, f"compiles-{socket.gethostname()}-{os.getpid()}.jsonl")
    with open(path, "a") as f:
        f.write(json.dumps(request, sort_keys=True) + "\n")


def load_requests(paths) -> Tuple[List[dict], List[dict]]:
    """(replayable requests, unrecordable ones) from record files and directories (their ``*.jsonl``), each request
    once (the same specialization recorded by several ranks or runs), in first-seen order. A line that is not a
    request of :data:`RECORD_FORMAT` raises ValueError naming the file and line."""
    files = []
    for p in paths:
        if os.path.isdir(p):
            files += sorted(glob.glob(os.path.join(p, "**", "*.jsonl"), recursive=True))
        elif os.path.isfile(p):
            files.append(p)
        else:
            raise FileNotFoundError(f"compile record: no file or directory {p}")
    seen, good, bad = set(), [], []
    for path in files:
        with open(path) as f:
            for n, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    rec = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise ValueError(f"{path}:{n}: not JSON ({exc})") from None
                if not isinstance(rec, dict) or rec.get("format") != RECORD_FORMAT or "kernel" not in rec:
                    raise ValueError(f"{path}:{n}: not a compile request of format {RECORD_FORMAT}")
                ident = json.dumps(rec, sort_keys=True)
                if ident in seen:
                    continue
                seen.add(ident)
                (bad if "unrecordable" in rec else good).append(rec)
    return good, bad


# ---- replay -------------------------------------------------------------------------------------------------------
def local_extern_libs(recorded, backend: str, arch) -> Dict[str, str]:
    """The recorded ``extern_libs`` as the JIT would offer them on this machine: our SHMEM library at the recorded
    level (slim / wide file, or NVSHMEM's whole bitcode ``libnvshmem_device*.bc``; HIP: the arch's rocSHMEM bitcode)
    at this machine's path, libdevice left to the backend's default; any other entry (a user's own file) as
    recorded."""
    from ..jit import NVSHMEM_LIB_NAME, ROCSHMEM_LIB_NAME, shmem_extern_libs
    from .bitcode import nvshmem_library_level

    out = {}
    for name, path in dict(recorded or ()).items():
        if name == "libdevice":
            continue
        level = None
        if name == NVSHMEM_LIB_NAME:
            level = nvshmem_library_level(path)
        elif name == ROCSHMEM_LIB_NAME:
            level = "slim"
        if level is not None:
            path = shmem_extern_libs(backend, arch, library=level).get(name, path)
        out[name] = path
    return out


#: the constexpr parameter name :func:`compile_request`'s ``world`` sets (what the library's kernels call the number
#: of ranks they are specialised for)
WORLD_CONSTEXPR = "WORLD"


def compile_request(rec: dict, world: Optional[int] = None):
    """Compile one recorded request (:func:`load_requests`) into Triton's cache, as the JIT would on this machine;
    returns Triton's compiled kernel (a cache hit when it was there), or None when ``world`` is given and the kernel
    has no ``WORLD`` constexpr (nothing to compile for another world size). Sets ``TRITON_DIST_BOUNDED_WAIT`` to the
    recorded mode for the compile (the lowering reads it) and restores it after.

    ``world``: compile the request for that many ranks instead -- its ``WORLD`` constexpr (:data:`WORLD_CONSTEXPR`)
    set to ``world``. A guess, for a job about to run at another world size than the one recorded: a kernel whose
    other specialisations depend on the world size too (sizes per rank, divisibility) is compiled in vain, and the
    job compiles the right one itself."""
    import triton

    from .. import _compat
    from ..jit import _bounded_wait_env

    fn = kernel_of(rec["kernel"])
    constexprs = decode(rec["constexprs"])
    if world is not None:
        names = list(getattr(fn, "arg_names", ()))
        path = (names.index(WORLD_CONSTEXPR), ) if WORLD_CONSTEXPR in names else None
        if path not in constexprs:
            return None
        constexprs[path] = world
    backend, arch, warp_size = rec["target"]
    arch = decode(arch)
    options = decode(rec["options"])
    options["extern_libs"] = local_extern_libs(options.get("extern_libs"), backend, arch)
    env = _bounded_wait_env()
    before = os.environ.get(env)
    if rec["bounded_wait"]:
        os.environ[env] = rec["bounded_wait"]
    else:
        os.environ.pop(env, None)
    try:
        src = _compat.ast_source(fn, decode(rec["signature"]), constexprs, decode(rec["attrs"]))
        return triton.compile(src, target=_compat.gpu_target(backend, arch, warp_size), options=options)
    finally:
        if before is None:
            os.environ.pop(env, None)
        else:
            os.environ[env] = before
