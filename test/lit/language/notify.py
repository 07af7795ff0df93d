# dl.notify: a CTA barrier, then ONE thread fences and raises the 64-bit signal. On sm_90+ every thread first waits
# for its bulk asynchronous copies (TMA stores of tensor-descriptor stores) to complete, writes included.
#
# RUN: %compile %s:notify_kernel -s "*i64:16, i32, 'gpu', 'set'" --target cuda:90 --stage ptx | filecheck %s --check-prefix=GPUSET
# RUN: %compile %s:notify_kernel -s "*i64:16, i32, 'gpu', 'add'" --target cuda:90 --stage cubin -o %t.cubin
# RUN: %compile %s:notify_kernel -s "*i64:16, i32, 'gpu', 'add'" --target cuda:90 --stage ptx | filecheck %s --check-prefix=GPUADD
# RUN: env TRITON_DIST_NO_SHMEM_BITCODE=1 PTXAS_OPTIONS=-c %compile %s:notify_kernel -s "*i64:16, i32, 'intra_node', 'set'" --target cuda:90 --stage ptx | filecheck %s --check-prefix=INTRASET
# RUN: env TRITON_DIST_NO_SHMEM_BITCODE=1 PTXAS_OPTIONS=-c %compile %s:notify_kernel -s "*u64:16, i32, 'intra_node', 'add'" --target cuda:90 --stage ptx | filecheck %s --check-prefix=INTRAADD
# RUN: env TRITON_DIST_NO_SHMEM_BITCODE=1 PTXAS_OPTIONS=-c %compile %s:notify_kernel -s "*i64:16, i32, 'inter_node', 'add'" --target cuda:90 --stage ptx | filecheck %s --check-prefix=INTER
# RUN: %compile %s:notify_kernel -s "*i64:16, i32, 'gpu', 'set'" --target cuda:80 --stage ptx | filecheck %s --check-prefix=SM80
# RUN: %compile %s:notify_kernel -s "*i64:16, i32, 'gpu', 'set'" --target hip:gfx942 --stage amdgcn | filecheck %s --check-prefix=AMDGPU
# RUN: env TRITON_DIST_NO_SHMEM_BITCODE=1 %compile %s:notify_kernel -s "*i64:16, i32, 'intra_node', 'add'" --target hip:gfx942 --stage amdgcn | filecheck %s --check-prefix=AMDINTRA
# RUN: env TRITON_DIST_NO_SHMEM_BITCODE=1 %compile %s:notify_kernel -s "*i64:16, i32, 'inter_node', 'set'" --target hip:gfx942 --stage amdgcn | filecheck %s --check-prefix=AMDINTER
#
# GPUSET: cp.async.bulk.wait_group 0;
# GPUSET-NEXT: bar.sync 0;
# GPUSET-NEXT: mov.u32 %tdn_t, %tid.x;
# GPUSET-NEXT: setp.eq.u32 %tdn_p, %tdn_t, 0;
# GPUSET-NEXT: @%tdn_p membar.gl;
# GPUSET-NEXT: @%tdn_p st.relaxed.gpu.b64 [%rd{{[0-9]+}}], %rd{{[0-9]+}};
#
# GPUADD: cp.async.bulk.wait_group 0;
# GPUADD-NEXT: bar.sync 0;
# GPUADD: @%tdn_p membar.gl;
# GPUADD-NEXT: @%tdn_p atom.relaxed.gpu.add.u64
#
# sm_80 has no bulk asynchronous copies: no wait for them.
# SM80-NOT: cp.async.bulk
# SM80: bar.sync 0;
# SM80-NOT: cp.async.bulk
#
# The peer address comes from nvshmem_ptr; system-scope fence and store.
# INTRASET: call.uni (retval0), nvshmem_ptr, (param0, param1);
# INTRASET: bar.sync 0;
# INTRASET: @%tdn_p membar.sys;
# INTRASET-NEXT: @%tdn_p st.relaxed.sys.b64
#
# INTRAADD: nvshmem_ptr
# INTRAADD: @%tdn_p membar.sys;
# INTRAADD-NEXT: @%tdn_p atom.relaxed.sys.add.u64
#
# inter_node: barrier + system fence, then thread 0 calls nvshmemx_signal_op(sig, value, NVSHMEM_SIGNAL_ADD=10, pe).
# INTER: cp.async.bulk.wait_group 0;
# INTER-NEXT: bar.sync 0;
# INTER-NEXT: membar.sys;
# INTER: mov.u32 [[TID:%r[0-9]+]], %tid.x;
# INTER: setp.ne.b32 [[P:%p[0-9]+]], [[TID]], 0;
# INTER: st.param.b32 [param2], 10;
# INTER: call.uni (retval0), nvshmemx_signal_op, (param0, param1, param2, param3);
#
# AMD: workgroup barrier, then release atomics (L2 writeback before the atomic) at agent scope.
# AMDGPU: s_waitcnt vmcnt(0) lgkmcnt(0)
# AMDGPU: s_barrier
# AMDGPU: buffer_wbl2 sc1
# AMDGPU: global_atomic_swap_x2
#
# intra_node: the peer address from rocshmem_ptr (unresolved here: called through the GOT), the barrier, then
# thread 0's system-scope release add: L2 writeback, then the atomic with the system-scope bit.
# AMDINTRA: rocshmem_ptr@gotpcrel32@lo+4
# AMDINTRA: s_swappc_b64
# AMDINTRA: v_cmp_eq_u32_e32 vcc, 0, v{{[0-9]+}}
# AMDINTRA: s_barrier
# AMDINTRA-NEXT: s_and_saveexec_b64 {{s\[[0-9]+:[0-9]+\]}}, vcc
# AMDINTRA: buffer_wbl2 sc0 sc1
# AMDINTRA-NEXT: global_atomic_add_x2 {{v\[[0-9]+:[0-9]+\]}}, {{v\[[0-9]+:[0-9]+\]}}, off sc1
#
# inter_node: every thread's wait, the barrier, the system-scope release fence, then thread 0 calls
# rocshmem_signal_set.
# AMDINTER: s_waitcnt vmcnt(0) lgkmcnt(0)
# AMDINTER: s_barrier
# AMDINTER-NOT: rocshmem_signal_set
# AMDINTER: buffer_wbl2 sc0 sc1
# AMDINTER-NEXT: s_waitcnt vmcnt(0) lgkmcnt(0)
# AMDINTER: v_cmp_eq_u32_e32 vcc, 0, v{{[0-9]+}}
# AMDINTER: s_and_saveexec_b64
# AMDINTER: rocshmem_signal_set@gotpcrel32@lo+4
# AMDINTER: s_swappc_b64
import triton
import triton.language as tl

import triton_dist.language as dl


@triton.jit
def notify_kernel(sig, peer, SCOPE: tl.constexpr, OP: tl.constexpr):
    dl.notify(sig, peer, 1, OP, SCOPE)
