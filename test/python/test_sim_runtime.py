"""The CPU simulator runtime: symmetric heap across real rank processes, barriers, waits, launcher, teardown,
and Triton interpreter kernels reading/writing peers' partitions (design: the
``triton_dist.runtime.sim`` package docstring)."""
import glob
import multiprocessing
import os
import subprocess
import sys
import time

import numpy as np
import pytest
import torch
import triton
import triton.language as tl

from conftest_sim import sim_ranks  # noqa: F401  (fixture)
from triton_dist.runtime.sim.heap import _Allocator, parse_size
from triton_dist.runtime.sim.launch import RankError, RankPool, RankTimeout, run_ranks

pytestmark = pytest.mark.sim


# --------------------------------------------------------------------------------------------------- kernels
# Defined at module level: interpreted in the rank processes (TRITON_INTERPRET=1 from birth), never run here.

@triton.jit
def _put_kernel(src_ptr, dst_ptr, peer_delta, N, BLOCK: tl.constexpr):
    """Write src into the same symmetric buffer on a peer: dst + (peer_base - my_base)/elem_size."""
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < N
    vals = tl.load(src_ptr + offs, mask=mask)
    tl.store(dst_ptr + peer_delta + offs, vals, mask=mask)


@triton.jit
def _pid_kernel(out_ptr):
    pid = tl.program_id(0)
    tl.store(out_ptr + pid, pid + 1)


@triton.jit
def _pingpong_kernel(flags_ptr, peer_delta, out_ptr, LIMIT: tl.constexpr):
    """program 0 waits for the PEER's program 1 to raise flags[0]; program 1 raises the peer's flag, then returns.
    Deadlocks under the stock sequential executor on both ranks at once; completes with run_grid."""
    pid = tl.program_id(0)
    if pid == 1:
        tl.atomic_xchg(flags_ptr + peer_delta, 1)
    else:
        seen = tl.atomic_add(flags_ptr, 0)
        i = 0
        while (seen == 0) & (i < LIMIT):
            seen = tl.atomic_add(flags_ptr, 0)
            i += 1
        tl.store(out_ptr, seen)


@triton.jit
def _count_kernel(counter_ptr, delta, N: tl.constexpr):
    """Every program adds 1, N times, to one 64-bit word that lives in rank 0's partition."""
    offs = tl.zeros((N, ), dtype=tl.int32)
    tl.atomic_add(counter_ptr + delta + offs, tl.full((N, ), 1, dtype=tl.int64))


# --------------------------------------------------------------------------------------------------- rank functions

def _backend():
    from triton_dist.runtime.sim import current
    from triton_dist.runtime.sim.backend import SimBackend

    return SimBackend(), current()


def rank_visibility():
    from triton_dist import _compat

    b, ctx = _backend()
    r, n = ctx.rank, ctx.world_size
    views = b.create_tensors((64, ), torch.float32, r, ctx.local_world_size)
    assert len(views) == ctx.local_world_size
    views[r].copy_(torch.arange(64, dtype=torch.float32) + 1000 * r)
    b.barrier_all_on_stream()
    seen_views = [v[:3].tolist() for v in views]
    my = views[r]
    seen_translate = []
    for peer in range(n):
        addr = ctx.translate(my.data_ptr(), peer)
        assert ctx.owner_of(addr) == peer and ctx.offset_of(addr) == ctx.offset_of(my.data_ptr())
        seen_translate.append(_compat.raw_load(addr + 4 * np.arange(3), np.float32).tolist())
        arr = ctx.translate(np.array([my.data_ptr(), my.data_ptr() + 4], dtype=np.uint64), peer)
        assert arr.tolist() == [addr, addr + 4]
    seen_peer_view = [b.peer_view(my, p)[:3].tolist() for p in range(n)]
    # translating an address outside my partition is an error (nvshmem_ptr would give null)
    try:
        ctx.translate(views[(r + 1) % n].data_ptr(), r)
        bad = "no error" if n > 1 else "ok"
    except ValueError as exc:
        bad = str(exc)
    b.barrier_all_on_stream()
    return seen_views, seen_translate, seen_peer_view, bad


def rank_allocator():
    b, ctx = _backend()
    offs = []
    ts = []
    for numel, dt in [(1, torch.uint8), (3, torch.float16), (1000, torch.float32), (7, torch.int64),
                      (0, torch.float32), (5, torch.bfloat16)]:
        t = b.create_tensor((numel, ), dt)
        assert t.numel() == numel and t.dtype == dt
        assert torch.count_nonzero(t) == 0
        offs.append(t.untyped_storage().data_ptr() - ctx.base(ctx.rank))
        ts.append(t)
    # free then re-allocate: the block is reused and zeroed again
    ts[2].fill_(7.0)
    off2 = offs[2]
    b.free_tensor(ts[2])
    t2 = b.create_tensor((1000, ), torch.float32)
    again = t2.data_ptr() - ctx.base(ctx.rank)
    zero_again = bool(torch.count_nonzero(t2) == 0)
    m = b.create_tensor((4, 8), torch.int32)
    m2d_ok = m.shape == (4, 8) and m.is_contiguous()
    b.barrier_all_on_stream()
    return offs, off2, again, zero_again, m2d_ok


def rank_errors():
    from triton_dist.runtime.sim.heap import SimCollectiveMismatch, SimHeapExhausted

    b, ctx = _backend()
    out = {}
    try:
        b.create_tensor((16 + ctx.rank, ), torch.float32)
        out["mismatch"] = None
    except SimCollectiveMismatch as exc:
        out["mismatch"] = str(exc)
    try:
        b.create_tensor((ctx.heap_size // 4 + 1, ), torch.float32)
        out["exhausted"] = None
    except SimHeapExhausted as exc:
        out["exhausted"] = str(exc)
    # the heap is still usable and symmetric afterwards
    t = b.create_tensor((8, ), torch.float32)
    out["after_ok"] = t.data_ptr() - ctx.base(ctx.rank)
    return out


def rank_barriers(iters):
    b, ctx = _backend()
    r, n = ctx.rank, ctx.world_size
    board = b.create_tensors((n, ), torch.int64, r, ctx.local_world_size)[0]  # lives on rank 0
    errors = []
    for i in range(1, iters + 1):
        if (i + r) % 2:
            time.sleep(0.003 * (r + 1))  # stagger arrivals
        board[r] = i  # plain store into rank 0's partition
        if i % 2:
            b.barrier_all_on_stream()
        else:
            ctx.barrier_all()  # the device-side primitive
        snapshot = board.tolist()
        if any(v < i for v in snapshot):
            errors.append((i, snapshot))
        # nobody may start writing i+1 before all have checked i
        b.barrier_all_on_stream()
    ctx.barrier_node()
    return errors


def rank_atomic_contention(host_adds, programs, per_program):
    """Real cross-process atomics: all ranks hammer two counters in rank 0's partition at the same time."""
    b, ctx = _backend()
    cnt = b.create_tensor((2, ), torch.int64)
    to0 = ctx.translate(cnt.data_ptr(), 0)
    b.barrier_all_on_stream()
    for _ in range(host_adds):
        ctx.atomic_add(to0, 1, np.int64)
    _count_kernel[(programs, )](cnt[1:], (to0 - cnt.data_ptr()) // 8, N=per_program)
    b.barrier_all_on_stream()
    return b.peer_view(cnt, 0).tolist()


def rank_wait_timeout():
    from triton_dist.runtime.sim.heap import SimWaitTimeout

    b, ctx = _backend()
    sig = b.create_tensor((4, ), torch.int64)
    ctx.wait_timeout_s = 0.5
    out = {}
    t0 = time.monotonic()
    try:
        ctx.spin_wait(sig.data_ptr() + 8, 1, op="dl.wait")
        out["wait"] = None
    except SimWaitTimeout as exc:
        out["wait"] = str(exc)
    out["wait_elapsed"] = time.monotonic() - t0
    out["sig_addr"] = sig.data_ptr() + 8 - ctx.base(ctx.rank)
    # a wait that IS satisfied by a peer (rank r+1 raises rank r's signal after a delay)
    ctx.wait_timeout_s = 20
    b.barrier_all_on_stream()
    time.sleep(0.05)
    ctx.atomic_store(ctx.translate(sig.data_ptr(), (ctx.rank - 1) % ctx.world_size), 5)
    seen = ctx.spin_wait(sig.data_ptr(), 5, op="dl.wait")
    out["satisfied"] = int(seen[0])
    b.barrier_all_on_stream()
    # a barrier that only rank 0 enters names the missing ranks
    ctx.wait_timeout_s = 0.5
    if ctx.rank == 0:
        try:
            b.barrier_all_on_stream()
            out["barrier"] = None
        except SimWaitTimeout as exc:
            out["barrier"] = str(exc)
    # a failing sibling program (run_grid sets abort_event) ends a wait at once with SimAborted, not at the timeout
    import threading

    from triton_dist.runtime.sim.heap import SimAborted

    ctx.wait_timeout_s = 30
    threading.Timer(0.2, ctx.abort_event.set).start()
    t0 = time.monotonic()
    try:
        ctx.spin_wait(sig.data_ptr() + 16, 1, op="dl.wait")
    except SimAborted as exc:
        out["aborted"] = (str(exc), time.monotonic() - t0)
    ctx.abort_event.clear()
    return out


def rank_kernel_put(n_elems):
    b, ctx = _backend()
    r, n = ctx.rank, ctx.world_size
    src = b.create_tensor((n_elems, ), torch.float32)
    dst = b.create_tensor((n_elems, ), torch.float32)
    src.copy_(torch.arange(n_elems, dtype=torch.float32) * (r + 1))
    b.barrier_all_on_stream()
    peer = (r + 1) % n
    delta_bytes = ctx.translate(dst.data_ptr(), peer) - dst.data_ptr()
    assert delta_bytes % 4 == 0
    interpreted = type(_put_kernel).__name__
    _put_kernel[(triton.cdiv(n_elems, 32), )](src, dst, delta_bytes // 4, n_elems, BLOCK=32)
    b.barrier_all_on_stream()
    expect = torch.arange(n_elems, dtype=torch.float32) * (((r - 1) % n) + 1)
    return interpreted, bool(torch.equal(dst, expect)), dst[:4].tolist()


def rank_concurrent_grid():
    from triton_dist.runtime.sim.launch import run_grid

    b, ctx = _backend()
    r, n = ctx.rank, ctx.world_size
    out = torch.zeros(40, dtype=torch.int32)
    run_grid(_pid_kernel, (40, ), out)
    pids_ok = out.tolist() == list(range(1, 41))
    flags = b.create_tensor((1, ), torch.int64)
    seen = torch.zeros(1, dtype=torch.int64)
    peer = (r + 1) % n
    delta = (ctx.translate(flags.data_ptr(), peer) - flags.data_ptr()) // 8
    b.barrier_all_on_stream()
    run_grid(_pingpong_kernel, (2, ), flags, delta, seen, LIMIT=200000)
    b.barrier_all_on_stream()
    # a failing program aborts a sim wait in a sibling program instead of letting it spin to the timeout
    from triton.runtime.interpreter import InterpreterError

    return pids_ok, int(seen[0]), InterpreterError.__name__


def rank_raise_on_1():
    from triton_dist.runtime.sim import current

    if current().rank == 1:
        raise ValueError("boom from rank one")
    return "fine"


def rank_hang_on_0():
    from triton_dist.runtime.sim import current

    if current().rank == 0:
        time.sleep(600)
    return "fine"


def rank_env_and_finalize():
    """Checks the launcher environment, then finalizes explicitly (the atexit finalize must tolerate that)."""
    from triton_dist.runtime.sim.backend import SimBackend

    b, ctx = _backend()
    env = {k: os.environ.get(k) for k in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR",
                                           "TRITON_DIST_BACKEND", "TRITON_INTERPRET")}
    t = b.create_tensor((1024, ), torch.float32)
    t.fill_(1)
    b.barrier_all_on_stream()
    info = (env, type(_put_kernel).__name__, ctx.path)
    SimBackend().finalize()
    SimBackend().finalize()
    return info


# --------------------------------------------------------------------------------------------------- tests

def test_parse_size_and_allocator_units():
    assert parse_size("64M") == 64 << 20 and parse_size("1G") == 1 << 30 and parse_size("4096") == 4096
    assert parse_size("2MiB") == 2 << 20
    with pytest.raises(ValueError, match="TRITON_DIST_SIM_SYMMETRIC_SIZE"):
        parse_size("lots", "TRITON_DIST_SIM_SYMMETRIC_SIZE")
    a = _Allocator(4096)
    a.commit(a.find(256), 256)
    a.commit(a.find(512), 512)
    assert sorted(a.used) == [0, 256]
    a.release(0)
    assert a.find(256) == 0 and a.find(300) == 768
    a.release(256)
    assert a.free == [[0, 4096]] and a.find(4096) == 0 and a.find(4097) is None


def test_segment_too_large_is_a_clear_error(monkeypatch, tmp_path):
    from triton_dist.runtime.sim.heap import create_segment

    monkeypatch.setenv("TRITON_DIST_SIM_SHM_DIR", str(tmp_path))
    with pytest.raises(MemoryError, match=r"no room for the symmetric heap.*TRITON_DIST_SIM_SYMMETRIC_SIZE"):
        create_segment(1 << 62, "triton_dist_sim_test", "TRITON_DIST_SIM_SYMMETRIC_SIZE")
    path = create_segment(1 << 20, "triton_dist_sim_test", "default")
    assert os.path.getsize(path) == 1 << 20 and path.startswith(str(tmp_path))


@pytest.mark.parametrize("world_size", [2, 4])
def test_symmetric_visibility(sim_ranks, world_size):  # noqa: F811
    res = sim_ranks.run(world_size, rank_visibility)
    for r, (views, via_translate, via_peer_view, bad) in enumerate(res):
        expect = [[1000.0 * p, 1000.0 * p + 1, 1000.0 * p + 2] for p in range(world_size)]
        assert views == expect and via_translate == expect and via_peer_view == expect, r
        assert "not in rank" in bad and "symmetric offset" in bad


def test_allocator_alignment_same_offsets(sim_ranks):  # noqa: F811
    res = sim_ranks.run(2, rank_allocator)
    assert res[0] == res[1], "offsets must be identical on every rank"
    offs, off2, again, zero_again, m2d_ok = res[0]
    assert all(o % 256 == 0 for o in offs) and len(set(offs)) == len(offs)
    assert again == off2 and zero_again and m2d_ok


def test_mismatch_and_exhaustion_errors(sim_ranks):  # noqa: F811
    res = sim_ranks.run(2, rank_errors)
    for r, out in enumerate(res):
        assert out["mismatch"] and "create_tensor is collective" in out["mismatch"]
        assert "rank 0: create_tensor(nbytes=64" in out["mismatch"] and "rank 1: create_tensor(nbytes=68" in out["mismatch"]
        msg = out["exhausted"]
        assert msg and "needs" in msg and "bytes free" in msg and "TRITON_DIST_SIM_SYMMETRIC_SIZE" in msg
    assert res[0]["after_ok"] == res[1]["after_ok"]


@pytest.mark.parametrize("world_size", [2, 4])
def test_barriers_hold_every_rank(sim_ranks, world_size):  # noqa: F811
    res = sim_ranks.run(world_size, rank_barriers, 12)
    assert res == [[]] * world_size, res


@pytest.mark.parametrize("world_size", [2, 4])
def test_atomics_are_atomic_across_processes(sim_ranks, world_size):  # noqa: F811
    res = sim_ranks.run(world_size, rank_atomic_contention, 3000, 8, 64)
    assert res == [[3000 * world_size, 8 * 64 * world_size]] * world_size, res


def test_wait_timeout_diagnostic(sim_ranks):  # noqa: F811
    res = sim_ranks.run(2, rank_wait_timeout)
    for r, out in enumerate(res):
        msg = out["wait"]
        assert msg is not None, "an unsatisfiable wait must raise"
        assert f"rank {r}: dl.wait timed out after 0.5 s" in msg
        assert f"symmetric offset 0x{out['sig_addr']:x} in rank {r}'s partition" in msg
        assert "expected == 1, last seen 0" in msg and "TRITON_DIST_SIM_WAIT_TIMEOUT" in msg
        assert 0.5 <= out["wait_elapsed"] < 15  # timed out (bound 0.5 s), not satisfied; slack for loaded CI
        assert out["satisfied"] == 5
    assert "rank(s) [1] have not arrived" in res[0]["barrier"]
    for out in res:
        msg, elapsed = out["aborted"]
        assert "abandoned because another program of this launch failed" in msg and elapsed < 15  # well under the 30 s wait bound


_SELF_COPY_SCRIPT = """
import mmap, os, sys, warnings
import torch
warnings.simplefilter("ignore")
path = sys.argv[1]
with open(path, "wb") as f:
    f.write(bytes(4096))
fd = os.open(path, os.O_RDONLY)
mm = mmap.mmap(fd, 4096, mmap.MAP_SHARED, mmap.PROT_READ)
s = torch.frombuffer(mm, dtype=torch.float32).untyped_storage()
assert s.cpu().data_ptr() == s.data_ptr()
s.copy_(s.cpu())  # what the interpreter's GridExecutor does after a launch; must not write (read-only page)
print("ok")
"""


def test_interpreter_copy_back_does_not_rewrite_heap(tmp_path):
    """Triton's interpreter copies each tensor argument's storage back onto itself after a launch. For CPU storage
    torch must treat that as a no-op: a real rewrite would race with peers writing the same symmetric buffer
    (lost updates). Checked on a read-only mapping, where any write would crash the child."""
    proc = subprocess.run([sys.executable, "-c", _SELF_COPY_SCRIPT, str(tmp_path / "ro.bin")], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0 and "ok" in proc.stdout, (proc.returncode, proc.stderr[-2000:])


@pytest.mark.parametrize("world_size", [2, 4])
def test_interpreter_kernel_writes_peer_partition(sim_ranks, world_size):  # noqa: F811
    res = sim_ranks.run(world_size, rank_kernel_put, 100)
    for r, (kind, ok, head) in enumerate(res):
        assert kind == "InterpretedFunction"
        assert ok, (r, head)


def test_run_grid_concurrent_programs_across_ranks(sim_ranks):  # noqa: F811
    res = sim_ranks.run(2, rank_concurrent_grid)
    for pids_ok, seen, _ in res:
        assert pids_ok
        assert seen == 1, "program 0 must see the peer's program 1 signal"


def test_launcher_errors_timeouts_and_clean_teardown(capfd, tmp_path):
    before = set(glob.glob("/dev/shm/triton_dist_sim_*") + glob.glob("/tmp/triton_dist_sim_*"))
    children_before = set(multiprocessing.active_children())  # e.g. the session's sim_ranks pools
    pool = RankPool(2)
    try:
        with pytest.raises(RankError) as ei:
            pool.run(rank_raise_on_1, timeout=60)
        msg = str(ei.value)
        assert "rank(s) [1]" in msg and "boom from rank one" in msg and "Traceback" in msg and "rank_raise_on_1" in msg
        # every rank answered: the same processes keep serving
        pids = [p.pid for p in pool._procs]
        assert pool.run(rank_visibility) and [p.pid for p in pool._procs] == pids
        t0 = time.monotonic()
        with pytest.raises(RankTimeout, match=r"did not finish rank_hang_on_0 within 3 s"):
            pool.run(rank_hang_on_0, timeout=3)
        assert time.monotonic() - t0 < 20 and pool._procs == []
    finally:
        pool.close()
    res = run_ranks(rank_env_and_finalize, 2, timeout=60)
    for r, (env, kind, path) in enumerate(res):
        assert env == {"RANK": str(r), "LOCAL_RANK": str(r), "WORLD_SIZE": "2", "LOCAL_WORLD_SIZE": "2",
                       "MASTER_ADDR": "127.0.0.1", "TRITON_DIST_BACKEND": "sim", "TRITON_INTERPRET": "1"}
        assert kind == "InterpretedFunction"
        assert not os.path.exists(path), "the segment name is unlinked once every rank attached"
    assert set(multiprocessing.active_children()) <= children_before, "no rank process may survive run_ranks"
    after = set(glob.glob("/dev/shm/triton_dist_sim_*") + glob.glob("/tmp/triton_dist_sim_*"))
    assert after <= before, f"leaked segments: {after - before}"
    err = capfd.readouterr().err
    assert "leaked" not in err and "Warning" not in err and "resource_tracker" not in err, err


_TORCHRUN_SCRIPT = """
import os, sys, torch
sys.path.insert(0, {pypath!r})
from triton_dist.runtime.sim.launch import init_sim_distributed
b = init_sim_distributed()
ctx = b.ctx
ts = b.create_tensors((8,), torch.int32, ctx.rank, ctx.local_world_size)
ts[ctx.rank].fill_(ctx.rank + 1)
b.barrier_all_on_stream()
# one file per rank: two ranks printing to one pipe can interleave their lines
with open(os.path.join(os.environ["TR_OUT_DIR"], f"rank{{ctx.rank}}.txt"), "w") as f:
    f.write(f"RANK {{ctx.rank}} {{[int(t[0]) for t in ts]}}")
b.barrier_all_on_stream()
b.finalize()
"""


def test_torchrun_cpu(tmp_path):
    script = tmp_path / "tr.py"
    pypath = os.path.join(os.path.dirname(__file__), "..", "..", "python")
    script.write_text(_TORCHRUN_SCRIPT.format(pypath=os.path.abspath(pypath)))
    env = dict(os.environ, TRITON_DIST_BACKEND="sim", OMP_NUM_THREADS="1", TR_OUT_DIR=str(tmp_path))
    proc = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2",
                           "--standalone", str(script)],
                          capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (tmp_path / "rank0.txt").read_text() == "RANK 0 [1, 2]"
    assert (tmp_path / "rank1.txt").read_text() == "RANK 1 [1, 2]"
    assert "leaked" not in proc.stderr and "Traceback" not in proc.stderr


def test_process_identity_tells_running_from_exited():
    """What the simulator's waits use to notice an exited peer (issue 15 point 2): a running process has an
    identity (its start time), an exited one -- a zombie its parent has not reaped, or reaped -- has none."""
    from triton_dist.runtime.sim.heap import process_identity

    assert process_identity(os.getpid())
    p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        assert process_identity(p.pid)
    finally:
        p.kill()
    deadline = time.monotonic() + 10
    while process_identity(p.pid) is not None and time.monotonic() < deadline:  # killed, not reaped yet: a zombie
        time.sleep(0.01)
    assert process_identity(p.pid) is None
    p.wait()
    assert process_identity(p.pid) is None


_PARENT_DIES = """
import os, signal, sys, time
sys.path[:0] = sys.argv[1].split(os.pathsep)
from triton_dist.runtime.sim.launch import RankPool
import test_sim_runtime as t
pool = RankPool(2).start()
pool._conns[0].send_bytes(__import__("pickle").dumps(("task", __import__("pickle").dumps((t.rank_hang_on_0, (), {})))))
print(" ".join(str(p.pid) for p in pool._procs), flush=True)
time.sleep(1.0)
os.kill(os.getpid(), signal.SIGKILL)
"""


def test_rank_processes_exit_when_their_parent_dies():
    """A parent killed mid-task (an OOM-killed pytest worker) must not leave its rank processes running the task:
    they end within seconds (runtime.sim.launch._exit_with_parent)."""
    here = os.path.dirname(os.path.abspath(__file__))
    paths = os.pathsep.join([os.path.join(os.path.dirname(os.path.dirname(here)), "python"), here])
    p = subprocess.run([sys.executable, "-c", _PARENT_DIES, paths], capture_output=True, text=True, timeout=120,
                       env={**os.environ, "TRITON_INTERPRET": "1", "TRITON_DIST_BACKEND": "sim"})
    pids = [int(x) for x in p.stdout.split()]
    assert len(pids) == 2, (p.stdout, p.stderr)
    deadline = time.monotonic() + 15
    alive = pids
    while alive and time.monotonic() < deadline:
        time.sleep(0.2)
        alive = [pid for pid in alive if os.path.exists(f"/proc/{pid}") and
                 open(f"/proc/{pid}/stat").read().split()[2] != "Z"]
    assert not alive, f"rank processes {alive} outlived their parent by 15 s"
