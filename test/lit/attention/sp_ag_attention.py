# Sequence-parallel prefill attention with the fused K/V all-gather (triton_dist.kernels.attention_sp_ag) compiles for
# both targets from one source, and its protocol lowers to what the module docstring promises:
# * cuda:90, causal, bf16, D 128, 128 x 128 tiles, USE_TMA, WORLD=4, NSIG=8 (the host's GPU choices): the push role
#   (ag_push with HIGHER_ONLY: each peer's step guarded by `rank + i < WORLD`) polls the peer's recv_ok, takes the
#   peer's address (nvshmem_ptr) and stores the chunk with 16-byte stores, then raises ready (fence + relaxed
#   system-scope store); the attention role builds its five descriptors (q, the own k / v, the gathered k / v as
#   [W * B, L, Hkv, D]) once before the persistent item loop; per item the own chunk's TMA loads come with no spill
#   of a wait before them, then the peer loop (from 1 to `npeers`, rank when causal): two tagged system-scope acquire
#   waits (K and V ready, a mismatch printed as RANKS DISAGREE), the waits' token added to the chunk's batch
#   coordinate, and only then the TMA copies of the gathered K and V at that coordinate; wgmma; finish_call last.
# * cuda:90, not causal, fp16, D 64, no lse: no HIGHER_ONLY guard (every peer is pushed to), and the peer loop runs
#   over all WORLD - 1 chunks (a constant trip count).
# * hip:gfx942, pointer path: MFMA, rocshmem_ptr, the system-scope acquire poll, the release store.
# Compile-only; the simulator runs the op at 1, 2 and 4 ranks (test/python/test_sp_ag_attention_sim.py).
#
# sp_ag_attention_kernel: q, k, v, out, lse, k_full, v_full, ready, recv_ok, counter, B, H_Q, H_KV, L, qk_scale,
#   stride_q{b,l,h}, stride_o{b,l,h}, tag, rank, WORLD, NSIG, COPY_BLOCK, HEAD_D, BLOCK_M, BLOCK_N, CAUSAL, USE_TMA,
#   WRITE_LSE
# RUN: %compile %s:sp_ag_attention_kernel -s "*bf16:16, *bf16:16, *bf16:16, *bf16:16, *fp32:16, *bf16:16, *bf16:16, *i64:16, *i64:16, *i64:16, i32, i32, i32, i32, fp32, i32:16, i32:16, i32:16, i32:16, i32:16, i32:16, i32, i32, 4, 8, 8192, 128, 128, 128, True, True, True" --target cuda:90 --num-warps 8 --num-stages 2 --stage ttgir | filecheck %s --check-prefix=TTGIR
# RUN: %compile %s:sp_ag_attention_kernel -s "*bf16:16, *bf16:16, *bf16:16, *bf16:16, *fp32:16, *bf16:16, *bf16:16, *i64:16, *i64:16, *i64:16, i32, i32, i32, i32, fp32, i32:16, i32:16, i32:16, i32:16, i32:16, i32:16, i32, i32, 4, 8, 8192, 128, 128, 128, True, True, True" --target cuda:90 --num-warps 8 --num-stages 2 --stage ptx > %t.ptx
# RUN: filecheck %s --check-prefix=PTX < %t.ptx
# RUN: filecheck %s --check-prefix=WAITS < %t.ptx
# RUN: %compile %s:sp_ag_attention_kernel -s "*fp16:16, *fp16:16, *fp16:16, *fp16:16, *fp32:16, *fp16:16, *fp16:16, *i64:16, *i64:16, *i64:16, i32, i32, i32, i32, fp32, i32:16, i32:16, i32:16, i32:16, i32:16, i32:16, i32, i32, 4, 8, 8192, 64, 128, 128, False, True, False" --target cuda:90 --num-warps 8 --num-stages 3 --stage ttgir | filecheck %s --check-prefix=FULL
# RUN: %compile %s:sp_ag_attention_kernel -s "*bf16:16, *bf16:16, *bf16:16, *bf16:16, *fp32:16, *bf16:16, *bf16:16, *i64:16, *i64:16, *i64:16, i32, i32, i32, i32, fp32, i32:16, i32:16, i32:16, i32:16, i32:16, i32:16, i32, i32, 2, 8, 8192, 128, 128, 64, True, False, True" --target hip:gfx942 --num-warps 4 --num-stages 2 --stage amdgcn | filecheck %s --check-prefix=AMD
#
# ---- In the TTGIR (causal, TMA), the push role, then the attention role ----
# TTGIR-LABEL: tt.func public @sp_ag_attention_kernel(
# TTGIR: %e = tt.atomic_rmw add, relaxed, gpu, %counter_ptr
# the push role: program 0 raises recv_ok on the peers; HIGHER_ONLY: peer rank + 1 only if it is below WORLD
# TTGIR: %[[CMP:[0-9]+]] = arith.cmpi slt, %peer{{[_0-9]*}}, %c4_i32
# TTGIR-NEXT: scf.if %[[CMP]]
# TTGIR: tt.elementwise_inline_asm "{{.*}}ld.acquire.sys.b64
# TTGIR: tt.addptr %k_full_ptr
# TTGIR: symbol = "nvshmem_ptr"
# TTGIR: tt.store
# TTGIR: tt.elementwise_inline_asm "{{.*}}bar.sync 0;{{.*}}membar.sys;{{.*}}st.relaxed.sys.b64
# the attention role: five descriptors, built once
# TTGIR: ttng.tensormap_create %{{[a-z0-9_]+}}, %q_ptr
# TTGIR: ttng.tensormap_create %{{[a-z0-9_]+}}, %k_ptr
# TTGIR: ttng.tensormap_create %{{[a-z0-9_]+}}, %v_ptr
# TTGIR: ttng.tensormap_create %{{[a-z0-9_]+}}, %k_full_ptr
# TTGIR: ttng.tensormap_create %{{[a-z0-9_]+}}, %v_full_ptr
# TTGIR-NOT: ttng.tensormap_create
# TTGIR: scf.for %item = %pid to
# the own chunk: no wait before its loads
# TTGIR-NOT: ld.acquire.sys
# TTGIR: ttng.async_tma_copy_global_to_local %kl_desc
# TTGIR-NOT: ld.acquire.sys
# TTGIR: ttng.warp_group_dot
# the peer chunks: K and V ready (tagged waits), the token into the batch coordinate, then the gathered loads
# TTGIR: scf.for %{{[a-z0-9_]+}} = %c1_i32 to
# TTGIR-NOT: ttng.async_tma_copy_global_to_local
# TTGIR: tt.elementwise_inline_asm "{{.*}}ld.acquire.sys.b64
# TTGIR: RANKS DISAGREE
# TTGIR-NOT: ttng.async_tma_copy_global_to_local
# TTGIR: tt.elementwise_inline_asm "{{.*}}ld.acquire.sys.b64
# TTGIR: RANKS DISAGREE
# TTGIR-NOT: ttng.async_tma_copy_global_to_local
# TTGIR: %[[Z:bc[_0-9]*]] = tt.elementwise_inline_asm "mov.u32 $0, 0;" {{.*}} %tok
# TTGIR-NEXT: %[[BC:bc[_0-9]*]] = arith.addi %{{[a-z0-9_]+}}, %[[Z]]
# TTGIR-NOT: ttng.tensormap_create
# TTGIR: ttng.async_tma_copy_global_to_local %kf_desc{{[_0-9]*}}{{\[}}%[[BC]], %c0_i32
# TTGIR: ttng.async_tma_copy_global_to_local %vf_desc{{[_0-9]*}}{{\[}}%[[BC]], %c0_i32
# TTGIR: scf.for
# TTGIR: ttng.warp_group_dot
# TTGIR: ttng.async_tma_copy_global_to_local %kf_desc{{[_0-9]*}}{{\[}}%[[BC]],
# TTGIR-NOT: ttng.tensormap_create
# the epilogue and the launch's epoch
# TTGIR: tt.store
# TTGIR: tt.atomic_rmw add, acq_rel, gpu
# TTGIR: tt.atomic_rmw exch, release, gpu, %counter_ptr
#
# ---- In the PTX, TMA + wgmma, the push's 16-byte copies, no register spills (the local depot holds printf arguments) ----
# PTX: .target sm_90a
# PTX-LABEL: .visible .entry sp_ag_attention_kernel(
# PTX-DAG: nvshmem_ptr
# PTX-DAG: ld.global.v4.b32
# PTX-DAG: st.global.v4.b32
# PTX-DAG: @%tdn_p membar.sys;
# PTX-DAG: st.relaxed.sys.b64
# PTX-DAG: cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes
# PTX-DAG: wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16
# PTX-DAG: ex2.approx
# PTX-DAG: atom.global.gpu.acq_rel.add.u64
# PTX-DAG: atom.global.gpu.release.exch.b64
# PTX-NOT: ld.local
#
# WORLD=4: six recv_ok polls (3 peers x the K and V push roles, unrolled) and two ready polls (K and V of a peer
# chunk, in the runtime peer loop): every poll a system-scope acquire, no other scope, no bounded-wait timer.
# WAITS-COUNT-8: ld.acquire.sys.b64
# WAITS-NOT: ld.acquire.sys.b64
# WAITS-NOT: ld.acquire.gpu
# WAITS-NOT: ld.relaxed.sys
# WAITS-NOT: globaltimer
#
# ---- not causal: every peer pushed to (no HIGHER_ONLY guard), all WORLD - 1 chunks read ----
# FULL-LABEL: tt.func public @sp_ag_attention_kernel(
# FULL-NOT: arith.cmpi slt, %peer
# FULL: scf.for %item = %pid to
# FULL: ttng.async_tma_copy_global_to_local %kl_desc
# FULL: scf.for %{{[a-z0-9_]+}} = %c1_i32 to %c4_i32
# FULL: ld.acquire.sys.b64
# FULL: ttng.async_tma_copy_global_to_local %kf_desc
# FULL: ttng.warp_group_dot {{.*}} -> tensor<128x64xf32
#
# ---- gfx942, pointer path ----
# AMD-LABEL: sp_ag_attention_kernel:
# AMD-DAG: rocshmem_ptr@gotpcrel32@lo+4
# AMD-DAG: v_mfma_f32_{{.*}}bf16
# AMD-DAG: v_exp_f32
# AMD-DAG: buffer_wbl2 sc0 sc1
# AMD-DAG: global_atomic_swap_x2 {{v\[[0-9]+:[0-9]+\]}}, {{[av]\[[0-9]+:[0-9]+\]}}, off sc1
# AMD-DAG: global_load_dwordx2 {{v\[[0-9]+:[0-9]+\]}}, {{v\[[0-9]+:[0-9]+\]}}, off sc0 sc1
# AMD-DAG: buffer_inv sc0 sc1
# AMD-DAG: global_store_dwordx4

from triton_dist.kernels.attention_sp_ag import sp_ag_attention_kernel  # noqa: F401
