# Prefill flash attention over K/V chunks (triton_dist.kernels.flash_attention.flash_attention_kernel) compiles for
# every target from one source:
# * cuda:90, USE_TMA=True, causal, bf16, D 128, 128 x 128 tiles: three device-side 4-D descriptors (q, k, v as
#   [B, L, H, D]); two K/V loops (the tiles every row sees, then the masked diagonal band), each with its TMA loads
#   software-pipelined ahead of q.k^T and p.v on wgmma; the softmax in base 2 (ex2);
# * cuda:90, fp16, D 64, not causal, no lse: wgmma on f16 (n128 for q.k^T over 128 keys, n64 for p.v over D 64);
# * hip:gfx942, pointer path: both products on MFMA, exp on v_exp_f32.
# Signature: q, k, v, out, lse, B, H_Q, H_KV, Lq, Lkv, diag, qk_scale, stride_{q,k,v,o}{b,l,h}, HEAD_D, BLOCK_M,
#            BLOCK_N, CAUSAL, USE_TMA, WRITE_LSE
#
# RUN: %compile %s:flash_attention_kernel -s "*bf16:16, *bf16:16, *bf16:16, *bf16:16, *fp32:16, i32, i32, i32, i32, i32, i32, fp32, i32:16, i32:16, i32:16, i32:16, i32:16, i32:16, i32:16, i32:16, i32:16, i32:16, i32:16, i32:16, 128, 128, 128, True, True, True" --target cuda:90 --num-warps 8 --num-stages 2 --stage ttgir | filecheck %s --check-prefix=TTGIR90
# RUN: %compile %s:flash_attention_kernel -s "*bf16:16, *bf16:16, *bf16:16, *bf16:16, *fp32:16, i32, i32, i32, i32, i32, i32, fp32, i32:16, i32:16, i32:16, i32:16, i32:16, i32:16, i32:16, i32:16, i32:16, i32:16, i32:16, i32:16, 128, 128, 128, True, True, True" --target cuda:90 --num-warps 8 --num-stages 2 --stage ptx | filecheck %s --check-prefix=PTX90
# RUN: %compile %s:flash_attention_kernel -s "*fp16:16, *fp16:16, *fp16:16, *fp16:16, *fp32:16, i32, i32, i32, i32, i32, i32, fp32, i32:16, i32:16, i32:16, i32:16, i32:16, i32:16, i32:16, i32:16, i32:16, i32:16, i32:16, i32:16, 64, 128, 128, False, True, False" --target cuda:90 --num-warps 8 --num-stages 3 --stage ptx | filecheck %s --check-prefix=F16
# RUN: %compile %s:flash_attention_kernel -s "*bf16:16, *bf16:16, *bf16:16, *bf16:16, *fp32:16, i32, i32, i32, i32, i32, i32, fp32, i32:16, i32:16, i32:16, i32:16, i32:16, i32:16, i32:16, i32:16, i32:16, i32:16, i32:16, i32:16, 128, 128, 64, True, False, True" --target hip:gfx942 --num-warps 4 --num-stages 2 --stage amdgcn | filecheck %s --check-prefix=AMD
#
# TTGIR90: ttng.tensormap_create
# TTGIR90: ttng.tensormap_create
# TTGIR90: ttng.tensormap_create
# TTGIR90: ttng.async_tma_copy_global_to_local %q_desc
# TTGIR90: ttng.async_tma_copy_global_to_local %k_desc
# TTGIR90: scf.for
# TTGIR90: ttng.warp_group_dot {{.*}}isAsync = true
# TTGIR90: math.exp2
# TTGIR90: ttng.warp_group_dot {{.*}}isAsync = true
# TTGIR90: ttng.async_tma_copy_global_to_local %k_desc
# TTGIR90: ttng.async_tma_copy_global_to_local %v_desc
# TTGIR90: scf.yield
# TTGIR90: scf.for
# TTGIR90: ttng.warp_group_dot {{.*}}isAsync = true
# TTGIR90: arith.select
# TTGIR90: ttng.warp_group_dot {{.*}}isAsync = true
# TTGIR90: ttng.async_tma_copy_global_to_local %k_desc
# TTGIR90: scf.yield
#
# PTX90: .target sm_90a
# PTX90: cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes
# PTX90: wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16
# PTX90: ex2.approx
# PTX90-NOT: .local
#
# F16: wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16
# F16: wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16
#
# AMD: v_mfma_f32_{{.*}}bf16
# AMD: v_exp_f32
from triton_dist.kernels.flash_attention import flash_attention_kernel  # noqa: F401
