"""Finding the SHMEM device bitcode and checking that the installed Triton can link it.

NVIDIA: ``libnvshmem_device.bc`` from (in order) ``TRITON_DIST_NVSHMEM_BITCODE`` (a file), the
``nvidia-nvshmem-cu12/cu13`` wheel (``nvidia/nvshmem/lib``), ``NVSHMEM_HOME/lib``. NVSHMEM wheels <= 3.6 ship
``lib/libnvshmem_device.bc``; 3.7 and later ship only per-arch ``libnvshmem_device_sm_XX.bc``, of which the one with
the highest XX not above the target's compute capability is used. We read the LLVM version that wrote the bitcode
(its identification block, ``LLVM<ver>``; fallback: the ``clang version`` producer string) and compare it with the
LLVM inside the installed Triton (``LLVM version X.Y.Z`` in ``libtriton.so``): a bitcode written by a newer LLVM
(e.g. NVSHMEM 3.8's LLVM 22.1.8 under Triton 3.6's 22.0.0git) cannot be read and is an error that names what to
install (table: docs/runtime.md, "Device bitcode").

AMD: ``TRITON_DIST_ROCSHMEM_BITCODE`` (a file), else in ``ROCSHMEM_HOME/lib`` then ``ROCM_PATH/lib`` (default
``/opt/rocm/lib``) the per-arch ``librocshmem_device_<gfx>.bc`` for the target arch (what rocSHMEM's build installs:
one file per GPU arch, the arch without feature suffixes) or else a single ``librocshmem_device.bc``.
"""
from __future__ import annotations

import functools
import glob
import mmap
import os
import re
import struct
from typing import Dict, Optional, Tuple

NVSHMEM_BITCODE_NAME = "libnvshmem_device.bc"
ROCSHMEM_BITCODE_NAME = "librocshmem_device.bc"
#: rocSHMEM's per-arch device bitcode (``cmake/DeviceBitcode.cmake``: one per GPU arch, installed into ``lib``).
ROCSHMEM_BITCODE_ARCH_NAME = "librocshmem_device_{arch}.bc"


class BitcodeError(RuntimeError):
    """The SHMEM device bitcode is missing or cannot be read by the installed Triton."""


# ----------------------------------------------------------------------------------------------------------------
# LLVM bitcode identification block
# ----------------------------------------------------------------------------------------------------------------
_CHAR6 = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._"
_IDENTIFICATION_BLOCK_ID = 13
_RAW_MAGIC = b"BC\xc0\xde"
_WRAPPER_MAGIC = 0x0B17C0DE


class _Bits:

    def __init__(self, data: bytes, start: int = 0):
        self.data = data
        self.pos = start * 8

    def read(self, n: int) -> int:
        value = 0
        for i in range(n):
            byte = self.data[(self.pos + i) >> 3]
            value |= ((byte >> ((self.pos + i) & 7)) & 1) << i
        self.pos += n
        if self.pos > len(self.data) * 8:
            raise ValueError("truncated bitcode")
        return value

    def vbr(self, n: int) -> int:
        value, shift, hi = 0, 0, 1 << (n - 1)
        while True:
            chunk = self.read(n)
            value |= (chunk & (hi - 1)) << shift
            if not chunk & hi:
                return value
            shift += n - 1
            if shift > 64:
                raise ValueError("bad vbr")

    def align32(self):
        self.pos = (self.pos + 31) & ~31


def _read_abbrev_record(bits: _Bits, ops):
    out, i = [], 0
    while i < len(ops):
        kind, val = ops[i]
        if kind == "lit":
            out.append(val)
        elif kind == "fixed":
            out.append(bits.read(val))
        elif kind == "vbr":
            out.append(bits.vbr(val))
        elif kind == "char6":
            out.append(ord(_CHAR6[bits.read(6)]))
        elif kind == "array":
            n = bits.vbr(6)
            ekind, eval_ = ops[i + 1]
            for _ in range(n):
                if ekind == "fixed":
                    out.append(bits.read(eval_))
                elif ekind == "vbr":
                    out.append(bits.vbr(eval_))
                elif ekind == "char6":
                    out.append(ord(_CHAR6[bits.read(6)]))
                else:
                    raise ValueError("unsupported array element")
            i += 1
        elif kind == "blob":
            n = bits.vbr(6)
            bits.align32()
            out.extend(bits.data[bits.pos // 8:bits.pos // 8 + n])
            bits.pos += n * 8
            bits.align32()
        i += 1
    return out


def read_identification(data: bytes) -> Optional[str]:
    """The producer string of an LLVM bitcode file's identification block (e.g. ``"LLVM18.1.1"``), or None."""
    start = 0
    if len(data) >= 20 and struct.unpack_from("<I", data, 0)[0] == _WRAPPER_MAGIC:
        start = struct.unpack_from("<I", data, 8)[0]
    if data[start:start + 4] != _RAW_MAGIC:
        return None
    try:
        bits = _Bits(data, start + 4)
        if bits.read(2) != 1:  # ENTER_SUBBLOCK
            return None
        block_id, width = bits.vbr(8), bits.vbr(4)
        bits.align32()
        bits.read(32)
        if block_id != _IDENTIFICATION_BLOCK_ID:
            return None
        abbrevs = []
        while True:
            aid = bits.read(width)
            if aid == 0:  # END_BLOCK
                return None
            if aid == 2:  # DEFINE_ABBREV
                ops = []
                for _ in range(bits.vbr(5)):
                    if bits.read(1):
                        ops.append(("lit", bits.vbr(8)))
                    else:
                        enc = bits.read(3)
                        if enc in (1, 2):
                            ops.append(("fixed" if enc == 1 else "vbr", bits.vbr(5)))
                        else:
                            ops.append(({3: "array", 4: "char6", 5: "blob"}[enc], None))
                abbrevs.append(ops)
                continue
            if aid == 3:  # UNABBREV_RECORD
                code, n = bits.vbr(6), bits.vbr(6)
                vals = [bits.vbr(6) for _ in range(n)]
            elif aid >= 4:
                rec = _read_abbrev_record(bits, abbrevs[aid - 4])
                code, vals = rec[0], rec[1:]
            else:
                return None
            if code == 1:  # IDENTIFICATION_CODE_STRING
                return bytes(v & 0xFF for v in vals).decode("latin-1")
    except (ValueError, IndexError, KeyError):
        return None


_CLANG_RE = re.compile(rb"clang version (\d+)\.(\d+)(?:\.(\d+))?")


def llvm_producer(path: str) -> Optional[Tuple[int, str]]:
    """``(major, text)`` of the LLVM that wrote ``path`` or None if it cannot be told."""
    with open(path, "rb") as f:
        head = f.read(4096)
        ident = read_identification(head)
        if ident:
            m = re.search(r"(\d+)", ident)
            if m:
                return int(m.group(1)), ident
        f.seek(0)
        try:
            mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        except ValueError:  # empty file
            return None
        with mm:
            m = _CLANG_RE.search(mm)
            if m:
                return int(m.group(1)), m.group(0).decode()
    return None


def llvm_version_tuple(text: str) -> Optional[Tuple[int, int, int]]:
    """``(major, minor, patch)`` of the first ``X[.Y[.Z]]`` in ``text`` (``"LLVM22.1.8"``, ``"clang version 18.1.1"``,
    ``"22.0.0git"``), missing parts 0; None when ``text`` has no number."""
    m = re.search(r"(\d+)(?:\.(\d+))?(?:\.(\d+))?", text or "")
    if not m:
        return None
    return tuple(int(g or 0) for g in m.groups())


@functools.lru_cache(maxsize=None)
def triton_llvm_version() -> Optional[Tuple[int, int, int]]:
    """``(major, minor, patch)`` of the LLVM built into the installed Triton (``LLVM version 22.0.0git`` in
    ``libtriton.so`` for Triton 3.6, 23.0.0git for 3.7 and 3.8, 24.0.0git for 3.9), or None. The override
    ``TRITON_DIST_TRITON_LLVM_MAJOR=N`` stands for every N.x.y release (it accepts a bitcode of any LLVM N)."""
    override = os.environ.get("TRITON_DIST_TRITON_LLVM_MAJOR")
    if override:
        return (int(override), 1 << 30, 1 << 30)
    try:
        import triton
    except ImportError:  # pragma: no cover
        return None
    for lib in glob.glob(os.path.join(os.path.dirname(triton.__file__), "_C", "libtriton*.so")):
        try:
            with open(lib, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
                m = re.search(rb"LLVM version (\d+\.\d+(?:\.\d+)?)", mm)
                if m:
                    return llvm_version_tuple(m.group(1).decode())
        except (OSError, ValueError):
            continue
    return None


def triton_llvm_major() -> Optional[int]:
    """The major version of the LLVM built into the installed Triton (:func:`triton_llvm_version`), or None."""
    version = triton_llvm_version()
    return None if version is None else version[0]


triton_llvm_major.cache_clear = triton_llvm_version.cache_clear  # one cache behind both


#: The ``nvidia-nvshmem-cu12/cu13`` releases whose device bitcode every supported Triton (3.6-3.9) links: 3.3-3.6
#: ship ``libnvshmem_device.bc`` (LLVM 18, cu13 3.6.5: LLVM 21), 3.7 per-arch files (LLVM 18 / 21). 3.8 (LLVM 22.1.8)
#: links with Triton >= 3.7 only. Same range as pyproject.toml's cu12 / cu13 extras (test_bitcode checks).
NVSHMEM_WHEEL_SPEC = ">=3.3,<3.8"


def _nvshmem_pip_hint() -> str:
    cu = "cu12"
    try:
        import torch

        if (torch.version.cuda or "").startswith("13"):
            cu = "cu13"
    except ImportError:  # pragma: no cover
        pass
    return f'pip install "nvidia-nvshmem-{cu}{NVSHMEM_WHEEL_SPEC}"'


def _wheel_lib_dir() -> Optional[str]:
    try:
        import nvidia.nvshmem as pkg
    except ImportError:
        return None
    paths = list(getattr(pkg, "__path__", []))
    return os.path.join(paths[0], "lib") if paths else None


def nvshmem_lib_dirs():
    """Candidate ``lib`` folders, in lookup order, as ``(label, path)``."""
    out = []
    wheel = _wheel_lib_dir()
    if wheel:
        out.append(("the nvidia-nvshmem wheel", wheel))
    home = os.environ.get("NVSHMEM_HOME")
    if home:
        out.append(("NVSHMEM_HOME", os.path.join(home, "lib")))
    return out


def rocshmem_lib_dirs():
    """Candidate rocSHMEM ``lib`` folders, in lookup order: ``ROCSHMEM_HOME/lib`` (when set), then
    ``ROCM_PATH/lib`` (else ``ROCM_HOME``, else ``/opt/rocm``)."""
    out = []
    if os.environ.get("ROCSHMEM_HOME"):
        out.append(os.path.join(os.environ["ROCSHMEM_HOME"], "lib"))
    rocm = os.environ.get("ROCM_PATH") or os.environ.get("ROCM_HOME") or "/opt/rocm"
    out.append(os.path.join(rocm, "lib"))
    return out


def check_bitcode(path: str, kind: str = "nvshmem") -> str:
    """Raise :class:`BitcodeError` if ``path`` is not LLVM bitcode or was written by a newer LLVM than Triton's."""
    with open(path, "rb") as f:
        head = f.read(8)
    if not (head[:4] == _RAW_MAGIC or (len(head) >= 4 and struct.unpack_from("<I", head, 0)[0] == _WRAPPER_MAGIC)):
        raise BitcodeError(f"{path} is not an LLVM bitcode file (bad magic {head[:4]!r})")
    producer = llvm_producer(path)
    tversion = triton_llvm_version()
    pversion = llvm_version_tuple(producer[1]) if producer is not None else None
    if pversion is not None and tversion is not None and pversion > tversion:
        import triton

        shown = f"{tversion[0]}" if tversion[1] >= 1 << 30 else ".".join(map(str, tversion))
        hint = _nvshmem_pip_hint() if kind == "nvshmem" else "a rocSHMEM build made with Triton's LLVM or older"
        raise BitcodeError(f"{path} was written by {producer[1]} (LLVM {producer[0]}), newer than the LLVM {shown} "
                           f"inside the installed Triton {triton.__version__}, which cannot read it. Install a "
                           f"compatible device library: {hint}")
    return path


@functools.lru_cache(maxsize=None)
def _checked(path: str, mtime: float, size: int, kind: str) -> str:
    return check_bitcode(path, kind)


def _checked_cached(path: str, kind: str) -> str:
    st = os.stat(path)
    return _checked(path, st.st_mtime, st.st_size, kind)


def _env_bitcode(var: str, kind: str) -> Optional[str]:
    """The checked bitcode file named by the environment variable ``var``, or None when it is unset or empty."""
    override = os.environ.get(var)
    if not override:
        return None
    if not os.path.isfile(override):
        raise BitcodeError(f"{var}={override!r} is not a file")
    return _checked_cached(override, kind)


def _or_none(find) -> Optional[str]:
    """``find()``, or None where it raises :class:`BitcodeError` or ``OSError``."""
    try:
        return find()
    except (BitcodeError, OSError):
        return None


def nvshmem_capability(arch) -> Optional[int]:
    """The compute capability in a CUDA ``arch`` (``90``, ``"90"``, ``"sm_90a"``, ``"cuda:90"``), or None."""
    if arch is None:
        return None
    m = re.search(r"(\d+)", str(arch))
    return int(m.group(1)) if m else None


def per_arch_nvshmem_bitcode(lib: str, arch) -> Optional[str]:
    """In NVSHMEM >= 3.7's per-arch layout, the ``libnvshmem_device_sm_XX.bc`` of ``lib`` with the highest XX not
    above ``arch``'s compute capability (sm_90 for 90, sm_100 for 120 where there is no sm_120 file), or None."""
    cc = nvshmem_capability(arch)
    if cc is None:
        return None
    best = None
    for path in glob.glob(os.path.join(lib, "libnvshmem_device_sm_*.bc")):
        m = re.search(r"_sm_(\d+)\.bc$", path)
        if m and int(m.group(1)) <= cc and (best is None or int(m.group(1)) > best[0]):
            best = (int(m.group(1)), path)
    return best[1] if best else None


def find_nvshmem_bitcode(arch=None) -> str:
    """Path of the NVSHMEM device bitcode the installed Triton can link for CUDA ``arch`` (a compute capability;
    None: only the arch-less ``libnvshmem_device.bc`` layout of NVSHMEM <= 3.6 is usable); raises
    :class:`BitcodeError` naming what to install."""
    override = _env_bitcode("TRITON_DIST_NVSHMEM_BITCODE", "nvshmem")
    if override is not None:
        return override
    tried = []
    for label, lib in nvshmem_lib_dirs():
        path = os.path.join(lib, NVSHMEM_BITCODE_NAME)
        tried.append(f"{path} ({label})")
        if os.path.isfile(path):
            return _checked_cached(path, "nvshmem")
        per_arch = sorted(glob.glob(os.path.join(lib, "libnvshmem_device_sm_*.bc")))
        if per_arch:
            chosen = per_arch_nvshmem_bitcode(lib, arch)
            if chosen is not None:
                return _checked_cached(chosen, "nvshmem")
            names = ", ".join(os.path.basename(p) for p in per_arch)
            why = ("no target compute capability was given" if nvshmem_capability(arch) is None else
                   f"none is for sm_{nvshmem_capability(arch)} or an older arch")
            raise BitcodeError(f"{lib} ({label}) has only per-arch NVSHMEM bitcode (NVSHMEM >= 3.7: {names}) and "
                               f"{why}. Compile for a listed arch, install {_nvshmem_pip_hint()}, or point "
                               f"TRITON_DIST_NVSHMEM_BITCODE at a compatible {NVSHMEM_BITCODE_NAME}")
    where = "; ".join(tried) if tried else "no nvidia-nvshmem wheel installed and NVSHMEM_HOME unset"
    raise BitcodeError(f"NVSHMEM device bitcode {NVSHMEM_BITCODE_NAME} not found (looked in: {where}). "
                       f"Install it with {_nvshmem_pip_hint()}, set NVSHMEM_HOME, or set TRITON_DIST_NVSHMEM_BITCODE to the "
                       f"path of a {NVSHMEM_BITCODE_NAME}")


def shmem_bitcode_disabled() -> bool:
    """Whether ``TRITON_DIST_NO_SHMEM_BITCODE`` asks for the SHMEM calls to be left unresolved (compile-only
    inspection: no device library is offered or required)."""
    return os.environ.get("TRITON_DIST_NO_SHMEM_BITCODE", "").strip().lower() in ("1", "true", "on", "yes")


def nvshmem_bitcode_or_none(arch=None) -> Optional[str]:
    """Like :func:`find_nvshmem_bitcode` but returns None instead of raising (used to *offer* the library)."""
    return _or_none(lambda: find_nvshmem_bitcode(arch))


def rocshmem_arch(arch: Optional[str]) -> Optional[str]:
    """The gfx name rocSHMEM's per-arch bitcode file is named by: ``arch`` without target features
    (``"gfx942:sramecc+:xnack-"`` -> ``"gfx942"``), lower case; None for None or an empty string."""
    if not arch:
        return None
    return str(arch).split(":", 1)[0].strip().lower() or None


def rocshmem_bitcode_names(arch: Optional[str] = None):
    """File names tried in each rocSHMEM ``lib`` folder, in order: ``librocshmem_device_<gfx>.bc`` (when ``arch`` is
    given) then ``librocshmem_device.bc``."""
    gfx = rocshmem_arch(arch)
    names = [ROCSHMEM_BITCODE_ARCH_NAME.format(arch=gfx)] if gfx else []
    return names + [ROCSHMEM_BITCODE_NAME]


def find_rocshmem_bitcode(arch: Optional[str] = None) -> str:
    """Path of the rocSHMEM device bitcode for GPU ``arch`` (e.g. ``"gfx942"``; None: only the arch-less name);
    raises :class:`BitcodeError` naming where it looked."""
    override = _env_bitcode("TRITON_DIST_ROCSHMEM_BITCODE", "rocshmem")
    if override is not None:
        return override
    names = rocshmem_bitcode_names(arch)
    cands = [os.path.join(lib, name) for lib in rocshmem_lib_dirs() for name in names]
    for c in cands:
        if os.path.isfile(c):
            return _checked_cached(c, "rocshmem")
    others = sorted({os.path.basename(p)
                     for lib in rocshmem_lib_dirs()
                     for p in glob.glob(os.path.join(lib, ROCSHMEM_BITCODE_ARCH_NAME.format(arch="*")))})
    found = (f" Per-arch bitcode present for other targets: {', '.join(others)}"
             f"{'' if arch else ' (no target arch was given)'}." if others else "")
    raise BitcodeError(f"rocSHMEM device bitcode {' / '.join(names)} not found (looked in: {', '.join(cands)}).{found} "
                       f"Build rocSHMEM with its device bitcode for this GPU (GPU_TARGETS) and set ROCSHMEM_HOME (or "
                       f"TRITON_DIST_ROCSHMEM_BITCODE) to it")


def rocshmem_bitcode_or_none(arch: Optional[str] = None) -> Optional[str]:
    """Like :func:`find_rocshmem_bitcode` but returns None instead of raising."""
    return _or_none(lambda: find_rocshmem_bitcode(arch))


# ----------------------------------------------------------------------------------------------------------------
# the slim NVSHMEM library: only the functions triton_dist can call
# ----------------------------------------------------------------------------------------------------------------
#: ``0`` / ``false`` / ``off`` / ``no``: link the whole NVSHMEM bitcode into every kernel (the slow, old way).
SLIM_ENV = "TRITON_DIST_SLIM_BITCODE"
#: bump when the slim library's contents change for the same inputs
_SLIM_FORMAT = 1
_NVPTX_TRIPLE = "nvptx64-nvidia-cuda"


def slim_enabled() -> bool:
    """Whether kernels link the slim NVSHMEM library (default) rather than the whole bitcode (``SLIM_ENV``)."""
    return os.environ.get(SLIM_ENV, "").strip().lower() not in ("0", "false", "off", "no")


def cache_dir() -> str:
    """Where triton_dist keeps files it derives once per machine: ``TRITON_DIST_CACHE_DIR``, else ``triton_dist/``
    in Triton's cache directory."""
    override = os.environ.get("TRITON_DIST_CACHE_DIR", "").strip()
    if override:
        return override
    import triton

    return os.path.join(triton.knobs.cache.dir, "triton_dist")


#: the NVSHMEM library a kernel links, from the fastest to compile to the most complete: ``slim`` (the functions
#: triton_dist's lowerings call but ``FULL_LIBRARY_ONLY``), ``wide`` (every function they call), ``whole`` (NVSHMEM's
#: bitcode as installed). ``triton_dist.jit`` starts every function at ``slim`` and moves a function whose compile
#: misses an NVSHMEM function to the next one.
SHMEM_LIBRARIES = ("slim", "wide", "whole")


def nvshmem_functions(wide: bool = False) -> dict:
    """``{symbol: (argument LLVM types, result LLVM type)}`` of the NVSHMEM functions triton_dist's lowerings call
    that the slim library holds: ``backends.nvidia.libshmem.EXTERNS`` but its ``FULL_LIBRARY_ONLY``, or all of them
    when ``wide`` (void functions are declared with an ``i32`` result, as kernels declare them)."""
    from .. import _compat
    from ..backends.nvidia import libshmem as nv

    return {e.symbol: (tuple(_compat.llvm_type_name(t) for t in e.arg_types),
                       "i32" if e.ret is None else _compat.llvm_type_name(e.ret))
            for name, e in nv.EXTERNS.items() if wide or name not in nv.FULL_LIBRARY_ONLY}


_slim_paths = {}


#: the file name of a slim / wide library (:func:`slim_nvshmem_library`), and what tells its level from a name
_SLIM_FILE = "libnvshmem_device-{level}-{key}.ll"
_SLIM_FILE_RE = re.compile(r"^libnvshmem_device-(slim|wide)-[0-9a-f]+\.ll$")


def nvshmem_library_level(path: str) -> Optional[str]:
    """The level of :data:`SHMEM_LIBRARIES` a library file is, from its name wherever it lies (another machine's
    cache, too): "slim" / "wide" for the files :func:`slim_nvshmem_library` writes, "whole" for NVSHMEM's own bitcode
    (``libnvshmem_device.bc``, or a per-arch ``libnvshmem_device_sm_XX.bc``); None for any other file."""
    base = os.path.basename(path)
    m = _SLIM_FILE_RE.match(base)
    if m:
        return m.group(1)
    return "whole" if base.startswith("libnvshmem_device") and base.endswith(".bc") else None


_content_digests: Dict[tuple, str] = {}


def _content_digest(path: str) -> str:
    """SHA-256 of a file's bytes, computed once per (path, size, mtime) in this process (~0.1 s for NVSHMEM's
    bitcode)."""
    import hashlib

    st = os.stat(path)
    memo = (os.path.realpath(path), st.st_size, st.st_mtime_ns)
    if memo not in _content_digests:
        h = hashlib.sha256()
        with open(path, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 22), b""):
                h.update(chunk)
        _content_digests[memo] = h.hexdigest()
    return _content_digests[memo]


def slim_nvshmem_library(full_path: str, wide: bool = False) -> str:
    """Path of an LLVM IR file that defines the NVSHMEM functions triton_dist calls (:func:`nvshmem_functions`, all
    of them when ``wide``) exactly as ``full_path`` does, with everything they need and nothing else
    (``_compat.extract_library_functions``).

    Why: Triton parses every ``extern_libs`` file for each kernel it compiles; NVSHMEM's whole bitcode is 31-43 MB
    and costs about 6 s per compile, the slim file (about 5 MB of IR) a fraction of a second, and the kernels'
    PTX is identical. The ``wide`` file adds ``FULL_LIBRARY_ONLY`` (about twice the IR): what a kernel calling one
    of those links, a fraction of a second rather than the whole bitcode's 6 s. Made once per (bitcode content,
    Triton version, function set) and kept in :func:`cache_dir`; named by the bitcode's bytes, not its path or mtime,
    so kernels compiled against it keep their Triton cache keys across reinstalls and machines (a carried cache
    stays warm). Written atomically (several ranks may make it at once). Kernels that call an NVSHMEM function
    outside the set are recompiled against the next library of :data:`SHMEM_LIBRARIES` by ``triton_dist.jit``.
    Where the file cannot be made, a warning is printed once and ``full_path`` is returned."""
    import hashlib

    import triton

    functions = nvshmem_functions(wide)
    ident = repr((_SLIM_FORMAT, _content_digest(full_path), triton.__version__, sorted(functions.items())))
    key = hashlib.sha256(ident.encode()).hexdigest()[:24]
    out = os.path.join(cache_dir(), _SLIM_FILE.format(level="wide" if wide else "slim", key=key))
    if out in _slim_paths:
        return _slim_paths[out]
    wanted = out
    if not os.path.isfile(out):
        try:
            from .. import _compat

            text = _compat.extract_library_functions(full_path, functions, _NVPTX_TRIPLE, "sm_90a")
            hidden = [s for s in functions if re.search(rf"^define internal [^@\n]*@{re.escape(s)}\(", text, re.M)]
            if hidden:  # the linkage edit missed them: kernels could not link them
                raise BitcodeError(f"slim library: {', '.join(sorted(hidden))} left internal")
            os.makedirs(os.path.dirname(out), exist_ok=True)
            tmp = f"{out}.{os.getpid()}.tmp"
            with open(tmp, "w") as f:
                f.write(text)
            os.replace(tmp, out)
        except Exception as exc:  # a Triton upgrade broke an assumption, a read-only cache: stay correct, be slow
            import warnings

            warnings.warn(f"triton_dist: could not make the slim NVSHMEM library from {full_path} ({exc}); kernels "
                          f"link the whole bitcode (about 6 s more per compile). {SLIM_ENV}=0 silences this.")
            out = full_path
    _slim_paths[wanted] = out
    return out


def nvshmem_link_library(full_path: str, library: str = "slim") -> str:
    """The NVSHMEM library file kernels link at level ``library`` of :data:`SHMEM_LIBRARIES`: the slim or wide file
    (:func:`slim_nvshmem_library`), or ``full_path`` for ``whole`` and wherever ``SLIM_ENV`` turns slimming off."""
    if library not in SHMEM_LIBRARIES:
        raise ValueError(f"library must be one of {SHMEM_LIBRARIES}, not {library!r}")
    if library == "whole" or not slim_enabled():
        return full_path
    return slim_nvshmem_library(full_path, wide=library == "wide")
