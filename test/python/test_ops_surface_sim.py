"""The public op surface on the simulator at 2 ranks (docs/ops.md): a TP block compiled with
``torch.compile(fullgraph=True)`` over every op family, checked against torch and against its eager run; the fake
implementations against the real ops; the capture guard of the collectives and p2p; the naming convention's
aliases. Rank-side functions: _ops_surface_sim_work.py."""
import pytest

import _ops_surface_sim_work as work
from conftest_sim import sim_ranks  # noqa: F401  (fixture)

pytestmark = pytest.mark.sim

# as test_overlap_sim.py, so a CI session reuses one rank pool
ENV = {"TRITON_DIST_SIM_WAIT_TIMEOUT": "240", "TRITON_DIST_SIM_SYMMETRIC_SIZE": "64M"}


@pytest.mark.parametrize("fn", ["compiled_tp_mlp", "fake_shapes", "capture_guard", "conventions"])
def test_ops_surface_on_simulator(sim_ranks, fn):  # noqa: F811
    res = sim_ranks.run(2, getattr(work, fn), timeout=300, env=ENV)
    assert not any(res), res
