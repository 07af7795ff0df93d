"""Torch-facing distributed ops, one pattern for every family (docs/ops.md): create a context once (it owns the
symmetric buffers; ``close()`` frees them), then call the op with it. Families: the collectives (all_gather,
reduce_scatter, all_reduce), point-to-point (send / recv), the overlapped GEMMs (ag_gemm, gemm_rs, gemm_ar), the
single-device ``matmul`` and the MoE family (``moe_route``, ``group_gemm``, ``moe_combine``; expert parallelism:
``ep_dispatch`` / ``ep_combine``) and attention (sequence parallel: ``sp_flash_decode``, ``sp_ag_attention``, Ulysses'
``pre_attn_all_to_all`` / ``post_attn_all_to_all``). Every op is also
registered as ``torch.ops.triton_dist.<op>`` with a fake implementation, and the functions here emit those ops under
torch.compile (:mod:`._library`)."""
from .collectives import (AllGatherContext, AllReduceContext, P2PContext, ReduceScatterContext,  # noqa: F401
                          all_gather, all_reduce, create_allgather_ctx, create_allreduce_ctx, create_p2p_ctx,
                          create_reduce_scatter_ctx, get_context, recv, reduce_scatter, send)
from .overlap import (AGGemmContext, GemmARContext, GemmRSContext, ag_gemm, create_ag_gemm_context,  # noqa: E402
                      create_gemm_ar_context, create_gemm_rs_context, gemm_ar, gemm_rs)
from .gemm import matmul  # noqa: E402  (the module is ``triton_dist.ops.gemm``; ``ops.matmul`` is the function)
from .moe_gemm import group_gemm, moe_silu_gate  # noqa: E402  (MoE: the grouped GEMM over the routing layout, docs/moe.md)
from .moe_layout import MoERouting, moe_combine, moe_route  # noqa: E402  (MoE: the routing layout on one device)
from .moe_ep import (EPContext, EPHandle, create_ep_context, create_ep_ctx, ep_combine,  # noqa: E402  (MoE: EP)
                     ep_dispatch)
from .moe_tp import (TPMoEContext, TPMoEHandle, ag_group_gemm, create_tp_moe_context,  # noqa: E402  (MoE: TP)
                     create_tp_moe_ctx, group_gemm_rs)
from .attention import flash_decode, merge_attention_partials  # noqa: E402  (attention: local kernels, docs/attention.md)
from .attention_prefill import flash_attention, flash_attention_partial, merge_chunk_partials  # noqa: E402
from .attention_sp import (SPDecodeContext, create_sp_decode_context, create_sp_decode_ctx,  # noqa: E402
                           sp_flash_decode)
from .attention_ulysses import (UlyssesContext, create_ulysses_context, create_ulysses_ctx,  # noqa: E402
                                post_attn_all_to_all, pre_attn_all_to_all)
from .attention_sp_ag import (SPAttentionContext, create_sp_attention_context,  # noqa: E402
                              create_sp_attention_ctx, sp_ag_attention)
from . import _library  # noqa: F401,E402  (registers torch.ops.triton_dist.*)

#: the canonical ``create_<family>_context`` spelling of the collectives' factories (docs/ops.md); the
#: ``create_*_ctx`` names are the reference's and stay
create_allgather_context = create_allgather_ctx
create_reduce_scatter_context = create_reduce_scatter_ctx
create_allreduce_context = create_allreduce_ctx
create_p2p_context = create_p2p_ctx

__all__ = [
    # collectives
    "AllGatherContext", "ReduceScatterContext", "AllReduceContext", "create_allgather_context",
    "create_reduce_scatter_context", "create_allreduce_context", "create_allgather_ctx", "create_reduce_scatter_ctx",
    "create_allreduce_ctx", "all_gather", "reduce_scatter", "all_reduce",
    # point-to-point
    "P2PContext", "create_p2p_context", "create_p2p_ctx", "send", "recv",
    # overlapped GEMMs
    "AGGemmContext", "GemmRSContext", "GemmARContext", "create_ag_gemm_context", "create_gemm_rs_context",
    "create_gemm_ar_context", "ag_gemm", "gemm_rs", "gemm_ar",
    # single-device GEMM
    "matmul",
    # mixture of experts
    "group_gemm", "moe_silu_gate", "moe_route", "moe_combine", "MoERouting", "EPContext", "EPHandle", "create_ep_context",
    "create_ep_ctx", "ep_dispatch", "ep_combine", "TPMoEContext", "TPMoEHandle", "create_tp_moe_context",
    "create_tp_moe_ctx", "ag_group_gemm", "group_gemm_rs",
    # attention (one device; the sequence-parallel ops build on these)
    "flash_decode", "merge_attention_partials", "flash_attention", "flash_attention_partial", "merge_chunk_partials",
    # sequence-parallel attention
    "SPDecodeContext", "create_sp_decode_context", "create_sp_decode_ctx", "sp_flash_decode",
    # Ulysses sequence parallelism (the all-to-alls around attention)
    "UlyssesContext", "create_ulysses_context", "create_ulysses_ctx", "pre_attn_all_to_all", "post_attn_all_to_all",
    "SPAttentionContext", "create_sp_attention_context", "create_sp_attention_ctx", "sp_ag_attention",
    # contexts by handle (what the torch.library ops take)
    "get_context",
]
