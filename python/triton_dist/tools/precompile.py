"""Compile the kernels a job recorded, in parallel, into Triton's cache, before the job runs again.

    TRITON_DIST_COMPILE_RECORD=/tmp/rec torchrun --nproc_per_node 2 job.py     # once: record what it compiles
    python -m triton_dist.tools.precompile /tmp/rec --jobs 14                   # later / elsewhere: fill the cache
    torchrun --nproc_per_node 2 job.py                                          # every kernel is a cache hit

Each recorded request (``runtime.compile_record``: kernel, signature, constexprs, attributes, target, options) is
compiled as the JIT would compile it on this machine -- the kernel's source as it is now, this machine's SHMEM
library at the recorded level -- into ``TRITON_CACHE_DIR`` (Triton's default cache when unset), ``--jobs`` processes
at a time; no GPU is needed. A request compiled before is a cache hit (fast). Requests recorded as unreplayable
(a kernel defined inside a function, a constexpr value that cannot be rebuilt) are counted and skipped.

``--world N`` compiles the requests of kernels with a ``WORLD`` constexpr for ``N`` ranks instead of the recorded
number (a guess for a run at another world size: kernels whose other specialisations depend on it too are compiled in
vain and the job compiles them itself); requests of kernels without one are skipped.

Prints one line per failed request (``precompile: FAILED module:kernel: error``) and a summary line
(``precompile: N requests: C compiled, F failed, U unreplayable in S s (J processes)``). Exit status 0 when none
failed, 1 when some did (the job then compiles those itself, as without this tool), 2 for bad arguments.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from typing import List, Optional

from ..runtime import compile_record


def _compile_one(rec: dict, world: Optional[int] = None) -> Optional[str]:
    """Worker: compile one request; None (compiled), "skip" (no WORLD constexpr to set), or the error as one line."""
    try:
        return "skip" if compile_record.compile_request(rec, world) is None else None
    except Exception as exc:  # reported per request: one kernel failing must not stop the others
        text = " ".join(str(exc).split())
        return f"{type(exc).__name__}: {text[:300]}"


def _init_worker(paths: List[str]) -> None:
    sys.path[:0] = paths
    import triton_dist  # noqa: F401  (the link / init hooks every compile goes through)


def _name(rec: dict) -> str:
    k = rec["kernel"]
    return f"{k['module']}:{k['qualname']}"


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m triton_dist.tools.precompile", description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("records", nargs="+", help="record directories (their *.jsonl) or files")
    ap.add_argument("--jobs", "-j", type=int, default=max(1, (os.cpu_count() or 2) - 1),
                    help="compiling processes (default: CPU count - 1)")
    ap.add_argument("--path", action="append", default=[],
                    help="a directory to import kernels from, before sys.path (repeatable)")
    ap.add_argument("--world", type=int, default=None,
                    help="compile the requests of kernels with a WORLD constexpr for this many ranks instead (a guess "
                         "for a run at another world size than the recorded one; the others are skipped)")
    ap.add_argument("--list", action="store_true", help="print the requests and compile nothing")
    a = ap.parse_args(argv)
    if a.jobs < 1:
        ap.error(f"--jobs must be >= 1, got {a.jobs}")
    if a.world is not None and a.world < 1:
        ap.error(f"--world must be >= 1, got {a.world}")
    try:
        requests, unreplayable = compile_record.load_requests(a.records)
    except (OSError, ValueError) as exc:
        ap.error(str(exc))
    if a.list:
        for rec in requests:
            print(_name(rec), rec["target"], rec["signature"])
        for rec in unreplayable:
            print(_name(rec), "unreplayable:", rec["unrecordable"])
        return 0
    t0 = time.time()
    paths = [os.path.abspath(p) for p in a.path]
    failed = skipped = 0
    if requests:
        jobs = min(a.jobs, len(requests))
        with ProcessPoolExecutor(max_workers=jobs, initializer=_init_worker, initargs=(paths, )) as pool:
            for rec, err in zip(requests, pool.map(_compile_one, requests, [a.world] * len(requests))):
                if err == "skip":
                    skipped += 1
                elif err is not None:
                    failed += 1
                    print(f"precompile: FAILED {_name(rec)}: {err}", flush=True)
    else:
        jobs = 0
    at = "" if a.world is None else f" for WORLD={a.world} ({skipped} without a WORLD constexpr skipped)"
    print(f"precompile: {len(requests)} requests{at}: {len(requests) - failed - skipped} compiled, {failed} failed, "
          f"{len(unreplayable)} unreplayable in {time.time() - t0:.1f} s ({jobs} processes)", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
