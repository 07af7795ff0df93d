"""Ulysses sequence parallelism (``ops.pre_attn_all_to_all`` / ``ops.post_attn_all_to_all``) on the simulator at 1,
2 and 4 ranks: every rank derives the global q, k, v from one seed, takes its chunk of the sequence and checks the
results exactly against plain torch slices of the global tensors (the ops move bytes). Cases: bf16, fp16 and fp32,
D 32 / 64 / 128 / 48 (not a power of two), head groups of 1, 2 and 3 (not a power of two: a tile of 4 heads,
masked), row blocks past the last row (masked), GQA (k / v with fewer heads
through the same context), strided inputs (views of a fused qkv tensor, a transposed attention output), ``out=``
views inside NaN margins (a write past any edge of a tile's masks shows), five calls per context (pre q, pre k,
pre v, post, post: the signals and slots reused); bad input (one-line ValueError before any launch, then a good
call) and pre on one rank against post on the other (reported at once by
the tagged waits). Rank-side code: ``_ulysses_sim_work.py``. Compilation for both targets:
test/lit/attention/ulysses.py."""
import json

import pytest

import _ulysses_sim_work as work
from conftest_sim import sim_ranks  # noqa: F401  (fixture)

ENV = {"TRITON_DIST_SIM_WAIT_TIMEOUT": "240", "TRITON_DIST_SIM_SYMMETRIC_SIZE": "64M"}  # the common env: one pool per world size

# (B, L per rank, H, Hkv, D, dtype)
CASES = {
    1: [(2, 3, 4, 2, 64, "bfloat16")],
    2: [(1, 3, 4, 2, 64, "bfloat16"), (1, 5, 6, 6, 32, "float32"), (2, 3, 2, 2, 48, "float16")],
    4: [(1, 2, 8, 4, 128, "bfloat16")],
}


def _run(sim_ranks, world, fn, *args, timeout=300):  # noqa: F811
    return sim_ranks.run_checks(world, fn, *args, timeout=timeout, env=ENV)


@pytest.mark.parametrize("world", [1, 2, 4])
@pytest.mark.sim
def test_ulysses_all_to_all(sim_ranks, world):  # noqa: F811
    checks = _run(sim_ranks, world, work.a2a_cases, CASES[world])
    assert checks == [len(CASES[world])] * world, checks


@pytest.mark.sim
def test_ulysses_bad_input(sim_ranks):  # noqa: F811
    _run(sim_ranks, 2, work.bad_input_cases)


@pytest.mark.sim
def test_ulysses_registered_ops_and_compile(sim_ranks):  # noqa: F811
    _run(sim_ranks, 2, work.compiled_ops)


@pytest.mark.sim
def test_bench_attention_ulysses_tiny(sim_ranks, tmp_path):  # noqa: F811
    """``benchmarks/bench_attention.py --tiny --only ulysses`` at 2 ranks: pre and post checked against the
    torch.distributed formulation (all_to_all_single on gloo here) and post(pre(x)) == x, the JSON written with the
    simulator's provenance and no timing."""
    _run(sim_ranks, 2, work.bench_tiny, str(tmp_path))
    (path, ) = tmp_path.glob("attention_ulysses-*.json")
    doc = json.loads(path.read_text())
    assert doc["benchmark"] == "bench_attention" and doc["world_size"] == 2 and doc["shared_gpu"] is False
    assert doc["timing"].startswith("none: the simulator")
    (rec, ) = doc["records"]
    assert rec["part"] == "ulysses" and rec["world"] == 2 and not rec["errors"], rec
    assert rec["checked"] == ["pre", "torch_pre", "post", "torch_post"] and rec["us"] == {}, rec
