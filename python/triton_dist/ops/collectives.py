"""Torch-facing collectives: contexts that own symmetric buffers and signals, and functional calls.

Pattern (as in Triton-distributed): create a context once per (group, dtype, max size), reuse it for every call::

    ctx = create_allreduce_ctx(max_numel=1 << 20, dtype=torch.bfloat16)
    y = all_reduce(x, ctx)                 # method="auto": measured table, NCCL fallback where ours is slower

Semantics and guarantees (docs/collectives.md; the convention every op family shares: docs/ops.md):

* ``method=None`` (every call's default) runs the context's ``method`` (set at creation, default ``"auto"``);
  ``"torch"`` is accepted for ``"nccl"``, the torch.distributed path.

* Every call is validated on the host BEFORE anything is launched (dtype, device, contiguity, size against the
  context's capacity): a ``ValueError`` naming the op, the bad value and what is accepted.
* Contexts span the whole SHMEM world (``triton_dist.utils.initialize_distributed``) and one node (intra-node
  NVLink / simulator heap). At creation the ranks exchange a fingerprint (kind, dtype, capacity, grid, world) once
  over the process group; any difference raises ``ValueError`` on every rank instead of a later hang.
* Signals are epoch-counted in device memory (``kernels.common``): no host sync, no allocation of symmetric memory
  and no host-side counter per call, so calls can be captured in a CUDA graph and replayed; repeated calls on one
  context never race (done handshake / parity double buffering).
* A per-call size mismatch across ranks cannot be checked without a host round trip; it is caught by the size tag
  in the ready signals, whose waits are tagged (``dl.wait(tag_bits=24)``): a rank that sees the peer's signal of the
  same call with another tag reports it at once -- the simulator raises ``SimSignalMismatch`` naming the op, the
  rank and both tags, the GPU prints "RANKS DISAGREE" with both tags and traps. ``ctx.check_peers = True`` adds a
  host-side cross-rank shape check to every call (debugging; not graph-capturable).
"""
from __future__ import annotations

import math
from typing import Optional, Sequence

import torch

from ..kernels import allgather as _ag
from ..kernels import allreduce as _ar
from ..kernels import common as _common
from ..kernels import p2p as _p2p
from ..kernels import reduce_scatter as _rs
from ..runtime import torch_collectives as _torch_coll

from .collectives_table import (TABLE_DTYPE_FALLBACK, TABLE_DTYPES, TABLE_ENV, TABLE_FORMAT,  # noqa: F401
                                TABLE_METHODS, TABLE_PATH, CollectivesTableError, best_per_size, build_table,
                                load_table, parse_table, rules_from_points, table_lookup, table_path)
from .context import FP8_DTYPES, Context, check_ctx, check_method, get_context, on_gpu, shmem_runtime, traced_result

REDUCE_DTYPES = (torch.bfloat16, torch.float16, torch.float32)
GATHER_DTYPES = REDUCE_DTYPES + FP8_DTYPES


class _CollectiveContext(Context):
    """A context of one collective ``op`` (``"all_gather"``, ...) whose calls accept ``method="auto"``."""

    op = ""
    fallback_method = "nccl"

    def select(self, nbytes: int) -> str:
        """The method ``"auto"`` picks for a call of ``nbytes`` (sizes as in :func:`_select_method`), see
        :func:`_select_method`: ``"nccl"``, the chosen method if this context allocated it, else the context's first
        method. Cheap (a dict lookup and a bisect); runs on every eager ``auto`` call."""
        # without NCCL in the group (ranks share a GPU) "nccl" would run on host copies: never picked then
        m = _select_method(self.op, self.world_size, nbytes, self.on_gpu, self.dtype, nccl=self.group_has_nccl)
        if m == "ll" and nbytes // (self.esize * self.world_size) > self.ll_cap:  # a message per rank / shard
            m = self.method_fallbacks[m]
        if m != "nccl" and m not in self.methods:
            m = self.method_fallbacks.get(m, m)
        return m if m == "nccl" or m in self.methods else self.methods[0]

    #: the method to use when the chosen one was not allocated by this context (its unpipelined sibling)
    method_fallbacks: dict = {}


#: push_pipe / two_shot_pipe defaults (keyword knobs of the all-gather / reduce-scatter / all-reduce contexts): at most
#: ``pipe_segments`` segments per call, each at least ``pipe_seg_blocks`` blocks per pusher; ``pipe_pushers`` (default
#: half the grid) programs push, the others copy out / reduce. Guesses for NVLink on H200, to be swept on a GPU: every
#: segment costs its pusher a system-scope release (it waits for the segment's remote stores), fewer segments leave
#: a longer unoverlapped last segment.
PIPE_SEGMENTS = 16
PIPE_SEG_BLOCKS = 4


def _check_positive_ints(op: str, knobs) -> None:
    """``knobs``: ``(name, value, none_ok)``; a value that is not a positive int (or None where ``none_ok``) raises
    ``ValueError`` naming the factory ``op`` and the knob."""
    for name, v, none_ok in knobs:
        if v is None and none_ok:
            continue
        if not isinstance(v, int) or isinstance(v, bool) or v < 1:
            raise ValueError(f"{op}: {name}={v!r} must be a positive int")


def _pipe_knobs(op: str, pipe_pushers, pipe_segments, pipe_seg_blocks):
    """Checked ``(pushers or None, segments, seg_blocks)`` of a context's push_pipe channel."""
    _check_positive_ints(op, (("pipe_pushers", pipe_pushers, True), ("pipe_segments", pipe_segments, False),
                              ("pipe_seg_blocks", pipe_seg_blocks, False)))
    if pipe_segments > 1024:
        raise ValueError(f"{op}: pipe_segments={pipe_segments} is too large (at most 1024)")
    return pipe_pushers, pipe_segments, pipe_seg_blocks


def _add_pipe_channel(ctx, numel: int, buf_numel: int, knobs, name: str = "push_pipe"):
    """A pipelined channel (``push_pipe``, and each of ``two_shot_pipe``'s two): a grid of ``G >= 2`` programs
    (capped at the SM count like every channel), ``pushers`` of them push (default ``G // 2``, clamped to
    ``[1, G - 1]``), the rest copy out / reduce; signals ``ready [pushers, segments, W]``, ``done [pushers, W]``,
    ``counter [G]``."""
    pushers, segments, seg_blocks = knobs
    W = ctx.world_size
    blk = ctx._block()
    G = max(2, ctx._grid_for(numel, blk))
    P = max(1, min(pushers or G // 2, G - 1))
    ch = ctx._add_channel(name, buf_numel=buf_numel, buf_dtype=ctx.dtype, num_programs=G, block=blk,
                          num_warps=ctx.num_warps, nready=P * segments * W, ndone=P * W, ncounter=G)
    ch.pushers, ch.segments, ch.seg_blocks = P, segments, seg_blocks
    return ch


def _launch_pipe(ctx, kernel, x, out, *sizes, ch=None):
    """Launch a pipelined kernel: ``(x, out, buf, ready, done, counter, *sizes, pushers, seg_blocks, rank)``."""
    ch = ch or ctx.push_pipe
    return ctx._launch(kernel, ch, x, out, _bits(ch.buf), ch.ready, ch.done, ch.counter, *sizes, ch.pushers,
                       ch.seg_blocks, SEG=ch.segments)


#: Default capacity of the ``ll`` (flagged-word) channels in payload bytes per rank (keyword ``ll_max_numel`` in
#: elements): the buffer holds ``2 * world`` slots of twice that (a 64-bit word carries 32 bits of data).
DEFAULT_LL_BYTES = 1 << 20
#: ``ll`` block: 32-bit words per block and warps per program on a GPU. Small blocks spread a message over many
#: programs (SMs): one SM alone issues NVLink stores at only about 20 GB/s (2x H200 measurement, overlap round 6).
LL_BLOCK_WORDS = 256
LL_NUM_WARPS = 4


def _ll_knobs(op: str, ll_max_numel, ll_block_words, ll_num_warps):
    """Checked ``(ll_max_numel or None, ll_block_words or None, ll_num_warps or None)`` of a context's ``ll`` channel."""
    _check_positive_ints(op, (("ll_max_numel", ll_max_numel, True), ("ll_block_words", ll_block_words, True),
                              ("ll_num_warps", ll_num_warps, True)))
    if ll_block_words is not None and (ll_block_words < 32 or ll_block_words & (ll_block_words - 1)):
        raise ValueError(f"{op}: ll_block_words={ll_block_words} must be a power of two >= 32")
    if ll_num_warps is not None and ll_num_warps not in (1, 2, 4, 8, 16):
        raise ValueError(f"{op}: ll_num_warps={ll_num_warps}; accepted: 1, 2, 4, 8, 16")
    return ll_max_numel, ll_block_words, ll_num_warps


def _add_ll_channel(ctx, numel: int, ll_knobs):
    """The ``ll`` channel for messages of up to ``min(numel, ll_max_numel or DEFAULT_LL_BYTES / element size)``
    elements per slot: symmetric int64 ``[2, world, capw]`` flagged words, ``counter [G]``, no ready / done
    signals; blocks of ``ll_block_words`` (default :data:`LL_BLOCK_WORDS`), ``ll_num_warps`` per program (default
    :data:`LL_NUM_WARPS`). Sets ``ctx.ll_cap`` (elements); the kernels take ``EPW = 4 / element size`` elements per
    word."""
    ll_max_numel, ll_block_words, ll_num_warps = ll_knobs
    cap = int(min(numel, ll_max_numel if ll_max_numel is not None else max(1, DEFAULT_LL_BYTES // ctx.esize)))
    epw = 4 // ctx.esize
    capw = -(-cap // epw)
    blk = ll_block_words or (LL_BLOCK_WORDS if ctx.on_gpu else 128)
    G = ctx._grid_for(capw, blk)
    warps = ll_num_warps or (LL_NUM_WARPS if ctx.on_gpu else 1)
    ch = ctx._add_channel("ll", buf_numel=2 * ctx.world_size * capw, buf_dtype=torch.int64, num_programs=G,
                          block=blk, num_warps=warps, nready=0, ndone=0, ncounter=G)
    # The words ARE the signals: start them empty (flag 0), like ready / done. NVSHMEM does not zero allocations, and
    # a word left by an earlier user of the memory could carry this call's epoch (another tag: a false "ranks
    # disagree"; the same tag: taken as data). _finish_init orders this before any rank's first store.
    ch.buf.zero_()
    ch.capw, ch.epw = capw, epw
    ctx.ll_cap = cap
    return ch


def _launch_ll(ctx, kernel, x, out, n, numel):
    """Launch an ``ll`` kernel: ``(x, out, buf, counter, n, capw, tag, rank, WORLD, BLOCK, EPW)``; ``tag`` is the
    size tag of the call's ``numel`` (its input's element count)."""
    ch = ctx.ll
    return ctx._launch(kernel, ch, x, out, ch.buf, ch.counter, n, ch.capw, _common.ll_size_tag(numel), EPW=ch.epw)


def _check_ll(op, ctx, n, what):
    if n > ctx.ll_cap:
        raise ValueError(f"{op}: method='ll' holds at most ll_max_numel={ctx.ll_cap} elements{what}, got {n}; use "
                         f"another method or 'auto', or create the context with a larger ll_max_numel")


def _numel_of(x: torch.Tensor) -> int:
    return int(x.numel())


def _out_and_method(op, ctx, x, out, method, out_shape, numel_desc: str, nbytes: int):
    """Middle of a collective call after its argument checks: check ``out`` (as many elements as ``out_shape``, the
    count prefixed by ``numel_desc`` in the error) or make an empty ``out_shape`` tensor like ``x``, run the
    ``check_peers`` exchange, resolve ``"auto"`` for ``nbytes``. Returns ``(out, method)``; ``out`` is None while
    torch.compile traces the call (the caller then calls its ``torch.ops.triton_dist`` op, :func:`~.context.traced_result`)."""
    out_numel = math.prod(out_shape)
    if out is not None:
        ctx._check(op, out, "out")
        if out.numel() != out_numel:
            raise ValueError(f"{op}: out has {out.numel()} elements, expected {numel_desc}{out_numel}")
    if torch.compiler.is_compiling():
        return None, method
    if out is None:
        out = torch.empty(out_shape, dtype=x.dtype, device=x.device)
    if ctx.check_peers:
        ctx._check_peers(op, (tuple(x.shape), str(x.dtype), method))
    if method == "auto":
        method = ctx.select(nbytes)
    return out, method


# ================================================================================================================
# all-gather
# ================================================================================================================
class AllGatherContext(_CollectiveContext):
    """All-gather of up to ``max_numel`` elements per rank. Methods: ``push``/``pull`` (SM kernels), ``push_pipe``
    (push with the copy-out overlapped), ``ll`` (push over flagged words, lowest latency; up to ``ll_max_numel``
    elements), ``ce`` (copy engine, GPU only), ``nccl`` (torch.distributed), ``auto``."""

    kind = "allgather"
    op = "all_gather"
    method_fallbacks = {"push_pipe": "push", "ll": "push"}

    def __init__(self, max_numel: int, dtype: torch.dtype, methods=None, pipe_pushers: Optional[int] = None,
                 pipe_segments: int = PIPE_SEGMENTS, pipe_seg_blocks: int = PIPE_SEG_BLOCKS,
                 ll_max_numel: Optional[int] = None, ll_block_words: Optional[int] = None,
                 ll_num_warps: Optional[int] = None, **kw):
        gpu = on_gpu(shmem_runtime()[1])
        knobs = _pipe_knobs(self.factory_name(), pipe_pushers, pipe_segments, pipe_seg_blocks)
        ll_knobs = _ll_knobs(self.factory_name(), ll_max_numel, ll_block_words, ll_num_warps)
        super().__init__(max_numel, dtype, GATHER_DTYPES, methods=methods, fingerprint_extra=knobs + ll_knobs,
                         all_methods=("push", "pull", "push_pipe", "ll", "ce") if gpu else
                         ("push", "pull", "push_pipe", "ll"), **kw)
        W = self.world_size
        blk = self._block()
        G = self._grid_for(max_numel, blk)
        self.sm = None
        if "push" in self.methods or "pull" in self.methods:
            self.sm = self._add_channel("sm", buf_numel=(W + 1) * max_numel, buf_dtype=dtype, num_programs=G,
                                        block=blk, num_warps=self.num_warps, nready=G * W, ndone=G * W, ncounter=G)
        self.push_pipe = None
        if "push_pipe" in self.methods:
            self.push_pipe = _add_pipe_channel(self, max_numel, W * max_numel, knobs)
        self.ll, self.ll_cap = None, 0
        if "ll" in self.methods:
            self.ll = _add_ll_channel(self, max_numel, ll_knobs)
        self.ce = None
        if self.on_gpu and "ce" in self.methods:
            ce = self._add_channel("ce", buf_numel=max_numel, buf_dtype=dtype, num_programs=1, block=blk,
                                   num_warps=1, nready=W, ndone=W, ncounter=1, peer_views=True)
            self.ce_peers = ce.peers
            self.ce = ce
            self._streams = [torch.cuda.Stream(device=self.device) for _ in range(max(W - 1, 1))]
        self._finish_init()

    def __call__(self, x, out=None, method=None):
        return all_gather(x, self, out=out, method=method)


def create_allgather_ctx(max_numel: int, dtype: torch.dtype = torch.bfloat16, **kw) -> AllGatherContext:
    """Collective: a reusable all-gather context for up to ``max_numel`` elements per rank of ``dtype``
    (bf16/fp16/fp32/fp8). Keyword tuning knobs: ``num_programs``, ``block_bytes``, ``num_warps``; for
    ``push_pipe``: ``pipe_pushers`` (programs that push, default half the grid), ``pipe_segments`` (most segments
    per call, default :data:`PIPE_SEGMENTS`), ``pipe_seg_blocks`` (least blocks per segment and pusher, default
    :data:`PIPE_SEG_BLOCKS`); for ``ll``: ``ll_max_numel`` (largest message, default :data:`DEFAULT_LL_BYTES` worth
    of elements; symmetric memory ``2 * world * 2 * ll_max_numel * element size`` bytes), ``ll_block_words`` (32-bit
    words per block, a power of two, default :data:`LL_BLOCK_WORDS`), ``ll_num_warps`` (default
    :data:`LL_NUM_WARPS`)."""
    return AllGatherContext(max_numel, dtype, **kw)


AG_METHODS = ("auto", "push", "pull", "push_pipe", "ll", "ce", "nccl")


def _gather_out_shape(x: torch.Tensor, world: int):
    if x.dim() == 0:
        return (world, )
    return (world * x.shape[0], ) + tuple(x.shape[1:])


def all_gather(x: torch.Tensor, ctx: AllGatherContext, out: Optional[torch.Tensor] = None,
               method: Optional[str] = None) -> torch.Tensor:
    """Gather ``x`` from every rank: returns ``out`` of shape ``(world * x.shape[0], *x.shape[1:])`` holding rank
    ``r``'s ``x`` at rows ``[r * x.shape[0], (r + 1) * x.shape[0])``. Stream-ordered on the current stream; no host
    sync. ``method``: one of ``AG_METHODS``."""
    op = "all_gather"
    check_ctx(op, ctx, AllGatherContext, "create_allgather_ctx")
    method = ctx._call_method(method)
    if out is not None and ctx.graph_calls and ctx._replay_call(x, out, method):
        return out  # ctx.graph_calls: the graph an identical earlier call ran
    asked, out_given = method, out is not None
    ctx._check(op, x)
    n = _numel_of(x)
    if n > ctx.max_numel:
        raise ValueError(f"{op}: x has {n} elements, the context holds at most {ctx.max_numel} per rank")
    check_method(op, method, AG_METHODS)
    if method == "ce" and not ctx.on_gpu:
        raise ValueError(f"{op}: method='ce' (copy engine) needs GPUs; accepted here: auto, push, pull, push_pipe, "
                         f"nccl")
    ctx._need(op, method)
    shape = _gather_out_shape(x, ctx.world_size)
    dst, method = _out_and_method(op, ctx, x, out, method, shape, "world * x.numel() = ",
                                  n * ctx.esize * ctx.world_size)
    if dst is None:
        return traced_result(torch.ops.triton_dist.all_gather(x, ctx.handle, method), out)
    out = dst
    if n == 0:
        return out
    if method == "nccl":
        _torch_coll.all_gather_into_tensor(out.view(-1), x.reshape(-1), group=ctx.group)
        return out
    if method == "ce":
        _all_gather_ce(x, out, ctx, n)
        return out
    xv, ov = _bits(x), _bits(out)
    if method == "ll":
        _check_ll(op, ctx, n, " per rank")
        graph = _launch_ll(ctx, _ag.allgather_ll_kernel, xv, ov, n, n)
    elif method == "push_pipe":
        graph = _launch_pipe(ctx, _ag.allgather_push_pipe_kernel, xv, ov, n, ctx.max_numel, _common.size_tag(n))
    else:
        ch = ctx.sm
        graph = ctx._launch(_ag.allgather_kernel, ch, xv, ov, _bits(ch.buf), ch.ready, ch.done, ch.counter, n,
                            ctx.max_numel, _common.size_tag(n), PUSH=(method == "push"))
    if out_given:
        ctx._remember_call(graph, x, out, asked)
    return out


def _bits(t: torch.Tensor) -> torch.Tensor:
    """fp8 tensors are moved as uint8 (the kernels only copy them)."""
    if t is not None and t.dtype in FP8_DTYPES:
        return t.view(torch.uint8)
    return t


def _all_gather_ce(x, out, ctx, n):
    """Copy-engine all-gather: stage x in the symmetric buffer, signal, pull each peer's staging buffer with
    cudaMemcpyAsync (torch copy_) on side streams, then raise done. GPU only."""
    ch = ctx.ce
    W, r = ctx.world_size, ctx.rank
    flat = out.view(-1)
    ctx._launch_plain(_common.ce_enter_kernel, (1, ), (ch.done, ch.counter, r), WORLD=W, num_warps=1)
    ch.buf[:n].copy_(x.reshape(-1))
    flat[r * n:(r + 1) * n].copy_(x.reshape(-1))
    ctx._launch_plain(_common.ce_ready_kernel, (1, ), (ch.ready, ch.counter, _common.size_tag(n), r), WORLD=W,
                      num_warps=1)
    cur = torch.cuda.current_stream(ctx.device)
    for i in range(1, W):
        src = (r + i) % W
        s = ctx._streams[i - 1]
        s.wait_stream(cur)
        with torch.cuda.stream(s):
            flat[src * n:(src + 1) * n].copy_(ctx.ce_peers[src][:n])
        cur.wait_stream(s)
    ctx._launch_plain(_common.ce_done_kernel, (1, ), (ch.done, ch.counter, r), WORLD=W, num_warps=1)


# ================================================================================================================
# reduce-scatter
# ================================================================================================================
class ReduceScatterContext(_CollectiveContext):
    """Reduce-scatter of inputs of up to ``max_numel`` elements (``world * shard``). Methods: ``direct`` (pull),
    ``direct_push``, ``push_pipe`` (direct_push with the reduction overlapped), ``ll`` (direct_push over flagged
    words, lowest latency; shards of up to ``ll_max_numel`` elements), ``ring``, ``nccl``, ``auto``."""

    kind = "reduce_scatter"
    op = "reduce_scatter"
    method_fallbacks = {"push_pipe": "direct_push", "ll": "direct_push"}

    def __init__(self, max_numel: int, dtype: torch.dtype, methods=None, pipe_pushers: Optional[int] = None,
                 pipe_segments: int = PIPE_SEGMENTS, pipe_seg_blocks: int = PIPE_SEG_BLOCKS,
                 ll_max_numel: Optional[int] = None, ll_block_words: Optional[int] = None,
                 ll_num_warps: Optional[int] = None, **kw):
        knobs = _pipe_knobs(self.factory_name(), pipe_pushers, pipe_segments, pipe_seg_blocks)
        ll_knobs = _ll_knobs(self.factory_name(), ll_max_numel, ll_block_words, ll_num_warps)
        super().__init__(max_numel, dtype, REDUCE_DTYPES, methods=methods, fingerprint_extra=knobs + ll_knobs,
                         all_methods=("direct", "direct_push", "push_pipe", "ll", "ring"), **kw)
        W = self.world_size
        if max_numel % W:
            raise ValueError(f"create_reduce_scatter_ctx: max_numel={max_numel} must be a multiple of the world size "
                             f"{W} (input = world * shard)")
        shard = max_numel // W
        blk = self._block()
        G = self._grid_for(shard, blk)
        self.direct = self.direct_push = self.ring = self.push_pipe = None
        if "direct" in self.methods:
            self.direct = self._add_channel("direct", buf_numel=W * shard, buf_dtype=dtype, num_programs=G, block=blk,
                                        num_warps=self.num_warps, nready=G * W, ndone=G * W, ncounter=G)
        if "direct_push" in self.methods:
            self.direct_push = self._add_channel("direct_push", buf_numel=W * shard, buf_dtype=dtype, num_programs=G,
                                             block=blk, num_warps=self.num_warps, nready=G * W, ndone=G * W,
                                             ncounter=G)
        if "push_pipe" in self.methods:
            self.push_pipe = _add_pipe_channel(self, shard, W * shard, knobs)
        self.ll, self.ll_cap = None, 0
        if "ll" in self.methods:
            self.ll = _add_ll_channel(self, shard, ll_knobs)
        if "ring" in self.methods:
            self.ring = self._add_channel("ring", buf_numel=max(W - 1, 1) * shard, buf_dtype=torch.float32,
                                      num_programs=G, block=self._block(4), num_warps=self.num_warps, nready=G * W,
                                      ndone=G, ncounter=G)
        self._finish_init()

    def __call__(self, x, out=None, method=None):
        return reduce_scatter(x, self, out=out, method=method)


def create_reduce_scatter_ctx(max_numel: int, dtype: torch.dtype = torch.bfloat16, **kw) -> ReduceScatterContext:
    """Collective: a reusable reduce-scatter context for inputs of up to ``max_numel`` elements (a multiple of the
    world size) of ``dtype`` (bf16/fp16/fp32). Keyword tuning knobs as for :func:`create_allgather_ctx`
    (``pipe_*`` apply to ``push_pipe``; ``ll_max_numel`` bounds the shard of ``ll``)."""
    return ReduceScatterContext(max_numel, dtype, **kw)


RS_METHODS = ("auto", "direct", "direct_push", "push_pipe", "ll", "ring", "nccl")


def reduce_scatter(x: torch.Tensor, ctx: ReduceScatterContext, out: Optional[torch.Tensor] = None,
                   method: Optional[str] = None) -> torch.Tensor:
    """Sum ``x`` over ranks and return this rank's shard: ``x`` has ``world * S`` rows (or elements); the result
    has shape ``(S, *x.shape[1:])`` = rows ``[rank * S, (rank + 1) * S)`` of the sum. fp32 accumulation."""
    op = "reduce_scatter"
    check_ctx(op, ctx, ReduceScatterContext, "create_reduce_scatter_ctx")
    method = ctx._call_method(method)
    if out is not None and ctx.graph_calls and ctx._replay_call(x, out, method):
        return out  # ctx.graph_calls: the graph an identical earlier call ran
    asked, out_given = method, out is not None
    ctx._check(op, x)
    W = ctx.world_size
    n = _numel_of(x)
    if x.dim() == 0 or x.shape[0] % W:
        raise ValueError(f"{op}: x.shape[0] must be a multiple of the world size {W}, got shape {tuple(x.shape)}")
    if n > ctx.max_numel:
        raise ValueError(f"{op}: x has {n} elements, the context holds at most {ctx.max_numel}")
    check_method(op, method, RS_METHODS)
    ctx._need(op, method)
    shape = (x.shape[0] // W, ) + tuple(x.shape[1:])
    ns = n // W
    dst, method = _out_and_method(op, ctx, x, out, method, shape, "x.numel() / world = ", n * ctx.esize)
    if dst is None:
        return traced_result(torch.ops.triton_dist.reduce_scatter(x, ctx.handle, method), out)
    out = dst
    if n == 0:
        return out
    if method == "nccl":
        _torch_coll.reduce_scatter_tensor(out.view(-1), x.reshape(-1), group=ctx.group)
        return out
    tag = _common.size_tag(n)
    if method == "ll":
        _check_ll(op, ctx, ns, " per shard")
        graph = _launch_ll(ctx, _rs.reduce_scatter_ll_kernel, x, out, ns, n)
    elif method == "ring":
        ch = ctx.ring
        graph = ctx._launch(_rs.reduce_scatter_ring_kernel, ch, x, out, ch.buf, ch.ready, ch.done, ch.counter, ns,
                            ctx.max_numel // ctx.world_size, tag)
    elif method == "push_pipe":
        graph = _launch_pipe(ctx, _rs.reduce_scatter_push_pipe_kernel, x, out, ns, ctx.max_numel // ctx.world_size,
                             tag)
    else:
        ch = ctx.direct if method == "direct" else ctx.direct_push
        graph = ctx._launch(_rs.reduce_scatter_direct_kernel, ch, x, out, ch.buf, ch.ready, ch.done, ch.counter,
                            ns, ctx.max_numel // ctx.world_size, tag, PUSH=(method == "direct_push"))
    if out_given:
        ctx._remember_call(graph, x, out, asked)
    return out


# ================================================================================================================
# all-reduce
# ================================================================================================================
#: Built-in all-reduce default when the measured table has no entry: per world size, else
#: DEFAULT_AR_TABLE (one-shot while it is a few signals, two-shot for bandwidth).
DEFAULT_AR_TABLES = {2: [(1 << 62, "one_shot")]}
DEFAULT_AR_TABLE = [(256 << 10, "one_shot"), (1 << 62, "two_shot")]
#: Default one-shot staging capacity in bytes (``one_shot_max_numel``): its buffer is ``2 * world`` times this.
DEFAULT_ONE_SHOT_BYTES = 16 << 20
#: Built-in default SM method of the other ops for "auto" (no measured entry).
AUTO_DEFAULTS = {"all_gather": "push", "reduce_scatter": "direct_push"}

def _select_method(op: str, world: int, nbytes: int, on_gpu: bool, dtype=None, nccl: bool = True) -> str:
    """The method "auto" picks for a call of ``nbytes`` (sizes in the NCCL-tests convention: all_gather = output
    bytes, reduce_scatter = input bytes, all_reduce = buffer bytes), before the context's own adjustments
    (:meth:`_CollectiveContext.select`): on a GPU, the measured table's entry for (op, world, dtype) (fp16 / fp8
    use bf16's when they have none; ``$TRITON_DIST_COLLECTIVES_TABLE`` names another table file: the one override
    of "auto", docs/ops.md); else the built-in defaults (:data:`DEFAULT_AR_TABLES` / :data:`DEFAULT_AR_TABLE`,
    :data:`AUTO_DEFAULTS`). The simulator never reads the measured table (its figures are GPU ones). ``nccl=False``
    (the group has no NCCL: ranks share a GPU) passes over a table entry that names ``"nccl"``, down to the
    built-in defaults. To force a method, pass ``method=`` or set the context's ``method``."""
    if on_gpu:
        m = table_lookup(op, world, dtype, nbytes)
        if m is not None and (nccl or m != "nccl"):
            return m
    if op == "all_reduce":
        for bound, m in DEFAULT_AR_TABLES.get(world, DEFAULT_AR_TABLE):
            if nbytes <= bound:
                return m
        return "two_shot"
    return AUTO_DEFAULTS[op]


class AllReduceContext(_CollectiveContext):
    """All-reduce of up to ``max_numel`` elements. Methods: ``one_shot`` (latency; its double-buffered staging
    holds ``one_shot_max_numel`` elements), ``two_shot`` (bandwidth), ``two_shot_pipe`` (two-shot as two pipelined
    launches: the reduce-scatter ``push_pipe`` kernel into this rank's shard of ``out``, then the all-gather
    ``push_pipe`` kernel of that shard; element counts divisible by the world size), ``nccl``, ``auto``.
    ``ll`` (one-shot over flagged words, lowest latency; up to ``ll_max_numel`` elements). ``two_shot_pipe`` is
    allocated only when listed in ``methods``."""

    kind = "allreduce"
    op = "all_reduce"

    def __init__(self, max_numel: int, dtype: torch.dtype, one_shot_max_numel: Optional[int] = None, methods=None,
                 pipe_pushers: Optional[int] = None, pipe_segments: int = PIPE_SEGMENTS,
                 pipe_seg_blocks: int = PIPE_SEG_BLOCKS, ll_max_numel: Optional[int] = None,
                 ll_block_words: Optional[int] = None, ll_num_warps: Optional[int] = None, **kw):
        knobs = _pipe_knobs(self.factory_name(), pipe_pushers, pipe_segments, pipe_seg_blocks)
        ll_knobs = _ll_knobs(self.factory_name(), ll_max_numel, ll_block_words, ll_num_warps)
        super().__init__(max_numel, dtype, REDUCE_DTYPES,
                         fingerprint_extra=(one_shot_max_numel, ) + knobs + ll_knobs,
                         methods=("one_shot", "two_shot", "ll") if methods is None else methods,
                         all_methods=("one_shot", "two_shot", "two_shot_pipe", "ll"), **kw)
        W = self.world_size
        blk = self._block()
        default_cap = max(1, DEFAULT_ONE_SHOT_BYTES // self.esize)
        cap1 = int(min(max_numel, one_shot_max_numel if one_shot_max_numel is not None else default_cap))
        cap1 = max(128, -(-cap1 // 128) * 128)
        self.one_shot_cap = cap1 if "one_shot" in self.methods else 0
        small = min(cap1, 32768 // self.esize)
        self.small_cap = small
        self.one_shot_small = self.one_shot = self.two_shot = None
        if "one_shot" in self.methods:
            # latency channel: few programs (fewer signals), one block each at <= 32 KiB
            self.one_shot_small = self._add_channel(
                "one_shot_small", buf_numel=2 * W * small, buf_dtype=dtype,
                num_programs=max(1, min(self.max_programs, 4 if self.on_gpu else 1, -(-small // blk))), block=blk,
                num_warps=self.num_warps, nready=2 * 4 * W, ndone=0, ncounter=4)
            G1 = self._grid_for(cap1, blk)
            self.one_shot = self._add_channel("one_shot", buf_numel=2 * W * cap1, buf_dtype=dtype, num_programs=G1,
                                              block=blk, num_warps=self.num_warps, nready=2 * G1 * W, ndone=0,
                                              ncounter=G1)
        shard = -(-max_numel // W)
        shard = -(-shard // 128) * 128
        self.two_shot_cap = shard
        if "two_shot" in self.methods:
            G2 = self._grid_for(shard, blk)
            self.two_shot = self._add_channel("two_shot", buf_numel=2 * W * shard, buf_dtype=dtype,
                                              num_programs=G2, block=blk, num_warps=self.num_warps,
                                              nready=2 * G2 * W, ndone=G2 * W, ncounter=G2)
        self.two_shot_pipe = self.two_shot_pipe_ag = None
        if "two_shot_pipe" in self.methods:  # the reduce-scatter and all-gather push_pipe channels, one buffer each
            self.two_shot_pipe = _add_pipe_channel(self, shard, W * shard, knobs, name="two_shot_pipe")
            self.two_shot_pipe_ag = _add_pipe_channel(self, shard, W * shard, knobs, name="two_shot_pipe_ag")
        self.ll, self.ll_cap = None, 0
        if "ll" in self.methods:
            self.ll = _add_ll_channel(self, max_numel, ll_knobs)
        self._finish_init()

    def select(self, nbytes: int) -> str:
        """As :meth:`_CollectiveContext.select`; a one-shot pick that exceeds ``one_shot_max_numel`` becomes
        two-shot, and two-shot becomes one-shot when its buffers were not allocated."""
        # without NCCL in the group (ranks share a GPU) "nccl" would run on host copies: never picked then
        m = _select_method(self.op, self.world_size, nbytes, self.on_gpu, self.dtype, nccl=self.group_has_nccl)
        if m == "two_shot_pipe" and (self.two_shot_pipe is None or
                                     (nbytes // self.esize) % self.world_size and self.two_shot is not None):
            m = "two_shot"
        if m == "ll" and nbytes // self.esize > self.ll_cap:
            m = "one_shot"
        if m == "one_shot" and (nbytes // self.esize > self.one_shot_cap):
            m = "two_shot"
        if m == "two_shot" and self.two_shot is None:
            m = "two_shot_pipe" if self.two_shot_pipe is not None else "one_shot"  # one-shot: its size check
            # reports a call it cannot hold either
        return m

    def __call__(self, x, out=None, method=None):
        return all_reduce(x, self, out=out, method=method)


def create_allreduce_ctx(max_numel: int, dtype: torch.dtype = torch.bfloat16,
                         one_shot_max_numel: Optional[int] = None, **kw) -> AllReduceContext:
    """Collective: a reusable all-reduce context for up to ``max_numel`` elements of ``dtype`` (bf16/fp16/fp32).
    ``one_shot_max_numel`` bounds the one-shot staging (``2 * world * one_shot_max_numel`` symmetric elements;
    default ``min(max_numel, 16 MiB / element size)``); ``ll_max_numel`` bounds ``ll`` (default
    :data:`DEFAULT_LL_BYTES` worth of elements); ``methods`` restricts which buffers are allocated (default:
    ``("one_shot", "two_shot", "ll")``).

    Symmetric memory per rank: one-shot ``2 * world * one_shot_max_numel``, two-shot ``2 * world *
    ceil(max_numel / world)`` elements, ``ll`` ``2 * world * 2 * ll_max_numel`` elements' bytes, plus small signal
    arrays."""
    return AllReduceContext(max_numel, dtype, one_shot_max_numel=one_shot_max_numel, **kw)


AR_METHODS = ("auto", "one_shot", "two_shot", "two_shot_pipe", "ll", "nccl")


def all_reduce(x: torch.Tensor, ctx: AllReduceContext, out: Optional[torch.Tensor] = None,
               method: Optional[str] = None) -> torch.Tensor:
    """Sum ``x`` over ranks (fp32 accumulation, one rounding to x's dtype); returns ``out`` (same shape as ``x``,
    new tensor unless given; ``out`` may be ``x`` itself). ``method``: one of ``AR_METHODS``."""
    op = "all_reduce"
    check_ctx(op, ctx, AllReduceContext, "create_allreduce_ctx")
    method = ctx._call_method(method)
    if out is not None and ctx.graph_calls and ctx._replay_call(x, out, method):
        return out  # ctx.graph_calls: the graph an identical earlier call ran
    asked, out_given = method, out is not None
    ctx._check(op, x)
    n = _numel_of(x)
    if n > ctx.max_numel:
        raise ValueError(f"{op}: x has {n} elements, the context holds at most {ctx.max_numel}")
    check_method(op, method, AR_METHODS)
    ctx._need(op, method)
    if method == "auto":
        method = ctx.select(n * ctx.esize)
    if method == "one_shot" and n > ctx.one_shot_cap:
        raise ValueError(f"{op}: method='one_shot' holds at most one_shot_max_numel={ctx.one_shot_cap} elements, "
                         f"x has {n}; use 'two_shot' or 'auto'")
    dst, method = _out_and_method(op, ctx, x, out, method, tuple(x.shape), "", n * ctx.esize)
    if dst is None:
        return traced_result(torch.ops.triton_dist.all_reduce(x, ctx.handle, method), out)
    out = dst
    if n == 0:
        return out
    tag = _common.size_tag(n)
    if method == "nccl":
        if out.data_ptr() != x.data_ptr():
            out.copy_(x)
        _torch_coll.all_reduce(out, group=ctx.group)
        return out
    if method == "ll":
        _check_ll(op, ctx, n, "")
        graph = _launch_ll(ctx, _ar.allreduce_ll_kernel, x, out, n, n)
    elif method == "one_shot":
        ch = ctx.one_shot_small if n <= ctx.small_cap else ctx.one_shot
        cap = ctx.small_cap if ch is ctx.one_shot_small else ctx.one_shot_cap
        graph = ctx._launch(_ar.allreduce_one_shot_kernel, ch, x, out, ch.buf, ch.ready, ch.counter, n, cap, tag)
    else:
        ns = -(-n // ctx.world_size)
        ns = -(-ns // 128) * 128
        if method == "two_shot_pipe" and n % ctx.world_size == 0:
            _all_reduce_pipe(ctx, x, out, n, tag)
            graph = None  # two launches: no single graph to replay for the whole call
        elif method == "two_shot_pipe" and ctx.two_shot is None:
            raise ValueError(f"{op}: method='two_shot_pipe' needs x.numel() divisible by the world size "
                             f"{ctx.world_size} (x has {n}); create the context with 'two_shot' in methods too, "
                             f"which such calls then use")
        else:
            ch = ctx.two_shot
            graph = ctx._launch(_ar.allreduce_two_shot_kernel, ch, x, out, ch.buf, ch.ready, ch.done, ch.counter, n,
                                ns, ctx.two_shot_cap, tag)
    if out_given:
        ctx._remember_call(graph, x, out, asked)
    return out


def _all_reduce_pipe(ctx, x, out, n, tag):
    """``two_shot_pipe`` (``n`` divisible by the world size): the reduce-scatter ``push_pipe`` kernel sums shard
    ``rank`` of ``x`` into ``out``'s shard ``rank``, then the all-gather ``push_pipe`` kernel gathers every rank's
    shard of ``out`` into ``out`` (its own shard is rewritten with itself). Stream order separates the two
    launches on this rank; each has its own channel (buffer and signals), so a peer that starts its all-gather early
    never writes into the reduce-scatter's buffer. Same summation order as ``two_shot``: bit-identical results;
    ``out`` may be ``x``."""
    ns = n // ctx.world_size
    flat = out.view(-1)
    shard = flat[ctx.rank * ns:(ctx.rank + 1) * ns]
    _launch_pipe(ctx, _rs.reduce_scatter_push_pipe_kernel, x, shard, ns, ctx.two_shot_cap, tag, ch=ctx.two_shot_pipe)
    _launch_pipe(ctx, _ag.allgather_push_pipe_kernel, shard, flat, ns, ctx.two_shot_cap, tag,
                 ch=ctx.two_shot_pipe_ag)


# ================================================================================================================
# point-to-point
# ================================================================================================================
class P2PContext(Context):
    """Signalled send/recv of up to ``max_numel`` elements per message; one message per (sender, receiver) in
    flight (a second send to the same peer waits until the first was received)."""

    kind = "p2p"

    def __init__(self, max_numel: int, dtype: torch.dtype, **kw):
        super().__init__(max_numel, dtype, GATHER_DTYPES, all_methods=("p2p", ), **kw)
        W = self.world_size
        blk = self._block()
        G = self._grid_for(max_numel, blk)
        self.ch = self._add_channel("p2p", buf_numel=W * max_numel, buf_dtype=dtype, num_programs=G, block=blk,
                                    num_warps=self.num_warps, nready=G * W, ndone=G * W, ncounter=W * G)
        self.recv_counter = torch.zeros(W * G, dtype=torch.int64, device=self.device)
        #: what the torch.library ``send`` / ``recv`` ops declare they mutate (nothing reads it): keeps them in a
        #: compiled graph and in order (ops/_library.py)
        self.token = torch.zeros(1, dtype=torch.int64, device=self.device)
        self._finish_init()


def create_p2p_ctx(max_numel: int, dtype: torch.dtype = torch.bfloat16, **kw) -> P2PContext:
    """Collective: a reusable point-to-point context (messages of up to ``max_numel`` elements of ``dtype``)."""
    return P2PContext(max_numel, dtype, **kw)


def _check_peer(op, ctx, peer, name):
    if not isinstance(peer, int) or isinstance(peer, bool) or not 0 <= peer < ctx.world_size or peer == ctx.rank:
        raise ValueError(f"{op}: {name}={peer!r} must be another rank in [0, {ctx.world_size}) (this rank is "
                         f"{ctx.rank})")


def send(x: torch.Tensor, dst: int, ctx: P2PContext) -> None:
    """Send ``x`` to rank ``dst`` (stream-ordered; returns once enqueued). The matching ``recv`` on ``dst`` must
    use the same element count and dtype."""
    op = "send"
    check_ctx(op, ctx, P2PContext, "create_p2p_ctx")
    ctx._check(op, x)
    _check_peer(op, ctx, dst, "dst")
    n = _numel_of(x)
    if n > ctx.max_numel or n == 0:
        raise ValueError(f"{op}: x has {n} elements; accepted: 1 .. {ctx.max_numel}")
    if torch.compiler.is_compiling():
        torch.ops.triton_dist.send(x, ctx.token, ctx.handle, dst)
        return
    ch = ctx.ch
    ctx._launch(_p2p.p2p_send_kernel, ch, _bits(x), _bits(ch.buf), ch.ready, ch.done, ch.counter, n, ctx.max_numel,
                dst, _common.size_tag(n))


def recv(shape: Sequence[int], src: int, ctx: P2PContext, out: Optional[torch.Tensor] = None) -> torch.Tensor:
    """Receive a message of ``shape`` from rank ``src`` into ``out`` (new tensor unless given)."""
    op = "recv"
    check_ctx(op, ctx, P2PContext, "create_p2p_ctx")
    _check_peer(op, ctx, src, "src")
    if out is not None:
        ctx._check(op, out, "out")
    shape = tuple(out.shape) if out is not None else tuple(int(s) for s in shape)
    n = math.prod(shape)
    if n > ctx.max_numel or n == 0:
        raise ValueError(f"{op}: message has {n} elements; accepted: 1 .. {ctx.max_numel}")
    if torch.compiler.is_compiling():  # the registered op (a new tensor; copied into ``out`` when given)
        return traced_result(torch.ops.triton_dist.recv(ctx.token, list(shape), ctx.handle, src), out)
    if out is None:
        out = torch.empty(shape, dtype=ctx.dtype, device=ctx.device)
    ch = ctx.ch
    ctx._launch(_p2p.p2p_recv_kernel, ch, _bits(out), _bits(ch.buf), ch.ready, ch.done, ctx.recv_counter, n,
                ctx.max_numel, src, _common.size_tag(n))
    return out


__all__ = ["AllGatherContext", "ReduceScatterContext", "AllReduceContext", "P2PContext", "create_allgather_ctx",
           "create_reduce_scatter_ctx", "create_allreduce_ctx", "create_p2p_ctx", "all_gather", "reduce_scatter",
           "all_reduce", "send", "recv", "get_context", "CollectivesTableError", "load_table", "build_table", "AG_METHODS", "RS_METHODS",
           "AR_METHODS"]
