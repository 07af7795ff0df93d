"""The main job: a distributed all-gather written as user Triton kernels with triton_dist.language, run end to end.

Every rank pushes its shard straight into each peer's symmetric buffer (``dl.symm_at``), raises a signal there
(``dl.notify``), and then waits for all peers' signals (``dl.wait``) before reading the gathered buffer through
``dl.consume_token``. Signals carry the iteration number (epoch), so repeated rounds need no reset. Each rank checks
the gathered data against what every peer must have sent, and the library's all-gather against torch.distributed.

    bash scripts/run_example.sh                                  # 4 simulator ranks on a CPU-only machine
    scripts/launch.sh --nproc_per_node 2 examples/allgather_demo.py   # on GPUs
"""
import os
import sys

import torch
import triton.language as tl

import triton_dist
import triton_dist.language as dl
from triton_dist import utils


@triton_dist.jit
def push_shard(shard_ptr, gathered_ptr, signal_ptr, epoch, N: tl.constexpr, BLOCK: tl.constexpr):
    """Program p sends this rank's shard to peer (rank + p) % world and signals it there."""
    me = dl.rank()
    world = dl.num_ranks()
    peer = (me + tl.program_id(0)) % world
    remote = dl.symm_at(gathered_ptr, peer)
    for start in range(0, N, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        mask = offs < N
        tl.store(remote + me * N + offs, tl.load(shard_ptr + offs, mask=mask), mask=mask)
    # notify: every store above is visible at `peer` before it sees signal_ptr[me] == epoch.
    dl.notify(signal_ptr + me, peer, signal=epoch, sig_op="set", comm_scope="intra_node")


@triton_dist.jit
def checksum_gathered(gathered_ptr, signal_ptr, out_ptr, epoch, N: tl.constexpr, BLOCK: tl.constexpr):
    """Program r waits until rank r's shard has arrived, then sums it (float64-free exact check on integers)."""
    src = tl.program_id(0)
    token = dl.wait(signal_ptr + src, 1, "sys", "acquire", waitValue=epoch)
    base = dl.consume_token(gathered_ptr + src * N, token)
    acc = tl.zeros([BLOCK], dtype=tl.int64)
    for start in range(0, N, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        acc += tl.load(base + offs, mask=offs < N, other=0).to(tl.int64)
    tl.store(out_ptr + src, tl.sum(acc))


def main():
    group = utils.initialize_distributed(seed=0)
    rank, world = group.rank(), group.size()
    device = "cuda" if utils.is_cuda() else "cpu"
    n = int(os.environ.get("DEMO_ELEMS", 4096 if device == "cuda" else 256))
    gathered = utils.nvshmem_create_tensor((world * n, ), torch.int32)
    signals = utils.nvshmem_create_tensor((world, ), utils.NVSHMEM_SIGNAL_DTYPE)
    sums = torch.empty(world, dtype=torch.int64, device=device)
    rounds = 3
    for epoch in range(1, rounds + 1):
        shard = torch.arange(n, dtype=torch.int32, device=device) * (rank + 1) + epoch
        utils.nvshmem_barrier_all_on_stream()  # peers are done reading the previous round
        push_shard[(world, )](shard, gathered, signals, epoch, N=n, BLOCK=128)
        checksum_gathered[(world, )](gathered, signals, sums, epoch, N=n, BLOCK=128)
        expected = torch.tensor([sum((i * (r + 1) + epoch) for i in range(n)) for r in range(world)],
                                dtype=torch.int64)
        if not torch.equal(sums.cpu(), expected):
            raise SystemExit(f"rank {rank}: round {epoch}: checksums {sums.cpu().tolist()} != {expected.tolist()}")
        full = gathered.cpu().view(world, n)
        want = torch.stack([torch.arange(n, dtype=torch.int32) * (r + 1) + epoch for r in range(world)])
        if not torch.equal(full, want):
            raise SystemExit(f"rank {rank}: round {epoch}: gathered data differs from what peers sent")
    backend = "simulator (CPU rank processes)" if device == "cpu" else f"{torch.cuda.get_device_name()} x{world}"
    ranks = f"{world} rank" + ("s" if world != 1 else "")
    utils.dist_print(f"allgather_demo: {ranks} on {backend}: {rounds} rounds of a push all-gather "
                     f"({n} int32 per rank) via dl.symm_at/notify/wait/consume_token verified on every rank",
                     allowed_ranks=[0], need_sync=True)
    utils.nvshmem_free_tensor_sync(gathered)
    utils.nvshmem_free_tensor_sync(signals)
    utils.finalize_distributed()
    return 0


if __name__ == "__main__":
    sys.exit(main())
