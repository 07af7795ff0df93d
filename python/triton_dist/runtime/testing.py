"""Helpers for tests, benchmarks and examples: seeding, per-rank printing, random tensors of any dtype, timing.

Internal: the public names are re-exported by :mod:`triton_dist.utils` (import them from there).
"""
from __future__ import annotations

import numbers
import os
import random
import time
from typing import Sequence

import torch

__all__ = ["init_seed", "dist_print", "is_fp8_dtype", "rand_tensor", "perf_func", "sleep_async", "generate_data"]


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


def _check_iters(name: str, iters, warmup_iters) -> None:
    for what, value, low in (("iters", iters, 1), ("warmup_iters", warmup_iters, 0)):
        if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < low:
            raise ValueError(f"{name}: {what}={value!r} must be an int >= {low}")


def perf_func(func, iters: int, warmup_iters: int):
    """Run ``func()`` ``warmup_iters`` times, synchronise, then time ``iters`` calls; returns ``(output of the last
    call, mean ms per call)`` (Triton-distributed's ``perf_func``). On a GPU the time is taken with two CUDA events
    on the current stream around the ``iters`` calls (the device is synchronised before and after); without one,
    with the wall clock. ``iters`` >= 1 and ``warmup_iters`` >= 0, else ``ValueError``."""
    if not callable(func):
        raise TypeError(f"perf_func: func must be callable, got {type(func).__name__}")
    _check_iters("perf_func", iters, warmup_iters)
    for _ in range(warmup_iters):
        func()
    if torch.cuda.is_available():
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        start.record()
        for _ in range(iters):
            out = func()
        stop.record()
        torch.cuda.synchronize()
        return out, start.elapsed_time(stop) / iters
    t0 = time.perf_counter()
    for _ in range(iters):
        out = func()
    return out, (time.perf_counter() - t0) * 1e3 / iters


def sleep_async(duration_ms: float) -> None:
    """Enqueue a kernel that spins for ``duration_ms`` milliseconds on the current CUDA stream and return at once
    (Triton-distributed's ``sleep_async``: ``torch.cuda._sleep`` for ``duration_ms`` times the GPU's maximum clock
    in kHz cycles; capturable in a CUDA graph). At a lower actual clock the sleep lasts longer. Needs a GPU:
    without one it raises ``RuntimeError`` (a host-side sleep would block, which is not what callers want)."""
    if isinstance(duration_ms, bool) or not isinstance(duration_ms, numbers.Real):
        raise TypeError(f"sleep_async: duration_ms must be a number of milliseconds, got {type(duration_ms).__name__}")
    if not duration_ms >= 0:
        raise ValueError(f"sleep_async: duration_ms={duration_ms!r} must be >= 0")
    if not torch.cuda.is_available():
        raise RuntimeError("sleep_async needs a CUDA GPU (none is visible to torch): it enqueues a device-side sleep "
                           "on the current stream")
    from .device_info import get_max_gpu_clock_rate_in_khz

    device = torch.cuda.current_device()
    try:
        khz = get_max_gpu_clock_rate_in_khz(device)
    except RuntimeError:
        khz = int(torch.cuda.clock_rate(device)) * 1000  # MHz; needs pynvml / amdsmi
    cycles = int(khz * duration_ms)
    if cycles > 0:
        torch.cuda._sleep(cycles)


def _resolve_shape(shape) -> tuple:
    if callable(shape):
        shape = shape()
    if isinstance(shape, numbers.Integral):
        return (int(shape), )
    if isinstance(shape, Sequence) and not isinstance(shape, str):
        return tuple(int(d() if callable(d) else d) for d in shape)
    raise ValueError(f"generate_data: unsupported shape {shape!r}: pass an int, a sequence of ints / callables "
                     f"returning ints, or a callable returning one of those")


def _make_tensor(shape, dtype: torch.dtype, init_args, device="cuda") -> torch.Tensor:
    """One tensor of :func:`generate_data`: floats ``(U[-1, 1) * scale) + bias``, signed ints
    ``randint(-scale, scale) + bias``."""
    shape = _resolve_shape(shape)
    if not isinstance(dtype, torch.dtype):
        raise TypeError(f"generate_data: dtype must be a torch.dtype, got {dtype!r}")
    try:
        scale, bias = init_args
    except (TypeError, ValueError):
        raise ValueError(f"generate_data: init_args={init_args!r} must be a pair (scale, bias)") from None
    if torch.device(device).type == "cuda" and not torch.cuda.is_available():
        raise RuntimeError(f"generate_data: device={device!r} needs a CUDA GPU (none is visible to torch); put "
                           f"device='cpu' as the 4th entry of the config")
    if dtype.is_floating_point:
        if is_fp8_dtype(dtype):
            return ((torch.rand(shape, dtype=torch.float16, device=device) * 2 - 1) * scale + bias).to(dtype)
        return (torch.rand(shape, dtype=dtype, device=device) * 2 - 1) * scale + bias
    if dtype in _SIGNED_INTS:
        if not scale > 0:
            raise ValueError(f"generate_data: integer dtype {dtype} needs scale > 0 (values in [-scale, scale)), "
                             f"got {scale!r}")
        return torch.randint(-int(scale), int(scale), shape, dtype=dtype, device=device) + bias
    raise ValueError(f"generate_data: unsupported dtype {dtype}: floating-point (fp8 included) and signed integer "
                     f"dtypes are")


_SIGNED_INTS = (torch.int8, torch.int16, torch.int32, torch.int64)


def generate_data(configs):
    """Endless generator of random inputs (Triton-distributed's ``generate_data``): each ``next()`` gives one
    entry per config, in order. A config is ``(shape, dtype, (scale, bias))`` or ``(shape, dtype, (scale, bias),
    device)`` (device defaults to ``"cuda"``); a falsy config (``None``, ``()``) gives ``None``. ``shape`` is an int,
    a sequence whose entries may be callables returning ints (drawn anew each time, e.g. a random M), or a callable
    returning a shape. Floats (fp8 drawn as fp16 and cast) are ``U[-1, 1) * scale + bias``; signed ints
    ``randint(-scale, scale) + bias``; other dtypes raise ``ValueError``. Each entry is a tuple (the reference
    yields a lazy generator; unpacking ``a, b = next(gen)`` works with both)."""
    configs = list(configs)
    while True:
        yield tuple(_make_tensor(*cfg) if cfg else None for cfg in configs)
