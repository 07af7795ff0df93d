"""rocSHMEM device functions used by the AMD lowerings: a table of extern symbols + one generic call.

Same conventions as ``triton_dist.backends.nvidia.libshmem`` (pointers as 64-bit addresses, void results
declared with a dummy int32). The rocSHMEM device bitcode is linked by ``triton_dist.jit`` when present.
"""
from __future__ import annotations

import triton.language as tl

from ...language._extern import Extern, call_extern

LIB_NAME = "librocshmem_device"
LIB_PATH = ""

#: ROCSHMEM_SIGNAL_SET / ROCSHMEM_SIGNAL_ADD (same values as NVSHMEM's)
SIGNAL_OPS = {"set": 0, "add": 5}

EXTERNS = {
    "my_pe": Extern("rocshmem_my_pe", (), tl.int32),
    "n_pes": Extern("rocshmem_n_pes", (), tl.int32),
    "ptr": Extern("rocshmem_ptr", (tl.int64, tl.int32), tl.int64),
    "signal_op": Extern("rocshmemx_signal_op", (tl.int64, tl.uint64, tl.int32, tl.int32), None),
}


def call(name: str, *args, _semantic):
    return call_extern(LIB_NAME, LIB_PATH, EXTERNS[name], list(args), _semantic)
