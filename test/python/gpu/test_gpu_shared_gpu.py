"""GPU tier for ranks that share a GPU (``runtime/shared_gpu.py``; docs/runtime.md, "Develop on one GPU"):
``scripts/test.sh --gpu`` with NPROC=2 or 4 on one GPU, or ``NPROC=2 scripts/gpu_suite.sh 1``.

* the layout: each rank on the binding rule's GPU, a gloo-only group where ranks share one, every rank an MPS client,
  each rank's grid budget (what every "one program per SM" grid reads) at most 1 / N of the GPU;
* a persistent kernel on every SM of every rank that waits on all the other ranks' programs (a cross-rank grid
  barrier, rounds of it): it completes only when every rank's kernel is resident at once;
* the same barrier with blocks that each hold most of an SM's shared memory (one block per SM, like the fused
  AG + GEMM / attention kernels' persistent grids): all ranks' grids together must then fit the SMs at once;
* misconfigured sharing (ranks on one GPU outside MPS) ends in a clear error at initialisation, before any kernel
  is launched (a child job), never in a hang.
At one rank per GPU the last two still run (the barrier over GPUs; the child is skipped with the reason).
"""
import os
import sys
import textwrap
import time

import pytest
import torch
import triton.language as tl

pytestmark = pytest.mark.gpu

import triton_dist  # noqa: E402
import triton_dist.language as dl  # noqa: E402
import triton_dist.utils as U  # noqa: E402
from triton_dist.tools.sm_probe import occupy_most_shared_memory  # noqa: E402

from _torchrun_shmem import DEVICE, RANK, WORLD, run_logged_child, shmem_barrier, shmem_group  # noqa: E402

group = shmem_group(seed=11)


@triton_dist.jit
def k_cross_rank_grid_barrier(counter, arrived, rounds, WORLD: tl.constexpr):
    """``rounds`` times: every program of every rank adds 1 to ``counter[round]`` on every rank (system scope,
    after its earlier writes), then waits until its own rank's ``counter[round]`` holds ``WORLD * programs``. A
    round ends only when every program of every rank has arrived, so the kernel completes only if all of them are
    resident together. ``arrived[pid]`` counts the rounds program ``pid`` passed."""
    pid = tl.program_id(0)
    n = tl.num_programs(0)
    for r in range(0, rounds):
        for peer in tl.static_range(WORLD):
            dl.notify(counter + r, peer, 1, "add", "intra_node")
        tok = dl.wait(counter + r, 1, "sys", "acquire", WORLD * n)
        p = dl.consume_token(arrived, tok)
        tl.store(p + pid, tl.load(p + pid) + 1)


@triton_dist.jit
def k_cross_rank_grid_barrier_full_sm(counter, arrived, rounds, a_ptr, b_ptr, c_ptr, K0, WORLD: tl.constexpr):
    """:func:`k_cross_rank_grid_barrier` in a block that owns most of an SM's shared memory
    (:func:`~triton_dist.tools.sm_probe.occupy_most_shared_memory`, ``K0`` = 0), so at most one block fits an SM."""
    pid = tl.program_id(0)
    n = tl.num_programs(0)
    occupy_most_shared_memory(a_ptr, b_ptr, c_ptr, K0)
    for r in range(0, rounds):
        for peer in tl.static_range(WORLD):
            dl.notify(counter + r, peer, 1, "add", "intra_node")
        tok = dl.wait(counter + r, 1, "sys", "acquire", WORLD * n)
        p = dl.consume_token(arrived, tok)
        tl.store(p + pid, tl.load(p + pid) + 1)


def test_layout_and_sm_share(group):
    import torch.distributed as dist

    from triton_dist.runtime import shared_gpu
    from triton_dist.runtime.device_info import rank_sm_count
    from triton_dist.runtime.state import STATE

    per_gpu = shared_gpu.ranks_per_gpu()
    local_world = int(os.environ.get("LOCAL_WORLD_SIZE", WORLD))
    want = DEVICE  # the binding rule's GPU (_torchrun_shmem)
    assert torch.cuda.current_device() == want
    assert STATE.ranks_per_gpu == min(per_gpu, local_world)
    assert sorted(r for ranks in STATE.gpu_ranks.values() for r in ranks) == list(range(WORLD))
    backend = str(dist.get_backend()).lower()
    assert ("nccl" not in backend) if per_gpu > 1 else ("nccl" in backend)
    sms = rank_sm_count(torch.cuda.current_device())
    phys = shared_gpu.physical_sm_count(torch.cuda.current_device())
    mps = shared_gpu.mps_client_status() if per_gpu > 1 else "one rank per GPU"
    print(f"rank {RANK}: GPU {want}, grids of {sms} SMs of {phys} (ranks per GPU {per_gpu}, MPS: {mps}, "
          f"active-thread percentage {os.environ.get(shared_gpu.MPS_PERCENT_ENV, 'unset')}), process group {backend}")
    if per_gpu > 1:
        assert mps == "client", mps
    if phys is not None:
        assert sms * STATE.ranks_per_gpu <= phys


def test_persistent_kernels_of_every_rank_are_resident_together(group):
    from triton_dist.runtime.device_info import rank_sm_count

    sms = rank_sm_count(torch.cuda.current_device())
    rounds = 50
    counter = U.nvshmem_create_tensor((rounds, ), torch.int64)
    counter.zero_()
    arrived = torch.zeros(sms, dtype=torch.int32, device="cuda")
    shmem_barrier()
    t0 = time.time()
    done = torch.cuda.Event()
    k_cross_rank_grid_barrier[(sms, )](counter, arrived, rounds, WORLD=WORLD, num_warps=4,
                                       launch_cooperative_grid=True)
    done.record()
    while not done.query():  # a hang guard, not a timing: a kernel that cannot complete fails here
        assert time.time() - t0 < 60, "the cross-rank grid barrier did not complete in 60 s: kernels not co-resident"
        time.sleep(0.01)
    assert torch.all(arrived == rounds), arrived
    assert torch.all(counter == WORLD * sms), counter
    shmem_barrier()
    U.nvshmem_free_tensor_sync(counter)


def test_full_sm_persistent_kernels_of_every_rank_are_resident_together(group):
    """One block per SM (the fused kernels' case: 2026-12-06, the TP-MoE AG kernel and sp_ag_attention, both with
    one block per SM, did not complete at 2 ranks on one H200 while kernels of small blocks did): every rank's grid
    of ``rank_sm_count`` such blocks must be resident at once. It failed while each rank had an MPS active-thread
    percentage of 100 / N (every client on the same 66 SMs: triton_dist.tools.sm_probe); it passes with grids
    of 1 / N of one shared pool (runtime/shared_gpu.py). Fails (the hang guard) where they cannot all be resident."""
    from triton_dist.runtime.device_info import get_device_max_shared_memory_size, rank_sm_count

    sms = rank_sm_count(torch.cuda.current_device())
    rounds = 10
    counter = U.nvshmem_create_tensor((rounds, ), torch.int64)
    counter.zero_()
    arrived = torch.zeros(sms, dtype=torch.int32, device="cuda")
    dummy = torch.zeros(128 * 256, dtype=torch.bfloat16, device="cuda")
    out = torch.zeros(128 * 256, dtype=torch.float32, device="cuda")
    shmem_barrier()
    t0 = time.time()
    done = torch.cuda.Event()
    kern = k_cross_rank_grid_barrier_full_sm[(sms, )](counter, arrived, rounds, dummy, dummy, out, 0, WORLD=WORLD,
                                                       num_warps=8, num_stages=4, launch_cooperative_grid=True)
    done.record()
    shared = kern.metadata.shared
    smem = get_device_max_shared_memory_size(torch.cuda.current_device())
    print(f"rank {RANK}: {sms} blocks of {shared} bytes of shared memory each (the SM has {smem})")
    while not done.query():  # a hang guard, not a timing
        assert time.time() - t0 < 60, (f"the cross-rank barrier of one-block-per-SM kernels ({shared} bytes of shared "
                                       f"memory each, {sms} per rank) did not complete in 60 s: not co-resident")
        time.sleep(0.01)
    assert 2 * shared > smem, f"{shared} bytes a block: two would fit an SM, the test does not test what it says"
    assert torch.all(arrived == rounds), arrived
    shmem_barrier()
    U.nvshmem_free_tensor_sync(counter)


_MISCONFIGURED_CHILD = textwrap.dedent("""
    import os, sys
    import triton_dist.utils as U
    try:
        U.initialize_distributed(seed=0)
    except RuntimeError as e:
        print("INIT-ERROR:", e, flush=True)
        sys.exit(7)
    print("INITIALISED", flush=True)
    sys.exit(0)
""")


def test_misconfigured_sm_shares_fail_clearly_before_any_launch(group, tmp_path):
    """Ranks that share the GPU outside MPS: a child job of 2 ranks on this GPU whose ``CUDA_MPS_PIPE_DIRECTORY``
    is an empty folder (no daemon answers there, so their contexts are not MPS clients and would time-slice: a
    kernel waiting on the peer could wait forever). initialize_distributed refuses (naming the GPU, the ranks, why
    each is not an MPS client and the fix) before SHMEM starts or any kernel is launched. The child job is started
    by rank 0; the other ranks wait."""
    from triton_dist.runtime import shared_gpu

    import torch.distributed as dist

    per_gpu = shared_gpu.ranks_per_gpu()
    if per_gpu < 2:
        pytest.skip("one rank per GPU here: the SM-share check applies where ranks share a GPU")
    child = 2
    port = [0]
    if RANK == 0:
        import socket

        with socket.socket() as sock:  # a free port for the child job's store
            sock.bind(("127.0.0.1", 0))
            port[0] = sock.getsockname()[1]
    dist.broadcast_object_list(port, src=0)
    rc, text = None, ""
    try:
        if RANK == 0:
            script = tmp_path / "misconfigured_child.py"
            script.write_text(_MISCONFIGURED_CHILD)
            keep = ("TORCHELASTIC_", "GROUP_", "ROLE_", "RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE",
                    "MASTER_")
            env = {k: v for k, v in os.environ.items() if not k.startswith(keep)}
            no_daemon = tmp_path / "no-mps-daemon"
            no_daemon.mkdir()
            env.update({shared_gpu.RANKS_PER_GPU_ENV: str(child), "PYTHONUNBUFFERED": "1",
                        "CUDA_VISIBLE_DEVICES": str(torch.cuda.current_device()),
                        "CUDA_MPS_PIPE_DIRECTORY": str(no_daemon)})
            for k in (shared_gpu.SM_SHARE_CHECK_ENV, shared_gpu.MPS_PERCENT_ENV):
                env.pop(k, None)
            cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", str(child), "--master_addr",
                   "127.0.0.1", "--master_port", str(port[0]), str(script)]
            t0 = time.time()
            rc, text = run_logged_child(cmd, env, tmp_path / "child.log", 120)
            print(f"child job: rc {rc} after {time.time() - t0:.1f} s\n{text[-3000:]}", flush=True)
    finally:
        dist.barrier()  # every rank meets here, whatever rank 0's child did (a failure must not hang the others)
    if RANK == 0:
        assert rc != "timeout", "the misconfigured job hung instead of failing"
        assert rc != 0 and "INITIALISED" not in text, text[-3000:]
        assert "INIT-ERROR" in text and "cannot all be resident" in text, text[-3000:]
        assert "not an MPS client: no MPS control daemon answers" in text, text[-3000:]
        assert f"--ranks-per-gpu {child}" in text, text[-3000:]
