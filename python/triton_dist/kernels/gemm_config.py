"""Host side of the Triton GEMM (:mod:`~triton_dist.kernels.gemm`): tilings and the launches that use them.

* **Tilings**: :class:`TileConfig` (block sizes, warps, stages and the loop / load / store forms, with a text form
  ``BMxBNxBKxWARPSxSTAGES[f][t|p][kS]``), :data:`CONFIGS` (Hopper-tuned autotune candidates) and
  :func:`gemm_autotuned` (``triton.autotune`` keyed on ``M, N, K``, cached per shape, results cached on disk) for the
  plain GEMM. The fused kernels cannot be autotuned in-place (benchmark launches would consume signal epochs, and
  ranks could pick different tilings, i.e. different signal layouts): they use :func:`pick_config`, a deterministic
  function of the shape, the same on every rank; :func:`pick_decode_config` is the measured rule for decode sizes.
* **Launchers**: :func:`launch_variant` (one tiling and loop / epilogue form, :class:`GemmVariant`: what
  ``benchmarks/bench_gemm.py`` times and a table entry runs), :func:`launch_split_k` (split-K, with its cached
  workspace :func:`split_k_workspace`) and :func:`launch_autotuned`. No operand checks: the op
  (``triton_dist.ops.matmul``) checks before any launch.
"""
from __future__ import annotations

import dataclasses
import functools
import os
import re
from dataclasses import dataclass
from typing import Optional

import triton

from triton_dist import _compat

from .gemm import gemm_kernel, gemm_split_k_kernel

# ----------------------------------------------------------------------------------------------------------------
# configs
# ----------------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class TileConfig:
    """One tiling: block sizes, group size, warps, pipeline stages, ``flatten`` (the kernel's tile loop and K loop
    fused into one software-pipelined loop: ``FLATTEN`` of :func:`gemm_kernel` and of the AG+GEMM kernel),
    ``pointer_loads`` (masked pointer loads instead of tensor descriptors even where TMA is available: the fused
    launches' ``USE_TMA`` is off; no descriptor is built on the device), ``split_k`` (the K blocks of a tile
    shared by that many programs: ``SPLIT_K`` of :func:`gemm_split_k_kernel` and of the GEMM+AR kernel) and
    ``tma_store`` (the epilogue stores each tile through a tensor descriptor: ``TMA_STORE`` of the AG+GEMM kernel,
    where its launch allows it; needs TMA loads, so not with ``pointer_loads``)."""

    BLOCK_M: int
    BLOCK_N: int
    BLOCK_K: int
    GROUP_M: int = 8
    num_warps: int = 8
    num_stages: int = 3
    flatten: bool = False
    split_k: int = 1
    pointer_loads: bool = False
    tma_store: bool = False

    def __post_init__(self):
        if self.tma_store and self.pointer_loads:
            raise ValueError(f"tile config {self}: a TMA store (t) needs TMA loads; pointer loads (p) build no "
                             f"descriptor")

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
        store = "t" if self.tma_store else ""
        ptr = "p" if self.pointer_loads else ""
        split = f"k{self.split_k}" if self.split_k > 1 else ""
        return (f"{self.BLOCK_M}x{self.BLOCK_N}x{self.BLOCK_K}x{self.num_warps}x{self.num_stages}{flat}{store}{ptr}"
                f"{split}")

    @classmethod
    def parse(cls, text: str, group_m: int = 8) -> "TileConfig":
        """``"BMxBNxBKxWARPSxSTAGES"`` with optional suffixes, in this order: ``f`` (``flatten``), ``t``
        (``tma_store``), ``p`` (``pointer_loads``; not with ``t``), ``kS`` (``split_k = S``), as ``str()`` writes it
        -> TileConfig; ValueError otherwise."""
        m = re.fullmatch(r"(\d+)x(\d+)x(\d+)x(\d+)x(\d+)(f?)(t?)(p?)(?:k(\d+))?", str(text).strip().lower())
        if m is None:
            raise ValueError(f"tile config {text!r}: expected BMxBNxBKxWARPSxSTAGES[f][t|p][kS], e.g. "
                             f"128x256x64x8x3, 128x128x64x4x4f (f: flattened loop), 128x128x64x4x6ft (t: TMA-store "
                             f"epilogue), 16x64x128x4x4p (p: pointer loads, no TMA) or 64x128x128x4x4k2 (k2: split-K "
                             f"by 2)")
        bm, bn, bk, w, st = (int(v) for v in m.groups()[:5])
        split = int(m.group(9) or 1)
        if min(bm, bn, bk, w, st, split) < 1 or any(v & (v - 1) for v in (bm, bn, bk, w)):
            raise ValueError(f"tile config {text!r}: block sizes and warps must be positive powers of two, stages "
                             f"and split-K >= 1")
        if m.group(7) and m.group(8):
            raise ValueError(f"tile config {text!r}: t (TMA-store epilogue) needs TMA loads; p (pointer loads) "
                             f"builds no descriptor: use one of them")
        return cls(bm, bn, bk, group_m, w, st, bool(m.group(6)), split, bool(m.group(8)), bool(m.group(7)))


#: Hopper bf16/fp16 autotune candidates (128x256x64 / 4 stages is the classic sm_90 wgmma sweet spot).
#: 128x128x64 with one warpgroup and 6 stages is what cuBLAS runs at M = 256 on an H200 (ncu: nvjet 128x128_64x6,
#: 128 CTAs); ours with it went from 0.92x / 0.87x cuBLAS (the autotuner without it) to 0.97x / 0.94x at
#: 256x8192x7168 / 256x7168x4096 (benchmarks/results/2026-12-01-decode-gemm/stages-33afd5a).
CONFIGS = [
    TileConfig(128, 256, 64, 8, 8, 3),
    TileConfig(128, 256, 64, 8, 8, 4),
    TileConfig(128, 128, 64, 8, 8, 4),
    TileConfig(128, 128, 64, 8, 4, 4),
    TileConfig(128, 128, 64, 8, 4, 6),
    TileConfig(64, 128, 64, 8, 4, 4),
    TileConfig(128, 64, 64, 8, 4, 4),
]
#: Simulator tiling (tiny: the interpreter executes each tile with numpy).
SIM_CONFIG = TileConfig(16, 16, 16, 4, 1, 1)


def env_config():
    """The tiling ``TRITON_DIST_OVERLAP_CONFIG=BMxBNxBKxWARPSxSTAGES[f][t|p][kS]`` sets for every fused launch
    (tuning; :meth:`TileConfig.parse`; a kernel without a flattened, TMA-store or split-K form ignores ``f`` / ``t``
    / ``kS``), or None when it is unset. A malformed value raises ValueError naming the variable."""
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


#: most programs that share the K blocks of one tile (``SPLIT_K`` of :func:`gemm_split_k_kernel` and of the GEMM+AR
#: kernel); the decode rule (:func:`pick_decode_config`) never splits more
SPLIT_K_MAX = 8
#: most rows the decode rule covers (:func:`pick_decode_config`; ``matmul``'s "auto" above it is the autotuner, the
#: GEMM+AR kernel's workspace holds ``SPLIT_K_MAX * min(max_m, SPLIT_K_MAX_M) * n`` fp32): split-K pays off where the
#: output tiles alone cannot keep the SMs streaming weights, i.e. at decode sizes
SPLIT_K_MAX_M = 128


def pick_decode_config(M: int, N: int, K: int, *, num_sms: int) -> TileConfig:
    """Deterministic tiling for ``M <= SPLIT_K_MAX_M`` rows (decode), where a GEMM is a stream of the weights ``B``.
    Measured on H200 (``benchmarks/results/2026-12-01-decode-gemm``, bf16, N=4096-28672, K=3584-14336): masked
    pointer loads beat tensor descriptors by 1-3 us per call at every such shape (the descriptors' fixed cost), 128-deep
    K blocks beat 64, and the fastest tiles leave about one tile per SM: 16x64 for M <= 16, 64x64 for M <= 64, 64x128
    for M <= 128 (4 warps, 4 stages). Where the tiles still leave half the SMs idle the K blocks are split, ``split =
    max(1, min(SPLIT_K_MAX, num_sms // tiles, K blocks))`` (1x4096x14336: 64 tiles, split 2, 31.3 us against 44.2
    unsplit); a split with the SMs already covered only adds its workspace round trip. The same on every rank (a
    function of the shape and the SM count). ValueError above :data:`SPLIT_K_MAX_M` rows."""
    if M > SPLIT_K_MAX_M:
        raise ValueError(f"pick_decode_config: M={M} rows; the decode rule covers M <= {SPLIT_K_MAX_M}")
    bm, bn, bk = (16, 64, 128) if M <= 16 else ((64, 64, 128) if M <= 64 else (64, 128, 128))
    tiles = -(-M // bm) * -(-N // bn)
    split = max(1, min(SPLIT_K_MAX, num_sms // tiles, -(-K // bk)))
    return TileConfig(bm, bn, bk, 8, 4, 4, split_k=split, pointer_loads=True)


_split_k_ws = {}  # (device, stream handle) -> [fp32 workspaces], never freed (a captured graph may hold one)
_split_k_cnt = {}  # (device, stream handle) -> [int32 counter arrays zeroed eagerly], never freed
_split_k_captured = []  # counter arrays allocated (and zeroed) inside a CUDA-graph capture: owned by that graph


def split_k_workspace(device, ws_elems: int, tiles: int):
    """``(ws, cnt)`` for one :func:`gemm_split_k_kernel` launch on ``device`` from the current stream: an fp32
    workspace of at least ``ws_elems`` elements and an int32 array of at least ``tiles`` counters that are 0 (every
    launch leaves them 0). Cached per device and stream, like cuBLAS's workspace: launches on one stream are ordered,
    so they can share it; two streams get two. Never freed, so a CUDA graph that captured a launch keeps valid
    pointers. Inside a capture, counters not zeroed before it are allocated anew (their zeroing is a memset node of
    that graph, so they are not reused outside it); one eager call of the shape before capturing avoids that node.
    Hazard (as with cuBLAS's workspace): replaying a graph concurrently with other split-K work of the stream it
    was captured on."""
    import torch

    capturing = False
    handle = 0
    if device.type == "cuda":
        handle = torch.cuda.current_stream(device).cuda_stream
        capturing = torch.cuda.is_current_stream_capturing()
    key = (str(device), handle)
    ws_list = _split_k_ws.setdefault(key, [])
    ws = next((w for w in ws_list if w.numel() >= ws_elems), None)
    if ws is None:
        # at least the decode rule's largest need (num_sms units of 64x128 fp32 tiles): one buffer serves them all
        floor = num_sms(device) * 64 * 128 if device.type == "cuda" else 0
        ws = torch.empty((max(ws_elems, floor), ), dtype=torch.float32, device=device)
        ws_list.append(ws)
    cnt_list = _split_k_cnt.setdefault(key, [])
    cnt = next((c for c in cnt_list if c.numel() >= tiles), None)
    if cnt is None:
        cnt = torch.zeros((max(tiles, 1024), ), dtype=torch.int32, device=device)
        (_split_k_captured if capturing else cnt_list).append(cnt)
    return ws, cnt


def launch_split_k(a, b, c, cfg: TileConfig, scale=None, sms: Optional[int] = None, use_tma: bool = True):
    """Launch :func:`gemm_split_k_kernel` for ``c = (a @ b) * scale`` with ``cfg`` (its ``split_k`` > 1; workspace
    from :func:`split_k_workspace`). ValueError when ``split_k * M * N`` does not fit 32-bit offsets. No operand
    checks: callers check."""
    M, K = a.shape
    N = b.shape[1]
    split = cfg.split_k
    if split * M * N >= 2 ** 31:
        raise ValueError(f"matmul: split-K {split} of a {M}x{N} output needs {split * M * N} workspace elements; at "
                         f"most 2**31 - 1 (32-bit offsets): use fewer splits or rows")
    sms = num_sms(a.device) if sms is None else sms
    tiles = triton.cdiv(M, cfg.BLOCK_M) * triton.cdiv(N, cfg.BLOCK_N)
    ws, cnt = split_k_workspace(a.device, split * M * N, tiles)
    grid = (min(sms, tiles * split), )
    gemm_split_k_kernel[grid](a, b, c, c if scale is None else scale, ws, cnt, M, N, K, a.stride(0), a.stride(1),
                              b.stride(0), b.stride(1), c.stride(0), c.stride(1), **cfg.meta(with_flatten=False),
                              NUM_SMS=sms, USE_TMA=use_tma, HAS_SCALE=scale is not None, SPLIT_K=split,
                              **cfg.launch())
    return c


def launch_autotuned(a, b, c, scale=None, sms: Optional[int] = None, use_tma: bool = True):
    """Launch :func:`gemm_autotuned` for ``c = (a @ b) * scale`` (GPU; the autotuner's pick per ``M, N, K``): what
    :func:`matmul` runs when neither the table nor the decode rule applies, and ``benchmarks/bench_gemm.py``'s
    ``ours/autotune``. No operand checks: callers check."""
    M, K = a.shape
    N = b.shape[1]
    sms = num_sms(a.device) if sms is None else sms
    grid = lambda META: (min(sms, triton.cdiv(M, META["BLOCK_M"]) * triton.cdiv(N, META["BLOCK_N"])), )  # noqa
    gemm_autotuned()[grid](a, b, c, c if scale is None else scale, M, N, K, a.stride(0), a.stride(1), b.stride(0),
                           b.stride(1), c.stride(0), c.stride(1), NUM_SMS=sms, USE_TMA=use_tma,
                           HAS_SCALE=scale is not None)
    _autotuned.add(_autotune_key(a, b, c, scale, sms, use_tma))
    return c


_autotuned = set()  # the launches launch_autotuned has made in this process (their tuning is done)


def _autotune_key(a, b, c, scale, sms, use_tma) -> tuple:
    return (str(a.device), a.shape[0], b.shape[1], a.shape[1], a.dtype, b.dtype, c.dtype, scale is not None, sms,
            use_tma)


def autotuned(a, b, c, scale=None, sms: Optional[int] = None, use_tma: bool = True) -> bool:
    """Whether :func:`launch_autotuned` with these arguments would only launch (the autotuner already timed this
    shape in this process), so it may run inside a CUDA-graph capture; a first launch tunes (times every candidate,
    synchronizing), which a capture forbids."""
    sms = num_sms(a.device) if sms is None else sms
    return _autotune_key(a, b, c, scale, sms, use_tma) in _autotuned


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


def tma_store_ok(out) -> bool:
    """``out`` can be the base of a tensor descriptor: unit column stride, 16-byte aligned rows and base."""
    return out.stride(1) == 1 and (out.stride(0) * out.element_size()) % 16 == 0 and out.data_ptr() % 16 == 0


def num_sms(device) -> int:
    """Programs of a persistent grid on ``device``: this rank's SMs (its share where ranks share a GPU,
    ``runtime.device_info.rank_sm_count``); 2 on the interpreter."""
    from ..runtime.device_info import rank_sm_count

    return rank_sm_count(device, simulated=2)


# ----------------------------------------------------------------------------------------------------------------
# variants: one tiling and loop / epilogue form (bench_gemm's variants, the table's entries)
# ----------------------------------------------------------------------------------------------------------------
#: The loop / epilogue forms of :func:`gemm_kernel` that ``benchmarks/bench_gemm.py`` times per tiling, by the name
#: its variants carry (``ours/<tiling>/<form>``): ``(FLATTEN, TMA_STORE)``.
GEMM_FORMS = {"plain": (False, False), "flat": (True, False), "tma": (False, True), "flat+tma": (True, True)}


@dataclass(frozen=True)
class GemmVariant:
    """One launch of :func:`launch_variant`: a tiling (:func:`variant_config`: no ``f`` suffix, the form says
    ``flatten``; ``p``: pointer loads; ``kS``: split-K, :func:`gemm_split_k_kernel`) and the loop / epilogue form
    (one of :func:`variant_forms` of the tiling)."""

    config: TileConfig
    flatten: bool = False
    tma_store: bool = False

    @property
    def form(self) -> str:
        return next(name for name, f in GEMM_FORMS.items() if f == (self.flatten, self.tma_store))

    def __str__(self) -> str:
        return f"{self.config}/{self.form}"

    @classmethod
    def parse(cls, text: str) -> "GemmVariant":
        """``"<tiling>/<form>"`` (bench_gemm's variant name without ``ours/``, e.g. ``128x128x64x4x4/flat+tma``) ->
        GemmVariant; ValueError otherwise."""
        tiling, sep, form = str(text).strip().partition("/")
        if not sep or form not in GEMM_FORMS:
            raise ValueError(f"gemm variant {text!r}: expected <tiling>/<form>, form one of {', '.join(GEMM_FORMS)}")
        cfg = variant_config(tiling)
        if form not in variant_forms(cfg):
            raise ValueError(f"gemm variant {text!r}: tiling {cfg} runs as {', '.join(variant_forms(cfg))} only")
        return cls(cfg, *GEMM_FORMS[form])


def variant_config(text: str) -> TileConfig:
    """A tiling :func:`launch_variant` can run (what bench_gemm's ``--configs`` and a table entry's ``config``
    accept): :meth:`TileConfig.parse` text without the ``f`` and ``t`` suffixes (the form carries ``FLATTEN`` and
    ``TMA_STORE``); ``p`` (pointer loads) and ``kS`` (split-K) are accepted. ValueError otherwise."""
    cfg = TileConfig.parse(text)
    if cfg.flatten or cfg.tma_store:
        bare = str(dataclasses.replace(cfg, flatten=False, tma_store=False))
        form = "flat+tma" if cfg.flatten and cfg.tma_store else ("flat" if cfg.flatten else "tma")
        raise ValueError(f"tile config {text!r}: a GEMM variant takes its loop and epilogue form from the form name: "
                         f"no f suffix (loop) or t suffix (TMA store) (e.g. {bare}/{form})")
    return cfg


def variant_forms(cfg: TileConfig) -> tuple:
    """The forms (:data:`GEMM_FORMS` names) a tiling runs in: split-K (``kS``, S > 1) ``plain`` only (its kernel has
    one loop form and stores through pointers); pointer loads (``p``) ``plain`` and ``flat`` (no descriptor, so no
    TMA store); otherwise all four."""
    if cfg.split_k > 1:
        return ("plain", )
    if cfg.pointer_loads:
        return ("plain", "flat")
    return tuple(GEMM_FORMS)


def launch_variant(a, b, c, variant: GemmVariant, scale=None, sms: Optional[int] = None):
    """Launch ``c = (a @ b) * scale`` with one tiling and form: :func:`gemm_kernel` with TMA loads (sm_90; pointer
    loads for a ``p`` tiling), or :func:`gemm_split_k_kernel` for a ``kS`` tiling (:func:`launch_split_k`). The
    launch ``benchmarks/bench_gemm.py`` times for its variants and :func:`matmul` runs for a table entry (one helper,
    so the two cannot drift). ``sms``: the grid bound (default: the device's SM count). No operand checks: callers
    check."""
    M, K = a.shape
    N = b.shape[1]
    cfg = variant.config
    sms = num_sms(a.device) if sms is None else sms
    if cfg.split_k > 1:
        return launch_split_k(a, b, c, cfg, scale=scale, sms=sms, use_tma=not cfg.pointer_loads)
    grid = (min(sms, triton.cdiv(M, cfg.BLOCK_M) * triton.cdiv(N, cfg.BLOCK_N)), )
    gemm_kernel[grid](a, b, c, c if scale is None else scale, M, N, K, a.stride(0), a.stride(1), b.stride(0),
                      b.stride(1), c.stride(0), c.stride(1), **cfg.meta(with_flatten=False), NUM_SMS=sms,
                      USE_TMA=not cfg.pointer_loads, HAS_SCALE=scale is not None, FLATTEN=variant.flatten,
                      TMA_STORE=variant.tma_store, **cfg.launch())
    return c


__all__ = ["TileConfig", "CONFIGS", "SIM_CONFIG", "env_config", "pick_config", "SPLIT_K_MAX", "SPLIT_K_MAX_M",
           "pick_decode_config", "split_k_workspace", "launch_split_k", "launch_autotuned", "autotuned", "autotune_configs",
           "gemm_autotuned", "use_tma_for", "ensure_tma_allocator", "tma_store_ok", "num_sms", "GEMM_FORMS", "GemmVariant",
           "variant_config", "variant_forms", "launch_variant"]
