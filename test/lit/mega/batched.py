# The generated mega kernel of a batched-decode MLP (4 rows: fused fc1 + silu * up, then fc2) compiles for both
# targets through the small-M Linear tile (1 < M <= 16: the GEMV's streaming tiles with the rows' products on
# tl.dot): the weight chunks are 16-byte vector loads and the products run on the tensor cores / matrix cores.
#
# RUN: env TRITON_DIST_BACKEND=sim %python %s %t.gen.py | filecheck %s --check-prefix=GEN
# RUN: %compile %t.gen.py:MEGA_TRITON_KERNEL -s "*i32, *i32, *i64, *i32, *i32, *i32, *i32, *i64, 32, 8, 3, False, False, False" --target cuda:90 --num-warps 8 --stage ptx | filecheck %s --check-prefix=PTX
# RUN: %compile %t.gen.py:MEGA_TRITON_KERNEL -s "*i32, *i32, *i64, *i32, *i32, *i32, *i32, *i64, 32, 8, 3, False, False, False" --target hip:gfx942 --num-warps 8 --stage amdgcn | filecheck %s --check-prefix=AMD
#
# GEN: L0.mlp_fc1_silu_mul_up BLOCK_M=16 ROWS=128 BLOCK_K=128
# GEN: L0.linear BLOCK_M=16 ROWS=64 BLOCK_K=256
#
# PTX-DAG: ld.global.v4.b32
# PTX-DAG: mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32
# PTX-DAG: atom.global.gpu.release.exch.b32
#
# AMD-DAG: global_load_dwordx4
# AMD-DAG: v_mfma_f32_16x16x16_bf16
import os
import shutil
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "python"))
import torch  # noqa: E402

from triton_dist.mega_triton_kernel import ModelBuilder  # noqa: E402

b = ModelBuilder()
x, a, o = torch.ones(4, 1024).bfloat16(), torch.zeros(4, 256).bfloat16(), torch.zeros(4, 1024).bfloat16()
b.make_fused_fc1_silu_mul_up(x, torch.ones(2 * 256, 1024).bfloat16(), a)
b.make_linear(a, torch.ones(1024, 256).bfloat16(), o)
b.compile()
assert b.num_args == 3, b.num_args
shutil.copy(b.source_path, sys.argv[1])
for op in b.compiled_ops:
    c = op.constexprs
    print(op.name, f"BLOCK_M={c['BLOCK_M']} ROWS={c['ROWS']} BLOCK_K={c['BLOCK_K']}")
