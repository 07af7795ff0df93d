"""Run a function on N simulator rank processes (tests, examples) and run interpreted grids concurrently.

* :func:`run_ranks` — spawn ``world_size`` processes, run ``fn(*args)`` in each, return the per-rank results.
* :class:`RankPool` — the same, but the processes (torch/triton imported, process group and heap initialised) stay
  alive between calls: startup costs seconds per process on a small CI machine, so run many checks per spawn.
* :func:`init_sim_distributed` — what a rank process does to join (gloo process group + :class:`SimBackend`);
  idempotent, so ``triton_dist.utils.initialize_distributed()`` may be called afterwards (or instead, with
  ``init=False``).
* :func:`run_grid` — launch an interpreted kernel with its programs running concurrently (threads), like a
  cooperative launch, so programs that wait on each other (or on peers' programs) cannot deadlock.

Under ``torchrun --nproc_per_node N script.py`` none of the launcher is needed: torchrun sets the variables and
``initialize_distributed()`` (or :func:`init_sim_distributed`) does the rest.
"""
from __future__ import annotations

import glob
import os
import pickle
import socket
import threading
import time
import traceback
from typing import Any, Callable, Dict, List, Optional

DEFAULT_TASK_TIMEOUT_S = 120.0


class RankError(RuntimeError):
    """A function raised on one or more rank processes; the message holds each child's traceback text."""

    def __init__(self, message: str, failures: Dict[int, tuple]):
        super().__init__(message)
        #: rank -> (exception type name, message, traceback text)
        self.failures = failures


class RankTimeout(TimeoutError):
    """Rank processes did not finish within the timeout; they were killed."""


# ----------------------------------------------------------------------------------------------------------------
# inside a rank process
# ----------------------------------------------------------------------------------------------------------------

def init_sim_distributed(timeout_s: float = 300.0):
    """Join the simulator from torchrun-style variables (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT,
    LOCAL_RANK, LOCAL_WORLD_SIZE): create the gloo world group if none exists, initialise :class:`SimBackend`,
    and return it. Idempotent."""
    import datetime

    import torch.distributed as dist

    from .backend import SimBackend

    if not dist.is_initialized():
        dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=timeout_s))
    backend = SimBackend()
    backend.init(None)
    return backend


def _exit_with_parent(poll_s: float = 1.0) -> None:
    """Start a daemon thread that ends this rank process once its parent is gone (re-parented: ``getppid``
    changed). A parent killed mid-task (an OOM-killed pytest worker, 2026-12-06) otherwise left its rank processes
    running the task -- spinning in a simulated wait until its timeout -- with nobody to read their result."""
    parent = os.getppid()

    def watch():
        while True:
            time.sleep(poll_s)
            if os.getppid() != parent:
                os._exit(3)

    threading.Thread(target=watch, name="triton-dist-sim-parent-watch", daemon=True).start()


def _worker_main(rank: int, world_size: int, env: Dict[str, str], conn, init: bool) -> None:
    os.environ.update(env)
    _exit_with_parent()
    try:
        import torch

        torch.set_num_threads(1)
        backend = init_sim_distributed() if init else None
    except BaseException as exc:  # noqa: BLE001
        conn.send_bytes(pickle.dumps(("init_err", type(exc).__name__, str(exc), traceback.format_exc())))
        conn.close()
        return
    conn.send_bytes(pickle.dumps(("ready", None, None, None)))
    while True:
        try:
            msg = conn.recv_bytes()
        except (EOFError, OSError):
            break
        kind, payload = pickle.loads(msg)
        if kind == "stop":
            break
        try:
            fn, args, kwargs = pickle.loads(payload)
            result = fn(*args, **kwargs)
            try:
                out = pickle.dumps(("ok", result, None, None))
            except Exception as exc:  # noqa: BLE001
                raise TypeError(f"rank {rank}: the return value of {getattr(fn, '__name__', fn)} is not "
                                f"picklable: {exc}") from exc
        except BaseException as exc:  # noqa: BLE001
            out = pickle.dumps(("err", type(exc).__name__, str(exc), traceback.format_exc()))
        if init and kind == "task_reset":
            try:
                backend.reset()
            except BaseException as exc:  # noqa: BLE001
                done = pickle.loads(out)
                if done[0] == "err":  # keep the task's own error (e.g. a peer died: the reset's barrier fails too)
                    out = pickle.dumps(("err", done[1], done[2], f"{done[3]}\nreset after task failed: {exc}\n"
                                        f"{traceback.format_exc()}"))
                else:
                    out = pickle.dumps(("err", type(exc).__name__, f"reset after task failed: {exc}",
                                        traceback.format_exc()))
        conn.send_bytes(out)
    try:
        if backend is not None:
            backend.finalize()
        import torch.distributed as dist

        if dist.is_initialized():
            dist.destroy_process_group()
    finally:
        conn.close()


# ----------------------------------------------------------------------------------------------------------------
# in the launching process
# ----------------------------------------------------------------------------------------------------------------

def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago (for MASTER_PORT; ``triton_dist.utils`` uses it too)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


_env_lock = threading.Lock()


class RankPool:
    """``world_size`` live rank processes (spawn start method) that run submitted functions.

    Each child gets RANK/LOCAL_RANK/WORLD_SIZE/LOCAL_WORLD_SIZE/MASTER_ADDR=127.0.0.1/MASTER_PORT/
    TRITON_DIST_BACKEND=sim/TRITON_INTERPRET=1 (plus ``env``) in its environment from birth, i.e. before any user
    module is imported, so module-level kernels are interpreted. With ``init=True`` each child joins the simulator
    (:func:`init_sim_distributed`) once; after every successful :meth:`run` the heap is reset (all allocations
    freed). A failed or timed-out run kills the processes; the next :meth:`run` starts fresh ones.
    """

    def __init__(self, world_size: int, *, local_world_size: Optional[int] = None, env: Optional[Dict] = None,
                 init: bool = True, start_timeout: float = 120.0, reset_between_runs: bool = True):
        if world_size < 1:
            raise ValueError(f"world_size must be >= 1, got {world_size}")
        self.world_size = world_size
        self.local_world_size = local_world_size or world_size
        if world_size % self.local_world_size:
            raise ValueError(f"world_size={world_size} is not a multiple of local_world_size={self.local_world_size}")
        self.env = {k: str(v) for k, v in (env or {}).items()}
        self.init = init
        self.reset_between_runs = reset_between_runs
        self.start_timeout = start_timeout
        self._procs: List = []
        self._conns: List = []
        self._port: Optional[int] = None

    # -------------------------------------------------------------- processes
    def _child_env(self, rank: int) -> Dict[str, str]:
        env = {
            "RANK": str(rank), "LOCAL_RANK": str(rank % self.local_world_size), "WORLD_SIZE": str(self.world_size),
            "LOCAL_WORLD_SIZE": str(self.local_world_size), "GROUP_RANK": str(rank // self.local_world_size),
            "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(self._port), "TRITON_DIST_BACKEND": "sim",
            "TRITON_INTERPRET": "1", "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1"),
        }
        env.update(self.env)
        return env

    def start(self) -> "RankPool":
        import multiprocessing as mp

        if self._procs:
            return self
        ctx = mp.get_context("spawn")
        self._port = free_port()
        try:
            for rank in range(self.world_size):
                parent_conn, child_conn = ctx.Pipe(duplex=True)
                env = self._child_env(rank)
                p = ctx.Process(target=_worker_main, args=(rank, self.world_size, env, child_conn, self.init),
                                name=f"triton_dist-sim-rank{rank}", daemon=True)
                # the child inherits os.environ at exec: set it there so even a re-imported __main__ sees it
                with _env_lock:
                    saved = {k: os.environ.get(k) for k in env}
                    os.environ.update(env)
                    try:
                        p.start()
                    finally:
                        for k, v in saved.items():
                            if v is None:
                                os.environ.pop(k, None)
                            else:
                                os.environ[k] = v
                child_conn.close()
                self._procs.append(p)
                self._conns.append(parent_conn)
            replies = self._collect(self.start_timeout, "start-up (import + process group + heap init)")
        except BaseException:
            self.kill()
            raise
        bad = {r: rep[1:] for r, rep in replies.items() if rep[0] != "ready"}
        if bad:
            self.kill()
            raise RankError(_format_failures("rank process start-up failed", bad), bad)
        return self

    def _collect(self, timeout: float, what: str) -> Dict[int, tuple]:
        from multiprocessing.connection import wait

        deadline = time.monotonic() + timeout
        replies: Dict[int, tuple] = {}
        pending = dict(enumerate(self._conns))
        while pending:
            left = deadline - time.monotonic()
            if left <= 0:
                missing = sorted(pending)
                self.kill()
                raise RankTimeout(f"triton_dist sim: rank(s) {missing} did not finish {what} within {timeout:g} s; "
                                  f"all rank processes were killed (replies so far from {sorted(replies)})")
            ready = wait(list(pending.values()) + [self._procs[r].sentinel for r in pending], timeout=min(left, 1.0))
            for r, c in list(pending.items()):
                eof = False
                if c in ready:
                    try:
                        replies[r] = pickle.loads(c.recv_bytes())
                        del pending[r]
                        continue
                    except (EOFError, OSError):
                        eof = True  # nothing left to read: poll() stays true on a closed pipe
                if not self._procs[r].is_alive() and (eof or not c.poll()):
                    code = self._procs[r].exitcode
                    del pending[r]
                    replies[r] = ("err", "ProcessDied", f"rank {r} process exited with code {code} during {what}",
                                  "")
                    # the others may now wait forever on the dead rank: give them a short grace period only
                    deadline = min(deadline, time.monotonic() + 5.0)
        return replies

    def kill(self) -> None:
        """Kill all rank processes, reap them, and remove any heap segment they left (none normally)."""
        for p in self._procs:
            if p.is_alive():
                p.kill()
        for p in self._procs:
            p.join(timeout=10)
        for c in self._conns:
            c.close()
        self._procs, self._conns = [], []
        self._cleanup_segments()

    def _cleanup_segments(self) -> None:
        if self._port is None:
            return
        from .heap import segment_dirs, segment_prefix

        for d in segment_dirs():
            for path in glob.glob(os.path.join(d, segment_prefix(self._port) + "*")):
                try:
                    os.unlink(path)
                except OSError:
                    pass

    def close(self, grace_s: float = 20.0) -> None:
        """Stop the rank processes cleanly (finalize + destroy the process group); kill those still running after
        ``grace_s`` seconds."""
        for c in self._conns:
            try:
                c.send_bytes(pickle.dumps(("stop", None)))
            except OSError:
                pass
        deadline = time.monotonic() + grace_s
        for p in self._procs:
            p.join(timeout=max(0.0, deadline - time.monotonic()))
        self.kill()

    def __enter__(self) -> "RankPool":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()

    # -------------------------------------------------------------- tasks
    def run(self, fn: Callable, *args, timeout: float = DEFAULT_TASK_TIMEOUT_S, **kwargs) -> List[Any]:
        """Run ``fn(*args, **kwargs)`` on every rank; return the list of results (index = rank).

        ``fn`` must be importable by reference (a module-level function). Raises :class:`RankError` (with the
        rank and the child's traceback) if any rank raised, :class:`RankTimeout` after ``timeout`` seconds."""
        self.start()
        payload = pickle.dumps((fn, args, kwargs))
        kind = "task_reset" if (self.init and self.reset_between_runs) else "task"
        for c in self._conns:
            c.send_bytes(pickle.dumps((kind, payload)))
        replies = self._collect(timeout, f"{getattr(fn, '__qualname__', fn)}")
        bad = {r: rep[1:] for r, rep in replies.items() if rep[0] != "ok"}
        if bad:
            # every rank answered and reset its heap: the processes stay usable; otherwise start afresh next time
            if kind != "task_reset" or any(rep[0] not in ("ok", "err") or rep[1] == "ProcessDied"
                                           for rep in replies.values()) or any(
                                               "reset after task failed" in " ".join(map(str, rep))
                                               for rep in bad.values()):
                self.kill()
            raise RankError(_format_failures(f"{getattr(fn, '__qualname__', fn)} failed", bad), bad)
        return [replies[r][1] for r in range(self.world_size)]


def _format_failures(title: str, failures: Dict[int, tuple]) -> str:
    parts = [f"triton_dist sim: {title} on rank(s) {sorted(failures)}"]
    for r in sorted(failures):
        typ, msg, tb = failures[r]
        parts.append(f"--- rank {r}: {typ}: {msg}")
        if tb:
            parts.append(tb.rstrip())
    return "\n".join(parts)


def run_ranks(fn: Callable, world_size: int, *args, timeout: float = DEFAULT_TASK_TIMEOUT_S,
              env: Optional[Dict] = None, init: bool = True, local_world_size: Optional[int] = None,
              **kwargs) -> List[Any]:
    """Spawn ``world_size`` sim rank processes, run ``fn(*args, **kwargs)`` on each, return their results
    (index = rank), and tear everything down (no process or segment survives, also on error/timeout).

    ``init=True``: each rank joins the simulator first (gloo group + SimBackend); ``init=False``: ``fn`` does it,
    e.g. with ``triton_dist.utils.initialize_distributed()``."""
    pool = RankPool(world_size, local_world_size=local_world_size, env=env, init=init,
                    start_timeout=max(timeout, 60.0), reset_between_runs=False)
    try:
        return pool.run(fn, *args, timeout=timeout, **kwargs)
    finally:
        pool.close()


# ----------------------------------------------------------------------------------------------------------------
# concurrent interpreted grids
# ----------------------------------------------------------------------------------------------------------------

def max_concurrent_programs() -> int:
    """How many programs of one launch may be alive at once (``TRITON_DIST_SIM_MAX_PROGRAMS``, default 1024)."""
    return int(os.environ.get("TRITON_DIST_SIM_MAX_PROGRAMS", "1024"))


def run_grid(kernel, grid, *args, **kwargs):
    """Launch the interpreted kernel ``kernel`` (a ``triton.runtime.interpreter.InterpretedFunction``, i.e. what
    ``triton.jit`` returns under ``TRITON_INTERPRET=1``) over ``grid`` with every program in its own thread.

    Semantics: like a cooperative GPU launch -- up to ``max_concurrent_programs()`` programs are co-resident,
    started in grid order; a program that spins on a signal (a sim wait) sleeps between polls, letting the others
    run. Program ids are thread-local. If a program raises, the others' sim waits are aborted (``SimAborted``) and
    the first error is raised as ``InterpreterError`` (as the stock executor does). Returns None.

    Limits: programs interleave under the GIL (no parallel speed-up); a kernel that spins in plain Triton code
    (a ``while`` on ``tl.load``/``tl.atomic_*``) instead of a sim wait op still progresses (the GIL switches threads
    every few ms) but slowly and without a timeout; one launch at a time per process (program ids are
    thread-local, the grid size is shared)."""
    from . import context as _context
    from .interpreter import ConcurrentGridExecutor, prewarm_interpreter

    fn = kernel.rewrite()
    prewarm_interpreter(kernel.fn)  # first rewrites mutate module dicts: not while programs run as threads
    executor = ConcurrentGridExecutor(fn, kernel.arg_names, grid, kernel.pre_run_hooks)
    executor.max_concurrent = max_concurrent_programs()
    ctx = _context.current() if _context.is_active() else None
    if ctx is not None:
        ctx.abort_event.clear()
        executor.on_program_error = lambda exc: ctx.abort_event.set()
    try:
        return executor(*args, **kwargs)
    finally:
        if ctx is not None:
            ctx.abort_event.clear()


__all__ = ["run_ranks", "RankPool", "RankError", "RankTimeout", "init_sim_distributed", "run_grid",
           "max_concurrent_programs", "free_port"]
