"""Which Triton releases triton_dist supports, and what differs between them that is a plain fact of the release.

Covers Triton 3.6.x-3.9.x (:data:`SUPPORTED_TRITON`). Assumes nothing about Triton's internals: only
``triton.__version__`` is read. The version check runs when this module is imported (``import triton_dist`` imports
it first), so an unsupported Triton fails with one ``ImportError`` before any other module of ``_compat`` touches a
version-bound internal. The per-version facts (capabilities, gfx processors, block pointers, ``tl.atomic_poll``)
are each tested per version in ``test/python/test_compat.py``.
"""
from __future__ import annotations

import os

import triton


#: The Triton releases triton_dist supports: ``SUPPORTED_TRITON[0] <= version < SUPPORTED_TRITON[1]``, i.e. 3.6.x
#: through 3.9.x. ``pyproject.toml``'s ``triton`` requirement says the same (test_compat checks that they agree);
#: CI runs the full tier on 3.6.0 and the matrix subset on the newest patch of 3.7, 3.8 and 3.9
#: (``scripts/triton_matrix.sh``).
SUPPORTED_TRITON = ((3, 6, 0), (3, 10, 0))


def parse_triton_version(text: str) -> tuple:
    """``(major, minor, patch)`` of a Triton version string (``"3.7.1"``, ``"3.8.0+git1234"``, ``"3.9.0rc1"``:
    local and pre-release suffixes are ignored; a missing part is 0)."""
    import re

    parts = [int(re.match(r"\d*", p).group(0) or 0) for p in text.split("+")[0].split(".")[:3]]
    return tuple(parts + [0] * (3 - len(parts)))


def supported_triton_spec() -> str:
    """The supported range as a pip requirement specifier (``>=3.6,<3.10``)."""
    lo, hi = SUPPORTED_TRITON
    return f">={lo[0]}.{lo[1]},<{hi[0]}.{hi[1]}"


def check_triton_version(text: str) -> tuple:
    """The parsed ``text`` (a ``triton.__version__``) when it lies in :data:`SUPPORTED_TRITON`; otherwise one
    ``ImportError`` naming the installed version and the supported range (raised by ``import triton_dist``, before
    anything touches Triton's internals)."""
    version = parse_triton_version(text)
    if not SUPPORTED_TRITON[0] <= version < SUPPORTED_TRITON[1]:
        raise ImportError(
            f"triton_dist supports triton{supported_triton_spec()} (3.6.x to 3.9.x); the installed triton is {text} "
            f"({os.path.dirname(getattr(triton, '__file__', None) or '?')}). Install a supported triton, e.g. the one "
            f"your torch pins (torch 2.11 -> 3.6.0, 2.12.1/2.13 -> 3.7.1, 2.14 -> 3.8.0, 2.15 -> 3.9.0): "
            f"pip install \"triton{supported_triton_spec()}\"")
    return version


TRITON_VERSION = check_triton_version(triton.__version__)
#: The NVIDIA compute capabilities the installed Triton compiles to cubin for. ``parse_target`` accepts only these,
#: so a typo fails in one line instead of in ptxas. Triton 3.6 (ptxas 12.8 and ptxas-blackwell) compiles sm_101 and
#: refuses sm_110; from 3.7 on (CUDA 13 ptxas) Thor is sm_110 and sm_101 is refused. sm_88 is refused by all (3.8+
#: abort the process in LLVM for it). Tested per capability in test_compat.py.
CUDA_CAPABILITIES = ((70, 72, 75, 80, 86, 87, 89, 90, 100, 101, 103, 120, 121) if TRITON_VERSION < (3, 7, 0) else
                     (70, 72, 75, 80, 86, 87, 89, 90, 100, 103, 110, 120, 121))
#: Whether the installed Triton has block pointers (``tl.make_block_ptr`` / ``tl.advance``): 3.6-3.8 do; 3.9 removed
#: them in favour of tensor descriptors (its ``make_block_ptr`` raises ``NotImplementedError``), so
#: ``dl.consume_token`` on a block pointer exists only where this is true. Tested in test_compat.py.
HAS_BLOCK_POINTERS = TRITON_VERSION < (3, 9, 0)
#: Whether the installed Triton has the public ``tl.atomic_poll(ptr, expected, sem, scope, timeout_ns)`` (3.9 on;
#: ``tl.atomic_load`` / ``tl.atomic_store`` came with it). Where true, the NVIDIA ``dl.wait`` on ONE signal without a
#: bound uses it instead of its inline-asm spin. Assumptions (tested in test_compat.py, per version): the attribute
#: exists exactly where this is true, and on a scalar pointer for cuda the op lowers to thread 0 spinning on
#: ``ld.relaxed.<scope>`` until the value equals ``expected``, then ``fence.acquire.<scope>`` (acquire only) and
#: ``bar.sync 0`` -- the same scope, acquire ordering and CTA barrier as the emulation (``ld.acquire.<scope>`` spin
#: in thread 0, ``bar.sync 0``). ``tl.atomic_load`` / ``atomic_store`` are NOT used for ``language_extra.ld`` /
#: ``st``: on a scalar pointer they run in thread 0 only, behind ``bar.sync`` (results broadcast through shared
#: memory), where ``ld`` / ``st`` run in every thread and must not synchronise (they are used in divergent SIMT code).
HAS_ATOMIC_POLL = TRITON_VERSION >= (3, 9, 0)


def _hip_archs(version) -> tuple:
    """The gfx processors Triton ``version``'s HIP backend compiles for: Triton 3.6 and 3.7's LLVM reject gfx906,
    gfx940 and gfx941; 3.8 accepts gfx906 again; 3.9 drops gfx1030."""
    archs = ["gfx908", "gfx90a", "gfx942", "gfx950", "gfx1030", "gfx1100", "gfx1101", "gfx1102", "gfx1103",
             "gfx1150", "gfx1151", "gfx1152", "gfx1153", "gfx1200", "gfx1201", "gfx1250"]
    if version >= (3, 8, 0):
        archs.insert(0, "gfx906")
    if version >= (3, 9, 0):
        archs.remove("gfx1030")
    return tuple(archs)


#: The AMD gfx processors the installed Triton's HIP backend compiles for. Tested per arch in test_compat.py.
HIP_ARCHS = _hip_archs(TRITON_VERSION)
