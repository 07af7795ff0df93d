"""Attention family, local kernels (one device; the sequence-parallel ops build on them): decode attention over a
paged KV cache (:func:`flash_decode`, split-KV "flash-decoding") and the merge of attention partials by their
log-sum-exp (:func:`merge_attention_partials`). Device code: :mod:`triton_dist.kernels.flash_decode`.

The paged KV cache (this layout throughout the family; the one vLLM-style serving engines page their caches in):

* ``k_cache``, ``v_cache``: ``[num_pages, page_size, Hkv, D]``, one dtype with ``q``; ``page_size`` a power of two
  (1, 16, 64, ...), the head dimension with unit stride (other strides free; K and V may differ);
* ``block_table [B, max_pages]`` int32, unit stride along the pages: request ``b``'s token ``t`` is slot ``t %
  page_size`` of page ``block_table[b, t // page_size]`` (pages in any order; entries past the request's length are
  never read);
* ``seq_lens [B]`` int32: request ``b`` attends to its tokens ``0 .. seq_lens[b] - 1`` (0 allowed).

What is computed, per request ``b`` and query head ``h`` (kv head ``h // (Hq / Hkv)``: GQA), in fp32: scores ``s_t =
scale * q[b, h] . k_t`` over the request's tokens, ``out[b, h] = sum_t softmax(s)_t v_t`` (rounded once to ``q``'s
dtype) and ``lse[b, h] = log(sum_t exp(s_t))`` (natural log of the *scaled* scores, fp32). A request without tokens
gets ``out = 0`` and ``lse = -inf``. These ``(out, lse)`` pairs are what :func:`merge_attention_partials` combines:
attention over the union of disjoint token sets is the LSE-weighted merge of the attentions over each set.

Nothing about ``seq_lens`` or ``block_table`` is read on the host at launch (the grid and the number of splits
depend on shapes and the device only), so a call can be captured into a CUDA graph; the optional host check of the
lengths (``check_lens``) is skipped inside a capture and under torch.compile. Every op is also registered as
``torch.ops.triton_dist.<op>`` with a fake implementation, emitted by the functions here under torch.compile.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional, Tuple

import torch
import triton

from ..kernels.flash_decode import PROFILE_GROUPS, RECORDS_PER_TRACK, flash_decode_split_kernel, \
    merge_partials_kernel
from ..kernels.gemm_config import num_sms
from .. import profiler_layout
from ..runtime.dtypes import HALF_DTYPES, dtype_names
from ..runtime.occupancy import SM_LIMITS, programs_per_sm
from .context import capturing as _capturing
from .context import check_eager_only, traced_result

#: head dimensions :func:`flash_decode` takes
DECODE_HEAD_DIMS = (64, 128)
#: dtypes :func:`merge_attention_partials` takes for the partial outputs (the LSEs are float32)
MERGE_DTYPES = (torch.float32, ) + HALF_DTYPES
#: ceiling of the splits per (request, kv head) that :func:`pick_num_splits` chooses
MAX_SPLITS = 256
#: a split streams at least this many tiles of the longest possible request (amortises its fixed costs: the query
#: load, the pipeline's fill, the partial's write and merge)
MIN_TILES_PER_SPLIT = 4
#: what :func:`pick_num_splits` aims a split at: about this many tiles of the longest possible request (2,048 tokens
#: at 128-token tiles), so that programs are short and the hardware scheduler balances them over the SMs
TARGET_TILES_PER_SPLIT = 16
#: and at least this many programs per SM (short requests, small batches: every SM streams)
PROGRAMS_PER_SM = 4


#: the K / V element offsets that 32-bit arithmetic covers: below this, :func:`flash_decode` computes the row offsets
#: of the paged caches in int32 (:func:`kv_offsets_fit_int32`)
INT32_OFFSETS_LIMIT = 2 ** 31


@dataclass(frozen=True)
class DecodeConfig:
    """Launch choices of :func:`flash_decode`'s split kernel: ``BLOCK_N`` tokens per tile (a power of two >= 16),
    ``BLOCK_G`` query rows per MMA (a power of two >= 16 and >= the GQA group), warps and pipeline stages.

    ``wide_offsets`` (default False): False computes the K / V row offsets in int32 wherever every element offset
    of both caches is below 2**31 (:func:`kv_offsets_fit_int32`; else int64); True always in int64, the former code.
    Same results either way; at the default tiles on sm_90 int32 takes the split kernel from 189 to 126 registers a
    thread, i.e. from 2 to 3 programs per SM (docs/attention.md, "Occupancy and the split rule").

    ``resident`` (default 0): 0 sizes the grid by :func:`pick_num_splits`' fill rule (at least
    :data:`PROGRAMS_PER_SM` programs per SM, splits of about :data:`TARGET_TILES_PER_SPLIT` tiles); ``N > 0`` sizes
    it in whole waves of ``N`` programs resident per SM (:func:`pick_num_splits` with ``resident=N``; 3 is what
    ptxas gives the default tiles on sm_90). Ignored when the call passes ``num_splits``.

    ``merge_block_s`` (default 0): splits the merge kernel reads per step (a power of two; 0: the rule, at most 16
    on a GPU). Each step is one round trip to L2 that the next waits for (its loop is not pipelined), so at 64
    splits the rule's 16 make 1 + 4 + 4 dependent loads a merge program, 64 make 1 + 1 + 1. The fused merge sizes
    its own steps.

    ``fused_merge`` (default False; opt-in, not yet measured on a GPU): one launch instead of two. Each split
    program, after writing its partial, increments an arrival counter of its (request, kv head) (an int32 workspace
    per device: :func:`arrival_counters`), and the program that arrives last merges that kv head's query rows itself
    (the merge kernel's math) and resets the counter to 0. Needs more than one split (with one, the split kernel
    writes ``out`` / ``lse`` itself either way). docs/attention.md, "The fused merge"."""
    BLOCK_N: int
    BLOCK_G: int
    num_warps: int = 4
    num_stages: int = 3
    fused_merge: bool = False
    wide_offsets: bool = False
    resident: int = 0
    merge_block_s: int = 0


def pick_decode_config(head_dim: int, group: int, *, on_gpu: bool) -> DecodeConfig:
    """:func:`flash_decode`'s tiling. ``BLOCK_G = max(16, next_pow2(group))`` (decode is bound by the K/V bytes: the
    padding rows cost tensor-core time, never bandwidth; on sm_90 a 16-row dot is mma.sync, 64 rows would be wgmma).
    On a GPU ``BLOCK_N = 128``, 4 warps, ``num_stages = 3``: Triton's pipeliner copies each tile's K and V (2 x 32
    KiB at ``D = 128``, 16-byte asynchronous copies) into one buffer each, the page ids one tile further ahead (the
    K/V addresses depend on them): the next tile's copy is issued once the current tile's dots have read the buffer
    (kernels.flash_decode, module docstring). 72.5 KiB of shared memory a program at ``D = 128``; with the int32 row
    offsets (``DecodeConfig.wide_offsets`` False, caches below 2**31 elements) 126 registers a thread, so three
    programs share an SM (189 registers and two with int64 offsets). Measured on one H200 (2026-12-06, bench_attention
    ``--decode-variants``, 32K tokens, 32 q / 8 kv heads, page 16, CUDA-graph replay): 128-token tiles took 48.5 /
    263.8 us at batch 1 / 8 against 54.0 / 284.1 with 64-token tiles (8 warps, 4 stages: no gain). The interpreter:
    16-token tiles (each tile is numpy work: small tiles keep the tests fast)."""
    block_g = max(16, triton.next_power_of_2(group))
    if not on_gpu:
        return DecodeConfig(16, block_g, 4, 1)
    return DecodeConfig(128, block_g, 4, 3)


def pick_num_splits(batch: int, num_kv_heads: int, max_len: int, sms: int, block_n: int, *,
                    resident: int = 0) -> int:
    """Splits per ``(request, kv head)`` from what the host knows (shapes and the device, never the lengths), for
    the longest possible request (``max_len = max_pages * page_size`` tokens, ``tiles = cdiv(max_len, block_n)``).

    ``resident == 0`` (the default, the fill rule): the larger of ``cdiv(tiles, TARGET_TILES_PER_SPLIT)`` (short
    programs: whatever the number of programs resident per SM, the wave in which they run out lasts one short
    program, not a long one) and ``cdiv(PROGRAMS_PER_SM * sms, batch * num_kv_heads)`` (``sms``: this rank's; enough
    programs for every SM), then at most ``cdiv(tiles, MIN_TILES_PER_SPLIT)`` and :data:`MAX_SPLITS`; at least 1.
    The cost of more splits is the partials' write and merge: ``4 * Hq * D`` bytes a split of
    ``TARGET_TILES_PER_SPLIT * block_n * Hkv * D * 4`` K/V bytes, under 1% at GQA 4, D 128, 128-token tiles.

    ``resident > 0`` (the waves rule: ``resident`` programs of the split kernel fit an SM, ``slots = resident *
    sms``): the splits of :data:`TARGET_TILES_PER_SPLIT` tiles need ``waves = cdiv(programs, slots)`` waves; the
    rule then takes the fewest tiles per split (at least :data:`MIN_TILES_PER_SPLIT`) whose ``batch *
    num_kv_heads * cdiv(tiles, per_split)`` programs still fit those waves, and returns ``cdiv(tiles, per_split)``
    (every split holds tokens of the longest request; at most :data:`MAX_SPLITS`). So the last wave is as full as
    the tile counts allow instead of a fraction of one: at 132 SMs x 3, 8 kv heads and 128-token tiles, batch 1 at
    32K tokens gets 43 splits (344 programs of 6 tiles, one wave) where the fill rule gives 64 (512 programs of 4
    tiles, 1.3 waves)."""
    tiles = triton.cdiv(max(max_len, 0), block_n)
    rows = max(batch * num_kv_heads, 1)
    if resident > 0:
        if tiles <= 1:
            return 1
        slots = resident * max(sms, 1)
        per_floor = max(1, triton.cdiv(tiles, MAX_SPLITS))  # shorter splits would be more than MAX_SPLITS
        per = max(min(TARGET_TILES_PER_SPLIT, tiles), per_floor)
        waves = triton.cdiv(rows * triton.cdiv(tiles, per), slots)
        lo = max(min(MIN_TILES_PER_SPLIT, tiles), per_floor)
        while per > lo and rows * triton.cdiv(tiles, per - 1) <= waves * slots:
            per -= 1
        return max(1, min(triton.cdiv(tiles, per), MAX_SPLITS))
    fill = triton.cdiv(PROGRAMS_PER_SM * max(sms, 1), rows)
    want = max(fill, triton.cdiv(tiles, TARGET_TILES_PER_SPLIT))
    return max(1, min(want, triton.cdiv(tiles, MIN_TILES_PER_SPLIT), MAX_SPLITS))


def max_element_offset(t: torch.Tensor) -> int:
    """The largest element offset of ``t`` from its first element (``sum((size - 1) * stride)``; -1 when empty)."""
    if t.numel() == 0:
        return -1
    return sum((n - 1) * st for n, st in zip(t.shape, t.stride()))


def kv_offsets_fit_int32(k_cache: torch.Tensor, v_cache: torch.Tensor) -> bool:
    """Whether every element offset of both caches is below :data:`INT32_OFFSETS_LIMIT` (2**31), so that the split
    kernel may compute ``page * stride_page + slot * stride_slot + d`` in int32 (``KV_I32``): page ids are clamped
    to the cache on the device, so no offset it forms exceeds :func:`max_element_offset` whatever the block table
    holds. ``[num_pages, 16, 8, 128]`` caches fit up to 131,072 pages (2M tokens; 4 GiB each in bf16)."""
    return max(max_element_offset(k_cache), max_element_offset(v_cache)) < INT32_OFFSETS_LIMIT


#: the compiled split kernel of this process's last :func:`flash_decode` launch (None on the interpreter):
#: :func:`last_split_kernel_resources`
_LAST_SPLIT: dict = {"kernel": None}


def last_split_kernel_resources() -> Optional[dict]:
    """What the split kernel of this process's last :func:`flash_decode` call was compiled to: ``{"regs",
    "spills", "shared", "num_warps", "num_stages", "programs_per_sm", "bound_by"}`` (ptxas' registers a thread and
    spills, shared memory a program in bytes; ``runtime.occupancy.programs_per_sm`` for the kernel's compute
    capability, None where that has no limits entry); None before any compiled launch (the interpreter compiles
    nothing). For benchmarks and traces: the device's ptxas may differ from the one a CPU checkout compiles with."""
    kernel = _LAST_SPLIT["kernel"]
    regs = getattr(kernel, "n_regs", None)
    if kernel is None or regs is None:
        return None
    md = kernel.metadata
    cap = getattr(getattr(md, "target", None), "arch", None)
    per_sm, by = programs_per_sm(regs, md.shared, md.num_warps, cap) if cap in SM_LIMITS else (None, None)
    return {"regs": regs, "spills": getattr(kernel, "n_spills", None), "shared": md.shared,
            "num_warps": md.num_warps, "num_stages": md.num_stages, "programs_per_sm": per_sm, "bound_by": by}


#: the fused merge's arrival counters: one int32 workspace per device (:func:`arrival_counters`)
_ARRIVALS: dict = {}
#: workspaces replaced by larger ones, kept alive: a CUDA graph that captured a call still points at its workspace
_RETIRED_ARRIVALS: list = []
#: the smallest arrival-counter workspace allocated (requests x kv heads): 4 KiB, so that one serves most shapes
MIN_ARRIVAL_COUNTERS = 1024


def arrival_counters(op: str, device, n: int) -> torch.Tensor:
    """The fused merge's arrival counters on ``device``: an int32 tensor of at least ``n`` elements that are 0
    (zeroed when allocated; every fused launch leaves them 0). Cached per device and grown on demand (to the next
    power of two, at least :data:`MIN_ARRIVAL_COUNTERS`); a replaced workspace is kept alive, since CUDA graphs may
    hold its address. Growing allocates, which a CUDA-graph capture cannot: inside a capture a call that needs a larger
    workspace raises RuntimeError (make the call once outside the capture first). One workspace per device: fused
    calls that may run concurrently on several streams of one device would share counters (not supported)."""
    device = torch.device(device)
    buf = _ARRIVALS.get(device)
    if buf is not None and buf.numel() >= n:
        return buf
    if _capturing():
        raise RuntimeError(f"{op}: the fused merge needs {n} arrival counters on {device} and has "
                           f"{0 if buf is None else buf.numel()}: they cannot be allocated inside CUDA-graph capture; "
                           f"make this call (same batch and kv heads, fused_merge) once outside the capture first")
    if buf is not None:
        _RETIRED_ARRIVALS.append(buf)
    buf = torch.zeros((max(MIN_ARRIVAL_COUNTERS, triton.next_power_of_2(n)), ), dtype=torch.int32, device=device)
    _ARRIVALS[device] = buf
    return buf


#: the fused merge's register budget: elements of one step's ``[rows, splits, D]`` fp32 partials (32 a thread at
#: 4 warps), so that the merge after the token loop does not raise the split kernel's register count much
FUSED_MERGE_STEP_ELEMS = 4096


def _fused_merge_blocks(group: int, D: int, num_splits: int) -> dict:
    """The fused merge's tiles (``kernels.flash_decode.merge_lse_group``): all ``group`` rows at once (a power of two
    >= the group), the LSE maximum over up to 1,024 / rows splits a step, the weighted sum over as many splits as
    :data:`FUSED_MERGE_STEP_ELEMS` allows (1 to 16)."""
    rows = triton.next_power_of_2(max(group, 1))
    splits = triton.next_power_of_2(max(num_splits, 1))
    return {"BLOCK_GM": rows, "MERGE_BLOCK_SM": min(splits, max(1, 1024 // rows)),
            "MERGE_BLOCK_S": min(splits, 16, max(1, FUSED_MERGE_STEP_ELEMS // (rows * D)))}


def _merge_block_s(num_parts: int, on_gpu: bool) -> int:
    """Partials a step of the merge kernel reads at once (its ``BLOCK_S``; the fused merge sizes its own steps:
    :func:`_fused_merge_blocks`)."""
    return min(triton.next_power_of_2(num_parts), 16 if on_gpu else 8)


def _is_pow2(n: int) -> bool:
    return n >= 1 and n & (n - 1) == 0


def check_decode_operands(op: str, q, k_cache, v_cache, block_table, seq_lens) -> None:
    """Host checks of :func:`flash_decode`'s operands (shapes, dtypes, devices, layouts; not the values of
    ``seq_lens`` / ``block_table``: :func:`check_decode_lens`). Raises a one-line ValueError naming ``op``, the bad
    value and what is accepted."""
    for name, t in (("q", q), ("k_cache", k_cache), ("v_cache", v_cache), ("block_table", block_table),
                    ("seq_lens", seq_lens)):
        if not isinstance(t, torch.Tensor):
            raise ValueError(f"{op}: {name} must be a torch.Tensor, got {type(t).__name__}")
    if q.dim() != 3:
        raise ValueError(f"{op}: q must be 3-D [B, Hq, D] (one query token per request), got shape {tuple(q.shape)}")
    for name, t in (("k_cache", k_cache), ("v_cache", v_cache)):
        if t.dim() != 4:
            raise ValueError(f"{op}: {name} must be 4-D [num_pages, page_size, Hkv, D], got shape {tuple(t.shape)}")
    if q.dtype not in HALF_DTYPES:
        raise ValueError(f"{op}: q.dtype={q.dtype} is not supported; accepted: {dtype_names(HALF_DTYPES)}")
    for name, t in (("k_cache", k_cache), ("v_cache", v_cache)):
        if t.dtype != q.dtype:
            raise ValueError(f"{op}: {name}.dtype={t.dtype} differs from q.dtype={q.dtype}")
    if tuple(k_cache.shape) != tuple(v_cache.shape):
        raise ValueError(f"{op}: k_cache {tuple(k_cache.shape)} and v_cache {tuple(v_cache.shape)} differ in shape")
    B, Hq, D = q.shape
    num_pages, page_size, Hkv, Dk = k_cache.shape
    if D not in DECODE_HEAD_DIMS:
        raise ValueError(f"{op}: head dim D={D} is not supported; accepted: {', '.join(map(str, DECODE_HEAD_DIMS))}")
    if Dk != D:
        raise ValueError(f"{op}: the caches' head dim {Dk} differs from q's D={D}")
    if Hkv < 1 or Hq % Hkv:
        raise ValueError(f"{op}: Hq={Hq} query heads must be a positive multiple of the caches' Hkv={Hkv} kv heads")
    if not _is_pow2(page_size):
        raise ValueError(f"{op}: page_size={page_size} (k_cache.shape[1]) must be a power of two >= 1")
    if num_pages < 1:
        raise ValueError(f"{op}: the caches have no pages (shape {tuple(k_cache.shape)})")
    for name, t in (("q", q), ("k_cache", k_cache), ("v_cache", v_cache)):
        if t.stride(-1) != 1:
            raise ValueError(f"{op}: {name} needs a unit stride along the head dim (strides {tuple(t.stride())}; "
                             f"call .contiguous())")
    if block_table.dim() != 2 or block_table.dtype != torch.int32 or block_table.shape[0] != B:
        raise ValueError(f"{op}: block_table must be int32 [B={B}, max_pages], got {block_table.dtype} "
                         f"{tuple(block_table.shape)}")
    if block_table.shape[1] > 1 and block_table.stride(1) != 1:
        raise ValueError(f"{op}: block_table needs a unit stride along the pages (strides "
                         f"{tuple(block_table.stride())}; call .contiguous())")
    if seq_lens.dim() != 1 or seq_lens.dtype != torch.int32 or seq_lens.shape[0] != B:
        raise ValueError(f"{op}: seq_lens must be int32 [B={B}], got {seq_lens.dtype} {tuple(seq_lens.shape)}")
    for name, t in (("k_cache", k_cache), ("v_cache", v_cache), ("block_table", block_table),
                    ("seq_lens", seq_lens)):
        if t.device != q.device:
            raise ValueError(f"{op}: {name} is on {t.device}, q on {q.device}")


def check_decode_lens(op: str, seq_lens, block_table, page_size: int, num_pages: int) -> None:
    """The values: every ``seq_lens[b]`` in ``[0, max_pages * page_size]`` and every page id those tokens use in
    ``[0, num_pages)`` (reads both tensors: one device synchronisation). ValueError naming the first bad request."""
    lens = seq_lens.detach().to("cpu").to(torch.int64)
    capacity = block_table.shape[1] * page_size
    bad = ((lens < 0) | (lens > capacity)).nonzero()
    if bad.numel():
        b = int(bad[0, 0])
        raise ValueError(f"{op}: seq_lens[{b}]={int(lens[b])} is outside [0, {capacity}] (block_table's "
                         f"{block_table.shape[1]} pages of {page_size} tokens)")
    used = (lens + page_size - 1) // page_size
    table = block_table.detach().to("cpu").to(torch.int64)
    in_use = torch.arange(table.shape[1])[None, :] < used[:, None]
    bad = (in_use & ((table < 0) | (table >= num_pages))).nonzero()
    if bad.numel():
        b, p = int(bad[0, 0]), int(bad[0, 1])
        raise ValueError(f"{op}: block_table[{b}, {p}]={int(table[b, p])} is not a page id in [0, {num_pages}) "
                         f"(request {b} has {int(lens[b])} tokens)")


def _check_scale(op: str, scale) -> float:
    if isinstance(scale, bool) or not isinstance(scale, (int, float)) or not math.isfinite(scale):
        raise ValueError(f"{op}: scale must be a finite number, got {scale!r}")
    return float(scale)


def _check_out(op: str, out, shape, dtypes, device) -> None:
    if not isinstance(out, torch.Tensor) or tuple(out.shape) != tuple(shape) or out.dtype not in dtypes or \
            out.device != device or out.stride(-1) != 1:
        raise ValueError(f"{op}: out must be a {dtype_names(dtypes)} {list(shape)} tensor on {device} with unit "
                         f"stride along the head dim, got {getattr(out, 'dtype', type(out).__name__)} "
                         f"{tuple(getattr(out, 'shape', ()))}")


def flash_decode(q, k_cache, v_cache, block_table, seq_lens, *, scale: Optional[float] = None,
                 num_splits: Optional[int] = None, out=None, return_lse: bool = True, check_lens: bool = True,
                 config: Optional[DecodeConfig] = None, lse=None, profiler_buffer=None):
    """Decode attention of one query token per request over a paged KV cache (the layout and the exact semantics
    of ``out`` / ``lse``: module docstring); returns ``(out [B, Hq, D], lse [B, Hq])``, or ``out`` alone with
    ``return_lse=False``. ``out`` has ``q``'s dtype (bf16 / fp16; fp32 inside), ``lse`` is float32, natural log of
    the scaled scores.

    ``q [B, Hq, D]`` (D 64 or 128), ``k_cache`` / ``v_cache [num_pages, page_size, Hkv, D]`` (``Hq`` a multiple of
    ``Hkv``), ``block_table [B, max_pages]`` int32, ``seq_lens [B]`` int32, all on one device; ``scale`` multiplies
    the scores (default ``D ** -0.5``).

    Executed on ``q``'s device by two launches: the split kernel, one program per (request, kv head, split), each
    split a contiguous range of the request's tokens (all the kv head's query heads at once), writing a partial
    output and LSE to a workspace allocated per call; then the merge of the splits
    (:func:`merge_attention_partials`' kernel). With one split the first launch writes ``out`` and ``lse`` itself;
    with ``config.fused_merge`` (opt-in, :class:`DecodeConfig`) the last split of each (request, kv head) merges
    them in the same launch (one launch in all).
    ``num_splits`` (default :func:`pick_num_splits` from the batch, the kv heads, ``max_pages * page_size`` and the
    device's SMs: splits of about 2,048 tokens of the longest possible request) fixes the splits per request; splits
    past a request's tokens do nothing.

    ``check_lens`` (default True): read ``seq_lens`` and ``block_table`` on the host and refuse lengths outside
    ``[0, max_pages * page_size]`` or page ids outside the cache (:func:`check_decode_lens`: one synchronisation);
    skipped inside a CUDA-graph capture and under torch.compile. Whatever they hold, the kernels never access memory
    outside the tensors (lengths and page ids are clamped on the device). ``config``: a :class:`DecodeConfig`
    instead of :func:`pick_decode_config`'s. ``out``: a ``[B, Hq, D]`` tensor of ``q``'s dtype, or float32 (the
    partial kept unrounded, e.g. to merge it with other partials later: :func:`triton_dist.ops.attention_sp.
    sp_flash_decode`), to write (unit stride along D); ``lse``: a contiguous ``[B, Hq]`` float32 tensor to write the
    LSE into (default: a new one). ``profiler_buffer`` (default None: no profiling, nothing recorded or emitted): a
    profiler buffer (``triton_dist.tools.profiler.alloc_profiler_buffer(decode_profile_slots(q, k_cache,
    block_table, ...))``, reset before the call) into which both launches record their programs' tasks
    (``triton_dist.kernels.flash_decode.TASKS``: group 0 of the buffer's tracks the split kernel, group 1 the merge;
    docs/attention.md, "Profiling the decode"); it must be a 1-D int64 tensor on ``q``'s device with room for
    :func:`decode_profile_slots` records. Raises ValueError on bad input before any launch. Under torch.compile the
    call is the registered ``torch.ops.triton_dist.flash_decode`` (``config`` and ``profiler_buffer`` are refused
    there; ``out`` receives a copy)."""
    op = "flash_decode"
    check_decode_operands(op, q, k_cache, v_cache, block_table, seq_lens)
    B, Hq, D = q.shape
    num_pages, page_size, Hkv, _ = k_cache.shape
    scale = _check_scale(op, D ** -0.5 if scale is None else scale)
    if num_splits is not None and (isinstance(num_splits, bool) or not isinstance(num_splits, int) or
                                   num_splits < 1):
        raise ValueError(f"{op}: num_splits must be a positive int or None, got {num_splits!r}")
    if out is not None:
        _check_out(op, out, (B, Hq, D), (q.dtype, torch.float32), q.device)
    if lse is not None and (not isinstance(lse, torch.Tensor) or tuple(lse.shape) != (B, Hq) or
                            lse.dtype != torch.float32 or lse.device != q.device or not lse.is_contiguous()):
        raise ValueError(f"{op}: lse must be a contiguous float32 [{B}, {Hq}] tensor on {q.device}, got "
                         f"{getattr(lse, 'dtype', type(lse).__name__)} {tuple(getattr(lse, 'shape', ()))}")
    if torch.compiler.is_compiling():  # num_splits 0: the op picks (it reads the device's SM count)
        check_eager_only(op, config=config, profiler_buffer=profiler_buffer)
        res_out, res_lse = torch.ops.triton_dist.flash_decode(q, k_cache, v_cache, block_table, seq_lens, scale,
                                                              num_splits or 0)
        res_out = traced_result(res_out, out)
        res_lse = traced_result(res_lse, lse)
        return (res_out, res_lse) if return_lse else res_out
    cfg, num_splits = _launch_plan(op, q, k_cache, block_table, num_splits, config)
    max_len = block_table.shape[1] * page_size
    prof = _profile_args(op, profiler_buffer, q, Hkv, num_splits)
    if check_lens and not _capturing():
        check_decode_lens(op, seq_lens, block_table, page_size, num_pages)

    if out is None:
        out = torch.empty((B, Hq, D), dtype=q.dtype, device=q.device)
    if lse is None:
        lse = torch.empty((B, Hq), dtype=torch.float32, device=q.device)
    if B == 0:
        return (out, lse) if return_lse else out
    direct = num_splits == 1
    fused = {}
    if cfg.fused_merge and not direct:  # before any allocation or launch: inside a capture it may raise
        fused = {"counters_ptr": arrival_counters(op, q.device, B * Hkv), "FUSED_MERGE": True,
                 **_fused_merge_blocks(Hq // Hkv, D, num_splits)}
    if direct:
        part_out, part_lse = out, lse  # unused by the kernel
    else:
        part_out = torch.empty((B, Hq, num_splits, D), dtype=torch.float32, device=q.device)
        part_lse = torch.empty((B, Hq, num_splits), dtype=torch.float32, device=q.device)
    _LAST_SPLIT["kernel"] = flash_decode_split_kernel[(B * Hkv * num_splits, )](
        q, k_cache, v_cache, block_table, seq_lens, part_out, part_lse, out, lse, scale * math.log2(math.e), Hkv,
        num_splits, block_table.shape[1], num_pages, q.stride(0), q.stride(1), k_cache.stride(0), k_cache.stride(1),
        k_cache.stride(2), v_cache.stride(0), v_cache.stride(1), v_cache.stride(2), block_table.stride(0),
        out.stride(0), out.stride(1), G=Hq // Hkv, BLOCK_G=cfg.BLOCK_G, D=D, PAGE=page_size, BLOCK_N=cfg.BLOCK_N,
        DIRECT=direct, num_warps=cfg.num_warps, num_stages=cfg.num_stages,
        KV_I32=not cfg.wide_offsets and kv_offsets_fit_int32(k_cache, v_cache), **fused, **prof)
    if not direct and not fused:
        _launch_merge(part_out, part_lse, out, lse, seq_lens, num_parts=num_splits, heads=Hq, D=D,
                      part_strides=(D, Hq * num_splits * D, num_splits * D),
                      lse_strides=(1, Hq * num_splits, num_splits), from_splits=True, max_len=max_len,
                      split_block_n=cfg.BLOCK_N, prof=prof, block_s=cfg.merge_block_s)
    return (out, lse) if return_lse else out


def _launch_plan(op: str, q, k_cache, block_table, num_splits: Optional[int], config: Optional[DecodeConfig]):
    """``(config, num_splits)`` of a :func:`flash_decode` call whose operands passed the shape checks: ``config``
    or :func:`pick_decode_config`'s (checked), ``num_splits`` or :func:`pick_num_splits`'."""
    B, Hq, D = q.shape
    _, page_size, Hkv, _ = k_cache.shape
    G = Hq // Hkv
    cfg = config or pick_decode_config(D, G, on_gpu=q.device.type == "cuda")
    if not (_is_pow2(cfg.BLOCK_N) and cfg.BLOCK_N >= 16 and _is_pow2(cfg.BLOCK_G) and cfg.BLOCK_G >= max(16, G)):
        raise ValueError(f"{op}: config {cfg}: BLOCK_N and BLOCK_G must be powers of two >= 16, BLOCK_G >= the GQA "
                         f"group {G}")
    for name in ("fused_merge", "wide_offsets"):
        if not isinstance(getattr(cfg, name), bool):
            raise ValueError(f"{op}: config {cfg}: {name} must be a bool, got {getattr(cfg, name)!r}")
    if isinstance(cfg.resident, bool) or not isinstance(cfg.resident, int) or cfg.resident < 0:
        raise ValueError(f"{op}: config {cfg}: resident must be an int >= 0, got {cfg.resident!r}")
    mbs = cfg.merge_block_s
    if isinstance(mbs, bool) or not isinstance(mbs, int) or not (mbs == 0 or _is_pow2(mbs)):
        raise ValueError(f"{op}: config {cfg}: merge_block_s must be 0 (the rule) or a power of two, got {mbs!r}")
    if num_splits is None:
        num_splits = pick_num_splits(B, Hkv, block_table.shape[1] * page_size, num_sms(q.device), cfg.BLOCK_N,
                                     resident=cfg.resident)
    return cfg, num_splits


def _profile_blocks(batch: int, num_kv_heads: int, num_splits: int, group: int) -> int:
    """Tracks per profiler group of a call: the larger grid of the two launches (split: ``B * Hkv * num_splits``
    programs, merge: ``B * Hq = B * Hkv * G``)."""
    return max(1, batch * num_kv_heads * max(num_splits, group))


def _profile_slots(blocks: int) -> int:
    """Record slots of a call whose profiler groups have ``blocks`` tracks each."""
    return RECORDS_PER_TRACK * PROFILE_GROUPS * blocks


def decode_profile_slots(q, k_cache, block_table, *, num_splits: Optional[int] = None,
                         config: Optional[DecodeConfig] = None) -> int:
    """The record slots that :func:`flash_decode`'s ``profiler_buffer`` needs for a call with these operands and
    launch choices (the same ``num_splits`` / ``config`` as the call): ``alloc_profiler_buffer(decode_profile_slots(
    q, k_cache, block_table))``. Two groups (split, merge) of as many tracks as the larger launch's grid, each
    track room for :data:`~triton_dist.kernels.flash_decode.RECORDS_PER_TRACK` records. Reads shapes only."""
    op = "decode_profile_slots"
    for name, t, dims in (("q", q, 3), ("k_cache", k_cache, 4), ("block_table", block_table, 2)):
        if not isinstance(t, torch.Tensor) or t.dim() != dims:
            raise ValueError(f"{op}: {name} must be a {dims}-D torch.Tensor (flash_decode's operand), got "
                             f"{getattr(t, 'shape', type(t).__name__)}")
    B, Hq, _ = q.shape
    Hkv = k_cache.shape[2]
    if Hkv < 1 or Hq % Hkv:
        raise ValueError(f"{op}: Hq={Hq} query heads must be a positive multiple of the caches' Hkv={Hkv} kv heads")
    _, num_splits = _launch_plan(op, q, k_cache, block_table, num_splits, config)
    return _profile_slots(_profile_blocks(B, Hkv, num_splits, Hq // Hkv))


def _profile_args(op: str, profiler_buffer, q, Hkv: int, num_splits: int) -> dict:
    """The profiling keywords of both launches (none without a buffer: the kernels' defaults, profiling off), after
    checking the buffer (ValueError)."""
    if profiler_buffer is None:
        return {}
    B, Hq, _ = q.shape
    blocks = _profile_blocks(B, Hkv, num_splits, Hq // Hkv)
    need = profiler_layout.words_for_slots(_profile_slots(blocks))
    if not isinstance(profiler_buffer, torch.Tensor) or profiler_buffer.dtype != torch.int64 or \
            profiler_buffer.dim() != 1 or profiler_buffer.device != q.device or profiler_buffer.numel() < need:
        raise ValueError(f"{op}: profiler_buffer must be a 1-D int64 tensor on {q.device} of at least {need} words "
                         f"(alloc_profiler_buffer(decode_profile_slots(q, k_cache, block_table, ...))), got "
                         f"{getattr(profiler_buffer, 'dtype', type(profiler_buffer).__name__)} "
                         f"{tuple(getattr(profiler_buffer, 'shape', ()))}"
                         f"{' on ' + str(profiler_buffer.device) if isinstance(profiler_buffer, torch.Tensor) else ''}")
    return {"prof_ptr": profiler_buffer, "prof_blocks": blocks, "PROFILE": True}


def _launch_merge(parts, lses, out, lse, seq_lens, *, num_parts: int, heads: int, D: int, part_strides, lse_strides,
                  from_splits: bool, max_len: int = 0, split_block_n: int = 16, prof=None, block_s: int = 0) -> None:
    """The merge kernel over ``B * heads`` rows; ``block_s``: partials a step (0: :func:`_merge_block_s`'s rule;
    never more than ``next_pow2(num_parts)``)."""
    B = out.shape[0]
    if B * heads == 0:
        return
    if block_s:
        block_s = min(block_s, triton.next_power_of_2(num_parts))
    else:
        block_s = _merge_block_s(num_parts, out.device.type == "cuda")
    merge_partials_kernel[(B * heads, )](
        parts, lses, out, lse, seq_lens if seq_lens is not None else lse, num_parts, heads, D, max_len,
        *part_strides, *lse_strides, out.stride(0), out.stride(1), BLOCK_S=block_s,
        BLOCK_D=triton.next_power_of_2(D), FROM_SPLITS=from_splits, SPLIT_BLOCK_N=split_block_n, num_warps=4,
        **(prof or {}))


def check_merge_operands(op: str, outs, lses) -> None:
    """Host checks of :func:`merge_attention_partials`' operands (one-line ValueError)."""
    for name, t in (("outs", outs), ("lses", lses)):
        if not isinstance(t, torch.Tensor):
            raise ValueError(f"{op}: {name} must be a torch.Tensor, got {type(t).__name__}")
    if outs.dim() != 4:
        raise ValueError(f"{op}: outs must be 4-D [S, B, H, D] (S partials), got shape {tuple(outs.shape)}")
    S, B, H, D = outs.shape
    if tuple(lses.shape) != (S, B, H) or lses.dtype != torch.float32:
        raise ValueError(f"{op}: lses must be float32 [S={S}, B={B}, H={H}], got {lses.dtype} {tuple(lses.shape)}")
    if outs.dtype not in MERGE_DTYPES:
        raise ValueError(f"{op}: outs.dtype={outs.dtype} is not supported; accepted: {dtype_names(MERGE_DTYPES)}")
    if S < 1 or D < 1:
        raise ValueError(f"{op}: outs {tuple(outs.shape)} holds no partial (S={S}) or no head dim (D={D})")
    if outs.stride(-1) != 1:
        raise ValueError(f"{op}: outs needs a unit stride along D (strides {tuple(outs.stride())}; call .contiguous())")
    if lses.device != outs.device:
        raise ValueError(f"{op}: lses is on {lses.device}, outs on {outs.device}")


def merge_attention_partials(outs, lses, *, out=None, out_dtype: Optional[torch.dtype] = None):
    """Merge ``S`` attention partials over disjoint token sets into the attention over their union; returns ``(out [B,
    H, D], lse [B, H] float32)``.

    ``outs [S, B, H, D]`` (fp32, bf16 or fp16; unit stride along D): each partial's *normalised* output (softmax over
    its own tokens); ``lses [S, B, H]`` float32: each partial's natural-log log-sum-exp of its scaled scores
    (:func:`flash_decode`'s ``lse``), ``-inf`` for a partial without tokens (its output is then not read: it may hold
    anything, NaN included). ``out = sum_s exp(lse_s - m) outs[s] / sum_s exp(lse_s - m)`` and ``lse = m + log(sum_s
    exp(lse_s - m))`` with ``m = max_s lse_s``, in fp32; rows whose partials are all empty get 0 and ``-inf``. LSEs
    must be finite or ``-inf``. ``out`` (optional): a ``[B, H, D]`` tensor to write (unit stride along D), else one
    of ``out_dtype`` (default ``outs.dtype``). Executed by one launch on ``outs``' device, one program per (b, h).
    Under torch.compile the call is the registered ``torch.ops.triton_dist.merge_attention_partials``."""
    op = "merge_attention_partials"
    check_merge_operands(op, outs, lses)
    S, B, H, D = outs.shape
    if out is not None:
        _check_out(op, out, (B, H, D), MERGE_DTYPES, outs.device)
        out_dtype = out.dtype
    out_dtype = out_dtype or outs.dtype
    if out_dtype not in MERGE_DTYPES:
        raise ValueError(f"{op}: out_dtype={out_dtype} is not supported; accepted: {dtype_names(MERGE_DTYPES)}")
    if torch.compiler.is_compiling():
        res_out, res_lse = torch.ops.triton_dist.merge_attention_partials(outs, lses, out_dtype)
        return traced_result(res_out, out), res_lse
    if out is None:
        out = torch.empty((B, H, D), dtype=out_dtype, device=outs.device)
    lse = torch.empty((B, H), dtype=torch.float32, device=outs.device)
    _launch_merge(outs, lses, out, lse, None, num_parts=S, heads=H, D=D, part_strides=tuple(outs.stride()[:3]),
                  lse_strides=tuple(lses.stride()), from_splits=False)
    return out, lse


def flash_decode_reference(q, k_cache, v_cache, block_table, seq_lens, *, scale: Optional[float] = None
                           ) -> Tuple[torch.Tensor, torch.Tensor]:
    """What :func:`flash_decode` computes, in plain fp32 torch (gather each request's pages, softmax, matmul): ``(out
    [B, Hq, D] float32, lse [B, Hq] float32)``. For tests and benchmarks."""
    B, Hq, D = q.shape
    _, page_size, Hkv, _ = k_cache.shape
    scale = D ** -0.5 if scale is None else scale
    out = torch.zeros((B, Hq, D), dtype=torch.float32, device=q.device)
    lse = torch.full((B, Hq), float("-inf"), dtype=torch.float32, device=q.device)
    for b in range(B):
        n = int(seq_lens[b])
        if n == 0:
            continue
        pages = block_table[b, :triton.cdiv(n, page_size)].long()
        k = k_cache[pages].reshape(-1, Hkv, D)[:n].float()  # [n, Hkv, D]
        v = v_cache[pages].reshape(-1, Hkv, D)[:n].float()
        k = k.repeat_interleave(Hq // Hkv, dim=1)  # [n, Hq, D]: query head h reads kv head h // G
        v = v.repeat_interleave(Hq // Hkv, dim=1)
        s = torch.einsum("hd,nhd->hn", q[b].float(), k) * scale
        lse[b] = torch.logsumexp(s, dim=1)
        out[b] = torch.einsum("hn,nhd->hd", torch.softmax(s, dim=1), v)
    return out, lse


__all__ = ["DecodeConfig", "flash_decode", "merge_attention_partials", "flash_decode_reference", "pick_num_splits",
           "kv_offsets_fit_int32", "max_element_offset", "last_split_kernel_resources", "INT32_OFFSETS_LIMIT",
           "decode_profile_slots", "arrival_counters", "pick_decode_config", "check_decode_operands",
           "check_decode_lens", "check_merge_operands", "DECODE_HEAD_DIMS", "MERGE_DTYPES"]
