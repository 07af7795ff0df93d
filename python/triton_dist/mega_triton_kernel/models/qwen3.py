"""The Qwen3 dense decoder: one decode step of a batch of requests (``batch``, default 1; each request with its own
context length) as ONE mega kernel (:class:`Qwen3MegaModel`), and the same model in plain torch
(:class:`Qwen3TorchModel`) as the correctness reference and the benchmark's baseline.

Per layer (pre-norm, tensor parallel over ``world`` ranks)::

    h   = rms_norm(x, ln1)
    qkv = h @ Wqkv.T                         # column-parallel: this rank's q heads, then kv heads, then v heads
    q, cache <- qk_norm_rope_update_kvcache  # per-head RMS norm of q and k, RoPE at the token's position, k/v to
                                             # the paged cache
    a   = flash_decode(q, cache)             # GQA attention over the kv_lens positions
    o   = a @ Wo.T                           # row-parallel: a partial sum ...
    o   = allreduce(o)                       # ... summed over the ranks (world > 1)
    x   = x + o
    h   = rms_norm(x, ln2)
    f   = silu(h @ Wgate.T) * (h @ Wup.T)    # column-parallel (fc1 then silu_mul_up, or the fused form)
    d   = allreduce(f @ Wdown.T)             # row-parallel
    x   = x + d

then ``logits = rms_norm(x, final_norm) @ lm_head.T`` (fp32 logits; embedding, norms and lm_head replicated).

Weights are random (:func:`random_weights`: deterministic, real shapes, scales that keep activations of the order of
one over many layers) so no checkpoint is needed; the tensor-parallel shards of one seed are slices of the same
full weights whatever ``world`` is.

Decode protocol (both models): ``kv_lens [batch]`` (int32, on the device) counts the tokens in each request's cache
INCLUDING the one being decoded, so request ``b``'s new token sits at position ``kv_lens[b] - 1``.
``step(tokens)`` = ``prepare(tokens)`` (one token per request: writes the embedding rows and advances ``kv_lens``
with device-side ops) + ``run()`` (the step alone: CUDA-graph capturable, replaying it recomputes the same positions;
the kernel reads ``kv_lens`` at run time, so a graph serves whatever lengths ``set_lengths`` puts there) and returns
the logits ``[batch, V]``. ``reset()`` starts new sequences; ``load_kv(kvs, request)`` fills one request's cache
with given values (e.g. :func:`random_kv`, to time decode at a long context). Errors (a step with more or fewer
tokens than the batch the model was built for, a length past ``max_context``, a lengths tensor of the wrong
shape, dtype or device) are ValueErrors raised before anything is written or launched.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Callable, List, Optional, Sequence

import torch

__all__ = ["Qwen3Config", "QWEN3_8B", "QWEN3_32B", "Qwen3Weights", "Qwen3LayerWeights", "random_weights",
           "random_kv", "Qwen3MegaModel", "Qwen3TorchModel", "teacher_forced_check", "logits_agreement", "step_bytes",
           "STEP_BYTES_FORMULA"]


@dataclass(frozen=True)
class Qwen3Config:
    """Shapes of a Qwen3 dense model (defaults: Qwen3-8B). ``page_size``: tokens per KV-cache page;
    ``max_context``: the longest sequence (cache pages and RoPE tables are sized for it)."""
    hidden_size: int = 4096
    num_layers: int = 36
    num_q_heads: int = 32
    num_kv_heads: int = 8
    head_dim: int = 128
    intermediate_size: int = 12288
    vocab_size: int = 151936
    rms_eps: float = 1e-6
    rope_theta: float = 1000000.0
    page_size: int = 64
    max_context: int = 4096

    def __post_init__(self):
        for name in ("hidden_size", "num_layers", "num_q_heads", "num_kv_heads", "head_dim", "intermediate_size",
                     "vocab_size", "page_size", "max_context"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"Qwen3Config: {name} must be an int >= 1, got {v!r}")
        for name in ("rms_eps", "rope_theta"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not v > 0:
                raise ValueError(f"Qwen3Config: {name} must be a positive number, got {v!r}")
        if self.num_q_heads % self.num_kv_heads:
            raise ValueError(f"Qwen3Config: num_q_heads {self.num_q_heads} is not a multiple of num_kv_heads "
                             f"{self.num_kv_heads} (grouped-query attention)")
        if self.head_dim % 2:
            raise ValueError(f"Qwen3Config: head_dim must be even (rotate-half RoPE), got {self.head_dim}")

    def replace(self, **kw) -> "Qwen3Config":
        """A copy with some fields changed (e.g. ``num_layers`` to shrink a preset for a quick run)."""
        return dataclasses.replace(self, **kw)

    @staticmethod
    def toy(**kw) -> "Qwen3Config":
        """A tiny Qwen3 (2 layers, hidden 256, 4 q / 2 kv heads of 64, intermediate 512, vocab 512) for the
        simulator."""
        base = dict(hidden_size=256, num_layers=2, num_q_heads=4, num_kv_heads=2, head_dim=64, intermediate_size=512,
                    vocab_size=512, page_size=16, max_context=64)
        base.update(kw)
        return Qwen3Config(**base)

    def check_world(self, world: int) -> None:
        """Tensor parallelism over ``world`` ranks splits the q heads, the kv heads and the intermediate size."""
        if isinstance(world, bool) or not isinstance(world, int) or world < 1:
            raise ValueError(f"Qwen3: world size must be an int >= 1, got {world!r}")
        for name, n in (("num_q_heads", self.num_q_heads), ("num_kv_heads", self.num_kv_heads),
                        ("intermediate_size", self.intermediate_size)):
            if n % world:
                raise ValueError(f"Qwen3: {name}={n} is not divisible by the world size {world} (tensor "
                                 f"parallelism splits it over the ranks)")

    # per-rank sizes
    def local_q_heads(self, world: int) -> int:
        return self.num_q_heads // world

    def local_kv_heads(self, world: int) -> int:
        return self.num_kv_heads // world

    def local_intermediate(self, world: int) -> int:
        return self.intermediate_size // world


#: Qwen3-8B (36 layers, hidden 4096, 32 q / 8 kv heads of 128, intermediate 12288).
QWEN3_8B = Qwen3Config()
#: Qwen3-32B (64 layers, hidden 5120, 64 q / 8 kv heads of 128, intermediate 25600).
QWEN3_32B = Qwen3Config(hidden_size=5120, num_layers=64, num_q_heads=64, num_kv_heads=8, head_dim=128,
                        intermediate_size=25600)


@dataclass
class Qwen3LayerWeights:
    """One layer's weights on one rank: ``ln1, ln2 [H]``; ``wqkv [(Hq_l + 2 Hkv_l) D, H]`` (q heads, k heads, v
    heads of this rank); ``q_norm, k_norm [D]``; ``wo [H, Hq_l D]``; ``w1 [2 I_l, H]`` (gate rows, then up rows);
    ``w2 [H, I_l]``."""
    ln1: torch.Tensor
    wqkv: torch.Tensor
    q_norm: torch.Tensor
    k_norm: torch.Tensor
    wo: torch.Tensor
    ln2: torch.Tensor
    w1: torch.Tensor
    w2: torch.Tensor


@dataclass
class Qwen3Weights:
    """All weights of one rank (``rank`` of ``world``): ``embed [V, H]``, ``layers``, ``final_norm [H]``,
    ``lm_head [V, H]`` (embedding, norms and lm_head replicated)."""
    cfg: Qwen3Config
    rank: int
    world: int
    embed: torch.Tensor
    layers: List[Qwen3LayerWeights]
    final_norm: torch.Tensor
    lm_head: torch.Tensor

    def linear_bytes(self) -> int:
        """Bytes of the linear weights one step reads on this rank (every layer's, plus lm_head)."""
        n = sum(t.numel() * t.element_size() for lw in self.layers for t in (lw.wqkv, lw.wo, lw.w1, lw.w2))
        return n + self.lm_head.numel() * self.lm_head.element_size()


def _check_rank(rank, world):
    if isinstance(rank, bool) or not isinstance(rank, int) or not 0 <= rank < world:
        raise ValueError(f"Qwen3: rank must be an int in [0, world={world}), got {rank!r}")


def _gen(seed: int, *key: int, device) -> torch.Generator:
    s = int(seed)
    for k in key:
        s = (s * 1000003 + int(k) + 1) % (1 << 62)
    return torch.Generator(device=device).manual_seed(s)


def random_weights(cfg: Qwen3Config, rank: int = 0, world: int = 1, seed: int = 0, device="cpu",
                   dtype: torch.dtype = torch.bfloat16) -> Qwen3Weights:
    """Deterministic random weights of ``cfg``'s shapes, rank ``rank``'s tensor-parallel shard over ``world`` ranks
    (each full weight is drawn from a generator seeded by ``(seed, layer, name)`` and sliced, so the shards of any
    ``world`` are slices of the same model). Scales keep activations of the order of one over any depth: embedding
    rows ~ N(0, 1); qkv and gate/up ~ N(0, 1/fan_in) (unit-variance outputs for unit-variance inputs); o and down,
    which add to the residual, ~ N(0, 4/(fan_in * 2 * layers)) (the layers add variance ~4 to the embedding's 1
    whatever the depth); norm weights ~ 1 + N(0, 0.1^2) (q/k norms too).

    ``lm_head`` is a separate tensor (read every step, as in Qwen3-8B/32B) holding the embedding scaled by
    ``H^-0.5`` (tied values, as Qwen3 <= 4B): a model with independent random lm_head rows has near-tied top
    logits (the top two of ~1e5 N(0, 1) logits are often within rounding noise of each other), so top-1 agreement
    between two correct implementations would measure rounding, not correctness; with tied values the residual
    stream keeps the token's embedding and the top-1 is decisive (margin ~7-15 over the second logit), while the
    logits still depend on the layers (their cosine to the embedding-only logits is ~0.75-0.85)."""
    cfg.check_world(world)
    _check_rank(rank, world)
    if dtype not in (torch.bfloat16, torch.float16, torch.float32):
        raise TypeError(f"random_weights: dtype must be bfloat16, float16 or float32, got {dtype}")
    device = torch.device(device)
    H, D, V = cfg.hidden_size, cfg.head_dim, cfg.vocab_size
    Hq, Hkv, inter = cfg.num_q_heads, cfg.num_kv_heads, cfg.intermediate_size
    hq, hkv, il = Hq // world, Hkv // world, inter // world

    def randn(shape, std, *key):
        g = _gen(seed, *key, device=device)
        return (torch.randn(shape, generator=g, device=device, dtype=torch.float32) * std).to(dtype)

    def norm(n, *key):
        return (1.0 + randn((n, ), 0.1, *key).float()).to(dtype)

    def rows(t, n_per_rank):
        return t[rank * n_per_rank:(rank + 1) * n_per_rank]

    layers = []
    for li in range(cfg.num_layers):
        k = (li + 1, )
        wq = rows(randn((Hq * D, H), H ** -0.5, *k, 1), hq * D)
        wk = rows(randn((Hkv * D, H), H ** -0.5, *k, 2), hkv * D)
        wv = rows(randn((Hkv * D, H), H ** -0.5, *k, 3), hkv * D)
        res = 2.0 * (2 * cfg.num_layers) ** -0.5
        wo = randn((H, Hq * D), (Hq * D) ** -0.5 * res, *k, 4)[:, rank * hq * D:(rank + 1) * hq * D]
        gate = rows(randn((inter, H), H ** -0.5, *k, 5), il)
        up = rows(randn((inter, H), H ** -0.5, *k, 6), il)
        w2 = randn((H, inter), inter ** -0.5 * res, *k, 7)[:, rank * il:(rank + 1) * il]
        layers.append(Qwen3LayerWeights(
            ln1=norm(H, *k, 8), wqkv=torch.cat([wq, wk, wv]).contiguous(), q_norm=norm(D, *k, 9),
            k_norm=norm(D, *k, 10), wo=wo.contiguous(), ln2=norm(H, *k, 11),
            w1=torch.cat([gate, up]).contiguous(), w2=w2.contiguous()))
    embed = randn((V, H), 1.0, 0, 1)
    lm_head = (embed.float() * H ** -0.5).to(dtype)
    return Qwen3Weights(cfg, rank, world, embed, layers, norm(H, 0, 2), lm_head)


def random_kv(cfg: Qwen3Config, n: int, rank: int = 0, world: int = 1, seed: int = 1, device="cpu",
              dtype: torch.dtype = torch.bfloat16):
    """Per layer ``(k, v)``, each ``[n, Hkv_l, D]`` ~ N(0, 1): cache content for positions ``0 .. n-1`` (rank
    ``rank``'s kv heads of the same full values whatever ``world``), for :meth:`Qwen3MegaModel.load_kv` /
    :meth:`Qwen3TorchModel.load_kv`."""
    cfg.check_world(world)
    _check_rank(rank, world)
    device = torch.device(device)
    hkv = cfg.local_kv_heads(world)
    out = []
    for li in range(cfg.num_layers):
        kv = []
        for j in (0, 1):
            g = _gen(seed, li + 1, 100 + j, device=device)
            full = torch.randn((n, cfg.num_kv_heads, cfg.head_dim), generator=g, device=device)
            kv.append(full[:, rank * hkv:(rank + 1) * hkv].to(dtype).contiguous())
        out.append(tuple(kv))
    return out


def rope_tables(cfg: Qwen3Config, device) -> tuple:
    """``cos, sin [1, max_context, D]`` fp32 (rotate-half layout: the D/2 frequencies twice)."""
    D = cfg.head_dim
    inv = cfg.rope_theta ** (-torch.arange(0, D, 2, dtype=torch.float64) / D)
    pos = torch.arange(cfg.max_context, dtype=torch.float64)
    f = torch.outer(pos, inv)
    emb = torch.cat([f, f], dim=-1)
    return (emb.cos().float().unsqueeze(0).to(device).contiguous(),
            emb.sin().float().unsqueeze(0).to(device).contiguous())


#: What :func:`step_bytes` counts (recorded in bench_mega's JSON), all in bytes per GPU per step.
STEP_BYTES_FORMULA = (
    "weights + kv_read + kv_write + norms + io; weights = (L * ((Hq_l + 2 Hkv_l) D H + H Hq_l D + 2 I_l H + H I_l) + "
    "V H) * e (every linear weight read once whatever the batch); kv_read = L * 2 * sum_b(context_b) * Hkv_l * D * e "
    "(k and v of each request's positions, the new one included); kv_write = L * 2 * B * Hkv_l * D * e (the new "
    "token's k and v); norms = (L * (2 H + 2 D) + H) * e; io = B * H * e (the input rows) + B * V * 4 (the fp32 "
    "logits written); e = the weight dtype's bytes; activations between the step's ops (L2-resident) not counted")


def step_bytes(cfg: Qwen3Config, world: int, context, dtype_bytes: int = 2) -> dict:
    """Bytes one decode step must move per GPU (:data:`STEP_BYTES_FORMULA`): ``context`` is the tokens in the cache
    at the step (the new one included), an int for batch 1 or one int per request. ``weights`` (every layer's qkv,
    o, gate/up, down shards and the replicated lm_head: read once per step whatever the batch), ``kv`` (the KV cache
    read), ``kv_write``, ``norms``, ``io`` and ``total``. The roofline of a memory-bound step is ``total / HBM
    bandwidth``."""
    cfg.check_world(world)
    contexts = [context] if isinstance(context, int) else list(context)
    if not contexts or any(isinstance(c, bool) or not isinstance(c, int) or c < 1 for c in contexts):
        raise ValueError(f"step_bytes: context must be an int >= 1 or a non-empty sequence of them, got {context!r}")
    H, D, L = cfg.hidden_size, cfg.head_dim, cfg.num_layers
    hq, hkv, il = cfg.local_q_heads(world), cfg.local_kv_heads(world), cfg.local_intermediate(world)
    B = len(contexts)
    per_layer = ((hq + 2 * hkv) * D * H + H * hq * D + 2 * il * H + H * il) * dtype_bytes
    weights = L * per_layer + cfg.vocab_size * H * dtype_bytes
    kv = L * 2 * sum(contexts) * hkv * D * dtype_bytes
    kv_write = L * 2 * B * hkv * D * dtype_bytes
    norms = (L * (2 * H + 2 * D) + H) * dtype_bytes
    io = B * H * dtype_bytes + B * cfg.vocab_size * 4
    return dict(weights=weights, kv=kv, kv_write=kv_write, norms=norms, io=io,
                total=weights + kv + kv_write + norms + io)


class _DecodeState:
    """Shared decode bookkeeping of a model built for ``batch`` requests: the host mirror of ``kv_lens`` and the
    checks (every error is raised before anything is written or launched)."""

    #: positions a step may attend over (None: up to ``max_context``); the torch model's ``attn_window``
    attn_window: Optional[int] = None

    def _init_state(self, cfg: Qwen3Config, batch: int):
        if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
            raise ValueError(f"{type(self).__name__}: batch must be an int >= 1, got {batch!r}")
        self.cfg = cfg
        self.batch = batch
        self.lens = [0] * batch  # tokens in each request's cache (host mirror of kv_lens)

    @property
    def pos(self):
        """Tokens in the cache (the host mirror of ``kv_lens``): an int at batch 1, a tuple (one per request)."""
        return self.lens[0] if self.batch == 1 else tuple(self.lens)

    def _check_tokens(self, tokens):
        """``tokens``: one per request, as ints (an int alone at batch 1) or an int32/int64 tensor of ``batch``
        elements (its values are not range-checked, which would synchronise)."""
        name, B = type(self).__name__, self.batch
        if isinstance(tokens, torch.Tensor):
            if tokens.numel() != B or tokens.dtype not in (torch.int32, torch.int64):
                what = "one int32/int64 element" if B == 1 else f"{B} int32/int64 elements (one per request)"
                raise ValueError(f"{name}: token must be {what}, got {tokens.dtype} {list(tokens.shape)}")
            return tokens.reshape(B)
        seq = list(tokens) if isinstance(tokens, (list, tuple)) else [tokens]
        if len(seq) != B:
            raise ValueError(f"{name}: the model was built for batch {B}: a step takes {B} token(s), one per "
                             f"request, got {len(seq)}")
        for t in seq:
            if isinstance(t, bool) or not isinstance(t, int) or not 0 <= t < self.cfg.vocab_size:
                raise ValueError(f"{name}: token must be an int in [0, vocab_size={self.cfg.vocab_size}), got {t!r}")
        return seq

    def reset(self):
        """Start new sequences (the cache content is kept but no longer counted)."""
        self.kv_lens.zero_()
        self.lens = [0] * self.batch

    def _take_token(self, tokens, lengths=None):
        """The host side of ``prepare(tokens, lengths)``: check them, advance every request's position (refusing one
        past ``max_context``, or past :attr:`attn_window` when set), put them in ``self.token`` and count them in
        ``kv_lens`` (device ops only); ``lengths`` given: :meth:`set_lengths` instead of the advance."""
        toks = self._check_tokens(tokens)
        if lengths is not None:
            self.set_lengths(lengths)
        else:
            new = [n + 1 for n in self.lens]
            self._check_lens(new)
            self.lens = new
        if isinstance(toks, torch.Tensor):
            self.token.copy_(toks)
        elif self.batch == 1:
            self.token.fill_(toks[0])
        else:
            self.token.copy_(torch.tensor(toks, dtype=self.token.dtype))
        if lengths is None:
            self.kv_lens.add_(1)

    def _check_lens(self, lens):
        attn_window = self.attn_window
        for b, n in enumerate(lens):
            which = "the sequence" if self.batch == 1 else f"request {b}"
            if n > self.cfg.max_context:
                raise ValueError(f"{type(self).__name__}: {which} would hold {n} tokens, more than "
                                 f"max_context={self.cfg.max_context}; reset() or build with a larger max_context")
            if attn_window is not None and n > attn_window:
                raise ValueError(f"{type(self).__name__}: the step would attend over {n} positions, more than "
                                 f"attn_window={attn_window}; build the reference with a larger attn_window")

    def set_lengths(self, lengths):
        """Set every request's context length: ``kv_lens := lengths``, the tokens in each cache counting the one the
        next :meth:`run` decodes (at position ``lengths[b] - 1``). ``lengths``: ``batch`` ints, or an int32 tensor
        ``[batch]`` on the model's device (copied on the device; its values are checked on the host, one
        synchronisation: each in ``[1, max_context]``). The step reads ``kv_lens`` on the device at run time, so a
        CUDA graph of :meth:`run` serves whatever lengths are set before each replay. Positions the cache does not
        hold (below ``lengths[b] - 1`` and never written) read as what the cache holds there."""
        name, B, dev = type(self).__name__, self.batch, self.kv_lens.device
        if isinstance(lengths, torch.Tensor):
            if lengths.dtype != torch.int32 or list(lengths.shape) != [B] or lengths.device != dev:
                raise ValueError(f"{name}.set_lengths: lengths must be an int32 tensor [{B}] on {dev}, got "
                                 f"{lengths.dtype} {list(lengths.shape)} on {lengths.device}")
            host = lengths.tolist()
        else:
            host = list(lengths) if isinstance(lengths, (list, tuple)) else [lengths]
            if len(host) != B or any(isinstance(n, bool) or not isinstance(n, int) for n in host):
                raise ValueError(f"{name}.set_lengths: lengths must be {B} ints (one per request), got {lengths!r}")
        if any(n < 1 for n in host):
            raise ValueError(f"{name}.set_lengths: every length must be >= 1 (it counts the decoded token), got "
                             f"{host}")
        self._check_lens(host)
        if isinstance(lengths, torch.Tensor):
            self.kv_lens.copy_(lengths)
        else:
            self.kv_lens.copy_(torch.tensor(host, dtype=torch.int32))
        self.lens = host

    def _check_kv(self, kvs, request: int = 0):
        cfg = self.cfg
        if isinstance(request, bool) or not isinstance(request, int) or not 0 <= request < self.batch:
            raise ValueError(f"load_kv: request must be an int in [0, batch={self.batch}), got {request!r}")
        if len(kvs) != cfg.num_layers:
            raise ValueError(f"load_kv: expected {cfg.num_layers} layers of (k, v), got {len(kvs)}")
        n = kvs[0][0].shape[0]
        shape = [n, cfg.local_kv_heads(self.world), cfg.head_dim]
        for li, (k, v) in enumerate(kvs):
            for name, t in (("k", k), ("v", v)):
                if list(t.shape) != shape:
                    raise ValueError(f"load_kv: layer {li} {name} has shape {list(t.shape)}, expected {shape}")
        if n >= cfg.max_context:
            raise ValueError(f"load_kv: {n} positions leave no room for a decoded token (max_context "
                             f"{cfg.max_context})")
        return n

    def step(self, tokens) -> torch.Tensor:
        """Decode ``tokens`` (one per request) at each request's next position; returns the fp32 logits
        ``[batch, V]`` (a copy)."""
        self.prepare(tokens)
        self.run()
        return self.logits.clone()


class Qwen3MegaModel(_DecodeState):
    """One Qwen3 decode step of ``batch`` requests on rank ``rank`` of ``world_size`` as one mega kernel.

    ``weights``: this rank's :class:`Qwen3Weights` (on the builder's device). ``prefetch``: add a ``make_prefetch``
    of each next layer's linear weights (pulled into L2 by otherwise idle workers). ``block_table_seed``: the
    requests' pages are a permutation of the cache's (seeded; None = in order).

    Batched decode (``batch`` B > 1): every step decodes one token for each of the B requests, each at its own
    position ``kv_lens[b] - 1`` with its own pages of the cache (``block_tables [B, pages per request]``, the cache
    ``B * pages per request`` pages), all in the same kernel: the linear layers take the B rows at once (each weight
    read once per step: see ``tasks/linear.py``), ``qk_norm_rope_update_kvcache`` and ``flash_decode`` run one task
    per request and kv head (splits over each request's own length). ``kv_lens`` is a device tensor read by the
    kernel at run time (:meth:`set_lengths`, or ``prepare``'s ``+= 1``), so one CUDA graph of :meth:`run` serves
    changing lengths. The kernel is built for exactly B rows: a step takes B tokens. Batch 1 builds the same
    kernel as before batching existed. Other keyword arguments go to
    :class:`~triton_dist.mega_triton_kernel.ModelBuilder` (``num_workers``, ``num_warps``,
    ``enable_mlp_fc1_silu_fusion`` (fused fc1 + silu * up), ``enable_profiling``, ...). Collective at
    ``world_size > 1`` (the all-reduce staging is symmetric memory): every rank constructs it in the same order.
    """

    def __init__(self, cfg: Qwen3Config, weights: Qwen3Weights, rank: int = 0, world_size: int = 1, *,
                 batch: int = 1, prefetch: bool = False, block_table_seed: Optional[int] = 0, **builder_kwargs):
        from ..builder import ModelBuilder

        cfg.check_world(world_size)
        _check_rank(rank, world_size)
        _check_weights(cfg, weights, rank, world_size)
        self._init_state(cfg, batch)
        B = batch
        self.rank, self.world = rank, world_size
        self.weights = weights
        b = ModelBuilder(rank, world_size, **builder_kwargs)
        self.builder = b
        dev = b.device
        if weights.embed.device != dev:
            raise ValueError(f"Qwen3MegaModel: the weights are on {weights.embed.device}, the builder's device is "
                             f"{dev}")
        dt = weights.embed.dtype
        H, D, V = cfg.hidden_size, cfg.head_dim, cfg.vocab_size
        hq, hkv, il = cfg.local_q_heads(world_size), cfg.local_kv_heads(world_size), cfg.local_intermediate(world_size)
        L, P = cfg.num_layers, cfg.page_size
        nblocks = -(-cfg.max_context // P)

        def act(*shape, dtype=dt):
            return torch.zeros(shape, dtype=dtype, device=dev)

        self.token = torch.zeros(B, dtype=torch.int64, device=dev)
        self.x = act(B, H)  # the embedding rows of the tokens being decoded
        self.kv_lens = torch.zeros(B, dtype=torch.int32, device=dev)
        if block_table_seed is None:
            order = torch.arange(B * nblocks)
        else:
            order = torch.randperm(B * nblocks, generator=torch.Generator().manual_seed(block_table_seed))
        self.block_tables = order.to(torch.int32).reshape(B, nblocks).to(dev)
        # one cache tensor per layer: a logical region names its storage, so layers sharing one would depend on
        # each other
        self.key_caches = [act(B * nblocks, P, hkv, D) for _ in range(L)]
        self.value_caches = [act(B * nblocks, P, hkv, D) for _ in range(L)]
        self.cos, self.sin = rope_tables(cfg, dev)
        self.logits = act(B, V, dtype=torch.float32)
        fused = bool(builder_kwargs.get("enable_mlp_fc1_silu_fusion", False))
        self.fused_mlp, self.prefetch = fused, bool(prefetch)

        x = self.x
        for li, lw in enumerate(weights.layers):
            h1, qkv = act(B, H), act(B, (hq + 2 * hkv) * D)
            q, attn, o = act(B, 1, hq, D), act(B, 1, hq, D), act(B, H)
            x_mid, h2, a, d, x_out = act(B, H), act(B, H), act(B, il), act(B, H), act(B, H)
            b.make_rms_norm(x, lw.ln1, h1, rms_eps=cfg.rms_eps, layer_id=li)
            if prefetch and li + 1 < L:
                nxt = weights.layers[li + 1]
                for w in (nxt.wqkv, nxt.wo, nxt.w1, nxt.w2):
                    b.make_prefetch(w, layer_id=li + 1)
            b.make_qkv_proj(h1, lw.wqkv, qkv, layer_id=li)
            b.make_qk_norm_rope_update_kvcache(
                qkv.view(B, 1, hq + 2 * hkv, D), self.key_caches[li], self.value_caches[li], self.block_tables,
                self.kv_lens, lw.q_norm, lw.k_norm, self.cos, self.sin, q, q_rms_eps=cfg.rms_eps,
                k_rms_eps=cfg.rms_eps, rope_theta=cfg.rope_theta, layer_id=li)
            b.make_flash_decode(q, self.key_caches[li], self.value_caches[li], self.block_tables, self.kv_lens, attn,
                                layer_id=li)
            b.make_o_proj(attn.view(B, hq * D), lw.wo, o, layer_id=li)
            if world_size > 1:
                o_red = act(B, H)
                b.make_allreduce(o, o_red, layer_id=li)
                o = o_red
            b.make_add(o, x, x_mid, layer_id=li)
            b.make_rms_norm(x_mid, lw.ln2, h2, rms_eps=cfg.rms_eps, layer_id=li)
            if fused:
                b.make_fused_fc1_silu_mul_up(h2, lw.w1, a, layer_id=li)
            else:
                f = act(B, 2 * il)
                b.make_fc1(h2, lw.w1, f, layer_id=li)
                b.make_silu_mul_up(f, a, layer_id=li)
            b.make_fc2(a, lw.w2, d, layer_id=li)
            if world_size > 1:
                d_red = act(B, H)
                b.make_allreduce(d, d_red, layer_id=li)
                d = d_red
            b.make_add(d, x_mid, x_out, layer_id=li)
            x = x_out
        hf = act(B, H)
        b.make_rms_norm(x, weights.final_norm, hf, rms_eps=cfg.rms_eps, layer_id=L)
        b.make_linear(hf, weights.lm_head, self.logits, layer_id=L)
        b.compile()

    def load_kv(self, kvs, request: int = 0):
        """Start request ``request``'s sequence with its first ``n`` positions holding ``kvs`` (per layer ``(k, v)``,
        ``[n, Hkv_l, D]``); the other requests are left as they are."""
        n = self._check_kv(kvs, request)
        P = self.cfg.page_size
        pos = torch.arange(n, device=self.builder.device)
        page = self.block_tables[request].long()[pos // P]
        slot = pos % P
        for li, (k, v) in enumerate(kvs):
            self.key_caches[li][page, slot] = k.to(self.key_caches[li].dtype)
            self.value_caches[li][page, slot] = v.to(self.value_caches[li].dtype)
        self.kv_lens[request] = n
        self.lens[request] = n

    def prepare(self, token, lengths=None):
        """Set up the next step: the tokens' embedding rows (one token per request) into the step's input,
        ``kv_lens += 1`` (device-side ops only when ``token`` is an int tensor on the device; its values are not
        range-checked, which would synchronise: an out-of-range id fails in ``index_select``). ``lengths``: set
        every request's length instead (:meth:`set_lengths`, counting the token decoded)."""
        self._take_token(token, lengths=lengths)
        torch.index_select(self.weights.embed, 0, self.token, out=self.x)

    def run(self):
        """The decode step alone (one kernel launch; CUDA-graph capturable)."""
        self.builder.run()


def _check_weights(cfg, weights, rank, world):
    if not isinstance(weights, Qwen3Weights):
        raise TypeError(f"Qwen3: weights must be Qwen3Weights (random_weights), got {type(weights).__name__}")
    if weights.cfg != cfg:
        raise ValueError("Qwen3: the weights were made for another Qwen3Config")
    if (weights.rank, weights.world) != (rank, world):
        raise ValueError(f"Qwen3: the weights are rank {weights.rank} of {weights.world}'s shard, the model is rank "
                         f"{rank} of {world}")


def _nccl_all_reduce(t: torch.Tensor) -> torch.Tensor:
    """torch.distributed's all-reduce on the world group, in place: NCCL, or gloo on host copies where ranks share
    a GPU (``runtime.torch_collectives``)."""
    from ...runtime.torch_collectives import all_reduce

    return all_reduce(t)


class Qwen3TorchModel(_DecodeState):
    """The same decode step in plain torch, for ``batch`` requests (each at its own position, as
    :class:`Qwen3MegaModel`): bf16 weights and activations, fp32 math in norms, RoPE and softmax, fp32 logits
    ``[batch, V]``; the KV cache is contiguous ``[batch, max_context, Hkv_l, D]`` per layer, the attention runs over the first
    ``attn_window`` positions (default ``max_context``) with the ones at or past ``kv_lens`` masked (static shapes:
    ``run()`` is CUDA-graph capturable). A step past ``attn_window`` is refused by ``prepare()`` (a ValueError, never
    a silently truncated attention); a benchmark at context ``c`` sets ``attn_window`` to ``c`` so the baseline does
    not convert and scan a cache 8x longer than the sequence. ``all_reduce``: ``f(tensor) -> tensor`` summing a
    partial over the ranks (default ``torch.distributed.all_reduce``, in place); unused at world 1."""

    def __init__(self, cfg: Qwen3Config, weights: Qwen3Weights, rank: int = 0, world_size: int = 1, *,
                 all_reduce: Optional[Callable[[torch.Tensor], torch.Tensor]] = None, device=None,
                 attn_window: Optional[int] = None, batch: int = 1):
        cfg.check_world(world_size)
        _check_rank(rank, world_size)
        _check_weights(cfg, weights, rank, world_size)
        if attn_window is None:
            attn_window = cfg.max_context
        if isinstance(attn_window, bool) or not isinstance(attn_window, int) or not 1 <= attn_window <= cfg.max_context:
            raise ValueError(f"Qwen3TorchModel: attn_window must be an int in [1, max_context={cfg.max_context}], "
                             f"got {attn_window!r}")
        self.attn_window = attn_window
        self._init_state(cfg, batch)
        self.rank, self.world = rank, world_size
        self.weights = weights
        dev = torch.device(device) if device is not None else weights.embed.device
        self.device = dev
        self.all_reduce = all_reduce if all_reduce is not None else _nccl_all_reduce
        dt = weights.embed.dtype
        hkv = cfg.local_kv_heads(world_size)
        self.token = torch.zeros(batch, dtype=torch.int64, device=dev)
        self.kv_lens = torch.zeros(batch, dtype=torch.int32, device=dev)
        self.key_caches = [torch.zeros(batch, cfg.max_context, hkv, cfg.head_dim, dtype=dt, device=dev)
                           for _ in range(cfg.num_layers)]
        self.value_caches = [torch.zeros_like(k) for k in self.key_caches]
        self.cos, self.sin = rope_tables(cfg, dev)
        self.logits = torch.zeros(batch, cfg.vocab_size, dtype=torch.float32, device=dev)
        self._positions = torch.arange(cfg.max_context, device=dev)
        self._requests = torch.arange(batch, device=dev)
        self._mm_out_dtype = dev.type == "cuda"

    def load_kv(self, kvs, request: int = 0):
        """As :meth:`Qwen3MegaModel.load_kv`."""
        n = self._check_kv(kvs, request)
        for li, (k, v) in enumerate(kvs):
            self.key_caches[li][request, :n] = k
            self.value_caches[li][request, :n] = v
        self.kv_lens[request] = n
        self.lens[request] = n

    def prepare(self, token, lengths=None):
        """As :meth:`Qwen3MegaModel.prepare` (the embedding rows are gathered inside :meth:`run`)."""
        self._take_token(token, lengths)

    def _rms(self, x, w, eps):
        xf = x.float()
        return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * w.float()).to(x.dtype)

    def _logits(self, h):
        W = self.weights.lm_head
        if self._mm_out_dtype:
            try:
                return torch.mm(h, W.t(), out_dtype=torch.float32)
            except (TypeError, RuntimeError):
                self._mm_out_dtype = False
        return h.float() @ W.float().t()

    def run(self):
        """The decode step alone (static shapes; CUDA-graph capturable when ``all_reduce`` is)."""
        cfg, w = self.cfg, self.weights
        D, eps = cfg.head_dim, cfg.rms_eps
        hq, hkv = cfg.local_q_heads(self.world), cfg.local_kv_heads(self.world)
        g, B = hq // hkv, self.batch
        pos = (self.kv_lens.long() - 1)  # [B]
        cos = self.cos[0].index_select(0, pos)[:, None]  # [B, 1, D]
        sin = self.sin[0].index_select(0, pos)[:, None]
        win = self.attn_window
        mask = self._positions[None, :win] > pos[:, None]  # [B, win]: True = not attended
        x = w.embed.index_select(0, self.token)  # [B, H]

        def rope(t):  # t [B, n, D] fp32
            rot = torch.cat([-t[..., D // 2:], t[..., :D // 2]], dim=-1)
            return t * cos + rot * sin

        for li, lw in enumerate(w.layers):
            h = self._rms(x, lw.ln1, eps)
            qkv = torch.nn.functional.linear(h, lw.wqkv).view(B, hq + 2 * hkv, D)
            q = rope(self._rms(qkv[:, :hq], lw.q_norm, eps).float())
            k = rope(self._rms(qkv[:, hq:hq + hkv], lw.k_norm, eps).float()).to(x.dtype)
            v = qkv[:, hq + hkv:]
            kc, vc = self.key_caches[li], self.value_caches[li]
            kc.index_put_((self._requests, pos), k)  # request b's new k / v at its own position
            vc.index_put_((self._requests, pos), v)
            qg = q.to(x.dtype).float().view(B, hkv, g, D)
            s = torch.einsum("bhgd,bthd->bhgt", qg, kc[:, :win].float()) * (D ** -0.5)
            s = s.masked_fill(mask.view(B, 1, 1, -1), float("-inf"))
            p = torch.softmax(s, dim=-1)
            a = torch.einsum("bhgt,bthd->bhgd", p, vc[:, :win].float()).to(x.dtype).reshape(B, hq * D)
            o = torch.nn.functional.linear(a, lw.wo)
            if self.world > 1:
                o = self.all_reduce(o)
            x = (x.float() + o.float()).to(x.dtype)
            h = self._rms(x, lw.ln2, eps)
            f = torch.nn.functional.linear(h, lw.w1)
            il = f.shape[1] // 2
            gate, up = f[:, :il].float(), f[:, il:].float()
            a = (gate * torch.sigmoid(gate) * up).to(x.dtype)
            d = torch.nn.functional.linear(a, lw.w2)
            if self.world > 1:
                d = self.all_reduce(d)
            x = (x.float() + d.float()).to(x.dtype)
        self.logits.copy_(self._logits(self._rms(x, w.final_norm, eps)))


def logits_agreement(lm: torch.Tensor, lr: torch.Tensor) -> tuple:
    """Per request (row) of two ``[B, V]`` logits: ``(cosine, top1)``, the rows' cosine similarities (a non-finite
    one counted as -1.0) and whether their argmaxes agree, as lists of B."""
    lm, lr = lm.float().reshape(lr.shape[0], -1), lr.float().reshape(lr.shape[0], -1)
    cos = [c if math.isfinite(c) else -1.0 for c in torch.nn.functional.cosine_similarity(lm, lr, dim=1).tolist()]
    return cos, (lm.argmax(1) == lr.argmax(1)).tolist()


def teacher_forced_check(mega, ref, tokens: Sequence, reset: bool = True) -> dict:
    """Decode ``tokens`` step by step in both models (teacher forcing: each step gets the given tokens, not the
    model's prediction; a step is an int at batch 1, else one int per request) and compare the logits per step and
    request: ``cosine`` (list), ``top1`` (list of bools: same argmax), step-major (at batch B, step ``i``'s request
    ``b`` is entry ``i * B + b``), and their summaries ``min_cosine``, ``top1_rate``; at batch > 1 also
    ``per_request`` (each request's ``min_cosine`` and ``top1_rate``). ``reset``: start both from an empty cache
    (else continue from their current, equal, state, e.g. after :meth:`load_kv`)."""
    if reset:
        mega.reset()
        ref.reset()
    if mega.pos != ref.pos:
        raise ValueError(f"teacher_forced_check: the models are at different positions ({mega.pos} != {ref.pos})")
    B = mega.batch
    if ref.batch != B:
        raise ValueError(f"teacher_forced_check: the models have different batches ({B} != {ref.batch})")
    cos, top1 = [], []
    for t in tokens:
        t = int(t) if B == 1 and not isinstance(t, (list, tuple)) else [int(x) for x in t]
        c, agree = logits_agreement(mega.step(t).reshape(B, -1), ref.step(t).reshape(B, -1))
        cos += c
        top1 += agree
    out = dict(cosine=cos, top1=top1, min_cosine=min(cos) if cos else float("nan"),
               top1_rate=sum(top1) / len(top1) if top1 else float("nan"), steps=len(cos) // B)
    if B > 1:
        out["per_request"] = [dict(min_cosine=min(cos[b::B]) if cos else float("nan"),
                                   top1_rate=sum(top1[b::B]) / len(top1[b::B]) if top1 else float("nan"))
                              for b in range(B)]
    return out
