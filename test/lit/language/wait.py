# dl.wait: plain acquire/relaxed loads in a spin loop (never an atomic RMW), signals spread over the threads,
# then a CTA / workgroup barrier. Any number of barriers (runtime count), 32- or 64-bit signals.
#
# RUN: %compile %s:wait_kernel -s "*i32:16, i32, 'sys', 'acquire'" --target cuda:90 --stage ptx | filecheck %s --check-prefix=SYS32
# RUN: %compile %s:wait_kernel -s "*i64:16, i32, 'gpu', 'relaxed'" --target cuda:90 --stage ptx | filecheck %s --check-prefix=GPU64
# RUN: %compile %s:wait_kernel -s "*i32:16, i32, 'cta', 'acquire'" --target cuda:90 --stage ptx | filecheck %s --check-prefix=CTA32
# RUN: %compile %s:wait_kernel -s "*i64:16, i32, 'sys', 'acquire'" --target cuda:90 --stage cubin -o %t.cubin
# RUN: %compile %s:wait_kernel -s "*i32:16, i32, 'sys', 'acquire'" --target hip:gfx942 --stage amdgcn | filecheck %s --check-prefix=AMDSYS
# RUN: %compile %s:wait_kernel -s "*i64:16, i32, 'gpu', 'acquire'" --target hip:gfx942 --stage amdgcn | filecheck %s --check-prefix=AMDGPU64
# RUN: %compile %s:wait_kernel -s "*i32:16, i32, 'sys', 'relaxed'" --target hip:gfx942 --stage amdgcn | filecheck %s --check-prefix=AMDRELAXED
# RUN: %compile %s:wait_kernel -s "*i32:16, i32, 'sys', 'acquire'" --target hip:gfx942 --stage hsaco -o %t.hsaco
#
# Thread t polls barriers t, t+ntid, ...; the spin is a load, compared, branched back; then bar.sync 0.
# SYS32: mov.u32 %tdw_i, %tid.x;
# SYS32: mov.u32 %tdw_n, %ntid.x;
# SYS32: TDW_SPIN:
# SYS32-NEXT: ld.acquire.sys.b32 %tdw_v, [%tdw_a];
# SYS32-NEXT: setp.ne.b32
# SYS32-NEXT: @%tdw_p1 bra TDW_SPIN;
# SYS32: add.u32 %tdw_i, %tdw_i, %tdw_n;
# SYS32: bar.sync 0;
# SYS32-NOT: atom.
# SYS32-NOT: globaltimer
#
# GPU64: mul.wide.u32 %tdw_o, %tdw_i, 8;
# GPU64: ld.relaxed.gpu.b64 %tdw_v, [%tdw_a];
# GPU64-NEXT: setp.ne.b64
# GPU64: bar.sync 0;
# GPU64-NOT: globaltimer
#
# CTA32: ld.acquire.cta.b32
#
# AMD (gfx942): thread ids from ockl, acquire load at system scope = sc0 sc1 + wait + invalidate, then s_barrier.
# AMDSYS: global_load_dword v{{[0-9]+}}, v[{{[0-9]+:[0-9]+}}], off sc0 sc1
# AMDSYS-NEXT: s_waitcnt vmcnt(0)
# AMDSYS-NEXT: buffer_inv sc0 sc1
# AMDSYS: s_barrier
# AMDSYS: buffer_inv sc0 sc1
# AMDSYS-NOT: global_atomic
# AMDSYS-NOT: s_memrealtime
#
# AMDGPU64: global_load_dwordx2 v[{{[0-9]+:[0-9]+}}], v[{{[0-9]+:[0-9]+}}], off sc1
# AMDGPU64-NEXT: s_waitcnt vmcnt(0)
# AMDGPU64-NEXT: buffer_inv sc1
# AMDGPU64: s_barrier
# AMDGPU64: buffer_inv sc1
#
# AMDRELAXED: global_load_dword v{{[0-9]+}}, v[{{[0-9]+:[0-9]+}}], off sc0 sc1
# AMDRELAXED-NOT: buffer_inv
# AMDRELAXED: s_barrier
import triton
import triton.language as tl

import triton_dist.language as dl


@triton.jit
def wait_kernel(sig, n, SCOPE: tl.constexpr, SEM: tl.constexpr):
    dl.wait(sig, n, SCOPE, SEM)
