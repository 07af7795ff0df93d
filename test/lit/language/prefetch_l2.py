# dl.prefetch_l2: an L2 fill hint. sm_90: one cp.async.bulk.prefetch.L2.global per range, the range widened to
# 16-byte units, issued by the program's first thread only (%tid.x == 0), under the mask. Several ranges: one
# call each (ranges_kernel: 4 prefetches). No fence, no barrier, no load into registers.
# sm_80 and gfx942 have no such instruction: the hint compiles to nothing.
#
# RUN: %compile %s:scalar_kernel -s "*bf16:16, i32" --target cuda:90 --stage ptx | filecheck %s --check-prefix=ONE
# RUN: %compile %s:ranges_kernel -s "*bf16:16, i32" --target cuda:90 --stage ptx | filecheck %s --check-prefix=BLOCK
# RUN: %compile %s:scalar_kernel -s "*bf16:16, i32" --target cuda:90 --stage cubin -o %t.cubin
# RUN: %compile %s:ranges_kernel -s "*bf16:16, i32" --target cuda:80 --stage ptx | filecheck %s --check-prefix=SM80
# RUN: %compile %s:ranges_kernel -s "*bf16:16, i32" --target hip:gfx942 --stage amdgcn | filecheck %s --check-prefix=AMD
#
# ONE: and.b64 {{%rd[0-9]+}}, {{%rd[0-9]+}}, -16;
# ONE: mov.u32 %tdp_t, %tid.x;
# ONE-NEXT: setp.eq.u32 %tdp_p, %tdp_t, 0;
# ONE-NEXT: setp.ne.and.b32 %tdp_p, {{%r[0-9]+}}, 0, %tdp_p;
# ONE-NEXT: @%tdp_p cp.async.bulk.prefetch.L2.global [{{%rd[0-9]+}}], {{%r[0-9]+}};
# ONE-NOT: bar.sync
# ONE-NOT: membar
#
# BLOCK-COUNT-4: @%tdp_p cp.async.bulk.prefetch.L2.global [{{%rd[0-9]+}}], {{%r[0-9]+}};
# BLOCK-NOT: cp.async.bulk.prefetch
# BLOCK-NOT: ld.global
#
# SM80-NOT: cp.async.bulk
# SM80: ret;
#
# AMD-NOT: global_load
# AMD: s_endpgm
import triton
import triton.language as tl

import triton_dist.language as dl


@triton.jit
def scalar_kernel(w, n):
    dl.prefetch_l2(w + 64, n * 2)


@triton.jit
def ranges_kernel(w, K):
    for r in tl.static_range(4):
        dl.prefetch_l2(w + r * K, 4096, mask=r < K)
