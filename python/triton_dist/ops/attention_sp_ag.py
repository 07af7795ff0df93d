"""Sequence-parallel prefill attention with the K/V all-gather fused in: every rank holds a contiguous chunk of every
sequence (rank ``r``: global positions ``[r * L, (r + 1) * L)`` of each of the ``B`` sequences) and
:func:`sp_ag_attention` returns, on every rank, the attention of ITS query rows over the whole gathered K/V::

    ctx = ops.create_sp_attention_ctx(max_batch=1, max_seq_per_rank=4096, num_kv_heads=8, head_dim=128,
                                      dtype=torch.bfloat16)                                  # collective
    out = ops.sp_ag_attention(q, k, v, ctx)        # q [B, L, Hq, D], k / v [B, L, Hkv, D]: this rank's chunk

ONE launch on the current stream, no NCCL, no host synchronisation (CUDA-graph capturable after one warm-up call of
the shape): push programs send this rank's K and V chunk to the peers that read it while the attention programs
attend the own chunk, then each peer chunk as soon as its signals arrive (device code and protocol:
:mod:`triton_dist.kernels.attention_sp_ag`). The local math is :mod:`triton_dist.kernels.flash_attention`'s (the
building blocks of :func:`~triton_dist.ops.attention_prefill.flash_attention`), so the result equals
``flash_attention(q, K, V, q_start=r * L)`` over the concatenated ``K`` / ``V`` up to fp32 summation order.
"""
from __future__ import annotations

from typing import Optional

import torch
import triton

from ..kernels import attention_sp_ag as _k
from ..kernels.common import TAG_RANGE
from ..kernels.flash_attention import LOG2E
from ..kernels.gemm_config import ensure_tma_allocator, use_tma_for
from ..runtime.dtypes import HALF_DTYPES, dtype_names
from .attention_prefill import HEAD_DIMS, MAX_POSITION, _tma_ok, check_attention_operands, pick_attention_config
from .context import Context, check_ctx

#: dtypes of q / k / v that :func:`sp_ag_attention` takes (those of the local kernel)
SP_ATTENTION_DTYPES = HALF_DTYPES
#: push programs per tensor (K, V) on a GPU, unless the context is given ``push_programs``
DEFAULT_PUSH_PROGRAMS = 8


def _positive_int(fac: str, name: str, v, hi: Optional[int] = None) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or v < 1 or (hi is not None and v > hi):
        raise ValueError(f"{fac}: {name}={v!r} must be a positive int" + (f" (at most {hi})" if hi else ""))
    return v


class SPAttentionContext(Context):
    """Symmetric buffers and signals of :func:`sp_ag_attention` (kind ``"sp_attention"``). Attributes:
    ``max_batch``, ``max_seq_per_rank`` (the chunk length capacity ``L``), ``num_kv_heads``, ``head_dim``,
    ``capacity`` (``max_batch * max_seq_per_rank * num_kv_heads * head_dim`` elements per chunk), ``programs`` (the
    attention programs of a launch, at most), ``push_programs`` (push programs per tensor, ``NSIG``), ``k_full`` /
    ``v_full`` (symmetric, ``world * capacity`` elements: the gathered chunks), ``ready [2, world, NSIG]`` and
    ``recv_ok [world]`` (int64, symmetric), ``counter [3]`` (int64, local: the device epoch)."""

    kind = "sp_attention"
    factory_suffix = "_ctx"

    def __init__(self, max_batch: int, max_seq_per_rank: int, num_kv_heads: int, head_dim: int,
                 dtype: torch.dtype = torch.bfloat16, *, programs: Optional[int] = None,
                 push_programs: Optional[int] = None):
        fac = "create_sp_attention_ctx"
        for name, v in (("max_batch", max_batch), ("max_seq_per_rank", max_seq_per_rank),
                        ("num_kv_heads", num_kv_heads)):
            _positive_int(fac, name, v)
        if isinstance(head_dim, bool) or head_dim not in HEAD_DIMS:
            raise ValueError(f"{fac}: head_dim={head_dim!r} is not supported; accepted: "
                             f"{', '.join(map(str, HEAD_DIMS))}")
        if programs is not None:
            _positive_int(fac, "programs", programs, 4096)
        if push_programs is not None:
            _positive_int(fac, "push_programs", push_programs, 64)
        if not isinstance(dtype, torch.dtype) or dtype not in SP_ATTENTION_DTYPES:
            raise ValueError(f"{fac}: dtype={dtype!r} is not supported; accepted: {dtype_names(SP_ATTENTION_DTYPES)}")
        from ..runtime.state import require_backend

        backend = require_backend()
        world = backend.n_pes()
        gpu = getattr(backend, "name", "") != "sim"
        if gpu:
            from ..kernels.gemm_config import num_sms

            # every program of the launch must be resident at once (attention programs spin on the peers' pushes,
            # which a waiting program must never keep off the GPU): all of them fit this rank's SMs, one each
            sms = num_sms(torch.device("cuda", torch.cuda.current_device()))
            push = push_programs or DEFAULT_PUSH_PROGRAMS
            npush = 2 * push if world > 1 else 0
            attn = programs or (sms - npush)
            if attn < 1 or attn + npush > sms:
                raise ValueError(f"{fac}: programs={attn} attention + {npush} push programs (2 x push_programs) "
                                 f"exceed this rank's {sms} SMs: every program must be resident at once")
        else:
            push = push_programs or 1
            attn = programs or 2
        self.programs, self.push_programs = int(attn), int(push)
        capacity = max_batch * max_seq_per_rank * num_kv_heads * head_dim
        super().__init__(capacity, dtype, SP_ATTENTION_DTYPES, methods=("fused", ), all_methods=("fused", ),
                         method="fused", fingerprint_extra=(max_batch, max_seq_per_rank, num_kv_heads, head_dim,
                                                            self.programs, self.push_programs))
        W = self.world_size
        if W * capacity >= 2**31:
            raise ValueError(f"{fac}: world x max_batch x max_seq_per_rank x num_kv_heads x head_dim = "
                             f"{W * capacity} must stay below 2**31 (int32 offsets)")
        if W * max_seq_per_rank > MAX_POSITION:
            raise ValueError(f"{fac}: world x max_seq_per_rank = {W * max_seq_per_rank} positions exceed "
                             f"{MAX_POSITION}")
        self.max_batch, self.max_seq_per_rank = max_batch, max_seq_per_rank
        self.num_kv_heads, self.head_dim, self.capacity = num_kv_heads, head_dim, capacity
        u = self._utils
        self.k_full = u.nvshmem_create_tensor((W * capacity, ), dtype)
        self.v_full = u.nvshmem_create_tensor((W * capacity, ), dtype)
        self.ready = u.nvshmem_create_tensor((2, W, self.push_programs), torch.int64)
        self.recv_ok = u.nvshmem_create_tensor((W, ), torch.int64)
        # NVSHMEM does not zero: signals start at epoch 0; the data is zeroed too (every element finite, once)
        for t in (self.k_full, self.v_full, self.ready, self.recv_ok):
            t.zero_()
        self._symmetric += [self.k_full, self.v_full, self.ready, self.recv_ok]
        self._init_call_epochs()  # counter [3] and a cooperative launch: the programs wait on the peers' programs
        self._finish_init()



def create_sp_attention_ctx(max_batch: int, max_seq_per_rank: int, num_kv_heads: int, head_dim: int,
                            dtype: torch.dtype = torch.bfloat16, **kw) -> SPAttentionContext:
    """Collective: the buffers of :func:`sp_ag_attention` for up to ``max_batch`` sequences per call whose chunk on
    each rank is at most ``max_seq_per_rank`` tokens, ``num_kv_heads`` K/V heads of ``head_dim`` (64 or 128)
    elements, ``dtype`` bf16 / fp16. Symmetric memory: ``2 * world * max_batch * max_seq_per_rank * num_kv_heads *
    head_dim`` elements (the gathered K and V) plus ``world * (2 * push_programs + 1)`` int64 signals. Keywords:
    ``programs`` (attention programs per launch, at most; default: the rank's SMs less the push programs on a GPU,
    2 on the simulator), ``push_programs`` (push programs per tensor; default 8 on a GPU, 1 on the simulator);
    ``programs + 2 * push_programs`` must fit the rank's SMs. Every rank must create it with the same arguments
    (checked: ``ValueError`` on every rank)."""
    return SPAttentionContext(max_batch, max_seq_per_rank, num_kv_heads, head_dim, dtype, **kw)


create_sp_attention_context = create_sp_attention_ctx


def check_sp_ag_args(op: str, q, k, v, ctx, causal, scale, out, return_lse) -> float:
    """Every host check of :func:`sp_ag_attention`'s arguments (one-line ``ValueError`` naming ``op`` before any
    launch); returns the scale as a float. Reads no tensor value, so every rank decides alike on the same shapes."""
    check_ctx(op, ctx, SPAttentionContext, "create_sp_attention_ctx")
    ctx._check_open(op)
    scale, _, _ = check_attention_operands(op, q, k, v, causal=causal, scale=scale, q_start=0, kv_start=0, out=out,
                                           return_lse=return_lse)
    B, L, Hq, D = q.shape
    Hkv = k.shape[2]
    if k.shape[1] != L:
        raise ValueError(f"{op}: q has {L} rows per sequence, k/v {k.shape[1]}: this rank's chunk of q, k and v must "
                         f"have the same length L_loc")
    if q.dtype != ctx.dtype:
        raise ValueError(f"{op}: q.dtype={q.dtype} differs from the context's dtype {ctx.dtype}; create a context "
                         f"per dtype")
    if Hkv != ctx.num_kv_heads or D != ctx.head_dim:
        raise ValueError(f"{op}: k/v have {Hkv} heads of {D} elements, the context was made for num_kv_heads="
                         f"{ctx.num_kv_heads}, head_dim={ctx.head_dim}")
    if B > ctx.max_batch:
        raise ValueError(f"{op}: batch {B} exceeds the context's max_batch={ctx.max_batch}")
    if L > ctx.max_seq_per_rank:
        raise ValueError(f"{op}: {L} tokens per rank exceed the context's max_seq_per_rank={ctx.max_seq_per_rank}")
    ctx._check_device(op, q, "q")
    return scale


def sp_ag_attention(q, k, v, ctx: SPAttentionContext, *, causal: bool = True, scale: Optional[float] = None,
                    out=None, return_lse: bool = False):
    """Collective (every rank calls it with its own chunk, the same shapes on every rank): the attention of this
    rank's query rows over the K/V of every rank. Returns ``out [B, L, Hq, D]`` in q's dtype, or ``(out, lse)``
    with ``return_lse`` (``lse [B, Hq, L]`` float32, natural log of the scaled scores).

    * ``q [B, L, Hq, D]``, ``k, v [B, L, Hkv, D]``: this rank's chunk (rank ``r``: global positions ``[r * L, (r +
      1) * L)``) of each of ``B <= max_batch`` sequences, ``L <= max_seq_per_rank``; batch, sequence, head, head dim
      (any strides with a unit stride along D); the context's dtype (bf16 / fp16), ``Hkv`` and ``D``; ``Hq`` a
      multiple of ``Hkv`` (GQA: query head ``h`` reads K/V head ``h // (Hq // Hkv)``).
    * ``causal`` (default): query ``i`` of rank ``r`` sees the keys at global positions ``<= r * L + i``, so rank
      ``r`` reads chunks ``0 .. r`` only (the later ones are neither waited for nor sent to it); without, every key.
      ``scale`` defaults to ``D ** -0.5``. Both must be the same on every rank (a rank called with another ``causal``
      or chunk size is reported by the tagged signals).
    * ``out``: a tensor of q's shape and dtype (unit stride along D) to write into.
    * Cost beyond the attention: ``k`` / ``v`` are pushed from contiguous memory; a non-contiguous ``k`` or ``v`` is
      copied once (``.contiguous()``, one extra read and write of the chunk) before the launch.

    Raises ValueError on bad input before any launch (on every rank alike: the checks read shapes only). Under
    torch.compile the call is the registered ``torch.ops.triton_dist.sp_ag_attention`` (``out`` receives a copy)."""
    op = "sp_ag_attention"
    scale = check_sp_ag_args(op, q, k, v, ctx, causal, scale, out, return_lse)
    if torch.compiler.is_compiling():
        res, res_lse = torch.ops.triton_dist.sp_ag_attention(q, k, v, ctx.handle, causal, scale)
        if out is not None:
            out.copy_(res)
            res = out
        return (res, res_lse) if return_lse else res
    return _sp_ag_attention(q, k, v, ctx, causal, scale, out, return_lse)


def _sp_ag_attention(q, k, v, ctx: SPAttentionContext, causal: bool, scale: float, out, return_lse: bool):
    """The eager call after the checks: allocations, the launch's constexprs and ONE launch."""
    op = "sp_ag_attention"
    B, L, Hq, D = q.shape
    Hkv = k.shape[2]
    if out is None:
        out = torch.empty(q.shape, dtype=q.dtype, device=q.device)
    lse = torch.empty((B, Hq, L), dtype=torch.float32, device=q.device) if return_lse else None
    ctx._check_peers(op, (tuple(q.shape), tuple(k.shape), str(q.dtype), causal))
    if B * L == 0:  # the same shapes on every rank: nobody launches, nothing to exchange
        return (out, lse) if return_lse else out
    ctx.op = op
    # the push copies the chunk as one flat [B, L, Hkv, D] range: a strided k / v is packed first (one copy)
    k = k if k.is_contiguous() else k.contiguous()
    v = v if v.is_contiguous() else v.contiguous()
    n = B * L * Hkv * D
    tag = (n % TAG_RANGE) ^ (_k.CAUSAL_TAG if causal else 0)
    W = ctx.world_size
    on_gpu = ctx.on_gpu
    hip = bool(getattr(torch.version, "hip", None))
    major, minor = torch.cuda.get_device_capability(q.device) if on_gpu else (0, 0)
    cfg = pick_attention_config(L, D, on_gpu=on_gpu, cc=major * 10 + minor, hip=hip)
    use_tma = use_tma_for(q.device) and _tma_ok(q, k, v)
    if use_tma:
        ensure_tma_allocator()
    items = B * Hq * triton.cdiv(L, cfg.BLOCK_M)
    attn = max(1, min(ctx.programs, items))
    grid = attn + (2 * ctx.push_programs if W > 1 else 0)
    args = (q, k, v, out, lse if return_lse else out, ctx.k_full, ctx.v_full, ctx.ready, ctx.recv_ok, ctx.counter,
            B, Hq, Hkv, L, scale * LOG2E, q.stride(0), q.stride(1), q.stride(2), out.stride(0), out.stride(1),
            out.stride(2), tag, ctx.rank)
    kw = ctx._coop()
    ctx._launch_plain(_k.sp_ag_attention_kernel, (grid, ), args, WORLD=W, NSIG=ctx.push_programs,
                      COPY_BLOCK=ctx._block(), HEAD_D=D, BLOCK_M=cfg.BLOCK_M, BLOCK_N=cfg.BLOCK_N, CAUSAL=causal,
                      USE_TMA=use_tma, WRITE_LSE=return_lse, num_warps=cfg.num_warps, num_stages=cfg.num_stages,
                      **kw)
    return (out, lse) if return_lse else out


__all__ = ["SPAttentionContext", "create_sp_attention_ctx", "create_sp_attention_context", "sp_ag_attention",
           "check_sp_ag_args", "SP_ATTENTION_DTYPES"]
