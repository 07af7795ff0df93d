"""The measured dispatch table of the collectives' method="auto" (``ops/collectives_table.json``): loading, selection
by op / world / dtype / size (bisect boundaries, geometric midpoints), no module-global overrides,
malformed files, building a table from a results JSON (``bench_collectives.py --table-from``), and the collectives
plot of ``make_results.py``. No kernels run here (the simulator smoke run of the benchmark is in test_scripts.py)."""
import importlib.util
import json
import os
import re
import subprocess
import sys
import types

import pytest
import torch

from triton_dist.ops import collectives as C

HERE = os.path.dirname(os.path.abspath(__file__))
BENCH = os.path.join(HERE, "..", "..", "benchmarks")


def _table(rules_by_key):
    """A table document from {(op, world, dtype): [(max_bytes, method), ...]}."""
    ops = {}
    for (op, world, dt), rules in rules_by_key.items():
        ops.setdefault(op, {}).setdefault(str(world), {})[dt] = {
            "source": "synthetic", "rules": [{"max_bytes": hi, "method": m} for hi, m in rules]}
    return {"format": C.TABLE_FORMAT, "ops": ops}


@pytest.fixture
def use_table(tmp_path, monkeypatch):
    """Point $TRITON_DIST_COLLECTIVES_TABLE at a written table (doc or raw text); the cache is reloaded after."""
    def use(doc):
        path = tmp_path / "table.json"
        path.write_text(doc if isinstance(doc, str) else json.dumps(doc))
        monkeypatch.setenv(C.TABLE_ENV, str(path))
        return str(path)

    yield use
    monkeypatch.delenv(C.TABLE_ENV, raising=False)
    C.load_table(reload=True)


def test_shipped_table_parses_and_names_its_source():
    with open(C.TABLE_PATH) as f:
        doc = json.load(f)
    parsed = C.parse_table(doc, C.TABLE_PATH)
    for op in ("all_reduce", "all_gather", "reduce_scatter"):
        assert (op, 2, "bfloat16") in parsed
        entry = doc["ops"][op]["2"]["bfloat16"]
        assert entry["source"].endswith(".json") and os.path.exists(os.path.join(HERE, "..", "..", entry["source"]))
        assert re.fullmatch(r"[0-9a-f]{7,40}", entry["git_commit"])
        # the measured sizes are the ones the rules were derived from
        assert [p["bytes"] for p in entry["measured"]] == sorted(p["bytes"] for p in entry["measured"])
    # sweep-bb9e595: one-shot up to 4 MiB measured (boundary: geometric midpoint of 4 and 16 MiB), two-shot up to
    # 64 MiB, the pipelined two-shot from 256 MiB (boundary: midpoint of 64 and 256 MiB)
    assert C._select_method("all_reduce", 2, 8 << 20, True, torch.bfloat16) == "one_shot"
    assert C._select_method("all_reduce", 2, (8 << 20) + 1, True, torch.bfloat16) == "two_shot"
    assert C._select_method("all_reduce", 2, (128 << 20) + 1, True, torch.bfloat16) == "two_shot_pipe"


def test_selection_by_dtype_and_size_bisect_boundaries(use_table):
    use_table(_table({
        ("reduce_scatter", 2, "bfloat16"): [(5792, "direct_push"), (262144, "ring"), (None, "nccl")],
        ("reduce_scatter", 2, "float32"): [(None, "direct")],
    }))
    C.load_table(reload=True)
    sel = lambda nb, dt, gpu=True: C._select_method("reduce_scatter", 2, nb, gpu, dt)  # noqa: E731
    assert sel(1, torch.bfloat16) == "direct_push"
    assert sel(5792, torch.bfloat16) == "direct_push"  # max_bytes is inclusive
    assert sel(5793, torch.bfloat16) == "ring"
    assert sel(262144, torch.bfloat16) == "ring"
    assert sel(262145, torch.bfloat16) == "nccl"
    assert sel(1 << 40, torch.bfloat16) == "nccl"  # the last rule is unbounded
    assert sel(5793, torch.float16) == "ring"  # fp16 without entries of its own uses bf16's
    assert sel(5793, torch.float32) == "direct"  # dtype-aware
    assert sel(5793, torch.bfloat16, gpu=False) == C.AUTO_DEFAULTS["reduce_scatter"]  # simulator: defaults
    assert C._select_method("reduce_scatter", 4, 5793, True, torch.bfloat16) == "direct_push"  # no entry: default
    assert C._select_method("all_reduce", 2, 1 << 30, True, torch.bfloat16) == "one_shot"  # built-in default


def test_no_module_global_overrides(use_table):
    """docs/ops.md: "auto" follows the measured table (whose file the environment may name) and the built-in
    defaults only; forcing a method is the call's ``method=`` or the context's ``method``, not a module global."""
    use_table(_table({("all_reduce", 2, "bfloat16"): [(1024, "one_shot"), (None, "two_shot")]}))
    C.load_table(reload=True)
    assert C._select_method("all_reduce", 2, 4096, True, torch.bfloat16) == "two_shot"
    assert C._select_method("all_reduce", 2, 1024, True, torch.bfloat16) == "one_shot"
    assert not hasattr(C, "AR_TABLE") and not hasattr(C, "NCCL_FALLBACK")


def test_context_select_falls_back_when_method_not_allocated(use_table):
    use_table(_table({("reduce_scatter", 2, "bfloat16"): [(None, "ring")],
                      ("all_reduce", 2, "bfloat16"): [(1024, "two_shot"), (None, "one_shot")]}))
    C.load_table(reload=True)
    rs = types.SimpleNamespace(op="reduce_scatter", world_size=2, on_gpu=True, group_has_nccl=True, dtype=torch.bfloat16,
                               methods=("direct_push", ), method_fallbacks=C.ReduceScatterContext.method_fallbacks)
    assert C._CollectiveContext.select(rs, 100) == "direct_push"
    rs.methods = ("direct_push", "ring")
    assert C._CollectiveContext.select(rs, 100) == "ring"
    ar = types.SimpleNamespace(op="all_reduce", world_size=2, on_gpu=True, group_has_nccl=True, dtype=torch.bfloat16, esize=2,
                               one_shot_cap=1024, two_shot=None, two_shot_pipe=None)
    assert C.AllReduceContext.select(ar, 512) == "one_shot"  # two_shot not allocated
    ar.two_shot = object()
    assert C.AllReduceContext.select(ar, 512) == "two_shot"
    assert C.AllReduceContext.select(ar, 4096) == "two_shot"  # one_shot past its staging capacity (2048 elements)


def test_pipelined_pick_falls_back_to_its_unpipelined_sibling(use_table):
    use_table(_table({("reduce_scatter", 2, "bfloat16"): [(None, "push_pipe")],
                      ("all_gather", 2, "bfloat16"): [(None, "push_pipe")],
                      ("all_reduce", 2, "bfloat16"): [(None, "two_shot_pipe")]}))
    C.load_table(reload=True)
    rs = types.SimpleNamespace(op="reduce_scatter", world_size=2, on_gpu=True, group_has_nccl=True, dtype=torch.bfloat16,
                               methods=("direct", "direct_push"), method_fallbacks=C.ReduceScatterContext.method_fallbacks)
    assert C._CollectiveContext.select(rs, 1 << 20) == "direct_push"
    ag = types.SimpleNamespace(op="all_gather", world_size=2, on_gpu=True, group_has_nccl=True, dtype=torch.bfloat16,
                               methods=("pull", "push"), method_fallbacks=C.AllGatherContext.method_fallbacks)
    assert C._CollectiveContext.select(ag, 1 << 20) == "push"
    ag.methods = ("pull", "push", "push_pipe")
    assert C._CollectiveContext.select(ag, 1 << 20) == "push_pipe"
    ar = types.SimpleNamespace(op="all_reduce", world_size=2, on_gpu=True, group_has_nccl=True, dtype=torch.bfloat16, esize=2,
                               one_shot_cap=1024, two_shot=object(), two_shot_pipe=None)
    assert C.AllReduceContext.select(ar, 1 << 20) == "two_shot"
    ar.two_shot_pipe = object()
    assert C.AllReduceContext.select(ar, 1 << 20) == "two_shot_pipe"


@pytest.mark.parametrize("text, words", [
    ("{not json", ["not valid JSON"]),
    (json.dumps({"ops": {}}), ["format"]),
    (json.dumps(_table({("all_reduce", 2, "bfloat16"): [(None, "tree")]})), ["tree", "one_shot"]),
    (json.dumps(_table({("all_reduce", 2, "bfloat16"): [(4096, "one_shot"), (1024, "two_shot"), (None, "nccl")]})),
     ["does not increase"]),
    (json.dumps(_table({("all_reduce", 2, "bfloat16"): [(4096, "one_shot")]})), ["last rule"]),
    (json.dumps(_table({("all_reduce", 2, "int8"): [(None, "one_shot")]})), ["int8"]),
    (json.dumps(_table({("all_to_all", 2, "bfloat16"): [(None, "nccl")]})), ["all_to_all"]),
])
def test_malformed_table_names_the_file(use_table, text, words):
    path = use_table(text)
    with pytest.raises(C.CollectivesTableError) as ei:
        C.load_table(reload=True)
    msg = str(ei.value)
    assert path in msg and all(w in msg for w in words), msg
    with pytest.raises(C.CollectivesTableError):  # an auto call on a GPU reports it too
        C._select_method("all_reduce", 2, 4096, True, torch.bfloat16)


def test_missing_table_file_means_defaults(use_table, tmp_path, monkeypatch):
    monkeypatch.setenv(C.TABLE_ENV, str(tmp_path / "absent.json"))
    assert C.load_table(reload=True) == {}
    assert C._select_method("all_gather", 2, 4096, True, torch.bfloat16) == C.AUTO_DEFAULTS["all_gather"]


def _results_doc():
    """A synthetic bench_collectives document (2 ranks, bf16 all_reduce, one size where NCCL wins, and a
    within-1% near tie that keeps the previous size's method)."""
    rows = []
    points = {4096: {"one_shot": 5.0, "two_shot": 9.0, "nccl": 8.0}, 65536: {"one_shot": 6.0, "two_shot": 5.97,
              "nccl": 9.0}, 1 << 20: {"one_shot": 9.0, "two_shot": 12.0, "nccl": 16.0},
              16 << 20: {"one_shot": 66.0, "two_shot": 60.0, "nccl": 88.0}, 256 << 20: {"one_shot": 1000.0,
              "two_shot": 900.0, "nccl": 800.0}}
    for nbytes, t in points.items():
        base = {"op": "all_reduce", "bytes": nbytes, "dtype": "bfloat16", "world": 2, "nccl_us": t["nccl"],
                "nccl_busbw_gbs": 1.0}
        for m in ("one_shot", "two_shot"):
            rows.append(dict(base, method=m, resolved=m, us=t[m], busbw_gbs=1.0, correct=True, eager_us=40.0))
        rows.append(dict(base, method="auto", resolved="one_shot", us=t["one_shot"], busbw_gbs=1.0, correct=True,
                         speedup=t["nccl"] / t["one_shot"]))
        rows.append(dict(base, method="torch_symm/one_shot", resolved="one_shot_all_reduce", us=t["nccl"] * 0.9,
                         busbw_gbs=1.2, correct=True, baseline=True, eager_us=30.0))
    rows.append({"op": "all_reduce", "bytes": 4096, "dtype": "bfloat16", "world": 2, "nccl_us": 8.0,
                 "nccl_busbw_gbs": 1.0, "method": "two_shot", "error": "RuntimeError: ignored"})
    return {"benchmark": "bench_collectives", "git_commit": "a" * 40, "versions": {"gpu": "H200"}, "world_size": 2,
            "mode": "full", "timestamp_utc": "20261130T000000Z", "devices": ["H200"], "results": rows}


def test_build_table_midpoints_tolerance_and_merge():
    doc = _results_doc()
    pts = C.best_per_size(doc["results"])[("all_reduce", 2, "bfloat16")]
    assert [p[1] for p in pts] == ["one_shot", "one_shot", "one_shot", "two_shot", "nccl"]  # 5.97 vs 6.0: kept
    old = _table({("all_gather", 2, "bfloat16"): [(None, "pull")], ("all_reduce", 2, "bfloat16"): [(None, "nccl")]})
    table = C.build_table(doc, "results/x.json", old=old)
    ent = table["ops"]["all_reduce"]["2"]["bfloat16"]
    assert ent["rules"] == [{"max_bytes": 4 << 20, "method": "one_shot"},  # isqrt(1 MiB * 16 MiB)
                            {"max_bytes": 64 << 20, "method": "two_shot"},
                            {"max_bytes": None, "method": "nccl"}]
    assert ent["source"] == "results/x.json" and ent["git_commit"] == "a" * 40
    assert table["ops"]["all_gather"]["2"]["bfloat16"]["rules"] == [{"max_bytes": None, "method": "pull"}]  # kept
    assert C.rules_from_points([(4096, "a"), (8192, "a"), (16384, "b")]) == [
        {"max_bytes": 11585, "method": "a"}, {"max_bytes": None, "method": "b"}]


def _load_script(name, monkeypatch):
    for var in ("NVSHMEM_SYMMETRIC_SIZE", "TRITON_DIST_SIM_SYMMETRIC_SIZE", "NVSHMEM_DISABLE_NVLS",
                "NCCL_NVLS_ENABLE", "TORCH_SYMM_MEM_DISABLE_MULTICAST"):
        monkeypatch.delenv(var, raising=False)  # the bench sets defaults at import: undone after the test
    monkeypatch.syspath_prepend(BENCH)
    spec = importlib.util.spec_from_file_location(f"{name}_for_test", os.path.join(BENCH, f"{name}.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_table_from_json_writes_the_table_and_the_check(tmp_path):
    res = tmp_path / "collectives_20261130T000000Z.json"
    res.write_text(json.dumps(_results_doc()))
    out = tmp_path / "table.json"
    env = dict(os.environ, PYTHONPATH=os.path.join(HERE, "..", "..", "python"))
    proc = subprocess.run([sys.executable, os.path.join(BENCH, "bench_collectives.py"), "--table-from", str(res),
                           "--table-out", str(out)], capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # auto (one-shot everywhere) against the best of ours and NCCL: worst at 256 MiB, 1000 / 800
    assert "worst auto / best(ours, NCCL) = 1.250 at all_reduce bfloat16 268435456 B (best nccl" in proc.stdout
    table = json.loads(out.read_text())
    assert C.parse_table(table, str(out))[("all_reduce", 2, "bfloat16")][1] == ["one_shot", "two_shot", "nccl"]
    assert table["ops"]["all_reduce"]["2"]["bfloat16"]["source"] == str(res)  # outside the repository: absolute


def test_auto_check_and_plot(tmp_path, monkeypatch):
    pytest.importorskip("matplotlib")
    bench = _load_script("bench_collectives", monkeypatch)
    doc = _results_doc()
    worst = bench.auto_check(doc["results"])
    assert worst["bytes"] == 256 << 20 and worst["best"] == "nccl" and abs(worst["ratio"] - 1.25) < 1e-9
    auto = [r for r in doc["results"] if r["method"] == "auto"]
    assert [round(r["auto_over_best"], 3) for r in auto] == [1.0, 1.005, 1.0, 1.1, 1.25]  # baselines excluded
    mr = _load_script("make_results", monkeypatch)
    png = tmp_path / "coll_all_reduce_bfloat16.png"
    assert mr.plot_collectives(doc, "all_reduce", "bfloat16", doc["results"], str(png))
    assert png.stat().st_size > 1000
    doc["_path"] = os.path.relpath(str(tmp_path / "coll.json"), mr.HERE)
    text = "\n".join(mr.collective_section(doc, str(tmp_path)))
    assert "torch_symm/one_shot us (busbw)" in text and "eager torch_symm/one_shot us" in text
    assert "| auto / best |" in text and "| 256 MiB |" in text and "1.250" in text
    assert "![all_reduce bfloat16](coll_all_reduce_bfloat16.png)" in text


_FAKE_LIB = None


def test_symm_call_binds_arguments_by_schema_name(monkeypatch):
    """The torch symm-mem baselines are called through their schemas' argument names (the GPU machine's torch may
    differ from this one); a CPU stand-in library with the same schema shapes checks the binding."""
    global _FAKE_LIB
    bench = _load_script("bench_collectives", monkeypatch)
    if _FAKE_LIB is None:
        _FAKE_LIB = lib = torch.library.Library("td_symm_fake", "DEF")
        lib.define("two_shot_all_reduce_(Tensor(a!) input, str reduce_op, str group_name) -> Tensor(a!)")
        lib.define("reduce_scatter_out(Tensor input, str group_name, bool split_last_dim, Tensor(a!) output) "
                   "-> Tensor(a!)")
        lib.define("_low_contention_all_gather(Tensor tensor, str group_name, int extra=3) -> Tensor")
        lib.impl("two_shot_all_reduce_", lambda input, reduce_op, group_name: input.mul_(2), "CPU")
        lib.impl("reduce_scatter_out", lambda input, group_name, split_last_dim, output:
                 output.copy_(input[:output.numel()]), "CPU")
        lib.impl("_low_contention_all_gather", lambda tensor, group_name, extra=3: tensor.repeat(2), "CPU")
    monkeypatch.setattr(torch.ops, "symm_mem", torch.ops.td_symm_fake)
    x, o = torch.ones(4), torch.zeros(2)
    args = {"input": x, "reduce_op": "sum", "group_name": "g", "split_last_dim": False, "out": o}
    assert torch.equal(bench.symm_call("two_shot_all_reduce_", args), torch.full((4, ), 2.0))
    assert bench.symm_call("reduce_scatter_out", args) is o and torch.equal(o, torch.full((2, ), 2.0))
    assert bench.symm_call("_low_contention_all_gather", args).shape == (8, )  # defaulted argument left out
    with pytest.raises(TypeError, match="group_name"):
        bench.symm_call("reduce_scatter_out", {"input": x})
