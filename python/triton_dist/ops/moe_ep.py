"""Expert-parallel dispatch / combine: every rank holds ``num_experts / world`` experts; ``ep_dispatch`` sends each
token's top-k copies to the ranks of their experts and returns the routing layout of this rank's experts (what
:func:`~triton_dist.ops.group_gemm` consumes); ``ep_combine`` sends the experts' outputs back and sums each token's
slots with its top-k weights, in the original token order. Device code and protocol: :mod:`triton_dist.kernels.moe_ep`
and docs/moe.md ("Expert parallelism")::

    ctx = ops.create_ep_ctx(max_tokens=256, hidden=7168, topk=8, num_experts=256, dtype=torch.bfloat16)
    tokens, expert_offsets, scales, handle = ops.ep_dispatch(x, topk_idx, topk_weights, ctx)
    y = ops.ep_combine(expert_out, handle, ctx)          # [T, H], x's token order

Three methods (:data:`EP_METHODS`), per call or as the context's default: ``push`` (every (token, slot) pair's row
to its expert's rank), ``normal`` (the prefill bandwidth mode: every token once to each rank holding one of its
experts, the layout built there; combine returns one partial per (token, rank)) and ``ll`` (the decode latency mode:
push's protocol in ONE launch per direction, at most :data:`MAX_LL_TOKENS` tokens per rank and top-8). All return
the same layout. ``auto`` picks by the context's capacity (:data:`AUTO_ORDER`: ``push`` up to 256 tokens per
rank, ``normal`` above; provisional: no NVLink measurements yet, and ``ll`` joins it once it has run on a GPU).

Guarantees: no token is dropped (the receive buffer has a row for every pair any rank can send: ``world x
max_tokens x topk`` rows); nothing is read on the host by a launch (the optional id check reads the ids before the
launches and is skipped inside a CUDA-graph capture), so a dispatch-GEMM-combine step captures into one CUDA graph;
bad input gets a ``ValueError`` before any launch. Under torch.compile the two calls run eagerly (a graph break:
they are not ``torch.library`` ops yet, their results alias the context's buffers). Each dispatch uses the other of two buffer sets than the previous
one: the layout it returns stays valid until the dispatch after next, so a second micro-batch may be dispatched
while the first one's experts run. Handles are combined in dispatch order, each once; combine uses the routing as
it was at dispatch (copied), so router tensors may be refilled in place meanwhile. Eager calls on one context run
in call order, on any streams (a call on a new stream waits for the previous call's stream). A CUDA-graph capture starts with no dispatch in flight on the context (checked) and
should combine every dispatch it makes: its replays reuse the buffer set the capture used, so do not replay it while
an eager dispatch on the same context is not combined.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import torch
import triton

from ..kernels import moe_ep as _k
from ..kernels.moe_route import (combine_kernel, route_block_scan_kernel, route_count_kernel,
                                 route_expert_scan_kernel, route_scatter_kernel)
from .context import Context, capturing, check_ctx, check_method, parity_buffers
from .moe_layout import BLOCKS_CHUNK, EXPERTS_CHUNK, QUANT_GROUP, ROUTE_BLOCK, check_expert_ids, check_routing

#: token dtypes of the dispatch's input and the combine's expert outputs
EP_DTYPES = (torch.bfloat16, torch.float16, torch.float32)
#: the ``quant`` values of :func:`create_ep_ctx`: the rows travel as they are, or as fp8 e4m3 with one fp32 scale per
#: 128 columns (quantised on the sender: half the bytes of bf16 on the wire, and the grouped GEMM runs in fp8)
EP_QUANT = (None, "fp8")
#: the methods of the EP context: ``push`` (counts exchange, then every rank pushes each (token, slot) pair's row
#: into its expert's rank and raises an arrival count: the layout is built by the senders; a token routed to ``m``
#: experts of one rank crosses ``m`` times) and ``normal`` (the bandwidth mode for prefill: every token crosses ONCE
#: to each rank holding one of its experts, with its routing row; the receiver builds its layout locally, and
#: combine sends back one partial sum per (token, rank)) and ``ll`` (the latency mode for decode: push's protocol and
#: layout in ONE launch per direction, at most :data:`MAX_LL_TOKENS` tokens per rank and :data:`MAX_LL_TOPK` slots).
#: ``auto`` picks by the context's capacity (:data:`AUTO_ORDER`; a provisional rule, no NVLink measurements yet)
EP_METHODS = ("push", "normal", "ll")
#: the most tokens per rank and call of method ``ll`` (its context's ``max_tokens``): a decode batch
MAX_LL_TOKENS = 256
#: the most top-k slots per token of method ``ll``
MAX_LL_TOPK = 8
#: ``auto``'s preference, by the context's capacity (the same on every rank, so every rank picks the same method):
#: ``[False]`` for contexts of at most MAX_LL_TOKENS tokens per rank (decode), ``[True]`` above (prefill); the first
#: allocated method wins. ``ll`` comes after ``push`` until it has passed the GPU tier (it has run on the simulator
#: only); the rule itself is provisional until NVLink measurements exist.
AUTO_ORDER = {False: ("push", "ll", "normal"), True: ("normal", "push")}
#: the most programs of an ``ll`` launch (also at most the context's program budget: the dispatch's intra-kernel
#: barrier needs every program co-resident, and ranks may share a GPU)
LL_MAX_PROGRAMS = 32
#: the most experts a context holds (the exchange kernel keeps one count per expert in registers)
MAX_EXPERTS = 4096


@dataclass
class EPHandle:
    """What :func:`ep_combine` needs of an :func:`ep_dispatch` call: the context's handle, the buffer set
    (``parity``) the call used and its token count (the call's routing was copied into the context at dispatch)."""

    ctx_handle: int
    parity: int
    num_tokens: int
    captured: bool = False
    method: str = "push"
    combined: bool = field(default=False, compare=False)


class EPContext(Context):
    """Buffers and signals of the expert-parallel dispatch / combine (see module docstring). Attributes:
    ``max_tokens`` (per rank and call), ``hidden``, ``topk``, ``num_experts``, ``experts_per_rank``, ``rows`` (the
    receive layout's capacity: ``world * max_tokens * topk``)."""

    kind = "ep"
    op = "ep_dispatch"

    def __init__(self, max_tokens: int, hidden: int, topk: int, num_experts: int, dtype: torch.dtype, *,
                 method: str = "auto", methods=None, block_h: int = None, quant: str = None):
        fac = "create_ep_ctx"
        if not isinstance(method, str) or method not in ("auto", ) + EP_METHODS:
            raise ValueError(f"{fac}: method={method!r} (the calls' default); accepted: 'auto', "
                             f"{', '.join(map(repr, EP_METHODS))}")
        if isinstance(methods, str):
            methods = (methods, )
        if isinstance(max_tokens, int) and isinstance(topk, int):
            ll_fits = max_tokens <= MAX_LL_TOKENS and topk <= MAX_LL_TOPK
            if not ll_fits and ("ll" in (methods or ()) or method == "ll"):
                raise ValueError(f"{fac}: method 'll' (the latency mode) takes at most max_tokens={MAX_LL_TOKENS} "
                                 f"tokens per rank and topk={MAX_LL_TOPK}, got max_tokens={max_tokens}, topk={topk}; "
                                 f"use 'push' or 'normal' for larger calls")
            if methods is None:  # default: every method, ll only where the capacity allows it
                methods = tuple(m for m in EP_METHODS if m != "ll" or ll_fits)
        if methods is not None:
            methods = tuple(methods)
            if not methods or any(not isinstance(m, str) or m not in EP_METHODS for m in methods):
                raise ValueError(f"{fac}: methods={methods!r}: the methods to allocate buffers for, a non-empty "
                                 f"subset of {EP_METHODS}")
            if method != "auto" and method not in methods:
                raise ValueError(f"{fac}: the default method={method!r} is not among methods={methods}")
            methods = tuple(m for m in EP_METHODS if m in methods)  # one order on every rank (fingerprinted)
        for name, v in (("max_tokens", max_tokens), ("hidden", hidden), ("topk", topk), ("num_experts", num_experts)):
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"{fac}: {name}={v!r} must be a positive int")
        if num_experts > MAX_EXPERTS:
            raise ValueError(f"{fac}: num_experts={num_experts} exceeds {MAX_EXPERTS}")
        if block_h is not None and (isinstance(block_h, bool) or not isinstance(block_h, int) or block_h < 16 or
                                    block_h & (block_h - 1)):
            raise ValueError(f"{fac}: block_h={block_h!r} must be a power of two >= 16")
        if quant not in EP_QUANT:
            raise ValueError(f"{fac}: quant={quant!r}; accepted: None, 'fp8' (e4m3, one scale per {QUANT_GROUP} "
                             f"columns)")
        if quant == "fp8":
            if hidden % QUANT_GROUP:
                raise ValueError(f"{fac}: quant='fp8' needs hidden ({hidden}) to be a multiple of {QUANT_GROUP}")
            if block_h is not None and block_h % QUANT_GROUP:
                raise ValueError(f"{fac}: quant='fp8' needs block_h ({block_h}) to be a multiple of {QUANT_GROUP}")
        super().__init__(max_tokens * hidden, dtype, EP_DTYPES, fingerprint_extra=(max_tokens, hidden, topk,
                                                                                   num_experts, block_h, quant),
                         methods=methods, all_methods=EP_METHODS, method=method)
        W = self.world_size
        if num_experts % W:
            raise ValueError(f"{fac}: num_experts={num_experts} must be a multiple of the world size {W} (every rank "
                             f"holds num_experts / world experts)")
        self.max_tokens, self.hidden, self.topk, self.num_experts = max_tokens, hidden, topk, num_experts
        self.experts_per_rank = num_experts // W
        self.pairs = max_tokens * topk
        self.rows = W * self.pairs
        if self.rows >= 2**31 - ROUTE_BLOCK:
            raise ValueError(f"{fac}: world x max_tokens x topk = {self.rows} rows: must stay below 2**31 - "
                             f"{ROUTE_BLOCK} (int32 row indices)")
        #: columns per program of the dispatch / combine copies (the simulator uses small chunks so that several
        #: chunk programs run even at toy sizes)
        self.quant = quant
        self.block_h = block_h or (256 if self.on_gpu else (QUANT_GROUP if quant else 16))
        self.nchunk = max(1, triton.cdiv(hidden, self.block_h))
        #: ``normal``: tokens per program of the send and combine-send kernels, and pairs per program of the
        #: receiver's id kernel (small on the simulator, so that several programs run at toy sizes)
        self.token_block = 32 if self.on_gpu else 4
        self.ids_block = 1024 if self.on_gpu else 64
        has_push, has_normal, has_ll = "push" in self.methods, "normal" in self.methods, "ll" in self.methods
        has_rows = has_push or has_ll  # push's buffers: ll runs push's protocol and layout
        #: ``ll``: the programs of its two launches (fixed per context: the launch counters are per program), and
        #: pairs / received rows per block (small on the simulator, so that several blocks run at toy sizes)
        self.ll_programs = max(1, min(LL_MAX_PROGRAMS, self.max_programs))
        self.ll_block = ROUTE_BLOCK if self.on_gpu else 8
        u = self._utils
        sym = []

        def symmetric(shape, dt):
            t = u.nvshmem_create_tensor(shape, dt)
            sym.append(t)
            return t

        def local(shape, dt):
            return torch.zeros(shape, dtype=dt, device=dev)

        def pair(shape, dt, alloc=symmetric):  # one buffer per parity, both 16-byte aligned (no recompile per parity)
            return parity_buffers(alloc, shape, dt)

        def layout(shape, dt):  # the returned layout: push's / ll's senders write it remotely, normal's receiver locally
            return pair(shape, dt, symmetric if has_rows else local)

        E, dev = num_experts, self.device
        HG = hidden // QUANT_GROUP
        #: the rows' dtype on the wire and in the returned layout
        self.token_dtype = torch.float8_e4m3fn if quant == "fp8" else dtype
        self.recv_tokens = layout((self.rows, hidden), self.token_dtype)
        self.recv_scales = layout((self.rows, HG), torch.float32) if quant else None
        # both methods: the exchange signals [e % 2, source] (slots by the device epoch), the arrival counters
        # ([0] dispatch, [1 + parity] combine of that buffer set) and their running totals, the epoch counter
        self.counts_ready = symmetric((2, W), torch.int64)
        # one 16-byte row per counter (only [i, 0] is used): arrived[1 + parity] has the alignment of arrived[0]
        self.arrived = symmetric((3, 2), torch.int64)
        if has_rows:
            self.recv_meta = pair((self.rows, ), torch.int32)
            self.combine_buf = pair((self.pairs, hidden), dtype)
            self.counts = symmetric((2, W, E), torch.int32)
        if has_normal:
            # received, per buffer parity: every source's tokens routed here (row (source, token)), every source's
            # routing rows (global id, E when out of range; weight); the token counts (slot by the device epoch);
            # sent back: one partial row per (expert rank, token)
            self.tbuf = pair((W, max_tokens, hidden), self.token_dtype)
            self.tscales = pair((W, max_tokens, HG), torch.float32) if quant else None
            self.ridx = pair((W, max_tokens, topk), torch.int32)
            self.rw = pair((W, max_tokens, topk), torch.float32)
            self.cbuf = pair((W, max_tokens, hidden), dtype)
            self.tcnt = symmetric((2, W), torch.int32)
            # local, per buffer parity: the sources' token counts of the call, the local expert of every virtual
            # pair (source, token, slot) and its row in the layout
            self.tcounts = pair((W, ), torch.int32, local)
            self.lids = pair((self.rows, ), torch.int32, local)
            self.dest_rows = pair((self.rows, ), torch.int32, local)
        if has_ll:
            # the count scratch of the dispatch's program 0, the per-program launch counters ([0] dispatch, [1]
            # combine) and the intra-kernel barrier's flag (symmetric so that dl.notify raises it; this rank's only)
            self.ll_totals = local((E, ), torch.int32)
            self.ll_epochs = local((2, self.ll_programs), torch.int64)
            self.ll_bar = symmetric((2, ), torch.int64)
        for t in (self.counts_ready, self.arrived) + ((self.ll_bar, ) if has_ll else ()):
            t.zero_()
        self._symmetric += sym
        self.counter = torch.zeros(1, dtype=torch.int64, device=dev)
        self.expect = torch.zeros((3, 2), dtype=torch.int64, device=dev)  # the running totals the waits expect ([i, 0])
        self.send_base = torch.zeros(E, dtype=torch.int32, device=dev) if has_rows else None
        self.offsets = pair((self.experts_per_rank, ), torch.int32, local)
        # each dispatch's routing as combine will use it (a copy: the caller may refill its router tensors in place
        # while the dispatch is in flight)
        self.routed_idx = pair((max_tokens, topk), torch.int64, local)
        self.routed_w = pair((max_tokens, topk), torch.float32, local)
        # push's combine buffer holds pair p's row at row p: moe_route's combine kernel reads it through these rows
        self.pair_rows = torch.arange(self.pairs, dtype=torch.int32, device=dev) if has_push else None
        self._stream = None
        self._tag = num_experts % (1 << 24)
        self._tag_normal = (num_experts + (1 << 23)) % (1 << 24)  # never push's: a method mismatch is reported
        self._tag_ll = (num_experts + (1 << 22)) % (1 << 24)  # neither push's nor normal's (E <= 4096)
        self._next_parity = 0
        self._pending = []  # handles dispatched and not combined yet, oldest first
        self._finish_init()

    def _order_streams(self) -> None:
        """Eager calls on this context run in call order, whichever streams they are on: a call on another stream
        than the previous call's first makes its stream wait for that one's work so far (``wait_stream``; nothing on
        the host waits). The calls share the epoch counter, ``send_base`` and the running totals, which calls running
        at once on two streams would update in an unknown order. This is what lets a capture's warm-up run on a side
        stream (``torch.cuda.graph``'s pattern) after calls on the default stream. Inside a capture nothing is
        inserted: the graph's own order holds, and the capture starts with no dispatch in flight (checked)."""
        if not self.on_gpu or capturing():
            return
        cur = torch.cuda.current_stream(self.device)
        if self._stream is not None and cur != self._stream:
            cur.wait_stream(self._stream)
        self._stream = cur

    def _resolve(self, op: str, method) -> str:
        m = self._call_method(method)
        check_method(op, m, ("auto", ) + EP_METHODS)
        if m == "auto":  # by the context's capacity, the same on every rank (docs/moe.md; provisional)
            m = next(c for c in AUTO_ORDER[self.max_tokens > MAX_LL_TOKENS] if c in self.methods)
        if m not in self.methods:
            raise ValueError(f"{op}: method={m!r} was not allocated by this context (created with "
                             f"methods={self.methods}); create it with that method included")
        return m


def create_ep_ctx(max_tokens: int, hidden: int, topk: int, num_experts: int, dtype: torch.dtype = torch.bfloat16, *,
                  method: str = "auto", methods=None, block_h: int = None, quant: str = None) -> EPContext:
    """Collective: the buffers of :func:`ep_dispatch` / :func:`ep_combine` for up to ``max_tokens`` tokens per rank
    and call, ``hidden`` columns, ``topk`` slots per token, ``num_experts`` experts over the world (a multiple of the
    world size; rank ``r`` holds experts ``[r * E / world, (r + 1) * E / world)``), token ``dtype`` (bf16 / fp16 /
    fp32). Allocates ``2 x world x max_tokens x topk`` rows of ``hidden`` for receiving and ``2 x max_tokens x topk``
    for combining. ``quant="fp8"``: the dispatch quantises each row on the sender to fp8 e4m3 with one fp32 scale per
    128 columns (``hidden`` a multiple of 128) and returns the scales (``group_gemm``'s ``scale_a``); combine stays in
    ``dtype``. ``block_h``: columns per program of the copies (default 256 on a GPU). ``method``: the calls' default
    (``"auto"``, ``"push"``, ``"normal"``, ``"ll"``; see :data:`EP_METHODS`); ``methods``: the methods to allocate
    buffers for (default: all, ``ll`` only where ``max_tokens <= MAX_LL_TOKENS`` (256) and ``topk <=
    MAX_LL_TOPK`` (8); ``normal`` adds ``4 x world x max_tokens x hidden`` elements of send / combine buffers, so a
    context that never calls it can leave it out; ``ll`` shares push's). Asking for ``ll`` past its limits raises
    ``ValueError``. Every rank must create it with the same arguments (checked: ``ValueError`` on every rank)."""
    return EPContext(max_tokens, hidden, topk, num_experts, dtype, method=method, methods=methods, block_h=block_h,
                     quant=quant)


create_ep_context = create_ep_ctx


def _check_dispatch(op, ctx, x, topk_idx, topk_weights):
    check_ctx(op, ctx, EPContext, "create_ep_ctx")
    ctx._check_open(op)
    check_routing(op, x, topk_idx, topk_weights, ctx.num_experts)
    T, H = x.shape
    if H != ctx.hidden:
        raise ValueError(f"{op}: x has {H} columns, the context was made for hidden={ctx.hidden}")
    if T > ctx.max_tokens:
        raise ValueError(f"{op}: {T} tokens exceed the context's max_tokens={ctx.max_tokens} (per rank and call); "
                         f"create the context with a larger max_tokens")
    if topk_idx.shape[1] != ctx.topk:
        raise ValueError(f"{op}: topk_idx has {topk_idx.shape[1]} slots per token, the context was made for "
                         f"topk={ctx.topk}")
    ctx._check_dtype(op, x, "x")
    ctx._check_device(op, x, "x")


@torch.compiler.disable
def ep_dispatch(x: torch.Tensor, topk_idx: torch.Tensor, topk_weights: torch.Tensor, ctx: EPContext, *,
                method: str = None, check_ids: bool = True):
    """Collective (every rank calls it, with its own tokens): send each token's copy for slot ``j`` to the rank of
    expert ``topk_idx[t, j]``. Returns ``(tokens, expert_offsets, scales, handle)`` on every rank:

    * ``tokens [ctx.rows, H]`` (a view of the context's receive buffer of this call): the rows of local expert
      ``le`` (global ``rank * E_local + le``) are ``[expert_offsets[le - 1], expert_offsets[le])``, ordered by
      source rank, then the source's token, then slot; rows past ``expert_offsets[-1]`` are not written;
    * ``expert_offsets [E_local]`` int32 (cumulative end rows: ``group_gemm``'s / ``torch._grouped_mm``'s ``offs``);
    * ``scales``: None (the rows travel in ``x``'s dtype), or with a ``quant="fp8"`` context ``[ctx.rows, H / 128]``
      float32, ``tokens`` then fp8 e4m3 with row ``r``'s columns ``[128 g, 128 (g + 1))`` standing for ``tokens[r] *
      scales[r, g]`` (``group_gemm``'s ``scale_a``);
    * ``handle``: an :class:`EPHandle` for :func:`ep_combine`.

    ``x [T, H]`` with ``T <= max_tokens`` (ranks may pass different ``T``, 0 included), ``topk_idx [T, topk]`` int32 /
    int64 global expert ids, ``topk_weights [T, topk]`` floating (kept for combine). ``check_ids`` (default True):
    ids outside ``[0, num_experts)`` raise ``ValueError`` before the launch (one synchronisation; skipped inside a
    capture and by ``check_ids=False``, where such a slot is not sent and combine leaves it out). The returned
    buffers stay valid until the dispatch after next on this context. ``method``: ``"push"``, ``"normal"``, ``"ll"``
    or ``"auto"`` (by the context's capacity: :data:`AUTO_ORDER`), default the context's; the layout is the same. Execution, no host
    synchronisation: push, five launches on the current stream (count, block scan, exchange, push, arrival wait)
    after two copies of the routing, the last waiting until every rank's rows for this rank arrived; normal, eight (nine with fp8): the token-count exchange, the send, the
    arrival wait, then this rank's routing built locally; ll, ONE launch (count, exchange, push, arrival wait; it
    copies the routing itself)."""
    op = "ep_dispatch"
    _check_dispatch(op, ctx, x, topk_idx, topk_weights)
    ctx.op = op  # names this call in a simulator rank error of its kernels
    m = ctx._resolve(op, method)
    ctx._order_streams()
    if capturing() and any(not h.captured for h in ctx._pending):
        raise ValueError(f"{op}: a CUDA-graph capture must start with no dispatch in flight on this context (an "
                         f"eager dispatch is not combined yet), and should combine every dispatch it makes: replays "
                         f"reuse the buffers the capture used")
    if len(ctx._pending) >= 2:
        raise ValueError(f"{op}: two dispatches on this context are not combined yet; their buffers are in use (the "
                         f"context double-buffers): call ep_combine on the older handle first")
    if check_ids and not capturing():
        check_expert_ids(op, topk_idx, ctx.num_experts)
    ctx._check_peers(op, (op, len(ctx._pending), m))
    T = x.shape[0]
    if m == "ll" and T > MAX_LL_TOKENS:  # the context's max_tokens already bounds it: a guard for the kernel's plan
        raise ValueError(f"{op}: method 'll' takes at most {MAX_LL_TOKENS} tokens per rank, got {T}")
    par = ctx._next_parity
    if m == "ll":  # the kernel copies the routing itself
        _dispatch_ll(ctx, x, topk_idx, topk_weights, par)
    else:
        ctx.routed_idx[par, :T].copy_(topk_idx)
        ctx.routed_w[par, :T].copy_(topk_weights)
        if m == "push":
            _dispatch_push(ctx, x, topk_idx, par)
        else:
            _dispatch_normal(ctx, x, par)
    ctx._next_parity ^= 1
    handle = EPHandle(ctx.handle, par, T, captured=capturing(), method=m)
    ctx._pending.append(handle)
    return ctx.recv_tokens[par], ctx.offsets[par], ctx.recv_scales[par] if ctx.quant else None, handle


def _dispatch_push(ctx, x, topk_idx, par):
    """Method ``push``'s four launches (docs/moe.md): count, exchange, push, arrival wait."""
    T, H = x.shape
    k, E, W = ctx.topk, ctx.num_experts, ctx.world_size
    P = T * k
    dev = x.device
    nb = max(1, triton.cdiv(P, ROUTE_BLOCK))
    counts = torch.empty((E + 1, nb), dtype=torch.int32, device=dev)
    base = torch.empty_like(counts)
    totals = torch.empty(E + 1, dtype=torch.int32, device=dev)
    if P:
        ctx._launch_plain(route_count_kernel, (nb, ), (topk_idx, counts, P, E, nb), BLOCK=ROUTE_BLOCK,
                          EXPERTS_CHUNK=EXPERTS_CHUNK)
        ctx._launch_plain(route_block_scan_kernel, (E + 1, ), (counts, base, totals, nb), BLOCKS_CHUNK=BLOCKS_CHUNK)
    else:  # no tokens on this rank: it still publishes its (zero) counts and receives its experts' rows
        totals.zero_()
    block_e = triton.next_power_of_2(E)
    ctx._launch_plain(_k.ep_exchange_kernel, (1, ),
                      (totals, ctx.counts, ctx.counts_ready, ctx.counter, ctx.send_base, ctx.offsets[par],
                       ctx.expect[0], ctx.expect[1 + par], ctx._tag, E, ctx.experts_per_rank, ctx.nchunk, ctx.rank),
                      WORLD=W, BLOCK_E=block_e, num_warps=4 if ctx.on_gpu else 1)
    if P:
        ctx._launch_plain(_k.ep_dispatch_kernel, (nb, ctx.nchunk),
                          (x, topk_idx, base, ctx.send_base, ctx.recv_tokens[par], ctx.recv_meta[par],
                           ctx.recv_scales[par] if ctx.quant else ctx.recv_meta[par], ctx.arrived[0], P, k, E,
                           ctx.experts_per_rank, nb, H, x.stride(0), ctx.pairs, ctx.rank),
                          WORLD=W, BLOCK=ROUTE_BLOCK, BLOCK_H=ctx.block_h, QUANT_FP8=ctx.quant == "fp8",
                          num_warps=4 if ctx.on_gpu else 1)
    ctx._launch_plain(_k.ep_arrival_wait_kernel, (1, ), (ctx.arrived[0], ctx.expect[0]), num_warps=1)


def _dispatch_ll(ctx, x, topk_idx, topk_weights, par):
    """Method ``ll`` (docs/moe.md): ONE launch of ``ep_ll_dispatch_kernel`` on ``ctx.ll_programs`` programs (count,
    exchange, intra-kernel barrier, push, arrival wait; it also copies the routing for combine)."""
    T, H = x.shape
    W, E = ctx.world_size, ctx.num_experts
    fp8 = ctx.quant == "fp8"
    w = topk_weights
    ctx._launch_plain(_k.ep_ll_dispatch_kernel, (ctx.ll_programs, ),
                      (x, topk_idx, w, ctx.routed_idx[par], ctx.routed_w[par], ctx.ll_totals, ctx.counts,
                       ctx.counts_ready, ctx.counter, ctx.ll_epochs[0], ctx.ll_bar, ctx.send_base, ctx.offsets[par],
                       ctx.recv_tokens[par], ctx.recv_meta[par], ctx.recv_scales[par] if fp8 else ctx.recv_meta[par],
                       ctx.arrived[0], ctx.expect[0], ctx.expect[1 + par], ctx._tag_ll, T, ctx.topk, E,
                       ctx.experts_per_rank, H, x.stride(0), w.stride(0), w.stride(1), ctx.pairs, ctx.rank),
                      WORLD=W, BLOCK=ctx.ll_block, BLOCK_E=triton.next_power_of_2(E), BLOCK_H=ctx.block_h,
                      QUANT_FP8=fp8, num_warps=4 if ctx.on_gpu else 1)


def _combine_ll(ctx, expert_out, out, par, T):
    """Method ``ll``'s combine: ONE launch of ``ep_ll_combine_kernel`` (send back, arrival wait, weighted sum)."""
    ctx._launch_plain(_k.ep_ll_combine_kernel, (ctx.ll_programs, ),
                      (expert_out, ctx.recv_meta[par], ctx.offsets[par], ctx.combine_buf[par], ctx.arrived[1 + par],
                       ctx.expect[1 + par], ctx.routed_idx[par], ctx.routed_w[par], out, T, ctx.topk, ctx.num_experts,
                       ctx.hidden, expert_out.stride(0), out.stride(0), ctx.pairs, ctx.experts_per_rank),
                      WORLD=ctx.world_size, BLOCK=ctx.ll_block, BLOCK_H=ctx.block_h,
                      num_warps=4 if ctx.on_gpu else 1)


def _dispatch_normal(ctx, x, par):
    """Method ``normal`` (docs/moe.md): enter (token counts + the handshake), send (each token once per rank holding
    one of its experts, and every token's routing row to every rank), arrival wait, then this rank's layout built
    locally from the routing rows received: virtual pair ids, and the route kernels of ``moe_route``."""
    T, H = x.shape
    k, E, W, E_loc = ctx.topk, ctx.num_experts, ctx.world_size, ctx.experts_per_rank
    dev = x.device
    warps = 4 if ctx.on_gpu else 1
    BT = ctx.token_block
    ctx._launch_plain(_k.ep_normal_enter_kernel, (1, ),
                      (ctx.tcnt, ctx.counts_ready, ctx.counter, ctx.tcounts[par], ctx.expect[0], ctx.expect[1 + par],
                       ctx._tag_normal, T, ctx.nchunk, ctx.rank),
                      WORLD=W, WORLD_P2=triton.next_power_of_2(W), BLOCK_T=BT, num_warps=1)
    fp8 = ctx.quant == "fp8"
    if T:
        ctx._launch_plain(_k.ep_normal_send_kernel, (triton.cdiv(T, BT), ctx.nchunk),
                          (x, ctx.routed_idx[par], ctx.routed_w[par], ctx.tbuf[par],
                           ctx.tscales[par] if fp8 else ctx.rw[par], ctx.ridx[par], ctx.rw[par], ctx.arrived[0], T, k, E,
                           E_loc, H, x.stride(0), ctx.max_tokens, ctx.rank),
                          WORLD=W, BLOCK_T=BT, BLOCK_K=triton.next_power_of_2(k), BLOCK_H=ctx.block_h,
                          QUANT_FP8=fp8, num_warps=warps)
    ctx._launch_plain(_k.ep_arrival_wait_kernel, (1, ), (ctx.arrived[0], ctx.expect[0]), num_warps=1)
    P = ctx.rows  # the virtual pairs: every source's max_tokens x topk slots
    lids, dest = ctx.lids[par], ctx.dest_rows[par]
    ctx._launch_plain(_k.ep_normal_ids_kernel, (triton.cdiv(P, ctx.ids_block), ),
                      (ctx.ridx[par], ctx.tcounts[par], lids, k, ctx.max_tokens, E_loc, ctx.rank),
                      WORLD=W, BLOCK=ctx.ids_block, num_warps=warps)
    nb = triton.cdiv(P, ROUTE_BLOCK)
    counts = torch.empty((E_loc + 1, nb), dtype=torch.int32, device=dev)
    base = torch.empty_like(counts)
    totals = torch.empty(E_loc + 1, dtype=torch.int32, device=dev)
    starts = torch.empty_like(totals)
    ctx._launch_plain(route_count_kernel, (nb, ), (lids, counts, P, E_loc, nb), BLOCK=ROUTE_BLOCK,
                      EXPERTS_CHUNK=EXPERTS_CHUNK)
    ctx._launch_plain(route_block_scan_kernel, (E_loc + 1, ), (counts, base, totals, nb), BLOCKS_CHUNK=BLOCKS_CHUNK)
    ctx._launch_plain(route_expert_scan_kernel, (1, ), (totals, starts, ctx.offsets[par], E_loc),
                      EXPERTS_CHUNK=EXPERTS_CHUNK)
    tokens = ctx.recv_tokens[par]
    src = ctx.tbuf[par].view(W * ctx.max_tokens, H)
    ctx._launch_plain(route_scatter_kernel, (nb, ctx.nchunk),
                      (src, lids, base, starts, tokens, dest, tokens, P, k, E_loc, nb, H, H, H, H),
                      BLOCK=ROUTE_BLOCK, BLOCK_H=ctx.block_h, QUANT_FP8=False, ROUTED_ONLY=True, num_warps=warps)
    if fp8:  # the scales travel beside the codes: the same rows, one scale per QUANT_GROUP columns
        HG = H // QUANT_GROUP
        sc = ctx.recv_scales[par]
        ctx._launch_plain(route_scatter_kernel, (nb, 1),
                          (ctx.tscales[par].view(W * ctx.max_tokens, HG), lids, base, starts, sc, dest, sc, P, k,
                           E_loc, nb, HG, HG, HG, HG),
                          BLOCK=ROUTE_BLOCK, BLOCK_H=triton.next_power_of_2(HG), QUANT_FP8=False, ROUTED_ONLY=True,
                          num_warps=warps)


@torch.compiler.disable
def ep_combine(expert_out: torch.Tensor, handle: EPHandle, ctx: EPContext, *, out: torch.Tensor = None,
               method: str = None) -> torch.Tensor:
    """Collective: send the experts' output rows back and return ``out [T, H]`` with ``out[t] = sum_j
    topk_weights[t, j] * f_{topk_idx[t, j]}(x[t])`` for this rank's tokens of the dispatch that made ``handle``
    (slots whose expert id was out of range left out), accumulated in fp32: deterministic. Method ``push`` sums the
    slots in slot order and rounds once; ``normal`` (the dispatch's method: combine always runs it) sums each expert
    rank's slots of the token in slot order into one partial on that rank, rounds it to the context's dtype, and
    sums the partials in rank order, rounding once more (an fp32 context gets push's result). ``expert_out
    [ctx.rows, H]`` in the context's dtype: row ``r`` is the output of received row ``r`` (e.g. the grouped GEMMs
    over ``tokens``); rows past ``expert_offsets[-1]`` are not read. ``method``: None or ``"auto"`` (the
    dispatch's), else it must name the dispatch's method. Handles are combined in dispatch order, each once. Method
    ``ll`` sums as push. Execution: three launches on the current stream (ll: one), no host synchronisation; the
    wait is until every expert's rank sent this rank's rows (push, ll) or partials (normal) back."""
    op = "ep_combine"
    check_ctx(op, ctx, EPContext, "create_ep_ctx")
    ctx._check_open(op)
    asked = None if method is None else ctx._call_method(method)
    if asked is not None:
        check_method(op, asked, ("auto", ) + EP_METHODS)
    ctx._order_streams()
    if not isinstance(handle, EPHandle) or handle.ctx_handle != ctx.handle:
        raise ValueError(f"{op}: handle must be the EPHandle that ep_dispatch returned for this context, got "
                         f"{type(handle).__name__}")
    if handle.combined:
        raise ValueError(f"{op}: this dispatch was combined already (each handle is combined once)")
    if not ctx._pending or ctx._pending[0] is not handle:
        raise ValueError(f"{op}: handles are combined in dispatch order: an older dispatch on this context is not "
                         f"combined yet")
    if asked not in (None, "auto", handle.method):
        raise ValueError(f"{op}: method={method!r}, but this handle was dispatched with method={handle.method!r} "
                         f"(combine runs its dispatch's method: leave method=None)")
    H = ctx.hidden
    if not isinstance(expert_out, torch.Tensor) or tuple(expert_out.shape) != (ctx.rows, H):
        raise ValueError(f"{op}: expert_out must be [{ctx.rows}, {H}] (one row per row of the dispatched layout), got "
                         f"{tuple(getattr(expert_out, 'shape', ()))}")
    ctx._check_dtype(op, expert_out, "expert_out")
    ctx._check_device(op, expert_out, "expert_out")
    if expert_out.stride(1) != 1:
        raise ValueError(f"{op}: expert_out needs a unit column stride (call .contiguous())")
    T, k = handle.num_tokens, ctx.topk
    if out is None:
        out = torch.empty((T, H), dtype=ctx.dtype, device=ctx.device)
    elif not isinstance(out, torch.Tensor) or tuple(out.shape) != (T, H) or out.device != expert_out.device or \
            out.stride(1) != 1 or out.dtype not in EP_DTYPES:
        raise ValueError(f"{op}: out must be a bf16 / fp16 / fp32 [{T}, {H}] tensor on {expert_out.device} with unit "
                         f"column stride")
    ctx._check_peers(op, (op, len(ctx._pending), handle.method))
    ctx.op = op
    par = handle.parity
    if handle.method in ("normal", "ll"):
        (_combine_normal if handle.method == "normal" else _combine_ll)(ctx, expert_out, out, par, T)
        handle.combined = True
        ctx._pending.pop(0)
        return out
    nrb = triton.cdiv(ctx.rows, ROUTE_BLOCK)
    ctx._launch_plain(_k.ep_combine_send_kernel, (nrb, ctx.nchunk),
                      (expert_out, ctx.recv_meta[par], ctx.offsets[par], ctx.combine_buf[par], ctx.arrived[1 + par], H,
                       expert_out.stride(0), ctx.pairs, ctx.experts_per_rank),
                      WORLD=ctx.world_size, BLOCK=ROUTE_BLOCK, BLOCK_H=ctx.block_h, num_warps=4 if ctx.on_gpu else 1)
    ctx._launch_plain(_k.ep_arrival_wait_kernel, (1, ), (ctx.arrived[1 + par], ctx.expect[1 + par]), num_warps=1)
    if T:  # the slots' sum, as moe_combine's: pair p = t * k + j is row p of the combine buffer
        w = ctx.routed_w[par]
        ctx._launch_plain(combine_kernel, (T, ctx.nchunk),
                          (ctx.combine_buf[par], ctx.pair_rows, ctx.routed_idx[par], w, out, ctx.pairs, k,
                           ctx.num_experts, H, H, w.stride(0), out.stride(0)), BLOCK_H=ctx.block_h,
                          num_warps=4 if ctx.on_gpu else 1)
    handle.combined = True
    ctx._pending.pop(0)
    return out


def _combine_normal(ctx, expert_out, out, par, T):
    """Method ``normal``'s combine: one partial row per (source, token) routed here sent back to the source, the
    arrival wait, the sum of this rank's tokens' partials in rank order."""
    W, H, BT = ctx.world_size, ctx.hidden, ctx.token_block
    warps = 4 if ctx.on_gpu else 1
    nbt = triton.cdiv(ctx.max_tokens, BT)
    ctx._launch_plain(_k.ep_normal_combine_send_kernel, (W * nbt, ctx.nchunk),
                      (expert_out, ctx.lids[par], ctx.dest_rows[par], ctx.rw[par], ctx.tcounts[par], ctx.cbuf[par],
                       ctx.arrived[1 + par], ctx.topk, ctx.experts_per_rank, H, expert_out.stride(0), ctx.max_tokens,
                       nbt, ctx.rank),
                      WORLD=W, BLOCK_T=BT, BLOCK_H=ctx.block_h, num_warps=warps)
    ctx._launch_plain(_k.ep_arrival_wait_kernel, (1, ), (ctx.arrived[1 + par], ctx.expect[1 + par]), num_warps=1)
    if T:
        ctx._launch_plain(_k.ep_normal_combine_reduce_kernel, (T, ctx.nchunk),
                          (ctx.cbuf[par], ctx.routed_idx[par], out, ctx.topk, ctx.num_experts, ctx.experts_per_rank,
                           H, out.stride(0), ctx.max_tokens),
                          WORLD=W, BLOCK_K=triton.next_power_of_2(ctx.topk), BLOCK_H=ctx.block_h, num_warps=warps)


__all__ = ["EPContext", "EPHandle", "create_ep_ctx", "create_ep_context", "ep_dispatch", "ep_combine", "EP_DTYPES",
           "EP_METHODS", "EP_QUANT", "MAX_LL_TOKENS", "MAX_LL_TOPK"]
