"""GPU tier for the NVSHMEM runtime and triton_dist.jit: run under ``torchrun --nproc_per_node 2 -m pytest`` (or
``scripts/test.sh --gpu``: 2 or 4 ranks, sharing one GPU where there are fewer GPUs than ranks).

Every rank runs the same tests in the same order (collectives line up). Kernels come from test/python/_jit_kernels.py
(the NVSHMEM externs are declared there with ``tl.core.extern_elementwise``). The distributed setup is the pytest
session's (``_torchrun_shmem``); the first test runs before it (``conftest.GPU_RUN_FIRST``)."""
import os
import sys

import pytest
import torch

pytestmark = pytest.mark.gpu

import triton_dist  # noqa: E402, F401  (loads triton_dist.jit, taken from sys.modules below)
import triton_dist.utils as U  # noqa: E402

tdjit = sys.modules["triton_dist.jit"]
import _jit_kernels as K  # noqa: E402
from _torchrun_shmem import (DEVICE, LOCAL_RANK, LOCAL_WORLD, RANK, RANKS_PER_GPU, WORLD,  # noqa: E402
                             shmem_group)


def test_launch_before_init_is_a_clear_error_then_works_after():
    """Before ``initialize_distributed``: a SHMEM kernel launch and a symmetric allocation are refused with a clear
    error. The module's other tests then run on the session's setup."""
    if U.is_shmem_initialized():
        pytest.skip("SHMEM was initialised before this test (it must run first in the pytest process: "
                    "conftest.GPU_RUN_FIRST); run test_gpu_runtime.py alone for this check")
    torch.cuda.set_device(DEVICE)
    out = torch.zeros(1, dtype=torch.int32, device="cuda")
    sym = torch.zeros(WORLD, dtype=torch.int32, device="cuda")
    with pytest.raises(RuntimeError, match=r"initialize_distributed\(\) first"):
        K.shmem_kernel[(1, )](out, sym)
    with pytest.raises(RuntimeError, match=r"initialize_distributed\(\) first"):
        U.nvshmem_create_tensor((4, ), torch.float32)


#: the session's distributed setup (finalised, and checked to be down, at the end of the session:
#: ``_torchrun_shmem.shmem_session_setup``), RNGs seeded with 1
tp_group = shmem_group(1)


def test_init(tp_group):
    """The setup: NVSHMEM up, one PE per rank, this rank on its GPU by the binding rule (``LOCAL_RANK //
    TRITON_DIST_RANKS_PER_GPU``), the ranks that share each GPU recorded, and where ranks share a GPU a gloo-only
    process group (NCCL refuses two ranks on one GPU)."""
    import nvshmem.core as nvc
    import torch.distributed as dist

    from triton_dist.runtime import torch_collectives
    from triton_dist.runtime.state import STATE

    assert U.is_shmem_initialized() and U.get_shmem_backend() == "nvshmem"
    assert tp_group.size() == WORLD and torch.cuda.current_device() == DEVICE == LOCAL_RANK // RANKS_PER_GPU
    assert nvc.my_pe() == RANK and nvc.n_pes() == WORLD
    assert os.environ.get("NVSHMEM_DISABLE_NVLS") == "1"
    assert U.is_nvshmem_multimem_supported() is False
    assert U.get_triton_dist_local_world_size() == LOCAL_WORLD
    # the ranks on this GPU: this node's local ranks with the same LOCAL_RANK // N (every node laid out alike)
    node0 = RANK - LOCAL_RANK
    mine = [node0 + r for r in range(LOCAL_WORLD) if r // RANKS_PER_GPU == DEVICE]
    assert STATE.ranks_per_gpu == min(RANKS_PER_GPU, LOCAL_WORLD), (STATE.ranks_per_gpu, STATE.gpu_ranks)
    assert [ranks for ranks in STATE.gpu_ranks.values() if RANK in ranks] == [mine], STATE.gpu_ranks
    backend = str(dist.get_backend())
    if RANKS_PER_GPU > 1:
        assert backend == "gloo" and not torch_collectives.group_has_nccl(), backend
    else:
        assert "nccl" in backend and torch_collectives.group_has_nccl(), backend


def test_device_queries(tp_group):
    assert U.is_cuda() and not U.is_hip() and U.has_tma() == (torch.cuda.get_device_capability()[0] >= 9)
    assert U.get_max_gpu_clock_rate_in_khz(DEVICE) > 100_000
    assert U.get_current_gpu_clock_rate_in_khz(DEVICE) > 0
    assert U.get_device_max_shared_memory_size(DEVICE) >= 48 * 1024
    assert U.get_numa_node(DEVICE) >= 0
    assert isinstance(U.has_fullmesh_nvlink(), bool) and isinstance(U.supports_p2p_native_atomic(), bool)


def test_reference_helpers_on_gpu(tp_group):
    """Issue 16 point 6 on the device: CUDA_CHECK with the real cuda-python enums, sleep_async really enqueues a
    device-side sleep (the stream is still busy when it returns; the events around it span at least the sleep:
    cycles are computed at the maximum clock), perf_func times with events, generate_data defaults to the GPU."""
    import warnings

    from triton_dist.profiler_utils import perf_func

    driver = pytest.importorskip("cuda.bindings.driver", reason="cuda-bindings is needed for CUDA_CHECK's enums")
    assert U.CUDA_CHECK(driver.cuInit(0)) is None
    assert U.CUDA_CHECK(driver.cuDeviceGetCount()) == torch.cuda.device_count()
    with pytest.raises(RuntimeError, match="Cuda Error: .*CUDA_ERROR_INVALID_DEVICE"):
        U.CUDA_CHECK(driver.cuDeviceGet(10_000))  # driver API: leaves no pending runtime error for torch to see

    torch.cuda.synchronize()
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    U.sleep_async(20)
    stop.record()
    assert not stop.query(), "sleep_async(20) returned after the device finished: it blocked the host"
    stop.synchronize()
    assert start.elapsed_time(stop) >= 19.0

    x = torch.ones(1 << 20, device="cuda")
    out, ms = perf_func(lambda: x * 2, iters=10, warmup_iters=2)
    assert torch.equal(out, x * 2) and ms > 0

    a, none, b = next(U.generate_data([((32, 16), torch.bfloat16, (1.0, 0.0)), None, (8, torch.int8, (3, 0))]))
    assert a.is_cuda and a.shape == (32, 16) and none is None and b.is_cuda and int(b.abs().max()) <= 3

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert U.requires_p2p_native_atomic(lambda v: v + 1)(1) == 2
    assert bool(caught) == (not U.supports_p2p_native_atomic())


def test_create_and_free(tp_group):
    t = U.nvshmem_create_tensor((1024, 3), torch.bfloat16)
    assert t.shape == (1024, 3) and t.dtype == torch.bfloat16 and t.is_cuda
    t.fill_(RANK)
    U.nvshmem_barrier_all_on_stream()
    assert float(t.float().mean()) == RANK
    sig = U.nvshmem_create_tensor((8, ), U.NVSHMEM_SIGNAL_DTYPE)
    U.check_signal_tensor(sig)
    f8 = U.nvshmem_create_tensor((16, ), torch.float8_e4m3fn)
    assert f8.dtype == torch.float8_e4m3fn
    for x in (t, sig, f8):
        U.nvshmem_free_tensor_sync(x)
    with pytest.raises(ValueError, match="not created by nvshmem_create_tensor"):
        U.nvshmem_free_tensor_sync(torch.zeros(4, device="cuda"))


def test_create_tensors_peer_views(tp_group):
    lws = U.get_triton_dist_local_world_size()
    ts = U.nvshmem_create_tensors((4096, ), torch.int32, RANK, lws)
    assert len(ts) == lws
    me = RANK % lws
    ts[me].fill_(RANK + 1)
    torch.cuda.synchronize()
    U.nvshmem_barrier_all_on_stream()
    torch.cuda.synchronize()
    base = RANK - me
    for i, view in enumerate(ts):
        assert int(view[0]) == base + i + 1 and int(view[-1]) == base + i + 1
    # write into the next rank's buffer through its peer view, read it there
    nxt = (me + 1) % lws
    ts[nxt][1] = 1000 + RANK
    torch.cuda.synchronize()
    U.nvshmem_barrier_all_on_stream()
    torch.cuda.synchronize()
    prev = base + (me - 1) % lws
    assert int(ts[me][1]) == 1000 + prev
    U.nvshmem_free_tensor_sync(ts[me])


def test_jit_kernel_calls_nvshmem_and_module_init_once(tp_group):
    n0 = tdjit.module_init_count()
    out = torch.zeros(1, dtype=torch.int32, device="cuda")
    sym = U.nvshmem_create_tensor((WORLD, ), torch.int32)
    sym.zero_()
    torch.cuda.synchronize()
    U.nvshmem_barrier_all_on_stream()
    K.shmem_kernel[(1, )](out, sym)
    torch.cuda.synchronize()
    U.nvshmem_barrier_all_on_stream()
    torch.cuda.synchronize()
    assert int(out[0]) == RANK * 100 + WORLD
    prev = (RANK - 1) % WORLD
    assert int(sym[prev]) == prev + 7
    assert tdjit.module_init_count() == n0 + 1
    K.shmem_kernel[(1, )](out, sym)  # same module: no second init
    torch.cuda.synchronize()
    assert tdjit.module_init_count() == n0 + 1
    x = torch.arange(256, device="cuda", dtype=torch.float32)
    y = torch.empty_like(x)
    K.plain_kernel[(2, )](x, y, 256, BLOCK=128)  # plain triton.jit: untouched
    K.dist_plain_kernel[(2, )](x, y, 256, BLOCK=128)  # links the library (libdevice call) but never reads it
    torch.cuda.synchronize()
    torch.testing.assert_close(y, torch.exp(x))
    assert tdjit.module_init_count() == n0 + 1
    U.nvshmem_barrier_all_on_stream()
    torch.cuda.synchronize()
    U.nvshmem_free_tensor_sync(sym)


def test_bound_launch_matches_normal_launch_and_respecializes(tp_group):
    """``bind_launch``: same results as ``kernel[grid]``, repeats skip the binding, and a misaligned pointer or a
    size that is not a multiple of 16 gets its own compiled kernel (never the aligned one)."""
    launch = K.scale_kernel.bind_launch((4, ), BLOCK=64)
    x = torch.arange(300, dtype=torch.float32, device="cuda")
    for n in (256, 256, 250):
        y, ref = torch.zeros_like(x), torch.zeros_like(x)
        launch(x, y, n)
        K.scale_kernel[(4, )](x, ref, n, BLOCK=64)
        torch.cuda.synchronize()
        assert torch.equal(y, ref) and torch.equal(y[:n], x[:n] * 2 + 1)
    y = torch.zeros_like(x)
    launch(x[1:], y[1:], 256)  # 4-byte aligned pointers
    torch.cuda.synchronize()
    assert torch.equal(y[1:257], x[1:257] * 2 + 1) and y[0] == 0 and y[257:].abs().sum() == 0
    assert len(launch._launchers) == 3
