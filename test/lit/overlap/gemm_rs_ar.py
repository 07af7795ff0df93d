# GEMM+ReduceScatter and GEMM+AllReduce compile for sm_90 (TMA + wgmma, partials stored to the owner through
# dl.symm_at (GEMM+RS in the output dtype, GEMM+AR in fp32), per-tile signal with system-scope release, acquire spin before the
# reduction) and for gfx942.
# Signature (RS): a, b, out, stage, sig, counter, prof, M(_s), N, K, stride_am, stride_bk, stride_bn, stride_om,
#            stride_on, CAP, MAX_TILES, tag, rank, WORLD, BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M, NUM_SMS, USE_TMA, PROFILE,
#            TMA_PUSH
# RSPUSH (TMA_PUSH): the peer tile leaves by one TMA store (global <- shared) through a descriptor over the peer's
# slot; its signal (later) first waits for the bulk copy's completion, writes included, then fences and stores.
# Signature (AR): a, b, out, stage, sig, words, counter, ws, cnt, fin, M, N, K, stride_am, stride_bk, stride_bn,
#            stride_om, stride_on, CAP, MAX_TILES, tag, rank, WORLD, BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M, NUM_SMS, USE_TMA[,
#            SPLIT_K[, LL]]
# ARSPLIT (decode tiling 16x128x128, K split 4 ways): each split's fp32 partial stored, a CTA barrier, then ONE
# thread's acq_rel gpu-scope add on the tile counter (result broadcast through shared memory); the finisher reads
# the splits past L1 (ld.global.cg) and pushes the tile like AR; 16-row tiles run on mma.sync, B through TMA.
# The epoch is read from the device counter (atomic) and published by the launch's last program (atomic xchg).
# ARLL (method ll, LL=True, the ARSPLIT tiling): the finisher's fp32 partial leaves as flagged words, one relaxed
# system-scope 64-bit store each into the peer's word buffer (st.relaxed.sys.b64, through nvshmem_ptr), and phase 2
# polls them with relaxed system-scope 64-bit loads, tagged (a mismatch is printed, then trap). ARLLN, none of the
# notify / wait path is left -- no membar.sys (the notify's release), no acquire load (the signal wait), no
# system-scope fence. ARLLAMD (gfx942): the flagged stores are system-scope atomic swaps (sc1) and the polls
# system-coherent loads (sc0 sc1), with no system-scope L2 writeback (the notify's release) from the kernel's start
# to the first poll (the tagged report's printf, later, has its own).
# PROFILE=True (RSPROF): the per-task stamps read %globaltimer and %smid.
# STREAM_PIECES=8 (RSS, signature + TMA_PUSH, send, STREAM_PIECES): peer tiles are stored locally (16-byte
# stores) and stream to the owner in row pieces inside the next tile's wgmma main loop (16-byte loads and stores
# between the MMAs: the loop keeps its asynchronous wgmma wait), then the deferred signal; no TMA store leaves for a
# peer (RSSN).
#
# RUN: %compile %s:gemm_rs_kernel -s "*bf16:16, *bf16:16, *bf16:16, *bf16:16, *i64:16, *i64:16, *i64:16, i32:16, i32:16, i32:16, i32:16, i32:16, 1, i32:16, 1, i32, i32, i32, i32, 2, 128, 256, 64, 8, 132, True, False" --target cuda:90 --num-warps 8 --num-stages 3 --stage ptx | filecheck %s --check-prefix=RS
# RUN: %compile %s:gemm_rs_kernel -s "*bf16:16, *bf16:16, *bf16:16, *bf16:16, *i64:16, *i64:16, *i64:16, i32:16, i32:16, i32:16, i32:16, i32:16, 1, i32:16, 1, i32, i32, i32, i32, 2, 128, 256, 64, 8, 132, True, False, True" --target cuda:90 --num-warps 8 --num-stages 3 --stage ptx | filecheck %s --check-prefix=RSPUSH
# RUN: %compile %s:gemm_rs_kernel -s "*bf16:16, *bf16:16, *bf16:16, *bf16:16, *i64:16, *i64:16, *i64:16, i32:16, i32:16, i32:16, i32:16, i32:16, 1, i32:16, 1, i32, i32, i32, i32, 2, 128, 256, 64, 8, 132, True, True" --target cuda:90 --num-warps 8 --num-stages 3 --stage ptx | filecheck %s --check-prefix=RSPROF
# RUN: %compile %s:gemm_rs_kernel -s "*bf16:16, *bf16:16, *bf16:16, *bf16:16, *i64:16, *i64:16, *i64:16, i32:16, i32:16, i32:16, i32:16, i32:16, 1, i32:16, 1, i32:16, i32:16, i32, i32, 2, 128, 256, 64, 8, 132, True, False, True, *bf16:16, 8" --target cuda:90 --num-warps 8 --num-stages 3 --stage ptx > %t.rss.ptx
# RUN: filecheck %s --check-prefix=RSS < %t.rss.ptx
# RUN: filecheck %s --check-prefix=RSSN < %t.rss.ptx
# RUN: %compile %s:gemm_ar_kernel -s "*bf16:16, *bf16:16, *bf16:16, *fp32:16, *i64:16, *i64:16, *i64:16, *fp32:16, *i32:16, *i32:16, i32:16, i32:16, i32:16, i32:16, i32:16, 1, i32:16, 1, i32, i32, i32, i32, 2, 64, 128, 64, 8, 132, True" --target cuda:90 --num-warps 4 --num-stages 4 --stage ptx | filecheck %s --check-prefix=AR
# RUN: %compile %s:gemm_ar_kernel -s "*bf16:16, *bf16:16, *bf16:16, *fp32:16, *i64:16, *i64:16, *i64:16, *fp32:16, *i32:16, *i32:16, i32, i32:16, i32:16, i32:16, i32:16, 1, i32:16, 1, i32, i32, i32, i32, 2, 16, 128, 128, 8, 132, True, 4" --target cuda:90 --num-warps 4 --num-stages 4 --stage ptx | filecheck %s --check-prefix=ARSPLIT
# RUN: %compile %s:gemm_ar_kernel -s "*bf16:16, *bf16:16, *bf16:16, *fp32:16, *i64:16, *i64:16, *i64:16, *fp32:16, *i32:16, *i32:16, i32, i32:16, i32:16, i32:16, i32:16, 1, i32:16, 1, i32, i32, i32, i32, 2, 16, 128, 128, 8, 132, True, 4, True" --target cuda:90 --num-warps 4 --num-stages 4 --stage ptx > %t.arll.ptx
# RUN: filecheck %s --check-prefix=ARLL < %t.arll.ptx
# RUN: filecheck %s --check-prefix=ARLLN < %t.arll.ptx
# RUN: env TRITON_DIST_NO_SHMEM_BITCODE=1 %compile %s:gemm_ar_kernel -s "*bf16:16, *bf16:16, *bf16:16, *fp32:16, *i64:16, *i64:16, *i64:16, *fp32:16, *i32:16, *i32:16, i32, i32:16, i32:16, i32:16, i32:16, 1, i32:16, 1, i32, i32, i32, i32, 2, 16, 128, 64, 8, 304, False, 4, True" --target hip:gfx942 --num-warps 4 --num-stages 2 --stage amdgcn | filecheck %s --check-prefix=ARLLAMD
# RUN: env TRITON_DIST_NO_SHMEM_BITCODE=1 %compile %s:gemm_ar_kernel -s "*bf16:16, *bf16:16, *bf16:16, *fp32:16, *i64:16, *i64:16, *i64:16, *fp32:16, *i32:16, *i32:16, i32, i32:16, i32:16, i32:16, i32:16, 1, i32:16, 1, i32, i32, i32, i32, 2, 16, 128, 64, 8, 304, False, 4" --target hip:gfx942 --num-warps 4 --num-stages 2 --stage amdgcn | filecheck %s --check-prefix=ARAMD
# RUN: env TRITON_DIST_NO_SHMEM_BITCODE=1 %compile %s:gemm_rs_kernel -s "*fp16:16, *fp16:16, *fp16:16, *fp16:16, *i64:16, *i64:16, *i64:16, i32:16, i32:16, i32:16, i32:16, i32:16, 1, i32:16, 1, i32, i32, i32, i32, 2, 128, 128, 64, 8, 304, False, False" --target hip:gfx942 --num-warps 8 --num-stages 2 --stage amdgcn | filecheck %s --check-prefix=AMD
#
# (gfx942: LLVM IR. Block placement puts the signalling code before the MMA loop in text order: no order between them is checked)
# RS-DAG: cp.async.bulk.tensor.2d
# RS-DAG: wgmma.mma_async
# RS-DAG: membar.sys
# RS-DAG: ld.acquire.sys.b64
# RS-DAG: st.global.v4.b32
#
# RS-DAG: atom.global{{.*}}add
# RS-NOT: globaltimer
#
# RSPUSH: cp.async.bulk.tensor.2d.global.shared::cta.bulk_group
# RSPUSH: cp.async.bulk.wait_group 0;
# RSPUSH-NEXT: bar.sync 0;
# RSPUSH: @%tdn_p membar.sys;
# RSPUSH-NEXT: @%tdn_p st.relaxed.sys.b64
#
# RSS: wgmma.mma_async
# RSS: wgmma.wait_group.sync.aligned 1
# RSS: st.global.v4.b32
# RSS: ld.global.v4.b32
# RSS: wgmma.wait_group.sync.aligned 0
# RSS-DAG: @%tdn_p membar.sys;
# RSS-DAG: ld.acquire.sys.b64
# RSSN-NOT: cp.async.bulk.tensor.2d.global.shared
#
# RSPROF-DAG: %globaltimer
# RSPROF-DAG: %smid
# RSPROF-DAG: wgmma.mma_async
#
# AR-DAG: cp.async.bulk.tensor.2d
# AR-DAG: wgmma.mma_async
# AR-DAG: membar.sys
# AR-DAG: ld.acquire.sys.b64
# AR-DAG: st.global.v4.b32
#
# ARSPLIT-DAG: cp.async.bulk.tensor.2d
# ARSPLIT-DAG: mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32
# ARSPLIT-DAG: membar.sys
# ARSPLIT: st.global.v4.b32
# ARSPLIT: bar.sync
# ARSPLIT-NOT: st.global
# ARSPLIT: @%p{{[0-9]+}} atom.global.gpu.acq_rel.add.u32
# ARSPLIT-NEXT: // end inline asm
# ARSPLIT-NEXT: // begin inline asm
# ARSPLIT-NEXT: @%p{{[0-9]+}} st.shared.b32
# ARSPLIT: ld.global.cg.v4.b32
# ARSPLIT: ld.acquire.sys.b64
#
# ARLL-DAG: cp.async.bulk.tensor.2d
# ARLL-DAG: mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32
# ARLL-DAG: atom.global.gpu.acq_rel.add.u32
# ARLL-DAG: nvshmem_ptr
# ARLL-DAG: st.relaxed.sys.b64
# ARLL-DAG: ld.relaxed.sys.b64
# ARLL-DAG: vprintf
# ARLL-DAG: trap;
# ARLLN-NOT: membar.sys
# ARLLN-NOT: ld.acquire.sys
# ARLLN-NOT: fence.sc.sys
# ARLLN-NOT: fence.acq_rel.sys
#
# ARLLAMD-LABEL: gemm_ar_kernel:
# ARLLAMD-NOT: buffer_wbl2 sc0 sc1
# ARLLAMD: global_atomic_swap_x2 {{v\[[0-9]+:[0-9]+\]}}, {{v\[[0-9]+:[0-9]+\]}}, off sc1
# ARLLAMD-NOT: buffer_wbl2 sc0 sc1
# ARLLAMD: global_load_dwordx2 {{v\[[0-9]+:[0-9]+\]}}, {{v\[[0-9]+:[0-9]+\]}}, off sc0 sc1
#
# gfx942 AMDGCN (dl.symm_at calls rocshmem_ptr, unresolved here: through the GOT). GEMM+AR's tile counter is an
# agent-scope acq_rel add that returns the old value: L2 writeback (sc1), the add (sc0: returns), the invalidate.
# ARAMD-DAG: buffer_wbl2 sc1
# ARAMD-DAG: global_atomic_add {{v[0-9]+}}, {{v[0-9]+}}, {{v[0-9]+}}, {{s\[[0-9]+:[0-9]+\]}} sc0
# ARAMD-DAG: buffer_inv sc1
# ARAMD-DAG: v_mfma_f32_16x16x16_bf16
# ARAMD-DAG: rocshmem_ptr@gotpcrel32@lo+4
#
# The GEMM+ReduceScatter kernel has the system-scope acquire poll and the system-scope release exchange of the
# peer's signal.
# AMD-DAG: rocshmem_ptr@gotpcrel32@lo+4
# AMD-DAG: v_mfma_f32_32x32x8_f16
# AMD-DAG: global_load_dwordx2 {{v\[[0-9]+:[0-9]+\]}}, {{v\[[0-9]+:[0-9]+\]}}, off sc0 sc1
# AMD-DAG: buffer_wbl2 sc0 sc1
# AMD-DAG: global_atomic_swap_x2 {{v\[[0-9]+:[0-9]+\]}}, {{v\[[0-9]+:[0-9]+\]}}, off sc1
from triton_dist.kernels.gemm_ar import gemm_ar_kernel  # noqa: F401
from triton_dist.kernels.gemm_rs import gemm_rs_kernel  # noqa: F401
