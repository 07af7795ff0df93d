# dl.consume_token on every kind of value: an opaque zero (inline asm fed by the token, re-marked 16-divisible)
# is added to pointers / integers, advances block pointers, and is added to the bits of floats. Loads through
# consumed pointers keep their 128-bit vectorisation. Block pointers exist up to Triton 3.8 (tensor descriptors:
# consume_token_desc.py).
# REQUIRES: block-pointers
#
# RUN: %compile %s:kinds -s "*i32:16, *fp32:16, *fp32:16, 256" --target cuda:90 --stage ttir --stop-after cubin | filecheck %s --check-prefix=TTIR
# RUN: %compile %s:kinds -s "*i32:16, *fp32:16, *fp32:16, 256" --target cuda:90 --num-warps 1 --stage ptx | filecheck %s --check-prefix=PTX
# RUN: %compile %s:kinds -s "*i32:16, *fp32:16, *fp32:16, 256" --target hip:gfx942 --num-warps 1 --stage amdgcn | filecheck %s --check-prefix=AMD
#
# TTIR: %[[Z:.*]] = tt.elementwise_inline_asm "mov.u32 $0, 0;" {constraints = "=r,r", {{.*}}pure = true, tt.divisibility = dense<16> : tensor<1xi32>}
# TTIR: tt.addptr %{{[a-z0-9_]+}}, %[[Z]] : !tt.ptr<f32>, i32
# The block pointer's offset becomes the zero (after Triton rewrites block pointers into plain pointers):
# TTIR: %[[BP:.*]] = arith.extsi %[[Z]] : i32 to i64
# TTIR: tt.splat %[[BP]]
# TTIR: tt.bitcast {{.*}} -> tensor<256xi32>
# TTIR: arith.addi
# TTIR: tt.bitcast {{.*}} -> tensor<256xf32>
#
# PTX: mov.u32 %r{{[0-9]+}}, 0;
# PTX: ld.global.v4.b32
# PTX-NOT: ld.global.b32
#
# AMD: s_mov_b32 s{{[0-9]+}}, 0
# AMD-DAG: global_load_dwordx4
# AMD-DAG: buffer_load_dwordx4
# AMD-NOT: buffer_load_dword v
import triton
import triton.language as tl

import triton_dist.language as dl


@triton.jit
def kinds(sig, x, out, BLOCK: tl.constexpr):
    tok = dl.wait(sig, 1, "gpu", "acquire")
    offs = tl.arange(0, BLOCK)
    p = dl.consume_token(x, tok)  # scalar pointer
    v = tl.load(p + offs)
    bp = tl.make_block_ptr(x, shape=[BLOCK], strides=[1], offsets=[0], block_shape=[BLOCK], order=[0])
    bp = dl.consume_token(bp, tok)  # block pointer
    w = tl.load(bp)
    f = dl.consume_token(v + w, tok)  # float tensor
    tl.store(out + offs, f)
