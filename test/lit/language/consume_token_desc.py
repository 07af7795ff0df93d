# dl.consume_token on a tensor descriptor: the descriptor comes back unchanged; the token goes into the coordinates
# instead (every supported Triton; the other kinds of value: consume_token.py). --stop-after cubin: the kernel must
# also assemble (the TTIR alone is what the check reads).
#
# RUN: %compile %s:desc -s "*i32:16, *fp16:16, *fp16:16, 64" --target cuda:90 --stage ttir --stop-after cubin | filecheck %s --check-prefix=DESC
#
# DESC: tt.make_tensor_descriptor
# DESC: %[[ZD:.*]] = tt.elementwise_inline_asm "mov.u32 $0, 0;"
# DESC: tt.descriptor_load %{{.*}}[%[[ZD]], %{{.*}}]
import triton
import triton.language as tl

import triton_dist.language as dl


@triton.jit
def desc(sig, a, out, BLOCK: tl.constexpr):
    tok = dl.wait(sig, 1, "gpu", "acquire")
    d = tl.make_tensor_descriptor(a, shape=[BLOCK, BLOCK], strides=[BLOCK, 1], block_shape=[BLOCK, BLOCK])
    d = dl.consume_token(d, tok)
    row = dl.consume_token(0, tok)
    t = d.load([row, 0])
    offs = tl.arange(0, BLOCK)
    tl.store(out + offs[:, None] * BLOCK + offs[None, :], t)
