# AMD memory model, loads: dl.wait's poll load (backends/amd/language.py) and language_extra.ld
# (backends/amd/extra.py) lower the same (scope, semantic) pair, so they must emit the same AMDGCN sequence: the
# one of LLVM AMDGPUUsage "Memory Model GFX942" / "Memory Model GFX90A", tables "AMDHSA Memory Model Code
# Sequences GFX942" / "... GFX90A", rows "load atomic monotonic" and "load atomic acquire", address space global,
# scopes workgroup / agent / system (non-TgSplit execution mode: Triton never enables tgsplit):
#
#              relaxed (monotonic)        acquire
#   gfx942 cta global_load sc0            global_load sc0
#          gpu global_load sc1            global_load sc1; s_waitcnt vmcnt(0); buffer_inv sc1
#          sys global_load sc0 sc1        global_load sc0 sc1; s_waitcnt vmcnt(0); buffer_inv sc0 sc1
#   gfx90a cta global_load                global_load
#          gpu global_load glc            global_load glc; s_waitcnt vmcnt(0); buffer_wbinvl1_vol
#          sys global_load glc            global_load glc; s_waitcnt vmcnt(0); buffer_invl2; buffer_wbinvl1_vol
#
# plus, on every row, an s_waitcnt vmcnt(0) right after the load: the loaded VGPR is an inline-asm output, and
# LLVM's wait-count insertion does not look inside inline asm, so nothing else waits for the load before the
# value is used. gfx950 follows the GFX942 rows.
#
# A shared prefix (G942-ACQ-SYS, ...) is checked against BOTH paths: the sequences come from one table
# (python/triton_dist/backends/amd/memory_model.py).
# W* prefixes check the dl.wait tail: the workgroup barrier, then every thread's acquire-side invalidate.
#
# RUN: %compile %s:wait_k -s "*i32:16, 'cta', 'relaxed'" --target hip:gfx942 --stage amdgcn | filecheck %s --check-prefixes=G942-RLX-CTA,W-NONE
# RUN: %compile %s:ld_k -s "*i32, *i32, 'cta', 'relaxed'" --target hip:gfx942 --stage amdgcn | filecheck %s --check-prefixes=G942-RLX-CTA
# RUN: %compile %s:wait_k -s "*i32:16, 'gpu', 'relaxed'" --target hip:gfx942 --stage amdgcn | filecheck %s --check-prefixes=G942-RLX-GPU,W-NONE
# RUN: %compile %s:ld_k -s "*i32, *i32, 'gpu', 'relaxed'" --target hip:gfx942 --stage amdgcn | filecheck %s --check-prefixes=G942-RLX-GPU
# RUN: %compile %s:wait_k -s "*i32:16, 'sys', 'relaxed'" --target hip:gfx942 --stage amdgcn | filecheck %s --check-prefixes=G942-RLX-SYS,W-NONE
# RUN: %compile %s:ld_k -s "*i32, *i32, 'sys', 'relaxed'" --target hip:gfx942 --stage amdgcn | filecheck %s --check-prefixes=G942-RLX-SYS
# RUN: %compile %s:wait_k -s "*i32:16, 'cta', 'acquire'" --target hip:gfx942 --stage amdgcn | filecheck %s --check-prefixes=G942-ACQ-CTA,W-NONE
# RUN: %compile %s:ld_k -s "*i32, *i32, 'cta', 'acquire'" --target hip:gfx942 --stage amdgcn | filecheck %s --check-prefixes=G942-ACQ-CTA
# RUN: %compile %s:wait_k -s "*i32:16, 'gpu', 'acquire'" --target hip:gfx942 --stage amdgcn | filecheck %s --check-prefixes=G942-ACQ-GPU,W942-GPU
# RUN: %compile %s:ld_k -s "*i32, *i32, 'gpu', 'acquire'" --target hip:gfx942 --stage amdgcn | filecheck %s --check-prefixes=G942-ACQ-GPU
# RUN: %compile %s:wait_k -s "*i32:16, 'sys', 'acquire'" --target hip:gfx942 --stage amdgcn | filecheck %s --check-prefixes=G942-ACQ-SYS,W942-SYS
# RUN: %compile %s:ld_k -s "*i32, *i32, 'sys', 'acquire'" --target hip:gfx942 --stage amdgcn | filecheck %s --check-prefixes=G942-ACQ-SYS
# RUN: %compile %s:wait_k -s "*i32:16, 'sys', 'acquire'" --target hip:gfx950 --stage amdgcn | filecheck %s --check-prefixes=G942-ACQ-SYS,W942-SYS
# RUN: %compile %s:ld_k -s "*i32, *i32, 'sys', 'acquire'" --target hip:gfx950 --stage amdgcn | filecheck %s --check-prefixes=G942-ACQ-SYS
# RUN: %compile %s:ld_k -s "*i32, *i32, 'cta', 'relaxed'" --target hip:gfx950 --stage amdgcn | filecheck %s --check-prefixes=G942-RLX-CTA
#
# RUN: %compile %s:wait_k -s "*i32:16, 'cta', 'relaxed'" --target hip:gfx90a --stage amdgcn | filecheck %s --check-prefixes=G90A-RLX-CTA,W-NONE
# RUN: %compile %s:ld_k -s "*i32, *i32, 'cta', 'relaxed'" --target hip:gfx90a --stage amdgcn | filecheck %s --check-prefixes=G90A-RLX-CTA
# RUN: %compile %s:wait_k -s "*i32:16, 'gpu', 'relaxed'" --target hip:gfx90a --stage amdgcn | filecheck %s --check-prefixes=G90A-RLX-GPU,W-NONE
# RUN: %compile %s:ld_k -s "*i32, *i32, 'gpu', 'relaxed'" --target hip:gfx90a --stage amdgcn | filecheck %s --check-prefixes=G90A-RLX-GPU
# RUN: %compile %s:wait_k -s "*i32:16, 'sys', 'relaxed'" --target hip:gfx90a --stage amdgcn | filecheck %s --check-prefixes=G90A-RLX-SYS,W-NONE
# RUN: %compile %s:ld_k -s "*i32, *i32, 'sys', 'relaxed'" --target hip:gfx90a --stage amdgcn | filecheck %s --check-prefixes=G90A-RLX-SYS
# RUN: %compile %s:wait_k -s "*i32:16, 'cta', 'acquire'" --target hip:gfx90a --stage amdgcn | filecheck %s --check-prefixes=G90A-ACQ-CTA,W-NONE
# RUN: %compile %s:ld_k -s "*i32, *i32, 'cta', 'acquire'" --target hip:gfx90a --stage amdgcn | filecheck %s --check-prefixes=G90A-ACQ-CTA
# RUN: %compile %s:wait_k -s "*i32:16, 'gpu', 'acquire'" --target hip:gfx90a --stage amdgcn | filecheck %s --check-prefixes=G90A-ACQ-GPU,W90A-GPU
# RUN: %compile %s:ld_k -s "*i32, *i32, 'gpu', 'acquire'" --target hip:gfx90a --stage amdgcn | filecheck %s --check-prefixes=G90A-ACQ-GPU
# RUN: %compile %s:wait_k -s "*i32:16, 'sys', 'acquire'" --target hip:gfx90a --stage amdgcn | filecheck %s --check-prefixes=G90A-ACQ-SYS,W90A-SYS
# RUN: %compile %s:ld_k -s "*i32, *i32, 'sys', 'acquire'" --target hip:gfx90a --stage amdgcn | filecheck %s --check-prefixes=G90A-ACQ-SYS
#
# ---- gfx942 / gfx950 ----
# G942-RLX-CTA: global_load_dword {{v[0-9]+}}, {{v\[[0-9]+:[0-9]+\]}}, off sc0{{$}}
# G942-RLX-CTA-NEXT: s_waitcnt vmcnt(0)
# G942-RLX-CTA-NEXT: ;;#ASMEND
# G942-RLX-GPU: global_load_dword {{v[0-9]+}}, {{v\[[0-9]+:[0-9]+\]}}, off sc1{{$}}
# G942-RLX-GPU-NEXT: s_waitcnt vmcnt(0)
# G942-RLX-GPU-NEXT: ;;#ASMEND
# G942-RLX-SYS: global_load_dword {{v[0-9]+}}, {{v\[[0-9]+:[0-9]+\]}}, off sc0 sc1{{$}}
# G942-RLX-SYS-NEXT: s_waitcnt vmcnt(0)
# G942-RLX-SYS-NEXT: ;;#ASMEND
# G942-ACQ-CTA: global_load_dword {{v[0-9]+}}, {{v\[[0-9]+:[0-9]+\]}}, off sc0{{$}}
# G942-ACQ-CTA-NEXT: s_waitcnt vmcnt(0)
# G942-ACQ-CTA-NEXT: ;;#ASMEND
# G942-ACQ-GPU: global_load_dword {{v[0-9]+}}, {{v\[[0-9]+:[0-9]+\]}}, off sc1{{$}}
# G942-ACQ-GPU-NEXT: s_waitcnt vmcnt(0)
# G942-ACQ-GPU-NEXT: buffer_inv sc1{{$}}
# G942-ACQ-GPU-NEXT: ;;#ASMEND
# G942-ACQ-SYS: global_load_dword {{v[0-9]+}}, {{v\[[0-9]+:[0-9]+\]}}, off sc0 sc1{{$}}
# G942-ACQ-SYS-NEXT: s_waitcnt vmcnt(0)
# G942-ACQ-SYS-NEXT: buffer_inv sc0 sc1{{$}}
# G942-ACQ-SYS-NEXT: ;;#ASMEND
#
# ---- gfx90a ----
# G90A-RLX-CTA: global_load_dword {{v[0-9]+}}, {{v\[[0-9]+:[0-9]+\]}}, off{{$}}
# G90A-RLX-CTA-NEXT: s_waitcnt vmcnt(0)
# G90A-RLX-CTA-NEXT: ;;#ASMEND
# G90A-RLX-GPU: global_load_dword {{v[0-9]+}}, {{v\[[0-9]+:[0-9]+\]}}, off glc{{$}}
# G90A-RLX-GPU-NEXT: s_waitcnt vmcnt(0)
# G90A-RLX-GPU-NEXT: ;;#ASMEND
# G90A-RLX-SYS: global_load_dword {{v[0-9]+}}, {{v\[[0-9]+:[0-9]+\]}}, off glc{{$}}
# G90A-RLX-SYS-NEXT: s_waitcnt vmcnt(0)
# G90A-RLX-SYS-NEXT: ;;#ASMEND
# G90A-ACQ-CTA: global_load_dword {{v[0-9]+}}, {{v\[[0-9]+:[0-9]+\]}}, off{{$}}
# G90A-ACQ-CTA-NEXT: s_waitcnt vmcnt(0)
# G90A-ACQ-CTA-NEXT: ;;#ASMEND
# G90A-ACQ-GPU: global_load_dword {{v[0-9]+}}, {{v\[[0-9]+:[0-9]+\]}}, off glc{{$}}
# G90A-ACQ-GPU-NEXT: s_waitcnt vmcnt(0)
# G90A-ACQ-GPU-NEXT: buffer_wbinvl1_vol
# G90A-ACQ-GPU-NEXT: ;;#ASMEND
# G90A-ACQ-SYS: global_load_dword {{v[0-9]+}}, {{v\[[0-9]+:[0-9]+\]}}, off glc{{$}}
# G90A-ACQ-SYS-NEXT: s_waitcnt vmcnt(0)
# G90A-ACQ-SYS-NEXT: buffer_invl2
# G90A-ACQ-SYS-NEXT: buffer_wbinvl1_vol
# G90A-ACQ-SYS-NEXT: ;;#ASMEND
#
# ---- dl.wait tail: barrier, then each thread's acquire-side invalidate (none for relaxed or cta) ----
# W-NONE: s_barrier
# W-NONE: ;;#ASMSTART
# W-NONE-NEXT: s_mov_b32 {{s[0-9]+}}, 0
# W942-GPU: s_barrier
# W942-GPU: ;;#ASMSTART
# W942-GPU-NEXT: buffer_inv sc1{{$}}
# W942-GPU-NEXT: s_mov_b32 {{s[0-9]+}}, 0
# W942-SYS: s_barrier
# W942-SYS: ;;#ASMSTART
# W942-SYS-NEXT: buffer_inv sc0 sc1{{$}}
# W942-SYS-NEXT: s_mov_b32 {{s[0-9]+}}, 0
# W90A-GPU: s_barrier
# W90A-GPU: ;;#ASMSTART
# W90A-GPU-NEXT: buffer_wbinvl1_vol
# W90A-GPU-NEXT: s_mov_b32 {{s[0-9]+}}, 0
# W90A-SYS: s_barrier
# W90A-SYS: ;;#ASMSTART
# W90A-SYS-NEXT: buffer_invl2
# W90A-SYS-NEXT: buffer_wbinvl1_vol
# W90A-SYS-NEXT: s_mov_b32 {{s[0-9]+}}, 0
import triton
import triton.language as tl

import triton_dist.language as dl
from triton_dist.language.extra.language_extra import ld, st


@triton.jit
def wait_k(sig, SCOPE: tl.constexpr, SEM: tl.constexpr):
    dl.wait(sig, 1, SCOPE, SEM)


@triton.jit
def ld_k(src, dst, SCOPE: tl.constexpr, SEM: tl.constexpr):
    st(dst, ld(src, SCOPE, SEM))
