# ld / st with every scope and semantic: PTX qualifiers on NVIDIA, memory-model sequences on AMD gfx942 / gfx90a.
#
# RUN: %compile %s:ld_k -s "*i32, *i32" -D SCOPE=gpu -D SEM=acquire --target cuda:90 --stage ptx | filecheck %s --check-prefix=PTX-LD-ACQ-GPU
# RUN: %compile %s:ld_k -s "*i32, *i32" -D SCOPE=sys -D SEM=relaxed --target cuda:90 --stage ptx | filecheck %s --check-prefix=PTX-LD-RLX-SYS
# RUN: %compile %s:ld_k -s "*i64, *i64" -D SCOPE=cta -D SEM=volatile --target cuda:90 --stage ptx | filecheck %s --check-prefix=PTX-LD-VOL
# RUN: %compile %s:ld_k -s "*fp32, *fp32" -D SCOPE=agent -D SEM=monotonic --target cuda:90 --stage ptx | filecheck %s --check-prefix=PTX-LD-F32
# RUN: %compile %s:st_k -s "*i32, i32" -D SCOPE=sys -D SEM=release --target cuda:90 --stage ptx | filecheck %s --check-prefix=PTX-ST-REL-SYS
# RUN: %compile %s:st_k -s "*i16, i32" -D SCOPE=cta -D SEM=relaxed --target cuda:90 --stage ptx | filecheck %s --check-prefix=PTX-ST-16
# RUN: %compile %s:st_k -s "*i32, i32" -D SCOPE=gpu -D SEM=volatile --target cuda:90 --stage ptx | filecheck %s --check-prefix=PTX-ST-VOL
#
# RUN: %compile %s:ld_k -s "*i32, *i32" -D SCOPE=gpu -D SEM=acquire --target hip:gfx942 --stage amdgcn | filecheck %s --check-prefix=GCN-LD-ACQ-GPU
# RUN: %compile %s:ld_k -s "*i32, *i32" -D SCOPE=sys -D SEM=acquire --target hip:gfx942 --stage amdgcn | filecheck %s --check-prefix=GCN-LD-ACQ-SYS
# RUN: %compile %s:ld_k -s "*i32, *i32" -D SCOPE=gpu -D SEM=relaxed --target hip:gfx942 --stage amdgcn | filecheck %s --check-prefix=GCN-LD-RLX-GPU
# RUN: %compile %s:ld_k -s "*i64, *i64" -D SCOPE=cta -D SEM=volatile --target hip:gfx942 --stage amdgcn | filecheck %s --check-prefix=GCN-LD-VOL64
# RUN: %compile %s:st_k -s "*i32, i32" -D SCOPE=gpu -D SEM=release --target hip:gfx942 --stage amdgcn | filecheck %s --check-prefix=GCN-ST-REL-GPU
# RUN: %compile %s:st_k -s "*i32, i32" -D SCOPE=sys -D SEM=release --target hip:gfx942 --stage amdgcn | filecheck %s --check-prefix=GCN-ST-REL-SYS
# RUN: %compile %s:ld_k -s "*i32, *i32" -D SCOPE=gpu -D SEM=acquire --target hip:gfx90a --stage amdgcn | filecheck %s --check-prefix=GCN90A-LD-ACQ
# RUN: %compile %s:st_k -s "*i32, i32" -D SCOPE=sys -D SEM=release --target hip:gfx90a --stage amdgcn | filecheck %s --check-prefix=GCN90A-ST-REL
#
# PTX-LD-ACQ-GPU: ld.acquire.gpu.global.b32 [[V:%r[0-9]+]], [{{%rd[0-9]+}}];
# PTX-LD-ACQ-GPU: st.relaxed.gpu.global.b32 [{{%rd[0-9]+}}], [[V]];
# PTX-LD-RLX-SYS: ld.relaxed.sys.global.b32
# PTX-LD-VOL: ld.volatile.global.b64 [[V:%rd[0-9]+]], [{{%rd[0-9]+}}];
# PTX-LD-VOL: st.relaxed.gpu.global.b64 [{{%rd[0-9]+}}], [[V]];
# PTX-LD-F32: ld.relaxed.gpu.global.b32
# PTX-ST-REL-SYS: st.release.sys.global.b32 [{{%rd[0-9]+}}], {{%r[0-9]+}};
# PTX-ST-16: st.relaxed.cta.global.b16 [{{%rd[0-9]+}}], {{%rs[0-9]+}};
# PTX-ST-VOL: st.volatile.global.b32
#
# GCN-LD-ACQ-GPU: global_load_dword [[V:v[0-9]+]], {{v\[[0-9]+:[0-9]+\]}}, off sc1
# GCN-LD-ACQ-GPU-NEXT: s_waitcnt vmcnt(0)
# GCN-LD-ACQ-GPU-NEXT: buffer_inv sc1
# GCN-LD-ACQ-SYS: global_load_dword {{v[0-9]+}}, {{v\[[0-9]+:[0-9]+\]}}, off sc0 sc1
# GCN-LD-ACQ-SYS-NEXT: s_waitcnt vmcnt(0)
# GCN-LD-ACQ-SYS-NEXT: buffer_inv sc0 sc1
# GCN-LD-RLX-GPU: global_load_dword {{v[0-9]+}}, {{v\[[0-9]+:[0-9]+\]}}, off sc1
# GCN-LD-RLX-GPU-NOT: buffer_inv
# GCN-LD-VOL64: global_load_dwordx2 {{v\[[0-9]+:[0-9]+\]}}, {{v\[[0-9]+:[0-9]+\]}}, off sc0 sc1
# GCN-ST-REL-GPU: buffer_wbl2 sc1
# GCN-ST-REL-GPU-NEXT: s_waitcnt vmcnt(0) lgkmcnt(0)
# GCN-ST-REL-GPU-NEXT: global_store_dword {{v\[[0-9]+:[0-9]+\]}}, {{v[0-9]+}}, off sc1
# GCN-ST-REL-SYS: buffer_wbl2 sc0 sc1
# GCN-ST-REL-SYS-NEXT: s_waitcnt vmcnt(0) lgkmcnt(0)
# GCN-ST-REL-SYS-NEXT: global_store_dword {{v\[[0-9]+:[0-9]+\]}}, {{v[0-9]+}}, off sc0 sc1
# GCN90A-LD-ACQ: global_load_dword {{v[0-9]+}}, {{v\[[0-9]+:[0-9]+\]}}, off glc
# GCN90A-LD-ACQ-NEXT: s_waitcnt vmcnt(0)
# GCN90A-LD-ACQ-NEXT: buffer_wbinvl1_vol
# GCN90A-ST-REL: buffer_wbl2
# GCN90A-ST-REL-NEXT: s_waitcnt vmcnt(0) lgkmcnt(0)
# GCN90A-ST-REL-NEXT: global_store_dword
import triton
import triton.language as tl

from triton_dist.language.extra.language_extra import ld, st


@triton.jit
def ld_k(src, dst, SCOPE: tl.constexpr, SEM: tl.constexpr):
    v = ld(src, SCOPE, SEM)
    st(dst, v)


@triton.jit
def st_k(dst, val, SCOPE: tl.constexpr, SEM: tl.constexpr):
    st(dst, val, SCOPE, SEM)
