"""The code generator: one ``@triton_dist.jit`` persistent kernel per compiled model step.

The generic part (epoch, fetch, dependency wait, release, profiling) lives in :mod:`.device`; the generator emits
only the dispatch, one branch per distinct (device function, constexprs) pair of the step's ops::

    @triton_dist.jit
    def MEGA_TRITON_KERNEL(queue_ptr, queue_len_ptr, op_tbl_ptr, deps_ptr, scoreboard_ptr, counter_ptr,
                           error_ptr, profile_ptr, QUEUE_CAP, ROW, NUM_ARGS, DYNAMIC, STRICT, PROFILE):
        e = step epoch
        for each task row of this program's queue (static) / each ticket (dynamic):
            wait until every dependency run holds e in the scoreboard   (STRICT: check, record an error, stop)
            if branch == 0: tasks.linear.linear_task(args, tile, K=4096, N=6144, ...)
            elif branch == 1: ...
            release(task, e)
        finish_step(e)

An op with ``waits_inside`` receives the wait instead (``fn(args, tile, step, deps_ptr, dep_first, dep_count,
scoreboard_ptr, ...)``; it calls :func:`.device.wait_deps` itself, after issuing loads that do not depend on other
tasks, e.g. a GEMV's first weight chunk); in strict mode the generated code has checked the dependencies already
and passes ``dep_count = 0``.

Queue rows are int32 ``[branch, op, tile, dep_first, dep_count, task, 0, 0]``; with ``ROW = ROW_PREFETCH`` (a
builder that planned L2 prefetches for some slots) each row also holds two prefetch ranges ``(address low, address
high, bytes)`` in slots 8..13 (bytes 0: none), which the worker issues as soon as it has read the row, before the
task's wait (:func:`.device.slot_prefetch`). The source is written to the cache
directory (``TRITON_DIST_CACHE_DIR`` or ``~/.cache/triton_dist``) under ``mega/`` and imported, since Triton reads a
kernel's source from its file.
"""
from __future__ import annotations

import hashlib
import importlib.util
import os
import sys
from typing import Any, Dict, List, Sequence, Tuple

import torch
import triton.language as tl

from .task import Op

__all__ = ["ROW", "ROW_PREFETCH", "prefetch_slots", "WAIT_TASK_TYPE", "branch_key", "render_constexpr", "generate_source", "load_kernel"]

ROW = 8
#: Queue row width with the two prefetch ranges (slots 8..13, padded to 16).
ROW_PREFETCH = 16


def prefetch_slots(ranges) -> List[int]:
    """The int32 words of a queue row's prefetch slots 8..13 for up to two ``(address, bytes)`` ranges: ``(address
    low, address high, bytes)`` each (the low word as a signed int32), zeros where there is no range; what
    :func:`.device.slot_prefetch` reads."""
    ranges = list(ranges)
    if len(ranges) > 2:
        raise ValueError(f"a queue row holds at most two prefetch ranges, got {len(ranges)}")
    words = []
    for addr, nbytes in ranges:
        lo = addr & 0xFFFFFFFF
        words += [lo - (1 << 32) if lo >= 1 << 31 else lo, addr >> 32, nbytes]
    return words + [0] * (6 - len(words))
#: Profiler task type of the dependency waits; branch ``b`` records as ``b + 1``.
WAIT_TASK_TYPE = 0

_TORCH_TO_TL = {
    torch.float32: "float32", torch.float16: "float16", torch.bfloat16: "bfloat16", torch.int32: "int32",
    torch.int64: "int64", torch.int8: "int8", torch.uint8: "uint8", torch.int16: "int16",
    torch.float8_e4m3fn: "float8e4nv", torch.float8_e5m2: "float8e5",
}


_TL_NAMES = ("float32", "float16", "bfloat16", "int32", "int64", "int8", "int16", "uint8", "uint32", "uint64",
             "float8e4nv", "float8e5", "float64", "int1")


def _tl_dtype_name(dt) -> str:
    for name in _TL_NAMES:
        if getattr(tl, name) == dt:
            return name
    raise TypeError(f"no triton.language name for dtype {dt}")


def render_constexpr(name: str, value: Any) -> str:
    """Python source of a constexpr value: ints, floats, bools, strings, torch / Triton dtypes."""
    if isinstance(value, bool) or isinstance(value, int):
        return repr(value)
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            raise ValueError(f"constexpr {name}={value!r}: must be finite")
        return repr(value)
    if isinstance(value, str):
        return repr(value)
    if isinstance(value, torch.dtype):
        if value not in _TORCH_TO_TL:
            raise TypeError(f"constexpr {name}: dtype {value} has no Triton equivalent here")
        return "tl." + _TORCH_TO_TL[value]
    if isinstance(value, tl.dtype):
        return "tl." + _tl_dtype_name(value)
    raise TypeError(f"constexpr {name}={value!r}: unsupported type {type(value).__name__} "
                    f"(int, float, bool, str or dtype)")


def _fn_location(kernel) -> Tuple[str, str]:
    fn = getattr(kernel, "fn", kernel)
    mod, name = getattr(fn, "__module__", None), getattr(fn, "__name__", None)
    if not mod or not name or mod == "__main__" or getattr(sys.modules.get(mod), name, None) is not kernel:
        raise ValueError(f"a task's device function must be a module-level @triton_dist.jit function of an importable "
                         f"module, got {kernel!r} ({mod}.{name})")
    return mod, name


def branch_key(op: Op) -> Tuple:
    """``(module, function, constexprs as source, waits_inside)``: ops with equal keys share a branch."""
    mod, name = _fn_location(op.kernel)
    return (mod, name, tuple(sorted((k, render_constexpr(k, v)) for k, v in op.constexprs.items())),
            bool(op.waits_inside))


def generate_source(branches: Sequence[Tuple], branch_names: Sequence[str]) -> str:
    """The kernel module's source for ``branches`` (keys from :func:`branch_key`, in branch order)."""
    mods: Dict[str, str] = {}
    for mod, _, _, _ in branches:
        mods.setdefault(mod, f"_m{len(mods)}")
    inside = [b for b, key in enumerate(branches) if key[3]]
    outer_wait = " & ".join(f"(branch != {b})" for b in inside) or "True"
    lines: List[str] = [
        '"""Generated by triton_dist.mega_triton_kernel (do not edit). Branches:',
        *[f"  {b}: {n}" for b, n in enumerate(branch_names)],
        '"""',
        "import triton.language as tl",
        "import triton_dist",
        "import triton_dist.language as dl",
        "from triton_dist.language.profiler import Profiler",
        "from triton_dist.mega_triton_kernel.core import device as _dev",
        *[f"import {m} as {a}" for m, a in mods.items()],
        "",
        "",
        "@triton_dist.jit",
        "def MEGA_TRITON_KERNEL(queue_ptr, queue_len_ptr, op_tbl_ptr, deps_ptr, scoreboard_ptr, counter_ptr, error_ptr,",
        "                       profile_ptr, QUEUE_CAP: tl.constexpr, ROW: tl.constexpr, NUM_ARGS: tl.constexpr,",
        "                       DYNAMIC: tl.constexpr, STRICT: tl.constexpr, PROFILE: tl.constexpr):",
        "    pid = tl.program_id(0)",
        "    e = _dev.step_epoch(counter_ptr)",
        "    prof = Profiler.create(profile_ptr, 0, 1, True, ENABLE_PROFILING=PROFILE)",
        "    i = 0",
        "    row = _dev.fetch(queue_ptr, queue_len_ptr, counter_ptr, pid, i, QUEUE_CAP, DYNAMIC)",
        "    while row >= 0:",
        "        q = queue_ptr + row * ROW",
        "        branch = tl.load(q)",
        "        op = tl.load(q + 1)",
        "        tile = tl.load(q + 2)",
        "        dep_first = tl.load(q + 3)",
        "        dep_count = tl.load(q + 4)",
        "        task = tl.load(q + 5)",
        "        if ROW > 8:",
        "            _dev.slot_prefetch(q + 8)",
        "        args = op_tbl_ptr + op.to(tl.int64) * NUM_ARGS",
        "        ok = True",
        "        if STRICT:",
        "            missing = _dev.check_deps(deps_ptr, dep_first, dep_count, scoreboard_ptr, e, 128)",
        "            ok = missing < 0",
        "            if missing >= 0:",
        "                tl.store(error_ptr + 1, missing)",
        "                tl.store(error_ptr + 2, e)",
        "                tl.store(error_ptr, task + 1)",
        f"        elif {outer_wait}:",
        f"            prof = prof.record(True, {WAIT_TASK_TYPE})",
        "            tok = _dev.wait_deps(deps_ptr, dep_first, dep_count, scoreboard_ptr, e)",
        "            args = dl.consume_token(args, tok)",
        f"            prof = prof.record(False, {WAIT_TASK_TYPE})",
        "        if ok:",
        "            prof = prof.record(True, branch + 1)",
    ]
    for b, (mod, name, consts, waits_inside) in enumerate(branches):
        kw = "".join(f", {k}={v}" for k, v in consts)
        wait_args = ", deps_ptr, dep_first, dep_count * (1 - STRICT), scoreboard_ptr" if waits_inside else ""
        lines.append(f"            {'if' if b == 0 else 'elif'} branch == {b}:")
        lines.append(f"                {mods[mod]}.{name}(args, tile, e{wait_args}{kw})")
    lines += [
        "            prof = prof.record(False, branch + 1)",
        "            _dev.release(scoreboard_ptr, task, e)",
        "            i += 1",
        "            row = _dev.fetch(queue_ptr, queue_len_ptr, counter_ptr, pid, i, QUEUE_CAP, DYNAMIC)",
        "        else:",
        "            row = -1",
        "    _dev.finish_step(counter_ptr, e)",
        "",
    ]
    return "\n".join(lines)


def _cache_dir() -> str:
    base = os.environ.get("TRITON_DIST_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "triton_dist")
    path = os.path.join(base, "mega")
    os.makedirs(path, exist_ok=True)
    return path


def load_kernel(source: str):
    """Write ``source`` to the cache (named by its hash) and import it; returns ``(kernel, path)``."""
    digest = hashlib.sha256(source.encode()).hexdigest()[:20]
    name = f"triton_dist_mega_{digest}"
    path = os.path.join(_cache_dir(), name + ".py")
    if not os.path.exists(path) or open(path).read() != source:
        tmp = f"{path}.{os.getpid()}.tmp"
        with open(tmp, "w") as f:
            f.write(source)
        os.replace(tmp, path)
    if name in sys.modules:
        return sys.modules[name].MEGA_TRITON_KERNEL, path
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module.MEGA_TRITON_KERNEL, path
