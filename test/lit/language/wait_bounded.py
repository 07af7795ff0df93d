# Bounded-wait mode: TRITON_DIST_BOUNDED_WAIT=<ms> at compile time adds a timer to the spin, a report
# (rank, program id, address, expected, seen) and a trap. Off (unset), the spin has no timer read at all
# (see wait.py: no globaltimer / s_memrealtime). Calls nvshmem_my_pe / rocshmem_my_pe for the report, so the
# NVIDIA run assembles relocatable code (PTXAS_OPTIONS=-c) and the AMD run stops at LLVM IR.
# TRITON_ALWAYS_COMPILE: the env var is not in Triton's own cache key.
#
# RUN: env TRITON_ALWAYS_COMPILE=1 TRITON_DIST_BOUNDED_WAIT=250 TRITON_DIST_NO_SHMEM_BITCODE=1 PTXAS_OPTIONS=-c %compile %s:bounded_kernel -s "*i64:16, i32" --target cuda:90 --stage ptx | filecheck %s --check-prefix=PTX
# RUN: env TRITON_ALWAYS_COMPILE=1 TRITON_DIST_BOUNDED_WAIT=250 %compile %s:bounded_kernel -s "*i32:16, i32" --target hip:gfx942 --stage llir --stop-after llir | filecheck %s --check-prefix=AMD
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
# AMD: s_memrealtime
# AMD: global_load_dword $0, $1, off sc0 sc1
# AMD: icmp sgt i64 {{.*}}, 25000000
# AMD: rocshmem_my_pe
# AMD: s_trap 2
#
# OFF-NOT: globaltimer
# OFF-NOT: trap;
# OFF: ld.acquire.sys.b64
import triton

import triton_dist.language as dl


@triton.jit
def bounded_kernel(sig, n):
    dl.wait(sig, n, "sys", "acquire")
