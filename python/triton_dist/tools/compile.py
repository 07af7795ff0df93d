"""Compile a Triton / triton_dist kernel for any target on any machine and print one stage.

    python -m triton_dist.tools.compile KERNEL_FILE.py:kernel_name \
        --signature "*fp32:16, *fp32:16, i32, 1024" --target cuda:90 --stage ptx

``--signature`` lists the kernel's parameters in order: a type (``*fp32``, ``*bf16``, ``i32``, ``i64``, ``fp32``…,
optionally ``:16`` for a 16-divisible pointer/int) or a literal, which becomes a constexpr (``1024``, ``True``).
``-D NAME=VALUE`` sets a constexpr by name instead. Stages: ttir, ttgir, llir, ptx (cuda), amdgcn (hip), and the
binary stages cubin/hsaco are accepted for ``--out``. The IR stages ttir, ttgir and llir stop there: the later
stages do not run. ptx / amdgcn run the whole pipeline, so printing them also proves that the kernel assembles (to
a cubin with ptxas / to an hsaco). ``--stop-after STAGE`` sets the last stage to run instead (a later one than
``--stage`` runs more, e.g. ``--stage llir --stop-after hsaco`` prints the LLVM IR of a kernel that must also
assemble; an earlier one is refused). Any error in the arguments — unknown target, stage, file or kernel — prints
one line ``triton-dist-compile: error: …`` and exits with code 2. So does a kernel that fails to import or compile
(a front-end error, MLIR or ptxas failing): the error is one line naming the cause, a second line hints at
``--verbose``, which shows the compiler's full output and the traceback instead. The compiler's temporary files go
to a private directory removed afterwards (ptxas leaves its .ptx input in /tmp when it fails).

``--resources`` (cuda targets) prints, instead of a stage, one JSON line with what ptxas gave the kernel and what
that means for residency: ``registers`` (a thread), ``spill_stores`` / ``spill_loads`` / ``stack`` (bytes),
``shared`` (bytes a program), ``num_warps``, ``num_stages``, ``programs_per_sm`` and ``bound_by`` (what registers,
shared memory and threads each allow: ``triton_dist.runtime.occupancy``). The registers come from ``ptxas -v`` run
again on the kernel's PTX (Triton keeps no register count until a kernel is loaded on a GPU), with the flags
Triton's own ptxas call uses.
"""
from __future__ import annotations

import argparse
import ast
import contextlib
import importlib.util
import io
import json
import os
import re
import shutil
import sys
import tempfile
from dataclasses import dataclass, field
from typing import Dict, List, Optional

from .. import _compat
from ..runtime.bitcode import BitcodeError
from ..target import Target, parse_target, to_gpu_target

TEXT_STAGES = {"cuda": ("ttir", "ttgir", "llir", "ptx"), "hip": ("ttir", "ttgir", "llir", "amdgcn")}
#: stages after which the tool stops unless --stop-after names a later one (the rest of the pipeline is not needed to
#: print them)
IR_STAGES = ("ttir", "ttgir", "llir")
BINARY_STAGES = {"cuda": ("cubin", ), "hip": ("hsaco", )}


class UsageError(Exception):
    """Bad arguments: reported as one line and exit code 2."""

    hint: Optional[str] = None


class CompileFailure(UsageError):
    """The kernel does not import or compile: one line naming the cause, a hint line, exit code 2."""

    hint = "rerun with --verbose for the compiler's full output and the traceback"


class SharedMemoryExceeded(CompileFailure):
    """The kernel compiles but needs more shared memory per block than the target has."""

    hint = "smaller tiles or fewer --num-stages; each software-pipelined loop gets its own stage buffers"


# A line of compiler output that states the error (MLIR diagnostics, ptxas, LLVM), as opposed to the context around it.
_ERROR_LINE = re.compile(r"\berror\b\s*:|\bfatal\b|^ptxas\b.*\berror\b", re.IGNORECASE)
# Triton's own summary lines around ptxas' message (which follows them).
_GENERIC_LINE = re.compile(r"^PTXAS error:|Internal Triton PTX codegen error|failed with error code")
_MAX_LINE = 400


@dataclass
class CompileRequest:
    kernel: object  # a JITFunction (triton.jit or triton_dist.jit)
    target: Target
    signature: List[str]
    defines: Dict[str, object] = field(default_factory=dict)
    options: Dict[str, object] = field(default_factory=dict)
    stop_after: Optional[str] = None  # skip the stages after this one (e.g. llir: kernels with unresolved externs)


def _literal(text: str):
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return None


def _split_signature(text: str) -> List[str]:
    return [s.strip() for s in text.split(",") if s.strip()] if text else []


def load_kernel(spec: str, name: Optional[str] = None):
    """Import ``path.py`` (``path.py:name`` or ``module:name``) with Triton's interpreter off and return the
    kernel object."""
    if ":" in spec and not (len(spec) > 1 and spec[1] == ":" and spec[2:3] in ("\\", "/")):
        spec, name = spec.rsplit(":", 1) if name is None else (spec.rsplit(":", 1)[0], name)
    if not name:
        raise UsageError("no kernel named: pass FILE.py:kernel_name or --kernel NAME")
    # Compiling is never interpretation: kernels defined while importing must be real JIT functions.
    _compat.set_interpret(False)
    if spec.endswith(".py") or os.path.sep in spec:
        if not os.path.isfile(spec):
            raise UsageError(f"kernel file not found: {spec}")
        mod_name = "_triton_dist_compile_" + os.path.splitext(os.path.basename(spec))[0]
        module_spec = importlib.util.spec_from_file_location(mod_name, spec)
        module = importlib.util.module_from_spec(module_spec)
        sys.modules[mod_name] = module
        try:
            module_spec.loader.exec_module(module)
        except Exception as e:
            if _VERBOSE:
                raise
            raise CompileFailure(f"importing {spec} failed: {_one_line(f'{type(e).__name__}: {e}')}") from None
    else:
        try:
            module = importlib.import_module(spec)
        except ImportError as e:
            raise UsageError(f"cannot import module {spec!r}: {e}") from e
    kernel = getattr(module, name, None)
    if kernel is None:
        raise UsageError(f"no kernel named {name!r} in {spec}")
    from triton import JITFunction

    # triton.autotune / heuristics wrap the JIT function in .fn chains
    while not isinstance(kernel, JITFunction) and hasattr(kernel, "fn"):
        kernel = kernel.fn
    if not isinstance(kernel, JITFunction):
        raise UsageError(f"{name!r} in {spec} is not a @triton.jit / @triton_dist.jit kernel")
    return kernel


def _trailing_defaults(kernel, names):
    """``{name: default}`` when every parameter in ``names`` has a default in the kernel's Python signature, else
    None (they are then required)."""
    import inspect

    params = inspect.signature(kernel.fn).parameters
    if not all(n in params and params[n].default is not inspect.Parameter.empty for n in names):
        return None
    return {n: params[n].default for n in names}


def build_source(req: CompileRequest):
    """The ``triton.compiler.ASTSource`` for ``req`` (signature types, constexprs, divisibility attrs)."""
    arg_names = list(req.kernel.arg_names)
    sig_items = list(req.signature)
    unknown = set(req.defines) - set(arg_names)
    if unknown:
        raise UsageError(f"-D names no parameter of {req.kernel.__name__}: {', '.join(sorted(unknown))}")
    free = [n for n in arg_names if n not in req.defines]
    defaults = _trailing_defaults(req.kernel, free[len(sig_items):]) if len(sig_items) < len(free) else None
    if defaults is not None:  # trailing parameters with defaults (constexpr switches) may be left out
        free = free[:len(sig_items)]
    if len(sig_items) != len(free):
        raise UsageError(f"signature has {len(sig_items)} entries but {req.kernel.__name__} takes {len(free)} "
                         f"(not counting -D; trailing parameters with defaults may be left out): {', '.join(free)}")
    signature, constexprs, attrs = {}, {}, {}
    for name, value in (defaults or {}).items():
        signature[name], constexprs[name] = "constexpr", value
    for name, item in zip(free, sig_items):
        ty, _, hint = item.partition(":")
        value = _literal(ty)
        if value is not None and not ty.startswith("*"):
            signature[name], constexprs[name] = "constexpr", value
            continue
        try:
            _compat.type_from_name(ty)
        except (KeyError, ValueError, IndexError):
            raise UsageError(f"unknown type {ty!r} in signature entry {item!r}: use a Triton type name such as *fp32, "
                             f"*bf16, i32, i64, fp16, u8 (a leading * for pointers), or a literal for a constexpr") \
                from None
        signature[name] = ty
        if hint:
            if hint != "16":
                raise UsageError(f"unsupported hint {item!r}: only ':16' (divisible by 16) is accepted")
            attrs[(arg_names.index(name), )] = [["tt.divisibility", 16]]
    for name, value in req.defines.items():
        signature[name], constexprs[name] = "constexpr", value
    signature = {n: signature[n] for n in arg_names}
    return _compat.ast_source(req.kernel, signature, constexprs, attrs)


def compile_kernel(req: CompileRequest):
    """Compile ``req`` and return Triton's ``CompiledKernel`` (``.asm`` maps stage -> text/bytes)."""
    import triton

    # Inspecting lowering must never show a stale cached kernel: triton_dist's lowerings are Python code outside
    # the kernel's source hash, so a cache hit could predate a change to them.
    triton.knobs.compilation.always_compile = True
    src = build_source(req)
    options = dict(req.options)
    extra = getattr(req.kernel, "compile_options_for", None)  # triton_dist.jit adds SHMEM bitcode etc.
    if extra is not None:
        options = {**extra(req.target), **options}
    if req.stop_after is None:
        return triton.compile(src, target=to_gpu_target(req.target), options=options)
    old = triton.knobs.runtime.add_stages_inspection_hook

    def skipped(src_text, md, binary):
        _compat.fill_skipped_stage_metadata(md)
        if "name" not in md and isinstance(src_text, str):  # later stages normally record the kernel name
            m = re.search(r"define\s+(?:\w+\s+)*void\s+@([A-Za-z_][A-Za-z0-9_]*)", src_text)
            md["name"] = m.group(1) if m else req.kernel.__name__
        return b"" if binary else ""

    def stop_after(stages):
        names = list(stages)
        if req.stop_after not in names:
            raise UsageError(f"--stop-after {req.stop_after!r}: not a stage of this target ({', '.join(names)})")
        for name in names[names.index(req.stop_after) + 1:]:
            stages[name] = (lambda s, md, _b=name in ("cubin", "hsaco"): skipped(s, md, _b))

    triton.knobs.runtime.add_stages_inspection_hook = _compat.stages_inspection_hook(
        stop_after, f"triton_dist-stop-after-{req.stop_after}", previous=old)
    try:
        return triton.compile(src, target=to_gpu_target(req.target), options=options)
    finally:
        triton.knobs.runtime.add_stages_inspection_hook = old


#: LDS bytes one workgroup may use, per AMD target (CDNA2 / CDNA3: 64 KiB; CDNA4: 160 KiB)
AMD_MAX_BLOCK_SHARED_MEMORY = {"gfx90a": 65536, "gfx942": 65536, "gfx950": 163840}


def max_block_shared_memory(target: Target) -> Optional[int]:
    """The shared memory (NVIDIA) / LDS (AMD) one block of ``target`` may use, in bytes; None where unknown."""
    if target.backend == "cuda":
        from ..backends.nvidia.extra import MAX_BLOCK_SHARED_MEMORY

        return MAX_BLOCK_SHARED_MEMORY.get(int(target.arch))
    return AMD_MAX_BLOCK_SHARED_MEMORY.get(str(target.arch))


def _check_shared_memory(compiled, target: Target, kernel) -> None:
    """Refuse a kernel that needs more shared memory than one block of ``target`` has. Triton itself only finds out
    when the kernel is loaded on a GPU (``OutOfResources`` at the first launch), so without this a tile
    configuration too large for the target compiles cleanly here and fails on the device (2026-12-06: the TP-MoE
    AG kernel's two pipelined K loops, 393 KB at sm_90). Known only once shared memory is allocated (the llir
    stage ran)."""
    shared = getattr(compiled.metadata, "shared", None)
    limit = max_block_shared_memory(target)
    if isinstance(shared, int) and limit is not None and shared > limit:
        name = getattr(kernel, "__name__", "kernel")
        raise SharedMemoryExceeded(f"{name} needs {shared} bytes of shared memory per block; "
                                   f"{target.backend}:{target.arch} has at most {limit} (its launch would fail with "
                                   f"OutOfResources)")


_PTXAS_RESOURCE_PATTERNS = {
    "registers": r"Used (\d+) registers",
    "stack": r"(\d+) bytes stack frame",
    "spill_stores": r"(\d+) bytes spill stores",
    "spill_loads": r"(\d+) bytes spill loads",
}


def ptxas_resources(compiled, target: Target) -> Dict[str, object]:
    """What ptxas gives the compiled kernel on ``target`` (a cuda target): ``ptxas -v`` on its PTX, as Triton's
    make_cubin calls it (``--gpu-name``, ``--fmad=false`` without fp fusion, the options' ``ptx_options``), parsed,
    with the kernel's shared memory, warps and stages and :func:`triton_dist.runtime.occupancy.programs_per_sm`.
    Raises :class:`UsageError` for another backend, :class:`CompileFailure` if ptxas fails."""
    import subprocess

    from ..runtime.occupancy import SM_LIMITS, programs_per_sm

    if target.backend != "cuda":
        raise UsageError(f"--resources needs a cuda target (ptxas), got {target}")
    md = compiled.metadata
    cap = int(target.arch)
    ptxas, gpu_name = _compat.ptxas_for(cap)
    cmd = [ptxas, "-v", f"--gpu-name={gpu_name}"]
    if not getattr(md, "enable_fp_fusion", True):
        cmd.append("--fmad=false")
    if getattr(md, "ptx_options", None):
        cmd += md.ptx_options.split(" ")
    with tempfile.TemporaryDirectory(prefix="triton-dist-resources-") as tmp:
        src = os.path.join(tmp, "kernel.ptx")
        with open(src, "w") as f:
            f.write(compiled.asm["ptx"])
        res = subprocess.run(cmd + [src, "-o", os.path.join(tmp, "kernel.cubin")], capture_output=True, text=True)
    log = res.stderr + res.stdout
    if res.returncode != 0:
        raise CompileFailure(f"ptxas -v failed: {_one_line(log)}")
    out: Dict[str, object] = {"kernel": md.name, "target": f"{target.backend}:{target.arch}"}
    for key, pattern in _PTXAS_RESOURCE_PATTERNS.items():
        m = re.search(pattern, log)
        out[key] = int(m.group(1)) if m else 0
    out.update(shared=md.shared, num_warps=md.num_warps, num_stages=md.num_stages)
    if cap in SM_LIMITS:
        out["programs_per_sm"], out["bound_by"] = programs_per_sm(out["registers"], md.shared, md.num_warps, cap)
    return out


_VERBOSE = False  # --verbose: let compiler output and tracebacks through


def _one_line(text: str) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= _MAX_LINE else text[:_MAX_LINE - 3] + "..."


@contextlib.contextmanager
def _compiler_quieted(captured: Dict[str, str]):
    """Run the compiler with a private temporary directory (removed afterwards, whatever happens) and with its output
    captured into ``captured``: ``"stderr"`` (file descriptor 2, where MLIR and LLVM print diagnostics) and
    ``"stdout"`` (Python's, where Triton prints the whole PTX when ptxas fails)."""
    tmpdir = tempfile.mkdtemp(prefix="triton-dist-compile-")
    old_tempdir, old_env = tempfile.tempdir, os.environ.get("TMPDIR")
    saved_fd = os.dup(2)
    out = io.StringIO()
    log = tempfile.TemporaryFile(dir=tmpdir)
    try:
        tempfile.tempdir = tmpdir  # Triton's NamedTemporaryFile calls (ptxas / ld.lld inputs)
        os.environ["TMPDIR"] = tmpdir  # the tools it runs
        sys.stderr.flush()
        os.dup2(log.fileno(), 2)
        with contextlib.redirect_stdout(out):
            yield captured
    finally:
        sys.stderr.flush()
        os.dup2(saved_fd, 2)
        os.close(saved_fd)
        log.seek(0)
        captured["stderr"] = log.read().decode(errors="replace")
        captured["stdout"] = out.getvalue()
        log.close()
        tempfile.tempdir = old_tempdir
        if old_env is None:
            os.environ.pop("TMPDIR", None)
        else:
            os.environ["TMPDIR"] = old_env
        shutil.rmtree(tmpdir, ignore_errors=True)


def _failure_line(exc: BaseException, compiler_stderr: str) -> str:
    """The one line that says why compiling failed: the front end's error at its source line, else the first line
    of the compiler's output (or of the exception) that states an error, else the exception's first line."""
    line = _compat.compilation_error_line(exc)
    if line:
        return _one_line(line)
    for text in (compiler_stderr, str(exc)):
        for ln in text.splitlines():
            if _ERROR_LINE.search(ln) and not _GENERIC_LINE.search(ln):
                return _one_line(ln)
    first = next((ln for ln in str(exc).splitlines() if ln.strip()), "")
    return _one_line(f"{type(exc).__name__}: {first}" if first else type(exc).__name__)


def compile_quietly(req: CompileRequest):
    """:func:`compile_kernel`, with a failure of the compiler reported as one line (:class:`CompileFailure`) and no
    temporary files left behind; on success the compiler's output (warnings, dumps) is passed on."""
    if _VERBOSE:
        return compile_kernel(req)
    captured = {"stderr": "", "stdout": ""}
    try:
        with _compiler_quieted(captured):
            compiled = compile_kernel(req)
    except UsageError:
        raise
    except BitcodeError as e:  # the SHMEM device library is missing: the error says what to install
        raise UsageError(f"compiling {req.kernel.__name__} for {req.target} failed: {e}") from None
    except Exception as e:
        raise CompileFailure(f"compiling {req.kernel.__name__} for {req.target} failed: "
                             f"{_failure_line(e, captured['stderr'])}") from None
    sys.stderr.write(captured["stderr"])
    sys.stdout.write(captured["stdout"])
    return compiled


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="triton-dist-compile", description=__doc__.split("\n\n")[0])
    p.add_argument("kernel", help="FILE.py:kernel_name (or module:kernel_name)")
    p.add_argument("--kernel", dest="kernel_name", default=None, help="kernel name if not given after ':'")
    p.add_argument("--signature", "-s", default="", help="comma-separated parameter types / constexpr literals (trailing parameters with defaults may be left out)")
    p.add_argument("-D", dest="defines", action="append", default=[], metavar="NAME=VALUE",
                   help="set a constexpr parameter by name")
    p.add_argument("--target", "-t", default="cuda:90", help="cuda:<cc> (cuda:90) or hip:<gfx> (hip:gfx942)")
    p.add_argument("--stage", default="ptx", help="ttir | ttgir | llir | ptx | amdgcn | cubin | hsaco")
    p.add_argument("--num-warps", type=int, default=None)
    p.add_argument("--num-stages", type=int, default=None)
    p.add_argument("--option", "-O", action="append", default=[], metavar="KEY=VALUE",
                   help="any other compile option, e.g. launch_cooperative_grid=True")
    p.add_argument("--stop-after", default=None,
                   help="the last stage to run (default: --stage for ttir / ttgir / llir, else the whole pipeline); "
                        "a later one than --stage checks that the kernel also compiles that far")
    p.add_argument("--out", "-o", default=None, help="write the stage to this file instead of stdout")
    p.add_argument("--resources", action="store_true",
                   help="cuda: print one JSON line (registers, spills, shared memory, programs per SM) instead of "
                        "the stage")
    p.add_argument("--verbose", "-v", action="store_true",
                   help="when the kernel fails to import or compile, show the compiler's output and the traceback")
    return p




def _parse_kv(items, what) -> Dict[str, object]:
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise UsageError(f"{what} must be NAME=VALUE, got {item!r}")
        lit = _literal(value)
        out[key.strip()] = value if lit is None else lit
    return out


def run(argv=None) -> int:
    parser = _parser()
    # argparse exits with 2 on its own errors, printing usage; keep that but make the last line ours.
    args = parser.parse_args(argv)
    global _VERBOSE
    _VERBOSE = args.verbose
    try:
        target = parse_target(args.target)
    except ValueError as e:
        raise UsageError(str(e)) from None
    stage = args.stage
    if args.resources and target.backend != "cuda":
        raise UsageError(f"--resources needs a cuda target (ptxas), got {args.target}")
    if stage not in TEXT_STAGES[target.backend] + BINARY_STAGES[target.backend]:
        raise UsageError(f"unknown stage {stage!r} for {target.backend}: choose one of "
                         f"{', '.join(TEXT_STAGES[target.backend] + BINARY_STAGES[target.backend])}")
    options = _parse_kv(args.option, "--option")
    if args.num_warps is not None:
        options["num_warps"] = args.num_warps
    if args.num_stages is not None:
        options["num_stages"] = args.num_stages
    all_stages = ("ttir", "ttgir", "llir") + TEXT_STAGES[target.backend][3:] + BINARY_STAGES[target.backend]
    if args.stop_after is not None:
        if args.stop_after not in all_stages:
            raise UsageError(f"unknown --stop-after stage {args.stop_after!r} for {target.backend}: choose one of "
                             f"{', '.join(all_stages)}")
        if all_stages.index(stage) > all_stages.index(args.stop_after):
            raise UsageError(f"--stage {stage} comes after --stop-after {args.stop_after}: nothing to print")
    stop_after = args.stop_after
    if args.resources:
        stage, stop_after = "ptx", None  # the whole pipeline: the shared memory is known once it ran
    if stop_after is None and stage in IR_STAGES:
        stop_after = stage
    kernel = load_kernel(args.kernel, args.kernel_name)
    req = CompileRequest(kernel, target, _split_signature(args.signature), _parse_kv(args.defines, "-D"), options,
                         stop_after=stop_after)
    compiled = compile_quietly(req)
    _check_shared_memory(compiled, target, kernel)
    if args.resources:
        text = json.dumps(ptxas_resources(compiled, target), sort_keys=True) + "\n"
        if args.out:
            with open(args.out, "w") as f:
                f.write(text)
        else:
            sys.stdout.write(text)
        return 0
    asm = compiled.asm[stage]
    if args.out:
        mode = "wb" if isinstance(asm, bytes) else "w"
        with open(args.out, mode) as f:
            f.write(asm)
    elif isinstance(asm, bytes):
        raise UsageError(f"stage {stage!r} is binary: pass --out FILE")
    else:
        sys.stdout.write(asm)
    return 0


def main(argv=None) -> int:
    try:
        return run(argv)
    except UsageError as e:
        print(f"triton-dist-compile: error: {e}", file=sys.stderr)
        if e.hint:
            print(f"triton-dist-compile: hint: {e.hint}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
