"""backends/amd/memory_model.py against the memory legalizer of the LLVM built into the installed Triton.

For every (target, access kind, scope, ordering) the table covers, an LLVM IR function doing that one ``load atomic``
/ ``store atomic`` / ``atomicrmw`` / volatile access / ``fence`` is compiled to AMDGCN, and its cache-maintenance
instructions and the access's cache-policy bits are compared with what the table emits. ``s_waitcnt`` lines are left
out of the comparison: LLVM drops the ones with nothing outstanding in a one-instruction function, and the table
adds some on purpose (see memory_model.py); test/lit/amd_memory_model checks them in real kernels.
"""
import re

import pytest

from triton_dist.backends.amd import memory_model as mm
from triton_dist.target import Target

ARCHS = ("gfx90a", "gfx942", "gfx950")
SYNCSCOPE = {"cta": 'syncscope("workgroup") ', "gpu": 'syncscope("agent") ', "sys": ""}
ORDERING = {"relaxed": "monotonic", "acquire": "acquire", "release": "release", "acq_rel": "acq_rel"}
CPOL = {"sc0", "sc1", "nt", "glc", "slc"}


def _cases():
    for scope in mm.SCOPES:
        ss = SYNCSCOPE[scope]
        for sem in ("relaxed", "acquire"):
            yield (f"load_{sem}_{scope}", ("load", scope, sem, "global_load_dword v0, v[0:1], off"),
                   f"%v = load atomic i32, ptr addrspace(1) %p {ss}{ORDERING[sem]}, align 4\n  ret i32 %v")
        for sem in ("relaxed", "release"):
            yield (f"store_{sem}_{scope}", ("store", scope, sem, "global_store_dword v[0:1], v2, off"),
                   f"store atomic i32 %x, ptr addrspace(1) %p {ss}{ORDERING[sem]}, align 4\n  ret i32 0")
        for sem in ("relaxed", "acquire", "release", "acq_rel"):
            yield (f"rmw_{sem}_{scope}", ("rmw", scope, sem, "global_atomic_add v0, v[0:1], v2, off"),
                   f"%v = atomicrmw add ptr addrspace(1) %p, i32 %x {ss}{ORDERING[sem]}, align 4\n  ret i32 %v")
        yield (f"fence_acquire_{scope}", ("invalidate", scope), f"fence {ss}acquire\n  ret i32 0")
        yield (f"fence_release_{scope}", ("release_fence", scope), f"fence {ss}release\n  ret i32 0")
    yield ("load_volatile", ("load", "gpu", "volatile", "global_load_dword v0, v[0:1], off"),
           "%v = load volatile i32, ptr addrspace(1) %p, align 4\n  ret i32 %v")
    yield ("store_volatile", ("store", "gpu", "volatile", "global_store_dword v[0:1], v2, off"),
           "store volatile i32 %x, ptr addrspace(1) %p, align 4\n  ret i32 0")


CASES = list(_cases())
NAMES = {c[0] for c in CASES}


def _norm(line):
    """``global_load_dword v0, v[0:1], off sc0 sc1`` -> ``global_load_dword sc0 sc1``; cache ops keep their bits."""
    words = re.split(r"[\s,]+", line.strip())
    return " ".join([words[0]] + sorted(w for w in words[1:] if w in CPOL))


def _memory_lines(lines):
    return [_norm(ln) for ln in lines if re.match(r"\s*(global_|buffer_)", ln)]


@pytest.fixture(scope="module")
def llvm_asm():
    """arch -> {function name: normalised memory instructions} from LLVM's own lowering."""
    from triton_dist import _compat

    src = "\n".join(f"define i32 @{name}(ptr addrspace(1) %p, i32 %x) {{\n  {body}\n}}" for name, _, body in CASES)
    out = {}
    for arch in ARCHS:
        asm = _compat.llvm_ir_to_asm(src, "amdgcn-amd-amdhsa", arch)
        funcs, cur = {}, None
        for line in asm.splitlines():
            m = re.match(r"^(\w+):", line)
            if m and m.group(1) in NAMES:
                cur = funcs.setdefault(m.group(1), [])
            elif cur is not None and re.match(r"\s*(global_|buffer_)", line):
                cur.append(_norm(line.split(";")[0]))
            elif cur is not None and re.match(r"\s*s_setpc_b64", line):
                cur = None
        out[arch] = funcs
    return out


def _table(fam, spec):
    kind, *args = spec
    return _memory_lines(getattr(mm, kind)(fam, *args))


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("name,spec", [(c[0], c[1]) for c in CASES], ids=[c[0] for c in CASES])
def test_table_matches_llvm_memory_legalizer(llvm_asm, arch, name, spec):
    fam = mm.family(Target("hip", arch, 64), "test")
    assert _table(fam, spec) == llvm_asm[arch][name], (arch, name)


def test_family_is_one_function_for_both_lowerings():
    from triton_dist.backends.amd import extra, language

    assert not hasattr(language, "_family") and not hasattr(extra, "_family")
    assert mm.family(Target("hip", "gfx942:sramecc+:xnack-", 64), "x") == "gfx942"
    for bad in ("gfx908", "gfx940", "gfx1100", ""):
        with pytest.raises(ValueError, match=r"x: memory operations are not implemented for .*; supported AMD archs: "
                                             r"gfx90a, gfx942, gfx950"):
            mm.family(Target("hip", bad, 64), "x")
