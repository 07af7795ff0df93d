"""Run a command, tee its output, and record the run as evidence JSON (command, exit code, versions, git commit,
GPU names, pytest summary, output tail, where it ran: ``world_size``, ``gpus``, ``ranks_per_gpu``, ``shared_gpu``
from :func:`run_topology`) for benchmarks/results/.

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
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from provenance import git_commit, topology_from_env, tree_fingerprint, versions  # noqa: E402


def environment_facts() -> dict:
    facts = dict(versions(), host=os.uname().nodename, git_commit=git_commit(), tree=tree_fingerprint())
    facts["env"] = {k: v for k, v in os.environ.items()
                    if k.startswith(("NVSHMEM_", "NCCL_NVLS", "TORCH_SYMM_MEM", "TRITON_DIST_"))}
    return facts


_PYTEST_SUMMARY = re.compile(r"=+ (.*?(?:passed|failed|error|skipped).*?) in [0-9.]+s")
#: what torch / NCCL print when a rank outlives its process group or store (counted, never expected)
_EXIT_NOISE = re.compile(r"Broken pipe|TCPStore|heartbeat|destroy_process_group\(\) was not called|"
                         r"ProcessGroupNCCL.*(?:abort|shut ?down)", re.I)
#: environment variable that marks every process of one recorded run (torchrun's workers run in sessions of their
#: own and are re-parented when torchrun dies, so neither the process group nor the parent chain finds them all)
RUN_TAG_ENV = "TRITON_DIST_RUN_TAG"


#: the line scripts/launch.sh prints before it starts torchrun
_LAUNCH_LINE = re.compile(r"^\[launch\] (.*)$", re.M)


def _int_or_none(v):
    try:
        return int(v)
    except (TypeError, ValueError):
        return None


def _flag(text: str, names: str):
    """The value of the first ``--<name> V`` / ``--<name>=V`` in ``text`` (``names``: a regex alternative)."""
    m = re.search(rf"(?:^|\s)--(?:{names})(?:=|\s+)(\S+)", text)
    return m.group(1).strip("'\"") if m else None


def run_topology(cmd, output: str, visible_gpus: int, env) -> dict:
    """Where a recorded command ran: ``world_size`` (ranks), ``gpus`` (distinct GPUs used), ``ranks_per_gpu`` and
    ``shared_gpu`` (ranks shared a GPU: CUDA MPS, no NVLink), plus ``mps`` (how scripts/launch.sh provided MPS:
    ``private``, ``existing``, ``none``; None when unknown) and ``topology_source`` (``"launch"`` / ``"command"``).

    A command through scripts/launch.sh (named in ``cmd``) printed ``[launch] world_size=W gpus=G ranks_per_gpu=R
    mps=M`` before torchrun started: the first such line of ``output`` is taken as it is. Otherwise the figures are
    derived from the command: ``--nproc_per_node N`` / ``--nproc-per-node N`` (times ``--nnodes``) ranks, at
    ``--ranks-per-gpu R`` (a number) or ``TRITON_DIST_RANKS_PER_GPU`` in ``env`` ranks per GPU, else spread over
    ``min(N, visible_gpus)`` GPUs; a command without ``--nproc_per_node``: one rank, on one GPU when one is visible.
    Without a visible GPU (the simulator): ``gpus`` 0 and ``ranks_per_gpu`` None. Pure (tested on the CPU)."""
    text = " ".join(str(c) for c in cmd)
    if "launch.sh" in text:
        m = _LAUNCH_LINE.search(output or "")
        if m:
            kv = dict(re.findall(r"(\w+)=(\S+)", m.group(1)))
            world, gpus, per = (_int_or_none(kv.get(k)) for k in ("world_size", "gpus", "ranks_per_gpu"))
            if world is not None and gpus is not None and per is not None:
                return {"world_size": world, "gpus": gpus, "ranks_per_gpu": per, "shared_gpu": per > 1,
                        "mps": kv.get("mps"), "topology_source": "launch"}
    out = {"mps": None, "topology_source": "command"}
    nproc = _flag(text, "nproc_per_node|nproc-per-node")
    world = _int_or_none(nproc) if nproc is not None else 1
    if nproc is not None and world is None and nproc in ("gpu", "auto") and visible_gpus > 0:
        world = visible_gpus  # torchrun's own spellings: one rank per visible GPU
    if world is None:
        return dict(out, world_size=None, gpus=None, ranks_per_gpu=None, shared_gpu=False)
    world *= _int_or_none(_flag(text, "nnodes")) or 1
    per = _int_or_none(_flag(text, "ranks-per-gpu|ranks_per_gpu")) or _int_or_none(env.get("TRITON_DIST_RANKS_PER_GPU"))
    return dict(out, **topology_from_env(world, visible_gpus, per))


def tagged_pids(tag: str):
    """Pids of live processes whose environment carries ``RUN_TAG_ENV=tag`` (Linux /proc; empty elsewhere)."""
    needle = f"{RUN_TAG_ENV}={tag}".encode()
    out = []
    try:
        entries = os.listdir("/proc")
    except OSError:
        return out
    for d in entries:
        if not d.isdigit() or int(d) == os.getpid():
            continue
        try:
            with open(f"/proc/{d}/environ", "rb") as f:
                if needle in f.read().split(b"\0"):
                    out.append(int(d))
        except OSError:
            continue
    return out


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace").strip()[:200]
    except OSError:
        return "?"


def _signal_all(pids, sig) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            pass


def end_run(tag: str, grace_s: float = 10.0):
    """SIGTERM every process of the run, then SIGKILL what is still there after ``grace_s``. Returns what was
    found alive first, as ``[(pid, cmdline)]``."""
    import signal

    alive = tagged_pids(tag)
    found = [(p, _cmdline(p)) for p in alive]
    _signal_all(alive, signal.SIGTERM)
    deadline = time.time() + grace_s
    while alive and time.time() < deadline:
        time.sleep(0.2)
        alive = tagged_pids(tag)
    _signal_all(alive, signal.SIGKILL)
    return found


def main(argv=None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--name", required=True)
    p.add_argument("--out", default=os.environ.get("OUT", "benchmarks/results"))
    p.add_argument("--timeout", type=float, default=None,
                   help="seconds; then every process of the command (torchrun and all its workers) is ended")
    p.add_argument("--linger", type=float, default=10.0,
                   help="seconds a process of the command may outlive the command itself before it counts as "
                        "left behind (recorded, ended, and the step fails)")
    p.add_argument("cmd", nargs=argparse.REMAINDER)
    a = p.parse_args(argv)
    cmd = a.cmd[1:] if a.cmd and a.cmd[0] == "--" else a.cmd
    os.makedirs(a.out, exist_ok=True)
    log_path = os.path.join(a.out, f"{a.name}.log")
    t0 = time.time()
    tag = f"{a.name}-{os.getpid()}-{time.time_ns()}"
    env = dict(os.environ, **{RUN_TAG_ENV: tag})
    lines = []
    last_summary = [None]  # time the last pytest summary line was read
    timed_out = False
    # Line-buffered: a run that is killed must still leave every line it printed.
    with open(log_path, "w", buffering=1) as log:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1,
                                start_new_session=True, env=env)

        def pump():
            for line in proc.stdout:
                sys.stdout.write(line)
                log.write(line)
                lines.append(line)
                if _PYTEST_SUMMARY.search(line):
                    last_summary[0] = time.time()

        reader = threading.Thread(target=pump, daemon=True)
        reader.start()
        try:
            rc = proc.wait(timeout=a.timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            log.write(f"\n[record_run] timeout after {a.timeout:.0f} s: ending every process of the run\n")
            end_run(tag)
            rc = proc.wait()
        t_exit = time.time()
        # The command is done; its workers must be too (torchrun waits for them). Anything still alive after
        # --linger seconds was left behind.
        # "Gone" needs two empty scans in a row: a process caught inside execve has no readable environment for a
        # moment (a detached `setsid cmd &` started just before the command exited), so one empty scan is not proof.
        deadline = time.time() + a.linger
        empty_scans = 0
        while empty_scans < 2 and time.time() < deadline:
            empty_scans = 0 if tagged_pids(tag) else empty_scans + 1
            time.sleep(0.2)
        left = end_run(tag, grace_s=5.0)
        if left:
            log.write(f"\n[record_run] {len(left)} process(es) outlived the command by {a.linger:.0f} s and were "
                      f"ended: {left}\n")
        reader.join(timeout=10)  # an orphan holding the pipe open cannot keep us here
    text = "".join(lines)
    summaries = _PYTEST_SUMMARY.findall(text)
    facts = environment_facts()
    record = {
        "name": a.name,
        "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "command": " ".join(cmd),
        "exit_code": rc,
        "timed_out": timed_out,
        "wall_s": round(t_exit - t0, 1),
        "exit_after_summary_s": None if last_summary[0] is None else round(t_exit - last_summary[0], 1),
        "left_behind": [{"pid": pid, "cmdline": c} for pid, c in left],
        "exit_noise_lines": sum(1 for line in lines if _EXIT_NOISE.search(line)),
        "pytest_summary": summaries,
        # visible GPUs: torch's count, read after the run (versions() lists their names)
        **run_topology(cmd, text, len(facts.get("gpus") or []), os.environ),
        "facts": facts,
        "output_tail": text[-6000:],
    }
    with open(os.path.join(a.out, f"{a.name}.json"), "w") as f:
        json.dump(record, f, indent=1)
    if rc == 0 and left:
        return 3  # the work passed, but the run did not end cleanly
    return rc


if __name__ == "__main__":
    sys.exit(main())
