"""Sequence-parallel decode attention: every rank holds a slice of every request's sequence in its own paged KV
cache (the layout of :mod:`triton_dist.ops.attention`); :func:`sp_flash_decode` returns, on every rank, the decode
attention over the union of all ranks' slices::

    ctx = ops.create_sp_decode_ctx(max_batch=64, num_q_heads=32, head_dim=128, dtype=torch.bfloat16)
    out, lse = ops.sp_flash_decode(q, k_cache, v_cache, block_table, seq_lens, ctx)   # q the same on every rank

Two launches on the current stream, no host synchronisation, no NCCL: the local :func:`~triton_dist.ops.attention.
flash_decode` over this rank's slice, its fp32 partial output and LSE written into this rank's slot of the
context's symmetric buffers (never rounded before the merge), then ONE launch of the exchange kernel that pushes
the partial to every peer and merges the ``world`` partials by their LSE (device code and protocol:
:mod:`triton_dist.kernels.attention_sp`). A rank whose slice of a request is empty contributes ``lse = -inf`` and
weighs nothing; a request empty on every rank gets ``out = 0``, ``lse = -inf``. The order of the slices does not
matter (softmax is permutation invariant). CUDA-graph capturable after one warm-up call of the shape (the epochs
live in device memory).
"""
from __future__ import annotations

from typing import Optional

import torch
import triton

from ..kernels import attention_sp as _k
from ..kernels.common import TAG_RANGE
from ..runtime.dtypes import HALF_DTYPES, dtype_names
from .attention import (DECODE_HEAD_DIMS, _check_out, _check_scale, check_decode_lens, check_decode_operands,
                        flash_decode)
from .context import Context, capturing, check_ctx

#: dtypes of ``q`` / the caches :func:`sp_flash_decode` takes
SP_DECODE_DTYPES = HALF_DTYPES


class SPDecodeContext(Context):
    """Symmetric buffers and signals of :func:`sp_flash_decode` (kind ``"sp_decode"``). Attributes: ``max_batch``,
    ``num_q_heads``, ``head_dim``, ``programs`` (the exchange kernel's grid, fixed per context), ``part_out [world,
    max_batch, Hq, D]`` and ``part_lse [world, max_batch, Hq]`` (fp32, symmetric: slot ``s`` holds rank ``s``'s
    partial), ``ready [world * programs]`` and ``recv_ok [world]`` (int64, symmetric), ``counter [3]`` (int64,
    local: the device epoch)."""

    kind = "sp_decode"
    factory_suffix = "_ctx"

    def __init__(self, max_batch: int, num_q_heads: int, head_dim: int, dtype: torch.dtype = torch.bfloat16, *,
                 programs: Optional[int] = None):
        fac = "create_sp_decode_ctx"
        for name, v in (("max_batch", max_batch), ("num_q_heads", num_q_heads)):
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"{fac}: {name}={v!r} must be a positive int")
        if head_dim not in DECODE_HEAD_DIMS or isinstance(head_dim, bool):
            raise ValueError(f"{fac}: head_dim={head_dim!r} is not supported; accepted: "
                             f"{', '.join(map(str, DECODE_HEAD_DIMS))}")
        if programs is not None and (isinstance(programs, bool) or not isinstance(programs, int) or
                                     not 1 <= programs <= 1024):
            raise ValueError(f"{fac}: programs={programs!r} must be an int in [1, 1024]")
        if not isinstance(dtype, torch.dtype) or dtype not in SP_DECODE_DTYPES:
            raise ValueError(f"{fac}: dtype={dtype!r} is not supported; accepted: {dtype_names(SP_DECODE_DTYPES)}")
        from ..runtime.state import require_backend

        gpu = getattr(require_backend(), "name", "") != "sim"
        if gpu:
            from ..kernels.gemm_config import num_sms

            # every program must be resident at once (programs wait for the peers' programs): at most one per SM
            want = programs or 32
            programs = max(1, min(want, num_sms(torch.device("cuda", torch.cuda.current_device()))))
        else:
            programs = programs or 2
        self.programs = int(programs)
        super().__init__(max_batch * num_q_heads * head_dim, dtype, SP_DECODE_DTYPES, methods=("fused", ),
                         all_methods=("fused", ), method="fused",
                         fingerprint_extra=(max_batch, num_q_heads, head_dim, self.programs))
        W = self.world_size
        if W * max_batch * num_q_heads * head_dim >= 2**31:
            raise ValueError(f"{fac}: world x max_batch x num_q_heads x head_dim = "
                             f"{W * max_batch * num_q_heads * head_dim} must stay below 2**31 (int32 offsets)")
        self.max_batch, self.num_q_heads, self.head_dim = max_batch, num_q_heads, head_dim
        u = self._utils
        self.part_out = u.nvshmem_create_tensor((W, max_batch, num_q_heads, head_dim), torch.float32)
        self.part_lse = u.nvshmem_create_tensor((W, max_batch, num_q_heads), torch.float32)
        self.ready = u.nvshmem_create_tensor((W * self.programs, ), torch.int64)
        self.recv_ok = u.nvshmem_create_tensor((W, ), torch.int64)
        self.ready.zero_()
        self.recv_ok.zero_()
        self._symmetric += [self.part_out, self.part_lse, self.ready, self.recv_ok]
        self._init_call_epochs()  # counter [3] and a cooperative launch: the programs wait on the peers' programs
        self._finish_init()



def create_sp_decode_ctx(max_batch: int, num_q_heads: int, head_dim: int, dtype: torch.dtype = torch.bfloat16,
                         **kw) -> SPDecodeContext:
    """Collective: the buffers of :func:`sp_flash_decode` for up to ``max_batch`` requests per call, ``num_q_heads``
    query heads of ``head_dim`` (64 or 128) elements, ``q`` / cache ``dtype`` (bf16 / fp16). Symmetric memory:
    ``world * max_batch * num_q_heads * (head_dim + 1)`` fp32 plus ``world * (programs + 1)`` int64 signals.
    Keyword ``programs``: the exchange kernel's grid (default 32 on a GPU, capped at the SMs; 2 on the simulator).
    Every rank must create it with the same arguments (checked: ``ValueError`` on every rank)."""
    return SPDecodeContext(max_batch, num_q_heads, head_dim, dtype, **kw)


create_sp_decode_context = create_sp_decode_ctx


def _check_sp_args(op, q, k_cache, v_cache, block_table, seq_lens, ctx, scale, out):
    check_ctx(op, ctx, SPDecodeContext, "create_sp_decode_ctx")
    ctx._check_open(op)
    check_decode_operands(op, q, k_cache, v_cache, block_table, seq_lens)
    B, Hq, D = q.shape
    if q.dtype != ctx.dtype:
        raise ValueError(f"{op}: q.dtype={q.dtype} differs from the context's dtype {ctx.dtype}; create a context "
                         f"per dtype")
    if Hq != ctx.num_q_heads or D != ctx.head_dim:
        raise ValueError(f"{op}: q has {Hq} heads of {D} elements, the context was made for num_q_heads="
                         f"{ctx.num_q_heads}, head_dim={ctx.head_dim}")
    if B > ctx.max_batch:
        raise ValueError(f"{op}: batch {B} exceeds the context's max_batch={ctx.max_batch}")
    ctx._check_device(op, q, "q")
    scale = _check_scale(op, D ** -0.5 if scale is None else scale)
    if out is not None:
        _check_out(op, out, (B, Hq, D), (q.dtype, ), q.device)
    return scale


def sp_flash_decode(q, k_cache, v_cache, block_table, seq_lens, ctx: SPDecodeContext, *,
                    scale: Optional[float] = None, out=None, return_lse: bool = True, check_lens: bool = False):
    """Collective (every rank calls it, with the same ``q``): decode attention of one query token per request over
    the union of every rank's slice of the request's tokens. Returns ``(out [B, Hq, D], lse [B, Hq])`` (``out``
    alone with ``return_lse=False``): ``out`` in ``q``'s dtype (rounded once, after the merge), ``lse`` float32,
    natural log of the scaled scores (exactly :func:`~triton_dist.ops.attention.flash_decode` over the
    concatenated slices, up to fp32 rounding).

    ``q [B, Hq, D]`` (``B <= max_batch``, ``Hq`` / ``D`` / dtype the context's), this rank's slice in ``k_cache`` /
    ``v_cache [num_pages, page_size, Hkv, D]``, ``block_table [B, max_pages]`` int32 and ``seq_lens [B]`` int32 (0:
    this rank holds none of request ``b``'s tokens); page counts, page sizes and table widths may differ between
    ranks. ``scale`` (default ``D ** -0.5``) must be the same on every rank. ``out``: a ``[B, Hq, D]`` tensor of
    ``q``'s dtype to write (unit stride along D). ``check_lens``: the host check of this rank's lengths and page ids
    (:func:`~triton_dist.ops.attention.check_decode_lens`, one synchronisation; off by default: only this rank
    would raise, and its peers would then wait for it). Every other bad argument raises a one-line ValueError
    before any launch (every rank gets the same arguments but its slice, so the checks agree); a rank called with
    another batch is reported by the exchange's tagged waits. Whatever the tables hold, no access leaves the
    tensors (:func:`flash_decode`'s clamping). Under torch.compile the call is the registered
    ``torch.ops.triton_dist.sp_flash_decode`` (``out`` receives a copy)."""
    op = "sp_flash_decode"
    scale = _check_sp_args(op, q, k_cache, v_cache, block_table, seq_lens, ctx, scale, out)
    if torch.compiler.is_compiling():  # the registered op (ops._library); the host length check stays eager-only
        res, res_lse = torch.ops.triton_dist.sp_flash_decode(q, k_cache, v_cache, block_table, seq_lens, ctx.handle,
                                                             scale)
        if out is not None:
            out.copy_(res)
            res = out
        return (res, res_lse) if return_lse else res
    B, Hq, D = q.shape
    if out is None:
        out = torch.empty((B, Hq, D), dtype=q.dtype, device=q.device)
    lse = torch.empty((B, Hq), dtype=torch.float32, device=q.device)
    if check_lens and not capturing():
        check_decode_lens(op, seq_lens, block_table, k_cache.shape[1], k_cache.shape[0])
    if B == 0:  # q is the same on every rank: nobody launches
        return (out, lse) if return_lse else out
    ctx.op = op
    r = ctx.rank
    # the local partial, fp32, straight into this rank's own slot (peers never write it)
    flash_decode(q, k_cache, v_cache, block_table, seq_lens, scale=scale, out=ctx.part_out[r, :B],
                 lse=ctx.part_lse[r, :B], check_lens=False)
    sp_decode_exchange(ctx, B, out, lse)
    return (out, lse) if return_lse else out


def sp_decode_exchange(ctx: SPDecodeContext, B: int, out, lse) -> None:
    """The second launch of :func:`sp_flash_decode` alone (collective): the exchange of the partials already in
    every rank's own slot of ``ctx.part_out`` / ``ctx.part_lse`` (rows ``:B``) and their merge into ``out [B, Hq, D]``
    (the context's dtype) and ``lse [B, Hq]`` (float32, contiguous). One call is one epoch of the protocol, so it may
    be repeated on the same slots (benchmarks time it apart from the local decode this way). No argument checks:
    :func:`sp_flash_decode` makes them."""
    Hq, D = ctx.num_q_heads, ctx.head_dim
    r = ctx.rank
    tag = (B * Hq * D) % TAG_RANGE
    cap_o = ctx.max_batch * Hq * D
    cap_l = ctx.max_batch * Hq
    W = ctx.world_size
    args = (ctx.part_out, ctx.part_lse, out, lse, ctx.ready, ctx.recv_ok, ctx.counter, B * Hq, Hq, cap_o, cap_l,
            out.stride(0), out.stride(1), tag, r)
    block_r = 16 if ctx.on_gpu else 4
    kw = ctx._coop()
    ctx._launch_plain(_k.sp_decode_exchange_kernel, (ctx.programs, ), args, WORLD=W, NSIG=ctx.programs, D=D,
                      BLOCK_R=block_r, BLOCK_S=triton.next_power_of_2(W), num_warps=4, **kw)


__all__ = ["SPDecodeContext", "create_sp_decode_ctx", "create_sp_decode_context", "sp_flash_decode",
           "sp_decode_exchange", "SP_DECODE_DTYPES"]
