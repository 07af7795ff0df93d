"""Run a command, tee its output, and record the run as evidence JSON (command, exit code, versions, git commit,
GPU names, pytest summary, output tail) for benchmarks/results/.

    python benchmarks/record_run.py --name gpu_tests --out DIR -- torchrun --nproc_per_node 2 -m pytest ...
"""
from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import re
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from provenance import git_commit, versions  # noqa: E402


def environment_facts() -> dict:
    facts = dict(versions(), host=os.uname().nodename, git_commit=git_commit())
    facts["env"] = {k: v for k, v in os.environ.items()
                    if k.startswith(("NVSHMEM_", "NCCL_NVLS", "TORCH_SYMM_MEM", "TRITON_DIST_"))}
    return facts


_PYTEST_SUMMARY = re.compile(r"=+ (.*?(?:passed|failed|error|skipped).*?) in [0-9.]+s")


def main(argv=None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--name", required=True)
    p.add_argument("--out", default=os.environ.get("OUT", "benchmarks/results"))
    p.add_argument("--timeout", type=float, default=None,
                   help="seconds; then the command's whole process group (torchrun and its workers) is killed")
    p.add_argument("cmd", nargs=argparse.REMAINDER)
    a = p.parse_args(argv)
    cmd = a.cmd[1:] if a.cmd and a.cmd[0] == "--" else a.cmd
    os.makedirs(a.out, exist_ok=True)
    log_path = os.path.join(a.out, f"{a.name}.log")
    t0 = time.time()
    # Line-buffered: a run killed by its `timeout` must still leave every line it printed.
    with open(log_path, "w", buffering=1) as log:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1,
                                start_new_session=True)
        timer = None
        if a.timeout:
            import signal
            import threading

            def kill_group():
                log.write(f"\n[record_run] timeout after {a.timeout:.0f} s: killing the process group\n")
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass

            timer = threading.Timer(a.timeout, kill_group)
            timer.start()
        lines = []
        for line in proc.stdout:
            sys.stdout.write(line)
            log.write(line)
            lines.append(line)
        rc = proc.wait()
        if timer is not None:
            timer.cancel()
    text = "".join(lines)
    summaries = _PYTEST_SUMMARY.findall(text)
    record = {
        "name": a.name,
        "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "command": " ".join(cmd),
        "exit_code": rc,
        "timed_out": bool(a.timeout) and rc == -9,
        "wall_s": round(time.time() - t0, 1),
        "pytest_summary": summaries,
        "facts": environment_facts(),
        "output_tail": text[-6000:],
    }
    with open(os.path.join(a.out, f"{a.name}.json"), "w") as f:
        json.dump(record, f, indent=1)
    return rc


if __name__ == "__main__":
    sys.exit(main())
