"""GPU tier for ``libshmem_device``: ``torchrun --nproc_per_node 2 -m pytest -s test/python/gpu/test_gpu_libshmem.py``.

Every function except multicast is executed on the GPUs with checked results (the kernels are the ones the
simulator tests run, from ``test/python/test_libshmem_sim.py``); ``remote_mc_ptr`` is only checked to be null while
NVLink multicast is disabled (``NVSHMEM_DISABLE_NVLS=1``, as on our machine). Every rank runs the same tests in the
same order. Also: a collective kernel launched with several programs and no cooperative launch is refused before
launch, and the same kernel with ``launch_cooperative_grid=True`` runs.
"""
import os
import sys

import pytest
import torch

pytestmark = pytest.mark.gpu

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import triton_dist.utils as U  # noqa: E402
from triton_dist.language.extra import libshmem_device as shmem  # noqa: E402
from test_libshmem_sim import (BARRIER_FUNCTIONS, N, RMA_FUNCTIONS, RMA_PROXY_FUNCTIONS, _pattern, k_broadcast, k_every_program_barrier,  # noqa: E402
                               k_fcollect, k_guarded_barrier, k_info, k_put_signal_then_wait, k_remote_ptr, k_rma,
                               k_signal_op, k_store_barrier_load, k_wait, rma_launch_args)

from _torchrun_shmem import LOCAL_WORLD, NXT, PRV, RANK, WORLD, shmem_barrier, shmem_group  # noqa: E402


group = shmem_group(seed=5)
_barrier = shmem_barrier


def _pat(rank):
    return _pattern(rank).cuda()


@pytest.fixture()
def bufs(group):
    src = U.nvshmem_create_tensor((N, ), torch.float32)
    dest = U.nvshmem_create_tensor((N, ), torch.float32)
    sig = U.nvshmem_create_tensor((4, ), torch.int64)
    stage = U.nvshmem_create_tensor((N, ), torch.float32)
    src.copy_(_pat(RANK))
    _barrier()
    yield src, dest, sig, stage
    _barrier()
    for t in (src, dest, sig, stage):
        U.nvshmem_free_tensor_sync(t)


def test_pe_info(group):
    info = torch.zeros(8, dtype=torch.int32, device="cuda")
    k_info[(1, )](info)
    torch.cuda.synchronize()
    lw = LOCAL_WORLD
    assert info[:7].tolist() == [RANK, WORLD, RANK, WORLD, RANK % lw, lw, RANK % lw]


def test_remote_ptr_and_mc_ptr(bufs):
    src, _, _, _ = bufs
    out = torch.zeros(N, dtype=torch.float32, device="cuda")
    addrs = torch.zeros(2, dtype=torch.int64, device="cuda")
    k_remote_ptr[(1, )](src, out, addrs, NXT, BLOCK=N)
    torch.cuda.synchronize()
    assert addrs[0].item() != 0
    assert torch.equal(out, _pat(NXT))
    if os.environ.get("NVSHMEM_DISABLE_NVLS") == "1":
        assert addrs[1].item() == 0  # multicast off: nvshmemx_mc_ptr returns null


@pytest.mark.parametrize("fn", RMA_FUNCTIONS + RMA_PROXY_FUNCTIONS, ids=lambda f: f.__name__)
def test_rma(bufs, fn):
    """The simulator's launch exactly (``rma_launch_args``): the function object as the constexpr ``FN``."""
    src, dest, _, _ = bufs
    dest.fill_(-1.0)
    _barrier()
    pe, meta = rma_launch_args(fn, NXT, PRV)
    k_rma[(1, )](dest, src, N * 4, pe, **meta)
    _barrier()
    assert torch.equal(dest, _pat(PRV)), (fn.__name__, dest[:4].tolist())


@pytest.mark.parametrize("blocking", [True, False])
@pytest.mark.parametrize("op,value,expect", [(9, 7, 7), (10, 5, 5)])
def test_put_signal(bufs, blocking, op, value, expect):
    src, dest, sig, _ = bufs
    dest.fill_(-1.0)
    sig.zero_()
    _barrier()
    res = torch.zeros(N + 1, dtype=torch.float32, device="cuda")
    k_put_signal_then_wait[(1, )](dest, src, sig, res, N * 4, NXT, value, expect, BLOCKING=blocking, OP=op, BLOCK=N)
    torch.cuda.synchronize()
    assert torch.equal(res[:N], _pat(PRV))
    assert res[N].item() == expect
    _barrier()


@pytest.mark.parametrize("init,op,value,cmp,cmp_val,want", [
    (0, 9, 5, 0, 5, 5),  # SET, CMP_EQ
    (0, 9, 7, 1, 0, 7),  # SET, CMP_NE
    (0, 9, 9, 2, 8, 9),  # SET, CMP_GT
    (4, 10, 6, 5, 10, 10),  # ADD, CMP_GE
    (100, 9, 3, 4, 50, 3),  # SET, CMP_LT
    (100, 9, 50, 3, 50, 50),  # SET, CMP_LE
])
def test_signal_op_wait_until(bufs, init, op, value, cmp, cmp_val, want):
    _, _, sig, _ = bufs
    sig.fill_(init)
    _barrier()
    got = torch.zeros(1, dtype=torch.int64, device="cuda")
    k_signal_op[(1, )](sig, value, NXT, OP=op)
    k_wait[(1, )](sig, got, cmp_val, CMP=cmp)
    torch.cuda.synchronize()
    assert got.item() == want
    _barrier()


@pytest.mark.parametrize("fn", list(BARRIER_FUNCTIONS))
def test_barriers(bufs, fn):
    _, dest, _, stage = bufs
    lw = LOCAL_WORLD
    node = BARRIER_FUNCTIONS[fn] == "node"
    peer = NXT if not node else (RANK // lw) * lw + (RANK % lw + 1) % lw
    src_of_mine = PRV if not node else (RANK // lw) * lw + (RANK % lw - 1) % lw
    dest.fill_(-1.0)
    _barrier()
    res = torch.zeros(N, dtype=torch.float32, device="cuda")
    k_store_barrier_load[(1, )](dest, stage, res, peer, 100.0 + 10000 * RANK, FN=fn, BLOCK=N)
    torch.cuda.synchronize()
    want = torch.arange(N, dtype=torch.float32, device="cuda") + 100 + 10000 * src_of_mine
    assert torch.equal(res, want), (fn, res[:4].tolist())


@pytest.mark.parametrize("team", [0, 2])
def test_broadcast_fcollect(bufs, team):
    src, dest, _, _ = bufs
    size = WORLD if team == 0 else LOCAL_WORLD
    first = 0 if team == 0 else (RANK // LOCAL_WORLD) * LOCAL_WORLD
    for root in sorted({0, size - 1}):
        dest.fill_(-1.0)
        _barrier()
        k_broadcast[(1, )](dest, src, N * 4, root, TEAM=team)
        _barrier()
        assert torch.equal(dest, _pat(first + root)), root
    coll = U.nvshmem_create_tensor((size * N, ), torch.float32)
    coll.fill_(-1.0)
    _barrier()
    k_fcollect[(1, )](coll, src, N * 4, TEAM=team)
    _barrier()
    assert torch.equal(coll, torch.cat([_pat(first + i) for i in range(size)]))
    U.nvshmem_free_tensor_sync(coll)


def test_non_cooperative_collective_launch_refused(group):
    with pytest.raises(RuntimeError, match="launch_cooperative_grid=True"):
        k_every_program_barrier[(4, )]()


def test_cooperative_guarded_collective_runs(group):
    out = torch.zeros(4, dtype=torch.int32, device="cuda")
    _barrier()
    k_guarded_barrier[(4, )](out, launch_cooperative_grid=True)
    torch.cuda.synchronize()
    assert out.tolist() == [1, 1, 1, 1]
    _barrier()


def test_constants_are_nvshmem_values():
    assert (shmem.NVSHMEM_SIGNAL_SET.value, shmem.NVSHMEM_SIGNAL_ADD.value) == (9, 10)
