"""The mega kernel's communication families (AllReduce, Barrier) on the simulator at 2 and 4 ranks, Activation and
Prefetch on a world-1 builder, the argument checks, and a compile of a generated kernel holding all four for
cuda:90 and hip:gfx942. Rank-side code: ``_mega_comm_sim_work.py`` (many checks per call; one pool per world size)."""
import os
import subprocess
import sys

import pytest

import _mega_comm_sim_work as work
from conftest_sim import sim_ranks  # noqa: F401  (fixture)

# The wait bound only turns a hang into an error; generous so a loaded 2-core CI machine never trips it.
ENV = {"TRITON_DIST_SIM_WAIT_TIMEOUT": "240", "TRITON_DIST_SIM_SYMMETRIC_SIZE": "16M"}


@pytest.mark.parametrize("world", [2, 4])
@pytest.mark.sim
def test_allreduce_steps(sim_ranks, world):  # noqa: F811
    """Several steps on one builder (parity, epoch flags, cleared words), ragged bf16, fp32, fp16 in place, a
    linear -> allreduce -> add -> linear -> allreduce chain, exact; random floats bit-identical on every rank."""
    res = sim_ranks.run(world, work.allreduce_cases, timeout=300, env=ENV)
    for rank, (fails, checks, _) in enumerate(res):
        assert checks >= 21, (rank, checks)
        assert not fails, (rank, fails)
    for step in range(len(res[0][2])):
        for rank in range(1, world):
            assert res[rank][2][step].equal(res[0][2][step]), (step, rank)


@pytest.mark.sim
def test_barrier_orders_across_ranks(sim_ranks):  # noqa: F811
    res = sim_ranks.run(2, work.barrier_cases, timeout=300, env=ENV)
    for rank, (fails, checks) in enumerate(res):
        assert checks == 4, (rank, checks)
        assert not fails, (rank, fails)


@pytest.mark.sim
def test_activation_prefetch_and_argument_errors(sim_ranks):  # noqa: F811
    fails = sim_ranks.run(2, work.argument_errors, timeout=120, env=ENV)
    assert fails == [[], []], fails
    (fails, checks), _ = sim_ranks.run(2, work.world1_cases, timeout=300, env=ENV)
    assert checks == 17 and not fails, (checks, fails)


@pytest.mark.sim
def test_generated_kernel_compiles_for_cuda_and_hip(sim_ranks, tmp_path):  # noqa: F811
    """A world-2 step with prefetch, linear, silu_mul_up, barrier and two allreduces compiles for sm_90 and gfx942;
    the SHMEM calls (symm_at) stay unresolved on purpose (``TRITON_DIST_NO_SHMEM_BITCODE=1``, ``ptxas -c``)."""
    (src, names), _ = sim_ranks.run(2, work.mega_source, timeout=120, env=ENV)
    assert names == ["Prefetch:prefetch", "Linear:linear", "Activation:silu_mul_up", "Barrier:barrier_all_intra_node",
                     "AllReduce:allreduce", "AllReduce:allreduce"], names  # bf16 and fp32: two branches
    path = tmp_path / "mega_step.py"
    path.write_text(src)
    root = os.path.join(os.path.dirname(__file__), "..", "..")
    env = dict(os.environ, PYTHONPATH=os.path.join(root, "python"), TRITON_DIST_NO_SHMEM_BITCODE="1",
               PTXAS_OPTIONS="-c")  # ptxas -c: nvshmem_ptr stays an unresolved extern
    env.pop("TRITON_INTERPRET", None)
    env.pop("TRITON_DIST_BACKEND", None)
    sig = "*i32, *i32, *i64, *i32, *i32, *i32, *i32, *i64"
    consts = ["-D", "QUEUE_CAP=8", "-D", "ROW=8", "-D", "NUM_ARGS=3", "-D", "DYNAMIC=0", "-D", "STRICT=0", "-D",
              "PROFILE=0"]
    procs = []
    for target, stage in (("cuda:90", "ptx"), ("hip:gfx942", "amdgcn")):
        procs.append((target, subprocess.Popen(
            [sys.executable, "-m", "triton_dist.tools.compile", f"{path}:MEGA_TRITON_KERNEL", "-s", sig, *consts,
             "--target", target, "--stage", stage], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env=env)))
    for target, p in procs:
        out, err = p.communicate(timeout=600)
        assert p.returncode == 0, (target, err[-3000:])
        if target.startswith("cuda"):
            assert "ld.global.cg" in out, "prefetch: no L2-only loads"
            assert "membar.sys" in out or "fence.sc.sys" in out or "fence.acq_rel.sys" in out, "no system fence"
