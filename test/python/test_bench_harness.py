"""benchmarks/harness.py without a GPU: the result header every bench and probe writes (the provenance fields
make_results.py, record_run.py and the tables read), the result check, the ``--probe NAME`` split, every probe's
``--help``, and that no other module in benchmarks/ builds a header or a timing loop of its own again. The timing
itself needs CUDA (scripts/gpu_suite.sh)."""
import ast
import os
import subprocess
import sys

import pytest
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
BENCH = os.path.join(ROOT, "benchmarks")
sys.path.insert(0, BENCH)
import harness  # noqa: E402
import provenance  # noqa: E402

ENV = dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.join(ROOT, "python"), BENCH]))


def test_result_header_carries_the_provenance():
    doc = harness.result_header("bench_x", stamp="20261204T231500Z", mode="quick")
    for key in ("benchmark", "command", "timestamp_utc", "git_commit", "tree", "versions", "devices", "world_size",
                "topology", "shared_gpu", "device_rendezvous", "mode"):
        assert key in doc, key
    assert doc["benchmark"] == "bench_x" and doc["timestamp_utc"] == "20261204T231500Z" and doc["mode"] == "quick"
    assert doc["tree"] == provenance.tree_fingerprint() and len(doc["tree"]) == 16
    assert doc["shared_gpu"] is bool(doc["topology"].get("shared_gpu"))
    if not torch.cuda.is_available():
        assert doc["devices"] == ["cpu-simulator"] and doc["device_rendezvous"] is None
    shared = {"world_size": 4, "gpus": 1, "ranks_per_gpu": 4, "shared_gpu": True}
    doc = harness.result_header("bench_x", topo=shared)
    assert doc["topology"] == shared and doc["shared_gpu"] is True and doc["world_size"] == 4


def test_write_json_and_results_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("TRITON_DIST_RESULTS_DIR", str(tmp_path / "r"))
    assert harness.results_dir() == str(tmp_path / "r")
    path = harness.write_json(os.path.join(harness.results_dir(), "sub", "x.json"), {"a": 1})
    assert open(path).read() == '{\n "a": 1\n}'
    monkeypatch.delenv("TRITON_DIST_RESULTS_DIR")
    assert harness.results_dir() == os.path.join(BENCH, "results")


def test_result_check():
    ref = torch.ones(4, 4)
    assert harness.close(ref * 1.01, ref) == (True, pytest.approx(0.01, rel=1e-3))
    ok, rel = harness.close(ref * 1.05, ref)
    assert not ok and rel == pytest.approx(0.05, rel=1e-3)
    bad = ref.clone()
    bad[0, 0] = float("nan")
    assert not harness.close(bad, ref)[0]
    spike = ref.clone()
    spike[0, 0] = 1.5  # one element off by half: the max norm sees it, the Frobenius norm barely
    assert harness.rel_error(spike, ref, norm="max") == pytest.approx(0.5)
    assert harness.rel_error(spike, ref) < 0.2


def test_split_probe():
    probes = {"rs-own": None, "timing": None}
    assert harness.split_probe(["--quick"], probes) is None and harness.split_probe([], probes) is None
    assert harness.split_probe(["--probe", "rs-own", "--k", "3"], probes) == ("rs-own", ["--k", "3"])
    assert harness.split_probe(["--probe=timing"], probes) == ("timing", [])
    for bad in (["--probe", "nope"], ["--probe"]):
        with pytest.raises(SystemExit, match="accepted: rs-own, timing"):
            harness.split_probe(bad, probes)


@pytest.mark.parametrize("bench,probe", [("bench_overlap", p) for p in ("ag-gemm", "gemm-ar", "gemm-rs", "rs-own",
                                                                         "timing", "trace")]
                         + [("bench_mega", "linear-chain"), ("bench_collectives", "host-path")])
def test_every_probe_is_a_bench_option(bench, probe):
    r = subprocess.run([sys.executable, os.path.join(BENCH, f"{bench}.py"), "--probe", probe, "--help"],
                       capture_output=True, text=True, env=ENV, cwd=ROOT, timeout=300)
    assert r.returncode == 0 and f"{bench}.py --probe {probe}" in r.stdout, r.stderr[-2000:]
    # --probe is the first option: after the bench's own options it is refused, not ignored
    r = subprocess.run([sys.executable, os.path.join(BENCH, f"{bench}.py"), "--reps", "3", "--probe", probe],
                       capture_output=True, text=True, env=ENV, cwd=ROOT, timeout=300)
    assert r.returncode != 0 and "--probe must be the first option" in r.stderr, r.stderr[-2000:]


#: what only the harness does: build the provenance header, time samples, capture graphs
HARNESS_ONLY = {"tree_fingerprint", "versions", "git_commit", "median_us", "eager_median_us", "interleaved_medians",
                "capture_calls", "time_interleaved", "time_eager", "time_graph", "drop_failing", "close"}


def test_no_second_harness_in_benchmarks():
    """Every bench and probe times, captures, checks and records through harness.py: no other module in benchmarks/
    defines those functions or calls the provenance functions a header is built from (record_run.py records a
    command's environment, and provenance.py defines them)."""
    found = []
    for name in sorted(os.listdir(BENCH)):
        if not name.endswith(".py") or name in ("harness.py", "provenance.py"):
            continue
        with open(os.path.join(BENCH, name)) as f:
            tree = ast.parse(f.read(), name)
        for node in tree.body:  # module-level functions (a context's close() method is not a result check)
            if isinstance(node, ast.FunctionDef) and node.name in HARNESS_ONLY:
                found.append(f"{name}:{node.lineno} defines {node.name}")
        for node in ast.walk(tree):
            if (name != "record_run.py" and isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                    and node.func.id in ("tree_fingerprint", "versions", "git_commit")):
                found.append(f"{name}:{node.lineno} calls {node.func.id}() (build the header with harness)")
    assert not found, found
    assert not [n for n in os.listdir(BENCH) if n.startswith("probe_") and n.endswith(".py")]


@pytest.mark.sim
def test_mega_probe_smoke_on_the_simulator():
    """``bench_mega.py --probe linear-chain --tiny`` (formerly probe_mega.py's CPU smoke run): the Linear chain as one
    mega kernel on the simulator matches torch."""
    env = dict(ENV, TRITON_DIST_BACKEND="sim", TRITON_INTERPRET="1", OMP_NUM_THREADS="1")
    r = subprocess.run([sys.executable, os.path.join(BENCH, "bench_mega.py"), "--probe", "linear-chain", "--tiny"],
                       capture_output=True, text=True, env=env, cwd=ROOT, timeout=600)
    assert r.returncode == 0 and "sim: 16 tasks" in r.stdout, r.stdout[-2000:] + r.stderr[-2000:]


_IMPORT_CHECK = r'''
import ast, importlib, os, sys
scan, path = sys.argv[1].split(os.pathsep), sys.argv[2].split(os.pathsep)
sys.path[:0] = path
local = {f[:-3] for d in path for f in os.listdir(d) if f.endswith(".py")}
bad = []
for f in sorted(os.path.join(d, f) for d in scan for f in os.listdir(d) if f.endswith(".py")):
    for node in ast.walk(ast.parse(open(f).read())):
        if not (isinstance(node, ast.ImportFrom) and node.module and node.level == 0):
            continue
        if node.module.split(".")[0] not in local | {"triton_dist"}:
            continue
        try:
            mod = importlib.import_module(node.module)
        except Exception as exc:
            bad.append(f"{f}:{node.lineno}: {node.module}: {exc}")
            continue
        for alias in node.names:
            if alias.name == "*" or hasattr(mod, alias.name):
                continue
            try:
                importlib.import_module(f"{node.module}.{alias.name}")
            except ImportError:
                bad.append(f"{f}:{node.lineno}: {node.module} has no {alias.name}")
print("\n".join(bad))
sys.exit(1 if bad else 0)
'''


def test_every_import_in_benchmarks_and_the_gpu_tier_resolves():
    """Every ``from <module> import <name>`` in benchmarks/ and the GPU tier (test/python/gpu) -- also the ones
    inside functions, which only a GPU run reaches -- names a module of triton_dist, benchmarks/ or the tests and a
    name it has (a name that moved into the library left a probe importing it from its old bench, seen after the
    2026-12-04 table refactor). In a subprocess: the benches set environment defaults when imported."""
    gpu_tier = os.path.join(HERE, "gpu")
    r = subprocess.run([sys.executable, "-c", _IMPORT_CHECK, os.pathsep.join([BENCH, gpu_tier]),
                        os.pathsep.join([BENCH, HERE, gpu_tier])], capture_output=True, text=True, env=ENV,
                       cwd=ROOT, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr[-2000:]


def test_overlap_probe_cases_parse():
    """``bench_overlap.py --probe timing``'s case strings: op, model, M, the rule of the method (with its variant),
    and the no-memops flag; a bad case names the accepted form."""
    import overlap_probes

    assert overlap_probes.parse_case("ag_gemm:llama3-70b:2048:chunked@f0.25") == (
        "ag_gemm", "llama3-70b", 2048, {"method": "chunked", "first_frac": 0.25}, False)
    assert overlap_probes.parse_case("gemm_rs:llama3-8b:4096:ce@p4:nomemops")[3:] == (
        {"method": "ce", "pieces": 4}, True)
    with pytest.raises(ValueError, match="expected op:model:M:method"):
        overlap_probes.parse_case("gemm_ar:llama3-8b:128:fused")


def test_list_arguments_of_the_benches():
    """names_arg / counts_arg: the comma lists of bench_group_gemm and bench_moe_ep, refused with one argparse line."""
    import argparse

    ap = argparse.ArgumentParser(prog="bench")
    assert harness.names_arg(ap, "--models", "a,,b", ("a", "b", "c"), "model") == ["a", "b"]
    assert harness.counts_arg(ap, "--tokens", "128,8192") == [128, 8192]
    for call in (lambda: harness.names_arg(ap, "--models", "a,z", ("a", ), "model"),
                 lambda: harness.counts_arg(ap, "--tokens", "1,x"), lambda: harness.counts_arg(ap, "--tokens", "0")):
        with pytest.raises(SystemExit):
            call()
