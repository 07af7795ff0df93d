# `with simt_exec_region() as (tid, n)`: per-thread code with a per-thread branch, stores executed by every thread.
#
# RUN: %compile %s:branchy -s "*i32" --target cuda:90 --stage ptx | filecheck %s --check-prefix=PTX
# RUN: %compile %s:branchy -s "*i32" --target hip:gfx942 --stage amdgcn | filecheck %s --check-prefix=GCN
# RUN: %compile %s:count -s "*i32" --target cuda:90 --stage ptx --num-warps 8 | filecheck %s --check-prefix=PTX-N
# RUN: %compile %s:count -s "*i32" --target hip:gfx942 --stage amdgcn --num-warps 8 | filecheck %s --check-prefix=GCN-N
#
# The thread index comes from %tid.x; the branch is on it; both stores are per-thread st.relaxed.gpu and the
# barrier is ONE bar.sync 0 after the branches rejoin (a non-convergent barrier could be duplicated into both
# sides, which hangs). No thread-0 predicate guards the stores (a scalar tl.store would have one).
# PTX-LABEL: .entry branchy
# PTX: mov.u32 [[TID:%r[0-9]+]], %tid.x;
# PTX: and.b32 {{%r[0-9]+}}, [[TID]], 1;
# PTX: st.relaxed.gpu.global.b32 [{{%rd[0-9]+}}], [[TID]];
# PTX: neg.s32 [[NEG:%r[0-9]+]], [[TID]];
# PTX: st.relaxed.gpu.global.b32 [{{%rd[0-9]+}}], [[NEG]];
# PTX: bar.sync {{[ \t]*}}0;
# PTX-NOT: bar.sync
# PTX-NOT: %tid.y
#
# AMD: workitem id in v0, a divergent (exec-masked) branch, agent-scope stores (sc1) and a barrier.
# GCN-LABEL: branchy:
# GCN: v_and_b32_e32 {{v[0-9]+}}, 1, v0
# GCN: s_and_saveexec_b64
# GCN: global_store_dword {{v\[[0-9]+:[0-9]+\]}}, {{v[0-9]+}}, off sc1
# GCN: global_store_dword {{v\[[0-9]+:[0-9]+\]}}, {{v[0-9]+}}, off sc1
# GCN: s_barrier
# GCN-NOT: s_barrier
#
# num_threads is num_warps * warp size of the TARGET: 8 * 32 on NVIDIA, 8 * 64 on AMD CDNA.
# PTX-N-LABEL: .entry count
# PTX-N: mov.b32 {{%r[0-9]+}}, 256;
# PTX-N: st.relaxed.gpu.global.b32
# GCN-N-LABEL: count:
# GCN-N: 0x200
# GCN-N: global_store_dword
import triton

from triton_dist.language.extra.language_extra import __syncthreads, st
from triton_dist.language.simt import simt_exec_region


@triton.jit
def branchy(out):
    with simt_exec_region() as (tid, num_threads):
        if tid % 2 == 0:
            st(out + tid, tid)
        else:
            st(out + tid, -tid)
        __syncthreads()


@triton.jit
def count(out):
    with simt_exec_region() as (tid, num_threads):
        if tid == 0:
            st(out, num_threads)
