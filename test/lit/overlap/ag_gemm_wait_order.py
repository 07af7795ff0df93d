# AllGather+GEMM: every GEMM tile of a peer's chunk waits for the ready signals of the A chunk it reads (dl.wait, sys scope,
# acquire) and consumes the token into the A pointer (pointer path) or the A row coordinate (TMA path), so the
# tile's A loads -- including the software-pipelined prologue copies (num_stages=3) -- are issued after the spin.
# Signature: a_full, b, c, ready, scale, x, recv_ok, counter, prof, M_loc, N, K, stride_bk, stride_bn, stride_cm,
#            stride_cn, tag, rank, WORLD, NSIG, PUSH_PROGRAMS, COPY_BLOCK, BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M,
#            NUM_SMS, USE_TMA, HAS_SCALE, PROFILE[, FLATTEN[, TMA_STORE]]
#
# RUN: %compile %s:ag_gemm_kernel -s "*bf16:16, *bf16:16, *bf16:16, *i64:16, *fp32, *bf16:16, *i64:16, *i64:16, *i64:16, i32:16, i32:16, i32:16, i32:16, 1, i32:16, 1, i32, i32, 2, 4, 0, 8192, 128, 128, 64, 8, 128, False, False, False" --target cuda:90 --num-warps 8 --num-stages 3 --stage ttgir | filecheck %s --check-prefix=PTR
# RUN: %compile %s:ag_gemm_kernel -s "*bf16:16, *bf16:16, *bf16:16, *i64:16, *fp32, *bf16:16, *i64:16, *i64:16, *i64:16, i32:16, i32:16, i32:16, i32:16, 1, i32:16, 1, i32, i32, 2, 4, 0, 8192, 128, 128, 64, 8, 128, False, False, False" --target cuda:90 --num-warps 8 --num-stages 3 --stage ptx | filecheck %s --check-prefix=PTRPTX
# RUN: %compile %s:ag_gemm_kernel -s "*bf16:16, *bf16:16, *bf16:16, *i64:16, *fp32, *bf16:16, *i64:16, *i64:16, *i64:16, i32:16, i32:16, i32:16, i32:16, 1, i32:16, 1, i32, i32, 2, 4, 0, 8192, 128, 256, 64, 8, 128, True, False, False" --target cuda:90 --num-warps 8 --num-stages 3 --stage ttgir | filecheck %s --check-prefix=TMA
# RUN: %compile %s:ag_gemm_kernel -s "*bf16:16, *bf16:16, *bf16:16, *i64:16, *fp32, *bf16:16, *i64:16, *i64:16, *i64:16, i32:16, i32:16, i32:16, i32:16, 1, i32:16, 1, i32, i32, 2, 4, 0, 8192, 128, 256, 64, 8, 128, True, False, False" --target cuda:90 --num-warps 8 --num-stages 3 --stage ptx | filecheck %s --check-prefix=TMAPTX
# FLATTEN=True (tile loop and K loop fused): the same order, the wait before the chunk's TMA loads
# RUN: %compile %s:ag_gemm_kernel -s "*bf16:16, *bf16:16, *bf16:16, *i64:16, *fp32, *bf16:16, *i64:16, *i64:16, *i64:16, i32:16, i32:16, i32:16, i32:16, 1, i32:16, 1, i32, i32, 2, 4, 0, 8192, 128, 128, 64, 8, 131, True, False, False, True" --target cuda:90 --num-warps 4 --num-stages 4 --stage ptx | filecheck %s --check-prefix=TMAPTX
# Fused push programs (PUSH_PROGRAMS=4): the push role's 128-bit copies into the peer (symm_at) and its signals.
# RUN: %compile %s:ag_gemm_kernel -s "*bf16:16, *bf16:16, *bf16:16, *i64:16, *fp32, *bf16:16, *i64:16, *i64:16, *i64:16, i32:16, i32:16, i32:16, i32:16, 1, i32:16, 1, i32, i32, 2, 4, 4, 8192, 128, 256, 64, 8, 128, True, False, False" --target cuda:90 --num-warps 8 --num-stages 3 --stage ptx | filecheck %s --check-prefix=PUSH
# RUN: env TRITON_DIST_NO_SHMEM_BITCODE=1 %compile %s:ag_gemm_kernel -s "*bf16:16, *bf16:16, *bf16:16, *i64:16, *fp32, *bf16:16, *i64:16, *i64:16, *i64:16, i32:16, i32:16, i32:16, i32:16, 1, i32:16, 1, i32, i32, 2, 4, 4, 8192, 128, 128, 64, 8, 304, False, False, False" --target hip:gfx942 --num-warps 8 --num-stages 2 --stage amdgcn | filecheck %s --check-prefix=AMD
#
# Two persistent loops: the local chunk's tiles (no wait, A = the shard x), then the peer chunks' (a wait per tile).
# Pointer path, TTGIR: the local loop has no spin; in the peer loop the spin comes first, then the chunk's A base in
# a_full gets the opaque zero taken from the spin's token, and only then come the prologue async copies.
# PTR: scf.for %tile = %pid to %tiles_chunk
# PTR-NOT: ld.acquire.sys.b64
# PTR: ttng.warp_group_dot
# PTR: scf.for %{{[a-z0-9_]+}} = %first{{[_0-9]*}} to %num_tiles
# PTR: %[[TOK:[a-z0-9_]+]] = scf.if %{{[a-z0-9_]+}} -> (i32)
# PTR: ld.acquire.sys.b64
# PTR-NOT: ttg.async_copy_global_to_local
# PTR: %[[BASE:[a-z0-9_]+]] = tt.addptr %a_full_ptr
# PTR-NEXT: %[[Z:[a-z0-9_]+]] = tt.elementwise_inline_asm "mov.u32 $0, 0;" {{.*}} %[[TOK]]
# PTR-NEXT: tt.addptr %[[BASE]], %[[Z]]
# PTR-NOT: scf.for
# PTR: ttg.async_copy_global_to_local
# PTR: scf.for
# PTR: ttng.warp_group_dot
# PTR: ttg.async_copy_global_to_local
#
# PTRPTX: TDW_SPIN:
# PTRPTX-NEXT: ld.acquire.sys.b64
# PTRPTX: TDW_DONE:
# PTRPTX-NEXT: bar.sync 0;
# PTRPTX: cp.async.cg.shared.global [{{.*}}], [{{.*}}], 0x10
# PTRPTX: wgmma.mma_async
#
# TMA path, TTGIR: the A descriptors (the shard, all of a_full) are built once, before both loops (a descriptor
# built per tile cost about 5% at 2048x7168x4096); in the peer loop the same spin, and the token's opaque zero is
# added to the A row coordinate used by every TMA copy of A.
# TMA: ttng.tensormap_create %{{[a-z0-9_]+}}, %x_ptr
# TMA: ttng.tensormap_create %{{[a-z0-9_]+}}, %a_full_ptr
# TMA: scf.for %tile = %pid to %tiles_chunk
# TMA-NOT: ld.acquire.sys.b64
# TMA-NOT: ttng.tensormap_create
# TMA: ttng.async_tma_copy_global_to_local %x_desc
# TMA-NOT: ttng.tensormap_create
# TMA: scf.for %{{[a-z0-9_]+}} = %first{{[_0-9]*}} to %num_tiles
# TMA-NOT: ttng.tensormap_create
# TMA: %[[TOK:[a-z0-9_]+]] = scf.if %{{[a-z0-9_]+}} -> (i32)
# TMA: ld.acquire.sys.b64
# TMA-NOT: ttng.async_tma_copy_global_to_local
# TMA: %[[ROW0:[a-z0-9_]+]] = arith.addi %row0{{[_0-9]*}}, %loc_m
# TMA-NEXT: %[[Z:[a-z0-9_]+]] = tt.elementwise_inline_asm "mov.u32 $0, 0;" {{.*}} %[[TOK]]
# TMA-NEXT: %[[ROW:[a-z0-9_]+]] = arith.addi %[[ROW0]], %[[Z]]
# TMA-NOT: ttng.tensormap_create
# TMA: ttng.async_tma_copy_global_to_local %f_desc{{[_0-9]*}}{{\[}}%[[ROW]], %c0_i32]
# TMA: scf.for
# TMA: ttng.warp_group_dot
# TMA: ttng.async_tma_copy_global_to_local %f_desc{{[_0-9]*}}{{\[}}%[[ROW]],
# TMA-NOT: ttng.tensormap_create
#
# TMAPTX: TDW_SPIN:
# TMAPTX-NEXT: ld.acquire.sys.b64
# TMAPTX: TDW_DONE:
# TMAPTX-NEXT: bar.sync 0;
# TMAPTX: cp.async.bulk.tensor.2d
# TMAPTX: wgmma.mma_async
#
# PUSH-DAG: st.global.v4
# PUSH-DAG: membar.sys
# PUSH-DAG: ld.acquire.sys.b64
# PUSH: wgmma.mma_async
#
# gfx942 AMDGCN: the push role's dl.symm_at calls rocshmem_ptr (unresolved here: through the GOT), MFMA, and the
# system-scope acquire poll (load with sc0 sc1, then the invalidate).
# AMD-DAG: rocshmem_ptr@gotpcrel32@lo+4
# AMD-DAG: v_mfma_f32_32x32x8_bf16
# AMD-DAG: global_load_dwordx2 {{v\[[0-9]+:[0-9]+\]}}, {{v\[[0-9]+:[0-9]+\]}}, off sc0 sc1
# AMD-DAG: buffer_inv sc0 sc1
from triton_dist.kernels.ag_gemm import ag_gemm_kernel  # noqa: F401
