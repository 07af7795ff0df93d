"""Issue 16, point 6: the helpers of Triton-distributed that users' scripts import -- ``triton_dist.utils.CUDA_CHECK``,
``sleep_async``, ``requires_p2p_native_atomic``, ``generate_data`` and ``triton_dist.profiler_utils.perf_func`` --
exist with the reference's behaviour (CPU tier: the GPU-only parts are driven through stand-ins for the device)."""
from __future__ import annotations

import enum
import itertools
import warnings

import pytest
import torch

import triton_dist.utils as U
from triton_dist import profiler_utils
from triton_dist.runtime import device_info, select

NAMES = ["CUDA_CHECK", "sleep_async", "requires_p2p_native_atomic", "generate_data", "perf_func"]


class CUresult(enum.IntEnum):  # the class names cuda-python uses; values as in cuda.h / cuda_runtime_api.h
    CUDA_SUCCESS = 0
    CUDA_ERROR_INVALID_VALUE = 1


class cudaError_t(enum.IntEnum):
    cudaSuccess = 0
    cudaErrorMemoryAllocation = 2


@pytest.mark.parametrize("name", NAMES)
def test_names_are_exported_from_utils(name):
    assert callable(getattr(U, name)) and name in U.__all__


def test_profiler_utils_has_the_same_functions():
    assert profiler_utils.perf_func is U.perf_func
    assert profiler_utils.sleep_async is U.sleep_async


# ---------------------------------------------------------------------------------------------------------------
# CUDA_CHECK
# ---------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("ok", [CUresult.CUDA_SUCCESS, cudaError_t.cudaSuccess])
def test_cuda_check_success_returns_none(ok):
    assert U.CUDA_CHECK(ok) is None


@pytest.mark.parametrize("bad", [CUresult.CUDA_ERROR_INVALID_VALUE, cudaError_t.cudaErrorMemoryAllocation])
def test_cuda_check_failure_raises_runtime_error(bad):
    with pytest.raises(RuntimeError, match=r"Cuda Error: .*" + bad.name):
        U.CUDA_CHECK(bad)


def test_cuda_check_result_tuples_return_the_values():
    assert U.CUDA_CHECK((cudaError_t.cudaSuccess, )) is None
    assert U.CUDA_CHECK((CUresult.CUDA_SUCCESS, 7)) == 7
    assert U.CUDA_CHECK((CUresult.CUDA_SUCCESS, 7, "x")) == (7, "x")
    with pytest.raises(RuntimeError, match="Cuda Error"):
        U.CUDA_CHECK((CUresult.CUDA_ERROR_INVALID_VALUE, 7))
    with pytest.raises(RuntimeError, match="empty tuple"):
        U.CUDA_CHECK(())


@pytest.mark.parametrize("other", [0, 1, None, "cudaSuccess", True])
def test_cuda_check_unknown_type_raises_like_the_reference(other):
    with pytest.raises(RuntimeError, match="Unknown error type"):
        U.CUDA_CHECK(other)


def test_cuda_check_with_the_real_bindings():
    try:
        from cuda.bindings import driver, runtime
    except ImportError:
        pytest.skip("cuda-bindings is not installed here (the stand-in enums above cover the logic)")
    assert U.CUDA_CHECK(driver.CUresult.CUDA_SUCCESS) is None
    assert U.CUDA_CHECK(runtime.cudaError_t.cudaSuccess) is None
    with pytest.raises(RuntimeError, match="Cuda Error"):
        U.CUDA_CHECK(driver.CUresult.CUDA_ERROR_INVALID_VALUE)
    with pytest.raises(RuntimeError, match="Cuda Error"):
        U.CUDA_CHECK(runtime.cudaError_t.cudaErrorMemoryAllocation)


# ---------------------------------------------------------------------------------------------------------------
# sleep_async
# ---------------------------------------------------------------------------------------------------------------
def test_sleep_async_without_gpu_is_a_clear_error():
    if torch.cuda.is_available():
        pytest.skip("a GPU is visible: the no-GPU error path does not apply")
    with pytest.raises(RuntimeError, match="sleep_async needs a CUDA GPU"):
        U.sleep_async(1)


@pytest.mark.parametrize("bad, exc", [(-1, ValueError), (float("nan"), ValueError), ("1", TypeError),
                                      (None, TypeError), (True, TypeError)])
def test_sleep_async_rejects_bad_durations_before_any_launch(bad, exc, monkeypatch):
    monkeypatch.setattr(torch.cuda, "_sleep", lambda cycles: pytest.fail("launched"))
    with pytest.raises(exc, match="duration_ms"):
        U.sleep_async(bad)


@pytest.fixture
def fake_gpu(monkeypatch):
    """torch sees one GPU whose maximum clock is 1,980 MHz; ``torch.cuda._sleep`` records its cycle counts."""
    launched = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(device_info, "get_max_gpu_clock_rate_in_khz", lambda dev=0: 1_980_000)
    monkeypatch.setattr(torch.cuda, "_sleep", launched.append)
    return launched


def test_sleep_async_enqueues_max_clock_times_duration_cycles(fake_gpu):
    U.sleep_async(2)
    U.sleep_async(0.5)
    assert fake_gpu == [3_960_000, 990_000]  # kHz * ms = cycles
    assert all(isinstance(c, int) for c in fake_gpu)


def test_sleep_async_of_zero_launches_nothing(fake_gpu):
    U.sleep_async(0)
    assert fake_gpu == []


def test_sleep_async_falls_back_to_torch_clock_rate(fake_gpu, monkeypatch):
    def no_clock(dev=0):
        raise RuntimeError("get_max_gpu_clock_rate_in_khz needs pynvml (nvidia-ml-py) or cuda-bindings")

    monkeypatch.setattr(device_info, "get_max_gpu_clock_rate_in_khz", no_clock)
    monkeypatch.setattr(torch.cuda, "clock_rate", lambda dev=None: 1_500, raising=False)  # MHz
    U.sleep_async(1)
    assert fake_gpu == [1_500_000]


# ---------------------------------------------------------------------------------------------------------------
# requires_p2p_native_atomic
# ---------------------------------------------------------------------------------------------------------------
def _add(a, b=0):
    """adds"""
    return a + b


def test_requires_p2p_native_atomic_keeps_the_function(monkeypatch):
    wrapped = U.requires_p2p_native_atomic(_add)
    assert wrapped.__name__ == "_add" and wrapped.__doc__ == "adds" and wrapped.__wrapped__ is _add
    monkeypatch.setattr(select, "backend_name", lambda: "sim")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert wrapped(2, b=3) == 5  # the simulator's ranks share host memory: no warning


def test_requires_p2p_native_atomic_warns_and_still_runs_without_support(monkeypatch):
    monkeypatch.setattr(select, "backend_name", lambda: "nvshmem")
    monkeypatch.setattr(device_info, "supports_p2p_native_atomic", lambda: False)
    wrapped = U.requires_p2p_native_atomic(_add)
    with pytest.warns(UserWarning, match="_add requires native atomics over P2P"):
        assert wrapped(1, 2) == 3


def test_requires_p2p_native_atomic_is_silent_with_support(monkeypatch):
    monkeypatch.setattr(select, "backend_name", lambda: "nvshmem")
    monkeypatch.setattr(device_info, "supports_p2p_native_atomic", lambda: True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert U.requires_p2p_native_atomic(_add)(4) == 4


def test_requires_p2p_native_atomic_rejects_a_non_function():
    with pytest.raises(TypeError, match="decorates a function"):
        U.requires_p2p_native_atomic(3)


def test_supports_p2p_native_atomic_without_gpu_is_false():
    if torch.cuda.is_available():
        pytest.skip("a GPU is visible")
    assert U.supports_p2p_native_atomic() is False


# ---------------------------------------------------------------------------------------------------------------
# generate_data
# ---------------------------------------------------------------------------------------------------------------
def test_generate_data_yields_one_entry_per_config_forever():
    counter = itertools.count(1)
    gen = U.generate_data([
        ((4, 8), torch.float32, (2.0, 10.0), "cpu"),
        (16, torch.int8, (5, 1), "cpu"),
        None,
        ([lambda: next(counter), 3], torch.bfloat16, (1.0, 0.0), "cpu"),
        (lambda: (2, 2), torch.float16, (0.5, -1.0), "cpu"),
    ])
    for step in range(1, 4):
        a, b, none, c, d = next(gen)
        assert a.shape == (4, 8) and a.dtype == torch.float32 and a.device.type == "cpu"
        assert bool(((a >= 8) & (a < 12)).all())
        assert b.shape == (16, ) and b.dtype == torch.int8 and bool(((b >= -4) & (b < 6)).all())
        assert none is None
        assert c.shape == (step, 3) and c.dtype == torch.bfloat16  # callables are drawn anew for every entry
        assert d.shape == (2, 2) and d.dtype == torch.float16 and bool(((d >= -1.5) & (d <= -0.5)).all())


def test_generate_data_draws_fresh_values_and_follows_the_seed():
    torch.manual_seed(0)
    gen = U.generate_data([(64, torch.float32, (1.0, 0.0), "cpu")])
    (x, ), (y, ) = next(gen), next(gen)
    assert not torch.equal(x, y)
    torch.manual_seed(0)
    (x2, ) = next(U.generate_data([(64, torch.float32, (1.0, 0.0), "cpu")]))
    assert torch.equal(x, x2)


@pytest.mark.skipif(not hasattr(torch, "float8_e4m3fn"), reason="this torch has no float8 dtypes")
def test_generate_data_fp8():
    (x, ) = next(U.generate_data([((8, 8), torch.float8_e4m3fn, (1.0, 0.0), "cpu")]))
    assert x.dtype == torch.float8_e4m3fn and bool((x.float().abs() <= 1).all())


@pytest.mark.parametrize("config, exc, match", [
    ((4, torch.bool, (1, 0), "cpu"), ValueError, "unsupported dtype"),
    ((4, torch.uint8, (1, 0), "cpu"), ValueError, "unsupported dtype"),
    ((4, torch.int32, (0, 0), "cpu"), ValueError, "scale > 0"),
    ((4, torch.float32, (1.0, ), "cpu"), ValueError, "init_args"),
    (("4", torch.float32, (1.0, 0.0), "cpu"), ValueError, "unsupported shape"),
    ((4, "float32", (1.0, 0.0), "cpu"), TypeError, "dtype"),
])
def test_generate_data_bad_configs_are_clear_errors(config, exc, match):
    with pytest.raises(exc, match=match):
        next(U.generate_data([config]))


def test_generate_data_default_device_without_gpu_names_the_fix():
    if torch.cuda.is_available():
        pytest.skip("a GPU is visible")
    with pytest.raises(RuntimeError, match="needs a CUDA GPU.*device='cpu'"):
        next(U.generate_data([(4, torch.float32, (1.0, 0.0))]))


# ---------------------------------------------------------------------------------------------------------------
# perf_func
# ---------------------------------------------------------------------------------------------------------------
def test_perf_func_returns_the_last_output_and_a_mean_time():
    calls = []

    def fn():
        calls.append(len(calls))
        return len(calls)

    out, ms = profiler_utils.perf_func(fn, iters=5, warmup_iters=3)
    assert out == 8 and len(calls) == 8  # 3 warm-up calls, then 5 timed ones; the last output comes back
    assert isinstance(ms, float) and ms >= 0


def test_perf_func_positional_arguments_as_in_the_reference():
    out, ms = profiler_utils.perf_func(lambda: torch.ones(2), 2, 0)
    assert torch.equal(out, torch.ones(2)) and ms >= 0


@pytest.mark.parametrize("iters, warmup", [(0, 1), (-1, 0), (1, -1), (1.5, 0), (True, 0)])
def test_perf_func_bad_counts(iters, warmup):
    with pytest.raises(ValueError, match="must be an int"):
        profiler_utils.perf_func(lambda: None, iters, warmup)


def test_perf_func_needs_a_callable():
    with pytest.raises(TypeError, match="callable"):
        profiler_utils.perf_func(3, 1, 0)
