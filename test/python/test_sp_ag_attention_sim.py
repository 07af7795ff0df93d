"""Sequence-parallel prefill attention with the fused K/V all-gather (``ops.sp_ag_attention``) on the simulator at
1, 2 and 4 ranks: every rank holds a contiguous chunk of every sequence, and every rank's result (out and lse) is
checked against a plain fp32 torch attention of its query rows over the concatenated K/V (causal masking by global
position, and not causal). Cases: batch 2 (and a smaller batch / shorter chunk than the context's capacity), GQA 2,
D 64 and one D 128 case, chunk lengths that are not multiples of the 16-row tiles, several calls per context
(signals and buffers reused; causal and non-causal calls mixed on one context, ``out=``, ``return_lse``, strided
q / k / v / out), bad input (a one-line ValueError before any launch, then a good call), and ranks that disagree on
the chunk length or on ``causal`` (reported by the tagged waits, not waited for), and the registered op under
``torch.compile(fullgraph=True)`` equal to an eager call. Rank-side code:
``_sp_ag_attention_sim_work.py``. Compilation for both targets: test/lit/attention/sp_ag_attention.py."""
import pytest

import _sp_ag_attention_sim_work as work
from conftest_sim import sim_ranks  # noqa: F401  (fixture)

ENV = {"TRITON_DIST_SIM_WAIT_TIMEOUT": "240", "TRITON_DIST_SIM_SYMMETRIC_SIZE": "64M"}  # the common env: one pool per world size

# (B, L, Hq, Hkv, D, calls): the context's capacity (B, L); calls: (causal, batch, chunk length, how)
CASES = {
    1: [(2, 20, 4, 2, 64, [(True, 2, 20, "lse"), (False, 1, 13, "out")])],
    2: [(2, 40, 4, 2, 64, [(True, 2, 37, "lse"), (False, 2, 40, "strided"), (True, 1, 18, "plain")]),
        (1, 20, 2, 1, 128, [(True, 1, 20, "out")])],
    4: [(2, 20, 4, 2, 64, [(True, 2, 17, "lse"), (False, 1, 20, "out"), (True, 2, 16, "strided")])],
}


def _run(sim_ranks, world, fn, *args, timeout=400):  # noqa: F811
    return sim_ranks.run_checks(world, fn, *args, timeout=timeout, env=ENV)


@pytest.mark.parametrize("world", [1, 2, 4])
@pytest.mark.sim
def test_sp_ag_attention(sim_ranks, world):  # noqa: F811
    checks = _run(sim_ranks, world, work.attention_cases, CASES[world])
    want = sum(len(c[-1]) for c in CASES[world])
    assert checks == [want] * world, checks


@pytest.mark.sim
def test_sp_ag_attention_bad_input(sim_ranks):  # noqa: F811
    _run(sim_ranks, 2, work.bad_input_cases)


@pytest.mark.sim
def test_sp_ag_attention_ranks_that_disagree_are_reported(sim_ranks):  # noqa: F811
    res = sim_ranks.run(2, work.mismatch_cases, timeout=120, env=ENV)
    for rank in range(2):
        got = res[rank]["length"]
        assert got is not None, (rank, "length mismatch not reported")
        typ, msg = got
        assert typ == "SimSignalMismatch" and "\n" not in msg, (rank, typ, msg)
        assert msg.startswith(f"sp_ag_attention: [triton_dist sim] rank {rank}: ranks disagree"), msg
    assert res[0]["causal"] is None, res[0]  # rank 0 (causal) reads no peer chunk
    typ, msg = res[1]["causal"]
    assert typ == "SimSignalMismatch" and msg.startswith("sp_ag_attention: "), (typ, msg)


@pytest.mark.sim
def test_sp_ag_attention_under_torch_compile(sim_ranks):  # noqa: F811
    _run(sim_ranks, 2, work.compile_case)
