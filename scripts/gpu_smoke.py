"""Quick GPU check of the triton_dist runtime: ``torchrun --nproc_per_node 2 scripts/gpu_smoke.py``.

Prints versions, initialises NVSHMEM, cross-reads peer views, launches a triton_dist.jit kernel that calls
nvshmem_my_pe / nvshmem_n_pes / nvshmem_ptr, checks module init counts, finalizes. Exit code 0 means all passed."""
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "test", "python"))

import torch  # noqa: E402
import triton  # noqa: E402

import triton_dist.utils as U  # noqa: E402
from triton_dist.runtime import bitcode  # noqa: E402

tdjit = sys.modules["triton_dist.jit"]


def main():
    rank = int(os.environ.get("RANK", 0))
    t0 = time.time()
    group = U.initialize_distributed()
    t_init = time.time() - t0
    if rank == 0:
        import nvshmem

        path = bitcode.find_nvshmem_bitcode()
        print(f"torch {torch.__version__} triton {triton.__version__} nvshmem4py {nvshmem.__version__}")
        print(f"bitcode {path} producer {bitcode.llvm_producer(path)} triton LLVM {bitcode.triton_llvm_major()}")
        print(f"init {t_init:.2f}s world {group.size()} NVSHMEM_DISABLE_NVLS={os.environ.get('NVSHMEM_DISABLE_NVLS')}")
    import _jit_kernels as K

    world = group.size()
    lws = U.get_triton_dist_local_world_size()
    ts = U.nvshmem_create_tensors((1024, ), torch.int32, rank, lws)
    ts[rank % lws].fill_(rank + 1)
    torch.cuda.synchronize()
    U.nvshmem_barrier_all_on_stream()
    torch.cuda.synchronize()
    seen = [int(v[0]) for v in ts]
    assert seen == [rank - rank % lws + i + 1 for i in range(lws)], seen
    out = torch.zeros(1, dtype=torch.int32, device="cuda")
    sym = U.nvshmem_create_tensor((world, ), torch.int32)
    sym.zero_()
    torch.cuda.synchronize()
    U.nvshmem_barrier_all_on_stream()
    K.shmem_kernel[(1, )](out, sym)
    K.shmem_kernel[(1, )](out, sym)
    torch.cuda.synchronize()
    U.nvshmem_barrier_all_on_stream()
    torch.cuda.synchronize()
    assert int(out[0]) == rank * 100 + world, int(out[0])
    assert int(sym[(rank - 1) % world]) == (rank - 1) % world + 7, sym.tolist()
    assert tdjit.module_init_count() == 1, tdjit.module_init_count()
    U.nvshmem_free_tensor_sync(ts[rank % lws])
    U.nvshmem_free_tensor_sync(sym)
    U.finalize_distributed()
    U.finalize_distributed()  # idempotent
    print(f"rank {rank}: OK peer views {seen} kernel out {int(out[0])} module inits 1", flush=True)


if __name__ == "__main__":
    main()
