# Tail splits (SPLIT_TAIL): the tiles of the persistent GEMM's last, partial round computed as K splits by several
# programs. Each split stores its fp32 partial into the workspace, a CTA barrier, then ONE thread's acq_rel
# gpu-scope add on the tile's counter; the finisher reads the splits past L1 (ld.global.cg) and stores the tile.
# Signature (gemm_kernel): a, b, c, scale, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
#            BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M, NUM_SMS, USE_TMA, HAS_SCALE, FLATTEN, TMA_STORE, SPLIT_TAIL, ws, cnt
#
# RUN: %compile %s:gemm_kernel -s "*bf16:16, *bf16:16, *bf16:16, *fp32, i32:16, i32:16, i32:16, i32:16, 1, i32:16, 1, i32:16, 1, 128, 256, 64, 8, 131, True, False, False, False, 2, *fp32:16, *i32:16" --target cuda:90 --num-warps 8 --num-stages 3 --stage ptx | filecheck %s --check-prefix=GEMM
# RUN: %compile %s:gemm_kernel -s "*fp16:16, *fp16:16, *fp16:16, *fp32, i32:16, i32:16, i32:16, i32:16, 1, i32:16, 1, i32:16, 1, 128, 128, 64, 8, 304, False, False, False, False, 3, *fp32:16, *i32:16" --target hip:gfx942 --num-warps 8 --num-stages 2 --stage amdgcn | filecheck %s --check-prefix=GEMMAMD
#
# GEMM-DAG: cp.async.bulk.tensor.2d
# GEMM-DAG: wgmma.mma_async
# GEMM: bar.sync
# GEMM: atom.global.gpu.acq_rel.add.u32
# GEMM: ld.global.cg.v4.b32
#
# GEMMAMD-DAG: v_mfma_f32_32x32x8_f16
# GEMMAMD-DAG: global_atomic_add
# GEMMAMD-DAG: s_barrier
#
from triton_dist.kernels.gemm import gemm_kernel  # noqa: F401
