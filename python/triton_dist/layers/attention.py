"""Sequence-parallel attention as a layer: :class:`SPAttention` holds the contexts of the sequence-parallel ops
(docs/attention.md) and runs the attention core of a transformer block -- after the QKV projection (and RoPE), before
the output projection -- when every rank holds a contiguous slice of every sequence:

* **prefill** (:meth:`SPAttention.prefill`, also ``forward``): rank ``r`` holds the tokens ``[r * L, (r + 1) * L)``
  of each of the ``B`` sequences as ``q [B, L, Hq, D]``, ``k, v [B, L, Hkv, D]`` and gets the attention of ITS query
  rows over the whole sequence, ``[B, L, Hq, D]``. Two ways (``prefill_method``):

  - ``"ag"`` (default): :func:`~triton_dist.ops.sp_ag_attention`, one launch, the K/V all-gather fused into the
    attention (each tile starts as soon as the chunk it reads has arrived). Works for any head counts.
  - ``"ulysses"``: :func:`~triton_dist.ops.pre_attn_all_to_all` of q, k and v (sequence-sharded -> the whole
    sequence for ``Hq / W`` heads), :func:`~triton_dist.ops.flash_attention` of the rank's heads on one device,
    :func:`~triton_dist.ops.post_attn_all_to_all` back: five launches, each rank moving ``(Hq + 2 Hkv) / Hq`` of
    its q's bytes twice (a third less than the all-gather's K/V at GQA 4 from 4 ranks up), needs ``Hq`` and ``Hkv``
    divisible by the world size.

* **decode** (:meth:`SPAttention.decode`): one query token per request, the same ``q [B, Hq, D]`` on every rank;
  rank ``r`` holds its slice of each request's tokens in its own paged KV cache (:func:`~triton_dist.ops.
  flash_decode`'s layout, ``seq_lens[b] = 0`` where it holds none); :func:`~triton_dist.ops.sp_flash_decode`
  returns the attention over the union of the slices on every rank (two launches, no host synchronisation).

Which rank stores a new decode token's K/V is the caller's choice (the op is invariant to where tokens live). Every
method is collective: every rank calls it in the same order with the same shapes (the ops' tagged signals report a
rank that does not, instead of waiting for it). CUDA-graph capturable after one warm-up call of each shape.

:func:`sp_attention_prefill_torch` / :func:`sp_attention_decode_torch` are the plain torch references the tests
use: the K/V gathered with torch.distributed (NCCL, or gloo on host copies where ranks share a GPU or on the CPU)
and softmax attention written out in fp32 -- no op of this library, no LSE merge.
"""
from __future__ import annotations

from typing import Optional, Tuple

import torch

from .. import ops as _ops

#: the prefill paths of :class:`SPAttention`
PREFILL_METHODS = ("ag", "ulysses")


class SPAttention(torch.nn.Module):
    """Sequence-parallel attention (module docstring) for ``num_q_heads`` query heads and ``num_kv_heads`` K/V heads
    (GQA: ``num_q_heads % num_kv_heads == 0``) of ``head_dim`` (64 or 128) elements, ``dtype`` bf16 or fp16.

    Capacities: prefill calls of up to ``max_batch`` sequences of up to ``max_seq_per_rank`` tokens per rank; decode
    calls of up to ``max_decode_batch`` requests (default ``max_batch``). ``prefill_method``: ``"ag"`` (default) or
    ``"ulysses"`` (:data:`PREFILL_METHODS`); ``decode=False`` / ``prefill=False`` skip a direction's context (its
    method then raises). ``scale``: the softmax scale (default ``head_dim ** -0.5``).

    The constructor is collective (it creates the contexts' symmetric buffers); :meth:`close` frees them (collective,
    idempotent). Symmetric memory per rank: ``"ag"`` ``2 * world * max_batch * max_seq_per_rank * Hkv * D``
    elements, ``"ulysses"`` ``max_batch * max_seq_per_rank * Hq * D``, decode ``world * max_decode_batch * Hq * (D +
    1)`` fp32."""

    def __init__(self, num_q_heads: int, num_kv_heads: int, head_dim: int, *, max_batch: int, max_seq_per_rank: int,
                 dtype: torch.dtype = torch.bfloat16, prefill_method: str = "ag",
                 max_decode_batch: Optional[int] = None, scale: Optional[float] = None, prefill: bool = True,
                 decode: bool = True):
        super().__init__()
        name = type(self).__name__
        for arg, v in (("num_q_heads", num_q_heads), ("num_kv_heads", num_kv_heads), ("head_dim", head_dim),
                       ("max_batch", max_batch), ("max_seq_per_rank", max_seq_per_rank)):
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"{name}: {arg}={v!r} must be a positive int")
        if num_q_heads % num_kv_heads:
            raise ValueError(f"{name}: num_q_heads={num_q_heads} is not a multiple of num_kv_heads={num_kv_heads}")
        if prefill_method not in PREFILL_METHODS:
            raise ValueError(f"{name}: prefill_method={prefill_method!r}; accepted: {', '.join(PREFILL_METHODS)}")
        if scale is not None and not (isinstance(scale, (int, float)) and not isinstance(scale, bool) and scale > 0):
            raise ValueError(f"{name}: scale={scale!r} must be a positive number")
        if not (prefill or decode):
            raise ValueError(f"{name}: prefill=False and decode=False leave nothing to run")
        from ..utils import get_triton_dist_world

        import torch.distributed as dist

        world = dist.get_world_size(get_triton_dist_world()) if dist.is_initialized() else 1
        if prefill and prefill_method == "ulysses" and (num_q_heads % world or num_kv_heads % world):
            raise ValueError(f"{name}: prefill_method='ulysses' needs num_q_heads ({num_q_heads}) and num_kv_heads "
                             f"({num_kv_heads}) divisible by the world size {world}; use prefill_method='ag'")
        self.num_q_heads, self.num_kv_heads, self.head_dim = num_q_heads, num_kv_heads, head_dim
        self.max_batch, self.max_seq_per_rank, self.dtype = max_batch, max_seq_per_rank, dtype
        self.prefill_method = prefill_method
        self.scale = float(scale) if scale is not None else head_dim ** -0.5
        self.prefill_ctx = None
        self.decode_ctx = None
        try:
            if prefill:
                if prefill_method == "ag":
                    self.prefill_ctx = _ops.create_sp_attention_ctx(max_batch, max_seq_per_rank, num_kv_heads,
                                                                    head_dim, dtype)
                else:
                    self.prefill_ctx = _ops.create_ulysses_ctx(max_batch, max_seq_per_rank, num_q_heads, head_dim,
                                                               dtype)
            if decode:
                self.decode_ctx = _ops.create_sp_decode_ctx(max_decode_batch or max_batch, num_q_heads, head_dim,
                                                            dtype)
        except BaseException:
            self.close()
            raise
        ctx = self.prefill_ctx if self.prefill_ctx is not None else self.decode_ctx
        self.rank, self.world_size = ctx.rank, ctx.world_size

    def _need(self, which: str):
        ctx = self.prefill_ctx if which == "prefill" else self.decode_ctx
        if ctx is None:
            raise ValueError(f"{type(self).__name__}.{which}: this layer was built with {which}=False")
        return ctx

    def prefill(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, causal: bool = True) -> torch.Tensor:
        """Collective: this rank's rows ``q [B, L, Hq, D]`` attending the K/V of every rank's chunk (rank ``r``'s
        chunk at global positions ``[r * L, (r + 1) * L)``; ``k, v [B, L, Hkv, D]``); with ``causal`` row ``i`` sees
        the keys at global positions ``<= r * L + i``. Returns ``[B, L, Hq, D]`` in q's dtype."""
        ctx = self._need("prefill")
        if self.prefill_method == "ag":
            return _ops.sp_ag_attention(q, k, v, ctx, causal=causal, scale=self.scale)
        for name, t, heads in (("q", q, self.num_q_heads), ("k", k, self.num_kv_heads), ("v", v, self.num_kv_heads)):
            if not isinstance(t, torch.Tensor) or t.dim() != 4 or t.shape[2] != heads or t.shape[3] != self.head_dim:
                raise ValueError(f"{type(self).__name__}.prefill: {name} must be [B, L, {heads}, {self.head_dim}], "
                                 f"got {tuple(getattr(t, 'shape', ()))}")
        qh = _ops.pre_attn_all_to_all(q, ctx)
        kh = _ops.pre_attn_all_to_all(k, ctx)
        vh = _ops.pre_attn_all_to_all(v, ctx)
        oh = _ops.flash_attention(qh, kh, vh, causal=causal, scale=self.scale)
        return _ops.post_attn_all_to_all(oh, ctx)

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, causal: bool = True) -> torch.Tensor:
        """:meth:`prefill`."""
        return self.prefill(q, k, v, causal=causal)

    def decode(self, q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, block_table: torch.Tensor,
               seq_lens: torch.Tensor, *, return_lse: bool = False):
        """Collective: one query token per request, ``q [B, Hq, D]`` the same on every rank, over the union of every
        rank's slice of the request's tokens (this rank's in ``k_cache`` / ``v_cache [pages, page_size, Hkv, D]``,
        ``block_table [B, max_pages]``, ``seq_lens [B]`` int32, 0 where it holds none). Returns ``[B, Hq, D]`` in
        q's dtype (and the fp32 ``lse [B, Hq]`` with ``return_lse``): :func:`~triton_dist.ops.sp_flash_decode`."""
        return _ops.sp_flash_decode(q, k_cache, v_cache, block_table, seq_lens, self._need("decode"),
                                    scale=self.scale, return_lse=return_lse)

    def close(self) -> None:
        """Collective: free the contexts' symmetric buffers (idempotent)."""
        for ctx in (self.prefill_ctx, self.decode_ctx):
            if ctx is not None:
                ctx.close()

    def finalize(self) -> None:
        """The reference's name of :meth:`close`."""
        self.close()


def _attention_fp32(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float,
                    visible: Optional[torch.Tensor]) -> Tuple[torch.Tensor, torch.Tensor]:
    """Softmax attention of ``q [Lq, Hq, D]`` over ``k, v [S, Hkv, D]`` in fp32 (GQA: query head ``h`` reads K/V head
    ``h // (Hq // Hkv)``), ``visible [Lq, S]`` bool or None (all). Rows that see no key get 0 and lse ``-inf``."""
    G = q.shape[1] // k.shape[1]
    kk = k.float().repeat_interleave(G, dim=1)
    vv = v.float().repeat_interleave(G, dim=1)
    s = torch.einsum("lhd,shd->hls", q.float(), kk) * scale
    if visible is not None:
        s = s.masked_fill(~visible[None], float("-inf"))
    lse = torch.logsumexp(s, dim=2)  # [Hq, Lq]
    p = torch.exp(s - torch.where(torch.isinf(lse), 0.0, lse)[..., None])
    return torch.einsum("hls,shd->lhd", p, vv), lse


def _all_gather(x: torch.Tensor, group) -> torch.Tensor:
    """``[world, *x.shape]``: every rank's ``x`` through torch.distributed (NCCL, or gloo on host copies)."""
    import torch.distributed as dist

    from ..runtime.torch_collectives import all_gather_into_tensor

    world = dist.get_world_size(group)
    out = torch.empty(world * x.numel(), dtype=x.dtype, device=x.device)
    return all_gather_into_tensor(out, x.contiguous().view(-1), group).view(world, *x.shape)


def sp_attention_prefill_torch(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, causal: bool = True,
                               scale: Optional[float] = None, group=None) -> torch.Tensor:
    """Collective, plain torch: what :meth:`SPAttention.prefill` returns on this rank. Every rank's ``k`` / ``v [B,
    L, Hkv, D]`` gathered with torch.distributed into the whole sequence, then fp32 softmax attention of this rank's
    rows (global positions ``rank * L + i``) over it, causal by global position. Returns q's dtype."""
    import torch.distributed as dist

    from ..utils import get_triton_dist_world

    group = group if group is not None else get_triton_dist_world()
    rank, world = dist.get_rank(group), dist.get_world_size(group)
    B, L, _, D = q.shape
    scale = D ** -0.5 if scale is None else scale
    K = _all_gather(k, group).transpose(0, 1).reshape(B, world * L, *k.shape[2:])  # rank order = position order
    V = _all_gather(v, group).transpose(0, 1).reshape(B, world * L, *v.shape[2:])
    visible = None
    if causal:
        pos_q = rank * L + torch.arange(L, device=q.device)
        visible = torch.arange(world * L, device=q.device)[None, :] <= pos_q[:, None]
    out = torch.empty_like(q)
    for b in range(B):
        out[b] = _attention_fp32(q[b], K[b], V[b], scale, visible)[0].to(q.dtype)
    return out


def sp_attention_decode_torch(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                              block_table: torch.Tensor, seq_lens: torch.Tensor, *, scale: Optional[float] = None,
                              group=None) -> Tuple[torch.Tensor, torch.Tensor]:
    """Collective, plain torch: what :meth:`SPAttention.decode` returns. Each rank reads its slices out of its paged
    cache (padded to the longest slice of any rank), the slices and their lengths are gathered with
    torch.distributed, and each request attends the concatenation of its slices in fp32. Returns ``(out [B, Hq, D]``
    in q's dtype, ``lse [B, Hq]`` fp32``)``; a request with no token anywhere gets 0 and ``-inf``."""

    from ..utils import get_triton_dist_world

    group = group if group is not None else get_triton_dist_world()
    B, Hq, D = q.shape
    _, page, Hkv, _ = k_cache.shape
    scale = D ** -0.5 if scale is None else scale
    lens = seq_lens.to(torch.int64)
    longest = int(_all_gather(lens.max().reshape(1) if B else lens.new_zeros(1), group).max())
    dense_k = torch.zeros((B, longest, Hkv, D), dtype=k_cache.dtype, device=q.device)
    dense_v = torch.zeros_like(dense_k)
    for b in range(B):
        n = int(lens[b])
        if n:
            pages = block_table[b, :(n + page - 1) // page].long()
            dense_k[b, :n] = k_cache[pages].reshape(-1, Hkv, D)[:n]
            dense_v[b, :n] = v_cache[pages].reshape(-1, Hkv, D)[:n]
    all_k, all_v, all_lens = _all_gather(dense_k, group), _all_gather(dense_v, group), _all_gather(lens, group)
    out = torch.zeros((B, Hq, D), dtype=q.dtype, device=q.device)
    lse = torch.full((B, Hq), float("-inf"), dtype=torch.float32, device=q.device)
    for b in range(B):
        ks = [all_k[s, b, :int(all_lens[s, b])] for s in range(all_k.shape[0])]
        vs = [all_v[s, b, :int(all_lens[s, b])] for s in range(all_v.shape[0])]
        kk, vv = torch.cat(ks), torch.cat(vs)
        if kk.shape[0] == 0:
            continue
        o, lb = _attention_fp32(q[b][None], kk, vv, scale, None)
        out[b], lse[b] = o[0].to(q.dtype), lb[:, 0]
    return out, lse


__all__ = ["SPAttention", "PREFILL_METHODS", "sp_attention_prefill_torch", "sp_attention_decode_torch"]
