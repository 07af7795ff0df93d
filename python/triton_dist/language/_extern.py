"""One generic helper to call a device-library function from a builtin (used by the GPU lowerings and the
libshmem tables). No target symbols here: the tables live in ``triton_dist.backends.<target>.libshmem``."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Tuple

import triton.language as tl

from .. import _compat


@dataclass(frozen=True)
class Extern:
    """A device-library function: ``symbol(arg_types...) -> ret`` (``ret=None``: void)."""

    symbol: str
    arg_types: Tuple[object, ...]
    ret: Optional[object]
    is_pure: bool = False


def _is_void(ret) -> bool:
    return ret is None or ret == tl.void


def call_extern(lib_name: str, lib_path: str, ext: Extern, args, _semantic):
    """Emit a call to ``ext`` with ``args`` (cast to ``ext.arg_types``; pointers pass as their 64-bit address).

    Void functions are declared with a dummy int32 result that is never used: once the library bitcode is linked
    LLVM's call-site fix-up drops it (a call whose result is unused may call a void definition). Returns the result
    tensor, or a constant int32 0 for void functions."""
    if len(args) != len(ext.arg_types):
        raise TypeError(f"{ext.symbol}: expected {len(ext.arg_types)} arguments, got {len(args)}")
    conv = []
    for a, ty in zip(args, ext.arg_types):
        a = _semantic.to_tensor(a) if not isinstance(a, tl.tensor) else a
        if a.dtype != ty:
            a = _semantic.cast(a, ty)
        conv.append(a)
    ret = tl.int32 if _is_void(ext.ret) else ext.ret
    res = _compat.extern_elementwise(lib_name, lib_path, conv, {tuple(ext.arg_types): (ext.symbol, ret)},
                                     ext.is_pure, _semantic=_semantic)
    if _is_void(ext.ret):
        return _semantic.to_tensor(0)
    return res
