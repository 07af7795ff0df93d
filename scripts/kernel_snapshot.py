#!/usr/bin/env python3
"""Kernel snapshots: prove that a change leaves the generated code of every lit-tested kernel unchanged.

    python scripts/kernel_snapshot.py snapshot /tmp/before     # before the change: write one file per command
    ... edit, refactor ...
    python scripts/kernel_snapshot.py compare /tmp/before      # after: recompute, diff; exit 1 if anything differs
    python scripts/kernel_snapshot.py list                     # show what would run and what is skipped

Where the commands come from: every ``RUN:`` line of the lit tests (``test/lit/**/*.py``, or the files and
directories given after DIR) that runs the compile tool, e.g.

    # RUN: env PTXAS_OPTIONS=-c %compile %s:kernel -s "*i32:16, 64" --target cuda:90 --stage ptx | filecheck %s

becomes ``python -m triton_dist.tools.compile <test file>:kernel -s ... --target cuda:90 --stage ptx``, its stdout
kept. It runs with the line's ``env`` assignments over the environment lit gives its tests: PATH, HOME, TMPDIR and
the few variables test/lit/lit.cfg.py passes, ``<repo>/python`` first on PYTHONPATH, TRITON_INTERPRET=0 and no
other TRITON_* / MLIR_* knob of the caller's. What follows the first ``|`` (filecheck) is dropped, and so are
output redirections (``> %t.ll``, ``2>&1``) and ``-o FILE`` for a text stage: the output is read from stdout
instead. Lines continued with a trailing backslash are joined. Each command runs in a temporary working directory
of its own, %t being ``./<test file name>.tmp`` and %T ``.`` there.

Setup steps: a RUN line that runs the test file itself as a script, ``[env NAME=VALUE ...] %python %s ARGS`` (its
stdout going to filecheck or nowhere), typically writes a file that later compile lines read, e.g.

    # RUN: env TRITON_DIST_BACKEND=sim %python %s %t.gen.py | filecheck %s --check-prefix=GEN
    # RUN: %compile %t.gen.py:KERNEL -s "..." --target cuda:90 --stage ptx | filecheck %s

It becomes ``python <test file> ARGS``, with the same environment and %t / %T substitutions as a compile line
(what follows ``|`` dropped, its output not kept). The setup steps of a test file run once, in line order, in one
working directory of their own, before the compile commands of that file that come after them; each such command
starts in a copy of that directory as its last preceding setup step left it (as if lit had run the file's RUN
lines up to it). A setup step that fails (or any before it in its file) makes the commands after it FAIL with its
stderr excerpt, and stops the file's later setup steps. Setup steps are listed by ``list`` as
``<test>.<NN>.setup`` and recorded in the manifest; they store no output.

Skipped, and listed as skipped: lines that expect a failure (``not ...``), lines that run anything other than the
compile tool or the test file (filecheck, grep, another script, ...), setup steps with no compile command after
them or whose output is redirected to a file, binary stages (cubin, hsaco), compound commands (``&&``, ``;``) and
substitutions other than %s %S %t %T %%.

Each command's output is stored normalized in DIR as ``<test path under test/lit, / as __>.<NN>.<stage>``, NN
being the line's position among the RUN lines of its test file (1-based; stable as long as the test's RUN lines
stay in order), plus ``MANIFEST.json`` (which RUN line made which file and after which setup steps, the setup
steps run, and what was skipped).

Normalization (scripts/kernel_snapshot_normalize.py) drops what changes when the code does not (instructions,
directives, operands and their order are kept verbatim):
  * every stage: blank lines, trailing whitespace, and the repository path (replaced by ``<repo>``);
  * ptx: ``//`` comments, ``.loc`` / ``.file`` lines, ``.section .debug_*`` blocks (DWARF), and local labels
    that nothing else refers to once those are gone (``$L__tmp0:``, ``$L__func_begin0:``);
  * amdgcn: ``;`` comments (so also ``;;#ASMSTART`` and the "Kernel info" block), ``.loc`` / ``.file`` lines,
    everything in ``.debug_*`` sections, and unreferenced local labels (``.Ltmp0:``, ``.Lfunc_begin0:``);
  * llir: ``;`` comments, ``!dbg`` attachments, debug records / ``llvm.dbg.*`` calls, ``!llvm.dbg.*`` named
    metadata and every ``!DI*`` node; the metadata that is left is renumbered in order of first use, so debug
    nodes appearing or disappearing do not shift ``!range`` / ``!llvm.loop`` numbers;
  * ttir / ttgir: ``//`` comments, ``#locN = loc(...)`` lines and ``loc(...)`` suffixes, and SSA value names
    renamed ``%v0, %v1, ...`` in order of first appearance (Triton names values after Python variables, e.g.
    ``%offs_2``, so renaming a local would otherwise show up as a change).
Comment markers inside string literals (inline assembly) are left alone.

``compare`` prints one line per differing command (DIFF: output differs; NEW: not in the snapshot; GONE: in the
snapshot, not produced now; FAIL: the compile command, or a setup step before it, failed) followed by the first
lines of a unified diff, and a summary; it exits 0 when everything matches, 1 when anything differs or fails, 2
on bad usage. ``--save DIR2`` also writes the recomputed snapshot, for a full ``diff -r``. Commands run in
parallel (``--jobs``, default: the number of CPUs); progress goes to stderr.
"""
from __future__ import annotations

import argparse
import concurrent.futures
import difflib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

REPO = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
MANIFEST = "MANIFEST.json"
COMPILE_MODULE = "triton_dist.tools.compile"
BINARY_STAGES = ("cubin", "hsaco")
TEXT_STAGES = ("ttir", "ttgir", "llir", "ptx", "amdgcn")

if os.path.dirname(os.path.abspath(__file__)) not in sys.path:
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from kernel_snapshot_normalize import normalize  # noqa: E402  (re-exported: kernel_snapshot.normalize)

# ----------------------------------------------------------------------------------------------------------------
# RUN lines -> compile commands


@dataclass
class RunLine:
    test: str  # absolute path of the lit test file
    lineno: int  # 1-based line of the RUN: keyword (first line when continued)
    index: int  # 1-based position among the RUN lines of the file
    text: str  # the command, continuations joined


@dataclass
class Setup:
    """A generator line, ``[env NAME=VALUE ...] %python %s ARGS``: the test file run as a script (its output not
    kept) before the compile lines of its file that come after it, so that the files it writes exist for them."""
    name: str  # ``<test>.<NN>.setup``, like a snapshot file name; nothing is stored under it
    run: RunLine
    argv: List[str]  # arguments after the test file
    env: Dict[str, str] = field(default_factory=dict)


@dataclass
class Command:
    name: str  # snapshot file name
    run: RunLine
    argv: List[str]  # arguments of the compile tool (after `python -m triton_dist.tools.compile`)
    env: Dict[str, str] = field(default_factory=dict)  # assignments from `env NAME=VALUE`
    stage: str = "ptx"
    setups: List[Setup] = field(default_factory=list)  # the setup steps of its file before it, in order


@dataclass
class Skipped:
    run: RunLine
    reason: str


_RUN_RE = re.compile(r"^\s*(?:#|//|;)\s*RUN:(.*)$")


def parse_run_lines(text: str, test: str = "<string>") -> List[RunLine]:
    """The RUN lines of a lit test, in order, with ``\\``-continued lines joined."""
    out: List[RunLine] = []
    pending: Optional[Tuple[int, str]] = None
    for lineno, line in enumerate(text.splitlines(), 1):
        m = _RUN_RE.match(line)
        if not m:
            if pending is not None:  # a continuation with no following RUN line: take what we have
                out.append(RunLine(test, pending[0], len(out) + 1, pending[1].strip()))
                pending = None
            continue
        part = m.group(1).strip()
        start, prefix = (pending if pending is not None else (lineno, ""))
        if part.endswith("\\"):
            pending = (start, prefix + part[:-1].rstrip() + " ")
            continue
        pending = None
        out.append(RunLine(test, start, len(out) + 1, (prefix + part).strip()))
    if pending is not None:
        out.append(RunLine(test, pending[0], len(out) + 1, pending[1].strip()))
    return out


def _split_top_level(cmd: str) -> Tuple[List[str], Optional[str]]:
    """Split ``cmd`` at unquoted ``|`` (pipeline stages). Returns (stages, problem); problem names an unquoted
    ``&&``, ``||`` or ``;`` (a compound command this tool does not run)."""
    stages, cur, quote, i = [], [], None, 0
    while i < len(cmd):
        c = cmd[i]
        if quote:
            cur.append(c)
            if c == "\\" and quote == '"' and i + 1 < len(cmd):
                cur.append(cmd[i + 1])
                i += 1
            elif c == quote:
                quote = None
        elif c in "'\"":
            quote = c
            cur.append(c)
        elif c == "\\" and i + 1 < len(cmd):
            cur.append(c + cmd[i + 1])
            i += 1
        elif cmd.startswith("&&", i) or cmd.startswith("||", i):
            return stages, cmd[i:i + 2]
        elif c == ";":
            return stages, ";"
        elif c == "|":
            stages.append("".join(cur))
            cur = []
        else:
            cur.append(c)
        i += 1
    stages.append("".join(cur))
    return stages, None


_SUBST_RE = re.compile(r"%(%|s|S|t|T|\{[^}]*\}|[A-Za-z_]\w*)")
_ASSIGN_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_REDIRECT_RE = re.compile(r"^(\d*|&)(>>?|<)(&\d+)?(.*)$")


def _substitute(token: str, run: RunLine) -> Tuple[str, Optional[str]]:
    bad = []

    def repl(m):
        key = m.group(1)
        if key == "%":
            return "%"
        if key == "s":
            return run.test
        if key == "S":
            return os.path.dirname(run.test)
        if key == "t":
            return os.path.join(".", f"{os.path.basename(run.test)}.tmp")
        if key == "T":
            return "."
        bad.append(m.group(0))
        return m.group(0)

    out = _SUBST_RE.sub(repl, token)
    return out, (f"unknown substitution {bad[0]}" if bad else None)


def snapshot_name(test: str, index: int, stage: str, lit_root: str) -> str:
    """``<test path relative to lit_root, with / as __, .py dropped>.<NN>.<stage>``."""
    rel = os.path.relpath(os.path.abspath(test), lit_root)
    if rel.startswith(".."):
        rel = os.path.relpath(os.path.abspath(test), REPO)
    if rel.startswith(".."):
        rel = os.path.basename(test)
    rel = rel.replace(os.sep, "/")
    if rel.endswith(".py"):
        rel = rel[:-3]
    rel = re.sub(r"[^A-Za-z0-9_.\-/]", "_", rel).replace("/", "__")
    return f"{rel}.{index:02d}.{stage}"


def plan(run: RunLine, lit_root: str):
    """A ``Command`` for a RUN line that runs the compile tool, a ``Setup`` for one that runs the test file itself
    (``%python %s ...``), else ``Skipped`` with the reason. %t and %T name files in the command's own temporary
    working directory (the same names in a setup step's)."""
    stages, problem = _split_top_level(run.text)
    if problem:
        return Skipped(run, f"compound command ({problem})")
    try:
        tokens = shlex.split(stages[0])
    except ValueError as e:
        return Skipped(run, f"cannot parse: {e}")
    if not tokens:
        return Skipped(run, "empty command")
    if tokens[0] == "not":
        return Skipped(run, "expects a failure (not ...)")
    env: Dict[str, str] = {}
    if tokens[0] == "env":
        tokens = tokens[1:]
        if tokens and tokens[0].startswith("-"):
            return Skipped(run, f"env option {tokens[0]} not supported")
    while tokens and _ASSIGN_RE.match(tokens[0]):
        name, _, value = tokens.pop(0).partition("=")
        env[name] = value
    if not tokens:
        return Skipped(run, "no command after the environment assignments")
    setup = tokens[0] == "%python" and tokens[1:2] == ["%s"]
    if tokens[0] == "%compile":
        args = tokens[1:]
    elif tokens[0] == "%python" and tokens[1:3] == ["-m", COMPILE_MODULE]:
        args = tokens[3:]
    elif setup:
        args = tokens[2:]
    else:
        return Skipped(run, f"not a compile command ({tokens[0]})")
    argv: List[str] = []
    i = 0
    while i < len(args):
        tok = args[i]
        m = _REDIRECT_RE.match(tok)
        if m and (m.group(1) or m.group(2)) and not tok.startswith("-"):
            if m.group(2) == "<":
                return Skipped(run, f"input redirection ({tok})")
            if setup and not m.group(3):  # its output would be a file the compile lines read: not supported
                return Skipped(run, f"setup step redirecting its output to a file ({tok})")
            # `> FILE`, `2>&1`, `2> FILE`, `>FILE`: the tool reads stdout itself
            if not m.group(3) and not m.group(4):
                i += 1  # the file name is the next token
            i += 1
            continue
        if not setup and tok in ("-o", "--out"):
            i += 2
            continue
        if not setup and (tok.startswith("--out=") or (tok.startswith("-o") and len(tok) > 2)):  # --out=F, -oF
            i += 1
            continue
        sub, problem = _substitute(tok, run)
        if problem:
            return Skipped(run, problem)
        argv.append(sub)
        i += 1
    for key in list(env):
        env[key], problem = _substitute(env[key], run)
        if problem:
            return Skipped(run, problem)
    if setup:
        return Setup(snapshot_name(run.test, run.index, "setup", lit_root), run, argv, env)
    stage = "ptx"
    for j, tok in enumerate(argv):
        if tok == "--stage" and j + 1 < len(argv):
            stage = argv[j + 1]
        elif tok.startswith("--stage="):
            stage = tok.split("=", 1)[1]
    if stage in BINARY_STAGES:
        return Skipped(run, f"binary stage ({stage})")
    if stage not in TEXT_STAGES:
        return Skipped(run, f"unknown stage ({stage})")
    return Command(snapshot_name(run.test, run.index, stage, lit_root), run, argv, env, stage)


def discover(paths: List[str], lit_root: str):
    """(commands, skipped) for every RUN line of the ``*.py`` lit tests under ``paths`` (files or directories),
    in file and line order; each command carries the setup steps of its file before it (``setup_steps``), a setup
    step with no compile command after it is skipped. Files named lit.cfg.py / lit.site.cfg.py and directories
    Inputs, Output, __pycache__ are not tests."""
    files: List[str] = []
    for p in paths:
        p = os.path.abspath(p)
        if os.path.isfile(p):
            files.append(p)
            continue
        if not os.path.isdir(p):
            raise FileNotFoundError(p)
        for root, dirs, names in os.walk(p):
            dirs[:] = sorted(d for d in dirs if d not in ("Inputs", "Output", "__pycache__") and not d.startswith("."))
            files += [os.path.join(root, n) for n in sorted(names)
                      if n.endswith(".py") and n not in ("lit.cfg.py", "lit.site.cfg.py")]
    commands, skipped = [], []
    for f in sorted(set(files)):
        with open(f, encoding="utf-8") as fh:
            runs = parse_run_lines(fh.read(), f)
        setups: List[Setup] = []
        unused: List[Skipped] = []  # this file's setup steps with no compile command after them (yet)
        for run in runs:
            item = plan(run, lit_root)
            if isinstance(item, Setup):
                setups.append(item)
                unused.append(Skipped(run, "setup step with no compile command after it"))
                continue
            if isinstance(item, Command):
                item.setups = list(setups)
                unused = []
            (commands if isinstance(item, Command) else skipped).append(item)
        skipped += unused
    skipped.sort(key=lambda sk: (sk.run.test, sk.run.index))
    return commands, skipped


def setup_steps(commands: List[Command]) -> List[Setup]:
    """The setup steps the ``commands`` need, each once, in file and line order."""
    return list({s.name: s for c in commands for s in c.setups}.values())


# ----------------------------------------------------------------------------------------------------------------
# running


@dataclass
class SetupResult:
    setup: Setup
    rc: Optional[int]  # None: not run (an earlier setup step of its file failed)
    stderr: str = ""
    seconds: float = 0.0
    state: Optional[str] = None  # the working directory as this step left it (when it succeeded)


@dataclass
class Result:
    command: Command
    output: Optional[str]  # normalized; None when the command failed
    rc: int = 0
    stderr: str = ""
    seconds: float = 0.0
    failed_setup: Optional[SetupResult] = None  # the setup step whose failure kept the command from running


# What lit lets through to a test (its own short list, then test/lit/lit.cfg.py's): nothing else of the caller's
# environment reaches the compile, so knobs set in a shell (TRITON_*, MLIR_*, PTXAS_OPTIONS...) change neither lit's
# results nor a snapshot.
_PASS_ENV = ("PATH", "HOME", "TMPDIR", "TMP", "TEMP", "TEMPDIR", "LD_LIBRARY_PATH", "LIBRARY_PATH", "LD_PRELOAD",
             "SYSTEMROOT", "TERM", "SOURCE_DATE_EPOCH", "TRITON_CACHE_DIR", "TRITON_HOME",
             "TRITON_DIST_NVSHMEM_BITCODE", "NVSHMEM_HOME")


def _child_env(cmd, repo: str) -> Dict[str, str]:
    """The environment of a ``Command`` or ``Setup``."""
    env = {k: os.environ[k] for k in _PASS_ENV if k in os.environ}
    env["PYTHONPATH"] = os.pathsep.join([os.path.join(repo, "python")] +
                                        ([os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH") else []))
    env["TRITON_INTERPRET"] = "0"  # as lit.cfg.py: compiling is never interpreting
    env.update(cmd.env)
    return env


def _run(argv: List[str], cwd: str, env: Dict[str, str], timeout: float) -> Tuple[int, bytes, str]:
    """(exit status, stdout, stderr) of ``argv``; status -1 when it ran past ``timeout`` seconds."""
    try:
        proc = subprocess.run(argv, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              timeout=timeout)
    except subprocess.TimeoutExpired:
        return -1, b"", f"timed out after {timeout:.0f} s"
    return proc.returncode, proc.stdout, proc.stderr.decode("utf-8", "replace")


class SetupSteps:
    """Runs the setup steps of each test file once, in line order, in one working directory per file (as lit runs
    a test's RUN lines), keeping a copy of that directory as each step left it for the commands that follow the
    step. Thread-safe: a command waits while another thread runs the steps it needs."""

    def __init__(self, root: str, python: str, repo: str, timeout: float, quiet: bool = True):
        self.root, self.python, self.repo, self.timeout, self.quiet = root, python, repo, timeout, quiet
        self.results: Dict[str, SetupResult] = {}
        self._lock = threading.Lock()
        self._file_locks: Dict[str, threading.Lock] = {}
        self._workdirs: Dict[str, str] = {}

    def prepare(self, cmd: Command) -> SetupResult:
        """The result of the last setup step ``cmd`` needs (run now if not yet), or of the first that failed."""
        with self._lock:
            file_lock = self._file_locks.setdefault(cmd.run.test, threading.Lock())
        with file_lock:
            for step in cmd.setups:
                res = self.results.get(step.name)
                if res is None:
                    res = self.results[step.name] = self._run_step(step)
                if res.rc != 0:
                    return res
            return res

    def _run_step(self, step: Setup) -> SetupResult:
        work = self._workdirs.get(step.run.test)
        if work is None:
            work = self._workdirs[step.run.test] = tempfile.mkdtemp(prefix="work_", dir=self.root)
        t0 = time.monotonic()
        rc, _, stderr = _run([self.python, step.run.test, *step.argv], work, _child_env(step, self.repo),
                             self.timeout)
        res = SetupResult(step, rc, stderr, time.monotonic() - t0)
        if rc == 0:
            res.state = os.path.join(self.root, step.name)
            shutil.copytree(work, res.state, symlinks=True)
        if not self.quiet:
            print(f"[setup] {step.name} {'ok' if rc == 0 else f'FAILED (exit {rc})'} {res.seconds:.1f}s",
                  file=sys.stderr, flush=True)
        return res

    def all_results(self, steps: List[Setup]) -> List[SetupResult]:
        """A result for each of ``steps``: those never run (after a failed one) with rc None."""
        return [self.results.get(s.name) or SetupResult(s, None, "not run: an earlier setup step failed")
                for s in steps]


def run_command(cmd: Command, python: str, repo: str, timeout: float,
                setups: Optional[SetupSteps] = None) -> Result:
    """Compile ``cmd`` in a temporary working directory; when it has setup steps, that directory starts as a copy
    of the one its last setup step left (``setups`` runs the steps first if needed)."""
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="kernel_snapshot_") as tmp:
        if cmd.setups:
            if setups is None:
                raise ValueError(f"{cmd.name} has setup steps: run_command needs a SetupSteps")
            ready = setups.prepare(cmd)
            if ready.rc != 0:
                return Result(cmd, None, ready.rc if ready.rc is not None else -1, ready.stderr, 0.0, ready)
            t0 = time.monotonic()  # the command's own time, without its setup steps'
            shutil.copytree(ready.state, tmp, symlinks=True, dirs_exist_ok=True)
        rc, stdout, stderr = _run([python, "-m", COMPILE_MODULE, *cmd.argv], tmp, _child_env(cmd, repo), timeout)
    seconds = time.monotonic() - t0
    if rc != 0:
        return Result(cmd, None, rc, stderr, seconds)
    return Result(cmd, normalize(stdout.decode("utf-8", "replace"), cmd.stage, repo), 0, stderr, seconds)


def run_all(commands: List[Command], jobs: int, python: str, repo: str, timeout: float, quiet: bool = False,
            seconds: Optional[Dict[str, float]] = None) -> Tuple[List[Result], List[SetupResult]]:
    """Run ``commands`` on ``jobs`` workers, the slowest first when ``seconds`` (name -> duration, from an earlier
    snapshot's manifest) knows them, each setup step once before the commands after it; progress ``[n/total]`` on
    stderr. (results in the input order, results of ``setup_steps(commands)``)."""
    results: Dict[str, Result] = {}
    lock, total = threading.Lock(), len(commands)
    seconds = seconds or {}
    ordered = sorted(commands, key=lambda c: -seconds.get(c.name, 0.0))  # stable: file order among the unknown
    with tempfile.TemporaryDirectory(prefix="kernel_snapshot_setup_") as root, \
            concurrent.futures.ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        setups = SetupSteps(root, python, repo, timeout, quiet)
        futures = [pool.submit(run_command, c, python, repo, timeout, setups) for c in ordered]
        for fut in concurrent.futures.as_completed(futures):
            res = fut.result()
            with lock:
                results[res.command.name] = res
                if not quiet:
                    status = "ok" if res.rc == 0 else f"FAILED (exit {res.rc})"
                    print(f"[{len(results):{len(str(total))}d}/{total}] {res.command.name} {status} "
                          f"{res.seconds:.1f}s", file=sys.stderr, flush=True)
    return [results[c.name] for c in commands], setups.all_results(setup_steps(commands))


def failure_lines(r: Result, repo: str) -> List[str]:
    """Why ``r`` failed: a headline (after ``FAIL <name> [<test>:<line>]: ``) and the last lines of the stderr of
    the compile, or of the setup step whose failure kept it from running."""
    excerpt = [ln for ln in r.stderr.strip().splitlines() if ln.strip()][-3:]
    if r.failed_setup is None:
        return [f"compile failed (exit {r.rc})"] + excerpt
    s = r.failed_setup
    status = "did not run" if s.rc is None else f"failed (exit {s.rc})"
    return [f"setup step {s.setup.name} [{_rel(s.setup.run.test, repo)}:{s.setup.run.lineno}] {status}"] + excerpt


# ----------------------------------------------------------------------------------------------------------------
# snapshot directories


def _rel(path: str, repo: str) -> str:
    rel = os.path.relpath(path, repo)
    return path if rel.startswith("..") else rel.replace(os.sep, "/")


def _manifest(results: List[Result], skipped: List[Skipped], repo: str, setups: List[SetupResult]) -> dict:
    def entry(run: RunLine, ok: bool, seconds: float, **extra) -> dict:
        return {"test": _rel(run.test, repo), "line": run.lineno, "run": run.text, "ok": ok,
                "seconds": round(seconds, 1), **extra}

    return {
        "format": 1,
        "commands": {r.command.name: entry(r.command.run, r.output is not None, r.seconds,
                                           **({"setup": [s.name for s in r.command.setups]} if r.command.setups
                                              else {}))
                     for r in results},
        "setup": {s.setup.name: entry(s.setup.run, s.rc == 0, s.seconds) for s in setups},
        "skipped": [{"test": _rel(s.run.test, repo), "line": s.run.lineno, "run": s.run.text, "reason": s.reason}
                    for s in skipped],
    }


def read_manifest(directory: str) -> dict:
    with open(os.path.join(directory, MANIFEST), encoding="utf-8") as f:
        return json.load(f)


def write_snapshot(directory: str, results: List[Result], skipped: List[Skipped], repo: str,
                   setups: Optional[List[SetupResult]] = None) -> None:
    """Write one file per successful command and MANIFEST.json (which also lists the setup steps run, no file
    each). An existing snapshot there is replaced (only the files its manifest names are removed); a non-empty
    directory that is not a snapshot is refused."""
    if os.path.isdir(directory) and os.listdir(directory):
        try:
            old = read_manifest(directory)
        except (OSError, ValueError):
            raise SystemExit(f"kernel_snapshot: {directory} is not empty and has no {MANIFEST}: refusing to write "
                             f"there") from None
        for name in old.get("commands", {}):
            try:
                os.remove(os.path.join(directory, name))
            except FileNotFoundError:
                pass
    os.makedirs(directory, exist_ok=True)
    for r in results:
        if r.output is not None:
            with open(os.path.join(directory, r.command.name), "w", encoding="utf-8", newline="\n") as f:
                f.write(r.output)
    with open(os.path.join(directory, MANIFEST), "w", encoding="utf-8") as f:
        json.dump(_manifest(results, skipped, repo, setups or []), f, indent=1, sort_keys=True)
        f.write("\n")


def _diff_excerpt(old: str, new: str, name: str, max_lines: int) -> Tuple[List[str], int, int]:
    diff = list(difflib.unified_diff(old.splitlines(), new.splitlines(), f"snapshot/{name}", f"now/{name}",
                                     n=2, lineterm=""))
    plus = sum(1 for d in diff if d.startswith("+") and not d.startswith("+++"))
    minus = sum(1 for d in diff if d.startswith("-") and not d.startswith("---"))
    return diff[:max_lines], plus, minus


def compare(directory: str, results: List[Result], scanned_tests: List[str], repo: str, max_lines: int) -> int:
    """Print the differences between the snapshot in ``directory`` and ``results``; the number of commands that
    differ (NEW, GONE and FAIL included)."""
    try:
        manifest = read_manifest(directory)
    except (OSError, ValueError) as e:
        raise SystemExit(f"kernel_snapshot: {directory}: no readable {MANIFEST} ({e}); write one with `snapshot`")
    old_cmds = manifest.get("commands", {})
    differ = 0
    seen = set()
    for r in results:
        name = r.command.name
        seen.add(name)
        where = f"{_rel(r.command.run.test, repo)}:{r.command.run.lineno}"
        if r.output is None:
            differ += 1
            head, *excerpt = failure_lines(r, repo)
            print(f"FAIL {name} [{where}]: {head}")
            for ln in excerpt:
                print(f"    {ln}")
            continue
        path = os.path.join(directory, name)
        if name not in old_cmds or not os.path.isfile(path):
            differ += 1
            print(f"NEW  {name} [{where}]: not in the snapshot")
            continue
        with open(path, encoding="utf-8") as f:
            old = f.read()
        if old == r.output:
            continue
        differ += 1
        excerpt, plus, minus = _diff_excerpt(old, r.output, name, max_lines)
        note = "" if old_cmds[name].get("run") == r.command.run.text else "; the RUN line changed too"
        print(f"DIFF {name} [{where}]: +{plus} -{minus} lines{note}")
        for d in excerpt:
            print(f"    {d}")
    scanned = {_rel(t, repo) for t in scanned_tests}
    for name, info in sorted(old_cmds.items()):
        if name not in seen and info.get("test") in scanned:
            differ += 1
            print(f"GONE {name} [{info.get('test')}:{info.get('line')}]: in the snapshot, not produced now")
    return differ


# ----------------------------------------------------------------------------------------------------------------
# command line


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="kernel_snapshot.py", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="mode", required=True)

    def common(sp, with_dir=True):
        if with_dir:
            sp.add_argument("dir", help="snapshot directory")
        sp.add_argument("paths", nargs="*", help="lit test files or directories to scan (default: test/lit)")
        sp.add_argument("--jobs", "-j", type=int, default=os.cpu_count() or 1,
                        help="compile commands run at once (default: the number of CPUs, %(default)s here)")
        sp.add_argument("--python", default=sys.executable, help="interpreter that runs the compile tool "
                        "(default: this one)")
        sp.add_argument("--timeout", type=float, default=900, help="seconds per compile command (default 900)")
        sp.add_argument("--quiet", "-q", action="store_true", help="no progress lines and no skipped list")

    common(sub.add_parser("snapshot", help="compile every command and write DIR"))
    c = sub.add_parser("compare", help="compile every command and compare with DIR (exit 1 if anything differs)")
    common(c)
    c.add_argument("--diff-lines", type=int, default=16, help="unified diff lines shown per command (default 16)")
    c.add_argument("--save", metavar="DIR2", default=None, help="also write the recomputed snapshot to DIR2")
    ls = sub.add_parser("list", help="print the commands and the skipped RUN lines; run nothing")
    ls.add_argument("paths", nargs="*", help="lit test files or directories to scan (default: test/lit)")
    return p


def _show(arg: str) -> str:
    return f'"{arg}"' if re.search(r"[\s'\\|&;<>()$`]", arg) and '"' not in arg else shlex.quote(arg)


def main(argv=None) -> int:
    args = _parser().parse_args(argv)
    lit_root = os.path.join(REPO, "test", "lit")
    paths = args.paths or [lit_root]
    try:
        commands, skipped = discover(paths, lit_root)
    except FileNotFoundError as e:
        print(f"kernel_snapshot: no such file or directory: {e}", file=sys.stderr)
        return 2
    tests = sorted({c.run.test for c in commands} | {s.run.test for s in skipped})
    setups = setup_steps(commands)
    if args.mode == "list":  # setup steps (named <test>.<NN>.setup) among the commands, in file and line order
        for c in sorted(commands + setups, key=lambda c: (c.run.test, c.run.index)):
            env = " ".join(f"{k}={_show(v)}" for k, v in c.env.items())
            shown = " ".join(_show(_rel(a, REPO) if a.startswith(REPO) else a) for a in c.argv)
            tool = "%python %s" if isinstance(c, Setup) else "%compile"
            print(f"{c.name}\t{_rel(c.run.test, REPO)}:{c.run.lineno}\t{env + ' ' if env else ''}{tool} {shown}")
        for s in skipped:
            print(f"SKIPPED\t{_rel(s.run.test, REPO)}:{s.run.lineno}\t{s.reason}")
        print(f"{len(commands)} commands, {len(setups)} setup steps, {len(skipped)} RUN lines skipped, "
              f"{len(tests)} test files", file=sys.stderr)
        return 0
    if args.mode == "compare" and args.save and os.path.abspath(args.save) == os.path.abspath(args.dir):
        print("kernel_snapshot: --save must name another directory than the snapshot compared with",
              file=sys.stderr)
        return 2
    if not args.quiet:
        for s in skipped:
            print(f"skipped {_rel(s.run.test, REPO)}:{s.run.lineno}: {s.reason}", file=sys.stderr)
        print(f"{len(commands)} compile commands and {len(setups)} setup steps from {len(tests)} test files "
              f"({len(skipped)} RUN lines skipped), {args.jobs} at a time", file=sys.stderr)
    try:  # durations recorded by an earlier snapshot: start the slowest commands first
        previous = {k: float(v.get("seconds", 0)) for k, v in read_manifest(args.dir)["commands"].items()}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        previous = {}
    t0 = time.monotonic()
    results, setup_results = run_all(commands, args.jobs, args.python, REPO, args.timeout, quiet=args.quiet,
                                     seconds=previous)
    elapsed = time.monotonic() - t0
    failed = [r for r in results if r.output is None]
    if args.mode == "snapshot":
        write_snapshot(args.dir, results, skipped, REPO, setup_results)
        for r in failed:
            head, *excerpt = failure_lines(r, REPO)
            print(f"FAIL {r.command.name} [{_rel(r.command.run.test, REPO)}:{r.command.run.lineno}]: {head}",
                  file=sys.stderr)
            for ln in excerpt:
                print(f"    {ln}", file=sys.stderr)
        print(f"snapshot: {len(results) - len(failed)} of {len(results)} commands written to {args.dir} in "
              f"{elapsed:.1f} s ({len(skipped)} skipped, {len(failed)} failed)", file=sys.stderr)
        return 1 if failed else 0
    differ = compare(args.dir, results, tests, REPO, args.diff_lines)
    if args.save:
        write_snapshot(args.save, results, skipped, REPO, setup_results)
    print(f"compare: {differ} of {len(results)} commands differ from {args.dir} ({len(skipped)} skipped, "
          f"{elapsed:.1f} s)")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
