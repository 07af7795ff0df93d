# libshmem_device: every function lowers to its NVSHMEM / rocSHMEM device call.
#
# For NVIDIA, the calls in LLIR (bitcode not linked, so they stay visible), then the same kernel linked against
# libnvshmem_device.bc (the compile tool runs every stage, so `--stage ptx` also assembles the cubin with ptxas,
# which fails on an unresolved extern function). ptxas runs at --opt-level 0: it still resolves every call, and takes
# 38 s instead of 102 s (2-core machine) on the linked library; the PTX checked is made before ptxas, the same.
# RUN: env TRITON_DIST_NO_SHMEM_BITCODE=1 %compile %s:all_calls -s "*fp32:16, *fp32:16, *u64:16, i32, i64" --target cuda:90 --stage llir --stop-after llir | filecheck %s --check-prefix=NV
# RUN: %compile %s:all_calls -s "*fp32:16, *fp32:16, *u64:16, i32, i64" --target cuda:90 --stage ptx -O "ptx_options=--opt-level 0" | filecheck %s --check-prefix=LINKED
# On AMD the rocSHMEM calls with their arguments in LLIR (no rocSHMEM bitcode here; test_libshmem_device.py links a
# stub library), then the same kernel assembled: its AMDGCN calls exactly those functions (through the GOT: the
# hsaco keeps them as undefined symbols). No call to a name rocSHMEM lacks: no multicast (remote_mc_ptr is null), no
# signal op taking sig_op, and rocSHMEM's device rocshmem_barrier() takes no team.
# RUN: env TRITON_DIST_NO_SHMEM_BITCODE=1 %compile %s:all_calls -s "*fp32:16, *fp32:16, *u64:16, i32, i64" --target hip:gfx942 --stage llir > %t.amd.ll
# RUN: env TRITON_DIST_NO_SHMEM_BITCODE=1 %compile %s:all_calls -s "*fp32:16, *fp32:16, *u64:16, i32, i64" --target hip:gfx942 --stage amdgcn > %t.amd.s
# RUN: %python %S/../Inputs/same_calls.py rocshmem_ %t.amd.ll %t.amd.s
# RUN: filecheck %s --check-prefix=AMD --input-file %t.amd.ll
# RUN: not grep -E "mc_ptr|rocshmemx_|signal_op|@rocshmem_barrier\(i32" %t.amd.ll
#
# NV-DAG: call i32 @nvshmem_my_pe()
# NV-DAG: call i32 @nvshmem_n_pes()
# NV-DAG: call i32 @nvshmem_team_my_pe(i32 2)
# NV-DAG: call i32 @nvshmem_team_n_pes(i32 0)
# NV-DAG: call i64 @nvshmem_ptr(i64 {{.*}}, i32 {{.*}})
# NV-DAG: call i64 @nvshmemx_mc_ptr(i32 0, i64 {{.*}})
# NV-DAG: call i32 @nvshmem_barrier_all()
# NV-DAG: call i32 @nvshmemx_barrier_all_block()
# NV-DAG: call i32 @nvshmemx_barrier_all_warp()
# NV-DAG: call i32 @nvshmem_barrier(i32 2)
# NV-DAG: call i32 @nvshmem_sync_all()
# NV-DAG: call i32 @nvshmem_quiet()
# NV-DAG: call i32 @nvshmem_fence()
# NV-DAG: call i32 @nvshmemx_getmem_nbi_block(i64 {{.*}}, i64 {{.*}}, i64 {{.*}}, i32 {{.*}})
# NV-DAG: call i32 @nvshmemx_getmem_block(
# NV-DAG: call i32 @nvshmemx_getmem_nbi_warp(
# NV-DAG: call i32 @nvshmemx_getmem_warp(
# NV-DAG: call i32 @nvshmem_getmem_nbi(
# NV-DAG: call i32 @nvshmem_getmem(
# NV-DAG: call i32 @nvshmemx_putmem_block(i64 {{.*}}, i64 {{.*}}, i64 4096, i32 {{.*}})
# NV-DAG: call i32 @nvshmemx_putmem_nbi_block(
# NV-DAG: call i32 @nvshmemx_putmem_warp(
# NV-DAG: call i32 @nvshmemx_putmem_nbi_warp(
# NV-DAG: call i32 @nvshmem_putmem(
# NV-DAG: call i32 @nvshmem_putmem_nbi(
# The signal ops carry NVSHMEM's real constants: SET = 9, ADD = 10; CMP_GE = 5.
# NV-DAG: call i32 @nvshmemx_putmem_signal_nbi_block(i64 {{.*}}, i64 {{.*}}, i64 {{.*}}, i64 {{.*}}, i64 1, i32 9, i32 {{.*}})
# NV-DAG: call i32 @nvshmemx_putmem_signal_block(i64 {{.*}}, i64 {{.*}}, i64 {{.*}}, i64 {{.*}}, i64 2, i32 10, i32 {{.*}})
# NV-DAG: call i32 @nvshmemx_signal_op(i64 {{.*}}, i64 3, i32 10, i32 {{.*}})
# NV-DAG: call i64 @nvshmem_signal_wait_until(i64 {{.*}}, i32 5, i64 3)
# NV-DAG: call i32 @nvshmemx_broadcastmem_block(i32 0, i64 {{.*}}, i64 {{.*}}, i64 256, i32 0)
# NV-DAG: call i32 @nvshmemx_fcollectmem_block(i32 2, i64 {{.*}}, i64 {{.*}}, i64 {{.*}})
#
# Once linked, the kernel references NVSHMEM's device state (what triton_dist.jit's module init keys on) and no
# extern function is left unresolved.
# LINKED-NOT: .extern .func {{.*}}nvshmem
# LINKED: nvshmemi_device_state_d
#
# AMD-DAG: call i32 @rocshmem_my_pe()
# AMD-DAG: call i32 @rocshmem_n_pes()
# AMD-DAG: call i32 @rocshmem_team_my_pe(i32 1)
# AMD-DAG: call i32 @rocshmem_team_n_pes(i32 0)
# AMD-DAG: call i64 @rocshmem_ptr(
# AMD-DAG: call i32 @rocshmem_barrier_all()
# AMD-DAG: call i32 @rocshmem_barrier_all_wg()
# AMD-DAG: call i32 @rocshmem_barrier_all_wave()
# barrier(NODE): rocSHMEM's rocshmem_barrier() is TEAM_WORLD only; other teams call the wrapper's team barrier.
# AMD-DAG: call i32 @rocshmem_team_barrier(i32 1)
# AMD-DAG: call i32 @rocshmem_sync_all()
# AMD-DAG: call i32 @rocshmem_quiet()
# AMD-DAG: call i32 @rocshmem_fence()
# AMD-DAG: call i32 @rocshmem_getmem_nbi_wg(
# AMD-DAG: call i32 @rocshmem_getmem_wg(
# AMD-DAG: call i32 @rocshmem_getmem_nbi_wave(
# AMD-DAG: call i32 @rocshmem_getmem_wave(
# AMD-DAG: call i32 @rocshmem_getmem_nbi(
# AMD-DAG: call i32 @rocshmem_getmem(
# AMD-DAG: call i32 @rocshmem_putmem_wg(
# AMD-DAG: call i32 @rocshmem_putmem_nbi_wg(
# AMD-DAG: call i32 @rocshmem_putmem_wave(
# AMD-DAG: call i32 @rocshmem_putmem_nbi_wave(
# AMD-DAG: call i32 @rocshmem_putmem(
# AMD-DAG: call i32 @rocshmem_putmem_nbi(
# rocSHMEM's own enums: SIGNAL_SET = 0, SIGNAL_ADD = 1, CMP_GE = 3; signal_op(ADD) is rocshmem_signal_add.
# AMD-DAG: call i32 @rocshmem_putmem_signal_nbi_wg(i64 {{.*}}, i64 {{.*}}, i64 {{.*}}, i64 {{.*}}, i64 1, i32 0, i32 {{.*}})
# AMD-DAG: call i32 @rocshmem_putmem_signal_wg(i64 {{.*}}, i64 {{.*}}, i64 {{.*}}, i64 {{.*}}, i64 2, i32 1, i32 {{.*}})
# AMD-DAG: call i32 @rocshmem_signal_add(i64 {{.*}}, i64 3, i32 {{.*}})
# AMD-DAG: call i64 @rocshmem_signal_wait_until(i64 {{.*}}, i32 3, i64 3)
# Team index (world 0, shared / node 1) first; the wrapper forwards to rocshmem_ctx_{broadcast,fcollect}mem_wg.
# AMD-DAG: call i32 @rocshmem_broadcastmem_wg(i32 0,
# AMD-DAG: call i32 @rocshmem_fcollectmem_wg(i32 1,
import triton.language as tl

import triton_dist
from triton_dist.language.extra import libshmem_device as shmem


@triton_dist.jit
def all_calls(dst, src, sig, pe, nbytes):
    me = shmem.my_pe()
    n = shmem.n_pes()
    tl.store(dst, (me + n + shmem.team_my_pe(shmem.NVSHMEMX_TEAM_NODE)
                   + shmem.team_n_pes(shmem.NVSHMEM_TEAM_WORLD)).to(tl.float32))
    peer = shmem.remote_ptr(src, pe)
    tl.store(peer + 1, 1.0)
    mc = shmem.remote_mc_ptr(shmem.NVSHMEM_TEAM_WORLD, src)
    tl.store(mc + 2, 2.0)
    shmem.barrier_all()
    shmem.barrier_all_block()
    shmem.barrier_all_warp()
    shmem.barrier(shmem.NVSHMEMX_TEAM_NODE)
    shmem.sync_all()
    shmem.getmem_nbi_block(dst, src, nbytes, pe)
    shmem.getmem_block(dst, src, nbytes, pe)
    shmem.getmem_nbi_warp(dst, src, nbytes, pe)
    shmem.getmem_warp(dst, src, nbytes, pe)
    shmem.getmem_nbi(dst, src, nbytes, pe)
    shmem.getmem(dst, src, nbytes, pe)
    shmem.putmem_block(dst, src, 4096, pe)
    shmem.putmem_nbi_block(dst, src, nbytes, pe)
    shmem.putmem_warp(dst, src, nbytes, pe)
    shmem.putmem_nbi_warp(dst, src, nbytes, pe)
    shmem.putmem(dst, src, nbytes, pe)
    shmem.putmem_nbi(dst, src, nbytes, pe)
    shmem.fence()
    shmem.quiet()
    shmem.putmem_signal_nbi_block(dst, src, nbytes, sig, 1, shmem.NVSHMEM_SIGNAL_SET, pe)
    shmem.putmem_signal_block(dst, src, nbytes, sig, 2, shmem.NVSHMEM_SIGNAL_ADD, pe)
    shmem.signal_op(sig, 3, shmem.NVSHMEM_SIGNAL_ADD, pe)
    v = shmem.signal_wait_until(sig, shmem.NVSHMEM_CMP_GE, 3)
    tl.store(dst + 3, v.to(tl.float32))
    shmem.broadcastmem_block(shmem.NVSHMEM_TEAM_WORLD, dst, src, 256, 0)
    shmem.fcollectmem_block(shmem.NVSHMEMX_TEAM_NODE, dst, src, nbytes)
