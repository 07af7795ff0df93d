# dl.symm_at: the scalar base is translated once (nvshmem_ptr / rocshmem_ptr, pointers passed as 64-bit
# addresses) and re-marked 16-byte aligned, so loads through base + offsets stay 128-bit vector loads.
# The NVIDIA run assembles relocatable code (the NVSHMEM bitcode is not linked here); the AMD one assembles an hsaco
# that keeps rocshmem_ptr as an undefined symbol (no rocSHMEM bitcode here).
#
# RUN: env TRITON_DIST_NO_SHMEM_BITCODE=1 PTXAS_OPTIONS=-c %compile %s:symm_load -s "*fp32:16, *fp32:16, i32, 1024" --target cuda:90 --stage llir | filecheck %s --check-prefix=LLIR
# RUN: env TRITON_DIST_NO_SHMEM_BITCODE=1 PTXAS_OPTIONS=-c %compile %s:symm_load -s "*fp32:16, *fp32:16, i32, 1024" --target cuda:90 --stage ptx | filecheck %s --check-prefix=PTX
# RUN: env TRITON_DIST_NO_SHMEM_BITCODE=1 %compile %s:symm_load -s "*fp32:16, *fp32:16, i32, 1024" --target hip:gfx942 --stage amdgcn | filecheck %s --check-prefix=AMD
#
# LLIR: [[PE:%.*]] = {{(tail )?}}call i64 @nvshmem_ptr(i64 {{%.*}}, i32 {{%.*}})
# LLIR: inttoptr i64 [[PE]] to ptr addrspace(1)
# LLIR: ld.global.v4.b32
#
# PTX: call.uni (retval0), nvshmem_ptr, (param0, param1);
# PTX: ld.global.v4.b32
# PTX-NOT: ld.global.b32
# PTX: st.global.v4.b32
#
# AMD: s_add_u32 {{s[0-9]+}}, {{s[0-9]+}}, rocshmem_ptr@gotpcrel32@lo+4
# AMD: s_swappc_b64
# AMD: buffer_load_dwordx4
# AMD-NOT: buffer_load_dword {{v[0-9]+}},
# AMD: buffer_store_dwordx4
import triton
import triton.language as tl

import triton_dist.language as dl


@triton.jit
def symm_load(x, out, peer, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    remote = dl.symm_at(x, peer)
    tl.store(out + offs, tl.load(remote + offs))
