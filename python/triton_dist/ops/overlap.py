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
  copy-engine + cuBLAS + our GEMM ``ce`` paths, or torch's NCCL + cuBLAS) by the table ``overlap_table.json``,
  measured by ``benchmarks/bench_overlap.py --sweep --write-table`` on 2x H200: the fastest method (and fused tiling) per measured shape, generic crossover rules
  for other shapes (GPU only; the simulator always runs the fused kernels). Without the file the conservative
  :data:`DEFAULT_TABLE` applies.
* Calls are stream-ordered with no host synchronization; epochs live in device memory, so calls can be captured
  in a CUDA graph and replayed.
* Accumulation is fp32; GEMM+RS / GEMM+AR reduce fp32 partials and round once.
"""
from __future__ import annotations

import dataclasses
import json
import os
from typing import Optional

import torch

from ..kernels import ag_gemm as _agk
from ..kernels import common as _common
from ..kernels import gemm as _gemm
from ..kernels import gemm_ar as _ark
from ..kernels import gemm_rs as _rsk
from ..runtime import torch_collectives as _torch_coll
from .context import FP8_DTYPES, Context, capacity_arg, check_ctx, check_method

TAG_RANGE = _common.TAG_RANGE
GEMM_DTYPES = (torch.bfloat16, torch.float16)
AG_GEMM_DTYPES = GEMM_DTYPES + FP8_DTYPES

# ================================================================================================================
# dispatch table
# ================================================================================================================
TABLE_PATH = os.path.join(os.path.dirname(__file__), "overlap_table.json")
#: Built-in conservative default (used when overlap_table.json is missing or unreadable).
DEFAULT_TABLE = {
    "status": "unmeasured",
    "note": "conservative default: torch (NCCL + cuBLAS) below M=1024 (global rows), fused kernels from there; "
            "benchmarks/bench_overlap.py --write-table replaces it with measured crossovers",
    "ops": {op: {"default": [{"max_m": 1023, "method": "torch"}, {"max_m": None, "method": "fused"}]}
            for op in ("ag_gemm", "gemm_rs", "gemm_ar")},
}
_table_cache = None


def dispatch_table(reload: bool = False) -> dict:
    """The dispatch table (``overlap_table.json`` next to this module, else :data:`DEFAULT_TABLE`)."""
    global _table_cache
    if _table_cache is None or reload:
        try:
            with open(TABLE_PATH) as f:
                _table_cache = json.load(f)
            _table_cache["ops"]  # noqa: B018  (shape check)
        except (OSError, ValueError, KeyError, TypeError):
            _table_cache = DEFAULT_TABLE
    return _table_cache


def _rule_matches(rule: dict, m: int, n: Optional[int], k: Optional[int]) -> bool:
    if "n" in rule and rule["n"] != n:
        return False
    if "k" in rule and rule["k"] != k:
        return False
    return rule.get("max_m") is None or m <= int(rule["max_m"])


def select_rule(op: str, world: int, m: int, on_gpu: bool, n: Optional[int] = None,
                k: Optional[int] = None, eager: bool = False) -> dict:
    """The dispatch rule for ``op`` at global row count ``m`` with ``n`` output columns and inner size ``k`` (per
    rank): the first rule of the world-size entry (else ``"default"``) that holds, as a dict with ``"method"`` and
    the method's measured parameters (``first_frac`` for ag_gemm ``chunked``, ``sub_chunks`` for gemm_rs
    ``chunked``, ``pieces`` for gemm_rs ``ce`` and ``fused``). A rule holds when its ``max_m`` (inclusive; None =
    unbounded) covers ``m`` and its optional ``n`` / ``k`` equal the call's (rules with a shape come from measured
    shapes, rules without one are the fallback). The rules are the fastest methods in CUDA-graph replay; a measured
    shape whose fastest method differs without a graph (host launch cost included: side streams and extra launches
    cost more there) carries it as ``rule["eager"]``, which ``eager=True`` (a call not being captured) returns
    instead. The simulator always gets ``{"method": "fused"}``."""
    if not on_gpu:
        return {"method": "fused"}
    ops = dispatch_table()["ops"].get(op, {})
    rules = ops.get(str(world), ops.get("default", []))
    for rule in rules:
        if _rule_matches(rule, m, n, k):
            sub = rule.get("eager") if eager else None
            if isinstance(sub, dict) and isinstance(sub.get("method"), str):
                return {**{key: rule[key] for key in ("n", "k", "max_m") if key in rule}, **sub}
            return rule
    return {"method": "fused"}


def select_method(op: str, world: int, m: int, on_gpu: bool, n: Optional[int] = None,
                  k: Optional[int] = None) -> str:
    """``"fused"`` (or a specific method, e.g. ``"sm"`` / ``"ce"`` / ``"chunked"`` for ag_gemm, ``"ll"`` /
    ``"one_shot"`` for gemm_ar) or ``"torch"``: the method of :func:`select_rule`."""
    return select_rule(op, world, m, on_gpu, n, k)["method"]


def table_config(op: str, world: int, m: int, n: int, k: int, elem_bytes: int = 2):
    """The measured tiling (:class:`~triton_dist.kernels.gemm.TileConfig`) of ``op``'s fused kernel for global rows
    ``m``, ``n`` output columns and inner size ``k`` (per rank), or None when the table has none for this shape
    (callers then use :func:`~triton_dist.kernels.gemm.pick_config`). Table entries (``configs[op][world]``):
    ``{"n", "k", "max_m", "config": "BMxBNxBKxWARPSxSTAGES"}``, first match wins; bf16/fp16 only."""
    if elem_bytes != 2:
        return None
    entries = dispatch_table().get("configs", {}).get(op, {}).get(str(world), [])
    for ent in entries:
        if ent.get("n") == n and ent.get("k") == k and (ent.get("max_m") is None or m <= int(ent["max_m"])):
            try:
                return _gemm.TileConfig.parse(ent["config"])
            except (KeyError, ValueError):
                return None
    return None


# ================================================================================================================
# validation helpers
# ================================================================================================================
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
            s = s.reshape(1).to(device=device, dtype=torch.float32)
        elif isinstance(s, (int, float)) and not isinstance(s, bool):
            s = torch.tensor([float(s)], dtype=torch.float32, device=device)
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
        self.counter = torch.zeros(3, dtype=torch.int64, device=self.device)
        self.num_sms = _gemm.num_sms(self.device)
        self.side_stream = torch.cuda.Stream(device=self.device) if self.on_gpu else None
        self.cc = torch.cuda.get_device_capability(self.device)[0] * 10 if self.on_gpu else 0
        # shared memory a block may opt into, less a margin for the compiler's barriers and scratch (_fit_smem)
        self.smem_bytes = 0
        if self.on_gpu:
            from ..runtime.device_info import get_device_max_shared_memory_size

            self.smem_bytes = get_device_max_shared_memory_size(self.device.index) - 8192
        # fused kernels need every program resident (programs wait for peers' programs): launch them cooperatively
        # on GPU, so an impossible grid is a launch error instead of a hang (TRITON_DIST_OVERLAP_COOPERATIVE=0: off)
        self.cooperative = (self.on_gpu and not getattr(torch.version, "hip", None)
                            and os.environ.get("TRITON_DIST_OVERLAP_COOPERATIVE", "1") != "0")
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

    def _coop(self):
        return {"launch_cooperative_grid": True} if self.cooperative else {}

    @property
    def epoch(self) -> int:
        """Number of fused calls completed on this context (reads the device counter: synchronizes; for tests)."""
        return int(self.counter[0].item())

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
        return _gemm.pick_config(M, N, K, on_gpu=self.on_gpu, elem_bytes=elem_bytes, cc=self.cc or 90,
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
        tma = _gemm.use_tma_for(self.device)
        if tma:
            _gemm.ensure_tma_allocator()
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


def _dev_check(op, ctx, *tensors):
    for t in tensors:
        if t.device.type != ctx.device.type or (ctx.on_gpu and t.device.index != ctx.device.index):
            raise ValueError(f"{op}: inputs are on {t.device}, the context's buffers are on {ctx.device}")


def _operand_checks(op, a, b, ctx, dtypes):
    """The checks every overlap call starts with: open context, GEMM operands, devices, ``a``'s dtype."""
    if ctx._closed:
        raise ValueError(f"{op}: the context was closed")
    _gemm.check_operands(op, a, b, dtypes)
    _dev_check(op, ctx, a, b)
    if a.dtype != ctx.dtype:
        raise ValueError(f"{op}: a.dtype={a.dtype} differs from the context's dtype {ctx.dtype}")


# ================================================================================================================
# AllGather + GEMM
# ================================================================================================================
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
        self.comm_programs = int(comm_programs or (8 if gpu else 2))
        super().__init__(max_m_per_rank * k, dtype, AG_GEMM_DTYPES, methods=methods,
                         all_methods=("ce", "sm", "chunked") if gpu else ("sm", ),
                         fingerprint_extra=(max_m_per_rank, k, self.comm_programs), **kw)
        self.sim_config = sim_config or _gemm.SIM_CONFIG
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
    e4m3/e5m2; the capacity may be given as ``max_m_per_rank``, its former name, or ``max_M``, the reference's, and
    the context keeps it as ``max_m_per_rank``: docs/ops.md). Keywords: ``methods`` (subset of ``("ce", "sm",
    "chunked")`` to allocate for; each GPU method has its own gathered-A buffer of ``world * max_m * k`` elements),
    ``comm_programs`` (push programs / ready signals per chunk; default 8 on GPU, 2 on the simulator)."""
    max_m = capacity_arg("create_ag_gemm_context", "max_m", max_m, {"max_m_per_rank": max_m_per_rank, "max_M": max_M})
    return AGGemmContext(max_m, k, dtype, **kw)


AG_GEMM_METHODS = ("auto", "fused", "ce", "sm", "chunked", "torch")


def _capturing() -> bool:
    return torch.cuda.is_available() and torch.cuda.is_current_stream_capturing()


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

    ``profiler_buffer`` (``sm`` / ``ce``): record per-program tasks (``kernels.ag_gemm.TASKS``) into a buffer from
    ``triton_dist.tools.profiler.alloc_profiler_buffer``."""
    op = "ag_gemm"
    check_ctx(op, ctx, AGGemmContext, "create_ag_gemm_context")
    method = ctx._call_method(method)  # None: the context's method; "nccl": "torch" (docs/ops.md)
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
    tma_store = cfg.tma_store and tma and M_loc % cfg.BLOCK_M == 0 and _gemm.tma_store_ok(out)
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


# ================================================================================================================
# GEMM + ReduceScatter / GEMM + AllReduce
# ================================================================================================================
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
        self.sim_config = sim_config or _gemm.SIM_CONFIG

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


def _tiles(m, n, bm, bn):
    return -(-m // bm) * -(-n // bn)


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
        # (M, K) of the eager auto calls whose graph rule was looked up (gemm_rs: ce tuned before a capture needs it)
        self._graph_rule_seen = set()


def create_gemm_rs_context(max_m: Optional[int] = None, n: Optional[int] = None, dtype: torch.dtype = torch.bfloat16,
                           *, max_M: Optional[int] = None, **kw) -> GemmRSContext:
    """Collective: context for :func:`gemm_rs` (bf16 / fp16): inputs of up to ``max_m`` rows (a multiple of the world
    size) and exactly ``n`` output columns. Symmetric memory: ``2 * world * (max_m / world) * n`` elements of
    ``dtype`` + signals (``fused``), and on GPU the ``chunked`` / ``ce`` stagings."""
    return GemmRSContext(capacity_arg("create_gemm_rs_context", "max_m", max_m, {"max_M": max_M}), n, dtype, **kw)


FUSED_METHODS = ("auto", "fused", "torch")
GEMM_RS_METHODS = ("auto", "fused", "chunked", "ce", "torch")
#: most row pieces per push that gemm_rs ``ce`` makes (``pieces``)
CE_PIECES_MAX = 4
#: gemm_rs ``ce`` pieces when neither the call nor the table gives them
CE_PIECES_DEFAULT = 2
#: most row pieces a gemm_rs ``fused`` peer tile streams in (``pieces``; powers of two, at most the tile's rows)
FUSED_PIECES_MAX = 64


def _fused_pieces_ok(p) -> bool:
    return isinstance(p, int) and not isinstance(p, bool) and (p == 0 or (0 < p <= FUSED_PIECES_MAX and
                                                                          p & (p - 1) == 0))
#: most row sub-chunks per owner that gemm_rs ``chunked`` pipelines (``sub_chunks``)
SUB_CHUNKS_MAX = 4


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
        if eager and M and ctx.kind == "gemm_rs" and method != "ce" and (M, K) not in ctx._graph_rule_seen:
            # the graph rule's ce tunes its GEMM on a shape's first call, which must not be in a capture: this
            # eager call (another method) is that first call. Looked up once per shape, off the later calls' path.
            ctx._graph_rule_seen.add((M, K))
            if ctx.select_rule(M, K)["method"] == "ce":
                _rs_ce_tune(ctx, a, b)
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
    kernel, no epoch (0/1 *free* flags say when a peer's staging may be written again). The first call of a shape
    autotunes that GEMM (on scratch flags): make it outside CUDA-graph capture) /
    ``torch`` (``torch.matmul`` + NCCL ``reduce_scatter_tensor``: bf16 partials, NCCL's summation).
    ``profiler_buffer`` (``fused``): record per-program tasks (``kernels.gemm_rs.TASKS``)."""
    op = "gemm_rs"
    check_ctx(op, ctx, GemmRSContext, "create_gemm_rs_context")
    method = ctx._call_method(method)  # None: the context's method; "nccl": "torch" (docs/ops.md)
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


def _rs_own_gemm_launcher(ctx, own, b, stage, cap, pieces):
    """``(tuning key, launch(out, flags, count))`` of :func:`~triton_dist.kernels.gemm_rs.rs_own_gemm_kernel`
    (autotuned per ``(rows, N, K)``) for this rank's own rows ``own``."""
    rows, K = own.shape
    N = b.shape[1]
    W = ctx.world_size
    # tensor descriptors need 16-byte aligned bases (unit column strides and 16-byte rows were checked before any
    # launch, _operand_checks); else the pointer path
    tma = own.data_ptr() % 16 == 0 and b.data_ptr() % 16 == 0 and ctx._use_tma()
    kern = _rsk.rs_own_gemm_autotuned()
    sms = ctx.num_sms

    def grid(meta):
        return (max(1, min(sms, -(-rows // meta["BLOCK_M"]) * -(-N // meta["BLOCK_N"]))), )

    def launch(o, fl, count):
        kern[grid](own, b, o, stage, fl, count, rows, N, K, own.stride(0), b.stride(0), b.stride(1), o.stride(0), cap,
                   ctx.rank, WORLD=W, PIECES=pieces, FLAG_STRIDE=CE_PIECES_MAX, NUM_SMS=sms, USE_TMA=tma)

    return (rows, N, K, str(own.dtype), tma), launch


def _rs_ce_tune_with(ctx, key, launch, like):
    """Tune the ``ce`` own-rows GEMM of ``key`` on scratch flags (all raised; restored after every benchmark launch)
    and a scratch output shaped like ``like``, once per context and shape."""
    if key in ctx._ce_tuned:
        return
    if _capturing():
        raise ValueError(f"gemm_rs: method='ce' tunes its GEMM on the first call of a shape ({key[0]} own rows, "
                         f"N={key[1]}, K={key[2]}); make one call of this shape before capturing it in a CUDA graph")
    launch(torch.empty_like(like), torch.ones(ctx.world_size * CE_PIECES_MAX, dtype=torch.int64, device=ctx.device),
           torch.zeros(1, dtype=torch.int64, device=ctx.device))
    ctx._ce_tuned.add(key)


def _rs_ce_tune(ctx, a, b):
    """Tune the ``ce`` own-rows GEMM for ``a @ b`` now (an eager ``auto`` call that runs another method, where a
    captured call of the same shape would run ``ce``)."""
    W, r = ctx.world_size, ctx.rank
    rows = a.shape[0] // W
    own = a[r * rows:(r + 1) * rows]
    key, launch = _rs_own_gemm_launcher(ctx, own, b, ctx.ce_stage_peers[r], (ctx.max_m // W) * ctx.n, 1)
    _rs_ce_tune_with(ctx, key, launch, torch.empty((rows, b.shape[1]), dtype=a.dtype, device=a.device))


def _rs_own_gemm(ctx, own, b, out, stage, flags, cap, pieces):
    """Launch :func:`~triton_dist.kernels.gemm_rs.rs_own_gemm_kernel`, autotuned per shape: the first call of a
    shape tunes on scratch flags (all raised, restored after every benchmark launch) and a scratch output, so the
    real launch runs once, with the best tiling, on the real flags."""
    key, launch = _rs_own_gemm_launcher(ctx, own, b, stage, cap, pieces)
    _rs_ce_tune_with(ctx, key, launch, out)
    launch(out, flags, ctx.ce_count)


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
        # no co-residency needed (the programs only wait for the peers' flags)
        blk = 2048
        grid = (max(1, min(4 * ctx.num_sms, -(-(rows * N) // blk))), )
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


def _gemm_rs_torch(a, b, ctx, out):
    _torch_coll.reduce_scatter_tensor(out, torch.matmul(a, b), group=ctx.group)
    return out


class GemmARContext(_PartialsContext):
    """Buffers for :func:`gemm_ar` with up to ``max_m`` rows and exactly ``n`` output columns: the fused kernel's fp32
    staging and tile signals, the ``ll`` exchange's flagged words (symmetric int64 ``[2, world, max_m * n]``, zero
    between calls), the split-K workspace (local: ``SPLIT_K_MAX * min(max_m, SPLIT_K_MAX_M) * n`` fp32, tile
    counters and finisher flags), and (GPU, method ``one_shot``) an all-reduce context of ``max_m * n`` elements."""

    kind = "gemm_ar"

    def __init__(self, max_m: int, n: int, dtype: torch.dtype, sim_config=None, **kw):
        super().__init__(max_m, n, dtype, sim_config, **kw)
        self._setup_common()
        bm, bn = self._min_block()
        self.ar_ctx = None
        if self.on_gpu:
            from .collectives import create_allreduce_ctx

            self.ar_ctx = create_allreduce_ctx(max_m * n, dtype, one_shot_max_numel=max_m * n,
                                               methods=("one_shot", ))
        # method "ll": the peers' fp32 partials arrive as flagged words in slot [epoch % 2, src] (kernels.gemm_ar);
        # zeroed here, before _alloc_partials' barrier, and left zero by every call (each reader clears its words)
        self.words = self._utils.nvshmem_create_tensor((2 * self.world_size * max_m * n, ), torch.int64)
        self.words.zero_()
        self._symmetric.append(self.words)
        self._alloc_partials(max_m * n, _tiles(max_m, n, bm, bn))
        split_rows = min(max_m, _ark.SPLIT_K_MAX_M)
        self.split_ws = torch.empty((_ark.SPLIT_K_MAX * split_rows * n, ), dtype=torch.float32, device=self.device)
        self.split_cnt = torch.zeros((self.max_tiles, ), dtype=torch.int32, device=self.device)
        self.split_fin = torch.zeros((self.max_tiles * _ark.SPLIT_K_MAX, ), dtype=torch.int32, device=self.device)

    def _min_block(self):
        if self.on_gpu:
            return 16, 64
        return self.sim_config.BLOCK_M, self.sim_config.BLOCK_N

    def _pick_config(self, M, N, K, elem_bytes):
        return _ark.pick_ar_config(M, N, K, num_sms=self.num_sms, on_gpu=self.on_gpu, sim_config=self.sim_config)

    def split_for(self, cfg, M: int, N: int, K: int) -> int:
        """The split-K of a call with tiling ``cfg``: its ``split_k``, at most the K blocks there are and what the
        workspace holds for ``M`` rows (1 when ``M`` exceeds :data:`~triton_dist.kernels.gemm_ar.SPLIT_K_MAX_M`)."""
        if cfg.split_k > _ark.SPLIT_K_MAX:
            raise ValueError(f"gemm_ar: tiling {cfg} splits K {cfg.split_k} ways; at most "
                             f"{_ark.SPLIT_K_MAX} (kernels.gemm_ar.SPLIT_K_MAX)")
        fits = self.split_ws.numel() // max(1, M * N)
        return max(1, min(cfg.split_k, -(-K // cfg.BLOCK_K), fits))

    def close(self) -> None:
        if self.ar_ctx is not None:
            self.ar_ctx.close()
        super().close()


def create_gemm_ar_context(max_m: Optional[int] = None, n: Optional[int] = None, dtype: torch.dtype = torch.bfloat16,
                           *, max_M: Optional[int] = None, **kw) -> GemmARContext:
    """Collective: context for :func:`gemm_ar` (bf16 / fp16, up to ``max_m`` rows, ``n`` columns). Symmetric memory:
    ``2 * world * max_m * n`` fp32 (``fused`` staging) + signals, ``2 * world * max_m * n`` int64 words (``ll``: 16
    bytes per output element and rank, e.g. 32 MiB at max_m 128, n 8192, 2 ranks), and on GPU ``2 * world * max_m *
    n`` elements of ``dtype`` for the one-shot all-reduce; local: the split-K workspace (``8 * min(max_m, 128) * n``
    fp32). Meant for small-M (decode) shapes."""
    return GemmARContext(capacity_arg("create_gemm_ar_context", "max_m", max_m, {"max_M": max_M}), n, dtype, **kw)


GEMM_AR_METHODS = ("auto", "fused", "ll", "one_shot", "torch")


def gemm_ar(a: torch.Tensor, b: torch.Tensor, ctx: GemmARContext, out: Optional[torch.Tensor] = None,
            method: Optional[str] = None) -> torch.Tensor:
    """``all_reduce(a @ b)``: ``a`` ``[M, K_loc]``, ``b`` ``[K_loc, N]``; returns ``[M, N]``, identical on every rank.
    Stream-ordered, no host synchronization (CUDA-graph capturable). ``method``: ``auto`` (measured table) /
    ``fused`` (one persistent kernel, :func:`~triton_dist.kernels.gemm_ar.gemm_ar_kernel`: each tile's K blocks
    split over up to 8 programs so that every SM streams weights, the splits summed in a fixed order, each tile's
    fp32 partial pushed to every peer as soon as it is complete, the ranks' partials summed in rank order and
    rounded once: deterministic and bit-identical on every rank) / ``ll`` (the same kernel, tiling and split-K, and
    the same sums and results, with the partials sent as flagged words: ``dl.store_flagged`` / ``dl.load_flagged``,
    no fence and no tile signal; ``auto`` picks it only where the measured table names it) / ``one_shot`` (GPU:
    cuBLAS ``torch.matmul`` then this library's one-shot all-reduce of the bf16/fp16 product, fp32 sum, one rounding
    of the sum) / ``torch`` (``torch.matmul`` + NCCL all_reduce)."""
    op = "gemm_ar"
    check_ctx(op, ctx, GemmARContext, "create_gemm_ar_context")
    method = ctx._call_method(method)  # None: the context's method; "nccl": "torch" (docs/ops.md)
    _partials_checks(op, a, b, ctx, method, GEMM_AR_METHODS)
    if method == "one_shot" and ctx.ar_ctx is None:
        raise ValueError(f"{op}: method='one_shot' (cuBLAS + one-shot all-reduce) needs GPUs; accepted here: auto, "
                         f"fused, ll, torch")
    M = a.shape[0]
    if M > ctx.max_m:
        raise ValueError(f"{op}: a has M={M} rows, the context holds at most max_m={ctx.max_m}")
    return _run_partials(op, ctx, a, b, out, method, False,
                         {"torch": _gemm_ar_torch, "one_shot": _gemm_ar_one_shot, "fused": _gemm_ar_fused,
                          "ll": _gemm_ar_ll}, None)


def _gemm_ar_fused(a, b, ctx, out, ll: bool = False):
    """Method ``fused`` (``ll``: method ``ll``) of :func:`gemm_ar`: one launch of
    :func:`~triton_dist.kernels.gemm_ar.gemm_ar_kernel` with the context's tiling for this shape and its split-K
    (:meth:`GemmARContext.split_for`); ``ll`` sets ``LL`` and passes the ``ll`` size tag."""
    op = "gemm_ar"
    M, K = a.shape
    N = b.shape[1]
    cfg = ctx._cfg(M, N, K, a.dtype.itemsize)
    split = ctx.split_for(cfg, M, N, K)
    tiles = ctx._signal_tiles(op, cfg, M, N)
    tma = ctx._use_tma() and not cfg.pointer_loads
    grid = (max(1, min(ctx.num_sms, tiles * split)), )
    meta = dataclasses.replace(cfg, split_k=split).meta(with_flatten=False, with_split=True)
    tag = _common.ll_size_tag(M * N) if ll else (M * N) % TAG_RANGE
    _ark.gemm_ar_kernel[grid](a, b, out, ctx.stage, ctx.sig, ctx.words, ctx.counter, ctx.split_ws, ctx.split_cnt,
                              ctx.split_fin, M, N, K, a.stride(0), b.stride(0), b.stride(1), out.stride(0),
                              out.stride(1), ctx.cap, ctx.max_tiles, tag, ctx.rank, WORLD=ctx.world_size, **meta,
                              NUM_SMS=grid[0], USE_TMA=tma, LL=ll, **cfg.launch(), **ctx._coop())
    return out


def _gemm_ar_ll(a, b, ctx, out):
    """Method ``ll`` of :func:`gemm_ar`: :func:`_gemm_ar_fused` with the flagged-word exchange."""
    return _gemm_ar_fused(a, b, ctx, out, ll=True)


def _gemm_ar_torch(a, b, ctx, out):
    torch.matmul(a, b, out=out)
    _torch_coll.all_reduce(out, group=ctx.group)
    return out


def _gemm_ar_one_shot(a, b, ctx, out):
    from .collectives import all_reduce

    part = torch.matmul(a, b)
    return all_reduce(part, ctx.ar_ctx, out=out, method="one_shot")


__all__ = ["AGGemmContext", "GemmRSContext", "GemmARContext", "create_ag_gemm_context", "create_gemm_rs_context",
           "create_gemm_ar_context", "ag_gemm", "gemm_rs", "gemm_ar", "select_method", "dispatch_table",
           "DEFAULT_TABLE", "AG_GEMM_METHODS", "FUSED_METHODS", "GEMM_RS_METHODS", "GEMM_AR_METHODS",
           "table_config"]
