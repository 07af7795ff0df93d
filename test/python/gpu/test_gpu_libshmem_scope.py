"""GPU tier for who executes a ``libshmem_device`` call, and for the functions beyond the first 31:
``torchrun --nproc_per_node 2 -m pytest -s test/python/gpu/test_gpu_libshmem_scope.py``.

A call is executed by every thread that reaches it with its own arguments (docs/libshmem_device.md, "Who executes
a call"), as in Triton-distributed, whose getmem / putmem scope test copies one byte per thread with the thread
variant (``if tid < n: getmem(ptr + tid, ptr + tid, 1, pe)``). Before, thread variants ran in thread 0 only, so
that test got one byte per chunk ("tensors not equal"), and a thread variant guarded by ``if tid(0) == 0`` met a
CTA barrier that the other threads skipped. The kernels of the new functions are the simulator's
(``test/python/test_libshmem_sim.py``).
"""
import os
import sys

import pytest
import torch
import triton.language as tl

pytestmark = pytest.mark.gpu

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import triton_dist  # noqa: E402
import triton_dist.utils as U  # noqa: E402
from triton_dist.language._libshmem import SCALAR_TYPES  # noqa: E402
from triton_dist.language.extra import libshmem_device as shmem  # noqa: E402
from triton_dist.language.extra.language_extra import __syncthreads, tid  # noqa: E402
from test_libshmem_sim import (COLLECTIVE_FUNCTIONS, N, PUT_SIGNAL_FUNCTIONS, PUT_SIGNAL_PROXY_FUNCTIONS,  # noqa: E402
                               SCALAR_CASES, _pattern, _torch_dtype, k_collective_fn, k_put_signal_fn,
                               k_reference_sync, k_scalar_get, k_scalar_put, k_translate)

from _torchrun_shmem import LOCAL_WORLD, NXT, PRV, RANK, WORLD, shmem_barrier, shmem_group  # noqa: E402


group = shmem_group(seed=7)
_barrier = shmem_barrier


@triton_dist.jit
def k_per_thread_get(buf, chunk, NBI: tl.constexpr):
    """Program p gets chunk p from PE p (p != me), one byte per thread: thread t < chunk gets byte t."""
    me = shmem.my_pe()
    p = tl.program_id(0)
    t = tid(0)
    if p != me:
        if t < chunk:
            if NBI:
                shmem.getmem_nbi(buf + p * chunk + t, buf + p * chunk + t, 1, p)
                shmem.quiet()
            else:
                shmem.getmem(buf + p * chunk + t, buf + p * chunk + t, 1, p)


@triton_dist.jit
def k_per_thread_put(buf, chunk, NBI: tl.constexpr):
    """Program p puts our chunk to PE p (p != me), one byte per thread."""
    me = shmem.my_pe()
    p = tl.program_id(0)
    t = tid(0)
    if p != me:
        if t < chunk:
            if NBI:
                shmem.putmem_nbi(buf + me * chunk + t, buf + me * chunk + t, 1, p)
                shmem.quiet()
            else:
                shmem.putmem(buf + me * chunk + t, buf + me * chunk + t, 1, p)


@triton_dist.jit
def k_guarded_thread_barrier(out):
    """The one-call-per-program pattern of a thread-variant collective: only thread 0 calls it, every thread
    then meets the user's __syncthreads()."""
    if tid(0) == 0:
        shmem.barrier_all()
        shmem.sync_all()
    __syncthreads()
    tl.store(out + tid(0) // 128, 1)


def _expected(chunk):
    return torch.arange(1, WORLD + 1, dtype=torch.int8, device="cuda").repeat_interleave(chunk)


@pytest.mark.parametrize("nbi", [False, True])
@pytest.mark.parametrize("kernel", [k_per_thread_get, k_per_thread_put], ids=["get", "put"])
def test_per_thread_rma(group, kernel, nbi):
    chunk = 31  # fewer bytes than threads: threads 31.. skip the call
    buf = U.nvshmem_create_tensor((WORLD * chunk, ), torch.int8)
    buf.fill_(RANK + 1)
    _barrier()
    kernel[(WORLD, )](buf, chunk, NBI=nbi, num_warps=4)
    _barrier()
    assert torch.equal(buf, _expected(chunk)), buf.reshape(WORLD, -1).tolist()
    _barrier()
    U.nvshmem_free_tensor_sync(buf)


def test_guarded_thread_collective_does_not_deadlock(group):
    out = torch.zeros(1, dtype=torch.int32, device="cuda")
    _barrier()
    k_guarded_thread_barrier[(1, )](out, num_warps=4)
    torch.cuda.synchronize()
    assert out.item() == 1
    _barrier()


@pytest.mark.parametrize("case", SCALAR_CASES, ids=lambda c: c[0])
def test_scalar_put_get(group, case):
    """Checked on the CPU (``.cpu().view(dtype)``): CUDA tensors of uint32 have few kernels."""
    t, value, want = case
    ty = _torch_dtype(SCALAR_TYPES[t])
    slot = U.nvshmem_create_tensor((1, ), torch.int64)
    slot.zero_()
    _barrier()
    k_scalar_put[(1, )](slot.view(ty), value, NXT, P=getattr(shmem, f"{t}_p"))
    _barrier()
    assert slot.cpu().view(ty)[0].item() == want
    out = torch.zeros(1, dtype=torch.int64, device="cuda")
    k_scalar_get[(1, )](slot.view(ty), out.view(ty), NXT, G=getattr(shmem, f"{t}_g"))
    torch.cuda.synchronize()
    assert out.cpu().view(ty)[0].item() == want
    _barrier()
    U.nvshmem_free_tensor_sync(slot)


@pytest.mark.parametrize("fn", PUT_SIGNAL_FUNCTIONS + PUT_SIGNAL_PROXY_FUNCTIONS, ids=lambda f: f.__name__)
def test_put_signal_every_scope(group, fn):
    src = U.nvshmem_create_tensor((N, ), torch.float32)
    dest = U.nvshmem_create_tensor((N, ), torch.float32)
    sig = U.nvshmem_create_tensor((1, ), torch.int64)
    src.copy_(_pattern(RANK).cuda())
    dest.fill_(-1.0)
    sig.zero_()
    _barrier()
    res = torch.zeros(N + 1, dtype=torch.float32, device="cuda")
    name = fn.__name__
    k_put_signal_fn[(1, )](dest, src, sig, res, N * 4, NXT, 3, FN=fn,
                           THREAD=name in ("putmem_signal", "putmem_signal_nbi", "ulong_put_signal",
                                           "putmem_signal_rma", "putmem_signal_rma_nbi"),
                           UNIT=8 if name == "ulong_put_signal" else 1, NBI="_nbi" in name, BLOCK=N)
    torch.cuda.synchronize()
    assert torch.equal(res[:N], _pattern(PRV).cuda())
    assert res[N].item() == 3.0
    _barrier()
    for t in (src, dest, sig):
        U.nvshmem_free_tensor_sync(t)


def test_reference_sync_names(group):
    """quiet_pe, uint64_wait_until_equals, barrier_all_vec and set_rocshmem_ctx: the simulator's kernel
    (``k_reference_sync``), data and signal checked."""
    buf = U.nvshmem_create_tensor((2 * N, ), torch.float32)
    stage = U.nvshmem_create_tensor((2 * N, ), torch.float32)
    sig = U.nvshmem_create_tensor((1, ), torch.int64)
    buf.fill_(-1.0)
    sig.zero_()
    _barrier()
    out = torch.zeros(2 * N + 1, dtype=torch.float32, device="cuda")
    k_reference_sync[(1, )](buf, stage, sig, out, 0, NXT, 100 * (RANK + 1), 100 * (PRV + 1), BLOCK=N)
    torch.cuda.synchronize()
    offs = torch.arange(N, dtype=torch.float32, device="cuda")
    assert torch.equal(out[:N], 100.0 * (PRV + 1) + offs)
    assert out[2 * N].item() == float(100 * (PRV + 1))
    assert torch.equal(out[N:2 * N], -100.0 * (PRV + 1) - offs)
    _barrier()
    for t in (buf, stage, sig):
        U.nvshmem_free_tensor_sync(t)


def test_team_translate_pe(group):
    out = torch.zeros(3, dtype=torch.int32, device="cuda")
    k_translate[(1, )](out, RANK % LOCAL_WORLD, WORLD)
    torch.cuda.synchronize()
    first = (RANK // LOCAL_WORLD) * LOCAL_WORLD
    # out[2] translates PE number WORLD, which is not a PE of the source team: outside NVSHMEM's contract (2x H200,
    # 2026-11-30: NVSHMEM returned 0 on rank 0 and 1 on rank 1; the simulator gives -1), so it is not checked here
    assert out.tolist()[:2] == [first + RANK % LOCAL_WORLD, RANK % LOCAL_WORLD if RANK < LOCAL_WORLD else -1]


@pytest.mark.parametrize("fn,scope,typed", COLLECTIVE_FUNCTIONS, ids=lambda v: getattr(v, "__name__", str(v)))
def test_collectives_every_scope(group, fn, scope, typed):
    src = U.nvshmem_create_tensor((N, ), torch.float32)
    src.copy_(_pattern(RANK).cuda())
    unit = 4 if typed else 1
    broadcast = fn.__name__.startswith("broadcast")
    dest = U.nvshmem_create_tensor((N if broadcast else WORLD * N, ), torch.float32)
    dest.fill_(-1.0)
    _barrier()
    k_collective_fn[(1, )](dest, src, N * 4 // unit, WORLD - 1, TEAM=shmem.NVSHMEM_TEAM_WORLD, FN=fn, SCOPE=scope,
                           BROADCAST=broadcast)
    _barrier()
    want = _pattern(WORLD - 1) if broadcast else torch.cat([_pattern(i) for i in range(WORLD)])
    assert torch.equal(dest, want.cuda())
    for t in (src, dest):
        U.nvshmem_free_tensor_sync(t)
