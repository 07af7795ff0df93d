# dl.rank / dl.num_ranks: SHMEM queries (extern calls). The kernel is a plain @triton.jit: `import triton_dist` links
# the SHMEM device bitcode into it (runtime/shmem_link.py), so it assembles to a cubin and its PTX reads NVSHMEM's
# device state (LINKED); TRITON_DIST_NO_SHMEM_BITCODE=1 keeps the calls unresolved for the NV / PTX checks.
#
# RUN: env TRITON_DIST_NO_SHMEM_BITCODE=1 PTXAS_OPTIONS=-c %compile %s:rank_kernel -s "*i32" --target cuda:90 --stage llir | filecheck %s --check-prefix=NV
# RUN: env TRITON_DIST_NO_SHMEM_BITCODE=1 PTXAS_OPTIONS=-c %compile %s:rank_kernel -s "*i32" --target cuda:90 --stage ptx | filecheck %s --check-prefix=PTX
# RUN: env TRITON_DIST_NO_SHMEM_BITCODE=1 %compile %s:rank_kernel -s "*i32" --target hip:gfx942 --stage amdgcn | filecheck %s --check-prefix=AMD
# RUN: %compile %s:rank_kernel -s "*i32" --target cuda:90 --stage cubin -o %t.cubin
# RUN: %compile %s:rank_kernel -s "*i32" --target cuda:90 --stage ptx | filecheck %s --check-prefix=LINKED
#
# NV-DAG: declare {{.*}}i32 @nvshmem_my_pe()
# NV-DAG: declare {{.*}}i32 @nvshmem_n_pes()
# NV: call i32 @nvshmem_my_pe()
# NV: call i32 @nvshmem_n_pes()
# PTX: call.uni (retval0), nvshmem_my_pe, ();
# PTX: call.uni (retval0), nvshmem_n_pes, ();
# AMD (no rocSHMEM bitcode here: calls through the GOT, the hsaco keeps the functions as undefined symbols):
# AMD: s_add_u32 {{s[0-9]+}}, {{s[0-9]+}}, rocshmem_my_pe@gotpcrel32@lo+4
# AMD: s_swappc_b64
# AMD: s_add_u32 {{s[0-9]+}}, {{s[0-9]+}}, rocshmem_n_pes@gotpcrel32@lo+4
# AMD: s_swappc_b64
# LINKED-NOT: call.uni (retval0), nvshmem_my_pe
# LINKED: ld.const.b32 {{.*}}[nvshmemi_device_state_d
import triton
import triton.language as tl

import triton_dist.language as dl


@triton.jit
def rank_kernel(out):
    tl.store(out, dl.rank())
    tl.store(out + 1, dl.num_ranks())
