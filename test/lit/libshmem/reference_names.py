# libshmem_device: the reference's 16 names beyond the 68 NVSHMEM-backed ones lower as the functions with the same
# semantics (docs/libshmem_device.md, "The reference's other names"): the proxy-path puts putmem_rma* /
# putmem_signal_rma* as the ordinary puts of the same scope, quiet_pe as quiet, barrier_all_vec as
# barrier_all_block, uint64_wait_until_equals as signal_wait_until(EQ), set_rocshmem_ctx as nothing.
#
# RUN: env TRITON_DIST_NO_SHMEM_BITCODE=1 %compile %s:reference_calls -s "*fp32:16, *fp32:16, *u64:16, i32" --target cuda:90 --stage llir --stop-after llir | filecheck %s --check-prefix=NV
# RUN: env TRITON_DIST_NO_SHMEM_BITCODE=1 %compile %s:reference_calls -s "*fp32:16, *fp32:16, *u64:16, i32" --target hip:gfx942 --stage llir --stop-after llir | filecheck %s --check-prefix=AMD
#
# NV-DAG: call i32 @nvshmem_putmem(i64 {{.*}}, i64 {{.*}}, i64 101, i32
# NV-DAG: call i32 @nvshmem_putmem_nbi(i64 {{.*}}, i64 {{.*}}, i64 102, i32
# NV-DAG: call i32 @nvshmemx_putmem_warp(i64 {{.*}}, i64 {{.*}}, i64 103, i32
# NV-DAG: call i32 @nvshmemx_putmem_nbi_warp(i64 {{.*}}, i64 {{.*}}, i64 104, i32
# NV-DAG: call i32 @nvshmemx_putmem_block(i64 {{.*}}, i64 {{.*}}, i64 105, i32
# NV-DAG: call i32 @nvshmemx_putmem_nbi_block(i64 {{.*}}, i64 {{.*}}, i64 106, i32
# NV-DAG: call i32 @nvshmem_putmem_signal(i64 {{.*}}, i64 {{.*}}, i64 111, i64 {{.*}}, i64 1, i32 9, i32
# NV-DAG: call i32 @nvshmem_putmem_signal_nbi(i64 {{.*}}, i64 {{.*}}, i64 112, i64 {{.*}}, i64 2, i32 10, i32
# NV-DAG: call i32 @nvshmemx_putmem_signal_warp(i64 {{.*}}, i64 {{.*}}, i64 113, i64 {{.*}}, i64 3, i32 9, i32
# NV-DAG: call i32 @nvshmemx_putmem_signal_nbi_warp(i64 {{.*}}, i64 {{.*}}, i64 114, i64 {{.*}}, i64 4, i32 9, i32
# NV-DAG: call i32 @nvshmemx_putmem_signal_block(i64 {{.*}}, i64 {{.*}}, i64 115, i64 {{.*}}, i64 5, i32 9, i32
# NV-DAG: call i32 @nvshmemx_putmem_signal_nbi_block(i64 {{.*}}, i64 {{.*}}, i64 116, i64 {{.*}}, i64 6, i32 9, i32
# NV-DAG: call i32 @nvshmem_quiet()
# NV-DAG: call i32 @nvshmemx_barrier_all_block()
# NV-DAG: call i64 @nvshmem_signal_wait_until(i64 {{.*}}, i32 0, i64 77)
#
# rocSHMEM: _wave = warp, _wg = block; its SIGNAL_SET / ADD are 0 / 1 and CMP_EQ is 0.
# AMD-DAG: call i32 @rocshmem_putmem(i64 {{.*}}, i64 {{.*}}, i64 101, i32
# AMD-DAG: call i32 @rocshmem_putmem_nbi(i64 {{.*}}, i64 {{.*}}, i64 102, i32
# AMD-DAG: call i32 @rocshmem_putmem_wave(i64 {{.*}}, i64 {{.*}}, i64 103, i32
# AMD-DAG: call i32 @rocshmem_putmem_nbi_wave(i64 {{.*}}, i64 {{.*}}, i64 104, i32
# AMD-DAG: call i32 @rocshmem_putmem_wg(i64 {{.*}}, i64 {{.*}}, i64 105, i32
# AMD-DAG: call i32 @rocshmem_putmem_nbi_wg(i64 {{.*}}, i64 {{.*}}, i64 106, i32
# AMD-DAG: call i32 @rocshmem_putmem_signal(i64 {{.*}}, i64 {{.*}}, i64 111, i64 {{.*}}, i64 1, i32 0, i32
# AMD-DAG: call i32 @rocshmem_putmem_signal_nbi(i64 {{.*}}, i64 {{.*}}, i64 112, i64 {{.*}}, i64 2, i32 1, i32
# AMD-DAG: call i32 @rocshmem_putmem_signal_wave(i64 {{.*}}, i64 {{.*}}, i64 113, i64 {{.*}}, i64 3, i32 0, i32
# AMD-DAG: call i32 @rocshmem_putmem_signal_nbi_wave(i64 {{.*}}, i64 {{.*}}, i64 114, i64 {{.*}}, i64 4, i32 0, i32
# AMD-DAG: call i32 @rocshmem_putmem_signal_wg(i64 {{.*}}, i64 {{.*}}, i64 115, i64 {{.*}}, i64 5, i32 0, i32
# AMD-DAG: call i32 @rocshmem_putmem_signal_nbi_wg(i64 {{.*}}, i64 {{.*}}, i64 116, i64 {{.*}}, i64 6, i32 0, i32
# AMD-DAG: call i32 @rocshmem_quiet()
# AMD-DAG: call i32 @rocshmem_barrier_all_wg()
# AMD-DAG: call i64 @rocshmem_signal_wait_until(i64 {{.*}}, i32 0, i64 77)
import triton_dist
from triton_dist.language.extra import libshmem_device as shmem


@triton_dist.jit
def reference_calls(dst, src, sig, pe):
    shmem.set_rocshmem_ctx(sig)
    shmem.putmem_rma(dst, src, 101, pe)
    shmem.putmem_rma_nbi(dst, src, 102, pe)
    shmem.putmem_rma_warp(dst, src, 103, pe)
    shmem.putmem_rma_nbi_warp(dst, src, 104, pe)
    shmem.putmem_rma_block(dst, src, 105, pe)
    shmem.putmem_rma_nbi_block(dst, src, 106, pe)
    shmem.putmem_signal_rma(dst, src, 111, sig, 1, shmem.NVSHMEM_SIGNAL_SET, pe)
    shmem.putmem_signal_rma_nbi(dst, src, 112, sig, 2, shmem.NVSHMEM_SIGNAL_ADD, pe)
    shmem.putmem_signal_rma_warp(dst, src, 113, sig, 3, shmem.NVSHMEM_SIGNAL_SET, pe)
    shmem.putmem_signal_rma_nbi_warp(dst, src, 114, sig, 4, shmem.NVSHMEM_SIGNAL_SET, pe)
    shmem.putmem_signal_rma_block(dst, src, 115, sig, 5, shmem.NVSHMEM_SIGNAL_SET, pe)
    shmem.putmem_signal_rma_nbi_block(dst, src, 116, sig, 6, shmem.NVSHMEM_SIGNAL_SET, pe)
    shmem.quiet_pe()
    shmem.quiet_pe(pe)
    shmem.barrier_all_vec()
    shmem.uint64_wait_until_equals(sig, 77)
