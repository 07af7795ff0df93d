"""Profiling of the decode kernels (``flash_decode(..., profiler_buffer=buf)``; docs/attention.md, "Profiling the
decode"): under the Triton interpreter a profiled call gives exactly the unprofiled call's ``out`` / ``lse`` and fills
the buffer with one track per program of each launch (group 0: the split kernel's ``prologue``, ``tokens``,
``store``, in that order; group 1: one ``merge`` per merge program, after every split ended); one split (no merge
launch) fills group 0 alone. The buffer checks before any launch, and the slot count."""
import pytest
import torch
from _subprocess_runs import assert_script_says

_PROFILE_SCRIPT = r"""
import os
os.environ["TRITON_INTERPRET"] = "1"
import torch
from triton_dist import profiler_layout as layout
from triton_dist.kernels.flash_decode import PROFILE_GROUPS, RECORDS_PER_TRACK, TASKS
from triton_dist.ops.attention import decode_profile_slots, flash_decode
from triton_dist.tools.profiler import alloc_profiler_buffer, parse_to_tracks, reset_profiler_buffer

fails = []
torch.manual_seed(0)
B, Hq, Hkv, D, page, max_pages = 2, 4, 2, 64, 4, 4
lens = [13, 0]  # request 1 has no token: its splits record an empty token loop and store nothing
k = torch.randn(B * max_pages, page, Hkv, D).bfloat16()
v = torch.randn_like(k)
bt = torch.randperm(B * max_pages).to(torch.int32).reshape(B, max_pages)
sl = torch.tensor(lens, dtype=torch.int32)
q = torch.randn(B, Hq, D).bfloat16()
for ns in (3, 1):
    slots = decode_profile_slots(q, k, bt, num_splits=ns)
    blocks = B * Hkv * max(ns, Hq // Hkv)
    if slots != RECORDS_PER_TRACK * PROFILE_GROUPS * blocks:
        fails.append(f"splits {ns}: {slots} slots")
    buf = alloc_profiler_buffer(slots)
    want_o, want_l = flash_decode(q, k, v, bt, sl, num_splits=ns)
    for rep in range(2):  # a reset buffer is filled the same way again
        reset_profiler_buffer(buf)
        o, l = flash_decode(q, k, v, bt, sl, num_splits=ns, profiler_buffer=buf)
        if not (torch.equal(o, want_o) and torch.equal(l, want_l)):
            fails.append(f"splits {ns}: the profiled call's result differs")
        grid = int(buf[layout.W_GRID])
        if grid != blocks | (PROFILE_GROUPS << 32):
            fails.append(f"splits {ns}: header grid word {grid:#x}")
        tracks = parse_to_tracks(buf)
        split = [t for t in tracks if t.group_id == 0]
        merge = [t for t in tracks if t.group_id == 1]
        if sorted(t.program_id for t in split) != list(range(B * Hkv * ns)):
            fails.append(f"splits {ns}: split tracks {[t.program_id for t in split]}")
        want_merge = list(range(B * Hq)) if ns > 1 else []
        if sorted(t.program_id for t in merge) != want_merge:
            fails.append(f"splits {ns}: merge tracks {[t.program_id for t in merge]}")
        for t in split:
            names = [TASKS[x.task_type] for x in t.tasks]
            ok = names == ["prologue", "tokens", "store"] and t.unmatched == 0 and not t.full
            ok = ok and all(a.end_ns <= b.start_ns for a, b in zip(t.tasks, t.tasks[1:]))
            ok = ok and all(x.start_ns <= x.end_ns for x in t.tasks) and t.sm_id == t.program_id
            if not ok:
                fails.append(f"splits {ns}: split track {t.program_id}: {names}, unmatched {t.unmatched}")
        for t in merge:
            if [TASKS[x.task_type] for x in t.tasks] != ["merge"] or t.unmatched:
                fails.append(f"splits {ns}: merge track {t.program_id}: {t.tasks}")
        if merge and min(x.start_ns for t in merge for x in t.tasks) < max(x.end_ns for t in split for x in t.tasks):
            fails.append(f"splits {ns}: a merge program started before the split kernel ended")
print("FAILS", fails)
"""


@pytest.mark.sim
def test_profiled_decode_matches_and_records_every_program():
    assert_script_says(_PROFILE_SCRIPT, "FAILS []")


def _operands():
    q = torch.zeros(2, 4, 64, dtype=torch.bfloat16)
    k = torch.zeros(6, 16, 2, 64, dtype=torch.bfloat16)
    bt = torch.arange(6, dtype=torch.int32).reshape(2, 3)
    sl = torch.tensor([5, 40], dtype=torch.int32)
    return q, k, k.clone(), bt, sl


def test_profile_slots_follow_the_launch():
    from triton_dist.kernels.flash_decode import PROFILE_GROUPS, RECORDS_PER_TRACK
    from triton_dist.ops.attention import decode_profile_slots

    q, k, _, bt, _ = _operands()
    per_block = RECORDS_PER_TRACK * PROFILE_GROUPS
    assert decode_profile_slots(q, k, bt, num_splits=5) == per_block * 2 * 2 * 5  # split grid the larger
    assert decode_profile_slots(q, k, bt, num_splits=1) == per_block * 2 * 2 * 2  # merge grid (B * Hq) the larger
    with pytest.raises(ValueError, match="decode_profile_slots: q must be a 3-D"):
        decode_profile_slots(q[0], k, bt)


@pytest.mark.parametrize("buf,words", [
    (lambda n: torch.zeros(n, dtype=torch.int32), ["profiler_buffer must be a 1-D int64 tensor on cpu", "int32"]),
    (lambda n: torch.zeros(n - 1, dtype=torch.int64), ["of at least {n} words", "decode_profile_slots"]),
    (lambda n: torch.zeros(2, n, dtype=torch.int64), ["1-D int64"]),
    (lambda n: "buffer", ["got str"]),
])
def test_bad_profiler_buffer_is_refused_before_launch(monkeypatch, buf, words):
    from triton_dist.ops import attention
    from triton_dist.profiler_layout import HEADER_WORDS, WORDS_PER_RECORD

    def no_launch(*a, **kw):
        raise AssertionError("launched")

    monkeypatch.setattr(attention, "flash_decode_split_kernel", no_launch)
    q, k, v, bt, sl = _operands()
    n = HEADER_WORDS + WORDS_PER_RECORD * attention.decode_profile_slots(q, k, bt, num_splits=3)
    with pytest.raises(ValueError) as err:
        attention.flash_decode(q, k, v, bt, sl, num_splits=3, profiler_buffer=buf(n))
    msg = str(err.value)
    assert "\n" not in msg and msg.startswith("flash_decode: "), msg
    for w in words:
        assert w.format(n=n) in msg, (w, msg)


def test_profiler_buffer_is_eager_only(monkeypatch):
    """Under torch.compile the call is the registered op, which records nothing: a buffer is refused, not ignored."""
    from triton_dist.ops.attention import flash_decode

    monkeypatch.setattr(torch.compiler, "is_compiling", lambda: True)
    q, k, v, bt, sl = _operands()
    with pytest.raises(ValueError, match="^flash_decode: profiler_buffer apply to eager calls only"):
        flash_decode(q, k, v, bt, sl, profiler_buffer=torch.zeros(64, dtype=torch.int64))
