# The overlap GEMM (triton_dist.kernels.gemm.gemm_kernel) compiles for every target from one source:
# * cuda:90, USE_TMA=True: device-side tensor descriptors (tensormap in global scratch), TMA loads (cp.async.bulk.tensor)
#   feeding wgmma, software-pipelined with 3 stages;
# * cuda:80, USE_TMA=False (pointer path): cp.async (16-byte) + mma.sync;
# * hip:gfx942, pointer path: MFMA.
# Signature: a, b, c, scale, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
#            BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M, NUM_SMS, USE_TMA, HAS_SCALE
#
# RUN: %compile %s:gemm_kernel -s "*bf16:16, *bf16:16, *bf16:16, *fp32, i32:16, i32:16, i32:16, i32:16, 1, i32:16, 1, i32:16, 1, 128, 256, 64, 8, 132, True, False" --target cuda:90 --num-warps 8 --num-stages 3 --stage ttgir | filecheck %s --check-prefix=TTGIR90
# RUN: %compile %s:gemm_kernel -s "*bf16:16, *bf16:16, *bf16:16, *fp32, i32:16, i32:16, i32:16, i32:16, 1, i32:16, 1, i32:16, 1, 128, 256, 64, 8, 132, True, False" --target cuda:90 --num-warps 8 --num-stages 3 --stage ptx | filecheck %s --check-prefix=PTX90
# RUN: %compile %s:gemm_kernel -s "*fp16:16, *fp16:16, *fp16:16, *fp32, i32:16, i32:16, i32:16, i32:16, 1, i32:16, 1, i32:16, 1, 128, 128, 32, 8, 108, False, False" --target cuda:80 --num-warps 4 --num-stages 3 --stage ptx | filecheck %s --check-prefix=PTX80
# RUN: %compile %s:gemm_kernel -s "*bf16:16, *bf16:16, *bf16:16, *fp32, i32:16, i32:16, i32:16, i32:16, 1, i32:16, 1, i32:16, 1, 128, 128, 64, 8, 304, False, False" --target hip:gfx942 --num-warps 8 --num-stages 2 --stage amdgcn | filecheck %s --check-prefix=AMD
#
# TTGIR90: ttng.tensormap_create
# TTGIR90: scf.for %tile
# TTGIR90: ttng.async_tma_copy_global_to_local
# TTGIR90: scf.for
# TTGIR90: ttng.warp_group_dot {{.*}}isAsync = true
# TTGIR90: ttng.async_tma_copy_global_to_local
# TTGIR90: scf.yield
#
# PTX90: .target sm_90a
# PTX90: tensormap.replace.tile.global_address
# PTX90: cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes
# PTX90: wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16
#
# PTX80: .target sm_80
# PTX80-NOT: wgmma
# PTX80: cp.async.cg.shared.global [{{.*}}], [{{.*}}], 0x10
# PTX80: mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32
#
# AMD: v_mfma_f32_{{.*}}bf16
from triton_dist.kernels.gemm import gemm_kernel  # noqa: F401
