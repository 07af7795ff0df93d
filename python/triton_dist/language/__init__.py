"""``triton_dist.language`` (import as ``dl``): distributed ops for Triton kernels.

Ops: :func:`wait`, :func:`consume_token`, :func:`rank`, :func:`num_ranks`, :func:`symm_at`, :func:`notify`,
:func:`extern_call`, the flagged-word (low-latency) pair :func:`store_flagged` / :func:`load_flagged`, the L2 hint
:func:`prefetch_l2`, and the SIMT region helpers (``simt_exec_region``, ``vector``, ``make_vector``,
``zeros_vector``, ``extract``, ``insert``, and the per-thread vector accesses ``ld_vector`` / ``st_vector``, also
exported, as by the reference, from ``triton_dist.language.extra.language_extra``). Each op is declared once in ``core`` and lowered at trace time for
NVIDIA, AMD or the CPU simulator.
"""
from .core import (wait, consume_token, rank, num_ranks, symm_at, notify, extern_call,  # noqa: F401
                   store_flagged, load_flagged, prefetch_l2)

__all__ = ["wait", "consume_token", "rank", "num_ranks", "symm_at", "notify", "extern_call", "store_flagged",
           "load_flagged", "prefetch_l2"]

from .simt import simt_exec_region, vector, make_vector, zeros_vector, extract, insert  # noqa: F401,E402

__all__ += ["simt_exec_region", "vector", "make_vector", "zeros_vector", "extract", "insert"]

from .extra.language_extra import ld_vector, st_vector  # noqa: F401,E402

__all__ += ["ld_vector", "st_vector"]
