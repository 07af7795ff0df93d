"""Tensor-parallel MoE (``ops.ag_group_gemm`` / ``ops.group_gemm_rs``, ``layers.TPMoE``) on the simulator at 1, 2 and 4
ranks: the gathered layout (per expert: source rank, token, slot) and both ops' results against a torch reference of
the whole world, exact (integer-valued linear experts distinct per expert, the ops' documented roundings reproduced);
random routings with experts that get no rows, every token to one expert, top-1 and top-8, world size 1, three calls
per context (signals and buffers reused), weights passed transposed; the layer against ``moe_reference`` and the
plain torch TP layer; 0 tokens; bad input; benchmarks/bench_moe_tp.py --tiny at 1 and 2 ranks. Rank-side code:
``_moe_tp_sim_work.py``. Compilation for both targets: test/lit/moe/tp.py."""
import json

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
    return sim_ranks.run_checks(world, fn, *args, timeout=timeout, env=ENV)


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


@pytest.mark.parametrize("world", [1, 2])
@pytest.mark.sim
def test_bench_moe_tp_tiny(sim_ranks, world, tmp_path):  # noqa: F811
    """``benchmarks/bench_moe_tp.py --tiny`` in the rank processes of the tests above: ours (the layer and its two
    ops) and the torch baselines that run on the CPU checked against ``tp_moe_torch``, the JSON written with the
    simulator's provenance and no timing."""
    _run(sim_ranks, world, work.bench_tiny, str(tmp_path))
    (path, ) = tmp_path.glob("moe_tp-*.json")
    doc = json.loads(path.read_text())
    assert doc["benchmark"] == "bench_moe_tp" and doc["world_size"] == world and doc["devices"] == ["cpu-simulator"]
    assert doc["shared_gpu"] is False and doc["timing"].startswith("none: the simulator")
    (rec, ) = doc["records"]
    assert rec["world"] == world and rec["tokens_per_rank"] * world == rec["tokens"] and not rec["errors"], rec
    assert rec["checked"] == ["ours", "ours/ag_group_gemm", "ours/group_gemm_rs", "torch", "torch/capturable"]
    assert rec["rel_error_vs_torch"] < 2e-2 and rec["ops_rel_error_vs_torch"] < 2e-2
    assert "torch.compile" in rec["baselines_unavailable"] and rec["us"] == {}
