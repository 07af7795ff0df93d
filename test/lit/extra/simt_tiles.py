# Tiles indexed per thread inside simt_exec_region (`out[j, i] = tile[i, j]`): both tiles are stored to the SIMT
# tile scratch (one static shared buffer: CUDA shared memory / AMD LDS) between two barriers, each thread reads and
# writes single elements there, and `out` is loaded back after a barrier.
#
# RUN: %compile %s:transpose_tile -s "*fp32:16, *fp32:16, 32" --target cuda:90 --stage ptx | filecheck %s --check-prefix=PTX
# RUN: %compile %s:transpose_tile -s "*fp32:16, *fp32:16, 32" --target cuda:90 --stage cubin -o %t.cubin
# RUN: %compile %s:transpose_tile -s "*fp32:16, *fp32:16, 32" --target hip:gfx942 --stage amdgcn | filecheck %s --check-prefix=GCN
#
# PTX-LABEL: .entry transpose_tile
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
# GCN-LABEL: transpose_tile:
# GCN: s_barrier
# GCN: ds_write_b32
# GCN: s_barrier
# GCN: ds_read_b32
# GCN: ds_write_b32
# GCN: s_barrier
# GCN: ds_read_b32
# GCN: .amdhsa_group_segment_fixed_size 8192
# The kernel is the one test_simt_tiles.py runs on the simulator (test/python/_simt_tile_kernels.py).
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))

from _simt_tile_kernels import transpose_tile  # noqa: E402,F401
