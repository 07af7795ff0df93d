# The expert-parallel dispatch / combine kernels (triton_dist.kernels.moe_ep) compile for both targets: the dispatch
# stores rows to the experts' ranks with 128-bit vector stores through dl.symm_at and raises each rank's arrival
# count with a system-scope release and an atomic add; the exchange publishes its counts with a system-scope signal
# and reads the others' after acquire waits.
#
# RUN: %compile %s:ep_dispatch_kernel -s "*bf16:16, *i64:16, *i32:16, *i32:16, *bf16:16, *i32:16, *i32:16, *i64:16, i32, i32, i32, i32, i32, i32:16, i32:16, i32, i32, 4, 64, 256" --target cuda:90 --num-warps 4 --stage ptx | filecheck %s --check-prefix=DISPATCH
# RUN: %compile %s:ep_dispatch_kernel -s "*bf16:16, *i64:16, *i32:16, *i32:16, *bf16:16, *i32:16, *i32:16, *i64:16, i32, i32, i32, i32, i32, i32:16, i32:16, i32, i32, 4, 64, 256" --target hip:gfx942 --num-warps 4 --stage amdgcn | filecheck %s --check-prefix=DISPATCH-AMD
# RUN: %compile %s:ep_dispatch_kernel -s "*bf16:16, *i64:16, *i32:16, *i32:16, *fp8e4nv:16, *i32:16, *fp32:16, *i64:16, i32, i32, i32, i32, i32, i32:16, i32:16, i32, i32, 4, 64, 256, True" --target cuda:90 --num-warps 4 --stage ptx | filecheck %s --check-prefix=FP8
# RUN: %compile %s:ep_exchange_kernel -s "*i32:16, *i32:16, *i64:16, *i64:16, *i32:16, *i32:16, *i64:16, *i64:16, i32, i32, i32, i32, i32, 4, 256" --target cuda:90 --num-warps 4 --stage ptx | filecheck %s --check-prefix=EXCHANGE
# RUN: %compile %s:ep_combine_send_kernel -s "*bf16:16, *i32:16, *i32:16, *bf16:16, *i64:16, i32:16, i32:16, i32, i32, 2, 64, 256" --target hip:gfx942 --num-warps 4 --stage amdgcn | filecheck %s --check-prefix=COMBINE-AMD
# RUN: %compile %s:ep_arrival_wait_kernel -s "*i64:16, *i64:16" --target cuda:90 --num-warps 1 --stage ptx | filecheck %s --check-prefix=WAIT
#
# Method "normal": the enter kernel publishes the token count and raises its signal (system-scope release), then
# reads the others' after acquire waits; the sender stores each token row once per destination with 128-bit stores
# (fp8: converted on the sender) and adds one arrival unit per rank after a system-scope release; the receiver's
# scatter (route_scatter_kernel, ROUTED_ONLY) copies the received rows with 128-bit loads and stores; the combine
# sender accumulates the partials in fp32 (fma) and adds its arrival unit on the source.
# RUN: %compile %s:ep_normal_enter_kernel -s "*i32:16, *i64:16, *i64:16, *i32:16, *i64:16, *i64:16, i32, i32, i32, i32, 4, 4, 32" --target cuda:90 --num-warps 1 --stage ptx | filecheck %s --check-prefix=N-ENTER
# RUN: %compile %s:ep_normal_enter_kernel -s "*i32:16, *i64:16, *i64:16, *i32:16, *i64:16, *i64:16, i32, i32, i32, i32, 4, 4, 32" --target hip:gfx942 --num-warps 1 --stage amdgcn | filecheck %s --check-prefix=N-ENTER-AMD
# RUN: %compile %s:ep_normal_send_kernel -s "*bf16:16, *i64:16, *fp32:16, *bf16:16, *fp32:16, *i32:16, *fp32:16, *i64:16, i32, i32, i32, i32, i32:16, i32:16, i32, i32, 4, 32, 8, 256" --target cuda:90 --num-warps 4 --stage ptx | filecheck %s --check-prefix=N-SEND
# RUN: %compile %s:ep_normal_send_kernel -s "*bf16:16, *i64:16, *fp32:16, *bf16:16, *fp32:16, *i32:16, *fp32:16, *i64:16, i32, i32, i32, i32, i32:16, i32:16, i32, i32, 4, 32, 8, 256" --target hip:gfx942 --num-warps 4 --stage amdgcn | filecheck %s --check-prefix=N-SEND-AMD
# RUN: %compile %s:ep_normal_send_kernel -s "*bf16:16, *i64:16, *fp32:16, *fp8e4nv:16, *fp32:16, *i32:16, *fp32:16, *i64:16, i32, i32, i32, i32, i32:16, i32:16, i32, i32, 4, 32, 8, 256, True" --target cuda:90 --num-warps 4 --stage ptx | filecheck %s --check-prefix=N-FP8
# RUN: %compile %s:ep_normal_ids_kernel -s "*i32:16, *i32:16, *i32:16, i32, i32, i32, i32, 4, 1024" --target hip:gfx942 --num-warps 4 --stage amdgcn | filecheck %s --check-prefix=N-IDS-AMD
# RUN: %compile %s:ep_normal_ids_kernel -s "*i32:16, *i32:16, *i32:16, i32, i32, i32, i32, 4, 1024" --target cuda:90 --num-warps 4 --stage ptx | filecheck %s --check-prefix=N-IDS
# RUN: %compile %s:route_scatter_kernel -s "*bf16:16, *i32:16, *i32:16, *i32:16, *bf16:16, *i32:16, *bf16:16, i32, i32, i32, i32, i32:16, i32:16, i32:16, i32:16, 64, 256, False, True" --target cuda:90 --num-warps 4 --stage ptx | filecheck %s --check-prefix=N-SCATTER
# RUN: %compile %s:ep_normal_combine_send_kernel -s "*bf16:16, *i32:16, *i32:16, *fp32:16, *i32:16, *bf16:16, *i64:16, i32, i32, i32:16, i32:16, i32, i32, i32, 4, 32, 256" --target cuda:90 --num-warps 4 --stage ptx | filecheck %s --check-prefix=N-CSEND
# RUN: %compile %s:ep_normal_combine_send_kernel -s "*bf16:16, *i32:16, *i32:16, *fp32:16, *i32:16, *bf16:16, *i64:16, i32, i32, i32:16, i32:16, i32, i32, i32, 4, 32, 256" --target hip:gfx942 --num-warps 4 --stage amdgcn | filecheck %s --check-prefix=N-CSEND-AMD
# RUN: %compile %s:ep_normal_combine_reduce_kernel -s "*bf16:16, *i64:16, *bf16:16, i32, i32, i32, i32:16, i32:16, i32, 4, 8, 256" --target cuda:90 --num-warps 4 --stage ptx | filecheck %s --check-prefix=N-REDUCE
# RUN: %compile %s:ep_normal_combine_reduce_kernel -s "*bf16:16, *i64:16, *bf16:16, i32, i32, i32, i32:16, i32:16, i32, 4, 8, 256" --target hip:gfx942 --num-warps 4 --stage amdgcn | filecheck %s --check-prefix=N-REDUCE-AMD
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
#
# N-ENTER: membar.sys
# N-ENTER-NEXT: st.relaxed.sys.b64
# N-ENTER: ld.acquire.sys.b64
#
# N-ENTER-AMD: global_store_dwordx2 {{.*}} off sc0 sc1
# N-ENTER-AMD: buffer_inv sc0 sc1
#
# N-SEND: st.global.v4.b32
# N-SEND: membar.sys
# N-SEND-NEXT: atom.relaxed.sys.add.u64
#
# N-SEND-AMD: global_store_dwordx4
# N-SEND-AMD: buffer_wbl2 sc0 sc1
# N-SEND-AMD: global_atomic_add_x2
#
# N-FP8: cvt.rn.satfinite.e4m3x2.f32
# N-FP8: atom.relaxed.sys.add.u64
#
# N-IDS: .target sm_90a
# N-IDS: st.global
# N-IDS-AMD: .amdgcn_target "amdgcn-amd-amdhsa--gfx942"
#
# N-SCATTER: ld.global.v4.b32
# N-SCATTER: st.global.v4.b32
#
# N-CSEND: fma.rn.f32
# N-CSEND: st.global.v4.b32
# N-CSEND: membar.sys
# N-CSEND-NEXT: atom.relaxed.sys.add.u64
#
# N-CSEND-AMD: global_store_dwordx4
# N-CSEND-AMD: buffer_wbl2 sc0 sc1
# N-CSEND-AMD: global_atomic_add_x2
#
# N-REDUCE: .target sm_90a
# N-REDUCE-AMD: .amdgcn_target "amdgcn-amd-amdhsa--gfx942"
#
# Method "ll" (one launch per direction): the dispatch's program 0 runs the count exchange (system-scope release of
# the counts, acquire waits on every rank's signal), then raises the intra-kernel barrier's flag (system-scope
# release after a CTA barrier) that every program waits for (gpu-scope acquire); the programs store the rows with
# 128-bit stores (fp8: converted on the sender) and add their arrival counts after a system-scope release; program 0
# ends with the arrival wait (system-scope acquire). The combine sends the rows back (128-bit stores, release, atomic
# add), waits (acquire) and sums the slots in fp32 (fma) in the same kernel.
# RUN: %compile %s:ep_ll_dispatch_kernel -s "*bf16:16, *i64:16, *fp32:16, *i64:16, *fp32:16, *i32:16, *i32:16, *i64:16, *i64:16, *i64:16, *i64:16, *i32:16, *i32:16, *bf16:16, *i32:16, *i32:16, *i64:16, *i64:16, *i64:16, i32, i32, i32, i32, i32, i32:16, i32:16, i32, i32, i32, i32, 4, 64, 256, 256" --target cuda:90 --num-warps 4 --stage ptx | filecheck %s --check-prefix=LL-DISPATCH
# RUN: %compile %s:ep_ll_dispatch_kernel -s "*bf16:16, *i64:16, *fp32:16, *i64:16, *fp32:16, *i32:16, *i32:16, *i64:16, *i64:16, *i64:16, *i64:16, *i32:16, *i32:16, *bf16:16, *i32:16, *i32:16, *i64:16, *i64:16, *i64:16, i32, i32, i32, i32, i32, i32:16, i32:16, i32, i32, i32, i32, 4, 64, 256, 256" --target hip:gfx942 --num-warps 4 --stage amdgcn | filecheck %s --check-prefix=LL-DISPATCH-AMD
# RUN: %compile %s:ep_ll_dispatch_kernel -s "*bf16:16, *i64:16, *fp32:16, *i64:16, *fp32:16, *i32:16, *i32:16, *i64:16, *i64:16, *i64:16, *i64:16, *i32:16, *i32:16, *fp8e4nv:16, *i32:16, *fp32:16, *i64:16, *i64:16, *i64:16, i32, i32, i32, i32, i32, i32:16, i32:16, i32, i32, i32, i32, 4, 64, 256, 256, True" --target cuda:90 --num-warps 4 --stage ptx | filecheck %s --check-prefix=LL-FP8
# RUN: %compile %s:ep_ll_combine_kernel -s "*bf16:16, *i32:16, *i32:16, *bf16:16, *i64:16, *i64:16, *i64:16, *fp32:16, *bf16:16, i32, i32, i32, i32:16, i32:16, i32:16, i32, i32, 4, 64, 256" --target cuda:90 --num-warps 4 --stage ptx | filecheck %s --check-prefix=LL-COMBINE
# RUN: %compile %s:ep_ll_combine_kernel -s "*bf16:16, *i32:16, *i32:16, *bf16:16, *i64:16, *i64:16, *i64:16, *fp32:16, *bf16:16, i32, i32, i32, i32:16, i32:16, i32:16, i32, i32, 4, 64, 256" --target hip:gfx942 --num-warps 4 --stage amdgcn | filecheck %s --check-prefix=LL-COMBINE-AMD
# Bounded-wait mode (language/wait_bounded.py): the intra-kernel barrier's wait and the final arrival wait of the
# dispatch, and the combine's wait, get the timer and the trap like the exchange's.
# RUN: env TRITON_ALWAYS_COMPILE=1 TRITON_DIST_BOUNDED_WAIT=250 TRITON_DIST_NO_SHMEM_BITCODE=1 PTXAS_OPTIONS=-c %compile %s:ep_ll_dispatch_kernel -s "*bf16:16, *i64:16, *fp32:16, *i64:16, *fp32:16, *i32:16, *i32:16, *i64:16, *i64:16, *i64:16, *i64:16, *i32:16, *i32:16, *bf16:16, *i32:16, *i32:16, *i64:16, *i64:16, *i64:16, i32, i32, i32, i32, i32, i32:16, i32:16, i32, i32, i32, i32, 4, 64, 256, 256" --target cuda:90 --num-warps 4 --stage ptx | filecheck %s --check-prefix=LL-BOUNDED
# RUN: env TRITON_ALWAYS_COMPILE=1 TRITON_DIST_BOUNDED_WAIT=250 TRITON_DIST_NO_SHMEM_BITCODE=1 PTXAS_OPTIONS=-c %compile %s:ep_ll_combine_kernel -s "*bf16:16, *i32:16, *i32:16, *bf16:16, *i64:16, *i64:16, *i64:16, *fp32:16, *bf16:16, i32, i32, i32, i32:16, i32:16, i32:16, i32, i32, 4, 64, 256" --target cuda:90 --num-warps 4 --stage ptx | filecheck %s --check-prefix=LL-C-BOUNDED
#
# LL-BOUNDED: mov.u64 %tdw_t0, %globaltimer;
# LL-BOUNDED: ld.acquire.gpu.b64
# LL-BOUNDED: mov.u64 %tdw_t1, %globaltimer;
# LL-BOUNDED: trap;
# LL-BOUNDED: ld.acquire.sys.b64
# LL-BOUNDED: mov.u64 %tdw_t1, %globaltimer;
# LL-BOUNDED: trap;
#
# LL-C-BOUNDED: ld.acquire.sys.b64
# LL-C-BOUNDED: mov.u64 %tdw_t1, %globaltimer;
# LL-C-BOUNDED: trap;
#
# LL-DISPATCH: ld.acquire.sys.b64
# LL-DISPATCH: membar.sys
# LL-DISPATCH-NEXT: st.relaxed.sys.b64
# LL-DISPATCH: ld.acquire.gpu.b64
# LL-DISPATCH: membar.sys
# LL-DISPATCH-NEXT: atom.relaxed.sys.add.u64
# LL-DISPATCH: st.global.v4.b32
# LL-DISPATCH: ld.acquire.sys.b64
#
# LL-DISPATCH-AMD: buffer_inv sc0 sc1
# LL-DISPATCH-AMD: global_store_dwordx4
# LL-DISPATCH-AMD: buffer_wbl2 sc0 sc1
# LL-DISPATCH-AMD: global_atomic_add_x2
#
# LL-FP8-DAG: cvt.rn.satfinite.e4m3x2.f32
# LL-FP8-DAG: atom.relaxed.sys.add.u64
#
# LL-COMBINE: membar.sys
# LL-COMBINE-NEXT: atom.relaxed.sys.add.u64
# LL-COMBINE: st.global.v4.b32
# LL-COMBINE: ld.acquire.sys.b64
# LL-COMBINE: fma.rn.f32
#
# LL-COMBINE-AMD: global_store_dwordx4
# LL-COMBINE-AMD: buffer_wbl2 sc0 sc1
# LL-COMBINE-AMD-NEXT: global_atomic_add_x2
# LL-COMBINE-AMD: buffer_inv sc0 sc1
# LL-COMBINE-AMD: v_fmac_f32
from triton_dist.kernels.moe_ep import (ep_arrival_wait_kernel,  # noqa: F401
                                        ep_combine_send_kernel, ep_dispatch_kernel, ep_exchange_kernel,
                                        ep_ll_combine_kernel, ep_ll_dispatch_kernel,
                                        ep_normal_combine_reduce_kernel, ep_normal_combine_send_kernel,
                                        ep_normal_enter_kernel, ep_normal_ids_kernel, ep_normal_send_kernel)
from triton_dist.kernels.moe_route import route_scatter_kernel  # noqa: F401
