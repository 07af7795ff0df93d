# The generated mega kernel of a decoder-like chain (rms_norm -> qkv_proj -> o_proj -> add -> rms_norm ->
# fused fc1+silu -> fc2 -> add, fusions on) compiles for both targets. The script below builds it on the simulator
# and writes the generated source; the checks pin what the step's speed rests on:
# * the GEMV weight loads are 16-byte vectors (task pointers come from the op table as integers: without the
#   alignment hint of core.device.arg they were 2-byte loads, 4.05 vs 2.9 TB/s on an H200);
# * a task is released by one GPU-scope release exchange after a CTA barrier, and waited for with acquire loads.
#
# RUN: env TRITON_DIST_BACKEND=sim %python %s %t.gen.py | filecheck %s --check-prefix=GEN
# RUN: %compile %t.gen.py:MEGA_TRITON_KERNEL -s "*i32, *i32, *i64, *i32, *i32, *i32, *i32, *i64, 64, 8, 6, False, False, False" --target cuda:90 --num-warps 8 --stage ptx | filecheck %s --check-prefix=PTX
# RUN: %compile %t.gen.py:MEGA_TRITON_KERNEL -s "*i32, *i32, *i64, *i32, *i32, *i32, *i32, *i64, 64, 8, 6, False, False, False" --target hip:gfx942 --num-warps 8 --stage amdgcn | filecheck %s --check-prefix=AMD
# RUN: env TRITON_DIST_BACKEND=sim %python %s %t.pf.py prefetch | filecheck %s --check-prefix=PFGEN
# RUN: %compile %t.pf.py:MEGA_TRITON_KERNEL -s "*i32, *i32, *i64, *i32, *i32, *i32, *i32, *i64, 64, 8, 6, False, False, False" --target cuda:90 --num-warps 8 --stage ptx | filecheck %s --check-prefix=PF
#
# With a GEMV prefetch budget (ModelBuilder gemv_prefetch_bytes), a GEMV tile waiting for a non-GEMV op asks L2
# for its rows before it waits: one bulk prefetch per row range, no load into registers.
# PFGEN: branches 2
# PF: cp.async.bulk.prefetch.L2.global
#
# RUN: env TRITON_DIST_BACKEND=sim %python %s %t.stages.py stages | filecheck %s --check-prefix=STGEN
# RUN: %compile %t.stages.py:MEGA_TRITON_KERNEL -s "*i32, *i32, *i64, *i32, *i32, *i32, *i32, *i64, 8, 8, 3, False, False, False" --target cuda:90 --num-warps 8 --stage ptx | filecheck %s --check-prefix=STAGES
# RUN: %compile %t.stages.py:MEGA_TRITON_KERNEL -s "*i32, *i32, *i64, *i32, *i32, *i32, *i32, *i64, 8, 8, 3, False, False, False" --target hip:gfx942 --num-warps 8 --stage amdgcn | filecheck %s --check-prefix=AMDOK
#
# With gemv_stages=4 the GEMV's chunks after the first go through Triton's software pipeliner: asynchronous 16-byte
# copies into shared memory (the chain above, rows of 128-256, has too few chunks to pipeline; this GEMV has 8).
# STGEN: stages 4 chunks 8
# STAGES: cp.async.cg.shared.global
# STAGES: cp.async.wait_group
#
# RUN: env TRITON_DIST_BACKEND=sim %python %s %t.early.py early | filecheck %s --check-prefix=EARLYGEN
# RUN: %compile %t.early.py:MEGA_TRITON_KERNEL -s "*i32, *i32, *i64, *i32, *i32, *i32, *i32, *i64, 8, 16, 3, False, False, False" --target cuda:90 --num-warps 8 --stage ptx | filecheck %s --check-prefix=EARLY
# RUN: %compile %t.early.py:MEGA_TRITON_KERNEL -s "*i32, *i32, *i64, *i32, *i32, *i32, *i32, *i64, 8, 16, 3, False, False, False" --target hip:gfx942 --num-warps 8 --stage amdgcn | filecheck %s --check-prefix=AMDOK
#
# With an early-prefetch budget (ModelBuilder gemv_early_prefetch_bytes; per-row budget 0), placed on 16 workers:
# each GEMV tile's rows are asked for in the slot where its worker enters the wait (the add's slot for the tile
# behind the add, the tile's own elsewhere): 16-int queue rows, the worker issuing a slot's ranges as it reads the
# row; gfx942 has no such hint and compiles the same kernel without it.
# EARLYGEN: slots 16 row 16 behind 1
# EARLY: cp.async.bulk.prefetch.L2.global
# AMDOK: .amdgcn_target
#
# GEN: branches 5
# GEN: L0.rms_norm+L0.qkv_proj
# GEN: L0.o_proj+L0.add
#
# PTX-DAG: ld.global.v4.b32
# PTX-DAG: atom.global.gpu.release.exch.b32
# PTX-DAG: ld.acquire.gpu.b32
#
# AMD-DAG: global_load_dwordx4
# AMD-DAG: global_atomic_swap
import os
import shutil
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
from _mega_sim_work import _chain  # noqa: E402  (the same chain the simulator tests run)

if sys.argv[2:] == ["prefetch"]:  # one GEMV whose rows are longer than its first chunk, with a prefetch budget
    import torch

    from triton_dist.mega_triton_kernel import ModelBuilder

    b = ModelBuilder(gemv_prefetch_bytes=65536)
    x, s = torch.ones(1, 1024).bfloat16(), torch.zeros(1, 1024).bfloat16()
    b.make_add(x, x, s)  # a GEMV prefetches only when it waits for a non-GEMV op
    b.make_linear(s, torch.ones(128, 1024).bfloat16(), torch.zeros(1, 128).bfloat16())
    b.compile()
    assert b.compiled_ops[1].constexprs["PF_ROW"] > 0, b.compiled_ops[1].constexprs
elif sys.argv[2:] == ["stages"]:  # one GEMV of 8 chunks per row, streamed through the software pipeliner
    import torch

    from triton_dist.mega_triton_kernel import ModelBuilder

    b = ModelBuilder(gemv_prefetch_bytes=0, gemv_stages=4)
    b.make_linear(torch.ones(1, 1024).bfloat16(), torch.ones(128, 1024).bfloat16(), torch.zeros(1, 128).bfloat16())
    b.compile()
    c = b.compiled_ops[0].constexprs
    assert b.queue_cap <= 8 and b.num_args == 3, (b.queue_cap, b.num_args)
    print("stages", c["STAGES"], "chunks", c["K"] // c["BLOCK_K"])
elif sys.argv[2:] == ["early"]:  # the same GEMV placed on 16 workers (queues and tables only: nothing runs here)
    from unittest import mock

    import torch

    import triton_dist.mega_triton_kernel.builder as builder_module
    from triton_dist.mega_triton_kernel import ModelBuilder

    with mock.patch.object(builder_module, "_backend_name", lambda: "nvidia"):
        b = ModelBuilder(num_workers=16, device="cpu", gemv_prefetch_bytes=0, gemv_early_prefetch_bytes=1 << 20)
        x, s = torch.ones(1, 1024).bfloat16(), torch.zeros(1, 1024).bfloat16()
        b.make_add(x, x, s)
        b.make_linear(s, torch.ones(128, 1024).bfloat16(), torch.zeros(1, 128).bfloat16())
        b.compile()
    assert b.queue_cap <= 8 and b.num_args == 3 and b.compiled_ops[1].constexprs["PF_ROW"] == 0, (b.queue_cap,
                                                                                                   b.num_args)
    behind = sum(1 for t in b.slot_prefetches if b.tasks[t].op == 0)
    print("slots", len(b.slot_prefetches), "row", b.queue_row, "behind", behind)
else:
    b, _, _ = _chain()
    b.compile()
    assert b.queue_cap <= 64 and b.num_args == 6, (b.queue_cap, b.num_args)
shutil.copy(b.source_path, sys.argv[1])
print("branches", len(b.branches))
for op in b.compiled_ops:
    print(op.name)
