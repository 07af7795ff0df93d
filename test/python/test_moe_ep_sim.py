"""Expert-parallel dispatch / combine (``ops.ep_dispatch`` / ``ops.ep_combine``) on the simulator at 1, 2 and 4
ranks: the received layout against a torch reference of the whole world (per local expert: source rank, token,
slot order), and the combined output with per-expert distinct functions (expert ``g`` scales by ``g + 1``), exact.
Random routings with empty experts, every token to one expert, routings that leave whole ranks without rows,
top-1 and top-8, uneven token counts per rank (0 included), two dispatches in flight; bad input. Rank-side code:
``_moe_ep_sim_work.py``."""
import pytest

import _moe_ep_sim_work as work
from conftest_sim import sim_ranks  # noqa: F401  (fixture)

ENV = {"TRITON_DIST_SIM_WAIT_TIMEOUT": "240", "TRITON_DIST_SIM_SYMMETRIC_SIZE": "64M"}

# (E, k, H, max_tokens, dtype, mode, uneven token counts)
CASES = {
    1: [(4, 2, 24, 5, "float32", "random", False), (2, 1, 16, 3, "bfloat16", "one_expert", False)],
    2: [(8, 2, 40, 6, "float32", "random", True), (8, 8, 16, 3, "bfloat16", "random", False),
        (4, 1, 16, 5, "float32", "one_expert", True), (8, 3, 16, 4, "float32", "skewed", False)],
    4: [(8, 2, 24, 5, "float32", "random", True), (16, 8, 16, 2, "bfloat16", "skewed", False)],
}


@pytest.mark.parametrize("world", [1, 2, 4])
@pytest.mark.sim
def test_dispatch_combine(sim_ranks, world):  # noqa: F811
    res = sim_ranks.run(world, work.dispatch_combine_cases, CASES[world], timeout=900, env=ENV)
    for rank, (fails, checks) in enumerate(res):
        assert not fails, (rank, fails)
        assert checks == 4 * len(CASES[world]), (rank, checks)


@pytest.mark.sim
def test_bad_input(sim_ranks):  # noqa: F811
    res = sim_ranks.run(2, work.bad_input_cases, timeout=600, env=ENV)
    for rank, (fails, _) in enumerate(res):
        assert not fails, (rank, fails)


# the device code compiles for both targets from the public API (dl.symm_at over row pointers, dl.notify "add",
# tagged waits)
@pytest.mark.parametrize("kernel,sig,expect", [
    # totals, cnt, cnt_ready, counter, send_base, offs, expect, tag, E, E_LOC, NCHUNK, PAR, rank, WORLD, BLOCK_E
    ("ep_exchange_kernel", "*i32:16, *i32:16, *i64:16, *i64:16, *i32:16, *i32:16, *i64:16, i32, i32, i32, i32, i32, "
                           "i32, 4, 256", ["st.relaxed.sys.b64", "membar.sys", "ld.acquire.sys"]),
    # x, ids, base, send_base, tok, meta, arrived, P, TOPK, E, E_LOC, NB, H, stride_x, TMAXK, rank, WORLD, BLOCK,
    # BLOCK_H
    ("ep_dispatch_kernel", "*bf16:16, *i64:16, *i32:16, *i32:16, *bf16:16, *i32:16, *i64:16, i32, i32, i32, i32, "
                           "i32, i32:16, i32:16, i32, i32, 4, 64, 256", ["membar.sys", "atom.relaxed.sys.add.u64", "st.global.v4"]),
    ("ep_arrival_wait_kernel", "*i64:16, *i64:16", ["ld.acquire.sys"]),
    # eo, meta, offs, cbuf, arrived, H, stride_eo, TMAXK, E_LOC, WORLD, BLOCK, BLOCK_H
    ("ep_combine_send_kernel", "*bf16:16, *i32:16, *i32:16, *bf16:16, *i64:16, i32:16, i32:16, i32, i32, 8, 64, 256",
     ["membar.sys", "atom.relaxed.sys.add.u64"]),
    # cbuf, ids, w, out, TOPK, E, H, stride_w, stride_out, BLOCK_H
    ("ep_combine_reduce_kernel", "*bf16:16, *i64:16, *fp32:16, *bf16:16, i32, i32, i32:16, i32, i32:16, 256", []),
])
@pytest.mark.parametrize("target", ["cuda:90", "hip:gfx942"])
def test_ep_kernels_compile_for_every_target(kernel, sig, expect, target):
    from _subprocess_runs import compile_kernel

    res = compile_kernel("moe_ep.py", kernel, sig, target, "--num-warps", "4")
    assert res.returncode == 0, res.stderr[-3000:]
    if target == "cuda:90":
        for s in expect:
            assert s in res.stdout, (kernel, s)


@pytest.mark.sim
def test_ep_layer_matches_the_reference(sim_ranks):  # noqa: F811
    """The MoE layer at EP = 4 (dispatch, grouped GEMMs + SiLU gate over each rank's experts, combine) against the
    plain per-expert reference of the whole layer."""
    res = sim_ranks.run(4, work.layer_case, 8, 2, 32, 16, 5, timeout=900, env=ENV)
    for rank, (fails, _) in enumerate(res):
        assert not fails, (rank, fails)
