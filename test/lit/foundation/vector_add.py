# A plain Triton kernel compiled for both GPU targets on a CPU-only machine. Each check names a line only
# its own target emits, so swapping --target makes the test fail.
#
# RUN: %compile %s:vector_add -s "*fp32:16, *fp32:16, *fp32:16, 1024" --target cuda:90 --stage ptx | filecheck %s --check-prefix=PTX
# RUN: %compile %s:vector_add -s "*fp32:16, *fp32:16, *fp32:16, 1024" --target cuda:80 --stage ptx | filecheck %s --check-prefix=SM80
# RUN: %compile %s:vector_add -s "*fp32:16, *fp32:16, *fp32:16, 1024" --target hip:gfx942 --stage amdgcn | filecheck %s --check-prefix=GCN
# RUN: %compile %s:vector_add -s "*fp32:16, *fp32:16, *fp32:16, 1024" --target cuda:90 --stage ttgir | filecheck %s --check-prefix=TTGIR-CUDA
# RUN: %compile %s:vector_add -s "*fp32:16, *fp32:16, *fp32:16, 1024" --target hip:gfx942 --stage ttgir | filecheck %s --check-prefix=TTGIR-HIP
# RUN: %compile %s:vector_add -s "*fp32:16, *fp32:16, *fp32:16, 1024" --target hip:gfx942 --stage llir | filecheck %s --check-prefix=LLIR-HIP
#
# PTX: .target sm_90a
# PTX: .entry vector_add
# PTX: ld.global.v4.b32
# PTX: add.f32
# PTX: st.global.v4.b32
# SM80: .target sm_80
# GCN: .amdgcn_target "amdgcn-amd-amdhsa--gfx942"
# GCN: global_load_dwordx4
# GCN: v_pk_add_f32
# GCN: global_store_dwordx4
# TTGIR-CUDA: ttg.target = "cuda:90", "ttg.threads-per-warp" = 32
# TTGIR-HIP: ttg.target = "hip:gfx942", "ttg.threads-per-warp" = 64
# LLIR-HIP: target triple = "amdgcn-amd-amdhsa"
import triton
import triton.language as tl


@triton.jit
def vector_add(x_ptr, y_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs) + tl.load(y_ptr + offs))
