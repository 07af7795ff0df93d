"""The grouped GEMM op of the MoE family: ``group_gemm(a, b, expert_offsets)`` multiplies each local expert's rows of
the routing layout by that expert's matrix, on one device (:mod:`triton_dist.kernels.group_gemm`; docs/moe.md).

The routing layout: ``a [rows, K]`` holds the tokens grouped by local expert, expert ``e`` owning rows
``[expert_offsets[e - 1], expert_offsets[e])`` (``expert_offsets[-1]`` read as 0): int32 cumulative *end* offsets
on the device, the ``offs`` convention of ``torch._grouped_mm``. ``rows`` is a static capacity: rows at or past
``expert_offsets[E - 1]`` are padding, never read for a product and never written in the result. Experts may have
no rows. Nothing about the routing is read on the host by the launch, so a call can be captured into a CUDA graph
(the optional offsets check below is skipped inside a capture).
"""
from __future__ import annotations

from typing import Optional

import torch as _torch
import triton

from ..kernels.gemm_config import TileConfig, ensure_tma_allocator, num_sms, use_tma_for
from ..kernels import group_gemm as _k
from ..kernels import group_gemm_table as _gt
from ..kernels.group_gemm import group_gemm_kernel, silu_gate_kernel
from ..runtime.dtypes import FP8_DTYPES, HALF_DTYPES, dtype_names
from .context import capturing as _capturing
from .context import check_eager_only, traced_result

#: channels per FP8 block scale (the kernel's constexpr, as a host int)
SCALE_BLOCK = int(_k.SCALE_BLOCK.value)
#: dtypes of :func:`moe_silu_gate`'s input and output
GATE_DTYPES = HALF_DTYPES + (_torch.float32, )
#: Simulator tiling (the interpreter runs each tile with numpy: small tiles keep the tests fast)
SIM_CONFIG = TileConfig(16, 16, 16, 1, 4, 1)


def group_gemm_out_dtype(a_dtype):
    """The result's dtype without ``out``: bf16 for fp8 inputs, else ``a``'s."""
    import torch

    return torch.bfloat16 if a_dtype in FP8_DTYPES else a_dtype


def pick_group_config(rows: int, num_experts: int, N: int, K: int, *, on_gpu: bool, elem_bytes: int = 2,
                      block_scaled: bool = False) -> TileConfig:
    """Deterministic tiling of :func:`group_gemm` from what the host knows (the capacity ``rows``, not the routing).

    * decode (an expert averages at most 64 rows of the capacity: tiles mostly padding, the weights' bandwidth is
      the bound): 64 x 128 x 128 tiles, 4 warps, 4 stages (measured on an H100 at Qwen3-30B-A3B, 128 and 1,024
      tokens: 3-13% faster than 64 x 128 x 64 in all four shapes, 1.02-1.12x ``torch._grouped_mm`` where 64-wide K
      steps gave 0.88-1.05x; ``benchmarks/results/2026-12-05-moe-h100/``);
    * prefill, bf16 / fp16, ``N >= 256``: 128 x 256 x 64 tiles, 8 warps, 4 stages (measured on an H200 at
      Qwen3-30B-A3B, 8,192 tokens: 1.00-1.03x ``torch._grouped_mm`` where 128 x 128 tiles reached 0.84-0.95x;
      ``benchmarks/results/2026-12-05-moe/``);
    * otherwise (fp8, block-scaled, narrow ``N``): 128 x 128 tiles, 8 warps.

    ``BLOCK_K`` is 128 for decode tiles and fp8 inputs (always 128 with block scales: one scale block per step),
    else 64.
    The simulator: :data:`SIM_CONFIG`."""
    if not on_gpu:
        return SIM_CONFIG
    per_expert = rows / max(1, num_experts)
    block_k = 128 if (elem_bytes == 1 or block_scaled) else 64
    if per_expert <= 64:
        return TileConfig(64, 128, 128, 1, 4, 4)
    if block_k == 64 and N >= 256:
        return TileConfig(128, 256, 64, 1, 8, 4)
    return TileConfig(128, 128, block_k, 1, 8, 4)


def select_group_config(rows: int, num_experts: int, N: int, K: int, dtype, device_name: Optional[str], *,
                        block_scaled: bool = False) -> tuple:
    """What :func:`group_gemm` launches without ``config``, as ``(TileConfig, source)``: the measured table's entry
    for this device, dtype, expert shape and rows-per-expert bucket (``source`` ``"table"``;
    :mod:`triton_dist.kernels.group_gemm_table`), else :func:`pick_group_config`'s rule (``"rule"``).
    ``device_name`` None means not on a GPU (the simulator's tiling). A block-scaled (fp8) call takes an entry only
    if one ``BLOCK_K`` step lies in one scale block."""
    import torch

    if device_name is not None:
        cfg = _gt.group_gemm_table_lookup(device_name, dtype, num_experts, N, K, rows)
        if cfg is not None and (not block_scaled or SCALE_BLOCK % cfg.BLOCK_K == 0):
            return cfg, "table"
    elem = torch.empty((), dtype=dtype).element_size() if isinstance(dtype, torch.dtype) else 2
    return pick_group_config(rows, num_experts, N, K, on_gpu=device_name is not None, elem_bytes=elem,
                             block_scaled=block_scaled), "rule"


def _check_scales(op: str, a, b, scale_a, scale_b, num_experts: int, N: int, K: int) -> None:
    import torch

    fp8 = a.dtype in FP8_DTYPES
    if not fp8:
        if scale_a is not None or scale_b is not None:
            raise ValueError(f"{op}: scale_a / scale_b apply to fp8 inputs only (a.dtype={a.dtype})")
        return
    if scale_a is None or scale_b is None:
        raise ValueError(f"{op}: fp8 inputs need both block scales: scale_a [rows, cdiv(K, {SCALE_BLOCK})] and "
                         f"scale_b [E, cdiv(K, {SCALE_BLOCK}), cdiv(N, {SCALE_BLOCK})], float32")
    kb, nb = triton.cdiv(K, SCALE_BLOCK), triton.cdiv(N, SCALE_BLOCK)
    for name, t, shape in (("scale_a", scale_a, (a.shape[0], kb)), ("scale_b", scale_b, (num_experts, kb, nb))):
        if not isinstance(t, torch.Tensor) or t.dtype != torch.float32:
            raise ValueError(f"{op}: {name} must be a float32 tensor, got "
                             f"{getattr(t, 'dtype', type(t).__name__)}")
        if tuple(t.shape) != shape:
            raise ValueError(f"{op}: {name} has shape {tuple(t.shape)}, expected {shape} (one scale per "
                             f"{SCALE_BLOCK} channels of K{'' if name == 'scale_a' else ' x 128 columns of N'})")
        if t.device != a.device:
            raise ValueError(f"{op}: {name} is on {t.device}, a on {a.device}")


def check_group_operands(op: str, a, b, expert_offsets, scale_a=None, scale_b=None) -> None:
    """Host checks of :func:`group_gemm`'s operands before any launch (shapes, dtypes, devices, layouts, scales);
    the offsets' *values* are :func:`check_expert_offsets`'. Raises ValueError naming ``op``, the bad value and what
    is accepted."""
    import torch

    for name, t in (("a", a), ("b", b), ("expert_offsets", expert_offsets)):
        if not isinstance(t, torch.Tensor):
            raise ValueError(f"{op}: {name} must be a torch.Tensor, got {type(t).__name__}")
    if a.dim() != 2:
        raise ValueError(f"{op}: a must be 2-D [rows, K], got shape {tuple(a.shape)}")
    if b.dim() != 3:
        raise ValueError(f"{op}: b must be 3-D [E, K, N] (one [K, N] matrix per local expert), got shape "
                         f"{tuple(b.shape)}")
    accepted = HALF_DTYPES + FP8_DTYPES
    for name, t in (("a", a), ("b", b)):
        if t.dtype not in accepted:
            raise ValueError(f"{op}: {name}.dtype={t.dtype} is not supported; accepted: {dtype_names(accepted)}")
    if a.dtype != b.dtype:
        raise ValueError(f"{op}: a.dtype={a.dtype} and b.dtype={b.dtype} differ")
    E, K, N = b.shape
    if a.shape[1] != K:
        raise ValueError(f"{op}: a has K={a.shape[1]} columns, b's experts take K={K} ([E, K, N] = {tuple(b.shape)})")
    if E < 1:
        raise ValueError(f"{op}: b has no experts (shape {tuple(b.shape)})")
    if expert_offsets.dim() != 1 or expert_offsets.shape[0] != E or expert_offsets.dtype != torch.int32:
        raise ValueError(f"{op}: expert_offsets must be int32 [E={E}] (cumulative end row of each expert), got "
                         f"{expert_offsets.dtype} {tuple(expert_offsets.shape)}")
    if E > 1 and expert_offsets.stride(0) != 1:
        raise ValueError(f"{op}: expert_offsets must be contiguous (stride {expert_offsets.stride(0)}; call "
                         f".contiguous())")
    if K < 1:
        raise ValueError(f"{op}: K={K}: the experts' matrices have no rows (b is {tuple(b.shape)})")
    for name, t in (("b", b), ("expert_offsets", expert_offsets)):
        if t.device != a.device:
            raise ValueError(f"{op}: {name} is on {t.device}, a on {a.device}")
    align = 16 // a.element_size()
    if K % align or N % align:
        raise ValueError(f"{op}: K={K} and N={N} must be multiples of {align} ({a.dtype}: 16-byte rows for the "
                         f"tensor-memory loads)")
    if a.stride(1) != 1 or a.stride(0) % align:
        raise ValueError(f"{op}: a must be row-major with unit column stride and 16-byte aligned rows (stride "
                         f"{tuple(a.stride())}; call .contiguous())")
    if not (b.stride(2) == 1 or b.stride(1) == 1):
        raise ValueError(f"{op}: b [E, K, N] needs a unit stride along N (row-major [E, K, N]) or along K (an "
                         f"[E, N, K] tensor seen through .transpose(1, 2)); got strides {tuple(b.stride())}")
    if any(s % align for s in b.stride() if s != 1):
        raise ValueError(f"{op}: b's strides {tuple(b.stride())} must be multiples of {align} elements (16 bytes)")
    _check_scales(op, a, b, scale_a, scale_b, E, N, K)


def check_expert_offsets(op: str, expert_offsets, rows: int) -> None:
    """The offsets' values: non-negative, non-decreasing, the last at most ``rows`` (reads the tensor: one device
    synchronisation for device offsets). ValueError naming the first bad expert otherwise."""
    import torch

    offs = expert_offsets.detach().to("cpu").to(torch.int64)
    prev = 0
    for e, end in enumerate(offs.tolist()):
        if end < prev:
            raise ValueError(f"{op}: expert_offsets[{e}]={end} is below "
                             f"{'0' if e == 0 else f'expert_offsets[{e - 1}]={prev}'}: offsets are cumulative end "
                             f"rows, non-decreasing")
        prev = end
    if prev > rows:
        raise ValueError(f"{op}: expert_offsets[{len(offs) - 1}]={prev} is past a's {rows} rows: the experts' rows "
                         f"must fit in a")


def group_gemm(a, b, expert_offsets, *, out=None, scale_a=None, scale_b=None, config: Optional[TileConfig] = None,
               check_offsets: bool = True):
    """``out[r] = a[r] @ b[e]`` for every row ``r`` of expert ``e`` (the routing layout, module docstring); returns
    ``out [rows, N]``.

    ``a [rows, K]`` and ``b [E, K, N]`` of one dtype among bf16, fp16, fp8 e4m3 / e5m2 (``b`` row-major, or with
    unit stride along K: per-expert ``[N, K]`` weights passed as ``w.transpose(1, 2)``); ``expert_offsets`` int32
    ``[E]``; fp32 accumulation. FP8 needs the block scales ``scale_a [rows, cdiv(K, 128)]`` and ``scale_b [E,
    cdiv(K, 128), cdiv(N, 128)]`` (float32: ``a[r, k]`` means ``a[r, k] * scale_a[r, k // 128]``, ``b[e, k, n]``
    means ``b[e, k, n] * scale_b[e, k // 128, n // 128]``; any strides, e.g. ``[E, N / 128, K / 128]`` scales of
    ``[E, N, K]`` weights passed as ``.transpose(1, 2)`` too) and gives bf16. Rows of ``out`` at or past
    ``expert_offsets[E - 1]`` are not written (an ``out`` allocated here holds whatever memory held there).

    ``check_offsets`` (default True): read the offsets on the host and refuse bad ones (:func:`check_expert_offsets`:
    one device synchronisation) before the launch; skipped inside a CUDA-graph capture and under torch.compile,
    where nothing may synchronise. Whatever the offsets hold, the kernel never reads or writes outside the tensors.
    ``config``: a :class:`~triton_dist.kernels.gemm_config.TileConfig` instead of :func:`select_group_config`'s
    (the measured table's entry for the device, dtype, expert shape and rows-per-expert bucket, else
    :func:`pick_group_config`'s rule; block sizes, warps, stages, pointer loads; its other fields are ignored). Raises ValueError on bad input before any launch.
    Under torch.compile the call is the registered ``torch.ops.triton_dist.group_gemm`` (``config`` is refused
    there; ``out`` receives a copy)."""
    import torch

    if torch.compiler.is_compiling():
        check_eager_only("group_gemm", config=config)
        return traced_result(torch.ops.triton_dist.group_gemm(a, b, expert_offsets, scale_a, scale_b), out)
    check_group_operands("group_gemm", a, b, expert_offsets, scale_a, scale_b)
    rows, K = a.shape
    E, _, N = b.shape
    if out is None:
        out = torch.empty((rows, N), dtype=group_gemm_out_dtype(a.dtype), device=a.device)
    elif not isinstance(out, torch.Tensor) or tuple(out.shape) != (rows, N) or out.device != a.device or \
            out.dtype not in HALF_DTYPES or out.stride(1) != 1:
        raise ValueError(f"group_gemm: out must be a bf16 / fp16 [{rows}, {N}] tensor on {a.device} with unit column "
                         f"stride, got {getattr(out, 'dtype', type(out).__name__)} "
                         f"{tuple(getattr(out, 'shape', ()))}")
    if check_offsets and not _capturing():
        check_expert_offsets("group_gemm", expert_offsets, rows)
    if rows == 0 or N == 0:
        return out
    block_scaled = a.dtype in FP8_DTYPES
    on_gpu = a.device.type == "cuda"
    cfg = config or select_group_config(rows, E, N, K, a.dtype, _gt.device_name_of(a.device.index) if on_gpu
                                        else None, block_scaled=block_scaled)[0]
    if block_scaled and SCALE_BLOCK % cfg.BLOCK_K:
        raise ValueError(f"group_gemm: config {cfg} has BLOCK_K={cfg.BLOCK_K}; with block scales one step must lie "
                         f"in one scale block ({SCALE_BLOCK} % BLOCK_K == 0)")
    b_k_contiguous = b.stride(2) != 1
    # tensor descriptors need 16-byte aligned bases (a view that starts mid-row may not be): else pointer loads
    use_tma = use_tma_for(a.device) and not cfg.pointer_loads and a.data_ptr() % 16 == 0 and b.data_ptr() % 16 == 0
    if use_tma:
        ensure_tma_allocator()
    sms = num_sms(a.device)
    # an upper bound of the tiles (each expert adds at most one partial row tile): never more programs than work
    bound = (triton.cdiv(rows, cfg.BLOCK_M) + E) * triton.cdiv(N, cfg.BLOCK_N)
    sa = scale_a if block_scaled else out
    sb = scale_b if block_scaled else out
    sa_strides = tuple(sa.stride()) if block_scaled else (0, 0)
    sb_strides = tuple(sb.stride()) if block_scaled else (0, 0, 0)
    group_gemm_kernel[(min(sms, bound), )](
        a, b, out, expert_offsets, sa, sb, rows, E, N, K, a.stride(0), b.stride(0), b.stride(1), b.stride(2),
        out.stride(0), *sa_strides, *sb_strides, BLOCK_M=cfg.BLOCK_M, BLOCK_N=cfg.BLOCK_N, BLOCK_K=cfg.BLOCK_K,
        USE_TMA=use_tma, B_K_CONTIGUOUS=b_k_contiguous, BLOCK_SCALED=block_scaled,
        **cfg.launch())
    return out


def moe_silu_gate(h, expert_offsets=None, *, out=None):
    """The SiLU-gated activation of an expert MLP between its two grouped GEMMs, in one launch: ``out[r] =
    silu(h[r, :I]) * h[r, I:]`` for ``h [rows, 2 * I]`` (the gate and up projections side by side, as
    :func:`group_gemm` of ``[E, K, 2 * I]`` weights returns them), computed in fp32 and rounded once to ``h``'s
    dtype (bf16 / fp16 / fp32); returns ``out [rows, I]``.

    ``expert_offsets`` (optional, the layout's int32 ``[E]`` cumulative ends): only rows below
    ``expert_offsets[E - 1]`` are computed and written (rows past it are padding of a static capacity, which the
    next :func:`group_gemm` does not read); read on the device only, so the call captures into a CUDA graph. Without
    it every row is computed. ``out``: a ``[rows, I]`` tensor of ``h``'s dtype with unit column stride. Raises
    ValueError on bad input before the launch. Under torch.compile the call is the registered
    ``torch.ops.triton_dist.moe_silu_gate`` (``out`` receives a copy)."""
    import torch

    op = "moe_silu_gate"
    if torch.compiler.is_compiling():
        return traced_result(torch.ops.triton_dist.moe_silu_gate(h, expert_offsets), out)
    if not isinstance(h, torch.Tensor) or h.dim() != 2 or h.shape[1] % 2:
        raise ValueError(f"{op}: h must be a 2-D [rows, 2 * I] tensor (gate columns, then up columns), got "
                         f"{tuple(getattr(h, 'shape', ())) if isinstance(h, torch.Tensor) else type(h).__name__}")
    if h.dtype not in GATE_DTYPES:
        raise ValueError(f"{op}: h must be one of {dtype_names(GATE_DTYPES)}, got {h.dtype}")
    if h.stride(1) != 1:
        raise ValueError(f"{op}: h needs a unit column stride (call .contiguous())")
    rows, inter = h.shape[0], h.shape[1] // 2
    if expert_offsets is not None:
        if not isinstance(expert_offsets, torch.Tensor) or expert_offsets.dtype != torch.int32 or \
                expert_offsets.dim() != 1 or expert_offsets.numel() == 0 or expert_offsets.device != h.device:
            raise ValueError(f"{op}: expert_offsets must be a non-empty 1-D int32 tensor on {h.device}, got "
                             f"{getattr(expert_offsets, 'dtype', type(expert_offsets).__name__)} "
                             f"{tuple(getattr(expert_offsets, 'shape', ()))}")
        if not expert_offsets.is_contiguous():
            raise ValueError(f"{op}: expert_offsets must be contiguous")
    if out is None:
        out = torch.empty((rows, inter), dtype=h.dtype, device=h.device)
    elif not isinstance(out, torch.Tensor) or tuple(out.shape) != (rows, inter) or out.dtype != h.dtype or \
            out.device != h.device or out.stride(1) != 1:
        raise ValueError(f"{op}: out must be a {h.dtype} [{rows}, {inter}] tensor on {h.device} with unit column "
                         f"stride")
    if rows == 0 or inter == 0:
        return out
    on_gpu = h.device.type == "cuda"
    block_r, block_c = (16, 256) if on_gpu else (8, 16)
    offs = expert_offsets if expert_offsets is not None else out
    E = expert_offsets.numel() if expert_offsets is not None else 1
    silu_gate_kernel[(triton.cdiv(rows, block_r), triton.cdiv(inter, block_c))](
        h, out, offs, rows, inter, h.stride(0), out.stride(0), E, HAS_OFFSETS=expert_offsets is not None,
        BLOCK_R=block_r, BLOCK_C=block_c, num_warps=4 if on_gpu else 1)
    return out


__all__ = ["group_gemm", "moe_silu_gate", "select_group_config", "group_gemm_out_dtype", "pick_group_config", "check_group_operands", "check_expert_offsets",
           "SIM_CONFIG"]
