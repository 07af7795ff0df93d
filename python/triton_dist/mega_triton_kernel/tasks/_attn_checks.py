"""Argument checks shared by the attention-side task builders (qk_norm_rope, flash_decode, flash_attn)."""
from __future__ import annotations

import math

__all__ = ["check_scale", "check_soft_cap", "check_bool", "check_eps", "check_head_dim", "check_gqa"]


def _is_real(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def check_scale(op: str, sm_scale, D: int) -> float:
    """``sm_scale``: None (``D ** -0.5``) or a finite number > 0."""
    if sm_scale is None:
        return float(D) ** -0.5
    if not _is_real(sm_scale) or not sm_scale > 0:
        raise ValueError(f"{op}: sm_scale must be None or a finite number > 0, got {sm_scale!r}")
    return float(sm_scale)


def check_soft_cap(op: str, soft_cap) -> float:
    """``soft_cap``: a finite number >= 0 (0: no cap)."""
    if not _is_real(soft_cap) or soft_cap < 0:
        raise ValueError(f"{op}: soft_cap must be a finite number >= 0 (0 = no cap), got {soft_cap!r}")
    return float(soft_cap)


def check_bool(op: str, name: str, v) -> bool:
    if not isinstance(v, bool):
        raise TypeError(f"{op}: {name} must be a bool, got {v!r}")
    return v


def check_eps(op: str, name: str, v) -> float:
    if not _is_real(v) or not v > 0:
        raise ValueError(f"{op}: {name} must be a finite number > 0, got {v!r}")
    return float(v)


def check_head_dim(op: str, name: str, D: int, max_d: int = 256, even: bool = False) -> None:
    if D < 1 or D > max_d:
        raise ValueError(f"{op}: the head dim of {name} must be in [1, {max_d}], got {D}")
    if even and D % 2:
        raise ValueError(f"{op}: the head dim of {name} must be even (rotate-half RoPE), got {D}")


def check_gqa(op: str, q_name: str, Hq: int, kv_name: str, Hkv: int) -> int:
    """``Hq`` must be a positive multiple of ``Hkv``; returns the group size ``Hq // Hkv``."""
    if Hkv < 1 or Hq < 1 or Hq % Hkv:
        raise ValueError(f"{op}: the {Hq} heads of {q_name} must be a positive multiple of the {Hkv} heads of "
                         f"{kv_name} (grouped-query attention)")
    return Hq // Hkv


def check_paged_tables(op: str, block_tables, kv_lens, B: int) -> int:
    """``block_tables [B, max_blocks]`` and ``kv_lens [B]``, int32; returns ``max_blocks`` (>= 1)."""
    import torch

    from ..core.checks import check_tensor

    check_tensor(op, "block_tables", block_tables, dim=2, dtype=torch.int32, shape=[B, None])
    if block_tables.shape[1] < 1:
        raise ValueError(f"{op}: block_tables has no columns")
    check_tensor(op, "kv_lens", kv_lens, dim=1, dtype=torch.int32, shape=[B])
    return block_tables.shape[1]
