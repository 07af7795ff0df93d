"""Kernels for test_language_sim.py (imported with TRITON_INTERPRET=1 so they are interpreted)."""
import triton
import triton.language as tl

import triton_dist
import triton_dist.language as dl
from triton_dist.language.extra import libshmem_device as shmem
from triton_dist.language.extra.language_extra import ld


@triton.jit
def k_rank(out):
    tl.store(out, dl.rank())
    tl.store(out + 1, dl.num_ranks())


@triton.jit
def k_symm_load(x, out, peer, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out + offs, tl.load(dl.symm_at(x, peer) + offs))


@triton.jit
def k_put_notify(src, data, sig, peer, value, BLOCK: tl.constexpr, OP: tl.constexpr, SCOPE: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    if SCOPE == "gpu":
        tl.store(data + offs, tl.load(src + offs))
    else:
        tl.store(dl.symm_at(data, peer) + offs, tl.load(src + offs))
    dl.notify(sig, peer, value, OP, SCOPE)


@triton.jit
def k_wait_read(sig, n, value, data, out, BLOCK: tl.constexpr):
    tok = dl.wait(sig, n, "sys", "acquire", value)
    p = dl.consume_token(data, tok)
    offs = tl.arange(0, BLOCK)
    tl.store(out + offs, tl.load(p + offs))


@triton.jit
def k_wait_scope(sig, SCOPE: tl.constexpr):
    dl.wait(sig, 1, SCOPE, "acquire")


@triton.jit
def k_extern(out, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    r = dl.extern_call("libfake", "", [offs], {(tl.int32, ): ("my_device_fn", tl.int32)}, True)
    tl.store(out + offs, r)


@triton.jit
def k_ring(sig, data, ITERS: tl.constexpr, BLOCK: tl.constexpr):
    """Rank r forwards round i to rank r+1 (data then signal); rank 0 starts each round."""
    me = dl.rank()
    n = dl.num_ranks()
    nxt = (me + 1) % n
    offs = tl.arange(0, BLOCK)
    for i in range(1, ITERS + 1):
        if me != 0:
            dl.wait(sig, 1, "sys", "acquire", i)
        tl.store(dl.symm_at(data, nxt) + offs, tl.zeros([BLOCK], tl.float32) + me * 1000 + i)
        dl.notify(sig, nxt, i, "set", "intra_node")
        if me == 0:
            dl.wait(sig, 1, "sys", "acquire", i)


# ---- error text (issue 15): triton_dist.jit kernels run by the simulator's grid runner while a context is set
@triton.jit
def _wait_one(sig):
    dl.wait(sig, 1, "sys", "acquire", 1)


@triton_dist.jit
def kd_wait_in_device_fn(sig):
    _wait_one(sig)


@triton_dist.jit
def kd_notify(sig, peer, SCOPE: tl.constexpr):
    dl.notify(sig, peer, 1, "set", SCOPE)


@triton_dist.jit
def kd_symm_at(x, peer, out):
    tl.store(out, tl.load(dl.symm_at(x, peer)))


@triton_dist.jit
def kd_signal_wait_until(sig, value, out):
    tl.store(out, shmem.signal_wait_until(sig, shmem.NVSHMEM_CMP_EQ, value).to(tl.int64))


# ---- a host that sets a signal after the launch (issue 16 point 5): simulator launches are synchronous
@triton.jit
def k_spin_ld(flag, out):
    while ld(flag, "sys", "acquire") != 1:
        pass
    tl.store(out, 1)


@triton.jit
def k_store_flagged(src, words, peer, flag, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    m = offs < n
    dl.store_flagged(dl.symm_at(words, peer) + offs, tl.load(src + offs, mask=m), flag, mask=m)


@triton.jit
def k_load_flagged(words, out, flag, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out + offs, dl.load_flagged(words + offs, flag, mask=m), mask=m)


@triton.jit
def k_prefetch_then_copy(x, out, n, BLOCK: tl.constexpr, HOW: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    m = offs < n
    if HOW == "scalar":
        dl.prefetch_l2(x, n * 4)
    elif HOW == "ranges":  # one 64-byte range per 16 elements, the last ones masked off
        for r in tl.static_range(BLOCK // 16):
            dl.prefetch_l2(x + r * 16, 64, mask=r * 16 < n)
    elif HOW == "bad_bytes":
        dl.prefetch_l2(x, -16)
    elif HOW == "block":
        dl.prefetch_l2(x + offs, 4)
    elif HOW == "bad_mask":
        dl.prefetch_l2(x, 4, mask=offs < 4)
    else:
        dl.prefetch_l2(n, 4)  # not a pointer
    tl.store(out + offs, tl.load(x + offs, mask=m), mask=m)


# ---- tagged signals (issue 15 point 2): dl.wait(tag_bits=k) reports a signal of its epoch with another tag
@triton_dist.jit
def kd_wait_tagged(sig, n, value, out, TAG: tl.constexpr):
    tok = dl.wait(sig, n, "sys", "acquire", value, tag_bits=TAG)
    tl.store(dl.consume_token(out, tok), 1)


@triton.jit
def k_load_flagged_tagged(words, out, flag, n, BLOCK: tl.constexpr, TAG: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out + offs, dl.load_flagged(words + offs, flag, mask=m, tag_bits=TAG), mask=m)
