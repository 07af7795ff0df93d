"""NVSHMEM device functions for the NVIDIA lowerings: a table of extern symbols + one generic call, and the
lowering of ``triton_dist.language.extra.libshmem_device``.

The C signatures (declared once for every GPU target) are in ``triton_dist.language._libshmem``: pointers pass as
their 64-bit generic address (``i64``) so the declaration matches NVSHMEM's ``void *`` parameters whatever
Triton's pointer address space is; ``nvshmem_team_t`` is ``i32``. Symbols are ``nvshmem_<name>``, or
``nvshmemx_<name>`` for NVSHMEM's extensions (``*_block`` / ``*_warp`` variants, ``mc_ptr``, ``signal_op``). The
bitcode (``libnvshmem_device.bc``, NVSHMEM 3.4.5 wheel) is linked by ``triton_dist.jit``; every symbol
of ``EXTERNS`` was checked to be present in it, and test/lit/libshmem links a call to each into a cubin.

Constants: NVSHMEM's values are stated once, in ``triton_dist.language._libshmem`` (``CMP_NAMES``, ``SIGNAL_NAMES``,
``TEAM_NAMES``); the NVIDIA lowering passes them to NVSHMEM unchanged.
"""
from __future__ import annotations

import sys

import triton.language as tl

from ...language import _gpu, _libshmem
from ...language._extern import call_extern

LIB_NAME = "libnvshmem_device"
LIB_PATH = ""  # linked through the kernel's extern_libs by triton_dist.jit

#: ``dl.notify`` sig_op -> NVSHMEM_SIGNAL_SET / NVSHMEM_SIGNAL_ADD (9 / 10). NVSHMEM treats any value other than SET
#: as ADD on its load/store path, so a wrong SET value silently adds.
SIGNAL_OPS = {name: value for value, name in _libshmem.SIGNAL_NAMES.items()}

#: threads that run a "warp" call when the target does not say
WARP_SIZE = 32

_NVSHMEMX = ("mc_ptr", "signal_op")  # extensions besides the *_block / *_warp variants


def _symbol(name: str) -> str:
    ext = name.endswith(("_block", "_warp")) or name in _NVSHMEMX
    return ("nvshmemx_" if ext else "nvshmem_") + name


#: name -> Extern (symbol, argument types, result type)
EXTERNS = _libshmem.externs(_symbol)

#: see ``triton_dist.language._libshmem.COLLECTIVES``
COLLECTIVE_SYMBOLS = tuple(EXTERNS[n].symbol for n in _libshmem.COLLECTIVES)


def call(name: str, *args, _semantic):
    """Call table entry ``name`` (e.g. ``call("my_pe", _semantic=s)``)."""
    return call_extern(LIB_NAME, LIB_PATH, EXTERNS[name], list(args), _semantic)


# ----------------------------------------------------------------------------------------------------------------
# libshmem_device lowering
# ----------------------------------------------------------------------------------------------------------------
_TID_ASM = "mov.u32 $0, %tid.x;"


def thread_id(_semantic):
    """The thread's index in the program (``%tid.x``), int32."""
    return _gpu.asm(_TID_ASM, "=r", [], tl.int32, _semantic)


def constant(kind: str, value, op: str):
    """NVSHMEM's value of a public team / sig_op / cmp constant: the same (the public constants are NVSHMEM's)."""
    return value


def lower(name, args, scope, **kwargs):
    """Emit libshmem_device function ``name``: see ``triton_dist.language._libshmem.lower`` ("warp": warp 0)."""
    return _libshmem.lower(sys.modules[__name__], name, args, scope, **kwargs)


#: the ``LibshmemLowering`` of the NVIDIA backend
LOWERING = _libshmem.GpuLibshmemLowering(sys.modules[__name__])
