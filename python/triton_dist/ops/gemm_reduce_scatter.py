"""GEMM + ReduceScatter: ``gemm_rs(a, b, ctx)`` = ``reduce_scatter(a @ b, dim=0)``, overlapped, and its context
(:func:`create_gemm_rs_context`). The shared context base and checks: :mod:`.overlap_context`; the ``ce`` method's
own-rows GEMM tuner: :mod:`.overlap_tuner`; the public facade: :mod:`triton_dist.ops.overlap`.
"""
from __future__ import annotations

from typing import Optional

import torch

from ..kernels import ag_gemm as _agk
from ..kernels import gemm_rs as _rsk
from ..runtime import torch_collectives as _torch_coll
from .context import alias_arg, capacity_arg, check_ctx, check_eager_only, traced_result
from .overlap_context import (TAG_RANGE, _flag_raise, _flag_wait_reset, _PartialsContext,
                              _partials_checks, _run_partials, _tiles)
from .overlap_tuner import CE_PIECES_MAX, _rs_ce_tune, _rs_own_gemm


class GemmRSContext(_PartialsContext):
    """Buffers for :func:`gemm_rs` with up to ``max_m`` rows (``world * shard``) and ``n`` output columns."""

    kind = "gemm_rs"

    def __init__(self, max_m: int, n: int, dtype: torch.dtype, sim_config=None, **kw):
        super().__init__(max_m, n, dtype, sim_config, **kw)
        if max_m % self.world_size:
            raise ValueError(f"create_gemm_rs_context: max_m={max_m} must be a multiple of the world size "
                             f"{self.world_size}")
        self._setup_common()
        ms = max_m // self.world_size
        bm, bn = self._min_block()
        W, u = self.world_size, self._utils
        self.chunk_stage_peers = self.ce_stage_peers = None
        if self.on_gpu:  # method "chunked": bf16 partials pushed by copy engine, ready flags too (peer views)
            self.chunk_stage_peers = u.nvshmem_create_tensors((W * ms * n, ), dtype, self.rank, W)
            self.chunk_ready_peers = u.nvshmem_create_tensors((W, ), torch.int64, self.rank, W)
            self.chunk_recv_ok = u.nvshmem_create_tensor((W, ), torch.int64)
            self.chunk_ready_peers[self.rank].zero_()
            self.chunk_recv_ok.zero_()
            self.chunk_tmp = torch.empty((max(W - 1, 1) * ms * n, ), dtype=dtype, device=self.device)
            self.chunk_flag = torch.zeros(1, dtype=torch.int64, device=self.device)
            # sub_chunks >= 2: arrival flags [SUB_CHUNKS_MAX, W] (0/1, raised by the sender's copy engine after the
            # data, reset by this rank's receive stream), the copies of the first peer's partial into `out` run on
            # that stream, gated by stream wait-value operations where the driver has them (else a wait kernel)
            self.chunk_arrived_peers = u.nvshmem_create_tensors((SUB_CHUNKS_MAX * W, ), torch.int64, self.rank, W)
            self.chunk_arrived_peers[self.rank].zero_()
            self.recv_stream = torch.cuda.Stream(device=self.device)
            self._recv_events = [torch.cuda.Event() for _ in range(SUB_CHUNKS_MAX)]
            self._symmetric += [self.chunk_stage_peers[self.rank], self.chunk_ready_peers[self.rank],
                                self.chunk_recv_ok, self.chunk_arrived_peers[self.rank]]
            # method "ce": its own bf16 staging (peer views) and local 0/1 flags [ready[W * CE_PIECES_MAX], free[W],
            # probe[W]] (see _gemm_rs_ce); own buffers, so a call of another method never races with it
            self.ce_stage_peers = u.nvshmem_create_tensors((W * ms * n, ), dtype, self.rank, W)
            self._symmetric.append(self.ce_stage_peers[self.rank])
            self.ce_free = W * CE_PIECES_MAX  # index of free[0]
            self.ce_flags_peers = self._alloc_flags(self.ce_free + W)
            self.ce_flags_peers[self.rank][self.ce_free:self.ce_free + W].fill_(1)  # every slot starts free
            self.ce_count = torch.zeros(1, dtype=torch.int64, device=self.device)
            self._ce_tuned = set()
            self.memops_remote = self._probe_remote_memops(self.ce_flags_peers, self.ce_free + W)
        # method "fused": the peers' partial tiles arrive in the output dtype (rounded once, as torch's path sums);
        # on sm_90 at world 2 they leave by TMA store (tma_push; False: pointer stores, for measurements)
        self.tma_push = True
        self._alloc_partials(ms * n, _tiles(ms, n, bm, bn), dtype)
        # method "fused" with pieces = P: the peer tiles' partials go to this local send buffer, then stream to
        # their owners in P row pieces during the program's next main loop (kernels.gemm_rs)
        self.send = torch.empty((max(W - 1, 1) * self.cap, ), dtype=dtype, device=self.device)
        # (M, K) of the eager auto calls whose graph rule was looked up (ce tuned before a capture needs it)
        self._graph_rule_seen = set()

    @property
    def output_dtype(self) -> torch.dtype:
        """The reference's name for :attr:`dtype`: the output's dtype, which is the inputs'."""
        return self.dtype

    def _warm_graph_rule(self, a, b, method: str) -> None:
        """The graph rule's ``ce`` tunes its GEMM on a shape's first call, which a capture cannot do (it would run
        the untuned tiling): this eager ``auto`` call running another ``method`` tunes it. Looked up once per
        shape, off the later calls' path."""
        M, K = a.shape
        if method == "ce" or (M, K) in self._graph_rule_seen:
            return
        self._graph_rule_seen.add((M, K))
        if self.select_rule(M, K)["method"] == "ce":
            _rs_ce_tune(self, a, b)


def create_gemm_rs_context(max_m: Optional[int] = None, n: Optional[int] = None, dtype: Optional[torch.dtype] = None,
                           *, max_M: Optional[int] = None, output_dtype: Optional[torch.dtype] = None,
                           **kw) -> GemmRSContext:
    """Collective: context for :func:`gemm_rs` (bf16 / fp16, default bf16): inputs of up to ``max_m`` rows (a
    multiple of the world size) and exactly ``n`` output columns. ``dtype`` is the inputs' and the output's dtype;
    the reference's ``output_dtype`` is accepted for it (one of them, or both with the same value), as is its
    ``max_M`` for ``max_m`` (docs/ops.md). Symmetric memory: ``2 * world * (max_m / world) * n`` elements of
    ``dtype`` + signals (``fused``), and on GPU the ``chunked`` / ``ce`` stagings."""
    factory = "create_gemm_rs_context"
    return GemmRSContext(capacity_arg(factory, "max_m", max_m, {"max_M": max_M}), n,
                         alias_arg(factory, "dtype", dtype, "output_dtype", output_dtype, torch.bfloat16), **kw)


FUSED_METHODS = ("auto", "fused", "torch")


GEMM_RS_METHODS = ("auto", "fused", "chunked", "ce", "torch")


#: gemm_rs ``ce`` pieces when neither the call nor the table gives them
CE_PIECES_DEFAULT = 2


#: most row pieces a gemm_rs ``fused`` peer tile streams in (``pieces``; powers of two, at most the tile's rows)
FUSED_PIECES_MAX = 64


def _fused_pieces_ok(p) -> bool:
    return isinstance(p, int) and not isinstance(p, bool) and (p == 0 or (0 < p <= FUSED_PIECES_MAX and
                                                                          p & (p - 1) == 0))


#: most row sub-chunks per owner that gemm_rs ``chunked`` pipelines (``sub_chunks``)
SUB_CHUNKS_MAX = 4


def gemm_rs(a: torch.Tensor, b: torch.Tensor, ctx: GemmRSContext, out: Optional[torch.Tensor] = None,
            method: Optional[str] = None, profiler_buffer: Optional[torch.Tensor] = None,
            sub_chunks: Optional[int] = None, pieces: Optional[int] = None) -> torch.Tensor:
    """``reduce_scatter(a @ b, dim=0)``: ``a`` ``[M, K_loc]``, ``b`` ``[K_loc, N]`` (this rank's shards); returns this
    rank's ``[M / world, N]`` rows of the sum over ranks (fp32 accumulation; each method's roundings below). ``M``
    must be a multiple of the world size. Stream-ordered, no host synchronization (CUDA-graph capturable).
    ``method``:
    ``auto`` (measured table) / ``fused`` (one persistent kernel, :func:`~triton_dist.kernels.gemm_rs.gemm_rs_kernel`:
    peers' row chunks first, each partial tile rounded once to the output dtype and stored straight into the
    owner's symmetric staging (sm_90 at world 2: one TMA store the program does not wait for, its signal raised
    after the program's next tile), own chunk last, the peers' partials added in fp32 to the own fp32 product as
    they arrive, rounded once: torch's precision; ``pieces`` = P (a power of two up to
    :data:`FUSED_PIECES_MAX`; ``auto`` takes the measured value, an explicit ``fused`` call defaults to 0): each
    peer tile is stored locally and streams to its owner in P row pieces during the program's next main loop,
    instead of leaving at once: all programs finish their tiles together, and their pushes at once saturate NVLink
    and hold the programs' next loads) /
    ``chunked`` (GPU: cuBLAS per row chunk, peers' chunks first, each bf16 partial pushed into its owner's
    symmetric staging by copy engine while cuBLAS computes the next chunk; then the own chunk plus the peers'
    partials, summed in fp32 and rounded once: each partial is rounded to bf16 once, as on the torch path.
    ``sub_chunks`` = S >= 2 (at most :data:`SUB_CHUNKS_MAX`; ``auto`` takes the measured value, an explicit
    ``chunked`` call defaults to 1) pipelines the own chunk too: every chunk is computed in S row pieces, and piece
    s of the own rows is ``out_s = stage_s + A_s @ B`` in one cuBLAS call (``addmm_``, beta = 1: the first peer's
    bf16 partial, copied into ``out`` on a receive stream as soon as it has landed, enters the GEMM's fp32 epilogue;
    one rounding at world 2, one more per further peer) instead of a separate summing pass after the GEMM) /
    ``ce`` (GPU: per peer, cuBLAS computes the peer's rows into a local buffer, and the copy engine pushes that
    bf16 partial into the peer's symmetric staging in ``pieces`` row pieces (side stream; 1 to
    :data:`CE_PIECES_MAX`, ``auto`` takes the measured value, else :data:`CE_PIECES_DEFAULT`), raising a 0/1 ready
    flag on the peer after each piece; this rank's own rows are one launch of our GEMM
    (:func:`~triton_dist.kernels.gemm_rs.rs_own_gemm_kernel`) that waits for the pieces in each tile's epilogue, after
    its main loop, and adds the peers' partials there (fp32, one rounding): no separate summing pass, no handshake
    kernel, no epoch (0/1 *free* flags say when a peer's staging may be written again). The first eager call of a
    shape autotunes that GEMM (on scratch flags); a first call inside CUDA-graph capture runs the deterministic
    tiling instead, untuned (:mod:`.overlap_tuner`)) /
    ``torch`` (``torch.matmul`` + NCCL ``reduce_scatter_tensor``: bf16 partials, NCCL's summation).
    ``profiler_buffer`` (``fused``): record per-program tasks (``kernels.gemm_rs.TASKS``)."""
    op = "gemm_rs"
    check_ctx(op, ctx, GemmRSContext, "create_gemm_rs_context")
    method = ctx._call_method(method)  # None: the context's method; "nccl": "torch" (docs/ops.md)
    if torch.compiler.is_compiling():  # traced: the registered op (docs/ops.md, "torch.compile")
        check_eager_only(op, profiler_buffer=profiler_buffer, sub_chunks=sub_chunks, pieces=pieces)
        return traced_result(torch.ops.triton_dist.gemm_rs(a, b, ctx.handle, method), out)
    _partials_checks(op, a, b, ctx, method, GEMM_RS_METHODS)
    if method in ("chunked", "ce") and ctx.chunk_stage_peers is None:
        raise ValueError(f"{op}: method={method!r} (cuBLAS + peer memory) needs GPUs; accepted here: auto, fused, "
                         f"torch")
    M = a.shape[0]
    W = ctx.world_size
    if M % W:
        raise ValueError(f"{op}: a has M={M} rows, not a multiple of the world size {W}")
    if M > ctx.max_m:
        raise ValueError(f"{op}: a has M={M} rows, the context holds at most max_m={ctx.max_m}")
    if sub_chunks is not None:
        if method != "chunked":
            raise ValueError(f"{op}: sub_chunks applies to method='chunked' only (got method={method!r})")
        if not isinstance(sub_chunks, int) or isinstance(sub_chunks, bool) or not 1 <= sub_chunks <= SUB_CHUNKS_MAX:
            raise ValueError(f"{op}: sub_chunks={sub_chunks!r} must be an int in [1, {SUB_CHUNKS_MAX}]")
    if pieces is not None:
        if method not in ("ce", "fused"):
            raise ValueError(f"{op}: pieces applies to method='ce' and 'fused' only (got method={method!r})")
        if method == "ce" and (not isinstance(pieces, int) or isinstance(pieces, bool) or
                               not 1 <= pieces <= CE_PIECES_MAX):
            raise ValueError(f"{op}: pieces={pieces!r} must be an int in [1, {CE_PIECES_MAX}] for method='ce'")
        if method == "fused" and not _fused_pieces_ok(pieces):
            raise ValueError(f"{op}: pieces={pieces!r} must be 0 (push at once) or a power of two up to "
                             f"{FUSED_PIECES_MAX} for method='fused'")

    def params(meth, rule, m):
        if meth == "fused":
            p = pieces if pieces is not None else (rule or {}).get("pieces", 0)
            return {"pieces": p if _fused_pieces_ok(p) else 0}
        if meth == "ce":
            p = pieces if pieces is not None else (rule or {}).get("pieces", CE_PIECES_DEFAULT)
            if not isinstance(p, int) or not 1 <= p <= CE_PIECES_MAX:
                p = CE_PIECES_DEFAULT
            return {"pieces": max(1, min(p, m // W))}
        if meth != "chunked":
            return {}
        sub = sub_chunks if sub_chunks is not None else (rule or {}).get("sub_chunks", 1)
        if not isinstance(sub, int) or not 1 <= sub <= SUB_CHUNKS_MAX:
            sub = 1
        return {"sub_chunks": max(1, min(sub, m // W))}

    return _run_partials(op, ctx, a, b, out, method, True, {"torch": _gemm_rs_torch, "chunked": _gemm_rs_chunked,
                                                           "ce": _gemm_rs_ce},
                         _rsk.gemm_rs_kernel, profiler_buffer, params)


def _gemm_rs_ce(a, b, ctx, out, pieces=CE_PIECES_DEFAULT):
    """Method ``ce`` of :func:`gemm_rs` (see there). Flags (``ce_flags_peers[rank]``, local words, 0/1):
    ``ready[src * CE_PIECES_MAX + j]`` = piece ``j`` of src's partial of this rank's rows has landed in
    ``stage[src]``; ``free[d]`` (word ``ce_free + d``) = rank d's last GEMM that read this rank's partial in its
    staging has ended, so this rank may push into it again. One call (``side`` = the context's side stream)::

        main: for each peer d (rotated): tmp[d] = A[rows of d] @ B                      (cuBLAS, local)
        side:   (after tmp[d])           wait free[d] == 1, reset it                  (initially 1)
                                         for each piece j: copy tmp[d] piece j -> d.stage[rank] piece j
                                                           raise d.ready[rank, j]     (copy engine, no SM)
        main: out = A[own rows] @ B + sum_src stage[src]   (rs_own_gemm_kernel: waits for the pieces of each tile
                                                            after its main loop; zeroes the ready flags at its end)
              for each peer src: raise src.free[rank]; join side

    Why 0/1 flags suffice: rank d raises this rank's ``free[d]`` only after its GEMM that zeroed its ready flags, so
    a raise of d's ready flags (which waits for that free) is never lost in the zeroing; and this rank's free is
    reset before the push it guards. Nothing depends on a host counter: any number of calls can be captured in one
    CUDA graph and replayed. Where the stream cannot wait without an SM (no stream memory operations, or
    bounded-wait mode) the free waits run on the main stream before the first GEMM: a wait kernel on the side
    stream would not get an SM while this rank's GEMM waits in its epilogue for the peer."""
    M, K = a.shape
    N = b.shape[1]
    W, r = ctx.world_size, ctx.rank
    rows = M // W
    cap = (ctx.max_m // W) * ctx.n
    P = pieces
    bounds = [rows * j // P for j in range(P + 1)]
    cur = torch.cuda.current_stream(ctx.device)
    side = ctx.side_stream
    flags = ctx.ce_flags_peers[r]
    free = ctx.ce_free
    peers = [(r + i) % W for i in range(1, W)]
    if not ctx.memops_wait:
        for d in peers:
            _flag_wait_reset(ctx, cur, flags[free + d:free + d + 1])
    for i, d in enumerate(peers):
        tmp = ctx.chunk_tmp[i * cap:i * cap + rows * N].view(rows, N)
        torch.matmul(a[d * rows:(d + 1) * rows], b, out=tmp)
        side.wait_stream(cur)
        with torch.cuda.stream(side):
            if ctx.memops_wait:
                # after this call's GEMM of d's rows, not at the call's start: a wait-value enqueued ahead of the
                # GEMM made ce bimodal in graph replay (some runs 25-35 us slower per call at 8B M=2048 and 70B
                # M=512; benchmarks/results/2026-11-30-overlap-v4/README.md), consistent with the wait sharing a
                # hardware queue with the GEMM and holding it until the peer's previous call had ended
                _flag_wait_reset(ctx, side, flags[free + d:free + d + 1])
            dst = ctx.ce_stage_peers[d]
            for j in range(P):
                lo, hi = bounds[j], bounds[j + 1]
                if hi > lo:
                    dst[r * cap + lo * N:r * cap + hi * N].copy_(tmp[lo:hi].reshape(-1))
                w = r * CE_PIECES_MAX + j
                _flag_raise(ctx, side, ctx.ce_flags_peers[d][w:w + 1])
    own = a[r * rows:(r + 1) * rows]
    if peers:
        _rs_own_gemm(ctx, own, b, out, ctx.ce_stage_peers[r], flags, cap, P)
    else:
        torch.matmul(own, b, out=out)
    for src in peers:
        _flag_raise(ctx, cur, ctx.ce_flags_peers[src][free + r:free + r + 1])
    cur.wait_stream(side)  # the pushes read tmp (the next call's GEMMs write it), and graph capture needs the join
    return out


def _gemm_rs_chunked(a, b, ctx, out, sub_chunks=1):
    """Method ``chunked`` of :func:`gemm_rs` (see there). Signals: ``ag_ce_signal_kernel`` steps 5 / 3 / 4 on the
    context's chunk arrays (``NSIG=1``); with ``sub_chunks >= 2`` the pieces' arrival flags
    (``chunk_arrived_peers``, 0/1) instead of step 3.

    Order of one call at ``sub_chunks = S`` (streams: main = current, side = pushes, recv = this rank's receipts)::

        main: handshake (STEP 5: epoch, recv_ok exchanged with every peer)
        for each peer d (rotated), piece s:  main: tmp = A[rows of d, piece s] @ B
                                             side: copy tmp -> d's stage[rank, piece s]; raise d's flag
        S == 1: main: own = A[own rows] @ B; join side; one launch (rs_chunked_finish_kernel): wait each peer's
                      ready, out = own + sum(stage) in fp32 rounded once, publish the epoch
        S >= 2: recv: per piece s: wait every peer's arrival flag (and reset it); out_s = stage[first peer, s]
                main: per piece s: join recv's piece s; out_s += A[own rows, piece s] @ B  (addmm_, beta = 1);
                      further peers (world > 2): out_s += stage[peer, s]
                main: join side and recv; publish the epoch (STEP 4)
    """
    M, K = a.shape
    N = b.shape[1]
    W, r = ctx.world_size, ctx.rank
    rows = M // W
    cap = (ctx.max_m // W) * ctx.n
    tag = (M * N) % TAG_RANGE
    S = sub_chunks
    bounds = [rows * i // S for i in range(S + 1)]
    sig = dict(WORLD=W, NSIG=1, num_warps=1)
    ready, recv_ok = ctx.chunk_ready_peers[r], ctx.chunk_recv_ok
    cur = torch.cuda.current_stream(ctx.device)
    _agk.ag_ce_signal_kernel[(1, )](ready, recv_ok, ctx.counter, ctx.chunk_flag, r, tag, r, STEP=5, **sig)
    side = ctx.side_stream
    side.wait_stream(cur)
    for i in range(1, W):
        d = (r + i) % W
        for j in range(S):
            lo, hi = bounds[j], bounds[j + 1]
            part = ctx.chunk_tmp[(i - 1) * cap + lo * N:(i - 1) * cap + hi * N].view(hi - lo, N)
            torch.matmul(a[d * rows + lo:d * rows + hi], b, out=part)
            side.wait_stream(cur)
            with torch.cuda.stream(side):
                ctx.chunk_stage_peers[d][r * cap + lo * N:r * cap + hi * N].copy_(part.view(-1))
                if S == 1:
                    ctx.chunk_ready_peers[d][r:r + 1].copy_(ctx.chunk_flag)
                else:
                    ctx.chunk_arrived_peers[d][j * W + r:j * W + r + 1].copy_(ctx.flag_one)
    stage = ctx.chunk_stage_peers[r]
    peers = [(r + i) % W for i in range(1, W)]
    if S == 1:
        own = torch.matmul(a[r * rows:(r + 1) * rows], b)
        cur.wait_stream(side)  # the pushes read chunk_tmp: done before the epoch is published
        # 4 programs per SM: enough loads in flight for HBM bandwidth, and few enough that the per-program epoch
        # atomics on one counter stay cheap (one program per block, 8192 of them, spent ~30 us on those atomics);
        # no co-residency needed (the programs only wait for the peers' flags); one per SM of this rank's share
        # where ranks share a GPU (device_info.waiting_grid_programs: else they sit on every SM and the peer's GEMM
        # that raises their flags cannot start)
        blk = 2048
        grid = (max(1, min(ctx.waiting_programs, -(-(rows * N) // blk))), )
        _rsk.rs_chunked_finish_kernel[grid](out, own, stage, ready, ctx.counter, rows, N, out.stride(0), cap, tag, r,
                                            WORLD=W, BLOCK=blk, CONTIGUOUS=out.stride(0) == N, num_warps=4)
        return out
    else:
        # Enqueue order matters with stream wait-value operations (the driver may serve several streams from one
        # hardware queue, in enqueue order): every push above is enqueued before the first wait below, and piece
        # j's wait is enqueued before piece j's GEMM and after piece j - 1's, so no queue ever holds a push or a
        # GEMM behind a wait that needs it (directly or through the peer).
        recv = ctx.recv_stream
        recv.wait_stream(cur)  # after the handshake, and after whatever last used `out`
        for j in range(S):
            lo, hi = bounds[j], bounds[j + 1]
            with torch.cuda.stream(recv):
                for src in peers:
                    _flag_wait_reset(ctx, recv, ctx.chunk_arrived_peers[r][j * W + src:j * W + src + 1])
                if peers:
                    out[lo:hi].copy_(stage[peers[0] * cap + lo * N:peers[0] * cap + hi * N].view(hi - lo, N))
                ctx._recv_events[j].record(recv)
            o = out[lo:hi]
            cur.wait_event(ctx._recv_events[j])
            if peers:
                o.addmm_(a[r * rows + lo:r * rows + hi], b)
            else:
                torch.matmul(a[r * rows + lo:r * rows + hi], b, out=o)
            for src in peers[1:]:
                o.add_(stage[src * cap + lo * N:src * cap + hi * N].view(hi - lo, N))
        cur.wait_stream(recv)
    cur.wait_stream(side)
    _agk.ag_ce_signal_kernel[(1, )](ready, recv_ok, ctx.counter, ctx.chunk_flag, r, tag, r, STEP=4, **sig)
    return out


def _gemm_rs_torch(a, b, ctx, out):
    _torch_coll.reduce_scatter_tensor(out, torch.matmul(a, b), group=ctx.group)
    return out


__all__ = ["GemmRSContext", "create_gemm_rs_context", "gemm_rs", "FUSED_METHODS", "GEMM_RS_METHODS",
           "CE_PIECES_MAX", "CE_PIECES_DEFAULT", "FUSED_PIECES_MAX", "SUB_CHUNKS_MAX"]
