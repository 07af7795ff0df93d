"""The AMDGPU memory model for triton_dist's inline-asm lowerings, stated once.

``backends/amd/language.py`` (``dl.wait`` / ``dl.notify``) and ``backends/amd/extra.py`` (``language_extra`` ld / st
/ atomics) issue their memory operations as inline AMDGCN, so they must spell out themselves the sequences LLVM's
memory legalizer emits for ``load atomic`` / ``store atomic`` / ``atomicrmw`` / ``fence``. Both take them from this
module, and ``test/lit/amd_memory_model`` checks the generated AMDGCN for every (scope, semantic) pair.

Source: LLVM "User Guide for AMDGPU Backend" (``llvm/docs/AMDGPUUsage.rst``), section "Memory Model", subsections
"Memory Model GFX90A" and "Memory Model GFX942", tables "AMDHSA Memory Model Code Sequences GFX90A" and "AMDHSA
Memory Model Code Sequences GFX942" (titled "... GFX940, GFX941, GFX942" in older revisions); address space
``global``; scopes ``workgroup`` (our "cta"), ``agent`` ("gpu"), ``system`` ("sys"). Rows used:

* "load atomic monotonic": gfx942 ``sc0`` / ``sc1`` / ``sc0 sc1``; gfx90a none / ``glc`` / ``glc``.
* "load atomic acquire": the same load, then at agent / system scope ``s_waitcnt vmcnt(0)`` and the invalidate:
  gfx942 ``buffer_inv sc1`` / ``buffer_inv sc0 sc1``; gfx90a ``buffer_wbinvl1_vol`` / ``buffer_invl2;
  buffer_wbinvl1_vol`` (``buffer_invl2`` drops L2 lines of MTYPE NC, i.e. remote coarse-grained memory, which
  memory probes do not keep coherent). At workgroup scope the acquire is the load alone.
* "store atomic monotonic": gfx942 ``sc0`` / ``sc1`` / ``sc0 sc1``; gfx90a no bits at any scope.
* "store atomic release" / "fence release": L2 writeback, then ``s_waitcnt vmcnt(0) lgkmcnt(0)`` (then the store):
  gfx942 ``buffer_wbl2 sc1`` (agent) / ``buffer_wbl2 sc0 sc1`` (system); gfx90a ``buffer_wbl2`` at system scope
  only (its L2 is shared by the whole agent).
* "atomicrmw monotonic / acquire / release / acq_rel": RMW atomics bypass L1. gfx942: ``sc1`` at system scope, and
  ``sc0`` means "return the old value" (not a scope); gfx90a: no scope bits, ``glc`` means "return". Acquire /
  release add the sequences of the two rows above.
* "Non-Atomic" ``volatile`` load / store: gfx942 ``sc0 sc1``, gfx90a ``glc`` (loads only), then
  ``s_waitcnt vmcnt(0)``.

gfx950 uses the GFX942 rows: LLVM's AMDGPU backend (the one bundled with Triton 3.6) emits identical sequences for
gfx942 and gfx950 for all of the above (checked by compiling ``load atomic`` / ``store atomic`` / ``atomicrmw`` /
``cmpxchg`` / ``fence`` at each scope and ordering for both; the lit tests compile gfx950 too). Other AMD targets
follow other sections ("Memory Model GFX6-GFX9" for gfx908, "GFX10-GFX11", "GFX12", ...) and are refused.

Execution mode: the rows are those for non-TgSplit mode ("If not TgSplit execution mode, omit ..."), because
Triton's AMD backend never enables the ``tgsplit`` target feature; so a workgroup-scope load has no ``glc`` on
gfx90a and a workgroup-scope acquire invalidates nothing.

Where the emitted code deliberately differs from a row (always by adding waits, never by dropping any):

* Every load and every returning atomic is followed by ``s_waitcnt vmcnt(0)``, also where the row has none
  (relaxed loads, workgroup acquire): its result is an inline-asm output, and LLVM's wait-count insertion does not
  see that the asm issued a load, so nothing else would wait for the value before it is used.
* The wait before a release is ``s_waitcnt vmcnt(0) lgkmcnt(0)`` at every scope: the agent / system rows' form. The
  workgroup rows ask for ``lgkmcnt(0)`` (``vmcnt(0)`` in TgSplit mode); waiting for both is a superset.
* A volatile store also waits for the thread's earlier accesses (``s_waitcnt vmcnt(0) lgkmcnt(0)``) before it.

``dl.wait`` additionally runs :func:`invalidate` in every thread after its workgroup barrier (see
``language.py``), so that no wave keeps lines it cached before the wait completed.
"""
from __future__ import annotations

#: target arch (without target features) -> the memory-model table it follows
FAMILIES = {"gfx90a": "gfx90a", "gfx942": "gfx942", "gfx950": "gfx942"}

SCOPES = ("cta", "gpu", "sys")

WAIT_VM = "s_waitcnt vmcnt(0)"
WAIT_ALL = "s_waitcnt vmcnt(0) lgkmcnt(0)"

# Cache-policy bits on the access itself, per family and access kind; one column per scope.
_BITS = {
    "gfx942": {
        "load": {"cta": "sc0", "gpu": "sc1", "sys": "sc0 sc1"},  # load atomic monotonic / acquire
        "store": {"cta": "sc0", "gpu": "sc1", "sys": "sc0 sc1"},  # store atomic monotonic / release
        "rmw": {"cta": "", "gpu": "", "sys": "sc1"},  # atomicrmw (sc0 is the return bit, added below)
    },
    "gfx90a": {
        "load": {"cta": "", "gpu": "glc", "sys": "glc"},
        "store": {"cta": "", "gpu": "", "sys": ""},
        "rmw": {"cta": "", "gpu": "", "sys": ""},  # glc is the return bit
    },
}
#: bit that makes an atomic RMW return the value it replaced
_RETURN_BIT = {"gfx942": "sc0", "gfx90a": "glc"}
#: bits of a non-atomic volatile load / store
_VOLATILE_BITS = {"gfx942": {"load": "sc0 sc1", "store": "sc0 sc1"}, "gfx90a": {"load": "glc", "store": ""}}
#: acquire side: cache invalidate after the (waited-for) acquiring access, per scope
_INVALIDATE = {
    "gfx942": {"cta": (), "gpu": ("buffer_inv sc1", ), "sys": ("buffer_inv sc0 sc1", )},
    "gfx90a": {"cta": (), "gpu": ("buffer_wbinvl1_vol", ), "sys": ("buffer_invl2", "buffer_wbinvl1_vol")},
}
#: release side: L2 writeback before the wait that precedes the releasing access, per scope
_WRITEBACK = {
    "gfx942": {"cta": (), "gpu": ("buffer_wbl2 sc1", ), "sys": ("buffer_wbl2 sc0 sc1", )},
    "gfx90a": {"cta": (), "gpu": (), "sys": ("buffer_wbl2", )},
}


def arch_of(target) -> str:
    """The target's gfx name without target features (``"gfx942:sramecc+:xnack-"`` -> ``"gfx942"``)."""
    return str(getattr(target, "arch", "") or "").split(":", 1)[0].strip().lower()


def family(target, op: str) -> str:
    """The memory-model table ``target`` follows (``"gfx942"`` or ``"gfx90a"``); a ValueError naming ``op`` for any
    other AMD target."""
    arch = arch_of(target)
    fam = FAMILIES.get(arch)
    if fam is None:
        raise ValueError(f"{op}: memory operations are not implemented for {arch or repr(target)}; "
                         f"supported AMD archs: {', '.join(FAMILIES)}")
    return fam


def _with_bits(insn: str, bits: str) -> str:
    return f"{insn} {bits}" if bits else insn


def invalidate(fam: str, scope: str) -> list:
    """The acquire-side cache invalidate at ``scope`` (step 3 of "load atomic acquire", step 2 of "fence acquire")."""
    return list(_INVALIDATE[fam][scope])


def release_fence(fam: str, scope: str) -> list:
    """"fence release" at ``scope``: the L2 writeback, then wait for this thread's earlier accesses."""
    return list(_WRITEBACK[fam][scope]) + [WAIT_ALL]


def load(fam: str, scope: str, sem: str, insn: str) -> list:
    """Lines of a load (``sem``: relaxed / acquire / volatile); ``insn`` is the load with its operands, without
    cache bits (``"global_load_dword $0, $1, off"``)."""
    if sem == "volatile":
        return [_with_bits(insn, _VOLATILE_BITS[fam]["load"]), WAIT_VM]
    lines = [_with_bits(insn, _BITS[fam]["load"][scope]), WAIT_VM]
    return lines + (invalidate(fam, scope) if sem == "acquire" else [])


def store(fam: str, scope: str, sem: str, insn: str) -> list:
    """Lines of a store (``sem``: relaxed / release / volatile); ``insn`` without cache bits."""
    if sem == "volatile":
        return [WAIT_ALL, _with_bits(insn, _VOLATILE_BITS[fam]["store"]), WAIT_VM]
    head = release_fence(fam, scope) if sem == "release" else []
    return head + [_with_bits(insn, _BITS[fam]["store"][scope])]


def rmw(fam: str, scope: str, sem: str, insn: str) -> list:
    """Lines of an atomic read-modify-write that returns the old value (``sem``: relaxed / acquire / release /
    acq_rel); ``insn`` without cache bits."""
    bits = " ".join(b for b in (_RETURN_BIT[fam], _BITS[fam]["rmw"][scope]) if b)
    head = release_fence(fam, scope) if sem in ("release", "acq_rel") else []
    tail = invalidate(fam, scope) if sem in ("acquire", "acq_rel") else []
    return head + [_with_bits(insn, bits), WAIT_VM] + tail
