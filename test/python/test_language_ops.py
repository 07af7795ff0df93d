"""dl ops: argument checking at trace time (CompilationError naming op, bad value and accepted values) and a
compile smoke test of every op for cuda:90 and hip:gfx942 (no GPU needed)."""
import re
import pytest
import triton
import triton.language as tl
from triton.compiler.errors import CompilationError

from triton_dist import _compat
import triton_dist.language as dl
from triton_dist.target import parse_target
from triton_dist.tools.compile import CompileRequest, compile_kernel


@triton.jit
def k_wait(sig, SCOPE: tl.constexpr, SEM: tl.constexpr):
    dl.wait(sig, 1, SCOPE, SEM)


@triton.jit
def k_notify(sig, SCOPE: tl.constexpr, OP: tl.constexpr):
    dl.notify(sig, 1, 1, OP, SCOPE)


@triton.jit
def k_symm(x):
    tl.store(dl.symm_at(x, 1), 0)


@triton.jit
def k_rank_axis(out, AXIS: tl.constexpr):
    tl.store(out, dl.rank(AXIS))


@triton.jit
def k_num_ranks_axis(out, AXIS: tl.constexpr):
    tl.store(out, dl.num_ranks(axis=AXIS))


@triton.jit
def k_consume_bad_token(x):
    tl.store(dl.consume_token(x, 1.5), 0)


@triton.jit
def k_wait_block_ptr(sig, BLOCK: tl.constexpr):
    dl.wait(sig + tl.arange(0, BLOCK), 1, "gpu", "acquire")


@triton.jit
def k_all_ops(sig, sig64, x, out, n, BLOCK: tl.constexpr):
    tok = dl.wait(sig, n, "sys", "acquire")
    p = dl.consume_token(x, tok)
    offs = tl.arange(0, BLOCK)
    me = dl.rank()
    world = dl.num_ranks()
    peer = (me + 1) % world
    tl.store(dl.symm_at(out, peer) + offs, tl.load(p + offs))
    dl.notify(sig64, peer, 1, "add", "intra_node")


def _compile(kernel, sig, target="cuda:90", stop_after=None):
    return compile_kernel(CompileRequest(kernel, parse_target(target), sig))


def _error(kernel, sig, target="cuda:90"):
    with pytest.raises(CompilationError) as ei:
        _compile(kernel, sig, target)
    return str(ei.value)


def _case(kernel, sig, *needles, target="cuda:90", id):
    return pytest.param(kernel, sig, target, needles, id=id)


# (kernel, signature, target, substrings the CompilationError must contain)
BAD_ARGUMENTS = [
    *(_case(k_wait, ["*i32", "'warp'", "'acquire'"], "dl.wait", "scope='warp'", "'cta', 'gpu', 'sys'", target=t,
            id=f"wait_bad_scope-{t}") for t in ("cuda:90", "hip:gfx942")),
    _case(k_wait, ["*i32", "'gpu'", "'release'"], "dl.wait", "semantic='release'", "'acquire', 'relaxed'",
          id="wait_bad_semantic"),
    *(_case(k_wait, [ptr, "'gpu'", "'acquire'"], "dl.wait", "32- or 64-bit", "int32, uint32, int64, uint64",
            id=f"wait_bad_signal_width-{ptr}") for ptr in ("*i16", "*fp32", "*i8")),
    _case(k_wait, ["i32", "'gpu'", "'acquire'"], "dl.wait", "barrierPtrs must be a pointer", id="wait_non_pointer"),
    _case(k_wait_block_ptr, ["*i32", "32"], "dl.wait", "scalar pointer", id="wait_tensor_of_pointers"),
    _case(k_notify, ["*i64", "'gpu'", "'xor'"], "dl.notify", "sig_op='xor'", "'set', 'add'",
          id="notify_bad_sig_op"),
    _case(k_notify, ["*i64", "'node'", "'set'"], "dl.notify", "comm_scope='node'",
          "'gpu', 'intra_node', 'inter_node'", id="notify_bad_comm_scope"),
    *(_case(k_notify, [ptr, "'gpu'", "'set'"], "dl.notify", "64-bit", "int64, uint64",
            id=f"notify_signal_must_be_64bit-{ptr}") for ptr in ("*i32", "*u32", "*fp64")),
    _case(k_notify, ["i64", "'gpu'", "'set'"], "dl.notify", "must be a pointer", id="notify_non_pointer"),
    _case(k_symm, ["i32"], "dl.symm_at", "must be a pointer", id="symm_at_non_pointer"),
    _case(k_rank_axis, ["*i32", "0"], "dl.rank", "axis=0", "device meshes not supported yet", id="rank_axis"),
    _case(k_num_ranks_axis, ["*i32", "1"], "dl.num_ranks", "device meshes", id="num_ranks_axis"),
    _case(k_consume_bad_token, ["*i32"], "dl.consume_token", "token", id="consume_token_bad_token"),
]


@pytest.mark.parametrize("kernel,sig,target,needles", BAD_ARGUMENTS)
def test_bad_argument_rejected_at_trace_time(kernel, sig, target, needles):
    msg = _error(kernel, sig, target)
    missing = [n for n in needles if n not in msg]
    assert not missing, f"{missing} not in: {msg}"


def test_bounded_wait_env_parse(monkeypatch):
    from triton_dist.language import core

    monkeypatch.setenv("TRITON_DIST_BOUNDED_WAIT", "abc")
    with pytest.raises(ValueError, match="TRITON_DIST_BOUNDED_WAIT"):
        core.bounded_wait_ms()
    monkeypatch.setenv("TRITON_DIST_BOUNDED_WAIT", "0")
    assert core.bounded_wait_ms() == 0
    monkeypatch.setenv("TRITON_DIST_BOUNDED_WAIT", "1500")
    assert core.bounded_wait_ms() == 1500
    monkeypatch.delenv("TRITON_DIST_BOUNDED_WAIT")
    assert core.bounded_wait_ms() == 0


@pytest.mark.parametrize("target", ["cuda:90", "hip:gfx942"])
def test_all_ops_trace_for_both_targets(target, monkeypatch):
    """Every op traces and lowers to LLVM IR for both GPU targets (the SHMEM externs stay unresolved)."""
    import triton as _t

    seen = {}

    def stop_after_llir(stages):
        names = list(stages)
        for name in names[names.index("llir") + 1:]:
            def skip(src, md, _n=name):
                seen.setdefault("llir", src) if isinstance(src, str) and "llir" not in seen else None
                md.setdefault("name", "k_all_ops")
                return b"" if _n in ("cubin", "hsaco") else ""
            stages[name] = skip

    monkeypatch.setattr(_t.knobs.runtime, "add_stages_inspection_hook",
                        _compat.stages_inspection_hook(stop_after_llir, "test-stop-after-llir"))
    monkeypatch.setenv("TRITON_ALWAYS_COMPILE", "1")
    compiled = _compile(k_all_ops, ["*i32:16", "*i64:16", "*fp32:16", "*fp32:16", "i32", "256"], target)
    llir = compiled.asm["llir"]
    shmem = "nvshmem" if target.startswith("cuda") else "rocshmem"
    for sym in ("my_pe", "n_pes", "ptr"):
        assert f"@{shmem}_{sym}(" in llir
    if target.startswith("cuda"):
        assert "ld.acquire.sys.b32" in llir and "membar.sys" in llir and "atom.relaxed.sys.add.u64" in llir
    else:
        assert "buffer_inv sc0 sc1" in llir and "atomicrmw add" in llir


@triton.jit
def k_wait_value(sig, n, SCOPE: tl.constexpr, SEM: tl.constexpr, N: tl.constexpr):
    if N == 0:
        tok = dl.wait(sig, n, SCOPE, SEM, 3)
    else:
        tok = dl.wait(sig, N, SCOPE, SEM, 3)
    p = dl.consume_token(sig, tok)
    tl.store(p + 8, 1)


def _wait_ptx(scope, sem, n):
    ptx = _compile(k_wait_value, ["*i64:16", "i32", repr(scope), repr(sem), str(n)]).asm["ptx"]
    return "\n".join(" ".join(ln.split()) for ln in ptx.split("// %bb.0:", 1)[1].splitlines()
                     if ln.strip() and not ln.strip().startswith((".loc", "//")))


@pytest.mark.parametrize("scope,sem", [("sys", "acquire"), ("gpu", "relaxed"), ("cta", "acquire")])
def test_wait_on_one_signal_uses_atomic_poll_where_triton_has_it(scope, sem):
    """``dl.wait`` on one signal (count 1, no bound): Triton's ``tl.atomic_poll`` on 3.9+ (``HAS_ATOMIC_POLL``), the
    inline-asm spin before. Both: thread 0 alone spins on the signal at ``scope`` until it equals the value, the
    acquire (``ld.acquire`` in the spin; ``ld.relaxed`` + ``fence.acquire`` after it) has the same scope, and
    ``bar.sync 0`` orders the CTA after it; the consumed pointer's store comes after the barrier."""
    ptx = _wait_ptx(scope, sem, 1)
    bar = ptx.index("bar.sync 0")
    assert ptx.index("st.global.b64") > bar, ptx
    if _compat.HAS_ATOMIC_POLL:
        assert "TDW_SPIN" not in ptx, ptx
        spin = re.search(rf"ld\.relaxed\.{scope}\.global\.b64 (%rd\d+), \[ %rd\d+ \+ 0 \];\s*"
                         rf"setp\.ne\.b64\s+(%p\d+), \1, 3;\s*@\2 bra", ptx)
        assert spin and spin.end() < bar, ptx
        fence = ptx.find(f"fence.acquire.{scope};", spin.end())
        assert (spin.end() < fence < bar) if sem == "acquire" else fence == -1, ptx
        assert "ld.acquire" not in ptx
    else:
        spin = re.search(rf"TDW_SPIN:\s*ld\.{sem}\.{scope}\.b64 %tdw_v, \[%tdw_a\];\s*setp\.ne\.b64", ptx)
        assert spin and spin.end() < bar and "fence." not in ptx, ptx
    assert "atom." not in ptx


@pytest.mark.parametrize("n", [0, 2])
def test_wait_on_several_or_a_runtime_count_keeps_the_spin(n):
    """A runtime count (``n == 0`` here: the kernel argument) or more than one signal: the inline-asm spin on every
    Triton (``tl.atomic_poll`` has no mask; the threads split the signals t, t+ntid, ...)."""
    ptx = _wait_ptx("sys", "acquire", n)
    assert re.search(r"TDW_SPIN:\s*ld\.acquire\.sys\.b64", ptx) and "mov.u32 %tdw_n, %ntid.x;" in ptx, ptx
    assert "fence.acquire" not in ptx


def test_bounded_wait_keeps_the_spin(monkeypatch):
    """``TRITON_DIST_BOUNDED_WAIT``: the spin with the global-timer bound on every Triton (the public poll's timeout
    does not give the value seen, which the timeout report prints)."""
    monkeypatch.setenv("TRITON_DIST_BOUNDED_WAIT", "100")
    ptx = _wait_ptx("gpu", "acquire", 1)
    assert re.search(r"TDW_SPIN:\s*ld\.acquire\.gpu\.b64", ptx) and "%globaltimer" in ptx, ptx
