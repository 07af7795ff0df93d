"""GPU tier: the collective kernels and ops on real GPUs (run under torchrun, every rank runs the same tests; any
world size >= 2, ranks may share a GPU).

    torchrun --nproc_per_node 2 -m pytest -q test/python/gpu/test_gpu_collectives.py
    torchrun --nproc_per_node 2 test/python/gpu/test_gpu_collectives.py --calls 10000   # stress only

Every result is compared with torch.distributed's on the same inputs, through ``runtime.torch_collectives``: NCCL,
or -- where ranks share a GPU (a gloo-only process group) -- gloo on host copies, the sums in fp32 rounded once
(exact for the small integers ``_check`` sums).
"""
from __future__ import annotations

import argparse
import os
import random
import sys
import time

import pytest
import torch

pytestmark = pytest.mark.gpu
os.environ.setdefault("NVSHMEM_SYMMETRIC_SIZE", "4G")  # test_push_pipe's 16M-element contexts


def _init():
    import torch.distributed as dist

    import triton_dist.utils as tdu

    tdu.initialize_distributed()
    return dist.get_rank(), dist.get_world_size()


def _ints(n, dtype, seed):
    g = torch.Generator(device="cuda").manual_seed(seed)
    return torch.randint(-8, 9, (n, ), device="cuda", generator=g).to(dtype)


def _check(op, ctx, n, method, seed, rank, world):
    """Run one call and compare with torch.distributed's (``runtime.torch_collectives``: NCCL, or gloo on host
    copies where ranks share a GPU; fp8 gathered by bytes); returns an error string or None."""
    from triton_dist import ops
    from triton_dist.runtime import torch_collectives as tc

    dtype = ctx.dtype
    if op == "ag":
        x = _ints(n, torch.float32, seed * 7 + rank).to(dtype)
        out = ops.all_gather(x, ctx, method=method)
        ref = torch.empty(n * world, dtype=dtype, device="cuda")
        tc.all_gather_into_tensor(ref, x)
        ok = torch.equal(out.view(torch.uint8), ref.view(torch.uint8))
    elif op == "rs":
        x = _ints(n * world, dtype, seed * 7 + rank)
        out = ops.reduce_scatter(x, ctx, method=method)
        ref = torch.empty(n, dtype=dtype, device="cuda")
        tc.reduce_scatter_tensor(ref, x)
        ok = torch.equal(out, ref)
    else:
        x = _ints(n, dtype, seed * 7 + rank)
        out = ops.all_reduce(x, ctx, method=method)
        ref = tc.all_reduce(x.clone())
        ok = torch.equal(out, ref)
    return None if ok else f"{op} {method} n={n} {dtype} seed={seed}"


def test_every_method_and_dtype():
    """Every method of every op at every size and dtype, eagerly, ``nccl`` included (NCCL, or gloo on host copies
    where ranks share a GPU: the op's plumbing -- views, output, in place -- is what it checks there)."""
    from triton_dist import ops

    rank, world = _init()
    fails = []
    sizes = [1, 8, 1000, 4096, 65536 + 24, 1 << 20]
    for dtype in (torch.bfloat16, torch.float16, torch.float32):
        # ll at every size (its default capacity is 1 MiB per message)
        ag = ops.create_allgather_ctx(max(sizes), dtype, ll_max_numel=max(sizes))
        rs = ops.create_reduce_scatter_ctx(max(sizes) * world, dtype, ll_max_numel=max(sizes))
        ar = ops.create_allreduce_ctx(max(sizes) * world, dtype, ll_max_numel=max(sizes) * world,
                                      methods=("one_shot", "two_shot", "two_shot_pipe", "ll"))
        for rep in range(2):
            for n in sizes:
                for m in ("push", "pull", "push_pipe", "ll", "ce", "auto", "nccl"):
                    fails.append(_check("ag", ag, n, m, rep + n, rank, world))
                for m in ("direct", "direct_push", "push_pipe", "ll", "ring", "auto", "nccl"):
                    fails.append(_check("rs", rs, n, m, rep + n, rank, world))
                for m in ("one_shot", "two_shot", "two_shot_pipe", "ll", "auto", "nccl"):
                    fails.append(_check("ar", ar, n * world - 3 if n > 8 else n, m, rep + n, rank, world))
        for c in (ag, rs, ar):
            c.close()
    f8 = ops.create_allgather_ctx(4096, torch.float8_e4m3fn)
    for m in ("push", "pull", "push_pipe", "ll", "ce", "nccl"):
        fails.append(_check("ag", f8, 4096, m, 3, rank, world))
    fails.append(_check("ag", f8, 4093, "ll", 4, rank, world))  # a partial last word
    f8.close()
    fails = [f for f in fails if f]
    assert not fails, fails[:10]


def _randn(n, dtype, seed):
    g = torch.Generator(device="cuda").manual_seed(seed)
    return torch.randn(n, device="cuda", generator=g).to(dtype)


def test_push_pipe():
    """The pipelined methods against the unpipelined ones: all-gather push_pipe bit-exact vs push (and NCCL),
    reduce-scatter push_pipe bit-identical to direct_push and all-reduce two_shot_pipe to two_shot on random floats
    (same fp32 summation order), both equal to NCCL on small integers. Small blocks (1 KiB) and one-block segments make 1 segment, many segments, ragged last
    segments and odd counts happen at small sizes; a context with the default knobs covers the default segmenting
    at 16M elements per rank (several segments). Calls repeat and alternate methods on one context."""
    from triton_dist import ops

    rank, world = _init()
    fails = []
    small = dict(block_bytes=1024, pipe_seg_blocks=1, pipe_segments=8)
    cases = [(small, [1, 8, 1000, 4096 + 3, 65536 + 24, 1 << 20, 3 * (1 << 20) + 5]), ({}, [1 << 20, 1 << 24])]
    for dtype in (torch.bfloat16, torch.float32):
        for kw, sizes in cases:
            ag = ops.create_allgather_ctx(max(sizes), dtype, methods=("push", "push_pipe"), **kw)
            rs = ops.create_reduce_scatter_ctx(max(sizes) * world, dtype, methods=("direct_push", "push_pipe"), **kw)
            ar = ops.create_allreduce_ctx(max(sizes) * world, dtype, methods=("two_shot", "two_shot_pipe"), **kw)
            for rep in range(2):
                for n in sizes:
                    fails.append(_check("ag", ag, n, "push_pipe", rep + n, rank, world))
                    x = _randn(n, dtype, rep * 31 + n + rank)
                    a = ops.all_gather(x, ag, method="push_pipe")
                    b = ops.all_gather(x, ag, method="push")
                    if not torch.equal(a, b):
                        fails.append(f"ag push_pipe != push n={n} {dtype} {kw}")
                    fails.append(_check("rs", rs, n, "push_pipe", rep + n, rank, world))
                    xr = _randn(n * world, dtype, rep * 17 + n + rank)
                    p = ops.reduce_scatter(xr, rs, method="push_pipe")
                    d = ops.reduce_scatter(xr, rs, method="direct_push")
                    p2 = ops.reduce_scatter(xr, rs, method="push_pipe")
                    if not (torch.equal(p, d) and torch.equal(p2, d)):
                        fails.append(f"rs push_pipe != direct_push n={n} {dtype} {kw}: max diff "
                                     f"{(p.float() - d.float()).abs().max().item()}")
                    na = max(1, n * world - 3)
                    fails.append(_check("ar", ar, na, "two_shot_pipe", rep + n, rank, world))
                    xa = _randn(na, dtype, rep * 13 + n + rank)
                    t = ops.all_reduce(xa, ar, method="two_shot")
                    u = ops.all_reduce(xa, ar, method="two_shot_pipe")
                    ops.all_reduce(xa, ar, out=xa, method="two_shot_pipe")  # in place
                    if not (torch.equal(t, u) and torch.equal(xa, t)):
                        fails.append(f"ar two_shot_pipe != two_shot n={na} {dtype} {kw}")
            ag.close()
            rs.close()
            ar.close()
    fails = [f for f in fails if f]
    assert not fails, fails[:10]


def test_p2p_ring():
    from triton_dist import ops

    rank, world = _init()
    ctx = ops.create_p2p_ctx(1 << 16, torch.bfloat16)
    nxt, prv = (rank + 1) % world, (rank - 1) % world
    for rep, n in enumerate((1 << 16, 77, 4096, 1 << 16)):
        ops.send(_ints(n, torch.bfloat16, rep * 10 + rank), nxt, ctx)
        y = ops.recv((n, ), prv, ctx)
        assert torch.equal(y, _ints(n, torch.bfloat16, rep * 10 + prv)), (rep, n)
    ctx.close()


def test_cuda_graph_replay():
    """Calls captured once and replayed many times: epochs advance in device memory, results stay right. Only
    triton_dist methods are captured (the torch reference runs eagerly after each replay)."""
    from triton_dist import ops
    from triton_dist.runtime import torch_collectives as tc

    rank, world = _init()
    n = 4096
    ar = ops.create_allreduce_ctx(n, torch.bfloat16)
    ag = ops.create_allgather_ctx(n, torch.bfloat16)
    x = torch.empty(n, dtype=torch.bfloat16, device="cuda")
    y = torch.empty_like(x)
    z = torch.empty(n * world, dtype=torch.bfloat16, device="cuda")
    w = torch.empty_like(x)
    ops.all_reduce(x.zero_(), ar, out=y, method="one_shot")
    ops.all_reduce(x, ar, out=y, method="two_shot")
    ops.all_gather(x, ag, out=z)
    zp = torch.empty_like(z)
    rs = ops.create_reduce_scatter_ctx(n * world, torch.bfloat16, methods=("push_pipe", ))
    v = torch.empty(n, dtype=torch.bfloat16, device="cuda")
    ops.all_gather(x, ag, out=zp, method="push_pipe")
    ops.reduce_scatter(z, rs, out=v, method="push_pipe")
    rs_ll = ops.create_reduce_scatter_ctx(n * world, torch.bfloat16, methods=("ll", ))
    y_ll, z_ll, v_ll = torch.empty_like(y), torch.empty_like(z), torch.empty_like(v)
    ops.all_reduce(x, ar, out=y_ll, method="ll")
    ops.all_gather(x, ag, out=z_ll, method="ll")
    ops.reduce_scatter(z, rs_ll, out=v_ll, method="ll")
    torch.cuda.synchronize()
    s = torch.cuda.Stream()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g, stream=s):
        ops.all_reduce(x, ar, out=y, method="one_shot")
        ops.all_reduce(y, ar, out=w, method="two_shot")
        ops.all_gather(w, ag, out=z)
        ops.all_gather(w, ag, out=zp, method="push_pipe")
        ops.reduce_scatter(z, rs, out=v, method="push_pipe")
        ops.all_reduce(x, ar, out=y_ll, method="ll")  # the flagged-word methods: epochs (and flags) advance on
        ops.all_gather(w, ag, out=z_ll, method="ll")  # the device, parity alternates between replays
        ops.reduce_scatter(z, rs_ll, out=v_ll, method="ll")
    for it in range(50):
        x.copy_(_ints(n, torch.bfloat16, it * 3 + rank))
        g.replay()
        torch.cuda.synchronize()
        ref = tc.all_reduce(x.clone())
        assert torch.equal(y, ref), it
        ref2 = ref * world
        assert torch.equal(w, ref2), it
        assert torch.equal(z, ref2.repeat(world)), it
        assert torch.equal(zp, z), it
        assert torch.equal(v, ref2 * world), it
        assert torch.equal(y_ll, y) and torch.equal(z_ll, z) and torch.equal(v_ll, v), it
    rs_ll.close()
    ar.close()
    ag.close()
    rs.close()


def test_graph_calls_eager_mode():
    """``ctx.graph_calls``: repeated eager calls with the same arguments replay a captured one-kernel graph; results
    stay right when the inputs change in place, when addresses and sizes change, when graph and direct calls mix
    (other methods, a user's own capture), and the number of graphs stays bounded."""
    from triton_dist import ops
    from triton_dist.runtime import torch_collectives as tc

    rank, world = _init()
    n = 8192
    ar = ops.create_allreduce_ctx(4 * n, torch.bfloat16)
    ar.graph_calls, ar.max_graphs = True, 3
    x = torch.empty(n, dtype=torch.bfloat16, device="cuda")
    y = torch.empty_like(x)
    for it in range(12):
        x.copy_(_ints(n, torch.bfloat16, it * 5 + rank))
        ops.all_reduce(x, ar, out=y, method="one_shot")
        ref = tc.all_reduce(x.clone())
        assert torch.equal(y, ref), it
    assert len(ar._graphs) == 1 and len(ar._call_graphs) == 1  # later calls replayed before the op's own work
    ag = ops.create_allgather_ctx(n, torch.bfloat16)
    rs = ops.create_reduce_scatter_ctx(n * world, torch.bfloat16)
    ag.graph_calls = rs.graph_calls = True
    z = torch.empty(n * world, dtype=torch.bfloat16, device="cuda")
    xr = torch.empty(n * world, dtype=torch.bfloat16, device="cuda")
    for it in range(6):
        x.copy_(_ints(n, torch.bfloat16, it * 11 + rank))
        xr.copy_(_ints(n * world, torch.bfloat16, it * 13 + rank))
        ops.all_gather(x, ag, out=z, method="push")
        ops.reduce_scatter(xr, rs, out=y, method=("direct", "ring")[it % 2])
        refz = tc.all_gather_into_tensor(torch.empty_like(z), x)
        refy = tc.reduce_scatter_tensor(torch.empty_like(y), xr)
        assert torch.equal(z, refz) and torch.equal(y, refy), it
    assert len(ag._call_graphs) == 1 and len(rs._call_graphs) == 2
    ag.close()
    rs.close()
    for it in range(10):  # new sizes / addresses every call, a second method, a fresh output each time
        m = 1 + it * 997
        xs = _ints(m, torch.bfloat16, it + 100 * rank)
        out = ops.all_reduce(xs, ar, method=("one_shot", "two_shot", "auto")[it % 3])
        ref = tc.all_reduce(xs.clone())
        assert torch.equal(out, ref), (it, m)
    for it in range(8):  # a few keys in turn: graphs are made, replayed and evicted
        m = 1000 * (1 + it % 5)
        x[:m].copy_(_ints(m, torch.bfloat16, it + 7 * rank))
        ops.all_reduce(x[:m], ar, out=y[:m], method="one_shot")
        ref = tc.all_reduce(x[:m].clone())
        assert torch.equal(y[:m], ref), it
    assert len(ar._graphs) <= 3
    s = torch.cuda.Stream()  # a user's capture of a graph_calls context: the launch goes into the user's graph
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g, stream=s):
        ops.all_reduce(x, ar, out=y, method="one_shot")
    for it in range(3):
        x.copy_(_ints(n, torch.bfloat16, it + 50 + rank))
        g.replay()
        ops.all_reduce(x, ar, out=y, method="one_shot")  # the same call eagerly (replays the context's graph)
        torch.cuda.synchronize()
        ref = tc.all_reduce(x.clone())
        assert torch.equal(y, ref), it
    ar.close()
    assert not ar._graphs


def stress(calls: int, seed: int = 0, max_elems: int = 1 << 18):
    """Randomised op/size/dtype/method calls, every result verified against torch.distributed's (``_check``). Returns
    (failures, seconds). Where ranks share a GPU the reference of every call is gloo on host copies
    (``runtime.torch_collectives``; no NCCL in a gloo-only group): exact for these small-integer inputs (fp32 sums
    rounded once), and slower (a host round trip per call)."""
    from triton_dist import ops

    rank, world = _init()
    rng = random.Random(seed)
    dts = [torch.bfloat16, torch.float16, torch.float32]
    ctx = {}
    for dt in dts:
        ctx[("ag", dt)] = ops.create_allgather_ctx(max_elems, dt, ll_max_numel=max_elems)
        ctx[("rs", dt)] = ops.create_reduce_scatter_ctx(max_elems * world, dt, ll_max_numel=max_elems)
        ctx[("ar", dt)] = ops.create_allreduce_ctx(max_elems * world, dt, one_shot_max_numel=max_elems,
                                                   ll_max_numel=max_elems * world,
                                                   methods=("one_shot", "two_shot", "two_shot_pipe", "ll"))
    methods = {"ag": ["push", "pull", "push_pipe", "ll", "ce", "auto"],
               "rs": ["direct", "direct_push", "push_pipe", "ll", "ring", "auto"],
               "ar": ["one_shot", "two_shot", "two_shot_pipe", "ll", "auto"]}
    fails = []
    t0 = time.time()
    for i in range(calls):
        op = rng.choice(["ag", "rs", "ar"])
        dt = rng.choice(dts)
        m = rng.choice(methods[op])
        n = rng.choice([rng.randint(1, 256), rng.randint(1, 8192), rng.randint(1, max_elems)])
        if op == "ar" and m != "one_shot":
            n = rng.randint(1, max_elems * world)
        err = _check(op, ctx[(op, dt)], n, m, i, rank, world)
        if err:
            fails.append(err)
            if len(fails) > 10:
                break
    torch.cuda.synchronize()
    for c in ctx.values():
        c.close()
    return fails, time.time() - t0


_MISMATCH_CHILD = """
import os, time, torch
import triton_dist.utils as U
from triton_dist import ops

U.initialize_distributed(seed=0)
rank = int(os.environ["RANK"])
ar = ops.create_allreduce_ctx(4096, torch.float32)
ar.graph_calls = False
x = torch.ones(100 + rank, device="cuda")  # rank 0: 100 elements, rank 1: 101
print("LAUNCH", flush=True)
t0 = time.time()
ops.all_reduce(x, ar, method=os.environ["MISMATCH_METHOD"])
try:
    torch.cuda.synchronize()
except Exception as e:
    print(f"HOST-ERROR after {time.time() - t0:.1f} s:", type(e).__name__, e, flush=True)
    os._exit(17)  # the context is dead after a trap: skip SHMEM teardown
print("NO-ERROR", flush=True)
os._exit(0)
"""


@pytest.mark.parametrize("method", ["one_shot", "ll"])
def test_rank_mismatch_traps_with_report(tmp_path, method):
    """Issue 15 point 2: ranks 0 and 1 call all_reduce with 100 and 101 elements (no bounded-wait mode, no
    check_peers): the tagged ready wait sees the peer's signal of the same call with another size tag, prints
    "RANKS DISAGREE" with rank, program, address and both (epoch, tag) pairs, and traps at once; the host's next
    synchronize raises. In a 2-rank child job (ranks 0 and 1 each start one child) so the trap cannot poison us:
    where ranks share a GPU the child job runs outside the MPS server, its two ranks time-slicing on rank 0's GPU
    (``isolated_child_env``: a trap in one MPS client kills every client). Every rank (any world size) then meets a
    host barrier before anything else runs, so the ranks without a child neither race ahead into GPU work nor leave
    the collectives out of step. ``ll``: the flagged words carry the size tag (tag_bits=16); the reader sees words
    of its call with the other tag and reports the same way."""
    import torch.distributed as dist

    from _torchrun_shmem import child_timeout, isolated_child_env, run_logged_child

    from triton_dist.runtime.sim.launch import free_port

    rank, world = _init()
    port = [free_port() if rank == 0 else 0]  # a fresh port per child job, the same for both of its ranks
    dist.broadcast_object_list(port, src=0)
    limit = child_timeout(240)
    rc, text = None, ""
    if rank < 2:
        script = tmp_path / "mismatch_child.py"
        script.write_text(_MISMATCH_CHILD)
        (tmp_path / "no-mps").mkdir()
        # device 0: the child job's GPU where the GPU is shared -- parent ranks 0 and 1 (local ranks 0 and 1) use
        # GPU 0 then; one rank per GPU, child rank r keeps GPU r
        env = isolated_child_env(os.environ, port=port[0], ranks=2, rank=rank, device=0,
                                 mps_dir=tmp_path / "no-mps", MISMATCH_METHOD=method, TRITON_DIST_BOUNDED_WAIT=None)
        t0 = time.time()
        rc, text = run_logged_child([sys.executable, str(script)], env, tmp_path / "child.log", limit)
        print(f"rank {rank}: child rc {rc} after {time.time() - t0:.1f} s\n{text[-3000:]}")
    dist.barrier()  # every rank: both children are gone before anyone launches GPU work again
    if rank > 1:
        return
    assert rc != "timeout", f"the mismatched all_reduce hung (child killed after {limit:.0f} s)"
    assert rc != 0 and "NO-ERROR" not in text and "LAUNCH" in text, text[-3000:]
    assert "RANKS DISAGREE" in text and "HOST-ERROR" in text, text[-3000:]


def test_stress():
    """``TRITON_DIST_STRESS_CALLS`` (default 10,000) randomised calls, each checked against torch.distributed's
    (NCCL; gloo on host copies where ranks share a GPU: :func:`stress`)."""
    from triton_dist.runtime import torch_collectives as tc

    calls = int(os.environ.get("TRITON_DIST_STRESS_CALLS", "10000"))
    fails, secs = stress(calls)
    ref = "NCCL" if tc.group_has_nccl() else "gloo on host copies (ranks share a GPU)"
    print(f"stress: {calls} randomised calls, each checked against {ref}, in {secs:.1f} s")
    assert not fails, fails[:10]


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=10000)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    fails, secs = stress(a.calls, a.seed)
    r = int(os.environ.get("RANK", "0"))
    print(f"rank {r}: stress {a.calls} calls in {secs:.1f} s: {len(fails)} failures {fails[:5]}", flush=True)
    import triton_dist.utils as tdu

    tdu.finalize_distributed()
    sys.exit(1 if fails else 0)
