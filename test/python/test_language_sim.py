"""Simulator lowerings of the dl ops (TRITON_INTERPRET=1).

In-process tests use a fake 2-rank SimContext: one numpy-backed torch buffer split into two partitions acting as
the two ranks' heaps; a kernel run "as rank r" is a launch with the context's rank set to r. Multi-process runs use
the ``sim_ranks`` fixture of the simulator runtime (conftest_sim) when it is available.
"""
import os

import numpy as np
import pytest
import torch

from triton_dist.backends.sim.context import SimContext

pytestmark = pytest.mark.sim

HERE = os.path.dirname(__file__)


@pytest.fixture(scope="module")
def interp():
    """Enable the interpreter and (re)define the kernels under it."""
    import triton

    old_env = os.environ.get("TRITON_INTERPRET")
    old = triton.knobs.runtime.interpret
    os.environ["TRITON_INTERPRET"] = "1"
    triton.knobs.runtime.interpret = True
    import importlib

    import _language_sim_kernels as k  # noqa: E402

    k = importlib.reload(k)
    yield k
    triton.knobs.runtime.interpret = old
    if old_env is None:
        os.environ.pop("TRITON_INTERPRET", None)
    else:
        os.environ["TRITON_INTERPRET"] = old_env


class FakeCtx(SimContext):
    """Two partitions of one buffer; translate() moves an address to the same offset in the peer's partition (the
    waits, atomics and address descriptions are SimContext's)."""

    def __init__(self, part_bytes=1 << 16, world_size=2):
        self.world_size = world_size
        self.local_world_size = world_size
        self.heap_size = part_bytes
        self.wait_timeout_s = 0.3
        self.rank = 0
        self.local_rank = 0
        self.buf = torch.zeros(part_bytes * world_size + 64, dtype=torch.uint8)
        addr = self.buf.data_ptr()
        self.pad = (-addr) % 64
        self.base0 = addr + self.pad
        self.next_off = 0

    def base(self, rank):
        return self.base0 + rank * self.heap_size

    def owner_of(self, addr):
        r = (int(addr) - self.base0) // self.heap_size
        return r if 0 <= r < self.world_size else None

    def translate(self, addr, peer):
        a = np.asarray(addr, dtype=np.uint64)
        off = a - np.uint64(self.base(self.rank))
        if np.any(off >= np.uint64(self.heap_size)):
            raise ValueError(f"address outside rank {self.rank}'s heap partition")
        return off + np.uint64(self.base(int(peer)))

    def alloc(self, n, dtype):
        """A symmetric tensor: one view per rank at the same offset."""
        nbytes = n * torch.tensor([], dtype=dtype).element_size()
        off = self.next_off
        self.next_off += (nbytes + 63) // 64 * 64
        views = []
        for r in range(self.world_size):
            start = self.pad + r * self.heap_size + off
            views.append(self.buf[start:start + nbytes].view(dtype))
        return views


@pytest.fixture
def ctx():
    from triton_dist.runtime.sim import context

    c = FakeCtx()
    context.set_current(c)
    yield c
    context.set_current(None)


def test_rank_num_ranks(interp, ctx):
    out = torch.zeros(2, dtype=torch.int32)
    for r in range(2):
        ctx.rank = r
        interp.k_rank[(1, )](out)
        assert out.tolist() == [r, 2]


def test_symm_at_reads_peer_partition(interp, ctx):
    x = ctx.alloc(64, torch.float32)
    x[0].copy_(torch.arange(64, dtype=torch.float32))
    x[1].copy_(torch.arange(64, dtype=torch.float32) * -1 - 1)
    out = torch.zeros(64, dtype=torch.float32)
    ctx.rank = 0
    interp.k_symm_load[(1, )](x[0], out, 1, BLOCK=64)
    assert torch.equal(out, x[1])
    interp.k_symm_load[(1, )](x[0], out, 0, BLOCK=64)
    assert torch.equal(out, x[0])


def test_put_notify_wait_consume(interp, ctx):
    data = ctx.alloc(32, torch.float32)
    sig = ctx.alloc(4, torch.int64)
    src = torch.arange(32, dtype=torch.float32) + 7
    ctx.rank = 0  # producer: write into rank 1's partition, then raise rank 1's signal
    interp.k_put_notify[(1, )](src, data[0], sig[0], 1, 5, BLOCK=32, OP="set", SCOPE="intra_node")
    assert torch.equal(data[1], src) and sig[1].tolist() == [5, 0, 0, 0]
    interp.k_put_notify[(1, )](src, data[0], sig[0], 1, 3, BLOCK=32, OP="add", SCOPE="inter_node")
    assert sig[1].tolist() == [8, 0, 0, 0]
    ctx.rank = 1  # consumer: wait for 8, then read through the consumed pointer
    out = torch.zeros(32, dtype=torch.float32)
    interp.k_wait_read[(1, )](sig[1], 1, 8, data[1], out, BLOCK=32)
    assert torch.equal(out, src)


def test_notify_gpu_scope_is_local(interp, ctx):
    sig = ctx.alloc(1, torch.int64)
    src = torch.zeros(8)
    data = ctx.alloc(8, torch.float32)
    ctx.rank = 0
    interp.k_put_notify[(1, )](src, data[0], sig[0], 1, 9, BLOCK=8, OP="set", SCOPE="gpu")
    assert sig[0].item() == 9 and sig[1].item() == 0


def test_wait_many_32bit_signals(interp, ctx):
    sig = ctx.alloc(40, torch.int32)  # more than 32 barriers, runtime count
    sig[0].fill_(1)
    out = torch.zeros(8, dtype=torch.float32)
    data = torch.arange(8, dtype=torch.float32)
    interp.k_wait_read[(1, )](sig[0], 40, 1, data, out, BLOCK=8)
    assert torch.equal(out, data)


def test_wait_timeout_names_everything(interp, ctx):
    sig = ctx.alloc(2, torch.int64)
    sig[0][0] = 1
    sig[0][1] = 3
    out = torch.zeros(8)
    with pytest.raises(Exception) as ei:
        interp.k_wait_read[(1, )](sig[0], 2, 1, torch.zeros(8), out, BLOCK=8)
    msg = str(ei.value)
    assert "wait" in msg and "timed out" in msg
    # the context's waiter (the same one the simulator runtime uses): the slot, its place on the heap, the expected
    # and the last seen value, the rank
    assert f"{sig[0].data_ptr() + 8:#x}" in msg and "expected == 1" in msg and "last seen 3" in msg
    assert "rank 0" in msg and "symmetric offset 0x8 in rank 0's partition" in msg


def test_extern_call_needs_registration(interp, ctx):
    from triton_dist.backends.sim import language as simlang

    out = torch.zeros(4, dtype=torch.int32)
    simlang.unregister_extern("my_device_fn")
    with pytest.raises(Exception, match="register_extern"):
        interp.k_extern[(1, )](out, BLOCK=4)
    simlang.register_extern("my_device_fn", lambda x: x * 10 + 1)
    try:
        interp.k_extern[(1, )](out, BLOCK=4)
    finally:
        simlang.unregister_extern("my_device_fn")
    assert out.tolist() == [1, 11, 21, 31]


def test_bad_input_under_interpreter(interp, ctx):
    sig = ctx.alloc(1, torch.int64)
    with pytest.raises(Exception, match="scope='warp'"):
        interp.k_wait_scope[(1, )](sig[0], SCOPE="warp")


def test_store_flagged_then_load_flagged(interp, ctx):
    words = ctx.alloc(16, torch.int64)
    src = torch.arange(16, dtype=torch.float32) - 3.5
    ctx.rank = 0  # writer: 12 flagged words into rank 1's partition, the last 4 masked off
    interp.k_store_flagged[(1, )](src, words[0], 1, 7, 12, BLOCK=16)
    bits = src.view(torch.int32).to(torch.int64) & 0xFFFFFFFF
    assert words[1][:12].tolist() == ((7 << 32) | bits[:12]).tolist()
    assert words[1][12:].tolist() == [0] * 4 and words[0].count_nonzero() == 0
    ctx.rank = 1  # reader: the values come back as their 32-bit patterns
    out = torch.full((16, ), -1, dtype=torch.int32)
    interp.k_load_flagged[(1, )](words[1], out, 7, 12, BLOCK=16)
    assert out[:12].tolist() == src[:12].view(torch.int32).tolist() and out[12:].tolist() == [-1] * 4


def test_load_flagged_timeout_names_the_op_and_the_word(interp, ctx, monkeypatch):
    words = ctx.alloc(8, torch.int64)
    words[0][:8] = (3 << 32) | 5  # flagged with an older flag
    monkeypatch.setenv("TRITON_DIST_BOUNDED_WAIT", "100")
    with pytest.raises(Exception) as ei:
        interp.k_load_flagged[(1, )](words[0], torch.zeros(8, dtype=torch.int32), 4, 8, BLOCK=8)
    msg = str(ei.value)
    assert "dl.load_flagged(flag=4)" in msg and "timed out after 0.1 s" in msg, msg
    assert "expected == 4, last seen 3" in msg and "TRITON_DIST_BOUNDED_WAIT=100" in msg, msg


def test_load_flagged_tagged_reports_another_tag_of_its_epoch_at_once(interp, ctx):
    """tag_bits=16: flags are epoch << 16 | tag. Words of this epoch with this tag are taken; one of this epoch with
    another tag is reported at once (SimSignalMismatch naming both tags), even while other words are missing; words
    of another epoch are waited for (a timeout)."""
    import time

    from triton_dist.backends.sim.context import SimSignalMismatch

    words = ctx.alloc(8, torch.int64)
    flag = (3 << 16) | 100
    words[0][:8] = (flag << 32) | 7
    out = torch.zeros(8, dtype=torch.int32)
    interp.k_load_flagged_tagged[(1, )](words[0], out, flag, 8, BLOCK=8, TAG=16)
    assert out.tolist() == [7] * 8
    words[0][:4] = (((3 << 16) | 101) << 32) | 7  # the peer's call #3 carried 101 elements
    words[0][4:] = 0  # and these never arrive
    t0 = time.monotonic()
    with pytest.raises(Exception) as ei:
        interp.k_load_flagged_tagged[(1, )](words[0], out, flag, 8, BLOCK=8, TAG=16)
    assert time.monotonic() - t0 < 5
    msg = str(ei.value)
    assert "ranks disagree" in msg and "waits for call #3 with tag 100" in msg, msg
    assert "the peer's signal for the same call carries tag 101" in msg and "mod 2**16" in msg, msg
    assert isinstance(ei.value, SimSignalMismatch) or "SimSignalMismatch" in msg, msg
    # the missing words come first: the report still names the word of this epoch with the other tag, not a
    # missing one (the CI flake of 2026-12-05: 'already at call #0 (tag 0)' when the peer had not finished writing)
    words[0][:6] = 0
    words[0][6:] = (((3 << 16) | 101) << 32) | 7
    with pytest.raises(Exception) as ei:
        interp.k_load_flagged_tagged[(1, )](words[0], out, flag, 8, BLOCK=8, TAG=16)
    assert "the peer's signal for the same call carries tag 101" in str(ei.value), str(ei.value)
    words[0][:8] = (((2 << 16) | 100) << 32) | 7  # an older call's words: still waiting for call #3
    ctx.wait_timeout_s = 0.2
    with pytest.raises(Exception, match=r"timed out.*expected epoch 3, last seen flag 131172 \(epoch 2\)"):
        interp.k_load_flagged_tagged[(1, )](words[0], out, flag, 8, BLOCK=8, TAG=16)


def test_flagged_ops_reject_bad_operands(interp, ctx):
    words32 = ctx.alloc(8, torch.int32)
    with pytest.raises(Exception, match="flagged words are 64-bit"):
        interp.k_load_flagged[(1, )](words32[0], torch.zeros(8, dtype=torch.int32), 1, 8, BLOCK=8)
    words = ctx.alloc(8, torch.int64)
    with pytest.raises(Exception, match=r"tag_bits=31: expected a Python int in \[0, 30\]"):
        interp.k_load_flagged_tagged[(1, )](words[0], torch.zeros(8, dtype=torch.int32), 1, 8, BLOCK=8, TAG=31)
    with pytest.raises(Exception, match="value must be 32-bit"):
        interp.k_store_flagged[(1, )](torch.zeros(8, dtype=torch.float64), words[0], 1, 1, 8, BLOCK=8)


def test_prefetch_l2_is_a_hint_and_checks_its_operands(interp):
    """dl.prefetch_l2 (one range; several ranges, some masked off) changes nothing the program computes; bad
    operands (a block of pointers, a negative size, a block mask, not a pointer) are refused at trace time with the
    op's name."""
    x = torch.arange(40, dtype=torch.float32)
    for how in ("scalar", "ranges"):
        out = torch.zeros(40, dtype=torch.float32)
        interp.k_prefetch_then_copy[(1, )](x, out, 40, BLOCK=64, HOW=how)
        assert torch.equal(out, x)
    for how, match in (("bad_bytes", r"dl.prefetch_l2: num_bytes=-16 must be in \[0, 2\*\*31\)"),
                       ("block", "dl.prefetch_l2: ptr must be a scalar pointer"),
                       ("bad_mask", "dl.prefetch_l2: mask must be a boolean scalar or None"),
                       ("not_ptr", "dl.prefetch_l2: ptr must be a pointer")):
        with pytest.raises(Exception, match=match):
            interp.k_prefetch_then_copy[(1, )](x, torch.zeros(40), 40, BLOCK=64, HOW=how)


# ---------------------------------------------------------------------------------------- multi-process (runtime)
# Real rank processes of the simulator runtime (fixture sim_ranks from conftest_sim); kernels are interpreted there.

try:
    from conftest_sim import sim_ranks  # noqa: F401  (fixture)
    _HAVE_POOL = True
except Exception:  # pragma: no cover - runtime not there yet
    _HAVE_POOL = False


def _rank_ring(iters):
    """Inside a rank process: a ring ping-pong of ``iters`` rounds via notify/wait, then every op once."""
    import _language_sim_kernels as k

    from triton_dist.runtime.sim.backend import SimBackend

    b = SimBackend()
    sig = b.create_tensor((1, ), torch.int64)
    sig.zero_()
    data = b.create_tensor((16, ), torch.float32)
    data.fill_(-1)
    ids = torch.zeros(2, dtype=torch.int32)
    b.barrier_all_on_stream()
    k.k_ring[(1, )](sig, data, ITERS=iters, BLOCK=16)
    k.k_rank[(1, )](ids)
    b.barrier_all_on_stream()
    return int(sig.item()), data.tolist(), ids.tolist()


@pytest.mark.skipif(not _HAVE_POOL, reason="simulator runtime (conftest_sim) not available")
@pytest.mark.parametrize("world", [2, 4])
def test_ring_multiprocess(sim_ranks, world):  # noqa: F811
    iters = 10
    res = sim_ranks.run(world, _rank_ring, iters)
    for r, (sig, data, ids) in enumerate(res):
        prev = (r - 1) % world
        assert sig == iters, (r, sig)
        assert data == [float(prev * 1000 + iters)] * 16, (r, data[:4])
        assert ids == [r, world]


# ------------------------------------------------------------------------------------- error text (issue 15)
# triton_dist.jit kernels: with a context set they run through the simulator's grid runner (run_grid), as in a rank
# process. One error, one line: the user's call, its arguments, the rank and the fix; no nested InterpreterError.

@pytest.fixture
def run_ctx(ctx):
    import threading

    ctx.abort_event = threading.Event()  # run_grid aborts the other programs' waits through it
    return ctx


def _one_line(exc):
    msg = str(exc)
    assert "\n" not in msg and "\\" not in msg, msg
    assert "InterpreterError(" not in msg, msg
    return msg


def test_wait_timeout_in_device_function_is_one_line(interp, run_ctx):
    sig = run_ctx.alloc(1, torch.int64)
    with pytest.raises(Exception) as ei:
        interp.kd_wait_in_device_fn[(1, )](sig[0])
    msg = _one_line(ei.value)
    assert msg.startswith("program (0, 0, 0): SimWaitTimeout: [triton_dist sim] rank 0: dl.wait("), msg
    assert "expected == 1, last seen 0" in msg


def test_bounded_wait_timeout_names_the_bounded_wait_variable(interp, run_ctx, monkeypatch):
    sig = run_ctx.alloc(1, torch.int64)
    monkeypatch.setenv("TRITON_DIST_BOUNDED_WAIT", "150")  # read when the kernel is traced: at the launch here
    with pytest.raises(Exception) as ei:
        interp.kd_wait_in_device_fn[(1, )](sig[0])
    msg = _one_line(ei.value)
    assert "timed out after 0.15 s" in msg and "TRITON_DIST_BOUNDED_WAIT=150" in msg, msg
    assert "TRITON_DIST_SIM_WAIT_TIMEOUT" not in msg, msg
    monkeypatch.delenv("TRITON_DIST_BOUNDED_WAIT")
    with pytest.raises(Exception) as ei:  # the simulator's own bound (the context's wait_timeout_s)
        interp.kd_wait_in_device_fn[(1, )](sig[0])
    msg = _one_line(ei.value)
    assert "timed out after 0.3 s" in msg and "TRITON_DIST_SIM_WAIT_TIMEOUT" in msg, msg
    assert "TRITON_DIST_BOUNDED_WAIT" not in msg, msg


def test_signal_wait_until_honours_bounded_wait(interp, run_ctx, monkeypatch):
    sig = run_ctx.alloc(1, torch.int64)
    out = torch.zeros(1, dtype=torch.int64)
    run_ctx.wait_timeout_s = 5.0  # the simulator's own bound: NOT the one that applies below
    monkeypatch.setenv("TRITON_DIST_BOUNDED_WAIT", "150")
    with pytest.raises(Exception) as ei:
        interp.kd_signal_wait_until[(1, )](sig[0], 1, out)
    msg = _one_line(ei.value)
    assert "libshmem_device.signal_wait_until(cmp=eq, cmp_val=1) timed out after 0.15 s" in msg, msg
    assert "TRITON_DIST_BOUNDED_WAIT=150" in msg and "TRITON_DIST_SIM_WAIT_TIMEOUT" not in msg, msg


def test_notify_on_non_symmetric_tensor_names_notify_and_the_fix(interp, run_ctx):
    plain = torch.zeros(1, dtype=torch.int64)  # not on the symmetric heap
    with pytest.raises(Exception) as ei:
        interp.kd_notify[(1, )](plain, 1, SCOPE="intra_node")
    msg = _one_line(ei.value)
    assert "symm_at" not in msg, msg
    assert "rank 0: dl.notify(ptr=" in msg and f"{plain.data_ptr():#x}" in msg, msg
    assert "rank=1" in msg and "signal=1" in msg and "sig_op='set'" in msg and "comm_scope='intra_node'" in msg, msg
    assert "not a symmetric buffer of rank 0" in msg and "triton_dist.utils.nvshmem_create_tensor" in msg, msg
    assert plain.item() == 0
    sig = run_ctx.alloc(1, torch.int64)  # a symmetric one still signals the peer's copy
    interp.kd_notify[(1, )](sig[0], 1, SCOPE="intra_node")
    assert sig[1].item() == 1 and sig[0].item() == 0


def test_symm_at_on_non_symmetric_tensor_names_the_fix(interp, run_ctx):
    plain = torch.zeros(1, dtype=torch.float32)
    with pytest.raises(Exception) as ei:
        interp.kd_symm_at[(1, )](plain, 1, torch.zeros(1))
    msg = _one_line(ei.value)
    assert "rank 0: dl.symm_at(ptr=" in msg and "rank=1" in msg and f"{plain.data_ptr():#x}" in msg, msg
    assert "not a symmetric buffer of rank 0" in msg and "triton_dist.utils.nvshmem_create_tensor" in msg, msg


def _rank_notify_plain_tensor():
    """Inside a rank process (the real symmetric heap): dl.notify on a tensor that is not symmetric."""
    import _language_sim_kernels as k

    plain = torch.zeros(1, dtype=torch.int64)
    try:
        k.kd_notify[(1, )](plain, 0, SCOPE="intra_node")
    except Exception as exc:  # noqa: BLE001 - the text is what is tested
        return str(exc), plain.data_ptr()
    return None, plain.data_ptr()


@pytest.mark.skipif(not _HAVE_POOL, reason="simulator runtime (conftest_sim) not available")
def test_notify_on_non_symmetric_tensor_multiprocess(sim_ranks):  # noqa: F811
    for r, (msg, addr) in enumerate(sim_ranks.run(2, _rank_notify_plain_tensor)):
        assert msg is not None, r
        _one_line(msg)
        assert "symm_at" not in msg, msg
        assert f"rank {r}: dl.notify(ptr={addr:#x} (not on the symmetric heap), rank=0, signal=1" in msg, msg
        assert f"not a symmetric buffer of rank {r}" in msg and "nvshmem_create_tensor" in msg, msg


# ------------------------------------------------------------------ a signal the host sets after the launch (issue 16)
# Simulator launches are synchronous: the launch returns when the kernel has finished, so a signal the host sets after
# launching the kernel that waits for it is never seen during the launch. The wait ends (the context's bound) with one
# line naming the kernel, the signal and that limit, instead of hanging or timing out without the reason.

def _sync_launch_message(launch, sig):
    with pytest.raises(Exception) as ei:
        launch()
        sig.fill_(1)  # what the host of a GPU program would do next: never reached on the simulator
    return _one_line(ei.value)


@pytest.mark.parametrize("kernel", ["kd_wait_in_device_fn", "k_wait_read"])
def test_wait_for_a_signal_the_host_sets_after_the_launch_says_launches_are_synchronous(interp, run_ctx, kernel):
    sig = run_ctx.alloc(1, torch.int64)
    if kernel == "kd_wait_in_device_fn":  # triton_dist.jit: the simulator's grid runner
        launch = lambda: interp.kd_wait_in_device_fn[(1, )](sig[0])  # noqa: E731
    else:  # plain triton.jit: Triton's sequential executor
        launch = lambda: interp.k_wait_read[(1, )](sig[0], 1, 1, torch.zeros(8), torch.zeros(8), BLOCK=8)  # noqa: E731
    msg = _sync_launch_message(launch, sig[0])
    assert f"kernel {kernel}" in msg and f"{sig[0].data_ptr():#x}" in msg and "expected == 1, last seen 0" in msg, msg
    assert "simulator launches are synchronous" in msg and "before the launch" in msg, msg


def test_ld_spin_on_a_flag_the_host_sets_after_the_launch_ends_with_the_same_error(interp, run_ctx):
    """A hand-written spin (``while ld(flag) != 1``) is bounded like dl.wait: the same load of the same address seeing
    the same value for the context's wait timeout ends the launch (it spun forever before)."""
    flag = run_ctx.alloc(1, torch.int32)
    out = torch.zeros(1, dtype=torch.int32)
    msg = _sync_launch_message(lambda: interp.k_spin_ld[(1, )](flag[0], out), flag[0])
    assert "kernel k_spin_ld" in msg and f"{flag[0].data_ptr():#x}" in msg and "last seen 0" in msg, msg
    assert "simulator launches are synchronous" in msg and "TRITON_DIST_SIM_WAIT_TIMEOUT" in msg, msg
    assert out.item() == 0


# ------------------------------------------------------------------------ tagged waits (issue 15 point 2)
def _tagged(epoch, tag):
    return epoch << 24 | tag


def test_tagged_wait_passes_on_its_value(interp, run_ctx):
    sig = run_ctx.alloc(3, torch.int64)
    sig[0].copy_(torch.tensor([_tagged(5, 100)] * 3))
    out = torch.zeros(1, dtype=torch.int64)
    interp.kd_wait_tagged[(1, )](sig[0], 3, _tagged(5, 100), out, TAG=24)
    assert out.item() == 1


def test_tagged_wait_reports_another_tag_of_its_epoch_at_once(interp, run_ctx):
    """A signal of this call's epoch with another tag: the ranks disagree; reported at once (not after the wait
    timeout, which would raise SimWaitTimeout), one line with both tags and the fix."""
    from triton_dist.backends.sim.context import SimSignalMismatch

    run_ctx.wait_timeout_s = 30.0
    sig = run_ctx.alloc(2, torch.int64)
    sig[0].copy_(torch.tensor([_tagged(5, 100), _tagged(5, 101)]))
    out = torch.zeros(1, dtype=torch.int64)
    with pytest.raises(Exception) as ei:
        interp.kd_wait_tagged[(1, )](sig[0], 2, _tagged(5, 100), out, TAG=24)
    err = ei.value
    while err is not None and not isinstance(err, SimSignalMismatch):
        err = err.__cause__ or err.__context__
    assert err is not None, ei.value
    assert (err.rank, err.expected_epoch, err.expected_tag, err.seen_epoch, err.seen_tag) == (0, 5, 100, 5, 101)
    msg = _one_line(ei.value)
    assert "rank 0: ranks disagree in kernel kd_wait_tagged: dl.wait(scope=sys, semantic=acquire, tag_bits=24)" in msg
    assert f"{sig[0].data_ptr() + 8:#x}" in msg, msg
    assert "waits for call #5 with tag 100 (this rank's" in msg and "carries tag 101" in msg, msg
    assert "every rank must make the same calls with the same shapes" in msg, msg
    assert out.item() == 0


def test_tagged_wait_reports_a_later_epoch(interp, run_ctx):
    run_ctx.wait_timeout_s = 30.0
    sig = run_ctx.alloc(1, torch.int64)
    sig[0].fill_(_tagged(7, 100))
    with pytest.raises(Exception) as ei:
        interp.kd_wait_tagged[(1, )](sig[0], 1, _tagged(5, 100), torch.zeros(1, dtype=torch.int64), TAG=24)
    msg = _one_line(ei.value)
    assert "already at call #7 (tag 100): the ranks made different numbers of calls" in msg, msg


def test_tagged_wait_waits_for_an_earlier_epoch(interp, run_ctx):
    """A signal still at an earlier epoch is not an error: the peer has not got there yet (timeout as before)."""
    sig = run_ctx.alloc(1, torch.int64)
    sig[0].fill_(_tagged(4, 101))
    with pytest.raises(Exception) as ei:
        interp.kd_wait_tagged[(1, )](sig[0], 1, _tagged(5, 100), torch.zeros(1, dtype=torch.int64), TAG=24)
    msg = _one_line(ei.value)
    assert "SimWaitTimeout" in msg and f"expected >= {_tagged(5, 0)}, last seen {_tagged(4, 101)}" in msg, msg


def test_tagged_wait_checks_tag_bits(interp, run_ctx):
    sig = run_ctx.alloc(1, torch.int64)
    with pytest.raises(Exception, match=r"dl.wait: tag_bits=63: expected a Python int in \[0, 62\]"):
        interp.kd_wait_tagged[(1, )](sig[0], 1, 1, torch.zeros(1, dtype=torch.int64), TAG=63)


def test_wait_on_an_exited_peer_is_named(interp, run_ctx, monkeypatch):
    """The simulator's waits check every PEER_CHECK_S that the peers' processes live: a wait on a rank whose
    process exited raises one line naming it, well before the wait timeout."""
    import time

    run_ctx.wait_timeout_s = 30.0
    monkeypatch.setattr(run_ctx, "exited_peer", lambda: (1, 4242), raising=False)
    sig = run_ctx.alloc(1, torch.int64)
    t0 = time.monotonic()
    with pytest.raises(Exception) as ei:
        interp.kd_wait_in_device_fn[(1, )](sig[0])
    assert time.monotonic() - t0 < 5
    msg = _one_line(ei.value)
    assert "SimPeerExited: [triton_dist sim] rank 0: dl.wait(scope=sys, semantic=acquire) in kernel " in msg, msg
    assert "waits for peer rank 1, whose process (pid 4242) has exited" in msg, msg
