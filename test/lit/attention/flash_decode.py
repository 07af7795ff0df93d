# The split-KV decode attention kernels (triton_dist.kernels.flash_decode) compile for every target from one source:
# * cuda:90, the split kernel at GQA 4 (16 MMA rows), D 128, 16-token pages under 64-token tiles (one page id per
#   token): the page ids and the K / V tiles come in by asynchronous copies software-pipelined over the token loop
#   (K / V in 16-byte pieces), both dots per tile are mma.sync m16n8k16 (wgmma needs 64 rows per warp group: a
#   16-row dot stays on mma.sync), no atomics;
# * cuda:90 with 64 MMA rows (BLOCK_G 64), 64-token pages (one page id per tile), one split writing out / lse: wgmma;
# * hip:gfx942: MFMA 16x16x16 on bf16, no atomics;
# * the merge kernel on both: no atomics (one program per output row).
# Split signature: q, k, v, block_table, seq_lens, part_out, part_lse, out, lse, qk_scale, num_kv_heads, num_splits,
#   max_pages, num_pages, stride_qb, stride_qh, stride_kp, stride_kt, stride_kh, stride_vp, stride_vt, stride_vh,
#   stride_btb, stride_ob, stride_oh, G, BLOCK_G, D, PAGE, BLOCK_N, DIRECT
# Merge signature: parts, lses, out, lse, seq_lens, num_parts, num_heads, head_dim, max_len, stride_ps, stride_pb,
#   stride_ph, stride_ls, stride_lb, stride_lh, stride_ob, stride_oh, BLOCK_S, BLOCK_D, FROM_SPLITS, SPLIT_BLOCK_N
#
# RUN: %compile %s:flash_decode_split_kernel -s "*bf16:16, *bf16:16, *bf16:16, *i32:16, *i32:16, *fp32:16, *fp32:16, *bf16:16, *fp32:16, fp32, i32, i32, i32, i32, i32:16, i32:16, i32:16, i32:16, i32:16, i32:16, i32:16, i32:16, i32, i32:16, i32:16, 4, 16, 128, 16, 64, False" --target cuda:90 --num-warps 4 --num-stages 3 --stage ttgir | filecheck %s --check-prefix=TTGIR
# RUN: %compile %s:flash_decode_split_kernel -s "*bf16:16, *bf16:16, *bf16:16, *i32:16, *i32:16, *fp32:16, *fp32:16, *bf16:16, *fp32:16, fp32, i32, i32, i32, i32, i32:16, i32:16, i32:16, i32:16, i32:16, i32:16, i32:16, i32:16, i32, i32:16, i32:16, 4, 16, 128, 16, 64, False" --target cuda:90 --num-warps 4 --num-stages 3 --stage ptx > %t.ptx
# RUN: filecheck %s --check-prefix=PTX < %t.ptx
# RUN: filecheck %s --check-prefix=NOATOM < %t.ptx
# RUN: %compile %s:flash_decode_split_kernel -s "*bf16:16, *bf16:16, *bf16:16, *i32:16, *i32:16, *fp32:16, *fp32:16, *bf16:16, *fp32:16, fp32, i32, i32, i32, i32, i32:16, i32:16, i32:16, i32:16, i32:16, i32:16, i32:16, i32:16, i32, i32:16, i32:16, 4, 64, 128, 64, 64, True" --target cuda:90 --num-warps 4 --num-stages 3 --stage ptx | filecheck %s --check-prefix=WGMMA
# RUN: %compile %s:flash_decode_split_kernel -s "*bf16:16, *bf16:16, *bf16:16, *i32:16, *i32:16, *fp32:16, *fp32:16, *bf16:16, *fp32:16, fp32, i32, i32, i32, i32, i32:16, i32:16, i32:16, i32:16, i32:16, i32:16, i32:16, i32:16, i32, i32:16, i32:16, 4, 16, 128, 16, 64, False" --target hip:gfx942 --num-warps 4 --num-stages 2 --stage amdgcn > %t.s
# RUN: filecheck %s --check-prefix=AMD < %t.s
# RUN: filecheck %s --check-prefix=AMDNOATOM < %t.s
# RUN: %compile %s:merge_partials_kernel -s "*fp32:16, *fp32:16, *bf16:16, *fp32:16, *i32:16, i32, i32, i32:16, i32, i32:16, i32:16, i32:16, i32, i32, i32, i32:16, i32:16, 16, 128, True, 64" --target cuda:90 --num-warps 4 --stage ptx > %t.merge.ptx
# RUN: filecheck %s --check-prefix=MERGE < %t.merge.ptx
# RUN: filecheck %s --check-prefix=NOATOM < %t.merge.ptx
# RUN: %compile %s:merge_partials_kernel -s "*fp32:16, *fp32:16, *bf16:16, *fp32:16, *i32:16, i32, i32, i32:16, i32, i32:16, i32:16, i32:16, i32, i32, i32, i32:16, i32:16, 16, 128, False, 64" --target hip:gfx942 --num-warps 4 --stage amdgcn > %t.merge.s
# RUN: filecheck %s --check-prefix=MERGEAMD < %t.merge.s
# RUN: filecheck %s --check-prefix=AMDNOATOM < %t.merge.s
#
# The page ids and the first K / V tile are copied before the loop; inside it, the wait, both dots and the next copies.
# TTGIR: #mma = #ttg.nvidia_mma<{versionMajor = 2
# TTGIR: ttg.async_copy_global_to_local {{.*}} -> <64xi32
# TTGIR: ttg.async_copy_global_to_local {{.*}}{contiguity = 8 : i32} : tensor<64x128x!tt.ptr<bf16>
# TTGIR: ttg.async_copy_global_to_local {{.*}}{contiguity = 8 : i32} : tensor<64x128x!tt.ptr<bf16>
# TTGIR: scf.for
# TTGIR: ttg.async_wait
# TTGIR: tt.dot {{.*}} -> tensor<16x64xf32, #mma>
# TTGIR: math.exp2
# TTGIR: tt.dot {{.*}} -> tensor<16x128xf32, #mma>
# TTGIR: ttg.async_copy_global_to_local {{.*}}{contiguity = 8 : i32} : tensor<64x128x!tt.ptr<bf16>
# TTGIR: scf.yield
#
# PTX: .target sm_90a
# PTX: cp.async.cg.shared.global [ {{.*}} ], [ {{.*}} ], 0x10
# PTX: mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32
# PTX: ex2.approx
# PTX: mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32
#
# NOATOM-NOT: {{\batom\.|\bred\.}}
#
# WGMMA: wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16
# WGMMA: wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16
#
# AMD: .amdgcn_target "amdgcn-amd-amdhsa--gfx942"
# AMD: v_mfma_f32_16x16x16_bf16
#
# AMDNOATOM-NOT: _atomic_
#
# MERGE: .target sm_90a
# MERGE-DAG: ld.global.v4.b32
# MERGE-DAG: ex2.approx.f32
#
# MERGEAMD: .amdgcn_target "amdgcn-amd-amdhsa--gfx942"
# MERGEAMD: v_exp_f32
from triton_dist.kernels.flash_decode import flash_decode_split_kernel, merge_partials_kernel  # noqa: F401
