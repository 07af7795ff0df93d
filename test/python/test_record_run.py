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
BENCH_DIR = os.path.join(HERE, "..", "..", "benchmarks")
RECORD = os.path.join(BENCH_DIR, "record_run.py")
sys.path.insert(0, BENCH_DIR)
import record_run  # noqa: E402

needs_proc = pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs Linux /proc")


def _record(tmp_path, name, script, *extra):
    t0 = time.time()
    rc = subprocess.run([sys.executable, RECORD, "--name", name, "--out", str(tmp_path), *extra, "--", "bash", "-c",
                         script], capture_output=True, text=True, timeout=120).returncode
    with open(tmp_path / f"{name}.json") as f:
        return rc, json.load(f), time.time() - t0


def _alive(marker):
    out = subprocess.run(["pgrep", "-f", marker], capture_output=True, text=True).stdout.split()
    return [p for p in out if int(p) != os.getpid()]


@needs_proc
def test_clean_run_is_recorded_with_its_exit_timing(tmp_path):
    rc, rec, _ = _record(tmp_path, "clean", "echo '=== 2 passed in 0.10s ==='")
    assert rc == 0 and rec["exit_code"] == 0 and not rec["timed_out"] and rec["left_behind"] == []
    assert rec["pytest_summary"] == ["2 passed"] and rec["exit_after_summary_s"] is not None
    assert rec["exit_noise_lines"] == 0


@needs_proc
def test_a_process_in_its_own_session_that_outlives_the_command_is_ended_and_fails_the_step(tmp_path):
    marker = f"sleep 3{os.getpid() % 1000}7"
    rc, rec, secs = _record(tmp_path, "orphan", f"setsid {marker} & echo started", "--linger", "1")
    assert rc == 3 and rec["exit_code"] == 0
    assert [e["cmdline"] for e in rec["left_behind"]] == [marker]
    assert secs < 30 and not _alive(marker)


@needs_proc
def test_timeout_ends_workers_in_other_sessions_too(tmp_path):
    marker = f"sleep 4{os.getpid() % 1000}9"
    rc, rec, secs = _record(tmp_path, "hang", f"setsid {marker} & echo 'TCPStore: Broken pipe'; sleep 300",
                            "--timeout", "2")
    assert rec["timed_out"] and rc != 0
    assert secs < 40 and not _alive(marker)
    assert rec["exit_noise_lines"] == 1
    assert "timeout after 2 s" in open(tmp_path / "hang.log").read()


# ------------------------------------------------------------------------------------ where a step ran (topology)
LAUNCH = ["scripts/launch.sh", "--ranks-per-gpu", "auto", "--nproc_per_node", "4", "-m", "pytest", "-q"]


def _topo(cmd, output="", visible=1, env=None):
    t = record_run.run_topology(cmd, output, visible, env or {})
    return {k: t[k] for k in ("world_size", "gpus", "ranks_per_gpu", "shared_gpu", "mps", "topology_source")}


def test_topology_from_the_launch_line():
    out = "some warning\n[launch] world_size=4 gpus=1 ranks_per_gpu=4 mps=private\n=== 3 passed in 1.0s ===\n"
    assert _topo(LAUNCH, out, visible=1) == dict(world_size=4, gpus=1, ranks_per_gpu=4, shared_gpu=True,
                                                 mps="private", topology_source="launch")
    one_each = "[launch] world_size=2 gpus=2 ranks_per_gpu=1 mps=none\n"
    assert _topo(LAUNCH, one_each, visible=8)["shared_gpu"] is False
    # the line wins over what the command and the visible GPUs would suggest; only the first line counts
    two = ("[launch] world_size=2 gpus=1 ranks_per_gpu=2 mps=existing\n"
           "[launch] world_size=8 gpus=8 ranks_per_gpu=1 mps=none\n")
    assert _topo(LAUNCH, two, visible=8) == dict(world_size=2, gpus=1, ranks_per_gpu=2, shared_gpu=True,
                                                 mps="existing", topology_source="launch")
    # inside bash -c too
    assert _topo(["bash", "-c", "scripts/launch.sh --nproc_per_node 2 x.py"], two)["topology_source"] == "launch"


def test_topology_derived_from_the_command():
    torchrun = ["torchrun", "--nproc_per_node", "2", "-m", "pytest"]
    assert _topo(torchrun, visible=2) == dict(world_size=2, gpus=2, ranks_per_gpu=1, shared_gpu=False, mps=None,
                                              topology_source="command")
    assert _topo(torchrun, visible=8)["gpus"] == 2  # min(N, visible)
    assert _topo(torchrun, visible=1) == dict(world_size=2, gpus=1, ranks_per_gpu=2, shared_gpu=True, mps=None,
                                              topology_source="command")
    assert _topo(["torchrun", "--nproc-per-node=4", "x.py"], visible=8, env={"TRITON_DIST_RANKS_PER_GPU": "2"}) == \
        dict(world_size=4, gpus=2, ranks_per_gpu=2, shared_gpu=True, mps=None, topology_source="command")
    assert _topo(["bash", "-c", "torchrun --nproc_per_node 4 x.py"], visible=4)["world_size"] == 4
    # a [launch] line printed by something else (not the command's own launch.sh) is not the command's topology
    assert _topo(torchrun, "[launch] world_size=8 gpus=1 ranks_per_gpu=8 mps=private\n", visible=2)["gpus"] == 2
    # launch.sh that printed no line: its --ranks-per-gpu number, else "auto" over the visible GPUs
    assert _topo(["scripts/launch.sh", "--ranks-per-gpu", "2", "--nproc_per_node", "4", "x.py"], visible=4) == \
        dict(world_size=4, gpus=2, ranks_per_gpu=2, shared_gpu=True, mps=None, topology_source="command")
    assert _topo(LAUNCH, visible=1)["ranks_per_gpu"] == 4 and _topo(LAUNCH, visible=4)["ranks_per_gpu"] == 1
    # simulator: no GPU
    assert _topo(torchrun, visible=0) == dict(world_size=2, gpus=0, ranks_per_gpu=None, shared_gpu=False, mps=None,
                                              topology_source="command")


def test_topology_of_a_plain_command():
    assert _topo(["python", "benchmarks/bench_gemm.py"], visible=1) == dict(
        world_size=1, gpus=1, ranks_per_gpu=1, shared_gpu=False, mps=None, topology_source="command")
    assert _topo(["python", "benchmarks/bench_gemm.py"], visible=0)["gpus"] == 0


@needs_proc
def test_a_recorded_step_carries_its_topology(tmp_path):
    rc, rec, _ = _record(tmp_path, "plain", "echo hello")
    assert rc == 0 and rec["world_size"] == 1 and rec["shared_gpu"] is False and "ranks_per_gpu" in rec
    assert rec["topology_source"] == "command"
    fake = tmp_path / "launch.sh"  # a stand-in for scripts/launch.sh: its first line names the topology
    fake.write_text("echo '[launch] world_size=2 gpus=1 ranks_per_gpu=2 mps=private'\n"
                    "echo '=== 1 passed in 0.1s ==='\n")
    rc = subprocess.run([sys.executable, RECORD, "--name", "shared", "--out", str(tmp_path), "--", "bash", str(fake)],
                        capture_output=True, text=True, timeout=120).returncode
    rec = json.loads((tmp_path / "shared.json").read_text())
    assert rc == 0 and (rec["world_size"], rec["gpus"], rec["ranks_per_gpu"], rec["shared_gpu"], rec["mps"]) == \
        (2, 1, 2, True, "private")


def test_provenance_topology_helpers(tmp_path):
    import provenance as P

    assert P.topology_from_layout({"h/gpu0": [0, 1], "h/gpu1": [2, 3]}) == dict(world_size=4, gpus=2, ranks_per_gpu=2,
                                                                              shared_gpu=True)
    assert P.topology_from_layout({"a/g": [0], "b/g": [1]}) == dict(world_size=2, gpus=2, ranks_per_gpu=1,
                                                                  shared_gpu=False)
    assert P.topology_from_env(4, 1, 4) == dict(world_size=4, gpus=1, ranks_per_gpu=4, shared_gpu=True)
    assert P.topology_from_env(2, 2, None) == dict(world_size=2, gpus=2, ranks_per_gpu=1, shared_gpu=False)
    assert P.topology_from_env(1, 1, 2) == dict(world_size=1, gpus=1, ranks_per_gpu=1, shared_gpu=False)
    assert P.topology_from_env(2, 0, 2) == dict(world_size=2, gpus=0, ranks_per_gpu=None, shared_gpu=False)
    shared = P.topology_fields(dict(world_size=2, gpus=1, ranks_per_gpu=2, shared_gpu=True))
    assert shared["shared_gpu"] is True and shared["topology"]["ranks_per_gpu"] == 2
    assert "SHARED GPU" in P.topology_line(shared["topology"]) and "2 ranks per GPU" in P.topology_line(
        shared["topology"])
    assert "SHARED" not in P.topology_line(dict(world_size=2, gpus=2, ranks_per_gpu=1, shared_gpu=False))
    trace = tmp_path / "trace.json"  # a trace says where it ran too; anything but a JSON object is left alone
    trace.write_text(json.dumps({"traceEvents": []}))
    assert P.label_json(str(trace), shared["topology"])
    assert json.loads(trace.read_text()) == {"traceEvents": [], **shared}
    listed = tmp_path / "list.json"
    listed.write_text("[1]")
    assert not P.label_json(str(listed)) and listed.read_text() == "[1]" and not P.label_json(None)
    t = P.topology()  # this process: no distributed setup, whatever the machine
    assert set(t) == {"world_size", "gpus", "ranks_per_gpu", "shared_gpu"} and t["shared_gpu"] in (True, False)
