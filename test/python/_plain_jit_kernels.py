"""A kernel made by stock ``@triton.jit`` (not ``@triton_dist.jit``) that uses ``dl.*`` and ``libshmem_device``
(issue 16, point 1): compiled for cuda:90 / hip:gfx942 by test_plain_jit_shmem.py, run on 2 simulator ranks there,
and launched on 2 GPUs by gpu/test_gpu_plain_jit.py. Import it after the interpreter mode is decided."""
import triton
import triton.language as tl
from triton.language import core
from triton.language.extra import libdevice

import triton_dist.language as dl
from triton_dist.language.extra import libshmem_device as shmem


@triton.jit
def plain_exchange(data, sig, out, BLOCK: tl.constexpr):
    """``data``: symmetric fp32 ``[3 * BLOCK]``; ``sig``: symmetric int64 ``[2]`` (zero); ``out``: fp32 ``[2 * BLOCK
    + 2]``. Rank r writes ``r * 1000 + i`` into block 0 of rank r+1's ``data`` (``dl.symm_at``) and signals
    ``sig[0]`` there (``dl.notify``); it puts its own block 1 into block 2 of rank r+1's ``data`` with signal
    ``sig[1]`` (``libshmem_device.putmem_signal_block``); it waits for both of its own signals (``dl.wait``) and
    copies its blocks 0 and 2 to ``out``, then ``libshmem_device.my_pe()`` and ``dl.num_ranks()``."""
    me = dl.rank()
    nxt = (me + 1) % dl.num_ranks()
    offs = tl.arange(0, BLOCK)
    tl.store(dl.symm_at(data, nxt) + offs, (me * 1000 + offs).to(tl.float32))
    dl.notify(sig, nxt, 1, "set", "intra_node")
    shmem.putmem_signal_block(data + 2 * BLOCK, data + BLOCK, BLOCK * 4, sig + 1, 1, shmem.NVSHMEM_SIGNAL_SET, nxt)
    token = dl.wait(sig, 2, "sys", "acquire", 1)
    mine = dl.consume_token(data, token)
    tl.store(out + offs, tl.load(mine + offs))
    tl.store(out + BLOCK + offs, tl.load(mine + 2 * BLOCK + offs))
    tl.store(out + 2 * BLOCK, shmem.my_pe().to(tl.float32))
    tl.store(out + 2 * BLOCK + 1, dl.num_ranks().to(tl.float32))


@triton.jit
def plain_no_shmem(x, y, n, BLOCK: tl.constexpr):
    """No SHMEM call, one libdevice call (an extern call: Triton links libdevice / ocml for it)."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y + offs, libdevice.exp(tl.load(x + offs, mask=mask)) * 2.0, mask=mask)


@core.extern
def _uint64_test(flag, value, _semantic=None):
    return dl.extern_call("libnvshmem_device", "", [flag.to(tl.int64, bitcast=True, _semantic=_semantic), 0, value],
                          {(tl.int64, tl.int32, tl.int64): ("nvshmem_uint64_test", tl.int32)}, False,
                          _semantic=_semantic)


@triton.jit
def plain_outside_slim(flag, out, value):
    """Calls an NVSHMEM function outside triton_dist's slim library (``nvshmem_uint64_test``: is the 64-bit word at
    symmetric ``flag`` equal to ``value``?) through a raw ``dl.extern_call``."""
    tl.store(out, _uint64_test(flag, value))
