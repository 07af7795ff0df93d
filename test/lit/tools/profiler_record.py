# The intra-kernel profiler reads the device clock and SM id only when ENABLE_PROFILING is on.
#
# RUN: %compile %s:profiled -s "*i64:16, *fp32:16, 128, True" --target cuda:90 --stage ptx | filecheck %s --check-prefix=ON
# RUN: %compile %s:profiled -s "*i64:16, *fp32:16, 128, False" --target cuda:90 --stage ptx | filecheck %s --check-prefix=OFF
# RUN: %compile %s:profiled -s "*i64:16, *fp32:16, 128, True" --target hip:gfx942 --stage amdgcn | filecheck %s --check-prefix=GCN-ON
# RUN: %compile %s:profiled -s "*i64:16, *fp32:16, 128, False" --target hip:gfx942 --stage amdgcn | filecheck %s --check-prefix=GCN-OFF
#
# ON: mov.u32 {{.*}}%smid
# ON: mov.u64 {{.*}}%globaltimer
# ON: mov.u64 {{.*}}%globaltimer
# ON: mov.u64 {{.*}}%globaltimer
# ON: mov.u64 {{.*}}%globaltimer
# ON-NOT: %globaltimer
# ON: ret;
# OFF-NOT: %globaltimer
# OFF-NOT: %smid
# OFF: ret;
# GCN-ON: s_getreg_b32 {{.*}}hwreg(HW_REG_HW_ID, 8, 8)
# GCN-ON: s_memrealtime
# GCN-ON: s_memrealtime
# GCN-ON: s_memrealtime
# GCN-ON: s_memrealtime
# GCN-ON-NOT: s_memrealtime
# GCN-ON: s_endpgm
# GCN-OFF-NOT: s_memrealtime
# GCN-OFF-NOT: s_getreg_b32
# GCN-OFF: s_endpgm
import triton
import triton.language as tl

from triton_dist.tools.profiler import Profiler


@triton.jit
def profiled(prof_buf, x_ptr, BLOCK: tl.constexpr, ENABLE: tl.constexpr):
    profiler = Profiler.create(prof_buf, 0, 1, True, ENABLE_PROFILING=ENABLE)
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    profiler = profiler.record(True, 0)
    x = tl.load(x_ptr + offs)
    profiler = profiler.record(False, 0)
    profiler = profiler.record(True, 1)
    tl.store(x_ptr + offs, x * 2.0)
    profiler = profiler.record(False, 1)
