# The tensor-parallel MoE kernels (triton_dist.kernels.moe_tp) compile for both targets at WORLD=2, bf16, with the
# launch parameters the host uses on a GPU (ops.moe_tp: 8 push / reduce programs, a 16 KiB copy block, the rest of
# the SMs for the GEMM, 128x128x64 tiles), and their signalling lowers to what the protocol needs (module
# docstring of kernels.moe_tp): system-scope release stores for recv_ok / ready / rs_ok (a CTA barrier, then one
# thread's fence and store), system-scope acquire polls for the peers' signals, a gpu-scope release add and acquire
# poll for the local per-source tile count, and the launch's finish_call atomics. Every read of data another
# program or rank wrote goes through the token of the wait that guards it (TTGIR: the wait's opaque zero is added
# to the pointer the loads use). Compile-only in CI's Triton matrix (lit.cfg.py); the simulator runs them at 1, 2
# and 4 ranks (test/python/test_moe_tp_sim.py), the GPU tier on H100 (test/python/gpu/test_gpu_moe_tp.py).
#
# ag_group_gemm_kernel: a_full, x, b, h, pairs, seg, ready, recv_ok, counter, T, ROWS, E, N, K, stride_be, stride_bk,
#   stride_bn, stride_hm, tag, rank, TOPK, WORLD, NSIG, PUSH_PROGRAMS, COPY_BLOCK, BLOCK_M, BLOCK_N, BLOCK_K, NUM_SMS,
#   USE_TMA, B_K_CONTIGUOUS
# RUN: %compile %s:ag_group_gemm_kernel -s "*bf16:16, *bf16:16, *bf16:16, *bf16:16, *i32:16, *i32:16, *i64:16, *i64:16, *i64:16, i32, i32, i32, i32:16, i32:16, i32:16, i32:16, 1, i32:16, i32, i32, 4, 2, 8, 8, 8192, 128, 128, 64, 124, False, False" --target cuda:90 --num-warps 8 --num-stages 3 --stage ttgir --stop-after cubin | filecheck %s --check-prefix=AGIR
# RUN: %compile %s:ag_group_gemm_kernel -s "*bf16:16, *bf16:16, *bf16:16, *bf16:16, *i32:16, *i32:16, *i64:16, *i64:16, *i64:16, i32, i32, i32, i32:16, i32:16, i32:16, i32:16, 1, i32:16, i32, i32, 4, 2, 8, 8, 8192, 128, 128, 64, 124, True, False" --target cuda:90 --num-warps 8 --num-stages 3 --stage ptx > %t.ag.ptx
# RUN: filecheck %s --check-prefix=AG < %t.ag.ptx
# RUN: filecheck %s --check-prefix=AGX < %t.ag.ptx
# RUN: filecheck %s --check-prefix=AG-WAITS < %t.ag.ptx
# RUN: filecheck %s --check-prefix=AG-SIGNALS < %t.ag.ptx
# Weights passed as [E, N, K] through .transpose(1, 2) (B_K_CONTIGUOUS): one 3-D descriptor over [E, N, K], built
# before the tile loops, its tiles loaded at [e, off_n, k].
# RUN: %compile %s:ag_group_gemm_kernel -s "*bf16:16, *bf16:16, *bf16:16, *bf16:16, *i32:16, *i32:16, *i64:16, *i64:16, *i64:16, i32, i32, i32, i32:16, i32:16, i32:16, 1, i32:16, i32:16, i32, i32, 4, 2, 8, 8, 8192, 128, 128, 64, 124, True, True" --target cuda:90 --num-warps 8 --num-stages 3 --stage ttgir --stop-after cubin | filecheck %s --check-prefix=AG-NK
# RUN: %compile %s:ag_group_gemm_kernel -s "*bf16:16, *bf16:16, *bf16:16, *bf16:16, *i32:16, *i32:16, *i64:16, *i64:16, *i64:16, i32, i32, i32, i32:16, i32:16, i32:16, i32:16, 1, i32:16, i32, i32, 4, 2, 8, 8, 8192, 128, 128, 64, 296, False, False" --target hip:gfx942 --num-warps 8 --num-stages 2 --stage amdgcn | filecheck %s --check-prefix=AG-AMD
#
# group_gemm_rs_kernel: a, b, y, out, seg, dest, ids, w, stage, ready, rs_ok, done, counter, T, CAP, ROWS, E, N, K,
#   stride_am, stride_be, stride_bk, stride_bn, stride_ym, stride_om, tag, rank, TOPK, WORLD, RED_PROGRAMS,
#   RED_BLOCK_N, BLOCK_M, BLOCK_N, BLOCK_K, NUM_SMS, USE_TMA, B_K_CONTIGUOUS
# RUN: %compile %s:group_gemm_rs_kernel -s "*bf16:16, *bf16:16, *bf16:16, *bf16:16, *i32:16, *i32:16, *i32:16, *fp32:16, *bf16:16, *i64:16, *i64:16, *i64:16, *i64:16, i32, i32:16, i32, i32, i32:16, i32:16, i32:16, i32:16, i32:16, 1, i32:16, i32:16, i32, i32, 4, 2, 8, 2048, 128, 128, 64, 124, False, False" --target cuda:90 --num-warps 8 --num-stages 3 --stage ttgir --stop-after cubin | filecheck %s --check-prefix=RSIR
# RUN: %compile %s:group_gemm_rs_kernel -s "*bf16:16, *bf16:16, *bf16:16, *bf16:16, *i32:16, *i32:16, *i32:16, *fp32:16, *bf16:16, *i64:16, *i64:16, *i64:16, *i64:16, i32, i32:16, i32, i32, i32:16, i32:16, i32:16, i32:16, i32:16, 1, i32:16, i32:16, i32, i32, 4, 2, 8, 2048, 128, 128, 64, 124, True, False" --target cuda:90 --num-warps 8 --num-stages 3 --stage ptx > %t.rs.ptx
# RUN: filecheck %s --check-prefix=RS < %t.rs.ptx
# RUN: filecheck %s --check-prefix=RSX < %t.rs.ptx
# RUN: filecheck %s --check-prefix=RS-WAITS < %t.rs.ptx
# RUN: filecheck %s --check-prefix=RS-SIGNALS < %t.rs.ptx
# RUN: %compile %s:group_gemm_rs_kernel -s "*bf16:16, *bf16:16, *bf16:16, *bf16:16, *i32:16, *i32:16, *i32:16, *fp32:16, *bf16:16, *i64:16, *i64:16, *i64:16, *i64:16, i32, i32:16, i32, i32, i32:16, i32:16, i32:16, i32:16, i32:16, 1, i32:16, i32:16, i32, i32, 4, 2, 8, 2048, 128, 128, 64, 296, False, False" --target hip:gfx942 --num-warps 8 --num-stages 2 --stage amdgcn | filecheck %s --check-prefix=RS-AMD
#
# invert_rows_kernel: dest, pairs, P, BLOCK (the layout's row -> pair map: a plain scatter, every pair its own row)
# RUN: %compile %s:invert_rows_kernel -s "*i32:16, *i32:16, i32, 1024" --target cuda:90 --num-warps 4 --stage ptx | filecheck %s --check-prefix=INV
# RUN: %compile %s:invert_rows_kernel -s "*i32:16, *i32:16, i32, 1024" --target hip:gfx942 --num-warps 4 --stage amdgcn | filecheck %s --check-prefix=INV-AMD
#
# ---- ag_group_gemm_kernel, TTGIR (pointer path) ----
# Push role (pid >= NUM_SMS): program 0 raises recv_ok on the peer (system-scope release); the push waits for the
# peer's recv_ok (system-scope acquire) and consumes the token into a_full before taking the peer's address
# (symm_at -> nvshmem_ptr), stores x there, then raises ready on the peer.
# AGIR-LABEL: tt.func public @ag_group_gemm_kernel(
# AGIR: tt.elementwise_inline_asm "{{.*}}bar.sync 0;{{.*}}membar.sys;{{.*}}st.relaxed.sys.b64
# AGIR: %[[PTOK:[a-z0-9_]+]] = scf.if %{{[a-z0-9_]+}} -> (i32) {
# AGIR-NEXT: tt.elementwise_inline_asm "{{.*}}ld.acquire.sys.b64
# AGIR: %[[PZ:[a-z0-9_]+]] = tt.elementwise_inline_asm "mov.u32 $0, 0;" {{.*}} %[[PTOK]]
# AGIR-NEXT: %[[PDST:[a-z0-9_]+]] = tt.addptr %a_full_ptr, %[[PZ]]
# AGIR-NEXT: tt.ptr_to_int %[[PDST]]
# AGIR-NEXT: tt.extern_elementwise {{.*}}symbol = "nvshmem_ptr"
# AGIR: tt.store
# AGIR: symbol = "nvshmem_ptr"
# AGIR: tt.elementwise_inline_asm "{{.*}}bar.sync 0;{{.*}}membar.sys;{{.*}}st.relaxed.sys.b64
# GEMM role: a tile of this rank's own tokens gathers its rows from x with no wait; a peer's tile first polls that
# source's ready signals (system-scope acquire), and the token's opaque zero is added to the chunk's base in a_full;
# the branch yields the tile's source pointer, so there is ONE software-pipelined K loop (one set of stage buffers)
# and none of its A loads (the prologue copies included) can be scheduled above the wait.
# AGIR: } else {
# AGIR: scf.for %t = %first{{[_0-9]*}} to
# AGIR: %[[SRCSEL:[a-z0-9_]+]] = scf.if %{{[a-z0-9_]+}} -> (!tt.ptr<bf16>) {
# AGIR-NOT: ttg.async_copy_global_to_local
# AGIR: %[[TOK:[a-z0-9_]+]] = scf.if %{{[a-z0-9_]+}} -> (i32) {
# AGIR-NEXT: tt.elementwise_inline_asm "{{.*}}ld.acquire.sys.b64
# AGIR-NOT: ttg.async_copy_global_to_local
# AGIR: %[[BASE:[a-z0-9_]+]] = tt.addptr %a_full_ptr
# AGIR-NEXT: %[[Z:[a-z0-9_]+]] = tt.elementwise_inline_asm "mov.u32 $0, 0;" {{.*}} %[[TOK]]
# AGIR-NEXT: %[[SRC:[a-z0-9_]+]] = tt.addptr %[[BASE]], %[[Z]]
# AGIR-NEXT: scf.yield %[[SRC]] : !tt.ptr<bf16>
# AGIR-NEXT: } else {
# AGIR-NEXT: scf.yield %src : !tt.ptr<bf16>
# AGIR-NOT: ttg.async_copy_global_to_local
# AGIR: tt.splat %[[SRCSEL]]
# AGIR: ttg.async_copy_global_to_local
# AGIR: ttng.warp_group_dot
# AGIR-NOT: ttng.warp_group_dot {{.*}}tensor<128x128xf32
# AGIR: tt.store
# finish_call: the launch's last program publishes the epoch (release).
# AGIR: tt.atomic_rmw add, acq_rel, gpu
# AGIR: tt.atomic_rmw exch, release, gpu, %counter_ptr
#
# ---- ag_group_gemm_kernel, PTX (USE_TMA: B through a 3-D descriptor; A is gathered row by row, pointer loads) ----
# AG-LABEL: .visible .entry ag_group_gemm_kernel(
# AG: @%tdn_p membar.sys;
# AG-NEXT: @%tdn_p st.relaxed.sys.b64
# AG: TDW_SPIN:
# AG-NEXT: ld.acquire.sys.b64
# AG: st.global.v4.b32
# AG: tensormap.cp_fenceproxy
# AG: TDW_SPIN:
# AG-NEXT: ld.acquire.sys.b64
# AG: cp.async.cg.shared.global
# AG: cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes
# AG: wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16
# AG: atom.global.gpu.acq_rel.add.u64
# AG: atom.global.gpu.release.exch.b64
# No 2-D TMA load (A rows come through row_pairs), no gpu-scope or relaxed poll, no bounded-wait timer or trap
# (TRITON_DIST_BOUNDED_WAIT unset), no atomic at system scope.
# AGX-NOT: cp.async.bulk.tensor.2d
# AGX-NOT: ld.acquire.gpu
# AGX-NOT: ld.relaxed.sys
# AGX-NOT: globaltimer
# AGX-NOT: trap;
# AGX-NOT: atom.global.sys
# At WORLD=2: exactly two system-scope acquire polls (the push's wait for recv_ok, a peer tile's wait for ready) and
# two system-scope release stores (recv_ok, ready).
# AG-WAITS-COUNT-2: ld.acquire.sys.b64
# AG-WAITS-NOT: ld.acquire.sys.b64
# AG-SIGNALS-COUNT-2: @%tdn_p membar.sys;
# AG-SIGNALS-NOT: @%tdn_p membar.sys;
#
# AG-NK: ttng.tensormap_create %{{[a-z0-9_]+}}, %b_ptr, [%c64_i32, %c128_i32, %c1_i32], [%K, %N, %E]
# AG-NK-NOT: ttng.tensormap_create
# AG-NK: scf.for %t = %first{{[_0-9]*}} to
# AG-NK-NOT: ttng.tensormap_create
# AG-NK: ttng.async_tma_copy_global_to_local %b_desc{{[_0-9]*}}[%e, %off_n{{[_0-9]*}}, %c0_i32]
# AG-NK: ttng.warp_group_dot
# AG-NK-NOT: ttng.tensormap_create
#
# gfx942: the peer addresses from rocshmem_ptr (unresolved here: through the GOT), the system-scope release set
# (L2 writeback, then the swap with the system-scope bit), the system-scope acquire poll (sc0 sc1 load, then the
# invalidate), 128-bit copies, MFMA on bf16.
# AG-AMD-LABEL: ag_group_gemm_kernel:
# AG-AMD-DAG: rocshmem_ptr@gotpcrel32@lo+4
# AG-AMD-DAG: buffer_wbl2 sc0 sc1
# AG-AMD-DAG: global_atomic_swap_x2 {{v\[[0-9]+:[0-9]+\]}}, {{v\[[0-9]+:[0-9]+\]}}, off sc1
# AG-AMD-DAG: global_load_dwordx2 {{v\[[0-9]+:[0-9]+\]}}, {{v\[[0-9]+:[0-9]+\]}}, off sc0 sc1
# AG-AMD-DAG: buffer_inv sc0 sc1
# AG-AMD-DAG: global_store_dwordx4
# AG-AMD-DAG: v_mfma_f32_32x32x8_bf16
#
# ---- group_gemm_rs_kernel, TTGIR (pointer path) ----
# GEMM role: a tile's rows of y stored, then done[s] += 1 (CTA barrier, gpu-scope release, relaxed add).
# RSIR-LABEL: tt.func public @group_gemm_rs_kernel(
# RSIR: ttng.warp_group_dot
# RSIR: tt.store
# RSIR-NEXT: tt.elementwise_inline_asm "{{.*}}bar.sync 0;{{.*}}membar.gl;{{.*}}atom.relaxed.gpu.add.u64
# Reduce role: program 0 raises rs_ok on the peer (system-scope release). Per peer source: wait (gpu-scope acquire)
# until done[s] counts the source's tiles, y read only through that token; wait for the peer's rs_ok (system-scope
# acquire), consumed into the stage pointer before symm_at; the partials are rounded to bf16 and stored into the
# peer's stage, then ready raised there. Then every program reduces the own tokens: it waits for done[rank]
# (gpu scope) and the peers' ready (system scope), and reads y and the stage only through the sum of both tokens.
# RSIR: } else {
# RSIR: symbol = "nvshmem_ptr"
# RSIR: tt.elementwise_inline_asm "{{.*}}bar.sync 0;{{.*}}membar.sys;{{.*}}st.relaxed.sys.b64
# RSIR: %[[DTOK:[a-z0-9_]+]] = scf.if %{{[a-z0-9_]+}} -> (i32) {
# RSIR-NEXT: tt.elementwise_inline_asm "{{.*}}ld.acquire.gpu.b64
# RSIR: %[[YZ:[a-z0-9_]+]] = tt.elementwise_inline_asm "mov.u32 $0, 0;" {{.*}} %[[DTOK]]
# RSIR-NEXT: tt.addptr %y_ptr, %[[YZ]]
# RSIR: %[[OTOK:[a-z0-9_]+]] = scf.if %{{[a-z0-9_]+}} -> (i32) {
# RSIR-NEXT: tt.elementwise_inline_asm "{{.*}}ld.acquire.sys.b64
# RSIR: %[[SZ:[a-z0-9_]+]] = tt.elementwise_inline_asm "mov.u32 $0, 0;" {{.*}} %[[OTOK]]
# RSIR-NEXT: %[[SP:[a-z0-9_]+]] = tt.addptr %stage_ptr, %[[SZ]]
# RSIR-NEXT: tt.ptr_to_int %[[SP]]
# RSIR-NEXT: tt.extern_elementwise {{.*}}symbol = "nvshmem_ptr"
# RSIR: arith.truncf {{.*}} to tensor<2048xbf16
# RSIR-NEXT: tt.store
# RSIR: symbol = "nvshmem_ptr"
# RSIR: tt.elementwise_inline_asm "{{.*}}bar.sync 0;{{.*}}membar.sys;{{.*}}st.relaxed.sys.b64
# RSIR: %[[ODTOK:[a-z0-9_]+]] = scf.if %{{[a-z0-9_]+}} -> (i32) {
# RSIR-NEXT: tt.elementwise_inline_asm "{{.*}}ld.acquire.gpu.b64
# RSIR: %[[RTOK:[a-z0-9_]+]] = scf.if %{{[a-z0-9_]+}} -> (i32) {
# RSIR-NEXT: tt.elementwise_inline_asm "{{.*}}ld.acquire.sys.b64
# RSIR: %[[BOTH:[a-z0-9_]+]] = arith.addi %[[ODTOK]], %[[RTOK]]
# RSIR-NEXT: %[[RZ:[a-z0-9_]+]] = tt.elementwise_inline_asm "mov.u32 $0, 0;" {{.*}} %[[BOTH]]
# RSIR-NEXT: tt.addptr %y_ptr, %[[RZ]]
# RSIR-NEXT: tt.addptr %stage_ptr, %[[RZ]]
# RSIR: tt.load
# RSIR: tt.store
# finish: the last program zeroes done[:] (one relaxed exchange per source) before it publishes the epoch.
# RSIR: tt.atomic_rmw add, acq_rel, gpu
# RSIR: tt.atomic_rmw exch, relaxed, gpu, %done_ptr
# RSIR: tt.atomic_rmw exch, release, gpu, %counter_ptr
#
# ---- group_gemm_rs_kernel, PTX (USE_TMA: A [ROWS, K] 2-D, the experts' B 3-D) ----
# RS-LABEL: .visible .entry group_gemm_rs_kernel(
# RS: cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes
# RS: cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes
# RS: wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16
# RS: atom.global.gpu.acq_rel.add.u64
# RS-COUNT-3: atom.global.gpu.relaxed.exch.b64
# RS: atom.global.gpu.release.exch.b64
# RSX-NOT: ld.relaxed.sys
# RSX-NOT: globaltimer
# RSX-NOT: trap;
# RSX-NOT: atom.global.sys
# At WORLD=2: the peer's source (done: gpu scope, then its rs_ok: system scope), then the own tokens (done: gpu
# scope, then the peers' ready: system scope); one gpu-scope release add (done, per tile) and two system-scope
# release stores (rs_ok, ready). The reduce moves 16 bytes per access (8 bf16 per thread of the 8 warps).
# RS-WAITS: TDW_SPIN:
# RS-WAITS-NEXT: ld.acquire.gpu.b64
# RS-WAITS: TDW_SPIN:
# RS-WAITS-NEXT: ld.acquire.sys.b64
# RS-WAITS: TDW_SPIN:
# RS-WAITS-NEXT: ld.acquire.gpu.b64
# RS-WAITS: TDW_SPIN:
# RS-WAITS-NEXT: ld.acquire.sys.b64
# RS-WAITS-NOT: ld.acquire
# RSX-NOT: ld.global.b16
# RSX-NOT: st.global.b16
# RS-SIGNALS: @%tdn_p membar.gl;
# RS-SIGNALS-NEXT: @%tdn_p atom.relaxed.gpu.add.u64
# RS-SIGNALS-NOT: membar.gl
# RS-SIGNALS-COUNT-2: @%tdn_p membar.sys;
# RS-SIGNALS-NOT: @%tdn_p membar
#
# RS-AMD-LABEL: group_gemm_rs_kernel:
# RS-AMD-DAG: rocshmem_ptr@gotpcrel32@lo+4
# RS-AMD-DAG: global_atomic_swap_x2 {{v\[[0-9]+:[0-9]+\]}}, {{v\[[0-9]+:[0-9]+\]}}, off sc1
# RS-AMD-DAG: global_load_dwordx2 {{v\[[0-9]+:[0-9]+\]}}, {{v\[[0-9]+:[0-9]+\]}}, off sc1
# RS-AMD-DAG: buffer_inv sc1
# RS-AMD-DAG: global_load_dwordx2 {{v\[[0-9]+:[0-9]+\]}}, {{v\[[0-9]+:[0-9]+\]}}, off sc0 sc1
# RS-AMD-DAG: buffer_inv sc0 sc1
# RS-AMD-DAG: buffer_wbl2 sc1
# RS-AMD-DAG: global_atomic_add_x2
# RS-AMD-DAG: v_mfma_f32_32x32x8_bf16
#
# ---- invert_rows_kernel ----
# INV-LABEL: .visible .entry invert_rows_kernel(
# INV-NOT: atom.
# INV: ld.global.b32
# INV-NOT: atom.
# INV: st.global.b32
# INV-NOT: atom.
# INV-NOT: membar.
#
# INV-AMD: .amdgcn_target "amdgcn-amd-amdhsa--gfx942"
# INV-AMD-LABEL: invert_rows_kernel:
# INV-AMD-NOT: global_atomic
# INV-AMD: global_load_dword
# INV-AMD-NOT: global_atomic
# INV-AMD: global_store_dword
# INV-AMD-NOT: global_atomic
from triton_dist.kernels.moe_tp import ag_group_gemm_kernel, group_gemm_rs_kernel, invert_rows_kernel  # noqa: F401
