"""The mega kernel's core (triton_dist.mega_triton_kernel): dependency derivation, scheduling, code generation,
the builder's checks and fusions (unit tests, no kernel launch), and generated-kernel runs on the simulator
(``_mega_sim_work.py``, one rank): results, several steps without a host reset, scheduling variants bit-identical,
the strict-mode error naming both tasks, the profiler trace."""
import pytest
import torch

import _mega_sim_work as work
from conftest_sim import sim_ranks  # noqa: F401  (fixture)
from triton_dist.mega_triton_kernel.core import codegen, graph, scheduler
from triton_dist.mega_triton_kernel.core.task import Op, Task, Tile, logical_region, region


# ------------------------------------------------------------------------------------------------ graph
def _op(name, tiles):
    from triton_dist.mega_triton_kernel.tasks.elementwise import add_task

    return Op("Elementwise", name, 0, add_task, [], {}, tiles, name=name)


def test_dependencies_raw_war_waw_and_views():
    buf = torch.zeros(64, dtype=torch.float32)
    a, b = buf[:32], buf[32:]
    other = torch.zeros(16)
    ops = [
        _op("w_a", [Tile(writes=region(a))]),                                   # 0
        _op("w_b", [Tile(writes=region(b))]),                                   # 1
        _op("r_half", [Tile(reads=region(buf, slice(16, 48)), writes=region(other))]),  # 2: RAW on 0 and 1
        _op("r_a", [Tile(reads=region(a, slice(0, 8)))]),                       # 3: RAW on 0
        _op("w_a_again", [Tile(writes=region(a, slice(4, 6)))]),                # 4: WAW 0, WAR 2 (bytes 16..), 3
        _op("r_other", [Tile(reads=region(other))]),                            # 5: RAW on 2
    ]
    deps = [t.deps for t in graph.build_tasks(ops)]
    assert deps == [[], [], [0, 1], [0], [0, 3], [2]]


def test_dependencies_two_dimensional_slices():
    t = torch.zeros(4, 8)
    ops = [_op("cols", [Tile(writes=region(t, slice(None), slice(0, 4))), Tile(writes=region(t, slice(None), slice(4, 8)))]),
           _op("row1", [Tile(reads=region(t, 1))]), _op("left", [Tile(reads=region(t, slice(None), slice(0, 2)))])]
    deps = [t.deps for t in graph.build_tasks(ops)]
    assert deps == [[], [], [0, 1], [0]]


def test_logical_regions_only_meet_their_own_space():
    cache = torch.zeros(4, 4)
    ops = [_op("w_h0", [Tile(writes=logical_region(cache, "kv_head", 0, 1))]),
           _op("w_h1", [Tile(writes=logical_region(cache, "kv_head", 1, 2))]),
           _op("r_h1", [Tile(reads=logical_region(cache, "kv_head", 1, 2))]),
           _op("bytes", [Tile(reads=region(cache))])]
    assert [t.deps for t in graph.build_tasks(ops)] == [[], [], [1], []]
    with pytest.raises(ValueError, match="empty"):
        logical_region(cache, "kv_head", 2, 2)


def test_tile_that_never_waits_may_not_depend():
    t = torch.zeros(8)
    ops = [_op("w", [Tile(writes=region(t))]), _op("prefetch", [Tile(reads=region(t), waits=False)])]
    with pytest.raises(ValueError, match="never waits"):
        graph.build_tasks(ops)


def test_dep_ranges():
    assert graph.dep_ranges([]) == []
    assert graph.dep_ranges([1, 2, 3, 7, 9, 10]) == [(1, 3), (7, 1), (9, 2)]


# ------------------------------------------------------------------------------------------------ scheduler
def _tasks(n, deps):
    return [Task(index=i, op=0, tile=i, deps=deps(i), cost=1000.0 * (1 + i % 3)) for i in range(n)]


@pytest.mark.parametrize("policy", scheduler.POLICIES)
def test_queues_are_topological_and_complete(policy):
    tasks = _tasks(50, lambda i: [i - 1] if i % 5 else [])
    queues = scheduler.assign(tasks, 7, policy)
    assert sorted(i for q in queues for i in q) == list(range(50))
    assert all(q == sorted(q) for q in queues)
    assert all(tasks[i].worker == w for w, q in enumerate(queues) for i in q)


def test_balanced_policy_spreads_independent_tasks():
    tasks = _tasks(8, lambda i: [])
    for t in tasks:
        t.cost = 1e6
    assert [len(q) for q in scheduler.assign(tasks, 4, "balanced")] == [2, 2, 2, 2]


def test_scheduler_rejects_bad_arguments():
    with pytest.raises(ValueError, match="policy 'lifo' is not supported"):
        scheduler.assign([], 2, "lifo")
    with pytest.raises(ValueError, match="num_workers"):
        scheduler.assign([], 0)


# ------------------------------------------------------------------------------------------------ codegen
def test_render_constexpr():
    import triton.language as tl

    assert codegen.render_constexpr("a", 3) == "3"
    assert codegen.render_constexpr("a", True) == "True"
    assert codegen.render_constexpr("a", 1e-6) == "1e-06"
    assert codegen.render_constexpr("a", torch.bfloat16) == "tl.bfloat16"
    assert codegen.render_constexpr("a", tl.float16) == "tl.float16"
    with pytest.raises(ValueError, match="finite"):
        codegen.render_constexpr("a", float("nan"))
    with pytest.raises(TypeError, match="unsupported type list"):
        codegen.render_constexpr("a", [1])


def test_generated_source_dispatches_every_branch():
    keys = [("triton_dist.mega_triton_kernel.tasks.elementwise", "add_task", (("N", "8"),), False),
            ("triton_dist.mega_triton_kernel.tasks.linear", "linear_task", (("M", "1"),), True)]
    src = codegen.generate_source(keys, ["Elementwise:add", "Linear:linear"])
    compile(src, "<generated>", "exec")
    assert "if branch == 0:" in src and "elif branch == 1:" in src
    assert "_m0.add_task(args, tile, e, N=8)" in src
    assert "_m1.linear_task(args, tile, e, deps_ptr, dep_first, dep_count * (1 - STRICT), scoreboard_ptr, M=1)" in src
    assert "elif (branch != 1):" in src  # the outer wait skips the branch that waits inside


def test_device_function_must_be_importable():
    import triton_dist

    @triton_dist.jit
    def local_task(args, tile, step):
        pass

    op = Op("Elementwise", "x", 0, local_task, [], {}, [Tile()])
    with pytest.raises(ValueError, match="module-level"):
        codegen.branch_key(op)


# ------------------------------------------------------------------------------------------------ builder
def test_builder_checks_arguments():
    from triton_dist.mega_triton_kernel import ModelBuilder

    b = ModelBuilder()
    x, w, o = torch.zeros(1, 64).bfloat16(), torch.zeros(32, 64).bfloat16(), torch.zeros(1, 32).bfloat16()
    with pytest.raises(ValueError, match="K differs"):
        b.make_linear(x, torch.zeros(32, 48).bfloat16(), o)
    with pytest.raises(TypeError, match="weight must be torch.bfloat16"):
        b.make_linear(x, w.float(), o)
    with pytest.raises(ValueError, match="must be contiguous"):
        b.make_linear(x, torch.zeros(64, 32).bfloat16().T, o)
    with pytest.raises(ValueError, match="multiple of 16 bytes"):
        b.make_add(torch.zeros(9).bfloat16()[1:], torch.zeros(8).bfloat16(), torch.zeros(8).bfloat16())
    with pytest.raises(ValueError, match="rms_eps must be a positive number"):
        b.make_rms_norm(x, torch.zeros(64).bfloat16(), torch.zeros(1, 64).bfloat16(), rms_eps=0)
    with pytest.raises(ValueError, match="unknown task type 'conv'"):
        b._add("conv", 0)
    with pytest.raises(ValueError, match="layer_id"):
        b.make_linear(x, w, o, layer_id=-1)
    with pytest.raises(RuntimeError, match="no ops"):
        b.compile()
    with pytest.raises(RuntimeError, match="compile"):
        b.run()
    with pytest.raises(ValueError, match="num_workers must be 1"):
        ModelBuilder(num_workers=4)
    with pytest.raises(ValueError, match="rank 2 is not in"):
        ModelBuilder(rank=2, world_size=2)
    with pytest.raises(ValueError, match="policy"):
        ModelBuilder(policy="x")
    with pytest.raises(ValueError, match=r"gemv_prefetch_bytes must be an int in \[0, 2\*\*30\), got -1"):
        ModelBuilder(gemv_prefetch_bytes=-1)
    with pytest.raises(ValueError, match="split_loads_ahead must be a bool, got 1"):
        ModelBuilder(split_loads_ahead=1)
    for bad in (1, 9, True, 2.0):
        with pytest.raises(ValueError, match=r"gemv_stages must be 0 or an int in \[2, 8\]"):
            ModelBuilder(gemv_stages=bad)
    for bad in (-1, True, 256.0):
        with pytest.raises(ValueError, match="kv_split_positions must be an int >= 0"):
            ModelBuilder(kv_split_positions=bad)


def test_kv_split_count_policy():
    """Splits per (request, kv head): enough to fill the workers, with kv_split_positions at least one per that many
    positions of the longest possible sequence; never more than one per block, nor 128."""
    from triton_dist.mega_triton_kernel.tasks.flash_decode import pick_num_kv_splits

    assert pick_num_kv_splits(1, 8, 132, 512, 64) == 8 == pick_num_kv_splits(1, 8, 132, 512, 64, 256)
    assert pick_num_kv_splits(8, 8, 132, 4096, 64) == 2  # batch 8: a 4K request's split streams 2,048 positions
    assert pick_num_kv_splits(8, 8, 132, 4096, 64, 256) == 16
    assert pick_num_kv_splits(8, 8, 132, 4096, 64, 16) == 64  # one per block at most
    assert pick_num_kv_splits(1, 1, 1, 1 << 20, 64, 64) == 128


def test_gemv_prefetch_budget_from_the_environment(monkeypatch):
    from triton_dist.mega_triton_kernel import ModelBuilder
    from triton_dist.mega_triton_kernel.builder import GEMV_PREFETCH_BYTES

    assert ModelBuilder().gemv_prefetch_bytes == GEMV_PREFETCH_BYTES
    monkeypatch.setenv("TRITON_DIST_MEGA_GEMV_PREFETCH", "4096")
    assert ModelBuilder().gemv_prefetch_bytes == 4096
    assert ModelBuilder(gemv_prefetch_bytes=0).gemv_prefetch_bytes == 0  # the argument wins
    monkeypatch.setenv("TRITON_DIST_MEGA_GEMV_PREFETCH", "64k")
    with pytest.raises(ValueError, match="TRITON_DIST_MEGA_GEMV_PREFETCH='64k' is not an integer"):
        ModelBuilder()


def test_early_prefetch_budget_from_the_environment(monkeypatch):
    from triton_dist.mega_triton_kernel import ModelBuilder
    from triton_dist.mega_triton_kernel.builder import GEMV_EARLY_PREFETCH_BYTES

    assert ModelBuilder().gemv_early_prefetch_bytes == GEMV_EARLY_PREFETCH_BYTES
    monkeypatch.setenv("TRITON_DIST_MEGA_GEMV_EARLY_PREFETCH", "33554432")
    assert ModelBuilder().gemv_early_prefetch_bytes == 1 << 25
    assert ModelBuilder(gemv_early_prefetch_bytes=0).gemv_early_prefetch_bytes == 0  # the argument wins
    with pytest.raises(ValueError, match=r"gemv_early_prefetch_bytes must be an int in \[0, 2\*\*30\), got 1.5"):
        ModelBuilder(gemv_early_prefetch_bytes=1.5)
    monkeypatch.setenv("TRITON_DIST_MEGA_GEMV_EARLY_PREFETCH", "32M")
    with pytest.raises(ValueError, match="TRITON_DIST_MEGA_GEMV_EARLY_PREFETCH='32M' is not an integer"):
        ModelBuilder()


def _placed_qwen3(monkeypatch, budget, **kw):
    """A toy Qwen3 (8 q / 2 kv heads, hidden 512, fused MLP) compiled for 16 workers: queues and tables only, on the
    CPU (the builder told it targets NVIDIA; nothing is launched)."""
    import triton_dist.mega_triton_kernel.builder as bmod
    from triton_dist.mega_triton_kernel.models import Qwen3Config, Qwen3MegaModel, random_weights

    monkeypatch.setattr(bmod, "_backend_name", lambda: "nvidia")
    cfg = Qwen3Config.toy(num_q_heads=8, hidden_size=512, intermediate_size=1024)
    return Qwen3MegaModel(cfg, random_weights(cfg), num_workers=16, device="cpu", enable_mlp_fc1_silu_fusion=True,
                          gemv_prefetch_bytes=0, gemv_early_prefetch_bytes=budget, **kw).builder


def _entry_slots(b, i):
    """Op ``i``'s tiles -> the task whose slot should carry the tile's prefetch: the first of the run of attention
    tasks its worker runs right before it, else the tile's own task (worked out here from the queues, not with the
    planner's code); and the set of tiles behind attention."""
    slot, behind = {}, set()
    for q in b.queues:
        for k, t in enumerate(q):
            if b.tasks[t].op != i:
                continue
            j = k
            while j > 0 and b.compiled_ops[b.tasks[q[j - 1]].op].family == "FlashDecode":
                j -= 1
            slot[b.tasks[t].tile] = q[j]
            if j != k:
                behind.add(b.tasks[t].tile)
    return slot, behind


def _decoded_slots(b):
    """The prefetch ranges the queue tensor holds, per task: ``{task: [(address, bytes), ...]}``."""
    out = {}
    rows = b.queue_tensor.cpu()
    for w, q in enumerate(b.queues):
        for k, t in enumerate(q):
            r = rows[w, k].tolist()
            ranges = [((r[9 + 3 * j] << 32) | (r[8 + 3 * j] & 0xFFFFFFFF), r[10 + 3 * j]) for j in range(2)
                      if r[10 + 3 * j]]
            if ranges:
                out[t] = ranges
    return out


def test_early_prefetch_plan_puts_each_tile_where_its_worker_starts_waiting(monkeypatch):
    """o_proj (the GEMV after attention) of each layer: every tile's weight rows are asked for exactly once, in the
    slot of the first attention task its worker runs before it (a worker that runs none: the tile's own slot); no
    other GEMV (they wait for GEMVs) is planned; the queue rows carry exactly the planned ranges."""
    from triton_dist.mega_triton_kernel.tasks.linear import tile_ranges

    b = _placed_qwen3(monkeypatch, 1 << 29)
    assert b.queue_row == 16 and _decoded_slots(b) == b.slot_prefetches
    weights = {i: (op.tensors[1].data_ptr(), op.tensors[1].data_ptr() + op.tensors[1].nbytes)
               for i, op in enumerate(b.compiled_ops) if op.family == "Linear"}
    planned_ops = sorted({i for ranges in b.slot_prefetches.values() for addr, _ in ranges
                          for i, (lo, hi) in weights.items() if lo <= addr < hi})
    assert [b.compiled_ops[i].op_type for i in planned_ops] == ["o_proj", "o_proj"], planned_ops
    for i in planned_ops:
        op = b.compiled_ops[i]
        slot, behind = _entry_slots(b, i)
        assert 0 < len(behind) < len(op.tiles), behind  # the toy has both kinds
        for tile, task in slot.items():
            assert b.slot_prefetches.get(task) == tile_ranges(op, tile), (tile, task)
    every = sorted(r for ranges in b.slot_prefetches.values() for r in ranges)
    assert len(every) == len(set(every)) == sum(len(b.compiled_ops[i].tiles) for i in planned_ops)


def test_early_prefetch_plan_keeps_to_the_budget(monkeypatch):
    b = _placed_qwen3(monkeypatch, 1 << 29)
    i = next(i for i, op in enumerate(b.compiled_ops) if op.op_type == "o_proj")
    op = b.compiled_ops[i]
    slot, behind = _entry_slots(b, i)
    tile_bytes = op.constexprs["ROWS"] * op.constexprs["K"] * 2  # bf16 rows, all tiles equal here
    assert op.constexprs["N"] % op.constexprs["ROWS"] == 0
    small = _placed_qwen3(monkeypatch, 2 * tile_bytes + tile_bytes // 2)
    # per op: two whole tiles fit, the tiles behind attention first
    first = sorted(behind)[:2]
    assert sorted(t for t in small.slot_prefetches if small.tasks[t].index in {slot[x] for x in first}) == \
        sorted(slot[x] for x in first)
    assert len(small.slot_prefetches) == 2 * 2  # two tiles in each of the two layers
    for off in (_placed_qwen3(monkeypatch, 0), _placed_qwen3(monkeypatch, 1 << 29, enable_runtime_scheduler=True)):
        assert off.slot_prefetches == {} and off.queue_row == 8


# ------------------------------------------------------------------------------------------------ simulator runs
@pytest.mark.sim
def test_chain_on_the_simulator(sim_ranks):  # noqa: F811
    fails = sim_ranks.run(1, work.chain_runs, timeout=600)[0]
    assert not fails, fails


@pytest.mark.sim
def test_small_m_linear_on_the_simulator(sim_ranks):  # noqa: F811
    fails = sim_ranks.run(1, work.small_m_linears, timeout=300)[0]
    assert not fails, fails


@pytest.mark.sim
def test_strict_mode_names_the_unmet_dependency(sim_ranks):  # noqa: F811
    fails = sim_ranks.run(1, work.strict_error_names_tasks, timeout=300)[0]
    assert not fails, fails


@pytest.mark.sim
def test_profiled_step_trace(sim_ranks, tmp_path):  # noqa: F811
    fails = sim_ranks.run(1, work.profile_trace, str(tmp_path), timeout=300)[0]
    assert not fails, fails
