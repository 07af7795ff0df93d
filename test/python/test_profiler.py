"""triton_dist.tools.profiler: buffer layout, parsing, Perfetto (Chrome JSON) export with aligned ranks, Gantt PNG,
device-side errors, and real recordings on the simulator (interpreted kernels, 1 and 2 rank processes)."""
import json
import os

import numpy as np
import pytest
import torch
import triton
import triton.language as tl

import triton_dist
from triton_dist.tools.profiler import (Profiler, ProfilerBuffer, RankProfile, alloc_profiler_buffer, build_trace,
                                        export_to_perfetto_trace, load_trace, parse_to_tracks, render_gantt_png,
                                        reset_profiler_buffer)
from triton_dist.tools.profiler import layout

NAMES = ["load", "compute", "store"]


# ------------------------------------------------------------------------------------------------ synthetic buffers

def make_buffer(records_per_track, nprog, ngroups=1, ticks_per_s=10**9, slots=64):
    """A buffer as the device would leave it: ``records_per_track[t]`` = [(is_start, type, sm, ticks), ...]."""
    total = layout.HEADER_WORDS + 2 * slots
    w = np.full(total, layout.EMPTY, dtype=np.int64)
    w[:layout.HEADER_WORDS] = 0
    w[layout.W_MAGIC] = layout.MAGIC
    w[layout.W_TOTAL] = total
    w[layout.W_GRID] = nprog | (ngroups << 32)
    w[layout.W_TICKS] = ticks_per_s
    cap = layout.capacity_per_track(total, nprog * ngroups)
    for t, recs in records_per_track.items():
        for k, (s, ty, sm, ticks) in enumerate(recs[:cap]):
            base = layout.HEADER_WORDS + 2 * (t * cap + k)
            w[base] = layout.encode_tag(s, ty, sm)
            w[base + 1] = ticks
    return w


def test_tag_roundtrip():
    for s, ty, sm in [(True, 0, 0), (False, 5, 131), (True, layout.MAX_TASK_TYPE, (1 << 31) - 1)]:
        tag = layout.encode_tag(s, ty, sm)
        assert tag != layout.EMPTY
        assert layout.decode_tag(tag) == (s, ty, sm)


def test_parse_pairs_starts_and_ends():
    w = make_buffer({
        0: [(True, 0, 7, 100), (False, 0, 7, 250), (True, 1, 7, 300), (True, 1, 7, 310), (False, 1, 7, 320),
            (False, 1, 7, 400)],
        2: [(True, 2, 9, 1000), (False, 2, 9, 1600), (False, 0, 9, 1700)],  # one end without a start
    }, nprog=3)
    tracks = parse_to_tracks(w)
    assert [t.program_id for t in tracks] == [0, 2]  # program 1 recorded nothing
    t0 = tracks[0]
    assert t0.sm_id == 7 and t0.num_records == 6 and t0.unmatched == 0
    got = [(x.task_type, x.start_ns, x.end_ns) for x in t0.tasks]
    assert got == [(0, 100, 250), (1, 300, 400), (1, 310, 320)]  # nested type-1 tasks pair LIFO
    t2 = tracks[1]
    assert [(x.task_type, x.duration_ns) for x in t2.tasks] == [(2, 600)]
    assert t2.unmatched == 1 and t2.sm_id == 9


def test_parse_converts_ticks_and_applies_offset():
    w = make_buffer({0: [(True, 0, 1, 10), (False, 0, 1, 35)]}, nprog=1, ticks_per_s=10**8)  # AMD 100 MHz
    (tr, ) = parse_to_tracks(w, rank=3, clock_offset_ns=40)
    (task, ) = tr.tasks
    assert (task.start_ns, task.end_ns, task.rank) == (100 - 40, 350 - 40, 3)


def test_parse_groups_and_full_tracks_warn():
    recs = {t: [(i % 2 == 0, 0, t, 10 * i) for i in range(100)] for t in range(4)}
    w = make_buffer(recs, nprog=2, ngroups=2, slots=40)  # 10 slots per track, 100 records each -> full
    with pytest.warns(RuntimeWarning, match="filled all 10 slots"):
        tracks = parse_to_tracks(w)
    assert [(t.program_id, t.group_id) for t in tracks] == [(0, 0), (0, 1), (1, 0), (1, 1)]
    assert all(t.full and len(t.tasks) == 5 for t in tracks)


def test_parse_rejects_foreign_buffers():
    with pytest.raises(ValueError, match="not a profiler buffer"):
        parse_to_tracks(np.zeros(32, dtype=np.int64))
    w = make_buffer({}, nprog=1)
    with pytest.raises(ValueError, match="header says"):
        parse_to_tracks(w[:-2])


def test_empty_buffer_has_no_tracks():
    buf = alloc_profiler_buffer(16, device="cpu")
    assert buf.dtype == torch.int64 and buf.numel() == layout.HEADER_WORDS + 32
    assert int(buf[layout.W_MAGIC]) == layout.MAGIC and int(buf[layout.W_TOTAL]) == buf.numel()
    assert parse_to_tracks(buf) == []
    with pytest.raises(ValueError, match="max_num_profile_slots"):
        alloc_profiler_buffer(0, device="cpu")
    with pytest.raises(TypeError, match="int64"):
        reset_profiler_buffer(torch.zeros(64, dtype=torch.float32))


def _two_rank_profiles():
    # The same real instants on both ranks, seen through device clocks that differ by their offsets.
    off0, off1 = 1_000, -50_000
    r0 = make_buffer({0: [(True, 0, 4, 2_000 + off0), (False, 0, 4, 5_000 + off0)],
                      1: [(True, 1, 4, 3_000 + off0), (False, 1, 4, 4_000 + off0)]}, nprog=2)
    r1 = make_buffer({0: [(True, 2, 11, 2_000 + off1), (False, 2, 11, 9_000 + off1)]}, nprog=1)
    return [RankProfile(0, r0, off0), RankProfile(1, r1, off1)]


def test_export_roundtrip_two_ranks_aligned(tmp_path):
    path = str(tmp_path / "trace.json")
    assert export_to_perfetto_trace(_two_rank_profiles(), NAMES, path) == path
    trace = load_trace(path)
    ev = trace["traceEvents"]
    procs = {e["pid"]: e["args"]["name"] for e in ev if e["ph"] == "M" and e["name"] == "process_name"}
    assert procs == {1: "rank 0", 2: "rank 1"}
    threads = {(e["pid"], e["tid"]): e["args"]["name"] for e in ev if e["ph"] == "M" and e["name"] == "thread_name"}
    # rank 0: programs 0 and 1 overlap on SM 4 -> two lanes of SM 4; rank 1: SM 11
    assert sorted(threads.values()) == ["SM 11", "SM 4", "SM 4 #1"]
    xs = [e for e in ev if e["ph"] == "X"]
    by_name = {e["name"]: e for e in xs}
    assert set(by_name) == {"load", "compute", "store"}
    # aligned: load (rank 0) and store (rank 1) started at the same real instant -> same ts, the earliest = 0
    assert by_name["load"]["ts"] == by_name["store"]["ts"] == 0.0
    assert by_name["compute"]["ts"] == pytest.approx(1.0)  # 1000 ns later, in us
    assert by_name["load"]["dur"] == pytest.approx(3.0) and by_name["store"]["dur"] == pytest.approx(7.0)
    assert by_name["load"]["pid"] == 1 and by_name["store"]["pid"] == 2
    assert by_name["load"]["tid"] != by_name["compute"]["tid"]  # overlapping slices never share a track
    assert by_name["store"]["args"] == {"program": 0, "group": 0, "sm": 11, "task_type": 2}
    assert trace["otherData"]["origin_realtime_ns"] == 2_000
    json.dumps(trace)  # plain JSON


def test_track_by_program_and_bad_choice():
    tracks = [t for p in _two_rank_profiles() for t in parse_to_tracks(p.words, p.rank, p.clock_offset_ns)]
    trace = build_trace(tracks, NAMES, track_by="program")
    names = sorted(e["args"]["name"] for e in trace["traceEvents"] if e["name"] == "thread_name")
    assert names == ["program 0 (SM 11)", "program 0 (SM 4)", "program 1 (SM 4)"]
    with pytest.raises(ValueError, match="track_by"):
        build_trace(tracks, NAMES, track_by="warp")
    unnamed = build_trace(tracks, None)
    assert {e["name"] for e in unnamed["traceEvents"] if e["ph"] == "X"} == {"task_0", "task_1", "task_2"}


def test_gantt_png(tmp_path):
    pytest.importorskip("matplotlib")
    tracks = [t for p in _two_rank_profiles() for t in parse_to_tracks(p.words, p.rank, p.clock_offset_ns)]
    out = render_gantt_png(tracks, str(tmp_path / "g.png"), task_names=NAMES)
    with open(out, "rb") as f:
        head = f.read(8)
    assert head == b"\x89PNG\r\n\x1a\n" and os.path.getsize(out) > 2000


# ------------------------------------------------------------------------------------------------ device side

@triton_dist.jit
def profiled_kernel(prof_buf, x_ptr, BLOCK: tl.constexpr, ITERS: tl.constexpr, ENABLE: tl.constexpr):
    profiler = Profiler.create(prof_buf, 0, 1, True, ENABLE_PROFILING=ENABLE)
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    profiler = profiler.record(True, 0)
    x = tl.load(x_ptr + offs)
    profiler = profiler.record(False, 0)
    for _ in range(ITERS):
        profiler = profiler.record(True, 1)
        x = x * 2.0
        profiler = profiler.record(False, 1)
    profiler = profiler.record(True, 2)
    tl.store(x_ptr + offs, x)
    profiler = profiler.record(False, 2)


@triton_dist.jit
def profiled_first_blocks(prof_buf, NB: tl.constexpr):
    profiler = Profiler.create(prof_buf, 0, 1, True, num_blocks=NB)
    profiler = profiler.record(True, 1)
    profiler = profiler.record(False, 1)


@triton.jit
def bad_task_type(prof_buf):
    p = Profiler.create(prof_buf, 0, 1, True)
    p = p.record(True, -1)


@triton.jit
def bad_buffer(prof_buf):
    p = Profiler.create(prof_buf, 0, 1, True)
    p = p.record(True, 0)


@triton.jit
def bad_group(prof_buf):
    p = Profiler.create(prof_buf, 2, 2, True)
    p = p.record(True, 0)


@pytest.mark.parametrize("kernel, sig, msg", [
    (bad_task_type, ["*i64"], "task_type=-1 is not supported"),
    (bad_buffer, ["*fp32"], "profiler_buffer must be a pointer to int64"),
    (bad_group, ["*i64"], "group_id=2 is out of range"),
])
def test_device_errors_name_the_bad_value(kernel, sig, msg):
    from triton_dist.target import parse_target
    from triton_dist.tools.compile import CompileRequest, compile_kernel

    with pytest.raises(Exception, match=msg):
        compile_kernel(CompileRequest(kernel, parse_target("cuda:90"), sig))


@pytest.fixture
def interpret():
    old_env, old = os.environ.get("TRITON_INTERPRET"), triton.knobs.runtime.interpret
    os.environ["TRITON_INTERPRET"] = "1"
    triton.knobs.runtime.interpret = True
    yield
    triton.knobs.runtime.interpret = old
    if old_env is None:
        os.environ.pop("TRITON_INTERPRET", None)
    else:
        os.environ["TRITON_INTERPRET"] = old_env


def _check_program_tracks(tracks, nprog, iters):
    assert [t.program_id for t in tracks] == list(range(nprog))
    for t in tracks:
        assert t.sm_id == t.program_id  # the simulator's SM id is the program id
        assert t.unmatched == 0 and t.num_records == 2 * (iters + 2)
        types = [x.task_type for x in t.tasks]
        assert types == [0] + [1] * iters + [2]
        for a, b in zip(t.tasks, t.tasks[1:]):
            assert a.duration_ns >= 0 and a.end_ns <= b.start_ns  # sequential tasks, in order
        assert t.tasks[-1].duration_ns >= 0


@pytest.mark.sim
def test_simulator_records_tasks(interpret, tmp_path):
    buf = alloc_profiler_buffer(256, device="cpu")
    x = torch.ones(4 * 16)
    profiled_kernel[(4, )](buf, x, BLOCK=16, ITERS=3, ENABLE=True)
    assert torch.equal(x, torch.full((64, ), 8.0))  # the kernel still computes
    assert int(buf[layout.W_GRID]) == 4 | (1 << 32) and int(buf[layout.W_TICKS]) == 10**9
    _check_program_tracks(parse_to_tracks(buf), nprog=4, iters=3)


@pytest.mark.sim
def test_simulator_disabled_writes_nothing(interpret):
    buf = alloc_profiler_buffer(64, device="cpu")
    before = buf.clone()
    x = torch.ones(32)
    profiled_kernel[(2, )](buf, x, BLOCK=16, ITERS=2, ENABLE=False)
    assert torch.equal(x, torch.full((32, ), 4.0))
    assert torch.equal(buf, before) and parse_to_tracks(buf) == []


@pytest.mark.sim
def test_simulator_drops_records_past_capacity(interpret):
    buf = alloc_profiler_buffer(2 * 5, device="cpu")  # 2 programs -> 5 slots each, 10 records each wanted
    x = torch.ones(32)
    profiled_kernel[(2, )](buf, x, BLOCK=16, ITERS=3, ENABLE=True)
    with pytest.warns(RuntimeWarning, match="filled all 5 slots"):
        tracks = parse_to_tracks(buf)
    assert all(t.num_records == 5 and t.full for t in tracks)
    assert int(buf[-1]) != layout.EMPTY  # the last slot was used, nothing beyond the buffer


@pytest.mark.sim
def test_simulator_programs_outside_num_blocks_write_nothing(interpret):
    buf = alloc_profiler_buffer(8, device="cpu")  # 2 declared programs -> 4 slots each, nothing spare
    profiled_first_blocks[(4, )](buf, NB=2)  # programs 2 and 3 are outside the declared grid
    tracks = parse_to_tracks(buf)
    assert [(t.program_id, len(t.tasks)) for t in tracks] == [(0, 1), (1, 1)]
    assert int(buf[layout.W_GRID]) == 2 | (1 << 32)


@pytest.mark.sim
def test_profiler_buffer_context_writes_trace(interpret, tmp_path):
    path = str(tmp_path / "ctx.json")
    ctx = ProfilerBuffer(128, path, NAMES, device="cpu")
    with ctx as buf:
        profiled_kernel[(2, )](buf, torch.ones(32), BLOCK=16, ITERS=1, ENABLE=True)
    trace = load_trace(path)
    xs = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    assert len(xs) == 2 * 3 and {e["name"] for e in xs} == set(NAMES)
    assert all(e["dur"] >= 0 and e["ts"] >= 0 for e in xs)


# ------------------------------------------------------------------------------------------------ 2 rank processes

try:
    from conftest_sim import sim_ranks  # noqa: F401  (fixture)
    _HAVE_POOL = True
except Exception:  # pragma: no cover
    _HAVE_POOL = False


def _rank_profile(path):
    """In a simulator rank process: profile a kernel, export one trace for all ranks (collective)."""
    import time

    import torch.distributed as dist

    buf = alloc_profiler_buffer(256, device="cpu")
    x = torch.ones(3 * 16)
    dist.barrier()
    t0 = time.time_ns()
    profiled_kernel[(3, )](buf, x, BLOCK=16, ITERS=2, ENABLE=True)
    t1 = time.time_ns()
    written = export_to_perfetto_trace(buf, NAMES, path)
    return dist.get_rank(), written, t0, t1


@pytest.mark.sim
@pytest.mark.skipif(not _HAVE_POOL, reason="simulator runtime (conftest_sim) not available")
def test_two_rank_trace_on_simulator(sim_ranks, tmp_path):  # noqa: F811
    path = str(tmp_path / "ranks.json")
    res = sim_ranks.run(2, _rank_profile, path, timeout=120)
    assert [r[0] for r in res] == [0, 1]
    assert res[0][1] == path and res[1][1] is None  # rank 0 writes the one file
    trace = load_trace(path)
    origin = trace["otherData"]["origin_realtime_ns"]
    procs = {e["pid"]: e["args"]["name"] for e in trace["traceEvents"] if e.get("name") == "process_name"}
    assert procs == {1: "rank 0", 2: "rank 1"}
    for rank, _, t0, t1 in res:
        xs = [e for e in trace["traceEvents"] if e["ph"] == "X" and e["pid"] == rank + 1]
        assert len(xs) == 3 * 4
        # aligned to host real time: every slice lies inside the host window around that rank's launch (+-1 ms)
        for e in xs:
            start = origin + e["ts"] * 1000
            assert t0 - 1e6 <= start and start + e["dur"] * 1000 <= t1 + 1e6, (rank, e)
