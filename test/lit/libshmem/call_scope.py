# libshmem_device call scopes: a call is executed by every thread that reaches it, with its own arguments (the C
# function's rule, as in a CUDA kernel and in Triton-distributed). Nothing is added around it: no thread-0 predicate
# and no CTA barrier, so a call guarded by `if tid(0) == 0:` (the one-call-per-program pattern) never meets a
# barrier that the other threads skip, and per-thread arguments reach the library unchanged.
#
# RUN: env TRITON_DIST_NO_SHMEM_BITCODE=1 PTXAS_OPTIONS=-c %compile %s:thread_put -s "*fp32:16, *fp32:16, i64, i32" --target cuda:90 --stage ptx | filecheck %s --check-prefix=THREAD
# RUN: env TRITON_DIST_NO_SHMEM_BITCODE=1 PTXAS_OPTIONS=-c %compile %s:per_thread_get -s "*i8:16, i32, i32" --target cuda:90 --stage ptx | filecheck %s --check-prefix=PERTHREAD
# RUN: env TRITON_DIST_NO_SHMEM_BITCODE=1 PTXAS_OPTIONS=-c %compile %s:guarded_barrier -s "*i32" --target cuda:90 --stage ptx | filecheck %s --check-prefix=GUARDED
# RUN: env TRITON_DIST_NO_SHMEM_BITCODE=1 PTXAS_OPTIONS=-c %compile %s:warp_get -s "*fp32:16, *fp32:16, i64, i32" --target cuda:90 --stage ptx | filecheck %s --check-prefix=WARP
# RUN: env TRITON_DIST_NO_SHMEM_BITCODE=1 PTXAS_OPTIONS=-c %compile %s:block_put -s "*fp32:16, *fp32:16, i64, i32" --target cuda:90 --stage ptx | filecheck %s --check-prefix=BLOCK
# RUN: env TRITON_DIST_NO_SHMEM_BITCODE=1 %compile %s:thread_put -s "*fp32:16, *fp32:16, i64, i32" --target hip:gfx942 --stage amdgcn | filecheck %s --check-prefix=AMDTHREAD
# RUN: env TRITON_DIST_NO_SHMEM_BITCODE=1 %compile %s:world_barrier -s "*i32" --target hip:gfx942 --stage amdgcn | filecheck %s --check-prefix=AMDBARRIER
#
# An unguarded thread put: every thread calls nvshmem_putmem; no barrier, no thread-index test.
# THREAD-NOT: bar.sync
# THREAD-NOT: %tid.x
# THREAD: call.uni (retval0), nvshmem_putmem, (param0, param1, param2, param3);
# THREAD-NOT: bar.sync
# THREAD: ret;
#
# Per-thread transfers (Triton-distributed's getmem test): thread t < n gets byte t, its own addresses.
# PERTHREAD-NOT: bar.sync
# PERTHREAD: mov.u32 [[T:%r[0-9]+]], %tid.x;
# PERTHREAD: cvt.s64.s32 [[T64:%rd[0-9]+]], [[T]];
# PERTHREAD: add.s64 {{%rd[0-9]+}}, {{%rd[0-9]+}}, [[T64]];
# PERTHREAD: call.uni (retval0), nvshmem_getmem,
# PERTHREAD-NOT: bar.sync
#
# One call per program: only thread 0 reaches the barrier call, and the only CTA barrier is the user's
# __syncthreads() after the `if`, which every thread reaches.
# GUARDED: mov.u32 [[T:%r[0-9]+]], %tid.x;
# GUARDED-NOT: bar.sync
# GUARDED: call.uni (retval0), nvshmem_barrier_all, ();
# GUARDED-NOT: bar.sync
# GUARDED: $L__BB
# GUARDED: bar.sync 0;
# GUARDED-NOT: bar.sync
# GUARDED: ret;
#
# A warp call runs in every warp that reaches it (no warp-0 predicate).
# WARP-NOT: %tid.x
# WARP-NOT: bar.sync
# WARP: call.uni (retval0), nvshmemx_getmem_warp,
# WARP-NOT: bar.sync
#
# BLOCK-NOT: %tid.x
# BLOCK-NOT: bar.sync
# BLOCK: call.uni (retval0), nvshmemx_putmem_block,
#
# AMDTHREAD-NOT: s_barrier
# AMDTHREAD-NOT: s_and_saveexec_b64
# AMDTHREAD: rocshmem_putmem@gotpcrel32@lo+4
# AMDTHREAD: s_swappc_b64
# AMDTHREAD-NOT: s_barrier
# AMDTHREAD: s_endpgm
#
# barrier(TEAM_WORLD) on AMD calls rocSHMEM's rocshmem_barrier(), which takes no team (other teams go to the
# wrapper's team barrier; the team is a compile-time constant).
# AMDBARRIER-NOT: rocshmem_team_barrier
# AMDBARRIER-NOT: s_barrier
# AMDBARRIER: rocshmem_barrier@gotpcrel32@lo+4
# AMDBARRIER: s_swappc_b64
# AMDBARRIER-NOT: rocshmem_team_barrier
# AMDBARRIER-NOT: s_barrier
# AMDBARRIER: s_endpgm
import triton.language as tl

import triton_dist
from triton_dist.language.extra import libshmem_device as shmem
from triton_dist.language.extra.language_extra import __syncthreads, tid


@triton_dist.jit
def thread_put(dst, src, nbytes, pe):
    shmem.putmem(dst, src, nbytes, pe)


@triton_dist.jit
def per_thread_get(buf, nbytes, pe):
    t = tid(0)
    if t < nbytes:
        shmem.getmem(buf + t, buf + t, 1, pe)


@triton_dist.jit
def guarded_barrier(x):
    if tid(0) == 0:
        shmem.barrier_all()
    __syncthreads()
    tl.store(x, 1)


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
