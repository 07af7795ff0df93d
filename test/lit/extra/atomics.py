# atomic_add / atomic_cas: per-thread atomics with scope and ordering.
#
# RUN: %compile %s:add_k -s "*i32, *i32" -D SCOPE=gpu -D SEM=acq_rel --target cuda:90 --stage ptx | filecheck %s --check-prefix=PTX-ADD
# RUN: %compile %s:add_k -s "*i64, *i64" -D SCOPE=sys -D SEM=relaxed --target cuda:90 --stage ptx | filecheck %s --check-prefix=PTX-ADD64
# RUN: %compile %s:add_k -s "*fp32, *fp32" -D SCOPE=cta -D SEM=release --target cuda:90 --stage ptx | filecheck %s --check-prefix=PTX-FADD
# RUN: %compile %s:cas_k -s "*i32, *i32" -D SCOPE=gpu -D SEM=acquire --target cuda:90 --stage ptx | filecheck %s --check-prefix=PTX-CAS
# RUN: %compile %s:cas_k -s "*i64, *i64" -D SCOPE=sys -D SEM=acq_rel --target cuda:90 --stage ptx | filecheck %s --check-prefix=PTX-CAS64
# RUN: %compile %s:add_k -s "*i32, *i32" -D SCOPE=gpu -D SEM=acq_rel --target hip:gfx942 --stage amdgcn | filecheck %s --check-prefix=GCN-ADD
# RUN: %compile %s:add_k -s "*i32, *i32" -D SCOPE=sys -D SEM=relaxed --target hip:gfx942 --stage amdgcn | filecheck %s --check-prefix=GCN-ADD-SYS
# RUN: %compile %s:cas_k -s "*i32, *i32" -D SCOPE=gpu -D SEM=acquire --target hip:gfx942 --stage amdgcn | filecheck %s --check-prefix=GCN-CAS
#
# PTX-ADD: atom.acq_rel.gpu.global.add.u32 [[OLD:%r[0-9]+]], [{{%rd[0-9]+}}], {{%r[0-9]+}};
# PTX-ADD: st.relaxed.gpu.global.b32 [{{%rd[0-9]+}}], [[OLD]];
# PTX-ADD64: atom.relaxed.sys.global.add.u64
# PTX-FADD: atom.release.cta.global.add.f32
# PTX-CAS: atom.acquire.gpu.global.cas.b32 [[OLD:%r[0-9]+]], [{{%rd[0-9]+}}], {{%r[0-9]+}}, {{%r[0-9]+}};
# PTX-CAS: st.relaxed.gpu.global.b32 [{{%rd[0-9]+}}], [[OLD]];
# PTX-CAS64: atom.acq_rel.sys.global.cas.b64
#
# GCN-ADD: buffer_wbl2 sc1
# GCN-ADD-NEXT: s_waitcnt vmcnt(0) lgkmcnt(0)
# GCN-ADD-NEXT: global_atomic_add [[OLD:v[0-9]+]], {{v\[[0-9]+:[0-9]+\]}}, {{v[0-9]+}}, off sc0
# GCN-ADD-NEXT: s_waitcnt vmcnt(0)
# GCN-ADD-NEXT: buffer_inv sc1
# GCN-ADD: global_store_dword {{.*}}, [[OLD]], off sc1
# GCN-ADD-SYS-NOT: buffer_wbl2
# GCN-ADD-SYS: global_atomic_add {{v[0-9]+}}, {{v\[[0-9]+:[0-9]+\]}}, {{v[0-9]+}}, off sc0 sc1
# GCN-ADD-SYS-NOT: buffer_inv
# GCN-CAS: global_atomic_cmpswap {{v[0-9]+}}, {{v\[[0-9]+:[0-9]+\]}}, {{v\[[0-9]+:[0-9]+\]}}, off sc0
# GCN-CAS-NEXT: s_waitcnt vmcnt(0)
# GCN-CAS-NEXT: buffer_inv sc1
import triton
import triton.language as tl

from triton_dist.language.extra.language_extra import atomic_add, atomic_cas, st


@triton.jit
def add_k(p, out, SCOPE: tl.constexpr, SEM: tl.constexpr):
    old = atomic_add(p, 3, SCOPE, SEM)
    st(out, old)


@triton.jit
def cas_k(p, out, SCOPE: tl.constexpr, SEM: tl.constexpr):
    old = atomic_cas(p, 0, 1, SCOPE, SEM)
    st(out, old)
