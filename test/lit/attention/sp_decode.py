# The sequence-parallel decode's exchange kernel (triton_dist.kernels.attention_sp) compiles for both targets at
# WORLD=2, bf16 out, D 128, with the launch parameters the host uses on a GPU (ops.attention_sp: 32 programs, 16-row
# tiles, 4 warps), and its signalling lowers to what the protocol needs (module docstring of
# kernels.attention_sp): program 0's recv_ok raised on the peer (CTA barrier, then one thread's system-scope fence
# and relaxed store), the push's system-scope acquire poll of the peer's recv_ok before the peer's address is taken
# (nvshmem_ptr) and the partial stored there (16-byte stores), the ready signal raised after those stores (barrier,
# fence, store), the tagged system-scope acquire poll of the peer's ready before the merge reads the slots, the
# merged row stored, and the launch's finish_call atomics. Every read of a slot a peer wrote goes through the token
# of the wait that guards it (in the TTGIR the wait's opaque zero is added to part_out / part_lse). Compile-only; the
# simulator runs the op at 1, 2 and 4 ranks (test/python/test_sp_attention_sim.py).
#
# sp_decode_exchange_kernel: part_out, part_lse, out, lse, ready, recv_ok, counter, nrows, num_heads, CAP_O, CAP_L,
#   stride_ob, stride_oh, tag, rank, WORLD, NSIG, D, BLOCK_R, BLOCK_S
# RUN: %compile %s:sp_decode_exchange_kernel -s "*fp32:16, *fp32:16, *bf16:16, *fp32:16, *i64:16, *i64:16, *i64:16, i32, i32, i32:16, i32:16, i32:16, i32:16, i32, i32, 2, 32, 128, 16, 2" --target cuda:90 --num-warps 4 --stage ttgir | filecheck %s --check-prefix=TTGIR
# RUN: %compile %s:sp_decode_exchange_kernel -s "*fp32:16, *fp32:16, *bf16:16, *fp32:16, *i64:16, *i64:16, *i64:16, i32, i32, i32:16, i32:16, i32:16, i32:16, i32, i32, 2, 32, 128, 16, 2" --target cuda:90 --num-warps 4 --stage ptx > %t.ptx
# RUN: filecheck %s --check-prefix=PTX < %t.ptx
# RUN: filecheck %s --check-prefix=WAITS < %t.ptx
# RUN: filecheck %s --check-prefix=SIGNALS < %t.ptx
# RUN: filecheck %s --check-prefix=NOT < %t.ptx
# RUN: %compile %s:sp_decode_exchange_kernel -s "*fp32:16, *fp32:16, *bf16:16, *fp32:16, *i64:16, *i64:16, *i64:16, i32, i32, i32:16, i32:16, i32:16, i32:16, i32, i32, 2, 32, 128, 16, 2" --target hip:gfx942 --num-warps 4 --stage amdgcn | filecheck %s --check-prefix=AMD
#
# ---- In the TTGIR, the tokens of the waits guard the peer address and the merge's reads ----
# TTGIR-LABEL: tt.func public @sp_decode_exchange_kernel(
# TTGIR: %e_call = tt.atomic_rmw add, relaxed, gpu, %counter_ptr
# TTGIR: tt.elementwise_inline_asm "{{.*}}bar.sync 0;{{.*}}membar.sys;{{.*}}st.relaxed.sys.b64
# TTGIR: %[[RTOK:[a-z0-9_]+]] = scf.if %{{[a-z0-9_]+}} -> (i32) {
# TTGIR-NEXT: tt.elementwise_inline_asm "{{.*}}ld.acquire.sys.b64
# TTGIR: %[[DZ:[a-z0-9_]+]] = tt.elementwise_inline_asm "mov.u32 $0, 0;" {{.*}} %[[RTOK]]
# TTGIR-NEXT: tt.addptr %part_out_ptr, %[[DZ]]
# TTGIR: symbol = "nvshmem_ptr"
# TTGIR: tt.addptr %part_lse_ptr, %[[DZ]]
# TTGIR: symbol = "nvshmem_ptr"
# TTGIR: tt.store
# TTGIR: tt.store
# TTGIR: tt.elementwise_inline_asm "{{.*}}bar.sync 0;{{.*}}membar.sys;{{.*}}st.relaxed.sys.b64
# TTGIR: tt.elementwise_inline_asm "{{.*}}ld.acquire.sys.b64
# TTGIR: %[[MZ:[a-z0-9_]+]] = tt.elementwise_inline_asm "mov.u32 $0, 0;" {{.*}}
# TTGIR-NEXT: %[[PARTS:[a-z0-9_]+]] = tt.addptr %part_out_ptr, %[[MZ]]
# TTGIR-NEXT: tt.addptr %part_lse_ptr, %[[MZ]]
# TTGIR: tt.addptr %[[PARTS]]
# TTGIR: tt.store
# TTGIR: tt.atomic_rmw add, acq_rel, gpu
# TTGIR: tt.atomic_rmw exch, release, gpu, %counter_ptr
#
# ---- In the PTX, the order of the protocol's steps ----
# PTX-LABEL: .visible .entry sp_decode_exchange_kernel(
# the epoch: counter[0] read (the atomic add of 0 lowers to a relaxed gpu-scope load)
# PTX: ld.global.gpu.relaxed.b64
# recv_ok on the peer: barrier, system-scope fence, relaxed system-scope store
# PTX: bar.sync 0;
# PTX: @%tdn_p membar.sys;
# PTX-NEXT: @%tdn_p st.relaxed.sys.b64
# the peer's recv_ok polled (system-scope acquire), then its address, then the push (16-byte loads and stores)
# PTX: TDW_SPIN:
# PTX-NEXT: ld.acquire.sys.b64
# PTX: nvshmem_ptr
# PTX: ld.global.v4.b32
# PTX: st.global.v4.b32
# ready on the peer after the stores
# PTX: bar.sync 0;
# PTX: @%tdn_p membar.sys;
# PTX-NEXT: @%tdn_p st.relaxed.sys.b64
# the peer's ready polled, then the merge (the bf16 row stored; its loop's loads follow in the block order)
# PTX: TDW_SPIN:
# PTX-NEXT: ld.acquire.sys.b64
# PTX: st.global.b16
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
# ---- gfx942: rocshmem_ptr (through the GOT), the system-scope release set (L2 writeback, then the swap with the
# system-scope bit), the system-scope acquire poll (sc0 sc1 load, then the invalidate), 16-byte stores ----
# AMD-LABEL: sp_decode_exchange_kernel:
# AMD-DAG: rocshmem_ptr@gotpcrel32@lo+4
# AMD-DAG: buffer_wbl2 sc0 sc1
# AMD-DAG: global_atomic_swap_x2 {{v\[[0-9]+:[0-9]+\]}}, {{[av]\[[0-9]+:[0-9]+\]}}, off sc1
# AMD-DAG: global_load_dwordx2 {{v\[[0-9]+:[0-9]+\]}}, {{v\[[0-9]+:[0-9]+\]}}, off sc0 sc1
# AMD-DAG: buffer_inv sc0 sc1
# AMD-DAG: global_store_dwordx4

from triton_dist.kernels.attention_sp import sp_decode_exchange_kernel  # noqa: F401
