"""CPU tests of ``triton_dist.language.extra.libshmem_device``: import, constants (checked against the installed
NVSHMEM headers), argument checking (clear errors at compile time), target translation, and the
cooperative-launch refusal of ``triton_dist.jit`` (on real compiled TTIR, and through ``DistJITFunction.run`` with
the driver launch replaced by a fake)."""
import glob
import os
import re

import pytest
import triton
import triton.language as tl

import triton_dist
from triton_dist.language._libshmem import SCALAR_TYPES as _SCALAR_TYPES
from triton_dist.language.extra import libshmem_device as shmem
from triton_dist.target import parse_target
from triton_dist.tools.compile import CompileRequest, compile_kernel

#: Triton-distributed's libshmem_device device functions (its public facade, 84 names), plus the typed scalar put /
#: get of every NVSHMEM standard type. The last 16 are lowered as the function with the same semantics
#: (docs/libshmem_device.md, "The reference's other names").
REFERENCE_FUNCTIONS = [
    "my_pe", "n_pes", "team_my_pe", "team_n_pes", "int_p", "remote_ptr", "remote_mc_ptr", "barrier_all",
    "barrier_all_block", "barrier_all_warp", "barrier_all_wave", "barrier_all_wg", "barrier", "barrier_block",
    "barrier_warp", "sync_all", "sync_all_block", "sync_all_warp", "team_sync_block", "team_sync_warp", "quiet",
    "fence", "getmem_nbi_block", "getmem_block", "getmem_nbi_warp", "getmem_warp", "getmem_nbi", "getmem_nbi_wave",
    "getmem_nbi_wg", "getmem", "getmem_wave", "getmem_wg", "putmem_block", "putmem_nbi_block", "putmem_warp",
    "putmem_nbi_warp", "putmem", "putmem_wave", "putmem_wg", "putmem_nbi", "putmem_nbi_wave", "putmem_nbi_wg",
    "putmem_signal_nbi", "putmem_signal", "putmem_signal_nbi_block", "putmem_signal_block", "putmem_signal_nbi_warp",
    "putmem_signal_warp", "putmem_signal_wave", "putmem_signal_wg", "putmem_signal_nbi_wave", "putmem_signal_nbi_wg",
    "signal_op", "signal_wait_until", "ulong_put_signal", "broadcastmem", "broadcastmem_warp", "broadcastmem_block",
    "broadcast", "broadcast_warp", "broadcast_block", "fcollectmem", "fcollectmem_warp", "fcollectmem_block",
    "fcollect", "fcollect_warp", "fcollect_block", "team_translate_pe",
    "putmem_rma", "putmem_rma_block", "putmem_rma_warp", "putmem_rma_nbi", "putmem_rma_nbi_block",
    "putmem_rma_nbi_warp", "putmem_signal_rma", "putmem_signal_rma_nbi", "putmem_signal_rma_warp",
    "putmem_signal_rma_nbi_warp", "putmem_signal_rma_block", "putmem_signal_rma_nbi_block", "quiet_pe",
    "barrier_all_vec", "uint64_wait_until_equals", "set_rocshmem_ctx",
]
FUNCTIONS = REFERENCE_FUNCTIONS + ["team_sync"] + [f"{t}_{k}" for t in _SCALAR_TYPES for k in ("p", "g")]


@pytest.fixture(autouse=True)
def _no_bitcode(monkeypatch):
    # compile-only checks: leave the SHMEM calls unresolved (faster, no 31 MB bitcode parse)
    monkeypatch.setenv("TRITON_DIST_NO_SHMEM_BITCODE", "1")


def _compile(kernel, sig, target="cuda:90", stop_after="llir", defines=None, **options):
    return compile_kernel(CompileRequest(kernel, parse_target(target), [s.strip() for s in sig.split(",") if s.strip()],
                                         defines=defines or {}, options=options, stop_after=stop_after))


def test_lazy_import_and_every_function():
    import triton_dist.language.extra as extra

    assert extra.libshmem_device is shmem
    for name in FUNCTIONS:
        f = getattr(shmem, name)
        assert callable(f) and getattr(f, tl.core.TRITON_BUILTIN, False), name
        assert f.__doc__ and len(f.__doc__) > 40, name
    assert set(FUNCTIONS) <= set(shmem.__all__)
    assert set(shmem.FUNCTIONS) == set(FUNCTIONS) and len(set(REFERENCE_FUNCTIONS)) == 84


def _nvshmem_include():
    hits = glob.glob(os.path.join(os.path.dirname(triton.__file__), "..", "nvidia", "nvshmem", "include"))
    return hits[0] if hits else None


@pytest.mark.skipif(_nvshmem_include() is None, reason="NVSHMEM wheel (headers) not installed")
def test_constants_match_installed_headers():
    inc = _nvshmem_include()

    def read(rel):
        with open(os.path.join(inc, rel)) as f:
            return f.read()

    common = read("device_host_transport/nvshmem_common_transport.h")
    m = re.search(r"NVSHMEM_SIGNAL_SET\s*=\s*(\d+),\s*NVSHMEM_SIGNAL_ADD\s*=\s*(\d+)", common)
    assert (int(m.group(1)), int(m.group(2))) == (shmem.NVSHMEM_SIGNAL_SET.value, shmem.NVSHMEM_SIGNAL_ADD.value)
    consts = read("device_host_transport/nvshmem_constants.h")
    body = re.search(r"enum nvshmemi_cmp_type \{(.*?)\}", consts, re.S).group(1)
    names = re.findall(r"(NVSHMEM_CMP_[A-Z]+)", body)
    assert re.search(r"NVSHMEM_CMP_EQ\s*=\s*0", body)
    for i, n in enumerate(n for n in names if n != "NVSHMEM_CMP_SENTINEL"):
        assert getattr(shmem, n).value == i, n
    teams = read("device_host/nvshmem_common.cuh")
    for n in ("NVSHMEM_TEAM_WORLD", "NVSHMEM_TEAM_SHARED", "NVSHMEMX_TEAM_NODE", "NVSHMEM_TEAM_INVALID"):
        v = int(re.search(rf"\b{n}\s*=\s*(-?\d+)", teams).group(1))
        assert getattr(shmem, n).value == v, n


def test_constant_tables_stated_once():
    """The CMP / SIGNAL / TEAM values live in ``language._libshmem`` alone: the device API, the simulator and the
    NVIDIA lowering use those very tables, and the AMD translation covers exactly their values (no drifting copies)."""
    from triton_dist.backends.amd import libshmem as amd
    from triton_dist.backends.nvidia import libshmem as nv
    from triton_dist.backends.sim import libshmem as sim
    from triton_dist.language import _libshmem

    tables = {"CMP_NAMES": _libshmem.CMP_NAMES, "SIGNAL_NAMES": _libshmem.SIGNAL_NAMES,
              "TEAM_NAMES": _libshmem.TEAM_NAMES}
    for name, table in tables.items():
        assert getattr(shmem, name) is table, name
        assert getattr(sim, name) is table, name
    for value, name in _libshmem.CMP_NAMES.items():
        assert getattr(shmem, f"NVSHMEM_CMP_{name.upper()}").value == value
    for value, name in _libshmem.SIGNAL_NAMES.items():
        assert getattr(shmem, f"NVSHMEM_SIGNAL_{name.upper()}").value == value
    teams = {"world": shmem.NVSHMEM_TEAM_WORLD, "shared": shmem.NVSHMEM_TEAM_SHARED, "node": shmem.NVSHMEMX_TEAM_NODE}
    assert {n: c.value for n, c in teams.items()} == {n: v for v, n in _libshmem.TEAM_NAMES.items()}
    assert shmem.NVSHMEM_TEAM_INVALID.value == _libshmem.TEAM_INVALID
    assert nv.SIGNAL_OPS == {n: v for v, n in _libshmem.SIGNAL_NAMES.items()}
    # dl.notify's sig_op names are the ones both GPU lowerings translate
    from triton_dist.language import core

    assert set(core.SIG_OPS) == set(nv.SIGNAL_OPS) == set(amd.SIGNAL_OPS)
    # AMD: every NVSHMEM value is translated, to the rocSHMEM constant of the same name
    assert {v: amd.CMP[n] for v, n in _libshmem.CMP_NAMES.items()} == amd.NV_CMP_TO_ROC
    assert {v: amd.SIGNAL_OPS[n] for v, n in _libshmem.SIGNAL_NAMES.items()} == amd.NV_SIGNAL_TO_ROC
    assert {v: amd.TEAMS[n] for v, n in _libshmem.TEAM_NAMES.items()} == amd.NV_TEAM_TO_ROC


# ------------------------------------------------------------------------------------------------ argument checks

@triton_dist.jit
def k_bad_block_ptr(dst, src, pe, BLOCK: tl.constexpr):
    shmem.putmem_block(dst + tl.arange(0, BLOCK), src, 16, pe)


@triton_dist.jit
def k_bad_bytes(dst, src, pe):
    shmem.putmem(dst, src, 1.5, pe)


@triton_dist.jit
def k_bad_sig_op(sig, pe):
    shmem.signal_op(sig, 1, 3, pe)


@triton_dist.jit
def k_bad_cmp(sig):
    shmem.signal_wait_until(sig, 7, 1)


@triton_dist.jit
def k_bad_team():
    shmem.barrier(5)


@triton_dist.jit
def k_bad_ctx(dst, BLOCK: tl.constexpr):
    shmem.set_rocshmem_ctx(dst + tl.arange(0, BLOCK))


@triton_dist.jit
def k_bad_quiet_pe(pe):
    shmem.quiet_pe(pe.to(tl.float32))


@triton_dist.jit
def k_runtime_sig_op(sig, op, pe):
    shmem.signal_op(sig, 1, op, pe)


@triton_dist.jit
def k_int_widths(dst, src, n8, n64, pe16):
    shmem.putmem_block(dst, src, n8, pe16)
    shmem.getmem_block(dst, src, n64, 1)
    shmem.putmem_nbi_block(dst.to(tl.int64, bitcast=True), src, 4, pe16)


@pytest.mark.parametrize("kernel,sig,needle", [
    (k_bad_block_ptr, "*fp32, *fp32, i32, 16", "putmem_block: dest must be a scalar pointer"),
    (k_bad_bytes, "*fp32, *fp32, i32", "putmem: bytes must be an integer"),
    (k_bad_sig_op, "*u64, i32", "signal_op: sig_op=3 is not supported"),
    (k_bad_cmp, "*u64", "signal_wait_until: cmp_=7 is not supported"),
    (k_bad_team, "", "barrier: team=5 is not supported"),
    (k_bad_ctx, "*fp32, 16", "set_rocshmem_ctx: ctx must be a scalar pointer or integer"),
    (k_bad_quiet_pe, "i32", "quiet_pe: pe must be an integer"),
])
def test_bad_arguments_are_compile_errors(kernel, sig, needle):
    with pytest.raises(triton.compiler.errors.CompilationError) as e:
        _compile(kernel, sig)
    assert needle in str(e.value), str(e.value)[-500:]


@triton_dist.jit
def k_call(dst, src, pe, FN: tl.constexpr, ARGS: tl.constexpr):
    if ARGS == "team":
        FN(shmem.NVSHMEM_TEAM_WORLD)
    elif ARGS == "translate":
        tl.store(dst, FN(shmem.NVSHMEM_TEAM_WORLD, pe, shmem.NVSHMEMX_TEAM_NODE).to(tl.float32))
    elif ARGS == "collective":
        FN(shmem.NVSHMEM_TEAM_WORLD, dst, src, 64)
    elif ARGS == "broadcast":
        FN(shmem.NVSHMEM_TEAM_WORLD, dst, src, 64, 0)
    else:
        FN()


@pytest.mark.parametrize("fn,args", [
    (shmem.broadcastmem, "broadcast"), (shmem.broadcast_warp, "broadcast"), (shmem.fcollectmem_warp, "collective"),
    (shmem.fcollect, "collective"),
], ids=lambda v: getattr(v, "__name__", v))
def test_amd_functions_rocshmem_lacks_are_compile_errors(fn, args):
    """A function rocSHMEM's device API does not have is refused when compiled for AMD, naming the function and
    saying so; the same kernel compiles for NVIDIA."""
    _compile(k_call, "*fp32, *fp32, i32", defines=dict(FN=fn, ARGS=args))
    with pytest.raises(triton.compiler.errors.CompilationError) as e:
        _compile(k_call, "*fp32, *fp32, i32", target="hip:gfx942", defines=dict(FN=fn, ARGS=args))
    msg = str(e.value)
    assert "not in rocSHMEM" in msg and "libshmem_device." in msg, msg[-500:]


@triton_dist.jit
def k_typed_mismatch(dst, src):
    shmem.broadcast_block(shmem.NVSHMEM_TEAM_WORLD, dst, src, 4, 0)


@triton_dist.jit
def k_bad_scalar_value(dst, pe, BLOCK: tl.constexpr):
    shmem.int_p(dst, tl.arange(0, BLOCK), pe)


def test_typed_functions_check_their_arguments():
    with pytest.raises(triton.compiler.errors.CompilationError) as e:
        _compile(k_typed_mismatch, "*fp32, *i32")
    assert "broadcast_block: dest and source must be typed pointers to the same element type" in str(e.value)
    with pytest.raises(triton.compiler.errors.CompilationError) as e:
        _compile(k_bad_scalar_value, "*i32, i32", defines=dict(BLOCK=4))
    assert "int_p: value must be a number or a scalar" in str(e.value)


def test_amd_needs_constant_sig_op():
    _compile(k_runtime_sig_op, "*u64, i32, i32")  # NVIDIA: a runtime sig_op is passed through
    with pytest.raises(triton.compiler.errors.CompilationError) as e:
        _compile(k_runtime_sig_op, "*u64, i32, i32", target="hip:gfx942")
    assert "on AMD sig_op must be a compile-time constant" in str(e.value)


def test_integer_widths_are_converted():
    k = _compile(k_int_widths, "*fp32, *fp32, i8, i64, i16", stop_after="llir")
    llir = k.asm["llir"]
    assert re.search(r"call i32 @nvshmemx_putmem_block\(i64 %\w+, i64 %\w+, i64 %\w+, i32 %\w+\)", llir), llir[:2000]
    assert "sext i8" in llir and "sext i16" in llir
    assert re.search(r"call i32 @nvshmemx_getmem_block\(i64 %\w+, i64 %\w+, i64 %\w+, i32 1\)", llir)


# ------------------------------------------------------------------------------------------------ cooperative launch

@triton_dist.jit
def k_barrier_every_block(x):
    shmem.barrier_all_block()
    tl.store(x + tl.program_id(0), 1)


@triton_dist.jit
def k_put_only(dst, src, pe):
    shmem.putmem_block(dst, src, 64, pe)


@triton_dist.jit
def k_fcollect(dst, src):
    shmem.fcollectmem_block(shmem.NVSHMEM_TEAM_WORLD, dst, src, 64)


def test_collective_calls_found_in_compiled_ttir():
    collective_calls = __import__("sys").modules["triton_dist.jit"].collective_calls

    assert collective_calls(_compile(k_barrier_every_block, "*i32").asm) == ("nvshmemx_barrier_all_block", )
    assert collective_calls(_compile(k_fcollect, "*fp32, *fp32").asm) == ("nvshmemx_fcollectmem_block", )
    assert collective_calls(_compile(k_put_only, "*fp32, *fp32, i32").asm) == ()
    amd = _compile(k_barrier_every_block, "*i32", target="hip:gfx942")
    assert collective_calls(amd.asm) == ("rocshmem_barrier_all_wg", )


def test_check_cooperative_launch_pure():
    check_cooperative_launch = __import__("sys").modules["triton_dist.jit"].check_cooperative_launch

    asm = _compile(k_barrier_every_block, "*i32").asm
    check_cooperative_launch("k", asm, (1, ), False)  # one program: fine
    check_cooperative_launch("k", asm, (8, ), True)  # cooperative: fine
    check_cooperative_launch("k", _compile(k_put_only, "*fp32, *fp32, i32").asm, (8, 2), False)  # no collective
    with pytest.raises(RuntimeError) as e:
        check_cooperative_launch("k_barrier_every_block", asm, (4, 2), False)
    msg = str(e.value)
    for part in ("k_barrier_every_block", "nvshmemx_barrier_all_block", "8 programs", "launch_cooperative_grid=True"):
        assert part in msg, msg


def test_distjit_run_refuses_before_launch(monkeypatch):
    """DistJITFunction.run on a machine without a GPU: Triton's JITFunction.run is replaced by a fake that returns
    the really compiled kernel for warm-up and records launches."""
    import sys

    from triton.runtime.jit import JITFunction

    J = sys.modules["triton_dist.jit"]  # the module (``triton_dist.jit`` the attribute is the decorator)

    compiled = {"k_barrier_every_block": _compile(k_barrier_every_block, "*i32"),
                "k_put_only": _compile(k_put_only, "*fp32, *fp32, i32")}
    launches = []

    class FakeKernel:

        def __init__(self, asm):
            self.asm = asm

    def fake_run(self, *args, grid, warmup, **kwargs):
        if warmup:
            return FakeKernel(compiled[self.fn.__name__].asm)
        launches.append((self.fn.__name__, grid, kwargs.get("launch_cooperative_grid", False)))
        return None

    monkeypatch.setattr(JITFunction, "run", fake_run)
    monkeypatch.setattr(J, "_libs_for_launch", lambda full=False: {})
    monkeypatch.setattr(triton.knobs.runtime, "interpret", False)

    with pytest.raises(RuntimeError, match="k_barrier_every_block.*launch_cooperative_grid=True"):
        k_barrier_every_block[(4, )](None)
    with pytest.raises(RuntimeError, match="4 programs"):
        k_barrier_every_block[lambda meta: (2, 2)](None)
    assert launches == []  # refused before any launch
    k_barrier_every_block[(4, )](None, launch_cooperative_grid=True)
    k_barrier_every_block[(1, )](None)
    k_put_only[(16, )](None, None, 1)
    assert [(n, c) for n, _, c in launches] == [("k_barrier_every_block", True), ("k_barrier_every_block", False),
                                                ("k_put_only", False)]
    # classification: a function whose kernel calls no collective is checked once, then launched directly
    # (no warm-up lookup per launch); one that calls collectives stays checked.
    warmups = []
    real_fake_run = fake_run

    def counting_run(self, *args, grid, warmup, **kwargs):
        if warmup:
            warmups.append(self.fn.__name__)
        return real_fake_run(self, *args, grid=grid, warmup=warmup, **kwargs)

    monkeypatch.setattr(JITFunction, "run", counting_run)
    assert k_put_only._calls_collectives is False and k_barrier_every_block._calls_collectives is True
    for _ in range(3):
        k_put_only[(16, )](None, None, 1)
    assert warmups == []
    k_barrier_every_block[(1, )](None)
    assert warmups == ["k_barrier_every_block"]


@pytest.mark.parametrize("kernel_ref", ["all_functions.py:all_calls", "more_functions.py:amd_calls"])
def test_amd_kernel_links_rocshmem_bitcode_and_assembles(tmp_path, monkeypatch, kernel_ref):
    """Every libshmem_device function, compiled for gfx942 with a rocSHMEM library offered the way triton_dist.jit
    offers it: every rocSHMEM call is resolved by the library (none left declared in LLIR) and the hsaco
    assembles. Before the extern_libs key was "rocshmem", Triton's HIP backend silently skipped the library."""
    from _rocshmem_stub import write_stub

    from triton_dist.runtime import bitcode
    from triton_dist.tools.compile import load_kernel

    monkeypatch.delenv("TRITON_DIST_NO_SHMEM_BITCODE")
    monkeypatch.setattr(bitcode, "rocshmem_bitcode_or_none", lambda arch=None: write_stub(tmp_path))
    here = os.path.dirname(__file__)
    kernel = load_kernel(os.path.join(here, "..", "lit", "libshmem", kernel_ref))
    ck = _compile(kernel, "*fp32:16, *fp32:16, *u64:16, i32, i64", target="hip:gfx942", stop_after=None)
    assert not re.findall(r"declare .*@rocshmem\w*", ck.asm["llir"]), "rocSHMEM calls left unresolved"
    assert isinstance(ck.asm["hsaco"], bytes) and len(ck.asm["hsaco"]) > 0


# ------------------------------------------------------------------- libshmem functions as constexpr arguments

@pytest.mark.parametrize("target", ["cuda:90", "hip:gfx942"])
def test_rma_kernel_takes_the_function_as_a_constexpr(target):
    """The GPU tier's put / get launches (``k_rma`` with ``FN=<libshmem_device function>``, exactly as
    ``rma_launch_args`` builds them) compile for both targets; before, the GPU test passed the function's *name*,
    which only failed on the GPU (``'str' object is not callable``). The simulator runs the same launches."""
    from test_libshmem_sim import RMA_FUNCTIONS, k_rma, rma_launch_args

    symbols = set()
    for fn in RMA_FUNCTIONS:
        _, meta = rma_launch_args(fn, 1, 0)
        ck = compile_kernel(CompileRequest(k_rma, parse_target(target), ["*fp32", "*fp32", "i64", "i32"],
                                           defines=meta, stop_after="llir"))
        called = set(re.findall(r"call [^@\n]*@((?:nvshmemx?|rocshmem)_\w+)", ck.asm["llir"]))
        assert called, fn.__name__
        symbols |= called
    assert len(symbols) >= len(RMA_FUNCTIONS) // 2  # one extern per variant (AMD: thread variants share one)


def test_builtin_constexpr_has_a_process_independent_cache_key():
    """A libshmem_device function passed as a constexpr is hashed by its ``cache_key`` (module-qualified name), not
    by ``str()`` (which holds the function's address), so the on-disk kernel cache hits across processes."""
    from triton.compiler import ASTSource

    from test_libshmem_sim import k_rma

    assert shmem.putmem.cache_key == "triton_dist-builtin:triton_dist.language.extra.libshmem_device.putmem"
    assert shmem.putmem.cache_key != shmem.getmem.cache_key
    sig = {"dest": "*fp32", "src": "*fp32", "nbytes": "i64", "pe": "i32", "FN": "constexpr", "NBI": "constexpr",
           "FENCE": "constexpr"}

    def key(fn):
        return ASTSource(k_rma, sig, constexprs={"FN": fn, "NBI": False, "FENCE": False}).hash()

    twin = lambda *a, **k: None  # noqa: E731  another object with the same cache_key hashes the same
    twin.cache_key = shmem.putmem.cache_key
    assert key(shmem.putmem) == key(twin) != key(shmem.getmem)


def test_gpu_tier_kernels_compile_for_cuda():
    """Every launch of the GPU tier's scope and new-function tests (test_gpu_libshmem_scope.py, test_gpu_libshmem.py's
    barriers) traces and lowers for cuda:90, so the GPU run can only fail on what a GPU shows."""
    import gpu.test_gpu_libshmem_scope as G
    from test_libshmem_sim import (BARRIER_FUNCTIONS, COLLECTIVE_FUNCTIONS, PUT_SIGNAL_FUNCTIONS, SCALAR_CASES,
                                   SCALAR_TYPES, k_collective_fn, k_put_signal_fn, k_scalar_get, k_scalar_put,
                                   k_store_barrier_load, k_translate)

    ptr = {"float32": "*fp32", "float64": "*fp64", "float16": "*fp16", "bfloat16": "*bf16", "int8": "*i8",
           "int16": "*i16", "int32": "*i32", "int64": "*i64", "uint8": "*u8", "uint16": "*u16", "uint32": "*u32",
           "uint64": "*u64"}
    launches = [(G.k_per_thread_get, "*i8:16, i32", dict(NBI=nbi)) for nbi in (False, True)]
    launches += [(G.k_per_thread_put, "*i8:16, i32", dict(NBI=nbi)) for nbi in (False, True)]
    launches += [(G.k_guarded_thread_barrier, "*i32", {}), (k_translate, "*i32, i32, i32", {})]
    launches += [(k_store_barrier_load, "*fp32, *fp32, *fp32, i32, fp32", dict(FN=fn, BLOCK=64))
                 for fn in BARRIER_FUNCTIONS]
    for t, value, _ in SCALAR_CASES:
        p = ptr[{"fp32": "float32", "fp64": "float64", "fp16": "float16", "bf16": "bfloat16"}.get(
            SCALAR_TYPES[t].name, SCALAR_TYPES[t].name)]
        launches.append((k_scalar_put, f"{p}, {'fp32' if isinstance(value, float) else 'i32'}, i32",
                         dict(P=getattr(shmem, f"{t}_p"))))
        launches.append((k_scalar_get, f"{p}, {p}, i32", dict(G=getattr(shmem, f"{t}_g"))))
    for fn in PUT_SIGNAL_FUNCTIONS:
        name = fn.__name__
        launches.append((k_put_signal_fn, "*fp32, *fp32, *i64, *fp32, i32, i32, i32", dict(
            FN=fn, THREAD=name in ("putmem_signal", "putmem_signal_nbi", "ulong_put_signal"),
            UNIT=8 if name == "ulong_put_signal" else 1, NBI="_nbi" in name, BLOCK=64)))
    for fn, scope, _ in COLLECTIVE_FUNCTIONS:
        launches.append((k_collective_fn, "*fp32, *fp32, i32, i32", dict(
            TEAM=0, FN=fn, SCOPE=scope, BROADCAST=fn.__name__.startswith("broadcast"))))
    for kernel, sig, defines in launches:
        ck = _compile(kernel, sig, defines=defines)
        assert re.search(r"call [^@\n]*@nvshmemx?_\w+", ck.asm["llir"]), (kernel.__name__, defines)
