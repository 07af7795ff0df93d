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
