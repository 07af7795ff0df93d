"""NVSHMEM device functions for the NVIDIA lowerings: a table of extern symbols + one generic call, and the
lowering of ``triton_dist.language.extra.libshmem_device``.

The C signatures (declared once for every GPU target) are in ``triton_dist.language._libshmem``: pointers pass as
their 64-bit generic address (``i64``) so the declaration matches NVSHMEM's ``void *`` parameters whatever
Triton's pointer address space is; ``nvshmem_team_t`` is ``i32``. Symbols are ``nvshmem_<name>``, or
``nvshmemx_<name>`` for NVSHMEM's extensions (``*_block`` / ``*_warp`` variants, ``mc_ptr``, ``signal_op``);
``half_p`` / ``bfloat16_p`` (``_g``) call ``nvshmem_uint16_p`` (``_g``) with the value's 16 bits, because NVSHMEM's
bitcode passes ``__half`` / ``__nv_bfloat16`` as a ``byval`` struct, which a Triton extern call cannot express. The
bitcode (``libnvshmem_device.bc``, NVSHMEM 3.4.5 wheel) is linked by ``triton_dist.jit``; every symbol
of ``EXTERNS`` was checked to be present in it, and test/lit/libshmem links a call to each into a cubin.

Constants: NVSHMEM's values are stated once, in ``triton_dist.language._libshmem`` (``CMP_NAMES``, ``SIGNAL_NAMES``,
``TEAM_NAMES``); the NVIDIA lowering passes them to NVSHMEM unchanged.
"""
from __future__ import annotations

import sys

from ...language import _libshmem
from ...language._extern import call_extern

LIB_NAME = "libnvshmem_device"
LIB_PATH = ""  # linked through the kernel's extern_libs by triton_dist.jit

#: ``dl.notify`` sig_op -> NVSHMEM_SIGNAL_SET / NVSHMEM_SIGNAL_ADD (9 / 10). NVSHMEM treats any value other than SET
#: as ADD on its load/store path, so a wrong SET value silently adds.
SIGNAL_OPS = {name: value for value, name in _libshmem.SIGNAL_NAMES.items()}

_NVSHMEMX = ("mc_ptr", "signal_op")  # extensions besides the *_block / *_warp variants


def _symbol(name: str) -> str:
    if name in ("half_p", "bfloat16_p", "half_g", "bfloat16_g"):
        return "nvshmem_uint16" + name[-2:]  # the same 16 bits (see the module docstring)
    ext = name.endswith(("_block", "_warp")) or name in _NVSHMEMX
    return ("nvshmemx_" if ext else "nvshmem_") + name


#: name -> Extern (symbol, argument types, result type)
EXTERNS = _libshmem.externs(_symbol)

#: Functions the slim NVSHMEM library (``triton_dist.runtime.bitcode.slim_nvshmem_library``) leaves out: the typed
#: scalar put / get but ``int_p`` / ``int_g`` (each inlines NVSHMEM's transport paths: 3.3 MB of IR for the 50) and
#: the thread / warp byte collectives (2.5 MB); with them the slim file would double (5.6 -> 11.8 MB) and every
#: kernel compile parses it. A kernel calling one fails to link the slim file and ``triton_dist.jit`` compiles it
#: again against the wide file, which holds them (``runtime.bitcode.SHMEM_LIBRARIES``).
FULL_LIBRARY_ONLY = frozenset(
    [n for n in EXTERNS if n.endswith(("_p", "_g")) and n not in ("int_p", "int_g")]
    + ["broadcastmem", "broadcastmem_warp", "fcollectmem", "fcollectmem_warp"])

#: see ``triton_dist.language._libshmem.COLLECTIVES``
COLLECTIVE_SYMBOLS = tuple(EXTERNS[n].symbol for n in _libshmem.COLLECTIVES)


def call(name: str, *args, _semantic):
    """Call table entry ``name`` (e.g. ``call("my_pe", _semantic=s)``)."""
    return call_extern(LIB_NAME, LIB_PATH, EXTERNS[name], list(args), _semantic)


# ----------------------------------------------------------------------------------------------------------------
# libshmem_device lowering
# ----------------------------------------------------------------------------------------------------------------
def constant(kind: str, value, op: str):
    """NVSHMEM's value of a public team / sig_op / cmp constant: the same (the public constants are NVSHMEM's)."""
    return value


def lower(name, args, *, _semantic):
    """Emit libshmem_device function ``name``: see ``triton_dist.language._libshmem.lower``."""
    return _libshmem.lower(sys.modules[__name__], name, args, _semantic=_semantic)


#: the ``LibshmemLowering`` of the NVIDIA backend
LOWERING = _libshmem.GpuLibshmemLowering(sys.modules[__name__])
