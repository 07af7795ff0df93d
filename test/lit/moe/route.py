# The MoE routing kernels (triton_dist.kernels.moe_route) compile for both targets; the fp8 scatter converts with the
# GPU's saturating round-to-nearest (cvt.rn.satfinite to e4m3), the combine reads each slot's row as a 64-bit offset.
#
# RUN: %compile %s:route_count_kernel -s "*i64:16, *i32:16, i32, i32, i32, 64, 64" --target cuda:90 --num-warps 4 --stage ptx | filecheck %s --check-prefix=COUNT
# RUN: %compile %s:route_block_scan_kernel -s "*i32:16, *i32:16, *i32:16, i32, 256" --target hip:gfx942 --num-warps 4 --stage amdgcn | filecheck %s --check-prefix=SCAN
# RUN: %compile %s:route_scatter_kernel -s "*bf16:16, *i64:16, *i32:16, *i32:16, *fp8e4nv:16, *i32:16, *fp32:16, i32, i32, i32, i32, i32:16, i32:16, i32:16, i32, 64, 256, True" --target cuda:90 --num-warps 4 --stage ptx | filecheck %s --check-prefix=FP8
# RUN: %compile %s:combine_kernel -s "*bf16:16, *i32:16, *i64:16, *fp32:16, *bf16:16, i32, i32, i32, i32:16, i32:16, i32, i32:16, 256" --target hip:gfx942 --num-warps 4 --stage amdgcn | filecheck %s --check-prefix=COMBINE
#
# COUNT: .target sm_90a
# COUNT: st.global
#
# SCAN: .amdgcn_target "amdgcn-amd-amdhsa--gfx942"
#
# FP8: cvt.rn.satfinite.e4m3x2.f32
#
# COMBINE: global_load
from triton_dist.kernels.moe_route import (combine_kernel, route_block_scan_kernel, route_count_kernel,  # noqa: F401
                                           route_scatter_kernel)
