"""Plain ``@triton.jit`` kernels that call ``dl.*`` / ``libshmem_device`` (issue 16, point 1; runtime/shmem_link.py).

Before, only ``@triton_dist.jit`` offered the SHMEM device bitcode: a stock kernel calling ``dl.rank()`` failed in
ptxas with ``Unresolved extern function 'nvshmem_my_pe'``. ``import triton_dist`` now adds a compile step (Triton's
stage-inspection hook) that links the library into modules that call it, and the module-init load hook. A kernel
without SHMEM calls compiles to identical LLVM IR / PTX / cubin, and nothing is added to the launch path.
"""
import os
import re
import subprocess
import sys

import pytest
import triton
from triton.runtime.jit import JITFunction

import triton_dist  # noqa: F401  (installs the hooks)
from triton_dist.backends.nvidia.shmem_state import ptx_uses_nvshmem
from triton_dist.runtime import bitcode, module_init, shmem_link
from triton_dist.target import parse_target, to_gpu_target

import _plain_jit_kernels as K

EXCHANGE_SIG = ["*fp32:16", "*i64:16", "*fp32:16", "128"]

needs_nvshmem = pytest.mark.skipif(bitcode.nvshmem_bitcode_or_none() is None,
                                   reason="nvidia-nvshmem wheel (libnvshmem_device.bc) not installed")


@pytest.fixture(autouse=True)
def _bitcode_on(monkeypatch):
    monkeypatch.delenv("TRITON_DIST_NO_SHMEM_BITCODE", raising=False)


def _compile(kernel, sig, target="cuda:90"):
    """``triton.compile`` of a plain kernel with NO options of ours (what ``kernel[grid](...)`` compiles), always
    compiled (a cache hit would run no stage)."""
    from triton_dist.tools.compile import CompileRequest, build_source

    req = CompileRequest(kernel, parse_target(target), sig)
    old = triton.knobs.compilation.always_compile
    triton.knobs.compilation.always_compile = True
    try:
        return triton.compile(build_source(req), target=to_gpu_target(req.target), options={})
    finally:
        triton.knobs.compilation.always_compile = old


def test_kernels_are_stock_jit_functions():
    assert type(K.plain_exchange) is JITFunction and type(K.plain_no_shmem) is JITFunction


@needs_nvshmem
def test_without_the_link_step_a_plain_kernel_fails_in_ptxas(monkeypatch):
    """The issue's failure, reproduced with the hook taken out of Triton's slot."""
    monkeypatch.setattr(triton.knobs.runtime, "add_stages_inspection_hook", None)
    with pytest.raises(Exception, match=r"Unresolved extern function 'nvshmemx?_\w+'"):
        _compile(K.plain_exchange, EXCHANGE_SIG)


@needs_nvshmem
def test_plain_kernel_with_dl_and_libshmem_reaches_cubin_for_cuda():
    ck = _compile(K.plain_exchange, EXCHANGE_SIG)
    ptx = ck.asm["ptx"]
    assert ptx_uses_nvshmem(ptx)  # the module needs (and gets, at load) nvshmemx_cumodule_init
    assert isinstance(ck.asm["cubin"], bytes) and len(ck.asm["cubin"]) > 0
    assert not re.search(r"^\s*declare [^\n]*@nvshmemx?_", ck.asm["llir"], re.M), "SHMEM calls left unresolved"
    # the slim library was linked (every function called is in triton_dist's set)
    assert dict(ck.metadata.extern_libs).get("libnvshmem_device") is None  # the kernel's own options: untouched


@needs_nvshmem
def test_function_outside_the_slim_set_links_the_whole_bitcode():
    full = bitcode.find_nvshmem_bitcode()
    assert shmem_link.libraries_for("cuda", 90, {"nvshmem_uint64_test"}) == {"libnvshmem_device": full}
    assert shmem_link.libraries_for("cuda", 90, {"nvshmem_my_pe", "nvshmemx_putmem_signal_block"}) == \
        {"libnvshmem_device": bitcode.nvshmem_link_library(full)}
    ck = _compile(K.plain_outside_slim, ["*u64:16", "*i32:16", "i64"])
    assert isinstance(ck.asm["cubin"], bytes) and len(ck.asm["cubin"]) > 0


@needs_nvshmem
def test_kernel_without_shmem_calls_compiles_identically_and_links_nothing(monkeypatch):
    """Same LLVM IR, PTX and cubin with and without the hook; the link step never looks for a library."""
    sig = ["*fp32:16", "*fp32:16", "i32", "128"]
    with_hook = _compile(K.plain_no_shmem, sig)

    def no_lookup(*a, **k):
        raise AssertionError("a kernel without SHMEM calls looked for a SHMEM library")

    monkeypatch.setattr(shmem_link, "libraries_for", no_lookup)
    again = _compile(K.plain_no_shmem, sig)
    monkeypatch.setattr(triton.knobs.runtime, "add_stages_inspection_hook", None)
    stock = _compile(K.plain_no_shmem, sig)
    for stage in ("llir", "ptx", "cubin"):
        assert with_hook.asm[stage] == stock.asm[stage] == again.asm[stage], stage
    assert "nvshmem" not in with_hook.asm["ptx"]


def test_launch_path_is_untouched():
    """What a launch of a stock kernel runs is Triton's own: no launch hook, no JIT cache hook, JITFunction.run
    unchanged. The only hooks are the compile-time stage hook and the load hook (once per module load)."""
    import triton.runtime.jit as tj

    rt = triton.knobs.runtime
    assert not rt.launch_enter_hook.calls and not rt.launch_exit_hook.calls
    assert rt.jit_cache_hook is None and rt.jit_post_compile_hook is None
    assert tj.JITFunction.run.__module__ == "triton.runtime.jit"
    assert getattr(rt.add_stages_inspection_hook, shmem_link.LINK_HOOK_MARK, False)
    assert module_init._on_kernel_load in rt.kernel_load_end_hook.calls


def test_hip_plain_kernel_links_rocshmem_and_assembles(tmp_path, monkeypatch):
    from _rocshmem_stub import write_stub

    monkeypatch.setattr(bitcode, "rocshmem_bitcode_or_none", lambda arch=None: write_stub(tmp_path))
    ck = _compile(K.plain_exchange, EXCHANGE_SIG, target="hip:gfx942")
    assert not re.findall(r"declare [^\n]*@rocshmem\w*", ck.asm["llir"]), "rocSHMEM calls left unresolved"
    assert isinstance(ck.asm["hsaco"], bytes) and len(ck.asm["hsaco"]) > 0
    monkeypatch.setattr(triton.knobs.runtime, "add_stages_inspection_hook", None)
    from triton_dist.tools.compile import CompileRequest, compile_kernel

    stock = compile_kernel(CompileRequest(K.plain_exchange, parse_target("hip:gfx942"), EXCHANGE_SIG,
                                          stop_after="llir")).asm["llir"]
    assert re.findall(r"declare [^\n]*@rocshmem\w*", stock)  # before: left unresolved


def test_hip_kernel_without_rocshmem_calls_is_identical(tmp_path, monkeypatch):
    from _rocshmem_stub import write_stub

    monkeypatch.setattr(bitcode, "rocshmem_bitcode_or_none", lambda arch=None: write_stub(tmp_path))
    sig = ["*fp32:16", "*fp32:16", "i32", "128"]
    with_hook = _compile(K.plain_no_shmem, sig, target="hip:gfx942").asm
    monkeypatch.setattr(triton.knobs.runtime, "add_stages_inspection_hook", None)
    stock = _compile(K.plain_no_shmem, sig, target="hip:gfx942").asm
    assert with_hook["llir"] == stock["llir"] and with_hook["amdgcn"] == stock["amdgcn"]
    assert "rocshmem" not in with_hook["amdgcn"]


def test_shmem_symbols_are_read_from_ttgir_extern_calls():
    ttgir = ('%0 = tt.extern_elementwise  {libname = "libnvshmem_device", libpath = "", pure = false, '
             'symbol = "nvshmem_my_pe"} : () -> i32\n'
             '%1 = tt.extern_elementwise %a {libname = "x", libpath = "", pure = true, symbol = "nvshmemx_barrier_all_'
             'block"} : (i32) -> i32\n'
             '%2 = tt.extern_elementwise %a {libname = "libdevice", libpath = "", pure = true, symbol = "__nv_expf"}\n'
             '%3 = tt.extern_elementwise  {libname = "rocshmem", libpath = "", pure = false, symbol = "rocshmem_n_pes"}')
    assert shmem_link.shmem_symbols(ttgir, "cuda") == {"nvshmem_my_pe", "nvshmemx_barrier_all_block"}
    assert shmem_link.shmem_symbols(ttgir, "hip") == {"rocshmem_n_pes"}
    assert shmem_link.shmem_symbols(ttgir, "other") == frozenset()
    assert shmem_link.shmem_symbols('%0 = "nvshmem_my_pe"', "cuda") == frozenset()  # only called symbols


class _FakeBackend:
    class target:
        backend = "cuda"
        arch = 90


class _Opts:
    def __init__(self, libs):
        self.extern_libs = tuple(libs.items())


def test_triton_dist_jit_kernels_keep_their_own_library(monkeypatch):
    """Options that already offer the SHMEM library (``@triton_dist.jit``, the compile tool) are left alone: the
    stage runs unchanged even for a module calling NVSHMEM, so DistJIT's own slim / full retry is unchanged."""
    seen = []
    stages = {"llir": lambda src, md: seen.append(src) or "stock"}
    monkeypatch.setattr(shmem_link, "libraries_for", lambda *a: pytest.fail("looked for a library"))
    shmem_link._wrap_llir_stage(_FakeBackend, stages, _Opts({"libnvshmem_device": "/x.bc"}), 90)
    ttgir = 'tt.extern_elementwise {libname = "libnvshmem_device", libpath = "", symbol = "nvshmem_my_pe"}'
    assert stages["llir"](ttgir, {}) == "stock" and seen == [ttgir]


def test_install_is_idempotent_and_keeps_a_previous_hook(monkeypatch):
    calls = []

    def user_hook(backend, stages, options, language, capability):
        calls.append(stages.get("llir"))

    monkeypatch.setattr(triton.knobs.runtime, "add_stages_inspection_hook", user_hook)
    shmem_link.install()
    shmem_link.install()
    ours = triton.knobs.runtime.add_stages_inspection_hook
    assert getattr(ours, shmem_link.LINK_HOOK_MARK) and ours is not user_hook
    stock = object()
    stages = {"llir": stock}
    ours(_FakeBackend, stages, _Opts({}), None, 90)
    assert len(calls) == 1 and calls[0] is not stock  # the user's hook ran after ours, on our wrapper
    assert module_init._on_kernel_load in triton.knobs.runtime.kernel_load_end_hook.calls


def test_import_installs_both_hooks_without_a_gpu():
    code = ("import triton, triton_dist; from triton_dist.runtime import module_init, shmem_link; "
            "rt = triton.knobs.runtime; "
            "print(getattr(rt.add_stages_inspection_hook, shmem_link.LINK_HOOK_MARK, False), "
            "rt.kernel_load_end_hook.calls == [module_init._on_kernel_load], "
            "len(rt.launch_enter_hook.calls))")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path), CUDA_VISIBLE_DEVICES="")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env)
    assert res.returncode == 0, res.stderr
    assert res.stdout.split() == ["True", "True", "0"]


# ------------------------------------------------------------------------------------------------ simulator

try:
    from conftest_sim import sim_ranks  # noqa: F401  (fixture)
    _HAVE_POOL = True
except Exception:  # pragma: no cover
    _HAVE_POOL = False


def _rank_plain_exchange(block):
    """Inside a simulator rank process: the plain @triton.jit kernel, as the GPU test runs it."""
    import torch

    import _plain_jit_kernels as PK
    from triton_dist.runtime.sim.backend import SimBackend

    assert triton.knobs.runtime.interpret  # the rank process interprets what it defines
    b = SimBackend()
    data = b.create_tensor((3 * block, ), torch.float32)
    sig = b.create_tensor((2, ), torch.int64)
    sig.zero_()
    data.fill_(-1)
    data[block:2 * block] = torch.arange(block, dtype=torch.float32) + 100 * (b.my_pe() + 1)
    out = torch.zeros(2 * block + 2, dtype=torch.float32)
    b.barrier_all_on_stream()
    PK.plain_exchange[(1, )](data, sig, out, BLOCK=block)
    b.barrier_all_on_stream()
    return out.tolist(), sig.tolist()


@pytest.mark.sim
@pytest.mark.skipif(not _HAVE_POOL, reason="simulator runtime (conftest_sim) not available")
def test_plain_kernel_runs_on_two_simulator_ranks(sim_ranks):  # noqa: F811
    block = 16
    res = sim_ranks.run(2, _rank_plain_exchange, block)
    for r, (out, sig) in enumerate(res):
        prev = (r - 1) % 2
        assert out[:block] == [float(prev * 1000 + i) for i in range(block)], (r, out[:4])
        assert out[block:2 * block] == [float(i + 100 * (prev + 1)) for i in range(block)], (r, out[block:block + 4])
        assert out[2 * block:] == [float(r), 2.0] and sig == [1, 1]


def test_link_hook_names_itself_in_the_cache_key_when_asked_with_no_arguments(monkeypatch):
    """Triton 3.7+ calls the stage-inspection hook with no arguments first and adds the returned ``(key, hash)`` to
    the compilation cache key: the link hook answers with its own name after the previous hook's (which it asks on
    3.7+, where every hook answers), and does not touch any pipeline."""
    from triton_dist import _compat

    def user_hook(*args):
        if not args:
            return "user-edit", "h"

    monkeypatch.setattr(triton.knobs.runtime, "add_stages_inspection_hook", user_hook)
    shmem_link.install()
    key, digest = triton.knobs.runtime.add_stages_inspection_hook()
    if _compat.TRITON_VERSION >= (3, 7, 0):
        assert key == "user-edit+" + shmem_link.LINK_CACHE_KEY
    else:
        assert key == shmem_link.LINK_CACHE_KEY
    assert isinstance(digest, str) and len(digest) == 64
    monkeypatch.setattr(triton.knobs.runtime, "add_stages_inspection_hook", None)
    shmem_link.install()
    assert triton.knobs.runtime.add_stages_inspection_hook()[0] == shmem_link.LINK_CACHE_KEY
