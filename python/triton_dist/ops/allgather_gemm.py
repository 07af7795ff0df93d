"""AllGather + GEMM: ``ag_gemm(a, b, ctx)`` = ``all_gather(a, dim=0) @ b``, overlapped, and its context
(:func:`create_ag_gemm_context`). The shared context base and checks: :mod:`.overlap_context`; the table:
:mod:`.overlap_table`; the public facade: :mod:`triton_dist.ops.overlap`.
"""
from __future__ import annotations

from typing import Optional

import torch

from ..kernels import ag_gemm as _agk
from ..kernels import gemm_config as _gcfg
from ..runtime import torch_collectives as _torch_coll
from ..runtime.device_info import programs_within_share
from ..runtime.dtypes import FP8_DTYPES
from .context import capacity_arg, check_ctx, check_eager_only, check_method, shmem_runtime, traced_result
from .overlap_context import (AG_GEMM_DTYPES, GEMM_DTYPES, TAG_RANGE, _capturing, _flag_raise, _flag_wait_reset,
                              _operand_checks, _OverlapContext, _scale_tensor)
from .overlap_table import select_rule


def push_programs(comm_programs: Optional[int], device) -> int:
    """``AGGemmContext.comm_programs``: ``comm_programs``, default 8 on a GPU and 2 on the simulator. Where ranks
    share a GPU at most this rank's share less one (``runtime.device_info.programs_within_share``): method ``sm``
    launches them with at least one GEMM program, and that launch's programs spin on the peers' pushes, so more of
    them than the share would sit on every SM of the GPU and keep the peer's kernels (its own launch, or a cuBLAS
    GEMM it runs first) off. Unchanged on a GPU of its own."""
    gpu = torch.device(device).type == "cuda"
    G = int(comm_programs or (8 if gpu else 2))
    fit = programs_within_share(device, G + 1)  # G + 1 unless ranks share a GPU and the share is smaller
    return G if fit == G + 1 else max(1, fit - 1)


class AGGemmContext(_OverlapContext):
    """Buffers for :func:`ag_gemm`: symmetric gathered-A buffer (``world * max_m_per_rank * k`` elements), ready
    signals ``[world, comm_programs]``, ``recv_ok [world]``. Methods: ``sm`` (``comm_programs`` push programs inside
    the GEMM launch, the rest of the SMs compute), ``ce`` (GPU: copy-engine pushes into peer views on a side
    stream, one-program signal kernels between them), ``chunked`` (GPU: its own gathered-A buffer with peer views
    and 0/1 flags; copy-engine pushes, cuBLAS per chunk), ``torch`` (NCCL all_gather_into_tensor + torch.matmul)."""

    kind = "ag_gemm"

    def __init__(self, max_m_per_rank: int, k: int, dtype: torch.dtype, methods=None, comm_programs=None,
                 sim_config=None, **kw):
        for name, v in (("max_m_per_rank", max_m_per_rank), ("k", k)):
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise ValueError(f"create_ag_gemm_context: {name}={v!r} must be a positive int")
        from ..runtime.state import require_backend

        gpu = getattr(require_backend(), "name", "") != "sim"
        # where ranks share a GPU at most the share less one (push_programs): method sm's launch (push + GEMM
        # programs, all waiting for the peers) must stay within the share, else it sits on every SM
        self.comm_programs = push_programs(comm_programs, torch.device("cuda", torch.cuda.current_device()) if gpu
                                           else torch.device("cpu"))
        super().__init__(max_m_per_rank * k, dtype, AG_GEMM_DTYPES, methods=methods,
                         all_methods=("ce", "sm", "chunked") if gpu else ("sm", ),
                         fingerprint_extra=(max_m_per_rank, k, self.comm_programs), **kw)
        self.sim_config = sim_config or _gcfg.SIM_CONFIG
        self._setup_common()
        self.max_m_per_rank, self.k = max_m_per_rank, k
        W, G = self.world_size, self.comm_programs
        u = self._utils
        shape = (W * max_m_per_rank * k, )
        if self.on_gpu and "ce" in self.methods:
            self.a_full_peers = u.nvshmem_create_tensors(shape, dtype, self.rank, W)
            self.a_full = self.a_full_peers[self.rank]
        else:
            self.a_full_peers = None
            self.a_full = u.nvshmem_create_tensor(shape, dtype)
        self.ready = u.nvshmem_create_tensor((W * G, ), torch.int64)
        self.flag = torch.zeros(G, dtype=torch.int64, device=self.device)
        self.recv_ok = u.nvshmem_create_tensor((W, ), torch.int64)
        self.ready.zero_()
        self.recv_ok.zero_()
        self._symmetric += [self.a_full, self.ready, self.recv_ok]
        self._local_copied = torch.cuda.Event() if self.on_gpu else None
        # method "chunked": its own gathered-A buffer (peer views) and 0/1 flags [ready[W], free[W], probe[W]]
        # (see _ag_gemm_chunked); own buffers, so a call of another method never races with it
        self.gather_peers = None
        if self.on_gpu and "chunked" in self.methods and dtype in GEMM_DTYPES:
            self.gather_peers = u.nvshmem_create_tensors(shape, dtype, self.rank, W)
            self._symmetric.append(self.gather_peers[self.rank])
            self.gather_flags_peers = self._alloc_flags(2 * W)
            self.gather_flags_peers[self.rank][W:2 * W].fill_(1)  # every chunk starts free
            self.memops_remote = self._probe_remote_memops(self.gather_flags_peers, 2 * W)
        self._finish_init()

    def select_rule(self, m_total: int, n: Optional[int] = None, eager: bool = False) -> dict:
        """The table's rule for a call (:func:`select_rule`; ``eager``: a call outside CUDA-graph capture), its method
        replaced by an allocated one if needed."""
        rule = select_rule("ag_gemm", self.world_size, m_total, self.on_gpu, n, self.k, eager)
        m = rule["method"]
        if m == "torch" and not self.group_has_nccl:  # ranks share a GPU: torch's path would run on host copies
            return {"method": next((x for x in ("ce", "sm") if x in self.methods), "sm")}
        if m == "torch" or (m in self.methods and (m != "chunked" or self.gather_peers is not None)):
            return rule
        return {"method": next((x for x in ("ce", "sm") if x in self.methods), "torch")}

    def select(self, m_total: int, n: Optional[int] = None) -> str:
        return self.select_rule(m_total, n)["method"]


def create_ag_gemm_context(max_m: Optional[int] = None, k: Optional[int] = None, dtype: torch.dtype = torch.bfloat16,
                           *, max_m_per_rank: Optional[int] = None, max_M: Optional[int] = None,
                           **kw) -> AGGemmContext:
    """Collective: context for :func:`ag_gemm` with shards of up to ``max_m`` rows of ``k`` columns (bf16, fp16, fp8
    e4m3/e5m2; the capacity may be given as ``max_m_per_rank``, its former name, or as the reference's ``max_M``, which
    counts the gathered rows ``world * M_loc`` (the context holds ``ceil(max_M / world)`` rows per rank); the context
    keeps it as ``max_m_per_rank``: docs/ops.md). Keywords: ``methods`` (subset of ``("ce", "sm",
    "chunked")`` to allocate for; each GPU method has its own gathered-A buffer of ``world * max_m * k`` elements),
    ``comm_programs`` (push programs / ready signals per chunk; default 8 on GPU, 2 on the simulator; where ranks
    share a GPU at most the rank's SM share less one: :func:`push_programs`)."""
    if isinstance(max_M, int) and not isinstance(max_M, bool) and max_M > 0:  # the reference's: world * M_loc rows
        max_M = -(-max_M // shmem_runtime()[1].n_pes())
    max_m = capacity_arg("create_ag_gemm_context", "max_m", max_m, {"max_m_per_rank": max_m_per_rank, "max_M": max_M})
    return AGGemmContext(max_m, k, dtype, **kw)


AG_GEMM_METHODS = ("auto", "fused", "ce", "sm", "chunked", "torch")


def ag_gemm(a: torch.Tensor, b: torch.Tensor, ctx: AGGemmContext, out: Optional[torch.Tensor] = None,
            scale_a=None, scale_b=None, method: Optional[str] = None, out_dtype: Optional[torch.dtype] = None,
            profiler_buffer: Optional[torch.Tensor] = None, first_rows: Optional[int] = None) -> torch.Tensor:
    """``all_gather(a, dim=0) @ b`` on every rank: ``a`` ``[M_loc, K]`` (this rank's rows), ``b`` ``[K, N]`` (this
    rank's weight shard). Returns ``[world * M_loc, N]`` (rows of rank ``r`` at ``[r * M_loc, (r + 1) * M_loc)``), in
    ``a``'s dtype (bf16 for fp8 inputs unless ``out_dtype``). fp8 needs ``scale_a`` / ``scale_b`` (per tensor;
    ``C = (A @ B) * scale_a * scale_b``).

    Stream-ordered on the current stream, no host synchronization: calls can be captured in a CUDA graph. Methods
    (``AG_GEMM_METHODS``; ``fused`` = the context's first fused method, ``auto`` = the measured table):

    * ``sm``: one launch: ``comm_programs`` push programs copy the shard into every peer while the other SMs run the
      persistent GEMM (local rows first, then each peer's rows as soon as their ready signal is seen);
    * ``ce`` (GPU): the same GEMM on all but one SM; the shard travels by copy engine (cudaMemcpyAsync into the
      peers' views) on a side stream that the current stream joins before returning;
    * ``chunked`` (GPU, bf16/fp16): copy-engine gather on a side stream into a buffer of its own, and the GEMM is
      cuBLAS (``torch.matmul``): first ``first_rows`` of this rank's rows (default: all of them; ``auto`` takes the
      measured fraction) while the copies run, then one call per peer chunk once the stream has seen its 0/1 ready
      flag (stream wait-value operations: no kernel, no SM; see :func:`_ag_gemm_chunked` for the protocol). When
      ``first_rows < M_loc`` the rest of this rank's rows is copied (on the side stream) into its chunk of the
      gathered buffer and joins the neighbouring peer chunk in one call (rank 0's slice is its first rows and the next
      chunk follows it; another rank's slice is its last rows and the previous chunk precedes it), so at world 2
      the GEMM is one small call and one large one, not two halves;
    * ``torch``: NCCL ``all_gather_into_tensor`` + ``torch.matmul``.

    ``profiler_buffer`` (``sm`` / ``ce``): record per-program tasks (``kernels.ag_gcfg.TASKS``) into a buffer from
    ``triton_dist.tools.profiler.alloc_profiler_buffer``."""
    op = "ag_gemm"
    check_ctx(op, ctx, AGGemmContext, "create_ag_gemm_context")
    method = ctx._call_method(method)  # None: the context's method; "nccl": "torch" (docs/ops.md)
    if torch.compiler.is_compiling():  # traced: the registered op (docs/ops.md, "torch.compile")
        check_eager_only(op, profiler_buffer=profiler_buffer, first_rows=first_rows)
        return traced_result(torch.ops.triton_dist.ag_gemm(a, b, ctx.handle, method, scale_a, scale_b, out_dtype),
                             out)
    _operand_checks(op, a, b, ctx, AG_GEMM_DTYPES)
    if not a.is_contiguous():
        raise ValueError(f"{op}: a must be contiguous")
    M_loc, K = a.shape
    N = b.shape[1]
    if K != ctx.k:
        raise ValueError(f"{op}: a has K={K} columns, the context was created for k={ctx.k}")
    if M_loc > ctx.max_m_per_rank:
        raise ValueError(f"{op}: a has {M_loc} rows, the context holds at most max_m_per_rank={ctx.max_m_per_rank}")
    check_method(op, method, AG_GEMM_METHODS)
    fp8 = a.dtype in FP8_DTYPES
    scale = _scale_tensor(op, scale_a, scale_b, fp8, a.device)
    odt = out_dtype or (torch.bfloat16 if fp8 else a.dtype)
    if odt not in GEMM_DTYPES + (torch.float32, ):
        raise ValueError(f"{op}: out_dtype={odt} is not supported; accepted: bfloat16, float16, float32")
    W = ctx.world_size
    out = ctx._check_out(op, out, (W * M_loc, N), odt, a.device)
    orig, rule = method, None
    if method == "auto":
        rule = ctx.select_rule(W * M_loc, N, eager=not _capturing())
        method = rule["method"]
    elif method == "fused":
        method = "ce" if "ce" in ctx.methods else "sm"
    if method in ("ce", "chunked") and not ctx.on_gpu:
        raise ValueError(f"{op}: method={method!r} (copy engine) needs GPUs; accepted here: auto, fused, sm, torch")
    if method == "chunked" and rule is not None and (fp8 or odt != a.dtype):  # cuBLAS per chunk: bf16/fp16 only
        method = next((x for x in ("ce", "sm") if x in ctx.methods), "torch")
    if method in ("ce", "sm", "chunked") and method not in ctx.methods:
        raise ValueError(f"{op}: method={method!r} was not allocated by this context (methods={ctx.methods})")
    if method == "chunked" and (fp8 or odt != a.dtype):
        raise ValueError(f"{op}: method='chunked' (cuBLAS per chunk) takes bf16/fp16 inputs and output in a's dtype; "
                         f"use 'ce' or 'sm' for fp8 or another out_dtype")
    if first_rows is not None:
        if method != "chunked" or rule is not None:
            raise ValueError(f"{op}: first_rows applies to method='chunked' only (got method={orig!r})")
        if not isinstance(first_rows, int) or isinstance(first_rows, bool) or not 1 <= first_rows <= max(M_loc, 1):
            raise ValueError(f"{op}: first_rows={first_rows!r} must be an int in [1, {M_loc}] (rows of a computed "
                             f"before waiting for peers)")
    elif method == "chunked":
        first_rows = _first_rows(rule, M_loc)
    prof, profile = ctx._prof(op, profiler_buffer)
    ctx._check_peers(op, (tuple(a.shape), tuple(b.shape), str(a.dtype), method))
    if M_loc == 0 or N == 0:
        return out
    if method == "torch":
        return _ag_gemm_torch(a, b, ctx, out, scale)
    n = M_loc * K
    tag = n % TAG_RANGE
    if method == "chunked":
        return _ag_gemm_chunked(ctx, a, b, out, n, first_rows)
    G = ctx.comm_programs
    a_full = ctx.a_full[:W * n]
    cfg = ctx._cfg(W * M_loc, N, K, a.dtype.itemsize)
    tma = ctx._use_tma() and not cfg.pointer_loads
    # TMA-store epilogue (a ``t`` tiling): one descriptor over out, so only where no chunk's last tile overhangs
    # into the next chunk and out's rows suit a descriptor; else the tile is stored through pointers
    tma_store = cfg.tma_store and tma and M_loc % cfg.BLOCK_M == 0 and _gcfg.tma_store_ok(out)
    push = G if method == "sm" else 0
    gemm_sms = max(1, ctx.num_sms - (push if ctx.on_gpu else 0) - (1 if method == "ce" else 0))
    tiles = W * -(-M_loc // cfg.BLOCK_M) * -(-N // cfg.BLOCK_N)
    gemm_programs = max(1, min(gemm_sms, tiles))
    cur = None
    if method == "ce":
        cur = torch.cuda.current_stream(ctx.device)
        ctx.side_stream.wait_stream(cur)
        with torch.cuda.stream(ctx.side_stream):
            _ag_ce(ctx, a, n, tag)
        if not _capturing():
            a.record_stream(ctx.side_stream)
    _agk.ag_gemm_kernel[(push + gemm_programs, )](
        a_full, b, out, ctx.ready, scale if scale is not None else out, a, ctx.recv_ok, ctx.counter, prof, M_loc, N,
        K, b.stride(0), b.stride(1), out.stride(0), out.stride(1), tag, ctx.rank, WORLD=W, NSIG=G,
        PUSH_PROGRAMS=push, COPY_BLOCK=ctx._block(), **cfg.meta(), NUM_SMS=gemm_programs, USE_TMA=tma,
        HAS_SCALE=scale is not None, PROFILE=profile, TMA_STORE=tma_store, **cfg.launch(), **ctx._coop())
    if cur is not None:
        cur.wait_stream(ctx.side_stream)
    return out


def _ag_ce(ctx, a, n, tag):
    """Copy-engine all-gather (GPU, on the side stream): raise recv_ok on the peers, then per peer in rotated order:
    wait for its recv_ok, copy the shard into the peer's view of a_full (cudaMemcpyAsync over NVLink), signal."""
    W, r, G = ctx.world_size, ctx.rank, ctx.comm_programs
    flat = a.reshape(-1)
    sig = dict(WORLD=W, NSIG=G, num_warps=1)
    _agk.ag_ce_signal_kernel[(1, )](ctx.ready, ctx.recv_ok, ctx.counter, ctx.flag, r, tag, r, STEP=0, **sig)
    for i in range(1, W):
        p = (r + i) % W
        _agk.ag_ce_signal_kernel[(1, )](ctx.ready, ctx.recv_ok, ctx.counter, ctx.flag, p, tag, r, STEP=1, **sig)
        ctx.a_full_peers[p][r * n:(r + 1) * n].copy_(flat)
        _agk.ag_ce_signal_kernel[(1, )](ctx.ready, ctx.recv_ok, ctx.counter, ctx.flag, p, tag, r, STEP=2, **sig)


def _first_rows(rule, m_loc: int) -> int:
    """Rows of the local shard that ``chunked`` computes before waiting for peers: the rule's measured
    ``first_frac`` of ``m_loc`` in multiples of 64 rows (at least 64), or all of them."""
    frac = (rule or {}).get("first_frac")
    if not isinstance(frac, (int, float)) or not 0 < frac < 1 or m_loc <= 64:
        return m_loc
    return min(m_loc, max(64, int(round(frac * m_loc / 64)) * 64))


def _ag_gemm_chunked(ctx, a, b, out, n, first_rows):
    """Method ``chunked`` (see :func:`ag_gemm`). Buffers: ``gather_peers`` (gathered A, peer views) and local 0/1
    flags ``gather_flags_peers[rank]``: ``ready[src]`` = src's shard has landed in chunk ``src``; ``free[p]`` (word
    ``W + p``) = rank p has finished its GEMM over this rank's chunk of p's buffer, this rank may write it again.
    One call (``side`` = the context's side stream, which joins the current stream before returning)::

        side: for each peer p (rotated): wait free[p] == 1, reset it        (initially 1)
                                         copy the shard into p's chunk rank  (copy engine, over NVLink)
                                         raise p.ready[rank]
              (first_rows < M_loc): copy the rest of the shard into this rank's own chunk
        main: out[own first rows] = A[first rows] @ B                       (cuBLAS, reads ``a`` itself)
              for each peer src (rotated): wait ready[src] == 1, reset it
                                           out[chunk src] = gathered[chunk src] @ B   (joined with the rest)
                                           raise src.free[rank]

    No handshake kernel and no epoch: a raise is never lost in a reset (its producer first waits for the other
    flag, which the consumer raises after the reset, in stream order), and the 0/1 values are the same in every
    call, so any number of calls can be captured in one CUDA graph and replayed. Enqueue order: every side-stream
    operation of the call is enqueued before the first wait on the current stream (the driver may serve both
    streams from one hardware queue, in order)."""
    W, r = ctx.world_size, ctx.rank
    M_loc, K = a.shape
    s = first_rows
    flat = a.reshape(-1)
    flags = ctx.gather_flags_peers[r]
    gathered = ctx.gather_peers[r]
    cur = torch.cuda.current_stream(ctx.device)
    # the slice computed first sits at the edge next to the chunk it joins: rank 0 -> its first rows (chunk 1
    # follows), rank r > 0 -> its last rows (chunk r - 1 precedes); the rest [lo, hi) is copied into the buffer
    joined = -1
    if s < M_loc and W > 1:
        joined = 1 if r == 0 else r - 1
        lo, hi = (s, M_loc) if r == 0 else (0, M_loc - s)
        slc = (0, s) if r == 0 else (M_loc - s, M_loc)
    else:
        slc = (0, M_loc)
    side = ctx.side_stream
    side.wait_stream(cur)
    with torch.cuda.stream(side):
        for i in range(1, W):
            p = (r + i) % W
            _flag_wait_reset(ctx, side, flags[W + p:W + p + 1])
            ctx.gather_peers[p][r * n:(r + 1) * n].copy_(flat)
            _flag_raise(ctx, side, ctx.gather_flags_peers[p][r:r + 1])
        if joined >= 0:
            gathered[r * n + lo * K:r * n + hi * K].copy_(flat[lo * K:hi * K])
            ctx._local_copied.record(side)
    if not _capturing():
        a.record_stream(side)
    torch.matmul(a[slc[0]:slc[1]], b, out=out[r * M_loc + slc[0]:r * M_loc + slc[1]])
    if joined >= 0:
        cur.wait_event(ctx._local_copied)
    for i in range(1, W):
        src = (r + i) % W
        _flag_wait_reset(ctx, cur, flags[src:src + 1])
        g0, g1 = src * M_loc, (src + 1) * M_loc
        if src == joined:  # the chunk and the local rest, contiguous in the buffer and in out
            g0, g1 = (s, 2 * M_loc) if r == 0 else ((r - 1) * M_loc, (r + 1) * M_loc - s)
        torch.matmul(gathered[g0 * K:g1 * K].view(g1 - g0, K), b, out=out[g0:g1])
        _flag_raise(ctx, cur, ctx.gather_flags_peers[src][W + r:W + r + 1])
    cur.wait_stream(side)
    return out


def _ag_gemm_torch(a, b, ctx, out, scale):
    W = ctx.world_size
    full = torch.empty((W * a.shape[0], a.shape[1]), dtype=a.dtype, device=a.device)
    if a.dtype in FP8_DTYPES:
        _torch_coll.all_gather_into_tensor(full.view(torch.uint8), a.view(torch.uint8), group=ctx.group)
        res = (full.to(torch.float32) @ b.to(torch.float32)) * scale
        out.copy_(res)
        return out
    _torch_coll.all_gather_into_tensor(full, a, group=ctx.group)
    if out.dtype == a.dtype:
        torch.matmul(full, b, out=out)
    else:
        out.copy_(torch.matmul(full, b))
    return out


__all__ = ["AGGemmContext", "create_ag_gemm_context", "ag_gemm", "AG_GEMM_METHODS"]
