"""benchmarks/bench_shmem.py without a GPU: its argument parsing, launch configurations and row building (pure
functions), the clear exit where no GPU is visible, and its kernels executed on the simulator at 2 ranks (every
bandwidth kernel at several launch configurations, the put + quiet kernel and the three ping-pong kinds, launched
back to back as the CUDA graphs replay them). The timing itself needs the GPUs (scripts/gpu_suite.sh 3)."""
import os
import subprocess
import sys

import pytest
import torch

from conftest_sim import sim_ranks  # noqa: F401  (fixture)

HERE = os.path.dirname(os.path.abspath(__file__))
BENCH_DIR = os.path.join(HERE, "..", "..", "benchmarks")
SCRIPT = os.path.join(BENCH_DIR, "bench_shmem.py")
sys.path.insert(0, BENCH_DIR)
import bench_shmem as B  # noqa: E402

MB = 1 << 20
ENV = {"TRITON_DIST_SIM_WAIT_TIMEOUT": "90", "TRITON_DIST_SIM_SYMMETRIC_SIZE": "8M"}


def test_grid_for_covers_every_byte_once():
    for nbytes in (1, 15, 1024, 65536, 1000003, 16 * MB, 256 * MB):
        for per_sm in (1, 2, 4):
            for min_chunk in (B.SWEEP_MIN_CHUNK, B.MIN_CHUNK):
                programs, chunk = B.grid_for(nbytes, 132, per_sm, min_chunk)
                assert chunk % 16 == 0 and 1 <= programs <= max(1, per_sm * 132)
                assert (programs - 1) * chunk < nbytes <= programs * chunk  # the last program has bytes
    assert B.grid_for(256 * MB, 132, 1, B.MIN_CHUNK)[0] == 132  # the 2026-11-30 figures' grid
    assert B.grid_for(1024, 132, 4, B.MIN_CHUNK) == (1, 1024)  # small sizes keep one program
    assert B.grid_for(256 * MB, 132, 4, B.SWEEP_MIN_CHUNK)[0] == 528


def test_sweep_configs_distinct_and_bounded():
    big = B.sweep_configs(256 * MB, 132)
    assert len(big) == len(B.SWEEP_WARPS) * len(B.SWEEP_PROGRAMS_PER_SM)
    assert {c["num_warps"] for c in big} == set(B.SWEEP_WARPS)
    assert {c["programs"] for c in big} == {132, 264, 528}
    small = B.sweep_configs(1024, 132)  # one program whatever the per-SM count: one entry per num_warps
    assert [(c["num_warps"], c["programs"]) for c in small] == [(w, 1) for w in B.SWEEP_WARPS]
    for m in B.METHODS:
        cfg = B.default_config(m, 256 * MB, 132)
        assert (cfg["num_warps"], cfg["programs_per_sm"]) == B.BEST_KNOWN[m]


def test_graph_k_bounded():
    assert B.graph_k(1024) == B.MAX_K and B.graph_k(256 * MB) == 1 and B.graph_k(16 * MB) == 4


def test_best_of_and_suggested_default():
    rows = []
    for size in (16 * MB, 256 * MB):
        for warps, per_sm, gbps in ((4, 1, 300.0), (16, 2, 380.0), (32, 4, 390.0)):
            ok = not (warps == 32 and size == 256 * MB)  # fastest at one size but wrong at the other: never picked
            rows.append({"method": "getmem_block", "bytes": size, "num_warps": warps, "programs_per_sm": per_sm,
                         "programs": 132 * per_sm, "GBps": gbps, "ok": ok})
    rows.append({"method": "getmem_block", "bytes": MB, "num_warps": 8, "programs_per_sm": 1, "programs": 16,
                 "GBps": 999.0, "ok": True})  # below the sizes that decide the default
    assert B.best_of(rows[3:6])["num_warps"] == 16
    assert B.best_of([dict(r, ok=False) for r in rows]) is None
    assert B.suggested_default(rows) == {"getmem_block": (16, 2)}


def test_bandwidth_row_keeps_the_old_fields_and_adds_columns():
    per = {"putmem_block": {"us": 100.0, "eager_us": 120.0, "ok": True, "num_warps": 4, "programs": 132,
                            "graphed": True}}
    best = {"putmem_block": {"GBps": 400.0, "num_warps": 16, "programs": 264}}
    row = B.bandwidth_row(40_000_000, {"us": 110.0, "eager_us": 130.0}, per, best)
    for key in ("bytes", "programs", "peer_copy_us", "peer_copy_GBps", "putmem_block_us", "putmem_block_GBps",
                "putmem_block_ok", "putmem_block_vs_peer_copy"):
        assert key in row, key
    assert row["putmem_block_GBps"] == pytest.approx(400.0) and row["peer_copy_GBps"] == pytest.approx(40e6 / 110e3)
    assert row["putmem_block_vs_peer_copy"] == pytest.approx(1.1)
    assert row["putmem_block_eager_vs_peer_copy"] == pytest.approx(130.0 / 120.0)
    assert row["putmem_block_best_num_warps"] == 16 and row["putmem_block_best_vs_peer_copy"] == pytest.approx(1.1)
    assert row["putmem_block_timing"] == "graph"
    no_peer = B.bandwidth_row(1024, {}, per, None)
    assert "peer_copy_GBps" not in no_peer and "putmem_block_vs_peer_copy" not in no_peer
    lat = B.latency_row("dl", 8, 2.5, 2.6, 2000, 2000)
    assert lat["one_way_us"] == 1.25 and lat["ok"] and not B.latency_row("dl", 8, 2.5, 2.6, 3, 2000)["ok"]


def test_parse_args():
    a = B.parse_args([])
    assert a.sizes == B.FULL_SIZES and not a.sweep
    a = B.parse_args(["--quick", "--sweep"])
    assert a.sizes == B.QUICK_SIZES and a.sweep
    assert B.parse_args(["--sizes", "1024,2048"]).sizes == [1024, 2048]
    for bad in (["--sizes", "1k"], ["--sizes", "0"], ["--samples", "0"], ["--pp-iters", "1"]):
        with pytest.raises(SystemExit):
            B.parse_args(bad)


def test_help_and_clear_exit_without_gpu():
    env = dict(os.environ, PYTHONPATH=os.path.join(HERE, "..", "..", "python"))
    out = subprocess.run([sys.executable, SCRIPT, "--help"], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0 and "--sweep" in out.stdout and "CUDA-graph replay" in out.stdout
    if torch.cuda.is_available():
        pytest.skip("a GPU is visible: the no-GPU exit is not reachable here")
    out = subprocess.run([sys.executable, SCRIPT, "--quick"], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode != 0 and "needs CUDA GPUs" in out.stderr


# --------------------------------------------------------------------------------------------------- simulator

def _bench_kernels():
    """Inside a rank process: the bench's kernels at 2 ranks, results checked; returns a list of failures."""
    sys.path.insert(0, BENCH_DIR)
    import bench_shmem as bench
    from triton_dist.runtime.sim import current
    from triton_dist.runtime.sim.backend import SimBackend

    b, ctx = SimBackend(), current()
    r, n = ctx.rank, ctx.world_size
    nxt, prv = (r + 1) % n, (r - 1) % n
    size = 64 * 1024 + 48  # not a multiple of any chunk: the last program's part is short
    src = b.create_tensor((size, ), torch.uint8)
    dst = b.create_tensor((size, ), torch.uint8)
    src.copy_((torch.arange(size) * 7 + r).to(torch.uint8))
    expect = (torch.arange(size) * 7 + prv).to(torch.uint8)
    fails = []
    configs = [bench.default_config(bench.METHODS[0], size, 4)] + bench.sweep_configs(size, 4)[:3]
    for m in bench.METHODS:
        get, nbi = m.startswith("get"), "nbi" in m
        for cfg in configs:
            dst.zero_()
            b.barrier_all_on_stream()
            bench.k_rma_bw[(cfg["programs"], )](dst, src, size, cfg["chunk"], prv if get else nxt, GET=get, NBI=nbi,
                                                num_warps=cfg["num_warps"])
            b.barrier_all_on_stream()
            if not torch.equal(dst, expect):
                fails.append(f"rank {r} {m} {cfg}: wrong bytes")
            b.barrier_all_on_stream()
    dst.zero_()
    b.barrier_all_on_stream()
    bench.k_put_quiet[(1, )](dst, src, 1024, nxt)
    b.barrier_all_on_stream()
    if not torch.equal(dst[:1024], expect[:1024]) or dst[1024:].any():
        fails.append(f"rank {r} put_quiet: wrong bytes")
    sig = b.create_tensor((1, ), torch.int64)
    iters = 3
    for kind, mode in bench.PP_MODES.items():
        sig.zero_()
        dst.zero_()
        b.barrier_all_on_stream()
        for _ in range(2):  # back to back without a reset, as a graph of k launches replays them
            bench.k_ping_pong[(1, )](dst, src, sig, iters, 1024, 1 - r, IS_PING=(r == 0), MODE=mode)
        b.barrier_all_on_stream()
        want = (iters << 32) | iters if kind == "flagged" else iters  # flagged: (flag << 32) | data
        if int(sig.item()) != want:
            fails.append(f"rank {r} ping-pong {kind}: final signal {int(sig.item())}, want {want}")
        if mode == 0 and not torch.equal(dst[:1024], ((torch.arange(1024) * 7 + (1 - r)).to(torch.uint8))):
            fails.append(f"rank {r} ping-pong {kind}: payload not delivered")
        b.barrier_all_on_stream()
    return fails


@pytest.mark.sim
def test_bench_kernels_on_the_simulator(sim_ranks):  # noqa: F811
    res = sim_ranks.run(2, _bench_kernels, timeout=240, env=ENV, local_world_size=2)
    assert res == [[], []], res
