"""``ModelBuilder``: describe a model step op by op, compile it into one persistent kernel, run it.

    builder = ModelBuilder(rank, world_size)
    builder.make_rms_norm(x, w_norm, h)                 # each make_* adds one op, split into tile tasks
    builder.make_qkv_proj(h, w_qkv, qkv)
    ...
    builder.compile()                                   # task graph, queues, generated kernel
    builder.run()                                       # one step (capturable in a CUDA graph)

Semantics: ``run()`` computes what running the ops one after another in the order they were added would compute
(the tasks' dependencies are derived from the bytes each tile reads and writes, see ``core/graph.py``). The tensors
given to ``make_*`` are used in place by every ``run()``: update inputs (token embedding, ``kv_lens``, RoPE tables)
before a run, read outputs after it. Nothing is reset on the host between runs (the scoreboard holds step numbers),
so a run can be captured in a CUDA graph and replayed.

Who executes: ``num_workers`` persistent programs (default: one per SM; on the simulator one, since the interpreter
runs programs one after another); each takes its tasks from its own static queue (``enable_runtime_scheduler=False``)
or from one shared queue through an atomic ticket (``True``), waits for the task's dependencies, runs it, releases
it. Strict mode (the simulator's default) never spins: a task whose dependency has not run stops the step with
:class:`MegaKernelDependencyError` naming both tasks.
"""
from __future__ import annotations

import os
from typing import Dict, List, Optional, Sequence

import torch

from ..runtime.device_info import programs_within_share, rank_sm_count
from .core import codegen, fusion, graph, scheduler
from .core.checks import ALIGN_BYTES
from .core.registry import task_type
from .core.task import Op, Task
from . import tasks as _builtin_tasks  # noqa: F401  (the built-in task families register into core.registry)

__all__ = ["ModelBuilder", "MegaKernelDependencyError", "GEMV_PREFETCH_BYTES", "GEMV_EARLY_PREFETCH_BYTES"]

#: Default of ``ModelBuilder(gemv_prefetch_bytes=...)``: weight bytes a GEMV tile prefetches into L2 before its wait
#: (where it waits for a non-GEMV op). Qwen3-8B TP=1 on an H200 (2026-12-01, same process as torch): 0: 5018 us,
#: 64 KiB: 4887, 128 KiB: 4905, 256 KiB: 4947 (`benchmarks/results/2026-12-01-mega-r2/`).
GEMV_PREFETCH_BYTES = 65536
GEMV_PREFETCH_ENV = "TRITON_DIST_MEGA_GEMV_PREFETCH"
#: Default of ``ModelBuilder(gemv_early_prefetch_bytes=...)``: off until an A/B run on a GPU says otherwise (the
#: planner, ``tasks.linear.plan_early_prefetch``, was written from the Qwen3-8B trace of 2026-12-01: 64 of o_proj's
#: 128 tiles wait ~9 us for attention with HBM idle while the other 64 start only when attention ends).
GEMV_EARLY_PREFETCH_BYTES = 0
GEMV_EARLY_PREFETCH_ENV = "TRITON_DIST_MEGA_GEMV_EARLY_PREFETCH"


def _budget(name: str, value: Optional[int], env_name: str, default: int) -> int:
    """A prefetch budget in bytes: ``value``, else the environment's ``env_name``, else ``default``; an int in
    [0, 2**30)."""
    if value is None:
        env = os.environ.get(env_name)
        try:
            value = default if env in (None, "") else int(env)
        except ValueError:
            raise ValueError(f"ModelBuilder: {env_name}={env!r} is not an integer") from None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 2**30:
        raise ValueError(f"ModelBuilder: {name} must be an int in [0, 2**30), got {value!r}")
    return value


class MegaKernelDependencyError(RuntimeError):
    """A task found a dependency that had not been released in this step (strict mode)."""


def _backend_name() -> str:
    from triton_dist.utils import get_shmem_backend

    return get_shmem_backend()


def resolve_num_workers(num_workers: Optional[int], device, on_sim: bool) -> int:
    """The mega kernel's persistent programs (``ModelBuilder(num_workers=...)``): one per SM of this rank's share
    (:func:`~triton_dist.runtime.device_info.rank_sm_count`) by default, 1 on the simulator (where it must be 1).
    Where ranks share a GPU a larger ``num_workers`` is capped to the share
    (:func:`~triton_dist.runtime.device_info.programs_within_share`): the workers spin on the peers' barrier and
    all-reduce tasks, and more of them than the share sit on every SM of the GPU, where the peer's kernel that
    raises those signals (its own mega kernel's workers, or a cuBLAS GEMM it runs first) finds no room. Unchanged on
    a GPU of its own. ValueError for a bad value."""
    if num_workers is None:
        num_workers = 1 if on_sim else rank_sm_count(device)
    if isinstance(num_workers, bool) or not isinstance(num_workers, int) or num_workers < 1:
        raise ValueError(f"ModelBuilder: num_workers must be an int >= 1, got {num_workers!r}")
    if on_sim:
        if num_workers != 1:
            raise ValueError("ModelBuilder: on the simulator num_workers must be 1 (the interpreter runs programs one "
                             "after another, so a program waiting for another's task would never see it)")
        return num_workers
    return programs_within_share(device, num_workers)


class ModelBuilder:
    """Builder of one mega kernel (see the module docstring). Arguments as the reference's: ``rank``,
    ``world_size``, ``local_world_size`` (all ranks of a step must be on one node), ``num_warps`` (of the kernel),
    ``enable_profiling`` (per-task trace, :meth:`dump_trace`), ``enable_dep_opt`` (tile-level dependencies; False:
    a task waits for every tile of each op it depends on), ``enable_runtime_scheduler`` (dynamic queue),
    ``enable_mlp_fc1_silu_fusion`` (models use :meth:`make_fused_fc1_silu_mul_up`). Extensions: ``num_workers``,
    ``policy`` (static placement, ``core/scheduler.py``), ``strict``, ``device``, ``enable_fusion`` (the
    bit-identical compile-time fusions of ``core/fusion.py``), ``gemv_prefetch_bytes`` (bytes of its weights a GEMV
    tile asks L2 for, with ``dl.prefetch_l2``, before it waits for its input, in the GEMVs that wait for a
    latency-bound op such as attention or an all-reduce (``tasks.linear.gate_prefetch``); 0: off; ``None``:
    :data:`GEMV_PREFETCH_BYTES`, or the environment's ``TRITON_DIST_MEGA_GEMV_PREFETCH``), ``gemv_early_prefetch_bytes``
    (static queues only: bytes of such a GEMV's weight that the workers ask L2 for as soon as they enter the
    latency-bound stretch before it, each tile's rows issued by the first latency-bound task its worker runs before
    the tile, or by the tile itself on a worker that runs none (``tasks.linear.plan_early_prefetch``; queue rows
    then carry the ranges, ``core/codegen.py``); 0: off; ``None``: :data:`GEMV_EARLY_PREFETCH_BYTES`, or the
    environment's ``TRITON_DIST_MEGA_GEMV_EARLY_PREFETCH``). Both prefetches are hints: the step computes the same
    bits with or without them. ``split_loads_ahead`` (default
    False until measured): the fused rope + flash-decode split tasks issue their loads that need no task of the
    step (their range, first K/V block, rope row) before waiting for the qkv tiles
    (``tasks.flash_decode.flash_decode_rope_split_ahead_task``; same bits). ``gemv_stages`` (default 0 until
    measured): 0, a streaming Linear tile (GEMV, small-M) keeps one weight chunk in flight in registers beside the
    one it reduces; 2..8, its chunks after the first go through Triton's software pipeliner with that many stages
    (asynchronous copies into shared memory; same bits). ``kv_split_positions`` (default 0 until measured): 0, a
    flash-decode op splits each (request, kv head) into enough splits to fill the workers; N > 0, also into at
    least ``cdiv(max_len, N)`` (so that in a batch of mixed lengths the longest request's splits stream about N
    positions each instead of half its length), each split at least one K/V block long (a short request's front
    splits are empty and load nothing). A different partition of the positions: equal to the reference within
    rounding, not bit-identical to the default where the split count changes."""

    def __init__(self, rank: int = 0, world_size: int = 1, local_world_size: Optional[int] = None, num_warps: int = 4,
                 enable_profiling: bool = False, enable_dep_opt: bool = True, enable_runtime_scheduler: bool = False,
                 enable_mlp_fc1_silu_fusion: bool = False, *, num_workers: Optional[int] = None,
                 policy: str = "balanced", strict: Optional[bool] = None, device=None, enable_fusion: bool = True,
                 gemv_prefetch_bytes: Optional[int] = None, gemv_early_prefetch_bytes: Optional[int] = None,
                 split_loads_ahead: bool = False, gemv_stages: int = 0, kv_split_positions: int = 0):
        local_world_size = world_size if local_world_size is None else local_world_size
        for name, v in (("world_size", world_size), ("local_world_size", local_world_size), ("num_warps", num_warps)):
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"ModelBuilder: {name} must be an int >= 1, got {v!r}")
        if not 0 <= rank < world_size:
            raise ValueError(f"ModelBuilder: rank {rank} is not in [0, world_size={world_size})")
        if local_world_size != world_size:
            raise ValueError(f"ModelBuilder: every rank of the step must be on one node (local_world_size "
                             f"{local_world_size} != world_size {world_size}); multi-node steps are not supported")
        if num_warps & (num_warps - 1) or num_warps > 32:
            raise ValueError(f"ModelBuilder: num_warps must be a power of two <= 32, got {num_warps}")
        if policy not in scheduler.POLICIES:
            raise ValueError(f"ModelBuilder: policy {policy!r} is not supported; accepted: "
                             f"{', '.join(map(repr, scheduler.POLICIES))}")
        self.rank, self.world_size, self.local_world_size = rank, world_size, local_world_size
        self.local_rank = rank % local_world_size
        self.num_warps = num_warps
        self.backend = _backend_name()
        self.on_sim = self.backend == "sim"
        if device is None:
            device = torch.device("cpu") if self.on_sim else torch.device("cuda", torch.cuda.current_device())
        self.device = torch.device(device)
        # where ranks share a GPU a given num_workers is capped at the share (resolve_num_workers): the workers wait
        # for the peers' tasks, and more than the share would sit on every SM and keep the peers' kernels off
        self.num_workers = num_workers = resolve_num_workers(num_workers, self.device, self.on_sim)
        self.policy = policy
        self.strict = self.on_sim if strict is None else bool(strict)
        if self.strict and num_workers != 1 and not enable_runtime_scheduler:
            raise ValueError("ModelBuilder: strict mode (no spinning) needs num_workers=1 with static queues")
        self._enable_profiling = bool(enable_profiling)
        self._enable_dep_opt = bool(enable_dep_opt)
        self._enable_runtime_scheduler = bool(enable_runtime_scheduler)
        self._enable_mlp_fc1_silu_fusion = bool(enable_mlp_fc1_silu_fusion)
        self._enable_fusion = bool(enable_fusion)
        if not isinstance(split_loads_ahead, bool):
            raise ValueError(f"ModelBuilder: split_loads_ahead must be a bool, got {split_loads_ahead!r}")
        self.split_loads_ahead = split_loads_ahead
        if isinstance(gemv_stages, bool) or not isinstance(gemv_stages, int) or not (gemv_stages == 0
                                                                                     or 2 <= gemv_stages <= 8):
            raise ValueError(f"ModelBuilder: gemv_stages must be 0 or an int in [2, 8], got {gemv_stages!r}")
        self.gemv_stages = gemv_stages
        if isinstance(kv_split_positions, bool) or not isinstance(kv_split_positions, int) or kv_split_positions < 0:
            raise ValueError(f"ModelBuilder: kv_split_positions must be an int >= 0, got {kv_split_positions!r}")
        self.kv_split_positions = kv_split_positions
        self.gemv_prefetch_bytes = _budget("gemv_prefetch_bytes", gemv_prefetch_bytes, GEMV_PREFETCH_ENV,
                                           GEMV_PREFETCH_BYTES)
        self.gemv_early_prefetch_bytes = _budget("gemv_early_prefetch_bytes", gemv_early_prefetch_bytes,
                                                 GEMV_EARLY_PREFETCH_ENV, GEMV_EARLY_PREFETCH_BYTES)
        self.ops: List[Op] = []
        self.all_symm_tensors: List[torch.Tensor] = []
        self._compiled = False
        self._kernel = None
        self.profile_buf = None

    # ------------------------------------------------------------------------------------------------ building
    def create_symm_tensor(self, shape, dtype) -> torch.Tensor:
        """A zeroed symmetric tensor (collective: every rank must call it in the same order)."""
        from triton_dist.utils import nvshmem_create_tensor

        t = nvshmem_create_tensor(shape, dtype)
        t.zero_()
        self.all_symm_tensors.append(t)
        return t

    def _add(self, name: str, layer_id: int, *args, **params) -> Op:
        if self._compiled:
            raise RuntimeError(f"make_{name}: the builder is compiled; create a new ModelBuilder for another step")
        if isinstance(layer_id, bool) or not isinstance(layer_id, int) or layer_id < 0:
            raise ValueError(f"make_{name}: layer_id must be an int >= 0, got {layer_id!r}")
        built = task_type(name).build(self, layer_id, *args, **params)
        ops = list(built) if isinstance(built, (list, tuple)) else [built]
        for op in ops:
            for i, t in enumerate(op.tensors):
                if t.data_ptr() % ALIGN_BYTES:
                    raise ValueError(f"make_{name}: tensor {i} of {op.name} starts at {t.data_ptr():#x}, not a "
                                     f"multiple of {ALIGN_BYTES} bytes (tasks load through 16-byte vectors)")
                if t.device != self.device:
                    raise ValueError(f"make_{name}: tensor {i} of {op.name} is on {t.device}, the builder's device "
                                     f"is {self.device}")
        self.ops.extend(ops)
        return built

    # Linear
    def make_linear(self, input, weight, output, layer_id: int = 0):
        """``output[M, N] = input[M, K] @ weight[N, K].T`` (fp32 accumulation)."""
        return self._add("linear", layer_id, input, weight, output)

    def make_qkv_proj(self, input, weight, output, layer_id: int = 0):
        return self._add("qkv_proj", layer_id, input, weight, output)

    def make_o_proj(self, input, weight, output, layer_id: int = 0):
        return self._add("o_proj", layer_id, input, weight, output)

    def make_fc1(self, input, weight, output, layer_id: int = 0):
        return self._add("mlp_fc1", layer_id, input, weight, output)

    def make_fc2(self, input, weight, output, layer_id: int = 0):
        return self._add("mlp_fc2", layer_id, input, weight, output)

    def make_fused_fc1_silu_mul_up(self, input, weight, output, layer_id: int = 0):
        """``output = silu(input @ weight[:I].T) * (input @ weight[I:].T)`` with ``weight [2 I, K]`` (gate rows
        first, then up rows) and ``output [M, I]``."""
        return self._add("mlp_fc1_silu_mul_up", layer_id, input, weight, output)

    # Normalization / Elementwise / Activation
    def make_rms_norm(self, input, rms_weight, output, rms_eps: float = 1e-6, layer_id: int = 0):
        """``output = input / sqrt(mean(input**2, -1) + eps) * rms_weight`` per row (fp32 math)."""
        return self._add("rms_norm", layer_id, input, rms_weight, output, rms_eps=rms_eps)

    def make_add(self, lhs, rhs, output, layer_id: int = 0):
        """``output = lhs + rhs`` (same shapes; fp32 math)."""
        return self._add("add", layer_id, lhs, rhs, output)

    def make_silu_mul_up(self, fc1_out, act_out, layer_id: int = 0):
        """``act_out[M, I] = silu(fc1_out[:, :I]) * fc1_out[:, I:]`` (fc1_out ``[M, 2 I]``)."""
        return self._add("silu_mul_up", layer_id, fc1_out, act_out)

    def make_qk_norm_rope_update_kvcache(self, qkv, key_cache, value_cache, block_tables, kv_lens, q_rms_weight,
                                         k_rms_weight, cos_cache, sin_cache, q_norm_rope, q_rms_eps: float = 1e-6,
                                         k_rms_eps: float = 1e-6, rope_theta: int = 1000000,
                                         skip_q_norm: bool = False, skip_k_norm: bool = False, layer_id: int = 0):
        """Per head of ``qkv [B, S, Hq + 2 Hkv, D]``: RMS-norm q and k (unless skipped), rotate them (RoPE at
        positions ``kv_lens[b] - S + s``, tables ``cos_cache / sin_cache [*, max_pos, D]``), write q to
        ``q_norm_rope [B, S, Hq, D]`` and k, v into the paged caches at those positions (``kv_lens`` already counts
        the new tokens). The new positions of different sequences must not share a cache page (pages shared
        by sequences, a common prefix, are only read in a step): the decode tasks of sequence ``b`` wait only for
        the cache writes of sequence ``b``."""
        return self._add("qk_norm_rope_update_kvcache", layer_id, qkv, key_cache, value_cache, block_tables, kv_lens,
                         q_rms_weight, k_rms_weight, cos_cache, sin_cache, q_norm_rope, q_rms_eps=q_rms_eps,
                         k_rms_eps=k_rms_eps, rope_theta=rope_theta, skip_q_norm=skip_q_norm,
                         skip_k_norm=skip_k_norm)

    # Attention
    def make_flash_decode(self, query, key_cache, value_cache, block_tables, kv_lens, output, sm_scale=None,
                          soft_cap: float = 0.0, layer_id: int = 0):
        """Decode attention over a paged KV cache: ``query [B, 1, Hq, D]``, caches ``[blocks, page, Hkv, D]``,
        ``block_tables [B, max_blocks]``, ``kv_lens [B]`` -> ``output [B, 1, Hq, D]`` (split-KV, then combine)."""
        return self._add("flash_decode", layer_id, query, key_cache, value_cache, block_tables, kv_lens, output,
                         sm_scale=sm_scale, soft_cap=soft_cap)

    def make_flash_attn(self, q, k, v, output, sm_scale=None, soft_cap: float = 0.0, is_causal: bool = True,
                        layer_id: int = 0):
        """Prefill attention ``q [B, S, Hq, D]``, ``k, v [B, S, Hkv, D]`` -> ``output [B, S, Hq, D]``."""
        return self._add("flash_attn", layer_id, q, k, v, output, sm_scale=sm_scale, soft_cap=soft_cap,
                         is_causal=is_causal)

    # Communication
    def make_allreduce(self, input, output, double_input_buffer: bool = False, layer_id: int = 0):
        """``output = sum over ranks of input`` (point-to-point one-shot over symmetric memory, no multicast;
        ``input`` may be any tensor of the builder's device). ``double_input_buffer`` is accepted for the
        reference's signature; the task double-buffers its own staging."""
        return self._add("allreduce", layer_id, input, output, double_input_buffer=double_input_buffer)

    def make_barrier_all_intra_node(self, wait_inputs=None, layer_id: int = 0):
        """Every rank waits until every rank reached this point of the step (after the tasks writing
        ``wait_inputs``)."""
        if wait_inputs is None:
            wait_inputs = []
        elif isinstance(wait_inputs, torch.Tensor):
            wait_inputs = [wait_inputs]
        return self._add("barrier_all_intra_node", layer_id, list(wait_inputs))

    def make_prefetch(self, weight, layer_id: int = 0):
        """Bring ``weight`` toward the SMs (L2) ahead of the task that reads it; waits for nothing. Only worth it
        for weights that fit in L2 (tens of MB on an H200) while workers would otherwise idle: prefetching a whole
        Qwen3-8B layer (~400 MB, 8x the L2) doubled the HBM traffic and halved the step's speed."""
        return self._add("prefetch", layer_id, weight)

    # ------------------------------------------------------------------------------------------------ compiling
    def reset(self):
        """Forget the ops (and the compiled kernel)."""
        self.ops = []
        self._compiled = False
        self._kernel = None

    def get_memory_size(self) -> int:
        """Bytes the step's tasks move (their cost estimates: weights, activations, KV cache read)."""
        return int(sum(t.cost for op in self.ops for t in op.tiles))

    def compile(self):
        if not self.ops:
            raise RuntimeError("ModelBuilder.compile: no ops were added")
        ops = fusion.fuse(self.ops) if self._enable_fusion else list(self.ops)
        if self.split_loads_ahead:
            from .tasks.flash_decode import split_loads_ahead

            ops = split_loads_ahead(ops)
        tasks = graph.build_tasks(ops)
        if not self._enable_dep_opt:
            tasks = _op_level_deps(ops, tasks)
        from .tasks.linear import gate_prefetch, plan_early_prefetch

        ops = gate_prefetch(ops, tasks)  # GEMV L2 prefetch only after latency-bound producers
        if self._enable_runtime_scheduler:
            queues = [[t.index for t in tasks]]
            self.slot_prefetches = {}
        else:
            queues = scheduler.assign(tasks, self.num_workers, self.policy)
            # (after placement: where a worker enters the latency-bound stretch is a property of its queue)
            self.slot_prefetches = plan_early_prefetch(ops, tasks, queues, self.gemv_early_prefetch_bytes)
        self.compiled_ops = ops
        self.tasks = tasks
        # branches
        keys: Dict[tuple, int] = {}
        self.branch_of_op: List[int] = []
        names: List[str] = []
        for op in ops:
            k = codegen.branch_key(op)
            if k not in keys:
                keys[k] = len(keys)
                names.append(f"{op.family}:{op.op_type}")
            self.branch_of_op.append(keys[k])
        self.branches = list(keys)
        self.branch_names = names
        # tables
        nargs = max(len(op.tensors) for op in ops)
        tbl = torch.zeros((len(ops), nargs), dtype=torch.int64)
        for i, op in enumerate(ops):
            for j, t in enumerate(op.tensors):
                tbl[i, j] = t.data_ptr()
        runs, firsts, counts = [], [], []
        for t in tasks:
            r = graph.dep_ranges(t.deps) if t.waits else []
            firsts.append(len(runs))
            counts.append(len(r))
            runs.extend(r)
        cap = max(1, max(len(q) for q in queues))
        self.queue_row = codegen.ROW_PREFETCH if self.slot_prefetches else codegen.ROW
        rows = torch.zeros((len(queues), cap, self.queue_row), dtype=torch.int32)
        for w, q in enumerate(queues):
            for i, ti in enumerate(q):
                t = tasks[ti]
                rows[w, i, :6] = torch.tensor([self.branch_of_op[t.op], t.op, t.tile, firsts[ti], counts[ti], ti])
                if ti in self.slot_prefetches:
                    rows[w, i, 8:14] = torch.tensor(codegen.prefetch_slots(self.slot_prefetches[ti]))
        qlen = torch.tensor([len(q) for q in queues] + [0] * (self.num_workers - len(queues)), dtype=torch.int32)
        dev = self.device
        self.queues = queues
        self.queue_tensor = rows.to(dev)
        self.queue_len = qlen.to(dev)
        self.op_table = tbl.to(dev)
        self.deps_tensor = torch.tensor(runs or [(0, 0)], dtype=torch.int32).reshape(-1).to(dev)
        self.scoreboard = torch.zeros(len(tasks), dtype=torch.int32, device=dev)
        self.counter = torch.zeros(4, dtype=torch.int32, device=dev)
        self.error = torch.zeros(4, dtype=torch.int32, device=dev)
        self.queue_cap = cap
        self.num_args = nargs
        self.source = codegen.generate_source(self.branches, names)
        self._kernel, self.source_path = codegen.load_kernel(self.source)
        if self._enable_profiling:
            from triton_dist.tools.profiler import alloc_profiler_buffer

            self.profile_buf = alloc_profiler_buffer(2 * (2 * cap + 2) * self.num_workers, device=dev)
        else:
            self.profile_buf = torch.zeros(1, dtype=torch.int64, device=dev)
        # the launch's arguments never change between steps: built once here, not on every run()
        self._launch_args = (self.queue_tensor, self.queue_len, self.op_table, self.deps_tensor, self.scoreboard,
                             self.counter, self.error, self.profile_buf)
        self._launch_kwargs = dict(QUEUE_CAP=self.queue_cap, ROW=self.queue_row, NUM_ARGS=self.num_args,
                                   DYNAMIC=self._enable_runtime_scheduler, STRICT=self.strict,
                                   PROFILE=self._enable_profiling, num_warps=self.num_warps)
        if not self.on_sim and self.num_workers > 1:
            from triton_dist.utils import launch_cooperative_grid_options

            self._launch_kwargs.update(launch_cooperative_grid_options())
        self._compiled = True
        return self

    def task_name(self, index: int) -> str:
        t = self.tasks[index]
        op = self.compiled_ops[t.op]
        return f"task {index} (op {t.op} {op.name}, tile {t.tile} of {len(op.tiles)})"

    # ------------------------------------------------------------------------------------------------ running
    def run(self):
        """Run one step (asynchronously on the current stream; strict mode synchronises to check for errors)."""
        if not self._compiled:
            raise RuntimeError("ModelBuilder.run: call compile() first")
        if self._enable_profiling and not (self.device.type == "cuda" and torch.cuda.is_current_stream_capturing()):
            # (not while capturing a CUDA graph: the reset copies from the host; replays keep appending records
            # until the buffer is full, then drop them)
            from triton_dist.tools.profiler import reset_profiler_buffer

            reset_profiler_buffer(self.profile_buf)
        self._kernel[(self.num_workers,)](*self._launch_args, **self._launch_kwargs)
        if self.strict:
            err = self.error.tolist()
            if err[0]:
                raise MegaKernelDependencyError(
                    f"mega kernel step {err[2]}: {self.task_name(err[0] - 1)} found its dependency "
                    f"{self.task_name(err[1])} not done (queue order or dependency derivation is wrong; the builder "
                    f"is unusable now)")

    # ------------------------------------------------------------------------------------------------ tracing
    def task_type_names(self) -> List[str]:
        """Profiler task-type names: 0 = the dependency waits, ``b + 1`` = branch ``b``."""
        return ["wait deps"] + list(getattr(self, "branch_names", []))

    def dump_trace(self, trace_file_prefix: str = "MEGA_KERNEL_TRACE", gantt: bool = True) -> Optional[str]:
        """Write the last profiled step's per-SM trace (Perfetto JSON, and a Gantt PNG with ``gantt``) to
        ``$MEGA_KERNEL_PROFILER_DIR`` (default ``./prof``); returns the JSON path (None on ranks > 0 when
        gathered)."""
        if not self._enable_profiling:
            raise RuntimeError("dump_trace: build with enable_profiling=True")
        from triton_dist.tools.profiler import export_to_perfetto_trace

        out_dir = os.environ.get("MEGA_KERNEL_PROFILER_DIR", "./prof")
        os.makedirs(out_dir, exist_ok=True)
        base = os.path.join(out_dir, f"{trace_file_prefix}_RANK_{self.rank}")
        return export_to_perfetto_trace(self.profile_buf, self.task_type_names(), base + ".json",
                                        rank=self.rank, gather=False, gantt_png=base + ".png" if gantt else None)

    def profile_summary(self) -> dict:
        """The last profiled step per task type: ``{"span_us", "workers", "activity", "types": {name: {"count",
        "busy_us"}}}``; ``activity`` is the fraction of worker time (over the step's span) spent running tasks, not
        waiting for dependencies."""
        if not self._enable_profiling:
            raise RuntimeError("profile_summary: build with enable_profiling=True")
        from triton_dist.tools.profiler.viewer import parse_to_tracks

        tracks = [tr for tr in parse_to_tracks(self.profile_buf.cpu()) if tr.tasks]
        names = self.task_type_names()
        types: Dict[str, dict] = {}
        t0 = min((t.start_ns for tr in tracks for t in tr.tasks), default=0)
        t1 = max((t.end_ns for tr in tracks for t in tr.tasks), default=0)
        busy = 0
        for tr in tracks:
            for t in tr.tasks:
                name = names[t.task_type] if t.task_type < len(names) else str(t.task_type)
                e = types.setdefault(name, {"count": 0, "busy_us": 0.0})
                e["count"] += 1
                e["busy_us"] += t.duration_ns / 1e3
                if t.task_type != codegen.WAIT_TASK_TYPE:
                    busy += t.duration_ns
        span = t1 - t0
        return {"span_us": span / 1e3, "workers": len(tracks), "types": types,
                "activity": busy / (span * len(tracks)) if span and tracks else 0.0,
                "dropped": sum(1 for tr in tracks if tr.full)}

    def op_timeline(self) -> List[dict]:
        """The last profiled step op by op (static queues only: a worker's k-th task record is the k-th task of its
        queue), in program order. Per compiled op: ``name``, ``tiles``, ``bytes`` (its tiles' costs: the bytes they
        read), ``start_us`` / ``end_us`` (its first task's start, its last task's end, from the step's first task),
        ``busy_us`` (its tasks' durations summed), ``first_tile_us`` (median over the workers that ran it of the
        duration of the first of its tiles each ran: for an op that waits inside its tasks this includes the wait
        for its inputs) and ``tile_us`` (median of the other tiles; ``None`` when every worker ran one).
        Raises RuntimeError without profiling or with the dynamic queue."""
        if not self._enable_profiling:
            raise RuntimeError("op_timeline: build with enable_profiling=True")
        if self._enable_runtime_scheduler:
            raise RuntimeError("op_timeline: the dynamic queue does not say which task a record belongs to; build "
                               "with static queues (enable_runtime_scheduler=False)")
        import statistics

        from triton_dist.tools.profiler.viewer import parse_to_tracks

        per_op = [dict(name=op.name, tiles=len(op.tiles), bytes=float(sum(t.cost for t in op.tiles)), starts=[],
                       ends=[], busy=0, first=[], other=[]) for op in self.compiled_ops]
        t0 = None
        for tr in parse_to_tracks(self.profile_buf.cpu()):
            runs = [t for t in tr.tasks if t.task_type != codegen.WAIT_TASK_TYPE]
            queue = self.queues[tr.program_id] if tr.program_id < len(self.queues) else []
            seen = set()
            for rec, ti in zip(runs, queue):
                o = self.tasks[ti].op
                e = per_op[o]
                e["starts"].append(rec.start_ns)
                e["ends"].append(rec.end_ns)
                e["busy"] += rec.duration_ns
                (e["other"] if o in seen else e["first"]).append(rec.duration_ns)
                seen.add(o)
                t0 = rec.start_ns if t0 is None else min(t0, rec.start_ns)
        out = []
        for e in per_op:
            if not e["starts"]:
                continue
            out.append(dict(name=e["name"], tiles=e["tiles"], bytes=e["bytes"],
                            start_us=(min(e["starts"]) - t0) / 1e3, end_us=(max(e["ends"]) - t0) / 1e3,
                            busy_us=e["busy"] / 1e3, first_tile_us=statistics.median(e["first"]) / 1e3,
                            tile_us=statistics.median(e["other"]) / 1e3 if e["other"] else None))
        return out

    def get_sm_activity(self) -> float:
        """Fraction of the last profiled step's worker time spent in tasks, not waiting (:meth:`profile_summary`)."""
        return self.profile_summary()["activity"]

    def close(self) -> None:
        """Collective: free the symmetric tensors of :meth:`create_symm_tensor` (every rank must call it).
        Idempotent: a second call frees nothing."""
        from triton_dist.utils import nvshmem_free_tensor_sync

        symm, self.all_symm_tensors = self.all_symm_tensors, []
        for t in symm:
            nvshmem_free_tensor_sync(t)

    def finalize(self) -> None:
        """The reference's name of :meth:`close` (docs/ops.md: ``close()`` frees, ``finalize`` is kept for scripts
        written for the reference)."""
        self.close()


def _op_level_deps(ops: Sequence[Op], tasks: List[Task]) -> List[Task]:
    """``enable_dep_opt=False``: each task waits for every tile of every op it depends on."""
    first, n = [], 0
    for op in ops:
        first.append(n)
        n += len(op.tiles)
    for t in tasks:
        dep_ops = sorted({tasks[d].op for d in t.deps})
        t.deps = [i for o in dep_ops for i in range(first[o], first[o] + len(ops[o].tiles))]
    return tasks
