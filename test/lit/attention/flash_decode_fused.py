# The fused merge of the split-KV decode (FUSED_MERGE, kernels/flash_decode.py; opt-in: DecodeConfig.fused_merge):
# after storing its partial a split program that holds tokens releases it with a CTA barrier and ONE
# atom.add.acq_rel.gpu on its (request, kv head)'s arrival counter (its result broadcast through shared memory and a
# second barrier); the last to arrive resets the counter (relaxed exchange), passes a CTA barrier (the acquire before
# any thread reads) and merges the kv head's rows from L2 (.cg loads) with the merge kernel's math. The default
# launch has no atomic at all (test/lit/attention/flash_decode.py, NOATOM). gfx942: the same acq_rel add (a release
# write-back of L2 before, an invalidation after). Signature: test/lit/attention/flash_decode.py's, then
# counters_ptr, FUSED_MERGE, BLOCK_GM, MERGE_BLOCK_SM, MERGE_BLOCK_S (prof_ptr, prof_blocks, PROFILE left at their defaults: off).
#
# RUN: %compile %s:flash_decode_split_kernel -s "*bf16:16, *bf16:16, *bf16:16, *i32:16, *i32:16, *fp32:16, *fp32:16, *bf16:16, *fp32:16, fp32, i32, i32, i32, i32, i32:16, i32:16, i32:16, i32:16, i32:16, i32:16, i32:16, i32:16, i32, i32:16, i32:16, 4, 16, 128, 16, 128, False, *i32:16, True, 4, 64, 8" --target cuda:90 --num-warps 4 --num-stages 3 --stage ptx | filecheck %s --check-prefix=PTX
# RUN: %compile %s:flash_decode_split_kernel -s "*bf16:16, *bf16:16, *bf16:16, *i32:16, *i32:16, *fp32:16, *fp32:16, *bf16:16, *fp32:16, fp32, i32, i32, i32, i32, i32:16, i32:16, i32:16, i32:16, i32:16, i32:16, i32:16, i32:16, i32, i32:16, i32:16, 4, 16, 128, 16, 64, False, *i32:16, True, 4, 64, 8" --target hip:gfx942 --num-warps 4 --num-stages 2 --stage amdgcn | filecheck %s --check-prefix=AMD
#
# PTX: .target sm_90a
# PTX-NOT: atom.
# PTX: mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32
# PTX-NOT: atom.
# PTX: st.global.v4.b32
# PTX-NOT: atom.
# PTX: bar.sync 0;
# PTX-NOT: {{(ld|st)}}.global
# PTX: atom.global.gpu.acq_rel.add.u32
# PTX-NOT: atom.
# PTX: bar.sync 0;
# PTX-NOT: ld.global
# PTX: atom.global.gpu.relaxed.exch.b32
# PTX-NOT: ld.global
# PTX: bar.sync 0;
# PTX-DAG: ld.global.cg.b32
# PTX-DAG: ex2.approx.f32
# PTX-DAG: ld.global.cg.v4.b32
# PTX-NOT: atom.
# PTX-NOT: %globaltimer
# PTX: ret;
#
# AMD: .amdgcn_target "amdgcn-amd-amdhsa--gfx942"
# AMD: v_mfma_f32_16x16x16_bf16
# AMD: s_barrier
# AMD: buffer_wbl2 sc1
# AMD: global_atomic_add {{.*}} sc0
# AMD: buffer_inv sc1
# AMD: s_barrier
# AMD: global_atomic_swap
# AMD: s_endpgm
from triton_dist.kernels.flash_decode import flash_decode_split_kernel  # noqa: F401
