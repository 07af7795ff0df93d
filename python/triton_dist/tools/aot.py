"""Ahead-of-time compilation of (distributed) Triton kernels into C sources that launch them through the CUDA
driver API — no Python, no Triton at run time.

Declare a compile space on the kernel::

    @aot_compile_spaces({
        "scale_fp32": {
            "signature": "*fp32:16, *fp32:16, i32, %BLOCK",      # types, ':16' divisibility hints, %CONSTEXPR
            "grid": ["(n + %BLOCK - 1) / %BLOCK", "1", "1"],      # C expressions over the kernel's arguments
            "triton_algo_infos": [{"BLOCK": 256, "num_warps": 4, "num_stages": 1},
                                  {"BLOCK": 1024, "num_warps": 8, "num_stages": 1}],
        },
    })
    @triton_dist.jit
    def scale(x, y, n, BLOCK: tl.constexpr): ...

then ``aot_compile_kernel(scale, out_dir, target="cuda:90")`` (or ``python -m triton_dist.tools.aot FILE.py:scale
-o out_dir``) compiles every algo of every entry for that target — on any machine, no GPU needed — and writes, per
algo, ``<name>.<suffix>.{c,h}`` (the cubin embedded as bytes plus ``load_/unload_/launch`` functions) and per entry
``<name>.{c,h}`` (a dispatcher ``CUresult <name>(CUstream, args..., int algo_id)``, ``<name>_default``,
``<name>_get_num_algos``, ``load_<name>``, ``unload_<name>``).

What the launcher does, per launch:

* loads the module on first use (``cuModuleLoadData`` + ``cuModuleGetFunction``) and opts in to > 48 KiB of
  dynamic shared memory when the kernel needs it;
* **NVSHMEM**: when the compiled PTX defines ``nvshmemi_device_state_d`` (i.e. the module links NVSHMEM's device
  library — decided by what the module references, never by its name) it calls ``nvshmemx_cumodule_init(module)``
  right after loading; link the program with NVSHMEM's host library and initialise NVSHMEM before the first launch;
* checks the ``:16`` divisibility the kernel was specialised for and returns ``CUDA_ERROR_INVALID_VALUE`` instead of
  launching on misaligned input;
* passes Triton 3.6's two trailing kernel parameters (global scratch, profile scratch): NULL when the kernel needs
  none, else a stream-ordered ``cuMemAllocAsync`` of ``grid * num_ctas * size`` bytes freed after the launch;
* launches with ``cuLaunchKernel``, ``cuLaunchCooperativeKernel`` when the kernel was compiled with
  ``launch_cooperative_grid=True``, or ``cuLaunchKernelEx`` for thread-block clusters (``num_ctas > 1``) / PDL.

Only CUDA targets get C launchers (HIP: take the hsaco from ``triton_dist.tools.compile --stage hsaco``).
"""
from __future__ import annotations

import argparse
import hashlib
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

__all__ = ["aot_compile_spaces", "make_ast_source", "kernel_name_suffix", "materialize_c_params", "dump_c_code",
           "dump_dispatcher", "aot_compile_kernel", "compile_algo", "AotError", "module_links_nvshmem_ptx"]


# C types of kernel parameters (by Triton signature type); floats are passed with their own width.
_C_TYPES = {"i1": "int8_t", "i8": "int8_t", "i16": "int16_t", "i32": "int32_t", "i64": "int64_t", "u1": "uint8_t",
            "u8": "uint8_t", "u16": "uint16_t", "u32": "uint32_t", "u64": "uint64_t", "fp16": "uint16_t",
            "bf16": "uint16_t", "fp32": "float", "f32": "float", "fp64": "double"}


class AotError(ValueError):
    """A compile space or signature that cannot be compiled ahead of time (message names the entry and value)."""


def _split(sig) -> List[str]:
    if isinstance(sig, (list, tuple)):
        return [str(s).strip() for s in sig]
    return [s.strip() for s in str(sig).split(",") if s.strip()]


def aot_compile_spaces(spaces: Dict[str, Dict[str, Any]]):
    """Decorator attaching ahead-of-time compile spaces to a kernel (``fn.__aot_compile_spaces__``). Format (per C
    entry name): ``signature`` (str, ``%NAME`` for constexprs), ``grid`` (3 C expressions), ``triton_algo_infos``
    (non-empty list of dicts giving every constexpr plus optional ``num_warps`` / ``num_stages`` / other compile
    options). Raises :class:`AotError` on a malformed space."""
    if not isinstance(spaces, dict) or not spaces:
        raise AotError(f"aot_compile_spaces: expected a non-empty dict of entries, got {type(spaces).__name__}")
    for name, entry in spaces.items():
        if not isinstance(name, str) or not re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", name):
            raise AotError(f"aot_compile_spaces: entry name {name!r} is not a C identifier")
        if not isinstance(entry, dict):
            raise AotError(f"aot_compile_spaces[{name!r}]: expected a dict, got {type(entry).__name__}")
        missing = {"signature", "grid", "triton_algo_infos"} - set(entry)
        if missing:
            raise AotError(f"aot_compile_spaces[{name!r}]: missing key(s) {sorted(missing)}; required: signature, "
                           f"grid, triton_algo_infos")
        grid = entry["grid"]
        if not isinstance(grid, (list, tuple)) or len(grid) != 3:
            raise AotError(f"aot_compile_spaces[{name!r}]: grid must be a list of 3 C expressions, got {grid!r}")
        algos = entry["triton_algo_infos"]
        if not isinstance(algos, (list, tuple)) or not algos or not all(isinstance(a, dict) for a in algos):
            raise AotError(f"aot_compile_spaces[{name!r}]: triton_algo_infos must be a non-empty list of dicts")

    def deco(fn):
        fn.__aot_compile_spaces__ = spaces
        return fn

    return deco


def _jit_function(kernel):
    from triton import JITFunction

    k = kernel
    while not isinstance(k, JITFunction) and hasattr(k, "fn"):
        k = k.fn
    if not isinstance(k, JITFunction):
        raise AotError(f"{kernel!r} is not a @triton.jit / @triton_dist.jit kernel")
    return k


def _target(target):
    from ..target import Target, parse_target

    t = parse_target(target) if isinstance(target, str) else target
    if not isinstance(t, Target) or not t.is_cuda:
        raise AotError(f"AOT C launchers are generated for CUDA targets only (cuda:<cc>), got {target!r}")
    return t


def make_ast_source(kernel, signature, target="cuda:90"):
    """``(ASTSource, hints)`` for ``kernel`` specialised to ``signature`` (a string or list: types like ``*fp32:16``
    / ``i32``, literals for constexprs). ``hints`` maps argument index -> 16 for ``:16`` entries."""
    from .compile import CompileRequest, UsageError, build_source

    k = _jit_function(kernel)
    items = _split(signature)
    hints = {}
    for i, item in enumerate(items):
        if ":" in item:
            ty, hint = item.split(":", 1)
            if hint != "16":
                raise AotError(f"signature entry {i} ({item!r}) of {k.__name__}: only ':16' hints are accepted")
            hints[i] = 16
    try:
        src = build_source(CompileRequest(k, _target(target), items))
    except UsageError as e:
        raise AotError(f"{k.__name__}: {e}") from None
    return src, hints


def kernel_name_suffix(signature, num_warps: int, num_stages: int, extra: Optional[Dict[str, Any]] = None) -> str:
    """A stable C-identifier suffix for one specialisation: 8 hex digits of the signature + options hash, then
    ``w<warps>s<stages>``."""
    text = " ".join(_split(signature)) + f"|w{num_warps}|s{num_stages}|" + repr(sorted((extra or {}).items()))
    return f"{hashlib.sha256(text.encode()).hexdigest()[:8]}_w{num_warps}s{num_stages}"


def module_links_nvshmem_ptx(ptx: str) -> bool:
    """Whether a compiled module's code reads NVSHMEM's device state, so it needs ``nvshmemx_cumodule_init``: the
    JIT's rule (:func:`triton_dist.backends.nvidia.shmem_state.ptx_uses_nvshmem`; a mere definition of the state,
    left by linking the bitcode into a kernel that calls only libdevice, does not count), so AOT and JIT initialise
    the same modules."""
    from ..backends.nvidia.shmem_state import ptx_uses_nvshmem

    return ptx_uses_nvshmem(ptx or "")


@dataclass
class CParams:
    """Everything the C templates need for one compiled specialisation."""
    name: str  # C function name: <entry>_<suffix>
    entry: str
    triton_name: str
    cubin: bytes
    arg_names: List[str]
    arg_types: List[str]  # Triton types of the runtime (non-constexpr) arguments, in order
    hints: Dict[str, int]
    grid: List[str]
    num_warps: int
    num_ctas: int
    shared: int
    cooperative: bool
    pdl: bool
    nvshmem: bool
    global_scratch_size: int
    global_scratch_align: int
    profile_scratch_size: int
    profile_scratch_align: int
    doc: Dict[str, Any] = field(default_factory=dict)


def materialize_c_params(kernel, hints, ccinfo, entry: str, suffix: str, grid: Sequence[str],
                         signature=None, doc: Optional[Dict[str, Any]] = None) -> CParams:
    """Collect the launcher parameters of a compiled kernel (``ccinfo``: Triton's ``CompiledKernel``)."""
    k = _jit_function(kernel)
    md = ccinfo.metadata
    sig = dict(ccinfo.src.signature)
    names, types = [], []
    for name in k.arg_names:
        ty = sig.get(name, "constexpr")
        if ty == "constexpr":
            continue
        if not ty.startswith("*") and ty not in _C_TYPES:
            raise AotError(f"{k.__name__}: argument {name!r} has type {ty!r}, which the C launcher cannot pass "
                           f"(supported: pointers and {', '.join(sorted(_C_TYPES))})")
        names.append(name)
        types.append(ty)
    hint_names = {k.arg_names[i]: h for i, h in hints.items() if k.arg_names[i] in names}
    ptx = ccinfo.asm.get("ptx", "")
    return CParams(name=f"{entry}_{suffix}", entry=entry, triton_name=md.name, cubin=bytes(ccinfo.asm["cubin"]),
                   arg_names=names, arg_types=types, hints=hint_names, grid=[str(g) for g in grid],
                   num_warps=int(md.num_warps), num_ctas=int(getattr(md, "num_ctas", 1)), shared=int(md.shared),
                   cooperative=bool(getattr(md, "launch_cooperative_grid", False)),
                   pdl=bool(getattr(md, "launch_pdl", False)), nvshmem=module_links_nvshmem_ptx(ptx),
                   global_scratch_size=int(getattr(md, "global_scratch_size", 0) or 0),
                   global_scratch_align=int(getattr(md, "global_scratch_align", 1) or 1),
                   profile_scratch_size=int(getattr(md, "profile_scratch_size", 0) or 0),
                   profile_scratch_align=int(getattr(md, "profile_scratch_align", 1) or 1), doc=dict(doc or {}))


def _c_type(ty: str) -> str:
    return "CUdeviceptr" if ty.startswith("*") else _C_TYPES[ty]


def _c_signature(p: CParams) -> str:
    return ", ".join(f"{_c_type(t)} {n}" for n, t in zip(p.arg_names, p.arg_types))


def _hint_checks(p: CParams) -> str:
    conds = [f"(((uint64_t){n}) % {h} != 0)" for n, h in p.hints.items()]
    if not conds:
        return ""
    return (f"  if ({' || '.join(conds)}) {{\n"
            f"    fprintf(stderr, \"{p.name}: an argument is not divisible by the 16 the kernel was compiled "
            f"for ({', '.join(p.hints)})\\n\");\n"
            f"    return CUDA_ERROR_INVALID_VALUE;\n  }}\n")


def _bytes_literal(data: bytes) -> str:
    out = []
    for i in range(0, len(data), 24):
        out.append("  " + ", ".join(f"0x{b:02x}" for b in data[i:i + 24]))
    return ",\n".join(out)


def _launch_code(p: CParams) -> str:
    block = f"{p.num_warps} * 32"
    if p.num_ctas != 1 or p.pdl:
        attrs = []
        if p.cooperative:
            attrs.append("  attrs[n].id = CU_LAUNCH_ATTRIBUTE_COOPERATIVE; attrs[n].value.cooperative = 1; n++;")
        if p.pdl:
            attrs.append("  attrs[n].id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION; "
                         "attrs[n].value.programmaticStreamSerializationAllowed = 1; n++;")
        if p.num_ctas != 1:
            attrs.append(f"  attrs[n].id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION; attrs[n].value.clusterDim.x = "
                         f"{p.num_ctas}; attrs[n].value.clusterDim.y = 1; attrs[n].value.clusterDim.z = 1; n++;")
        return ("  CUlaunchAttribute attrs[3];\n  unsigned n = 0;\n" + "\n".join(attrs) + "\n"
                "  CUlaunchConfig cfg;\n  memset(&cfg, 0, sizeof(cfg));\n"
                f"  cfg.gridDimX = gX * {p.num_ctas}; cfg.gridDimY = gY; cfg.gridDimZ = gZ;\n"
                f"  cfg.blockDimX = {block}; cfg.blockDimY = 1; cfg.blockDimZ = 1;\n"
                f"  cfg.sharedMemBytes = {p.shared}; cfg.hStream = stream; cfg.attrs = attrs; cfg.numAttrs = n;\n"
                f"  res = cuLaunchKernelEx(&cfg, {p.name}_func, params, NULL);\n")
    fn = "cuLaunchCooperativeKernel" if p.cooperative else "cuLaunchKernel"
    tail = "params" if p.cooperative else "params, NULL"
    return f"  res = {fn}({p.name}_func, gX, gY, gZ, {block}, 1, 1, {p.shared}, stream, {tail});\n"


def _scratch_code(p: CParams, which: str, size: int) -> Tuple[str, str]:
    if size <= 0:
        return f"  CUdeviceptr {which} = 0;\n", ""
    alloc = (f"  CUdeviceptr {which} = 0;\n"
             f"  res = cuMemAllocAsync(&{which}, (size_t)gX * gY * gZ * {p.num_ctas} * {size}, stream);\n"
             f"  if (res != CUDA_SUCCESS) return res;\n")
    free = f"  cuMemFreeAsync({which}, stream);\n"
    return alloc, free


def _render_c(p: CParams) -> Tuple[str, str]:
    doc = ", ".join(f"{k}={v}" for k, v in p.doc.items())
    sig = _c_signature(p)
    sig_full = f"CUstream stream{', ' + sig if sig else ''}"
    params = ", ".join([f"&{n}" for n in p.arg_names] + ["&global_scratch", "&profile_scratch"])
    gs_alloc, gs_free = _scratch_code(p, "global_scratch", p.global_scratch_size)
    ps_alloc, ps_free = _scratch_code(p, "profile_scratch", p.profile_scratch_size)
    nvshmem_decl = "extern int nvshmemx_cumodule_init(CUmodule module);\n" if p.nvshmem else ""
    nvshmem_init = ("  if (nvshmemx_cumodule_init(" + p.name + "_mod) != 0) {\n"
                    "    fprintf(stderr, \"" + p.name + ": nvshmemx_cumodule_init failed (is NVSHMEM initialised?)\\n\");\n"
                    "    cuModuleUnload(" + p.name + "_mod); " + p.name + "_mod = NULL;\n"
                    "    return CUDA_ERROR_NOT_INITIALIZED;\n  }\n") if p.nvshmem else ""
    header = f"""/* Generated by triton_dist.tools.aot: Triton kernel `{p.triton_name}` ({doc}). Do not edit. */
#ifndef TRITON_DIST_AOT_{p.name.upper()}_H
#define TRITON_DIST_AOT_{p.name.upper()}_H
#include <cuda.h>
#include <stdint.h>
#ifdef __cplusplus
extern "C" {{
#endif
/* Load the module (once; also done by the first launch). */
CUresult load_{p.name}(void);
void unload_{p.name}(void);
/* Launch on `stream` with grid ({', '.join(p.grid)}). Returns the CUDA driver's result. */
CUresult {p.name}({sig_full});
#ifdef __cplusplus
}}
#endif
#endif
"""
    source = f"""/* Generated by triton_dist.tools.aot: Triton kernel `{p.triton_name}` ({doc}). Do not edit.
 * num_warps={p.num_warps} num_ctas={p.num_ctas} shared={p.shared} cooperative={int(p.cooperative)}
 * links_nvshmem={int(p.nvshmem)} global_scratch={p.global_scratch_size} profile_scratch={p.profile_scratch_size} */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cuda.h>
#include "{p.name}.h"

{nvshmem_decl}static const unsigned char {p.name}_cubin[{len(p.cubin)}] = {{
{_bytes_literal(p.cubin)}
}};
static CUmodule {p.name}_mod = NULL;
static CUfunction {p.name}_func = NULL;

CUresult load_{p.name}(void) {{
  CUresult res;
  if ({p.name}_func != NULL) return CUDA_SUCCESS;
  res = cuModuleLoadData(&{p.name}_mod, {p.name}_cubin);
  if (res != CUDA_SUCCESS) return res;
  res = cuModuleGetFunction(&{p.name}_func, {p.name}_mod, "{p.triton_name}");
  if (res != CUDA_SUCCESS) return res;
{nvshmem_init}  if ({p.shared} > 49152) {{
    res = cuFuncSetAttribute({p.name}_func, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, {p.shared});
    if (res != CUDA_SUCCESS) return res;
  }}
  return CUDA_SUCCESS;
}}

void unload_{p.name}(void) {{
  if ({p.name}_mod != NULL) cuModuleUnload({p.name}_mod);
  {p.name}_mod = NULL;
  {p.name}_func = NULL;
}}

CUresult {p.name}({sig_full}) {{
  CUresult res = load_{p.name}();
  if (res != CUDA_SUCCESS) return res;
{_hint_checks(p)}  unsigned int gX = (unsigned int)({p.grid[0]});
  unsigned int gY = (unsigned int)({p.grid[1]});
  unsigned int gZ = (unsigned int)({p.grid[2]});
  if (gX == 0 || gY == 0 || gZ == 0) return CUDA_SUCCESS;
{gs_alloc}{ps_alloc}  void *params[] = {{ {params} }};
{_launch_code(p)}{gs_free}{ps_free}  return res;
}}
"""
    return source, header


def dump_c_code(path_prefix, params: CParams) -> Tuple[Path, Path]:
    """Write ``<path_prefix>.c`` and ``<path_prefix>.h`` for one specialisation; returns their paths. The header's
    include guard and the .c's ``#include`` use ``params.name``: keep the file stem equal to it."""
    prefix = Path(path_prefix)
    src, hdr = _render_c(params)
    c_path, h_path = prefix.with_suffix(".c"), prefix.with_suffix(".h")
    c_path.write_text(src)
    h_path.write_text(hdr)
    return c_path, h_path


def dump_dispatcher(out_dir, entry: str, algos: List[CParams]) -> Tuple[Path, Path]:
    """Write ``<entry>.{c,h}``: ``<entry>(stream, args..., algo_id)`` choosing among ``algos`` (in order),
    ``<entry>_default`` (algo 0), ``<entry>_get_num_algos``, ``load_<entry>`` / ``unload_<entry>``."""
    out = Path(out_dir)
    first = algos[0]
    for p in algos[1:]:
        if p.arg_types != first.arg_types or p.arg_names != first.arg_names:
            raise AotError(f"aot entry {entry!r}: algos have different runtime signatures "
                           f"({_c_signature(first)} vs {_c_signature(p)}); give them separate entries")
    sig = _c_signature(first)
    sig_full = f"CUstream stream{', ' + sig if sig else ''}"
    call_args = ", ".join(["stream"] + first.arg_names)
    algo_doc = "\n".join(f" *   {i}: {p.name} ({', '.join(f'{k}={v}' for k, v in p.doc.items())})"
                         for i, p in enumerate(algos))
    hdr = f"""/* Generated by triton_dist.tools.aot: dispatcher of `{entry}`. Do not edit.
 * algo_id:
{algo_doc}
 */
#ifndef TRITON_DIST_AOT_{entry.upper()}_DISPATCH_H
#define TRITON_DIST_AOT_{entry.upper()}_DISPATCH_H
#include <cuda.h>
#include <stdint.h>
#ifdef __cplusplus
extern "C" {{
#endif
CUresult {entry}({sig_full}, int algo_id);
CUresult {entry}_default({sig_full});
int {entry}_get_num_algos(void);
CUresult load_{entry}(void);
void unload_{entry}(void);
#ifdef __cplusplus
}}
#endif
#endif
"""
    includes = "".join(f'#include "{p.name}.h"\n' for p in algos)
    cases = "".join(f"    case {i}: return {p.name}({call_args});\n" for i, p in enumerate(algos))
    loads = "".join(f"  res = load_{p.name}();\n  if (res != CUDA_SUCCESS) return res;\n" for p in algos)
    unloads = "".join(f"  unload_{p.name}();\n" for p in algos)
    src = f"""/* Generated by triton_dist.tools.aot: dispatcher of `{entry}`. Do not edit. */
#include <stdio.h>
#include <cuda.h>
#include "{entry}.h"
{includes}
int {entry}_get_num_algos(void) {{ return {len(algos)}; }}

CUresult {entry}({sig_full}, int algo_id) {{
  switch (algo_id) {{
{cases}    default:
      fprintf(stderr, "{entry}: algo_id %d out of range (0..{len(algos) - 1})\\n", algo_id);
      return CUDA_ERROR_INVALID_VALUE;
  }}
}}

CUresult {entry}_default({sig_full}) {{ return {entry}({call_args}, 0); }}

CUresult load_{entry}(void) {{
  CUresult res;
{loads}  return CUDA_SUCCESS;
}}

void unload_{entry}(void) {{
{unloads}}}
"""
    c_path, h_path = out / f"{entry}.c", out / f"{entry}.h"
    c_path.write_text(src)
    h_path.write_text(hdr)
    return c_path, h_path


_META_KEYS = ("num_warps", "num_stages", "num_ctas", "launch_cooperative_grid", "launch_pdl", "maxnreg")


def _materialize(entry: str, kernel, spec: Dict[str, Any], algo: Dict[str, Any]):
    """Replace ``%NAME`` in signature and grid with ``algo``'s constexpr values; check every constexpr is given."""
    k = _jit_function(kernel)
    sig, grid = str(spec["signature"]), [str(g) for g in spec["grid"]]
    constexprs = [p.name for p in k.params if p.is_constexpr]
    items = _split(sig)
    if len(items) != len(k.arg_names):
        raise AotError(f"aot entry {entry!r}: signature has {len(items)} entries but {k.__name__} takes "
                       f"{len(k.arg_names)} ({', '.join(k.arg_names)})")
    for name, item in zip(k.arg_names, items):
        if name in constexprs and item != f"%{name}" and item.startswith("%"):
            raise AotError(f"aot entry {entry!r}: constexpr {name!r} is written {item!r}; expected %{name}")
    out_items = []
    for name, item in zip(k.arg_names, items):
        if item.startswith("%"):
            key = item[1:]
            if key not in algo:
                raise AotError(f"aot entry {entry!r}: triton_algo_info {algo} gives no value for {key!r}")
            out_items.append(repr(algo[key]))
        else:
            out_items.append(item)

    def sub(text):
        return re.sub(r"%([A-Za-z_][A-Za-z0-9_]*)",
                      lambda m: str(int(algo[m.group(1)]) if isinstance(algo.get(m.group(1)), bool)
                                    else algo[m.group(1)]) if m.group(1) in algo else m.group(0), text)

    grid = [sub(g) for g in grid]
    for g in grid:
        if "%" in g:
            raise AotError(f"aot entry {entry!r}: grid expression {g!r} names a constexpr no algo info gives")
    options = {kk: v for kk, v in algo.items() if kk in _META_KEYS}
    constants = {kk: v for kk, v in algo.items() if kk not in _META_KEYS}
    return out_items, grid, options, constants


def compile_algo(kernel, entry: str, signature_items: List[str], grid: List[str], options: Dict[str, Any],
                 target="cuda:90", doc: Optional[Dict[str, Any]] = None) -> CParams:
    """Compile one specialisation for ``target`` and return its :class:`CParams`."""
    import triton

    from ..target import to_gpu_target

    t = _target(target)
    k = _jit_function(kernel)
    src, hints = make_ast_source(k, signature_items, t)
    opts = {"num_warps": 4, "num_stages": 3, **options}
    extra = getattr(k, "compile_options_for", None)
    if extra is not None:
        opts = {**extra(t), **opts}
    else:
        from ..jit import compile_options_for_target

        opts = {**compile_options_for_target(t), **opts}
    ccinfo = triton.compile(src, target=to_gpu_target(t), options=opts)
    suffix = kernel_name_suffix(signature_items, opts["num_warps"], opts["num_stages"],
                                {kk: v for kk, v in options.items() if kk not in ("num_warps", "num_stages")})
    return materialize_c_params(k, hints, ccinfo, entry, suffix, grid, doc=doc)


def aot_compile_kernel(kernel, out_dir, target="cuda:90", spaces: Optional[Dict[str, Any]] = None) -> List[Path]:
    """Compile every entry / algo of ``kernel.__aot_compile_spaces__`` (or ``spaces``) for ``target`` into C files
    under ``out_dir``; returns the paths written (per-algo .c/.h, then each entry's dispatcher .c/.h)."""
    spaces = spaces if spaces is not None else getattr(kernel, "__aot_compile_spaces__", None)
    if spaces is None:
        k = _jit_function(kernel)
        spaces = getattr(k, "__aot_compile_spaces__", None)
    if spaces is None:
        raise AotError(f"{kernel!r} has no compile space: decorate it with @aot_compile_spaces({{...}})")
    aot_compile_spaces(spaces)  # validate
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written: List[Path] = []
    for entry, spec in spaces.items():
        algos = []
        for algo in spec["triton_algo_infos"]:
            items, grid, options, constants = _materialize(entry, kernel, spec, algo)
            p = compile_algo(kernel, entry, items, grid, options, target, doc={**constants, **options})
            written.extend(dump_c_code(out / p.name, p))
            algos.append(p)
        written.extend(dump_dispatcher(out, entry, algos))
    return written


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m triton_dist.tools.aot", description=__doc__.split("\n\n")[0])
    ap.add_argument("kernel", help="FILE.py:kernel_name (the kernel carries @aot_compile_spaces)")
    ap.add_argument("--out-dir", "-o", required=True)
    ap.add_argument("--target", "-t", default="cuda:90")
    args = ap.parse_args(argv)
    from .compile import UsageError, load_kernel

    try:
        files = aot_compile_kernel(load_kernel(args.kernel), args.out_dir, args.target)
    except (UsageError, AotError, ValueError) as e:
        print(f"triton-dist-aot: error: {e}", file=sys.stderr)
        return 2
    for f in files:
        print(f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
