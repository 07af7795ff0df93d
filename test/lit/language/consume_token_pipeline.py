# A software-pipelined loop (num_stages=3): every iteration waits for its signal, then loads through pointers
# consumed with the wait's token. The async copies of iteration j must be issued after iteration j's spin.
# Stock Triton's pipeliner cannot predicate a side-effecting inline asm, so the spin is emitted inside
# `scf.if <opaque true>`, which the pipeliner predicates (the prologue copies of the spin get `cond && i < n`).
#
# RUN: %compile %s:pipelined -s "*i32:16, *fp16:16, *fp16:16, *fp32:16, i32, 64, 64, 64" --target cuda:90 --num-stages 3 --stage ttgir | filecheck %s --check-prefix=TTGIR
# RUN: %compile %s:pipelined -s "*i32:16, *fp16:16, *fp16:16, *fp32:16, i32, 64, 64, 64" --target cuda:90 --num-stages 3 --stage ptx | filecheck %s --check-prefix=PTX
# RUN: %compile %s:pipelined -s "*i32:16, *fp16:16, *fp16:16, *fp32:16, i32, 64, 64, 64" --target hip:gfx942 --num-stages 3 --stage amdgcn | filecheck %s --check-prefix=AMD
#
# Prologue, stage 0 of iteration 0: spin, then the opaque zero taken from its token, then the async copies.
# TTGIR: %[[TOK0:.*]] = scf.if
# TTGIR-NEXT: tt.elementwise_inline_asm "{{.*}}ld.acquire.gpu.b32
# TTGIR-NOT: ttg.async_copy_global_to_local
# TTGIR: tt.elementwise_inline_asm "mov.u32 $0, 0;" {{.*}}tt.divisibility = dense<16>{{.*}} %[[TOK0]]
# TTGIR: ttg.async_copy_global_to_local {{.*}}contiguity = 8
# Prologue, iteration 1:
# TTGIR: %[[TOK1:.*]] = scf.if
# TTGIR-NEXT: tt.elementwise_inline_asm "{{.*}}ld.acquire.gpu.b32
# TTGIR-NOT: ttg.async_copy_global_to_local
# TTGIR: tt.elementwise_inline_asm "mov.u32 $0, 0;" {{.*}} %[[TOK1]]
# TTGIR: ttg.async_copy_global_to_local
# Steady state: the copies issued in iteration i (for i+2) come after the spin for i+2.
# TTGIR: scf.for
# TTGIR: %[[TOKL:.*]] = scf.if
# TTGIR-NEXT: tt.elementwise_inline_asm "{{.*}}ld.acquire.gpu.b32
# TTGIR-NOT: ttg.async_copy_global_to_local
# TTGIR: ttng.warp_group_dot
# TTGIR-NOT: ttg.async_copy_global_to_local
# TTGIR: tt.elementwise_inline_asm "mov.u32 $0, 0;" {{.*}} %[[TOKL]]
# TTGIR: ttg.async_copy_global_to_local
# TTGIR: scf.yield
#
# PTX (prologue in text order): spin, CTA barrier, then 16-byte cp.async.
# PTX: TDW_SPIN:
# PTX-NEXT: ld.acquire.gpu.b32
# PTX: bar.sync 0;
# PTX-NOT: TDW_SPIN:
# PTX: cp.async.cg.shared.global [{{.*}}], [{{.*}}], 0x10
# PTX: wgmma.mma_async
#
# On gfx942 the loop is not pipelined (the spin is a loop nest) but loads depend on the token and vectorise.
# AMD-DAG: s_barrier
# AMD-DAG: global_load_dwordx4
# AMD: global_load_dword v{{[0-9]+}}, v[{{[0-9]+:[0-9]+}}], off sc1
# AMD-NEXT: s_waitcnt vmcnt(0)
# AMD-NEXT: buffer_inv sc1
import triton
import triton.language as tl

import triton_dist.language as dl


@triton.jit
def pipelined(sig, a_ptr, b_ptr, c_ptr, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    rm = tl.arange(0, BM)
    rn = tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros([BM, BN], dtype=tl.float32)
    for k in range(0, K // BK):
        tok = dl.wait(sig + k, 1, "gpu", "acquire")
        a = dl.consume_token(a_ptr, tok)
        b = dl.consume_token(b_ptr, tok)
        x = tl.load(a + rm[:, None] * K + (k * BK + rk)[None, :])
        y = tl.load(b + (k * BK + rk)[:, None] * BN + rn[None, :])
        acc += tl.dot(x, y)
    tl.store(c_ptr + rm[:, None] * BN + rn[None, :], acc)
