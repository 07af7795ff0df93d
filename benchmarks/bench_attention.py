"""The attention family's figures (issue 41; docs/attention.md)::

    python benchmarks/bench_attention.py --only decode,prefill [--out DIR]               # one GPU, one process
    python benchmarks/bench_attention.py --decode-trace DIR [--decode-variants fused=1]  # one GPU: decode timelines
    scripts/launch.sh --ranks-per-gpu auto --nproc_per_node 2 benchmarks/bench_attention.py --only sp
    scripts/launch.sh --ranks-per-gpu auto --nproc_per_node 2 benchmarks/bench_attention.py --only sp,ulysses,sp_ag
    scripts/launch.sh --nproc_per_node 2 benchmarks/bench_attention.py --tiny   # no GPU: the simulator, checks only

Parts (``--only``, default all; decode and prefill need one process, sp, ulysses and sp_ag a torchrun world):

* ``decode`` (one GPU): ``ops.flash_decode`` over a paged KV cache (pages shuffled) at ``--decode-lens`` tokens
  (default 32K and 128K) per request, batch ``--batches`` (1, 8), 32 q / 8 kv heads, D 128, bf16, page size 16
  (``--pages``: also 1 and 64 as extra rows). Figures: the K/V read bandwidth ``kv_gbs`` = (bytes of K and V read:
  ``2 * tokens * Hkv * D * 2``) / time, and ``kv_fraction`` = that / ``read_ceiling_gbs``. The ceiling is MEASURED in
  the same process: ``torch.sum(x, dtype=torch.float32)`` over a 4 GiB bf16 tensor (a read-only reduction:
  bytes read / time, timed like every column: CUDA-graph replay), and beside it ``copy_gbs``: ``dst.copy_(src)`` of
  1 GiB, (read + written bytes) / time. The baseline: ``torch.nn.functional.scaled_dot_product_attention`` on the
  same data as contiguous ``[B, H, L, D]`` K/V (GQA through ``enable_gqa=True``; where this torch lacks it, K/V
  heads repeated beforehand, outside the timing: ``sdpa_gqa`` in the record says which), its own backend choice;
  ``sdpa_over_ours`` = SDPA time / ours. Extra column ``ours/BLOCK_G=64``: the decode kernel with 64 query rows per
  MMA (wgmma on sm_90), the choice docs/attention.md leaves to this benchmark. ``--decode-variants`` adds columns
  ``ours/<entry>`` (keys: ``splits``, ``block_n``, ``block_g``, ``warps``, ``stages``, ``fused=1``: the fused
  merge, one launch instead of two, ``wide=1``: the int64 K/V row offsets, ``resident=N``: splits sized in whole
  waves of N programs per SM, ``merge_s=N``: N splits a merge step; on the simulator they are checked, not timed).
  On a GPU the record's ``split_kernel`` gives each launch's split kernel as the device compiled it (registers,
  spills, shared memory, programs per SM: ``ops.attention.last_split_kernel_resources``). Targets (printed, never
  asserted): ``kv_fraction >= 0.85``, ``sdpa_over_ours >= 1.5``.
* ``--decode-trace DIR`` (one GPU; runs alone unless ``--only`` names parts): where a decode call's time goes. Per
  shape (``--decode-lens``, default 32768 here; ``--batches``, default 1 and 8; the first ``--pages``; the default
  heads) and per launch (the default, then each ``--decode-variants`` entry), ONE profiled ``flash_decode`` call
  (``profiler_buffer``: docs/attention.md, "Profiling the decode"), captured in a CUDA graph after four unprofiled
  calls (steady state, the launches back to back as when timed), written to ``DIR`` as
  ``decode-trace-<stamp>-B<B>-L<L>-<variant>`` ``.json`` (Perfetto), ``.png`` (Gantt, one row per SM lane),
  ``-timeline.png`` (programs per task over time) and ``-summary.json`` (:func:`decode_trace_summary`: the call's
  and each launch's span, the gap between the split kernel's last program and the merge's first, the time after the
  last partial's store, per-task mean / p50 / max, split programs per SM, peak residency, waves, ramp and drain, the
  K/V bytes over the split span; with the unprofiled and profiled calls' graph-replay times, i.e. what profiling
  costs), plus ``decode-trace-<stamp>.json`` with all of them. The profiled result is checked against the fp32
  reference, and a last unprofiled call against the first (``repeat_equal``: after every replay); a failed check:
  exit status 1.
* ``prefill`` (one GPU): causal ``ops.flash_attention`` against SDPA with its flash backend
  (``sdpa_kernel(SDPBackend.FLASH_ATTENTION)``, is_causal) at ``--prefill-lens`` (8K, 32K), batch 1, 32 q heads /
  8 kv heads (GQA, where SDPA's flash backend takes ``enable_gqa``; else both at 32 / 32: ``heads`` in the record),
  D 128, bf16; each in its native layout (ours ``[B, L, H, D]``, SDPA ``[B, H, L, D]``, both contiguous). Figures:
  ``sdpa_over_ours`` and TFLOP/s with the causal count ``2 * 2 * B * Hq * L^2 * D / 2``. Target: >= 0.9.
* ``sp`` (the torchrun world, ranks possibly sharing one GPU: ``shared_gpu`` in the JSON, from the topology):
  ``ops.sp_flash_decode`` with every rank holding ``1 / world`` of every request's ``--sp-len`` tokens (32K),
  batch 1 and 8, the same heads; columns ``sp_flash_decode`` (both launches), ``local`` (the rank's
  ``flash_decode`` into its own slot alone) and ``exchange`` (``attention_sp.sp_decode_exchange`` alone: the partials'
  exchange and merge); ``sum_over_together`` = (local + exchange) / sp_flash_decode. Reported, never compared with
  NVLink figures (where ranks share a GPU there is none).
* ``ulysses`` (the torchrun world; skipped where the world size does not divide the 32 heads): Ulysses' all-to-alls
  at batch 1, ``--ulysses-lens`` tokens per rank (4096, 16384), 32 heads of 128, bf16: ``pre`` (``ops.
  pre_attn_all_to_all`` of ``[1, L, 32, 128]``) and ``post`` (``ops.post_attn_all_to_all`` of its result), each
  against the baseline a user writes without this library, ``torch_pre`` / ``torch_post``
  (``attention_ulysses.pre_attn_all_to_all_torch``: ``all_to_all_single`` on permuted contiguous copies, then the
  inverse permute; NCCL, or gloo on host copies where ranks share a GPU -- ``torch_a2a_backend`` and ``shared_gpu``
  in the record: those baselines then include host round trips and are not capturable, so their graph column is
  eager). Figures: ``gbs`` = bytes of the rank's input / time, ``bus_gbs`` = that x (world - 1) / world (what
  crosses the fabric), ``torch_pre_over_pre`` / ``torch_post_over_post`` (> 1: ours faster). Checked before the
  timing: ours equal to the torch formulation bit for bit, and ``post(pre(x)) == x`` (max over ranks).
* ``sp_ag`` (the torchrun world, ``shared_gpu`` recorded likewise): causal ``ops.sp_ag_attention`` (the K/V
  all-gather fused into the attention: one launch) with every rank holding ``1 / world`` of each ``--sp-ag-lens``
  tokens (default 8K and 32K in all), batch 1, the same heads, D 128, bf16; against ``ag+flash`` (ours unfused:
  ``ops.all_gather`` of K and of V into preallocated buffers, then ``ops.flash_attention`` of the rank's rows over
  the gathered K/V with ``q_start``; a batch above 1 adds the reorder of the gathered chunks to ``[B, L, H, D]``)
  and ``sdpa_flash`` (SDPA's flash backend on K/V gathered beforehand, outside the timing: the keys up to the
  rank's last row, the lower-right causal mask; K/V heads repeated for GQA beforehand: the compute alone, no
  communication). Figures: ``ag_flash_over_ours``, ``sdpa_flash_over_ours`` (each time / ours) and TFLOP/s per GPU
  (the whole causal problem's ``2 * 2 * B * Hq * (world * L)^2 * D / 2`` over the ranks and the slowest rank's
  time). The rows of the slowest rank (the last: it reads every chunk) set the time.

Every column is checked before its timing (ours against SDPA, relative Frobenius error <= 2e-2; sp against
``flash_decode_reference`` over the whole sequence, sp_ag against SDPA over the whole sequence); one that fails is dropped and named in ``errors`` (ours
failing: exit status 1 after the JSON is written). Timing (benchmarks/harness.py): CUDA-graph replay of ``k``
back-to-back calls, the columns of one row interleaved, and eager calls of every column as their own column
(``eager_us``, ratios eager against eager). ``--tiny``: tiny shapes; on the simulator (no GPU) the only mode, and
there nothing is timed: the checks run and the record is written. Writes ``attention-<stamp>.json`` (sp and
sp_ag: ``attention_sp-<stamp>.json``, ulysses: ``attention_ulysses-<stamp>.json``) to ``--out`` (default
``$TRITON_DIST_RESULTS_DIR`` or benchmarks/results).
"""
from __future__ import annotations

import argparse
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "python"))

import harness  # noqa: E402

PARTS = ("decode", "prefill", "sp", "ulysses", "sp_ag")
HQ, HKV, D = 32, 8, 128
DECODE_LENS, BATCHES, PAGES = [32768, 131072], [1, 8], [16, 1, 64]
PREFILL_LENS = [8192, 32768]
SP_LEN = 32768
#: Ulysses: tokens per rank (batch 1, HQ heads of D)
ULYSSES_LENS = [4096, 16384]
#: sp_ag: tokens per sequence over the whole world (each rank holds 1 / world of them), batch
SP_AG_LENS, SP_AG_BATCH = [8192, 32768], 1
#: --tiny (the simulator's): (Hq, Hkv, D), decode lengths, batches, pages, prefill lengths, sp length, Ulysses'
#: tokens per rank, sp_ag lengths and batch
TINY = dict(heads=(4, 1, 64), decode_lens=[48], batches=[2], pages=[16, 4], prefill_lens=[64], sp_len=64,
            ulysses_lens=[8], sp_ag_lens=[64], sp_ag_batch=2)
SAMPLE_US = 3000.0
REPS = 15
TARGETS = {"decode_kv_fraction": 0.85, "decode_sdpa_over_ours": 1.5, "prefill_sdpa_over_ours": 0.9}


def _gen(seed, dev):
    return torch.Generator(device=dev).manual_seed(seed)


def paged_cache(B, L, Hkv, Dh, page, dtype, dev, seed):
    """Every request ``L`` tokens in a paged cache whose pages are shuffled: ``(k_cache, v_cache, block_table,
    seq_lens)``; ``L`` a multiple of ``page``."""
    pages = B * (L // page)
    g = _gen(seed, dev)
    kc = (torch.randn((pages, page, Hkv, Dh), device=dev, generator=g) / 4).to(dtype)
    vc = torch.randn((pages, page, Hkv, Dh), device=dev, generator=g).to(dtype)
    perm = torch.randperm(pages, device=dev, generator=g).to(torch.int32)
    bt = perm.view(B, L // page).contiguous()
    sl = torch.full((B, ), L, dtype=torch.int32, device=dev)
    return kc, vc, bt, sl


def contiguous_kv(kc, vc, bt, L):
    """The paged cache as contiguous ``[B, Hkv, L, D]`` K and V (SDPA's layout)."""
    B = bt.shape[0]
    Hkv, Dh = kc.shape[2], kc.shape[3]
    k = kc[bt.long()].reshape(B, -1, Hkv, Dh)[:, :L].transpose(1, 2).contiguous()
    v = vc[bt.long()].reshape(B, -1, Hkv, Dh)[:, :L].transpose(1, 2).contiguous()
    return k, v


def sdpa_fn(q4, k, v, causal=False):
    """SDPA with GQA: ``(fn, gqa)``; ``enable_gqa=True`` where this torch has it, else K/V heads repeated here
    (outside any timing)."""
    F = torch.nn.functional
    G = q4.shape[1] // k.shape[1]
    try:
        F.scaled_dot_product_attention(q4[:, :, :1], k[:, :, :2], v[:, :, :2], enable_gqa=True)
        return (lambda: F.scaled_dot_product_attention(q4, k, v, is_causal=causal, enable_gqa=True)), True
    except TypeError:
        kr, vr = k.repeat_interleave(G, dim=1), v.repeat_interleave(G, dim=1)
        return (lambda: F.scaled_dot_product_attention(q4, kr, vr, is_causal=causal)), False


def _time(fns, gpu):
    """``(us, graphed, eager_us, k)`` of ``fns`` (graph columns interleaved; eager columns)."""
    if not gpu or not fns:
        return {}, {}, {}, None
    k = harness.calls_per_sample(next(iter(fns.values())), SAMPLE_US)
    graphed = harness.time_interleaved(fns, k, REPS)
    eager = {n: harness.time_eager(fn, k, REPS) for n, fn in fns.items()}
    return {n: t for n, (t, _) in graphed.items()}, {n: g for n, (_, g) in graphed.items()}, eager, k


def read_ceiling(gpu):
    """The measured HBM figures: ``{"read_ceiling_gbs", "copy_gbs", "how"}`` (None on the simulator)."""
    if not gpu:
        return {"read_ceiling_gbs": None, "copy_gbs": None, "how": "not measured on the simulator"}
    x = torch.ones((2 << 30, ), dtype=torch.bfloat16, device="cuda")  # 4 GiB
    src = torch.ones((1 << 29, ), dtype=torch.bfloat16, device="cuda")  # 1 GiB
    dst = torch.empty_like(src)
    us, _, _, _ = _time({"sum": lambda: torch.sum(x, dtype=torch.float32), "copy": lambda: dst.copy_(src)}, gpu)
    out = {"read_ceiling_gbs": x.numel() * 2 / us["sum"] / 1e3, "copy_gbs": 2 * src.numel() * 2 / us["copy"] / 1e3,
           "sum_us": us["sum"], "copy_us": us["copy"],
           "how": "read_ceiling_gbs: torch.sum(x, dtype=float32) over a 4 GiB bf16 tensor, bytes read / time (graph "
                  "replay); copy_gbs: dst.copy_(src) of 1 GiB, (read + written bytes) / time"}
    torch.cuda.empty_cache()
    return out


def _ratios(rec, ours, baselines):
    us, eager, graphed = rec["us"], rec["eager_us"], rec["graphed"]
    out = {}
    for b in baselines:
        if b in us and ours in us and graphed.get(b) and graphed.get(ours):
            out[f"{b}_over_ours"] = us[b] / us[ours]
        if b in eager and ours in eager:
            out[f"eager_{b}_over_ours"] = eager[b] / eager[ours]
    return out


# --------------------------------------------------------------------------------------------------- decode
#: keys of a ``--decode-variants`` entry: what each sets of ``flash_decode``'s launch (``fused=1``: the fused merge,
#: ``DecodeConfig.fused_merge``: one launch instead of two; ``wide=1``: ``DecodeConfig.wide_offsets``, the int64 K/V
#: row offsets of before 2026-12-07; ``resident=N``: ``DecodeConfig.resident``, splits sized in whole waves of N
#: programs per SM; ``merge_s=N``: ``DecodeConfig.merge_block_s``, splits the merge kernel reads per step)
VARIANT_KEYS = ("splits", "block_n", "block_g", "warps", "stages", "fused", "wide", "resident", "merge_s")


def parse_decode_variants(ap, text):
    """``--decode-variants`` "splits=64,block_n=128+stages=4" -> [(name, {key: int})]; one extra column per entry
    (keys :data:`VARIANT_KEYS`, joined with '+')."""
    out = []
    for item in filter(None, (text or "").split(",")):
        kv = {}
        for part in item.split("+"):
            key, _, val = part.partition("=")
            if key not in VARIANT_KEYS or not val.isdigit() or int(val) < 1:
                ap.error(f"--decode-variants: {part!r} is not KEY=POSITIVE_INT with KEY one of {', '.join(VARIANT_KEYS)}")
            kv[key] = int(val)
        out.append((item, kv))
    return out


def variant_config(base, kv):
    """The ``DecodeConfig`` of a ``--decode-variants`` entry ``kv`` over the default ``base`` (``splits`` is the
    call's ``num_splits``, not part of the config)."""
    from triton_dist.ops.attention import DecodeConfig

    return DecodeConfig(kv.get("block_n", base.BLOCK_N), kv.get("block_g", base.BLOCK_G),
                        kv.get("warps", base.num_warps), kv.get("stages", base.num_stages),
                        fused_merge=bool(kv.get("fused", 0)), wide_offsets=bool(kv.get("wide", 0)),
                        resident=kv.get("resident", base.resident),
                        merge_block_s=kv.get("merge_s", base.merge_block_s))


def bench_decode(B, L, page, heads, gpu, ceiling, seed=0, variants=()):
    from triton_dist import ops
    from triton_dist.ops.attention import DecodeConfig, flash_decode_reference, last_split_kernel_resources, \
        pick_decode_config

    Hq, Hkv, Dh = heads
    dev = "cuda" if gpu else "cpu"
    dtype = torch.bfloat16
    kc, vc, bt, sl = paged_cache(B, L, Hkv, Dh, page, dtype, dev, seed)
    q = torch.randn((B, Hq, Dh), device=dev, generator=_gen(seed + 1, dev)).to(dtype)
    k, v = contiguous_kv(kc, vc, bt, L)
    sdpa, gqa = sdpa_fn(q[:, :, None], k, v)
    # check_lens=False: one host synchronisation per call otherwise (the capture skips it anyway)
    fns = {"ours": lambda: ops.flash_decode(q, kc, vc, bt, sl, check_lens=False, return_lse=False)}
    base = pick_decode_config(Dh, Hq // Hkv, on_gpu=gpu)
    if gpu:
        bg64 = DecodeConfig(base.BLOCK_N, 64, base.num_warps, base.num_stages)
        fns["ours/BLOCK_G=64"] = lambda: ops.flash_decode(q, kc, vc, bt, sl, check_lens=False, return_lse=False,
                                                          config=bg64)
    for name, kv in variants:  # --decode-variants: the launch choices docs/attention.md leaves to measurement
        cfg = variant_config(base, kv)  # (on the simulator: checked only)
        fns[f"ours/{name}"] = (lambda cfg=cfg, ns=kv.get("splits"): ops.flash_decode(
            q, kc, vc, bt, sl, check_lens=False, return_lse=False, config=cfg, num_splits=ns))
    fns["sdpa"] = lambda: sdpa()[:, :, 0]
    ref = fns["sdpa"]()
    errors = harness.drop_failing(fns, ref)
    rec = {"part": "decode", "batch": B, "tokens": L, "page_size": page, "q_heads": Hq, "kv_heads": Hkv,
           "head_dim": Dh, "dtype": "bfloat16", "sdpa_gqa": "enable_gqa" if gqa else "repeat_interleave",
           "errors": errors}
    if not gpu:  # the simulator: also against the fp32 reference
        want, _ = flash_decode_reference(q, kc, vc, bt, sl)
        rec["rel_error_vs_reference"] = harness.rel_error(fns["ours"](), want) if "ours" in fns else None
    rec["rel_error_vs_sdpa"] = harness.rel_error(fns["ours"](), ref) if "ours" in fns else None
    if gpu:  # what each launch's split kernel was compiled to (the device's ptxas): registers, spills, residency
        rec["split_kernel"] = {}
        for n, fn in fns.items():
            if n.startswith("ours"):
                fn()
                rec["split_kernel"][n] = last_split_kernel_resources()
    del k, v
    rec["us"], rec["graphed"], rec["eager_us"], rec["calls_per_sample"] = _time(fns, gpu)
    if not gpu:
        rec["checked"] = list(fns)
        return rec
    kv_bytes = 2 * B * L * Hkv * Dh * 2
    rec["kv_bytes"] = kv_bytes
    rec["kv_gbs"] = {n: kv_bytes / t / 1e3 for n, t in rec["us"].items()}
    rec["eager_kv_gbs"] = {n: kv_bytes / t / 1e3 for n, t in rec["eager_us"].items()}
    if ceiling.get("read_ceiling_gbs"):
        rec["kv_fraction"] = {n: g / ceiling["read_ceiling_gbs"] for n, g in rec["kv_gbs"].items()}
    rec.update(_ratios(rec, "ours", ("sdpa", )))
    return rec


def decode_lines(rec):
    head = f"decode B={rec['batch']} L={rec['tokens']} page={rec['page_size']}"
    if not rec["us"]:
        return [f"{head}  simulator: checked {', '.join(rec['checked'])} (err vs reference "
                f"{_g(rec.get('rel_error_vs_reference'))}, vs sdpa {_g(rec['rel_error_vs_sdpa'])}) {rec['errors'] or ''}"]
    cols = "  ".join(f"{n} {t:.1f}{'' if rec['graphed'][n] else '*'} us {rec['kv_gbs'][n]:.0f} GB/s"
                     + (f" ({rec['kv_fraction'][n]:.2f})" if "kv_fraction" in rec else "") for n, t in rec["us"].items())
    eager = "  ".join(f"{n} {t:.1f}" for n, t in rec["eager_us"].items())
    r = rec.get("sdpa_over_ours")
    lines = [head, f"    graph: {cols}", f"    eager us: {eager}",
             f"    x sdpa {_g2(r)} (target >= {TARGETS['decode_sdpa_over_ours']}), eager x sdpa "
             f"{_g2(rec.get('eager_sdpa_over_ours'))}; fraction of read bw {_g2(rec.get('kv_fraction', {}).get('ours'))} "
             f"(target >= {TARGETS['decode_kv_fraction']})  err vs sdpa {_g(rec['rel_error_vs_sdpa'])} "
             f"{rec['errors'] or ''}"]
    if rec.get("split_kernel"):
        lines.append("    split kernel: " + "  ".join(f"{n} {split_kernel_words(k)}"
                                                       for n, k in rec["split_kernel"].items()))
    return lines


def split_kernel_words(res):
    """``"126 regs 0 spills 74240 B smem 3/SM"`` of :func:`~triton_dist.ops.attention.last_split_kernel_resources`'s
    dict (``-`` for None)."""
    if not res:
        return "-"
    return (f"{res['regs']} regs {res['spills']} spills {res['shared']} B smem {res['programs_per_sm']}/SM")


# ------------------------------------------------------------------------------------------------ decode trace
#: ``--decode-trace``'s default shapes (tokens, batches): where batch 1 loses its time and batch 8 does not
TRACE_LENS, TRACE_BATCHES = [32768], [1, 8]
#: unprofiled calls before the profiled one, in the same CUDA graph (steady state: the profiled call's launches follow
#: another call's, as in the timing loop)
TRACE_WARM_CALLS = 4


def _us(ns):
    return None if ns is None else round(ns / 1000.0, 3)


def _stats_us(values):
    """``{count, mean_us, p50_us, min_us, max_us, total_us}`` of durations in ns (None entries dropped)."""
    v = sorted(x for x in values if x is not None)
    if not v:
        return {"count": 0}
    return {"count": len(v), "mean_us": _us(sum(v) / len(v)), "p50_us": _us(v[len(v) // 2]), "min_us": _us(v[0]),
            "max_us": _us(v[-1]), "total_us": _us(sum(v))}


def _open_counts(intervals):
    """``[(t, open)]`` of ``[(start, end)]``: after each start or end, in time order, how many intervals are open
    (an interval ending at ``t`` is closed before one starting at ``t`` opens)."""
    events = sorted([(s, 1) for s, _ in intervals] + [(e, -1) for _, e in intervals], key=lambda x: (x[0], x[1]))
    out, cur = [], 0
    for t, d in events:
        cur += d
        out.append((t, cur))
    return out


def _concurrency(intervals):
    """``(peak, first_peak_ns)`` of ``[(start, end)]``: the most intervals open at once and when that was first
    reached (:func:`_open_counts`)."""
    peak, when = 0, None
    for t, n in _open_counts(intervals):
        if n > peak:
            peak, when = n, t
    return peak, when


def decode_trace_summary(tracks, task_names=None, sms=None, kv_bytes=None):
    """What one profiled ``flash_decode`` call's tracks (``triton_dist.tools.profiler.parse_to_tracks`` of its
    buffer; group 0 the split kernel's programs, group 1 the merge kernel's) say, times in us:

    * ``span_us`` (first stamp to last), ``split`` / ``merge``: each launch's programs, ``start_us`` / ``end_us``
      (from the first stamp), ``span_us``; ``gap_us``: the merge's first program start minus the split kernel's last
      program end (None without a merge launch: one split, or the fused merge); ``tail_after_last_store_us``: the
      call's end minus the last partial's store (the merge's whole cost, launch gap included, in either variant);
    * ``tasks``: per task name, count / mean / p50 / min / max / total duration;
    * ``programs``: the split programs' durations (first stamp to last), and where they ran: ``sms_used``,
      ``programs_per_sm`` (min / mean / max), ``peak_per_sm`` (most programs resident on one SM at once),
      ``peak_running`` (on the whole GPU), ``mean_running`` (sum of durations / the split span), ``waves`` (programs
      / peak_running), ``ramp_us`` (first start to the peak), ``last_start_us`` (from the first start) and
      ``drain_us`` (last start to the split kernel's end: the tail in which SMs run out of work);
    * ``idle_sms`` (``sms`` given: SMs no split program ran on) and ``kv_gbs_split`` / ``kv_gbs_call`` (``kv_bytes``
      given: K/V bytes over the split span / the whole span).

    A pure function of the tracks (tested on synthetic buffers)."""
    names = list(task_names) if task_names is not None else None

    def name(t):
        return names[t] if names is not None and 0 <= t < len(names) else f"task_{t}"

    tracks = list(tracks)
    tasks = [x for tr in tracks for x in tr.tasks]
    if not tasks:
        return {"empty": True, "tracks": len(tracks)}
    t0 = min(x.start_ns for x in tasks)
    t_end = max(x.end_ns for x in tasks)
    out = {"span_us": _us(t_end - t0), "unmatched_records": sum(tr.unmatched for tr in tracks),
           "full_tracks": sum(1 for tr in tracks if tr.full)}
    spans = {}
    for group, label in ((0, "split"), (1, "merge")):
        grp = [tr for tr in tracks if tr.group_id == group and tr.tasks]
        if not grp:
            out[label] = None
            continue
        starts = [min(x.start_ns for x in tr.tasks) for tr in grp]
        ends = [max(x.end_ns for x in tr.tasks) for tr in grp]
        spans[label] = (min(starts), max(ends))
        out[label] = {"programs": len(grp), "start_us": _us(min(starts) - t0), "end_us": _us(max(ends) - t0),
                      "span_us": _us(max(ends) - min(starts))}
    out["gap_us"] = _us(spans["merge"][0] - spans["split"][1]) if "merge" in spans and "split" in spans else None
    by_name = {}
    for x in tasks:
        by_name.setdefault(name(x.task_type), []).append(x)
    out["tasks"] = {n: _stats_us(x.duration_ns for x in xs) for n, xs in by_name.items()}
    stores = [x.end_ns for x in by_name.get(name(2), [])]
    out["tail_after_last_store_us"] = _us(t_end - max(stores)) if stores else None
    split = [tr for tr in tracks if tr.group_id == 0 and tr.tasks]
    if split:
        iv = [(min(x.start_ns for x in tr.tasks), max(x.end_ns for x in tr.tasks)) for tr in split]
        per_sm = {}
        for tr, span in zip(split, iv):
            per_sm.setdefault(tr.sm_id, []).append(span)
        counts = [len(v) for v in per_sm.values()]
        peak, when = _concurrency(iv)
        s0, s1 = spans["split"]
        last_start = max(s for s, _ in iv)
        out["programs"] = {
            "duration": _stats_us(e - s for s, e in iv), "sms_used": len(per_sm),
            "programs_per_sm": {"min": min(counts), "mean": round(sum(counts) / len(counts), 3), "max": max(counts)},
            "peak_per_sm": max(_concurrency(v)[0] for v in per_sm.values()), "peak_running": peak,
            "mean_running": round(sum(e - s for s, e in iv) / max(s1 - s0, 1), 3),
            "waves": round(len(iv) / max(peak, 1), 3), "ramp_us": _us(when - s0), "last_start_us": _us(last_start - s0),
            "drain_us": _us(s1 - last_start)}
        if sms is not None:
            out["idle_sms"] = max(0, int(sms) - len(per_sm))
        if kv_bytes:
            out["kv_gbs_split"] = round(kv_bytes / max(s1 - s0, 1), 1)
            out["kv_gbs_call"] = round(kv_bytes / max(t_end - t0, 1), 1)
    return out


def render_timeline_png(tracks, path, task_names, title):
    """A small companion of the Gantt chart: how many programs run each task over time (one step line per task
    type, the split and merge launches' spans shaded). Needs matplotlib."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    tasks = [x for tr in tracks for x in tr.tasks]
    t0 = min(x.start_ns for x in tasks)
    fig, ax = plt.subplots(figsize=(10, 3.6))
    for tt in sorted({x.task_type for x in tasks}):
        steps = _open_counts([(x.start_ns, x.end_ns) for x in tasks if x.task_type == tt])
        xs = [0.0] + [(t - t0) / 1000.0 for t, _ in steps]
        ys = [0] + [n for _, n in steps]
        ax.step(xs, ys, where="post", label=task_names[tt] if tt < len(task_names) else f"task_{tt}", linewidth=1)
    for group, colour in ((0, "tab:blue"), (1, "tab:orange")):
        grp = [x for tr in tracks if tr.group_id == group for x in tr.tasks]
        if grp:
            ax.axvspan((min(x.start_ns for x in grp) - t0) / 1000.0, (max(x.end_ns for x in grp) - t0) / 1000.0,
                       color=colour, alpha=0.06)
    ax.set_xlabel("time (us, from the call's first stamp)")
    ax.set_ylabel("programs in the task")
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=7, loc="upper right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _slug(text):
    return "".join(c if c.isalnum() or c in "._-" else "_" for c in text)


def trace_decode(B, L, page, heads, gpu, outdir, stamp, name="ours", kv=None, seed=0):
    """One profiled steady-state ``flash_decode`` call at batch ``B``, ``L`` tokens each (``kv``: a
    ``--decode-variants`` entry, None: the default launch) -> ``decode-trace-<stamp>-B<B>-L<L>-<name>`` ``.json``
    (Perfetto / Chrome trace), ``.png`` (Gantt chart, one row per SM lane), ``-timeline.png`` (programs per task over
    time) and ``-summary.json`` (:func:`decode_trace_summary` plus the launch and the check) in ``outdir``; returns
    the summary. On a GPU the profiled call is the last of ``TRACE_WARM_CALLS + 1`` calls captured in one CUDA graph
    (the launches back to back, as when timed; eager calls if the capture fails: ``mode``), and both the profiled
    and the unprofiled call are then timed (graph replay) to show what profiling costs. On the simulator: one call,
    nothing timed."""
    from triton_dist.kernels.flash_decode import TASKS
    from triton_dist.kernels.gemm_config import num_sms
    from triton_dist.ops.attention import (decode_profile_slots, flash_decode, flash_decode_reference,
                                           last_split_kernel_resources, pick_decode_config, pick_num_splits)
    from triton_dist.tools.profiler import (alloc_profiler_buffer, export_to_perfetto_trace, parse_to_tracks,
                                            render_gantt_png, reset_profiler_buffer)

    kv = kv or {}
    Hq, Hkv, Dh = heads
    dev = "cuda" if gpu else "cpu"
    kc, vc, bt, sl = paged_cache(B, L, Hkv, Dh, page, torch.bfloat16, dev, seed)
    q = torch.randn((B, Hq, Dh), device=dev, generator=_gen(seed + 1, dev)).to(torch.bfloat16)
    cfg = variant_config(pick_decode_config(Dh, Hq // Hkv, on_gpu=gpu), kv)
    sms = num_sms(q.device) if gpu else None
    ns = kv.get("splits") or pick_num_splits(B, Hkv, bt.shape[1] * page, num_sms(q.device), cfg.BLOCK_N,
                                             resident=cfg.resident)
    buf = alloc_profiler_buffer(decode_profile_slots(q, kc, bt, num_splits=ns, config=cfg), device=q.device)

    def plain():
        return flash_decode(q, kc, vc, bt, sl, check_lens=False, return_lse=False, config=cfg, num_splits=ns)

    def profiled():
        return flash_decode(q, kc, vc, bt, sl, check_lens=False, return_lse=False, config=cfg, num_splits=ns,
                            profiler_buffer=buf)

    want, _ = flash_decode_reference(q, kc, vc, bt, sl)
    got_plain = plain()
    split_kernel = last_split_kernel_resources()  # the unprofiled launch's (None on the simulator)
    got_prof = profiled()
    harness._sync()
    ok, rel = harness.close(got_prof, want)
    key = "ours" if name == "ours" else f"ours/{name}"
    rec = {"errors": {} if ok else {key: f"wrong result: rel err {rel:.3g} against the fp32 reference"}}
    rec.update({
        "batch": B, "tokens": L, "page_size": page, "q_heads": Hq, "kv_heads": Hkv, "head_dim": Dh, "dtype": "bfloat16",
        "variant": name, "config": {"BLOCK_N": cfg.BLOCK_N, "BLOCK_G": cfg.BLOCK_G, "num_warps": cfg.num_warps,
                                    "num_stages": cfg.num_stages, "fused_merge": cfg.fused_merge,
                                    "wide_offsets": cfg.wide_offsets, "resident": cfg.resident,
                                    "merge_block_s": cfg.merge_block_s},
        "split_kernel": split_kernel,
        "num_splits": ns, "split_programs": B * Hkv * ns, "merge_programs": 0 if ns == 1 or cfg.fused_merge else B * Hq,
        "sms": sms, "rel_error_vs_reference": rel,
        "profiled_equals_unprofiled": bool(torch.equal(got_plain, got_prof))})
    del want
    mode = "simulator (one call)"
    if gpu:
        def calls():
            for _ in range(TRACE_WARM_CALLS):
                plain()
            profiled()

        graph = None
        try:
            graph = harness.capture_calls(calls, 1, torch.cuda.Stream(), warmup=1)
            graph.replay()  # the first replay uploads the graph
            torch.cuda.synchronize()
        except Exception as exc:  # noqa: BLE001
            rec["capture_error"] = f"{type(exc).__name__}: {exc}"[:300]
            graph = None
            torch.cuda.synchronize()
        reset_profiler_buffer(buf)
        if graph is not None:
            graph.replay()
            mode = f"CUDA graph: {TRACE_WARM_CALLS} unprofiled calls, then the profiled one"
        else:
            calls()
            mode = f"eager (capture failed): {TRACE_WARM_CALLS} unprofiled calls, then the profiled one"
        torch.cuda.synchronize()
        del graph
    else:
        reset_profiler_buffer(buf)
        profiled()
    rec["mode"] = mode
    words = buf.detach().cpu().clone()
    tracks = parse_to_tracks(words)
    kv_bytes = 2 * B * L * Hkv * Dh * 2
    rec["kv_bytes"] = kv_bytes
    rec.update(decode_trace_summary(tracks, TASKS, sms=sms, kv_bytes=kv_bytes))
    if gpu:  # what the instrumentation costs: the same call with and without the profiler, graph replay
        k = harness.calls_per_sample(plain, SAMPLE_US)
        timed = harness.time_interleaved({"unprofiled": plain, "profiled": profiled}, k, 5)
        rec["call_us"] = {n: round(t, 3) for n, (t, _) in timed.items()}
        rec["call_graphed"] = {n: g for n, (_, g) in timed.items()}
    # after every call above (graph replays included) the result is still the first call's, bit for bit (the fused
    # merge's arrival counters were left at 0 by each launch)
    rec["repeat_equal"] = bool(torch.equal(plain(), got_plain))
    if not rec["repeat_equal"]:
        rec["errors"][key] = "a later call's result differs from the first call's (stale arrival counters?)"
    base = os.path.join(outdir, f"decode-trace-{stamp}-B{B}-L{L}-{_slug(name)}")
    title = (f"flash_decode B={B} L={L} Hq={Hq} Hkv={Hkv} D={Dh} page={page} {name}: {ns} splits, "
             f"{rec['split_programs']} + {rec['merge_programs']} programs")
    rec["files"] = {"trace": export_to_perfetto_trace(words, TASKS, base + ".json", gather=False, rank=0)}
    for key, fn in (("gantt", lambda: render_gantt_png(tracks, base + ".png", task_names=TASKS, title=title)),
                    ("timeline", lambda: render_timeline_png(tracks, base + "-timeline.png", TASKS, title))):
        try:
            rec["files"][key] = fn()
        except Exception as exc:  # noqa: BLE001 (a figure is an extra: the summary is the record)
            rec["files"][key] = f"not drawn: {type(exc).__name__}: {exc}"[:200]
    rec["files"]["summary"] = harness.write_json(base + "-summary.json", rec)
    return rec


def trace_lines(rec):
    head = f"decode-trace B={rec['batch']} L={rec['tokens']} {rec['variant']} ({rec['mode']})"
    if rec.get("empty"):
        return [f"{head}: nothing recorded"]
    sp, mg, pr, tk = rec["split"], rec["merge"], rec.get("programs", {}), rec["tasks"]

    def mean(task):
        return _g2(tk.get(task, {}).get("mean_us"))

    lines = [head,
             f"    call {_g2(rec['span_us'])} us: split {_g2(sp and sp['span_us'])} us ({rec['split_programs']} "
             f"programs), gap {_g2(rec['gap_us'])} us, merge {_g2(mg and mg['span_us'])} us "
             f"({rec['merge_programs']} programs); after the last store {_g2(rec['tail_after_last_store_us'])} us",
             f"    per program (mean us): prologue {mean('prologue')}, tokens {mean('tokens')}, store "
             f"{mean('store')}, merge {mean('merge')}, arrive {mean('arrive')}, fused_merge {mean('fused_merge')}",
             f"    SMs {pr.get('sms_used')} (idle {rec.get('idle_sms', '-')}), programs/SM "
             f"{pr.get('programs_per_sm')}, peak {pr.get('peak_per_sm')}/SM {pr.get('peak_running')} in all, "
             f"waves {pr.get('waves')}, ramp {_g2(pr.get('ramp_us'))} us, drain {_g2(pr.get('drain_us'))} us; "
             f"K/V over the split span {rec.get('kv_gbs_split', '-')} GB/s",
             f"    split kernel (unprofiled): {split_kernel_words(rec.get('split_kernel'))}"]
    checks = (f"profiled == unprofiled {rec['profiled_equals_unprofiled']}, last call == first "
              f"{rec['repeat_equal']}, err vs reference {_g(rec['rel_error_vs_reference'])}")
    if rec.get("call_us"):
        lines.append(f"    graph replay us: {rec['call_us']} (profiling's cost); {checks}")
    else:
        lines.append(f"    {checks}")
    if rec["errors"]:
        lines.append(f"    FAILED: {rec['errors']}")
    return lines


# -------------------------------------------------------------------------------------------------- prefill
def bench_prefill(L, heads, gpu, seed=0):
    from torch.nn.attention import SDPBackend, sdpa_kernel

    from triton_dist import ops

    Hq, Hkv, Dh = heads
    dev = "cuda" if gpu else "cpu"
    dtype, B = torch.bfloat16, 1
    F = torch.nn.functional
    backend = SDPBackend.FLASH_ATTENTION if gpu else SDPBackend.MATH

    def sdpa_call(q4, k4, v4, gqa):
        with sdpa_kernel(backend):
            return (F.scaled_dot_product_attention(q4, k4, v4, is_causal=True, enable_gqa=True) if gqa else
                    F.scaled_dot_product_attention(q4, k4, v4, is_causal=True))

    note = None
    g = _gen(seed, dev)
    try:  # does SDPA's (flash) backend take GQA here?
        t = torch.randn((1, Hq, 128, Dh), device=dev, generator=g).to(dtype)
        sdpa_call(t, t[:, :Hkv], t[:, :Hkv], True)
    except Exception as exc:  # noqa: BLE001
        note = f"SDPA backend {backend.name} refused GQA ({type(exc).__name__}: {str(exc)[:120]}): both at MHA"
        Hkv = Hq
    gqa = Hkv != Hq
    q = torch.randn((B, L, Hq, Dh), device=dev, generator=g).to(dtype)
    k = torch.randn((B, L, Hkv, Dh), device=dev, generator=g).to(dtype)
    v = torch.randn((B, L, Hkv, Dh), device=dev, generator=g).to(dtype)
    q4, k4, v4 = (t.transpose(1, 2).contiguous() for t in (q, k, v))
    fns = {"ours": lambda: ops.flash_attention(q, k, v),
           "sdpa_flash": lambda: sdpa_call(q4, k4, v4, gqa).transpose(1, 2)}
    ref = fns["sdpa_flash"]()
    errors = harness.drop_failing(fns, ref)
    rec = {"part": "prefill", "batch": B, "tokens": L, "q_heads": Hq, "kv_heads": Hkv, "head_dim": Dh,
           "dtype": "bfloat16", "causal": True, "sdpa_backend": backend.name, "note": note, "errors": errors,
           "rel_error_vs_sdpa": harness.rel_error(fns["ours"](), ref) if "ours" in fns else None}
    del ref
    rec["us"], rec["graphed"], rec["eager_us"], rec["calls_per_sample"] = _time(fns, gpu)
    if not gpu:
        rec["checked"] = list(fns)
        return rec
    flops = 2 * 2 * B * Hq * L * L * Dh / 2
    rec["flops"] = flops
    rec["tflops"] = {n: flops / t / 1e6 for n, t in rec["us"].items()}
    rec["eager_tflops"] = {n: flops / t / 1e6 for n, t in rec["eager_us"].items()}
    rec.update(_ratios(rec, "ours", ("sdpa_flash", )))
    return rec


def prefill_lines(rec):
    head = f"prefill L={rec['tokens']} heads {rec['q_heads']}/{rec['kv_heads']} D={rec['head_dim']}"
    if not rec["us"]:
        return [f"{head}  simulator: checked {', '.join(rec['checked'])} (err vs sdpa "
                f"{_g(rec['rel_error_vs_sdpa'])}) {rec['errors'] or ''}"]
    cols = "  ".join(f"{n} {t:.0f}{'' if rec['graphed'][n] else '*'} us {rec['tflops'][n]:.0f} TFLOP/s"
                     for n, t in rec["us"].items())
    eager = "  ".join(f"{n} {t:.0f}" for n, t in rec["eager_us"].items())
    return [head + (f"  [{rec['note']}]" if rec["note"] else ""), f"    graph: {cols}", f"    eager us: {eager}",
            f"    x sdpa_flash {_g2(rec.get('sdpa_flash_over_ours'))} (target >= "
            f"{TARGETS['prefill_sdpa_over_ours']}), eager {_g2(rec.get('eager_sdpa_flash_over_ours'))}  err vs sdpa "
            f"{_g(rec['rel_error_vs_sdpa'])} {rec['errors'] or ''}"]


# -------------------------------------------------------------------------------------------------------- sp
def bench_sp(B, L, page, heads, rank, world, gpu, seed=0):
    """Every rank holds tokens ``[rank * L / world, (rank + 1) * L / world)`` of every request (the whole sequence is
    derived from one seed on every rank, for the check)."""
    from triton_dist import ops
    from triton_dist.ops.attention import flash_decode_reference
    from triton_dist.ops.attention_sp import sp_decode_exchange

    Hq, Hkv, Dh = heads
    dev = "cuda" if gpu else "cpu"
    dtype = torch.bfloat16
    n = L // world
    kc, vc, bt, sl = paged_cache(B, L, Hkv, Dh, page, dtype, dev, seed)  # the whole sequence (same on every rank)
    q = torch.randn((B, Hq, Dh), device=dev, generator=_gen(seed + 1, dev)).to(dtype)
    want, _ = flash_decode_reference(q, kc, vc, bt, sl)
    per = n // page  # this rank's pages: columns [rank * per, (rank + 1) * per) of every request's table
    mine = bt[:, rank * per:(rank + 1) * per]
    ids = mine.reshape(-1).long()
    kr, vr = kc[ids].contiguous(), vc[ids].contiguous()  # this rank's own cache: its pages only
    btr = torch.arange(B * per, dtype=torch.int32, device=dev).view(B, per)
    slr = torch.full((B, ), n, dtype=torch.int32, device=dev)
    del kc, vc
    ctx = ops.create_sp_decode_ctx(B, Hq, Dh, dtype)
    out = torch.empty((B, Hq, Dh), dtype=dtype, device=dev)
    lse = torch.empty((B, Hq), dtype=torch.float32, device=dev)
    r = ctx.rank
    fns = {"sp_flash_decode": lambda: ops.sp_flash_decode(q, kr, vr, btr, slr, ctx, out=out, return_lse=False),
           "local": lambda: ops.flash_decode(q, kr, vr, btr, slr, out=ctx.part_out[r, :B], lse=ctx.part_lse[r, :B],
                                             check_lens=False),
           "exchange": lambda: sp_decode_exchange(ctx, B, out, lse)}
    got = fns["sp_flash_decode"]().clone()
    harness._sync()
    rel = harness.max_over_ranks(harness.rel_error(got, want))
    errors = {} if rel <= 2e-2 else {"sp_flash_decode": f"wrong result: rel err {rel:.3g} (max over ranks)"}
    rec = {"part": "sp", "world": world, "batch": B, "tokens": L, "tokens_per_rank": n, "page_size": page,
           "q_heads": Hq, "kv_heads": Hkv, "head_dim": Dh, "dtype": "bfloat16", "exchange_programs": ctx.programs,
           "rel_error_vs_reference": rel, "errors": errors}
    if errors:
        fns = {}
    rec["us"], rec["graphed"], rec["eager_us"], rec["calls_per_sample"] = _time(fns, gpu)
    if gpu and rec["us"]:
        us, eu = rec["us"], rec["eager_us"]
        rec["sum_over_together"] = (us["local"] + us["exchange"]) / us["sp_flash_decode"]
        rec["eager_sum_over_together"] = (eu["local"] + eu["exchange"]) / eu["sp_flash_decode"]
        rec["local_kv_gbs"] = 2 * B * n * Hkv * Dh * 2 / us["local"] / 1e3
    else:
        rec["checked"] = ["sp_flash_decode"] if not errors else []
    harness._sync()
    ctx.close()
    return rec


def sp_lines(rec, shared):
    head = (f"sp world={rec['world']} B={rec['batch']} L={rec['tokens']} ({rec['tokens_per_rank']}/rank)"
            + ("  [SHARED GPU: no NVLink]" if shared else ""))
    if not rec["us"]:
        return [f"{head}  checked {', '.join(rec['checked']) or '-'} against the reference over the whole sequence "
                f"(rel err {_g(rec['rel_error_vs_reference'])}) {rec['errors'] or ''}"]
    cols = "  ".join(f"{n} {t:.1f}{'' if rec['graphed'][n] else '*'}" for n, t in rec["us"].items())
    eager = "  ".join(f"{n} {t:.1f}" for n, t in rec["eager_us"].items())
    return [head, f"    graph us: {cols}  (local + exchange) / together {rec['sum_over_together']:.2f}",
            f"    eager us: {eager}  (local + exchange) / together {rec['eager_sum_over_together']:.2f}  "
            f"local K/V {rec['local_kv_gbs']:.0f} GB/s  err {_g(rec['rel_error_vs_reference'])}"]


# --------------------------------------------------------------------------------------------------- ulysses
def bench_ulysses(L, heads, rank, world, gpu, shared, seed=0):
    """Batch 1, ``L`` tokens per rank, ``heads[0]`` heads of ``heads[2]``: pre / post against the torch.distributed
    formulation (module docstring)."""
    from triton_dist import ops
    from triton_dist.ops import attention_ulysses as uly
    from triton_dist.runtime.torch_collectives import group_has_nccl

    H, _, Dh = heads
    dev = "cuda" if gpu else "cpu"
    dtype, B = torch.bfloat16, 1
    rec = {"part": "ulysses", "world": world, "batch": B, "tokens_per_rank": L, "tokens": world * L, "heads": H,
           "head_dim": Dh, "dtype": "bfloat16", "shared_gpu": shared, "errors": {},
           "torch_a2a_backend": "nccl" if gpu and group_has_nccl(None) else "gloo"}
    if H % world:
        rec.update(skipped=f"{H} heads do not divide by the world size {world}", us={}, graphed={}, eager_us={},
                   calls_per_sample=None, checked=[])
        return rec
    x = torch.randn((B, L, H, Dh), device=dev, generator=_gen(seed + 17 * rank, dev)).to(dtype)
    ctx = ops.create_ulysses_ctx(B, L, H, Dh, dtype)
    rec["programs"] = ctx.programs
    pre_out = torch.empty((B, world * L, H // world, Dh), dtype=dtype, device=dev)
    post_out = torch.empty_like(x)
    y = ops.pre_attn_all_to_all(x, ctx)  # post's input: this rank's head group, the whole sequence
    group = ctx.group
    fns = {"pre": lambda: ops.pre_attn_all_to_all(x, ctx, out=pre_out),
           "torch_pre": lambda: uly.pre_attn_all_to_all_torch(x, group),
           "post": lambda: ops.post_attn_all_to_all(y, ctx, out=post_out),
           "torch_post": lambda: uly.post_attn_all_to_all_torch(y, group)}
    ok = (torch.equal(fns["pre"]().clone(), fns["torch_pre"]()) and torch.equal(fns["post"]().clone(), x)
          and torch.equal(fns["torch_post"](), x))
    harness._sync()
    bad = harness.max_over_ranks(0.0 if ok else 1.0)
    if bad:
        rec["errors"] = {"pre": "ours differs from the torch formulation, or post(pre(x)) != x (on some rank)"}
        fns = {}
    rec["us"], rec["graphed"], rec["eager_us"], rec["calls_per_sample"] = _time(fns, gpu)
    if gpu and rec["us"]:
        nbytes = x.numel() * x.element_size()
        rec["bytes_per_rank"] = nbytes
        for key, us in (("gbs", rec["us"]), ("eager_gbs", rec["eager_us"])):
            rec[key] = {n: nbytes / t / 1e3 for n, t in us.items()}
            rec["bus_" + key] = {n: g * (world - 1) / world for n, g in rec[key].items()}
        for op in ("pre", "post"):
            rec[f"torch_{op}_over_{op}"] = rec["us"][f"torch_{op}"] / rec["us"][op]
            rec[f"eager_torch_{op}_over_{op}"] = rec["eager_us"][f"torch_{op}"] / rec["eager_us"][op]
    else:
        rec["checked"] = list(fns)
    harness._sync()
    ctx.close()
    return rec


def ulysses_lines(rec):
    head = (f"ulysses world={rec['world']} B={rec['batch']} L={rec['tokens_per_rank']}/rank H={rec['heads']} "
            f"D={rec['head_dim']}" + (f"  [SHARED GPU: no NVLink; torch baseline on {rec['torch_a2a_backend']}]"
                                      if rec["shared_gpu"] else ""))
    if rec.get("skipped"):
        return [f"{head}  skipped: {rec['skipped']}"]
    if not rec["us"]:
        return [f"{head}  checked {', '.join(rec['checked']) or '-'} (ours == torch formulation, post(pre(x)) == x) "
                f"{rec['errors'] or ''}"]
    cols = "  ".join(f"{n} {t:.1f}{'' if rec['graphed'][n] else '*'} us {rec['gbs'][n]:.0f} GB/s"
                     for n, t in rec["us"].items())
    eager = "  ".join(f"{n} {t:.1f}" for n, t in rec["eager_us"].items())
    return [head, f"    graph: {cols}", f"    eager us: {eager}",
            f"    torch / ours: pre {_g2(rec.get('torch_pre_over_pre'))} "
            f"(eager {_g2(rec.get('eager_torch_pre_over_pre'))}), post {_g2(rec.get('torch_post_over_post'))} "
            f"(eager {_g2(rec.get('eager_torch_post_over_post'))})"
            f"  bus GB/s pre {rec['bus_gbs']['pre']:.0f} post {rec['bus_gbs']['post']:.0f}"]


# ----------------------------------------------------------------------------------------------------- sp_ag
def bench_sp_ag(B, L, heads, rank, world, gpu, shared, seed=0):
    """Causal sequence-parallel prefill at ``L`` tokens in all: rank ``r`` holds rows ``[r * L / world, (r + 1) * L /
    world)`` of q, k and v (the whole sequences derived from one seed on every rank, for the check and the SDPA
    column's gathered K/V)."""
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.nn.attention.bias import causal_lower_right

    from triton_dist import ops

    Hq, Hkv, Dh = heads
    dev = "cuda" if gpu else "cpu"
    dtype = torch.bfloat16
    n = L // world
    g = _gen(seed, dev)
    qa, ka, va = (torch.randn((B, L, h, Dh), device=dev, generator=g).to(dtype) for h in (Hq, Hkv, Hkv))
    lo, hi = rank * n, (rank + 1) * n
    q, k, v = qa[:, lo:hi].contiguous(), ka[:, lo:hi].contiguous(), va[:, lo:hi].contiguous()
    G = Hq // Hkv
    # SDPA's operands, gathered and head-repeated beforehand: the keys up to this rank's last row
    q4 = q.transpose(1, 2).contiguous()
    k4 = ka[:, :hi].repeat_interleave(G, dim=2).transpose(1, 2).contiguous()
    v4 = va[:, :hi].repeat_interleave(G, dim=2).transpose(1, 2).contiguous()
    del qa, ka, va
    mask = causal_lower_right(n, hi)
    backend = SDPBackend.FLASH_ATTENTION if gpu else SDPBackend.MATH

    def sdpa():
        with sdpa_kernel(backend):
            return torch.nn.functional.scaled_dot_product_attention(q4, k4, v4, attn_mask=mask).transpose(1, 2)

    ctx = ops.create_sp_attention_ctx(B, n, Hkv, Dh, dtype)
    ag = ops.create_allgather_ctx(B * n * Hkv * Dh, dtype)
    out = torch.empty_like(q)
    kg = torch.empty((world * B, n, Hkv, Dh), dtype=dtype, device=dev)
    vg = torch.empty_like(kg)

    def ag_flash():
        ops.all_gather(k, ag, out=kg)
        ops.all_gather(v, ag, out=vg)
        kk, vv = kg, vg
        if B == 1:
            kk, vv = kg.view(1, world * n, Hkv, Dh), vg.view(1, world * n, Hkv, Dh)
        else:  # [world, B, n] -> [B, world * n]: one reorder copy each
            kk = kg.view(world, B, n, Hkv, Dh).transpose(0, 1).reshape(B, world * n, Hkv, Dh)
            vv = vg.view(world, B, n, Hkv, Dh).transpose(0, 1).reshape(B, world * n, Hkv, Dh)
        return ops.flash_attention(q, kk, vv, q_start=lo)

    fns = {"ours": lambda: ops.sp_ag_attention(q, k, v, ctx, out=out), "ag+flash": ag_flash, "sdpa_flash": sdpa}
    ref = sdpa().clone()
    harness._sync()
    errors = harness.drop_failing(fns, ref)
    rel = harness.max_over_ranks(harness.rel_error(ops.sp_ag_attention(q, k, v, ctx), ref)) if "ours" in fns else None
    rec = {"part": "sp_ag", "world": world, "batch": B, "tokens": L, "tokens_per_rank": n, "q_heads": Hq,
           "kv_heads": Hkv, "head_dim": Dh, "dtype": "bfloat16", "causal": True, "shared_gpu": shared,
           "programs": ctx.programs, "push_programs": ctx.push_programs, "sdpa_backend": backend.name,
           "sdpa_kv": "gathered beforehand, heads repeated, keys [0, last row]", "rel_error_vs_sdpa": rel,
           "errors": errors}
    rec["us"], rec["graphed"], rec["eager_us"], rec["calls_per_sample"] = _time(fns, gpu)
    if gpu and rec["us"]:
        flops = 2 * 2 * B * Hq * L * L * Dh / 2 / world  # the whole causal problem, per GPU
        rec["flops_per_gpu"] = flops
        rec["tflops_per_gpu"] = {c: flops / t / 1e6 for c, t in rec["us"].items()}
        rec.update(_ratios(rec, "ours", ("ag+flash", "sdpa_flash")))
    else:
        rec["checked"] = list(fns)
    harness._sync()
    ctx.close()
    ag.close()
    return rec


def sp_ag_lines(rec, shared):
    head = (f"sp_ag world={rec['world']} B={rec['batch']} L={rec['tokens']} ({rec['tokens_per_rank']}/rank) causal"
            + ("  [SHARED GPU: no NVLink]" if shared else ""))
    if not rec["us"]:
        return [f"{head}  checked {', '.join(rec['checked']) or '-'} against SDPA over the whole sequence (rel err "
                f"{_g(rec['rel_error_vs_sdpa'])}) {rec['errors'] or ''}"]
    cols = "  ".join(f"{c} {t:.0f}{'' if rec['graphed'][c] else '*'} us {rec['tflops_per_gpu'][c]:.0f} TFLOP/s"
                     for c, t in rec["us"].items())
    eager = "  ".join(f"{c} {t:.0f}" for c, t in rec["eager_us"].items())
    return [head, f"    graph: {cols}", f"    eager us: {eager}",
            f"    x ag+flash {_g2(rec.get('ag+flash_over_ours'))} (eager {_g2(rec.get('eager_ag+flash_over_ours'))}), "
            f"x sdpa_flash (compute only) {_g2(rec.get('sdpa_flash_over_ours'))} (eager "
            f"{_g2(rec.get('eager_sdpa_flash_over_ours'))})  err vs sdpa {_g(rec['rel_error_vs_sdpa'])} "
            f"{rec['errors'] or ''}"]


def _g(v):
    return "-" if v is None else f"{v:.1e}"


def _g2(v):
    return "-" if v is None else f"{v:.2f}"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", default=None, help=f"comma-separated parts of {', '.join(PARTS)} (default all, none "
                                                f"with --decode-trace; decode and prefill need a single process)")
    ap.add_argument("--decode-lens", default=None, help="decode tokens per request (default 32768,131072)")
    ap.add_argument("--batches", default=None, help="decode and sp batch sizes (default 1,8)")
    ap.add_argument("--pages", default=None, help="decode page sizes (default 16,1,64; the first is sp's)")
    ap.add_argument("--decode-variants", default=None,
                    help="extra decode columns, comma-separated, each KEY=N[+KEY=N] with KEY in "
                         f"{', '.join(VARIANT_KEYS)} (e.g. splits=132,block_n=128+stages=4,fused=1)")
    ap.add_argument("--decode-trace", default=None, metavar="DIR",
                    help="profile one steady-state flash_decode call per shape (--decode-lens, default 32768; "
                         "--batches, default 1,8; the first --pages) for the default launch and each "
                         "--decode-variants entry: Perfetto JSON, Gantt PNG, timeline PNG and summary JSON into DIR "
                         "(alone unless --only names parts)")
    ap.add_argument("--prefill-lens", default=None, help="prefill tokens (default 8192,32768)")
    ap.add_argument("--sp-len", type=int, default=None, help=f"sp tokens per request, whole world (default {SP_LEN})")
    ap.add_argument("--ulysses-lens", default=None, help="ulysses tokens per rank (default "
                                                         f"{','.join(map(str, ULYSSES_LENS))})")
    ap.add_argument("--sp-ag-lens", default=None, help="sp_ag tokens per sequence, whole world (default 8192,32768)")
    ap.add_argument("--tiny", action="store_true", help="tiny shapes (the simulator's: checks only, no timing)")
    ap.add_argument("--out", default=None, help="results folder (default $TRITON_DIST_RESULTS_DIR or "
                                                "benchmarks/results)")
    args = ap.parse_args(argv)
    trace_dir = args.decode_trace
    only = args.only if args.only is not None else ("" if trace_dir else ",".join(PARTS))
    parts = harness.names_arg(ap, "--only", only, PARTS, "part") if only else []
    t = TINY if args.tiny else {}
    heads = t.get("heads", (HQ, HKV, D))
    dlens = harness.counts_arg(ap, "--decode-lens", args.decode_lens or ",".join(map(str, t.get("decode_lens",
                                                                                                DECODE_LENS))))
    batches = harness.counts_arg(ap, "--batches", args.batches or ",".join(map(str, t.get("batches", BATCHES))))
    pages = harness.counts_arg(ap, "--pages", args.pages or ",".join(map(str, t.get("pages", PAGES))))
    plens = harness.counts_arg(ap, "--prefill-lens", args.prefill_lens or ",".join(map(str, t.get("prefill_lens",
                                                                                                 PREFILL_LENS))))
    sp_len = args.sp_len or t.get("sp_len", SP_LEN)
    variants = parse_decode_variants(ap, args.decode_variants)
    ulens = harness.counts_arg(ap, "--ulysses-lens", args.ulysses_lens or ",".join(map(str, t.get("ulysses_lens",
                                                                                                  ULYSSES_LENS))))
    sp_ag_lens = harness.counts_arg(ap, "--sp-ag-lens", args.sp_ag_lens or ",".join(map(str, t.get("sp_ag_lens",
                                                                                                  SP_AG_LENS))))
    trace_lens = harness.counts_arg(ap, "--decode-lens", args.decode_lens or ",".join(
        map(str, t.get("decode_lens", TRACE_LENS)))) if trace_dir else []
    trace_batches = harness.counts_arg(ap, "--batches", args.batches or ",".join(
        map(str, t.get("batches", TRACE_BATCHES)))) if trace_dir else []
    for p in pages:
        if p & (p - 1):
            ap.error(f"--pages: {p} is not a power of two")
    for L in trace_lens:
        if L % pages[0]:
            ap.error(f"--decode-lens: {L} is not a multiple of the page size {pages[0]} (--decode-trace)")
    for L in dlens:
        if any(L % p for p in pages):
            ap.error(f"--decode-lens: {L} is not a multiple of every page size")
    gpu = not harness.on_simulator()
    if not gpu and not args.tiny:
        raise SystemExit("bench_attention: no GPU (the simulator): only --tiny runs there (checks, no timing)")
    world_env = int(os.environ.get("WORLD_SIZE", "1") or 1)
    if gpu and world_env > 1 and ("decode" in parts or "prefill" in parts or trace_dir):
        raise SystemExit("bench_attention: decode, prefill and --decode-trace use one GPU in one process: run them "
                         "without torchrun (--only decode,prefill), and --only sp,ulysses,sp_ag under torchrun")
    os.environ.setdefault("NVSHMEM_SYMMETRIC_SIZE", "1G")
    os.environ.setdefault("TRITON_DIST_SIM_SYMMETRIC_SIZE", "64M")
    from provenance import topology, topology_line

    rank, world = 0, 1
    if "sp" in parts or "ulysses" in parts or "sp_ag" in parts or not gpu:
        import torch.distributed as dist

        import triton_dist.utils as tdu

        tdu.initialize_distributed()
        rank, world = dist.get_rank(), dist.get_world_size()
        sp_page = pages[0]
        if "sp" in parts and sp_len % (world * sp_page):
            ap.error(f"--sp-len: {sp_len} tokens do not cut into {world} slices of whole {sp_page}-token pages")
        for L in sp_ag_lens if "sp_ag" in parts else ():
            if L % world:
                ap.error(f"--sp-ag-lens: {L} tokens do not cut into {world} equal chunks")
    elif torch.cuda.is_available():
        torch.cuda.set_device(0)
    topo = topology()
    shared = bool(topo.get("shared_gpu"))
    say = (lambda s: print(s, flush=True)) if rank == 0 else (lambda s: None)
    say(f"bench_attention: {topology_line(topo)}")
    if gpu:
        say("bench_attention: us per call (max over ranks); graph: CUDA-graph replay (* eager: capture failed); "
            "x B: B's time / ours (> 1: ours faster), graph against graph, eager against eager")
    records, stamp = [], harness.utc_stamp()
    ceiling = None
    if "decode" in parts or "prefill" in parts:
        if "decode" in parts:
            ceiling = read_ceiling(gpu)
            if gpu:
                say(f"bench_attention: read ceiling {ceiling['read_ceiling_gbs']:.0f} GB/s (torch.sum over 4 GiB "
                    f"bf16, bytes read / time); copy {ceiling['copy_gbs']:.0f} GB/s ((read + write) / time)")
            for L in dlens:
                for B in batches:
                    for page in pages:
                        rec = bench_decode(B, L, page, heads, gpu, ceiling, variants=variants)
                        records.append(rec)
                        for line in decode_lines(rec):
                            say(line)
                        if gpu:
                            torch.cuda.empty_cache()
        if "prefill" in parts:
            for L in plens:
                rec = bench_prefill(L, heads, gpu)
                records.append(rec)
                for line in prefill_lines(rec):
                    say(line)
                if gpu:
                    torch.cuda.empty_cache()
    trace_records = []
    if trace_dir:
        os.makedirs(trace_dir, exist_ok=True)
        for L in trace_lens:
            for B in trace_batches:
                for name, kv in [("ours", None)] + variants:
                    try:
                        rec = trace_decode(B, L, pages[0], heads, gpu, trace_dir, stamp, name=name, kv=kv)
                    except Exception as exc:  # noqa: BLE001 (the other shapes still get their trace)
                        key = "ours" if name == "ours" else f"ours/{name}"
                        rec = {"batch": B, "tokens": L, "variant": name,
                               "errors": {key: f"{type(exc).__name__}: {exc}"[:300]}}
                        say(f"decode-trace B={B} L={L} {name}: FAILED {rec['errors'][key]}")
                    else:
                        for line in trace_lines(rec):
                            say(line)
                    rec["part"] = "decode-trace"
                    trace_records.append(rec)
                    if gpu:
                        torch.cuda.empty_cache()
    sp_records = []
    if "sp" in parts:
        for B in batches:
            rec = bench_sp(B, sp_len, pages[0], heads, rank, world, gpu)
            sp_records.append(rec)
            for line in sp_lines(rec, shared):
                say(line)
            if gpu:
                torch.cuda.empty_cache()
    ulysses_records = []
    if "ulysses" in parts:
        for L in ulens:
            rec = bench_ulysses(L, heads, rank, world, gpu, shared)
            ulysses_records.append(rec)
            for line in ulysses_lines(rec):
                say(line)
            if gpu:
                torch.cuda.empty_cache()
    if "sp_ag" in parts:
        for L in sp_ag_lens:
            rec = bench_sp_ag(t.get("sp_ag_batch", SP_AG_BATCH), L, heads, rank, world, gpu, shared)
            sp_records.append(rec)
            for line in sp_ag_lines(rec, shared):
                say(line)
            if gpu:
                torch.cuda.empty_cache()
    failed = sorted({f"{r['part']}:{n}" for r in records + sp_records + ulysses_records + trace_records
                     for n in r["errors"] if n.startswith(("ours", "sp_flash_decode", "pre"))})
    timing = ("CUDA-graph replay of calls_per_sample calls (us; graphed false: eager), interleaved per row, and "
              "eager calls (eager_us); median of samples, max over ranks" if gpu else
              "none: the simulator (CPU), checks only, nothing timed")
    if rank == 0:
        for name, recs in (("attention", records), ("attention_sp", sp_records),
                           ("attention_ulysses", ulysses_records)):
            if not recs:
                continue
            doc = harness.result_header("bench_attention", topo=topo, stamp=stamp, timing=timing, targets=TARGETS,
                                        parts=sorted({r["part"] for r in recs}), records=recs)
            if name == "attention" and ceiling is not None:
                doc["hbm"] = ceiling
            doc["graph_failures"] = harness.GRAPH_FAILURES
            path = harness.write_json(os.path.join(harness.results_dir(args.out), f"{name}-{stamp}.json"), doc)
            say(f"bench_attention: wrote {path}")
        if trace_records:
            doc = harness.result_header("bench_attention", topo=topo, stamp=stamp, timing=timing,
                                        parts=["decode-trace"], records=trace_records,
                                        trace="one profiled flash_decode call per record (triton_dist.tools.profiler; "
                                              "docs/attention.md, 'Profiling the decode'); times in us from the "
                                              "device's global timer")
            path = harness.write_json(os.path.join(trace_dir, f"decode-trace-{stamp}.json"), doc)
            say(f"bench_attention: wrote {path} and {len(trace_records)} traces beside it")
        for f in harness.GRAPH_FAILURES:
            say(f"bench_attention: graph capture failed: {f['impl']}: {f['error']}")
        if failed:
            say(f"bench_attention: FAILED the checks: {', '.join(failed)}")
    if harness.distributed():
        import torch.distributed as dist

        dist.barrier()
    if failed:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
