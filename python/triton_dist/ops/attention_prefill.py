"""Prefill flash attention on one device, over K/V that may be one chunk of a longer sequence
(:mod:`triton_dist.kernels.flash_attention`; issue 41's local kernel under sequence-parallel attention).

``flash_attention(q, k, v)`` is softmax attention with ``q [B, Lq, Hq, D]`` and ``k, v [B, Lkv, Hkv, D]`` (batch,
sequence, head, head dim; grouped-query attention when ``Hkv < Hq``). ``q_start`` / ``kv_start`` place the query and
key rows at global positions, so causal masking works between chunks of one sequence, and ``return_lse=True`` returns
each row's log-sum-exp, with which :func:`merge_chunk_partials` combines the results of several chunks into the
result over their concatenation.
"""
from __future__ import annotations

import math
import operator
from dataclasses import dataclass
from typing import Optional, Sequence

import torch
import triton

from ..kernels.flash_attention import LOG2E, flash_attention_kernel
from ..kernels.gemm_config import ensure_tma_allocator, use_tma_for
from ..runtime.dtypes import HALF_DTYPES, dtype_names

#: head dimensions the kernel is built for
HEAD_DIMS = (64, 128)
#: global positions (``q_start + Lq``, ``kv_start + Lkv``) stay below this: the kernel's index arithmetic is int32
MAX_POSITION = 2 ** 30


@dataclass(frozen=True)
class AttentionConfig:
    """One tiling of :func:`flash_attention`: query rows per program (``BLOCK_M``), keys per inner step
    (``BLOCK_N``), warps and software-pipeline stages."""

    BLOCK_M: int
    BLOCK_N: int
    num_warps: int
    num_stages: int

    def __post_init__(self):
        for name in ("BLOCK_M", "BLOCK_N"):
            v = getattr(self, name)
            if not isinstance(v, int) or v < 16 or v & (v - 1):
                raise ValueError(f"AttentionConfig: {name}={v!r} must be a power of two >= 16 (an MMA operand)")
        if self.num_warps not in (1, 2, 4, 8, 16) or not isinstance(self.num_stages, int) or self.num_stages < 1:
            raise ValueError(f"AttentionConfig: num_warps={self.num_warps!r} must be 1, 2, 4, 8 or 16 and "
                             f"num_stages={self.num_stages!r} a positive int")


#: The interpreter's tiling: the smallest MMA tiles (it runs every tile with numpy; small tiles keep tests fast and
#: make short test sequences span several tiles)
SIM_CONFIG = AttentionConfig(16, 16, 4, 1)


def pick_attention_config(Lq: int, head_dim: int, *, on_gpu: bool, cc: int = 90,
                          hip: bool = False) -> AttentionConfig:
    """The tiling :func:`flash_attention` launches without ``config``, from what the host knows.

    * interpreter: :data:`SIM_CONFIG`;
    * sm_90 (TMA + wgmma): 128 query rows on 8 warps (two warpgroups of 64 rows); 128-key steps, 2 stages at
      ``D = 128`` (Q 32 KB + 2 x (K + V) 128 KB of shared memory), 3 stages at ``D = 64``;
    * other GPUs (pre-Hopper, AMD): 128 x 64 tiles, 2 stages (8 warps on NVIDIA, 4 on AMD);
    * a short query block (``Lq <= 64``, e.g. a chunk of a few tokens): 64 query rows on 4 warps.

    Not measured yet: the issue's H100 benchmark (against ``scaled_dot_product_attention``'s flash backend at 8K and
    32K tokens, D 128) is to confirm or replace these choices; pass ``config`` to try others."""
    if not on_gpu:
        return SIM_CONFIG
    if Lq <= 64:
        return AttentionConfig(64, 64, 4, 2)
    if hip:
        return AttentionConfig(128, 64, 4, 2)
    if cc >= 90:
        return AttentionConfig(128, 128, 8, 2 if head_dim > 64 else 3)
    return AttentionConfig(128, 64, 8, 2)


def _position(op: str, name: str, value) -> int:
    if isinstance(value, bool) or isinstance(value, torch.Tensor):
        raise ValueError(f"{op}: {name} must be a non-negative int, got {type(value).__name__}")
    try:
        value = operator.index(value)
    except TypeError:
        raise ValueError(f"{op}: {name} must be a non-negative int, got {type(value).__name__}") from None
    if value < 0:
        raise ValueError(f"{op}: {name}={value} must be a non-negative int (a global position)")
    return value


def check_attention_operands(op: str, q, k, v, *, causal, scale, q_start, kv_start, out, return_lse) -> tuple:
    """Host checks of :func:`flash_attention`'s arguments before any launch; returns ``(scale, q_start,
    kv_start)`` as Python numbers. Raises ValueError naming ``op``, the bad value and what is accepted."""
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not isinstance(t, torch.Tensor):
            raise ValueError(f"{op}: {name} must be a torch.Tensor, got {type(t).__name__}")
        if t.dim() != 4:
            raise ValueError(f"{op}: {name} must be 4-D [B, L, H, D] (batch, sequence, head, head dim), got shape "
                             f"{tuple(t.shape)}")
        if t.dtype not in HALF_DTYPES:
            raise ValueError(f"{op}: {name}.dtype={t.dtype} is not supported; accepted: {dtype_names(HALF_DTYPES)}")
    if k.dtype != q.dtype or v.dtype != q.dtype:
        raise ValueError(f"{op}: q, k and v must share a dtype, got {q.dtype}, {k.dtype}, {v.dtype}")
    for name, t in (("k", k), ("v", v)):
        if t.device != q.device:
            raise ValueError(f"{op}: {name} is on {t.device}, q on {q.device}")
    B, Lq, Hq, D = q.shape
    if tuple(v.shape) != tuple(k.shape):
        raise ValueError(f"{op}: k {tuple(k.shape)} and v {tuple(v.shape)} must have the same shape [B, Lkv, Hkv, D]")
    if k.shape[0] != B or k.shape[3] != D:
        raise ValueError(f"{op}: k/v {tuple(k.shape)} must match q {tuple(q.shape)} in batch (dim 0) and head dim "
                         f"(dim 3)")
    if D not in HEAD_DIMS:
        raise ValueError(f"{op}: head dim D={D} is not supported; accepted: {', '.join(map(str, HEAD_DIMS))}")
    Hkv = k.shape[2]
    if Hkv < 1 or Hq < 1 or Hq % Hkv:
        raise ValueError(f"{op}: q has Hq={Hq} heads, k/v Hkv={Hkv}: Hq must be a positive multiple of Hkv "
                         f"(grouped-query attention)")
    for name, t in (("q", q), ("k", k), ("v", v)):
        if t.stride(3) != 1:
            raise ValueError(f"{op}: {name} needs a unit stride along D (strides {tuple(t.stride())}; call "
                             f".contiguous())")
    if not isinstance(causal, bool):
        raise ValueError(f"{op}: causal must be a bool, got {type(causal).__name__}")
    if not isinstance(return_lse, bool):
        raise ValueError(f"{op}: return_lse must be a bool, got {type(return_lse).__name__}")
    if scale is None:
        scale = D ** -0.5
    elif isinstance(scale, bool) or not isinstance(scale, (int, float)) or not math.isfinite(scale) or scale <= 0:
        raise ValueError(f"{op}: scale={scale!r} must be a positive finite number (None: D ** -0.5)")
    q_start = _position(op, "q_start", q_start)
    kv_start = _position(op, "kv_start", kv_start)
    for name, start, length in (("q_start + Lq", q_start, Lq), ("kv_start + Lkv", kv_start, k.shape[1])):
        if start + length > MAX_POSITION:
            raise ValueError(f"{op}: {name} = {start + length} must be at most {MAX_POSITION}")
    if out is not None:
        if not isinstance(out, torch.Tensor) or tuple(out.shape) != tuple(q.shape) or out.dtype != q.dtype or \
                out.device != q.device or out.stride(3) != 1:
            raise ValueError(f"{op}: out must be a {q.dtype} tensor of q's shape {tuple(q.shape)} on {q.device} with "
                             f"a unit stride along D, got {getattr(out, 'dtype', type(out).__name__)} "
                             f"{tuple(getattr(out, 'shape', ()))}")
    return float(scale), q_start, kv_start


def _tma_ok(*tensors) -> bool:
    """Every tensor can be the base of a device-side descriptor: 16-byte aligned base and strides (but the last)."""
    return all(t.data_ptr() % 16 == 0 and all((s * t.element_size()) % 16 == 0 for s in t.stride()[:3])
               for t in tensors)


def flash_attention(q, k, v, *, causal: bool = True, scale: Optional[float] = None, q_start: int = 0,
                    kv_start: int = 0, out=None, return_lse: bool = False, config: Optional[AttentionConfig] = None):
    """Softmax attention of ``q [B, Lq, Hq, D]`` over ``k, v [B, Lkv, Hkv, D]``; returns ``out [B, Lq, Hq, D]`` in
    q's dtype, or ``(out, lse)`` with ``return_lse``.

    * Layout: batch, sequence, head, head dim (any strides with a unit stride along D). ``D`` 64 or 128; bf16 or
      fp16 (q, k and v alike); fp32 scores, softmax and accumulation, rounded once into ``out``. Grouped-query
      attention: ``Hq`` a multiple of ``Hkv``, query head ``h`` uses K/V head ``h // (Hq // Hkv)``.
    * ``out[b, i, h] = sum_j softmax_j(scale * q[b, i, h] . k[b, j, kh]) v[b, j, kh]`` over the visible keys ``j``;
      ``scale`` defaults to ``D ** -0.5`` (positive).
    * Global positions: query row ``i`` is at ``q_start + i``, key row ``j`` at ``kv_start + j``. With ``causal``
      (default) a query sees the keys at positions ``<=`` its own; without, every key. A row that sees no key (a
      chunk wholly after the queries, ``Lkv == 0``) gets ``out = 0`` and ``lse = -inf``.
    * ``lse [B, Hq, Lq]`` float32: the natural log of ``sum_j exp(scale * q . k_j)`` over the row's visible keys.
      Results of the same queries over disjoint K/V chunks merge into the result over all of them with
      :func:`merge_chunk_partials`.
    * ``out``: a tensor of q's shape and dtype (unit stride along D) to write into. ``config``: an
      :class:`AttentionConfig` instead of :func:`pick_attention_config`'s.

    Raises ValueError on bad input before any launch. Under torch.compile the call is the registered
    ``torch.ops.triton_dist.flash_attention`` (``config`` is refused there; ``out`` receives a copy)."""
    op = "flash_attention"
    scale, q_start, kv_start = check_attention_operands(op, q, k, v, causal=causal, scale=scale, q_start=q_start,
                                                        kv_start=kv_start, out=out, return_lse=return_lse)
    if config is not None and not isinstance(config, AttentionConfig):
        raise ValueError(f"{op}: config must be an AttentionConfig, got {type(config).__name__}")
    if torch.compiler.is_compiling():
        if config is not None:
            raise ValueError(f"{op}: config= applies to eager calls only (not under torch.compile)")
        res, res_lse = torch.ops.triton_dist.flash_attention(q, k, v, causal, scale, q_start, kv_start)
        if out is not None:
            out.copy_(res)
            res = out
        return (res, res_lse) if return_lse else res
    B, Lq, Hq, D = q.shape
    Lkv, Hkv = k.shape[1], k.shape[2]
    if out is None:
        out = torch.empty(q.shape, dtype=q.dtype, device=q.device)
    lse = torch.empty((B, Hq, Lq), dtype=torch.float32, device=q.device) if return_lse else None
    if B * Lq * Hq == 0:
        return (out, lse) if return_lse else out
    if Lkv == 0:  # nothing to see: the defined result, no launch (a descriptor cannot have an empty dimension)
        out.zero_()
        if return_lse:
            lse.fill_(float("-inf"))
        return (out, lse) if return_lse else out
    on_gpu = q.device.type == "cuda"
    hip = bool(getattr(torch.version, "hip", None))
    major, minor = torch.cuda.get_device_capability(q.device) if on_gpu else (0, 0)
    cfg = config or pick_attention_config(Lq, D, on_gpu=on_gpu, cc=major * 10 + minor, hip=hip)
    use_tma = use_tma_for(q.device) and _tma_ok(q, k, v)
    if use_tma:
        ensure_tma_allocator()
    grid = (B * Hq, triton.cdiv(Lq, cfg.BLOCK_M))
    flash_attention_kernel[grid](
        q, k, v, out, lse if return_lse else out, B, Hq, Hkv, Lq, Lkv, q_start - kv_start, scale * LOG2E,
        q.stride(0), q.stride(1), q.stride(2), k.stride(0), k.stride(1), k.stride(2), v.stride(0), v.stride(1),
        v.stride(2), out.stride(0), out.stride(1), out.stride(2), HEAD_D=D, BLOCK_M=cfg.BLOCK_M,
        BLOCK_N=cfg.BLOCK_N, CAUSAL=causal, USE_TMA=use_tma, WRITE_LSE=return_lse, num_warps=cfg.num_warps,
        num_stages=cfg.num_stages)
    return (out, lse) if return_lse else out


def flash_attention_partial(q, k, v, **kwargs):
    """:func:`flash_attention` with ``return_lse=True``: ``(out, lse)`` of one K/V chunk, for
    :func:`merge_chunk_partials`."""
    if "return_lse" in kwargs:
        raise ValueError("flash_attention_partial: always returns (out, lse); do not pass return_lse")
    return flash_attention(q, k, v, return_lse=True, **kwargs)


def merge_chunk_partials(outs: Sequence, lses: Sequence, *, out_dtype=None):
    """Merge the results of the same queries over disjoint K/V chunks (``outs[c] [B, Lq, Hq, D]``, ``lses[c] [B,
    Hq, Lq]`` float32, as :func:`flash_attention_partial` returns them) into the result over their union: ``lse =
    log(sum_c exp(lse_c))`` and ``out = sum_c exp(lse_c - lse) * out_c`` (fp32; rows that no chunk saw: 0 and
    ``-inf``). Returns ``(out [B, Lq, Hq, D], lse [B, Hq, Lq])``, ``out`` in ``out_dtype`` (default ``outs[0]``'s).
    The prefill layout of :func:`triton_dist.ops.attention.merge_attention_partials` (one merge kernel for decode
    splits, prefill chunks and ranks' partials), which it calls on the partials seen as ``[C, B * Lq, Hq, D]``."""
    from .attention import merge_attention_partials

    if len(outs) == 0 or len(outs) != len(lses):
        raise ValueError(f"merge_chunk_partials: need as many lse as out tensors (at least one), got "
                         f"{len(outs)} and {len(lses)}")
    shape = tuple(outs[0].shape)
    for o, s in zip(outs, lses):
        if tuple(o.shape) != shape or o.dim() != 4 or tuple(s.shape) != (shape[0], shape[2], shape[1]):
            raise ValueError(f"merge_chunk_partials: out {tuple(o.shape)} / lse {tuple(s.shape)} do not match "
                             f"out [B, Lq, Hq, D] = {shape} / lse [B, Hq, Lq]")
    B, Lq, Hq, D = shape
    C = len(outs)
    parts = torch.stack(list(outs)).reshape(C, B * Lq, Hq, D)
    part_lse = torch.stack([s.float() for s in lses]).permute(0, 1, 3, 2).reshape(C, B * Lq, Hq)
    out, lse = merge_attention_partials(parts, part_lse, out_dtype=out_dtype or outs[0].dtype)
    return out.view(B, Lq, Hq, D), lse.view(B, Lq, Hq).transpose(1, 2)


__all__ = ["flash_attention", "flash_attention_partial", "merge_chunk_partials", "AttentionConfig",
           "pick_attention_config", "check_attention_operands", "SIM_CONFIG", "HEAD_DIMS", "MAX_POSITION"]
