"""GPU tier for the dl ops: ``torchrun --nproc_per_node 2 -m pytest -s test/python/gpu/test_gpu_language.py`` (any
world size >= 2; ranks may share a GPU).

Every rank runs the same tests in the same order. Every op is executed with checked results; a ping-pong between
ranks 0 and 1 measures the notify/wait round trip (printed); a 1000-iteration producer/consumer stress around the
ring of ranks must see zero mismatches; bounded-wait mode must turn a hang into a reported trap (in a child process,
outside the MPS server where ranks share a GPU).
"""
import os
import sys
import textwrap

import pytest
import torch
import triton.language as tl

pytestmark = pytest.mark.gpu

import triton_dist  # noqa: E402
import triton_dist.language as dl  # noqa: E402
import triton_dist.utils as U  # noqa: E402

from _torchrun_shmem import (RANK, RANKS_PER_GPU, WORLD, child_timeout, isolated_child_env,  # noqa: E402
                             run_logged_child, shmem_barrier, shmem_group)
PEER = (RANK + 1) % max(WORLD, 1)
PREV = (RANK - 1) % max(WORLD, 1)


# ------------------------------------------------------------------------------------------------------ kernels

@triton_dist.jit
def k_rank(out):
    tl.store(out, dl.rank())
    tl.store(out + 1, dl.num_ranks())


@triton_dist.jit
def k_symm_get(x, out, peer, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out + offs, tl.load(dl.symm_at(x, peer) + offs))


@triton_dist.jit
def k_put_signal_read(src, buf, sig, out, peer, value, BLOCK: tl.constexpr, SCOPE: tl.constexpr,
                      OP: tl.constexpr, EXPECT: tl.constexpr):
    """Put src into peer's buf, signal it, then wait for our own signal and read what the peer put into ours."""
    offs = tl.arange(0, BLOCK)
    tl.store(dl.symm_at(buf, peer) + offs, tl.load(src + offs))
    dl.notify(sig, peer, value, OP, SCOPE)
    tok = dl.wait(sig, 1, "sys", "acquire", EXPECT)
    p = dl.consume_token(buf, tok)
    tl.store(out + offs, tl.load(p + offs))


@triton_dist.jit
def k_local_pair(buf, sig, sig32, out, NSIG: tl.constexpr, BLOCK: tl.constexpr):
    """Program 0 writes buf, raises NSIG 32-bit flags (release atomics) and a gpu-scope notify; program 1 waits on
    all of them (more than 32 barriers) and copies buf to out."""
    offs = tl.arange(0, BLOCK)
    if tl.program_id(0) == 0:
        tl.store(buf + offs, offs * 3 + 1)
        so = tl.arange(0, NSIG)
        tl.atomic_xchg(sig32 + so, tl.full([NSIG], 1, tl.int32), sem="release", scope="gpu")
        dl.notify(sig, 0, 7, "set", "gpu")
    else:
        t1 = dl.wait(sig, 1, "gpu", "acquire", 7)
        t2 = dl.wait(sig32, NSIG, "gpu", "acquire", 1)
        p = dl.consume_token(dl.consume_token(buf, t1), t2)
        tl.store(out + offs, tl.load(p + offs))


@triton_dist.jit
def k_ping_pong(sig, iters, IS_PING: tl.constexpr):
    peer = 1 - dl.rank()
    for i in range(1, iters + 1):
        if IS_PING:
            dl.notify(sig, peer, i, "set", "intra_node")
            dl.wait(sig, 1, "sys", "acquire", i)
        else:
            dl.wait(sig, 1, "sys", "acquire", i)
            dl.notify(sig, peer, i, "set", "intra_node")


@triton_dist.jit
def k_stress(buf, data_sig, ack_sig, mismatches, iters, BLOCK: tl.constexpr):
    """Around the ring, ``iters`` rounds, one buffer slot: each rank produces into the next rank's slot and consumes
    what the previous rank put into its own: wait ack(i) (from the next rank) -> put round i -> notify data(i+1) on
    the next rank -> wait own data(i+1) -> check (the previous rank's values) -> notify ack(i+1) on the previous
    rank. At 2 ranks the next and the previous rank are the same."""
    me = dl.rank()
    n = dl.num_ranks()
    peer = (me + 1) % n
    prev = (me + n - 1) % n
    offs = tl.arange(0, BLOCK)
    bad = tl.zeros([BLOCK], tl.int32)
    remote = dl.symm_at(buf, peer)
    for i in range(0, iters):
        tok = dl.wait(ack_sig, 1, "sys", "acquire", i)  # the next rank has consumed round i-1 from our slot on it
        r = dl.consume_token(remote, tok)
        tl.store(r + offs, offs + i * BLOCK + me * 1_000_000)
        dl.notify(data_sig, peer, i + 1, "set", "intra_node")
        tok = dl.wait(data_sig, 1, "sys", "acquire", i + 1)
        p = dl.consume_token(buf, tok)
        got = tl.load(p + offs)
        expect = offs + i * BLOCK + prev * 1_000_000
        bad += (got != expect).to(tl.int32)
        dl.notify(ack_sig, prev, i + 1, "set", "intra_node")
    tl.store(mismatches + offs, bad)


# ------------------------------------------------------------------------------------------------------ fixtures

group = shmem_group(seed=3)
_barrier = shmem_barrier


# ------------------------------------------------------------------------------------------------------ tests

def test_rank_num_ranks(group):
    out = torch.zeros(2, dtype=torch.int32, device="cuda")
    k_rank[(1, )](out)
    assert out.tolist() == [RANK, WORLD]


def test_symm_at_reads_peer(group):
    x = U.nvshmem_create_tensor((1024, ), torch.float32)
    x.copy_(torch.arange(1024, device="cuda", dtype=torch.float32) + 1000 * RANK)
    _barrier()
    out = torch.empty_like(x)
    k_symm_get[(1, )](x, out, PEER, BLOCK=1024)
    torch.cuda.synchronize()
    assert torch.equal(out, torch.arange(1024, device="cuda", dtype=torch.float32) + 1000 * PEER)
    k_symm_get[(1, )](x, out, RANK, BLOCK=1024)
    torch.cuda.synchronize()
    assert torch.equal(out, x)
    _barrier()
    U.nvshmem_free_tensor_sync(x)


@pytest.mark.parametrize("scope,op", [("intra_node", "set"), ("intra_node", "add"), ("inter_node", "set"),
                                      ("inter_node", "add")])
def test_put_notify_wait(group, scope, op):
    buf = U.nvshmem_create_tensor((2048, ), torch.int32)
    sig = U.nvshmem_create_tensor((1, ), torch.int64)
    buf.fill_(-1)
    sig.fill_(10 if op == "add" else 0)
    _barrier()
    src = torch.arange(2048, device="cuda", dtype=torch.int32) * (RANK + 2)
    out = torch.zeros_like(src)
    value, expect = (5, 15) if op == "add" else (42, 42)
    k_put_signal_read[(1, )](src, buf, sig, out, PEER, value, BLOCK=2048, SCOPE=scope, OP=op, EXPECT=expect)
    torch.cuda.synchronize()
    assert torch.equal(out, torch.arange(2048, device="cuda", dtype=torch.int32) * (PREV + 2))
    assert sig.item() == expect
    _barrier()
    U.nvshmem_free_tensor_sync(buf)
    U.nvshmem_free_tensor_sync(sig)


def test_gpu_scope_and_many_barriers(group):
    buf = torch.zeros(256, dtype=torch.int32, device="cuda")
    sig = torch.zeros(1, dtype=torch.int64, device="cuda")
    sig32 = torch.zeros(64, dtype=torch.int32, device="cuda")
    out = torch.zeros(256, dtype=torch.int32, device="cuda")
    k_local_pair[(2, )](buf, sig, sig32, out, NSIG=64, BLOCK=256)
    torch.cuda.synchronize()
    assert torch.equal(out, torch.arange(256, device="cuda", dtype=torch.int32) * 3 + 1)
    assert sig.item() == 7 and int(sig32.sum()) == 64


def test_ping_pong_latency(group):
    """Ranks 0 and 1 play (the kernel's peer is ``1 - rank``); any other ranks only meet the barriers."""
    sig = U.nvshmem_create_tensor((1, ), torch.int64)
    iters = 2000
    plays = RANK < 2
    seen = []
    for _ in range(2):  # the first launch compiles (on both ranks, at different times): time the second
        sig.zero_()
        _barrier()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        if plays:
            start.record()
            k_ping_pong[(1, )](sig, iters, IS_PING=(RANK == 0))
            end.record()
        torch.cuda.synchronize()
        seen.append(sig.item())
    _barrier()
    U.nvshmem_free_tensor_sync(sig)
    if not plays:
        assert seen == [0, 0]
        return
    assert seen == [iters, iters]
    us = start.elapsed_time(end) * 1000.0 / iters
    if RANK == 0:
        where = "ranks sharing one GPU" if RANKS_PER_GPU > 1 else "2 GPUs"
        print(f"\n[dl ping-pong] notify(intra_node)/wait(sys, acquire) round trip: {us:.2f} us "
              f"(avg over {iters} round trips, {where})")


def test_producer_consumer_stress(group):
    iters, block = 1000, 1024
    buf = U.nvshmem_create_tensor((block, ), torch.int32)
    data_sig = U.nvshmem_create_tensor((1, ), torch.int64)
    ack_sig = U.nvshmem_create_tensor((1, ), torch.int64)
    buf.fill_(-1)
    data_sig.zero_()
    ack_sig.zero_()
    _barrier()
    bad = torch.full((block, ), -1, dtype=torch.int32, device="cuda")
    k_stress[(1, )](buf, data_sig, ack_sig, bad, iters, BLOCK=block, num_warps=4)
    torch.cuda.synchronize()
    assert int(bad.sum()) == 0, f"{int(bad.sum())} mismatches"
    assert data_sig.item() == iters and ack_sig.item() == iters
    if RANK == 0:
        print(f"\n[dl stress] {iters} producer/consumer rounds x {block} ints per rank: 0 mismatches")
    _barrier()
    for t in (buf, data_sig, ack_sig):
        U.nvshmem_free_tensor_sync(t)


_BOUNDED_CHILD = textwrap.dedent("""
    import os, sys, torch, triton, triton.language as tl
    import triton_dist, triton_dist.language as dl, triton_dist.utils as U

    @triton_dist.jit
    def never(sig):
        dl.wait(sig, 1, "gpu", "acquire", 1)

    U.initialize_distributed(seed=0)
    sig = U.nvshmem_create_tensor((4, ), torch.int64)
    sig.fill_(3)
    torch.cuda.synchronize()
    print("LAUNCH", flush=True)
    never[(1, )](sig[2:])
    try:
        torch.cuda.synchronize()
    except Exception as e:
        print("HOST-ERROR:", type(e).__name__, e, flush=True)
        os._exit(17)  # the context is dead after a trap: skip SHMEM teardown
    print("NO-ERROR", flush=True)
    os._exit(0)
""")


def test_bounded_wait_traps_with_report(group, tmp_path):
    """TRITON_DIST_BOUNDED_WAIT=200: a wait that cannot complete prints rank/program/address/expected/seen and
    traps; the host gets an error instead of a hang. Rank 0 runs it in a 1-rank child on its GPU so the trap cannot
    poison us: outside the MPS server where ranks share a GPU (``isolated_child_env``: a trap in one MPS client
    kills every client). The other ranks wait on the host (a gloo barrier) meanwhile, so the child does not
    time-slice with their kernels."""
    import torch.distributed as dist

    from triton_dist.runtime.sim.launch import free_port

    limit = child_timeout(150)
    rc, text = None, ""
    if RANK == 0:
        script = tmp_path / "bounded_child.py"
        script.write_text(_BOUNDED_CHILD)
        (tmp_path / "no-mps").mkdir()
        env = isolated_child_env(os.environ, port=free_port(), mps_dir=tmp_path / "no-mps",
                                 TRITON_DIST_BOUNDED_WAIT=200, TRITON_ALWAYS_COMPILE=1)
        rc, text = run_logged_child([sys.executable, str(script)], env, tmp_path / "child.log", limit)
        print(text[-4000:])
    dist.barrier()  # every rank: the child is gone before anyone launches GPU work again
    if RANK != 0:
        return
    assert rc != "timeout", f"the bounded wait did not end the kernel (child killed after {limit:.0f} s)"
    assert rc != 0 and "NO-ERROR" not in text
    assert "dl.wait TIMEOUT" in text
    assert "HOST-ERROR" in text
