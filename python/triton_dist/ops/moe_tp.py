"""Tensor-parallel MoE, overlapped: every rank holds a column slice of every expert and a sequence shard of the tokens.
``ag_group_gemm`` all-gathers the tokens inside the first grouped GEMM (each tile starts as soon as the rows it needs
have arrived); ``group_gemm_rs`` runs the second grouped GEMM, sums each token's top-k rows with their weights and
reduce-scatters the partial sums back to the tokens' owners, in one launch. Device code and protocol:
:mod:`triton_dist.kernels.moe_tp` and docs/moe.md ("Tensor parallelism")::

    ctx = ops.create_tp_moe_ctx(max_tokens=4096, hidden=2048, topk=8, num_experts=128, dtype=torch.bfloat16)
    h, expert_offsets, handle = ops.ag_group_gemm(x, topk_idx, topk_weights, w_gate_up_slice, ctx)
    a = ops.moe_silu_gate(h, expert_offsets)
    y = ops.group_gemm_rs(a, w_down_slice, handle, ctx)         # [T, hidden]: this rank's tokens

Both ops run at world 1 too (no peers: a grouped GEMM over the routing, then the weighted sum). Every rank passes
the same number of tokens ``T`` (a sequence shard; checked through the routing all-gather's tagged signals: a
mismatch is an error on every rank, not a hang). No host synchronisation but the optional id check; CUDA-graph
capturable after one warm-up call of the shape. Under torch.compile the calls are the registered ops
``torch.ops.triton_dist.ag_group_gemm`` / ``group_gemm_rs`` (fake implementations give the shapes).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import torch
import triton

from ..kernels import moe_tp as _k
from ..runtime.dtypes import HALF_DTYPES, dtype_names
from .context import capturing, check_ctx
from .moe_gemm import select_group_config
from .moe_layout import ROUTE_BLOCK, check_routing, route_tokens
from .overlap_context import _OverlapContext

#: token / weight dtypes of the TP-MoE ops (the grouped GEMM's half types)
TP_MOE_DTYPES = HALF_DTYPES
#: signal tags are the call's element count mod 2**24 (kernels.common); ``group_gemm_rs`` adds this offset so a call
#: of one op can never satisfy the other's waits
_RS_TAG_OFFSET = 1 << 23
_TAG_RANGE = 1 << 24


@dataclass
class TPMoEHandle:
    """What :func:`group_gemm_rs` needs of an :func:`ag_group_gemm` call: the gathered routing of all ``world * T``
    tokens (``topk_idx`` int32 and ``topk_weights`` float32, ``[world * T, k]``), each pair's layout row
    (``dest_rows``), the layout row -> pair map (``row_pairs [rows]``), the per-(expert, source rank) segment ends
    (``seg_offsets [E * world]``) and the per-expert ends (``expert_offsets [E]``). ``rows = world * T * k``."""

    topk_idx: torch.Tensor
    topk_weights: torch.Tensor
    dest_rows: torch.Tensor
    row_pairs: torch.Tensor
    seg_offsets: torch.Tensor
    expert_offsets: torch.Tensor
    num_tokens: int
    ctx_handle: int

    @property
    def rows(self) -> int:
        return self.row_pairs.shape[0]


class TPMoEContext(_OverlapContext):
    """Buffers and signals of :func:`ag_group_gemm` / :func:`group_gemm_rs` (module docstring). Attributes:
    ``max_tokens`` (per rank and call), ``hidden``, ``topk``, ``num_experts``, ``comm_programs`` (push programs
    of the all-gather), ``reduce_programs`` (reduce programs of the reduce-scatter). Symmetric memory: the gathered
    tokens and the reduce-scatter's stage, ``world x max_tokens x hidden`` elements each, plus the routing
    all-gather's context."""

    kind = "tp_moe"
    factory_suffix = "_ctx"

    def __init__(self, max_tokens: int, hidden: int, topk: int, num_experts: int, dtype: torch.dtype, *,
                 comm_programs: Optional[int] = None, reduce_programs: Optional[int] = None, sim_config=None):
        fac = "create_tp_moe_ctx"
        for name, v in (("max_tokens", max_tokens), ("hidden", hidden), ("topk", topk), ("num_experts", num_experts)):
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"{fac}: {name}={v!r} must be a positive int")
        for name, v in (("comm_programs", comm_programs), ("reduce_programs", reduce_programs)):
            if v is not None and (isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= 64):
                raise ValueError(f"{fac}: {name}={v!r} must be an int in [1, 64]")
        from ..runtime.state import require_backend

        gpu = getattr(require_backend(), "name", "") != "sim"
        self.comm_programs = int(comm_programs or (8 if gpu else 2))
        self.reduce_programs = int(reduce_programs or (8 if gpu else 2))
        super().__init__(max_tokens * hidden, dtype, TP_MOE_DTYPES, methods=("fused", ), all_methods=("fused", ),
                         method="fused", fingerprint_extra=(max_tokens, hidden, topk, num_experts, self.comm_programs,
                                                            self.reduce_programs))
        W = self.world_size
        if W * max_tokens * hidden >= 2**31 or W * max_tokens * topk >= 2**31 - ROUTE_BLOCK:
            raise ValueError(f"{fac}: world x max_tokens x hidden = {W * max_tokens * hidden} and world x max_tokens "
                             f"x topk = {W * max_tokens * topk} must stay below 2**31 (int32 offsets)")
        if W * num_experts > 4096:
            raise ValueError(f"{fac}: world x num_experts = {W * num_experts} segments exceed 4096")
        self.sim_config = sim_config
        self._setup_common()
        self.max_tokens, self.hidden, self.topk, self.num_experts = max_tokens, hidden, topk, num_experts
        G, R = self.comm_programs, self.reduce_programs
        if self.on_gpu and max(G, R) + 1 > self.num_sms:  # push and reduce programs are in different launches
            raise ValueError(f"{fac}: comm_programs={G} / reduce_programs={R} leave no SM for the GEMM of this rank's "
                             f"{self.num_sms} SMs")
        u = self._utils
        sym = []

        def symmetric(shape, dt):
            t = u.nvshmem_create_tensor(shape, dt)
            sym.append(t)
            return t

        self.a_full = symmetric((W * max_tokens * hidden, ), dtype)
        self.ready = symmetric((W * G, ), torch.int64)
        self.recv_ok = symmetric((W, ), torch.int64)
        self.stage = symmetric((W * max_tokens * hidden, ), dtype)
        self.rs_ready = symmetric((W * R, ), torch.int64)
        self.rs_ok = symmetric((W, ), torch.int64)
        self.done = symmetric((W, ), torch.int64)
        for t in (self.ready, self.recv_ok, self.rs_ready, self.rs_ok, self.done):
            t.zero_()
        self._symmetric += sym
        self.rs_counter = torch.zeros(3, dtype=torch.int64, device=self.device)
        self.source_of = torch.arange(W * max_tokens, dtype=torch.int32, device=self.device)  # // T per call
        self._sources = {}
        self._finish_init()
        from .collectives import create_allgather_ctx

        # the routing rows (ids and weights as float32: ids are exact below 2**24) travel through an all-gather of
        # the collectives, whose tagged signals also catch ranks that pass different token counts
        self.route_ctx = create_allgather_ctx(max_tokens * 2 * topk, torch.float32)

    def close(self) -> None:
        if not self._closed:
            self.route_ctx.close()
        super().close()

    def _tiling(self, rows: int, N: int, K: int):
        on_gpu = self.on_gpu
        if not on_gpu and self.sim_config is not None:
            return self.sim_config
        name = None
        if on_gpu:
            from ..kernels import group_gemm_table as _gt

            name = _gt.device_name_of(self.device.index)
        return select_group_config(rows, self.num_experts, N, K, self.dtype, name)[0]

    def _tma(self, cfg, *tensors) -> bool:
        use = self.on_gpu and not cfg.pointer_loads and all(t.data_ptr() % 16 == 0 for t in tensors) and \
            self._use_tma()
        return bool(use)


def create_tp_moe_ctx(max_tokens: int, hidden: int, topk: int, num_experts: int,
                      dtype: torch.dtype = torch.bfloat16, **kw) -> TPMoEContext:
    """Collective: the buffers of :func:`ag_group_gemm` / :func:`group_gemm_rs` for up to ``max_tokens`` tokens per
    rank and call (a sequence shard), ``hidden`` columns, ``topk`` slots per token, ``num_experts`` experts (every
    rank holds a column slice of each), token ``dtype`` (bf16 / fp16). Keywords: ``comm_programs`` (the all-gather's
    push programs inside the first GEMM's launch; default 8 on a GPU), ``reduce_programs`` (the reduce-scatter's
    programs inside the second GEMM's launch; default 8), ``sim_config`` (the simulator's tiling, a
    :class:`~triton_dist.kernels.gemm_config.TileConfig`). Every rank must create it with the same arguments
    (checked: ``ValueError`` on every rank)."""
    return TPMoEContext(max_tokens, hidden, topk, num_experts, dtype, **kw)


create_tp_moe_context = create_tp_moe_ctx


def _check_weights(op: str, w, E: int, K: int, ctx: TPMoEContext, n_name: str, n_expected: Optional[int] = None):
    """``w [E, K, N]`` of the context's dtype on its device, row-major or with unit stride along K (``[E, N, K]``
    weights through ``.transpose(1, 2)``), 16-byte aligned strides; returns N."""
    if not isinstance(w, torch.Tensor) or w.dim() != 3:
        raise ValueError(f"{op}: w must be a 3-D [E, K, N] tensor (this rank's slice of every expert), got "
                         f"{type(w).__name__ if not isinstance(w, torch.Tensor) else tuple(w.shape)}")
    if w.shape[0] != E or w.shape[1] != K:
        raise ValueError(f"{op}: w has shape {tuple(w.shape)}, expected [{E}, {K}, N] (num_experts={E}, K={K})")
    N = w.shape[2]
    if n_expected is not None and N != n_expected:
        raise ValueError(f"{op}: w has N={N} columns, expected {n_name}={n_expected}")
    if w.dtype != ctx.dtype:
        raise ValueError(f"{op}: w.dtype={w.dtype}, the context's dtype is {ctx.dtype}")
    if w.device != ctx.device:
        raise ValueError(f"{op}: w is on {w.device}, the context on {ctx.device}")
    align = 16 // w.element_size()
    if N < 1 or N % align or K % align:
        raise ValueError(f"{op}: K={K} and N={N} must be positive multiples of {align} ({w.dtype}: 16-byte rows)")
    if not (w.stride(2) == 1 or w.stride(1) == 1) or any(s % align for s in w.stride() if s != 1):
        raise ValueError(f"{op}: w needs a unit stride along N (row-major [E, K, N]) or along K ([E, N, K] through "
                         f".transpose(1, 2)) and other strides that are multiples of {align}; got {tuple(w.stride())}")
    return N


def _check_rows(op: str, name: str, t, rows: int, cols: Optional[int], ctx: TPMoEContext):
    if not isinstance(t, torch.Tensor) or t.dim() != 2 or t.shape[0] != rows or (cols is not None and
                                                                                 t.shape[1] != cols):
        want = f"[{rows}, {cols if cols is not None else 'K'}]"
        raise ValueError(f"{op}: {name} must be {want}, got {tuple(getattr(t, 'shape', ())) or type(t).__name__}")
    if t.dtype != ctx.dtype:
        raise ValueError(f"{op}: {name}.dtype={t.dtype}, the context's dtype is {ctx.dtype}; accepted: "
                         f"{dtype_names(TP_MOE_DTYPES)}")
    if t.device != ctx.device:
        raise ValueError(f"{op}: {name} is on {t.device}, the context on {ctx.device}")
    if not t.is_contiguous():
        raise ValueError(f"{op}: {name} must be contiguous")


def _check_gathered_ids(op: str, ids, E: int, T: int) -> None:
    """ValueError naming the rank, token and slot of the first gathered id outside ``[0, E)`` (one synchronisation;
    ids travel as float32, so an id past 2**24 shows rounded, still out of range)."""
    bad = (ids < 0) | (ids >= E)
    if bool(bad.any()):
        g, j = (int(v) for v in torch.nonzero(bad)[0].tolist())
        raise ValueError(f"{op}: rank {g // T}'s topk_idx[{g % T}, {j}]={int(ids[g, j])} is not an expert id in "
                         f"[0, {E})")


def _gather_routing(ctx: TPMoEContext, topk_idx, topk_weights):
    """The routing of every rank's tokens: ``(ids int32 [W * T, k], weights float32 [W * T, k])`` through the
    context's all-gather (one launch; ids travel as float32, exact below 2**24)."""
    from .collectives import all_gather

    k = ctx.topk
    rows = torch.cat([topk_idx.to(torch.float32), topk_weights.to(torch.float32)], dim=1)
    if ctx.world_size == 1:
        g = rows
    else:
        g = all_gather(rows, ctx.route_ctx)
    return g[:, :k].to(torch.int32).contiguous(), g[:, k:].contiguous()


def ag_group_gemm(x: torch.Tensor, topk_idx: torch.Tensor, topk_weights: torch.Tensor, w: torch.Tensor,
                  ctx: TPMoEContext, *, out: Optional[torch.Tensor] = None, check_ids: bool = True):
    """Collective (every rank calls it with its own ``T`` tokens, the same ``T`` on every rank): all-gather the
    tokens and run the grouped GEMM of every gathered token's top-k experts on this rank's slice ``w [E, hidden, N]``
    of the experts, overlapped. Returns ``(h, expert_offsets, handle)``:

    * ``h [world * T * k, N]`` in the layout of ``world * T`` tokens (expert-major, then source rank, token, slot;
      ``out=`` receives it): row ``r`` of expert ``e`` is ``x_g @ w[e]`` for the gathered token ``g`` whose slot
      routes to ``e``. Rows at or past ``expert_offsets[-1]`` (slots whose id was out of range, possible only with
      ``check_ids=False``) are not written;
    * ``expert_offsets [E]`` int32 (cumulative end rows: ``group_gemm`` / ``moe_silu_gate`` / ``torch._grouped_mm``);
    * ``handle``: a :class:`TPMoEHandle` for :func:`group_gemm_rs`.

    ``x [T, hidden]`` (``T <= max_tokens``), ``topk_idx [T, k]`` int32 / int64 expert ids, ``topk_weights [T, k]``
    (kept for the reduce), ``w`` row-major ``[E, hidden, N]`` or ``[E, N, hidden]`` through ``.transpose(1, 2)``, the
    context's dtype. ``check_ids`` (default True): ids outside ``[0, E)`` on ANY rank raise ``ValueError`` on every
    rank, naming the rank, token and slot, after the routing all-gather and before the GEMM's launch (one
    synchronisation; checked on the gathered ids so that no rank is left waiting for one that refused; skipped
    inside a CUDA-graph capture). Where it is skipped, such a slot gets no row of any expert and no term of the sum. Launches on the current stream: the routing
    all-gather, the routing of the gathered ids (four small launches), then ONE launch in which push programs send
    ``x`` to every peer while the GEMM programs compute the local tokens' tiles, then each peer's as its signals
    arrive. Under torch.compile the call is the registered ``torch.ops.triton_dist.ag_group_gemm`` (no id check:
    nothing is read on the host while tracing; ``out`` receives a copy)."""
    op = "ag_group_gemm"
    check_ctx(op, ctx, TPMoEContext, "create_tp_moe_ctx")
    if torch.compiler.is_compiling():
        _check_ag_args(op, x, topk_idx, topk_weights, w, ctx, out)
        h, offs, ids, wts, dest, pairs, seg = torch.ops.triton_dist.ag_group_gemm(x, topk_idx, topk_weights, w,
                                                                                   ctx.handle)
        if out is not None:
            out.copy_(h)
            h = out
        return h, offs, TPMoEHandle(ids, wts, dest, pairs, seg, offs, x.shape[0], ctx.handle)
    return ag_group_gemm_eager(x, topk_idx, topk_weights, w, ctx, out, check_ids)


def _check_ag_args(op, x, topk_idx, topk_weights, w, ctx, out):
    """Every check of :func:`ag_group_gemm`'s arguments that reads no tensor value; returns ``N``."""
    ctx._check_open(op)
    check_routing(op, x, topk_idx, topk_weights, ctx.num_experts)
    T, H = x.shape
    E, k, W = ctx.num_experts, ctx.topk, ctx.world_size
    if H != ctx.hidden:
        raise ValueError(f"{op}: x has {H} columns, the context was made for hidden={ctx.hidden}")
    if T > ctx.max_tokens:
        raise ValueError(f"{op}: {T} tokens exceed the context's max_tokens={ctx.max_tokens} (per rank and call)")
    if topk_idx.shape[1] != k:
        raise ValueError(f"{op}: topk_idx has {topk_idx.shape[1]} slots per token, the context was made for topk={k}")
    _check_rows(op, "x", x, T, H, ctx)
    N = _check_weights(op, w, E, H, ctx, "N")
    if out is not None:
        _check_rows(op, "out", out, W * T * k, N, ctx)
    return N


def ag_group_gemm_eager(x, topk_idx, topk_weights, w, ctx: TPMoEContext, out=None, check_ids: bool = True):
    """:func:`ag_group_gemm` outside torch.compile (also the registered op's real implementation)."""
    op = "ag_group_gemm"
    N = _check_ag_args(op, x, topk_idx, topk_weights, w, ctx, out)
    T, H = x.shape
    E, k, W = ctx.num_experts, ctx.topk, ctx.world_size
    rows = W * T * k
    ctx._check_peers(op, (tuple(x.shape), tuple(w.shape), str(x.dtype)))
    ctx.op = op
    h = out if out is not None else torch.empty((rows, N), dtype=ctx.dtype, device=ctx.device)
    if T == 0:  # every rank passes the same T: nothing to gather or compute anywhere
        zero = torch.zeros(E, dtype=torch.int32, device=ctx.device)
        ids = torch.empty((0, k), dtype=torch.int32, device=ctx.device)
        return h, zero, TPMoEHandle(ids, ids.float(), ids, ids.view(-1),
                                    torch.zeros(E * W, dtype=torch.int32, device=ctx.device), zero, 0, ctx.handle)
    ids, wts = _gather_routing(ctx, topk_idx, topk_weights)
    if check_ids and not capturing():  # every rank reads every rank's ids: a bad one is an error on all of them
        _check_gathered_ids(op, ids, E, T)
    # out-of-range ids (check_ids=False) become id E before the segment arithmetic, so none can wrap into range
    ids_in = torch.where((ids >= 0) & (ids < E), ids, E)
    source = ctx._sources.get(T)  # the source rank of each gathered token, per token count (made outside capture)
    if source is None:
        source = (ctx.source_of[:W * T] // T)[:, None]
        if not capturing():  # a tensor made inside a capture holds nothing until a replay
            ctx._sources[T] = source
    virtual = ids_in * W + source  # expert e of source s -> segment e * W + s; id E -> past every segment
    none = torch.empty((W * T, 0), dtype=ctx.dtype, device=ctx.device)
    _, seg_offsets, _, dest = route_tokens(none, virtual, E * W, None, None, False)
    pairs = torch.empty(rows, dtype=torch.int32, device=ctx.device)
    _k.invert_rows_kernel[(triton.cdiv(rows, 1024), )](dest, pairs, rows, BLOCK=1024)
    expert_offsets = seg_offsets[W - 1::W].clone(memory_format=torch.contiguous_format)  # never a view (world 1)
    handle = TPMoEHandle(ids, wts, dest, pairs, seg_offsets, expert_offsets, T, ctx.handle)
    cfg = ctx._tiling(rows, N, H)
    tma = ctx._tma(cfg, w)
    G = ctx.comm_programs if W > 1 else 0
    # an upper bound of the tiles at the context's capacity (not this call's rows: the program count is a
    # constexpr, so a bound by the call's rows would compile a kernel per token count)
    cap_rows = W * ctx.max_tokens * k
    bound = (triton.cdiv(cap_rows, cfg.BLOCK_M) + E * W) * triton.cdiv(N, cfg.BLOCK_N)
    gemm_programs = max(1, min(ctx.num_sms - (G if ctx.on_gpu else 0), bound))
    tag = (T * H) % _TAG_RANGE
    args = (ctx.a_full, x, w, h, pairs, seg_offsets, ctx.ready, ctx.recv_ok, ctx.counter, T, rows, E, N, H,
            w.stride(0), w.stride(1), w.stride(2), h.stride(0), tag, ctx.rank)
    ctx._launch_plain(_k.ag_group_gemm_kernel, (gemm_programs + G, ), args, TOPK=k, WORLD=W, NSIG=max(G, 1),
                      PUSH_PROGRAMS=G, COPY_BLOCK=ctx._block(), BLOCK_M=cfg.BLOCK_M, BLOCK_N=cfg.BLOCK_N,
                      BLOCK_K=cfg.BLOCK_K, NUM_SMS=gemm_programs, USE_TMA=tma, B_K_CONTIGUOUS=w.stride(2) != 1,
                      **cfg.launch(), **ctx._coop())
    return h, expert_offsets, handle


def group_gemm_rs(a: torch.Tensor, w: torch.Tensor, handle: TPMoEHandle, ctx: TPMoEContext, *,
                  out: Optional[torch.Tensor] = None) -> torch.Tensor:
    """Collective: the grouped GEMM of ``a`` (the layout rows of an :func:`ag_group_gemm` call, e.g. its gated
    activation, ``[world * T * k, K]``) with this rank's slice ``w [E, K, hidden]`` of the experts, each gathered
    token's top-k rows summed with its weights, and the per-rank partial sums reduce-scattered: returns ``out [T,
    hidden]`` for this rank's ``T`` tokens (``sum over ranks q, slots j of w[t, j] * (a_q[row] @ w_q[e])``), in the
    context's dtype. The partials travel rounded to that dtype and are summed in fp32 (peers in rank order after
    this rank), once rounded. ONE launch: GEMM programs compute the peers' tokens' rows first and this rank's last,
    while reduce programs sum each finished source's tokens and store the partials into the owner's stage. ``handle``:
    the one the matching ``ag_group_gemm`` call returned on this context. Under torch.compile the call is the
    registered ``torch.ops.triton_dist.group_gemm_rs`` (``out`` receives a copy)."""
    op = "group_gemm_rs"
    check_ctx(op, ctx, TPMoEContext, "create_tp_moe_ctx")
    if torch.compiler.is_compiling():
        _check_rs_args(op, a, w, handle, ctx, out)
        h = handle
        res = torch.ops.triton_dist.group_gemm_rs(a, w, h.topk_idx, h.topk_weights, h.dest_rows, h.row_pairs,
                                                  h.seg_offsets, ctx.handle)
        if out is not None:
            out.copy_(res)
            return out
        return res
    return group_gemm_rs_eager(a, w, handle, ctx, out)


def _check_rs_args(op, a, w, handle, ctx, out):
    ctx._check_open(op)
    if not isinstance(handle, TPMoEHandle) or handle.ctx_handle != ctx.handle:
        raise ValueError(f"{op}: handle must be the TPMoEHandle that ag_group_gemm returned on this context")
    E, H = ctx.num_experts, ctx.hidden
    T, rows = handle.num_tokens, handle.rows
    if not isinstance(a, torch.Tensor) or a.dim() != 2:
        raise ValueError(f"{op}: a must be a 2-D [{rows}, K] tensor (the layout's rows)")
    _check_rows(op, "a", a, rows, None, ctx)
    K = a.shape[1]
    _check_weights(op, w, E, K, ctx, "hidden", H)
    if out is not None:
        _check_rows(op, "out", out, T, H, ctx)


def group_gemm_rs_eager(a, w, handle: TPMoEHandle, ctx: TPMoEContext, out=None):
    """:func:`group_gemm_rs` outside torch.compile (also the registered op's real implementation)."""
    op = "group_gemm_rs"
    _check_rs_args(op, a, w, handle, ctx, out)
    E, k, W, H = ctx.num_experts, ctx.topk, ctx.world_size, ctx.hidden
    T, rows = handle.num_tokens, handle.rows
    K = a.shape[1]
    res = out if out is not None else torch.empty((T, H), dtype=ctx.dtype, device=ctx.device)
    ctx._check_peers(op, (tuple(a.shape), tuple(w.shape), str(a.dtype)))
    ctx.op = op
    if T == 0:
        return res
    y = torch.empty((rows, H), dtype=ctx.dtype, device=ctx.device)
    cfg = ctx._tiling(rows, H, K)
    tma = ctx._tma(cfg, a, w)
    R = ctx.reduce_programs
    cap_rows = W * ctx.max_tokens * k  # the program count by capacity (a constexpr: see ag_group_gemm)
    bound = (triton.cdiv(cap_rows, cfg.BLOCK_M) + E * W) * triton.cdiv(H, cfg.BLOCK_N)
    gemm_programs = max(1, min(ctx.num_sms - (R if ctx.on_gpu else 0), bound))
    tag = (T * H + _RS_TAG_OFFSET) % _TAG_RANGE
    # columns per step of the reduce: 8 bf16 per thread of the launch's warps on a GPU (16-byte accesses)
    red_block = min(cfg.num_warps * 32 * 8, triton.next_power_of_2(H)) if ctx.on_gpu else 16
    args = (a, w, y, res, handle.seg_offsets, handle.dest_rows, handle.topk_idx, handle.topk_weights, ctx.stage,
            ctx.rs_ready, ctx.rs_ok, ctx.done, ctx.rs_counter, T, ctx.max_tokens * H, rows, E, H, K, a.stride(0),
            w.stride(0), w.stride(1), w.stride(2), y.stride(0), res.stride(0), tag, ctx.rank)
    ctx._launch_plain(_k.group_gemm_rs_kernel, (gemm_programs + R, ), args, TOPK=k, WORLD=W, RED_PROGRAMS=R,
                      RED_BLOCK_N=red_block, BLOCK_M=cfg.BLOCK_M, BLOCK_N=cfg.BLOCK_N, BLOCK_K=cfg.BLOCK_K,
                      NUM_SMS=gemm_programs, USE_TMA=tma, B_K_CONTIGUOUS=w.stride(2) != 1, **cfg.launch(),
                      **ctx._coop())
    return res


__all__ = ["TPMoEContext", "TPMoEHandle", "create_tp_moe_ctx", "create_tp_moe_context", "ag_group_gemm",
           "group_gemm_rs", "ag_group_gemm_eager", "group_gemm_rs_eager", "TP_MOE_DTYPES"]
