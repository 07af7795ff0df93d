# Tiles indexed per thread inside simt_exec_region (`out[j, i] = tile[i, j]`): both tiles are stored to the SIMT
# tile scratch (one static shared buffer: CUDA shared memory / AMD LDS) between two barriers, each thread reads and
# writes single elements there, and `out` is loaded back after a barrier.
#
# RUN: %compile %s:transpose -s "*fp32:16, *fp32:16, 32" --target cuda:90 --stage ptx | filecheck %s --check-prefix=PTX
# RUN: %compile %s:transpose -s "*fp32:16, *fp32:16, 32" --target cuda:90 --stage cubin -o %t.cubin
# RUN: %compile %s:transpose -s "*fp32:16, *fp32:16, 32" --target hip:gfx942 --stage amdgcn | filecheck %s --check-prefix=GCN
#
# PTX-LABEL: .entry transpose
# PTX: .shared .align 16 .b8 triton_dist_simt_scratch[8192];
# PTX: bar.sync
# PTX: st.volatile.shared.b32
# PTX: bar.sync
# PTX: ld.volatile.shared.b32
# PTX: st.volatile.shared.b32
# PTX: bar.sync
# PTX: ld.volatile.shared.b32
# PTX-NOT: call.uni
#
# GCN-LABEL: transpose:
# GCN: s_barrier
# GCN: ds_write_b32
# GCN: s_barrier
# GCN: ds_read_b32
# GCN: ds_write_b32
# GCN: s_barrier
# GCN: ds_read_b32
# GCN: .amdhsa_group_segment_fixed_size 8192
import triton
import triton.language as tl

import triton_dist.language as dl


@triton.jit
def transpose(src, dst, T: tl.constexpr):
    rows = tl.arange(0, T)
    tile = tl.load(src + rows[:, None] * T + rows[None, :])
    out = tl.zeros((T, T), tl.float32)
    with dl.simt_exec_region() as (t, n):
        for i in range(T):
            for j in range(t, T, n):
                out[j, i] = tile[i, j]
    tl.store(dst + rows[:, None] * T + rows[None, :], out)
