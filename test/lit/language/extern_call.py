# dl.extern_call: a device-library call, including a void function (declared with a dummy i32 result that is
# never used, and a constant 0 returned to the kernel). Called, as libraries do, from a @core.extern wrapper.
#
# RUN: env PTXAS_OPTIONS=-c %compile %s:extern_kernel -s "*i32:16" --target cuda:90 --stage llir | filecheck %s --check-prefix=NV
# RUN: env PTXAS_OPTIONS=-c %compile %s:extern_kernel -s "*i32:16" --target cuda:90 --stage ptx | filecheck %s --check-prefix=PTX
# RUN: env TRITON_DIST_NO_SHMEM_BITCODE=1 %compile %s:extern_kernel -s "*i32:16" --target hip:gfx942 --stage amdgcn | filecheck %s --check-prefix=AMD
#
# NV-DAG: declare {{.*}}i32 @my_lib_add_one(i32)
# NV-DAG: declare {{.*}}i32 @my_lib_void_fn(i64)
# NV: call i32 @my_lib_add_one(i32
# NV: call i32 @my_lib_void_fn(i64
# PTX: call.uni (retval0), my_lib_add_one, (param0);
# PTX: call.uni (retval0), my_lib_void_fn, (param0);
# AMD (nothing defines them: calls through the GOT; the hsaco keeps them as undefined symbols):
# AMD: s_add_u32 {{s[0-9]+}}, {{s[0-9]+}}, my_lib_add_one@gotpcrel32@lo+4
# AMD: s_swappc_b64
# AMD: s_add_u32 {{s[0-9]+}}, {{s[0-9]+}}, my_lib_void_fn@gotpcrel32@lo+4
# AMD: s_swappc_b64
import triton
import triton.language as tl
from triton.language import core

import triton_dist.language as dl


@core.extern
def add_one(x, _semantic=None):
    return dl.extern_call("libmy", "", [x], {(tl.int32, ): ("my_lib_add_one", tl.int32)}, True, _semantic=_semantic)


@core.extern
def void_fn(p, _semantic=None):
    return dl.extern_call("libmy", "", [p], {(tl.int64, ): ("my_lib_void_fn", None)}, False, _semantic=_semantic)


@triton.jit
def extern_kernel(out):
    tl.store(out + 1, add_one(tl.load(out)))
    tl.store(out + 2, void_fn(out.to(tl.int64)))
