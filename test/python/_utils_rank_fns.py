"""Functions run on simulator rank processes by test_utils.py (importable by spawned children)."""
import torch
import triton.language as tl

import triton_dist
from triton_dist.language.extra import libshmem_device as shmem


@triton_dist.jit
def put_to_self(buf, src, out):
    me = shmem.my_pe()
    shmem.putmem_block(buf, src, 16, me)
    tl.store(out, me)
    tl.store(out + 1, shmem.n_pes())


def bootstrap_and_exchange():
    """initialize_distributed on sim, symmetric alloc, peer views, barrier, free, finalize; returns observations."""
    import torch.distributed as dist

    import triton_dist.utils as U

    group = U.initialize_distributed(seed=5)
    assert U.initialize_distributed() is group  # idempotent
    rank, world = dist.get_rank(), dist.get_world_size()
    out = {"rank": rank, "world": world, "backend": U.get_shmem_backend(), "init": U.is_shmem_initialized(),
           "group_size": group.size()}
    t = U.nvshmem_create_tensor((16, ), torch.float32)
    t.fill_(rank + 0.5)
    lws = U.get_triton_dist_local_world_size()
    views = U.nvshmem_create_tensors((8, ), torch.int64, rank, lws)
    views[rank % lws].fill_(100 + rank)
    U.nvshmem_barrier_all_on_stream()
    out["peer_values"] = [int(v[0]) for v in views]
    out["own_is_view"] = views[rank % lws].data_ptr() != views[(rank + 1) % lws].data_ptr()
    U.nvshmem_barrier_all_on_stream()
    U.nvshmem_free_tensor_sync(views[rank % lws])
    U.nvshmem_free_tensor_sync(t)
    U.finalize_distributed()
    U.finalize_distributed()
    out["after"] = (U.is_shmem_initialized(), dist.is_initialized())
    return out


def bootstrap_over_subgroups():
    """The reference's pattern: the launcher's world (LOCAL_WORLD_SIZE = WORLD_SIZE = 2), each rank its own process
    group of 1, SHMEM bootstrapped over it by the script. Returns what the rank sees: SHMEM's sizes are the group's,
    and a kernel puts into its own PE's symmetric tensor."""
    import torch.distributed as dist

    import triton_dist.utils as U
    from triton_dist.runtime.state import STATE

    dist.init_process_group("gloo")
    rank = dist.get_rank()
    groups = [dist.new_group([r]) for r in range(dist.get_world_size())]  # every rank creates every group
    U.init_nvshmem_by_torch_process_group(groups[rank])
    backend = STATE.backend
    src = torch.arange(4, dtype=torch.float32) + 10 * rank
    buf = U.nvshmem_create_tensor((4, ), torch.float32)
    out = torch.full((2, ), -1, dtype=torch.int32)
    put_to_self[(1, )](buf, src, out)
    seen = {"pe": backend.my_pe(), "n_pes": backend.n_pes(), "local_world": U.get_triton_dist_local_world_size(),
            "kernel": out.tolist(), "buf": buf.tolist()}
    U.nvshmem_free_tensor_sync(buf)
    U.finalize_distributed()
    dist.destroy_process_group()
    return seen
