"""The cooperative-launch check for kernels that call SHMEM device collectives (``libshmem_device`` barriers, sync,
broadcast, fcollect): such a kernel launched with more than one program and without ``launch_cooperative_grid=True``
can deadlock, so ``@triton_dist.jit`` refuses the launch (:func:`check_cooperative_launch`) after reading which
collectives the compiled kernel calls (:func:`collective_calls`, from the per-target symbol tables
``COLLECTIVE_SYMBOLS`` of ``triton_dist.backends.{nvidia,amd}.libshmem``)."""
from __future__ import annotations

import re
from typing import Tuple

__all__ = ["collective_calls", "check_cooperative_launch"]

_COLLECTIVE_RE = None


def _collective_re():
    global _COLLECTIVE_RE
    if _COLLECTIVE_RE is None:
        from ..backends.amd import libshmem as _amd
        from ..backends.nvidia import libshmem as _nv

        names = sorted(set(_nv.COLLECTIVE_SYMBOLS) | set(_amd.COLLECTIVE_SYMBOLS), key=len, reverse=True)
        _COLLECTIVE_RE = re.compile(r"(?<![A-Za-z0-9_$.])(" + "|".join(map(re.escape, names)) + r")(?![A-Za-z0-9_$])")
    return _COLLECTIVE_RE


def collective_calls(asm) -> Tuple[str, ...]:
    """The SHMEM device collectives (barrier / sync / broadcast / fcollect symbols) a compiled kernel calls, read
    from its TTIR (``asm["ttir"]``: the extern calls before linking, so inlined library code cannot hide or fake
    them); LLIR / PTX when no TTIR is kept."""
    text = None
    for stage in ("ttir", "ttgir", "llir", "ptx", "amdgcn"):
        try:
            text = asm[stage]
        except (KeyError, TypeError):
            continue
        if isinstance(text, bytes):
            text = text.decode(errors="replace")
        if text:
            break
    if not text:
        return ()
    return tuple(sorted(set(_collective_re().findall(text))))


def _num_programs(grid) -> int:
    n = 1
    for g in tuple(grid):
        n *= int(g)
    return n


def check_cooperative_launch(kernel_name: str, asm, grid, cooperative: bool) -> None:
    """Raise RuntimeError when a kernel calling device-side collectives is launched with more than one program
    without ``launch_cooperative_grid=True``: a device barrier / collective waits for every program of the launch
    (through the other PEs), which may never be scheduled while the waiting ones occupy the GPU -> deadlock.
    ``grid`` is the launch grid (a tuple); pure function (testable on compiled code without a GPU)."""
    if cooperative:
        return
    n = _num_programs(grid)
    if n <= 1:
        return
    calls = collective_calls(asm)
    if calls:
        raise RuntimeError(
            f"triton_dist: kernel {kernel_name!r} calls the device-side collective(s) {', '.join(calls)} "
            f"(libshmem_device barrier / sync / broadcast / fcollect) and is launched with {n} programs "
            f"(grid {tuple(grid)}) without launch_cooperative_grid=True: its programs may not all be resident, so "
            f"the collective can deadlock. Fix: launch it cooperatively, `{kernel_name}[grid](..., "
            f"launch_cooperative_grid=True)` (grid small enough to be resident at once), or launch the collective "
            f"in a 1-program kernel.")
