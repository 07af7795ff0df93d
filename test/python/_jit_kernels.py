"""Kernels for test_jit.py, defined at import time with Triton's interpreter OFF (helper module, not a test)."""
import triton
import triton.language as tl

import triton_dist


@triton_dist.jit
def twice(x):
    return x * 2


@triton_dist.jit
def scale_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(y_ptr + offs, twice(tl.load(x_ptr + offs, mask=m)) + 1, mask=m)


@triton_dist.jit(do_not_specialize=["n"], debug=False)
def scale_kernel_kw(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=m) * 3, mask=m)


@triton.autotune(configs=[triton.Config({"BLOCK": 32}, num_warps=1)], key=["n"])
@triton_dist.jit
def tuned_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=m) - 1, mask=m)


@triton.heuristics({"BLOCK": lambda args: 64})
@triton_dist.jit
def heur_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=m) + 10, mask=m)


@triton.jit
def plain_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=m) * 2, mask=m)


@triton_dist.jit
def dist_plain_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    y = tl.load(x_ptr + offs, mask=m)
    tl.store(y_ptr + offs, tl.extra.cuda.libdevice.exp(y.to(tl.float32)), mask=m)


@tl.core.extern
def my_pe(_semantic=None):
    return tl.core.extern_elementwise("libnvshmem_device", "", [], {(): ("nvshmem_my_pe", tl.int32)}, False,
                                      _semantic=_semantic)


@tl.core.extern
def n_pes(_semantic=None):
    return tl.core.extern_elementwise("libnvshmem_device", "", [], {(): ("nvshmem_n_pes", tl.int32)}, False,
                                      _semantic=_semantic)


@tl.core.extern
def peer_ptr(addr, pe, _semantic=None):
    return tl.core.extern_elementwise("libnvshmem_device", "", [addr, pe],
                                      {(tl.int64, tl.int32): ("nvshmem_ptr", tl.int64)}, False, _semantic=_semantic)


@triton_dist.jit
def shmem_kernel(out_ptr, sym_ptr):
    """out[0] = my_pe * 100 + n_pes; writes my_pe + 7 into sym[my_pe] on the next PE through nvshmem_ptr."""
    pe = my_pe()
    n = n_pes()
    tl.store(out_ptr, pe * 100 + n)
    peer = (pe + 1) % n
    remote = peer_ptr(sym_ptr.to(tl.int64, bitcast=True), peer).to(tl.pointer_type(tl.int32), bitcast=True)
    tl.store(remote + pe, pe + 7)
