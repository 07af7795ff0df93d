"""language_extra / simt_exec_region / vector: argument errors, target-dependent constants, and real executions on
the simulator (Triton's interpreter; a program is one thread there)."""
import os

import numpy as np
import pytest
import torch
import triton
import triton.language as tl
from triton.compiler.errors import CompilationError

from triton_dist.language.extra import language_extra as le
from triton_dist.language.extra.language_extra import (__syncthreads, atomic_add, atomic_cas, ld, ld_vector, ntid,
                                                       num_threads, num_warps, pack, st, st_vector, threads_per_warp,
                                                       tid, unpack)
from triton_dist.language.simt import extract, insert, make_vector, simt_exec_region, vector, zeros_vector
from triton_dist.target import parse_target
from triton_dist.tools.compile import CompileRequest, compile_kernel


def _jit(interpret):
    """``triton.jit`` with the interpreter knob forced for the definition (kernels keep the mode they were
    defined in)."""

    def deco(fn):
        prev = triton.knobs.runtime.interpret
        triton.knobs.runtime.interpret = interpret
        try:
            return triton.jit(fn)
        finally:
            triton.knobs.runtime.interpret = prev

    return deco


gpu_jit = _jit(False)
sim_jit = _jit(True)


def _compile(kernel, sig, target="cuda:90", stage="ttir", **defines):
    c = compile_kernel(CompileRequest(kernel, parse_target(target), sig, defines))
    return c.asm[stage]


# ----------------------------------------------------------------------------------------------------------------
# compile-time errors (bad input never reaches a launch)
# ----------------------------------------------------------------------------------------------------------------


@gpu_jit
def _ld_k(p, SCOPE: tl.constexpr, SEM: tl.constexpr):
    st(p, ld(p, SCOPE, SEM))


@gpu_jit
def _st_k(p, SCOPE: tl.constexpr, SEM: tl.constexpr):
    st(p, 1, SCOPE, SEM)


@gpu_jit
def _atomic_k(p, SCOPE: tl.constexpr, SEM: tl.constexpr):
    atomic_add(p, 1, SCOPE, SEM)
    atomic_cas(p, 0, 1, SCOPE, SEM)


@gpu_jit
def _tid_k(p, AXIS: tl.constexpr):
    st(p, tid(AXIS))


@gpu_jit
def _vec_k(p, N: tl.constexpr):
    st_vector(p, ld_vector(p, N))


@gpu_jit
def _pack_k(p, q):
    v = ld_vector(p, 2)
    st(q, pack(v, tl.int32))


@gpu_jit
def _st_vector_dtype_k(p, q):
    st_vector(q, ld_vector(p, 4))


@pytest.mark.parametrize("kernel,defines,match", [
    (_ld_k, dict(SCOPE="galaxy", SEM="relaxed"), r"ld: unsupported scope 'galaxy'; accepted: 'cta'"),
    (_ld_k, dict(SCOPE="gpu", SEM="release"), r"ld: unsupported semantic 'release'; accepted: 'relaxed'"),
    (_st_k, dict(SCOPE="sys", SEM="acquire"), r"st: unsupported semantic 'acquire'; accepted: .*'release'"),
    (_atomic_k, dict(SCOPE="gpu", SEM="volatile"), r"atomic_add: unsupported semantic 'volatile'; accepted: .*acq_rel"),
    (_atomic_k, dict(SCOPE="device", SEM="relaxed"), r"atomic_add: unsupported scope 'device'"),
    (_tid_k, dict(AXIS=3), r"tid: unsupported axis 3; accepted: 0, 1, 2"),
    (_vec_k, dict(N=0), r"ld_vector: vec_size must be a positive constexpr int, got 0"),
])
def test_bad_arguments_are_compile_errors(kernel, defines, match):
    with pytest.raises(CompilationError, match=match):
        _compile(kernel, ["*i32"], **defines)


def test_pack_width_mismatch_is_an_error():
    with pytest.raises(CompilationError, match=r"pack: 2 x int32 is 64 bits but int32 has 32"):
        _compile(_pack_k, ["*i32", "*i32"])


def test_st_vector_dtype_mismatch_is_an_error():
    with pytest.raises(CompilationError, match=r"st_vector: vector dtype int32 differs from the pointee dtype fp32"):
        _compile(_st_vector_dtype_k, ["*i32", "*fp32"])


def test_pointer_block_is_rejected():

    @gpu_jit
    def k(p):
        st(p + tl.arange(0, 4), 1)

    with pytest.raises(CompilationError, match=r"st: ptr must be a scalar pointer"):
        _compile(k, ["*i32"])


# ----------------------------------------------------------------------------------------------------------------
# target-dependent constants: decided by the target being compiled, not by this machine
# ----------------------------------------------------------------------------------------------------------------


@gpu_jit
def _consts_k(p):
    st(p, threads_per_warp() * 1000 + num_threads())
    st(p + 1, num_warps())


@pytest.mark.parametrize("interpret", [False, True])
def test_every_builtin_called_outside_a_kernel_says_so(interpret, monkeypatch):
    """One decorator for every builtin: host code calling one gets the same clear error, whatever the interpreter
    switch says (inside an interpreted launch the same calls run)."""
    import triton_dist.language as dl
    from triton_dist.language import profiler
    from triton_dist.language.extra import libshmem_device

    monkeypatch.setattr(triton.knobs.runtime, "interpret", interpret)
    calls = {"rank": dl.rank, "tid": tid, "num_threads": num_threads, "__syncthreads": __syncthreads,
             "my_pe": libshmem_device.my_pe, "timestamp": profiler.timestamp,
             "zeros_vector": lambda: zeros_vector(2, tl.int32)}
    for name, call in calls.items():
        with pytest.raises(ValueError, match=f"^{name}: called outside a @triton.jit / @triton_dist.jit kernel$"):
            call()


@pytest.mark.parametrize("target,tpw", [("cuda:90", 32), ("hip:gfx942", 64), ("hip:gfx90a", 64)])
def test_threads_per_warp_follows_target(target, tpw):
    ttir = _compile(_consts_k, ["*i32"], target=target)
    assert f"arith.constant {tpw * 1000 + 4 * tpw} : i32" in ttir, ttir
    assert "arith.constant 4 : i32" in ttir


# ----------------------------------------------------------------------------------------------------------------
# simulator executions (TRITON_INTERPRET kernels on CPU tensors)
# ----------------------------------------------------------------------------------------------------------------


@sim_jit
def _sim_region(out):
    pid = tl.program_id(0)
    with simt_exec_region() as (t, n):
        if t == 0:
            if pid % 2 == 0:
                st(out + pid * 4, pid + 100)
            else:
                st(out + pid * 4, -pid)
        __syncthreads()
        for i in range(1, 3 + t, n):  # not a stride loop over the threads: the stop depends on t
            st(out + pid * 4 + i, 0)
        st(out + pid * 4 + 3, threads_per_warp() * 100 + tid(1) + tid(2) + ntid(1))


@sim_jit
def _sim_region_ok(out):
    pid = tl.program_id(0)
    with simt_exec_region() as (t, n):
        if t == 0:
            if pid % 2 == 0:
                st(out + pid * 4, pid + 100)
            else:
                st(out + pid * 4, -pid)
        __syncthreads()
        for i in range(pid * 4 + 1 + t * 2, pid * 4 + 3, n * 2):  # stride loop: elements 1 (and 3, out of range)
            st(out + i, 7)
        if t < 32:
            st(out + pid * 4 + 2, threads_per_warp() * 100 + tid(1) + tid(2) + ntid(1))
        st(out + pid * 4 + 3, tid(2))


@pytest.mark.sim
def test_sim_region_runs_thread_zero_guards_and_stride_loops():
    """A program is one thread on the simulator (tid == 0, one thread of stride 1): guards and stride loops run as
    on a GPU; tid(1) == tid(2) == 0, ntid(1) == 1 and threads_per_warp() == 1 (the simulator's warp)."""
    from triton_dist.runtime.sim.interpreter import install_interpreter_fixes

    install_interpreter_fixes()  # what turning the simulator on does (runtime-bound range loops)
    out = torch.full((16, ), -99, dtype=torch.int32)
    _sim_region_ok[(4, )](out)
    o = out.view(4, 4)
    assert o[:, 0].tolist() == [100, -1, 102, -3]
    assert o[:, 1].tolist() == [7] * 4
    assert o[:, 2].tolist() == [101] * 4
    assert o[:, 3].tolist() == [0] * 4


@pytest.mark.sim
def test_sim_region_refuses_a_loop_bound_by_the_thread_index():
    out = torch.full((16, ), -99, dtype=torch.int32)
    with pytest.raises(Exception, match=r"_sim_region .*line \d+.*`for i in range\(1, 3 \+ t, n\)"):
        _sim_region[(4, )](out)


@sim_jit
def _sim_message(data, flag, out, SEM_LD: tl.constexpr, SEM_ST: tl.constexpr):
    pid = tl.program_id(0)
    if pid == 0:
        st(data, 1234, "sys", "relaxed")
        st(flag, 1, "sys", SEM_ST)
    else:
        while ld(flag, "sys", SEM_LD) != 1:
            pass
        st(out, ld(data, "sys", "relaxed"))


@pytest.mark.sim
@pytest.mark.parametrize("sem_ld,sem_st", [("acquire", "release"), ("volatile", "volatile"), ("relaxed", "relaxed")])
def test_sim_message_passing(sem_ld, sem_st):
    data = torch.zeros(1, dtype=torch.int32)
    flag = torch.zeros(1, dtype=torch.int64)
    out = torch.zeros(1, dtype=torch.int32)
    _sim_message[(2, )](data, flag, out, sem_ld, sem_st)
    assert flag.item() == 1 and out.item() == 1234


@sim_jit
def _sim_atomic_add(counter, olds, fcounter):
    pid = tl.program_id(0)
    st(olds + pid, atomic_add(counter, 2, "gpu", "acq_rel"))
    atomic_add(fcounter, 0.5, "sys", "relaxed")


@pytest.mark.sim
def test_sim_atomic_add_counts_and_returns_old():
    counter = torch.tensor([7], dtype=torch.int64)
    olds = torch.zeros(16, dtype=torch.int64)
    fcounter = torch.zeros(1, dtype=torch.float32)
    _sim_atomic_add[(16, )](counter, olds, fcounter)
    assert counter.item() == 7 + 32
    assert sorted(olds.tolist()) == [7 + 2 * i for i in range(16)]
    assert fcounter.item() == 8.0


@sim_jit
def _sim_lock(lock, total, olds):
    pid = tl.program_id(0)
    got = atomic_cas(lock, 0, 1, "gpu", "acquire")
    while got != 0:
        got = atomic_cas(lock, 0, 1, "gpu", "acquire")
    st(total, ld(total, "gpu", "relaxed") + pid)
    st(olds + pid, atomic_cas(lock, 1, 0, "gpu", "release"))


@pytest.mark.sim
def test_sim_atomic_cas_lock():
    lock = torch.zeros(1, dtype=torch.int32)
    total = torch.zeros(1, dtype=torch.int32)
    olds = torch.zeros(8, dtype=torch.int32)
    _sim_lock[(8, )](lock, total, olds)
    assert lock.item() == 0 and total.item() == sum(range(8)) and olds.tolist() == [1] * 8


@sim_jit
def _sim_cas_fail(p, out):
    st(out, atomic_cas(p, 5, 9, "sys", "acq_rel"))  # *p is 3: fails, returns 3, leaves *p


@pytest.mark.sim
def test_sim_atomic_cas_failure_leaves_memory():
    p = torch.tensor([3], dtype=torch.int64)
    out = torch.zeros(1, dtype=torch.int64)
    _sim_cas_fail[(1, )](p, out)
    assert p.item() == 3 and out.item() == 3


@sim_jit
def _sim_vectors(h_src, h_dst, i_src, i_dst, misc, SEM_LD: tl.constexpr, SEM_ST: tl.constexpr):
    v = ld_vector(h_src, 8, "gpu", SEM_LD)  # 8 x fp16
    st_vector(h_dst, v * 2.0 + 1.0, "gpu", SEM_ST)
    w = ld_vector(i_src, 3)  # 3 x int32
    w = w - 1
    st_vector(i_dst, w)
    bits = v.recast(tl.int32)  # 4 x int32
    st(misc, bits[0])
    st(misc + 1, len(bits))
    p = pack(make_vector([w[0], w[1]]), tl.int64)
    q = unpack(p, tl.int16)  # 4 x int16, lowest first
    st(misc + 2, q[2].to(tl.int32))
    z = zeros_vector(4, tl.float32)
    z = insert(z, 2.5, 1)
    st(misc + 3, extract(z, 1).to(tl.int32, bitcast=True))
    st(misc + 4, z.to(tl.int32)[1])
    t = tl.arange(0, 8) * 3
    st(misc + 5, extract(t, [5]))
    t = insert(t, 77, [2])
    st(misc + 6, extract(t, [2]) + extract(t, [3]))  # 77 + 9
    st(misc + 7, p)


@pytest.mark.sim
@pytest.mark.parametrize("sem_ld,sem_st", [("relaxed", "relaxed"), ("acquire", "release"), ("volatile", "volatile")])
def test_sim_vectors_pack_unpack(sem_ld, sem_st):
    h_src = torch.arange(8, dtype=torch.float16) * 0.5
    h_dst = torch.zeros(8, dtype=torch.float16)
    i_src = torch.tensor([10, 20, 30], dtype=torch.int32)
    i_dst = torch.zeros(3, dtype=torch.int32)
    misc = torch.zeros(8, dtype=torch.int64)
    _sim_vectors[(1, )](h_src, h_dst, i_src, i_dst, misc, sem_ld, sem_st)
    assert h_dst.tolist() == (h_src * 2 + 1).tolist()
    assert i_dst.tolist() == [9, 19, 29]
    h_bits = h_src.view(torch.int16).numpy().astype(np.uint16)
    assert misc[0].item() == int(np.array([h_bits[0] | (h_bits[1].astype(np.uint32) << 16)],
                                          dtype=np.uint32).view(np.int32)[0])
    assert misc[1].item() == 4
    assert misc[2].item() == 19  # pack(9, 19) -> int16 pieces [9, 0, 19, 0]
    assert misc[3].item() == int(np.array([2.5], np.float32).view(np.int32)[0])
    assert misc[4].item() == 2
    assert misc[5].item() == 15
    assert misc[6].item() == 77 + 9
    assert misc[7].item() == 9 | (19 << 32)


@sim_jit
def _sim_bad_scope(p):
    st(p, 1, "galaxy", "relaxed")


@pytest.mark.sim
def test_sim_bad_scope_is_a_clear_error():
    with pytest.raises(Exception, match=r"st: unsupported scope 'galaxy'; accepted"):
        _sim_bad_scope[(1, )](torch.zeros(1, dtype=torch.int32))


def test_vector_type_checks():
    with pytest.raises(ValueError, match="at least one"):
        vector([])
    with pytest.raises(TypeError, match="scalar tl values"):
        vector([1, 2])


def test_module_exports_reference_names():
    for name in ["tid", "ntid", "atomic_cas", "atomic_add", "__syncthreads", "ld", "st", "ld_vector", "st_vector",
                 "pack", "unpack", "threads_per_warp", "num_threads", "num_warps"]:
        assert name in le.__all__ and hasattr(le, name)
    from triton_dist.language.extra import language_extra  # noqa: F401


@gpu_jit
def _vec_helper(v, k):
    return v * k


@gpu_jit
def _vector_flow_k(src, dst, n, idx):
    acc = zeros_vector(4, tl.float32)
    for i in range(n):  # a vector carried through a loop and an if, and passed to a jit function
        acc = acc + ld_vector(src + i * 4, 4)
        if i % 2 == 0:
            acc = _vec_helper(acc, 2.0)
    st_vector(dst, acc.to(tl.float32))
    t = tl.arange(0, 16) * 2
    t = insert(t, 5, [idx])
    st(dst + 4, extract(t, [idx + 1]).to(tl.float32) + extract(t, idx).to(tl.float32))


@pytest.mark.skipif(os.environ.get("TRITON_INTERPRET") == "1",
                    reason="jit helpers called from a compiled kernel are interpreter functions in this process")
@pytest.mark.xfail(hasattr(tl.tensor, "_set_name") and "_set_name" not in vector.__dict__, strict=True,
                   reason="Triton 3.8+ names each device-function argument (tl.tensor._set_name reads .handle); "
                          "simt.vector needs `def _set_name(self, builder, name): "
                          "_compat.ir_value_parts_set_name(<its element values>, builder, name)`")
@pytest.mark.parametrize("target,stage,needles", [
    ("cuda:90", "ptx", ["ld.relaxed.gpu.global.v4.b32", "st.relaxed.gpu.global.v4.b32"]),
    ("hip:gfx942", "amdgcn", ["global_load_dwordx4 v[0:3]", "global_store_dwordx4"]),
])
def test_vector_through_control_flow_compiles(target, stage, needles):
    asm = _compile(_vector_flow_k, ["*fp32:16", "*fp32:16", "i32", "i32"], target=target, stage=stage)
    for n in needles:
        assert n in asm, n


# ----------------------------------------------------------------------------------------------------------------
# simulator: code indexed by tid() per thread (issue 16 point 5) is refused, not run as thread 0 alone
# ----------------------------------------------------------------------------------------------------------------


@sim_jit
def _sim_per_thread_copy(src, dst, N: tl.constexpr):
    t = tid(0)
    if t < N:
        st(dst + t, ld(src + t))


@sim_jit
def _sim_per_thread_wait(flags, out):
    pid = tl.program_id(0)
    with simt_exec_region() as (t, n):
        if pid == 0:
            if t < 4:
                st(flags + t, 1, "sys", "release")
        else:
            if t < 4:
                while ld(flags + 3 - t, "sys", "acquire") != 1:
                    pass
            st(out, 1)


@pytest.mark.sim
def test_sim_refuses_per_thread_indexing_by_tid():
    """A copy where thread t moves element t: on a GPU all N elements move; the simulator (one thread per program)
    would move element 0 alone. It is refused with one line naming the kernel, the line and what to do."""
    src = torch.arange(8, dtype=torch.int32) + 1
    dst = torch.zeros(8, dtype=torch.int32)
    with pytest.raises(Exception, match=r"_sim_per_thread_copy .*line \d+.*`st\(dst \+ t, ld\(src \+ t\)\)`.*one thread "
                                        r"per program.*range\(tid, N, ntid\)") as err:
        _sim_per_thread_copy[(1, )](src, dst, 8)
    cause = err.value.__cause__ or err.value
    assert type(cause).__name__ == "SimUnsupportedSimt" and "\n" not in str(cause), repr(cause)
    assert dst.tolist() == [0] * 8  # refused before any thread wrote


@pytest.mark.sim
def test_sim_refuses_per_thread_waits_instead_of_spinning():
    """Thread t of program 1 waits for the flag thread 3 - t of program 0 sets: as thread 0 alone, program 1 would
    wait for flag 3, which nobody sets (a spin with no end). Refused when the region is entered."""
    flags = torch.zeros(4, dtype=torch.int32)
    out = torch.zeros(1, dtype=torch.int32)
    with pytest.raises(Exception, match=r"_sim_per_thread_wait .*`st\(flags \+ t, 1, \"sys\", \"release\"\)`"):
        _sim_per_thread_wait[(2, )](flags, out)


_T = "t = tid(0)\n    n = ntid(0)\n    "


@pytest.mark.parametrize("body,refused", [
    ("for i in range(t, N, n):\n        st(p + i, 0)", None),
    ("for i in range(u + t * 4, N, n * 4):\n        st(p + i, 0)", None),
    ("for i in range(4 * t, N, 4 * num_threads()):\n        st(p + i, 0)", None),
    ("if t == 0:\n        st(p, 0)", None),
    ("if 0 == tid(0):\n        st(p, 0)", None),
    ("if t < 32:\n        st(p, 0)", None),
    ("if 32 > t:\n        st(p, 0)", None),
    ("st(p, tid(1) + tid(2) + ntid(1))", None),
    ("for i in range(t, N, n * 2):\n        st(p + i, 0)", "for i in range(t, N, n * 2)"),
    ("for i in range(t, t + 1, n):\n        st(p + i, 0)", "for i in range(t, t + 1, n)"),
    ("for i in range(num_threads()):\n        st(p + i, 0)", "for i in range(num_threads())"),
    ("if t == 0:\n        st(p, 0)\n    else:\n        st(p, 1)", "if t == 0"),
    ("if t != 0:\n        st(p, 0)", "if t != 0"),
    ("if t == 1:\n        st(p, 0)", "if t == 1"),
    ("while t < 4:\n        st(p, 0)", "while t < 4"),
    ("x = t + 1", "x = t + 1"),
    ("st(p + t, 1)", "st(p + t, 1)"),
    ("st(p, n)", "st(p, n)"),
    ("peer = t\n    st(p + peer, 1)", "st(p + peer, 1)"),
])
def test_sim_simt_check_rules(body, refused):
    """What the simulator runs as one thread per program and what it refuses (backends/sim/simt_check.py)."""
    import linecache

    from triton_dist.backends.sim.simt_check import find_unsupported_use

    src = f"def k(p, u, N):\n    {_T}{body}\n"
    filename = f"<simt-check-{abs(hash(body))}>"
    linecache.cache[filename] = (len(src), None, src.splitlines(True), filename)
    got = find_unsupported_use(filename, 1, "k")
    assert (got and got[1]) == refused, got
