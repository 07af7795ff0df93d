"""benchmarks/record_run.py: a recorded GPU step ends every process it started (torchrun's workers run in sessions
of their own, so killing the process group missed them on 2026-11-30), and says when a process outlived the
command. Linux only (/proc), like the GPU machine."""
import json
import os
import subprocess
import sys
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
RECORD = os.path.join(HERE, "..", "..", "benchmarks", "record_run.py")

pytestmark = pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs Linux /proc")


def _record(tmp_path, name, script, *extra):
    t0 = time.time()
    rc = subprocess.run([sys.executable, RECORD, "--name", name, "--out", str(tmp_path), *extra, "--", "bash", "-c",
                         script], capture_output=True, text=True, timeout=120).returncode
    with open(tmp_path / f"{name}.json") as f:
        return rc, json.load(f), time.time() - t0


def _alive(marker):
    out = subprocess.run(["pgrep", "-f", marker], capture_output=True, text=True).stdout.split()
    return [p for p in out if int(p) != os.getpid()]


def test_clean_run_is_recorded_with_its_exit_timing(tmp_path):
    rc, rec, _ = _record(tmp_path, "clean", "echo '=== 2 passed in 0.10s ==='")
    assert rc == 0 and rec["exit_code"] == 0 and not rec["timed_out"] and rec["left_behind"] == []
    assert rec["pytest_summary"] == ["2 passed"] and rec["exit_after_summary_s"] is not None
    assert rec["exit_noise_lines"] == 0


def test_a_process_in_its_own_session_that_outlives_the_command_is_ended_and_fails_the_step(tmp_path):
    marker = f"sleep 3{os.getpid() % 1000}7"
    rc, rec, secs = _record(tmp_path, "orphan", f"setsid {marker} & echo started", "--linger", "1")
    assert rc == 3 and rec["exit_code"] == 0
    assert [e["cmdline"] for e in rec["left_behind"]] == [marker]
    assert secs < 30 and not _alive(marker)


def test_timeout_ends_workers_in_other_sessions_too(tmp_path):
    marker = f"sleep 4{os.getpid() % 1000}9"
    rc, rec, secs = _record(tmp_path, "hang", f"setsid {marker} & echo 'TCPStore: Broken pipe'; sleep 300",
                            "--timeout", "2")
    assert rec["timed_out"] and rc != 0
    assert secs < 40 and not _alive(marker)
    assert rec["exit_noise_lines"] == 1
    assert "timeout after 2 s" in open(tmp_path / "hang.log").read()
