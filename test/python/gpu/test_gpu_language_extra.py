"""language_extra / simt_exec_region on a real NVIDIA GPU: per-thread results checked element by element.

Each rank of the torchrun launch runs these on its GPU (``DEVICE``, the binding rule: ranks may share a GPU; they
need no peer)."""

import pytest
import torch
import triton
import triton.language as tl

from triton_dist.language.extra.language_extra import (__syncthreads, atomic_add, atomic_cas, ld, ld_vector,
                                                       num_threads, num_warps, pack, st, st_vector,
                                                       threads_per_warp, tid, unpack)
from triton_dist.language.simt import make_vector, simt_exec_region

from _torchrun_shmem import DEVICE

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def dev():
    d = torch.device("cuda", DEVICE)
    torch.cuda.set_device(d)
    return d


@triton.jit
def _branchy(out, consts):
    with simt_exec_region() as (t, n):
        if t % 2 == 0:
            st(out + t, t)
        else:
            st(out + t, -t)
        __syncthreads()
        if t == 0:
            st(consts, n)
            st(consts + 1, threads_per_warp())
            st(consts + 2, num_warps())
            st(consts + 3, num_threads())
        st(out + n + t, tid(0) * 10)


@pytest.mark.parametrize("warps", [1, 4, 8])
def test_tid_per_thread_and_branches(dev, warps):
    n = 32 * warps
    out = torch.full((2 * n, ), 12345, dtype=torch.int32, device=dev)
    consts = torch.zeros(4, dtype=torch.int32, device=dev)
    _branchy[(1, )](out, consts, num_warps=warps)
    ids = torch.arange(n, dtype=torch.int32)
    expect = torch.where(ids % 2 == 0, ids, -ids)
    assert torch.equal(out[:n].cpu(), expect)
    assert torch.equal(out[n:].cpu(), ids * 10)
    assert consts.tolist() == [n, 32, warps, n]


@triton.jit
def _message(data, flag, out, N: tl.constexpr):
    pid = tl.program_id(0)
    with simt_exec_region() as (t, n):
        if pid == 0:
            for i in range(t, N, n):
                st(data + i, i * 3 + 1)
            __syncthreads()
            if t == 0:
                st(flag, 1, "gpu", "release")
        else:
            if t == 0:
                spins = 0  # bounded: a lost message fails the test instead of hanging the GPU
                while (ld(flag, "gpu", "acquire") != 1) & (spins < 100_000_000):
                    spins += 1
            __syncthreads()
            for i in range(t, N, n):
                st(out + i, ld(data + i))


def test_acquire_release_message_passing(dev):
    N = 1 << 14
    for _ in range(5):
        data = torch.zeros(N, dtype=torch.int32, device=dev)
        flag = torch.zeros(1, dtype=torch.int32, device=dev)
        out = torch.zeros(N, dtype=torch.int32, device=dev)
        _message[(2, )](data, flag, out, N, num_warps=4)
        torch.cuda.synchronize()
        assert torch.equal(out.cpu(), torch.arange(N, dtype=torch.int32) * 3 + 1)


@triton.jit
def _contend(counter, olds, fcount):
    pid = tl.program_id(0)
    with simt_exec_region() as (t, n):
        old = atomic_add(counter, 1, "gpu", "relaxed")
        st(olds + pid * n + t, old)
        atomic_add(fcount, 0.5, "gpu", "acq_rel")


def test_atomic_add_contention(dev):
    programs, warps = 64, 4
    total = programs * warps * 32
    counter = torch.zeros(1, dtype=torch.int32, device=dev)
    olds = torch.full((total, ), -1, dtype=torch.int32, device=dev)
    fcount = torch.zeros(1, dtype=torch.float32, device=dev)
    _contend[(programs, )](counter, olds, fcount, num_warps=warps)
    assert counter.item() == total
    assert torch.equal(olds.sort().values.cpu(), torch.arange(total, dtype=torch.int32))
    assert fcount.item() == total * 0.5


@triton.jit
def _locked_increment(lock, value, ITERS: tl.constexpr):
    with simt_exec_region() as (t, n):
        if t == 0:
            for _ in range(ITERS):
                while atomic_cas(lock, 0, 1, "gpu", "acquire") != 0:
                    pass
                st(value, ld(value, "gpu", "relaxed") + 1, "gpu", "relaxed")
                atomic_cas(lock, 1, 0, "gpu", "release")


def test_atomic_cas_lock(dev):
    programs, iters = 64, 50
    lock = torch.zeros(1, dtype=torch.int32, device=dev)
    value = torch.zeros(1, dtype=torch.int64, device=dev)
    _locked_increment[(programs, )](lock, value, iters, num_warps=1)
    assert lock.item() == 0
    assert value.item() == programs * iters


@triton.jit
def _vec_roundtrip(src, dst, isrc, idst, SEM_LD: tl.constexpr, SEM_ST: tl.constexpr):
    pid = tl.program_id(0)
    with simt_exec_region() as (t, n):
        g = pid * n + t
        v = ld_vector(src + g * 8, 8, "gpu", SEM_LD)  # 8 x fp16: one 128-bit load
        st_vector(dst + g * 8, v * 2.0 + 1.0, "gpu", SEM_ST)
        w = ld_vector(isrc + g * 3, 3, "sys", SEM_LD)  # 3 x int32: scalar loads
        st_vector(idst + g * 3, w - 1, "sys", SEM_ST)


@pytest.mark.parametrize("sem_ld,sem_st", [("relaxed", "relaxed"), ("acquire", "release"), ("volatile", "volatile")])
def test_ld_st_vector_roundtrip(dev, sem_ld, sem_st):
    programs, warps = 8, 4
    threads = programs * warps * 32
    src = torch.randn(threads * 8, device=dev).to(torch.float16)
    dst = torch.zeros_like(src)
    isrc = torch.randint(-1000, 1000, (threads * 3, ), dtype=torch.int32, device=dev)
    idst = torch.zeros_like(isrc)
    _vec_roundtrip[(programs, )](src, dst, isrc, idst, sem_ld, sem_st, num_warps=warps)
    assert torch.equal(dst, src * 2 + 1)
    assert torch.equal(idst, isrc - 1)


@triton.jit
def _pack_unpack(src, packed, halves, quarters):
    with simt_exec_region() as (t, n):
        v = ld_vector(src + t * 2, 2)  # 2 x int32
        p = pack(make_vector([v[0], v[1]]), tl.int64)
        st(packed + t, p)
        h = unpack(p, tl.int32)
        st_vector(halves + t * 2, h)
        q = unpack(p, tl.int16)
        st_vector(quarters + t * 4, q)


def test_pack_unpack(dev):
    n = 128
    src = torch.randint(-(1 << 31), (1 << 31) - 1, (n * 2, ), dtype=torch.int32, device=dev)
    packed = torch.zeros(n, dtype=torch.int64, device=dev)
    halves = torch.zeros_like(src)
    quarters = torch.zeros(n * 4, dtype=torch.int16, device=dev)
    _pack_unpack[(1, )](src, packed, halves, quarters, num_warps=4)
    assert torch.equal(packed, src.view(torch.int64))  # little-endian: element 0 in the low half
    assert torch.equal(halves, src)
    assert torch.equal(quarters, src.view(torch.int16))
