"""Sequence-parallel decode attention (``ops.sp_flash_decode``) on the simulator at 1, 2 and 4 ranks: each rank
holds a contiguous slice of every request's tokens in its own paged cache (pages shuffled) and every rank's result
is checked against ``flash_decode_reference`` over the whole sequence. Cases: batch 3 with different lengths, a
request whose slice is empty on some ranks, a request empty everywhere (out 0, lse -inf), GQA 4, D 64 and one D 128
case with pages smaller than the tile, bf16; three calls per context (signals and buffers reused; the third with
``out=``); bad input (one-line ValueError before any launch, then a good call). Rank-side code:
``_sp_attention_sim_work.py``. Compilation for both targets: test/lit/attention/sp_decode.py."""
import pytest

import _sp_attention_sim_work as work
from conftest_sim import sim_ranks  # noqa: F401  (fixture)

ENV = {"TRITON_DIST_SIM_WAIT_TIMEOUT": "240", "TRITON_DIST_SIM_SYMMETRIC_SIZE": "64M"}  # the common env: one pool per world size

# (Hq, Hkv, D, page, slices): slices[b][r] = rank r's token count of request b
CASES = {
    1: [(4, 1, 64, 16, [[20], [5], [0]])],
    2: [(8, 2, 64, 16, [[17, 9], [0, 12], [0, 0]]), (4, 1, 128, 4, [[3, 30]])],
    4: [(4, 1, 64, 16, [[5, 0, 11, 2], [0, 0, 0, 0], [1, 1, 1, 1]])],
}


def _run(sim_ranks, world, fn, *args, timeout=300):  # noqa: F811
    return sim_ranks.run_checks(world, fn, *args, timeout=timeout, env=ENV)


@pytest.mark.parametrize("world", [1, 2, 4])
@pytest.mark.sim
def test_sp_flash_decode(sim_ranks, world):  # noqa: F811
    checks = _run(sim_ranks, world, work.decode_cases, CASES[world])
    assert checks == [3 * len(CASES[world])] * world, checks


@pytest.mark.sim
def test_sp_flash_decode_bad_input(sim_ranks):  # noqa: F811
    _run(sim_ranks, 2, work.bad_input_cases)


@pytest.mark.sim
def test_sp_flash_decode_under_torch_compile(sim_ranks):  # noqa: F811
    """The registered op (fake shapes, fullgraph tracing) and the compiled call equal to an eager one."""
    _run(sim_ranks, 2, work.compile_case)
