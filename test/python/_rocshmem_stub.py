"""A stand-in for rocSHMEM's device bitcode, generated from ``triton_dist.backends.amd.libshmem.EXTERNS``: one
trivial definition per symbol, with the argument and result types our lowering declares. Used to show, on a CPU
machine, that the HIP link path resolves every rocSHMEM call and the kernel assembles to a code object. It proves
the linking mechanics only, not rocSHMEM's real ABI (which needs a rocSHMEM build to check)."""
import triton.language as tl

_LL_TYPES = {tl.int8: "i8", tl.uint8: "i8", tl.int16: "i16", tl.uint16: "i16", tl.int32: "i32", tl.uint32: "i32",
             tl.int64: "i64", tl.uint64: "i64", tl.float32: "float", tl.float64: "double"}


def stub_ir() -> str:
    from triton_dist.backends.amd.libshmem import EXTERNS

    lines = ['target triple = "amdgcn-amd-amdhsa"', ""]
    for ext in {e.symbol: e for e in EXTERNS.values()}.values():
        args = ", ".join(f"{_LL_TYPES[t]} %a{i}" for i, t in enumerate(ext.arg_types))
        if ext.ret is None:
            ret, body = "void", "ret void"
        else:
            ret = _LL_TYPES[ext.ret]
            body = f"ret {ret} {'0.0' if ret in ('float', 'double') else '0'}"
        lines.append(f"define linkonce_odr hidden {ret} @{ext.symbol}({args}) {{\n  {body}\n}}")
    return "\n".join(lines) + "\n"


def write_stub(directory) -> str:
    path = directory / "librocshmem_device_stub.ll"
    path.write_text(stub_ir())
    return str(path)
