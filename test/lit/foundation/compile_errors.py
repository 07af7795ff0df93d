# The compile tool's error paths: one line on stderr and exit code 2.
#
# RUN: not %compile %s:missing_kernel -s "i32" --target cuda:90 2>&1 | filecheck %s --check-prefix=NOKERNEL
# RUN: not %compile %s:k -s "*i32" --target cuda:banana 2>&1 | filecheck %s --check-prefix=BADTARGET
# RUN: not %compile %s:k -s "*i32" --target hip:gfx942 --stage ptx 2>&1 | filecheck %s --check-prefix=BADSTAGE
# RUN: not %compile %s:k -s "*i32" --target cuda:90 --stage amdgcn 2>&1 | filecheck %s --check-prefix=BADSTAGE-CUDA
# RUN: not %compile %S/does_not_exist.py:k -s "*i32" 2>&1 | filecheck %s --check-prefix=NOFILE
#
# NOKERNEL: triton-dist-compile: error: no kernel named 'missing_kernel'
# BADTARGET: triton-dist-compile: error: unknown target 'cuda:banana'
# BADSTAGE: triton-dist-compile: error: unknown stage 'ptx' for hip
# BADSTAGE-CUDA: triton-dist-compile: error: unknown stage 'amdgcn' for cuda
# NOFILE: triton-dist-compile: error: kernel file not found
import triton


@triton.jit
def k(p):
    pass
