"""triton_dist.tools.compile: stages for both targets, and its error paths (one line, exit code 2)."""
import os
import subprocess
import sys
import textwrap

import pytest

from triton_dist.tools import compile as ctool

KERNEL = textwrap.dedent("""
    import triton
    import triton.language as tl

    @triton.jit
    def scale(x_ptr, out_ptr, n, factor, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) * factor, mask=mask)

    not_a_kernel = 3

    @triton.jit
    def broken(x_ptr, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        tl.store(x_ptr + offs, no_such_name(offs))
""")


@pytest.fixture()
def kernel_file(tmp_path):
    path = tmp_path / "kern.py"
    path.write_text(KERNEL)
    return str(path)


def _run(*argv, tmpdir=None):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    if tmpdir is not None:  # where the compiler's temporary files go (tempfile and the tools it runs read TMPDIR)
        env["TMPDIR"] = str(tmpdir)
    return subprocess.run([sys.executable, "-m", "triton_dist.tools.compile", *argv], capture_output=True,
                          text=True, env=env, timeout=300)


@pytest.mark.parametrize("target, stage, needle", [
    ("cuda:90", "ttir", "tt.func public @scale"),
    ("cuda:90", "ttgir", 'ttg.target = "cuda:90"'),
    ("cuda:90", "llir", "define ptx_kernel void @scale"),
    ("cuda:90", "ptx", ".target sm_90a"),
    ("cuda:80", "ptx", ".target sm_80"),
    ("hip:gfx942", "ttgir", 'ttg.target = "hip:gfx942"'),
    # the AMD triple is amdgcn-amd-amdhsa up to Triton 3.8 and amdgpu9.42-amd-amdhsa (per arch) from 3.9 on
    ("hip:gfx942", "llir", "-amd-amdhsa\""),
    ("hip:gfx942", "amdgcn", '.amdgcn_target "amd'),
])
def test_stages(kernel_file, target, stage, needle, capsys):
    rc = ctool.main([f"{kernel_file}:scale", "-s", "*fp32:16, *fp32:16, i32, fp32", "-D", "BLOCK=256",
                     "--target", target, "--stage", stage])
    out = capsys.readouterr().out
    assert rc == 0
    assert needle in out


def test_binary_stage_to_file(kernel_file, tmp_path):
    out = tmp_path / "k.cubin"
    assert ctool.main([f"{kernel_file}:scale", "-s", "*fp32, *fp32, i32, fp32, 128", "--stage", "cubin",
                       "-o", str(out)]) == 0
    assert out.read_bytes()[:4] == b"\x7fELF"


def test_resources_line(kernel_file, capsys, tmp_path):
    """--resources: one JSON line, ptxas' registers and spills, the shared memory, and the residency they allow
    (runtime.occupancy); --out writes it to a file; hip targets are refused."""
    import json

    from triton_dist.runtime.occupancy import programs_per_sm

    argv = [f"{kernel_file}:scale", "-s", "*fp32:16, *fp32:16, i32, fp32, 1024", "--num-warps", "8", "--resources"]
    assert ctool.main(argv) == 0
    res = json.loads(capsys.readouterr().out)
    assert res["kernel"] == "scale" and res["target"] == "cuda:90" and res["num_warps"] == 8
    assert 0 < res["registers"] <= 255 and res["spill_stores"] == res["spill_loads"] == res["stack"] == 0, res
    assert (res["programs_per_sm"], res["bound_by"]) == programs_per_sm(res["registers"], res["shared"], 8)
    assert res["bound_by"]["threads"] == 8  # 2,048 threads an SM / 256
    out = tmp_path / "res.json"
    assert ctool.main(argv + ["-o", str(out)]) == 0
    assert json.loads(out.read_text())["registers"] == res["registers"]
    capsys.readouterr()
    assert ctool.main(argv + ["--target", "hip:gfx942"]) == 2
    assert "--resources needs a cuda target" in capsys.readouterr().err


def test_programs_per_sm():
    """sm_90's residency arithmetic (registers per warp rounded to 256, 1 KiB reserved shared memory a block)."""
    from triton_dist.runtime.occupancy import programs_per_sm

    # the decode split kernel, 4 warps, 72.5 KiB: 189 registers (int64 K/V offsets) -> 2, 126 -> 3 (then shared)
    assert programs_per_sm(189, 74240, 4) == (2, {"regs": 2, "shared": 3, "threads": 16})
    assert programs_per_sm(126, 74240, 4) == (3, {"regs": 4, "shared": 3, "threads": 16})
    assert programs_per_sm(168, 74240, 4)[1]["regs"] == 3 and programs_per_sm(169, 74240, 4)[1]["regs"] == 2
    assert programs_per_sm(16, 0, 1)[0] == 32  # the blocks-per-SM limit
    assert programs_per_sm(255, 0, 32)[0] == 0  # 1,024 threads of 255 registers do not fit


def test_options_reach_the_compiler(kernel_file, capsys):
    ctool.main([f"{kernel_file}:scale", "-s", "*fp32, *fp32, i32, fp32, 128", "--stage", "ttgir",
                "--num-warps", "8"])
    assert '"ttg.num-warps" = 8' in capsys.readouterr().out


@pytest.mark.parametrize("argv, message", [
    (["{f}:scale", "-s", "*fp32", "--target", "cuda:banana"], "unknown target 'cuda:banana'"),
    (["{f}:scale", "-s", "*fp32", "--target", "vulkan:1"], "unknown target 'vulkan:1'"),
    (["{f}:scale", "-s", "*fp32", "--target", "hip:gfx942", "--stage", "ptx"], "unknown stage 'ptx' for hip"),
    (["{f}:scale", "-s", "*fp32", "--stage", "sass"], "unknown stage 'sass' for cuda"),
    (["{f}:nope", "-s", "*fp32"], "no kernel named 'nope'"),
    (["{f}:not_a_kernel", "-s", "*fp32"], "is not a @triton.jit"),
    (["/nonexistent/k.py:scale", "-s", "*fp32"], "kernel file not found"),
    (["{f}:scale", "-s", "*fp32"], "signature has 1 entries but scale takes 5"),
    (["{f}:scale", "-s", "*fp32, *fp32, i32, fp32", "-D", "NOPE=1"], "-D names no parameter"),
    # were a KeyError traceback, 50 lines of ptxas (and /tmp/*.ptx left behind), 61 lines of MLIR
    (["{f}:scale", "-s", "*flt32, *fp32, i32, fp32, 128"], "unknown type '*flt32'"),
    (["{f}:scale", "-s", "*fp32, *fp32, i32, fp32, 128", "--target", "cuda:99"], "unknown target 'cuda:99'"),
    (["{f}:scale", "-s", "*fp32, *fp32, i32, fp32, 128", "--target", "hip:gfx9999"], "unknown target 'hip:gfx9999'"),
])
def test_errors_are_one_line_exit_2(kernel_file, argv, message, tmp_path):
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    res = _run(*[a.format(f=kernel_file) for a in argv], tmpdir=tmpdir)
    assert res.returncode == 2, res
    lines = [ln for ln in res.stderr.strip().splitlines() if ln]
    assert len(lines) == 1, res.stderr
    assert lines[0].startswith("triton-dist-compile: error: ")
    assert message in lines[0]
    assert res.stdout == ""
    assert list(tmpdir.iterdir()) == []


@pytest.mark.parametrize("argv, message", [
    # ptxas failing printed the whole PTX on stdout and a traceback, and left its .ptx input in the temp directory
    (["{f}:scale", "-s", "*fp32, *fp32, i32, fp32, 128", "-O", "ptx_options=--no-such-option", "--stage", "cubin",
      "-o", "{o}"], "compiling scale for cuda:90 failed: ptxas fatal : Unknown option '-no-such-option'"),
    # a front-end error was Triton's CompilationError traceback with the kernel's source
    (["{f}:broken", "-s", "*fp32, 128"], "compiling broken for cuda:90 failed: NameError"),
    (["{f}:broken", "-s", "*fp32, 128", "--target", "hip:gfx942", "--stage", "amdgcn"],
     "compiling broken for hip:gfx942 failed: NameError"),
    # a Triton option check (an AssertionError traceback)
    (["{f}:scale", "-s", "*fp32, *fp32, i32, fp32, 128", "--num-warps", "3"], "num_warps must be a power of 2"),
])
def test_compiler_failures_are_one_line_and_a_hint(kernel_file, argv, message, tmp_path):
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    res = _run(*[a.format(f=kernel_file, o=tmp_path / "k.cubin") for a in argv], tmpdir=tmpdir)
    assert res.returncode == 2, res
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 2, res.stderr
    # Triton 3.9 assembles every arch with its ptxas-blackwell (CUDA 13); earlier ones use ptxas for sm_90
    assert lines[0].startswith("triton-dist-compile: error: ") and message in lines[0].replace("ptxas-blackwell",
                                                                                                  "ptxas"), lines[0]
    assert lines[1] == "triton-dist-compile: hint: rerun with --verbose for the compiler's full output and the traceback"
    assert res.stdout == ""
    assert list(tmpdir.iterdir()) == []  # no .ptx / .log left behind, nor the tool's own directory


def test_front_end_error_names_the_source_line(kernel_file, tmp_path):
    res = _run(f"{kernel_file}:broken", "-s", "*fp32, 128")
    assert "(at `tl.store(x_ptr + offs, no_such_name(offs))`)" in res.stderr


def test_kernel_file_failing_to_import(tmp_path):
    path = tmp_path / "bad.py"
    path.write_text("raise RuntimeError('boom at import')\n")
    res = _run(f"{path}:k", "-s", "i32")
    assert res.returncode == 2
    assert res.stderr.splitlines()[0] == f"triton-dist-compile: error: importing {path} failed: RuntimeError: boom at import"
    assert "Traceback" not in res.stderr


def test_verbose_shows_the_traceback(kernel_file):
    res = _run(f"{kernel_file}:broken", "-s", "*fp32, 128", "--verbose")
    assert res.returncode == 1 and "Traceback" in res.stderr and "no_such_name" in res.stderr


def test_trailing_parameters_with_defaults_may_be_left_out(capsys):
    """``gemm_kernel``'s trailing constexpr switches (``FLATTEN``, ``TMA_STORE``) take their defaults when the
    signature stops before them; given explicitly they change the code."""
    path = os.path.join(os.path.dirname(__file__), "..", "..", "python", "triton_dist", "kernels", "gemm.py")
    sig = "*bf16:16, *bf16:16, *bf16:16, *fp32:16, i32, i32:16, i32:16, i32:16, 1, i32:16, 1, i32:16, 1, 128, 128, 64, " \
          "8, 132, True, False"
    assert ctool.main([f"{path}:gemm_kernel", "-s", sig, "--stage", "ttir"]) == 0
    short = capsys.readouterr().out
    assert ctool.main([f"{path}:gemm_kernel", "-s", sig + ", False, False", "--stage", "ttir"]) == 0
    assert capsys.readouterr().out == short
    assert ctool.main([f"{path}:gemm_kernel", "-s", sig + ", False, True", "--stage", "ttir"]) == 0
    assert "descriptor_store" in capsys.readouterr().out


def test_console_script_entry_point_declared():
    import tomllib

    with open(os.path.join(os.path.dirname(__file__), "..", "..", "pyproject.toml"), "rb") as f:
        scripts = tomllib.load(f)["project"]["scripts"]
    assert scripts["triton-dist-compile"] == "triton_dist.tools.compile:main"


def test_stop_after_skips_later_stages(kernel_file, capsys):
    rc = ctool.main([f"{kernel_file}:scale", "-s", "*fp32, *fp32, i32, fp32, 128", "--target", "hip:gfx942",
                     "--stage", "llir", "--stop-after", "llir"])
    assert rc == 0 and "-amd-amdhsa\"" in capsys.readouterr().out


@pytest.mark.parametrize("argv, message", [
    (["--stage", "ptx", "--stop-after", "llir"], "--stage ptx comes after --stop-after llir"),
    (["--stage", "llir", "--stop-after", "sass"], "unknown --stop-after stage 'sass'"),
])
def test_stop_after_errors(kernel_file, argv, message):
    res = _run(f"{kernel_file}:scale", "-s", "*fp32, *fp32, i32, fp32, 128", *argv)
    assert res.returncode == 2 and message in res.stderr


def _stages_run(monkeypatch, argv, capsys):
    """Run the tool in this process and return ``(rc, stages that ran)``, recorded by a stage-inspection hook that
    the tool's own edit (--stop-after) chains to."""
    import triton

    from triton_dist import _compat

    ran = []

    def record(stages):
        for name, fn in list(stages.items()):
            stages[name] = (lambda src, md, _n=name, _f=fn: (ran.append(_n), _f(src, md))[1])

    monkeypatch.setattr(triton.knobs.runtime, "add_stages_inspection_hook",
                        _compat.stages_inspection_hook(record, "test-record-stages"))
    rc = ctool.main(argv)
    capsys.readouterr()
    return rc, ran


@pytest.mark.parametrize("target", ["cuda:90", "hip:gfx942"])
def test_ir_stages_stop_at_the_stage(kernel_file, target, monkeypatch, capsys):
    """--stage ttir / ttgir / llir runs the pipeline up to that stage only (issue 15: it ran the whole pipeline, so
    a kernel that could not be assembled failed even at --stage ttir); --stop-after a later stage runs more, and
    the assembly stages run everything (so printing them proves that the kernel assembles)."""
    last = "cubin" if target.startswith("cuda") else "hsaco"
    asm = "ptx" if target.startswith("cuda") else "amdgcn"
    base = [f"{kernel_file}:scale", "-s", "*fp32, *fp32, i32, fp32, 128", "--target", target]
    for stage, expected in (("ttir", ["ttir"]), ("ttgir", ["ttir", "ttgir"]), ("llir", ["ttir", "ttgir", "llir"]),
                            (asm, ["ttir", "ttgir", "llir", asm, last])):
        assert _stages_run(monkeypatch, base + ["--stage", stage], capsys) == (0, expected), stage
    assert _stages_run(monkeypatch, base + ["--stage", "llir", "--stop-after", last], capsys) == \
        (0, ["ttir", "ttgir", "llir", asm, last])


UNRESOLVED = textwrap.dedent("""
    import triton
    import triton.language as tl
    from triton.language import core

    @core.extern
    def nowhere(x, _semantic=None):
        return core.extern_elementwise("nolib", "", [x], {(core.dtype("int32"), ): ("defined_nowhere",
                                       core.dtype("int32"))}, is_pure=False, _semantic=_semantic)

    @triton.jit
    def calls_nowhere(out):
        tl.store(out, nowhere(tl.load(out)))
""")


def test_llir_of_a_kernel_that_cannot_assemble(tmp_path):
    """A CUDA kernel calling a function no library defines: its LLVM IR prints (ptxas, which rejects the call, does
    not run for --stage llir); --stage ptx fails naming the function, and so does --stage llir when the whole
    pipeline is asked for (--stop-after cubin)."""
    path = tmp_path / "unresolved.py"
    path.write_text(UNRESOLVED)
    base = [f"{path}:calls_nowhere", "-s", "*i32", "--target", "cuda:90"]
    res = _run(*base, "--stage", "llir", tmpdir=tmp_path)
    assert res.returncode == 0 and "call i32 @defined_nowhere" in res.stdout, res.stderr
    for extra in (["--stage", "ptx"], ["--stage", "llir", "--stop-after", "cubin"]):
        res = _run(*base, *extra, tmpdir=tmp_path)
        assert res.returncode == 2 and "defined_nowhere" in res.stderr, (extra, res.stderr)


SMEM_KERNEL = textwrap.dedent("""
    import triton
    import triton.language as tl

    @triton.jit
    def mm(a_ptr, b_ptr, c_ptr, K, BLOCK: tl.constexpr, BK: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        ok = tl.arange(0, BK)
        acc = tl.zeros((BLOCK, BLOCK), dtype=tl.float32)
        for k in range(0, K, BK):
            a = tl.load(a_ptr + offs[:, None] * K + (k + ok)[None, :])
            b = tl.load(b_ptr + (k + ok)[:, None] * BLOCK + offs[None, :])
            acc = tl.dot(a, b, acc)
        tl.store(c_ptr + offs[:, None] * BLOCK + offs[None, :], acc)
""")


@pytest.mark.parametrize("stages, ok", [(2, True), (8, False)])
def test_shared_memory_beyond_the_target_is_refused(tmp_path, stages, ok):
    """A kernel whose pipelined stage buffers exceed the target's shared memory per block compiles in Triton and
    fails only at launch (OutOfResources); the tool refuses it (2026-12-06: a TP-MoE kernel reached the GPU so).
    128x128x128 bf16 tiles: 64 KiB a stage -- 2 stages fit sm_90's 227 KiB, 8 do not."""
    path = tmp_path / "mm.py"
    path.write_text(SMEM_KERNEL)
    res = _run(f"{path}:mm", "-s", "*bf16:16, *bf16:16, *fp32:16, i32:16, 128, 128", "--target", "cuda:90",
               "--num-stages", str(stages), "--stage", "ptx")
    if ok:
        assert res.returncode == 0, res.stderr
        return
    assert res.returncode == 2, res
    # the tool's two lines (a Triton release may print its own warnings before them)
    lines = [ln for ln in res.stderr.strip().splitlines() if ln.startswith("triton-dist-compile: ")]
    assert len(lines) == 2 and "mm needs" in lines[0] and "cuda:90 has at most 232448" in lines[0], res.stderr
    assert "num-stages" in lines[1]
