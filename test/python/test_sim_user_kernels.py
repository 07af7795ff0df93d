"""User kernels on the simulator right after ``import triton_dist`` (issue 16, point 5).

Each test runs a script the way a user without a GPU would: ``import triton`` first, then ``import triton_dist``
(which turns the interpreter on: ``TRITON_DIST_BACKEND=sim``), then kernels of their own, written for the reference
system, launched on CPU tensors. ``triton_dist.kernels`` is never imported (the scripts assert it), so nothing that
only a kernels module installs can make them pass. A fresh process each: what is tested is import order.
"""
import os
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.sim

PRELUDE = """
import sys
import torch
import triton
import triton.language as tl
import triton_dist

assert triton.knobs.runtime.interpret, "import triton_dist under TRITON_DIST_BACKEND=sim turns the interpreter on"
"""
EPILOGUE = """
assert not any(m == "triton_dist.kernels" or m.startswith("triton_dist.kernels.") for m in sys.modules), \\
    sorted(m for m in sys.modules if m.startswith("triton_dist.kernels"))
print("OK")
"""


def _run_script(path, backend=None):
    """Run ``path`` in a fresh interpreter (no TRITON_INTERPRET / rank variables; ``TRITON_DIST_BACKEND=backend``,
    unset when None) and check it succeeded with ``OK`` as its last line."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    for var in ("TRITON_INTERPRET", "RANK", "WORLD_SIZE", "TRITON_DIST_BACKEND"):
        env.pop(var, None)
    if backend is not None:
        env["TRITON_DIST_BACKEND"] = backend
    res = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, env=env, timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    assert res.stdout.strip().splitlines()[-1] == "OK", res.stdout


def _run_user_script(tmp_path, body):
    path = tmp_path / "user_kernel.py"
    path.write_text(textwrap.dedent(PRELUDE) + textwrap.dedent(body) + textwrap.dedent(EPILOGUE))
    _run_script(path, backend="sim")


def test_runtime_bound_for_loop_without_kernels_module(tmp_path):
    # numpy >= 2.3 refuses int() of the interpreter's 1-element scalars: the loop bounds failed with "only
    # 0-dimensional arrays can be converted to Python scalars" until triton_dist.kernels.gemm was imported.
    _run_user_script(tmp_path, """
        @triton.jit
        def strided(out_ptr, n, STEP: tl.constexpr):
            pid = tl.program_id(0)
            acc = 0
            for i in range(pid, n, STEP):
                acc += i
            tl.store(out_ptr + pid, acc)

        @triton_dist.jit
        def strided_dist(out_ptr, n, STEP: tl.constexpr):
            pid = tl.program_id(0)
            acc = 0
            for i in range(pid, n, STEP):
                acc += i
            tl.store(out_ptr + pid, acc)

        want = [sum(range(p, 10, 2)) for p in range(2)]
        for kernel in (strided, strided_dist):
            out = torch.zeros(2, dtype=torch.int32)
            kernel[(2,)](out, 10, STEP=2)
            assert out.tolist() == want, (kernel, out.tolist(), want)
    """)


def test_bf16_dot_without_kernels_module(tmp_path):
    # the interpreter multiplies bf16's raw uint16 bits (~1e10 results) unless the dot fix is installed
    _run_user_script(tmp_path, """
        @triton.jit
        def mm(a_ptr, b_ptr, o_ptr, N: tl.constexpr):
            r = tl.arange(0, N)
            a = tl.load(a_ptr + r[:, None] * N + r[None, :])
            b = tl.load(b_ptr + r[:, None] * N + r[None, :])
            tl.store(o_ptr + r[:, None] * N + r[None, :], tl.dot(a, b))

        g = torch.Generator().manual_seed(0)
        a = (torch.randint(-4, 5, (16, 16), generator=g).float() / 4).to(torch.bfloat16)
        b = (torch.randint(-4, 5, (16, 16), generator=g).float() / 4).to(torch.bfloat16)
        o = torch.zeros(16, 16)
        mm[(1,)](a, b, o, N=16)
        err = (o - a.float() @ b.float()).abs().max().item()
        assert err == 0.0, err
    """)


def test_plain_jit_helper_calling_cdiv(tmp_path):
    # tl.cdiv is a JITFunction made when `import triton` ran with the interpreter off; a user @triton.jit helper
    # calling it from an interpreted kernel failed with "Cannot call @triton.jit'd outside of the scope of a kernel".
    # Also a helper defined before `import triton_dist` (a JITFunction itself), from both kinds of kernel.
    _run_user_script(tmp_path, """
        from triton.runtime.jit import JITFunction

        @triton.jit
        def num_blocks(n, BLOCK: tl.constexpr):
            return tl.cdiv(n, BLOCK)

        @triton.jit
        def blocks(out_ptr, n, BLOCK: tl.constexpr):
            tl.store(out_ptr + tl.program_id(0), num_blocks(n, BLOCK))

        @triton_dist.jit
        def blocks_dist(out_ptr, n, BLOCK: tl.constexpr):
            tl.store(out_ptr + tl.program_id(0), num_blocks(n, BLOCK) + EARLY(n))

        @triton.jit
        def blocks_early(out_ptr, n, BLOCK: tl.constexpr):
            tl.store(out_ptr + tl.program_id(0), num_blocks(n, BLOCK) + EARLY(n))

        triton.knobs.runtime.interpret = False
        @triton.jit
        def EARLY(n):  # made with the interpreter off, like tl.cdiv
            return tl.cdiv(n, 2)
        triton.knobs.runtime.interpret = True
        assert isinstance(EARLY, JITFunction) and isinstance(tl.cdiv, JITFunction)

        out = torch.zeros(2, dtype=torch.int32)
        blocks[(2,)](out, 10, BLOCK=4)
        assert out.tolist() == [3, 3], out.tolist()
        for kernel in (blocks_dist, blocks_early):
            out = torch.zeros(2, dtype=torch.int32)
            kernel[(2,)](out, 10, BLOCK=4)
            assert out.tolist() == [8, 8], (kernel, out.tolist())

        # outside a kernel a @triton.jit function still refuses to run, as in stock Triton
        try:
            EARLY(3)
        except RuntimeError as exc:
            assert "outside of the scope of a kernel" in str(exc), exc
        else:
            raise AssertionError("a JITFunction called outside a kernel must raise")
    """)


def test_plain_import_installs_nothing(tmp_path):
    # with the interpreter off, import triton_dist leaves Triton as it was: the interpreter module is not even
    # imported and JITFunction.__call__ is stock (compiled behaviour unchanged)
    path = tmp_path / "plain.py"
    path.write_text(textwrap.dedent("""
        import sys
        from triton.runtime.jit import JITFunction
        stock = JITFunction.__dict__["__call__"]
        import triton, triton_dist
        assert not triton.knobs.runtime.interpret
        assert "triton.runtime.interpreter" not in sys.modules
        assert JITFunction.__dict__["__call__"] is stock
        print("OK")
    """))
    _run_script(path)


def test_bf16_elementwise_arithmetic(tmp_path):
    # the stock interpreter stores bf16 as raw uint16 bits and its binary ops (fadd, fmul, fcmp, ...) worked on the
    # bits: x + y gave NaNs/garbage, so every bf16 accumulation or reduction in a user kernel was wrong
    _run_user_script(tmp_path, """
        @triton.jit
        def ew(x_ptr, y_ptr, add_ptr, mul_ptr, sub_ptr, div_ptr, max_ptr, lt_ptr, fma_ptr, sum_ptr, N: tl.constexpr):
            r = tl.arange(0, N)
            x = tl.load(x_ptr + r)
            y = tl.load(y_ptr + r)
            tl.store(add_ptr + r, x + y)
            tl.store(mul_ptr + r, x * y)
            tl.store(sub_ptr + r, x - y)
            tl.store(div_ptr + r, x / y)
            tl.store(max_ptr + r, tl.maximum(x, y))
            tl.store(lt_ptr + r, (x < y).to(tl.int32))
            tl.store(fma_ptr + r, tl.fma(x, y, x))
            acc = tl.zeros([N], dtype=tl.bfloat16)
            for _ in range(3):
                acc += x
            tl.store(sum_ptr + r, acc)

        g = torch.Generator().manual_seed(0)
        N = 64
        x = torch.randn(N, generator=g).to(torch.bfloat16)
        y = torch.randn(N, generator=g).to(torch.bfloat16)
        y = torch.where(y == 0, torch.ones_like(y), y)
        outs = [torch.zeros(N, dtype=torch.bfloat16) for _ in range(5)]
        lt = torch.zeros(N, dtype=torch.int32)
        fma = torch.zeros(N, dtype=torch.bfloat16)
        acc = torch.zeros(N, dtype=torch.bfloat16)
        ew[(1,)](x, y, *outs, lt, fma, acc, N=N)
        want = [x + y, x * y, x - y, x / y, torch.maximum(x, y)]
        for name, got, ref in zip(("add", "mul", "sub", "div", "max"), outs, want):
            assert torch.equal(got, ref), (name, got[:4], ref[:4])
        assert torch.equal(lt, (x < y).int()), (lt, x < y)
        # fma rounds once on the GPU; the element-wise reference may differ by one bf16 ulp
        assert torch.allclose(fma.float(), (x.float() * y.float() + x.float()), rtol=1e-2, atol=1e-2), fma[:4]
        assert torch.equal(acc, x + x + x), (acc[:4], (x + x + x)[:4])

        # casts to / from bf16 (the stock interpreter truncated fp32 -> bf16 and cast ints on the bits) and tl.sum
        @triton.jit
        def casts(f_ptr, i_ptr, x_ptr, to_bf_ptr, int_to_bf_ptr, bf_to_int_ptr, sum_ptr, N: tl.constexpr):
            r = tl.arange(0, N)
            tl.store(to_bf_ptr + r, tl.load(f_ptr + r).to(tl.bfloat16))
            tl.store(int_to_bf_ptr + r, tl.load(i_ptr + r).to(tl.bfloat16))
            x = tl.load(x_ptr + r)
            tl.store(bf_to_int_ptr + r, x.to(tl.int32))
            tl.store(sum_ptr, tl.sum(x, axis=0))

        f = torch.randn(N, generator=g)
        i = torch.randint(-300, 300, (N, ), generator=g, dtype=torch.int32)
        xs = (x * 8)
        to_bf, int_to_bf = torch.zeros(N, dtype=torch.bfloat16), torch.zeros(N, dtype=torch.bfloat16)
        bf_to_int, total = torch.zeros(N, dtype=torch.int32), torch.zeros(1, dtype=torch.bfloat16)
        casts[(1,)](f, i, xs, to_bf, int_to_bf, bf_to_int, total, N=N)
        assert torch.equal(to_bf, f.to(torch.bfloat16)), (to_bf[:4], f.to(torch.bfloat16)[:4])
        assert torch.equal(int_to_bf, i.to(torch.bfloat16)), (int_to_bf[:4], i[:4])
        assert torch.equal(bf_to_int, xs.to(torch.int32)), (bf_to_int[:4], xs[:4])
        assert abs(total.float().item() - xs.float().sum().item()) <= 0.02 * xs.float().abs().sum().item(), total
    """)


def test_python_and_or_between_masks_refused(tmp_path):
    # Python `and`/`or` between block masks: compiled Triton combines them element-wise (with a deprecation
    # warning); the interpreter took `bool(block)` as True and kept one mask only, so the masked store below wrote
    # past the end of `out` (heap corruption). The simulator refuses it, naming the construct and the fix.
    _run_user_script(tmp_path, """
        @triton.jit
        def masked(out_ptr, lo, n, BLOCK: tl.constexpr, USE_OR: tl.constexpr):
            r = tl.arange(0, BLOCK)
            if USE_OR:
                m = (r >= n) or (r < lo)
                m = not m
            else:
                m = (r >= lo) and (r < n)
            tl.store(out_ptr + r, 1, mask=m)

        @triton.jit
        def scalar_and(out_ptr, a, b):
            if a > 0 and b > 0:  # scalars: fine, as in compiled Triton
                tl.store(out_ptr, 1)

        guard = torch.zeros(32, dtype=torch.int32)
        out = guard[:8]
        for use_or in (False, True):
            try:
                masked[(1,)](out, 2, 8, BLOCK=32, USE_OR=use_or)
            except Exception as exc:
                msg = str(exc)
                assert "and" in msg and "&" in msg and "|" in msg, msg
            else:
                raise AssertionError(f"Python and/or on block masks must be refused (USE_OR={use_or})")
            assert guard[8:].eq(0).all(), guard
        flag = torch.zeros(1, dtype=torch.int32)
        scalar_and[(1,)](flag, 1, 2)
        assert flag.item() == 1
    """)


def test_init_nvshmem_by_torch_process_group_on_simulator(tmp_path):
    # a reference script bootstraps with init_nvshmem_by_torch_process_group(group) over its own gloo group: on the
    # simulator that must start the simulator's SHMEM, not NVSHMEM (which needs a GPU)
    _run_user_script(tmp_path, """
        import os
        import torch.distributed as dist
        from triton_dist.utils import (init_nvshmem_by_torch_process_group, nvshmem_create_tensor,
                                       nvshmem_free_tensor_sync, finalize_distributed)
        from triton_dist.runtime.state import STATE

        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        import socket
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            os.environ.setdefault("MASTER_PORT", str(s.getsockname()[1]))
        dist.init_process_group("gloo", rank=0, world_size=1)
        init_nvshmem_by_torch_process_group(dist.group.WORLD)
        assert "nvshmem" not in type(STATE.backend).__module__.lower(), type(STATE.backend)
        assert not any(m == "nvshmem" or m.startswith("nvshmem.") for m in sys.modules), "NVSHMEM was imported"
        t = nvshmem_create_tensor((4, ), torch.float32)
        t.fill_(3)
        assert t.sum().item() == 12
        nvshmem_free_tensor_sync(t)
        finalize_distributed()
        dist.destroy_process_group()
    """)
