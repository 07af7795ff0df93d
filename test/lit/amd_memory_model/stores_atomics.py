# AMD memory model, stores and atomics of language_extra (backends/amd/extra.py): every (scope, semantic) pair,
# gfx942 and gfx90a, checked instruction by instruction against LLVM AMDGPUUsage "Memory Model GFX942" /
# "Memory Model GFX90A", tables "AMDHSA Memory Model Code Sequences GFX942" / "... GFX90A", address space global,
# non-TgSplit mode:
#  - "store atomic monotonic": gfx942 sc0 (workgroup) / sc1 (agent) / sc0 sc1 (system); gfx90a no bits.
#  - "store atomic release": gfx942 buffer_wbl2 sc1 (agent) / buffer_wbl2 sc0 sc1 (system), gfx90a buffer_wbl2
#    (system only), then s_waitcnt vmcnt(0) lgkmcnt(0), then the store. At workgroup scope the model asks for
#    s_waitcnt lgkmcnt(0) (vmcnt(0) in TgSplit mode); the lowering emits both counters at every scope.
#  - "atomicrmw monotonic / acquire / release / acq_rel": the RMW bypasses L1; on gfx942 sc1 = system scope and
#    sc0 = "returns the old value" (always set: these atomics return it); on gfx90a glc = returns. Acquire adds
#    s_waitcnt vmcnt(0) + the invalidate of "load atomic acquire" (buffer_inv sc1 / sc0 sc1; buffer_wbinvl1_vol /
#    buffer_invl2 + buffer_wbinvl1_vol), release the writeback + wait of "store atomic release".
#  - non-atomic volatile load / store ("Non-Atomic" rows): gfx942 sc0 sc1, gfx90a glc on loads only, then
#    s_waitcnt vmcnt(0); the volatile store also waits for earlier accesses first.
# gfx950 follows the GFX942 rows (one run).
#
# RUN: %compile %s:st_all -s "*i32, i32" --target hip:gfx942 --stage amdgcn | filecheck %s --check-prefix=G942-ST
# RUN: %compile %s:ld_volatile -s "*i32, *i32" --target hip:gfx942 --stage amdgcn | filecheck %s --check-prefix=G942-LDV
# RUN: %compile %s:add_all -s "*i32, *i32, i32" --target hip:gfx942 --stage amdgcn | filecheck %s --check-prefix=G942-ADD
# RUN: %compile %s:cas_some -s "*i32, *i32, i32" --target hip:gfx942 --stage amdgcn | filecheck %s --check-prefix=G942-CAS
# RUN: %compile %s:add_all -s "*i32, *i32, i32" --target hip:gfx950 --stage amdgcn | filecheck %s --check-prefix=G942-ADD
# RUN: %compile %s:st_all -s "*i32, i32" --target hip:gfx90a --stage amdgcn | filecheck %s --check-prefix=G90A-ST
# RUN: %compile %s:ld_volatile -s "*i32, *i32" --target hip:gfx90a --stage amdgcn | filecheck %s --check-prefix=G90A-LDV
# RUN: %compile %s:add_all -s "*i32, *i32, i32" --target hip:gfx90a --stage amdgcn | filecheck %s --check-prefix=G90A-ADD
# RUN: %compile %s:cas_some -s "*i32, *i32, i32" --target hip:gfx90a --stage amdgcn | filecheck %s --check-prefix=G90A-CAS
#
# ---- G942: st, in st_all's order ----
# G942-ST: ;;#ASMSTART
# G942-ST-NEXT: global_store_dword {{v\[[0-9]+:[0-9]+\]}}, {{v[0-9]+}}, off sc0{{$}}
# G942-ST-NEXT: v_mov_b32 {{v[0-9]+}}, 0
# G942-ST-NEXT: ;;#ASMEND
# G942-ST: ;;#ASMSTART
# G942-ST-NEXT: global_store_dword {{v\[[0-9]+:[0-9]+\]}}, {{v[0-9]+}}, off sc1{{$}}
# G942-ST-NEXT: v_mov_b32 {{v[0-9]+}}, 0
# G942-ST-NEXT: ;;#ASMEND
# G942-ST: ;;#ASMSTART
# G942-ST-NEXT: global_store_dword {{v\[[0-9]+:[0-9]+\]}}, {{v[0-9]+}}, off sc0 sc1{{$}}
# G942-ST-NEXT: v_mov_b32 {{v[0-9]+}}, 0
# G942-ST-NEXT: ;;#ASMEND
# G942-ST: ;;#ASMSTART
# G942-ST-NEXT: s_waitcnt vmcnt(0) lgkmcnt(0)
# G942-ST-NEXT: global_store_dword {{v\[[0-9]+:[0-9]+\]}}, {{v[0-9]+}}, off sc0{{$}}
# G942-ST-NEXT: v_mov_b32 {{v[0-9]+}}, 0
# G942-ST-NEXT: ;;#ASMEND
# G942-ST: ;;#ASMSTART
# G942-ST-NEXT: buffer_wbl2 sc1
# G942-ST-NEXT: s_waitcnt vmcnt(0) lgkmcnt(0)
# G942-ST-NEXT: global_store_dword {{v\[[0-9]+:[0-9]+\]}}, {{v[0-9]+}}, off sc1{{$}}
# G942-ST-NEXT: v_mov_b32 {{v[0-9]+}}, 0
# G942-ST-NEXT: ;;#ASMEND
# G942-ST: ;;#ASMSTART
# G942-ST-NEXT: buffer_wbl2 sc0 sc1
# G942-ST-NEXT: s_waitcnt vmcnt(0) lgkmcnt(0)
# G942-ST-NEXT: global_store_dword {{v\[[0-9]+:[0-9]+\]}}, {{v[0-9]+}}, off sc0 sc1{{$}}
# G942-ST-NEXT: v_mov_b32 {{v[0-9]+}}, 0
# G942-ST-NEXT: ;;#ASMEND
# G942-ST: ;;#ASMSTART
# G942-ST-NEXT: s_waitcnt vmcnt(0) lgkmcnt(0)
# G942-ST-NEXT: global_store_dword {{v\[[0-9]+:[0-9]+\]}}, {{v[0-9]+}}, off sc0 sc1{{$}}
# G942-ST-NEXT: s_waitcnt vmcnt(0)
# G942-ST-NEXT: v_mov_b32 {{v[0-9]+}}, 0
# G942-ST-NEXT: ;;#ASMEND
# ---- G942: volatile ld ----
# G942-LDV: ;;#ASMSTART
# G942-LDV-NEXT: global_load_dword {{v[0-9]+}}, {{v\[[0-9]+:[0-9]+\]}}, off sc0 sc1{{$}}
# G942-LDV-NEXT: s_waitcnt vmcnt(0)
# G942-LDV-NEXT: ;;#ASMEND
# ---- G942: atomic_add, in add_all's order ----
# G942-ADD: ;;#ASMSTART
# G942-ADD-NEXT: global_atomic_add {{v[0-9]+}}, {{v\[[0-9]+:[0-9]+\]}}, {{v[0-9]+}}, off sc0{{$}}
# G942-ADD-NEXT: s_waitcnt vmcnt(0)
# G942-ADD-NEXT: ;;#ASMEND
# G942-ADD: ;;#ASMSTART
# G942-ADD-NEXT: global_atomic_add {{v[0-9]+}}, {{v\[[0-9]+:[0-9]+\]}}, {{v[0-9]+}}, off sc0{{$}}
# G942-ADD-NEXT: s_waitcnt vmcnt(0)
# G942-ADD-NEXT: ;;#ASMEND
# G942-ADD: ;;#ASMSTART
# G942-ADD-NEXT: global_atomic_add {{v[0-9]+}}, {{v\[[0-9]+:[0-9]+\]}}, {{v[0-9]+}}, off sc0 sc1{{$}}
# G942-ADD-NEXT: s_waitcnt vmcnt(0)
# G942-ADD-NEXT: ;;#ASMEND
# G942-ADD: ;;#ASMSTART
# G942-ADD-NEXT: global_atomic_add {{v[0-9]+}}, {{v\[[0-9]+:[0-9]+\]}}, {{v[0-9]+}}, off sc0{{$}}
# G942-ADD-NEXT: s_waitcnt vmcnt(0)
# G942-ADD-NEXT: ;;#ASMEND
# G942-ADD: ;;#ASMSTART
# G942-ADD-NEXT: global_atomic_add {{v[0-9]+}}, {{v\[[0-9]+:[0-9]+\]}}, {{v[0-9]+}}, off sc0{{$}}
# G942-ADD-NEXT: s_waitcnt vmcnt(0)
# G942-ADD-NEXT: buffer_inv sc1
# G942-ADD-NEXT: ;;#ASMEND
# G942-ADD: ;;#ASMSTART
# G942-ADD-NEXT: global_atomic_add {{v[0-9]+}}, {{v\[[0-9]+:[0-9]+\]}}, {{v[0-9]+}}, off sc0 sc1{{$}}
# G942-ADD-NEXT: s_waitcnt vmcnt(0)
# G942-ADD-NEXT: buffer_inv sc0 sc1
# G942-ADD-NEXT: ;;#ASMEND
# G942-ADD: ;;#ASMSTART
# G942-ADD-NEXT: s_waitcnt vmcnt(0) lgkmcnt(0)
# G942-ADD-NEXT: global_atomic_add {{v[0-9]+}}, {{v\[[0-9]+:[0-9]+\]}}, {{v[0-9]+}}, off sc0{{$}}
# G942-ADD-NEXT: s_waitcnt vmcnt(0)
# G942-ADD-NEXT: ;;#ASMEND
# G942-ADD: ;;#ASMSTART
# G942-ADD-NEXT: buffer_wbl2 sc1
# G942-ADD-NEXT: s_waitcnt vmcnt(0) lgkmcnt(0)
# G942-ADD-NEXT: global_atomic_add {{v[0-9]+}}, {{v\[[0-9]+:[0-9]+\]}}, {{v[0-9]+}}, off sc0{{$}}
# G942-ADD-NEXT: s_waitcnt vmcnt(0)
# G942-ADD-NEXT: ;;#ASMEND
# G942-ADD: ;;#ASMSTART
# G942-ADD-NEXT: buffer_wbl2 sc0 sc1
# G942-ADD-NEXT: s_waitcnt vmcnt(0) lgkmcnt(0)
# G942-ADD-NEXT: global_atomic_add {{v[0-9]+}}, {{v\[[0-9]+:[0-9]+\]}}, {{v[0-9]+}}, off sc0 sc1{{$}}
# G942-ADD-NEXT: s_waitcnt vmcnt(0)
# G942-ADD-NEXT: ;;#ASMEND
# G942-ADD: ;;#ASMSTART
# G942-ADD-NEXT: s_waitcnt vmcnt(0) lgkmcnt(0)
# G942-ADD-NEXT: global_atomic_add {{v[0-9]+}}, {{v\[[0-9]+:[0-9]+\]}}, {{v[0-9]+}}, off sc0{{$}}
# G942-ADD-NEXT: s_waitcnt vmcnt(0)
# G942-ADD-NEXT: ;;#ASMEND
# G942-ADD: ;;#ASMSTART
# G942-ADD-NEXT: buffer_wbl2 sc1
# G942-ADD-NEXT: s_waitcnt vmcnt(0) lgkmcnt(0)
# G942-ADD-NEXT: global_atomic_add {{v[0-9]+}}, {{v\[[0-9]+:[0-9]+\]}}, {{v[0-9]+}}, off sc0{{$}}
# G942-ADD-NEXT: s_waitcnt vmcnt(0)
# G942-ADD-NEXT: buffer_inv sc1
# G942-ADD-NEXT: ;;#ASMEND
# G942-ADD: ;;#ASMSTART
# G942-ADD-NEXT: buffer_wbl2 sc0 sc1
# G942-ADD-NEXT: s_waitcnt vmcnt(0) lgkmcnt(0)
# G942-ADD-NEXT: global_atomic_add {{v[0-9]+}}, {{v\[[0-9]+:[0-9]+\]}}, {{v[0-9]+}}, off sc0 sc1{{$}}
# G942-ADD-NEXT: s_waitcnt vmcnt(0)
# G942-ADD-NEXT: buffer_inv sc0 sc1
# G942-ADD-NEXT: ;;#ASMEND
# ---- G942: atomic_cas, in cas_some's order ----
# G942-CAS: ;;#ASMSTART
# G942-CAS-NEXT: global_atomic_cmpswap {{v[0-9]+}}, {{v\[[0-9]+:[0-9]+\]}}, {{v\[[0-9]+:[0-9]+\]}}, off sc0{{$}}
# G942-CAS-NEXT: s_waitcnt vmcnt(0)
# G942-CAS-NEXT: ;;#ASMEND
# G942-CAS: ;;#ASMSTART
# G942-CAS-NEXT: global_atomic_cmpswap {{v[0-9]+}}, {{v\[[0-9]+:[0-9]+\]}}, {{v\[[0-9]+:[0-9]+\]}}, off sc0{{$}}
# G942-CAS-NEXT: s_waitcnt vmcnt(0)
# G942-CAS-NEXT: buffer_inv sc1
# G942-CAS-NEXT: ;;#ASMEND
# G942-CAS: ;;#ASMSTART
# G942-CAS-NEXT: buffer_wbl2 sc0 sc1
# G942-CAS-NEXT: s_waitcnt vmcnt(0) lgkmcnt(0)
# G942-CAS-NEXT: global_atomic_cmpswap {{v[0-9]+}}, {{v\[[0-9]+:[0-9]+\]}}, {{v\[[0-9]+:[0-9]+\]}}, off sc0 sc1{{$}}
# G942-CAS-NEXT: s_waitcnt vmcnt(0)
# G942-CAS-NEXT: ;;#ASMEND
# G942-CAS: ;;#ASMSTART
# G942-CAS-NEXT: buffer_wbl2 sc0 sc1
# G942-CAS-NEXT: s_waitcnt vmcnt(0) lgkmcnt(0)
# G942-CAS-NEXT: global_atomic_cmpswap {{v[0-9]+}}, {{v\[[0-9]+:[0-9]+\]}}, {{v\[[0-9]+:[0-9]+\]}}, off sc0 sc1{{$}}
# G942-CAS-NEXT: s_waitcnt vmcnt(0)
# G942-CAS-NEXT: buffer_inv sc0 sc1
# G942-CAS-NEXT: ;;#ASMEND
# ---- G90A: st, in st_all's order ----
# G90A-ST: ;;#ASMSTART
# G90A-ST-NEXT: global_store_dword {{v\[[0-9]+:[0-9]+\]}}, {{v[0-9]+}}, off{{$}}
# G90A-ST-NEXT: v_mov_b32 {{v[0-9]+}}, 0
# G90A-ST-NEXT: ;;#ASMEND
# G90A-ST: ;;#ASMSTART
# G90A-ST-NEXT: global_store_dword {{v\[[0-9]+:[0-9]+\]}}, {{v[0-9]+}}, off{{$}}
# G90A-ST-NEXT: v_mov_b32 {{v[0-9]+}}, 0
# G90A-ST-NEXT: ;;#ASMEND
# G90A-ST: ;;#ASMSTART
# G90A-ST-NEXT: global_store_dword {{v\[[0-9]+:[0-9]+\]}}, {{v[0-9]+}}, off{{$}}
# G90A-ST-NEXT: v_mov_b32 {{v[0-9]+}}, 0
# G90A-ST-NEXT: ;;#ASMEND
# G90A-ST: ;;#ASMSTART
# G90A-ST-NEXT: s_waitcnt vmcnt(0) lgkmcnt(0)
# G90A-ST-NEXT: global_store_dword {{v\[[0-9]+:[0-9]+\]}}, {{v[0-9]+}}, off{{$}}
# G90A-ST-NEXT: v_mov_b32 {{v[0-9]+}}, 0
# G90A-ST-NEXT: ;;#ASMEND
# G90A-ST: ;;#ASMSTART
# G90A-ST-NEXT: s_waitcnt vmcnt(0) lgkmcnt(0)
# G90A-ST-NEXT: global_store_dword {{v\[[0-9]+:[0-9]+\]}}, {{v[0-9]+}}, off{{$}}
# G90A-ST-NEXT: v_mov_b32 {{v[0-9]+}}, 0
# G90A-ST-NEXT: ;;#ASMEND
# G90A-ST: ;;#ASMSTART
# G90A-ST-NEXT: buffer_wbl2
# G90A-ST-NEXT: s_waitcnt vmcnt(0) lgkmcnt(0)
# G90A-ST-NEXT: global_store_dword {{v\[[0-9]+:[0-9]+\]}}, {{v[0-9]+}}, off{{$}}
# G90A-ST-NEXT: v_mov_b32 {{v[0-9]+}}, 0
# G90A-ST-NEXT: ;;#ASMEND
# G90A-ST: ;;#ASMSTART
# G90A-ST-NEXT: s_waitcnt vmcnt(0) lgkmcnt(0)
# G90A-ST-NEXT: global_store_dword {{v\[[0-9]+:[0-9]+\]}}, {{v[0-9]+}}, off{{$}}
# G90A-ST-NEXT: s_waitcnt vmcnt(0)
# G90A-ST-NEXT: v_mov_b32 {{v[0-9]+}}, 0
# G90A-ST-NEXT: ;;#ASMEND
# ---- G90A: volatile ld ----
# G90A-LDV: ;;#ASMSTART
# G90A-LDV-NEXT: global_load_dword {{v[0-9]+}}, {{v\[[0-9]+:[0-9]+\]}}, off glc{{$}}
# G90A-LDV-NEXT: s_waitcnt vmcnt(0)
# G90A-LDV-NEXT: ;;#ASMEND
# ---- G90A: atomic_add, in add_all's order ----
# G90A-ADD: ;;#ASMSTART
# G90A-ADD-NEXT: global_atomic_add {{v[0-9]+}}, {{v\[[0-9]+:[0-9]+\]}}, {{v[0-9]+}}, off glc{{$}}
# G90A-ADD-NEXT: s_waitcnt vmcnt(0)
# G90A-ADD-NEXT: ;;#ASMEND
# G90A-ADD: ;;#ASMSTART
# G90A-ADD-NEXT: global_atomic_add {{v[0-9]+}}, {{v\[[0-9]+:[0-9]+\]}}, {{v[0-9]+}}, off glc{{$}}
# G90A-ADD-NEXT: s_waitcnt vmcnt(0)
# G90A-ADD-NEXT: ;;#ASMEND
# G90A-ADD: ;;#ASMSTART
# G90A-ADD-NEXT: global_atomic_add {{v[0-9]+}}, {{v\[[0-9]+:[0-9]+\]}}, {{v[0-9]+}}, off glc{{$}}
# G90A-ADD-NEXT: s_waitcnt vmcnt(0)
# G90A-ADD-NEXT: ;;#ASMEND
# G90A-ADD: ;;#ASMSTART
# G90A-ADD-NEXT: global_atomic_add {{v[0-9]+}}, {{v\[[0-9]+:[0-9]+\]}}, {{v[0-9]+}}, off glc{{$}}
# G90A-ADD-NEXT: s_waitcnt vmcnt(0)
# G90A-ADD-NEXT: ;;#ASMEND
# G90A-ADD: ;;#ASMSTART
# G90A-ADD-NEXT: global_atomic_add {{v[0-9]+}}, {{v\[[0-9]+:[0-9]+\]}}, {{v[0-9]+}}, off glc{{$}}
# G90A-ADD-NEXT: s_waitcnt vmcnt(0)
# G90A-ADD-NEXT: buffer_wbinvl1_vol
# G90A-ADD-NEXT: ;;#ASMEND
# G90A-ADD: ;;#ASMSTART
# G90A-ADD-NEXT: global_atomic_add {{v[0-9]+}}, {{v\[[0-9]+:[0-9]+\]}}, {{v[0-9]+}}, off glc{{$}}
# G90A-ADD-NEXT: s_waitcnt vmcnt(0)
# G90A-ADD-NEXT: buffer_invl2
# G90A-ADD-NEXT: buffer_wbinvl1_vol
# G90A-ADD-NEXT: ;;#ASMEND
# G90A-ADD: ;;#ASMSTART
# G90A-ADD-NEXT: s_waitcnt vmcnt(0) lgkmcnt(0)
# G90A-ADD-NEXT: global_atomic_add {{v[0-9]+}}, {{v\[[0-9]+:[0-9]+\]}}, {{v[0-9]+}}, off glc{{$}}
# G90A-ADD-NEXT: s_waitcnt vmcnt(0)
# G90A-ADD-NEXT: ;;#ASMEND
# G90A-ADD: ;;#ASMSTART
# G90A-ADD-NEXT: s_waitcnt vmcnt(0) lgkmcnt(0)
# G90A-ADD-NEXT: global_atomic_add {{v[0-9]+}}, {{v\[[0-9]+:[0-9]+\]}}, {{v[0-9]+}}, off glc{{$}}
# G90A-ADD-NEXT: s_waitcnt vmcnt(0)
# G90A-ADD-NEXT: ;;#ASMEND
# G90A-ADD: ;;#ASMSTART
# G90A-ADD-NEXT: buffer_wbl2
# G90A-ADD-NEXT: s_waitcnt vmcnt(0) lgkmcnt(0)
# G90A-ADD-NEXT: global_atomic_add {{v[0-9]+}}, {{v\[[0-9]+:[0-9]+\]}}, {{v[0-9]+}}, off glc{{$}}
# G90A-ADD-NEXT: s_waitcnt vmcnt(0)
# G90A-ADD-NEXT: ;;#ASMEND
# G90A-ADD: ;;#ASMSTART
# G90A-ADD-NEXT: s_waitcnt vmcnt(0) lgkmcnt(0)
# G90A-ADD-NEXT: global_atomic_add {{v[0-9]+}}, {{v\[[0-9]+:[0-9]+\]}}, {{v[0-9]+}}, off glc{{$}}
# G90A-ADD-NEXT: s_waitcnt vmcnt(0)
# G90A-ADD-NEXT: ;;#ASMEND
# G90A-ADD: ;;#ASMSTART
# G90A-ADD-NEXT: s_waitcnt vmcnt(0) lgkmcnt(0)
# G90A-ADD-NEXT: global_atomic_add {{v[0-9]+}}, {{v\[[0-9]+:[0-9]+\]}}, {{v[0-9]+}}, off glc{{$}}
# G90A-ADD-NEXT: s_waitcnt vmcnt(0)
# G90A-ADD-NEXT: buffer_wbinvl1_vol
# G90A-ADD-NEXT: ;;#ASMEND
# G90A-ADD: ;;#ASMSTART
# G90A-ADD-NEXT: buffer_wbl2
# G90A-ADD-NEXT: s_waitcnt vmcnt(0) lgkmcnt(0)
# G90A-ADD-NEXT: global_atomic_add {{v[0-9]+}}, {{v\[[0-9]+:[0-9]+\]}}, {{v[0-9]+}}, off glc{{$}}
# G90A-ADD-NEXT: s_waitcnt vmcnt(0)
# G90A-ADD-NEXT: buffer_invl2
# G90A-ADD-NEXT: buffer_wbinvl1_vol
# G90A-ADD-NEXT: ;;#ASMEND
# ---- G90A: atomic_cas, in cas_some's order ----
# G90A-CAS: ;;#ASMSTART
# G90A-CAS-NEXT: global_atomic_cmpswap {{v[0-9]+}}, {{v\[[0-9]+:[0-9]+\]}}, {{v\[[0-9]+:[0-9]+\]}}, off glc{{$}}
# G90A-CAS-NEXT: s_waitcnt vmcnt(0)
# G90A-CAS-NEXT: ;;#ASMEND
# G90A-CAS: ;;#ASMSTART
# G90A-CAS-NEXT: global_atomic_cmpswap {{v[0-9]+}}, {{v\[[0-9]+:[0-9]+\]}}, {{v\[[0-9]+:[0-9]+\]}}, off glc{{$}}
# G90A-CAS-NEXT: s_waitcnt vmcnt(0)
# G90A-CAS-NEXT: buffer_wbinvl1_vol
# G90A-CAS-NEXT: ;;#ASMEND
# G90A-CAS: ;;#ASMSTART
# G90A-CAS-NEXT: buffer_wbl2
# G90A-CAS-NEXT: s_waitcnt vmcnt(0) lgkmcnt(0)
# G90A-CAS-NEXT: global_atomic_cmpswap {{v[0-9]+}}, {{v\[[0-9]+:[0-9]+\]}}, {{v\[[0-9]+:[0-9]+\]}}, off glc{{$}}
# G90A-CAS-NEXT: s_waitcnt vmcnt(0)
# G90A-CAS-NEXT: ;;#ASMEND
# G90A-CAS: ;;#ASMSTART
# G90A-CAS-NEXT: buffer_wbl2
# G90A-CAS-NEXT: s_waitcnt vmcnt(0) lgkmcnt(0)
# G90A-CAS-NEXT: global_atomic_cmpswap {{v[0-9]+}}, {{v\[[0-9]+:[0-9]+\]}}, {{v\[[0-9]+:[0-9]+\]}}, off glc{{$}}
# G90A-CAS-NEXT: s_waitcnt vmcnt(0)
# G90A-CAS-NEXT: buffer_invl2
# G90A-CAS-NEXT: buffer_wbinvl1_vol
# G90A-CAS-NEXT: ;;#ASMEND
import triton

from triton_dist.language.extra.language_extra import atomic_add, atomic_cas, ld, st


@triton.jit
def st_all(p, v):
    st(p + 0, v, "cta", "relaxed")
    st(p + 1, v, "gpu", "relaxed")
    st(p + 2, v, "sys", "relaxed")
    st(p + 3, v, "cta", "release")
    st(p + 4, v, "gpu", "release")
    st(p + 5, v, "sys", "release")
    st(p + 6, v, "gpu", "volatile")


@triton.jit
def ld_volatile(p, q):
    st(q, ld(p, "gpu", "volatile"), "cta", "relaxed")


@triton.jit
def add_all(p, q, v):
    a = atomic_add(p + 0, v, "cta", "relaxed")
    a += atomic_add(p + 1, v, "gpu", "relaxed")
    a += atomic_add(p + 2, v, "sys", "relaxed")
    a += atomic_add(p + 3, v, "cta", "acquire")
    a += atomic_add(p + 4, v, "gpu", "acquire")
    a += atomic_add(p + 5, v, "sys", "acquire")
    a += atomic_add(p + 6, v, "cta", "release")
    a += atomic_add(p + 7, v, "gpu", "release")
    a += atomic_add(p + 8, v, "sys", "release")
    a += atomic_add(p + 9, v, "cta", "acq_rel")
    a += atomic_add(p + 10, v, "gpu", "acq_rel")
    a += atomic_add(p + 11, v, "sys", "acq_rel")
    st(q, a, "cta", "relaxed")


@triton.jit
def cas_some(p, q, v):
    a = atomic_cas(p + 0, 0, v, "cta", "relaxed")
    a += atomic_cas(p + 1, 0, v, "gpu", "acquire")
    a += atomic_cas(p + 2, 0, v, "sys", "release")
    a += atomic_cas(p + 3, 0, v, "sys", "acq_rel")
    st(q, a, "cta", "relaxed")
