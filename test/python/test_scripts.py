"""scripts/test.sh shows progress (issue 15 point 5: lit ran for minutes with no output), and the README's tool
examples run with the interpreter of the venv that scripts/setup.sh creates."""
import os
import re
import shlex
import shutil
import subprocess
import sys

import pytest

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")


def _read(*parts):
    with open(os.path.join(ROOT, *parts)) as f:
        return f.read()


def _lit_flags():
    """The flags scripts/test.sh passes to lit (the line that runs lit on test/lit)."""
    line = next(ln for ln in _read("scripts", "test.sh").splitlines() if re.match(r'\s*"\$BIN/lit"', ln))
    words = shlex.split(line.split("||")[0])
    return [w for w in words[1:] if w.startswith("-")]


def test_lit_in_test_sh_reports_each_test_and_the_count(tmp_path):
    lit = shutil.which("lit") or os.path.join(os.path.dirname(sys.executable), "lit")
    if not os.path.exists(lit):
        pytest.skip("lit is not installed (the test extra)")
    (tmp_path / "lit.cfg.py").write_text("import lit.formats\nconfig.name = 'tiny'\n"
                                         "config.test_format = lit.formats.ShTest(execute_external=False)\n"
                                         "config.suffixes = ['.txt']\nconfig.test_source_root = "
                                         f"{str(tmp_path)!r}\n")
    for name in ("a.txt", "b.txt"):
        (tmp_path / name).write_text("# RUN: true\n")
    res = subprocess.run([lit, *_lit_flags(), str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stdout + res.stderr
    # one line per test as it finishes, with how far along the run is (not a bare percentage bar)
    assert re.search(r"PASS: tiny :: a\.txt \(\d of 2\)", res.stdout), res.stdout
    assert re.search(r"PASS: tiny :: b\.txt \(\d of 2\)", res.stdout), res.stdout


def test_readme_tool_examples_use_the_venv_python():
    readme = _read("README.md")
    section = readme.split("## Inspect lowering for any target, on any machine", 1)[1].split("\n## ", 1)[0]
    block = section.split("```bash\n", 1)[1].split("```", 1)[0]
    commands = [ln for ln in block.splitlines() if "-m triton_dist.tools.compile" in ln]
    assert commands and all(ln.startswith(".venv/bin/python -m triton_dist.tools.compile") for ln in commands)
    assert "source .venv/bin/activate" in section


@pytest.mark.sim
def test_bench_collectives_smoke_on_the_simulator_writes_json_and_table(tmp_path):
    """benchmarks/bench_collectives.py at 2 simulator ranks (tiny size, two dtypes): every op, method and auto with
    an eager column, the torch symm-mem baselines recorded as unavailable (no CUDA), the auto check, and
    --write-table to a temp path (never the committed table)."""
    import json

    sys.path.insert(0, os.path.join(ROOT, "python"))
    from triton_dist.ops import collectives as C

    table = tmp_path / "table.json"
    env = dict(os.environ, TRITON_DIST_BACKEND="sim", TRITON_INTERPRET="1", OMP_NUM_THREADS="1",
               NVSHMEM_DISABLE_NVLS="1", NCCL_NVLS_ENABLE="0", TORCH_SYMM_MEM_DISABLE_MULTICAST="1",
               TRITON_DIST_RESULTS_DIR=str(tmp_path), PYTHONPATH=os.path.join(ROOT, "python"))
    before = open(C.TABLE_PATH).read()
    proc = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--standalone",
                           os.path.join(ROOT, "benchmarks", "bench_collectives.py"), "--sizes", "4096", "--reps", "1",
                           "--dtypes", "bfloat16,float32", "--write-table", "--table-out", str(table)],
                          capture_output=True, text=True, timeout=600, env=env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "auto check: worst auto / best(ours, NCCL)" in proc.stdout
    (res, ) = tmp_path.glob("collectives_*.json")
    doc = json.loads(res.read_text())
    assert doc["torch_symm"]["unavailable"].startswith("unavailable:") and doc["dtypes"] == ["bfloat16", "float32"]
    rows = doc["results"]
    assert not [r for r in rows if "error" in r or not r.get("correct")], rows
    for op, methods in (("all_reduce", {"one_shot", "two_shot", "two_shot_pipe", "ll", "auto"}),
                        ("all_gather", {"push", "pull", "push_pipe", "ll", "auto"}),
                        ("reduce_scatter", {"direct", "direct_push", "push_pipe", "ll", "ring", "auto"})):
        for dt in ("bfloat16", "float32"):
            got = {r["method"] for r in rows if r["op"] == op and r["dtype"] == dt}
            assert got == methods, (op, dt, got)
    assert all(r["eager_us"] is not None and r["nccl_eager_us"] is not None for r in rows)
    assert all("auto_over_best" in r for r in rows if r["method"] == "auto")
    parsed = C.parse_table(json.loads(table.read_text()), str(table))
    assert {k for k in parsed} == {(op, 2, dt) for op in ("all_reduce", "all_gather", "reduce_scatter")
                                   for dt in ("bfloat16", "float32")}
    assert open(C.TABLE_PATH).read() == before  # the committed table is untouched


@pytest.mark.parametrize("flag", ["--help", "-h"])
def test_test_sh_help_prints_usage_and_runs_nothing(flag):
    """``scripts/test.sh --help`` prints its header (as ``launch.sh --help`` does) instead of setting up a venv and
    running ruff, lit and pytest with ``--help`` passed on to pytest. The interpreter is one that cannot run anything,
    so a run that goes past the usage fails."""
    env = dict(os.environ, TRITON_DIST_PYTHON="/bin/false", TRITON_MATRIX="0")
    proc = subprocess.run(["bash", os.path.join(ROOT, "scripts", "test.sh"), flag], capture_output=True, text=True,
                          timeout=60, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.startswith("Sets up (scripts/setup.sh") and "scripts/test.sh --gpu" in proc.stdout
    assert "== ruff" not in proc.stdout


def test_gpu_suite_names_its_parts_once_and_refuses_others_before_creating_anything(tmp_path):
    """scripts/gpu_suite.sh's PARTS (its usage line) are exactly its case labels, and an unknown part exits 2 with
    the usage before anything is created (it used to leave an empty results folder behind)."""
    text = _read("scripts", "gpu_suite.sh")
    parts = re.search(r'^PARTS="(.*?)"$', text.replace("\\\n", ""), flags=re.M).group(1).split("|")
    labels = re.findall(r"^  ([a-z0-9-]+)\)", text, flags=re.M)
    assert sorted(parts) == sorted(labels) and len(set(parts)) == len(parts), (parts, labels)
    out = tmp_path / "out"
    r = subprocess.run(["bash", os.path.join(ROOT, "scripts", "gpu_suite.sh"), "no-such-part"], capture_output=True,
                       text=True, env=dict(os.environ, OUT=str(out)), cwd=tmp_path, timeout=60)
    assert r.returncode == 2 and "usage:" in r.stderr and "mega-ab" in r.stderr, r.stderr
    assert not out.exists()
    h = subprocess.run(["bash", os.path.join(ROOT, "scripts", "gpu_suite.sh"), "--help"], capture_output=True,
                       text=True, env=dict(os.environ, OUT=str(out)), timeout=60)
    assert h.returncode == 0 and "mega-ab" in h.stdout and not out.exists()


def test_prebuild_device_cache_help_prints_the_whole_header_and_runs_nothing():
    """``scripts/prebuild_device_cache.sh --help`` prints its whole header (up to ``set -euo``: the options, among
    them ``-x N:DIR``, and the device-side ``--check``) with an interpreter that cannot run anything."""
    env = dict(os.environ, PY="/bin/false")
    proc = subprocess.run(["bash", os.path.join(ROOT, "scripts", "prebuild_device_cache.sh"), "--help"],
                          capture_output=True, text=True, timeout=60, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.startswith("Builds the GPU machine's Triton cache") and "-x N:DIR" in proc.stdout
    assert "--check computes" in proc.stdout and "set -euo" not in proc.stdout
