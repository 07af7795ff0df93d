"""torch.library registration of every op (``torch.ops.triton_dist.*``) so that torch.compile (fullgraph) traces a
model that calls them: all_gather, reduce_scatter, all_reduce, send, recv, ag_gemm, gemm_rs, gemm_ar, matmul, and the
MoE family's group_gemm, moe_silu_gate, moe_route, moe_combine, ag_group_gemm, group_gemm_rs, and the attention
family's flash_decode, merge_attention_partials, flash_attention, sp_ag_attention, and Ulysses'
pre_attn_all_to_all / post_attn_all_to_all.

Each op that needs a context takes the context's integer ``handle`` (:func:`~triton_dist.ops.context.get_context`
finds the live context) and the call's method, already resolved from ``None`` / an alias by the public function.
Each has a fake (meta) implementation that computes the output's shape, dtype and device from the inputs and the
context, and communicates nothing. The real implementation is the eager public function itself, so an op and the
public call are the same computation: the public function (collectives, :mod:`.allgather_gemm`,
:mod:`.gemm_reduce_scatter`, :mod:`.gemm_allreduce`, :mod:`.gemm`) runs its eager path when called outside
torch.compile (no dispatcher cost on the microsecond path) and emits its op while torch.compile traces it
(docs/ops.md, "torch.compile").

``send`` and ``recv`` declare that they mutate the p2p context's ``token`` (a one-element local tensor that nothing
reads): an op without outputs (``send``), or whose output is unused (``recv``), would otherwise be removed as dead
code by the compiler, leaving the peer waiting; the declared mutation keeps both in the graph and in their order.
"""
from __future__ import annotations

from typing import List, Optional, Tuple

import torch

from . import attention as _attn
from . import collectives as _c
from . import attention_prefill as _fa
from . import attention_ulysses as _uly
from . import attention_sp as _sp_dec
from . import attention_sp_ag as _sp_ag
from . import gemm as _gemm
from . import moe_gemm as _moe_gemm
from . import moe_layout as _moe_layout
from . import moe_tp as _moe_tp
from . import overlap as _ov
from .context import FP8_DTYPES, get_context


# ------------------------------------------------------------------------------------------------ collectives
@torch.library.custom_op("triton_dist::all_gather", mutates_args=())
def all_gather_op(x: torch.Tensor, handle: int, method: str) -> torch.Tensor:
    ctx = get_context(handle)
    out = torch.empty(_c._gather_out_shape(x, ctx.world_size), dtype=x.dtype, device=x.device)
    return _c.all_gather(x, ctx, out=out, method=method)


@all_gather_op.register_fake
def _all_gather_fake(x, handle, method):
    ctx = get_context(handle)
    return x.new_empty(_c._gather_out_shape(x, ctx.world_size))


@torch.library.custom_op("triton_dist::reduce_scatter", mutates_args=())
def reduce_scatter_op(x: torch.Tensor, handle: int, method: str) -> torch.Tensor:
    ctx = get_context(handle)
    out = torch.empty((x.shape[0] // ctx.world_size, ) + tuple(x.shape[1:]), dtype=x.dtype, device=x.device)
    return _c.reduce_scatter(x, ctx, out=out, method=method)


@reduce_scatter_op.register_fake
def _reduce_scatter_fake(x, handle, method):
    ctx = get_context(handle)
    return x.new_empty((x.shape[0] // ctx.world_size, ) + tuple(x.shape[1:]))


@torch.library.custom_op("triton_dist::all_reduce", mutates_args=())
def all_reduce_op(x: torch.Tensor, handle: int, method: str) -> torch.Tensor:
    ctx = get_context(handle)
    return _c.all_reduce(x, ctx, out=torch.empty_like(x), method=method)


@all_reduce_op.register_fake
def _all_reduce_fake(x, handle, method):
    return torch.empty_like(x)


# ------------------------------------------------------------------------------------------------ point-to-point
@torch.library.custom_op("triton_dist::send", mutates_args=("token", ))
def send_op(x: torch.Tensor, token: torch.Tensor, handle: int, dst: int) -> None:
    _c.send(x, dst, get_context(handle))


@send_op.register_fake
def _send_fake(x, token, handle, dst):
    return None


@torch.library.custom_op("triton_dist::recv", mutates_args=("token", ))
def recv_op(token: torch.Tensor, shape: List[int], handle: int, src: int) -> torch.Tensor:
    return _c.recv(tuple(shape), src, get_context(handle))


@recv_op.register_fake
def _recv_fake(token, shape, handle, src):
    return token.new_empty(tuple(shape), dtype=get_context(handle).dtype)


# ------------------------------------------------------------------------------------------------ overlapped GEMMs
def ag_gemm_out_dtype(a_dtype: torch.dtype, out_dtype: Optional[torch.dtype]) -> torch.dtype:
    """The dtype of :func:`~triton_dist.ops.ag_gemm`'s result: ``out_dtype``, else bf16 for fp8 inputs, else
    ``a``'s."""
    return out_dtype or (torch.bfloat16 if a_dtype in FP8_DTYPES else a_dtype)


@torch.library.custom_op("triton_dist::ag_gemm", mutates_args=())
def ag_gemm_op(a: torch.Tensor, b: torch.Tensor, handle: int, method: str, scale_a: Optional[torch.Tensor],
               scale_b: Optional[torch.Tensor], out_dtype: Optional[torch.dtype]) -> torch.Tensor:
    return _ov.ag_gemm(a, b, get_context(handle), scale_a=scale_a, scale_b=scale_b, method=method,
                       out_dtype=out_dtype)


@ag_gemm_op.register_fake
def _ag_gemm_fake(a, b, handle, method, scale_a, scale_b, out_dtype):
    ctx = get_context(handle)
    return a.new_empty((ctx.world_size * a.shape[0], b.shape[1]), dtype=ag_gemm_out_dtype(a.dtype, out_dtype))


@torch.library.custom_op("triton_dist::gemm_rs", mutates_args=())
def gemm_rs_op(a: torch.Tensor, b: torch.Tensor, handle: int, method: str) -> torch.Tensor:
    return _ov.gemm_rs(a, b, get_context(handle), method=method)


@gemm_rs_op.register_fake
def _gemm_rs_fake(a, b, handle, method):
    return a.new_empty((a.shape[0] // get_context(handle).world_size, b.shape[1]))


@torch.library.custom_op("triton_dist::gemm_ar", mutates_args=())
def gemm_ar_op(a: torch.Tensor, b: torch.Tensor, handle: int, method: str) -> torch.Tensor:
    return _ov.gemm_ar(a, b, get_context(handle), method=method)


@gemm_ar_op.register_fake
def _gemm_ar_fake(a, b, handle, method):
    return a.new_empty((a.shape[0], b.shape[1]))


# ------------------------------------------------------------------------------------------------ matmul
def matmul_out_dtype(a_dtype: torch.dtype) -> torch.dtype:
    """The dtype of :func:`~triton_dist.ops.matmul`'s result without ``out``: bf16 for fp8 inputs, else ``a``'s."""
    return torch.bfloat16 if a_dtype.itemsize == 1 else a_dtype


@torch.library.custom_op("triton_dist::matmul", mutates_args=())
def matmul_op(a: torch.Tensor, b: torch.Tensor, scale: Optional[torch.Tensor], autotune: bool,
              table: bool) -> torch.Tensor:
    return _gemm.matmul(a, b, scale=scale, autotune=autotune, table=table)


@matmul_op.register_fake
def _matmul_fake(a, b, scale, autotune, table):
    return a.new_empty((a.shape[0], b.shape[1]), dtype=matmul_out_dtype(a.dtype))


# ------------------------------------------------------------------------------------------------ MoE
@torch.library.custom_op("triton_dist::group_gemm", mutates_args=())
def group_gemm_op(a: torch.Tensor, b: torch.Tensor, expert_offsets: torch.Tensor, scale_a: Optional[torch.Tensor],
                  scale_b: Optional[torch.Tensor]) -> torch.Tensor:
    # traced graphs may be captured: the offsets are not read on the host (the kernel stays memory-safe)
    return _moe_gemm.group_gemm(a, b, expert_offsets, scale_a=scale_a, scale_b=scale_b, check_offsets=False)


@group_gemm_op.register_fake
def _group_gemm_fake(a, b, expert_offsets, scale_a, scale_b):
    return a.new_empty((a.shape[0], b.shape[2]), dtype=_moe_gemm.group_gemm_out_dtype(a.dtype))


@torch.library.custom_op("triton_dist::moe_silu_gate", mutates_args=())
def moe_silu_gate_op(h: torch.Tensor, expert_offsets: Optional[torch.Tensor]) -> torch.Tensor:
    return _moe_gemm.moe_silu_gate(h, expert_offsets)


@moe_silu_gate_op.register_fake
def _moe_silu_gate_fake(h, expert_offsets):
    return h.new_empty((h.shape[0], h.shape[1] // 2))


@torch.library.custom_op("triton_dist::moe_route", mutates_args=())
def moe_route_op(x: torch.Tensor, topk_idx: torch.Tensor, num_experts: int,
                 quant: str) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    # the weights only travel to combine, so the op routes without them; ``quant`` "none" or "fp8"; without
    # quantization the scales are an empty tensor (the public function returns None)
    _moe_layout.check_routing("moe_route", x, topk_idx, None, num_experts)
    tokens, offsets, scales, dest = _moe_layout.route_tokens(x, topk_idx, num_experts,
                                                             None if quant == "none" else quant, None, False)
    if scales is None:
        scales = torch.empty((0, ), dtype=torch.float32, device=x.device)
    return tokens, offsets, scales, dest


@moe_route_op.register_fake
def _moe_route_fake(x, topk_idx, num_experts, quant):
    rows = topk_idx.shape[0] * topk_idx.shape[1]
    fp8 = quant == "fp8"
    return (x.new_empty((rows, x.shape[1]), dtype=torch.float8_e4m3fn if fp8 else x.dtype),
            x.new_empty((num_experts, ), dtype=torch.int32),
            x.new_empty((rows, x.shape[1] // 128) if fp8 else (0, ), dtype=torch.float32),
            x.new_empty(tuple(topk_idx.shape), dtype=torch.int32))


@torch.library.custom_op("triton_dist::moe_combine", mutates_args=())
def moe_combine_op(expert_out: torch.Tensor, dest_rows: torch.Tensor, topk_idx: torch.Tensor,
                   topk_weights: torch.Tensor, num_experts: int) -> torch.Tensor:
    routing = _moe_layout.MoERouting(dest_rows, topk_idx, topk_weights, num_experts)
    return _moe_layout.moe_combine(expert_out, routing)


@moe_combine_op.register_fake
def _moe_combine_fake(expert_out, dest_rows, topk_idx, topk_weights, num_experts):
    return expert_out.new_empty((dest_rows.shape[0], expert_out.shape[1]))


# ------------------------------------------------------------------------------------------------ MoE, tensor parallel
@torch.library.custom_op("triton_dist::ag_group_gemm", mutates_args=())
def ag_group_gemm_op(x: torch.Tensor, topk_idx: torch.Tensor, topk_weights: torch.Tensor, w: torch.Tensor,
                     handle: int) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor,
                                           torch.Tensor, torch.Tensor]:
    # returns (h, expert_offsets, gathered ids, gathered weights, dest_rows, row_pairs, seg_offsets): the result
    # and the TPMoEHandle's tensors, which group_gemm_rs takes back; no id check (traced graphs may be captured)
    h, offs, hd = _moe_tp.ag_group_gemm_eager(x, topk_idx, topk_weights, w, get_context(handle), None, False)
    return h, offs, hd.topk_idx, hd.topk_weights, hd.dest_rows, hd.row_pairs, hd.seg_offsets


@ag_group_gemm_op.register_fake
def _ag_group_gemm_fake(x, topk_idx, topk_weights, w, handle):
    ctx = get_context(handle)
    W, E, k = ctx.world_size, ctx.num_experts, ctx.topk
    tokens = W * x.shape[0]
    return (x.new_empty((tokens * k, w.shape[2])), x.new_empty((E, ), dtype=torch.int32),
            x.new_empty((tokens, k), dtype=torch.int32), x.new_empty((tokens, k), dtype=torch.float32),
            x.new_empty((tokens, k), dtype=torch.int32), x.new_empty((tokens * k, ), dtype=torch.int32),
            x.new_empty((E * W, ), dtype=torch.int32))


@torch.library.custom_op("triton_dist::group_gemm_rs", mutates_args=())
def group_gemm_rs_op(a: torch.Tensor, w: torch.Tensor, topk_idx: torch.Tensor, topk_weights: torch.Tensor,
                     dest_rows: torch.Tensor, row_pairs: torch.Tensor, seg_offsets: torch.Tensor,
                     handle: int) -> torch.Tensor:
    ctx = get_context(handle)
    hd = _moe_tp.TPMoEHandle(topk_idx, topk_weights, dest_rows, row_pairs, seg_offsets, seg_offsets,
                             topk_idx.shape[0] // ctx.world_size, handle)
    return _moe_tp.group_gemm_rs_eager(a, w, hd, ctx)


@group_gemm_rs_op.register_fake
def _group_gemm_rs_fake(a, w, topk_idx, topk_weights, dest_rows, row_pairs, seg_offsets, handle):
    ctx = get_context(handle)
    return a.new_empty((topk_idx.shape[0] // ctx.world_size, w.shape[2]))


# ------------------------------------------------------------------------------------------------ attention
@torch.library.custom_op("triton_dist::flash_decode", mutates_args=())
def flash_decode_op(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, block_table: torch.Tensor,
                    seq_lens: torch.Tensor, scale: float, num_splits: int) -> Tuple[torch.Tensor, torch.Tensor]:
    return _attn.flash_decode(q, k_cache, v_cache, block_table, seq_lens, scale=scale, num_splits=num_splits or None,
                        check_lens=False)


@flash_decode_op.register_fake
def _flash_decode_fake(q, k_cache, v_cache, block_table, seq_lens, scale, num_splits):
    return q.new_empty(q.shape), q.new_empty(q.shape[:2], dtype=torch.float32)


@torch.library.custom_op("triton_dist::merge_attention_partials", mutates_args=())
def merge_attention_partials_op(outs: torch.Tensor, lses: torch.Tensor,
                                out_dtype: torch.dtype) -> Tuple[torch.Tensor, torch.Tensor]:
    return _attn.merge_attention_partials(outs, lses, out_dtype=out_dtype)


@merge_attention_partials_op.register_fake
def _merge_fake(outs, lses, out_dtype):
    return outs.new_empty(outs.shape[1:], dtype=out_dtype), outs.new_empty(outs.shape[1:3], dtype=torch.float32)


@torch.library.custom_op("triton_dist::flash_attention", mutates_args=())
def flash_attention_op(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool, scale: float, q_start: int,
                       kv_start: int) -> Tuple[torch.Tensor, torch.Tensor]:
    return _fa.flash_attention(q, k, v, causal=causal, scale=scale, q_start=q_start, kv_start=kv_start,
                               return_lse=True)


@flash_attention_op.register_fake
def _flash_attention_fake(q, k, v, causal, scale, q_start, kv_start):
    B, Lq, Hq, _ = q.shape
    return q.new_empty(q.shape), q.new_empty((B, Hq, Lq), dtype=torch.float32)


@torch.library.custom_op("triton_dist::pre_attn_all_to_all", mutates_args=())
def pre_attn_all_to_all_op(x: torch.Tensor, handle: int) -> torch.Tensor:
    return _uly.pre_attn_all_to_all(x, get_context(handle))


@pre_attn_all_to_all_op.register_fake
def _pre_attn_all_to_all_fake(x, handle):
    W = get_context(handle).world_size
    B, L, H, D = x.shape
    return x.new_empty((B, W * L, H // W, D))


@torch.library.custom_op("triton_dist::post_attn_all_to_all", mutates_args=())
def post_attn_all_to_all_op(y: torch.Tensor, handle: int) -> torch.Tensor:
    return _uly.post_attn_all_to_all(y, get_context(handle))


@post_attn_all_to_all_op.register_fake
def _post_attn_all_to_all_fake(y, handle):
    W = get_context(handle).world_size
    B, S, Hg, D = y.shape
    return y.new_empty((B, S // W, Hg * W, D))


@torch.library.custom_op("triton_dist::sp_ag_attention", mutates_args=())
def sp_ag_attention_op(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, handle: int, causal: bool,
                       scale: float) -> Tuple[torch.Tensor, torch.Tensor]:
    # collective: every rank's traced graph runs it in the same order (the context's epochs agree)
    return _sp_ag.sp_ag_attention(q, k, v, get_context(handle), causal=causal, scale=scale, return_lse=True)


@sp_ag_attention_op.register_fake
def _sp_ag_attention_fake(q, k, v, handle, causal, scale):
    B, L, Hq, _ = q.shape
    return q.new_empty(q.shape), q.new_empty((B, Hq, L), dtype=torch.float32)


@torch.library.custom_op("triton_dist::sp_flash_decode", mutates_args=())
def sp_flash_decode_op(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, block_table: torch.Tensor,
                       seq_lens: torch.Tensor, handle: int, scale: float) -> Tuple[torch.Tensor, torch.Tensor]:
    # collective: every rank's traced graph runs it in the same order (the context's epochs agree)
    return _sp_dec.sp_flash_decode(q, k_cache, v_cache, block_table, seq_lens, get_context(handle), scale=scale)


@sp_flash_decode_op.register_fake
def _sp_flash_decode_fake(q, k_cache, v_cache, block_table, seq_lens, handle, scale):
    B, Hq, _ = q.shape
    return q.new_empty(q.shape), q.new_empty((B, Hq), dtype=torch.float32)


#: the registered op of each public function (``torch.ops.triton_dist.<name>``)
OPS = {"all_gather": all_gather_op, "reduce_scatter": reduce_scatter_op, "all_reduce": all_reduce_op,
       "send": send_op, "recv": recv_op, "ag_gemm": ag_gemm_op, "gemm_rs": gemm_rs_op, "gemm_ar": gemm_ar_op,
       "matmul": matmul_op, "group_gemm": group_gemm_op, "moe_silu_gate": moe_silu_gate_op, "moe_route": moe_route_op, "moe_combine": moe_combine_op,
       "ag_group_gemm": ag_group_gemm_op, "group_gemm_rs": group_gemm_rs_op, "flash_decode": flash_decode_op,
       "merge_attention_partials": merge_attention_partials_op, "flash_attention": flash_attention_op,
       "pre_attn_all_to_all": pre_attn_all_to_all_op, "post_attn_all_to_all": post_attn_all_to_all_op,
       "sp_ag_attention": sp_ag_attention_op, "sp_flash_decode": sp_flash_decode_op}

__all__ = ["OPS", "ag_gemm_out_dtype", "matmul_out_dtype"] + [f"{name}_op" for name in OPS]
