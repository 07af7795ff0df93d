"""Helpers for tests, benchmarks and examples: seeding, per-rank printing, random tensors of any dtype, timing.

Internal: the public names are re-exported by :mod:`triton_dist.utils` (import them from there).
"""
from __future__ import annotations

import os
import random
import time

import torch

__all__ = ["init_seed", "dist_print", "is_fp8_dtype", "rand_tensor", "perf_func"]


def init_seed(seed: int = 0) -> None:
    """Seed Python, numpy and torch (CPU and all GPUs) with ``seed``; make cuDNN deterministic."""
    import numpy as np

    random.seed(seed)
    np.random.seed(seed % (2**32))
    torch.manual_seed(seed)
    if torch.cuda.is_available():
        torch.cuda.manual_seed_all(seed)
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False


def _env_rank() -> int:
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        return dist.get_rank()
    return int(os.environ.get("RANK", 0))


def _env_world() -> int:
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        return dist.get_world_size()
    return int(os.environ.get("WORLD_SIZE", 1))


def dist_print(*args, allowed_ranks=(0, ), prefix: bool = False, need_sync: bool = False, **kwargs) -> None:
    """``print`` on the ranks in ``allowed_ranks`` (a list, or ``"all"``). ``prefix`` prepends ``[rank:N]``.
    ``need_sync`` makes the allowed ranks print in order, with a barrier over the default group before each (every
    rank must then call it)."""
    rank, world = _env_rank(), _env_world()
    if isinstance(allowed_ranks, str):
        if allowed_ranks != "all":
            raise ValueError(f"dist_print: allowed_ranks={allowed_ranks!r}: pass a list of ranks or 'all'")
        allowed_ranks = list(range(world))
    if isinstance(allowed_ranks, int):
        allowed_ranks = [allowed_ranks]
    for r in allowed_ranks:
        if need_sync:
            import torch.distributed as dist

            if dist.is_available() and dist.is_initialized():
                dist.barrier()
        if rank == r:
            if prefix:
                print(f"[rank:{rank}]", end="")
            print(*args, **kwargs)


def is_fp8_dtype(dtype: torch.dtype) -> bool:
    return dtype.is_floating_point and torch.empty((), dtype=dtype).element_size() == 1


def rand_tensor(shape, dtype: torch.dtype, device="cuda") -> torch.Tensor:
    """Random tensor: floats uniform in [-1, 1) (fp8 via bf16); signed ints uniform over their full range
    (int64: over the int32 range), unsigned ints over [0, max], bool fair coin."""
    if isinstance(shape, int):
        shape = (shape, )
    if dtype.is_floating_point:
        if is_fp8_dtype(dtype):
            return (torch.rand(shape, dtype=torch.bfloat16, device=device) * 2 - 1).to(dtype)
        return torch.rand(shape, dtype=dtype, device=device) * 2 - 1
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, device=device).bool()
    if dtype in _WIDE_UNSIGNED:
        return torch.randint(0, 2**31, shape, dtype=torch.int64, device=device).to(dtype)
    info = torch.iinfo(dtype)
    lo, hi = (info.min, info.max) if dtype != torch.int64 else (-2**31, 2**31 - 1)
    return torch.randint(lo, hi + 1, shape, dtype=torch.int64, device=device).to(dtype)


_WIDE_UNSIGNED = tuple(getattr(torch, n) for n in ("uint32", "uint64") if hasattr(torch, n))


def perf_func(func, iters: int, warmup_iters: int):
    """Run ``func`` ``warmup_iters`` + ``iters`` times; returns ``(last output, mean ms per iteration)`` (CUDA events
    on GPU, wall clock otherwise)."""
    for _ in range(warmup_iters):
        out = func()
    if torch.cuda.is_available():
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        start.record()
        for _ in range(iters):
            out = func()
        stop.record()
        torch.cuda.synchronize()
        return out, start.elapsed_time(stop) / max(iters, 1)
    t0 = time.perf_counter()
    out = None
    for _ in range(iters):
        out = func()
    return out, (time.perf_counter() - t0) * 1e3 / max(iters, 1)
