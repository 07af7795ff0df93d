"""GPU tier for ``ops.matmul`` at decode sizes (M <= 128): the decode rule (pointer loads, split-K where
the tiles leave SMs idle), explicit split-K tilings, determinism, the split-K workspace under CUDA-graph capture
and on two streams. No communication: ``torchrun --nproc_per_node 2 -m pytest test/python/gpu/test_gpu_gemm.py``
(each rank checks its own device, by the binding rule: ranks may share a GPU, and the decode rule then plans for the
rank's SM share), or on one GPU as a script::

    python test/python/gpu/test_gpu_gemm.py
"""
import os
import sys

import pytest
import torch

from triton_dist.kernels import gemm_config as gc
from triton_dist.kernels import gemm_table as gt
from triton_dist.ops.gemm import matmul

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # as a script: test/python

from _torchrun_shmem import DEVICE  # noqa: E402

pytestmark = pytest.mark.gpu

#: the decode shapes of the GEMM+AR issue and the rule's corners (one K block; 64 tiles, split 2; 16 tiles, split 8)
SHAPES = [(1, 8192, 3584), (16, 8192, 7168), (64, 8192, 3584), (128, 8192, 7168), (1, 4096, 14336), (37, 1000, 136),
          (1, 64, 128), (16, 1024, 7168)]


def _device():
    dev = torch.device("cuda", DEVICE)
    torch.cuda.set_device(dev)
    return dev


def _operands(M, N, K, dev, seed=0):
    gen = torch.Generator(device=dev).manual_seed(seed)
    a = torch.randn(M, K, device=dev, generator=gen).to(torch.bfloat16)
    b = torch.randn(K, N, device=dev, generator=gen).to(torch.bfloat16)
    return a, b


def _check(c, a, b, what):
    ref = a.float() @ b.float()
    err = ((c.float() - ref).abs().max() / ref.abs().max()).item()
    assert err < 1e-2, f"{what}: max relative error {err:.3g}"


def test_decode_rule_is_correct_and_deterministic():
    dev = _device()
    sms = gc.num_sms(dev)
    for M, N, K in SHAPES:
        a, b = _operands(M, N, K, dev)
        kind, cfg = gt.select_matmul_launch(M, N, K, a.dtype, torch.cuda.get_device_name(dev), use_tma=True,
                                           num_sms=sms, table=False)
        assert kind == "decode", (M, N, K, kind)
        c1 = matmul(a, b, table=False)
        c2 = matmul(a, b, table=False)
        torch.cuda.synchronize()
        _check(c1, a, b, f"decode rule {cfg} at {M}x{N}x{K}")
        assert torch.equal(c1, c2), f"{cfg} at {M}x{N}x{K}: two calls differ"
        c3 = matmul(a, b)  # auto: the table's entry where it has one
        torch.cuda.synchronize()
        _check(c3, a, b, f"auto at {M}x{N}x{K}")


@pytest.mark.parametrize("cfg", ["16x64x128x4x4k4", "16x64x128x4x4pk8", "64x128x64x4x4k2", "64x64x128x4x4pk3"])
def test_explicit_split_k_tilings(cfg):
    dev = _device()
    tile = gc.TileConfig.parse(cfg)
    for M, N, K in ((1, 8192, 3584), (100, 1000, 1000), (64, 256, 128)):  # the last: more splits than K blocks
        a, b = _operands(M, N, K, dev, seed=M)
        c = matmul(a, b, config=tile)
        again = matmul(a, b, config=tile)
        torch.cuda.synchronize()
        _check(c, a, b, f"{cfg} at {M}x{N}x{K}")
        assert torch.equal(c, again)
    for cnt in [c for cnts in gc._split_k_cnt.values() for c in cnts]:
        assert not cnt.any(), "split-K counters not back to 0 after the launches"
    # fp8 with a per-tensor scale, through the split-K kernel
    a8 = (torch.randn(16, 512, device=dev) / 4).to(torch.float8_e4m3fn)
    b8 = (torch.randn(512, 256, device=dev) / 4).to(torch.float8_e4m3fn)
    s = torch.tensor([0.5], device=dev)
    c8 = matmul(a8, b8, scale=s, config=tile)
    ref = (a8.float() @ b8.float()) * 0.5
    assert ((c8.float() - ref).abs().max() / ref.abs().max()).item() < 1e-2


def test_split_k_under_graph_capture_and_on_two_streams():
    """A split-K matmul captured before any eager call of its stream (its counters are allocated, and zeroed, in the
    capture), replayed twice; eager calls afterwards (their own counters); two streams at once (one workspace
    each)."""
    dev = _device()
    M, N, K = 1, 4096, 14336  # the rule splits it in two
    a, b = _operands(M, N, K, dev, seed=7)
    ref = matmul(a, b, table=False).clone()  # eager, on the default stream
    out = torch.empty(M, N, dtype=torch.bfloat16, device=dev)
    side = torch.cuda.Stream(dev)
    side.wait_stream(torch.cuda.current_stream(dev))
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=side):
        matmul(a, b, out=out, table=False)
    for _ in range(2):
        out.zero_()
        graph.replay()
        torch.cuda.synchronize()
        assert torch.equal(out, ref), "graph replay differs from the eager call"
    with torch.cuda.stream(side):  # the capture stream, eagerly: counters zeroed outside the capture
        again = matmul(a, b, table=False)
    torch.cuda.synchronize()
    assert torch.equal(again, ref)
    s1, s2 = torch.cuda.Stream(dev), torch.cuda.Stream(dev)
    for s in (s1, s2):
        s.wait_stream(torch.cuda.current_stream(dev))
    outs = {}
    for i in range(20):
        for s in (s1, s2):
            with torch.cuda.stream(s):
                outs[(s.cuda_stream, i % 2)] = matmul(a, b, table=False)
    torch.cuda.synchronize()
    for key, c in outs.items():
        assert torch.equal(c, ref), f"stream {key}: differs"


if __name__ == "__main__":
    test_decode_rule_is_correct_and_deterministic()
    for c in ["16x64x128x4x4k4", "16x64x128x4x4pk8", "64x128x64x4x4k2", "64x64x128x4x4pk3"]:
        test_explicit_split_k_tilings(c)
    test_split_k_under_graph_capture_and_on_two_streams()
    print("test_gpu_gemm: all passed")
