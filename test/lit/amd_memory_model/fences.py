# AMD memory model, fences and the supported targets.
#
# dl.notify(..., "inter_node"): every thread completes its own accesses (the model's workgroup release wait), a
# workgroup barrier, then a release fence at system scope before rocSHMEM raises the signal: AMDGPUUsage "fence
# release, system" rows of "AMDHSA Memory Model Code Sequences GFX942" (buffer_wbl2 sc0 sc1; s_waitcnt vmcnt(0)
# lgkmcnt(0)) and "... GFX90A" (buffer_wbl2; s_waitcnt vmcnt(0) lgkmcnt(0)). Checked in the AMDGCN (the
# workgroup-scope fences around the barrier emit no instruction in non-TgSplit mode); rocSHMEM's bitcode is not
# linked, so thread 0 calls rocshmem_signal_set through the GOT and the hsaco keeps it as an undefined symbol.
#
# RUN: env TRITON_DIST_NO_SHMEM_BITCODE=1 %compile %s:notify_inter -s "*i64:16, i32" --target hip:gfx942 --stage amdgcn | filecheck %s --check-prefixes=INTER,INTER942
# RUN: env TRITON_DIST_NO_SHMEM_BITCODE=1 %compile %s:notify_inter -s "*i64:16, i32" --target hip:gfx950 --stage amdgcn | filecheck %s --check-prefixes=INTER,INTER942
# RUN: env TRITON_DIST_NO_SHMEM_BITCODE=1 %compile %s:notify_inter -s "*i64:16, i32" --target hip:gfx90a --stage amdgcn | filecheck %s --check-prefixes=INTER,INTER90A
#
# INTER: s_waitcnt vmcnt(0) lgkmcnt(0)
# INTER-NEXT: s_mov_b32 s{{[0-9]+}}, 0
# INTER: s_barrier
# INTER-NOT: rocshmem_signal_set
# INTER942: buffer_wbl2 sc0 sc1
# INTER90A: buffer_wbl2{{$}}
# INTER-NEXT: s_waitcnt vmcnt(0) lgkmcnt(0)
# INTER-NEXT: v_mov_b32 v{{[0-9]+}}, 0
# INTER: v_cmp_eq_u32_e32 vcc, 0, v{{[0-9]+}}
# INTER: s_and_saveexec_b64
# INTER: rocshmem_signal_set@gotpcrel32@lo+4
# INTER: s_swappc_b64
#
# Targets without a table (gfx908 follows "Memory Model GFX6-GFX9", gfx1100 "Memory Model GFX10-GFX11") are
# compile errors naming the op and the arch, worded the same by both lowerings (one family() function):
#
# RUN: not %compile %s:wait_k -s "*i32:16" --target hip:gfx908 --stage ttir 2>&1 | filecheck %s --check-prefix=WAIT908
# RUN: not %compile %s:ld_k -s "*i32" --target hip:gfx908 --stage ttir 2>&1 | filecheck %s --check-prefix=LD908
# RUN: not %compile %s:notify_inter -s "*i64:16, i32" --target hip:gfx1100 --stage ttir 2>&1 | filecheck %s --check-prefix=NOTIFY1100
# RUN: not %compile %s:notify_gpu -s "*i64:16, i32" --target hip:gfx1100 --stage ttir 2>&1 | filecheck %s --check-prefix=NOTIFY1100
#
# WAIT908: dl.wait: memory operations are not implemented for gfx908; supported AMD archs: gfx90a, gfx942, gfx950
# LD908: language_extra: memory operations are not implemented for gfx908; supported AMD archs: gfx90a, gfx942, gfx950
# NOTIFY1100: dl.notify: memory operations are not implemented for gfx1100; supported AMD archs: gfx90a, gfx942, gfx950
import triton

import triton_dist.language as dl
from triton_dist.language.extra.language_extra import ld, st


@triton.jit
def notify_inter(sig, peer):
    dl.notify(sig, peer, 1, "set", "inter_node")


@triton.jit
def notify_gpu(sig, peer):
    dl.notify(sig, peer, 1, "set", "gpu")


@triton.jit
def wait_k(sig):
    dl.wait(sig, 1, "sys", "acquire")


@triton.jit
def ld_k(p):
    st(p, ld(p, "sys", "acquire"))
