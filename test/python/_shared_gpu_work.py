"""Rank-side work of test_shared_gpu.py (module-level so the simulator's rank pool can import it)."""
import torch
import torch.distributed as dist


def host_collectives_match_gloo():
    """The host paths of runtime.torch_collectives (what the ops' torch / NCCL methods run where ranks share a GPU)
    against gloo's own CPU collectives, on every dtype the ops take: gathers are byte-exact (fp8 included),
    floating sums are the fp32 sum rounded once."""
    from triton_dist.runtime import torch_collectives as tc

    rank, world = dist.get_rank(), dist.get_world_size()
    assert not tc.group_has_nccl()
    fails = []
    g = torch.Generator().manual_seed(100 + rank)
    for dtype in (torch.float32, torch.bfloat16, torch.float16, torch.int32, torch.float8_e4m3fn):
        n = 48
        x = (torch.randn(n, generator=g) * 4).to(dtype) if dtype.is_floating_point else \
            torch.randint(-1000, 1000, (n, ), generator=g, dtype=dtype)
        out = torch.full((world * n, ), 7, dtype=torch.uint8).view(dtype) if dtype.itemsize == 1 else \
            torch.full((world * n, ), 7, dtype=dtype)
        tc.host_all_gather_into_tensor(out, x)
        parts = [torch.empty(n * x.element_size(), dtype=torch.uint8) for _ in range(world)]
        dist.all_gather(parts, x.view(torch.uint8))
        if not torch.equal(out.view(torch.uint8), torch.cat(parts)):
            fails.append(("all_gather", str(dtype)))
        if dtype.itemsize == 1:
            continue
        want = x.to(torch.float64 if dtype.is_floating_point else torch.int64)
        dist.all_reduce(want)
        t = x.clone()
        tc.host_all_reduce(t)
        if not torch.equal(t, want.to(torch.float32 if dtype.is_floating_point else dtype).to(dtype)):
            fails.append(("all_reduce", str(dtype)))
        big = torch.cat([x] * world)
        rs = torch.empty(n, dtype=dtype)
        tc.host_reduce_scatter_tensor(rs, big)
        wall = big.to(torch.float64 if dtype.is_floating_point else torch.int64)
        dist.all_reduce(wall)
        exp = wall[rank * n:(rank + 1) * n].to(torch.float32 if dtype.is_floating_point else dtype).to(dtype)
        if not torch.equal(rs, exp):
            fails.append(("reduce_scatter", str(dtype)))
    try:
        tc.host_reduce_scatter_tensor(torch.empty(3), torch.empty(5))
        fails.append(("reduce_scatter accepted a bad size", ""))
    except ValueError as e:
        if "world" not in str(e):
            fails.append(("reduce_scatter message", str(e)))
    return fails
