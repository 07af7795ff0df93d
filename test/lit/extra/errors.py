# Bad scope / semantic / types are compile errors naming the op, the bad value and the accepted values.
#
# RUN: not %compile %s:ld_k -s "*i32" -D SCOPE=galaxy -D SEM=relaxed --target cuda:90 --stage ttir 2>&1 | filecheck %s --check-prefix=BADSCOPE
# RUN: not %compile %s:ld_k -s "*i32" -D SCOPE=gpu -D SEM=release --target hip:gfx942 --stage ttir 2>&1 | filecheck %s --check-prefix=LDSEM
# RUN: not %compile %s:st_k -s "*i32" -D SEM=acquire --target cuda:90 --stage ttir 2>&1 | filecheck %s --check-prefix=STSEM
# RUN: not %compile %s:add_k -s "*fp16" --target cuda:90 --stage ttir 2>&1 | filecheck %s --check-prefix=WIDTH
# RUN: not %compile %s:ld_k -s "*i32" -D SCOPE=gpu -D SEM=acquire --target hip:gfx1100 --stage ttir 2>&1 | filecheck %s --check-prefix=ARCH
#
# BADSCOPE: ld: unsupported scope 'galaxy'; accepted: 'cta', 'workgroup', 'gpu', 'agent', 'sys', 'system'
# LDSEM: ld: unsupported semantic 'release'; accepted: 'relaxed', 'monotonic', 'acquire', 'volatile'
# STSEM: st: unsupported semantic 'acquire'; accepted: 'relaxed', 'monotonic', 'release', 'volatile'
# WIDTH: atomic_add: pointee type fp16 has 16 bits; supported widths: 32, 64
# ARCH: memory operations are not implemented for gfx1100; supported AMD archs: gfx90a
import triton
import triton.language as tl

from triton_dist.language.extra.language_extra import atomic_add, ld, st


@triton.jit
def ld_k(p, SCOPE: tl.constexpr, SEM: tl.constexpr):
    st(p, ld(p, SCOPE, SEM))


@triton.jit
def st_k(p, SEM: tl.constexpr):
    st(p, 1, "gpu", SEM)


@triton.jit
def add_k(p):
    atomic_add(p, 1)
