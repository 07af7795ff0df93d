"""triton_dist.jit on CPU: decorator forms, composition, interpreter dispatch, extern libs, cache keys, module init."""
import os
import subprocess

import pytest
import torch
import triton
from triton.runtime.jit import JITFunction

import triton_dist
import sys
import triton_dist.jit  # noqa: F401  (the module; ``triton_dist.jit`` the attribute is the decorator)
from triton_dist.runtime import bitcode, module_init
from triton_dist.runtime.state import STATE
from triton_dist.target import parse_target

import _jit_kernels as K

tdjit = sys.modules["triton_dist.jit"]


@pytest.fixture
def interpret():
    old_env, old = os.environ.get("TRITON_INTERPRET"), triton.knobs.runtime.interpret
    triton.knobs.runtime.interpret = True
    yield
    triton.knobs.runtime.interpret = old
    if old_env is None:
        os.environ.pop("TRITON_INTERPRET", None)
    else:
        os.environ["TRITON_INTERPRET"] = old_env


def test_decorator_forms():
    assert isinstance(K.scale_kernel, tdjit.DistJITFunction) and isinstance(K.scale_kernel, JITFunction)
    assert isinstance(K.scale_kernel_kw, tdjit.DistJITFunction)
    assert K.scale_kernel_kw.params[2].do_not_specialize and not K.scale_kernel_kw.params[0].do_not_specialize
    assert K.scale_kernel.arg_names == ["x_ptr", "y_ptr", "n", "BLOCK"]
    assert triton_dist.jit is tdjit.jit


def test_plain_triton_jit_is_untouched():
    assert type(K.plain_kernel) is JITFunction
    assert not hasattr(K.plain_kernel, "compile_options_for")


def test_interpreter_dispatch_at_launch(interpret):
    x = torch.arange(100, dtype=torch.float32)
    y = torch.zeros_like(x)
    K.scale_kernel[(4, )](x, y, 100, BLOCK=32)  # defined with the interpreter OFF
    torch.testing.assert_close(y, x * 2 + 1)
    y2 = torch.zeros_like(x)
    K.scale_kernel_kw[(2, )](x, y2, 100, BLOCK=64)
    torch.testing.assert_close(y2, x * 3)


def test_autotune_and_heuristics_compose(interpret):
    x = torch.arange(70, dtype=torch.float32)
    y = torch.zeros_like(x)
    K.tuned_kernel[lambda meta: (triton.cdiv(70, meta["BLOCK"]), )](x, y, 70)
    torch.testing.assert_close(y, x - 1)
    z = torch.zeros_like(x)
    K.heur_kernel[(2, )](x, z, 70)
    torch.testing.assert_close(z, x + 10)


def test_warmup_in_interpreter_returns_none(interpret):
    x = torch.zeros(4)
    assert K.scale_kernel.warmup(x, x, 4, BLOCK=4, grid=(1, )) is None


def test_compile_options_for_targets():
    cuda = K.scale_kernel.compile_options_for(parse_target("cuda:90"))
    path = bitcode.nvshmem_bitcode_or_none()
    if path:
        assert cuda == {"extern_libs": {"libnvshmem_device": bitcode.nvshmem_link_library(path)}}
    else:
        assert cuda == {}
    from triton_dist.target import SIM

    assert K.scale_kernel.compile_options_for(SIM) == {}
    hip = K.scale_kernel.compile_options_for(parse_target("hip:gfx942"))
    assert hip == ({"extern_libs": {"rocshmem": bitcode.rocshmem_bitcode_or_none()}}
                   if bitcode.rocshmem_bitcode_or_none() else {})


def _compile(kernel, sig, options, target="cuda:90"):
    from triton_dist.tools.compile import CompileRequest, build_source

    req = CompileRequest(kernel, parse_target(target), sig)
    from triton_dist.target import to_gpu_target

    # Always compile: a cached kernel from another checkout of this repo carries that checkout's path in its
    # debug info, and these tests compare PTX text exactly.
    old = triton.knobs.compilation.always_compile
    triton.knobs.compilation.always_compile = True
    try:
        return triton.compile(build_source(req), target=to_gpu_target(req.target), options=options)
    finally:
        triton.knobs.compilation.always_compile = old


needs_bitcode = pytest.mark.skipif(bitcode.nvshmem_bitcode_or_none() is None,
                                   reason="nvidia-nvshmem wheel (libnvshmem_device.bc) not installed")


@needs_bitcode
def test_kernel_without_extern_calls_ptx_unaffected():
    sig = ["*fp32:16", "*fp32:16", "i32", "128"]
    extra = K.scale_kernel.compile_options_for(parse_target("cuda:90"))
    assert extra
    with_lib = _compile(K.scale_kernel, sig, extra).asm["ptx"]
    assert with_lib == _compile(K.scale_kernel, sig, {}).asm["ptx"]
    assert "nvshmem" not in with_lib


@needs_bitcode
def test_libdevice_only_kernel_code_unaffected_and_needs_no_init():
    sig = ["*fp32:16", "*fp32:16", "i32", "128"]
    extra = K.dist_plain_kernel.compile_options_for(parse_target("cuda:90"))
    with_lib = _compile(K.dist_plain_kernel, sig, extra).asm["ptx"]
    without = _compile(K.dist_plain_kernel, sig, {}).asm["ptx"]
    # only unused NVSHMEM state constants are added (which ones depends on the NVSHMEM version: 3.4 adds two,
    # 3.6 also the IBGDA state); no instruction references them
    added = [line for line in with_lib.splitlines() if line not in without.splitlines()]
    assert added and all(line.startswith(".visible .const") and " nvshmemi_" in line for line in added)
    assert not tdjit.ptx_uses_nvshmem(with_lib)


@needs_bitcode
def test_kernel_calling_nvshmem_links_and_reaches_cubin():
    extra = K.shmem_kernel.compile_options_for(parse_target("cuda:90"))
    ck = _compile(K.shmem_kernel, ["*i32", "*i32"], extra)
    assert tdjit.ptx_uses_nvshmem(ck.asm["ptx"])
    assert isinstance(ck.asm["cubin"], bytes) and len(ck.asm["cubin"]) > 0


def test_cache_key_includes_bounded_wait(monkeypatch):
    monkeypatch.delenv("TRITON_DIST_BOUNDED_WAIT", raising=False)
    k0, caches0 = K.scale_kernel.cache_key, K.scale_kernel.device_caches
    monkeypatch.setenv("TRITON_DIST_BOUNDED_WAIT", "100")
    k1, caches1 = K.scale_kernel.cache_key, K.scale_kernel.device_caches
    assert k0 != k1 and caches0 is not caches1
    monkeypatch.delenv("TRITON_DIST_BOUNDED_WAIT")
    assert K.scale_kernel.cache_key == k0 and K.scale_kernel.device_caches is caches0
    # plain triton.jit: unaffected by the variable
    p0 = K.plain_kernel.cache_key
    monkeypatch.setenv("TRITON_DIST_BOUNDED_WAIT", "5")
    assert K.plain_kernel.cache_key == p0


def test_bounded_wait_variable_named_once():
    """The cache key reads the very variable ``dl.wait`` reads (``language.core`` names it; jit has no copy), and
    ``import triton_dist`` still does not import the language package (its ``triton.jit`` helpers must be created
    after the interpreter switch)."""
    from triton_dist.language import core

    assert tdjit._bounded_wait_env() is core.BOUNDED_WAIT_ENV
    assert not hasattr(tdjit, "BOUNDED_WAIT_ENV")
    code = "import sys, triton_dist; print(sorted(m for m in sys.modules if m.startswith('triton_dist.language')))"
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                         env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)))
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip().splitlines()[-1] == "[]"


# ---- module-init hook, with fake modules ------------------------------------------------------------------------
class FakeBackend:
    name = "fake"

    def __init__(self):
        self.inited = []

    def is_initialized(self):
        return True

    def module_init(self, handle):
        self.inited.append(handle)


@pytest.fixture
def fake_backend(monkeypatch):
    b = FakeBackend()
    monkeypatch.setattr(STATE, "backend", b)
    tdjit.forget_modules()
    yield b
    tdjit.forget_modules()


def _group(tmp_path, name, text, ext="ptx"):
    p = tmp_path / f"{name}.{ext}"
    if isinstance(text, bytes):
        p.write_bytes(text)
    else:
        p.write_text(text)
    return {f"{name}.json": str(tmp_path / f"{name}.json"), p.name: str(p)}


def test_hook_inits_modules_that_link_nvshmem_once_per_device(tmp_path, fake_backend):
    g = _group(tmp_path, "a", ".visible .const .align 8 .b8 nvshmemi_device_state_d[776];\n"
                             "\tld.const.u32 %r1, [nvshmemi_device_state_d+16];")
    n0 = tdjit.module_init_count()
    module_init._on_kernel_load(111, 1, "kernel_named_anything", g, "hashA", _device=0)
    module_init._on_kernel_load(111, 1, "kernel_named_anything", g, "hashA", _device=0)
    assert fake_backend.inited == [111]
    module_init._on_kernel_load(222, 1, "kernel_named_anything", g, "hashA", _device=1)
    assert fake_backend.inited == [111, 222] and tdjit.module_init_count() == n0 + 2


def test_hook_ignores_modules_without_nvshmem_even_if_named_so(tmp_path, fake_backend):
    g = _group(tmp_path, "b", ".visible .entry nvshmem_lookalike_kernel() { ret; }")
    module_init._on_kernel_load(333, 1, "nvshmem_lookalike_kernel", g, "hashB", _device=0)
    assert fake_backend.inited == []


def test_hook_ignores_unused_state_definition(tmp_path, fake_backend):
    g = _group(tmp_path, "e", ".visible .const .align 8 .b8 nvshmemi_device_state_d[776];\n"
                              ".visible .entry k() { ret; }")
    module_init._on_kernel_load(666, 1, "k", g, "hashE", _device=0)
    assert fake_backend.inited == []


def test_hook_reads_cubin_when_no_ptx(tmp_path, fake_backend):
    g = _group(tmp_path, "c", b"\x7fELF....nvshmemi_device_state_d....", ext="cubin")
    module_init._on_kernel_load(444, 1, "k", g, "hashC", _device=0)
    assert fake_backend.inited == [444]


def test_hook_before_init_raises(tmp_path, monkeypatch):
    monkeypatch.setattr(STATE, "backend", None)
    g = _group(tmp_path, "d", "mov.u64 %rd1, nvshmemi_device_state_d;")
    with pytest.raises(RuntimeError, match=r"initialize_distributed\(\) first"):
        module_init._on_kernel_load(555, 1, "k", g, "hashD", _device=0)


def test_hook_is_in_tritons_chain():
    chain = triton.knobs.runtime.kernel_load_end_hook
    module_init.install_hooks()
    module_init.install_hooks()  # idempotent
    assert chain.calls.count(module_init._on_kernel_load) == 1


def test_importing_triton_dist_installs_only_the_module_init_hook_in_the_load_chain():
    """``import triton_dist`` adds the module-init hook (plain ``triton.jit`` kernels that link NVSHMEM are initialised
    too, issue 16 point 1), once, and nothing else to the load chain; test_plain_jit_shmem.py covers the rest."""
    code = ("import triton, triton_dist, triton_dist.jit, triton_dist.utils; "
            "print(len(triton.knobs.runtime.kernel_load_end_hook.calls))")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                         env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)))
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip().splitlines()[-1] == "1"


def test_names_that_moved_out_of_jit_are_still_importable_from_it():
    from triton_dist.backends.amd import shmem_state as amd_state
    from triton_dist.backends.nvidia import shmem_state as nv_state
    from triton_dist.jit import amdgcn_uses_rocshmem, ptx_uses_nvshmem
    from triton_dist.runtime import cooperative

    assert ptx_uses_nvshmem is nv_state.ptx_uses_nvshmem and amdgcn_uses_rocshmem is amd_state.amdgcn_uses_rocshmem
    assert tdjit.NVSHMEM_STATE_SYMBOL == "nvshmemi_device_state_d"
    assert tdjit.ROCSHMEM_STATE_SYMBOLS == amd_state.ROCSHMEM_STATE_SYMBOLS
    assert tdjit.check_cooperative_launch is cooperative.check_cooperative_launch
    assert tdjit.forget_modules is module_init.forget_modules and tdjit.install_hooks is module_init.install_hooks
    with pytest.raises(AttributeError):
        tdjit.no_such_name


def test_no_shmem_bitcode_switch(monkeypatch):
    monkeypatch.setenv("TRITON_DIST_NO_SHMEM_BITCODE", "1")
    assert K.scale_kernel.compile_options_for(parse_target("cuda:90")) == {}
    assert tdjit.shmem_extern_libs("cuda") == {}


def test_cache_key_covers_triton_dist_lowerings(monkeypatch):
    # A kernel's cache key must change when triton_dist's lowering code changes, even though the kernel's own
    # source did not: Triton only hashes the kernel and its @jit callees.
    tjit = sys.modules["triton_dist.jit"]  # the attribute triton_dist.jit is the decorator

    @triton_dist.jit
    def k(p):
        pass

    key_now = k.cache_key
    monkeypatch.setattr(tjit, "_lowering_fingerprint", "0123456789abcdef")
    assert k.cache_key != key_now
    monkeypatch.setattr(tjit, "_lowering_fingerprint", None)
    assert k.cache_key == key_now
    assert len(tjit.lowering_fingerprint()) == 16


# ---- AMD (rocSHMEM) module-init detection, with fake modules ----------------------------------------------------
# AMDGCN as Triton's LLVM prints it (checked by compiling for gfx942 against a stub bitcode defining the rocSHMEM
# globals): a kernel whose rocSHMEM call reads the default context (instruction reference through the GOT), and one
# that only carries the definition the bitcode's llvm.used keeps (ROCSHMEM_TEAM_SHARED), which needs no init.
_AMDGCN_USES = """\t.text
\t.globl\tk
k:
\ts_getpc_b64 s[4:5]
\ts_add_u32 s4, s4, ROCSHMEM_CTX_DEFAULT@gotpcrel32@lo+4
\ts_addc_u32 s5, s5, ROCSHMEM_CTX_DEFAULT@gotpcrel32@hi+12
\ts_endpgm
\t.protected\tROCSHMEM_CTX_DEFAULT
\t.type\tROCSHMEM_CTX_DEFAULT,@object
\t.globl\tROCSHMEM_CTX_DEFAULT
ROCSHMEM_CTX_DEFAULT:
\t.zero\t16
\t.size\tROCSHMEM_CTX_DEFAULT, 16
"""
_AMDGCN_DEFINES_ONLY = """\t.text
\t.globl\tk
k:  ; uses nothing from ROCSHMEM_CTX_DEFAULT
\ts_endpgm
\t.type\tROCSHMEM_TEAM_SHARED,@object
\t.globl\tROCSHMEM_TEAM_SHARED
ROCSHMEM_TEAM_SHARED:
\t.quad\t0
\t.size\tROCSHMEM_TEAM_SHARED, 8
\t.no_dead_strip\tROCSHMEM_TEAM_SHARED
"""


class FakeRocshmemBackend(FakeBackend):
    name = "rocshmem"


@pytest.fixture
def fake_amd_backend(monkeypatch):
    b = FakeRocshmemBackend()
    monkeypatch.setattr(STATE, "backend", b)
    tdjit.forget_modules()
    yield b
    tdjit.forget_modules()


def test_amdgcn_reference_detection():
    assert tdjit.amdgcn_uses_rocshmem(_AMDGCN_USES)
    assert not tdjit.amdgcn_uses_rocshmem(_AMDGCN_DEFINES_ONLY)
    assert tdjit.amdgcn_uses_rocshmem("\ts_add_u32 s0, s0, ROCSHMEM_TEAM_WORLD@rel32@lo+4")
    assert not tdjit.amdgcn_uses_rocshmem("\ts_add_u32 s0, s0, ROCSHMEM_CTX_DEFAULT_lookalike@rel32@lo+4")
    assert not tdjit.amdgcn_uses_rocshmem(".visible .const .b8 nvshmemi_device_state_d[8];")


def test_hook_inits_amd_modules_that_use_rocshmem_once_per_device(tmp_path, fake_amd_backend):
    g = _group(tmp_path, "ra", _AMDGCN_USES, ext="amdgcn")
    g["ra.hsaco"] = str(tmp_path / "ra.hsaco")  # present but not read: the assembly decides
    assert tdjit.module_shmem_library(g) == "rocSHMEM" and not tdjit.module_links_nvshmem(g)
    n0 = tdjit.module_init_count()
    module_init._on_kernel_load(0x1000, 1, "any_name", g, "hashRA", _device=0)
    module_init._on_kernel_load(0x1000, 1, "any_name", g, "hashRA", _device=0)
    assert fake_amd_backend.inited == [0x1000]
    module_init._on_kernel_load(0x2000, 1, "any_name", g, "hashRA", _device=1)
    assert fake_amd_backend.inited == [0x1000, 0x2000] and tdjit.module_init_count() == n0 + 2


def test_hook_ignores_amd_modules_without_rocshmem_use(tmp_path, fake_amd_backend):
    g = _group(tmp_path, "rb", _AMDGCN_DEFINES_ONLY, ext="amdgcn")
    module_init._on_kernel_load(0x3000, 1, "rocshmem_lookalike_kernel", g, "hashRB", _device=0)
    g2 = _group(tmp_path, "rc", "\t.globl\tk\nk:\n\ts_endpgm\n", ext="amdgcn")
    module_init._on_kernel_load(0x4000, 1, "k", g2, "hashRC", _device=0)
    assert fake_amd_backend.inited == [] and tdjit.module_shmem_library(g) is None


def test_hook_reads_hsaco_when_no_amdgcn(tmp_path, fake_amd_backend):
    g = _group(tmp_path, "rd", b"\x7fELF....ROCSHMEM_CTX_DEFAULT....", ext="hsaco")
    module_init._on_kernel_load(0x5000, 1, "k", g, "hashRD", _device=0)
    g2 = _group(tmp_path, "re", b"\x7fELF....nothing here....", ext="hsaco")
    module_init._on_kernel_load(0x6000, 1, "k", g2, "hashRE", _device=0)
    assert fake_amd_backend.inited == [0x5000]


def test_amd_hook_before_init_names_rocshmem(tmp_path, monkeypatch):
    monkeypatch.setattr(STATE, "backend", None)
    g = _group(tmp_path, "rf", _AMDGCN_USES, ext="amdgcn")
    with pytest.raises(RuntimeError, match=r"rocSHMEM device library, but rocSHMEM is not initialised.*"
                                           r"initialize_distributed\(\) first"):
        module_init._on_kernel_load(0x7000, 1, "k", g, "hashRF", _device=0)


def test_nvidia_hook_error_still_names_nvshmem(tmp_path, monkeypatch):
    monkeypatch.setattr(STATE, "backend", None)
    g = _group(tmp_path, "rg", "mov.u64 %rd1, nvshmemi_device_state_d;")
    with pytest.raises(RuntimeError, match=r"NVSHMEM device library, but NVSHMEM is not initialised"):
        module_init._on_kernel_load(0x8000, 1, "k", g, "hashRG", _device=0)


def test_module_of_the_other_library_is_refused(tmp_path, monkeypatch):
    class FakeNvshmemBackend(FakeBackend):
        name = "nvshmem"

    b = FakeNvshmemBackend()
    monkeypatch.setattr(STATE, "backend", b)
    tdjit.forget_modules()
    g = _group(tmp_path, "rh", _AMDGCN_USES, ext="amdgcn")
    with pytest.raises(RuntimeError, match=r"rocSHMEM device library.*'nvshmem' SHMEM backend"):
        module_init._on_kernel_load(0x9000, 1, "k", g, "hashRH", _device=0)
    assert b.inited == []


# ---- RocshmemBackend.module_init / load_librocshmem, with a fake library ------------------------------------------
class _FakeFn:

    def __init__(self, name, calls, rc=0):
        self.name, self.calls, self.rc = name, calls, rc
        self.argtypes = self.restype = None

    def __call__(self, *args):
        self.calls.append((self.name, args))
        return self.rc


class _FakeCDLL:
    """Exports ``symbols`` like ctypes.CDLL (attribute lookup, AttributeError for a missing symbol)."""

    def __init__(self, symbols, calls, rc=0):
        self._name = "librocshmem.so"
        self._symbols, self._calls, self._rc = set(symbols), calls, rc

    def __getattr__(self, name):
        if name.startswith("_") and not name.startswith("_Z") or name not in self._symbols:
            raise AttributeError(name)
        fn = _FakeFn(name, self._calls, self._rc)
        setattr(self, name, fn)
        return fn


_HOST_SYMBOLS = ["rocshmem_get_uniqueid", "rocshmem_set_attr_uniqueid_args", "rocshmem_init_attr", "rocshmem_finalize",
                 "rocshmem_my_pe", "rocshmem_n_pes", "rocshmem_malloc", "rocshmem_free", "rocshmem_ptr",
                 "rocshmem_barrier_all"]


def _load_fake(monkeypatch, symbols, rc=0):
    from triton_dist.runtime import rocshmem as rs

    calls = []
    monkeypatch.setattr(rs.ctypes, "CDLL", lambda path, mode=0: _FakeCDLL(symbols, calls, rc))
    return rs, rs.load_librocshmem("/fake/librocshmem.so"), calls


def test_load_librocshmem_binds_mangled_hipmodule_init(monkeypatch):
    rs, lib, _ = _load_fake(monkeypatch, _HOST_SYMBOLS + [rs_mangled()])
    fn = lib.rocshmem_hipmodule_init
    assert fn is not None and fn.name == rs_mangled() and fn.restype is rs.ctypes.c_int
    # a library without it still loads (older rocSHMEM); a missing required symbol does not
    _, lib2, _ = _load_fake(monkeypatch, _HOST_SYMBOLS)
    assert lib2.rocshmem_hipmodule_init is None
    with pytest.raises(AttributeError, match="rocshmem_ptr"):
        _load_fake(monkeypatch, [s for s in _HOST_SYMBOLS if s != "rocshmem_ptr"])


def rs_mangled():
    return "_ZN8rocshmem23rocshmem_hipmodule_initEP12ihipModule_tP12ihipStream_t"


class _Stream:

    def __init__(self, handle):
        self.cuda_stream = handle


def _fake_cuda(monkeypatch, handle=0, capturing=False):
    synced = []
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: capturing)
    monkeypatch.setattr(torch.cuda, "current_stream", lambda *a, **k: _Stream(handle))
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a, **k: synced.append(True))
    return synced


def test_rocshmem_module_init_calls_hipmodule_init(monkeypatch):
    rs, lib, calls = _load_fake(monkeypatch, _HOST_SYMBOLS + ["rocshmem_hipmodule_init"])
    b = rs.RocshmemBackend()
    b._lib, b._initialized = lib, True
    synced = _fake_cuda(monkeypatch, handle=0xABC)
    b.module_init(0x1234)
    assert calls == [("rocshmem_hipmodule_init", (0x1234, 0xABC))] and synced == [True] and b.module_inits == 1
    synced = _fake_cuda(monkeypatch, handle=0xABC, capturing=True)  # graph capture: stream-ordered, no sync
    b.module_init(0x5678)
    assert calls[-1] == ("rocshmem_hipmodule_init", (0x5678, 0xABC)) and synced == [] and b.module_inits == 2


def test_rocshmem_module_init_failures_are_clear(monkeypatch):
    rs, lib, _ = _load_fake(monkeypatch, _HOST_SYMBOLS + ["rocshmem_hipmodule_init"], rc=1)
    b = rs.RocshmemBackend()
    with pytest.raises(RuntimeError, match="initialize_distributed"):
        b.module_init(1)
    b._lib, b._initialized = lib, True
    _fake_cuda(monkeypatch)
    with pytest.raises(RuntimeError, match=r"rocshmem_hipmodule_init failed with status 1 .*ROCSHMEM_CTX_DEFAULT"):
        b.module_init(0x10)
    assert b.module_inits == 0
    _, lib2, _ = _load_fake(monkeypatch, _HOST_SYMBOLS)
    b._lib = lib2
    with pytest.raises(RuntimeError, match="exports no rocshmem_hipmodule_init"):
        b.module_init(0x10)


def test_hip_extern_libs_use_the_target_arch(monkeypatch):
    seen = []
    monkeypatch.delenv("TRITON_DIST_NO_SHMEM_BITCODE", raising=False)

    def lookup(arch=None):
        seen.append(arch)
        return f"/x/librocshmem_device_{arch}.bc"

    monkeypatch.setattr(bitcode, "rocshmem_bitcode_or_none", lookup)
    opts = K.scale_kernel.compile_options_for(parse_target("hip:gfx942"))
    assert opts == {"extern_libs": {"rocshmem": "/x/librocshmem_device_gfx942.bc"}} and seen == ["gfx942"]
    assert tdjit.shmem_extern_libs("hip", "gfx90a") == {"rocshmem": "/x/librocshmem_device_gfx90a.bc"}
    assert seen == ["gfx942", "gfx90a"]


def _state_reading_stub(tmp_path, read_state):
    """The CPU stand-in for rocSHMEM's bitcode (test/python/_rocshmem_stub.py) plus rocSHMEM's device globals laid
    out as rocSHMEM defines them (``ROCSHMEM_CTX_DEFAULT`` 16 bytes; ``ROCSHMEM_TEAM_SHARED`` kept by llvm.used);
    with ``read_state`` its ``rocshmem_my_pe`` reads the default context, as rocSHMEM's device functions do."""
    import re

    from _rocshmem_stub import stub_ir

    ir = stub_ir()
    if read_state:
        ir, n = re.subn(r"(define linkonce_odr hidden i32 @rocshmem_my_pe\(\) \{\n)  ret i32 0",
                        r"\1  %p = load ptr, ptr addrspace(1) @ROCSHMEM_CTX_DEFAULT, align 8\n"
                        r"  %v = ptrtoint ptr %p to i32\n  ret i32 %v", ir)
        assert n == 1
    state = ("@ROCSHMEM_CTX_DEFAULT = addrspace(1) global [2 x ptr] zeroinitializer, align 8\n"
             "@ROCSHMEM_TEAM_SHARED = protected addrspace(4) externally_initialized constant ptr null, align 8\n"
             "@llvm.used = appending addrspace(1) global [1 x ptr] [ptr addrspacecast (ptr addrspace(4) "
             "@ROCSHMEM_TEAM_SHARED to ptr)], section \"llvm.metadata\"\n")
    head = 'target triple = "amdgcn-amd-amdhsa"\n'
    path = tmp_path / f"stub_{int(read_state)}.ll"
    path.write_text(ir.replace(head, head + state, 1))
    return str(path)


import triton.language as tl  # noqa: E402
from triton_dist.language.extra.libshmem_device import my_pe as _shmem_my_pe  # noqa: E402


@triton_dist.jit
def _amd_pe_kernel(out_ptr):
    tl.store(out_ptr, _shmem_my_pe())


@pytest.mark.parametrize("read_state", [True, False])
def test_amd_detection_on_compiled_gfx942_kernel(tmp_path, monkeypatch, read_state):
    """Real AMDGCN from Triton's HIP backend: a kernel whose rocSHMEM call reads ROCSHMEM_CTX_DEFAULT needs the module
    init; one that links the library but reads no state (only the llvm.used definition is left) does not."""
    monkeypatch.delenv("TRITON_DIST_NO_SHMEM_BITCODE", raising=False)
    path = _state_reading_stub(tmp_path, read_state)
    monkeypatch.setattr(bitcode, "rocshmem_bitcode_or_none", lambda arch=None: path)
    extra = _amd_pe_kernel.compile_options_for(parse_target("hip:gfx942"))
    assert extra == {"extern_libs": {"rocshmem": path}}
    ck = _compile(_amd_pe_kernel, ["*i32"], extra, target="hip:gfx942")
    asm = ck.asm["amdgcn"]
    assert "ROCSHMEM_TEAM_SHARED:" in asm  # the bitcode was linked in both cases
    assert tdjit.amdgcn_uses_rocshmem(asm) is read_state
    (tmp_path / "k.amdgcn").write_text(asm)
    (tmp_path / "k.hsaco").write_bytes(ck.asm["hsaco"])
    group = {"k.amdgcn": str(tmp_path / "k.amdgcn"), "k.hsaco": str(tmp_path / "k.hsaco")}
    assert tdjit.module_shmem_library(group) == ("rocSHMEM" if read_state else None)


# ------------------------------------------------------------------------------------------------ bound launches
def test_bound_launch_runs_like_a_normal_launch_under_the_interpreter(interpret):
    x = torch.arange(100, dtype=torch.float32)
    y = torch.zeros_like(x)
    launch = K.scale_kernel.bind_launch((4, ), BLOCK=32)
    assert launch(x, y, 100) is None
    torch.testing.assert_close(y, x * 2 + 1)


def test_bound_launch_argument_errors():
    with pytest.raises(TypeError, match="grid must be a tuple"):
        K.scale_kernel.bind_launch(lambda meta: (1, ), BLOCK=32)
    with pytest.raises(TypeError, match="'BLOCK' comes after the keyword-bound 'n'"):
        K.scale_kernel.bind_launch((1, ), n=5)
    launch = K.scale_kernel.bind_launch((1, ), BLOCK=32)
    with pytest.raises(TypeError, match=r"3 leading parameters \['x_ptr', 'y_ptr', 'n'\].*got 2"):
        launch(torch.zeros(4), torch.zeros(4))


class _FakeKernel:
    pass


def test_bound_launch_caches_per_specialization(monkeypatch):
    """Off the interpreter: the first call of each specialization (Triton's own binder, cuda:90) goes through the
    normal launch; repeats start the remembered kernel with every parameter (constexprs included) on the current
    stream; a misaligned pointer, a size that is no longer a multiple of 16, the bounded-wait mode or another device
    take the normal launch again."""
    from triton.backends.compiler import GPUTarget

    from triton_dist import _compat

    normal, fast = [], []
    dev = [0]
    monkeypatch.setattr(_compat, "interpret_enabled", lambda: False)
    monkeypatch.setattr(_compat, "device_and_stream_getters", lambda: (lambda: dev[0], lambda d: 1234 + d))
    real_binder = _compat.specialization_binder
    monkeypatch.setattr(_compat, "specialization_binder", lambda fn: real_binder(fn, GPUTarget("cuda", 90, 32)))

    def fake_run(*args, grid, warmup, **kwargs):
        normal.append((args, grid, kwargs))
        return _FakeKernel()

    def fake_launcher(kernel):
        assert isinstance(kernel, _FakeKernel)
        return lambda grid3, stream, *args: fast.append((grid3, stream, args))

    monkeypatch.setattr(K.scale_kernel, "run", fake_run)
    monkeypatch.setattr(_compat, "compiled_kernel_launcher", fake_launcher)
    monkeypatch.delenv("TRITON_DIST_BOUNDED_WAIT", raising=False)

    launch = K.scale_kernel.bind_launch((3, ), BLOCK=32, num_warps=2)
    x, y = torch.zeros(64), torch.zeros(64)
    launch(x, y, 64)
    assert len(normal) == 1 and normal[0][1] == (3, ) and normal[0][2] == {"BLOCK": 32, "num_warps": 2}
    launch(x, y, 48)                                        # same specialization: 48 % 16 == 0
    assert len(normal) == 1 and fast == [((3, 1, 1), 1234, (x, y, 48, 32))]
    launch(x, y, 50)                                        # not a multiple of 16: another kernel
    assert len(normal) == 2
    launch(x[1:], y, 48)                                    # pointer not 16-byte aligned
    assert len(normal) == 3
    launch(x, y, 50)
    assert len(normal) == 3 and len(fast) == 2
    monkeypatch.setenv("TRITON_DIST_BOUNDED_WAIT", "100")   # bounded-wait mode compiles other kernels
    launch(x, y, 48)
    assert len(normal) == 4
    monkeypatch.delenv("TRITON_DIST_BOUNDED_WAIT")
    dev[0] = 1                                              # another device: its own kernel
    launch(x, y, 48)
    assert len(normal) == 5
    launch(x, y, 48)
    assert fast[-1] == ((3, 1, 1), 1235, (x, y, 48, 32))
