"""The Triton matrix CI runs (scripts/triton_matrix.sh): which versions, and which tests (the matrix subset)."""
import os
import re
import subprocess
import sys

import conftest
from triton_dist import _compat

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def _matrix_versions():
    with open(os.path.join(ROOT, "scripts", "triton_matrix.txt")) as f:
        return [ln.split("#")[0].strip() for ln in f if ln.split("#")[0].strip()]


def _pinned_triton():
    with open(os.path.join(ROOT, "scripts", "setup.sh")) as f:
        return re.search(r"TRITON_VERSION:-([0-9.]+)", f.read()).group(1)


def test_matrix_covers_every_supported_minor_but_the_pinned_one_once():
    """scripts/triton_matrix.txt names one release of each supported minor (_compat.SUPPORTED_TRITON) except the
    pinned one (scripts/setup.sh's TRITON_VERSION), which runs the full tier."""
    pinned = _compat.parse_triton_version(_pinned_triton())
    versions = [_compat.parse_triton_version(v) for v in _matrix_versions()]
    lo, hi = _compat.SUPPORTED_TRITON
    assert lo <= pinned < hi and pinned[:2] == lo[:2]
    assert all(lo <= v < hi for v in versions), versions
    minors = sorted(v[:2] for v in versions)
    assert minors == [(3, m) for m in range(lo[1] + 1, hi[1])], minors


def test_matrix_files_exist():
    here = os.path.dirname(__file__)
    missing = [f for f in conftest.MATRIX_FILES if not os.path.isfile(os.path.join(here, f))]
    assert not missing
    for node in conftest.MATRIX_DESELECT:
        name, func = node.split("::")
        with open(os.path.join(here, name)) as f:
            assert f"def {func}(" in f.read(), node


def test_triton_matrix_option_selects_the_subset_at_two_ranks():
    """``pytest --triton-matrix`` keeps MATRIX_FILES only, and of parametrized simulator runs only those at <= 2
    ranks (``[2]`` kept, ``[4]`` and the 4-rank stress test dropped)."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    out = subprocess.run([sys.executable, "-m", "pytest", "-q", "--co", "-p", "no:cacheprovider", "--triton-matrix",
                          "test/python/test_collectives_sim.py", "test/python/test_scripts.py"], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=300).stdout
    ids = [ln for ln in out.splitlines() if "::" in ln]
    assert "test/python/test_collectives_sim.py::test_every_kernel[2]" in ids
    assert not [i for i in ids if i.endswith("[4]") or "stress_4_ranks" in i or "test_scripts.py" in i], ids
    assert re.search(r"\d+/\d+ tests collected \(\d+ deselected\)", out), out[-500:]


def test_lit_compile_only_mode_runs_every_command_without_filecheck(tmp_path):
    """TRITON_DIST_LIT_COMPILE_ONLY=1: lit runs a test's RUN lines with filecheck replaced by Inputs/drain.py (so
    an IR check that would fail does not), and drain.py consumes stdin or --input-file and succeeds."""
    import shutil

    lit = shutil.which("lit") or os.path.join(os.path.dirname(sys.executable), "lit")
    env = dict(os.environ, TRITON_DIST_LIT_COMPILE_ONLY="1", PYTHONPATH=os.pathsep.join(sys.path))
    res = subprocess.run([sys.executable, lit, "-a", "test/lit/language/rank.py"], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stdout[-3000:]
    assert "drain.py" in res.stdout and "bin/filecheck" not in res.stdout
    drain = os.path.join(ROOT, "test", "lit", "Inputs", "drain.py")
    data = tmp_path / "x.ll"
    data.write_text("anything\n")
    assert subprocess.run([sys.executable, drain, "%s", "--input-file", str(data)], timeout=60).returncode == 0
    assert subprocess.run([sys.executable, drain], input=b"x" * 100000, timeout=60).returncode == 0
