"""Tensor-parallel MoE (``ops.ag_group_gemm`` / ``ops.group_gemm_rs``, ``layers.TPMoE``) on the simulator at 1, 2 and 4
ranks: the gathered layout (per expert: source rank, token, slot) and both ops' results against a torch reference of
the whole world, exact (integer-valued linear experts distinct per expert, the ops' documented roundings reproduced);
random routings with experts that get no rows, every token to one expert, top-1 and top-8, world size 1, three calls
per context (signals and buffers reused), weights passed transposed; the layer against ``moe_reference`` and the
plain torch TP layer; 0 tokens; bad input. Rank-side code: ``_moe_tp_sim_work.py``. Compilation for both targets:
test/lit/moe/tp.py."""
import pytest

import _moe_tp_sim_work as work
from conftest_sim import sim_ranks  # noqa: F401  (fixture)

ENV = {"TRITON_DIST_SIM_WAIT_TIMEOUT": "240", "TRITON_DIST_SIM_SYMMETRIC_SIZE": "64M"}

# (E, k, H, N, T, dtype, mode)
CASES = {
    1: [(4, 2, 16, 16, 5, "bfloat16", "random"), (2, 1, 16, 32, 3, "float16", "one_expert")],
    2: [(8, 2, 16, 16, 5, "bfloat16", "random"), (8, 8, 16, 16, 2, "bfloat16", "random"),
        (4, 1, 32, 16, 3, "float16", "one_expert"), (8, 3, 16, 16, 4, "bfloat16", "skewed")],
    4: [(8, 2, 16, 16, 3, "bfloat16", "random")],
}


def _run(sim_ranks, world, fn, *args, timeout=600):  # noqa: F811
    res = sim_ranks.run(world, fn, *args, timeout=timeout, env=ENV)
    for rank, (fails, _) in enumerate(res):
        assert not fails, (rank, fails)
    return [checks for _, checks in res]


@pytest.mark.parametrize("world", [1, 2, 4])
@pytest.mark.sim
def test_ag_group_gemm_and_group_gemm_rs(sim_ranks, world):  # noqa: F811
    checks = _run(sim_ranks, world, work.op_cases, CASES[world], timeout=900)
    assert checks == [3 * len(CASES[world])] * world, checks


@pytest.mark.parametrize("world", [1, 2])
@pytest.mark.sim
def test_tp_moe_layer(sim_ranks, world):  # noqa: F811
    _run(sim_ranks, world, work.layer_case, 8, 2, 32, 32, 4)


@pytest.mark.sim
def test_bad_input(sim_ranks):  # noqa: F811
    _run(sim_ranks, 2, work.bad_input_cases)
