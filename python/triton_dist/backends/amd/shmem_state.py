"""Which compiled AMD modules need rocSHMEM's module initialisation (``rocshmem_hipmodule_init``), decided from their
AMDGCN assembly (the rule of the JIT's load hook, ``triton_dist.runtime.module_init``)."""
from __future__ import annotations

import re

__all__ = ["ROCSHMEM_STATE_SYMBOL", "ROCSHMEM_STATE_SYMBOLS", "amdgcn_uses_rocshmem"]

#: Device symbols rocSHMEM's ``rocshmem_hipmodule_init`` copies into a loaded module (all ``extern "C"``, so
#: unmangled): the default context every default-context device function reads, and the world / shared team handles.
ROCSHMEM_STATE_SYMBOL = "ROCSHMEM_CTX_DEFAULT"
ROCSHMEM_STATE_SYMBOLS = (ROCSHMEM_STATE_SYMBOL, "ROCSHMEM_TEAM_WORLD", "ROCSHMEM_TEAM_SHARED")
_ROCSHMEM_SYM_RE = re.compile(r"(?<![\w.$])(?:" + "|".join(ROCSHMEM_STATE_SYMBOLS) + r")(?![\w$])")
#: AMDGCN assembler directives that declare or lay out a symbol rather than use it.
_AMDGCN_DECL_DIRECTIVES = frozenset((".globl", ".global", ".protected", ".hidden", ".internal", ".weak", ".type",
                                     ".size", ".local", ".comm", ".lcomm", ".no_dead_strip", ".addrsig_sym"))


def amdgcn_uses_rocshmem(asm: str) -> bool:
    """True when some line of AMDGCN assembly other than a declaration references rocSHMEM's device state
    (``ROCSHMEM_CTX_DEFAULT`` or a team handle), e.g. ``s_add_u32 s0, s0, ROCSHMEM_CTX_DEFAULT@rel32@lo+4``. The
    symbol's own definition (``.globl`` / ``.type`` / ``.size`` directives and its label) does not count."""
    for line in asm.splitlines():
        code = line.split(";", 1)[0]  # ';' starts an AMDGCN assembler comment
        m = _ROCSHMEM_SYM_RE.search(code)
        if m is None:
            continue
        stripped = code.strip()
        if stripped.split(None, 1)[0].rstrip(",") in _AMDGCN_DECL_DIRECTIVES:
            continue
        if stripped.startswith(m.group(0)) and stripped[len(m.group(0)):].lstrip().startswith(":"):
            continue  # the label that defines it
        return True
    return False
