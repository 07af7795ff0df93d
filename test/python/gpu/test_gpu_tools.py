"""GPU tier for triton_dist.tools: the intra-kernel profiler on real GPUs (clock, SM ids, ranks aligned in one
trace, Gantt PNG) and an AOT-compiled kernel launched from a C program.

Run under ``torchrun --nproc_per_node 2 -m pytest test/python/gpu/test_gpu_tools.py`` (any world size >= 2; ranks
may share a GPU). Artifacts (trace JSON, Gantt PNG) go to ``$TRITON_DIST_RESULTS_DIR`` (default
``benchmarks/results/``).
"""
import ctypes.util
import os
import shutil
import subprocess
import time

import pytest
import torch
import triton
import triton.language as tl

import triton_dist
from triton_dist.tools.aot import aot_compile_kernel, aot_compile_spaces
from triton_dist.tools.profiler import (Profiler, alloc_profiler_buffer, export_to_perfetto_trace, gather_profiles,
                                        layout, load_trace, measure_clock_offset, parse_to_tracks, render_gantt_png)

from _torchrun_shmem import DEVICE, RANK, WORLD, gpu_shared

pytestmark = pytest.mark.gpu

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
RESULTS = os.environ.get("TRITON_DIST_RESULTS_DIR", os.path.join(REPO, "benchmarks", "results"))
NAMES = ["load", "fma_loop", "store"]


@pytest.fixture(scope="module")
def group():
    import torch.distributed as dist

    torch.cuda.set_device(DEVICE)
    created = False
    if not dist.is_initialized():
        dist.init_process_group("gloo")
        created = True
    yield dist
    if created:
        dist.barrier()
        dist.destroy_process_group()


@triton_dist.jit
def profiled(prof_buf, x_ptr, ITERS: tl.constexpr, BLOCK: tl.constexpr, ENABLE: tl.constexpr):
    profiler = Profiler.create(prof_buf, 0, 1, True, ENABLE_PROFILING=ENABLE)
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    profiler = profiler.record(True, 0)
    x = tl.load(x_ptr + offs)
    profiler = profiler.record(False, 0)
    profiler = profiler.record(True, 1)
    for _ in range(ITERS):
        x = x * 1.0001 + 0.5
    profiler = profiler.record(False, 1)
    profiler = profiler.record(True, 2)
    tl.store(x_ptr + offs, x)
    profiler = profiler.record(False, 2)


def test_profiler_disabled_writes_nothing(group):
    buf = alloc_profiler_buffer(1024)
    before = buf.clone()
    x = torch.ones(8 * 1024, device="cuda")
    profiled[(8, )](buf, x, ITERS=10, BLOCK=1024, ENABLE=False)
    torch.cuda.synchronize()
    assert torch.equal(buf, before)


def test_profiler_multi_program_two_ranks(group):
    """Every rank profiles a kernel of more programs than its SMs; the traces of all ranks are gathered into one.
    ``nsm`` is what this rank's context reports (the whole GPU, or a caller's MPS limit where ranks share it) while
    the SM ids the profiler records are the GPU's own (any of its physical SMs)."""
    from triton_dist.runtime.shared_gpu import physical_sm_count

    nsm = torch.cuda.get_device_properties(DEVICE).multi_processor_count  # the context's SMs
    # SM ids lie below the GPU's physical SM count (NVML); without NVML: nsm where the GPU is this rank's alone, no
    # bound where it is shared
    sm_ids_below = physical_sm_count(DEVICE) or (1 << 30 if gpu_shared() else nsm)
    nprog = 2 * nsm + 3  # more programs than SMs: several programs per SM
    buf = alloc_profiler_buffer(nprog * 8)
    x = torch.ones(nprog * 1024, device="cuda")
    profiled[(nprog, )](buf, x, ITERS=2000, BLOCK=1024, ENABLE=False)  # warm up (compile) the enabled variant too
    profiled[(nprog, )](buf, x, ITERS=2000, BLOCK=1024, ENABLE=True)
    torch.cuda.synchronize()
    from triton_dist.tools.profiler import reset_profiler_buffer

    reset_profiler_buffer(buf)
    offset = measure_clock_offset()
    group.barrier()
    t0 = time.time_ns()
    profiled[(nprog, )](buf, x, ITERS=2000, BLOCK=1024, ENABLE=True)
    torch.cuda.synchronize()
    t1 = time.time_ns()
    assert int(buf[layout.W_TICKS]) == 10**9 and int(buf[layout.W_GRID]) == nprog | (1 << 32)
    tracks = parse_to_tracks(buf, rank=RANK, clock_offset_ns=offset)
    assert [t.program_id for t in tracks] == list(range(nprog))
    assert len({t.sm_id for t in tracks}) > nsm // 2 and all(0 <= t.sm_id < sm_ids_below for t in tracks)
    for t in tracks:
        assert t.unmatched == 0 and [k.task_type for k in t.tasks] == [0, 1, 2]
        assert all(k.duration_ns >= 0 for k in t.tasks) and t.tasks[1].duration_ns > 0
        assert t.tasks[0].end_ns <= t.tasks[1].start_ns <= t.tasks[1].end_ns <= t.tasks[2].start_ns
        # aligned to host real time: inside the host window around the launch (+- 200 us of measurement error)
        assert t0 - 200_000 <= t.tasks[0].start_ns and t.tasks[2].end_ns <= t1 + 200_000, (t0, t1, t.tasks)
    profiles = gather_profiles(buf, offset)
    assert [p.rank for p in profiles] == list(range(WORLD))
    if RANK == 0:
        os.makedirs(RESULTS, exist_ok=True)
        path = os.path.join(RESULTS, f"profiler_trace_{WORLD}ranks.json")
        export_to_perfetto_trace(profiles, NAMES, path)
        trace = load_trace(path)
        pids = {e["pid"] for e in trace["traceEvents"] if e["ph"] == "X"}
        assert pids == set(range(1, WORLD + 1))
        assert sum(e["ph"] == "X" for e in trace["traceEvents"]) == 3 * nprog * WORLD
        all_tracks = [t for p in profiles for t in parse_to_tracks(p.words, p.rank, p.clock_offset_ns)]
        if _have_matplotlib():
            render_gantt_png([t for t in all_tracks if t.program_id < 24], os.path.join(RESULTS, "profiler_gantt.png"),
                             task_names=NAMES, title=f"{WORLD} ranks x 24 of {nprog} programs (H200)")


def _have_matplotlib():
    try:
        import matplotlib  # noqa: F401
        return True
    except ImportError:
        return False


# ------------------------------------------------------------------------------------------------ AOT from C

@aot_compile_spaces({
    "scale_fp32": {
        "signature": "*fp32:16, *fp32:16, fp32, i32, %BLOCK",
        "grid": ["(n + %BLOCK - 1) / %BLOCK", "1", "1"],
        "triton_algo_infos": [{"BLOCK": 256, "num_warps": 4, "num_stages": 1},
                              {"BLOCK": 1024, "num_warps": 8, "num_stages": 1}],
    },
})
@triton_dist.jit
def scale(x_ptr, y_ptr, alpha, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=m) * alpha, mask=m)


MAIN_C = r"""
#include <stdio.h>
#include <stdlib.h>
#include <cuda.h>
#include "scale_fp32.h"
#define CHECK(x) do { CUresult r_ = (x); if (r_ != CUDA_SUCCESS) { const char *s_; cuGetErrorString(r_, &s_); \
  fprintf(stderr, "%s failed: %s\n", #x, s_); return 1; } } while (0)
int main(int argc, char **argv) {
  int dev_idx = argc > 1 ? atoi(argv[1]) : 0;
  const int n = 100003;
  CUdevice dev; CUcontext ctx; CUdeviceptr x, y; float *h = malloc(n * sizeof(float));
  CHECK(cuInit(0)); CHECK(cuDeviceGet(&dev, dev_idx));
  CHECK(cuDevicePrimaryCtxRetain(&ctx, dev)); CHECK(cuCtxSetCurrent(ctx));
  CHECK(cuMemAlloc(&x, n * sizeof(float))); CHECK(cuMemAlloc(&y, n * sizeof(float)));
  for (int i = 0; i < n; i++) h[i] = (float)i;
  CHECK(cuMemcpyHtoD(x, h, n * sizeof(float)));
  if (scale_fp32(NULL, x + 4, y, 2.0f, n, 0) != CUDA_ERROR_INVALID_VALUE) { fprintf(stderr, "no alignment check\n"); return 1; }
  for (int algo = 0; algo < scale_fp32_get_num_algos(); algo++) {
    CHECK(cuMemsetD32(y, 0, n));
    CHECK(scale_fp32(NULL, x, y, 3.0f, n, algo));
    CHECK(cuCtxSynchronize());
    CHECK(cuMemcpyDtoH(h, y, n * sizeof(float)));
    for (int i = 0; i < n; i++) if (h[i] != 3.0f * (float)i) { fprintf(stderr, "algo %d: y[%d]=%f\n", algo, i, h[i]); return 1; }
  }
  unload_scale_fp32();
  printf("AOT OK %d algos\n", scale_fp32_get_num_algos());
  return 0;
}
"""


def test_aot_kernel_launched_from_c(tmp_path):
    cc = shutil.which("gcc") or shutil.which("cc")
    if cc is None:
        pytest.skip("no C compiler")
    major, minor = torch.cuda.get_device_capability(DEVICE)
    files = aot_compile_kernel(scale, tmp_path, target=f"cuda:{major}{minor}")
    (tmp_path / "main.c").write_text(MAIN_C)
    inc = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "include")
    libdirs = [d for d in ("/usr/local/cuda/lib64/stubs", "/usr/lib/x86_64-linux-gnu", "/usr/local/cuda/lib64")
               if os.path.isdir(d)]
    sources = [str(tmp_path / "main.c")] + [str(f) for f in files if str(f).endswith(".c")]
    cmd = [cc, "-std=c99", "-O1", "-I", inc, "-I", str(tmp_path), *sources, "-o", str(tmp_path / "prog")]
    cmd += [f"-L{d}" for d in libdirs] + ["-lcuda"]
    if ctypes.util.find_library("cuda") is None and not libdirs:
        pytest.skip("libcuda not found for linking")
    r = subprocess.run(cmd, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    # this rank's GPU (a new CUDA process: an MPS client too where ranks share the GPU; it does not fault)
    r = subprocess.run([str(tmp_path / "prog"), str(DEVICE)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and "AOT OK 2 algos" in r.stdout, (r.stdout, r.stderr)
