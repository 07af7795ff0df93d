"""SIMT regions written against the reference's ``triton_dist.language`` path (issue 16, point 4).

The reference exports ``ld_vector`` / ``st_vector`` from ``triton_dist.language`` (besides
``triton_dist.language.extra.language_extra``), so its SIMT kernels call ``dl.ld_vector(ptr, vec_size=...)`` and
``dl.st_vector(ptr, vec)`` inside ``with dl.simt_exec_region() as (tid, n)``. Here: the names, a kernel of that
shape compiled for cuda:90 and hip:gfx942 (128-bit accesses), and run on the simulator.
"""
import pytest
import torch
import triton
import triton.language as tl

import triton_dist.language as dl
from triton_dist.language.extra import language_extra as le
from triton_dist.target import parse_target
from triton_dist.tools.compile import CompileRequest, compile_kernel

from test_language_extra import _jit  # triton.jit with the interpreter knob forced for the definition


def _vec_axpb(x, y, out, n, BLOCK: tl.constexpr, VEC: tl.constexpr):
    """out = 3 * x + y - 1, per thread, VEC elements at a time (128-bit accesses for fp32 x 4), scalar tail."""
    pid = tl.program_id(0)
    start = pid * BLOCK
    end = tl.minimum(n, start + BLOCK)
    whole = start + (end - start) // VEC * VEC
    with dl.simt_exec_region() as (t, nthreads):
        for j in range(start + t * VEC, whole, nthreads * VEC):
            vx = dl.ld_vector(x + j, vec_size=VEC)
            vy = dl.ld_vector(y + j, vec_size=VEC)
            dl.st_vector(out + j, vx * 3.0 + vy - 1.0)
        for j in range(whole + t, end, nthreads):
            sx = dl.ld_vector(x + j, vec_size=1)
            sy = dl.ld_vector(y + j, vec_size=1)
            dl.st_vector(out + j, sx * 3.0 + sy - 1.0)


gpu_vec_axpb = _jit(False)(_vec_axpb)
sim_vec_axpb = _jit(True)(_vec_axpb)


def test_ld_vector_and_st_vector_are_exported_at_the_reference_path():
    assert dl.ld_vector is le.ld_vector and dl.st_vector is le.st_vector
    assert "ld_vector" in dl.__all__ and "st_vector" in dl.__all__


@pytest.mark.parametrize("target,stage,needles", [
    ("cuda:90", "ptx", ["%tid.x", "ld.relaxed.gpu.global.v4.b32", "st.relaxed.gpu.global.v4.b32",
                        "ld.relaxed.gpu.global.b32", "st.relaxed.gpu.global.b32"]),
    ("hip:gfx942", "amdgcn", ["global_load_dwordx4", "global_store_dwordx4", "global_load_dword ",
                              "global_store_dword "]),
])
def test_reference_style_simt_kernel_compiles(target, stage, needles):
    asm = compile_kernel(CompileRequest(gpu_vec_axpb, parse_target(target), ["*fp32:16", "*fp32:16", "*fp32:16", "i32"],
                                        {"BLOCK": 256, "VEC": 4})).asm[stage]
    for needle in needles:
        assert needle in asm, needle


@pytest.mark.sim
def test_reference_style_simt_kernel_runs_on_the_simulator():
    from triton_dist.runtime.sim.interpreter import install_interpreter_fixes

    install_interpreter_fixes()  # what turning the simulator on does (runtime-bound range loops)
    n = 1000 + 3  # a tail in the last program
    x = torch.randn(n)
    y = torch.randn(n)
    out = torch.full((n, ), float("nan"))
    sim_vec_axpb[(triton.cdiv(n, 256), )](x, y, out, n, BLOCK=256, VEC=4)
    torch.testing.assert_close(out, 3.0 * x + y - 1.0)
