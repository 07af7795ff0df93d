# The own-rows GEMM of gemm_rs method "ce" compiles for sm_90 (TMA loads + wgmma main loop, then per tile an acquire
# spin on the peers' piece flags at system scope before their partials are added; the launch's last program counts
# itself with an acq_rel atomic and zeroes the flags) and for gfx942 (mfma, acquire load with cache invalidation).
# Signature: a, b, out, stage, ready, count, M_s, N, K, stride_am, stride_bk, stride_bn, stride_om, CAP, rank,
#            WORLD, PIECES, FLAG_STRIDE, BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M, NUM_SMS, USE_TMA
#
# RUN: %compile %s:rs_own_gemm_kernel -s "*bf16:16, *bf16:16, *bf16:16, *bf16:16, *i64:16, *i64:16, i32, i32:16, i32:16, i32:16, i32:16, i32:16, i32:16, i32:16, i32, 2, 2, 4, 128, 256, 64, 8, 132, True" --target cuda:90 --num-warps 8 --num-stages 3 --stage ptx | filecheck %s --check-prefix=CE
# RUN: env TRITON_DIST_NO_SHMEM_BITCODE=1 %compile %s:rs_own_gemm_kernel -s "*bf16:16, *bf16:16, *bf16:16, *bf16:16, *i64:16, *i64:16, i32, i32:16, i32:16, i32:16, i32:16, i32:16, i32:16, i32:16, i32, 2, 2, 4, 128, 128, 64, 8, 304, False" --target hip:gfx942 --num-warps 8 --num-stages 2 --stage amdgcn | filecheck %s --check-prefix=AMD
#
# CE: cp.async.bulk.tensor.2d
# CE: wgmma.mma_async
# CE: ld.acquire.sys.b64
# CE: atom.global.gpu.acq_rel.add.u64
# CE: atom.global.gpu.relaxed.exch.b64
#
# AMD-DAG: v_mfma_f32_32x32x8_bf16
# AMD-DAG: global_load_dwordx2 {{v\[[0-9]+:[0-9]+\]}}, {{v\[[0-9]+:[0-9]+\]}}, off sc0 sc1
# AMD-DAG: buffer_inv sc0 sc1
# AMD-DAG: global_atomic_add_x2 {{v\[[0-9]+:[0-9]+\]}}, {{v[0-9]+}}, {{v\[[0-9]+:[0-9]+\]}}, {{s\[[0-9]+:[0-9]+\]}} sc0
from triton_dist.kernels.gemm_rs import rs_own_gemm_kernel  # noqa: F401
