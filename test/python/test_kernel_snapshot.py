"""scripts/kernel_snapshot.py: RUN-line parsing (setup steps included), the normalizers, and snapshot/compare round
trips."""
import importlib.util
import json
import os
import re
import subprocess
import sys
import textwrap

import pytest

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
SCRIPT = os.path.join(REPO, "scripts", "kernel_snapshot.py")
LIT = os.path.join(REPO, "test", "lit")


@pytest.fixture(scope="module")
def ks():
    spec = importlib.util.spec_from_file_location("kernel_snapshot", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    sys.modules["kernel_snapshot"] = mod  # dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod


# ---------------------------------------------------------------------------------------------------- RUN lines


def test_run_lines_in_order_with_continuations(ks):
    text = textwrap.dedent("""\
        # a comment
        # RUN: %compile %s:k -s "*i32" \\
        # RUN:     --target cuda:90 --stage ptx | filecheck %s
        x = 1
        # RUN: not %compile %s:k -s "i32"
        """)
    runs = ks.parse_run_lines(text, "/t/a.py")
    assert [(r.lineno, r.index) for r in runs] == [(2, 1), (5, 2)]
    assert runs[0].text == '%compile %s:k -s "*i32" --target cuda:90 --stage ptx | filecheck %s'


def _plan(ks, text, test=None):
    test = test or os.path.join(LIT, "language", "t.py")
    return ks.plan(ks.RunLine(test, 7, 3, text), LIT)


def test_plan_compile_command(ks):
    cmd = _plan(ks, 'env A=1 B="x y" %compile %s:k -s "*i32:16, 64" -D N=2 --target cuda:90 --stage ptx '
                    '| filecheck %s --check-prefix=P')
    assert isinstance(cmd, ks.Command)
    test = os.path.join(LIT, "language", "t.py")
    assert cmd.argv == [f"{test}:k", "-s", "*i32:16, 64", "-D", "N=2", "--target", "cuda:90", "--stage", "ptx"]
    assert cmd.env == {"A": "1", "B": "x y"}
    assert (cmd.name, cmd.stage) == ("language__t.03.ptx", "ptx")


@pytest.mark.parametrize("text, argv_tail, stage", [
    ("%compile %s:k --target hip:gfx942 --stage llir --stop-after llir > %t.amd.ll", ["--stop-after", "llir"], "llir"),
    ("%compile %s:k --stage=amdgcn 2>&1 | filecheck %s", ["--stage=amdgcn"], "amdgcn"),
    ("%compile %s:k --stage ttgir -o %t.ttgir", ["ttgir"], "ttgir"),
    ("%compile %s:k", [], "ptx"),  # the tool's default stage
    ("%python -m triton_dist.tools.compile %s:k --stage ttir", ["ttir"], "ttir"),
])
def test_plan_drops_redirections_and_out(ks, text, argv_tail, stage):
    cmd = _plan(ks, text)
    assert isinstance(cmd, ks.Command), getattr(cmd, "reason", None)
    assert cmd.stage == stage and cmd.argv[0].endswith("t.py:k")
    assert cmd.argv[len(cmd.argv) - len(argv_tail):] == argv_tail
    assert not any(a.startswith((">", "2>", "%t")) or a in ("-o", ) for a in cmd.argv)


@pytest.mark.parametrize("text, reason", [
    ("not %compile %s:k -s i32 2>&1 | filecheck %s", "expects a failure"),
    ("filecheck %s --input-file %t.ll", "not a compile command (filecheck)"),
    ("not grep -E mc_ptr %t.ll", "expects a failure"),
    ("%compile %s:k --stage cubin -o %t.cubin", "binary stage (cubin)"),
    ("%compile %s:k --stage hsaco -o %t.hsaco", "binary stage (hsaco)"),
    ("%compile %s:k && echo hi", "compound command (&&)"),
    ("%compile %s:k --stage ptx ; true", "compound command (;)"),
    ("%compile %{nope}:k", "unknown substitution %{nope}"),
    ("%compile %s:k --stage sass", "unknown stage (sass)"),
])
def test_plan_skips(ks, text, reason):
    item = _plan(ks, text)
    assert isinstance(item, ks.Skipped)
    assert item.reason.startswith(reason)


def test_plan_substitutions_and_quoted_pipe(ks):
    cmd = _plan(ks, '%compile %S/other.py:k -s "a|b" -D X=100%%')
    assert cmd.argv == [os.path.join(LIT, "language", "other.py:k"), "-s", "a|b", "-D", "X=100%"]


def test_plan_setup_step_shares_the_compile_lines_t(ks):
    setup = _plan(ks, "env TRITON_DIST_BACKEND=sim %python %s %t.gen.py -o x 2>&1 | filecheck %s --check-prefix=GEN")
    assert isinstance(setup, ks.Setup), getattr(setup, "reason", None)
    assert setup.name == "language__t.03.setup" and setup.run.test == os.path.join(LIT, "language", "t.py")
    assert setup.argv == ["./t.py.tmp.gen.py", "-o", "x"]  # the script's own -o stays; 2>&1 and filecheck go
    assert setup.env == {"TRITON_DIST_BACKEND": "sim"}
    cmd = _plan(ks, '%compile %t.gen.py:MEGA -s "*i32, 8" --target cuda:90 --stage ptx | filecheck %s')
    assert isinstance(cmd, ks.Command) and cmd.argv[0] == setup.argv[0] + ":MEGA"


@pytest.mark.parametrize("text, reason", [
    ("%python %s %t.gen.py > %t.out", "setup step redirecting its output to a file (>)"),
    ("not %python %s %t.gen.py", "expects a failure (not ...)"),
    ("%python %S/../Inputs/same_calls.py rocshmem_ %t.amd.ll", "not a compile command (%python)"),
])
def test_plan_setup_step_skips(ks, text, reason):
    item = _plan(ks, text)
    assert isinstance(item, ks.Skipped) and item.reason == reason


def test_discover_attaches_setup_steps(ks, tmp_path):
    lit_file = tmp_path / "gen.py"
    lit_file.write_text(textwrap.dedent("""\
        # RUN: %compile %s:k --stage ttir
        # RUN: env A=1 %python %s %t.a.py | filecheck %s
        # RUN: %compile %t.a.py:k --stage ptx
        # RUN: %python %s %t.b.py
        # RUN: %compile %t.b.py:k --stage llir
        # RUN: %python %s %t.c.py
        """))
    commands, skipped = ks.discover([str(lit_file)], LIT)
    assert [c.name for c in commands] == ["gen.01.ttir", "gen.03.ptx", "gen.05.llir"]
    assert [[s.name for s in c.setups] for c in commands] == [[], ["gen.02.setup"], ["gen.02.setup", "gen.04.setup"]]
    assert [s.name for s in ks.setup_steps(commands)] == ["gen.02.setup", "gen.04.setup"]
    assert [(s.run.index, s.reason) for s in skipped] == [(6, "setup step with no compile command after it")]


def test_discover_mega_chain_generates_before_compiling(ks):
    commands, _ = ks.discover([os.path.join(LIT, "mega", "chain.py")], LIT)
    setups = {c.name: [s.name for s in c.setups] for c in commands}
    # each compile after every generator line before it (the generators write distinct files: order, not content)
    gens = ["mega__chain.01.setup", "mega__chain.04.setup", "mega__chain.06.setup", "mega__chain.09.setup"]
    assert setups == {"mega__chain.02.ptx": gens[:1], "mega__chain.03.amdgcn": gens[:1],
                      "mega__chain.05.ptx": gens[:2], "mega__chain.07.ptx": gens[:3],
                      "mega__chain.08.amdgcn": gens[:3], "mega__chain.10.ptx": gens, "mega__chain.11.amdgcn": gens}
    gen = ks.setup_steps(commands)[0]
    assert gen.env == {"TRITON_DIST_BACKEND": "sim"} and commands[0].argv[0] == gen.argv[0] + ":MEGA_TRITON_KERNEL"


def test_child_env_is_lits(ks, monkeypatch):
    monkeypatch.setenv("TRITON_DISABLE_LINE_INFO", "1")  # a knob from the caller's shell must not leak in
    monkeypatch.setenv("TRITON_DIST_BOUNDED_WAIT", "5")
    monkeypatch.setenv("PYTHONPATH", "/extra")
    env = ks._child_env(_plan(ks, "env TRITON_DIST_BOUNDED_WAIT=250 %compile %s:k"), "/repo")
    assert "TRITON_DISABLE_LINE_INFO" not in env and env["TRITON_DIST_BOUNDED_WAIT"] == "250"
    assert env["PYTHONPATH"] == os.pathsep.join([os.path.join("/repo", "python"), "/extra"])
    assert env["TRITON_INTERPRET"] == "0" and env["PATH"] == os.environ["PATH"]


def test_names_are_stable_and_distinct(ks):
    a = ks.snapshot_name(os.path.join(LIT, "overlap", "gemm_rs_ce.py"), 2, "llir", LIT)
    assert a == "overlap__gemm_rs_ce.02.llir"
    assert ks.snapshot_name("/elsewhere/x.py", 1, "ptx", LIT) == "x.01.ptx"


def test_discover_repo_lit_suite(ks):
    commands, skipped = ks.discover([LIT], LIT)
    names = [c.name for c in commands]
    assert len(names) == len(set(names)) and len(commands) > 40
    assert all(c.stage in ks.TEXT_STAGES for c in commands)
    assert any(s.reason.startswith("expects a failure") for s in skipped)


# ---------------------------------------------------------------------------------------------------- normalizers

PTX = """\
//
// Generated by LLVM NVPTX Back-End
//

.version 8.7
.target sm_90a
	// .globl	k              // -- Begin function k
.visible .entry k(
	.param .u64 .ptr .global .align 1 k_param_0
)
{
	.reg .b32 	%r<3>;
	.loc	1 29 0                          // /repo/t.py:29:0
$L__func_begin0:
$L__tmp0:
	mov.u32 	%r1, %ctaid.x;   // trailing comment
	@%p1 bra 	$L__BB0_2;
$L__BB0_2:
	// begin inline asm
	st.global.b32 [ %rd1 + 0 ], { %r1 };
	// end inline asm
	ret;
$L__tmp1:
$L__func_end0:
}
	.file	1 "/repo/test/t.py"
	.section	.debug_abbrev
	{
.b8 1                                   // Abbreviation Code
	}
	.section	.debug_info
	{
.b32 .debug_abbrev
	}
	.section	.debug_macinfo	{	}
"""


def test_normalize_ptx(ks):
    out = ks.normalize(PTX, "ptx", repo="/repo")
    assert out == textwrap.dedent("""\
        .version 8.7
        .target sm_90a
        .visible .entry k(
        \t.param .u64 .ptr .global .align 1 k_param_0
        )
        {
        \t.reg .b32 \t%r<3>;
        \tmov.u32 \t%r1, %ctaid.x;
        \t@%p1 bra \t$L__BB0_2;
        $L__BB0_2:
        \tst.global.b32 [ %rd1 + 0 ], { %r1 };
        \tret;
        }
        """)


def test_normalize_ptx_ignores_line_numbers(ks):
    moved = PTX.replace("1 29 0", "1 31 4").replace("/repo/test/t.py", "/other/t.py")
    assert ks.normalize(moved, "ptx", repo="/repo") == ks.normalize(PTX, "ptx", repo="/repo")
    changed = PTX.replace("mov.u32 \t%r1, %ctaid.x", "mov.u32 \t%r1, %ctaid.y")
    assert ks.normalize(changed, "ptx", repo="/repo") != ks.normalize(PTX, "ptx", repo="/repo")


AMDGCN = """\
	.amdgcn_target "amdgcn-amd-amdhsa--gfx942"
	.text
	.globl	k                      ; -- Begin function k
k:                                      ; @k
.Lfunc_begin0:
	.cfi_startproc
; %bb.1:
	.file	1 "/repo/test" "t.py"
	.loc	1 29 0 prologue_end             ; t.py:29:0
	s_load_dwordx2 s[2:3], s[0:1], 0x0
.Ltmp0:
	;;#ASMSTART
	s_waitcnt vmcnt(0) lgkmcnt(0)
s_memrealtime s[10:11]
	;;#ASMEND
	s_cbranch_execz .LBB0_2
.LBB0_2:
	s_endpgm
.Lfunc_end0:
	.size	k, .Lfunc_end0-k
; Kernel info:
; codeLenInByte = 352
	.section	.debug_abbrev,"",@progbits
	.byte	1                               ; Abbreviation Code
	.section	.debug_str,"MS",@progbits,1
.Linfo_string0:
	.asciz	"/repo/test"                    ; string offset=0
	.section	".note.GNU-stack","",@progbits
	.amdgpu_metadata
    .name:           k
	.end_amdgpu_metadata
	.section	.debug_line,"",@progbits
.Lline_table_start0:
"""


def test_normalize_amdgcn(ks):
    out = ks.normalize(AMDGCN, "amdgcn", repo="/repo")
    assert out.splitlines() == [
        '\t.amdgcn_target "amdgcn-amd-amdhsa--gfx942"', "\t.text", "\t.globl\tk", "k:", "\t.cfi_startproc",
        "\ts_load_dwordx2 s[2:3], s[0:1], 0x0", "\ts_waitcnt vmcnt(0) lgkmcnt(0)", "s_memrealtime s[10:11]",
        "\ts_cbranch_execz .LBB0_2", ".LBB0_2:", "\ts_endpgm", ".Lfunc_end0:", "\t.size\tk, .Lfunc_end0-k",
        '\t.section\t".note.GNU-stack","",@progbits', "\t.amdgpu_metadata", "    .name:           k",
        "\t.end_amdgpu_metadata"]


LLIR = """\
; ModuleID = 'LLVMDialectModule'
source_filename = "LLVMDialectModule"

; Function Attrs: nounwind
define ptx_kernel void @k(ptr addrspace(1) %0) local_unnamed_addr #0 !dbg !4 {
  %2 = tail call i32 @llvm.nvvm.read.ptx.sreg.tid.x(), !dbg !7, !range !9
  tail call void asm sideeffect "st.global.b32 [ $1 + 0 ], { $0 }; // x", "r,l"(i32 %2, ptr addrspace(1) %0), !dbg !8
  #dbg_value(i32 %2, !10, !DIExpression(), !7)
  br label %3, !dbg !8, !llvm.loop !11
3:
  ret void, !dbg !8
}

attributes #0 = { nounwind }

!llvm.dbg.cu = !{!0}
!llvm.module.flags = !{!2, !3}

!0 = distinct !DICompileUnit(language: DW_LANG_C, file: !1, producer: "triton", emissionKind: LineTablesOnly)
!1 = !DIFile(filename: "t.py", directory: "/repo/test")
!2 = !{i32 2, !"Debug Info Version", i32 3}
!3 = !{i32 4, !"nvvm-reflect-ftz", i32 1}
!4 = distinct !DISubprogram(name: "k", scope: !1, file: !1, line: 29, unit: !0)
!7 = !DILocation(line: 30, column: 25, scope: !4)
!8 = !DILocation(line: 31, column: 4, scope: !4)
!9 = !{i32 0, i32 1024}
!10 = !DILocalVariable(name: "x", scope: !4)
!11 = distinct !{!11, !7, !12}
!12 = !{!"llvm.loop.mustprogress"}
"""


def test_normalize_llir_drops_debug_and_renumbers(ks):
    out = ks.normalize(LLIR, "llir", repo="/repo")
    assert out == textwrap.dedent("""\
        source_filename = "LLVMDialectModule"
        define ptx_kernel void @k(ptr addrspace(1) %0) local_unnamed_addr #0 {
          %2 = tail call i32 @llvm.nvvm.read.ptx.sreg.tid.x(), !range !0
          tail call void asm sideeffect "st.global.b32 [ $1 + 0 ], { $0 }; // x", "r,l"(i32 %2, ptr addrspace(1) %0)
          br label %3, !llvm.loop !1
        3:
          ret void
        }
        attributes #0 = { nounwind }
        !llvm.module.flags = !{!3, !4}
        !0 = !{i32 0, i32 1024}
        !1 = distinct !{!1, !2}
        !2 = !{!"llvm.loop.mustprogress"}
        !3 = !{i32 2, !"Debug Info Version", i32 3}
        !4 = !{i32 4, !"nvvm-reflect-ftz", i32 1}
        """)


def test_normalize_llir_independent_of_debug_numbering(ks):
    # more debug nodes shift every metadata number in the raw IR (!range !9 -> !range !109), not in the normalized
    shifted = re.sub(r"!(\d+)\b", lambda m: f"!{int(m.group(1)) + (100 if int(m.group(1)) >= 7 else 0)}", LLIR)
    shifted = shifted.replace("\n!107 =", "\n!5 = !DILocation(line: 40, column: 1, scope: !4)\n!107 =")
    assert "!range !109" in shifted
    assert ks.normalize(shifted, "llir", repo="/repo") == ks.normalize(LLIR, "llir", repo="/repo")


MLIR = """\
#loc = loc("/repo/test/t.py":29:0)
module {
  tt.func public @k(%x_ptr: !tt.ptr<f32> loc("x_ptr"(#loc))) attributes {noinline = false} {
    %c1024_i32 = arith.constant 1024 : i32 loc(#loc1)
    %offs = tt.get_program_id x : i32 loc(#loc2)
    %offs_0 = arith.muli %offs, %c1024_i32 : i32 loc(callsite(#loc2 at #loc3))
    %0 = tt.elementwise_inline_asm "mov.u32 $0, %smid; // keep" {pure = true} -> i32 loc(#loc1)
    tt.return loc(#loc1)  // a comment
  } loc(#loc)
} loc(#loc)
#loc1 = loc(unknown)
#loc2 = loc("/repo/test/t.py":30:25)
#loc3 = loc("offs"(#loc2))
"""


def test_normalize_mlir(ks):
    out = ks.normalize(MLIR, "ttir", repo="/repo")
    assert out == textwrap.dedent("""\
        module {
          tt.func public @k(%v0: !tt.ptr<f32>) attributes {noinline = false} {
            %v1 = arith.constant 1024 : i32
            %v2 = tt.get_program_id x : i32
            %v3 = arith.muli %v2, %v1 : i32
            %v4 = tt.elementwise_inline_asm "mov.u32 $0, %smid; // keep" {pure = true} -> i32
            tt.return
          }
        }
        """)
    renamed = MLIR.replace("%offs", "%idx").replace("30:25", "44:1")
    assert ks.normalize(renamed, "ttgir", repo="/repo") == out


# ---------------------------------------------------------------------------------------------------- round trip

KERNEL = '''\
# RUN: env PTXAS_OPTIONS=-c %compile %s:copy -s "*i32:16, *i32:16, 128" --target cuda:90 --stage ptx | filecheck %s
# RUN: not %compile %s:copy -s "*i32" --target cuda:90 --stage ptx
# CHECK: ld.global
import triton
import triton.language as tl


@triton.jit
def copy(src, dst, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(dst + offs, tl.load(src + offs))
'''


def _tool(*args):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.join(REPO, "python")] + sys.path))
    return subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True, env=env, timeout=300)


def test_snapshot_then_compare(tmp_path):
    lit_file = tmp_path / "copy_kernel.py"
    lit_file.write_text(KERNEL)
    snap = tmp_path / "snap"
    res = _tool("snapshot", str(snap), str(lit_file), "-j", "2")
    assert res.returncode == 0, res.stderr
    assert "[1/1] copy_kernel.01.ptx ok" in res.stderr
    assert "skipped" in res.stderr and "expects a failure" in res.stderr
    manifest = json.loads((snap / "MANIFEST.json").read_text())
    assert list(manifest["commands"]) == ["copy_kernel.01.ptx"]
    assert [s["line"] for s in manifest["skipped"]] == [2]
    ptx = (snap / "copy_kernel.01.ptx").read_text()
    assert ".target sm_90a" in ptx and "ld.global" in ptx
    assert ".loc" not in ptx and "//" not in ptx and "debug" not in ptx and str(tmp_path) not in ptx

    res = _tool("compare", str(snap), str(lit_file), "-q")
    assert res.returncode == 0, res.stdout + res.stderr
    assert "compare: 0 of 1 commands differ" in res.stdout

    lines = ptx.splitlines(keepends=True)
    k = next(i for i, ln in enumerate(lines) if "ld.global" in ln)
    (snap / "copy_kernel.01.ptx").write_text("".join(lines[:k] + ["\tld.global.nc.b32 \t%r99, [%rd1];\n"] +
                                                     lines[k + 1:]))
    res = _tool("compare", str(snap), str(lit_file), "-q")
    assert res.returncode == 1, res.stdout + res.stderr
    assert "DIFF copy_kernel.01.ptx" in res.stdout
    assert "-\tld.global.nc.b32 \t%r99, [%rd1];" in res.stdout
    assert "compare: 1 of 1 commands differ" in res.stdout


# The test file as a generator: run as a script, it writes the kernel of KERNEL (RUN lines dropped) to argv[1]; with
# "fail" it fails instead. Its compile lines read what it wrote (%t.gen.py).
GENERATOR = """\
# RUN: %python %s %t.gen.py{fail} | filecheck %s
# RUN: %compile %t.gen.py:copy -s "*i32:16, *i32:16, 128" --target cuda:90 --stage ptx | filecheck %s
import sys

if sys.argv[2:] == ["fail"]:
    sys.exit("generator broke")
with open(sys.argv[1], "w") as f:
    f.write({kernel!r})
print("written")
"""


def test_setup_step_then_compile(tmp_path):
    kernel = "".join(ln for ln in KERNEL.splitlines(keepends=True) if not ln.startswith("#"))
    good, bad = tmp_path / "gen_good.py", tmp_path / "gen_bad.py"
    good.write_text(GENERATOR.format(fail="", kernel=kernel))
    bad.write_text(GENERATOR.format(fail=" fail", kernel=kernel))
    snap = tmp_path / "snap"
    res = _tool("snapshot", str(snap), str(good), str(bad), "-j", "2")
    assert res.returncode == 1, res.stderr
    assert "[setup] gen_good.01.setup ok" in res.stderr and "[setup] gen_bad.01.setup FAILED (exit 1)" in res.stderr
    assert re.search(r"FAIL gen_bad\.02\.ptx \[.*gen_bad\.py:2\]: setup step gen_bad\.01\.setup \[.*gen_bad\.py:1\] "
                     r"failed \(exit 1\)\n    generator broke", res.stderr), res.stderr
    ptx = (snap / "gen_good.02.ptx").read_text()
    assert ".target sm_90a" in ptx and "ld.global" in ptx
    assert not (snap / "gen_bad.02.ptx").exists()
    manifest = json.loads((snap / "MANIFEST.json").read_text())
    assert manifest["commands"]["gen_good.02.ptx"]["setup"] == ["gen_good.01.setup"]
    assert {k: v["ok"] for k, v in manifest["setup"].items()} == {"gen_bad.01.setup": False, "gen_good.01.setup": True}

    res = _tool("compare", str(snap), str(good), "-q")
    assert res.returncode == 0, res.stdout + res.stderr
    assert "compare: 0 of 1 commands differ" in res.stdout
