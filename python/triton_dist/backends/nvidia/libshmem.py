"""NVSHMEM device functions used by the NVIDIA lowerings: a table of extern symbols + one generic call.

Pointers are passed as their 64-bit generic address (``i64``) so the declaration matches NVSHMEM's ``void *``
parameters whatever Triton's pointer address space is; results that are pointers come back as ``i64`` and are
converted back by the caller. The bitcode (``libnvshmem_device.bc``) is linked by ``triton_dist.jit``.
A later issue extends this table into the full ``libshmem_device`` API.
"""
from __future__ import annotations

import triton.language as tl

from ...language._extern import Extern, call_extern

LIB_NAME = "libnvshmem_device"
LIB_PATH = ""  # linked through the kernel's extern_libs by triton_dist.jit

#: NVSHMEM_SIGNAL_SET / NVSHMEM_SIGNAL_ADD
SIGNAL_OPS = {"set": 0, "add": 5}

EXTERNS = {
    "my_pe": Extern("nvshmem_my_pe", (), tl.int32),
    "n_pes": Extern("nvshmem_n_pes", (), tl.int32),
    # void *nvshmem_ptr(const void *dest, int pe)
    "ptr": Extern("nvshmem_ptr", (tl.int64, tl.int32), tl.int64),
    # void nvshmemx_signal_op(uint64_t *sig_addr, uint64_t signal, int sig_op, int pe)
    "signal_op": Extern("nvshmemx_signal_op", (tl.int64, tl.uint64, tl.int32, tl.int32), None),
}


def call(name: str, *args, _semantic):
    """Call table entry ``name`` (e.g. ``call("my_pe", _semantic=s)``)."""
    return call_extern(LIB_NAME, LIB_PATH, EXTERNS[name], list(args), _semantic)
