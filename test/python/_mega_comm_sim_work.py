"""Rank-side functions for test_mega_comm_sim.py (module level, so rank processes import them by reference), and a
test-only task type ``test_peer_peek`` (reads a peer's copy of a symmetric tensor) that shows what the mega
kernel's barrier orders. Each function returns a list of failure strings (empty = pass) plus what the test needs."""
from __future__ import annotations

import time

import torch
import triton.language as tl

import triton_dist
import triton_dist.language as dl
from triton_dist.mega_triton_kernel.core.device import arg
from triton_dist.mega_triton_kernel.core.registry import register_task
from triton_dist.mega_triton_kernel.core.task import Op, Tile, region


def _init():
    import triton_dist.utils as u

    u.initialize_distributed()
    import torch.distributed as dist

    return dist.get_rank(), dist.get_world_size()


@triton_dist.jit
def peer_peek_task(args, tile, step, N: tl.constexpr, RANK: tl.constexpr, WORLD: tl.constexpr):
    """``out[i] = symm[i]`` of rank ``RANK + 1`` (``args``: symm fp32 ``[N]``, out fp32 ``[N]``)."""
    s_ptr = arg(args, 0, tl.float32)
    o_ptr = arg(args, 1, tl.float32)
    offs = tl.arange(0, N)
    tl.store(o_ptr + offs, tl.load(dl.symm_at(s_ptr, (RANK + 1) % WORLD) + offs))


@register_task("test_peer_peek", "Elementwise")
def build_peer_peek(builder, layer_id, symm, out) -> Op:
    return Op("Elementwise", "test_peer_peek", layer_id, peer_peek_task, [symm, out],
              dict(N=symm.numel(), RANK=builder.rank, WORLD=builder.world_size),
              [Tile(reads=region(symm), writes=region(out))])


def _small_ints(seed, rank, shape, dtype, lo=-8, hi=9):
    g = torch.Generator().manual_seed(seed * 1000 + rank)
    return torch.randint(lo, hi, shape, generator=g).to(dtype)


def _floats(seed, rank, shape, dtype):
    g = torch.Generator().manual_seed(seed * 1000 + rank)
    return torch.randn(shape, generator=g).to(dtype)


def _rank_order_sum(xs, dtype):
    acc = xs[0].float()
    for x in xs[1:]:
        acc = acc + x.float()
    return acc.to(dtype)


def allreduce_cases(steps=3):
    """One builder, several steps with inputs changing per step: a bf16 allreduce of a size that is no multiple of
    the chunk (odd: the last word half padding), an fp32 one, an fp16 in-place one, random fp32 floats checked
    bit-exactly against the rank-order fp32 sum (rounding: another order differs at 4 ranks), and a linear -> allreduce -> add -> linear -> allreduce chain (fp32, small
    integers: exact). Returns (failures, checks, per-step outputs of the random-float op as bytes)."""
    from triton_dist.mega_triton_kernel import ModelBuilder

    rank, world = _init()
    fails, checks, floats_seen = [], 0, []
    b = ModelBuilder(rank, world)
    n1, n2, n3 = 2 * 1024 + 301, 3000, 1024 + 64
    a_in, a_out = torch.zeros(n1, dtype=torch.bfloat16), torch.zeros(n1, dtype=torch.bfloat16)
    f_in, f_out = torch.zeros(n2), torch.zeros(n2)
    r_in, r_out = torch.zeros(2, n3 // 2), torch.zeros(2, n3 // 2)
    ip = torch.zeros(40, dtype=torch.float16)
    K, N = 64, 96
    x, W, y, ys = torch.zeros(1, K), torch.zeros(N, K), torch.zeros(1, N), torch.zeros(1, N)
    res, z, W2, out = torch.zeros(1, N), torch.zeros(1, N), torch.zeros(K, N), torch.zeros(1, K)
    b.make_allreduce(a_in, a_out)
    b.make_linear(x, W, y)
    b.make_allreduce(f_in, f_out)
    b.make_allreduce(y, ys)
    b.make_add(ys, res, z)
    b.make_allreduce(r_in, r_out, layer_id=1)
    b.make_linear(z, W2, out)
    b.make_allreduce(out, out)  # in place
    b.make_allreduce(ip, ip)
    b.compile()
    nt = [len(op.tiles) for op in b.ops if op.op_type == "allreduce"]
    if nt[:3] != [3, 3, 1]:
        fails.append(f"allreduce tile counts {nt}")
    for step in range(steps):
        s = 10 * step + 1
        A = [_small_ints(s, r, (n1, ), torch.bfloat16) for r in range(world)]
        F = [_small_ints(s + 1, r, (n2, ), torch.float32, -1000, 1000) for r in range(world)]
        R = [_floats(s + 2, r, (2, n3 // 2), torch.float32) for r in range(world)]
        IP = [_small_ints(s + 3, r, (40, ), torch.float16) for r in range(world)]
        X = [_small_ints(s + 4, r, (1, K), torch.float32, -2, 3) for r in range(world)]
        WW = [_small_ints(s + 5, r, (N, K), torch.float32, -2, 3) for r in range(world)]
        WW2 = _small_ints(s + 6, 0, (K, N), torch.float32, -2, 3)
        RES = _small_ints(s + 7, rank, (1, N), torch.float32)
        a_in.copy_(A[rank])
        f_in.copy_(F[rank])
        r_in.copy_(R[rank])
        ip.copy_(IP[rank])
        x.copy_(X[rank])
        W.copy_(WW[rank])
        W2.copy_(WW2)
        res.copy_(RES)
        b.run()
        ref_ys = sum(X[r] @ WW[r].T for r in range(world))
        ref_z = ref_ys + RES
        zs = [(ref_ys + _small_ints(s + 7, r, (1, N), torch.float32)) @ WW2.T for r in range(world)]
        for got, ref, what in ((a_out, _rank_order_sum(A, torch.bfloat16), "bf16 ragged"),
                               (f_out, _rank_order_sum(F, torch.float32), "fp32"),
                               (r_out, _rank_order_sum(R, torch.float32), "fp32 random floats, rank order"),
                               (ip, _rank_order_sum(IP, torch.float16), "fp16 in place"),
                               (ys, ref_ys, "chain: linear -> allreduce"), (z, ref_z, "chain: add"),
                               (out, sum(zs), "chain: linear -> allreduce in place")):
            checks += 1
            if not torch.equal(got, ref):
                bad = (got.float() - ref.float()).abs().max().item()
                fails.append(f"step {step}: {what}: max error {bad}")
        floats_seen.append(r_out.view(torch.int32).clone())
    for t in b.all_symm_tensors:  # every consumed word was cleared
        checks += 1
        if t.dtype == torch.int64 and int(t.count_nonzero()):
            fails.append(f"staging buffer {list(t.shape)}: {int(t.count_nonzero())} words left after the last step")
    b.close()  # docs/ops.md: close() frees the symmetric tensors; again (or finalize, its alias) frees nothing
    b.finalize()
    checks += 1
    if b.all_symm_tensors:
        fails.append(f"close() left {len(b.all_symm_tensors)} symmetric tensors")
    return fails, checks, floats_seen


def barrier_cases(steps=3, delay_s=0.4):
    """Rank r stamps ``step * 10 + r`` into its symmetric tensor (an add), passes the barrier, then reads the next
    rank's stamp (``test_peer_peek``); a second barrier keeps the next step's stamp after every rank's peek. Rank 1
    sleeps before each run, so without a working barrier rank 0 would read the previous step's stamp. Returns
    (failures, checks)."""
    import triton_dist.utils as U
    from triton_dist.mega_triton_kernel import ModelBuilder

    rank, world = _init()
    fails, checks = [], 0
    n = 64
    b = ModelBuilder(rank, world)
    src, zero = torch.zeros(n), torch.zeros(n)
    symm = U.nvshmem_create_tensor((n, ), torch.float32)
    symm.zero_()
    peek = torch.zeros(n)
    b.make_add(src, zero, symm)
    b.make_barrier_all_intra_node([symm])
    b._add("test_peer_peek", 0, symm, peek)
    b.make_barrier_all_intra_node([symm])
    b.compile()
    deps = [t.deps for t in b.tasks]
    if deps != [[], [0], [1], [1, 2]]:
        fails.append(f"barrier dependencies {deps}, expected stamp -> barrier -> peek -> barrier")
    for step in range(1, steps + 1):
        src.fill_(step * 10 + rank)
        if rank == 1:
            time.sleep(delay_s)
        b.run()
        checks += 1
        want = step * 10 + (rank + 1) % world
        if not torch.equal(peek, torch.full((n, ), float(want))):
            fails.append(f"step {step}: rank {rank} read {peek[0].item()} from rank {(rank + 1) % world}, "
                         f"expected {want}")
    # a barrier with nothing to wait for still synchronises (and orders nothing locally)
    b2 = ModelBuilder(rank, world)
    b2.make_barrier_all_intra_node([])
    b2.make_add(src, zero, peek)
    b2.compile()
    checks += 1
    if [t.deps for t in b2.tasks] != [[], []]:
        fails.append(f"empty barrier dependencies {[t.deps for t in b2.tasks]}")
    for _ in range(2):
        b2.run()
    return fails, checks


def _expect(fails, exc_type, text, fn, *args, **kwargs):
    from _expect import expect_error

    expect_error(fails, f"{fn.__name__} ({text!r})", lambda: fn(*args, **kwargs), text, exc=exc_type)


def argument_errors():
    """Bad arguments of the four families raise clear errors at build time, before any symmetric allocation.
    Returns failures."""
    from triton_dist.mega_triton_kernel import ModelBuilder

    rank, world = _init()
    fails = []
    b = ModelBuilder(rank, world)
    bf = torch.zeros(64, dtype=torch.bfloat16)
    _expect(fails, TypeError, "must be torch.bfloat16", b.make_allreduce, bf, torch.zeros(64))
    _expect(fails, ValueError, "must have shape [64]", b.make_allreduce, bf, torch.zeros(65, dtype=torch.bfloat16))
    _expect(fails, TypeError, "input must be", b.make_allreduce, torch.zeros(64, dtype=torch.int32),
            torch.zeros(64, dtype=torch.int32))
    _expect(fails, ValueError, "contiguous", b.make_allreduce, torch.zeros(8, 8).t(), torch.zeros(8, 8))
    _expect(fails, ValueError, "empty", b.make_allreduce, torch.zeros(0), torch.zeros(0))
    _expect(fails, TypeError, "double_input_buffer", b.make_allreduce, bf, bf.clone(), double_input_buffer=1)
    _expect(fails, TypeError, "wait_inputs[1] must be a torch.Tensor", b.make_barrier_all_intra_node, [bf, 3])
    if b.all_symm_tensors or b.ops:
        fails.append(f"a refused op left {len(b.all_symm_tensors)} symmetric tensors / {len(b.ops)} ops")
    b1 = ModelBuilder(0, 1)
    _expect(fails, ValueError, "world_size > 1", b1.make_allreduce, bf, bf.clone())
    _expect(fails, ValueError, "world_size > 1", b1.make_barrier_all_intra_node, [bf])
    f = torch.zeros(2, 10)
    _expect(fails, ValueError, "act_out must have shape [2, 5]", b1.make_silu_mul_up, f, torch.zeros(2, 10))
    _expect(fails, ValueError, "even", b1.make_silu_mul_up, torch.zeros(2, 9), torch.zeros(2, 4))
    _expect(fails, ValueError, "2 dimensions", b1.make_silu_mul_up, torch.zeros(20), torch.zeros(10))
    _expect(fails, TypeError, "fc1_out must be", b1.make_silu_mul_up, torch.zeros(2, 10, dtype=torch.int32),
            torch.zeros(2, 5))
    _expect(fails, ValueError, "2 dimensions", b1.make_prefetch, torch.zeros(64))
    _expect(fails, ValueError, "contiguous", b1.make_prefetch, torch.zeros(16, 8).t())
    _expect(fails, TypeError, "weight must be", b1.make_prefetch, torch.zeros(4, 4, dtype=torch.int64))
    return fails


def world1_cases():
    """Activation and prefetch on a world-1 builder (fp32 / bf16 / fp16 mixes; several row and column tiles), and
    the prefetch checksums (every row block's loads really happen). Returns (failures, checks)."""
    from triton_dist.mega_triton_kernel import ModelBuilder

    _init()
    fails, checks = [], 0
    torch.manual_seed(0)
    b = ModelBuilder(0, 1)
    cases = [((3, 1500), torch.bfloat16, torch.bfloat16), ((40, 72), torch.float32, torch.float16),
             ((1, 8), torch.float16, torch.float32)]
    acts = []
    for (M, n), dt, odt in cases:
        f = (torch.randn(M, 2 * n) * 3).to(dt)
        a = torch.zeros(M, n, dtype=odt)
        b.make_silu_mul_up(f, a)
        acts.append((f, a))
    w_bf = torch.randn(1100, 130).bfloat16()
    w_f32 = torch.randn(3, 5)
    w_i8 = torch.randint(-128, 128, (300, 1000), dtype=torch.int8)
    for w in (w_bf, w_f32, w_i8):
        b.make_prefetch(w)
    b.compile()
    pre = [op for op in b.ops if op.op_type == "prefetch"]
    checks += 1
    if [len(op.tiles) for op in pre] != [2, 1, 2] or any(t.deps for t in b.tasks if not t.waits):
        fails.append(f"prefetch tiles {[len(op.tiles) for op in pre]}")
    for run in range(2):
        for op in pre:
            op.tensors[1].zero_()
        b.run()
        for (f, a) in acts:
            checks += 1
            n = a.shape[1]
            g, u = f[:, :n].float(), f[:, n:].float()
            ref = (g / (1.0 + torch.exp(-g)) * u).to(a.dtype)
            err = (a.float() - ref.float()).abs().max().item()
            if err > 1e-5 * max(1.0, ref.float().abs().max().item()):
                fails.append(f"silu_mul_up {list(f.shape)} {f.dtype}->{a.dtype}: max error {err}")
        for op in pre:
            checks += 1
            w, rows = op.tensors[0], op.constexprs["ROWS"]
            ints = {1: torch.int8, 2: torch.int16, 4: torch.int32}[w.element_size()]
            bits = w.reshape(-1).view(ints).to(torch.int32)
            want = []
            for r0 in range(0, w.shape[0], rows):
                c = bits[r0 * w.shape[1]:(r0 + rows) * w.shape[1]]
                x = 0
                for v in c.tolist():
                    x ^= v
                want.append(x)
            if op.tensors[1].tolist() != want:
                fails.append(f"prefetch {list(w.shape)} {w.dtype}: checksums {op.tensors[1].tolist()} != {want}")
    # a silu tile waits only for the fc1 tiles that wrote its gate and up columns
    b2 = ModelBuilder(0, 1)
    x, W = torch.randn(1, 32), torch.randn(2 * 3000, 32)
    f, a = torch.zeros(1, 2 * 3000), torch.zeros(1, 3000)
    lin = b2.make_linear(x, W, f)
    b2.make_silu_mul_up(f, a)
    b2.compile()
    bn, cols = lin.constexprs["BLOCK_N"], b2.ops[1].constexprs["BLOCK_N"]
    for t in b2.tasks[len(lin.tiles):]:
        checks += 1
        c0, c1 = t.tile * cols, min(3000, (t.tile + 1) * cols)
        want = sorted({c // bn for c in range(c0, c1)} | {c // bn for c in range(3000 + c0, 3000 + c1)})
        if t.deps != want:
            fails.append(f"silu_mul_up tile {t.tile}: deps {t.deps} != {want}")
    b2.run()
    checks += 1
    g, u = f[:, :3000], f[:, 3000:]
    if (a - g / (1.0 + torch.exp(-g)) * u).abs().max().item() > 1e-4:
        fails.append("fc1 -> silu_mul_up: wrong result")
    return fails, checks


def mega_source():
    """The generated kernel source of a world-2 builder with every family of this change plus a linear."""
    from triton_dist.mega_triton_kernel import ModelBuilder

    rank, world = _init()
    b = ModelBuilder(rank, world)
    x, W = torch.zeros(1, 64, dtype=torch.bfloat16), torch.zeros(256, 64, dtype=torch.bfloat16)
    f, a = torch.zeros(1, 256, dtype=torch.bfloat16), torch.zeros(1, 128, dtype=torch.bfloat16)
    b.make_prefetch(W)
    b.make_linear(x, W, f)
    b.make_silu_mul_up(f, a)
    b.make_barrier_all_intra_node([a])
    b.make_allreduce(a, a.clone())
    b.make_allreduce(torch.zeros(300), torch.zeros(300))
    b.compile()
    return b.source, b.branch_names
