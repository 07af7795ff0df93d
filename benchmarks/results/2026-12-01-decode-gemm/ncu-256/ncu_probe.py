"""scratch: one call each of our 128x128 / 128x256 tilings and cuBLAS at 256x8192x7168, for ncu."""
import sys

import torch

sys.path.insert(0, "python")
from triton_dist.kernels import gemm as g  # noqa: E402

M, N, K = (int(x) for x in (sys.argv[1] if len(sys.argv) > 1 else "256x8192x7168").split("x"))
a = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
b = torch.randn(K, N, device="cuda", dtype=torch.bfloat16)
c = torch.empty(M, N, device="cuda", dtype=torch.bfloat16)
g.ensure_tma_allocator()
vs = [g.GemmVariant.parse(t) for t in ("128x128x64x8x4/plain", "128x256x64x8x3/plain")]
for _ in range(3):
    for v in vs:
        g.launch_variant(a, b, c, v)
    torch.matmul(a, b)
torch.cuda.synchronize()
torch.cuda.cudart().cudaProfilerStart()
for v in vs:
    g.launch_variant(a, b, c, v)
torch.matmul(a, b)
torch.cuda.synchronize()
torch.cuda.cudart().cudaProfilerStop()
print("done")
