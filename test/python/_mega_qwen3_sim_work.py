"""Rank-side functions for test_mega_qwen3_sim.py (module level, so simulator rank processes import them by
reference)."""
from __future__ import annotations

import torch


def _gloo_all_reduce(t: torch.Tensor) -> torch.Tensor:
    """Sum over the ranks in fp32 (gloo), rounded once to ``t``'s dtype: what the mega kernel's all-reduce computes."""
    import torch.distributed as dist

    f = t.float()
    dist.all_reduce(f)
    return f.to(t.dtype)


def teacher_forced(steps: int, ctx_fill: int, ctx_steps: int, fused: bool = False, prefetch: bool = False,
                   seed: int = 0):
    """The toy Qwen3 on this rank: ``steps`` teacher-forced decode steps from an empty cache, then (same models)
    a cache filled with ``ctx_fill`` random positions and ``ctx_steps`` more steps (crossing a page boundary).
    Returns both runs' :func:`teacher_forced_check` results and the task count."""
    import triton_dist.utils as tdu
    from triton_dist.mega_triton_kernel.models import (Qwen3Config, Qwen3MegaModel, Qwen3TorchModel, random_kv,
                                                       random_weights, teacher_forced_check)

    tdu.initialize_distributed()
    import torch.distributed as dist

    rank, world = dist.get_rank(), dist.get_world_size()
    cfg = Qwen3Config.toy()
    w = random_weights(cfg, rank, world, seed=seed)
    mega = Qwen3MegaModel(cfg, w, rank, world, prefetch=prefetch, enable_mlp_fc1_silu_fusion=fused)
    ref = Qwen3TorchModel(cfg, w, rank, world, all_reduce=_gloo_all_reduce)
    g = torch.Generator().manual_seed(seed + 7)
    toks = torch.randint(0, cfg.vocab_size, (steps + ctx_steps, ), generator=g).tolist()
    fresh = teacher_forced_check(mega, ref, toks[:steps])
    kvs = random_kv(cfg, ctx_fill, rank, world, seed=seed + 1)
    mega.load_kv(kvs)
    ref.load_kv(kvs)
    filled = teacher_forced_check(mega, ref, toks[steps:], reset=False)
    logits = mega.logits.clone()
    return dict(fresh=fresh, filled=filled, pos=mega.pos, tasks=len(mega.builder.tasks), logits=logits)


def teacher_forced_batched(lens, steps: int, fused: bool = False, seed: int = 0):
    """The toy Qwen3 on this rank at batch ``len(lens)``: request ``b``'s cache filled with ``lens[b]`` random
    positions (0: empty), then ``steps`` teacher-forced steps of one token per request, mega kernel against the
    batched torch reference (per request); then ``prepare(tokens, lengths=...)`` (a device tensor for the mega
    model) sets every request back to its last position and that step runs again with other tokens. Returns the
    :func:`teacher_forced_check` result, the re-run's per-request cosine / top-1 and the end positions."""
    import triton_dist.utils as tdu
    from triton_dist.mega_triton_kernel.models import (Qwen3Config, Qwen3MegaModel, Qwen3TorchModel, random_kv,
                                                       random_weights, teacher_forced_check)

    tdu.initialize_distributed()
    import torch.distributed as dist

    rank, world = dist.get_rank(), dist.get_world_size()
    cfg = Qwen3Config.toy()
    B = len(lens)
    w = random_weights(cfg, rank, world, seed=seed)
    mega = Qwen3MegaModel(cfg, w, rank, world, batch=B, enable_mlp_fc1_silu_fusion=fused)
    ref = Qwen3TorchModel(cfg, w, rank, world, all_reduce=_gloo_all_reduce, batch=B)
    for b, n in enumerate(lens):
        if n:
            kvs = random_kv(cfg, n, rank, world, seed=seed + 1 + b)
            mega.load_kv(kvs, request=b)
            ref.load_kv(kvs, request=b)
    g = torch.Generator().manual_seed(seed + 7)
    toks = torch.randint(0, cfg.vocab_size, (steps + 1, B), generator=g).tolist()
    stepped = teacher_forced_check(mega, ref, toks[:steps], reset=False)
    # the lengths from a device tensor: every request's last position decoded again with other tokens
    end = list(mega.pos)
    mega.prepare(toks[steps], lengths=torch.tensor(end, dtype=torch.int32, device=mega.kv_lens.device))
    ref.prepare(toks[steps], lengths=end)
    mega.run()
    ref.run()
    cos = torch.nn.functional.cosine_similarity(mega.logits, ref.logits, dim=1).tolist()
    top1 = (mega.logits.argmax(1) == ref.logits.argmax(1)).tolist()
    return dict(stepped=stepped, again=dict(cosine=cos, top1=top1), pos=mega.pos, logits=mega.logits.clone())


def same_bits_as_default(batch: int, options: dict, steps: int = 2, seed: int = 0, names: bool = False):
    """The toy Qwen3 (fused MLP) at ``batch`` built with the builder ``options`` and without: the logits of ``steps``
    decode steps from a cache of 5 positions per request, compared bit for bit. Returns whether the logits were
    equal at every step, the steps run, the number of queue slots carrying an early prefetch and the queue row width
    of the ``options`` build (one simulator worker runs every task: each o_proj tile's prefetch goes to the first
    attention task before it, or to the tile itself; the simulator checks the prefetch's arguments, the prefetch
    itself is a hint with no effect there), and with ``names`` the default build's op names (``base_ops``)."""
    import triton_dist.utils as tdu
    from triton_dist.mega_triton_kernel.models import Qwen3Config, Qwen3MegaModel, random_kv, random_weights

    tdu.initialize_distributed()
    cfg = Qwen3Config.toy()
    w = random_weights(cfg, seed=seed)
    base = Qwen3MegaModel(cfg, w, batch=batch, enable_mlp_fc1_silu_fusion=True)
    other = Qwen3MegaModel(cfg, w, batch=batch, enable_mlp_fc1_silu_fusion=True, **options)
    for b in range(batch):
        kvs = random_kv(cfg, 5, seed=seed + 1 + b)
        base.load_kv(kvs, request=b)
        other.load_kv(kvs, request=b)
    g = torch.Generator().manual_seed(seed + 7)
    equal = True
    for _ in range(steps):
        toks = torch.randint(0, cfg.vocab_size, (batch, ), generator=g).tolist()
        t = toks[0] if batch == 1 else toks
        equal = equal and torch.equal(base.step(t), other.step(t))
    out = dict(equal=equal, steps=steps, slots=len(other.builder.slot_prefetches), row=other.builder.queue_row)
    if names:
        out["base_ops"] = [op.name for op in base.builder.compiled_ops]
    return out
