# Bounded-wait mode: TRITON_DIST_BOUNDED_WAIT=<ms> at compile time adds a timer to the spin, a report
# (rank, program id, address, expected, seen) and a trap. Off (unset), the spin has no timer read at all
# (see wait.py: no globaltimer / s_memrealtime). Calls nvshmem_my_pe / rocshmem_my_pe for the report, so the
# NVIDIA run assembles relocatable code (PTXAS_OPTIONS=-c) and the AMD one an hsaco that keeps rocshmem_my_pe
# undefined (no rocSHMEM bitcode); its AMDGCN blocks are laid out in another order (hence -DAG).
# TRITON_ALWAYS_COMPILE: the env var is not in Triton's own cache key.
#
# RUN: env TRITON_ALWAYS_COMPILE=1 TRITON_DIST_BOUNDED_WAIT=250 TRITON_DIST_NO_SHMEM_BITCODE=1 PTXAS_OPTIONS=-c %compile %s:bounded_kernel -s "*i64:16, i32" --target cuda:90 --stage ptx | filecheck %s --check-prefix=PTX
# RUN: env TRITON_ALWAYS_COMPILE=1 TRITON_DIST_BOUNDED_WAIT=250 TRITON_DIST_NO_SHMEM_BITCODE=1 %compile %s:bounded_kernel -s "*i32:16, i32" --target hip:gfx942 --stage amdgcn | filecheck %s --check-prefix=AMD
# RUN: env TRITON_ALWAYS_COMPILE=1 TRITON_DIST_BOUNDED_WAIT=0 %compile %s:bounded_kernel -s "*i64:16, i32" --target cuda:90 --stage ptx | filecheck %s --check-prefix=OFF
#
# PTX: mov.u64 %tdw_t0, %globaltimer;
# PTX: ld.acquire.sys.b64
# PTX: mov.u64 %tdw_t1, %globaltimer;
# PTX: setp.gt.u64 %tdw_p2, %tdw_t1, 250000000;
# PTX: nvshmem_my_pe
# PTX: vprintf
# PTX: trap;
#
# AMD-DAG: s_memrealtime
# AMD-DAG: global_load_dword {{v[0-9]+}}, {{v\[[0-9]+:[0-9]+\]}}, off sc0 sc1
# 250 ms of the 100 MHz counter: 25000000 = 0x17d7840
# AMD-DAG: v_mov_b64_e32 [[BOUND:v.[0-9]+:[0-9]+.]], 0x17d7840
# AMD-DAG: v_cmp_gt_i64_e64 {{s\[[0-9]+:[0-9]+\]}}, {{s\[[0-9]+:[0-9]+\]}}, [[BOUND]]
# AMD-DAG: rocshmem_my_pe@gotpcrel32@lo
# AMD-DAG: s_trap 2
#
# OFF-NOT: globaltimer
# OFF-NOT: trap;
# OFF: ld.acquire.sys.b64
import triton

import triton_dist.language as dl


@triton.jit
def bounded_kernel(sig, n):
    dl.wait(sig, n, "sys", "acquire")
