"""The public calls of the overlapped GEMMs and of ``matmul`` as :mod:`triton_dist.ops` exports them: eager calls run
the implementation (:mod:`.overlap`, :func:`triton_dist.kernels.gemm.matmul`) directly; a call traced by
torch.compile becomes the registered ``torch.ops.triton_dist.<op>`` (:mod:`._library`), whose real implementation is
that same function. So the op and the public call are one computation, and the eager path pays no dispatcher cost
(the collectives' functions do the same inside :mod:`.collectives`; docs/ops.md, "torch.compile").

Under torch.compile the eager-only keywords (``profiler_buffer``, ``first_rows``, ``sub_chunks``, ``pieces``,
matmul's ``config``) raise ``ValueError``, and an ``out`` tensor receives a copy of the op's result (a torch.library
op returns a new tensor)."""
from __future__ import annotations

from typing import Optional

import torch

from . import overlap as _ov
from ._library import _matmul
from .context import check_ctx
from .overlap import AGGemmContext, GemmARContext, GemmRSContext


def _eager_only(op: str, **kw) -> None:
    given = [k for k, v in kw.items() if v is not None]
    if given:
        raise ValueError(f"{op}: {', '.join(given)} apply to eager calls only, not under torch.compile")


def _into(out: Optional[torch.Tensor], res: torch.Tensor) -> torch.Tensor:
    if out is None:
        return res
    out.copy_(res)
    return out


def ag_gemm(a: torch.Tensor, b: torch.Tensor, ctx: AGGemmContext, out: Optional[torch.Tensor] = None,
            scale_a=None, scale_b=None, method: Optional[str] = None, out_dtype: Optional[torch.dtype] = None,
            profiler_buffer: Optional[torch.Tensor] = None, first_rows: Optional[int] = None) -> torch.Tensor:
    """``all_gather(a, dim=0) @ b`` (:func:`triton_dist.ops.overlap.ag_gemm`, which documents the methods);
    ``torch.ops.triton_dist.ag_gemm`` under torch.compile."""
    if not torch.compiler.is_compiling():
        return _ov.ag_gemm(a, b, ctx, out=out, scale_a=scale_a, scale_b=scale_b, method=method, out_dtype=out_dtype,
                           profiler_buffer=profiler_buffer, first_rows=first_rows)
    check_ctx("ag_gemm", ctx, AGGemmContext, "create_ag_gemm_context")
    _eager_only("ag_gemm", profiler_buffer=profiler_buffer, first_rows=first_rows)
    return _into(out, torch.ops.triton_dist.ag_gemm(a, b, ctx.handle, ctx._call_method(method), scale_a, scale_b,
                                                    out_dtype))


def gemm_rs(a: torch.Tensor, b: torch.Tensor, ctx: GemmRSContext, out: Optional[torch.Tensor] = None,
            method: Optional[str] = None, profiler_buffer: Optional[torch.Tensor] = None,
            sub_chunks: Optional[int] = None, pieces: Optional[int] = None) -> torch.Tensor:
    """``reduce_scatter(a @ b, dim=0)`` (:func:`triton_dist.ops.overlap.gemm_rs`, which documents the methods);
    ``torch.ops.triton_dist.gemm_rs`` under torch.compile."""
    if not torch.compiler.is_compiling():
        return _ov.gemm_rs(a, b, ctx, out=out, method=method, profiler_buffer=profiler_buffer, sub_chunks=sub_chunks,
                           pieces=pieces)
    check_ctx("gemm_rs", ctx, GemmRSContext, "create_gemm_rs_context")
    _eager_only("gemm_rs", profiler_buffer=profiler_buffer, sub_chunks=sub_chunks, pieces=pieces)
    return _into(out, torch.ops.triton_dist.gemm_rs(a, b, ctx.handle, ctx._call_method(method)))


def gemm_ar(a: torch.Tensor, b: torch.Tensor, ctx: GemmARContext, out: Optional[torch.Tensor] = None,
            method: Optional[str] = None) -> torch.Tensor:
    """``all_reduce(a @ b)`` (:func:`triton_dist.ops.overlap.gemm_ar`, which documents the methods);
    ``torch.ops.triton_dist.gemm_ar`` under torch.compile."""
    if not torch.compiler.is_compiling():
        return _ov.gemm_ar(a, b, ctx, out=out, method=method)
    check_ctx("gemm_ar", ctx, GemmARContext, "create_gemm_ar_context")
    return _into(out, torch.ops.triton_dist.gemm_ar(a, b, ctx.handle, ctx._call_method(method)))


def matmul(a: torch.Tensor, b: torch.Tensor, out: Optional[torch.Tensor] = None,
           scale: Optional[torch.Tensor] = None, config=None, autotune: bool = True,
           table: bool = True) -> torch.Tensor:
    """``(a @ b) * scale`` on one device (:func:`triton_dist.kernels.gemm.matmul`, which documents the tile choice);
    ``torch.ops.triton_dist.matmul`` under torch.compile."""
    if not torch.compiler.is_compiling():
        return _matmul(a, b, out=out, scale=scale, config=config, autotune=autotune, table=table)
    _eager_only("matmul", config=config)
    return _into(out, torch.ops.triton_dist.matmul(a, b, scale, autotune, table))


__all__ = ["ag_gemm", "gemm_rs", "gemm_ar", "matmul"]
