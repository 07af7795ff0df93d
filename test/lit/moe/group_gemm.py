# The MoE grouped GEMM (triton_dist.kernels.group_gemm.group_gemm_kernel) compiles for every target from one source:
# * cuda:90, USE_TMA=True: device-side descriptors for A [rows, K] (2-D) and the experts' B [E, K, N] (3-D), TMA
#   loads software-pipelined (the K loop inside the per-expert tile loop) feeding wgmma;
# * cuda:90 with [E, N, K] weights (B_K_CONTIGUOUS): the 3-D descriptor over [E, N, K], the tile transposed in SMEM;
# * cuda:90 fp8 e4m3 with 128-block scales: wgmma on e4m3, the scales applied per K step;
# * hip:gfx942, pointer path: MFMA.
# Signature: a, b, c, offsets, scale_a, scale_b, ROWS, E, N, K, stride_am, stride_be, stride_bk, stride_bn, stride_cm,
#            stride_sam, stride_sak, stride_sbe, stride_sbk, stride_sbn, BLOCK_M, BLOCK_N, BLOCK_K, USE_TMA,
#            B_K_CONTIGUOUS, BLOCK_SCALED
#
# RUN: %compile %s:group_gemm_kernel -s "*bf16:16, *bf16:16, *bf16:16, *i32:16, *fp32, *fp32, i32, i32, i32:16, i32:16, i32:16, i32:16, i32:16, 1, i32:16, i32, i32, i32, i32, i32, 128, 128, 64, True, False, False" --target cuda:90 --num-warps 8 --num-stages 3 --stage ttgir | filecheck %s --check-prefix=TTGIR90
# RUN: %compile %s:group_gemm_kernel -s "*bf16:16, *bf16:16, *bf16:16, *i32:16, *fp32, *fp32, i32, i32, i32:16, i32:16, i32:16, i32:16, i32:16, 1, i32:16, i32, i32, i32, i32, i32, 128, 128, 64, True, False, False" --target cuda:90 --num-warps 8 --num-stages 3 --stage ptx | filecheck %s --check-prefix=PTX90
# RUN: %compile %s:group_gemm_kernel -s "*bf16:16, *bf16:16, *bf16:16, *i32:16, *fp32, *fp32, i32, i32, i32:16, i32:16, i32:16, i32:16, 1, i32:16, i32:16, i32, i32, i32, i32, i32, 128, 128, 64, True, True, False" --target cuda:90 --num-warps 8 --num-stages 3 --stage ptx | filecheck %s --check-prefix=NK90
# RUN: %compile %s:group_gemm_kernel -s "*fp8e4nv:16, *fp8e4nv:16, *bf16:16, *i32:16, *fp32:16, *fp32:16, i32, i32, i32:16, i32:16, i32:16, i32:16, i32:16, 1, i32:16, i32, 1, i32, i32, 1, 128, 128, 128, True, False, True" --target cuda:90 --num-warps 8 --num-stages 3 --stage ptx | filecheck %s --check-prefix=FP8
# RUN: %compile %s:group_gemm_kernel -s "*bf16:16, *bf16:16, *bf16:16, *i32:16, *fp32, *fp32, i32, i32, i32:16, i32:16, i32:16, i32:16, i32:16, 1, i32:16, i32, i32, i32, i32, i32, 128, 128, 64, False, False, False" --target hip:gfx942 --num-warps 8 --num-stages 2 --stage amdgcn | filecheck %s --check-prefix=AMD
#
# TTGIR90: ttng.tensormap_create
# TTGIR90: ttng.tensormap_create
# TTGIR90: scf.for
# TTGIR90: scf.for
# TTGIR90: ttng.async_tma_copy_global_to_local
# TTGIR90: ttng.warp_group_dot {{.*}}isAsync = true
# TTGIR90: scf.yield
#
# PTX90: .target sm_90a
# PTX90: cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes
# PTX90: cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes
# PTX90: wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16
#
# NK90: cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes
# NK90: wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16
#
# FP8: cp.async.bulk.tensor.3d
# FP8: wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3
#
# AMD: v_mfma_f32_{{.*}}bf16
from triton_dist.kernels.group_gemm import group_gemm_kernel  # noqa: F401
