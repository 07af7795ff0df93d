"""Torch-facing overlapped compute + communication: AllGather+GEMM, GEMM+ReduceScatter, GEMM+AllReduce.

Pattern (contexts own symmetric buffers and signals; create once, call many times)::

    ag = create_ag_gemm_context(max_m_per_rank=4096, k=8192, dtype=torch.bfloat16)
    c = ag_gemm(a_shard, w, ag)                 # all_gather(a_shard) @ w, overlapped
    rs = create_gemm_rs_context(max_m=8192, n=8192, dtype=torch.bfloat16)
    y = gemm_rs(h, w2, rs)                      # reduce_scatter(h @ w2, dim=0), overlapped
    ar = create_gemm_ar_context(max_m=128, n=8192, dtype=torch.bfloat16)
    z = gemm_ar(h, w2, ar)                      # all_reduce(h @ w2), overlapped (one-shot)

Guarantees:

* Every call is validated on the host before anything is launched (shapes, dtypes, devices, contiguity, sizes
  against the context's capacity, fp8 scales): a ``ValueError`` naming the op, the bad value and what is
  accepted. Contexts exchange a fingerprint at creation (all ranks must create them with the same arguments).
* Signals are epoch-counted (the device counts calls; every rank makes the same calls in the same order), so
  nothing is reset between calls and there is no reset race (see the kernels' docstrings for the argument); the
  AG+GEMM ``chunked`` and GEMM+RS ``ce`` methods use 0/1 flags with their own buffers instead, each raise ordered
  after the reset it could be lost in (:func:`_ag_gemm_chunked`, :func:`_gemm_rs_ce`); GEMM+AR ``ll`` sends flagged
  words (flag = epoch and size tag), which their reader clears in the same call (``kernels.gemm_ar``).
* ``method="auto"`` picks the method (fused kernels, copy-engine + cuBLAS ``chunked`` / ``one_shot`` paths,
  copy-engine + cuBLAS + our GEMM ``ce`` paths, or torch's NCCL + cuBLAS) by the table ``overlap_table.json``
  (:mod:`.overlap_table`; ``$TRITON_DIST_OVERLAP_TABLE`` names another file), measured by
  ``benchmarks/bench_overlap.py --sweep --write-table`` on 2x H200: the fastest method (and fused tiling) per
  measured shape, generic crossover rules for other shapes (GPU only; the simulator always runs the fused kernels).
  Without the file the conservative :data:`DEFAULT_TABLE` applies.
* No op tunes inside a CUDA-graph capture: a first call of a shape there runs the table's or the default tiling.
* Calls are stream-ordered with no host synchronization; epochs live in device memory, so calls can be captured
  in a CUDA graph and replayed.
* Accumulation is fp32; GEMM+RS / GEMM+AR reduce fp32 partials and round once.

This module is the facade: the ops live in :mod:`.allgather_gemm`, :mod:`.gemm_reduce_scatter` and
:mod:`.gemm_allreduce`, their shared context and checks in :mod:`.overlap_context`, the dispatch table in
:mod:`.overlap_table`, the ``ce`` own-rows GEMM tuner in :mod:`.overlap_tuner`.
"""

from __future__ import annotations

from .allgather_gemm import AG_GEMM_METHODS, AGGemmContext, ag_gemm, create_ag_gemm_context
from .gemm_allreduce import GEMM_AR_METHODS, GemmARContext, create_gemm_ar_context, gemm_ar
from .gemm_reduce_scatter import (CE_PIECES_DEFAULT, CE_PIECES_MAX, FUSED_METHODS, FUSED_PIECES_MAX, GEMM_RS_METHODS,
                                  SUB_CHUNKS_MAX, GemmRSContext, create_gemm_rs_context, gemm_rs)
from ..runtime.dtypes import FP8_DTYPES
from .overlap_context import AG_GEMM_DTYPES, GEMM_DTYPES, TAG_RANGE
from .overlap_table import (DEFAULT_TABLE, OVERLAP_TABLE, TABLE_ENV, TABLE_FORMAT, TABLE_PATH, OverlapTableError,
                            dispatch_table, select_method, select_rule, table_config)

__all__ = ["AGGemmContext", "GemmRSContext", "GemmARContext", "create_ag_gemm_context", "create_gemm_rs_context",
           "create_gemm_ar_context", "ag_gemm", "gemm_rs", "gemm_ar", "select_method", "dispatch_table",
           "DEFAULT_TABLE", "AG_GEMM_METHODS", "FUSED_METHODS", "GEMM_RS_METHODS", "GEMM_AR_METHODS",
           "table_config", "select_rule", "OVERLAP_TABLE", "OverlapTableError", "TABLE_PATH", "TABLE_ENV",
           "TABLE_FORMAT", "TAG_RANGE", "GEMM_DTYPES", "AG_GEMM_DTYPES", "FP8_DTYPES", "CE_PIECES_MAX", "CE_PIECES_DEFAULT",
           "FUSED_PIECES_MAX", "SUB_CHUNKS_MAX"]

# internals that benchmarks/overlap_probes.py (bench_overlap.py --probe trace / gemm-rs) and the GPU tier reach through this module
from .allgather_gemm import _first_rows  # noqa: E402,F401
from .overlap_context import _fit_smem  # noqa: E402,F401
from .overlap_tuner import _rs_own_gemm  # noqa: E402,F401
