"""``triton_dist.jit``: placeholder until the runtime lands; behaves as ``triton.jit``."""
import triton

jit = triton.jit
