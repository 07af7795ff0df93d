"""CUDA-graph capture shared by the benchmarks, so every implementation and baseline is timed from graphs built the
same way."""
from __future__ import annotations

import torch


def capture_calls(fn, k: int, stream, warmup: int = 2):
    """``k`` back-to-back calls of ``fn`` captured in one CUDA graph on ``stream`` and returned (synchronized, not yet
    replayed). First, after the current stream's work, ``warmup`` eager calls on ``stream`` outside the graph: they
    compile, autotune and allocate workspaces, none of which may happen during capture."""
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(warmup):
            fn()
    torch.cuda.current_stream().wait_stream(stream)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=stream):
        for _ in range(k):
            fn()
    torch.cuda.synchronize()
    return graph
