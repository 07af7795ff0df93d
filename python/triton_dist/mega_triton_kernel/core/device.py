"""Device side of the generated mega kernel: the step epoch, the scoreboard and the task fetch, shared by every
generated kernel (the generator emits only the dispatch over the branches).

Scoreboard (int32 ``[num_tasks]``): task ``i`` of step ``e`` is released by storing ``e`` into slot ``i``
(release, GPU scope, by one thread after a CTA barrier, so every store of the task's program happens before it); a
waiter spins until the slot equals its own ``e`` (acquire). The epoch lives in device memory (``counter[0]``:
steps completed; advanced by the last program of a step), so a step needs no host reset and can be captured in a
CUDA graph: slots of step ``e - 1`` simply hold an older value.

Counter (int32 ``[4]``): ``[0]`` steps completed, ``[1]`` programs of the running step that finished, ``[2]`` the
dynamic queue's ticket (reset by the step's last program), ``[3]`` unused.
Error record (int32 ``[4]``, strict mode): ``[0] = 1 + task`` that found a dependency unmet, ``[1]`` that dependency,
``[2]`` the step.
"""
from __future__ import annotations

import triton.language as tl

import triton_dist
import triton_dist.language as dl

__all__ = ["arg", "step_epoch", "finish_step", "fetch", "wait_deps", "check_deps", "release", "slot_prefetch"]


@triton_dist.jit
def arg(args, i: tl.constexpr, DT: tl.constexpr):
    """The address of the op's tensor ``i`` (``args`` row of the op table) as a pointer to ``DT``, known to be
    16-byte aligned (the builder refuses other tensors): without that hint the compiler cannot vectorise any access
    through it (a 16-row bf16 GEMV tile measured 2-byte loads)."""
    return tl.multiple_of(tl.load(args + i).to(tl.pointer_type(DT)), 16)


@triton_dist.jit
def step_epoch(counter_ptr):
    """This step's epoch ``counter[0] + 1`` (the same in every program: the counter only moves once all of them have
    called :func:`finish_step`, and the next step starts after this one ended)."""
    return tl.atomic_add(counter_ptr, 0, sem="relaxed") + 1


@triton_dist.jit
def finish_step(counter_ptr, e):
    """Last statement of every program: the last program of the step resets the ticket and publishes ``e``."""
    arrived = tl.atomic_add(counter_ptr + 1, 1, sem="acq_rel")
    if arrived == tl.num_programs(0) - 1:
        tl.atomic_xchg(counter_ptr + 1, 0, sem="relaxed")
        tl.atomic_xchg(counter_ptr + 2, 0, sem="relaxed")
        tl.atomic_xchg(counter_ptr, e, sem="release")


@triton_dist.jit
def fetch(queue_ptr, queue_len_ptr, counter_ptr, pid, i, QUEUE_CAP: tl.constexpr, DYNAMIC: tl.constexpr):
    """Row index of this program's ``i``-th task, or -1 when its queue is done. Static: row ``pid * QUEUE_CAP + i``
    of the queue while ``i < queue_len[pid]``. Dynamic: the next ticket of ``counter[2]`` while below
    ``queue_len[0]`` (one queue in topological order, taken by all programs)."""
    if DYNAMIC:
        t = tl.atomic_add(counter_ptr + 2, 1, sem="relaxed")
        n = tl.load(queue_len_ptr)
        row = tl.where(t < n, t, -1)
    else:
        n = tl.load(queue_len_ptr + pid)
        row = tl.where(i < n, pid * QUEUE_CAP + i, -1)
    return row


@triton_dist.jit
def wait_deps(deps_ptr, first, count, scoreboard_ptr, e):
    """Spin until every task of the dependency runs ``deps[first : first + count]`` (pairs ``(task, n)``) has released
    step ``e``; returns the token of the last wait (0 when there is none)."""
    tok = 0
    for j in range(first, first + count):
        t = tl.load(deps_ptr + 2 * j)
        n = tl.load(deps_ptr + 2 * j + 1)
        tok = dl.wait(scoreboard_ptr + t, n, "gpu", "acquire", e)
    return tok


@triton_dist.jit
def check_deps(deps_ptr, first, count, scoreboard_ptr, e, BLOCK: tl.constexpr):
    """Strict mode (the simulator, or a debugging launch with one program): no spinning; returns the first task of
    the runs that has not released step ``e``, or -1 when all have."""
    missing = -1
    for j in range(first, first + count):
        t = tl.load(deps_ptr + 2 * j)
        n = tl.load(deps_ptr + 2 * j + 1)
        for k0 in range(0, n, BLOCK):
            offs = k0 + tl.arange(0, BLOCK)
            f = tl.load(scoreboard_ptr + t + offs, mask=offs < n, other=0, volatile=True)
            bad = tl.min(tl.where((offs < n) & (f != e), t + offs, 2147483647), axis=0)
            if missing < 0 and bad != 2147483647:
                missing = bad
    return missing


@triton_dist.jit
def release(scoreboard_ptr, task, e):
    """Publish that ``task`` finished step ``e``: CTA barrier, then one release store (GPU scope)."""
    tl.debug_barrier()
    tl.atomic_xchg(scoreboard_ptr + task, e, sem="release", scope="gpu")


@triton_dist.jit
def slot_prefetch(p):
    """Ask L2 for the (up to two) ranges of a queue row's prefetch slots ``p[0:6]``: ``(address low, address high,
    bytes)`` each, bytes 0 for none (``dl.prefetch_l2``: one bulk prefetch per range, by the program's first
    thread; a hint, ordered with nothing). The builder plans them (``ModelBuilder(gemv_early_prefetch_bytes=...)``)."""
    for r in tl.static_range(2):
        lo = tl.load(p + 3 * r).to(tl.int64) & 0xFFFFFFFF
        hi = tl.load(p + 3 * r + 1).to(tl.int64)
        nbytes = tl.load(p + 3 * r + 2)
        dl.prefetch_l2(((hi << 32) | lo).to(tl.pointer_type(tl.int8)), nbytes, mask=nbytes > 0)
