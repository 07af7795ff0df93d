# The decode kernels' profiling (PROFILE, kernels/flash_decode.py) reads the clock only when it is on: the split kernel
# stamps its prologue, token loop and store (6 records: a start and an end each), the merge kernel its whole program
# (2); with PROFILE off (the default, what an unprofiled flash_decode launches: prof_ptr / prof_blocks None) neither
# kernel reads %globaltimer or %smid. With the fused merge on too, the split kernel also stamps the arrival and the
# last arriver's merge (10 records). Signatures: test/lit/attention/flash_decode.py's, then (split kernel)
# counters_ptr, FUSED_MERGE, BLOCK_GM, MERGE_BLOCK_SM, MERGE_BLOCK_S, then prof_ptr, prof_blocks, PROFILE.
#
# RUN: %compile %s:flash_decode_split_kernel -s "*bf16:16, *bf16:16, *bf16:16, *i32:16, *i32:16, *fp32:16, *fp32:16, *bf16:16, *fp32:16, fp32, i32, i32, i32, i32, i32:16, i32:16, i32:16, i32:16, i32:16, i32:16, i32:16, i32:16, i32, i32:16, i32:16, 4, 16, 128, 16, 128, False, *i32:16, False, 4, 64, 8, *i64:16, i32, True" --target cuda:90 --num-warps 4 --num-stages 3 --stage ptx | filecheck %s --check-prefix=SPLIT-ON
# RUN: %compile %s:flash_decode_split_kernel -s "*bf16:16, *bf16:16, *bf16:16, *i32:16, *i32:16, *fp32:16, *fp32:16, *bf16:16, *fp32:16, fp32, i32, i32, i32, i32, i32:16, i32:16, i32:16, i32:16, i32:16, i32:16, i32:16, i32:16, i32, i32:16, i32:16, 4, 16, 128, 16, 128, False, *i32:16, True, 4, 64, 8, *i64:16, i32, True" --target cuda:90 --num-warps 4 --num-stages 3 --stage ptx | filecheck %s --check-prefix=FUSED-ON
# RUN: %compile %s:flash_decode_split_kernel -s "*bf16:16, *bf16:16, *bf16:16, *i32:16, *i32:16, *fp32:16, *fp32:16, *bf16:16, *fp32:16, fp32, i32, i32, i32, i32, i32:16, i32:16, i32:16, i32:16, i32:16, i32:16, i32:16, i32:16, i32, i32:16, i32:16, 4, 16, 128, 16, 128, False" --target cuda:90 --num-warps 4 --num-stages 3 --stage ptx | filecheck %s --check-prefix=OFF
# RUN: %compile %s:merge_partials_kernel -s "*fp32:16, *fp32:16, *bf16:16, *fp32:16, *i32:16, i32, i32, i32:16, i32, i32:16, i32:16, i32:16, i32, i32, i32, i32:16, i32:16, 16, 128, True, 128, *i64:16, i32, True" --target cuda:90 --num-warps 4 --stage ptx | filecheck %s --check-prefix=MERGE-ON
# RUN: %compile %s:merge_partials_kernel -s "*fp32:16, *fp32:16, *bf16:16, *fp32:16, *i32:16, i32, i32, i32:16, i32, i32:16, i32:16, i32:16, i32, i32, i32, i32:16, i32:16, 16, 128, True, 128" --target cuda:90 --num-warps 4 --stage ptx | filecheck %s --check-prefix=OFF
#
# The split kernel: the SM id, the prologue's start, the Q rows loaded (then its end and the loop's start), the token
# loop's mma.sync, its end and the store's start, the partial stored, the store's end.
# SPLIT-ON: .target sm_90a
# SPLIT-ON: mov.u32 {{.*}}%smid
# SPLIT-ON: mov.u64 {{.*}}%globaltimer
# SPLIT-ON: ld.global.v4.b32
# SPLIT-ON: mov.u64 {{.*}}%globaltimer
# SPLIT-ON: mov.u64 {{.*}}%globaltimer
# SPLIT-ON: mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32
# SPLIT-ON: mov.u64 {{.*}}%globaltimer
# SPLIT-ON: mov.u64 {{.*}}%globaltimer
# SPLIT-ON: st.global.v4.b32
# SPLIT-ON: mov.u64 {{.*}}%globaltimer
# SPLIT-ON-NOT: %globaltimer
# SPLIT-ON: ret;
#
# FUSED-ON: .target sm_90a
# FUSED-ON: mov.u32 {{.*}}%smid
# FUSED-ON-COUNT-6: mov.u64 {{.*}}%globaltimer
# FUSED-ON: mov.u64 {{.*}}%globaltimer
# FUSED-ON: atom.global.gpu.acq_rel.add.u32
# FUSED-ON: mov.u64 {{.*}}%globaltimer
# FUSED-ON: mov.u64 {{.*}}%globaltimer
# FUSED-ON: ld.global.cg.v4.b32
# FUSED-ON: mov.u64 {{.*}}%globaltimer
# FUSED-ON-NOT: %globaltimer
# FUSED-ON: ret;
#
# MERGE-ON: .target sm_90a
# MERGE-ON: mov.u32 {{.*}}%smid
# MERGE-ON: mov.u64 {{.*}}%globaltimer
# MERGE-ON: ex2.approx.f32
# MERGE-ON: mov.u64 {{.*}}%globaltimer
# MERGE-ON-NOT: %globaltimer
# MERGE-ON: ret;
#
# OFF: .target sm_90a
# OFF-NOT: %globaltimer
# OFF-NOT: %smid
# OFF: ret;
from triton_dist.kernels.flash_decode import flash_decode_split_kernel, merge_partials_kernel  # noqa: F401
