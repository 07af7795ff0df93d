"""Functions run on simulator rank processes by test_utils.py (importable by spawned children)."""
import torch


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
