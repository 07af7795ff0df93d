"""Expert-parallel dispatch / combine (``ops.ep_dispatch`` / ``ops.ep_combine``) on the simulator at 1, 2 and 4
ranks: the received layout against a torch reference of the whole world (per local expert: source rank, token,
slot order), and the combined output with per-expert distinct functions (expert ``g`` scales by ``g + 1``), exact.
Random routings with empty experts, every token to one expert, routings that leave whole ranks without rows,
top-1 and top-8, uneven token counts per rank (0 included), two dispatches in flight; bad input. Every method:
``push`` everywhere, ``normal`` on a subset of the cases (its layout also compared bit for bit with push's of the same
inputs, its combine with its own documented rounding), ``ll`` on push's cases (one at 4 ranks; its layout also
compared bit for bit with push's, its combine exactly as push's). Rank-side code: ``_moe_ep_sim_work.py``. Compilation for
both targets: test/lit/moe/ep.py."""
import pytest

import _moe_ep_sim_work as work
from conftest_sim import sim_ranks  # noqa: F401  (fixture)

ENV = {"TRITON_DIST_SIM_WAIT_TIMEOUT": "240", "TRITON_DIST_SIM_SYMMETRIC_SIZE": "64M"}


def _run(sim_ranks, world, fn, *args, timeout=600):  # noqa: F811
    """Run ``fn(*args)`` on ``world`` simulator ranks; every rank's list of failures must be empty. Returns each
    rank's count of checks."""
    return sim_ranks.run_checks(world, fn, *args, timeout=timeout, env=ENV)


# (E, k, H, max_tokens, dtype, mode, uneven token counts)
CASES = {
    1: [(4, 2, 24, 5, "float32", "random", False), (2, 1, 16, 3, "bfloat16", "one_expert", False)],
    2: [(8, 2, 40, 6, "float32", "random", True), (8, 8, 16, 3, "bfloat16", "random", False),
        (4, 1, 16, 5, "float32", "one_expert", True), (8, 3, 16, 4, "float32", "skewed", False)],
    4: [(8, 2, 24, 5, "float32", "random", True), (16, 8, 16, 2, "bfloat16", "skewed", False)],
}
# method "normal": a subset (its launches cost more on the simulator): uneven ranks with 0 tokens and several column
# chunks, top-8 in bf16 (partials rounded), top-1 with every token to one expert, a skewed top-8 at 4 ranks
NORMAL_CASES = {1: [CASES[1][1]], 2: CASES[2][:3], 4: [CASES[4][1]]}
# method "ll": push's cases (its layout also compared bit for bit with push's), one case at 4 ranks (uneven, several
# pair blocks per program on the simulator's 8-pair blocks)
LL_CASES = {1: CASES[1], 2: CASES[2], 4: [CASES[4][0]]}
METHOD_CASES = {"push": CASES, "normal": NORMAL_CASES, "ll": LL_CASES}


@pytest.mark.parametrize("world,method", [(w, m) for m in ("push", "normal", "ll") for w in (1, 2, 4)])
@pytest.mark.sim
def test_dispatch_combine(sim_ranks, world, method):  # noqa: F811
    cases = METHOD_CASES[method][world]
    checks = _run(sim_ranks, world, work.dispatch_combine_cases, cases, method, timeout=900)
    assert checks == [4 * len(cases)] * world, checks


@pytest.mark.parametrize("method", ["push", "normal", "ll"])
@pytest.mark.sim
def test_bad_input(sim_ranks, method):  # noqa: F811
    """Also, for normal: contexts with one method's buffers (methods=), and ranks calling different methods; for ll:
    its capacity limits (max_tokens <= 256, topk <= 8) at creation, and the default methods leaving it out past
    them."""
    _run(sim_ranks, 2, work.bad_input_cases, method)


@pytest.mark.sim
def test_ep_layer_matches_the_reference(sim_ranks):  # noqa: F811
    """The MoE layer at EP = 4 (dispatch, grouped GEMMs + SiLU gate over each rank's experts, combine) against the
    plain per-expert reference of the whole layer."""
    _run(sim_ranks, 4, work.layer_case, 8, 2, 32, 16, 5, timeout=900)


@pytest.mark.parametrize("method", ["push", "normal", "ll"])
@pytest.mark.sim
def test_fp8_dispatch(sim_ranks, method):  # noqa: F811
    """quant="fp8": rows quantised on the sender (e4m3, one scale per 128 columns) land as moe_route(quant="fp8")
    would make them (normal: once per token; normal and ll: equal to push's); two column chunks, uneven ranks."""
    _run(sim_ranks, 2, work.fp8_case, 4, 2, 256, 5, method, timeout=900)


@pytest.mark.parametrize("method,delay_s", [("push", 3.0), ("normal", 2.0), ("ll", 2.0)])
@pytest.mark.sim
def test_a_slow_rank_without_traffic_cannot_be_overrun(sim_ranks, method, delay_s):  # noqa: F811
    """Review finding (2026-12-05): the count exchange's slots were chosen by the host's buffer parity, so a rank that
    exchanges no rows with a slow peer could overwrite the peer's unread signal (a false "ranks disagree") or, with
    the parity frozen by a CUDA graph, its unread counts (a hang). Slots now follow the device epoch; normal's
    token-count exchange uses the same slots, and ll's count exchange is push's (program 0 of its one kernel)."""
    _run(sim_ranks, 2, work.slow_rank_without_traffic, delay_s, method)


@pytest.mark.parametrize("method", ["push", "normal", "ll"])
@pytest.mark.sim
def test_unchecked_ids_refilled_router_and_out(sim_ranks, method):  # noqa: F811
    _run(sim_ranks, 2, work.unchecked_ids_and_refilled_router, method)
