# SIMT tiles above the 48 KiB a CUDA block may declare statically: 96 KiB of tiles (an H200 block gets up to 227 KiB)
# live in the block's dynamic shared memory (Triton's global_smem, counted in the kernel's shared size, which the
# launcher requests and opts in to), and the kernel assembles; tiles beyond what the target gives a block are refused
# with the real limit (sm_90: 232448 bytes; gfx942: 64 KiB of LDS).
#
# RUN: %compile %s:tiles_96k -s "*fp32:16, 128, 64" --target cuda:90 --stage ptx | filecheck %s --check-prefix=PTX
# RUN: not %compile %s:tiles_96k -s "*fp32:16, 256, 64" --target cuda:90 --stage ttir 2>&1 | filecheck %s --check-prefix=TOOBIG
# RUN: not %compile %s:tiles_96k -s "*fp32:16, 128, 64" --target hip:gfx942 --stage ttir 2>&1 | filecheck %s --check-prefix=LDS
#
# PTX-NOT: triton_dist_simt_scratch
# PTX: .extern .shared .align 16 .b8 global_smem[];
# PTX: bar.sync
# PTX: st.volatile.shared.b32
# TOOBIG: need 327680 bytes of shared memory, more than the 232448 bytes a block gets on this target
# LDS: need 98304 bytes of shared memory, more than the 65536 bytes a block gets on this target
import triton
import triton.language as tl

import triton_dist.language as dl


@triton.jit
def tiles_96k(dst, T: tl.constexpr, H: tl.constexpr):
    """A T x T and an H x T fp32 tile indexed per thread (T = 128, H = 64: 96 KiB)."""
    rows = tl.arange(0, T)
    half = tl.arange(0, H)
    out = tl.zeros((T, T), tl.float32)
    acc = tl.zeros((H, T), tl.float32)
    with dl.simt_exec_region() as (t, n):
        for j in range(t, T, n):
            out[j, j] = 1.0
            acc[j % H, j] = 2.0
    tl.store(dst + rows[:, None] * T + rows[None, :], out)
    tl.store(dst + half[:, None] * T + rows[None, :], acc)
