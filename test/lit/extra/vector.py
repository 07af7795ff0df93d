# ld_vector / st_vector use 128-bit accesses when the width allows; pack / unpack move register halves.
#
# RUN: %compile %s:copy8 -s "*fp16:16, *fp16:16" -D SCOPE=gpu -D SEM=acquire -D SSEM=release --target cuda:90 --stage ptx | filecheck %s --check-prefix=PTX-V4
# RUN: %compile %s:copy8 -s "*fp16:16, *fp16:16" -D SCOPE=sys -D SEM=relaxed -D SSEM=relaxed --target cuda:90 --stage ptx | filecheck %s --check-prefix=PTX-V4-SYS
# RUN: %compile %s:copy8 -s "*fp16:16, *fp16:16" -D SCOPE=gpu -D SEM=volatile -D SSEM=volatile --target cuda:90 --stage ptx | filecheck %s --check-prefix=PTX-V4-VOL
# RUN: %compile %s:copy3 -s "*i32, *i32" --target cuda:90 --stage ptx | filecheck %s --check-prefix=PTX-V3
# RUN: %compile %s:packer -s "*i32, *i64" --target cuda:90 --stage ptx | filecheck %s --check-prefix=PTX-PACK
# RUN: %compile %s:copy8 -s "*fp16:16, *fp16:16" -D SCOPE=gpu -D SEM=acquire -D SSEM=release --target hip:gfx942 --stage amdgcn | filecheck %s --check-prefix=GCN-V4
# RUN: %compile %s:copy3 -s "*i32, *i32" --target hip:gfx942 --stage amdgcn | filecheck %s --check-prefix=GCN-V3
#
# 8 x fp16 = 128 bits: one v4.b32 load and one v4.b32 store, with the requested ordering.
# PTX-V4: ld.acquire.gpu.global.v4.b32 {[[A:%r[0-9]+]], [[B:%r[0-9]+]], [[C:%r[0-9]+]], [[D:%r[0-9]+]]}, [{{.*}}];
# PTX-V4: st.release.gpu.global.v4.b32 [{{%rd[0-9]+}}], {[[A]], [[B]], [[C]], [[D]]};
# PTX-V4-NOT: ld.global.b16
# PTX-V4-SYS: ld.relaxed.sys.global.v4.b32
# PTX-V4-SYS: st.relaxed.sys.global.v4.b32
# PTX-V4-VOL: ld.volatile.global.v4.b32
# PTX-V4-VOL: st.volatile.global.v4.b32
# 3 x i32 = 96 bits: three scalar accesses.
# PTX-V3-COUNT-3: ld.relaxed.gpu.global.b32
# PTX-V3-NOT: .v4.
# PTX-V3-COUNT-3: st.relaxed.gpu.global.b32
# pack 2 x i32 -> i64 and back
# PTX-PACK: mov.b64 [[P:%rd[0-9]+]], {{[{]}}{{%r[0-9]+}}, {{%r[0-9]+}}{{[}]}};
# PTX-PACK: st.relaxed.gpu.global.b64 [{{%rd[0-9]+}}], [[P]];
# PTX-PACK: mov.b64 {{[{]}}{{%r[0-9]+}}, {{%r[0-9]+}}{{[}]}}, [[P]];
#
# GCN-V4: global_load_dwordx4 v[0:3], {{v\[[0-9]+:[0-9]+\]}}, off sc1
# GCN-V4-NEXT: s_waitcnt vmcnt(0)
# GCN-V4-NEXT: buffer_inv sc1
# GCN-V4: buffer_wbl2 sc1
# GCN-V4-NEXT: s_waitcnt vmcnt(0) lgkmcnt(0)
# GCN-V4-NEXT: global_store_dwordx4 {{v\[[0-9]+:[0-9]+\]}}, v[0:3], off sc1
# GCN-V3-COUNT-3: global_load_dword {{v[0-9]+}}
# GCN-V3-NOT: dwordx4
import triton
import triton.language as tl

from triton_dist.language.extra.language_extra import ld_vector, pack, st, st_vector, unpack
from triton_dist.language.simt import make_vector


@triton.jit
def copy8(src, dst, SCOPE: tl.constexpr, SEM: tl.constexpr, SSEM: tl.constexpr):
    v = ld_vector(src, 8, SCOPE, SEM)
    st_vector(dst, v, SCOPE, SSEM)


@triton.jit
def copy3(src, dst):
    v = ld_vector(src, 3)
    st_vector(dst, v)


@triton.jit
def packer(src, dst):
    a = ld_vector(src, 2)
    p = pack(make_vector([a[0], a[1]]), tl.int64)
    st(dst, p)
    back = unpack(p, tl.int32)
    st_vector(src, back)
