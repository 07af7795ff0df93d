"""Simulator executions of every collective kernel (all-gather push/pull/push_pipe, reduce-scatter
direct/direct_push/push_pipe/ring, all-reduce one-shot/two-shot/two_shot_pipe, p2p) at 2 and 4 ranks, through the public ops API,
plus a randomised stress run.

Each rank process checks many (kernel, size, dtype) combinations per spawn (rank-side code in
``_collectives_sim_work.py``); results are exact (small-integer inputs) so any signalling race shows up.
Stress: ``TRITON_DIST_SIM_STRESS_CALLS`` calls (default 1000) at 4 ranks, every result verified.
"""
import os
import re

import pytest

import _collectives_sim_work as work
from conftest_sim import sim_ranks  # noqa: F401  (fixture)



# The wait bound only turns a hang into an error; generous so a loaded 2-core CI machine never trips it.
ENV = {"TRITON_DIST_SIM_WAIT_TIMEOUT": "240", "TRITON_DIST_SIM_SYMMETRIC_SIZE": "64M"}


@pytest.mark.parametrize("world", [2, 4])
@pytest.mark.sim
def test_every_kernel(sim_ranks, world):  # noqa: F811
    res = sim_ranks.run(world, work.every_kernel, timeout=600, env=ENV)
    for rank, (fails, checks) in enumerate(res):
        assert checks > 100, (rank, checks)
        assert not fails, (rank, fails)


@pytest.mark.parametrize("world", [2, 4])
@pytest.mark.sim
def test_push_pipe(sim_ranks, world):  # noqa: F811
    """Pipelined all-gather / reduce-scatter / all-reduce: several segments, ragged ends, two pusher/copier splits,
    bit-exact against push / direct_push / two_shot, methods alternating on one context."""
    res = sim_ranks.run(world, work.push_pipe_cases, timeout=600, env=ENV)
    for rank, (fails, checks) in enumerate(res):
        assert checks > 100, (rank, checks)
        assert not fails, (rank, fails)


@pytest.mark.sim
def test_ll_buffer_starts_empty(sim_ranks):  # noqa: F811
    """Flagged words are signals: a context's ll buffer starts empty whatever the (unzeroed) symmetric memory held
    (a GPU run trapped with a false "ranks disagree" on leftover words before the buffer was zeroed)."""
    res = sim_ranks.run(2, work.ll_buffer_starts_empty, timeout=300, env=ENV)
    for rank, fails in enumerate(res):
        assert not fails, (rank, fails)


@pytest.mark.sim
def test_stress_4_ranks(sim_ranks):  # noqa: F811
    calls = int(os.environ.get("TRITON_DIST_SIM_STRESS_CALLS", "1000"))
    res = sim_ranks.run(4, work.stress, calls, 1, 256, timeout=900, env=ENV)
    for rank, (fails, n, secs) in enumerate(res):
        assert n == calls
        assert not fails, (rank, fails)


KERNELS = [
    ("allgather.py:allgather_kernel", "*bf16:16, *bf16:16, *bf16:16, *i64:16, *i64:16, *i64:16, i32:16, i32:16, i32, i32, 2, 1, 8192"),
    ("reduce_scatter.py:reduce_scatter_direct_kernel", "*bf16:16, *bf16:16, *bf16:16, *i64:16, *i64:16, *i64:16, i32:16, i32:16, i32, i32, 4, 0, 8192"),
    ("allreduce.py:allreduce_one_shot_kernel", "*bf16:16, *bf16:16, *bf16:16, *i64:16, *i64:16, i32:16, i32:16, i32, i32, 2, 8192"),
    ("allgather.py:allgather_push_pipe_kernel", "*bf16:16, *bf16:16, *bf16:16, *i64:16, *i64:16, *i64:16, i32:16, i32:16, i32, i32, i32, i32, 2, 32, 8192"),
    ("reduce_scatter.py:reduce_scatter_push_pipe_kernel", "*bf16:16, *bf16:16, *bf16:16, *i64:16, *i64:16, *i64:16, i32:16, i32:16, i32, i32, i32, i32, 2, 32, 8192"),
    ("allreduce.py:allreduce_two_shot_kernel", "*fp16:16, *fp16:16, *fp16:16, *i64:16, *i64:16, *i64:16, i32:16, i32:16, i32:16, i32, i32, 8, 8192"),
]


def test_kernels_compile_for_cuda_with_128bit_accesses():
    """The library kernels compile for sm_90 from the public API alone, their data moves use 128-bit vector
    loads/stores (local and through dl.symm_at), and dl.wait / dl.notify are lowered (a system-scope acquire /
    membar.sys).
    The compiles run as parallel subprocesses (fresh processes: no interpreter mode)."""
    import subprocess
    import sys

    root = os.path.join(os.path.dirname(__file__), "..", "..")
    env = dict(os.environ, PYTHONPATH=os.path.join(root, "python"))
    env.pop("TRITON_INTERPRET", None)
    env.pop("TRITON_DIST_BACKEND", None)
    procs = []
    for kernel, sig in KERNELS:
        path = os.path.join(root, "python", "triton_dist", "kernels", kernel)
        procs.append((kernel, subprocess.Popen(
            [sys.executable, "-m", "triton_dist.tools.compile", path, "-s", sig, "--target", "cuda:90", "--stage",
             "ptx", "--num-warps", "8"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)))
    for kernel, p in procs:
        out, err = p.communicate(timeout=600)
        assert p.returncode == 0, (kernel, err[-3000:])
        assert out.count("st.global.v4") >= 2, (kernel, "no 128-bit stores")
        assert out.count("ld.global.v4") >= 2, (kernel, "no 128-bit loads")
        # dl.wait's acquire: an ld.acquire.sys spin, or on Triton 3.9+ (tl.atomic_poll, _compat.HAS_ATOMIC_POLL)
        # an ld.relaxed.sys spin followed by fence.acquire.sys
        acquire = "ld.acquire.sys" in out or ("ld.relaxed.sys" in out and "fence.acquire.sys" in out)
        assert acquire and "membar.sys" in out, kernel
        # the ready waits are tagged (issue 15 point 2): spin to the epoch (>=), then a differing signal is printed,
        # naming the kernel, and traps (device_print's format strings are byte arrays in the PTX)
        assert "setp.ge.s64 %tdw_p1" in out and "bra TDW_DIFFERS;" in out and "trap;" in out, kernel
        strings = [bytes(int(b) for b in m.split(",")).decode("latin-1")
                   for m in re.findall(r"\.b8 \w+\[\d+\] = \{([\d, ]+)\}", out)]
        name = kernel.split(":")[1]
        assert any(f"dl.wait in kernel {name}: RANKS DISAGREE" in t for t in strings), (kernel, strings)
