# libshmem_device: the functions added after the first 31 (all_functions.py) lower to their NVSHMEM / rocSHMEM
# device calls. Split from all_functions.py to keep each lit test short: instead of assembling a cubin (ptxas on the
# linked library dominates all_functions.py), the NVIDIA kernel is linked against libnvshmem_device.bc at the LLIR
# stage and no NVSHMEM function may be left declared (every symbol resolved by the bitcode).
#
# RUN: env TRITON_DIST_NO_SHMEM_BITCODE=1 %compile %s:new_calls -s "*fp32:16, *fp32:16, *u64:16, i32, i64" --target cuda:90 --stage llir --stop-after llir | filecheck %s --check-prefix=NV
# The whole bitcode (TRITON_DIST_SLIM_BITCODE=0): the slim library leaves most typed put / get and the thread / warp
# byte collectives out (backends/nvidia/libshmem.py, FULL_LIBRARY_ONLY).
# RUN: env TRITON_DIST_SLIM_BITCODE=0 %compile %s:new_calls -s "*fp32:16, *fp32:16, *u64:16, i32, i64" --target cuda:90 --stage llir --stop-after llir | filecheck %s --check-prefix=LINKED
# RUN: env TRITON_DIST_NO_SHMEM_BITCODE=1 %compile %s:amd_calls -s "*fp32:16, *fp32:16, *u64:16, i32, i64" --target hip:gfx942 --stage llir > %t.amd.ll
# RUN: filecheck %s --check-prefix=AMD --input-file %t.amd.ll
# The same kernel assembled: its AMDGCN calls exactly the rocSHMEM functions of the LLIR (unresolved, through the GOT).
# RUN: env TRITON_DIST_NO_SHMEM_BITCODE=1 %compile %s:amd_calls -s "*fp32:16, *fp32:16, *u64:16, i32, i64" --target hip:gfx942 --stage amdgcn > %t.amd.s
# RUN: %python %S/../Inputs/same_calls.py rocshmem_ %t.amd.ll %t.amd.s
#
# Every call is executed by every thread that reaches it: no thread-0 predicate and no CTA barrier is added.
# NV-NOT: llvm.nvvm.barrier
# NV-DAG: call i32 @nvshmem_team_translate_pe(i32 2, i32 {{.*}}, i32 0)
# NV-DAG: call i32 @nvshmemx_barrier_block(i32 0)
# NV-DAG: call i32 @nvshmemx_barrier_warp(i32 2)
# NV-DAG: call i32 @nvshmemx_sync_all_block()
# NV-DAG: call i32 @nvshmemx_sync_all_warp()
# NV-DAG: call i32 @nvshmem_team_sync(i32 0)
# NV-DAG: call i32 @nvshmemx_team_sync_block(i32 1)
# NV-DAG: call i32 @nvshmemx_team_sync_warp(i32 2)
# The _wg / _wave names are the _block / _warp functions.
# NV-DAG: call i32 @nvshmemx_getmem_nbi_block(i64 {{.*}}, i64 {{.*}}, i64 16, i32
# NV-DAG: call i32 @nvshmemx_putmem_nbi_warp(i64 {{.*}}, i64 {{.*}}, i64 24, i32
# NV-DAG: call i32 @nvshmem_putmem_signal(i64 {{.*}}, i64 {{.*}}, i64 {{.*}}, i64 {{.*}}, i64 1, i32 9, i32
# NV-DAG: call i32 @nvshmem_putmem_signal_nbi(i64 {{.*}}, i64 {{.*}}, i64 {{.*}}, i64 {{.*}}, i64 2, i32 10, i32
# NV-DAG: call i32 @nvshmemx_putmem_signal_warp(
# NV-DAG: call i32 @nvshmemx_putmem_signal_nbi_warp(
# NV-DAG: call i32 @nvshmemx_putmem_signal_block(i64 {{.*}}, i64 {{.*}}, i64 {{.*}}, i64 {{.*}}, i64 5,
# NV-DAG: call i32 @nvshmemx_putmem_signal_nbi_block(i64 {{.*}}, i64 {{.*}}, i64 {{.*}}, i64 {{.*}}, i64 6,
# ulong_put_signal: nelems * 8 bytes
# NV-DAG: call i32 @nvshmem_putmem_signal(i64 {{.*}}, i64 {{.*}}, i64 32, i64 {{.*}}, i64 7, i32 9, i32
# Typed collectives: nelems * sizeof(float) bytes of the *mem function of the same scope.
# NV-DAG: call i32 @nvshmem_broadcastmem(i32 0, i64 {{.*}}, i64 {{.*}}, i64 {{.*}}, i32 0)
# NV-DAG: call i32 @nvshmemx_broadcastmem_warp(i32 0, i64 {{.*}}, i64 {{.*}}, i64 {{.*}}, i32 1)
# NV-DAG: call i32 @nvshmem_broadcastmem(i32 0, i64 {{.*}}, i64 {{.*}}, i64 40, i32 0)
# NV-DAG: call i32 @nvshmemx_broadcastmem_warp(i32 0, i64 {{.*}}, i64 {{.*}}, i64 44, i32 0)
# NV-DAG: call i32 @nvshmemx_broadcastmem_block(i32 0, i64 {{.*}}, i64 {{.*}}, i64 48, i32 0)
# NV-DAG: call i32 @nvshmem_fcollectmem(i32 2, i64 {{.*}}, i64 {{.*}}, i64 {{.*}})
# NV-DAG: call i32 @nvshmemx_fcollectmem_warp(i32 2, i64 {{.*}}, i64 {{.*}}, i64 {{.*}})
# NV-DAG: call i32 @nvshmem_fcollectmem(i32 0, i64 {{.*}}, i64 {{.*}}, i64 52)
# NV-DAG: call i32 @nvshmemx_fcollectmem_warp(i32 0, i64 {{.*}}, i64 {{.*}}, i64 56)
# NV-DAG: call i32 @nvshmemx_fcollectmem_block(i32 0, i64 {{.*}}, i64 {{.*}}, i64 60)
# Typed scalar put / get (half / bfloat16 travel as their 16 bits through the uint16 function).
# NV-DAG: call i32 @nvshmem_float_p(i64 {{.*}}, float {{.*}}, i32
# NV-DAG: call float @nvshmem_float_g(i64 {{.*}}, i32
# NV-DAG: call i32 @nvshmem_double_p(i64 {{.*}}, double {{.*}}, i32
# NV-DAG: call double @nvshmem_double_g(i64 {{.*}}, i32
# NV-DAG: call i32 @nvshmem_char_p(i64 {{.*}}, i8 {{.*}}, i32
# NV-DAG: call i8 @nvshmem_char_g(i64 {{.*}}, i32
# NV-DAG: call i32 @nvshmem_schar_p(i64 {{.*}}, i8 {{.*}}, i32
# NV-DAG: call i8 @nvshmem_schar_g(i64 {{.*}}, i32
# NV-DAG: call i32 @nvshmem_short_p(i64 {{.*}}, i16 {{.*}}, i32
# NV-DAG: call i16 @nvshmem_short_g(i64 {{.*}}, i32
# NV-DAG: call i32 @nvshmem_int_p(i64 {{.*}}, i32 {{.*}}, i32
# NV-DAG: call i32 @nvshmem_int_g(i64 {{.*}}, i32
# NV-DAG: call i32 @nvshmem_long_p(i64 {{.*}}, i64 {{.*}}, i32
# NV-DAG: call i64 @nvshmem_long_g(i64 {{.*}}, i32
# NV-DAG: call i32 @nvshmem_longlong_p(i64 {{.*}}, i64 {{.*}}, i32
# NV-DAG: call i64 @nvshmem_longlong_g(i64 {{.*}}, i32
# NV-DAG: call i32 @nvshmem_uchar_p(i64 {{.*}}, i8 {{.*}}, i32
# NV-DAG: call i8 @nvshmem_uchar_g(i64 {{.*}}, i32
# NV-DAG: call i32 @nvshmem_ushort_p(i64 {{.*}}, i16 {{.*}}, i32
# NV-DAG: call i16 @nvshmem_ushort_g(i64 {{.*}}, i32
# NV-DAG: call i32 @nvshmem_uint_p(i64 {{.*}}, i32 {{.*}}, i32
# NV-DAG: call i32 @nvshmem_uint_g(i64 {{.*}}, i32
# NV-DAG: call i32 @nvshmem_ulong_p(i64 {{.*}}, i64 {{.*}}, i32
# NV-DAG: call i64 @nvshmem_ulong_g(i64 {{.*}}, i32
# NV-DAG: call i32 @nvshmem_ulonglong_p(i64 {{.*}}, i64 {{.*}}, i32
# NV-DAG: call i64 @nvshmem_ulonglong_g(i64 {{.*}}, i32
# NV-DAG: call i32 @nvshmem_int8_p(i64 {{.*}}, i8 {{.*}}, i32
# NV-DAG: call i8 @nvshmem_int8_g(i64 {{.*}}, i32
# NV-DAG: call i32 @nvshmem_int16_p(i64 {{.*}}, i16 {{.*}}, i32
# NV-DAG: call i16 @nvshmem_int16_g(i64 {{.*}}, i32
# NV-DAG: call i32 @nvshmem_int32_p(i64 {{.*}}, i32 {{.*}}, i32
# NV-DAG: call i32 @nvshmem_int32_g(i64 {{.*}}, i32
# NV-DAG: call i32 @nvshmem_int64_p(i64 {{.*}}, i64 {{.*}}, i32
# NV-DAG: call i64 @nvshmem_int64_g(i64 {{.*}}, i32
# NV-DAG: call i32 @nvshmem_uint8_p(i64 {{.*}}, i8 {{.*}}, i32
# NV-DAG: call i8 @nvshmem_uint8_g(i64 {{.*}}, i32
# NV-DAG: call i32 @nvshmem_uint16_p(i64 {{.*}}, i16 {{.*}}, i32
# NV-DAG: call i16 @nvshmem_uint16_g(i64 {{.*}}, i32
# NV-DAG: call i32 @nvshmem_uint32_p(i64 {{.*}}, i32 {{.*}}, i32
# NV-DAG: call i32 @nvshmem_uint32_g(i64 {{.*}}, i32
# NV-DAG: call i32 @nvshmem_uint64_p(i64 {{.*}}, i64 {{.*}}, i32
# NV-DAG: call i64 @nvshmem_uint64_g(i64 {{.*}}, i32
# NV-DAG: call i32 @nvshmem_size_p(i64 {{.*}}, i64 {{.*}}, i32
# NV-DAG: call i64 @nvshmem_size_g(i64 {{.*}}, i32
# NV-DAG: call i32 @nvshmem_ptrdiff_p(i64 {{.*}}, i64 {{.*}}, i32
# NV-DAG: call i64 @nvshmem_ptrdiff_g(i64 {{.*}}, i32
# NV-DAG: call i32 @nvshmem_uint16_p(i64 {{.*}}, i16 {{.*}}, i32
# NV-DAG: call i16 @nvshmem_uint16_g(i64 {{.*}}, i32
# NV-DAG: call i32 @nvshmem_uint16_p(i64 {{.*}}, i16 {{.*}}, i32
# NV-DAG: call i16 @nvshmem_uint16_g(i64 {{.*}}, i32
#
# LINKED-NOT: declare {{.*}}@nvshmem
# LINKED: define {{.*}}@new_calls
#
# On AMD, the rocSHMEM functions (typed put / get by C type of the same width; _wg / _wave names).
# AMD-NOT: llvm.amdgcn.s.barrier
# AMD-DAG: call i32 @rocshmem_getmem_nbi_wg(
# AMD-DAG: call i32 @rocshmem_putmem_nbi_wave(
# AMD-DAG: call i32 @rocshmem_barrier_all_wg()
# AMD-DAG: call i32 @rocshmem_barrier_all_wave()
# rocSHMEM's enums: SIGNAL_SET = 0, SIGNAL_ADD = 1.
# AMD-DAG: call i32 @rocshmem_putmem_signal(i64 {{.*}}, i64 {{.*}}, i64 {{.*}}, i64 {{.*}}, i64 1, i32 0, i32
# AMD-DAG: call i32 @rocshmem_putmem_signal_nbi(i64 {{.*}}, i64 {{.*}}, i64 {{.*}}, i64 {{.*}}, i64 2, i32 1, i32
# AMD-DAG: call i32 @rocshmem_putmem_signal_wave(
# AMD-DAG: call i32 @rocshmem_putmem_signal_nbi_wave(
# AMD-DAG: call i32 @rocshmem_team_translate_pe(i32 1, i32 {{.*}}, i32 0)
# Team-scoped barriers: the world team calls rocSHMEM's team-less barrier, another team the wrapper's.
# AMD-DAG: call i32 @rocshmem_barrier_wg()
# AMD-DAG: call i32 @rocshmem_team_barrier_wave(i32 1)
# AMD-DAG: call i32 @rocshmem_sync_all_wg()
# AMD-DAG: call i32 @rocshmem_sync_all_wave()
# AMD-DAG: call i32 @rocshmem_team_sync(i32 0)
# AMD-DAG: call i32 @rocshmem_team_sync_wg(i32 1)
# AMD-DAG: call i32 @rocshmem_team_sync_wave(i32 1)
# AMD-DAG: call i32 @rocshmem_broadcastmem_wg(i32 0, i64 {{.*}}, i64 {{.*}}, i64 48, i32 0)
# AMD-DAG: call i32 @rocshmem_fcollectmem_wg(i32 0, i64 {{.*}}, i64 {{.*}}, i64 60)
# AMD-DAG: call i32 @rocshmem_float_p(i64 {{.*}}, float {{.*}}, i32
# AMD-DAG: call float @rocshmem_float_g(i64 {{.*}}, i32
# AMD-DAG: call i32 @rocshmem_double_p(i64 {{.*}}, double {{.*}}, i32
# AMD-DAG: call double @rocshmem_double_g(i64 {{.*}}, i32
# AMD-DAG: call i32 @rocshmem_char_p(i64 {{.*}}, i8 {{.*}}, i32
# AMD-DAG: call i8 @rocshmem_char_g(i64 {{.*}}, i32
# AMD-DAG: call i32 @rocshmem_schar_p(i64 {{.*}}, i8 {{.*}}, i32
# AMD-DAG: call i8 @rocshmem_schar_g(i64 {{.*}}, i32
# AMD-DAG: call i32 @rocshmem_short_p(i64 {{.*}}, i16 {{.*}}, i32
# AMD-DAG: call i16 @rocshmem_short_g(i64 {{.*}}, i32
# AMD-DAG: call i32 @rocshmem_int_p(i64 {{.*}}, i32 {{.*}}, i32
# AMD-DAG: call i32 @rocshmem_int_g(i64 {{.*}}, i32
# AMD-DAG: call i32 @rocshmem_long_p(i64 {{.*}}, i64 {{.*}}, i32
# AMD-DAG: call i64 @rocshmem_long_g(i64 {{.*}}, i32
# AMD-DAG: call i32 @rocshmem_longlong_p(i64 {{.*}}, i64 {{.*}}, i32
# AMD-DAG: call i64 @rocshmem_longlong_g(i64 {{.*}}, i32
# AMD-DAG: call i32 @rocshmem_uchar_p(i64 {{.*}}, i8 {{.*}}, i32
# AMD-DAG: call i8 @rocshmem_uchar_g(i64 {{.*}}, i32
# AMD-DAG: call i32 @rocshmem_ushort_p(i64 {{.*}}, i16 {{.*}}, i32
# AMD-DAG: call i16 @rocshmem_ushort_g(i64 {{.*}}, i32
# AMD-DAG: call i32 @rocshmem_uint_p(i64 {{.*}}, i32 {{.*}}, i32
# AMD-DAG: call i32 @rocshmem_uint_g(i64 {{.*}}, i32
# AMD-DAG: call i32 @rocshmem_ulong_p(i64 {{.*}}, i64 {{.*}}, i32
# AMD-DAG: call i64 @rocshmem_ulong_g(i64 {{.*}}, i32
# AMD-DAG: call i32 @rocshmem_ulonglong_p(i64 {{.*}}, i64 {{.*}}, i32
# AMD-DAG: call i64 @rocshmem_ulonglong_g(i64 {{.*}}, i32
# AMD-DAG: call i32 @rocshmem_schar_p(i64 {{.*}}, i8 {{.*}}, i32
# AMD-DAG: call i8 @rocshmem_schar_g(i64 {{.*}}, i32
# AMD-DAG: call i32 @rocshmem_short_p(i64 {{.*}}, i16 {{.*}}, i32
# AMD-DAG: call i16 @rocshmem_short_g(i64 {{.*}}, i32
# AMD-DAG: call i32 @rocshmem_int_p(i64 {{.*}}, i32 {{.*}}, i32
# AMD-DAG: call i32 @rocshmem_int_g(i64 {{.*}}, i32
# AMD-DAG: call i32 @rocshmem_longlong_p(i64 {{.*}}, i64 {{.*}}, i32
# AMD-DAG: call i64 @rocshmem_longlong_g(i64 {{.*}}, i32
# AMD-DAG: call i32 @rocshmem_uchar_p(i64 {{.*}}, i8 {{.*}}, i32
# AMD-DAG: call i8 @rocshmem_uchar_g(i64 {{.*}}, i32
# AMD-DAG: call i32 @rocshmem_ushort_p(i64 {{.*}}, i16 {{.*}}, i32
# AMD-DAG: call i16 @rocshmem_ushort_g(i64 {{.*}}, i32
# AMD-DAG: call i32 @rocshmem_uint_p(i64 {{.*}}, i32 {{.*}}, i32
# AMD-DAG: call i32 @rocshmem_uint_g(i64 {{.*}}, i32
# AMD-DAG: call i32 @rocshmem_ulonglong_p(i64 {{.*}}, i64 {{.*}}, i32
# AMD-DAG: call i64 @rocshmem_ulonglong_g(i64 {{.*}}, i32
# AMD-DAG: call i32 @rocshmem_ulonglong_p(i64 {{.*}}, i64 {{.*}}, i32
# AMD-DAG: call i64 @rocshmem_ulonglong_g(i64 {{.*}}, i32
# AMD-DAG: call i32 @rocshmem_longlong_p(i64 {{.*}}, i64 {{.*}}, i32
# AMD-DAG: call i64 @rocshmem_longlong_g(i64 {{.*}}, i32
# AMD-DAG: call i32 @rocshmem_ushort_p(i64 {{.*}}, i16 {{.*}}, i32
# AMD-DAG: call i16 @rocshmem_ushort_g(i64 {{.*}}, i32
# AMD-DAG: call i32 @rocshmem_ushort_p(i64 {{.*}}, i16 {{.*}}, i32
# AMD-DAG: call i16 @rocshmem_ushort_g(i64 {{.*}}, i32
import triton.language as tl

import triton_dist
from triton_dist.language.extra import libshmem_device as shmem


@triton_dist.jit
def _scalar_put_get(dst, pe):
    shmem.float_p(dst, pe, pe)
    shmem.float_g(dst, pe)
    shmem.double_p(dst, pe, pe)
    shmem.double_g(dst, pe)
    shmem.char_p(dst, pe, pe)
    shmem.char_g(dst, pe)
    shmem.schar_p(dst, pe, pe)
    shmem.schar_g(dst, pe)
    shmem.short_p(dst, pe, pe)
    shmem.short_g(dst, pe)
    shmem.int_p(dst, pe, pe)
    shmem.int_g(dst, pe)
    shmem.long_p(dst, pe, pe)
    shmem.long_g(dst, pe)
    shmem.longlong_p(dst, pe, pe)
    shmem.longlong_g(dst, pe)
    shmem.uchar_p(dst, pe, pe)
    shmem.uchar_g(dst, pe)
    shmem.ushort_p(dst, pe, pe)
    shmem.ushort_g(dst, pe)
    shmem.uint_p(dst, pe, pe)
    shmem.uint_g(dst, pe)
    shmem.ulong_p(dst, pe, pe)
    shmem.ulong_g(dst, pe)
    shmem.ulonglong_p(dst, pe, pe)
    shmem.ulonglong_g(dst, pe)
    shmem.int8_p(dst, pe, pe)
    shmem.int8_g(dst, pe)
    shmem.int16_p(dst, pe, pe)
    shmem.int16_g(dst, pe)
    shmem.int32_p(dst, pe, pe)
    shmem.int32_g(dst, pe)
    shmem.int64_p(dst, pe, pe)
    shmem.int64_g(dst, pe)
    shmem.uint8_p(dst, pe, pe)
    shmem.uint8_g(dst, pe)
    shmem.uint16_p(dst, pe, pe)
    shmem.uint16_g(dst, pe)
    shmem.uint32_p(dst, pe, pe)
    shmem.uint32_g(dst, pe)
    shmem.uint64_p(dst, pe, pe)
    shmem.uint64_g(dst, pe)
    shmem.size_p(dst, pe, pe)
    shmem.size_g(dst, pe)
    shmem.ptrdiff_p(dst, pe, pe)
    shmem.ptrdiff_g(dst, pe)
    shmem.half_p(dst, pe, pe)
    shmem.half_g(dst, pe)
    shmem.bfloat16_p(dst, pe, pe)
    shmem.bfloat16_g(dst, pe)


@triton_dist.jit
def new_calls(dst, src, sig, pe, nbytes):
    _common_calls(dst, src, sig, pe, nbytes)
    shmem.putmem_signal_warp(dst, src, nbytes, sig, 3, shmem.NVSHMEM_SIGNAL_SET, pe)
    shmem.putmem_signal_nbi_warp(dst, src, nbytes, sig, 4, shmem.NVSHMEM_SIGNAL_SET, pe)
    shmem.broadcastmem(shmem.NVSHMEM_TEAM_WORLD, dst, src, nbytes, 0)
    shmem.broadcastmem_warp(shmem.NVSHMEM_TEAM_WORLD, dst, src, nbytes, 1)
    shmem.broadcast(shmem.NVSHMEM_TEAM_WORLD, dst, src, 10, 0)
    shmem.broadcast_warp(shmem.NVSHMEM_TEAM_WORLD, dst, src, 11, 0)
    shmem.fcollectmem(shmem.NVSHMEMX_TEAM_NODE, dst, src, nbytes)
    shmem.fcollectmem_warp(shmem.NVSHMEMX_TEAM_NODE, dst, src, nbytes)
    shmem.fcollect(shmem.NVSHMEM_TEAM_WORLD, dst, src, 13)
    shmem.fcollect_warp(shmem.NVSHMEM_TEAM_WORLD, dst, src, 14)


@triton_dist.jit
def _common_calls(dst, src, sig, pe, nbytes):
    # the functions rocSHMEM has too
    tl.store(dst, shmem.team_translate_pe(shmem.NVSHMEMX_TEAM_NODE, pe, shmem.NVSHMEM_TEAM_WORLD).to(tl.float32))
    shmem.barrier_block(shmem.NVSHMEM_TEAM_WORLD)
    shmem.barrier_warp(shmem.NVSHMEMX_TEAM_NODE)
    shmem.sync_all_block()
    shmem.sync_all_warp()
    shmem.team_sync(shmem.NVSHMEM_TEAM_WORLD)
    shmem.team_sync_block(shmem.NVSHMEM_TEAM_SHARED)
    shmem.team_sync_warp(shmem.NVSHMEMX_TEAM_NODE)
    shmem.getmem_nbi_wg(dst, src, 16, pe)
    shmem.putmem_nbi_wave(dst, src, 24, pe)
    shmem.barrier_all_wg()
    shmem.barrier_all_wave()
    shmem.putmem_signal(dst, src, nbytes, sig, 1, shmem.NVSHMEM_SIGNAL_SET, pe)
    shmem.putmem_signal_nbi(dst, src, nbytes, sig, 2, shmem.NVSHMEM_SIGNAL_ADD, pe)
    shmem.putmem_signal_wg(dst, src, nbytes, sig, 5, shmem.NVSHMEM_SIGNAL_SET, pe)
    shmem.putmem_signal_nbi_wg(dst, src, nbytes, sig, 6, shmem.NVSHMEM_SIGNAL_SET, pe)
    shmem.ulong_put_signal(dst, src, 4, sig, 7, shmem.NVSHMEM_SIGNAL_SET, pe)
    shmem.broadcast_block(shmem.NVSHMEM_TEAM_WORLD, dst, src, 12, 0)
    shmem.fcollect_block(shmem.NVSHMEM_TEAM_WORLD, dst, src, 15)
    _scalar_put_get(dst, pe)


@triton_dist.jit
def amd_calls(dst, src, sig, pe, nbytes):
    _common_calls(dst, src, sig, pe, nbytes)
    shmem.putmem_signal_wave(dst, src, nbytes, sig, 3, shmem.NVSHMEM_SIGNAL_SET, pe)
    shmem.putmem_signal_nbi_wave(dst, src, nbytes, sig, 4, shmem.NVSHMEM_SIGNAL_SET, pe)
