"""One test per assumption triton_dist makes about Triton internals (python/triton_dist/_compat/).

If a Triton upgrade breaks one of these, this file says which assumption moved. The sections follow the modules of
the package (version, frontend, compiler, launcher, interpreter): a new assumption gets one test in its module's
section.
"""
import os
import re

import pytest
import triton
import triton.language as tl

from triton_dist import _compat
from triton_dist.target import parse_target
from triton_dist.tools.compile import CompileRequest, compile_kernel


# ---- _compat/version.py: the supported releases and the per-release facts -------------------------------------------

def test_triton_version_in_supported_range():
    assert _compat.SUPPORTED_TRITON == ((3, 6, 0), (3, 10, 0))
    assert _compat.SUPPORTED_TRITON[0] <= _compat.TRITON_VERSION < _compat.SUPPORTED_TRITON[1]


def test_parse_triton_version_ignores_local_and_prerelease_parts():
    assert _compat.parse_triton_version("3.7.1") == (3, 7, 1)
    assert _compat.parse_triton_version("3.8.0+git1a2b3c") == (3, 8, 0)
    assert _compat.parse_triton_version("3.9.0rc1") == (3, 9, 0)
    assert _compat.parse_triton_version("3.10") == (3, 10, 0)


def test_check_triton_version_accepts_exactly_the_supported_range():
    import pytest

    for ok in ("3.6.0", "3.7.1", "3.8.0", "3.9.0", "3.9.7+gitdeadbeef"):
        assert _compat.check_triton_version(ok) == _compat.parse_triton_version(ok)
    for bad in ("3.5.1", "3.10.0", "4.0.0", "2.3.1"):
        with pytest.raises(ImportError, match=re.escape(f"installed triton is {bad} ")) as info:
            _compat.check_triton_version(bad)
        assert "triton>=3.6,<3.10" in str(info.value)


def test_import_with_unsupported_triton_fails_with_one_error():
    """``import triton_dist`` under a faked unsupported ``triton.__version__``: exactly one ImportError naming the
    installed version and the supported range (not an AttributeError from deep inside a moved internal)."""
    import subprocess
    import sys

    for fake in ("3.5.1", "3.10.0"):
        code = f"import triton; triton.__version__ = {fake!r}; import triton_dist"
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                              env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
        assert proc.returncode != 0
        last = proc.stderr.strip().splitlines()[-1]
        assert last.startswith("ImportError: triton_dist supports triton>=3.6,<3.10"), proc.stderr[-2000:]
        assert f"installed triton is {fake} " in last
        assert proc.stderr.count("Error:") == 1, proc.stderr[-2000:]


def test_pyproject_triton_requirement_is_the_supported_range():
    """The dependency range in pyproject.toml says exactly what _compat.SUPPORTED_TRITON accepts."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    with open(os.path.join(root, "pyproject.toml")) as f:
        text = f.read()
    assert re.findall(r'^\s*"(triton(?![-\w])[^"]*)"', text, re.M) == [f"triton{_compat.supported_triton_spec()}"]


@tl.core.extern
def _wanted(x, _semantic=None):
    return tl.core.extern_elementwise("mylib", "", [x], {(tl.int64, ): ("wanted", tl.int64)}, is_pure=True,
                                      _semantic=_semantic)


@triton.jit
def _k_calls_wanted(inp, out):
    tl.store(out, _wanted(tl.load(inp)))


@triton.jit
def _k_scale(x, n):
    tl.store(x + tl.arange(0, 64), tl.load(x + tl.arange(0, 64)) * n)


def test_every_listed_target_compiles_and_neighbours_do_not():
    """_compat.CUDA_CAPABILITIES / HIP_ARCHS are exactly what the installed Triton compiles a plain kernel for (to
    cubin / hsaco): each listed one compiles; the ones next to them that parse_target refuses fail in the compiler."""
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    def compiles(backend, arch, warp):
        try:
            triton.compile(ASTSource(_k_scale, {"x": "*fp32", "n": "fp32"}), target=GPUTarget(backend, arch, warp))
            return True
        except Exception:  # noqa: BLE001  ptxas / LLVM errors of every kind
            return False

    for cc in _compat.CUDA_CAPABILITIES:
        assert compiles("cuda", cc, 32), cc
    # sm_88 is refused by every supported Triton, but 3.8+ abort the whole process in LLVM for it: not tried there.
    neighbours = (88, 99, 101, 110) if _compat.TRITON_VERSION < (3, 8, 0) else (99, 101, 110)
    for cc in set(neighbours) - set(_compat.CUDA_CAPABILITIES):
        assert not compiles("cuda", cc, 32), cc
    for gfx in _compat.HIP_ARCHS:
        assert compiles("hip", gfx, 32 if gfx.startswith(("gfx10", "gfx11", "gfx12")) else 64), gfx
    for gfx in sorted({"gfx906", "gfx940", "gfx1030", "gfx9999"} - set(_compat.HIP_ARCHS)):
        assert not compiles("hip", gfx, 32 if gfx.startswith(("gfx10", "gfx11", "gfx12")) else 64), gfx


@triton.jit
def _k_block_ptr(x, BLOCK: tl.constexpr):
    bp = tl.make_block_ptr(x, shape=[BLOCK], strides=[1], offsets=[0], block_shape=[BLOCK], order=[0])
    tl.store(bp, tl.load(bp) + 1)


def test_has_block_pointers_says_whether_make_block_ptr_compiles():
    """``HAS_BLOCK_POINTERS``: a kernel using ``tl.make_block_ptr`` compiles exactly where it is true (3.9 removed
    block pointers)."""
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    try:
        triton.compile(ASTSource(_k_block_ptr, {"x": "*fp32", "BLOCK": "constexpr"}, constexprs={"BLOCK": 16}),
                       target=GPUTarget("cuda", 90, 32))
        compiled = True
    except Exception as exc:  # noqa: BLE001  3.9: CompilationError wrapping NotImplementedError
        assert "Block pointers have been removed" in str(exc), exc
        compiled = False
    assert compiled == _compat.HAS_BLOCK_POINTERS


@triton.jit
def _k_atomic_poll(sig, SCOPE: tl.constexpr, SEM: tl.constexpr):
    tl.atomic_poll(sig, 3, sem=SEM, scope=SCOPE)


@triton.jit
def _k_atomic_load_store(src, dst):
    tl.atomic_store(dst, tl.atomic_load(src, sem="acquire", scope="gpu"), sem="release", scope="gpu")


def _ptx_body(fn, sig, constexprs=None):
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    compiled = triton.compile(ASTSource(fn, sig, constexprs=constexprs or {}), target=GPUTarget("cuda", 90, 32))
    body = compiled.asm["ptx"].split("// %bb.0:", 1)[1].split("// -- End function", 1)[0]
    return "\n".join(ln.strip() for ln in body.splitlines() if ln.strip() and not ln.strip().startswith((".loc", "//")))


def test_has_atomic_poll_says_where_tl_atomic_poll_exists():
    """``HAS_ATOMIC_POLL``: ``tl.atomic_poll`` (and ``tl.atomic_load`` / ``atomic_store``, same release) exist exactly
    where it is true (3.9 on)."""
    assert hasattr(tl, "atomic_poll") == _compat.HAS_ATOMIC_POLL
    assert hasattr(tl, "atomic_load") == hasattr(tl, "atomic_store") == _compat.HAS_ATOMIC_POLL


@pytest.mark.parametrize("scope,sem", [("sys", "acquire"), ("cta", "relaxed")])
def test_atomic_poll_on_a_scalar_is_thread_0_spin_acquire_fence_and_cta_barrier(scope, sem):
    """The assumption behind the NVIDIA ``dl.wait`` on 3.9+ (``HAS_ATOMIC_POLL``): on a scalar pointer
    ``tl.atomic_poll`` is thread 0 spinning on ``ld.relaxed.<scope>`` until equal, then ``fence.acquire.<scope>``
    (acquire only) and ``bar.sync 0`` -- the emulation's scope, ordering and barrier."""
    if not _compat.HAS_ATOMIC_POLL:
        pytest.skip(f"Triton {triton.__version__} has no tl.atomic_poll (dl.wait keeps its inline-asm spin)")
    ptx = _ptx_body(_k_atomic_poll, {"sig": "*i64", "SCOPE": "constexpr", "SEM": "constexpr"},
                    {"SCOPE": scope, "SEM": sem})
    assert re.search(r"mov\.u32\s+(%r\d+), %tid\.x;\s*setp\.ne\.b32\s+%p\d+, \1, 0;", ptx), ptx
    spin = re.search(rf"ld\.relaxed\.{scope}\.global\.b64 (%rd\d+), \[ %rd\d+ \+ 0 \];\s*"
                     rf"setp\.ne\.b64\s+(%p\d+), \1, 3;\s*@\2 bra", ptx)
    assert spin, ptx
    after = ptx[spin.end():]
    fence = f"fence.acquire.{scope};"
    assert (fence in after) == (sem == "acquire"), ptx
    assert "bar.sync" in after and (sem != "acquire" or after.index(fence) < after.index("bar.sync")), ptx
    assert "ld.acquire" not in ptx and "atom." not in ptx, ptx


def test_atomic_load_store_on_a_scalar_run_in_thread_0_behind_a_barrier():
    """Why ``language_extra.ld`` / ``st`` keep their inline asm on 3.9+: on a scalar pointer ``tl.atomic_load`` /
    ``tl.atomic_store`` are issued by thread 0 only (``bar.sync`` around them, the loaded value broadcast through
    shared memory), whereas ``ld`` / ``st`` run in every thread and must not synchronise (they are used in divergent
    SIMT code, where a ``bar.sync`` hangs)."""
    if not _compat.HAS_ATOMIC_POLL:
        pytest.skip(f"Triton {triton.__version__} has no tl.atomic_load / tl.atomic_store")
    ptx = _ptx_body(_k_atomic_load_store, {"src": "*i32", "dst": "*i32"})
    assert re.search(r"setp\.eq\.b32\s+(%p\d+), %r\d+, 0;.*@\1 ld\.relaxed\.gpu\.global\.b32", ptx, re.S), ptx
    assert re.search(r"@%p\d+ st\.relaxed\.gpu\.global\.b32", ptx), ptx
    assert "bar.sync" in ptx and "st.shared" in ptx, ptx


# ---- _compat/frontend.py: builtins, aggregates, TritonSemantic calls, the code generator's frames -------------------

_CALLS = []


@_compat.builtin
def _capture(_semantic=None):
    _CALLS.append(_semantic)


@triton.jit
def _k(p):
    _capture()
    tl.store(p, 0)


def test_code_generator_passes_semantic_to_marked_callables():
    _CALLS.clear()
    compile_kernel(CompileRequest(_k, parse_target("cuda:90"), ["*i32"]))
    assert len(_CALLS) == 1 and _CALLS[0] is not None
    assert not _compat.is_interpreter_semantic(_CALLS[0])


def test_compile_options_live_on_semantic_builder():
    _CALLS.clear()
    compile_kernel(CompileRequest(_k, parse_target("hip:gfx942"), ["*i32"]))
    opts = _compat.compile_options(_CALLS[0])
    assert opts.backend_name == "hip" and opts.arch == "gfx942"
    _CALLS.clear()
    compile_kernel(CompileRequest(_k, parse_target("cuda:90"), ["*i32"]))
    opts = _compat.compile_options(_CALLS[0])
    assert opts.backend_name == "cuda" and opts.arch == "sm90"


def test_builtin_marker_attribute_is_what_triton_checks():
    assert tl.core.is_builtin(_capture)


class _PairRegion:
    """A context manager whose ``__enter__`` yields two values, bound through ``_compat.bind_with_tuple_target``."""

    __triton_builtin__ = True

    def __init__(self, a, _semantic=None):
        self._vals = (_semantic.to_tensor(tl.core._unwrap_if_constexpr(a)), tl.constexpr(7))
        self._undo = None

    def __enter__(self):
        self._undo = _compat.bind_with_tuple_target(self._vals)
        return tl.tuple(list(self._vals))

    def __exit__(self, *exc):
        if self._undo:
            self._undo()
        return False


@triton.jit
def _with_tuple_k(p):
    with _PairRegion(41) as (x, y):
        tl.store(p, x + y)


def test_visit_with_tuple_target_binding():
    # Assumption: visit_With calls __enter__ from a frame with locals `self` (generator) and `item` (withitem),
    # and a tuple target is otherwise not unpacked. With the helper both names are bound.
    ttir = compile_kernel(CompileRequest(_with_tuple_k, parse_target("cuda:90"), ["*i32"])).asm["ttir"]
    assert "arith.constant 48 : i32" in ttir, ttir  # 41 + 7, folded


def test_aggregate_of_builtin_methods_compiles_and_flows_through_control_flow():
    """_compat.aggregate (tl.core._aggregate): an aggregate_init __init__ and builtin methods are accepted by the dependency hasher,
    called with _semantic by the code generator, and the value is carried through a loop and an if."""
    seen = []

    @_compat.aggregate
    class _Counter:
        value: _compat.base_value
        ON: tl.constexpr

        @_compat.aggregate_init
        def __init__(self, value, ON):
            self.value = value
            self.ON = tl.constexpr(ON)

        @_compat.builtin
        def bump(self, _semantic=None):
            seen.append(_semantic)
            return _Counter(_semantic.add(self.value, _semantic.to_tensor(1), True), True)

    @triton.jit
    def _agg(p, n):
        c = _Counter(tl.load(p), True)
        for _ in range(n):
            c = c.bump()
        if n > 2:
            c = c.bump()
        tl.store(p, c.value)

    compile_kernel(CompileRequest(_agg, parse_target("cuda:90"), ["*i32", "i32"]))
    assert len(seen) >= 2 and all(s is not None for s in seen)  # (loop bodies may be traced twice)
    assert isinstance(tl.constexpr(1), _compat.base_value) and issubclass(tl.tensor, _compat.base_value)


_PROBED = {}


@_compat.builtin
def _probe(x, _semantic=None, _generator=None):
    _PROBED["semantic"], _PROBED["generator"] = _semantic, _generator
    return x


def _k_probe(p):
    tl.store(p, _probe(tl.load(p)))


def test_builtin_gets_semantic_and_generator_and_runs_under_interpreter_without_semantic():
    import pytest
    import torch
    from triton.runtime.interpreter import InterpretedFunction

    compile_kernel(CompileRequest(triton.jit(_k_probe), parse_target("cuda:90"), ["*i32"]))
    assert _PROBED["semantic"] is not None and hasattr(_PROBED["generator"], "call_JitFunction")
    old = triton.knobs.runtime.interpret
    try:
        for knob in (True, False):  # the interpreter switch does not matter, only where the call comes from
            triton.knobs.runtime.interpret = knob
            with pytest.raises(ValueError, match="_probe: called outside a @triton.jit / @triton_dist.jit kernel"):
                _probe(3)
            x = torch.tensor([5], dtype=torch.int32)
            _PROBED.clear()
            InterpretedFunction(_k_probe)[(1, )](x)  # the interpreter calls unpatched builtins without _semantic
            assert _PROBED == {"semantic": None, "generator": None} and x.item() == 5
    finally:
        triton.knobs.runtime.interpret = old


_IN_PROGRAM = []


def _record_in_program():
    _IN_PROGRAM.append(_compat.in_interpreted_program())
    _IN_PROGRAM.append(_compat.interpreted_kernel_name())


def _helper_in_program(x):
    _record_in_program()
    return x


def _kernel_in_program(p):
    _record_in_program()
    tl.store(p, _helper_in_program(tl.load(p)))


def test_interpreter_runs_programs_from_grid_executor_call():
    """``in_interpreted_program``: a program of a stock interpreted launch runs below ``GridExecutor.__call__`` (in
    the launching thread), device-function calls included; outside a launch there is no such frame.
    ``interpreted_kernel_name``: the function ``GridExecutor.__call__`` called is the kernel."""
    import inspect

    import torch
    from triton.runtime.interpreter import GridExecutor, InterpretedFunction

    assert "self.fn(**args)" in inspect.getsource(GridExecutor.__call__)
    _IN_PROGRAM.clear()
    InterpretedFunction(_kernel_in_program)[(2, )](torch.zeros(1, dtype=torch.int32))
    assert _IN_PROGRAM == [True, "_kernel_in_program"] * 4
    assert not _compat.in_interpreted_program() and _compat.interpreted_kernel_name() is None


def test_aggregate_init_and_plain_builtins_outside_kernels():
    """``aggregate_init`` marks without the outside-a-kernel check; ``builtin`` refuses a call from host code."""

    @_compat.aggregate_init
    def init(x):
        return x

    @_compat.builtin
    def op(_semantic=None):
        return 1

    assert tl.core.is_builtin(init) and tl.core.is_builtin(op) and init(4) == 4
    import pytest

    with pytest.raises(ValueError, match="op: called outside"):
        op()
    assert op(_semantic=object()) == 1


def test_call_jit_from_builtin_inlines_a_jit_function():
    @_compat.jit_function
    def helper(x, C: tl.constexpr):
        return x + C

    @_compat.builtin
    def via(x, _semantic=None, _generator=None):
        return _compat.call_jit(_generator, helper, [x, tl.constexpr(5)])

    @triton.jit
    def k(p):
        tl.store(p, via(tl.load(p)))

    ttir = compile_kernel(CompileRequest(k, parse_target("cuda:90"), ["*i32"])).asm["ttir"]
    assert "arith.addi" in ttir and "5" in ttir


def test_divisibility_hint_on_any_op_reaches_axis_info():
    """tt.divisibility set on an inline-asm / int_to_ptr result makes loads through it vectorise."""

    @_compat.builtin
    def opaque_base(p, _semantic=None):
        addr = _semantic.cast(p, tl.int64)
        z = tl.inline_asm_elementwise("mov.b64 $0, $1;", "=l,l", [addr], tl.int64, True, 1, _semantic=_semantic)
        return _compat.set_divisibility(_semantic.cast(z, p.type), 16)

    @triton.jit
    def k(x, out, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        tl.store(out + offs, tl.load(opaque_base(x) + offs))

    ptx = compile_kernel(CompileRequest(k, parse_target("cuda:90"), ["*fp32:16", "*fp32:16", "1024"])).asm["ptx"]
    assert "ld.global.v4.b32" in ptx


def test_type_from_name_parses_signature_types():
    assert _compat.type_from_name("fp32") == tl.float32 and _compat.type_from_name("*bf16") == tl.pointer_type(tl.bfloat16)
    import pytest

    with pytest.raises(KeyError):
        _compat.type_from_name("flt32")


def test_compilation_error_line_reads_triton_compilation_error():
    import ast

    from triton.compiler.errors import CompilationError

    src = "def k(x):\n    y = bad(x)\n"
    node = ast.parse(src).body[0].body[0]
    assert _compat.compilation_error_line(CompilationError(src, node, "bad is not defined")) == \
        "bad is not defined (at `y = bad(x)`)"
    try:
        raise CompilationError(src, node, None) from NameError("nope")
    except CompilationError as e:
        assert _compat.compilation_error_line(e) == "NameError: nope (at `y = bad(x)`)"
    assert _compat.compilation_error_line(RuntimeError("x")) is None


class _ProbeRegion:
    """A context manager that records what _compat sees from its __enter__ and edits the with body."""
    __triton_builtin__ = True
    seen = {}

    def __init__(self, _semantic=None):
        pass

    def __enter__(self):
        import ast

        gen, node = _compat.with_statement_being_entered()
        _ProbeRegion.seen["node"] = type(node).__name__
        _ProbeRegion.seen["x"] = _compat.scope_value(gen, "x")
        _compat.bind_scope_value(gen, "x", _ProbeView())
        # replace the body's only statement: the code generator reads node.body after __enter__
        _ProbeRegion.seen["original"] = node.body[0]
        node.body[0] = ast.fix_missing_locations(ast.copy_location(
            ast.parse("x._probe_store(x[3, 4], (5,))").body[0], node.body[0]))
        return None

    def __exit__(self, *exc):
        return False


class _ProbeView:
    """Not a Triton value: indexed with plain Python, its builtin method gets _semantic."""

    def __getitem__(self, idx):
        _ProbeRegion.seen["idx"] = [int(_compat.unwrap_constexpr(i)) for i in idx]
        return 7

    @_compat.builtin
    def _probe_store(self, value, idx, _semantic=None):
        _ProbeRegion.seen["store"] = (int(_compat.unwrap_constexpr(value)), _semantic is not None)


@triton.jit
def _k_with_probe(p):
    x = tl.zeros((8, 8), tl.float32)  # noqa: F841  (read by the probe through the code generator)
    with _ProbeRegion():
        tl.store(p, 1)  # replaced by the probe
    tl.store(p, 0)


def test_with_statement_body_is_editable_from_enter_and_plain_objects_index_in_python():
    """_compat.with_statement_being_entered / scope_value / bind_scope_value: visit_With's locals ``self`` and
    ``node``, ``node.body`` read after __enter__, ``lscope`` / ``set_value``; a non-Triton value is subscripted
    with plain Python (``tl.tuple`` index) and its builtin methods get ``_semantic``."""
    _ProbeRegion.seen.clear()
    compile_kernel(CompileRequest(_k_with_probe, parse_target("cuda:90"), ["*i32"], stop_after="llir"))
    seen = _ProbeRegion.seen
    assert seen["node"] == "With" and isinstance(seen["x"], tl.tensor) and seen["x"].type.is_block()
    assert seen["idx"] == [3, 4] and seen["store"] == (7, True)
    assert _compat.with_statement_being_entered() is None  # not compiling


@_compat.builtin
def _copy_plus_one(src, dst, _semantic=None):
    value = _compat.semantic_load(_semantic, src)
    _compat.semantic_store(_semantic, dst, _semantic.add(value, _semantic.to_tensor(1), True))


@triton.jit
def _k_copy_via_compat(src, dst):
    _copy_plus_one(src, dst)


@triton.jit
def _k_copy_via_tl(src, dst):
    tl.store(dst, tl.load(src) + 1)


def test_semantic_load_and_store_emit_plain_memory_ops():
    """``semantic_load`` / ``semantic_store``: ``TritonSemantic.load`` / ``store`` with default cache policy (their
    arguments changed in 3.9) give the same TTIR as ``tl.load`` / ``tl.store`` in a kernel."""

    def ttir(fn):
        text = compile_kernel(CompileRequest(fn, parse_target("cuda:90"), ["*i32", "*i32"]))
        return [ln.strip().split(" loc(")[0] for ln in text.asm["ttir"].splitlines()
                if "tt.load" in ln or "tt.store" in ln]

    got = ttir(_k_copy_via_compat)
    assert got == ttir(_k_copy_via_tl) and len(got) == 2


def test_ir_value_parts_set_name_names_each_part_from_3_8():
    """``ir_value_parts_set_name``: Triton 3.8+ names device-function arguments through ``_set_name`` (absent before);
    a value made of parts forwards the name to each part as ``name.i``."""
    calls = []

    class Part:
        def _set_name(self, builder, name):
            calls.append((builder, name))

    _compat.ir_value_parts_set_name([Part(), Part()], "builder", "acc")
    has_naming = hasattr(tl.tensor, "_set_name")
    assert has_naming == (_compat.TRITON_VERSION >= (3, 8, 0))
    assert calls == ([("builder", "acc.0"), ("builder", "acc.1")] if has_naming else [])


@_compat.builtin
def _check_and_advance_block_ptr(bp, x, _semantic=None):
    assert _compat.is_block_pointer(bp) and not _compat.is_block_pointer(x)
    assert _compat.block_pointer_rank(bp) == 1
    return _compat.advance_block_pointer(bp, [_semantic.to_tensor(0)], _semantic)


@triton.jit
def _k_advance_block_ptr(x, BLOCK: tl.constexpr):
    bp = tl.make_block_ptr(x, shape=[BLOCK], strides=[1], offsets=[0], block_shape=[BLOCK], order=[0])
    bp = _check_and_advance_block_ptr(bp, x)
    tl.store(bp, tl.load(bp) + 1)


def test_block_pointer_is_recognised_and_advanced():
    """``is_block_pointer`` / ``block_pointer_rank`` / ``advance_block_pointer``: a ``tl.tensor`` of pointer-to-block
    type up to 3.7, an aggregate with ``__triton_block_ptr__`` in 3.8; advancing by zero compiles to the same loads
    and stores as no advance (none on 3.9, which has no block pointers)."""
    import pytest
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    if not _compat.HAS_BLOCK_POINTERS:
        pytest.skip("Triton 3.9 removed block pointers")
    compiled = triton.compile(ASTSource(_k_advance_block_ptr, {"x": "*fp32", "BLOCK": "constexpr"},
                                        constexprs={"BLOCK": 16}), target=GPUTarget("cuda", 90, 32))
    assert "ld.global" in compiled.asm["ptx"] and "st.global" in compiled.asm["ptx"]


_traced_names = []


@_compat.builtin
def _record_traced_kernel(_semantic=None):
    _traced_names.append(_compat.traced_kernel_name())


@triton.jit
def _tk_inner(x):
    _record_traced_kernel()
    tl.store(x, 1)


@triton.jit
def _tk_outer_kernel(x):
    _tk_inner(x)


def test_traced_kernel_name_is_the_kernel_being_compiled(monkeypatch):
    """``traced_kernel_name`` (the tagged dl.wait's GPU report names the kernel): from a builtin in a ``@jit``
    function called by the kernel it is the kernel's name; outside a compile, None."""
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    monkeypatch.setattr(triton.knobs.compilation, "always_compile", True)
    _traced_names.clear()
    triton.compile(ASTSource(_tk_outer_kernel, {"x": "*i32"}), target=GPUTarget("cuda", 90, 32))
    assert _traced_names == ["_tk_outer_kernel"]
    assert _compat.traced_kernel_name() is None


def test_language_core_types_and_helpers_are_the_ones_the_language_builds_on():
    """``base_type`` (the base of Triton's types, which the SIMT ``vector_type`` extends), ``tensor_descriptor_base``
    (the base of ``tl.tensor_descriptor``), ``int_dtype(bits, signed)`` and ``extern_elementwise`` (with the
    signature the lowerings call it with)."""
    import inspect

    assert issubclass(tl.dtype, _compat.base_type) and issubclass(tl.block_type, _compat.base_type)
    assert issubclass(tl.tensor_descriptor, _compat.tensor_descriptor_base)
    assert _compat.int_dtype(32, False) == tl.uint32 and _compat.int_dtype(16, True) == tl.int16
    assert _compat.int_dtype(64, False) == tl.uint64 and _compat.int_dtype(8, False) == tl.uint8
    params = list(inspect.signature(_compat.extern_elementwise).parameters)
    assert params == ["lib_name", "lib_path", "args", "arg_type_symbol_dict", "is_pure", "_semantic"]


# ---- _compat/compiler.py: the stage pipeline and its hook, extern libraries, Triton's LLVM, load hooks --------------

def test_kernel_load_end_hook_is_a_chain():
    chain = _compat.kernel_load_end_hooks()
    seen = []

    def hook(*args):
        seen.append(args)

    chain.add(hook)
    try:
        chain("module", "function", "name", {}, "hash")
        assert seen == [("module", "function", "name", {}, "hash")]
    finally:
        chain.remove(hook)
    assert hook not in chain.calls


def test_cache_invalidating_env_vars_is_a_dict():
    assert isinstance(_compat.cache_invalidating_env_vars(), dict)


def test_reset_loading_compiled_kernel_finds_init_handles_frame():
    """A kernel_load_end_hook runs inside CompiledKernel._init_handles (self = the kernel); resetting module/_run
    makes the next launch load it again (Triton's ``run`` property reloads while ``_run`` is None)."""
    from triton.compiler.compiler import CompiledKernel

    from triton_dist import _compat

    assert "kernel_load_end_hook" in CompiledKernel._init_handles.__code__.co_names
    assert "_init_handles" in CompiledKernel.run.fget.__code__.co_names

    kernel = CompiledKernel.__new__(CompiledKernel)
    kernel.module, kernel.function, kernel._run = 1234, 5678, object()

    def _init_handles(self):  # same shape as Triton's frame: a local named self
        return _compat.reset_loading_compiled_kernel()

    assert _init_handles(kernel) is True
    assert kernel.module is None and kernel.function is None and kernel._run is None
    assert _compat.reset_loading_compiled_kernel() is False  # not inside a load


def test_nvidia_backend_links_extern_libs_only_with_extern_deps():
    """triton_dist.jit offers the NVSHMEM bitcode in extern_libs relying on make_llir linking them only when the
    module has external calls."""
    import inspect

    from triton.backends.nvidia.compiler import CUDABackend

    src = inspect.getsource(CUDABackend.make_llir)
    assert "has_extern_deps" in src and "link_extern_libs" in src


def test_hip_backend_links_extern_lib_only_by_name_substring(tmp_path):
    """_compat.hip_links_extern_lib: the HIP backend links an extern_libs entry only when an undefined function's
    name contains the entry's key; textual LLVM IR is accepted as the library."""
    from triton_dist.jit import ROCSHMEM_LIB_NAME
    from triton_dist.language.extra import libshmem_device as shmem

    lib = tmp_path / "lib.ll"
    lib.write_text('target triple = "amdgcn-amd-amdhsa"\n'
                   'define linkonce_odr hidden i32 @rocshmem_my_pe() {\n  ret i32 41\n}\n')

    @triton.jit
    def calls_my_pe(out):
        tl.store(out, shmem.my_pe())

    def llir(key):
        req = CompileRequest(calls_my_pe, parse_target("hip:gfx942"), ["*i32"],
                             options={"extern_libs": {key: str(lib)}}, stop_after="llir")
        return compile_kernel(req).asm["llir"]

    linked, skipped = llir(ROCSHMEM_LIB_NAME), llir("librocshmem_device")
    assert "call i32 @rocshmem_my_pe" not in linked and "i32 41" in linked
    assert _compat.hip_links_extern_lib(ROCSHMEM_LIB_NAME, ["rocshmem_my_pe"])
    assert "call i32 @rocshmem_my_pe" in skipped
    assert not _compat.hip_links_extern_lib("librocshmem_device", ["rocshmem_my_pe"])


def test_extract_library_functions_keeps_what_is_needed_and_only_that(tmp_path):
    """_compat.extract_library_functions: ir.parse_mlir_module / llvm.to_module / attach_datalayout (after
    init_targets) / link_extern_libs (LinkOnlyNeeded, linked functions made internal) / str(module). The requested
    function comes back external, its callee internal, the unused function and its data are left out, a global the
    requested function reads keeps its definition; the result links into a kernel like the library itself."""
    lib = tmp_path / "lib.ll"
    lib.write_text('@state = addrspace(1) externally_initialized global i64 7, align 8\n'
                   '@unused_data = private constant [6 x i8] c"never\\00"\n'
                   'define i64 @wanted(i64 %x) {\n  %s = load i64, ptr addrspace(1) @state\n'
                   '  %y = call i64 @helper(i64 %x)\n  %z = add i64 %y, %s\n  ret i64 %z\n}\n'
                   'define i64 @helper(i64 %x) {\n  %y = mul i64 %x, 3\n  ret i64 %y\n}\n'
                   'define i64 @unused(i64 %x) {\n  %p = getelementptr [6 x i8], ptr @unused_data, i64 0, i64 %x\n'
                   '  %v = load i8, ptr %p\n  %w = zext i8 %v to i64\n  ret i64 %w\n}\n')
    text = _compat.extract_library_functions(str(lib), {"wanted": (("i64", ), "i64")}, "nvptx64-nvidia-cuda",
                                             "sm_90a")
    assert re.search(r"^define i64 @wanted\(", text, re.M)
    assert re.search(r"^define internal i64 @helper\(", text, re.M)
    assert "@unused" not in text and "never" not in text
    assert re.search(r"^@state = .*global i64 7", text, re.M)
    slim = tmp_path / "slim.ll"
    slim.write_text(text)

    def llir(path):
        req = CompileRequest(_k_calls_wanted, parse_target("cuda:90"), ["*i64", "*i64"],
                             options={"extern_libs": {"mylib": str(path)}}, stop_after="llir")
        return compile_kernel(req).asm["llir"]

    from_slim = llir(slim)
    assert "call i64 @wanted" not in from_slim and "@state" in from_slim
    assert from_slim == llir(lib)
    assert _compat.llvm_type_name(tl.int32) == "i32" and _compat.llvm_type_name(tl.uint64) == "i64"


def test_stages_inspection_hook_is_one_slot_called_after_add_stages(monkeypatch):
    """_compat.current_stages_inspection_hook: one assignable slot, called as hook(backend, stages, options, language,
    capability) by both backends once their stages are filled; the TTGIR module reaches stages["llir"] and a
    replaced entry is the one that runs."""
    seen = []

    def hook(*args):
        if not args:  # Triton 3.7+ asks for a cache-key suffix first
            return "test-hook", "0" * 64
        backend, stages, options, language, capability = args
        stock = stages["llir"]
        seen.append((backend.target.backend, list(stages), type(options).__name__))

        def llir(src, metadata):
            seen.append(("llir-input", "ttg." in str(src)))
            return stock(src, metadata)

        stages["llir"] = llir

    monkeypatch.setattr(triton.knobs.runtime, "add_stages_inspection_hook", None)
    _compat.set_stages_inspection_hook(hook)
    assert _compat.current_stages_inspection_hook() is hook is triton.knobs.runtime.add_stages_inspection_hook
    for target, names in (("cuda:90", ["ttir", "ttgir", "llir", "ptx", "cubin"]),
                          ("hip:gfx942", ["ttir", "ttgir", "llir", "amdgcn", "hsaco"])):
        seen.clear()
        compile_kernel(CompileRequest(_k, parse_target(target), ["*i32"], stop_after="llir"))
        assert seen[0] == (target.split(":")[0], names,
                           "CUDAOptions" if target.startswith("cuda") else "HIPOptions")
        assert ("llir-input", True) in seen


def test_llir_stage_with_extern_libs_links_the_added_library(tmp_path, monkeypatch):
    """_compat.llir_stage_with_extern_libs: dataclasses.replace re-runs the options' __post_init__ (dict ->
    pairs, default libraries kept) and CUDABackend.make_llir(src, md, options, capability) / the static
    HIPBackend.make_llir(src, md, options) link the added library: the extern call is resolved by its body."""
    from triton.language import core

    from triton_dist import language as dl

    @core.extern
    def answer(x, _semantic=None):
        return dl.extern_call("compat_ext", "", [x], {(tl.int32, ): ("compat_ext_answer", tl.int32)}, True,
                              _semantic=_semantic)

    @triton.jit
    def calls_ext(out):
        tl.store(out, answer(tl.load(out)))

    bodies = {"cuda": 'target triple = "nvptx64-nvidia-cuda"\n', "hip": 'target triple = "amdgcn-amd-amdhsa"\n'}
    monkeypatch.setattr(triton.knobs.runtime, "add_stages_inspection_hook", None)
    for kind, target in (("cuda", "cuda:90"), ("hip", "hip:gfx942")):
        lib = tmp_path / f"{kind}.ll"
        lib.write_text(bodies[kind] + "define linkonce_odr hidden i32 @compat_ext_answer(i32 %x) {\n  ret i32 4242\n}\n")
        seen = {}

        def hook(*args, _lib=str(lib)):
            if not args:  # Triton 3.7+ asks for a cache-key suffix first
                return f"test-link-{_lib}", "0" * 64
            backend, stages, options, language, capability = args
            seen["defaults"] = dict(options.extern_libs)
            stage = _compat.llir_stage_with_extern_libs(backend, options, capability, {"compat_ext": _lib})
            stages["llir"] = stage

        monkeypatch.setattr(triton.knobs.runtime, "add_stages_inspection_hook", hook)
        llir = compile_kernel(CompileRequest(calls_ext, parse_target(target), ["*i32"], stop_after="llir")).asm["llir"]
        assert "i32 4242" in llir, kind
        assert not re.search(r"declare [^\n]*@compat_ext_answer", llir), kind
        assert seen["defaults"], kind  # libdevice / ocml+ockl still offered


def test_stages_inspection_hook_edits_the_pipeline_and_keys_the_cache(monkeypatch):
    """``stages_inspection_hook``: the backend calls it with ``(backend, stages, options, language, capability)``
    and it hands ``stages`` (in pipeline order) to the edit after the previous hook; called with no arguments (what
    Triton 3.7+ does first, for the cache key) it returns ``(key, sha256 hex)`` naming the edit."""
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    seen, previous_calls = [], []

    def previous(*args):
        previous_calls.append(len(args))
        return None if args else ("earlier-hook", "0" * 64)

    hook = _compat.stages_inspection_hook(lambda stages: seen.append(list(stages)), "test-edit", previous=previous)
    key, digest = hook()
    assert key.endswith("test-edit") and re.fullmatch(r"[0-9a-f]{64}", digest)
    monkeypatch.setattr(triton.knobs.compilation, "always_compile", True)
    monkeypatch.setattr(triton.knobs.runtime, "add_stages_inspection_hook", hook)
    triton.compile(ASTSource(_k_scale, {"x": "*fp32", "n": "fp32"}), target=GPUTarget("cuda", 90, 32))
    assert seen and seen[-1][:2] == ["ttir", "ttgir"] and seen[-1][-2:] == ["ptx", "cubin"]
    assert 5 in previous_calls
    if _compat.TRITON_VERSION >= (3, 7, 0):
        assert 0 in previous_calls


def test_llvm_ir_to_asm_compiles_textual_ir_for_both_targets():
    """``llvm_ir_to_asm``: Triton's ``llvm.translate_to_asm`` (7 arguments up to 3.7, 8 from 3.8) turns textual IR
    into PTX / AMDGCN assembly."""
    ir_text = "define i32 @plus_one(i32 %x) {\n  %y = add i32 %x, 1\n  ret i32 %y\n}\n"
    ptx = _compat.llvm_ir_to_asm(ir_text, "nvptx64-nvidia-cuda", "sm_90")
    assert ".func  (.param .b32 func_retval0) plus_one(" in ptx or re.search(r"\.func .*plus_one\(", ptx)
    gcn = _compat.llvm_ir_to_asm(ir_text, "amdgcn-amd-amdhsa", "gfx942")
    assert re.search(r"^plus_one:", gcn, re.M) and "v_add" in gcn


_EXTERN_CALL_LLIR = """target triple = "amdgcn-amd-amdhsa"
declare i32 @unresolved_ext()
define amdgpu_kernel void @calls_ext(ptr addrspace(1) %p) {
  %v = call i32 @unresolved_ext()
  store i32 %v, ptr addrspace(1) %p
  ret void
}
"""


def test_amdgcn_named_barrier_resource_symbol():
    """_compat.amdgcn_with_module_resource_symbols: a kernel calling a declared-only function refers to
    ``amdgpu.max_num_named_barrier`` (through ``<kernel>.num_named_barrier, max(0, ...)``); the LLVM of Triton 3.6
    never defines it (assembling then aborts the process), 3.7+ define it (llvm-project PR 169851). After the edit
    the text defines it exactly once on every version, and is unchanged where LLVM already did."""
    asm = _compat.llvm_ir_to_asm(_EXTERN_CALL_LLIR, "amdgcn-amd-amdhsa", "gfx942")
    assert re.search(r"calls_ext\.num_named_barrier,\s*max\(0,\s*amdgpu\.max_num_named_barrier\)", asm)
    defined = re.findall(r"^\s*\.set\s+amdgpu\.max_num_named_barrier\s*,\s*(\d+)", asm, re.M)
    assert defined == ([] if _compat.TRITON_VERSION < (3, 7, 0) else ["0"])
    fixed = _compat.amdgcn_with_module_resource_symbols(asm)
    assert re.findall(r"^\s*\.set\s+amdgpu\.max_num_named_barrier\s*,\s*(\d+)", fixed, re.M) == ["0"]
    if defined:
        assert fixed == asm
    # a module whose kernel calls nothing does not refer to it: unchanged
    plain = _compat.llvm_ir_to_asm(_EXTERN_CALL_LLIR.replace("call i32 @unresolved_ext()", "add i32 1, 2"),
                                   "amdgcn-amd-amdhsa", "gfx942")
    assert _compat.amdgcn_with_module_resource_symbols(plain) == plain


def test_amdgcn_named_barrier_value_is_the_module_maximum():
    """The value appended is the largest named-barrier count of the module's own functions (LLVM's definition of
    the module-wide maximum); 0 when every function has none."""
    asm = ("\t.set f.num_named_barrier, max(3, amdgpu.max_num_named_barrier)\n"
           "\t.set g.num_named_barrier, 5\n\t.set h.num_named_barrier, max(0, amdgpu.max_num_named_barrier)\n")
    assert _compat.amdgcn_with_module_resource_symbols(asm).endswith("\t.set amdgpu.max_num_named_barrier, 5\n")
    one = "\t.set f.num_named_barrier, max(0, amdgpu.max_num_named_barrier)"
    assert _compat.amdgcn_with_module_resource_symbols(one) == one + "\n\t.set amdgpu.max_num_named_barrier, 0\n"


def test_hip_amdgcn_stage_wrap_assembles_unresolved_calls(monkeypatch):
    """_compat.wrap_hip_amdgcn_stage: the HIP pipeline's ``amdgcn`` stage (followed by ``hsaco``) is wrapped once,
    and a kernel whose extern call nothing resolves then assembles to an ELF code object that keeps the function
    as an undefined symbol (the wrap is installed for every kernel by ``import triton_dist``)."""
    from triton.language import core

    from triton_dist import language as dl

    @core.extern
    def unresolved(x, _semantic=None):
        return dl.extern_call("compat_unresolved", "", [x], {(tl.int32, ): ("compat_unresolved_fn", tl.int32)},
                              False, _semantic=_semantic)

    @triton.jit
    def calls_unresolved(out):
        tl.store(out, unresolved(tl.load(out)))

    stages = {"llir": None, "amdgcn": lambda src, md: "text", "hsaco": None}
    _compat.wrap_hip_amdgcn_stage(stages)
    wrapped = stages["amdgcn"]
    _compat.wrap_hip_amdgcn_stage(stages)
    assert stages["amdgcn"] is wrapped and wrapped("", {}) == "text"
    ck = compile_kernel(CompileRequest(calls_unresolved, parse_target("hip:gfx942"), ["*i32"]))
    assert "compat_unresolved_fn@gotpcrel32@lo" in ck.asm["amdgcn"]
    assert ck.asm["hsaco"][:4] == b"\x7fELF" and b"compat_unresolved_fn" in ck.asm["hsaco"]


def test_stopping_before_llir_needs_only_the_llir_metadata_defaults():
    """_compat.LLIR_METADATA_DEFAULTS: with the stages after ttir / ttgir skipped (the compile tool's --stage ttir /
    ttgir), ``triton.compile`` completes once those metadata fields exist (pack_metadata reads ``shared``)."""
    @triton.jit
    def _k_meta(out):
        tl.store(out, 1)

    for target in ("cuda:90", "hip:gfx942"):
        for stage in ("ttir", "ttgir"):
            ck = compile_kernel(CompileRequest(_k_meta, parse_target(target), ["*i32"], stop_after=stage))
            assert "tt.func" in str(ck.asm[stage]) and ck.metadata.shared == 0


def test_gpu_target_and_ast_source_are_what_triton_compile_takes():
    """``gpu_target(backend, arch, warp_size)`` and ``ast_source(fn, signature, constexprs, attrs)`` build the
    objects ``triton.compile`` takes: a source with these fields compiles for the target, its attributes applied."""
    target = _compat.gpu_target("cuda", 90, 32)
    assert (target.backend, target.arch, target.warp_size) == ("cuda", 90, 32)
    src = _compat.ast_source(_k_scale, {"x": "*fp32", "n": "fp32"}, {}, {(0, ): [["tt.divisibility", 16]]})
    assert src.fn is _k_scale and src.signature == {"x": "*fp32", "n": "fp32"}
    assert src.attrs == {(0, ): [["tt.divisibility", 16]]} and isinstance(src.hash(), str)
    ttir = triton.compile(src, target=target).asm["ttir"]
    assert "tt.divisibility = 16" in ttir and "tt.store" in ttir


# ---- _compat/launcher.py: the specialization binder, the driver, a compiled kernel's launcher -----------------------

def test_jit_function_cache_key_and_device_caches_are_overridable():
    """DistJITFunction overrides ``cache_key`` (a property on JITCallable, used by ASTSource.hash for the disk cache)
    and ``device_caches`` (an instance attribute set in JITFunction.__init__, read in run())."""
    import inspect

    from triton.compiler.compiler import ASTSource
    from triton.runtime.jit import JITCallable, JITFunction

    assert isinstance(inspect.getattr_static(JITCallable, "cache_key"), property)
    assert "cache_key" in inspect.getsource(ASTSource.hash)
    assert "self.device_caches = " in inspect.getsource(JITFunction.__init__)
    assert "self.device_caches[device]" in inspect.getsource(JITFunction.run)


def test_jit_function_do_compile_is_the_per_specialization_compile_step():
    """DistJITFunction overrides ``_do_compile(key, signature, device, constexprs, options, attrs, warmup)`` to record
    compile requests (``runtime.compile_record``): ``run`` calls it on an in-memory cache miss, and it compiles
    ``ASTSource(self, signature, constexprs, attrs)`` with ``options.__dict__`` for the device's target -- what
    ``compile_record.compile_request`` replays."""
    import inspect

    from triton.runtime.jit import JITFunction

    params = list(inspect.signature(JITFunction._do_compile).parameters)
    assert params == ["self", "key", "signature", "device", "constexprs", "options", "attrs", "warmup"]
    src = inspect.getsource(JITFunction._do_compile)
    assert "self.ASTSource(self, signature, constexprs, attrs)" in src
    assert "self.compile(src, target=target, options=options.__dict__" in src
    assert "self._do_compile(" in inspect.getsource(JITFunction.run)


def test_allocator_is_unset_until_set_allocator():
    """``allocator_is_unset`` reads Triton's allocator context variable: True on a fresh context, False after
    ``triton.set_allocator`` (inside a fresh context, so nothing leaks to other tests)."""
    import contextvars

    import triton

    def run():
        assert _compat.allocator_is_unset()
        triton.set_allocator(lambda size, alignment, stream: None)
        assert not _compat.allocator_is_unset()

    contextvars.Context().run(run)  # an empty context: every variable at its default


def test_specialization_binder_keys_on_dtype_alignment_and_divisibility():
    """``specialization_binder`` is the binder ``JITFunction.run`` keys compiled kernels on (BoundLaunch's cache key):
    it must see pointer dtype and 16-byte alignment, integer divisibility by 16, and constexpr values."""
    import torch
    import triton.language as tl
    from triton.backends.compiler import GPUTarget

    import triton_dist

    @triton_dist.jit
    def k(x_ptr, n, B: tl.constexpr):
        pass

    binder = _compat.specialization_binder(k, GPUTarget("cuda", 90, 32))
    x = torch.zeros(64)

    def spec(*args, **kw):
        return tuple(binder(*args, **kw)[1])

    assert spec(x, 32, B=4) == spec(x, 48, B=4)
    assert spec(x, 32, B=4) != spec(x, 33, B=4)
    assert spec(x, 32, B=4) != spec(x[1:], 32, B=4)
    assert spec(x, 32, B=4) != spec(x.to(torch.float16), 32, B=4)
    assert spec(x, 32, B=4) != spec(x, 32, B=8)
    assert spec(x, 32, B=4) != spec(x, 2**40, B=4)  # i64 instead of i32


def test_compiled_kernel_launch_call_shape(monkeypatch):
    """``compiled_kernel_launcher`` calls a compiled kernel the way ``JITFunction.run`` does (Triton 3.5-3.6):
    ``kernel.run(gx, gy, gz, stream, kernel.function, kernel.packed_metadata, launch_metadata, enter_hook,
    exit_hook, *args)``, with ``launch_metadata(grid, stream, *args)``."""
    import inspect
    import re

    from triton.compiler.compiler import CompiledKernel
    from triton.runtime.jit import JITFunction

    src = re.sub(r"\s+", "", inspect.getsource(JITFunction.run))
    assert ("kernel.run(grid_0,grid_1,grid_2,stream,kernel.function,kernel.packed_metadata,launch_metadata,"
            "knobs.runtime.launch_enter_hook,knobs.runtime.launch_exit_hook,*bound_args.values())") in src
    assert "launch_metadata=kernel.launch_metadata(grid,stream,*bound_args.values())" in src
    assert isinstance(inspect.getattr_static(CompiledKernel, "run"), property)
    assert list(inspect.signature(CompiledKernel.launch_metadata).parameters) == ["self", "grid", "stream", "args"]

    calls = []

    class Fake:
        function, packed_metadata = "fn", "packed"

        @property
        def run(self):
            return lambda *a: calls.append(a)

        def launch_metadata(self, grid, stream, *args):
            return ("meta", grid, stream, args)

    import triton

    monkeypatch.setattr(triton.knobs.runtime, "launch_enter_hook", None)
    monkeypatch.setattr(triton.knobs.runtime, "launch_exit_hook", None)
    launch = _compat.compiled_kernel_launcher(Fake())
    launch((2, 1, 1), 77, "a", 5)
    assert calls == [(2, 1, 1, 77, "fn", "packed", None, None, None, "a", 5)]
    enter = lambda meta: None  # noqa: E731
    monkeypatch.setattr(triton.knobs.runtime, "launch_enter_hook", enter)
    launch((2, 1, 1), 77, "a", 5)
    assert calls[1] == (2, 1, 1, 77, "fn", "packed", ("meta", (2, 1, 1), 77, ("a", 5)), enter, None, "a", 5)


def test_active_driver_is_the_slot_set_active_fills(monkeypatch):
    """``active_driver()`` is ``triton.runtime.driver.active``: the driver ``driver.set_active`` installed."""
    from triton.runtime import driver

    fake = object()
    monkeypatch.setattr(driver, "_active", None)
    driver.set_active(fake)
    assert _compat.active_driver() is fake


def test_active_driver_without_a_gpu_names_the_simulator(monkeypatch):
    """No active GPU backend (a laptop): ``active_driver()`` raises one RuntimeError saying how to run on the CPU
    simulator, instead of Triton's "0 active drivers" (what a compiled ``@triton_dist.jit`` launch hit there)."""
    from triton.backends import backends
    from triton.runtime import driver

    for b in backends.values():
        monkeypatch.setattr(b.driver, "is_active", staticmethod(lambda: False))
    monkeypatch.setattr(driver, "_active", None)
    monkeypatch.setattr(driver, "_default", None, raising=False)  # the default driver slot (3.6), where there is one
    with pytest.raises(RuntimeError) as err:
        _compat.active_driver()
    assert str(err.value) == _compat.launcher.NO_GPU_DRIVER
    assert "TRITON_DIST_BACKEND=sim" in str(err.value) and "scripts/launch.sh" in str(err.value)


# ---- _compat/interpreter.py: the switch, values, raw memory, one launch, device calls, hook points ------------------

def test_interpreter_semantic_is_recognised():
    sem = _compat.interpreter_semantic()
    assert _compat.is_interpreter_semantic(sem)
    assert _compat.is_interpreter_semantic(None)


def test_interpreter_restore_self_copy_is_a_noop():
    # The interpreter copies every tensor argument's storage back after a launch; for CPU tensors it copies a
    # storage onto itself. The simulator relies on that being a no-op: a real copy would race with peers
    # writing into this rank's symmetric buffers.
    import torch

    s = torch.arange(1 << 20, dtype=torch.int32).untyped_storage()
    before = s.data_ptr()
    s.copy_(s)
    assert s.data_ptr() == before


def _shm_adder(name, n, use_cas):
    import numpy as np
    from multiprocessing import shared_memory

    shm = shared_memory.SharedMemory(name=name)
    try:
        arr = np.ndarray((1, ), dtype=np.int64, buffer=shm.buf)
        ptr = np.array([arr.ctypes.data], dtype=np.uint64)
        one = np.ones(1, np.int64)
        for _ in range(n):
            if use_cas:
                while True:
                    cur = _compat.raw_load(ptr, np.int64)
                    if _compat.raw_atomic_cas(ptr, cur, cur + 1, "acquire_release")[0] == cur[0]:
                        break
            else:
                _compat.raw_atomic_rmw("add", ptr, one, "relaxed")
        del arr
    finally:
        shm.close()


def test_interpreter_atomics_are_atomic_across_processes():
    # Assumption: the interpreter's C++ atomic_rmw / atomic_cas are hardware atomics on raw addresses, so rank
    # processes mapping one shared-memory segment see each other's updates without losses.
    import multiprocessing as mp

    import numpy as np
    from multiprocessing import shared_memory

    shm = shared_memory.SharedMemory(create=True, size=8)
    try:
        arr = np.ndarray((1, ), dtype=np.int64, buffer=shm.buf)
        for use_cas in (False, True):
            arr[0] = 0
            ctx = mp.get_context("fork")
            procs = [ctx.Process(target=_shm_adder, args=(shm.name, 20000, use_cas)) for _ in range(2)]
            for p in procs:
                p.start()
            for p in procs:
                p.join(60)
                assert p.exitcode == 0
            assert arr[0] == 40000, (use_cas, arr[0])
        del arr
    finally:
        shm.close()
        shm.unlink()


def test_interpreter_raw_load_store_and_tensor():
    import numpy as np

    a = np.array([5, 6], dtype=np.int32)
    ptr = np.array([a.ctypes.data + 4], dtype=np.uint64)
    assert _compat.raw_load(ptr, np.int32).tolist() == [6]
    _compat.raw_store(ptr, np.array([9], dtype=np.int32))
    assert a.tolist() == [5, 9]
    old = _compat.raw_atomic_rmw("xchg", ptr, np.array([3], np.int32), "release")
    assert old.tolist() == [9] and a.tolist() == [5, 3]
    t = _compat.interpreter_value(np.array([1.5], dtype=np.float32), tl.float32)
    assert t.dtype == tl.float32 and t.handle.data.tolist() == [1.5]


def test_compat_interpreter_raw_atomics_on_addresses():
    """interpreter C++ helpers: atomic_rmw/atomic_cas return old values and act on raw uint64 addresses; load reads."""
    import numpy as np

    from triton_dist import _compat

    buf = np.zeros(4, dtype=np.uint64)
    a = buf.ctypes.data
    old = _compat.raw_atomic_rmw("add", [a, a + 8], np.array([5, 7], dtype=np.uint64))
    assert old.tolist() == [0, 0] and buf.tolist() == [5, 7, 0, 0]
    assert _compat.raw_atomic_rmw("or", a + 8, np.zeros(1, np.uint64), "acquire").tolist() == [7]
    assert _compat.raw_atomic_rmw("xchg", a + 16, np.array([3], np.uint64), "release").tolist() == [0]
    assert _compat.raw_atomic_cas(a, np.array([5], np.uint64), 9).tolist() == [5] and buf[0] == 9
    assert _compat.raw_atomic_cas(a, np.array([5], np.uint64), 1).tolist() == [9] and buf[0] == 9
    assert _compat.raw_load([a + 16], np.uint64).tolist() == [3]
    b32 = np.zeros(2, dtype=np.int32)
    assert _compat.raw_atomic_rmw("add", b32.ctypes.data + 4, np.array([-2], np.int32)).tolist() == [0]
    assert b32.tolist() == [0, -2]
    import pytest

    with pytest.raises(ValueError, match="accepted"):
        _compat.raw_atomic_rmw("nand", a, np.zeros(1, np.uint64))


def test_compat_concurrent_grid_executor_thread_local_program_id():
    """interpreted_launch (GridExecutor helpers, _patch_lang, _implicit_cvt, interpreter_builder) and the thread-local
    interpreter_builder.grid_idx, through the simulator's executor: programs run in threads, each sees its own
    program id, CPU tensors are used in place (no copy), and the stock sequential executor still works after the
    thread-local switch."""
    import torch
    import triton
    import triton.language as tl
    from triton.runtime.interpreter import GridExecutor, InterpretedFunction

    from triton_dist.runtime.sim.interpreter import ConcurrentGridExecutor

    def k(out_ptr, flag_ptr):
        pid = tl.program_id(0) * 100 + tl.program_id(1)
        if tl.program_id(0) == 0:  # program (0, *) waits for program (1, *) of the same column: needs concurrency
            seen = tl.atomic_add(flag_ptr + tl.program_id(1), 0)
            i = 0
            while (seen == 0) & (i < 100000):
                seen = tl.atomic_add(flag_ptr + tl.program_id(1), 0)
                i += 1
            tl.store(out_ptr + tl.program_id(1), pid + 1000 * seen)
        else:
            tl.atomic_xchg(flag_ptr + tl.program_id(1), 1)
            tl.store(out_ptr + 3 + tl.program_id(1), pid)

    kernel = InterpretedFunction(k)
    out = torch.zeros(6, dtype=torch.int32)
    flag = torch.zeros(3, dtype=torch.int32)
    ptr_before = out.data_ptr()
    ConcurrentGridExecutor(kernel.rewrite(), kernel.arg_names, lambda args: (2, 3))(out, flag)
    assert out.data_ptr() == ptr_before
    assert out.tolist() == [1000, 1001, 1002, 100, 101, 102]
    # the stock executor still runs (sequentially) with the thread-local program id installed
    out2 = torch.zeros(6, dtype=torch.int32)
    flag2 = torch.ones(3, dtype=torch.int32)
    GridExecutor(kernel.rewrite(), kernel.arg_names, (2, 3))(out2, flag2)
    assert out2.tolist() == [1000, 1001, 1002, 100, 101, 102]
    del triton


def _kernel_fails_in_program_1(p):
    if tl.program_id(0) == 1:
        raise KeyError("boom")
    tl.store(p, 1)


def test_simulator_program_threads_are_interpreted_programs_of_one_launch():
    """The simulator's executor declares its program runner (interpreted_program_runner) and binds one LaunchRecord
    per launch; a failing program surfaces as the interpreter's error (interpreter_program_error)."""
    import pytest
    import torch
    from triton.runtime.errors import InterpreterError
    from triton.runtime.interpreter import InterpretedFunction

    from triton_dist.backends.sim import launch_record
    from triton_dist.runtime.sim.interpreter import ConcurrentGridExecutor

    kernel = InterpretedFunction(_kernel_in_program)
    _IN_PROGRAM.clear()
    ConcurrentGridExecutor(kernel.rewrite(), kernel.arg_names, (3, ))(torch.zeros(1, dtype=torch.int32))
    assert _IN_PROGRAM == [True, "_kernel_in_program"] * 6
    assert launch_record.current_launch() == (None, None)
    failing = InterpretedFunction(_kernel_fails_in_program_1)
    with pytest.raises(InterpreterError, match=r"program \(1, 0, 0\): KeyError: 'boom'"):
        ConcurrentGridExecutor(failing.rewrite(), failing.arg_names, (2, ))(torch.zeros(1, dtype=torch.int32))


def _device_fn_raises(p):
    raise KeyError("deep")


def _kernel_calls_raising_device_fn(p):
    _device_fn_raises(p)


def test_interpreter_wraps_errors_from_and_origin_unwraps():
    """interpreter_error_origin: the stock interpreter re-raises a device function's error, then the program's, as
    ``InterpreterError(repr(e)) from e`` (so the text nests); following ``__cause__`` through the InterpreterError
    layers reaches the original exception, whatever the depth."""
    import pytest
    import torch
    from triton.runtime.errors import InterpreterError
    from triton.runtime.interpreter import InterpretedFunction

    g = _kernel_calls_raising_device_fn.__globals__
    old = g["_device_fn_raises"]
    g["_device_fn_raises"] = InterpretedFunction(old)
    try:
        with pytest.raises(InterpreterError) as ei:
            InterpretedFunction(_kernel_calls_raising_device_fn)[(1, )](torch.zeros(1))
    finally:
        g["_device_fn_raises"] = old
    outer = ei.value
    assert str(outer).startswith("InterpreterError(") and isinstance(outer.__cause__, InterpreterError)
    origin = _compat.interpreter_error_origin(outer)
    assert type(origin) is KeyError and origin.args == ("deep", )
    plain = ValueError("x")
    assert _compat.interpreter_error_origin(plain) is plain
    assert _compat.interpreter_error_origin(InterpreterError("no cause")).error_message == "no cause"


def test_interpreter_value_and_data_roundtrip():
    import numpy as np

    t = _compat.interpreter_value(np.int32(7), tl.int32)
    assert _compat.interpreter_data(t).tolist() == [7] and t.dtype == tl.int32
    b = _compat.interpreter_value(np.arange(4, dtype=np.float32), tl.block_type(tl.float32, [4]))
    assert _compat.interpreter_data(b).tolist() == [0, 1, 2, 3] and b.type.is_block()


def test_interpreter_cpp_module_exports_atomic_rmw():
    import numpy as np

    mem = _compat.interp_atomics()
    buf = np.zeros(1, dtype=np.int64)
    old = mem.atomic_rmw(mem.RMW_OP.XCHG, np.array([buf.ctypes.data], dtype=np.uint64), np.array([9], dtype=np.int64),
                         np.ones(1, dtype=bool), mem.MEM_SEMANTIC.ACQUIRE_RELEASE)
    assert old.tolist() == [0] and buf.tolist() == [9]


def _run_script(path, source):
    """Run ``source`` (dedented) as a fresh Python process that sees this one's sys.path and not its
    TRITON_INTERPRET; it must exit 0. Returns the last line it printed."""
    import os
    import subprocess
    import sys
    import textwrap

    path.write_text(textwrap.dedent(source))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    env.pop("TRITON_INTERPRET", None)
    res = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, env=env, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    return res.stdout.strip().splitlines()[-1]


def _run_with_interpreter_fix(path, fix, body):
    """``_run_script`` of ``body`` under the interpreter, after ``triton_dist.runtime.sim.interpreter.<fix>()``
    (called twice: idempotent)."""
    import textwrap

    preamble = f"""
        import os
        os.environ["TRITON_INTERPRET"] = "1"
        import torch, triton, triton.language as tl
        from triton_dist.runtime.sim import interpreter
        interpreter.{fix}()
        interpreter.{fix}()  # idempotent
    """
    return _run_script(path, textwrap.dedent(preamble) + textwrap.dedent(body))


def test_plain_jit_callees_run_inside_interpreted_launches(tmp_path):
    """install_interpreted_jit_calls: stock JITFunction.__call__ only raises; after the install (twice:
    idempotent) a JITFunction made with the interpreter off (tl.sum, tl.cdiv, a user's helper) runs when a kernel
    launched by Triton's own interpreter (GridExecutor) calls it, still raises outside a kernel, and a compiled
    kernel calling the same helper still compiles (the code generator never calls JITFunction.__call__)."""
    out = _run_script(tmp_path / "k.py", """
        import torch, triton, triton.language as tl
        from triton.backends.compiler import GPUTarget
        from triton.compiler import ASTSource
        from triton.runtime.jit import JITFunction
        from triton_dist import _compat

        @triton.jit
        def blocks_of(n, B: tl.constexpr):
            return tl.cdiv(n, B)

        def stock_refusal():
            try:
                blocks_of(3, 2)
            except RuntimeError as exc:
                return str(exc)
            return None

        assert "outside of the scope of a kernel" in stock_refusal()
        _compat.install_interpreted_jit_calls()
        _compat.install_interpreted_jit_calls()
        assert "outside of the scope of a kernel" in stock_refusal()

        @triton.jit
        def compiled(out, n):
            tl.store(out, blocks_of(n, 4))

        triton.compile(ASTSource(compiled, {"out": "*i32", "n": "i32"}), target=GPUTarget("cuda", 90, 32))

        _compat.set_interpret(True)

        @triton.jit
        def k(x_ptr, out_ptr, n, N: tl.constexpr):
            x = tl.load(x_ptr + tl.arange(0, N))
            tl.store(out_ptr, tl.sum(x) + blocks_of(n, 4))

        assert isinstance(blocks_of, JITFunction) and isinstance(tl.sum, JITFunction)
        x = torch.arange(8, dtype=torch.int32)
        out = torch.zeros(1, dtype=torch.int32)
        k[(1,)](x, out, 10, N=8)
        print(int(out[0]))
    """)
    assert out == str(sum(range(8)) + 3)


def test_interpreter_runtime_bound_for_loop(tmp_path):
    """override_interpreter_tensor_attr (through install_interpreter_index_fix): the interpreter still has
    _patch_lang_tensor (called through the module global by _patch_lang, using scope.set_attr), and with the fix a `for` loop bounded by a kernel argument and by
    the program id runs under the interpreter (stock 3.6 + numpy >= 2.3 raises 'only 0-dimensional arrays ...')."""
    from triton.runtime import interpreter as _it

    assert callable(getattr(_it, "_patch_lang_tensor", None))
    out = _run_with_interpreter_fix(tmp_path / "loop.py", "install_interpreter_index_fix", """
        @triton.jit
        def k(out, K, STEP: tl.constexpr):
            pid = tl.program_id(0)
            acc = 0
            for i in range(0, tl.cdiv(K, 4)):
                acc += 1
            for t in range(pid, K, STEP):
                acc += 100
            tl.store(out + pid, acc)

        out = torch.zeros(2, dtype=torch.int32)
        k[(2,)](out, 16, 4)
        print(out.tolist())
    """)
    assert out == "[404, 404]"


def test_interpreter_bf16_dot(tmp_path):
    """convert_interpreter_dot_operands and interpreter_handle (through install_interpreter_bf16_dot_fix):
    InterpreterBuilder.create_dot(a, b, d, input_precision, max_num_imprecise_acc) still exists, bf16 is still stored
    as uint16, and with the fix a bf16 tl.dot under the
    interpreter equals the fp32 product (stock 3.6 multiplies the raw bits)."""
    import inspect

    from triton.runtime import interpreter as _it

    params = list(inspect.signature(_it.InterpreterBuilder.create_dot).parameters)
    assert params[:4] == ["self", "a", "b", "d"], params
    out = _run_with_interpreter_fix(tmp_path / "dot.py", "install_interpreter_bf16_dot_fix", """
        @triton.jit
        def k(a, b, o):
            r = tl.arange(0, 16)
            x = tl.load(a + r[:, None] * 16 + r[None, :])
            y = tl.load(b + r[:, None] * 16 + r[None, :])
            tl.store(o + r[:, None] * 16 + r[None, :], tl.dot(x, y))

        g = torch.Generator().manual_seed(0)
        a = (torch.randint(-4, 5, (16, 16), generator=g).float() / 4).to(torch.bfloat16)
        b = (torch.randint(-4, 5, (16, 16), generator=g).float() / 4).to(torch.bfloat16)
        o = torch.zeros(16, 16)
        k[(1,)](a, b, o)
        print((o - a.float() @ b.float()).abs().max().item())
    """)
    assert float(out) == 0.0


def test_interpreter_bf16_elementwise(tmp_path):
    """wrap_interpreter_builder_ops and wrap_interpreter_reduce_sum (through install_interpreter_bf16_arith_fix):
    InterpreterBuilder still has the float ops as class attributes (create_fadd, create_fcmpOLT, create_fma,
    create_exp, cast_impl, ...), ReduceOps.sum(self, input) still computes tl.sum with axis / keep_dims /
    to_tensor, and with the fix bf16 x + y, x < y, .to(tl.bfloat16) and tl.sum under the interpreter match torch
    (stock 3.6 computes on the raw uint16 bits and truncates fp32 -> bf16)."""
    import inspect

    from triton.runtime import interpreter as _it
    from triton_dist.runtime.sim.interpreter import _BF16_ARITH_OPS, _BF16_CMP_OPS

    for name in _BF16_ARITH_OPS + _BF16_CMP_OPS + ("cast_impl", ):
        assert callable(getattr(_it.InterpreterBuilder, name, None)), name
    assert list(inspect.signature(_it.ReduceOps.sum).parameters) == ["self", "input"]
    assert callable(getattr(_it.ReduceOps, "to_tensor", None))
    out = _run_with_interpreter_fix(tmp_path / "bf16.py", "install_interpreter_bf16_arith_fix", """
        @triton.jit
        def k(x_ptr, y_ptr, f_ptr, add_ptr, lt_ptr, cast_ptr, sum_ptr):
            r = tl.arange(0, 16)
            x = tl.load(x_ptr + r)
            y = tl.load(y_ptr + r)
            tl.store(add_ptr + r, x + y)
            tl.store(lt_ptr + r, (x < y).to(tl.int32))
            tl.store(cast_ptr + r, tl.load(f_ptr + r).to(tl.bfloat16))
            tl.store(sum_ptr, tl.sum(x, axis=0))

        g = torch.Generator().manual_seed(0)
        x, y, f = (torch.randn(16, generator=g) for _ in range(3))
        x, y = x.to(torch.bfloat16), y.to(torch.bfloat16)
        add, cast = torch.zeros(16, dtype=torch.bfloat16), torch.zeros(16, dtype=torch.bfloat16)
        lt, total = torch.zeros(16, dtype=torch.int32), torch.zeros(1, dtype=torch.bfloat16)
        k[(1,)](x, y, f, add, lt, cast, total)
        print(torch.equal(add, x + y), torch.equal(lt, (x < y).int()), torch.equal(cast, f.to(torch.bfloat16)),
              total.item() == x.float().sum().to(torch.bfloat16).item())
    """)
    assert out == "True True True True", out


def test_interpreter_fp8_casts(tmp_path):
    """wrap_interpreter_builder_ops (through install_interpreter_fp8_cast_fix): InterpreterBuilder.create_fp_to_fp(src,
    dst_type, rounding_mode) still exists and converts to and from fp8, fp8 is still stored as uint8, and with the fix
    fp32 -> e4m3 / e5m2 under the interpreter rounds as torch does with finite values saturated (the GPU's
    cvt.rn.satfinite), and back exactly (stock 3.6 loses a rounding's carry into the exponent: 127.5 -> 64)."""
    import inspect

    from triton.runtime import interpreter as _it

    assert list(inspect.signature(_it.InterpreterBuilder.create_fp_to_fp).parameters) == \
        ["self", "src", "dst_type", "rounding_mode"]
    out = _run_with_interpreter_fix(tmp_path / "fp8.py", "install_interpreter_fp8_cast_fix", """
        @triton.jit
        def k(x_ptr, y_ptr, z_ptr):
            r = tl.arange(0, 16)
            y = tl.load(x_ptr + r).to(y_ptr.dtype.element_ty)
            tl.store(y_ptr + r, y)
            tl.store(z_ptr + r, y.to(tl.float32))

        x = torch.tensor([1.0, 3.0, 100.0, 127.5, 200.0, 300.0, 448.0, 0.01, 0.001, 1000.0, -float("inf"), 0.0,
                          -0.5, 2.0 ** -9, 57344.0, 1e6])
        ok = []
        for dt in (torch.float8_e4m3fn, torch.float8_e5m2):
            y, z = torch.empty(16, dtype=dt), torch.empty(16)
            k[(1,)](x, y, z)
            top = torch.finfo(dt).max
            ok.append(torch.equal(y.float(), x.clamp(-top, top).to(dt).float()) and torch.equal(z, y.float()))
        print(ok)
    """)
    assert out == "[True, True]", out


def test_interpreter_block_bool_refused(tmp_path):
    """override_interpreter_tensor_attr("__bool__") (through install_interpreter_block_bool_fix): the interpreter
    still installs tl.tensor.__bool__ per launch (stock: True for every block), and with the fix `a and b` between
    block masks raises BlockTruthValueError naming `&`, while a scalar `and` still works and Triton's semantic layer
    (`other.handle if other else None` in load) still gets True for a block."""
    out = _run_with_interpreter_fix(tmp_path / "bool.py", "install_interpreter_block_bool_fix", """
        @triton.jit
        def k(o, n):
            r = tl.arange(0, 8)
            if n > 0 and n < 8:
                tl.store(o + r, 1, mask=(r >= 0) and (r < n))

        @triton.jit
        def ok(o, n):  # Triton's own semantic tests `other` with bool(): still allowed
            r = tl.arange(0, 8)
            tl.store(o + r, tl.load(o + r, mask=r < n, other=tl.full([8], 5, tl.int32)) + 1)

        o = torch.zeros(8, dtype=torch.int32)
        try:
            k[(1,)](o, 4)
        except Exception as exc:
            refused = ("`a & b`" in str(exc), o.sum().item())
        ok[(1,)](o, 4)
        print(refused, o.tolist())
    """)
    assert out == "(True, 0) [1, 1, 1, 1, 6, 6, 6, 6]", out


def test_prewarm_rewrites_reachable_functions_once():
    # Every Triton function of the kernel's module (and of modules reached from there, and Triton's standard
    # library) is rewritten up front, so no first rewrite mutates a module dict while programs run as threads.
    import _jit_kernels as K
    from triton.runtime.interpreter import InterpretedFunction
    from triton.runtime.jit import JITFunction

    from triton_dist.runtime.sim.interpreter import prewarm_interpreter

    kernel = next(v for v in vars(K).values() if isinstance(v, JITFunction))
    prewarm_interpreter(kernel.fn)
    for value in vars(K).values():
        if isinstance(value, JITFunction):
            assert value.fn in InterpretedFunction.rewritten_fn
    assert tl.standard.sum.fn in InterpretedFunction.rewritten_fn
    before = len(InterpretedFunction.rewritten_fn)
    prewarm_interpreter(kernel.fn)  # cheap and idempotent
    assert len(InterpretedFunction.rewritten_fn) == before


def test_set_interpret_switches_variable_and_knob(monkeypatch):
    """``set_interpret``: the one place that turns the interpreter on / off (knob assignable, overrides the variable)."""
    monkeypatch.setenv("TRITON_INTERPRET", os.environ.get("TRITON_INTERPRET", "0"))
    monkeypatch.setattr(triton.knobs.runtime, "interpret", triton.knobs.runtime.interpret)
    _compat.set_interpret(True)
    assert os.environ["TRITON_INTERPRET"] == "1" and _compat.interpret_enabled()
    _compat.set_interpret(False)
    assert os.environ["TRITON_INTERPRET"] == "0" and not _compat.interpret_enabled()


def test_interpreter_switch_is_decided_in_compat_only():
    """No module but ``_compat`` sets the interpreter (``set_interpret``) or reads whether it is on
    (``interpret_enabled``): a second copy of the switch could disagree with the first. Mentions between double
    backticks (docstrings) do not count."""
    pkg = os.path.dirname(os.path.dirname(_compat.__file__))
    compat_dir = os.path.dirname(_compat.__file__) + os.sep
    pattern = re.compile(r"knobs\.runtime\.interpret\b(?!`)|environ\[\s*[\"']TRITON_INTERPRET[\"']\s*\]"
                         r"|environ\.get\(\s*[\"']TRITON_INTERPRET[\"']|getenv\(\s*[\"']TRITON_INTERPRET[\"']")
    pending = set()
    offenders = []
    for root, _, files in os.walk(pkg):
        for f in files:
            path = os.path.join(root, f)
            if f.endswith(".py") and not path.startswith(compat_dir) and os.path.relpath(path, pkg) not in pending:
                with open(path) as fh:
                    offenders += [f"{os.path.relpath(path, pkg)}:{i}" for i, line in enumerate(fh, 1)
                                  if pattern.search(line) and not line.lstrip().startswith("#")]
    assert offenders == []


def test_interpreter_np_dtype_maps_triton_dtypes():
    import numpy as np
    import triton.language as tl

    assert _compat.interpreter_np_dtype(tl.float32) == np.float32
    assert _compat.interpreter_np_dtype(tl.int64) == np.int64
    assert _compat.interpreter_np_dtype(tl.bfloat16) == np.uint16  # raw bits: numpy has no bfloat16


def test_extend_interpreter_tensor_sets_and_restores_an_attribute(tmp_path):
    """_compat.extend_interpreter_tensor: set after the interpreter's own patches (receiving them), for the launch
    only; an attribute the class lacks is removed again."""
    script = tmp_path / "ext.py"
    script.write_text(
        "import torch, triton, triton.language as tl\n"
        "from triton_dist import _compat\n"
        "_compat.set_interpret(True)\n"
        "seen = []\n"
        "_compat.extend_interpreter_tensor('_td_probe', lambda cur: (seen.append(cur), 'probe')[1])\n"
        "_compat.extend_interpreter_tensor('__getitem__', lambda cur: (seen.append(callable(cur)), cur)[1])\n"
        "@triton.jit\n"
        "def k(p):\n"
        "    tl.store(p, 1)\n"
        "assert not hasattr(tl.tensor, '_td_probe')\n"
        "k[(1,)](torch.zeros(1, dtype=torch.int32))\n"
        "assert seen == [None, True], seen\n"
        "assert not hasattr(tl.tensor, '_td_probe')\n"
        "print('OK')\n")
    import subprocess
    import sys

    res = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300,
                         env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)))
    assert res.returncode == 0 and res.stdout.strip().endswith("OK"), res.stderr[-2000:]


def test_extend_interpreter_tensor_never_wraps_its_own_wrapper(tmp_path):
    """An interpreted device-function call (a @triton.jit helper made while the interpreter is on) patches
    ``tl.tensor`` and never undoes it, so our extension is applied on top of itself; it must wrap the attribute it
    first wrapped, not the previous wrapper. Before the fix, 1500 helper calls that index a tensor (``x[:, None]``)
    nested 1500 wrappers and hit the recursion limit (the simulator's ``__getitem__`` extension)."""
    out = _run_script(tmp_path / "nest.py", """
        import sys, torch, triton, triton.language as tl
        from triton_dist import _compat

        _compat.set_interpret(True)
        _compat.extend_interpreter_tensor('__getitem__', lambda cur: (lambda self, *a, **k: cur(self, *a, **k)))

        @triton.jit
        def col(x):
            return x[:, None]

        @triton.jit
        def k(p, N: tl.constexpr):
            for i in range(N):
                tl.store(p + tl.arange(0, 4)[:, None] + tl.arange(0, 2)[None, :] * 4, col(tl.arange(0, 4)) + i)

        sys.setrecursionlimit(400)
        out = torch.zeros(8, dtype=torch.int32)
        k[(1,)](out, N=1500)
        assert out[:4].tolist() == [1499, 1500, 1501, 1502], out
        print('OK')
    """)
    assert out == "OK", out


def test_interpreted_device_calls_leave_no_language_patches(tmp_path):
    """_compat.install_interpreted_jit_calls: a plain JITFunction callee (tl.zeros is one in Triton 3.6) run by an
    interpreted program patches the language modules only while some program is inside it; afterwards
    ``triton.language.core`` holds its own builtins again and a kernel compiles in the same process (before, the
    interpreter's patches stayed and the compile failed with "'ir.value' object has no attribute 'dtype'")."""
    out = _run_script(tmp_path / "leak.py", """
        import torch, triton, triton.language as tl
        from triton.backends.compiler import GPUTarget
        from triton.compiler import ASTSource
        from triton.runtime.jit import JITFunction
        from triton_dist import _compat

        before = dict(vars(tl.core))
        _compat.install_interpreted_jit_calls()
        assert isinstance(tl.zeros, JITFunction)
        _compat.set_interpret(True)

        @triton.jit
        def k(out, N: tl.constexpr):
            tl.store(out + tl.arange(0, N), tl.zeros((N, ), tl.int32) + 3)

        x = torch.zeros(8, dtype=torch.int32)
        k[(2,)](x, N=8)
        assert x.tolist() == [3] * 8
        changed = [n for n, v in vars(tl.core).items() if before.get(n) is not v]
        assert not changed, changed
        _compat.set_interpret(False)

        @triton.jit
        def c(out, N: tl.constexpr):
            tl.store(out + tl.arange(0, N), tl.zeros((N, ), tl.int32))

        triton.compile(ASTSource(c, {"out": "*i32", "N": "constexpr"}, constexprs={"N": 8}),
                       target=GPUTarget("cuda", 90, 32))
        print("compiled")
    """)
    assert out == "compiled"


def test_interpreted_function_is_what_triton_jit_gives_under_the_interpreter():
    """``interpreted_function(fn, **jit_kwargs)`` is Triton's ``InterpretedFunction`` of ``fn`` (with ``fn`` and
    ``pre_run_hooks``); ``is_interpreted_function`` tells it from a compiled ``JITFunction``."""
    from triton.runtime.interpreter import InterpretedFunction

    def f(x):
        return x

    interp = _compat.interpreted_function(f, do_not_specialize=["x"])
    assert isinstance(interp, InterpretedFunction) and interp.fn is f and interp.pre_run_hooks == []
    assert _compat.is_interpreted_function(interp) and not _compat.is_interpreted_function(_compat.jit_function(f))


def test_semantic_or_interpreter_falls_back_to_the_interpreters_semantic():
    """A builtin run by the interpreter gets ``_semantic=None`` and builds with the interpreter's semantic."""
    given = object()
    assert _compat.semantic_or_interpreter(given) is given
    assert _compat.semantic_or_interpreter(None) is _compat.interpreter_semantic()


def test_standard_library_globals_hold_the_jit_functions_tl_exports():
    """``standard_library_globals()`` is the module dict where ``tl.cdiv``, ``tl.sum`` and ``tl.zeros`` live (what the
    simulator prewarms, ``runtime/sim/interpreter.prewarm_interpreter``)."""
    g = _compat.standard_library_globals()
    for name in ("cdiv", "sum", "zeros", "max"):
        assert g[name] is getattr(tl, name), name


def test_ptxas_for_names_tritons_ptxas_and_gpu_name():
    """``ptxas_for(90)``: the ptxas binary Triton compiles sm_90 with (an executable file) and the gpu name it passes
    (``sm_90a``); what ``triton-dist-compile --resources`` runs ``ptxas -v`` with."""
    import os

    path, name = _compat.ptxas_for(90)
    assert os.path.isfile(path) and os.access(path, os.X_OK), path
    assert name == "sm_90a"
