"""Simulator executions of every ``libshmem_device`` function at 2 and 4 ranks, results checked.

One rank-side function (``_every_function``) runs all checks per spawn (rank processes are reused through the
``sim_ranks`` fixture), so the file stays well under a minute and a half on 2 cores. Kernels are interpreted in the
rank processes (TRITON_INTERPRET=1 from birth).
"""
import pytest
import torch
import triton.language as tl

import triton_dist
from triton_dist.language._libshmem import SCALAR_TYPES
from triton_dist.language.extra import libshmem_device as shmem
from triton_dist.language.extra.language_extra import __syncthreads, tid
from conftest_sim import sim_ranks  # noqa: F401  (fixture)

pytestmark = pytest.mark.sim

# The wait bound only turns a hang into an error; generous so a loaded 2-core CI machine never trips it.
ENV = {"TRITON_DIST_SIM_WAIT_TIMEOUT": "90", "TRITON_DIST_SIM_SYMMETRIC_SIZE": "8M"}
N = 64  # floats per buffer


# --------------------------------------------------------------------------------------------------- kernels

@triton_dist.jit
def k_info(out):
    tl.store(out + 0, shmem.my_pe())
    tl.store(out + 1, shmem.n_pes())
    tl.store(out + 2, shmem.team_my_pe(shmem.NVSHMEM_TEAM_WORLD))
    tl.store(out + 3, shmem.team_n_pes(shmem.NVSHMEM_TEAM_WORLD))
    tl.store(out + 4, shmem.team_my_pe(shmem.NVSHMEMX_TEAM_NODE))
    tl.store(out + 5, shmem.team_n_pes(shmem.NVSHMEMX_TEAM_NODE))
    tl.store(out + 6, shmem.team_my_pe(shmem.NVSHMEM_TEAM_SHARED))


@triton_dist.jit
def k_remote_ptr(buf, out, addrs, pe, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    p = shmem.remote_ptr(buf, pe)
    tl.store(addrs, p.to(tl.int64, bitcast=True))
    mc = shmem.remote_mc_ptr(shmem.NVSHMEM_TEAM_WORLD, buf)
    tl.store(addrs + 1, mc.to(tl.int64, bitcast=True))
    if p.to(tl.int64, bitcast=True) != 0:
        tl.store(out + offs, tl.load(p + offs))


#: every put / get variant, as the GPU tier and the CPU compile test also run them: passed to ``k_rma`` as the
#: constexpr ``FN`` (the function object itself, never its name)
RMA_FUNCTIONS = (shmem.putmem_block, shmem.putmem_nbi_block, shmem.putmem_warp, shmem.putmem_nbi_warp, shmem.putmem,
                 shmem.putmem_nbi, shmem.getmem_block, shmem.getmem_nbi_block, shmem.getmem_warp,
                 shmem.getmem_nbi_warp, shmem.getmem, shmem.getmem_nbi, shmem.putmem_wg, shmem.putmem_nbi_wg,
                 shmem.putmem_wave, shmem.putmem_nbi_wave, shmem.getmem_wg, shmem.getmem_nbi_wg, shmem.getmem_wave,
                 shmem.getmem_nbi_wave)


def rma_launch_args(fn, nxt, prv):
    """``(pe, constexprs)`` of the ``k_rma`` launch that runs put / get ``fn`` (puts go to the next rank, gets read
    the previous one; ``nbi`` variants are completed by ``quiet``, ``putmem_nbi`` after a ``fence``)."""
    name = fn.__name__
    return (nxt if name.startswith("put") else prv), dict(FN=fn, NBI="_nbi" in name, FENCE=name == "putmem_nbi")


@triton_dist.jit
def k_rma(dest, src, nbytes, pe, FN: tl.constexpr, NBI: tl.constexpr = False, FENCE: tl.constexpr = False):
    """``FN``: one libshmem_device put / get function (a constexpr: each launch calls exactly that one); a
    non-blocking one (``NBI``) is completed by ``quiet``, after a ``fence`` where ``FENCE``."""
    FN(dest, src, nbytes, pe)
    if FENCE:
        shmem.fence()
    if NBI:
        shmem.quiet()


@triton_dist.jit
def k_put_signal_then_wait(dest, src, sig, out, nbytes, pe, value, expect, BLOCKING: tl.constexpr, OP: tl.constexpr,
                           BLOCK: tl.constexpr):
    """Put to the peer with a signal, then wait for our own signal and read what the peer put into ``dest``."""
    if BLOCKING:
        shmem.putmem_signal_block(dest, src, nbytes, sig, value, OP, pe)
    else:
        shmem.putmem_signal_nbi_block(dest, src, nbytes, sig, value, OP, pe)
    seen = shmem.signal_wait_until(sig, shmem.NVSHMEM_CMP_EQ, expect)
    offs = tl.arange(0, BLOCK)
    tl.store(out + offs, tl.load(dest + offs))
    tl.store(out + BLOCK, seen.to(tl.float32))


@triton_dist.jit
def k_signal_op(sig, value, pe, OP: tl.constexpr):
    if tid(0) == 0:  # a thread variant: one call per program (unguarded, an ADD would add once per thread)
        shmem.signal_op(sig, value, OP, pe)


@triton_dist.jit
def k_wait(sig, out, value, CMP: tl.constexpr):
    tl.store(out, shmem.signal_wait_until(sig, CMP, value).to(tl.int64))


@triton_dist.jit
def k_store_barrier_load(buf, stage, out, pe, value, FN: tl.constexpr, BLOCK: tl.constexpr):
    """Put ``value + i`` into the peer's ``buf`` (a non-blocking put: the barrier completes it), barrier, read our
    own ``buf``. Thread variants are called by thread 0 and warp variants by warp 0 (one caller per PE), after a
    CTA barrier (the puts of every thread are issued) and followed by one (every thread waits for the barrier)."""
    offs = tl.arange(0, BLOCK)
    tl.store(stage + offs, tl.zeros([BLOCK], tl.float32) + value + offs)
    __syncthreads()
    shmem.putmem_nbi(buf, stage, BLOCK * 4, pe)
    __syncthreads()
    if FN == "barrier_all_block":
        shmem.barrier_all_block()
    elif FN == "barrier_block":
        shmem.barrier_block(shmem.NVSHMEM_TEAM_WORLD)
    elif FN == "sync_all_block":
        shmem.quiet()  # the sync functions order stores but do not complete puts: quiet does
        __syncthreads()
        shmem.sync_all_block()
    elif FN == "team_sync_block":
        shmem.quiet()
        __syncthreads()
        shmem.team_sync_block(shmem.NVSHMEMX_TEAM_NODE)
    elif FN == "barrier_all_warp" or FN == "barrier_warp" or FN == "sync_all_warp" or FN == "team_sync_warp":
        if tid(0) < 32:
            if FN == "barrier_all_warp":
                shmem.barrier_all_warp()
            elif FN == "barrier_warp":
                shmem.barrier_warp(shmem.NVSHMEM_TEAM_WORLD)
            elif FN == "sync_all_warp":
                shmem.quiet()
                shmem.sync_all_warp()
            else:
                shmem.quiet()
                shmem.team_sync_warp(shmem.NVSHMEMX_TEAM_NODE)
    else:
        if tid(0) == 0:
            if FN == "barrier_all":
                shmem.barrier_all()
            elif FN == "barrier_world":
                shmem.barrier(shmem.NVSHMEM_TEAM_WORLD)
            elif FN == "barrier_node":
                shmem.barrier(shmem.NVSHMEMX_TEAM_NODE)
            elif FN == "team_sync":
                shmem.quiet()
                shmem.team_sync(shmem.NVSHMEMX_TEAM_NODE)
            else:
                tl.static_assert(FN == "sync_all")
                shmem.quiet()
                shmem.sync_all()
    __syncthreads()
    tl.store(out + offs, tl.load(buf + offs))


#: the barrier / sync functions ``k_store_barrier_load`` runs (``FN``) -> the team whose peers it exchanges with
BARRIER_FUNCTIONS = {"barrier_all": "world", "barrier_all_block": "world", "barrier_all_warp": "world",
                     "barrier_world": "world", "barrier_node": "node", "sync_all": "world", "barrier_block": "world",
                     "barrier_warp": "world", "sync_all_block": "world", "sync_all_warp": "world",
                     "team_sync": "node", "team_sync_block": "node", "team_sync_warp": "node"}


@triton_dist.jit
def k_broadcast(dest, src, nbytes, root, TEAM: tl.constexpr):
    rc = shmem.broadcastmem_block(TEAM, dest, src, nbytes, root)
    tl.device_assert(rc == 0)


@triton_dist.jit
def k_fcollect(dest, src, nbytes, TEAM: tl.constexpr):
    rc = shmem.fcollectmem_block(TEAM, dest, src, nbytes)
    tl.device_assert(rc == 0)


@triton_dist.jit
def k_every_program_barrier():
    shmem.barrier_all_block()


@triton_dist.jit
def k_guarded_barrier(out):
    """Program 0 alone runs the collective (the supported pattern); every program then writes its flag."""
    if tl.program_id(0) == 0:
        shmem.barrier_all_block()
    tl.store(out + tl.program_id(0), 1)


@triton_dist.jit
def k_scalar_put(buf, value, pe, P: tl.constexpr):
    if tid(0) == 0:
        P(buf, value, pe)


@triton_dist.jit
def k_scalar_get(buf, out, pe, G: tl.constexpr):
    tl.store(out, G(buf, pe))


#: the signal-put functions beyond the block pair, with their scope (thread variants are called by thread 0)
PUT_SIGNAL_FUNCTIONS = (shmem.putmem_signal, shmem.putmem_signal_nbi, shmem.putmem_signal_warp,
                        shmem.putmem_signal_nbi_warp, shmem.putmem_signal_wg, shmem.putmem_signal_nbi_wg,
                        shmem.putmem_signal_wave, shmem.putmem_signal_nbi_wave, shmem.ulong_put_signal)


@triton_dist.jit
def k_put_signal_fn(dest, src, sig, out, nbytes, pe, value, FN: tl.constexpr, THREAD: tl.constexpr,
                    UNIT: tl.constexpr, NBI: tl.constexpr, BLOCK: tl.constexpr):
    """``FN`` puts ``nbytes`` (``nbytes // UNIT`` elements) to ``pe`` with signal SET ``value`` (every warp / the
    whole program for warp / block variants: the same bytes and the same SET), then waits for our own signal."""
    if THREAD:
        if tid(0) == 0:
            FN(dest, src, nbytes // UNIT, sig, value, shmem.NVSHMEM_SIGNAL_SET, pe)
    else:
        FN(dest, src, nbytes // UNIT, sig, value, shmem.NVSHMEM_SIGNAL_SET, pe)
    if NBI:
        shmem.quiet()
    seen = shmem.signal_wait_until(sig, shmem.NVSHMEM_CMP_EQ, value)
    offs = tl.arange(0, BLOCK)
    tl.store(out + offs, tl.load(dest + offs))
    tl.store(out + BLOCK, seen.to(tl.float32))


@triton_dist.jit
def k_translate(out, pe, n):
    tl.store(out + 0, shmem.team_translate_pe(shmem.NVSHMEMX_TEAM_NODE, pe, shmem.NVSHMEM_TEAM_WORLD))
    tl.store(out + 1, shmem.team_translate_pe(shmem.NVSHMEM_TEAM_WORLD, pe, shmem.NVSHMEMX_TEAM_NODE))
    tl.store(out + 2, shmem.team_translate_pe(shmem.NVSHMEM_TEAM_WORLD, n, shmem.NVSHMEM_TEAM_WORLD))


#: broadcast / fcollect functions beyond the block *mem pair: (function, scope, typed)
COLLECTIVE_FUNCTIONS = ((shmem.broadcastmem, "thread", False), (shmem.broadcastmem_warp, "warp", False),
                        (shmem.broadcast, "thread", True), (shmem.broadcast_warp, "warp", True),
                        (shmem.broadcast_block, "block", True), (shmem.fcollectmem, "thread", False),
                        (shmem.fcollectmem_warp, "warp", False), (shmem.fcollect, "thread", True),
                        (shmem.fcollect_warp, "warp", True), (shmem.fcollect_block, "block", True))


@triton_dist.jit
def k_collective_fn(dest, src, n, root, TEAM: tl.constexpr, FN: tl.constexpr, SCOPE: tl.constexpr,
                    BROADCAST: tl.constexpr):
    """One caller per PE: thread 0 for a thread variant, warp 0 for a warp variant, the program for a block one."""
    if SCOPE == "block":
        if BROADCAST:
            rc = FN(TEAM, dest, src, n, root)
        else:
            rc = FN(TEAM, dest, src, n)
        tl.device_assert(rc == 0)
    else:
        if tid(0) < (1 if SCOPE == "thread" else 32):
            if BROADCAST:
                FN(TEAM, dest, src, n, root)
            else:
                FN(TEAM, dest, src, n)
    __syncthreads()


#: the reference's proxy-path puts: the ordinary puts' semantics (``k_rma`` / ``k_put_signal_fn`` run them)
RMA_PROXY_FUNCTIONS = (shmem.putmem_rma, shmem.putmem_rma_nbi, shmem.putmem_rma_warp, shmem.putmem_rma_nbi_warp,
                       shmem.putmem_rma_block, shmem.putmem_rma_nbi_block)
PUT_SIGNAL_PROXY_FUNCTIONS = (shmem.putmem_signal_rma, shmem.putmem_signal_rma_nbi, shmem.putmem_signal_rma_warp,
                              shmem.putmem_signal_rma_nbi_warp, shmem.putmem_signal_rma_block,
                              shmem.putmem_signal_rma_nbi_block)


@triton_dist.jit
def k_reference_sync(buf, stage, sig, out, ctx, pe, value, expect, BLOCK: tl.constexpr):
    """The reference's set_rocshmem_ctx / quiet_pe / uint64_wait_until_equals / barrier_all_vec: put to ``pe``,
    complete it with ``quiet_pe``, SET the peer's signal to ``value``, wait for our own to equal ``expect`` (the
    value the previous PE sends) and read what it put; then put into the second half of the peer's ``buf`` and meet at ``barrier_all_vec``, which completes it."""
    shmem.set_rocshmem_ctx(ctx)
    offs = tl.arange(0, BLOCK)
    tl.store(stage + offs, tl.zeros([BLOCK], tl.float32) + value + offs)
    tl.store(stage + BLOCK + offs, tl.zeros([BLOCK], tl.float32) - value - offs)
    __syncthreads()
    if tid(0) == 0:
        shmem.putmem_nbi(buf, stage, BLOCK * 4, pe)
        shmem.quiet_pe(pe)
        shmem.signal_op(sig, value, shmem.NVSHMEM_SIGNAL_SET, pe)
    seen = shmem.uint64_wait_until_equals(sig, expect)
    tl.store(out + offs, tl.load(buf + offs))
    tl.store(out + 2 * BLOCK, seen.to(tl.float32))
    __syncthreads()
    if tid(0) == 0:
        shmem.putmem_nbi(buf + BLOCK, stage + BLOCK, BLOCK * 4, pe)
    __syncthreads()
    shmem.barrier_all_vec()
    tl.store(out + BLOCK + offs, tl.load(buf + BLOCK + offs))


# --------------------------------------------------------------------------------------------------- rank side

def _pattern(rank, n=N):
    return torch.arange(n, dtype=torch.float32) + 1000.0 * (rank + 1)


def _every_function():
    """Inside a rank process: execute every libshmem_device function and return a list of failures."""
    from triton_dist.runtime.sim import current
    from triton_dist.runtime.sim.backend import SimBackend

    b, ctx = SimBackend(), current()
    r, n = ctx.rank, ctx.world_size
    lw = ctx.local_world_size
    nxt, prv = (r + 1) % n, (r - 1) % n
    fails = []

    def check(name, got, want):
        if got != want:
            fails.append(f"rank {r} {name}: got {got}, want {want}")

    # PE info
    info = torch.zeros(8, dtype=torch.int32)
    k_info[(1, )](info)
    check("info", info[:7].tolist(), [r, n, r, n, r % lw, lw, r % lw])

    src = b.create_tensor((N, ), torch.float32)
    dest = b.create_tensor((N, ), torch.float32)
    src.copy_(_pattern(r))
    nbytes = N * 4

    # remote_ptr / remote_mc_ptr
    out = torch.zeros(N, dtype=torch.float32)
    addrs = torch.zeros(2, dtype=torch.int64)
    b.barrier_all_on_stream()
    k_remote_ptr[(1, )](src, out, addrs, nxt, BLOCK=N)
    same_node = nxt // lw == r // lw
    check("remote_ptr data", out.tolist(), _pattern(nxt).tolist() if same_node else [0.0] * N)
    check("remote_ptr null iff other node", addrs[0].item() == 0, not same_node)
    check("remote_mc_ptr is null", addrs[1].item(), 0)

    # put / get, every variant: puts go to the next rank, gets read the previous rank
    for fn in RMA_FUNCTIONS:
        dest.fill_(-1.0)
        b.barrier_all_on_stream()
        pe, meta = rma_launch_args(fn, nxt, prv)
        k_rma[(1, )](dest, src, nbytes, pe, **meta)
        b.barrier_all_on_stream()
        check(fn.__name__, dest.tolist(), _pattern(prv).tolist())
    # a partial put: only the first 3 floats move
    dest.fill_(-1.0)
    b.barrier_all_on_stream()
    k_rma[(1, )](dest, src, 12, nxt, FN=shmem.putmem)
    b.barrier_all_on_stream()
    check("partial put", dest[:4].tolist(), _pattern(prv)[:3].tolist() + [-1.0])

    # put with signal (SET and ADD), blocking and nbi: data is there when the signal is
    sig = b.create_tensor((4, ), torch.int64)
    for blocking in (True, False):
        for op, value, expect in ((shmem.NVSHMEM_SIGNAL_SET, 7, 7), (shmem.NVSHMEM_SIGNAL_ADD, 5, 5)):
            dest.fill_(-1.0)
            sig.zero_()
            b.barrier_all_on_stream()
            res = torch.zeros(N + 1, dtype=torch.float32)
            k_put_signal_then_wait[(1, )](dest, src, sig, res, nbytes, nxt, value, expect, BLOCKING=blocking, OP=op,
                                          BLOCK=N)
            b.barrier_all_on_stream()
            check(f"put_signal blocking={blocking} op={int(op)} data", res[:N].tolist(), _pattern(prv).tolist())
            check(f"put_signal blocking={blocking} op={int(op)} signal", res[N].item(), float(expect))

    # signal_op + signal_wait_until with every comparison. (initial, op, value, cmp, cmp_val, expected result)
    cases = [
        (0, shmem.NVSHMEM_SIGNAL_SET, 5, shmem.NVSHMEM_CMP_EQ, 5, 5),
        (0, shmem.NVSHMEM_SIGNAL_SET, 7, shmem.NVSHMEM_CMP_NE, 0, 7),
        (0, shmem.NVSHMEM_SIGNAL_SET, 9, shmem.NVSHMEM_CMP_GT, 8, 9),
        (4, shmem.NVSHMEM_SIGNAL_ADD, 6, shmem.NVSHMEM_CMP_GE, 10, 10),
        (100, shmem.NVSHMEM_SIGNAL_SET, 3, shmem.NVSHMEM_CMP_LT, 50, 3),
        (100, shmem.NVSHMEM_SIGNAL_SET, 50, shmem.NVSHMEM_CMP_LE, 50, 50),
    ]
    got = torch.zeros(1, dtype=torch.int64)
    for init, op, value, cmp, cmp_val, want in cases:
        sig.fill_(init)
        b.barrier_all_on_stream()
        k_signal_op[(1, )](sig, value, nxt, OP=op)
        k_wait[(1, )](sig, got, cmp_val, CMP=cmp)
        b.barrier_all_on_stream()
        check(f"signal_wait_until cmp={int(cmp)}", got.item(), want)
    # a wait that is never satisfied ends with a clear error (short timeout)
    sig.zero_()
    saved = ctx.wait_timeout_s
    ctx.wait_timeout_s = 0.3
    try:
        k_wait[(1, )](sig, got, 1, CMP=shmem.NVSHMEM_CMP_EQ)
        fails.append(f"rank {r}: unsatisfiable signal_wait_until returned")
    except Exception as exc:  # noqa: BLE001
        msg = str(exc) + repr(exc.__cause__)
        if "signal_wait_until" not in msg or "expected == 1" not in msg:
            fails.append(f"rank {r}: unclear timeout message: {msg[:300]}")
    finally:
        ctx.wait_timeout_s = saved
    b.barrier_all_on_stream()

    # barriers: a value put into the peer before the barrier is visible to the peer after it
    stage = b.create_tensor((N, ), torch.float32)
    for i, (fn, team) in enumerate(BARRIER_FUNCTIONS.items()):
        peer = nxt if team == "world" else (r // lw) * lw + (r % lw + 1) % lw
        src_of_mine = prv if team == "world" else (r // lw) * lw + (r % lw - 1) % lw
        dest.fill_(-1.0)
        b.barrier_all_on_stream()
        res = torch.zeros(N, dtype=torch.float32)
        k_store_barrier_load[(1, )](dest, stage, res, peer, 100.0 * (i + 1) + 10000 * r, FN=fn,
                                    BLOCK=N)
        b.barrier_all_on_stream()
        want = (torch.arange(N, dtype=torch.float32) + 100 * (i + 1) + 10000 * src_of_mine).tolist()
        check(fn, res.tolist(), want)

    # collectives over the world and over the node
    for team, size, first in ((shmem.NVSHMEM_TEAM_WORLD, n, 0), (shmem.NVSHMEMX_TEAM_NODE, lw, (r // lw) * lw)):
        for root in sorted({0, size - 1}):
            dest.fill_(-1.0)
            b.barrier_all_on_stream()
            k_broadcast[(1, )](dest, src, nbytes, root, TEAM=team)
            b.barrier_all_on_stream()
            check(f"broadcast team={int(team)} root={root}", dest.tolist(), _pattern(first + root).tolist())
        coll = b.create_tensor((size * N, ), torch.float32)
        coll.fill_(-1.0)
        b.barrier_all_on_stream()
        k_fcollect[(1, )](coll, src, nbytes, TEAM=team)
        b.barrier_all_on_stream()
        check(f"fcollect team={int(team)}", coll.tolist(),
              torch.cat([_pattern(first + i) for i in range(size)]).tolist())
    return fails


#: typed scalar put / get cases: (type, value put, value read back)
SCALAR_CASES = (("int", -5, -5), ("uchar", 300, 44), ("float", 1.5, 1.5), ("double", 1.25, 1.25), ("half", 1.5, 1.5),
                ("bfloat16", -2.5, -2.5), ("short", -7, -7), ("int64", 12345678, 12345678), ("uint32", -1, 2**32 - 1),
                ("char", 200, -56))


def _torch_dtype(ty):
    return getattr(torch, {"fp32": "float32", "fp64": "float64", "fp16": "float16", "bf16": "bfloat16"}.get(
        ty.name, ty.name))


def _new_functions():
    """Inside a rank process: the functions beyond the first 31 (typed put / get, put-with-signal of every scope,
    team translation, the typed and thread / warp collectives); returns a list of failures."""
    from triton_dist.runtime.sim import current
    from triton_dist.runtime.sim.backend import SimBackend

    b, ctx = SimBackend(), current()
    r, n, lw = ctx.rank, ctx.world_size, ctx.local_world_size
    nxt, prv = (r + 1) % n, (r - 1) % n
    fails = []

    def check(name, got, want):
        if got != want:
            fails.append(f"rank {r} {name}: got {got}, want {want}")

    # typed scalar put to the next rank, then get of what we put (from the next rank's buffer)
    slot = b.create_tensor((1, ), torch.int64)
    for t, value, want in SCALAR_CASES:
        ty = _torch_dtype(SCALAR_TYPES[t])
        slot.zero_()
        b.barrier_all_on_stream()
        k_scalar_put[(1, )](slot.view(ty), value, nxt, P=getattr(shmem, f"{t}_p"))
        b.barrier_all_on_stream()
        check(f"{t}_p", slot.view(ty)[0].item(), want)
        out = torch.zeros(1, dtype=ty)
        k_scalar_get[(1, )](slot.view(ty), out, nxt, G=getattr(shmem, f"{t}_g"))
        check(f"{t}_g", out[0].item(), want)
        b.barrier_all_on_stream()

    # put with signal: thread / warp / wg / wave variants and ulong_put_signal (8-byte elements)
    src = b.create_tensor((N, ), torch.float32)
    dest = b.create_tensor((N, ), torch.float32)
    sig = b.create_tensor((1, ), torch.int64)
    src.copy_(_pattern(r))
    for i, fn in enumerate(PUT_SIGNAL_FUNCTIONS):
        dest.fill_(-1.0)
        sig.zero_()
        b.barrier_all_on_stream()
        res = torch.zeros(N + 1, dtype=torch.float32)
        name = fn.__name__
        k_put_signal_fn[(1, )](dest, src, sig, res, N * 4, nxt, 3 + i, FN=fn,
                               THREAD=name in ("putmem_signal", "putmem_signal_nbi", "ulong_put_signal"),
                               UNIT=8 if name == "ulong_put_signal" else 1, NBI="_nbi" in name, BLOCK=N)
        b.barrier_all_on_stream()
        check(f"{name} data", res[:N].tolist(), _pattern(prv).tolist())
        check(f"{name} signal", res[N].item(), float(3 + i))

    # team translation: node member <-> world number; out of range -> -1
    out = torch.zeros(3, dtype=torch.int32)
    k_translate[(1, )](out, r % lw, n)
    first = (r // lw) * lw
    check("team_translate_pe", out.tolist(), [first + r % lw, r % lw if r < lw else -1, -1])

    # typed (float elements) and thread / warp collectives over the world
    for fn, scope, typed in COLLECTIVE_FUNCTIONS:
        unit = 4 if typed else 1  # typed: float elements; *mem: bytes
        if fn.__name__.startswith("broadcast"):
            dest.fill_(-1.0)
            b.barrier_all_on_stream()
            k_collective_fn[(1, )](dest, src, N * 4 // unit, n - 1, TEAM=shmem.NVSHMEM_TEAM_WORLD, FN=fn,
                                   SCOPE=scope, BROADCAST=True)
            b.barrier_all_on_stream()
            check(fn.__name__, dest.tolist(), _pattern(n - 1).tolist())
        else:
            coll = b.create_tensor((n * N, ), torch.float32)
            coll.fill_(-1.0)
            b.barrier_all_on_stream()
            k_collective_fn[(1, )](coll, src, N * 4 // unit, 0, TEAM=shmem.NVSHMEM_TEAM_WORLD, FN=fn, SCOPE=scope,
                                   BROADCAST=False)
            b.barrier_all_on_stream()
            check(fn.__name__, coll.tolist(), torch.cat([_pattern(i) for i in range(n)]).tolist())
    return fails


def _reference_names():
    """Inside a rank process: the reference's 16 names beyond the NVSHMEM-backed ones (docs/libshmem_device.md, "The
    reference's other names"); returns a list of failures."""
    from triton_dist.runtime.sim import current
    from triton_dist.runtime.sim.backend import SimBackend

    b, ctx = SimBackend(), current()
    r, n = ctx.rank, ctx.world_size
    nxt, prv = (r + 1) % n, (r - 1) % n
    fails = []

    def check(name, got, want):
        if got != want:
            fails.append(f"rank {r} {name}: got {got}, want {want}")

    src = b.create_tensor((2 * N, ), torch.float32)
    dest = b.create_tensor((2 * N, ), torch.float32)
    sig = b.create_tensor((1, ), torch.int64)
    src.copy_(torch.cat([_pattern(r), -_pattern(r)]))
    for fn in RMA_PROXY_FUNCTIONS:
        dest.fill_(-1.0)
        b.barrier_all_on_stream()
        pe, meta = rma_launch_args(fn, nxt, prv)
        k_rma[(1, )](dest, src, N * 4, pe, **meta)
        b.barrier_all_on_stream()
        check(fn.__name__, dest[:N].tolist(), _pattern(prv).tolist())
    for i, fn in enumerate(PUT_SIGNAL_PROXY_FUNCTIONS):
        dest.fill_(-1.0)
        sig.zero_()
        b.barrier_all_on_stream()
        res = torch.zeros(N + 1, dtype=torch.float32)
        k_put_signal_fn[(1, )](dest, src, sig, res, N * 4, nxt, 20 + i, FN=fn,
                               THREAD=fn.__name__ in ("putmem_signal_rma", "putmem_signal_rma_nbi"), UNIT=1,
                               NBI="_nbi" in fn.__name__, BLOCK=N)
        b.barrier_all_on_stream()
        check(f"{fn.__name__} data", res[:N].tolist(), _pattern(prv).tolist())
        check(f"{fn.__name__} signal", res[N].item(), float(20 + i))
    dest.fill_(-1.0)
    sig.zero_()
    b.barrier_all_on_stream()
    out = torch.zeros(2 * N + 1, dtype=torch.float32)
    k_reference_sync[(1, )](dest, src, sig, out, 0, nxt, 100 * (r + 1), 100 * (prv + 1), BLOCK=N)
    b.barrier_all_on_stream()
    offs = torch.arange(N, dtype=torch.float32)
    check("quiet_pe + uint64_wait_until_equals data", out[:N].tolist(), (100.0 * (prv + 1) + offs).tolist())
    check("uint64_wait_until_equals result", out[2 * N].item(), float(100 * (prv + 1)))
    check("barrier_all_vec completes the put", out[N:2 * N].tolist(), (-100.0 * (prv + 1) - offs).tolist())
    return fails


def _guarded_collective():
    out = torch.zeros(4, dtype=torch.int32)
    k_guarded_barrier[(4, )](out)
    return out.tolist()


def _concurrent_collectives():
    """Every program of a 4-program launch calls barrier_all_block: refused with a clear error."""
    from triton_dist.runtime.sim import current

    ctx = current()
    saved = ctx.wait_timeout_s
    ctx.wait_timeout_s = 5.0
    try:
        k_every_program_barrier[(4, )]()
        return "no error"
    except Exception as exc:  # noqa: BLE001
        return str(exc) + " | " + repr(exc.__cause__)
    finally:
        ctx.wait_timeout_s = saved


# --------------------------------------------------------------------------------------------------- tests

@pytest.mark.parametrize("world,local", [(2, 2), (4, 4), (4, 2)])
def test_every_function(sim_ranks, world, local):  # noqa: F811
    res = sim_ranks.run(world, _every_function, timeout=120, env=ENV, local_world_size=local)
    fails = [f for per_rank in res for f in per_rank]
    assert not fails, "\n".join(fails[:20])


@pytest.mark.parametrize("world,local", [(2, 2), (4, 2)])
def test_new_functions(sim_ranks, world, local):  # noqa: F811
    res = sim_ranks.run(world, _new_functions, timeout=120, env=ENV, local_world_size=local)
    fails = [f for per_rank in res for f in per_rank]
    assert not fails, "\n".join(fails[:20])


def test_concurrent_collectives_refused(sim_ranks):  # noqa: F811
    res = sim_ranks.run(2, _concurrent_collectives, timeout=60, env=ENV, local_world_size=2)
    assert all(m != "no error" for m in res), res
    assert any("same launch" in m and "tl.program_id(0) == 0" in m for m in res), res


def test_guarded_collective_in_multi_program_launch(sim_ranks):  # noqa: F811
    res = sim_ranks.run(2, _guarded_collective, timeout=60, env=ENV, local_world_size=2)
    assert res == [[1, 1, 1, 1]] * 2


def test_reference_names(sim_ranks):  # noqa: F811
    res = sim_ranks.run(2, _reference_names, timeout=120, env=ENV, local_world_size=2)
    fails = [f for per_rank in res for f in per_rank]
    assert not fails, "\n".join(fails[:20])
