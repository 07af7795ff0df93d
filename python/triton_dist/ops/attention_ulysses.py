"""Ulysses sequence parallelism: the two all-to-alls around attention. Before attention every rank holds a contiguous
chunk of the sequence with all heads; attention needs the whole sequence, which Ulysses gets by trading heads for
tokens::

    ctx = ops.create_ulysses_ctx(max_batch=1, max_seq_per_rank=4096, num_heads=32, head_dim=128)   # collective
    q_h = ops.pre_attn_all_to_all(q, ctx)        # [B, L_loc, H, D] -> [B, W * L_loc, H / W, D]
    k_h = ops.pre_attn_all_to_all(k, ctx)        # GQA: k / v with Hkv heads (Hkv % W == 0) on the same context
    v_h = ops.pre_attn_all_to_all(v, ctx)
    o_h = ops.flash_attention(q_h, k_h, v_h)     # the full sequence, this rank's head group, on one device
    o = ops.post_attn_all_to_all(o_h, ctx)       # [B, W * L_loc, H / W, D] -> [B, L_loc, H, D]

Layout: rank ``r``'s input to :func:`pre_attn_all_to_all` holds global positions ``[r * L_loc, (r + 1) * L_loc)``;
its output holds heads ``[r * H / W, (r + 1) * H / W)`` of every position in global order. :func:`post_attn_all_to_all`
is the inverse (``post(pre(x)) == x``, bit for bit: the ops move bytes, nothing is rounded).

One launch per call on the current stream, no NCCL, no host synchronisation, capturable into a CUDA graph after one
warm-up call of the shape (the epochs live in device memory): every rank's programs push the pieces the peers need
straight into the peers' symmetric receive slots, raise a ready signal per (source, program) there, then copy what
they received into ``out``; the own piece goes from the input to ``out`` directly. Device code and protocol (buffers,
the protocol of a call, deadlock freedom, reuse): :mod:`triton_dist.kernels.ulysses`. ``out`` is a new tensor (or
the caller's ``out=``), never the receive buffer, which the next call on the context overwrites.

pre and post share the context's buffers and signals: each call is one epoch, so any sequence of calls (q, k, v
through pre, then post; the next layer's pre) is safe as long as every rank makes the same calls in the same order.
A rank whose call differs in shape or direction from its peers' (e.g. pre on one rank, post on another) is reported
by the tagged waits (GPU: printed and trapped; simulator: ``SimSignalMismatch``), not waited for.
"""
from __future__ import annotations

from typing import Optional

import torch
import triton

from ..kernels import ulysses as _k
from .context import Context, check_ctx, sm_count

#: dtypes the Ulysses all-to-alls take (they move bytes: any 2- or 4-byte float)
ULYSSES_DTYPES = (torch.bfloat16, torch.float16, torch.float32)
#: largest head dim (elements) a call may pass
MAX_HEAD_DIM = 1024
#: the direction part of the ready signals' tag: post adds it, so a pre and a post of the same size never match
_POST_TAG = 1 << 23


class UlyssesContext(Context):
    """Symmetric buffers and signals of :func:`pre_attn_all_to_all` / :func:`post_attn_all_to_all` (kind
    ``"ulysses"``). Attributes: ``max_batch``, ``max_seq_per_rank``, ``num_heads``, ``head_dim`` (the creation
    arguments), ``slot_numel`` (elements of one receive slot: ``max_batch * max_seq_per_rank * num_heads / world *
    head_dim``), ``programs`` (the kernel's grid, fixed per context), ``recv [world * slot_numel]`` (the context's
    dtype, symmetric: slot ``s`` receives rank ``s``'s piece), ``ready [world * programs]`` and ``recv_ok [world]``
    (int64, symmetric), ``counter [3]`` (int64, local: the device epoch)."""

    kind = "ulysses"
    factory_suffix = "_ctx"

    def __init__(self, max_batch: int, max_seq_per_rank: int, num_heads: int, head_dim: int,
                 dtype: torch.dtype = torch.bfloat16, *, programs: Optional[int] = None,
                 block_bytes: Optional[int] = None, num_warps: Optional[int] = None):
        fac = "create_ulysses_ctx"
        for name, v in (("max_batch", max_batch), ("max_seq_per_rank", max_seq_per_rank), ("num_heads", num_heads),
                        ("head_dim", head_dim)):
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"{fac}: {name}={v!r} must be a positive int")
        if head_dim > MAX_HEAD_DIM:
            raise ValueError(f"{fac}: head_dim={head_dim} exceeds {MAX_HEAD_DIM}")
        if max_batch * max_seq_per_rank * num_heads * head_dim >= 2**31 - 2**20:
            raise ValueError(f"{fac}: max_batch x max_seq_per_rank x num_heads x head_dim = "
                             f"{max_batch * max_seq_per_rank * num_heads * head_dim} must stay below 2**31 - 2**20 "
                             f"(the receive slots are indexed with int32)")
        if programs is not None and (isinstance(programs, bool) or not isinstance(programs, int) or
                                     not 1 <= programs <= 1024):
            raise ValueError(f"{fac}: programs={programs!r} must be an int in [1, 1024]")
        for name, v in (("block_bytes", block_bytes), ("num_warps", num_warps)):
            if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 1 or v & (v - 1)):
                raise ValueError(f"{fac}: {name}={v!r} must be a power of two")
        if not isinstance(dtype, torch.dtype) or dtype not in ULYSSES_DTYPES:
            from ..runtime.dtypes import dtype_names

            raise ValueError(f"{fac}: dtype={dtype!r} is not supported; accepted: {dtype_names(ULYSSES_DTYPES)}")
        from ..runtime.state import require_backend

        gpu = getattr(require_backend(), "name", "") != "sim"
        if gpu:
            # every program must be resident at once (programs wait for the peers' programs): at most one per SM
            sms = sm_count(torch.device("cuda", torch.cuda.current_device()))
            programs = max(1, min(programs or sms, sms))
        else:
            programs = programs or 2
        self.programs = int(programs)
        # a tile: 32 KiB on a GPU (8 warps: 16-byte accesses, 8 of them in flight per thread), 512 bytes on the
        # interpreter (small tiles: the tests' toy shapes still cut into several tiles per program)
        super().__init__(max_batch * max_seq_per_rank * num_heads * head_dim, dtype, ULYSSES_DTYPES,
                         block_bytes=block_bytes or (32768 if gpu else 512), num_warps=num_warps or (8 if gpu else 1),
                         methods=("push", ), all_methods=("push", ), method="push",
                         fingerprint_extra=(max_batch, max_seq_per_rank, num_heads, head_dim, self.programs))
        W = self.world_size
        if num_heads % W:
            raise ValueError(f"{fac}: num_heads={num_heads} is not a multiple of the world size {W} (Ulysses gives "
                             f"every rank num_heads / world heads)")
        self.max_batch, self.max_seq_per_rank = max_batch, max_seq_per_rank
        self.num_heads, self.head_dim = num_heads, head_dim
        self.slot_numel = max_batch * max_seq_per_rank * (num_heads // W) * head_dim
        u = self._utils
        self.recv = u.nvshmem_create_tensor((W * self.slot_numel, ), dtype)
        self.ready = u.nvshmem_create_tensor((W * self.programs, ), torch.int64)
        self.recv_ok = u.nvshmem_create_tensor((W, ), torch.int64)
        self.ready.zero_()
        self.recv_ok.zero_()
        self._symmetric += [self.recv, self.ready, self.recv_ok]
        self._init_call_epochs()  # counter [3] and a cooperative launch: the programs wait on the peers' programs
        self._finish_init()


    def tiling(self, heads_per_rank: int, head_dim: int):
        """``(BLOCK_D, HB, BLOCK_R)`` of a call whose pieces have ``heads_per_rank`` heads of ``head_dim``: tiles of
        ``block_bytes`` (``BLOCK_R`` rows by ``HB`` heads of ``BLOCK_D = next_pow2(head_dim)`` elements). The same
        on every rank for the same call (the protocol needs it)."""
        block_d = triton.next_power_of_2(head_dim)
        tile = max(1, self.block_bytes // self.esize)
        hb = min(triton.next_power_of_2(heads_per_rank), max(1, tile // block_d))
        return block_d, hb, max(1, tile // (hb * block_d))


def create_ulysses_ctx(max_batch: int, max_seq_per_rank: int, num_heads: int, head_dim: int,
                       dtype: torch.dtype = torch.bfloat16, **kw) -> UlyssesContext:
    """Collective: the buffers of :func:`pre_attn_all_to_all` / :func:`post_attn_all_to_all` for calls of up to
    ``max_batch`` sequences of ``max_seq_per_rank`` tokens per rank, ``num_heads`` heads of ``head_dim`` elements
    (size it for the largest head count passed: q's; k / v with fewer heads fit), ``dtype`` bf16 / fp16 / fp32.
    ``num_heads`` must be a multiple of the world size. Symmetric memory: ``max_batch * max_seq_per_rank *
    num_heads * head_dim`` elements (one receive slot per source rank) plus ``world * (programs + 1)`` int64 signals.
    Keywords: ``programs`` (the kernel's grid; default the rank's SM count on a GPU, 2 on the simulator),
    ``block_bytes`` (bytes per tile, default 32 KiB on a GPU), ``num_warps`` (default 8 on a GPU). Every rank must
    create it with the same arguments (checked: ``ValueError`` on every rank)."""
    return UlyssesContext(max_batch, max_seq_per_rank, num_heads, head_dim, dtype, **kw)


create_ulysses_context = create_ulysses_ctx


def _check_call(op: str, t, ctx: UlyssesContext, out, post: bool):
    """The checks of a call (one-line ValueError before any launch): returns ``(B, L, Hg, D, out_shape)`` with ``L``
    the tokens per rank and ``Hg`` the heads per rank."""
    check_ctx(op, ctx, UlyssesContext, "create_ulysses_ctx")
    ctx._check_open(op)
    name = "y" if post else "x"
    want = "[B, world * L_loc, H / world, D]" if post else "[B, L_loc, H, D]"
    if not isinstance(t, torch.Tensor):
        raise ValueError(f"{op}: {name} must be a torch.Tensor {want}, got {type(t).__name__}")
    if t.dim() != 4:
        raise ValueError(f"{op}: {name} must be 4-D {want}, got shape {tuple(t.shape)}")
    ctx._check_dtype(op, t, name)
    ctx._check_device(op, t, name)
    W = ctx.world_size
    if post:
        B, S, Hg, D = t.shape
        if S % W:
            raise ValueError(f"{op}: y has {S} tokens (dim 1), not a multiple of the world size {W}: post takes the "
                             f"whole sequence of this rank's head group, world x L_loc tokens")
        L, H = S // W, Hg * W
        out_shape = (B, L, H, D)
    else:
        B, L, H, D = t.shape
        if H % W:
            raise ValueError(f"{op}: x has {H} heads (dim 2), not a multiple of the world size {W}: Ulysses gives "
                             f"every rank H / world heads (with GQA the kv heads of k and v too: Hkv % world == 0)")
        Hg = H // W
        out_shape = (B, W * L, Hg, D)
    if B > ctx.max_batch:
        raise ValueError(f"{op}: batch {B} exceeds the context's max_batch={ctx.max_batch}")
    if L > ctx.max_seq_per_rank:
        raise ValueError(f"{op}: {L} tokens per rank exceed the context's max_seq_per_rank={ctx.max_seq_per_rank}"
                         + (f" ({name} has world x {L} = {L * W} tokens)" if post else ""))
    if D > MAX_HEAD_DIM:
        raise ValueError(f"{op}: head dim {D} exceeds {MAX_HEAD_DIM}")
    if H * D > ctx.num_heads * ctx.head_dim:
        what = f"{Hg} heads per rank (world x {Hg} = {H} in all)" if post else f"{H} heads"
        raise ValueError(f"{op}: {name} has {what} of {D} elements; the context holds at most num_heads x head_dim "
                         f"= {ctx.num_heads} x {ctx.head_dim} elements per token" +
                         (" (post takes this rank's head group, H / world heads)" if post else ""))
    if out is not None:
        if not isinstance(out, torch.Tensor) or tuple(out.shape) != out_shape or out.dtype != t.dtype or \
                out.device != t.device:
            raise ValueError(f"{op}: out must be a {str(t.dtype).replace('torch.', '')} {list(out_shape)} tensor on "
                             f"{t.device}, got {getattr(out, 'dtype', type(out).__name__)} "
                             f"{tuple(getattr(out, 'shape', ()))}")
        if any(s == 0 and n > 1 for s, n in zip(out.stride(), out.shape)):
            raise ValueError(f"{op}: out is an expanded view (stride 0 along a dim of size > 1): its elements "
                             f"overlap")
    return B, L, Hg, D, out_shape


def _all_to_all(op: str, t, ctx: UlyssesContext, out, post: bool):
    B, L, Hg, D, out_shape = _check_call(op, t, ctx, out, post)
    if torch.compiler.is_compiling():  # traced: the registered op (a new tensor; copied into out when given)
        res = (torch.ops.triton_dist.post_attn_all_to_all if post else torch.ops.triton_dist.pre_attn_all_to_all)(
            t, ctx.handle)
        if out is None:
            return res
        out.copy_(res)
        return out
    if out is None:
        out = torch.empty(out_shape, dtype=t.dtype, device=t.device)
    numel = t.numel()
    if numel == 0:  # the same shape on every rank: nobody launches
        return out
    if ctx.check_peers:
        ctx._check_peers(op, (tuple(t.shape), str(t.dtype)))
    ctx.op = op
    W = ctx.world_size
    sx, so = t.stride(), out.stride()
    if post:  # piece for rank q: y[:, q*L:(q+1)*L]; from rank s: out[:, :, s*Hg:(s+1)*Hg]
        x_step, o_step = L * sx[1], Hg * so[2]
    else:  # piece for rank q: x[:, :, q*Hg:(q+1)*Hg]; from rank s: out[:, s*L:(s+1)*L]
        x_step, o_step = Hg * sx[2], L * so[1]
    tag = numel % _POST_TAG + (_POST_TAG if post else 0)
    block_d, hb, block_r = ctx.tiling(Hg, D)
    args = (t, out, ctx.recv, ctx.ready, ctx.recv_ok, ctx.counter, B, L, Hg, *sx, x_step, *so, o_step,
            ctx.slot_numel, tag, ctx.rank)
    kw = ctx._coop()
    ctx._launch_plain(_k.ulysses_all_to_all_kernel, (ctx.programs, ), args, WORLD=W, NSIG=ctx.programs, D=D,
                      BLOCK_D=block_d, BLOCK_R=block_r, HB=hb, num_warps=ctx.num_warps, **kw)
    return out


def pre_attn_all_to_all(x: torch.Tensor, ctx: UlyssesContext, *, out: Optional[torch.Tensor] = None) -> torch.Tensor:
    """Collective (every rank calls it, with the same shape): from this rank's chunk of the sequence with every head,
    ``x [B, L_loc, H, D]`` (global positions ``[rank * L_loc, (rank + 1) * L_loc)``), to the whole sequence of this
    rank's head group: returns ``[B, world * L_loc, H / world, D]`` holding heads ``[rank * H / world, (rank + 1) *
    H / world)`` of every position in global order (rank ``s``'s chunk at ``[s * L_loc, (s + 1) * L_loc)``).

    ``H % world == 0`` (call it on q, k and v separately: GQA's k / v with ``Hkv`` heads, ``Hkv % world == 0``);
    ``B <= max_batch``, ``L_loc <= max_seq_per_rank``, ``H * D <= num_heads * head_dim`` (the context's), ``D <=
    1024``, the context's dtype and device; any strides (a non-contiguous view such as one of a fused qkv tensor is
    read in place). ``out``: a tensor of the result's shape and dtype to write (any strides). Bad arguments raise a
    one-line ValueError before any launch. One launch, no host synchronisation, CUDA-graph capturable after a
    warm-up call (:mod:`triton_dist.kernels.ulysses`)."""
    return _all_to_all("pre_attn_all_to_all", x, ctx, out, False)


def post_attn_all_to_all(y: torch.Tensor, ctx: UlyssesContext, *, out: Optional[torch.Tensor] = None) -> torch.Tensor:
    """Collective, the inverse of :func:`pre_attn_all_to_all`: from the whole sequence of this rank's head group,
    ``y [B, world * L_loc, H / world, D]``, back to this rank's chunk of the sequence with every head: returns ``[B,
    L_loc, H, D]`` (positions ``[rank * L_loc, (rank + 1) * L_loc)``; rank ``s``'s heads at ``[s * H / world, (s + 1)
    * H / world)``). ``post_attn_all_to_all(pre_attn_all_to_all(x, ctx), ctx) == x``. The limits, ``out`` and the
    errors are :func:`pre_attn_all_to_all`'s (``y``'s dim 1 a multiple of the world size)."""
    return _all_to_all("post_attn_all_to_all", y, ctx, out, True)


# ---------------------------------------------------------------------------------------------------------------
# the torch.distributed formulation: what a user writes without this library (the benchmark's baseline, a cross-check)
# ---------------------------------------------------------------------------------------------------------------
def pre_attn_all_to_all_torch(x: torch.Tensor, group=None) -> torch.Tensor:
    """:func:`pre_attn_all_to_all` written with ``torch.distributed.all_to_all_single`` and permutes: ``x [B, L, H,
    D]`` is permuted to ``[W, B, L, H / W, D]`` (piece ``q`` for rank ``q``, contiguous), exchanged, and the received
    ``[W, B, L, H / W, D]`` permuted to ``[B, W * L, H / W, D]``. NCCL where the group has it, else gloo on host copies
    (ranks that share a GPU: :mod:`triton_dist.runtime.torch_collectives`, not capturable)."""
    import torch.distributed as dist

    from ..runtime.torch_collectives import all_to_all_single

    W = dist.get_world_size(group)
    B, L, H, D = x.shape
    send = x.reshape(B, L, W, H // W, D).permute(2, 0, 1, 3, 4).contiguous()
    recv = torch.empty_like(send)
    all_to_all_single(recv, send, group=group)
    return recv.permute(1, 0, 2, 3, 4).reshape(B, W * L, H // W, D)


def post_attn_all_to_all_torch(y: torch.Tensor, group=None) -> torch.Tensor:
    """:func:`post_attn_all_to_all` written with ``all_to_all_single`` and permutes (see
    :func:`pre_attn_all_to_all_torch`): ``y [B, W * L, Hg, D]`` to ``[W, B, L, Hg, D]``, exchanged, to ``[B, L, W *
    Hg, D]``."""
    import torch.distributed as dist

    from ..runtime.torch_collectives import all_to_all_single

    W = dist.get_world_size(group)
    B, S, Hg, D = y.shape
    send = y.reshape(B, W, S // W, Hg, D).transpose(0, 1).contiguous()
    recv = torch.empty_like(send)
    all_to_all_single(recv, send, group=group)
    return recv.permute(1, 2, 0, 3, 4).reshape(B, S // W, W * Hg, D)


__all__ = ["UlyssesContext", "create_ulysses_ctx", "create_ulysses_context", "pre_attn_all_to_all",
           "post_attn_all_to_all", "pre_attn_all_to_all_torch", "post_attn_all_to_all_torch", "ULYSSES_DTYPES"]
