"""Stream memory operations: a stream waits for (or writes) a 64-bit value in device memory, without an SM.

CUDA's driver API (``cuStreamWaitValue64`` / ``cuStreamWriteValue64``, called through ctypes on ``libcuda``) lets
the GPU's front end, not a kernel, hold a stream until a flag in device memory (local or a peer's, over NVLink)
reaches a value. The copy-engine paths of ``ops.overlap`` use it to start a copy as soon as a peer's data has
landed while cuBLAS holds every SM on the main stream: a one-program wait kernel on a side stream would not get an
SM until the GEMM ends. Both operations can be captured in a CUDA graph (they become memory-operation nodes).

Semantics (per the CUDA driver API): work enqueued on ``stream`` after :func:`wait_value64` starts only once
``*addr >= value`` (``cond="geq"``) or ``*addr == value`` (``cond="eq"``) has been observed; :func:`write_value64`
stores ``value`` to ``addr`` once the stream's earlier work is done, with a memory barrier before the store (the
default flag), so that work's writes are visible before the value is.

Nothing here runs at import: :func:`supported` loads ``libcuda`` and probes the device once (a write and a wait on a
scratch word); without a driver, on ROCm, or where the driver refuses the operations it returns False and callers
keep their kernel-based waits. Importing this module needs no GPU.
"""
from __future__ import annotations

import ctypes
import threading
from typing import Dict, Optional

import torch

_COND = {"geq": 0x0, "eq": 0x1}  # CU_STREAM_WAIT_VALUE_GEQ / _EQ
_WRITE_DEFAULT = 0x0  # CU_STREAM_WRITE_VALUE_DEFAULT: memory barrier before the write

_lock = threading.Lock()
_lib = None
_lib_error: Optional[str] = None
_support: Dict[int, bool] = {}


def _driver():
    """``(wait, write)`` ctypes functions of libcuda, or raises RuntimeError."""
    global _lib, _lib_error
    with _lock:
        if _lib is None and _lib_error is None:
            try:
                lib = ctypes.CDLL("libcuda.so.1")
                fns = []
                for name in ("cuStreamWaitValue64", "cuStreamWriteValue64"):
                    fn = None
                    for sym in (name + "_v2", name):  # CUDA >= 11.7 exports the v2 ABI under the _v2 name
                        fn = getattr(lib, sym, None)
                        if fn is not None:
                            break
                    if fn is None:
                        raise OSError(f"libcuda has no {name}")
                    fn.argtypes = [ctypes.c_void_p, ctypes.c_uint64, ctypes.c_uint64, ctypes.c_uint]
                    fn.restype = ctypes.c_int
                    fns.append(fn)
                _lib = tuple(fns)
            except OSError as exc:
                _lib_error = str(exc)
        if _lib is None:
            raise RuntimeError(f"stream memory operations unavailable: {_lib_error}")
        return _lib


def _addr(t: torch.Tensor) -> int:
    if not isinstance(t, torch.Tensor) or t.dtype != torch.int64 or t.device.type != "cuda" or t.numel() < 1:
        raise ValueError("stream memory operations take a non-empty int64 CUDA tensor (its first element is the word)")
    return int(t.data_ptr())


def _handle(stream) -> int:
    return int(stream.cuda_stream if hasattr(stream, "cuda_stream") else stream)


def _check(rc: int, what: str) -> None:
    if rc != 0:
        raise RuntimeError(f"{what} failed with CUresult {rc}")


def wait_value64(stream, word: torch.Tensor, value: int, cond: str = "eq") -> None:
    """Enqueue on ``stream``: hold later work until ``word[0]`` (int64, device memory, possibly a peer view) compares
    ``cond`` (``"eq"`` / ``"geq"``) to ``value``. Returns immediately on the host."""
    if cond not in _COND:
        raise ValueError(f"wait_value64: cond={cond!r}; accepted: {sorted(_COND)}")
    wait, _ = _driver()
    _check(wait(_handle(stream), _addr(word), int(value) & (2**64 - 1), _COND[cond]), "cuStreamWaitValue64")


def write_value64(stream, word: torch.Tensor, value: int) -> None:
    """Enqueue on ``stream``: ``word[0] = value`` after the stream's earlier work (memory barrier first)."""
    _, write = _driver()
    _check(write(_handle(stream), _addr(word), int(value) & (2**64 - 1), _WRITE_DEFAULT), "cuStreamWriteValue64")


def supported(device) -> bool:
    """Whether :func:`wait_value64` / :func:`write_value64` work on ``device`` (probed once per device: a write then
    a satisfied wait on a scratch word, synchronized). False without a CUDA driver or on ROCm."""
    if getattr(torch.version, "hip", None) or not torch.cuda.is_available():
        return False
    dev = torch.device(device)
    idx = dev.index if dev.index is not None else torch.cuda.current_device()
    if idx in _support:
        return _support[idx]
    ok = False
    try:
        with torch.cuda.device(idx):
            word = torch.zeros(1, dtype=torch.int64, device=f"cuda:{idx}")
            s = torch.cuda.current_stream(idx)
            write_value64(s, word, 7)
            wait_value64(s, word, 7, "eq")
            s.synchronize()
            ok = int(word.item()) == 7
    except (RuntimeError, ValueError):
        ok = False
    _support[idx] = ok
    return ok


__all__ = ["supported", "wait_value64", "write_value64"]
