"""AllReduce family: ``allreduce`` (``output = sum over ranks of input``, every rank the same bits), point to point
one-shot over symmetric memory, no multicast, in flagged 64-bit words (the ``ll`` protocol of
:mod:`triton_dist.kernels.common`: ``dl.store_flagged`` / ``dl.load_flagged``, no separate signal, no fence).

The builder allocates (collectively: every rank adds the same ops in the same order) a per-op symmetric staging
buffer of int64 flagged words ``[2 (parity), WORLD, NW]`` (``NW``: the op's words, ``EPW`` elements per 32-bit
word: fp32 1, bf16 / fp16 2). ``input`` and ``output`` are any tensors of the builder's device (not symmetric).

Task ``tile`` owns words ``[tile * TW, (tile + 1) * TW)`` (``TW * EPW = CHUNK`` elements: a Qwen3 hidden vector of
4096 bf16 makes 4 tasks). In step ``step`` it

1. loads its words of ``input`` and stores them, flagged ``ll_flag(step, tag)`` (``tag``: the element count mod
   2**16, so ranks that built different sizes are reported, not hung), into slot ``[step % 2, RANK]`` of every
   peer's buffer;
2. waits for the peers' words of the same tile in slots ``[step % 2, src]`` of its own buffer, clears them
   (consumed), and writes ``output = x_0 + x_1 + ... + x_{WORLD-1}`` in rank order with fp32 accumulation (its own
   input for its own rank), so every rank computes the same sum in the same order: bit-identical results.

It reads its chunk of ``input`` and writes its chunk of ``output`` (the staging buffer is private to the op and
each word range to one tile index, so it takes part in no dependency). Task ``tile`` waits for the task of the
same index on the other ranks (allowed by ``core/task.py``'s contract: every rank builds the same task list); it
sends before it waits, so two ranks never wait for each other's send.

Why the stores of step ``e`` need no wait for the peer to have consumed slot parity ``e % 2`` (written last in step
``e - 2``): rank A's task ``t`` of step ``e`` runs after A's task ``t`` of step ``e - 1`` received B's words of step
``e - 1``, which B sent in its task ``t`` of step ``e - 1``; B's launch of step ``e - 1`` started after its launch of
step ``e - 2`` ended, so B had read and cleared the parity-``e % 2`` words of tile ``t`` (step ``e - 2``) before A
can write them again. A word's flag carries the step (mod 2**15 - 1) and consumed words are cleared, so an old word
is never taken for a new one. Flags live in device memory (the step epoch), so a run can be replayed in a CUDA
graph; every rank must run the builder the same number of times.
"""
from __future__ import annotations

import triton
import triton.language as tl

import triton_dist
from triton_dist.kernels.common import (ll_flag, ll_load_f32, ll_load_words, ll_receive, ll_send_to_peers,
                                        ll_size_tag, ll_store_f32, ll_words_f32)
from ..core.checks import check_same_device, check_tensor
from ..core.device import arg
from ..core.registry import register_task
from ..core.task import Op, Tile, region

__all__ = ["allreduce_task", "CHUNK"]

#: Elements per allreduce task (4096 bf16: 4 tasks).
CHUNK = 1024


@triton_dist.jit
def _rank_part(x_ptr, buf_ptr, par, w0, N: tl.constexpr, NW: tl.constexpr, flag, src: tl.constexpr,
               RANK: tl.constexpr, WORLD: tl.constexpr, BW: tl.constexpr, EPW: tl.constexpr, DT: tl.constexpr):
    """Rank ``src``'s elements of words ``w0 .. w0 + BW`` as fp32: this rank's input, or the peer's flagged words
    (waited for, then cleared)."""
    if src == RANK:
        return ll_load_f32(x_ptr, w0, N, BW, EPW)
    else:
        return ll_words_f32(ll_receive(buf_ptr, (par * WORLD + src) * NW, w0, NW, flag, BW), DT, EPW)


@triton_dist.jit
def allreduce_task(args, tile, step, N: tl.constexpr, TW: tl.constexpr, BW: tl.constexpr, EPW: tl.constexpr,
                   TAG: tl.constexpr, RANK: tl.constexpr, WORLD: tl.constexpr, DT: tl.constexpr):
    """Words ``tile * TW ...`` of ``args``: input, output (``N`` elements of ``DT``), staging buffer (symmetric int64
    ``[2, WORLD, NW]``). See the module docstring."""
    x_ptr = arg(args, 0, DT)
    o_ptr = arg(args, 1, DT)
    buf_ptr = arg(args, 2, tl.int64)
    NW: tl.constexpr = (N + EPW - 1) // EPW
    flag = ll_flag(step, TAG)
    par = step % 2
    w_end = tl.minimum(tile * TW + TW, NW)
    for w0 in range(tile * TW, w_end, BW):
        words = ll_load_words(x_ptr, w0, N, BW, EPW)
        ll_send_to_peers(buf_ptr, par, w0, words, NW, flag, RANK, NW, WORLD, BW)
    for w0 in range(tile * TW, w_end, BW):
        acc = _rank_part(x_ptr, buf_ptr, par, w0, N, NW, flag, 0, RANK, WORLD, BW, EPW, DT)
        for src in tl.static_range(1, WORLD):
            acc += _rank_part(x_ptr, buf_ptr, par, w0, N, NW, flag, src, RANK, WORLD, BW, EPW, DT)
        ll_store_f32(o_ptr, w0, N, acc, BW, EPW)


@register_task("allreduce", "AllReduce")
def build_allreduce(builder, layer_id, input, output, double_input_buffer: bool = False) -> Op:
    import torch

    name = "make_allreduce"
    if builder.world_size < 2:
        raise ValueError(f"{name}: needs world_size > 1 (got {builder.world_size}); at world size 1 the sum is the "
                         f"input itself")
    if not isinstance(double_input_buffer, bool):
        raise TypeError(f"{name}: double_input_buffer must be a bool, got {double_input_buffer!r}")
    check_tensor(name, "input", input, dtype=(torch.bfloat16, torch.float16, torch.float32))
    check_tensor(name, "output", output, dtype=input.dtype, shape=list(input.shape))
    check_same_device(name, builder.device, input=input, output=output)  # before the collective allocation
    x, o = input.reshape(-1), output.reshape(-1)
    n = x.numel()
    if n == 0:
        raise ValueError(f"{name}: empty tensors")
    epw = 4 // x.element_size()
    nw = triton.cdiv(n, epw)
    tw = CHUNK // epw
    world = builder.world_size
    buf = builder.create_symm_tensor((2, world, nw), torch.int64)
    tiles = []
    for t in range(triton.cdiv(nw, tw)):
        s = slice(t * tw * epw, min(n, (t + 1) * tw * epw))
        b = (s.stop - s.start) * x.element_size()
        tiles.append(Tile(reads=region(x, s), writes=region(o, s), cost=(2 * world + 1) * b))
    return Op("AllReduce", "allreduce", layer_id, allreduce_task, [x, o, buf],
              dict(N=n, TW=tw, BW=min(tw, triton.next_power_of_2(nw)), EPW=epw, TAG=ll_size_tag(n), RANK=builder.rank,
                   WORLD=world, DT=x.dtype), tiles)
