"""The part the overlapped GEMMs share (``ag_gemm``, ``gemm_rs``, ``gemm_ar``): their context base (epoch counter,
tiling, launch helpers, the side stream, the 0/1 flags of the host-composed methods), the host checks every call
starts with, the fp8 scale, and the run of the partial-sum ops (GEMM+RS / GEMM+AR) after their shape checks.
The ops themselves: :mod:`.allgather_gemm`, :mod:`.gemm_reduce_scatter`, :mod:`.gemm_allreduce`; the public facade:
:mod:`triton_dist.ops.overlap`.
"""
from __future__ import annotations

import dataclasses
import os
from typing import Optional

import torch

from ..kernels import common as _common
from ..kernels import gemm_config as _gcfg
from ..runtime import device_info as _device_info
from ..runtime.dtypes import FP8_DTYPES, HALF_DTYPES
from .context import Context, check_method
from .context import capturing as _capturing  # the ops' one capture predicate, a module global the CPU tests patch
from .gemm import check_operands
from .overlap_table import select_rule, table_config

TAG_RANGE = _common.TAG_RANGE
GEMM_DTYPES = HALF_DTYPES
AG_GEMM_DTYPES = GEMM_DTYPES + FP8_DTYPES


def _scale_tensor(op, scale_a, scale_b, fp8: bool, device):
    if not fp8:
        if scale_a is not None or scale_b is not None:
            raise ValueError(f"{op}: scale_a / scale_b are only accepted for fp8 inputs")
        return None
    if scale_a is None or scale_b is None:
        raise ValueError(f"{op}: fp8 inputs need per-tensor scales scale_a and scale_b (floats or 1-element tensors)")
    vals = []
    for name, s in (("scale_a", scale_a), ("scale_b", scale_b)):
        if isinstance(s, torch.Tensor):
            if s.numel() != 1:
                raise ValueError(f"{op}: {name} must be per-tensor (1 element), got shape {tuple(s.shape)}")
            if s.device != device and _capturing():
                raise ValueError(f"{op}: {name} is on {s.device}; inside a CUDA-graph capture a scale must be a float "
                                 f"or a tensor on {device} (a copy from another device is not captured)")
            s = s.reshape(1).to(device=device, dtype=torch.float32)
        elif isinstance(s, (int, float)) and not isinstance(s, bool):
            s = torch.full((1, ), float(s), dtype=torch.float32, device=device)  # a fill: no host copy (capture)
        else:
            raise ValueError(f"{op}: {name} must be a float or a 1-element tensor, got {type(s).__name__}")
        vals.append(s)
    return (vals[0] * vals[1]).contiguous()


class _OverlapContext(Context):
    """Common part: epoch counter, GEMM tiling and launch helpers (on top of the collectives' context base)."""

    factory_suffix = "_context"

    def _setup_common(self):
        # device-side epoch counter (kernels.common.call_epoch / finish_call): [completed calls, finished programs of
        # the running launch, copy-engine epoch]; no host counter, so calls can be captured in a CUDA graph
        self.num_sms = _gcfg.num_sms(self.device)
        # programs of a grid that only waits for the peers' flags (rs_chunked_finish_kernel): 4 per SM of the share,
        # one per SM where ranks share a GPU (runtime.device_info.waiting_grid_programs)
        self.waiting_programs = _device_info.waiting_grid_programs(self.device, 4, simulated=2)
        self.side_stream = torch.cuda.Stream(device=self.device) if self.on_gpu else None
        self.cc = torch.cuda.get_device_capability(self.device)[0] * 10 if self.on_gpu else 0
        # shared memory a block may opt into, less a margin for the compiler's barriers and scratch (_fit_smem)
        self.smem_bytes = 0
        if self.on_gpu:
            from ..runtime.device_info import get_device_max_shared_memory_size

            self.smem_bytes = get_device_max_shared_memory_size(self.device.index) - 8192
        # fused kernels need every program resident (programs wait for peers' programs): launch them cooperatively
        # on GPU, so an impossible grid is a launch error instead of a hang (TRITON_DIST_OVERLAP_COOPERATIVE=0: off)
        self._init_call_epochs(cooperative=os.environ.get("TRITON_DIST_OVERLAP_COOPERATIVE", "1") != "0")
        # 0/1 flags of the host-composed methods (see _flag_wait_reset): stream memory operations where the driver
        # has them; in bounded-wait mode the waits are kernels (a wait that cannot be satisfied then ends in an error
        # naming the flag instead of a hang); remote raises need a probe (_probe_remote_memops)
        self.stream_memops = False
        if self.on_gpu:
            from ..language.core import bounded_wait_ms
            from ..runtime import stream_ops

            self.stream_memops = stream_ops.supported(self.device)
        self.memops_wait = self.stream_memops and bounded_wait_ms() == 0
        self.memops_remote = False
        self.flag_one = torch.ones(1, dtype=torch.int64, device=self.device)

    def _alloc_flags(self, n: int):
        """Symmetric int64 flag words ``[n + world]`` with peer views (index = rank): ``n`` protocol words (zeroed;
        the caller sets initial values) and ``world`` probe words for :meth:`_probe_remote_memops`."""
        W = self.world_size
        peers = self._utils.nvshmem_create_tensors((n + W, ), torch.int64, self.rank, W)
        peers[self.rank].zero_()
        self._symmetric.append(peers[self.rank])
        return peers

    def _probe_remote_memops(self, flags_peers, probe: int) -> bool:
        """Collective, once per context: can a stream write-value operation store into a peer's memory (a peer
        view)? Every rank writes 1 into word ``probe + rank`` of every peer, then checks that its own probe words
        were written by every peer; all ranks agree on the answer (else the raises are 8-byte copy-engine copies)."""
        import torch.distributed as dist

        from ..runtime import stream_ops

        W, r = self.world_size, self.rank
        if W == 1:
            return self.stream_memops
        torch.cuda.synchronize()
        self._utils.nvshmem_barrier_all_on_stream()
        torch.cuda.synchronize()
        ok = self.stream_memops
        if ok:
            try:
                s = torch.cuda.current_stream(self.device)
                for i in range(1, W):
                    p = (r + i) % W
                    stream_ops.write_value64(s, flags_peers[p][probe + r:probe + r + 1], 1)
            except (RuntimeError, ValueError):
                ok = False
        torch.cuda.synchronize()
        self._utils.nvshmem_barrier_all_on_stream()
        torch.cuda.synchronize()
        mine = flags_peers[r][probe:probe + W].tolist()
        ok = ok and all(mine[(r + i) % W] == 1 for i in range(1, W))
        votes = [None] * W
        dist.all_gather_object(votes, bool(ok), group=self.group)
        flags_peers[r][probe:probe + W].zero_()
        return all(votes)

    def _cfg(self, M, N, K, elem_bytes):
        """The tiling of a fused launch: the measured table's for this shape (GPU, no ``TRITON_DIST_OVERLAP_CONFIG``
        override), else :meth:`_pick_config`."""
        if self.on_gpu and not os.environ.get("TRITON_DIST_OVERLAP_CONFIG", "").strip():
            measured = table_config(self.kind, self.world_size, M, N, K, elem_bytes)
            if measured is not None:
                return measured
        return self._pick_config(M, N, K, elem_bytes)

    def _pick_config(self, M, N, K, elem_bytes):
        """The deterministic tiling of this context's fused kernel (the override, the simulator's, or the rule)."""
        return _gcfg.pick_config(M, N, K, on_gpu=self.on_gpu, elem_bytes=elem_bytes, cc=self.cc or 90,
                                 sim_config=self.sim_config)

    def _prof(self, op, profiler_buffer):
        """``(buffer argument, PROFILE)`` for a launch: the profiler buffer (an int64 tensor from
        ``triton_dist.tools.profiler.alloc_profiler_buffer``) or the counter as an unused dummy."""
        if profiler_buffer is None:
            return self.counter, False
        if not isinstance(profiler_buffer, torch.Tensor) or profiler_buffer.dtype != torch.int64 \
                or profiler_buffer.device != self.device:
            raise ValueError(f"{op}: profiler_buffer must be an int64 tensor on {self.device} from "
                             f"triton_dist.tools.profiler.alloc_profiler_buffer")
        return profiler_buffer, True

    def _use_tma(self):
        tma = _gcfg.use_tma_for(self.device)
        if tma:
            _gcfg.ensure_tma_allocator()
        return tma

    def _check_out(self, op, out, shape, dtype, device):
        if out is None:
            return torch.empty(shape, dtype=dtype, device=device)
        if not isinstance(out, torch.Tensor) or tuple(out.shape) != tuple(shape) or out.dtype != dtype:
            raise ValueError(f"{op}: out must be a {dtype} tensor of shape {tuple(shape)}, got "
                             f"{getattr(out, 'dtype', type(out).__name__)} {tuple(getattr(out, 'shape', ()))}")
        if out.device != device or out.stride(-1) != 1:
            raise ValueError(f"{op}: out must be on {device} with unit column stride")
        return out


def _operand_checks(op, a, b, ctx, dtypes):
    """The checks every overlap call starts with: open context (:meth:`Context._check_open`), GEMM operands
    (:func:`~triton_dist.ops.gemm.check_operands`), devices and ``a``'s dtype (:meth:`Context._check_device` /
    :meth:`Context._check_dtype`, the collectives' checks)."""
    ctx._check_open(op)
    check_operands(op, a, b, dtypes)
    ctx._check_device(op, a, "a")
    ctx._check_device(op, b, "b")
    ctx._check_dtype(op, a, "a")


class _PartialsContext(_OverlapContext):
    """Staging ``[2, world, cap]`` (fp32 for GEMM+AR, the output dtype for GEMM+RS) + tile signals
    ``[2, world, max_tiles]`` (double-buffered by epoch parity)."""

    def __init__(self, max_m: int, n: int, dtype: torch.dtype, sim_config=None, **kw):
        for name, v in (("max_m", max_m), ("n", n)):
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise ValueError(f"{self.factory_name()}: {name}={v!r} must be a positive int")
        super().__init__(max_m * n, dtype, GEMM_DTYPES, methods=("fused", ), all_methods=("fused", ),
                         fingerprint_extra=(max_m, n), **kw)
        self.max_m, self.n = max_m, n
        self.sim_config = sim_config or _gcfg.SIM_CONFIG

    def _alloc_partials(self, cap: int, max_tiles: int, stage_dtype: torch.dtype = torch.float32):
        W = self.world_size
        u = self._utils
        self.cap = int(cap)
        self.max_tiles = int(max_tiles)
        self.stage = u.nvshmem_create_tensor((2 * W * self.cap, ), stage_dtype)
        self.sig = u.nvshmem_create_tensor((2 * W * self.max_tiles, ), torch.int64)
        self.sig.zero_()
        self._symmetric += [self.stage, self.sig]
        self._finish_init()

    def _min_block(self):
        if self.on_gpu:
            return 64, 64
        return self.sim_config.BLOCK_M, self.sim_config.BLOCK_N

    def _signal_tiles(self, op, cfg, rows: int, n: int, per: str = "") -> int:
        """Output tiles of a ``rows x n`` launch with tiling ``cfg`` (one tile signal each); ValueError when the
        context has fewer signals (``per``: what they are counted per, for the message)."""
        tiles = _tiles(rows, n, cfg.BLOCK_M, cfg.BLOCK_N)
        if tiles > self.max_tiles:
            raise ValueError(f"{op}: tiling {cfg.BLOCK_M}x{cfg.BLOCK_N} needs {tiles} tile signals{per}, the context "
                             f"has {self.max_tiles} (use blocks >= the context's minimum)")
        return tiles

    def select_rule(self, m_total: int, k: Optional[int] = None, eager: bool = False) -> dict:
        """The table's rule for a call (:func:`select_rule`; ``eager``: a call outside CUDA-graph capture);
        ``fused`` where its method is not available here."""
        rule = select_rule(self.kind, self.world_size, m_total, self.on_gpu, self.n, k, eager)
        m = rule["method"]
        if m == "torch" and not self.group_has_nccl:  # ranks share a GPU: torch's path would run on host copies
            return {"method": "fused"}
        if (m == "one_shot" and getattr(self, "ar_ctx", None) is None) or \
                (m == "chunked" and getattr(self, "chunk_stage_peers", None) is None) or \
                (m == "ce" and getattr(self, "ce_stage_peers", None) is None):
            return {"method": "fused"}
        return rule

    def select(self, m_total: int, k: Optional[int] = None) -> str:
        return self.select_rule(m_total, k)["method"]

    def _warm_graph_rule(self, a, b, method: str) -> None:
        """Called by an eager ``auto`` call that runs ``method``: prepare what a captured call of the same shape
        (which takes the graph rule) would otherwise do on its first call (nothing here; GEMM+RS tunes ``ce``)."""


def _tiles(m, n, bm, bn):
    return -(-m // bm) * -(-n // bn)


def _partials_checks(op, a, b, ctx, method, accepted):
    _operand_checks(op, a, b, ctx, GEMM_DTYPES)
    if b.shape[1] != ctx.n:
        raise ValueError(f"{op}: b has N={b.shape[1]} columns, the context was created for n={ctx.n}")
    check_method(op, method, accepted)


def _run_partials(op, ctx, a, b, out, method, chunked: bool, paths, kernel, profiler_buffer=None, params=None):
    """The part of :func:`gemm_rs` (``chunked``: ``world`` chunks of ``M / world`` output rows) and :func:`gemm_ar`
    (one chunk of ``M`` rows) after their shape checks: output check, "auto", then ``paths[method]`` (host-composed
    methods; ``params(method, rule_or_None, M)`` gives their keyword arguments) or the fused ``kernel`` (gemm_rs:
    ``params`` may give ``pieces``, the row pieces each peer tile streams in; 0: pushed at once)."""
    M, K = a.shape
    N = b.shape[1]
    W = ctx.world_size
    chunks = W if chunked else 1
    rows = M // chunks
    out = ctx._check_out(op, out, (rows, N), a.dtype, a.device)
    rule = None
    if method == "auto":
        eager = not _capturing()
        rule = ctx.select_rule(M, K, eager=eager)
        method = rule["method"]
        if eager and M:
            ctx._warm_graph_rule(a, b, method)
    kw = params(method, rule, M) if params is not None else {}
    prof, profile = ctx._prof(op, profiler_buffer)
    ctx._check_peers(op, (tuple(a.shape), tuple(b.shape), str(a.dtype), method) + tuple(sorted(kw.items())))
    if M == 0:
        return out
    if method in paths:
        return paths[method](a, b, ctx, out, **kw)
    cfg = ctx._cfg(M, N, K, a.dtype.itemsize)
    tiles = ctx._signal_tiles(op, cfg, rows, N, " per chunk" if chunked else "")
    tma_ok = ctx._use_tma()
    tma = tma_ok and not cfg.pointer_loads
    extra = {}
    stream = 0
    if chunked:  # gemm_rs: streamed in row pieces (powers of two, at most BLOCK_M) or pushed at once
        stream = min(kw.get("pieces", 0), cfg.BLOCK_M) if W > 1 else 0
        extra = dict(send_ptr=ctx.send, STREAM_PIECES=stream)
    # pushed at once, one peer: one TMA-store descriptor per program (kernels.gemm_rs)
    push = tma_ok and W == 2 and ctx.tma_push and not stream
    if push:
        cfg = _fit_smem(cfg, a.dtype.itemsize, ctx.smem_bytes)
    grid = (max(1, min(ctx.num_sms, chunks * tiles)), )
    kernel[grid](a, b, out, ctx.stage, ctx.sig, ctx.counter, prof, rows, N, K, a.stride(0), b.stride(0), b.stride(1),
                 out.stride(0), out.stride(1), ctx.cap, ctx.max_tiles, (M * N) % TAG_RANGE, ctx.rank, WORLD=W,
                 **cfg.meta(with_flatten=False), NUM_SMS=grid[0], USE_TMA=tma, TMA_PUSH=push, PROFILE=profile,
                 **extra, **cfg.launch(), **ctx._coop())
    return out


def _fit_smem(cfg, elem_bytes: int, smem_bytes: int):
    """``cfg`` with fewer pipeline stages (not below 2) where its operand stages plus the ``BLOCK_M x BLOCK_N``
    shared-memory buffer of a TMA store would not fit the device's shared memory per block (a measured table
    tiling may come from a kernel without that buffer)."""
    def need(stages):
        return (stages * (cfg.BLOCK_M + cfg.BLOCK_N) * cfg.BLOCK_K + cfg.BLOCK_M * cfg.BLOCK_N) * elem_bytes

    stages = cfg.num_stages
    while stages > 2 and need(stages) > smem_bytes:
        stages -= 1
    return cfg if stages == cfg.num_stages else dataclasses.replace(cfg, num_stages=stages)


def _flag_wait_reset(ctx, stream, flag):
    """On ``stream``: wait until the local 0/1 ``flag`` (a 1-element int64 view) is 1, then reset it to 0: stream
    memory operations (no SM, no launch), or in bounded-wait mode / without them the one-program kernel
    :func:`~triton_dist.kernels.common.wait_flag_reset_kernel` (system-scope acquire; bounded by
    ``TRITON_DIST_BOUNDED_WAIT``).

    Why 0/1 flags need no epoch: a flag's producer raises it again only after a handshake that its consumer
    answers after the reset (stream order), so a raise is never lost in a reset; and 0/1 values are the same in
    every call, so the operations can be captured in a CUDA graph and replayed any number of times."""
    if ctx.memops_wait:
        from ..runtime import stream_ops

        stream_ops.wait_value64(stream, flag, 1, "eq")
        stream_ops.write_value64(stream, flag, 0)
    else:
        with torch.cuda.stream(stream):
            _common.wait_flag_reset_kernel[(1, )](flag, num_warps=1)


def _flag_raise(ctx, stream, peer_flag):
    """On ``stream``, after its earlier work: ``peer_flag = 1`` (a peer view; a stream write-value with its memory
    barrier, so the earlier work's stores are visible first, where the probe allowed it, else an 8-byte copy)."""
    if ctx.memops_remote:
        from ..runtime import stream_ops

        stream_ops.write_value64(stream, peer_flag, 1)
    else:
        with torch.cuda.stream(stream):
            peer_flag.copy_(ctx.flag_one)


__all__ = ["TAG_RANGE", "GEMM_DTYPES", "AG_GEMM_DTYPES"]
