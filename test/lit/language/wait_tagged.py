# Tagged signals (issue 15 point 2): dl.wait(..., tag_bits=24) spins until the signal's epoch reaches the value's
# (signed >= on the value with its tag bits cleared: one compare per poll, like the equality spin), then compares
# the whole value once; a differing signal (the ranks made different calls) is printed (rank, program, address,
# both epochs and tags) and traps. No timer unless TRITON_DIST_BOUNDED_WAIT is set (then the spin also times out).
# Calls nvshmem_my_pe / rocshmem_my_pe for the report: relocatable PTX (PTXAS_OPTIONS=-c), no rocSHMEM bitcode.
# TRITON_ALWAYS_COMPILE: the bounded-wait env var is not in Triton's own cache key.
#
# RUN: env TRITON_ALWAYS_COMPILE=1 TRITON_DIST_NO_SHMEM_BITCODE=1 PTXAS_OPTIONS=-c %compile %s:tagged_kernel -s "*i64:16, i64, *i32:16" --target cuda:90 --stage ptx | filecheck %s --check-prefix=PTX
# RUN: env TRITON_ALWAYS_COMPILE=1 TRITON_DIST_NO_SHMEM_BITCODE=1 PTXAS_OPTIONS=-c %compile %s:tagged_kernel -s "*i64:16, i64, *i32:16" --target cuda:90 --stage ptx | filecheck %s --check-prefix=NOTIMER
# RUN: env TRITON_ALWAYS_COMPILE=1 TRITON_DIST_BOUNDED_WAIT=250 TRITON_DIST_NO_SHMEM_BITCODE=1 PTXAS_OPTIONS=-c %compile %s:tagged_kernel -s "*i64:16, i64, *i32:16" --target cuda:90 --stage ptx | filecheck %s --check-prefix=BOUNDED
# RUN: env TRITON_ALWAYS_COMPILE=1 TRITON_DIST_NO_SHMEM_BITCODE=1 %compile %s:tagged_kernel -s "*i64:16, i64, *i32:16" --target hip:gfx942 --stage amdgcn | filecheck %s --check-prefix=AMD
# RUN: not %compile %s:bad_tag_bits_kernel -s "*i64:16, i64" --target cuda:90 --stage ttir 2>&1 | filecheck %s --check-prefix=BAD
#
# The epoch floor: value & ~(2**24 - 1)
# PTX: and.b64 [[FLOOR:%rd[0-9]+]], [[VALUE:%rd[0-9]+]], -16777216;
# PTX: TDW_SPIN:
# PTX-NEXT: ld.acquire.sys.b64 %tdw_v, [%tdw_a];
# PTX-NEXT: setp.ge.s64 %tdw_p1, %tdw_v, [[FLOOR]];
# PTX-NEXT: @%tdw_p1 bra TDW_CHECK;
# PTX-NEXT: bra TDW_SPIN;
# PTX-NEXT: TDW_CHECK:
# PTX-NEXT: setp.ne.b64 %tdw_p3, %tdw_v, [[VALUE]];
# PTX-NEXT: @%tdw_p3 bra TDW_DIFFERS;
# PTX: TDW_DONE:
# PTX-NEXT: bar.sync 0;
# PTX: nvshmem_my_pe
# PTX: vprintf
# PTX: trap;
#
# NOTIMER-NOT: globaltimer
#
# BOUNDED: mov.u64 %tdw_t0, %globaltimer;
# BOUNDED: setp.ge.s64 %tdw_p1, %tdw_v
# BOUNDED: setp.gt.u64 %tdw_p2, %tdw_t1, 250000000;
# BOUNDED: TDW_DIFFERS:
# BOUNDED: trap;
#
# AMD-DAG: global_load_dwordx2 {{v\[[0-9]+:[0-9]+\]}}, {{v\[[0-9]+:[0-9]+\]}}, off sc0 sc1
# AMD-DAG: v_cmp_le_i64_e32 vcc, {{s\[[0-9]+:[0-9]+\]}}, {{v\[[0-9]+:[0-9]+\]}}
# AMD-DAG: v_cmp_ne_u64_e32 vcc, {{s\[[0-9]+:[0-9]+\]}}, {{v\[[0-9]+:[0-9]+\]}}
# AMD-DAG: rocshmem_my_pe@gotpcrel32@lo
# AMD-DAG: s_trap 2
#
# BAD: dl.wait: tag_bits=63: expected a Python int in [0, 62]
import triton
import triton.language as tl

import triton_dist.language as dl


@triton.jit
def tagged_kernel(sig, value, out):
    tok = dl.wait(sig, 1, "sys", "acquire", value, tag_bits=24)
    tl.store(dl.consume_token(out, tok), 1)


@triton.jit
def bad_tag_bits_kernel(sig, value):
    dl.wait(sig, 1, "sys", "acquire", value, tag_bits=63)
