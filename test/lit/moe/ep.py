# The expert-parallel dispatch / combine kernels (triton_dist.kernels.moe_ep) compile for both targets: the dispatch
# stores rows to the experts' ranks with 128-bit vector stores through dl.symm_at and raises each rank's arrival
# count with a system-scope release and an atomic add; the exchange publishes its counts with a system-scope signal
# and reads the others' after acquire waits.
#
# RUN: %compile %s:ep_dispatch_kernel -s "*bf16:16, *i64:16, *i32:16, *i32:16, *bf16:16, *i32:16, *i32:16, *i64:16, i32, i32, i32, i32, i32, i32:16, i32:16, i32, i32, 4, 64, 256" --target cuda:90 --num-warps 4 --stage ptx | filecheck %s --check-prefix=DISPATCH
# RUN: %compile %s:ep_dispatch_kernel -s "*bf16:16, *i64:16, *i32:16, *i32:16, *bf16:16, *i32:16, *i32:16, *i64:16, i32, i32, i32, i32, i32, i32:16, i32:16, i32, i32, 4, 64, 256" --target hip:gfx942 --num-warps 4 --stage amdgcn | filecheck %s --check-prefix=DISPATCH-AMD
# RUN: %compile %s:ep_dispatch_kernel -s "*bf16:16, *i64:16, *i32:16, *i32:16, *fp8e4nv:16, *i32:16, *fp32:16, *i64:16, i32, i32, i32, i32, i32, i32:16, i32:16, i32, i32, 4, 64, 256, True" --target cuda:90 --num-warps 4 --stage ptx | filecheck %s --check-prefix=FP8
# RUN: %compile %s:ep_exchange_kernel -s "*i32:16, *i32:16, *i64:16, *i64:16, *i32:16, *i32:16, *i64:16, i32, i32, i32, i32, i32, i32, 4, 256" --target cuda:90 --num-warps 4 --stage ptx | filecheck %s --check-prefix=EXCHANGE
# RUN: %compile %s:ep_combine_send_kernel -s "*bf16:16, *i32:16, *i32:16, *bf16:16, *i64:16, i32:16, i32:16, i32, i32, 2, 64, 256" --target hip:gfx942 --num-warps 4 --stage amdgcn | filecheck %s --check-prefix=COMBINE-AMD
# RUN: %compile %s:ep_arrival_wait_kernel -s "*i64:16, *i64:16" --target cuda:90 --num-warps 1 --stage ptx | filecheck %s --check-prefix=WAIT
# RUN: %compile %s:ep_combine_reduce_kernel -s "*bf16:16, *i64:16, *fp32:16, *bf16:16, i32, i32, i32:16, i32, i32:16, 256" --target hip:gfx942 --num-warps 4 --stage amdgcn | filecheck %s --check-prefix=REDUCE-AMD
# RUN: %compile %s:ep_combine_reduce_kernel -s "*bf16:16, *i64:16, *fp32:16, *bf16:16, i32, i32, i32:16, i32, i32:16, 256" --target cuda:90 --num-warps 4 --stage ptx | filecheck %s --check-prefix=REDUCE
#
# DISPATCH: st.global.v4.b32
# DISPATCH: membar.sys
# DISPATCH-NEXT: atom.relaxed.sys.add.u64
#
# FP8: cvt.rn.satfinite.e4m3x2.f32
# FP8: atom.relaxed.sys.add.u64
#
# DISPATCH-AMD: global_store_dwordx4
# DISPATCH-AMD: buffer_wbl2 sc0 sc1
# DISPATCH-AMD: global_atomic_add_x2
#
# EXCHANGE: membar.sys
# EXCHANGE-NEXT: st.relaxed.sys.b64
# EXCHANGE: ld.acquire.sys.b64
#
# COMBINE-AMD: global_atomic_add_x2
#
# WAIT: ld.acquire.sys.b64
#
# REDUCE-AMD: .amdgcn_target "amdgcn-amd-amdhsa--gfx942"
# REDUCE: .target sm_90a
from triton_dist.kernels.moe_ep import (ep_arrival_wait_kernel, ep_combine_reduce_kernel,  # noqa: F401
                                        ep_combine_send_kernel, ep_dispatch_kernel, ep_exchange_kernel)
