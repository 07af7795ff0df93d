# dl.store_flagged / dl.load_flagged (low-latency flagged words): each word is ONE 64-bit relaxed system-scope
# store (NVIDIA st.relaxed.sys.b64; AMD a relaxed system-scope atomic swap) with no fence and no barrier; the reader
# polls with relaxed system-scope 64-bit loads (AMD: system-coherent sc0 sc1 loads) and only the block-wide
# "all flagged?" reduction synchronises the program. Bounded mode adds a clock, a report and a trap.
#
# RUN: env TRITON_DIST_NO_SHMEM_BITCODE=1 PTXAS_OPTIONS=-c %compile %s:store_kernel -s "*fp32:16, *i64:16, i32, i32, i32" --target cuda:90 --stage ptx | filecheck %s --check-prefix=STORE
# RUN: %compile %s:load_kernel -s "*i64:16, *i32:16, i32, i32" --target cuda:90 --stage ptx | filecheck %s --check-prefix=LOAD
# RUN: env TRITON_ALWAYS_COMPILE=1 TRITON_DIST_BOUNDED_WAIT=250 TRITON_DIST_NO_SHMEM_BITCODE=1 PTXAS_OPTIONS=-c %compile %s:load_kernel -s "*i64:16, *i32:16, i32, i32" --target cuda:90 --stage ptx | filecheck %s --check-prefix=BOUNDED
# RUN: env TRITON_DIST_NO_SHMEM_BITCODE=1 PTXAS_OPTIONS=-c %compile %s:load_tagged_kernel -s "*i64:16, *i32:16, i32, i32" --target cuda:90 --stage ptx | filecheck %s --check-prefix=TAGGED
# RUN: env TRITON_DIST_NO_SHMEM_BITCODE=1 %compile %s:store_kernel -s "*fp32:16, *i64:16, i32, i32, i32" --target hip:gfx942 --stage amdgcn | filecheck %s --check-prefix=AMDSTORE
# RUN: %compile %s:load_kernel -s "*i64:16, *i32:16, i32, i32" --target hip:gfx942 --stage amdgcn | filecheck %s --check-prefix=AMDLOAD
#
# STORE-NOT: membar
# STORE-NOT: fence
# STORE-NOT: bar.sync
# STORE: @%tdf_p st.relaxed.sys.b64 [%rd{{[0-9]+}}], %rd{{[0-9]+}};
# STORE-NOT: membar
# STORE-NOT: fence
#
# LOAD-NOT: globaltimer
# LOAD: @%tdf_p ld.relaxed.sys.b64 %rd{{[0-9]+}}, [%rd{{[0-9]+}}];
# LOAD: bar.sync
# LOAD-NOT: fence
# LOAD-NOT: trap;
#
# BOUNDED-DAG: mov.u64 %rd{{[0-9]+}}, %globaltimer;
# BOUNDED-DAG: ld.relaxed.sys.b64
# BOUNDED-DAG: nvshmem_my_pe
# BOUNDED-DAG: vprintf
# BOUNDED-DAG: trap;
#
# tag_bits=16: the same poll; a word of this epoch with another tag is reported (rank, program, address, both
# epochs and tags; "dl.load_flagged in kernel load_tagged_kernel: RANKS DISAGREE ...", a byte array in the PTX)
# and traps, with no timer (unbounded).
# TAGGED-NOT: globaltimer
# TAGGED-DAG: ld.relaxed.sys.b64
# TAGGED-DAG: nvshmem_my_pe
# TAGGED-DAG: printfFormat
# TAGGED-DAG: vprintf
# TAGGED-DAG: trap;
#
# AMDSTORE: global_atomic_swap_x2 {{.*}} sc1
# AMDSTORE-NOT: buffer_wbl2
#
# AMDLOAD: global_load_dwordx2 {{v\[[0-9]+:[0-9]+\]}}, {{v\[[0-9]+:[0-9]+\]}}, off sc0 sc1
# AMDLOAD-NOT: s_memrealtime
import triton
import triton.language as tl

import triton_dist.language as dl


@triton.jit
def store_kernel(src, words, peer, flag, n):
    offs = tl.arange(0, 256)
    m = offs < n
    dl.store_flagged(dl.symm_at(words, peer) + offs, tl.load(src + offs, mask=m), flag, mask=m)


@triton.jit
def load_kernel(words, out, flag, n):
    offs = tl.arange(0, 256)
    m = offs < n
    tl.store(out + offs, dl.load_flagged(words + offs, flag, mask=m), mask=m)


@triton.jit
def load_tagged_kernel(words, out, flag, n):
    offs = tl.arange(0, 256)
    m = offs < n
    tl.store(out + offs, dl.load_flagged(words + offs, flag, mask=m, tag_bits=16), mask=m)
