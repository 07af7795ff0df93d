"""The fused merge of the split-KV decode (``DecodeConfig(fused_merge=True)``; docs/attention.md, "The fused merge"):
under the Triton interpreter it gives exactly the default (two launches) result and the fp32 reference's, over
ragged lengths with empty requests, several split counts (more splits than tiles too), GQA 1 / 3 / 4, D 64 and 128,
an fp32 ``out=``; consecutive calls (the counters are back at 0 after each) and a profiled call (one ``arrive`` per
split holding tokens, one ``fused_merge`` per (request, kv head), no merge launch). On the CPU: the arrival-counter
workspace (zeroed, grown, never allocated inside a capture: one-line RuntimeError), what is launched, bad config."""
import dataclasses

import pytest
import torch
from _subprocess_runs import assert_script_says

_FUSED_SCRIPT = r"""
import dataclasses
import os
os.environ["TRITON_INTERPRET"] = "1"
import torch
from triton_dist.kernels.flash_decode import TASKS
from triton_dist.ops import attention
from triton_dist.ops.attention import (decode_profile_slots, flash_decode, flash_decode_reference,
                                       pick_decode_config)
from triton_dist.tools.profiler import alloc_profiler_buffer, parse_to_tracks

fails = []
torch.manual_seed(0)


def paged(lens, Hq, Hkv, D, page):
    pages_per = [-(-n // page) for n in lens]
    total = sum(pages_per) + 1
    perm = torch.randperm(total).to(torch.int32)
    bt = torch.full((len(lens), max(pages_per) + 1), 10 ** 6, dtype=torch.int32)  # garbage past the pages in use
    at = 0
    for b, n in enumerate(pages_per):
        bt[b, :n] = perm[at:at + n]
        at += n
    k = torch.randn(total, page, Hkv, D).bfloat16()
    v = torch.randn(total, page, Hkv, D).bfloat16()
    return torch.randn(len(lens), Hq, D).bfloat16(), k, v, bt, torch.tensor(lens, dtype=torch.int32)


def counters_zero(tag):
    for dev, c in attention._ARRIVALS.items():
        if int(c.abs().sum()):
            fails.append(f"{tag}: arrival counters on {dev} not back at 0: {c.nonzero().flatten().tolist()}")


def case(name, lens, Hq, Hkv, D, page, splits, calls=1):
    q, k, v, bt, sl = paged(lens, Hq, Hkv, D, page)
    want_o, want_l = flash_decode_reference(q, k, v, bt, sl)
    fused = dataclasses.replace(pick_decode_config(D, Hq // Hkv, on_gpu=False), fused_merge=True)
    for ns in splits:
        tag = f"{name}, {ns} splits"
        base_o, base_l = flash_decode(q, k, v, bt, sl, num_splits=ns)
        for c in range(calls):
            o, l = flash_decode(q, k, v, bt, sl, num_splits=ns, config=fused)
            if not (torch.equal(o, base_o) and torch.equal(l, base_l)):
                fails.append(f"{tag}, call {c}: differs from the two-launch result by "
                             f"{(o.float() - base_o.float()).abs().max().item()}")
            err = (o.float() - want_o).abs().max().item()
            if not err <= 2e-2 * (1 + want_o.abs().max().item()):
                fails.append(f"{tag}, call {c}: out off the reference by {err}")
            inf = torch.isinf(want_l)
            lse_err = (l[~inf] - want_l[~inf]).abs().max().item() if bool((~inf).any()) else 0.0
            if not (torch.equal(torch.isinf(l), inf) and torch.equal(l[inf], want_l[inf]) and lse_err <= 1e-4):
                fails.append(f"{tag}, call {c}: lse {l.tolist()} != {want_l.tolist()}")
            counters_zero(f"{tag}, call {c}")
    return q, k, v, bt, sl, fused


# GQA 4, D 64, 4-token pages under 16-token tiles: 4 tiles at most; 9 splits leave most splits empty
q, k, v, bt, sl, fused = case("GQA 4, D 64", [61, 0, 7, 33], 8, 2, 64, 4, (3, 9), calls=2)
case("GQA 1, D 128, 16-token pages", [40, 0], 2, 2, 128, 16, (3, ))
case("GQA 3, every request empty", [0, 0], 6, 2, 64, 4, (4, ))
case("GQA 3, D 64", [17, 48], 3, 1, 64, 16, (5, ))

# an fp32 out= (the sequence-parallel decode's partial) and a strided one
want_o, want_l = flash_decode(q, k, v, bt, sl, num_splits=3)
buf = torch.full(q.shape, float("nan"))
o, l = flash_decode(q, k, v, bt, sl, num_splits=3, config=fused, out=buf)
ref32, _ = flash_decode(q, k, v, bt, sl, num_splits=3, out=torch.empty(q.shape))
if o is not buf or not torch.equal(buf, ref32):
    fails.append("fp32 out=: differs from the two-launch result")
wide = torch.full((q.shape[0], q.shape[1], 2 * q.shape[2]), float("nan")).bfloat16()
flash_decode(q, k, v, bt, sl, num_splits=3, config=fused, out=wide[..., :q.shape[2]])
if not torch.equal(wide[..., :q.shape[2]], want_o) or not bool(wide[..., q.shape[2]:].isnan().all()):
    fails.append("strided out=: wrong, or written outside its view")

# profiled: one arrive per split holding tokens (split 0 alone for an empty request), one fused_merge per
# (request, kv head), by one of the programs that arrived; nothing in the merge group
ns, Hkv, G, tiles = 3, k.shape[2], q.shape[1] // k.shape[2], [-(-int(n) // 16) for n in sl]
pbuf = alloc_profiler_buffer(decode_profile_slots(q, k, bt, num_splits=ns, config=fused))
o, l = flash_decode(q, k, v, bt, sl, num_splits=ns, config=fused, profiler_buffer=pbuf)
if not (torch.equal(o, want_o) and torch.equal(l, want_l)):
    fails.append("profiled fused call: result differs")
tracks = parse_to_tracks(pbuf)
if any(t.group_id != 0 for t in tracks) or len(tracks) != len(sl) * Hkv * ns:
    fails.append(f"profiled fused call: tracks {[(t.program_id, t.group_id) for t in tracks]}")
merged = {}
for t in tracks:
    bh, split = t.program_id // ns, t.program_id % ns
    per = -(-tiles[bh // Hkv] // ns)
    used = -(-tiles[bh // Hkv] // max(per, 1))
    names = [TASKS[x.task_type] for x in t.tasks]
    want = ["prologue", "tokens", "store"] + (["arrive"] if split < max(used, 1) else [])
    if names[-1:] == ["fused_merge"] and names[-2:-1] == ["arrive"]:  # the last to arrive (any order)
        merged[bh] = merged.get(bh, 0) + 1
        names = names[:-1]
    if names != want or t.unmatched or t.full:
        fails.append(f"profiled fused call: program {t.program_id}: {names}, want {want} (+ fused_merge)")
if merged != {bh: 1 for bh in range(len(sl) * Hkv)}:
    fails.append(f"profiled fused call: fused merges per (request, kv head) {merged}")
print("FAILS", fails)
"""


@pytest.mark.sim
def test_fused_merge_matches_two_launches_and_reference():
    assert_script_says(_FUSED_SCRIPT, "FAILS []")


def _operands(B=2):
    q = torch.zeros(B, 4, 64, dtype=torch.bfloat16)
    k = torch.zeros(6, 16, 2, 64, dtype=torch.bfloat16)
    bt = torch.arange(6, dtype=torch.int32).reshape(2, 3)[:B]
    sl = torch.tensor([5, 40], dtype=torch.int32)[:B]
    return q, k, k.clone(), bt, sl


class _Recorder:
    def __init__(self):
        self.launches = []

    def __getitem__(self, grid):
        return lambda *args, **kw: self.launches.append((grid, args, kw))


def _fused_cfg():
    from triton_dist.ops.attention import pick_decode_config

    return dataclasses.replace(pick_decode_config(64, 2, on_gpu=False), fused_merge=True)


def test_fused_merge_is_one_launch(monkeypatch):
    from triton_dist.ops import attention

    split, merge = _Recorder(), _Recorder()
    monkeypatch.setattr(attention, "flash_decode_split_kernel", split)
    monkeypatch.setattr(attention, "merge_partials_kernel", merge)
    monkeypatch.setattr(attention, "_ARRIVALS", {})
    q, k, v, bt, sl = _operands()
    attention.flash_decode(q, k, v, bt, sl, num_splits=3, config=_fused_cfg())
    (grid, _, kw), = split.launches
    assert grid == (2 * 2 * 3, ) and kw["FUSED_MERGE"] and not kw["DIRECT"] and not merge.launches
    counters = kw["counters_ptr"]
    assert counters.dtype == torch.int32 and counters.numel() >= 2 * 2 and not counters.any()
    assert counters is attention._ARRIVALS[torch.device("cpu")]
    # one split: the split kernel writes out / lse itself, no counters; the default: two launches, no counters
    attention.flash_decode(q, k, v, bt, sl, num_splits=1, config=_fused_cfg())
    attention.flash_decode(q, k, v, bt, sl, num_splits=3)
    assert [("FUSED_MERGE" in kw, kw["DIRECT"]) for _, _, kw in split.launches[1:]] == [(False, True), (False, False)]
    assert len(merge.launches) == 1 and "counters_ptr" not in split.launches[2][2]


def test_arrival_counters_grow_outside_capture_only(monkeypatch):
    from triton_dist.ops import attention

    monkeypatch.setattr(attention, "_ARRIVALS", {})
    monkeypatch.setattr(attention, "_RETIRED_ARRIVALS", [])
    small = attention.arrival_counters("flash_decode", "cpu", 10)
    assert small.numel() == attention.MIN_ARRIVAL_COUNTERS and small.dtype == torch.int32 and not small.any()
    assert attention.arrival_counters("flash_decode", torch.device("cpu"), 1024) is small
    big = attention.arrival_counters("flash_decode", "cpu", 3000)
    assert big.numel() == 4096 and not big.any() and attention._RETIRED_ARRIVALS == [small]
    monkeypatch.setattr(attention, "_capturing", lambda: True)
    assert attention.arrival_counters("flash_decode", "cpu", 4096) is big  # big enough: fine inside a capture
    with pytest.raises(RuntimeError) as err:
        attention.arrival_counters("flash_decode", "cpu", 4097)
    msg = str(err.value)
    assert "\n" not in msg and msg.startswith("flash_decode: ") and "inside CUDA-graph capture" in msg
    assert "once outside the capture first" in msg and "4097" in msg


def test_first_fused_call_inside_capture_raises_before_any_launch(monkeypatch):
    from triton_dist.ops import attention

    def no_launch(*a, **kw):
        raise AssertionError("launched")

    split = _Recorder()
    monkeypatch.setattr(attention, "flash_decode_split_kernel", split)
    monkeypatch.setattr(attention, "merge_partials_kernel", no_launch)
    monkeypatch.setattr(attention, "_ARRIVALS", {})
    monkeypatch.setattr(attention, "_capturing", lambda: True)
    q, k, v, bt, sl = _operands()
    with pytest.raises(RuntimeError, match="make this call .* once outside the capture first"):
        attention.flash_decode(q, k, v, bt, sl, num_splits=3, config=_fused_cfg())
    assert not split.launches
    monkeypatch.setattr(attention, "_capturing", lambda: False)
    attention.flash_decode(q, k, v, bt, sl, num_splits=3, config=_fused_cfg())  # outside: allocates
    monkeypatch.setattr(attention, "_capturing", lambda: True)
    attention.flash_decode(q, k, v, bt, sl, num_splits=3, config=_fused_cfg())  # then the capture reuses it
    assert len(split.launches) == 2 and split.launches[0][2]["counters_ptr"] is split.launches[1][2]["counters_ptr"]


def test_fused_merge_must_be_a_bool():
    from triton_dist.ops.attention import flash_decode

    q, k, v, bt, sl = _operands()
    cfg = dataclasses.replace(_fused_cfg(), fused_merge="yes")
    with pytest.raises(ValueError, match="^flash_decode: config .*fused_merge must be a bool, got 'yes'$"):
        flash_decode(q, k, v, bt, sl, num_splits=3, config=cfg)
