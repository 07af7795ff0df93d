"""The Triton GEMM used by the overlapped kernels: ``C[M, N] = A[M, K] @ B[K, N]`` (fp32 accumulation).

Design (one source, every target; no target checks in the kernel, the host picks the constexprs):

* **Persistent grid**: ``NUM_SMS`` programs walk the output tiles ``pid, pid + NUM_SMS, ...`` (grouped ordering,
  ``GROUP_M`` row-tiles per group, for L2 reuse of B).
* **Loads**: ``USE_TMA=True`` builds device-side tensor descriptors (``tl.make_tensor_descriptor``) for A and B:
  on sm_90 those are TMA loads feeding ``wgmma`` (needs ``triton.set_allocator`` for the descriptor scratch, see
  :func:`ensure_tma_allocator`). ``USE_TMA=False`` is the pointer path (masked ``tl.load``; ``cp.async`` + ``mma.sync``
  on sm_80, ``mfma`` on gfx942, numpy on the simulator). The host chooses with :func:`use_tma_for` (sm_90+ CUDA
  device and not the interpreter). Stock Triton would also rewrite descriptors to pointers below sm_90 and on AMD,
  but the explicit pointer path keeps masks exact and is what the simulator runs.
* **Tile helpers** :func:`tile_acc_tma` / :func:`tile_acc_ptr` compute one ``BLOCK_M x BLOCK_N`` fp32 tile; the
  overlapped kernels (``ag_gemm``, ``gemm_rs``, ``gemm_ar``) call them after ``dl.wait`` with the wait's token
  consumed into the A pointer / row coordinate, so no load of that tile can be hoisted above its wait.
* **Configs**: :data:`CONFIGS` (Hopper-tuned) + :func:`gemm_autotuned` (``triton.autotune`` keyed on ``M, N, K``,
  cached per shape, results cached on disk) for the plain GEMM. The fused kernels cannot be autotuned in-place
  (benchmark launches would consume signal epochs, and ranks could pick different tilings, i.e. different signal
  layouts): they use :func:`pick_config`, a deterministic function of the shape, the same on every rank.
* fp8 (e4m3/e5m2) inputs: ``acc * scale`` where ``scale`` is ``scale_a * scale_b`` (per-tensor), loaded from a
  1-element fp32 tensor when ``HAS_SCALE``.
"""
from __future__ import annotations

import functools
import os
import re
from dataclasses import dataclass

import triton
import triton.language as tl

import triton_dist
from triton_dist import _compat


# ----------------------------------------------------------------------------------------------------------------
# device helpers
# ----------------------------------------------------------------------------------------------------------------
@triton_dist.jit
def tile_coords(tile, num_pid_m, num_pid_n, GROUP_M: tl.constexpr):
    """Grouped tile order: ``(pid_m, pid_n)`` of linear tile ``tile`` (GROUP_M row-tiles share a column sweep)."""
    width = GROUP_M * num_pid_n
    group = tile // width
    first_m = group * GROUP_M
    size_m = tl.minimum(num_pid_m - first_m, GROUP_M)
    pid_m = first_m + (tile % width) % size_m
    pid_n = (tile % width) // size_m
    return pid_m, pid_n


@triton_dist.jit
def tma_descriptors(a_ptr, b_ptr, M, N, K, stride_am, stride_bk, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                    BLOCK_K: tl.constexpr):
    """Device-side tensor descriptors ``(a_desc, b_desc)`` of ``A [M, K]`` and ``B [K, N]`` (unit column strides),
    with :func:`tile_acc_tma`'s block shapes."""
    a_desc = tl.make_tensor_descriptor(a_ptr, shape=[M, K], strides=[stride_am, 1], block_shape=[BLOCK_M, BLOCK_K])
    b_desc = tl.make_tensor_descriptor(b_ptr, shape=[K, N], strides=[stride_bk, 1], block_shape=[BLOCK_K, BLOCK_N])
    return a_desc, b_desc


@triton_dist.jit
def tile_acc_tma(a_desc, b_desc, off_m, off_n, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                 BLOCK_K: tl.constexpr):
    """fp32 ``A[off_m:+BM, :] @ B[:, off_n:+BN]`` through tensor descriptors (TMA on sm_90; out-of-range rows and
    columns read as zero). ``off_m`` may carry a ``dl.wait`` token (``dl.consume_token(off_m, tok)``)."""
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        a = a_desc.load([off_m, k * BLOCK_K])
        b = b_desc.load([k * BLOCK_K, off_n])
        acc = tl.dot(a, b, acc)
    return acc


@triton_dist.jit
def tile_acc_tma_k(a_desc, b_desc, off_m, off_n, k_first, k_end, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                   BLOCK_K: tl.constexpr):
    """:func:`tile_acc_tma` over the K blocks ``k_first <= k < k_end`` only (``BLOCK_K`` columns of A / rows of B
    each): one split of a split-K tile. An empty range gives zeros. (The whole-K helpers keep their own loop: routing
    them through this one reorders their generated code.)"""
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(k_first, k_end):
        a = a_desc.load([off_m, k * BLOCK_K])
        b = b_desc.load([k * BLOCK_K, off_n])
        acc = tl.dot(a, b, acc)
    return acc


@triton_dist.jit
def tile_acc_ptr(a_ptr, b_ptr, off_m, off_n, m_end, N, K, stride_am, stride_ak, stride_bk, stride_bn,
                 BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    """Pointer path of :func:`tile_acc_tma`: rows ``>= m_end`` and columns ``>= N`` read as zero. ``a_ptr`` may
    carry a ``dl.wait`` token."""
    offs_m = off_m + tl.arange(0, BLOCK_M)
    offs_n = off_n + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + offs_m[:, None] * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_n[None, :] * stride_bn
    m_ok = offs_m[:, None] < m_end
    n_ok = offs_n[None, :] < N
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        k_left = K - k * BLOCK_K
        a = tl.load(a_ptrs, mask=m_ok & (offs_k[None, :] < k_left), other=0.0)
        b = tl.load(b_ptrs, mask=(offs_k[:, None] < k_left) & n_ok, other=0.0)
        acc = tl.dot(a, b, acc)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    return acc


@triton_dist.jit
def tile_acc_ptr_k(a_ptr, b_ptr, off_m, off_n, m_end, N, K, stride_am, stride_ak, stride_bk, stride_bn, k_first, k_end,
                   BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    """:func:`tile_acc_ptr` over the K blocks ``k_first <= k < k_end`` only (see :func:`tile_acc_tma_k`)."""
    offs_m = off_m + tl.arange(0, BLOCK_M)
    offs_n = off_n + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    k0 = k_first * BLOCK_K
    a_ptrs = a_ptr + offs_m[:, None] * stride_am + (k0 + offs_k[None, :]) * stride_ak
    b_ptrs = b_ptr + (k0 + offs_k[:, None]) * stride_bk + offs_n[None, :] * stride_bn
    m_ok = offs_m[:, None] < m_end
    n_ok = offs_n[None, :] < N
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(k_first, k_end):
        k_left = K - k * BLOCK_K
        a = tl.load(a_ptrs, mask=m_ok & (offs_k[None, :] < k_left), other=0.0)
        b = tl.load(b_ptrs, mask=(offs_k[:, None] < k_left) & n_ok, other=0.0)
        acc = tl.dot(a, b, acc)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    return acc


@triton_dist.jit
def store_tile(c_ptr, acc, off_m, off_n, m_end, N, stride_cm, stride_cn, BLOCK_M: tl.constexpr,
               BLOCK_N: tl.constexpr):
    """Store ``acc`` (converted to C's dtype) at ``C[off_m:, off_n:]``, rows ``< m_end`` and columns ``< N``."""
    offs_m = off_m + tl.arange(0, BLOCK_M)
    offs_n = off_n + tl.arange(0, BLOCK_N)
    ptrs = c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn
    tl.store(ptrs, acc.to(c_ptr.dtype.element_ty), mask=(offs_m[:, None] < m_end) & (offs_n[None, :] < N))


@triton_dist.jit
def slot_tile(off_m, off_n, m_end, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """``(offsets, mask)`` of the tile at ``(off_m, off_n)`` in a row-major ``[m_end, N]`` array (the fp32 partial
    staging slots of ``gemm_rs`` / ``gemm_ar``)."""
    offs_m = off_m + tl.arange(0, BLOCK_M)
    offs_n = off_n + tl.arange(0, BLOCK_N)
    return offs_m[:, None] * N + offs_n[None, :], (offs_m[:, None] < m_end) & (offs_n[None, :] < N)


@triton_dist.jit
def gemm_kernel(a_ptr, b_ptr, c_ptr, scale_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm,
                stride_cn, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                GROUP_M: tl.constexpr, NUM_SMS: tl.constexpr, USE_TMA: tl.constexpr, HAS_SCALE: tl.constexpr,
                FLATTEN: tl.constexpr = False, TMA_STORE: tl.constexpr = False):
    """Persistent GEMM ``C = (A @ B) * scale`` (scale only when ``HAS_SCALE``). Grid: ``min(NUM_SMS, tiles)``
    programs; each walks tiles ``pid, pid + NUM_SMS, ...``. ``USE_TMA`` needs ``stride_ak == stride_bn == 1``.
    ``FLATTEN``: the tile loop and the K loop are fused into one software-pipelined loop (``tl.range(...,
    flatten=True)``), so the next tile's loads are in flight during a tile's epilogue. ``TMA_STORE`` (with
    ``USE_TMA``, ``stride_cn == 1``, 16-byte aligned C rows): the epilogue stores through a tensor descriptor."""
    pid = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    num_tiles = num_pid_m * num_pid_n
    if USE_TMA:
        a_desc, b_desc = tma_descriptors(a_ptr, b_ptr, M, N, K, stride_am, stride_bk, BLOCK_M, BLOCK_N, BLOCK_K)
        if TMA_STORE:
            c_desc = tl.make_tensor_descriptor(c_ptr, shape=[M, N], strides=[stride_cm, 1],
                                               block_shape=[BLOCK_M, BLOCK_N])
    scale = 1.0
    if HAS_SCALE:
        scale = tl.load(scale_ptr)
    for tile in tl.range(pid, num_tiles, NUM_SMS, flatten=FLATTEN):
        pid_m, pid_n = tile_coords(tile, num_pid_m, num_pid_n, GROUP_M)
        off_m = pid_m * BLOCK_M
        off_n = pid_n * BLOCK_N
        if USE_TMA:
            acc = tile_acc_tma(a_desc, b_desc, off_m, off_n, K, BLOCK_M, BLOCK_N, BLOCK_K)
        else:
            acc = tile_acc_ptr(a_ptr, b_ptr, off_m, off_n, M, N, K, stride_am, stride_ak, stride_bk, stride_bn,
                               BLOCK_M, BLOCK_N, BLOCK_K)
        if HAS_SCALE:
            acc = acc * scale
        if USE_TMA and TMA_STORE:
            c_desc.store([off_m, off_n], acc.to(c_ptr.dtype.element_ty))
        else:
            store_tile(c_ptr, acc, off_m, off_n, M, N, stride_cm, stride_cn, BLOCK_M, BLOCK_N)


# ----------------------------------------------------------------------------------------------------------------
# configs
# ----------------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class TileConfig:
    """One tiling: block sizes, group size, warps, pipeline stages, ``flatten`` (the kernel's tile loop and K loop
    fused into one software-pipelined loop: ``FLATTEN`` of :func:`gemm_kernel` and of the AG+GEMM kernel),
    ``pointer_loads`` (masked pointer loads instead of tensor descriptors even where TMA is available: the fused
    launches' ``USE_TMA`` is off; no descriptor is built on the device) and ``split_k`` (the K blocks of a tile
    shared by that many programs: ``SPLIT_K`` of the GEMM+AR kernel)."""

    BLOCK_M: int
    BLOCK_N: int
    BLOCK_K: int
    GROUP_M: int = 8
    num_warps: int = 8
    num_stages: int = 3
    flatten: bool = False
    split_k: int = 1
    pointer_loads: bool = False

    def meta(self, with_flatten: bool = True, with_split: bool = False) -> dict:
        """Constexpr keywords of a launch; ``FLATTEN`` only when set and ``with_flatten``, ``SPLIT_K`` only when
        ``with_split`` (kernels without a flattened or split-K form leave them out and ignore those fields)."""
        meta = dict(BLOCK_M=self.BLOCK_M, BLOCK_N=self.BLOCK_N, BLOCK_K=self.BLOCK_K, GROUP_M=self.GROUP_M)
        if self.flatten and with_flatten:
            meta["FLATTEN"] = True
        if with_split:
            meta["SPLIT_K"] = self.split_k
        return meta

    def launch(self) -> dict:
        return dict(num_warps=self.num_warps, num_stages=self.num_stages)

    def __str__(self) -> str:
        flat = "f" if self.flatten else ""
        ptr = "p" if self.pointer_loads else ""
        split = f"k{self.split_k}" if self.split_k > 1 else ""
        return f"{self.BLOCK_M}x{self.BLOCK_N}x{self.BLOCK_K}x{self.num_warps}x{self.num_stages}{flat}{ptr}{split}"

    @classmethod
    def parse(cls, text: str, group_m: int = 8) -> "TileConfig":
        """``"BMxBNxBKxWARPSxSTAGES"`` with optional suffixes, in this order: ``f`` (``flatten``), ``p``
        (``pointer_loads``), ``kS`` (``split_k = S``), as ``str()`` writes it -> TileConfig; ValueError otherwise."""
        m = re.fullmatch(r"(\d+)x(\d+)x(\d+)x(\d+)x(\d+)(f?)(p?)(?:k(\d+))?", str(text).strip().lower())
        if m is None:
            raise ValueError(f"tile config {text!r}: expected BMxBNxBKxWARPSxSTAGES[f][p][kS], e.g. 128x256x64x8x3, "
                             f"128x128x64x4x4f (f: flattened loop), 16x64x128x4x4p (p: pointer loads, no TMA) or "
                             f"64x128x128x4x4k2 (k2: split-K by 2)")
        bm, bn, bk, w, st = (int(v) for v in m.groups()[:5])
        split = int(m.group(8) or 1)
        if min(bm, bn, bk, w, st, split) < 1 or any(v & (v - 1) for v in (bm, bn, bk, w)):
            raise ValueError(f"tile config {text!r}: block sizes and warps must be positive powers of two, stages "
                             f"and split-K >= 1")
        return cls(bm, bn, bk, group_m, w, st, bool(m.group(6)), split, bool(m.group(7)))


#: Hopper bf16/fp16 autotune candidates (128x256x64 / 4 stages is the classic sm_90 wgmma sweet spot).
CONFIGS = [
    TileConfig(128, 256, 64, 8, 8, 3),
    TileConfig(128, 256, 64, 8, 8, 4),
    TileConfig(128, 128, 64, 8, 8, 4),
    TileConfig(128, 128, 64, 8, 4, 4),
    TileConfig(64, 128, 64, 8, 4, 4),
    TileConfig(128, 64, 64, 8, 4, 4),
]
#: Simulator tiling (tiny: the interpreter executes each tile with numpy).
SIM_CONFIG = TileConfig(16, 16, 16, 4, 1, 1)


def env_config():
    """The tiling ``TRITON_DIST_OVERLAP_CONFIG=BMxBNxBKxWARPSxSTAGES[f][p][kS]`` sets for every fused launch
    (tuning; :meth:`TileConfig.parse`; a kernel without a flattened or split-K form ignores ``f`` / ``kS``), or None
    when it is unset. A malformed value raises ValueError naming the variable."""
    env = os.environ.get("TRITON_DIST_OVERLAP_CONFIG", "").strip()
    if not env:
        return None
    try:
        return TileConfig.parse(env)
    except ValueError as exc:
        raise ValueError(f"TRITON_DIST_OVERLAP_CONFIG: {exc}") from None


def pick_config(M: int, N: int, K: int, *, on_gpu: bool, elem_bytes: int = 2, cc: int = 90,
                sim_config: TileConfig = SIM_CONFIG) -> TileConfig:
    """Deterministic tiling for the fused kernels (same on every rank). GPU: 128x256x64 for large shapes,
    128x128x64 when the tile count would leave SMs idle, 64x128 for small M; fp8 doubles BLOCK_K.
    :func:`env_config` overrides it."""
    env = env_config()
    if env is not None:
        return env
    if not on_gpu:
        return sim_config
    bk = 128 if elem_bytes == 1 else 64
    stages = 3
    if M <= 256:
        return TileConfig(64, 128, bk, 8, 4, 4 if cc >= 90 else 3)
    if cc < 90:
        return TileConfig(128, 128, 32, 8, 4, stages)
    if (M // 128) * (N // 256) >= 132:
        return TileConfig(128, 256, bk, 8, 8, stages)
    return TileConfig(128, 128, bk, 8, 8, 4)


def autotune_configs():
    """:data:`CONFIGS` as ``triton.Config`` objects, each with ``FLATTEN`` off and on (the autotuned GEMMs'
    candidates: ``gemm_kernel`` and the kernels that share its tile loop take a ``FLATTEN`` switch). Measured on
    H200 (``benchmarks/bench_gemm.py``): the flattened loop is 1-4% faster at most overlap shapes, not all."""
    return [triton.Config({**c.meta(), "FLATTEN": flat}, num_warps=c.num_warps, num_stages=c.num_stages)
            for c in CONFIGS for flat in (False, True)]


@functools.lru_cache(maxsize=None)
def gemm_autotuned():
    """``gemm_kernel`` wrapped in ``triton.autotune`` (keyed on ``M, N, K``; per-shape results cached in memory and
    on disk). Created on first use (GPU only)."""
    return triton.autotune(configs=autotune_configs(), key=["M", "N", "K"], cache_results=True)(gemm_kernel)


def use_tma_for(device) -> bool:
    """Host decision for ``USE_TMA``: a CUDA device of compute capability >= 9.0 (and not the interpreter)."""
    import torch

    if _compat.interpret_enabled() or getattr(device, "type", "cpu") != "cuda":
        return False
    if getattr(torch.version, "hip", None):
        return False
    major, _ = torch.cuda.get_device_capability(device)
    return major >= 9


_allocator_set = False


def ensure_tma_allocator() -> None:
    """Device-side tensor descriptors need per-launch global scratch: install a torch-backed Triton allocator if
    none is set (a user-set allocator is kept)."""
    global _allocator_set
    if _allocator_set:
        return
    import torch

    if _compat.allocator_is_unset():
        def alloc(size: int, alignment: int, stream):
            return torch.empty(size, device="cuda", dtype=torch.int8)

        triton.set_allocator(alloc)
    _allocator_set = True


def num_sms(device) -> int:
    import torch

    if getattr(device, "type", "cpu") == "cuda":
        return torch.cuda.get_device_properties(device).multi_processor_count
    return 2


def check_operands(op: str, a, b, dtypes=None) -> None:
    """Host checks of GEMM operands ``a [M, K] @ b [K, N]`` before any launch: 2-D tensors of one dtype among
    ``dtypes`` (default bf16, fp16, fp8 e4m3 / e5m2), matching inner dimensions, one device, row-major with unit
    column stride, ``K`` and ``N`` multiples of 8 and 16-byte aligned rows (tensor descriptors). Raises ValueError
    naming ``op``, the bad value and what is accepted."""
    import torch

    if dtypes is None:
        dtypes = (torch.bfloat16, torch.float16) + tuple(
            d for d in (getattr(torch, "float8_e4m3fn", None), getattr(torch, "float8_e5m2", None)) if d)
    for name, t in (("a", a), ("b", b)):
        if not isinstance(t, torch.Tensor):
            raise ValueError(f"{op}: {name} must be a torch.Tensor, got {type(t).__name__}")
        if t.dim() != 2:
            raise ValueError(f"{op}: {name} must be 2-D, got shape {tuple(t.shape)}")
        if t.dtype not in dtypes:
            names = ", ".join(str(d).replace("torch.", "") for d in dtypes)
            raise ValueError(f"{op}: {name}.dtype={t.dtype} is not supported; accepted: {names}")
    if a.dtype != b.dtype:
        raise ValueError(f"{op}: a.dtype={a.dtype} and b.dtype={b.dtype} differ")
    if a.shape[1] != b.shape[0]:
        raise ValueError(f"{op}: inner dimensions differ: a is {tuple(a.shape)}, b is {tuple(b.shape)}")
    if a.device != b.device:
        raise ValueError(f"{op}: a is on {a.device}, b on {b.device}")
    if a.stride(1) != 1 or b.stride(1) != 1:
        raise ValueError(f"{op}: a and b must be row-major with unit column stride (call .contiguous())")
    if a.shape[1] % 8 or b.shape[1] % 8:
        raise ValueError(f"{op}: K={a.shape[1]} and N={b.shape[1]} must be multiples of 8 (16-byte rows for TMA)")
    if a.stride(0) % 8 or b.stride(0) % 8:
        raise ValueError(f"{op}: row strides a.stride(0)={a.stride(0)}, b.stride(0)={b.stride(0)} must be multiples "
                         f"of 8 elements (16-byte aligned rows for TMA)")


def matmul(a, b, out=None, scale=None, config: TileConfig = None, autotune: bool = True):
    """``out = (a @ b) * scale`` with :func:`gemm_kernel` (a: [M, K], b: [K, N], same dtype among bf16 / fp16 /
    fp8 e4m3 / e5m2; fp8 gives bf16 unless ``out`` is given). On GPU without ``config`` the autotuned variant is
    used; under the interpreter :data:`SIM_CONFIG`. Raises ValueError on bad shapes / dtypes."""
    import torch

    check_operands("matmul", a, b)
    M, K = a.shape
    N = b.shape[1]
    if out is None:
        out_dtype = torch.bfloat16 if a.dtype.itemsize == 1 else a.dtype
        out = torch.empty((M, N), dtype=out_dtype, device=a.device)
    if out.shape != (M, N):
        raise ValueError(f"matmul: out has shape {tuple(out.shape)}, expected {(M, N)}")
    if M == 0 or N == 0:
        return out
    use_tma = use_tma_for(a.device) and a.stride(1) == 1 and b.stride(1) == 1 and \
        not (config is not None and config.pointer_loads)
    if use_tma:
        ensure_tma_allocator()
    sms = num_sms(a.device)
    scale_t = scale if scale is not None else out  # dummy pointer when HAS_SCALE is False
    args = (a, b, out, scale_t, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1), out.stride(0),
            out.stride(1))
    consts = dict(NUM_SMS=sms, USE_TMA=use_tma, HAS_SCALE=scale is not None)
    on_gpu = a.device.type == "cuda"
    if on_gpu and config is None and autotune:
        kern = gemm_autotuned()
        grid = lambda META: (min(sms, triton.cdiv(M, META["BLOCK_M"]) * triton.cdiv(N, META["BLOCK_N"])), )  # noqa
        kern[grid](*args, **consts)
        return out
    cfg = config or pick_config(M, N, K, on_gpu=on_gpu, elem_bytes=a.dtype.itemsize)
    grid = (min(sms, triton.cdiv(M, cfg.BLOCK_M) * triton.cdiv(N, cfg.BLOCK_N)), )
    gemm_kernel[grid](*args, **cfg.meta(), **consts, **cfg.launch())
    return out


__all__ = ["gemm_kernel", "tile_acc_tma", "tile_acc_ptr", "tile_acc_tma_k", "tile_acc_ptr_k", "tile_coords", "store_tile", "tma_descriptors", "slot_tile",
           "TileConfig", "CONFIGS", "SIM_CONFIG", "env_config", "pick_config", "gemm_autotuned", "autotune_configs", "use_tma_for",
           "ensure_tma_allocator", "matmul", "num_sms", "check_operands"]
