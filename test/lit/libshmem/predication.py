# libshmem_device call scopes on stock Triton (every thread of a program executes a scalar call):
# thread variants are predicated on thread 0, warp variants on warp 0, block variants run in every thread.
#
# RUN: env TRITON_DIST_NO_SHMEM_BITCODE=1 PTXAS_OPTIONS=-c %compile %s:thread_put -s "*fp32:16, *fp32:16, i64, i32" --target cuda:90 --stage ptx | filecheck %s --check-prefix=THREAD
# RUN: env TRITON_DIST_NO_SHMEM_BITCODE=1 PTXAS_OPTIONS=-c %compile %s:warp_get -s "*fp32:16, *fp32:16, i64, i32" --target cuda:90 --stage ptx | filecheck %s --check-prefix=WARP
# RUN: env TRITON_DIST_NO_SHMEM_BITCODE=1 PTXAS_OPTIONS=-c %compile %s:block_put -s "*fp32:16, *fp32:16, i64, i32" --target cuda:90 --stage ptx | filecheck %s --check-prefix=BLOCK
# RUN: %compile %s:thread_put -s "*fp32:16, *fp32:16, i64, i32" --target hip:gfx942 --stage llir --stop-after llir | filecheck %s --check-prefix=AMDTHREAD
# RUN: %compile %s:world_barrier -s "*i32" --target hip:gfx942 --stage llir --stop-after llir | filecheck %s --check-prefix=AMDBARRIER
#
# A put from thread 0 is preceded by a CTA barrier (the source written by any thread is complete); the other
# threads branch around the call; a blocking put is followed by a CTA barrier.
# THREAD: bar.sync 0;
# THREAD: mov.u32 [[T:%r[0-9]+]], %tid.x;
# THREAD: setp.gt.s32 [[P:%p[0-9]+]], [[T]], 0;
# THREAD: @[[P]] bra [[SKIP:\$L__BB[0-9_]+]];
# THREAD: call.uni (retval0), nvshmem_putmem, (param0, param1, param2, param3);
# THREAD: [[SKIP]]:
# THREAD: bar.sync 0;
# THREAD: ret;
#
# A blocking warp get: lanes of warp 0 (tid < 32) call it, then a CTA barrier orders every thread after it.
# WARP: mov.u32 [[T:%r[0-9]+]], %tid.x;
# WARP: setp.gt.s32 [[P:%p[0-9]+]], [[T]], 31;
# WARP: @[[P]] bra [[SKIP:\$L__BB[0-9_]+]];
# WARP: call.uni (retval0), nvshmemx_getmem_warp,
# WARP: [[SKIP]]:
# WARP: bar.sync 0;
#
# BLOCK-NOT: %tid.x
# BLOCK: call.uni (retval0), nvshmemx_putmem_block,
#
# AMDTHREAD: fence syncscope("workgroup") release
# AMDTHREAD: call i32 @llvm.amdgcn.workitem.id.x()
# AMDTHREAD: icmp {{.*}}
# AMDTHREAD: br i1
# AMDTHREAD: call i32 @rocshmem_putmem(
#
# barrier(TEAM_WORLD) on AMD: thread 0, between two workgroup barriers, calls rocSHMEM's rocshmem_barrier(), which
# takes no team (the team branch is folded away at compile time).
# AMDBARRIER-NOT: rocshmem_team_barrier
# AMDBARRIER: s.barrier()
# AMDBARRIER: call i32 @llvm.amdgcn.workitem.id.x()
# AMDBARRIER: br i1
# AMDBARRIER: call i32 @rocshmem_barrier()
# AMDBARRIER: s.barrier()
# AMDBARRIER-NOT: rocshmem_team_barrier
import triton.language as tl

import triton_dist
from triton_dist.language.extra import libshmem_device as shmem


@triton_dist.jit
def thread_put(dst, src, nbytes, pe):
    shmem.putmem(dst, src, nbytes, pe)


@triton_dist.jit
def warp_get(dst, src, nbytes, pe):
    shmem.getmem_warp(dst, src, nbytes, pe)


@triton_dist.jit
def block_put(dst, src, nbytes, pe):
    shmem.putmem_block(dst, src, nbytes, pe)


@triton_dist.jit
def world_barrier(x):
    shmem.barrier(shmem.NVSHMEM_TEAM_WORLD)
    tl.store(x, 1)
