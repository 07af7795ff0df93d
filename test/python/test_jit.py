"""triton_dist.jit on CPU: decorator forms, composition, interpreter dispatch, extern libs, cache keys, module init."""
import os

import pytest
import torch
import triton
from triton.runtime.jit import JITFunction

import triton_dist
import sys
import triton_dist.jit  # noqa: F401  (the module; ``triton_dist.jit`` the attribute is the decorator)
tdjit = sys.modules["triton_dist.jit"]
from triton_dist.runtime import bitcode
from triton_dist.runtime.state import STATE
from triton_dist.target import parse_target

import _jit_kernels as K


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
        assert cuda == {"extern_libs": {"libnvshmem_device": path}}
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

    return triton.compile(build_source(req), target=to_gpu_target(req.target), options=options)


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
    added = [l for l in with_lib.splitlines() if l not in without.splitlines()]
    assert added and all(l.startswith(".visible .const") and " nvshmemi_" in l for l in added)
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


# ---- module-init hook, with fake modules ------------------------------------------------------------------------
class FakeBackend:

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
    tdjit._on_kernel_load(111, 1, "kernel_named_anything", g, "hashA", _device=0)
    tdjit._on_kernel_load(111, 1, "kernel_named_anything", g, "hashA", _device=0)
    assert fake_backend.inited == [111]
    tdjit._on_kernel_load(222, 1, "kernel_named_anything", g, "hashA", _device=1)
    assert fake_backend.inited == [111, 222] and tdjit.module_init_count() == n0 + 2


def test_hook_ignores_modules_without_nvshmem_even_if_named_so(tmp_path, fake_backend):
    g = _group(tmp_path, "b", ".visible .entry nvshmem_lookalike_kernel() { ret; }")
    tdjit._on_kernel_load(333, 1, "nvshmem_lookalike_kernel", g, "hashB", _device=0)
    assert fake_backend.inited == []


def test_hook_ignores_unused_state_definition(tmp_path, fake_backend):
    g = _group(tmp_path, "e", ".visible .const .align 8 .b8 nvshmemi_device_state_d[776];\n"
                              ".visible .entry k() { ret; }")
    tdjit._on_kernel_load(666, 1, "k", g, "hashE", _device=0)
    assert fake_backend.inited == []


def test_hook_reads_cubin_when_no_ptx(tmp_path, fake_backend):
    g = _group(tmp_path, "c", b"\x7fELF....nvshmemi_device_state_d....", ext="cubin")
    tdjit._on_kernel_load(444, 1, "k", g, "hashC", _device=0)
    assert fake_backend.inited == [444]


def test_hook_before_init_raises(tmp_path, monkeypatch):
    monkeypatch.setattr(STATE, "backend", None)
    g = _group(tmp_path, "d", "mov.u64 %rd1, nvshmemi_device_state_d;")
    with pytest.raises(RuntimeError, match=r"initialize_distributed\(\) first"):
        tdjit._on_kernel_load(555, 1, "k", g, "hashD", _device=0)


def test_hook_is_in_tritons_chain():
    chain = triton.knobs.runtime.kernel_load_end_hook
    assert tdjit._on_kernel_load in chain.calls


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
