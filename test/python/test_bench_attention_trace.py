"""benchmarks/bench_attention.py's decode trace (``--decode-trace DIR``) and the fused-merge column
(``--decode-variants fused=1``) without a GPU: :func:`bench_attention.decode_trace_summary` on a synthetic profiler
buffer whose spans, gap, concurrency and waves are known, and the whole option on the simulator at ``--tiny``
shapes (threaded programs: any arrival order of the fused merge), every file written and the summaries' structure
checked. The GPU figures themselves come from scripts/gpu_suite.sh attention-trace."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
BENCH = os.path.join(ROOT, "benchmarks")
sys.path.insert(0, BENCH)
import bench_attention  # noqa: E402


def _buffer(tracks, blocks, groups=2, slots=12):
    """Profiler buffer words holding ``tracks``: ``{(program, group): (sm, [(task_type, start_ns, end_ns)])}``."""
    from triton_dist import profiler_layout as layout

    total = layout.HEADER_WORDS + layout.WORDS_PER_RECORD * slots * blocks * groups
    w = np.full(total, layout.EMPTY, dtype=np.int64)
    w[:layout.HEADER_WORDS] = 0
    w[layout.W_MAGIC] = np.int64(layout.MAGIC)
    w[layout.W_TOTAL] = total
    w[layout.W_GRID] = blocks | (groups << 32)
    w[layout.W_TICKS] = 1_000_000_000
    cap = layout.capacity_per_track(total, blocks * groups)
    for (pid, gid), (sm, tasks) in tracks.items():
        at = layout.HEADER_WORDS + layout.WORDS_PER_RECORD * (pid * groups + gid) * cap
        for ttype, start, end in tasks:
            for is_start, ns in ((True, start), (False, end)):
                w[at] = layout.encode_tag(is_start, ttype, sm)
                w[at + 1] = ns
                at += 2
    return w


def _tracks(spec, blocks):
    from triton_dist.tools.profiler import parse_to_tracks

    return parse_to_tracks(_buffer(spec, blocks))


# split programs 0, 1 on SM 0 (overlapping), 2 then 3 on SM 1 (3 starts when 2 ends); merge programs 0 and 1 after
# a 1 us gap; times in ns from 1_000_000 (the summary counts from the first stamp)
T0 = 1_000_000
SPLIT = {(0, 0): (0, [(0, 0, 1000), (1, 1000, 9000), (2, 9000, 9500)]),
         (1, 0): (0, [(0, 500, 1500), (1, 1500, 7500), (2, 7500, 8000)]),
         (2, 0): (1, [(0, 200, 1200), (1, 1200, 5200), (2, 5200, 5400)]),
         (3, 0): (1, [(0, 5400, 6400), (1, 6400, 10400), (2, 10400, 11000)])}
MERGE = {(0, 1): (2, [(3, 12000, 13000)]), (1, 1): (0, [(3, 12500, 13000)])}


def _shift(spec):
    return {k: (sm, [(tt, T0 + a, T0 + b) for tt, a, b in tasks]) for k, (sm, tasks) in spec.items()}


def test_summary_of_a_two_launch_call():
    from triton_dist.kernels.flash_decode import TASKS

    s = bench_attention.decode_trace_summary(_tracks(_shift({**SPLIT, **MERGE}), 4), TASKS, sms=4, kv_bytes=22000)
    assert s["span_us"] == 13.0 and s["unmatched_records"] == 0 and s["full_tracks"] == 0
    assert s["split"] == {"programs": 4, "start_us": 0.0, "end_us": 11.0, "span_us": 11.0}
    assert s["merge"] == {"programs": 2, "start_us": 12.0, "end_us": 13.0, "span_us": 1.0}
    assert s["gap_us"] == 1.0 and s["tail_after_last_store_us"] == 2.0
    t = s["tasks"]
    assert t["prologue"] == {"count": 4, "mean_us": 1.0, "p50_us": 1.0, "min_us": 1.0, "max_us": 1.0, "total_us": 4.0}
    assert (t["tokens"]["mean_us"], t["tokens"]["p50_us"], t["tokens"]["max_us"]) == (5.5, 6.0, 8.0)
    assert t["store"]["mean_us"] == 0.45 and t["merge"]["count"] == 2 and t["merge"]["mean_us"] == 0.75
    p = s["programs"]
    assert p["duration"]["mean_us"] == 6.95 and p["sms_used"] == 2
    assert p["programs_per_sm"] == {"min": 2, "mean": 2.0, "max": 2}
    assert p["peak_per_sm"] == 2 and p["peak_running"] == 3  # SM 1: program 3 starts as 2 ends
    assert p["waves"] == 1.333 and p["ramp_us"] == 0.5 and p["last_start_us"] == 5.4 and p["drain_us"] == 5.6
    assert p["mean_running"] == 2.527
    assert s["idle_sms"] == 2 and s["kv_gbs_split"] == 2.0 and s["kv_gbs_call"] == 1.7


def test_summary_of_a_fused_call_and_of_nothing():
    from triton_dist.kernels.flash_decode import TASKS

    fused = dict(SPLIT)
    sm, tasks = fused[(3, 0)]
    fused[(3, 0)] = (sm, tasks + [(4, 11000, 11100), (5, 11100, 12600)])  # arrive, then the fused merge
    s = bench_attention.decode_trace_summary(_tracks(_shift(fused), 4), TASKS)
    assert s["merge"] is None and s["gap_us"] is None and s["span_us"] == 12.6
    assert s["tail_after_last_store_us"] == 1.6 and s["tasks"]["fused_merge"]["count"] == 1
    assert s["split"]["end_us"] == 12.6 and "idle_sms" not in s and "kv_gbs_split" not in s
    assert bench_attention.decode_trace_summary([], TASKS) == {"empty": True, "tracks": 0}


@pytest.mark.sim
def test_decode_trace_and_fused_column_on_the_simulator(tmp_path):
    """``--tiny --only decode --decode-trace DIR --decode-variants splits=3,splits=3+fused=1``: the decode part
    checks both variant columns against SDPA and the reference; the trace part writes, for the default (one split at
    the tiny shape) and both variants, a Perfetto JSON, a Gantt PNG, a timeline PNG and a summary, plus one record of
    them all; exit status 0."""
    trace, out = tmp_path / "trace", tmp_path / "out"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.join(ROOT, "python"), BENCH]))
    env.pop("TRITON_INTERPRET", None)
    r = subprocess.run([sys.executable, os.path.join(BENCH, "bench_attention.py"), "--tiny", "--only", "decode",
                        "--decode-trace", str(trace), "--decode-variants", "splits=3,splits=3+fused=1", "--out",
                        str(out)], capture_output=True, text=True, env=env, timeout=600)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    (decode_json, ) = [f for f in os.listdir(out) if f.startswith("attention-")]
    decode = json.load(open(out / decode_json))
    for rec in decode["records"]:
        assert {"ours", "ours/splits=3", "ours/splits=3+fused=1"} <= set(rec["checked"]) and not rec["errors"]
    (index, ) = [f for f in os.listdir(trace) if f.startswith("decode-trace-") and f.count("-") == 2]
    doc = json.load(open(trace / index))
    assert doc["benchmark"] == "bench_attention" and doc["parts"] == ["decode-trace"]
    recs = {r["variant"]: r for r in doc["records"]}
    assert set(recs) == {"ours", "splits=3", "splits=3+fused=1"}
    B, Hq, Hkv = 2, 4, 1  # bench_attention.TINY
    for name, rec in recs.items():
        assert not rec["errors"] and rec["profiled_equals_unprofiled"] and rec["rel_error_vs_reference"] < 2e-2
        assert rec["repeat_equal"]
        assert rec["unmatched_records"] == 0 and rec["full_tracks"] == 0
        for key in ("trace", "gantt", "timeline", "summary"):
            assert os.path.isfile(rec["files"][key]), (name, key, rec["files"][key])
        assert json.load(open(rec["files"]["summary"]))["variant"] == name
        events = json.load(open(rec["files"]["trace"]))["traceEvents"]
        slices = [e["name"] for e in events if e["ph"] == "X"]
        want = {"prologue": rec["split_programs"], "tokens": rec["split_programs"], "store": rec["split_programs"]}
        for task in want:
            assert slices.count(task) == want[task], (name, task)
        assert slices.count("merge") == rec["merge_programs"]
    assert recs["ours"]["num_splits"] == 1 and recs["ours"]["merge_programs"] == 0
    assert recs["splits=3"]["merge_programs"] == B * Hq and recs["splits=3"]["gap_us"] is not None
    fused = recs["splits=3+fused=1"]
    assert fused["config"]["fused_merge"] and fused["merge"] is None and fused["merge_programs"] == 0
    assert fused["tasks"]["fused_merge"]["count"] == B * Hkv and fused["tasks"]["arrive"]["count"] >= B * Hkv
