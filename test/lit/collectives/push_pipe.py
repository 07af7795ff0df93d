# The pipelined push collectives' kernels (triton_dist.kernels.allgather.allgather_push_pipe_kernel and
# triton_dist.kernels.reduce_scatter.reduce_scatter_push_pipe_kernel: ops' method "push_pipe", and the two halves of
# all_reduce's "two_shot_pipe") compile for both targets at WORLD=2, bf16, 16 segments, and their signalling lowers
# to what the protocol needs (docstring of allgather_push_pipe_kernel): a pusher first polls every peer's done
# signal of the previous call (system-scope acquire) before it takes the peer's address (nvshmem_ptr /
# rocshmem_ptr) and stores its blocks there, then raises the segment's ready signal on the peer (CTA barrier, then
# one thread's system-scope fence and relaxed store); a copier polls the pushers' ready signals with the tag check
# (system-scope acquire; a tag of another call size traps, never matches) before it reads the slot. Compile-only in
# CI's Triton matrix (lit.cfg.py); the simulator runs both kernels at 2 and 4 ranks in the pinned tier
# (test/python/test_collectives_sim.py::test_push_pipe; the matrix leaves that test out and relies on these lines),
# the GPU tier on H100 / H200 (test/python/gpu/test_gpu_collectives.py::test_push_pipe).
#
# (x, out, buf, ready, done, counter, N, CAP, tag, npush, seg_blocks, rank, WORLD, SEG, BLOCK)
# RUN: %compile triton_dist.kernels.allgather:allgather_push_pipe_kernel -s "*bf16:16, *bf16:16, *bf16:16, *i64:16, *i64:16, *i64:16, i32, i32, i32, i32, i32, i32, 2, 16, 1024" --target cuda:90 --num-warps 4 --stage ptx > %t.ag.ptx
# RUN: filecheck %s --check-prefix=AG < %t.ag.ptx
# RUN: filecheck %s --check-prefix=AG-WAITS < %t.ag.ptx
# RUN: filecheck %s --check-prefix=AG-TRAP < %t.ag.ptx
# RUN: filecheck %s --check-prefix=AG-SIGNAL < %t.ag.ptx
# RUN: filecheck %s --check-prefix=NOT < %t.ag.ptx
# RUN: %compile triton_dist.kernels.reduce_scatter:reduce_scatter_push_pipe_kernel -s "*bf16:16, *bf16:16, *bf16:16, *i64:16, *i64:16, *i64:16, i32, i32, i32, i32, i32, i32, 2, 16, 1024" --target cuda:90 --num-warps 4 --stage ptx > %t.rs.ptx
# RUN: filecheck %s --check-prefix=RS < %t.rs.ptx
# RUN: filecheck %s --check-prefix=RS-WAITS < %t.rs.ptx
# RUN: filecheck %s --check-prefix=RS-TRAP < %t.rs.ptx
# RUN: filecheck %s --check-prefix=NOT < %t.rs.ptx
# RUN: %compile triton_dist.kernels.allgather:allgather_push_pipe_kernel -s "*bf16:16, *bf16:16, *bf16:16, *i64:16, *i64:16, *i64:16, i32, i32, i32, i32, i32, i32, 2, 16, 1024" --target hip:gfx942 --num-warps 4 --stage amdgcn | filecheck %s --check-prefix=AMD
# RUN: %compile triton_dist.kernels.reduce_scatter:reduce_scatter_push_pipe_kernel -s "*bf16:16, *bf16:16, *bf16:16, *i64:16, *i64:16, *i64:16, i32, i32, i32, i32, i32, i32, 2, 16, 1024" --target hip:gfx942 --num-warps 4 --stage amdgcn | filecheck %s --check-prefix=AMD
#
# Pusher (laid out first): the done poll of the previous call, then the peer's address and the stores.
# AG-LABEL: .visible .entry allgather_push_pipe_kernel(
# AG: TDW_SPIN:
# AG-NEXT: ld.acquire.sys.b64
# AG: nvshmem_ptr.exit
# AG: st.global
# Exactly two polls at WORLD=2 (the pusher's done, the copier's ready), the copier's tagged one trapping on a wrong
# tag; the ready signals raised by one thread after a CTA barrier and a system-scope fence.
# AG-WAITS-COUNT-2: ld.acquire.sys.b64
# AG-WAITS-NOT: ld.acquire.sys.b64
# AG-TRAP: trap;
# AG-SIGNAL: bar.sync 0;
# AG-SIGNAL: @%tdn_p membar.sys;
# AG-SIGNAL-NEXT: @%tdn_p st.relaxed.sys.b64
#
# RS-LABEL: .visible .entry reduce_scatter_push_pipe_kernel(
# RS: TDW_SPIN:
# RS-NEXT: ld.acquire.sys.b64
# RS: nvshmem_ptr.exit
# RS: @%tdn_p membar.sys;
# RS-NEXT: @%tdn_p st.relaxed.sys.b64
# RS-WAITS-COUNT-2: ld.acquire.sys.b64
# RS-WAITS-NOT: ld.acquire.sys.b64
# RS-TRAP: trap;
#
# No gpu-scope or relaxed poll of a peer's signal, no system-scope atomic, no bounded-wait timer (unset here).
# NOT-NOT: ld.acquire.gpu
# NOT-NOT: ld.relaxed.sys
# NOT-NOT: atom.global.sys
# NOT-NOT: globaltimer
#
# gfx942: the peer's address through rocshmem_ptr, the system-scope acquire poll (sc0 sc1 load, then the
# invalidate) and release (L2 writeback before the signal's store).
# AMD-DAG: rocshmem_ptr@gotpcrel32@lo+4
# AMD-DAG: buffer_inv sc0 sc1
# AMD-DAG: buffer_wbl2 sc0 sc1
# AMD-DAG: global_load_dwordx2 {{v\[[0-9]+:[0-9]+\]}}, {{.*}} sc0 sc1
