"""``read_device_clock``: the one-program kernel the host side of the profiler launches to read the device clock."""
import triton.language as tl

from ...jit import jit as _dist_jit
from ...language.profiler import ticks_per_second, timestamp

__all__ = ["read_device_clock"]


@_dist_jit
def read_device_clock(out_ptr):
    """One program stores ``(timestamp(), ticks_per_second())`` at ``out_ptr[0:2]`` (int64): used by the host to
    measure the device clock's offset from host time."""
    tl.store(out_ptr, timestamp())
    tl.store(out_ptr + 1, ticks_per_second())
