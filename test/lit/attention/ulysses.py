# Ulysses' all-to-all kernel (triton_dist.kernels.ulysses; ops.pre_attn_all_to_all / post_attn_all_to_all) compiles
# for both targets, and its signalling lowers to what the protocol needs (module docstring of kernels.ulysses).
#
# First configuration: what the host launches on a GPU for pre_attn_all_to_all of x [1, 4096, 32, 128] bf16 at
# WORLD=2 (contiguous: every stride divisible by 16, D's stride 1; B = 1), a 132-program grid, 32 KiB tiles of 8
# rows by 16 heads (BLOCK_R=8, HB=16), 8 warps. Checked: program 0's recv_ok raised on the peer (CTA barrier, then
# one thread's system-scope fence and relaxed store), the push's system-scope acquire poll of the peer's recv_ok
# before the peer's address is taken (nvshmem_ptr) and the piece stored there (16-byte loads and stores, eight in
# flight per thread), the ready signal raised after those stores (barrier, fence, store), the own piece copied, the
# tagged system-scope acquire poll of the peer's ready before its slot is read (the wait's token feeds the slot
# address in the TTGIR) and copied out, then finish_call's atomics.
# Second configuration: post at WORLD=4 on rank 1 (a constexpr rank, as Triton specialises the value 1), fp32, D 48
# (BLOCK_D 64, masked) with 4-head tiles, runtime strides: three recv_ok polls and three tagged ready polls, all
# before the call's end.
# Compile-only; the simulator runs the ops at 1, 2 and 4 ranks (test/python/test_ulysses_sim.py).
#
# ulysses_all_to_all_kernel: x, out, recv, ready, recv_ok, counter, B, L, Hg, sxb, sxl, sxh, sxd, x_step, sob, sol,
#   soh, sod, o_step, CAP, tag, rank, WORLD, NSIG, D, BLOCK_D, BLOCK_R, HB
# RUN: %compile %s:ulysses_all_to_all_kernel -s "*bf16:16, *bf16:16, *bf16:16, *i64:16, *i64:16, *i64:16, 1, i32:16, i32:16, i32:16, i32:16, i32:16, 1, i32:16, i32:16, i32:16, i32:16, 1, i32:16, i32:16, i32, i32, 2, 132, 128, 128, 8, 16" --target cuda:90 --num-warps 8 -O launch_cooperative_grid=True --stage ttgir | filecheck %s --check-prefix=TTGIR
# RUN: %compile %s:ulysses_all_to_all_kernel -s "*bf16:16, *bf16:16, *bf16:16, *i64:16, *i64:16, *i64:16, 1, i32:16, i32:16, i32:16, i32:16, i32:16, 1, i32:16, i32:16, i32:16, i32:16, 1, i32:16, i32:16, i32, i32, 2, 132, 128, 128, 8, 16" --target cuda:90 --num-warps 8 -O launch_cooperative_grid=True --stage ptx > %t.ptx
# RUN: filecheck %s --check-prefix=PTX < %t.ptx
# RUN: filecheck %s --check-prefix=WAITS < %t.ptx
# RUN: filecheck %s --check-prefix=SIGNALS < %t.ptx
# RUN: filecheck %s --check-prefix=NOT < %t.ptx
# RUN: %compile %s:ulysses_all_to_all_kernel -s "*fp32:16, *fp32:16, *fp32:16, *i64:16, *i64:16, *i64:16, i32, i32, i32, i32, i32, i32, 1, i32, i32, i32, i32, 1, i32, i32:16, i32, 1, 4, 8, 48, 64, 2, 4" --target cuda:90 --num-warps 4 --stage ptx | filecheck %s --check-prefix=W4
# RUN: %compile %s:ulysses_all_to_all_kernel -s "*bf16:16, *bf16:16, *bf16:16, *i64:16, *i64:16, *i64:16, 1, i32:16, i32:16, i32:16, i32:16, i32:16, 1, i32:16, i32:16, i32:16, i32:16, 1, i32:16, i32:16, i32, i32, 2, 132, 128, 128, 8, 16" --target hip:gfx942 --num-warps 8 --stage amdgcn | filecheck %s --check-prefix=AMD
#
# ---- In the TTGIR, the tokens of the waits guard the peer's slot address and the reads of this rank's slot ----
# TTGIR-LABEL: tt.func public @ulysses_all_to_all_kernel(
# TTGIR: %e_call = tt.atomic_rmw add, relaxed, gpu, %counter_ptr
# TTGIR: tt.elementwise_inline_asm "{{.*}}bar.sync 0;{{.*}}membar.sys;{{.*}}st.relaxed.sys.b64
# TTGIR: %[[RTOK:[a-z0-9_]+]] = scf.if %{{[a-z0-9_]+}} -> (i32) {
# TTGIR-NEXT: tt.elementwise_inline_asm "{{.*}}ld.acquire.sys.b64
# TTGIR: %[[DZ:[a-z0-9_]+]] = tt.elementwise_inline_asm "mov.u32 $0, 0;" {{.*}} %[[RTOK]]
# TTGIR-NEXT: tt.addptr %recv_ptr, %[[DZ]]
# TTGIR: symbol = "nvshmem_ptr"
# the push: one 8 x 2048 tile per iteration (8 rows by 16 heads of 128)
# TTGIR: scf.for %t = %pid to %{{[a-z0-9_]+}} step %c132_i32
# TTGIR: tt.load {{.*}} : tensor<8x2048x!tt.ptr<bf16>
# TTGIR: tt.store {{.*}} : tensor<8x2048x!tt.ptr<bf16>
# TTGIR: tt.elementwise_inline_asm "{{.*}}bar.sync 0;{{.*}}membar.sys;{{.*}}st.relaxed.sys.b64
# the own piece
# TTGIR: scf.for %t = %pid to %{{[a-z0-9_]+}} step %c132_i32
# TTGIR: tt.store {{.*}} : tensor<8x2048x!tt.ptr<bf16>
# the tagged wait (a peer's signal of this call with another tag traps), its token into the slot's address
# TTGIR: %[[TTOK:[a-z0-9_]+]] = scf.if %{{[a-z0-9_]+}} -> (i32) {
# TTGIR-NEXT: tt.elementwise_inline_asm "{{.*}}ld.acquire.sys.b64
# TTGIR: "trap;"
# TTGIR: %[[SZ:[a-z0-9_]+]] = tt.elementwise_inline_asm "mov.u32 $0, 0;" {{.*}} %[[TTOK]]
# TTGIR-NEXT: tt.addptr %recv_ptr, %[[SZ]]
# TTGIR: scf.for %t = %pid to %{{[a-z0-9_]+}} step %c132_i32
# TTGIR: tt.load {{.*}} : tensor<8x2048x!tt.ptr<bf16>
# TTGIR: tt.store {{.*}} : tensor<8x2048x!tt.ptr<bf16>
# TTGIR: tt.atomic_rmw add, acq_rel, gpu
# TTGIR: tt.atomic_rmw exch, release, gpu, %counter_ptr
#
# ---- In the PTX, the order of the protocol's steps ----
# PTX-LABEL: .visible .entry ulysses_all_to_all_kernel(
# the epoch: counter[0] read (the atomic add of 0 lowers to a relaxed gpu-scope load)
# PTX: ld.global.gpu.relaxed.b64
# recv_ok on the peer: barrier, system-scope fence, relaxed system-scope store
# PTX: bar.sync 0;
# PTX: @%tdn_p membar.sys;
# PTX-NEXT: @%tdn_p st.relaxed.sys.b64
# the peer's recv_ok polled (system-scope acquire), then its address, then the push: eight 16-byte loads, then
# eight 16-byte stores per thread
# PTX: TDW_SPIN:
# PTX-NEXT: ld.acquire.sys.b64
# PTX: nvshmem_ptr
# PTX-COUNT-8: ld.global.v4.b32
# PTX-COUNT-8: st.global.v4.b32
# ready on the peer after the stores
# PTX: bar.sync 0;
# PTX: @%tdn_p membar.sys;
# PTX-NEXT: @%tdn_p st.relaxed.sys.b64
# the own piece: loads and stores before the poll of the peer's ready
# PTX: ld.global.v4.b32
# PTX: st.global.v4.b32
# PTX: TDW_SPIN:
# PTX-NEXT: ld.acquire.sys.b64
# the peer's slot copied out, then finish_call
# PTX: ld.global.v4.b32
# PTX: st.global.v4.b32
# PTX: atom.global.gpu.acq_rel.add.u64
# PTX: atom.global.gpu.release.exch.b64
#
# At WORLD=2: exactly two system-scope acquire polls (recv_ok, ready) and two system-scope release stores.
# WAITS-COUNT-2: ld.acquire.sys.b64
# WAITS-NOT: ld.acquire.sys.b64
# SIGNALS-COUNT-2: @%tdn_p membar.sys;
# SIGNALS-NOT: @%tdn_p membar.sys;
# No gpu-scope or relaxed poll, no system-scope atomic, no bounded-wait timer (TRITON_DIST_BOUNDED_WAIT unset).
# NOT-NOT: ld.acquire.gpu
# NOT-NOT: ld.relaxed.sys
# NOT-NOT: atom.global.sys
# NOT-NOT: globaltimer
#
# ---- WORLD=4, rank 1: the peers' loops unrolled: six system-scope acquire polls (three recv_ok, three tagged
# ready), all before finish_call ----
# W4-LABEL: .visible .entry ulysses_all_to_all_kernel(
# W4-COUNT-6: ld.acquire.sys.b64
# W4-NOT: ld.acquire.sys.b64
# W4: atom.global.gpu.acq_rel.add.u64
# W4-NOT: ld.acquire.sys.b64
# W4: atom.global.gpu.release.exch.b64
#
# ---- gfx942: rocshmem_ptr (through the GOT), the system-scope release set (L2 writeback, then the swap with the
# system-scope bit), the system-scope acquire poll (sc0 sc1 load, then the invalidate), 16-byte loads and stores ----
# AMD-LABEL: ulysses_all_to_all_kernel:
# AMD-DAG: rocshmem_ptr@gotpcrel32@lo+4
# AMD-DAG: buffer_wbl2 sc0 sc1
# AMD-DAG: global_atomic_swap_x2 {{v\[[0-9]+:[0-9]+\]}}, {{[av]\[[0-9]+:[0-9]+\]}}, off sc1
# AMD-DAG: global_load_dwordx2 {{v\[[0-9]+:[0-9]+\]}}, {{v\[[0-9]+:[0-9]+\]}}, off sc0 sc1
# AMD-DAG: buffer_inv sc0 sc1
# AMD-DAG: global_load_dwordx4
# AMD-DAG: global_store_dwordx4

from triton_dist.kernels.ulysses import ulysses_all_to_all_kernel  # noqa: F401
