"""Tiles indexed per thread inside ``simt_exec_region`` (issue 16, point 4; language/_simt_tiles.py).

Before, ``tile[i, j]`` with scalar indices in a region failed with ``ValueError: unsupported tensor index`` and
``buf[j, i] = v`` with ``__setitem__ is not supported in triton``. Now the region backs such tiles with a static
shared-memory scratch (CUDA shared memory / AMD LDS) that the compile step links in; the simulator indexes its numpy
data. Compiled here for cuda:90 (to cubin) and hip:gfx942 (to hsaco), run on the simulator; the GPU tier is
test/python/gpu/test_gpu_simt_tiles.py.
"""
import importlib
import os
import re

import pytest
import torch
import triton
import triton.language as tl
from triton.compiler.errors import CompilationError

import triton_dist.language as dl
from triton_dist import _compat
from triton_dist.runtime import shmem_link
from triton_dist.target import parse_target
from triton_dist.tools.compile import CompileRequest, compile_kernel

import _simt_tile_kernels as K

TRANSPOSE_SIG = ["*fp32:16", "*fp32:16", "32"]
GATHER_SIG = ["*fp16:16", "*i32:16", "*fp16:16", "*i32:16", "64"]


def _asm(kernel, sig, target, stage, **defines):
    return compile_kernel(CompileRequest(kernel, parse_target(target), sig, defines)).asm[stage]


# --------------------------------------------------------------------------------------------------- compile

def test_transpose_reaches_cubin_through_shared_memory():
    ptx = _asm(K.transpose_tile, TRANSPOSE_SIG, "cuda:90", "ptx")
    assert re.search(r"\.shared \.align 16 \.b8 triton_dist_simt_scratch\[8192\];", ptx)  # two 4 KiB tiles
    assert "st.volatile.shared.b32" in ptx and "ld.volatile.shared.b32" in ptx
    assert ptx.count("bar.sync") >= 3  # before and after the spill, before the reload
    assert "triton_dist_simt_" not in ptx.replace("triton_dist_simt_scratch", "")  # every call inlined
    cubin = _asm(K.transpose_tile, TRANSPOSE_SIG, "cuda:90", "cubin")
    assert isinstance(cubin, bytes) and cubin


def test_transpose_reaches_hsaco_through_lds():
    gcn = _asm(K.transpose_tile, TRANSPOSE_SIG, "hip:gfx942", "amdgcn")
    assert "ds_write_b32" in gcn and "ds_read_b32" in gcn and "s_barrier" in gcn
    assert int(re.search(r"\.amdhsa_group_segment_fixed_size (\d+)", gcn).group(1)) >= 8192
    hsaco = _asm(K.transpose_tile, TRANSPOSE_SIG, "hip:gfx942", "hsaco")
    assert isinstance(hsaco, bytes) and hsaco


@pytest.mark.parametrize("target,stage,needles", [
    ("cuda:90", "ptx", ["st.volatile.shared.b16", "ld.volatile.shared.b16", "st.volatile.shared.b8",
                        "ld.volatile.shared.b8", "st.volatile.shared.b32", "ld.volatile.shared.b32"]),
    ("hip:gfx942", "amdgcn", ["ds_read_u16", "ds_write_b8", "ds_read_u8", "ds_write_b32", "ds_read_b32"]),
])
def test_fp16_int1_int32_tiles_and_augmented_assignment_compile(target, stage, needles):
    asm = _asm(K.gather_scale_count, GATHER_SIG, target, stage)
    for needle in needles:
        assert needle in asm, needle


@pytest.mark.parametrize("target", ["cuda:90", "hip:gfx942"])
def test_two_regions_share_one_scratch_in_a_dist_jit_kernel(target):
    llir = compile_kernel(CompileRequest(K.dist_two_regions, parse_target(target), ["*fp32:16", "*fp32:16", "16"],
                                         stop_after="llir")).asm["llir"]
    # region 1: two 1 KiB tiles, region 2: one; one buffer of the larger size
    assert len(re.findall(r"^@triton_dist_simt_scratch = internal addrspace\(3\) global \[2048 x i8\]", llir,
                          re.M)) == 1, re.findall(r"^@triton_dist_simt_scratch.*$", llir, re.M)


def test_a_region_without_tile_indexing_is_unchanged(monkeypatch):
    """Regions that index no tile (every existing SIMT kernel) emit no barrier and link nothing new."""
    from test_simt_reference_api import gpu_vec_axpb

    sig = ["*fp32:16", "*fp32:16", "*fp32:16", "i32"]
    with_step = _asm(gpu_vec_axpb, sig, "cuda:90", "ptx", BLOCK=256, VEC=4)
    monkeypatch.setattr(triton.knobs.runtime, "add_stages_inspection_hook", None)
    assert with_step == _asm(gpu_vec_axpb, sig, "cuda:90", "ptx", BLOCK=256, VEC=4)
    assert "bar.sync" not in with_step and ".shared" not in with_step


def _gpu_kernel(src):
    """A ``triton.jit`` kernel from source text (compile-error tests), defined with the interpreter off."""
    import linecache
    import textwrap

    src = textwrap.dedent(src)
    name = re.search(r"def (\w+)", src).group(1)
    filename = f"<simt-tiles-{name}>"
    linecache.cache[filename] = (len(src), None, src.splitlines(True), filename)
    scope = {"tl": tl, "dl": dl, "triton": triton}
    exec(compile(src, filename, "exec"), scope)
    prev = triton.knobs.runtime.interpret
    triton.knobs.runtime.interpret = False
    try:
        return triton.jit(scope[name])
    finally:
        triton.knobs.runtime.interpret = prev


@pytest.mark.parametrize("body,match", [
    ("out[t, :] = 1.0", "one scalar index per dimension"),
    ("out[t] = 1.0", "2 indices needed|1 indices given"),
    ("out[0, 8] = 1.0", "index 8 out of range for dimension 1"),
    ("out[t, 0] = tl.sum(out)", "per-thread view of a tile"),
])
def test_bad_tile_indexing_is_a_compile_error(body, match):
    k = _gpu_kernel(f"""
        def bad(dst):
            rows = tl.arange(0, 8)
            out = tl.zeros((8, 8), tl.float32)
            with dl.simt_exec_region() as (t, n):
                {body}
            tl.store(dst + rows[:, None] * 8 + rows[None, :], out)
    """)
    with pytest.raises(CompilationError) as err:
        _asm(k, ["*fp32:16"], "cuda:90", "ttir")
    # the message may sit in the error itself or in its cause (Triton 3.7+ re-raises a nested call's error with only
    # the location): _compat.compilation_error_line reads both
    assert re.search(match, _compat.compilation_error_line(err.value)), _compat.compilation_error_line(err.value)


def test_pointer_tiles_are_refused_with_the_fix():
    k = _gpu_kernel("""
        def ptr_tile(dst):
            ptrs = dst + tl.arange(0, 8)
            with dl.simt_exec_region() as (t, n):
                tl.store(ptrs[t], 1.0)
    """)
    with pytest.raises(CompilationError, match=r"tile 'ptrs' of pointer<fp32> cannot be indexed per thread"):
        _asm(k, ["*fp32:16"], "cuda:90", "ttir")


def _square_tiles_kernel(n, extra_rows=0):
    """A region that indexes an ``n x n`` fp32 tile (and an ``extra_rows x n`` one): ``4 * n * (n + extra_rows)``
    bytes of scratch."""
    extra = (f"""
            acc = tl.zeros(({extra_rows}, {n}), tl.float32)""" if extra_rows else "")
    extra_use = ("""
                    acc[j % {r}, j] = 2.0""".format(r=extra_rows) if extra_rows else "")
    extra_store = (f"""
            tl.store(dst + tl.arange(0, {extra_rows})[:, None] * {n} + rows[None, :], acc)""" if extra_rows else "")
    return _gpu_kernel(f"""
        def big(dst):
            rows = tl.arange(0, {n})
            out = tl.zeros(({n}, {n}), tl.float32){extra}
            with dl.simt_exec_region() as (t, n):
                for j in range(t, {n}, n):
                    out[j, j] = 1.0{extra_use}
            tl.store(dst + rows[:, None] * {n} + rows[None, :], out){extra_store}
    """)


def test_tiles_above_48k_use_the_blocks_dynamic_shared_memory():
    """96 KiB of tiles (more than a block may declare statically, as an H200 block gets 227 KiB): compiled for
    cuda:90 to a cubin, the scratch in Triton's dynamic shared memory and counted in the kernel's shared size (which
    Triton's launcher requests, opting in above 48 KiB)."""
    k = _square_tiles_kernel(128, extra_rows=64)
    ck = compile_kernel(CompileRequest(k, parse_target("cuda:90"), ["*fp32:16"]))
    assert ck.metadata.shared >= 96 * 1024
    ptx = ck.asm["ptx"]
    assert "triton_dist_simt_scratch" not in ptx and re.search(r"\.extern \.shared \.align 16 \.b8 global_smem\[\];",
                                                               ptx)
    assert "st.volatile.shared.b32" in ptx and isinstance(ck.asm["cubin"], bytes) and ck.asm["cubin"]
    with pytest.raises(CompilationError, match=r"need 98304 bytes of shared memory, more than the 65536 bytes a block "
                                               r"gets on this target"):
        _asm(k, ["*fp32:16"], "hip:gfx942", "ttir")
    _asm(_square_tiles_kernel(128), ["*fp32:16"], "hip:gfx942", "ttir")  # 64 KiB of LDS: fits exactly


def test_tiles_larger_than_the_target_gives_a_block_are_refused():
    with pytest.raises(CompilationError, match=r"need 262144 bytes of shared memory, more than the 232448 bytes a "
                                               r"block gets on this target"):
        _asm(_square_tiles_kernel(256), ["*fp32:16"], "cuda:90", "ttir")
    with pytest.raises(CompilationError, match=r"more than the 101376 bytes"):  # sm_89: 99 KiB
        _asm(_square_tiles_kernel(128, extra_rows=128), ["*fp32:16"], "cuda:89", "ttir")


def test_triton_memory_and_tiles_together_are_checked_at_link():
    llir = ("@triton_dist_simt_scratch = internal addrspace(3) global [229376 x i8] undef, align 16\n"
            "@global_smem = external addrspace(3) global [0 x i8], align 16\n"
            "define void @k() {\n  store volatile i32 0, ptr addrspace(3) @triton_dist_simt_scratch, align 4\n"
            "  ret void\n}\n")
    with pytest.raises(ValueError, match=r"own shared memory \(16384 bytes\) and its per-thread tiles \(229376 "
                                         r"bytes\) need 245760 bytes, more than the 232448 bytes a block gets on sm_90"):
        shmem_link.move_simt_scratch_to_dynamic_shared(llir, 16384, 90)
    text, shared = shmem_link.move_simt_scratch_to_dynamic_shared(llir.replace("229376", "98304"), 16380, 90)
    assert shared == 16384 + 98304 and "triton_dist_simt_scratch" not in text
    assert "store volatile i32 0, ptr addrspace(3) getelementptr (i8, ptr addrspace(3) @global_smem, i32 16384)" in text
    small = llir.replace("229376", "8192")
    assert shmem_link.move_simt_scratch_to_dynamic_shared(small, 100, 90) == (small, 100)  # static: unchanged


def test_library_holds_one_buffer_of_the_largest_size():
    text = shmem_link.simt_tiles_library_text("cuda", {4096, 8192})
    assert text.count("addrspace(3) global") == 1 and "[8192 x i8]" in text
    assert "@triton_dist_simt_tiles_4096(" in text and "@triton_dist_simt_tiles_8192(" in text
    assert shmem_link.simt_tile_sizes('x {libname = "triton_dist_simt", symbol = "triton_dist_simt_tiles_4096"} '
                                      'y symbol = "triton_dist_simt_ld_32"') == {4096}
    assert 'target triple = "amdgcn-amd-amdhsa"' in shmem_link.simt_tiles_library_text("hip", {16})
    p1 = shmem_link.simt_tiles_library("cuda", {4096})
    assert p1 == shmem_link.simt_tiles_library("cuda", {4096}) and os.path.isfile(p1)


# ------------------------------------------------------------------------------------------------- simulator

@pytest.fixture
def sim_kernels():
    from triton_dist.runtime.sim.interpreter import install_interpreter_fixes

    prev_env, prev = os.environ.get("TRITON_INTERPRET"), triton.knobs.runtime.interpret
    _compat.set_interpret(True)
    install_interpreter_fixes()
    try:
        yield importlib.reload(K)
    finally:
        triton.knobs.runtime.interpret = prev
        if prev_env is None:
            os.environ.pop("TRITON_INTERPRET", None)
        else:
            os.environ["TRITON_INTERPRET"] = prev_env
        importlib.reload(K)


@pytest.mark.sim
def test_sim_transpose(sim_kernels):
    x = torch.randn(32, 32)
    y = torch.full_like(x, float("nan"))
    sim_kernels.transpose_tile[(1, )](x, y, T=32)
    assert torch.equal(y, x.T.contiguous())


@pytest.mark.sim
def test_sim_gather_counts_and_flags(sim_kernels):
    n = 64
    src = torch.randn(n).to(torch.float16)
    idx = torch.randint(0, n, (n, ), dtype=torch.int32)
    dst = torch.zeros(n, dtype=torch.float16)
    hits = torch.zeros(n, dtype=torch.int32)
    sim_kernels.gather_scale_count[(1, )](src, idx, dst, hits, N=n)
    assert torch.equal(dst, src[idx.long()] * 2)
    assert torch.equal(hits, torch.bincount(idx.long(), minlength=n).to(torch.int32))


@pytest.mark.sim
def test_sim_two_regions_in_a_dist_jit_kernel(sim_kernels):
    x = torch.randn(16, 16)
    y = torch.zeros_like(x)
    sim_kernels.dist_two_regions[(1, )](x, y, T=16)
    assert torch.equal(y, x.T.contiguous() + 1.0)


@pytest.mark.sim
def test_sim_item_assignment_outside_a_region_is_refused(sim_kernels):
    @triton.jit
    def outside(dst):
        out = tl.zeros((4, ), tl.float32)
        out[1] = 2.0
        tl.store(dst + tl.arange(0, 4), out)

    with pytest.raises(Exception, match="only supported inside simt_exec_region"):
        outside[(1, )](torch.zeros(4))


@pytest.mark.sim
def test_sim_refuses_pointer_tiles_like_the_gpu(sim_kernels):
    import triton_dist.language as dl

    @triton.jit
    def ptr_tile(dst):
        ptrs = dst + tl.arange(0, 8)
        with dl.simt_exec_region() as (t, n):
            for i in range(t, 8, n):
                tl.store(ptrs[i], 1.0)

    with pytest.raises(Exception, match="cannot be indexed per thread"):
        ptr_tile[(1, )](torch.zeros(8))
