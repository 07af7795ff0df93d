"""``layers.SPAttention`` on the simulator at 1, 2 and 4 ranks (small shapes): prefill through the fused all-gather
(``"ag"``) and Ulysses (``"ulysses"``), causal and not, and decode over slices of different lengths (empty on some
ranks) -- against the plain torch references (``sp_attention_prefill_torch`` / ``sp_attention_decode_torch``) and
both against attention over the whole sequence; bad input. Rank-side code: ``_sp_attention_layer_sim_work.py``."""
import pytest

import _sp_attention_layer_sim_work as work
from conftest_sim import sim_ranks  # noqa: F401  (fixture)

ENV = {"TRITON_DIST_SIM_WAIT_TIMEOUT": "240", "TRITON_DIST_SIM_SYMMETRIC_SIZE": "64M"}  # the common env: one pool per world size

PREFILL = {1: [("ag", 4, 2, 64, 1, 24)],
           2: [("ag", 4, 2, 64, 2, 20), ("ulysses", 4, 2, 64, 1, 24)],
           4: [("ulysses", 4, 4, 64, 1, 16)]}
DECODE = {1: [(4, 2, 64, 16, [[9], [0]])], 2: [(4, 1, 64, 4, [[7, 0], [3, 12]])]}


def _run(sim_ranks, world, fn, *args):  # noqa: F811
    return sim_ranks.run_checks(world, fn, *args, timeout=400, env=ENV)


@pytest.mark.parametrize("world", [1, 2, 4])
@pytest.mark.sim
def test_sp_attention_prefill(sim_ranks, world):  # noqa: F811
    assert _run(sim_ranks, world, work.prefill_cases, PREFILL[world]) == [4 * len(PREFILL[world])] * world


@pytest.mark.parametrize("world", [1, 2])
@pytest.mark.sim
def test_sp_attention_decode(sim_ranks, world):  # noqa: F811
    assert _run(sim_ranks, world, work.decode_cases, DECODE[world]) == [8 * len(DECODE[world])] * world


@pytest.mark.sim
def test_sp_attention_bad_input(sim_ranks):  # noqa: F811
    assert _run(sim_ranks, 2, work.bad_input_cases) == [5, 5]
