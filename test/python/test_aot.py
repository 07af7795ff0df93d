"""triton_dist.tools.aot: compile spaces -> C launchers (cubin embedded) that the system C compiler accepts against
the CUDA driver API header shipped in Triton's wheel. No GPU needed (the GPU tier launches one: gpu/test_gpu_tools.py).
"""
import os
import shutil
import subprocess

import pytest
import triton
import triton.language as tl

import triton_dist
import triton_dist.language as dl
from triton_dist.tools.aot import AotError, aot_compile_kernel, aot_compile_spaces, kernel_name_suffix, main

CC = shutil.which("gcc") or shutil.which("cc")
CUDA_INCLUDE = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "include")
HAVE_CUDA_H = os.path.isfile(os.path.join(CUDA_INCLUDE, "cuda.h"))

SCALE_SPACE = {
    "scale_fp32": {
        "signature": "*fp32:16, *fp32:16, fp32, i32, %BLOCK",
        "grid": ["(n + %BLOCK - 1) / %BLOCK", "1", "1"],
        "triton_algo_infos": [{"BLOCK": 256, "num_warps": 4, "num_stages": 1},
                              {"BLOCK": 1024, "num_warps": 8, "num_stages": 1}],
    },
}


@aot_compile_spaces(SCALE_SPACE)
@triton_dist.jit
def scale(x_ptr, y_ptr, alpha, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=m) * alpha, mask=m)


@aot_compile_spaces({"write_rank": {"signature": "*i32:16", "grid": ["1", "1", "1"],
                                    "triton_algo_infos": [{"num_warps": 1}]}})
@triton_dist.jit
def write_rank(out_ptr):
    tl.store(out_ptr, dl.rank())


@triton.jit
def plain_copy(x_ptr, y_ptr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs))


def _cc(files, tmp_path):
    if CC is None or not HAVE_CUDA_H:
        pytest.skip("no C compiler or no cuda.h in Triton's wheel")
    for f in files:
        if str(f).endswith(".c"):
            r = subprocess.run([CC, "-std=c99", "-Wall", "-Werror", "-c", "-I", CUDA_INCLUDE, "-I", str(tmp_path),
                                str(f), "-o", str(f) + ".o"], capture_output=True, text=True)
            assert r.returncode == 0, f"{f}:\n{r.stderr}"


def test_scale_compiles_to_c(tmp_path):
    files = aot_compile_kernel(scale, tmp_path, target="cuda:90")
    names = sorted(os.path.basename(str(f)) for f in files)
    assert "scale_fp32.c" in names and "scale_fp32.h" in names and len(names) == 6
    algo_c = sorted(str(f) for f in files if os.path.basename(str(f)).startswith("scale_fp32_") and
                    str(f).endswith(".c"))
    src = open(algo_c[0]).read()
    assert "cuModuleLoadData" in src and 'cuModuleGetFunction(' in src and '"scale"' in src
    assert "cuLaunchKernel(" in src and "cuLaunchCooperativeKernel" not in src
    assert "nvshmemx_cumodule_init" not in src  # does not link NVSHMEM
    assert "% 16 != 0" in src and "CUDA_ERROR_INVALID_VALUE" in src  # divisibility checked before launch
    assert "&global_scratch, &profile_scratch" in src  # Triton 3.6's trailing kernel parameters
    assert "float alpha, int32_t n" in src
    grids = sorted(line.strip() for f in algo_c for line in open(f) if "gX = " in line)
    assert grids == ["unsigned int gX = (unsigned int)((n + 1024 - 1) / 1024);",
                     "unsigned int gX = (unsigned int)((n + 256 - 1) / 256);"]
    disp = open(tmp_path / "scale_fp32.c").read()
    assert "int algo_id" in disp and "scale_fp32_get_num_algos(void) { return 2; }" in disp
    # a user program against the dispatcher's header
    (tmp_path / "user.c").write_text(
        '#include "scale_fp32.h"\n'
        "int run(CUstream s, CUdeviceptr x, CUdeviceptr y, int n) {\n"
        "  if (load_scale_fp32() != CUDA_SUCCESS) return 1;\n"
        "  return scale_fp32(s, x, y, 2.0f, n, scale_fp32_get_num_algos() - 1) != CUDA_SUCCESS;\n}\n")
    _cc(list(files) + [tmp_path / "user.c"], tmp_path)


def test_nvshmem_module_is_initialised(tmp_path):
    from triton_dist.runtime import bitcode

    if bitcode.nvshmem_bitcode_or_none() is None:
        pytest.skip("NVSHMEM device bitcode not installed")
    files = aot_compile_kernel(write_rank, tmp_path, target="cuda:90")
    (algo_c, ) = [f for f in files if os.path.basename(str(f)).startswith("write_rank_") and str(f).endswith(".c")]
    src = open(algo_c).read()
    assert "extern int nvshmemx_cumodule_init(CUmodule module);" in src
    assert src.index("cuModuleGetFunction") < src.index("nvshmemx_cumodule_init(write_rank")
    _cc(files, tmp_path)


def test_cooperative_and_cluster_launches(tmp_path):
    space = {"coop": {"signature": "*fp32:16, *fp32:16, 128", "grid": ["4", "1", "1"],
                      "triton_algo_infos": [{"num_warps": 4, "launch_cooperative_grid": True}]},
             "cluster": {"signature": "*fp32:16, *fp32:16, 128", "grid": ["4", "1", "1"],
                         "triton_algo_infos": [{"num_warps": 4, "num_ctas": 2}]}}
    files = aot_compile_kernel(plain_copy, tmp_path, target="cuda:90", spaces=space)
    srcs = {os.path.basename(str(f)).split("_")[0]: open(f).read() for f in files
            if str(f).endswith(".c") and "_w4" in str(f)}
    assert "cuLaunchCooperativeKernel(" in srcs["coop"]
    assert "cuLaunchKernelEx(" in srcs["cluster"] and "CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION" in srcs["cluster"]
    _cc(files, tmp_path)


def test_bad_spaces_are_rejected(tmp_path):
    with pytest.raises(AotError, match="missing key"):
        aot_compile_spaces({"k": {"signature": "*fp32"}})
    with pytest.raises(AotError, match="grid must be a list of 3"):
        aot_compile_spaces({"k": {"signature": "*fp32", "grid": ["1"], "triton_algo_infos": [{}]}})
    with pytest.raises(AotError, match="not a C identifier"):
        aot_compile_spaces({"bad-name": {"signature": "", "grid": ["1", "1", "1"], "triton_algo_infos": [{}]}})
    with pytest.raises(AotError, match="gives no value for 'BLOCK'"):
        aot_compile_kernel(scale, tmp_path, spaces={"s": {**SCALE_SPACE["scale_fp32"],
                                                          "triton_algo_infos": [{"num_warps": 4}]}})
    with pytest.raises(AotError, match="signature has 3 entries"):
        aot_compile_kernel(scale, tmp_path, spaces={"s": {**SCALE_SPACE["scale_fp32"],
                                                          "signature": "*fp32, *fp32, i32"}})
    with pytest.raises(AotError, match="CUDA targets only"):
        aot_compile_kernel(scale, tmp_path, target="hip:gfx942")
    with pytest.raises(AotError, match="no compile space"):
        aot_compile_kernel(plain_copy, tmp_path)


def test_suffix_is_stable_and_distinct():
    a = kernel_name_suffix("*fp32:16, i32, 256", 4, 1)
    assert a == kernel_name_suffix(["*fp32:16", "i32", "256"], 4, 1)
    assert a != kernel_name_suffix("*fp32:16, i32, 512", 4, 1) and a.endswith("_w4s1")


def test_cli(tmp_path, capsys, monkeypatch):
    # the CLI turns the interpreter off while importing the kernel file: restore it for later tests
    monkeypatch.setenv("TRITON_INTERPRET", os.environ.get("TRITON_INTERPRET", "0"))
    monkeypatch.setattr(triton.knobs.runtime, "interpret", triton.knobs.runtime.interpret)
    here = os.path.abspath(__file__)
    assert main([f"{here}:scale", "-o", str(tmp_path / "cli")]) == 0
    assert (tmp_path / "cli" / "scale_fp32.c").exists()
    assert main([f"{here}:plain_copy", "-o", str(tmp_path / "cli2")]) == 2
    assert "no compile space" in capsys.readouterr().err


def test_tools_import_is_light_and_patch_is_a_noop():
    import sys

    code = ("import sys, warnings, triton_dist.tools as t\n"
            "heavy = [m for m in ('triton_dist.tools.profiler', 'triton_dist.tools.aot', 'matplotlib') if m in sys.modules]\n"
            "assert not heavy, heavy\n"
            "assert callable(t.aot_compile_spaces) and t.Profiler.__name__ == 'Profiler'\n"
            "with warnings.catch_warnings(record=True) as w:\n"
            "    warnings.simplefilter('always')\n"
            "    assert t.apply_triton340_inductor_patch() is False\n"
            "import triton\n"
            "assert (len(w) == 1) == (triton.__version__ != '3.4.0'), w\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [os.path.join(os.path.dirname(__file__), "..", "..",
                                                                                 "python"), os.environ.get("PYTHONPATH")])))
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr


def test_aot_and_jit_agree_on_which_modules_need_nvshmem_init():
    """One rule: a module whose PTX only defines NVSHMEM's device state (the bitcode linked into a kernel that calls
    only libdevice) needs no ``nvshmemx_cumodule_init``; one whose instructions read it does."""
    import importlib

    from triton_dist.tools import aot

    tdjit = importlib.import_module("triton_dist.jit")  # the module (the package attribute is the decorator)

    defined_only = ".visible .const .align 8 .b8 nvshmemi_device_state_d[512];\n.entry k() { ret; }\n"
    used = defined_only + "ld.const.u64 %rd1, [nvshmemi_device_state_d+8];\n"
    for ptx, want in ((defined_only, False), (used, True), ("", False)):
        assert aot.module_links_nvshmem_ptx(ptx) is want and tdjit.ptx_uses_nvshmem(ptx) is want
