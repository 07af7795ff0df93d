"""What the simulator adds to Triton's interpreter. Every Triton internal used here is reached through
``triton_dist._compat`` (one tested assumption each); this module holds the simulator's own logic:

* :class:`ConcurrentGridExecutor` -- runs the programs of one interpreted launch as threads, so programs that wait
  on each other (or on peers' programs) all progress (``triton_dist.runtime.sim.launch.run_grid`` uses it);
* :func:`prewarm_interpreter` -- rewrites a kernel's reachable functions once, before its programs run as threads;
* :func:`install_interpreter_fixes` -- what every interpreted launch needs, installed by the interpreter path itself
  (``import triton_dist`` when the interpreter is on, every interpreted ``@triton_dist.jit`` launch, the simulator
  backend), never by importing a kernels module: :func:`install_interpreter_index_fix` /
  :func:`install_interpreter_bf16_dot_fix` (workarounds for two bugs of the stock Triton 3.6 interpreter:
  runtime-bound ``for`` loops with numpy >= 2.3, bfloat16 ``tl.dot``) and plain ``@triton.jit`` functions callable
  from interpreted kernels (``_compat.install_interpreted_jit_calls``).
"""
from __future__ import annotations

import sys
import threading
import types

from ... import _compat
from ...backends.sim.launch_record import LaunchRecord, bind_program

__all__ = ["ConcurrentGridExecutor", "prewarm_interpreter", "install_interpreter_fixes",
           "install_interpreter_index_fix", "install_interpreter_bf16_dot_fix", "install_interpreter_bf16_arith_fix",
           "install_interpreter_block_bool_fix", "BlockTruthValueError"]


class ConcurrentGridExecutor:
    """An interpreted launch whose programs run in threads: at most ``max_concurrent`` alive at once, started in grid
    order, like CTAs becoming resident on a GPU. Same call shape as Triton's ``GridExecutor``:
    ``ConcurrentGridExecutor(fn, arg_names, grid, pre_run_hooks)(*args, **kwargs)``, ``fn`` the rewritten kernel.

    Every program thread is bound to one :class:`~triton_dist.backends.sim.launch_record.LaunchRecord` of the
    launch, and its program id is its own (``_compat.install_thread_local_grid_idx``). If a program raises, the
    programs not started yet are not started, ``on_program_error(exc)`` (when set) is called once, and after the
    others finished the first error is raised as the interpreter would, as one line naming the program and the
    original error beneath the interpreter's device-function wrapping (``InterpreterError("program (x, y, z):
    SimWaitTimeout: ...")``)."""

    max_concurrent = 1024
    on_program_error = None  # callable(exc) invoked once on the first failing program (e.g. abort waits)

    def __init__(self, fn, arg_names, grid, pre_run_hooks=()):
        _compat.install_thread_local_grid_idx()
        self.fn = fn
        self.arg_names = arg_names
        self.grid = grid
        self.pre_run_hooks = list(pre_run_hooks)

    def __call__(self, *args_dev, **kwargs):
        _compat.interpreted_launch(self.fn, self.arg_names, self.grid, self.pre_run_hooks, args_dev, kwargs,
                                   self._run_programs)

    def _run_programs(self, grid, call_args, set_program_id):
        slots = threading.Semaphore(max(1, int(self.max_concurrent)))
        errors = []
        lock = threading.Lock()
        threads = []

        @_compat.interpreted_program_runner
        def program(idx):
            try:
                set_program_id(*idx)
                self.fn(**call_args)
            except BaseException as exc:  # noqa: BLE001 - re-raised in the launching thread
                with lock:
                    first = not errors
                    errors.append((idx, exc))
                if first and self.on_program_error is not None:
                    self.on_program_error(exc)
            finally:
                slots.release()

        launch = LaunchRecord()
        indices = ((x, y, z) for x in range(grid[0]) for y in range(grid[1]) for z in range(grid[2]))
        for idx in indices:
            slots.acquire()
            if errors:  # a program failed: do not start the rest (like a GPU launch aborting)
                slots.release()
                break
            t = threading.Thread(target=program, args=(idx, ), daemon=True,
                                 name=f"triton_dist-sim-program-{idx[0]}-{idx[1]}-{idx[2]}")
            bind_program(t, launch, idx)
            t.start()
            threads.append(t)
        for t in threads:
            t.join()
        if errors:
            idx, exc = errors[0]
            origin = _compat.interpreter_error_origin(exc)  # not the interpreter's nested repr() layers
            err = _compat.interpreter_program_error(f"program {idx}: {type(origin).__name__}: {origin}", exc)
            if err is exc:  # front-end debugging: the program's own exception
                raise exc
            raise err from exc


_prewarmed_modules: set = set()
_prewarm_lock = threading.Lock()


def prewarm_interpreter(kernel_fn) -> None:
    """Rewrite, once and in the calling thread, every Triton function reachable from ``kernel_fn``'s module (and,
    recursively, from the modules of the functions found there), plus ``triton.language.standard``.

    Why: the interpreter's FIRST rewrite of a function inserts names into that function's module dict, while every
    device-function call iterates the caller's module dict (``_patch_lang``); with a launch's programs running as
    threads, a first call in one program then fails another with "dictionary changed size during iteration".
    Assumptions: ``InterpretedFunction(fn).rewrite()`` caches per ``fn`` in the class-level
    ``InterpretedFunction.rewritten_fn``; ``JITFunction`` / our ``DistJITFunction`` expose the Python function as
    ``.fn``. Cheap after the first call per module."""
    from triton import JITFunction

    def functions_of(module_dict):
        for value in list(module_dict.values()):
            if isinstance(value, JITFunction) or _compat.is_interpreted_function(value):
                yield value.fn

    with _prewarm_lock:
        pending = [getattr(kernel_fn, "__globals__", {}), _compat.standard_library_globals()]
        while pending:
            module_dict = pending.pop()
            key = id(module_dict)
            if key in _prewarmed_modules:
                continue
            _prewarmed_modules.add(key)
            for fn in functions_of(module_dict):
                if isinstance(fn, types.FunctionType):
                    _compat.interpreted_function(fn).rewrite()
                    pending.append(fn.__globals__)


def _scalar_index(self):
    """``tl.tensor.__index__`` under the interpreter: the single element of the scalar's 1-element array."""
    import numpy as np

    return int(np.asarray(self.handle.data).reshape(-1)[0])


def install_interpreter_index_fix() -> None:
    """Make ``for i in range(<runtime scalar>)`` work in interpreted kernels.

    Stock Triton 3.6's interpreter gives ``tl.tensor`` an ``__index__`` of ``int(self.handle.data)``, but its scalars
    hold 1-element 1-D numpy arrays, which numpy >= 2.3 refuses to convert with ``int()`` ("only 0-dimensional
    arrays can be converted to Python scalars"): every ``for`` loop whose bound is a kernel argument or program id
    fails. The interpreter installs ours (which reads the single element) instead
    (``_compat.override_interpreter_tensor_attr``). Idempotent."""
    _compat.override_interpreter_tensor_attr("__index__", _scalar_index)


def _bf16_as_f32(a, b):
    """Dot operands with bfloat16 (raw ``uint16`` bits in the interpreter) widened exactly to fp32 (``bits << 16``),
    both of them when either is bfloat16; others unchanged."""
    import numpy as np
    import triton.language as tl

    def f32(h):
        if h.dtype == tl.bfloat16:
            return _compat.interpreter_handle((np.asarray(h.data).astype(np.uint32) << 16).view(np.float32),
                                              tl.float32)
        return h

    if a.dtype == tl.bfloat16 or b.dtype == tl.bfloat16:
        return f32(a), f32(b)
    return a, b


def install_interpreter_bf16_dot_fix() -> None:
    """Make ``tl.dot`` on bfloat16 operands correct under the interpreter.

    Stock Triton 3.6's interpreter stores bfloat16 as raw ``uint16`` bits and its dot multiplies the raw arrays
    (only fp8 operands are converted first), so a bf16 ``tl.dot`` returns garbage (~1e10). Its operands are widened
    to fp32 first (``_compat.convert_interpreter_dot_operands``). Idempotent."""
    _compat.convert_interpreter_dot_operands(_bf16_as_f32)


# Float ops of Triton's interpreter builder that compute on their operands' values (not their bits). On bfloat16
# the stock interpreter runs them on the raw uint16 bits; they are computed in fp32 and rounded back instead.
_BF16_ARITH_OPS = ("create_fadd", "create_fsub", "create_fmul", "create_fdiv", "create_precise_divf", "create_frem",
                   "create_minimumf", "create_minnumf", "create_maximumf", "create_maxnumf", "create_fma",
                   "create_clampf", "create_cos", "create_sin", "create_exp", "create_exp2", "create_log",
                   "create_log2", "create_sqrt", "create_precise_sqrt", "create_rsqrt", "create_floor", "create_ceil",
                   "create_erf")
_BF16_CMP_OPS = tuple(f"create_fcmp{p}{c}" for p in "OU" for c in ("LT", "GT", "LE", "GE", "EQ", "NE"))


def _bf16_bits_to_f32(bits):
    """bfloat16 raw ``uint16`` bits -> the same values as fp32 (exact)."""
    import numpy as np

    return (np.asarray(bits).astype(np.uint32) << 16).view(np.float32)


def _f32_to_bf16_bits(values):
    """fp32 values -> bfloat16 raw ``uint16`` bits, rounded to nearest even (what the GPU's bf16 ops and
    ``.to(tl.bfloat16)`` do); NaNs stay (quiet) NaNs with their sign."""
    import numpy as np

    bits = np.array(values, dtype=np.float32).view(np.uint32)  # a copy: contiguous, keeps 0-d shapes
    rounded = ((bits + np.uint32(0x7FFF) + ((bits >> 16) & np.uint32(1))) >> 16).astype(np.uint16)
    nan = ((bits >> 16) | np.uint32(0x0040)).astype(np.uint16)
    return np.where(np.isnan(bits.view(np.float32)), nan, rounded)


def _bf16_in_f32(orig, narrow):
    """``orig`` (an interpreter builder op) with its bfloat16 handle operands widened to fp32; its fp32 result
    narrowed back to bfloat16 bits when ``narrow`` (arithmetic), kept as is otherwise (comparisons)."""
    import triton.language as tl

    def op(self, *args):
        if not any(getattr(a, "dtype", None) == tl.bfloat16 for a in args):
            return orig(self, *args)
        wide = [_compat.interpreter_handle(_bf16_bits_to_f32(a.data), tl.float32)
                if getattr(a, "dtype", None) == tl.bfloat16 else a for a in args]
        out = orig(self, *wide)
        if narrow and out.dtype == tl.float32:
            return _compat.interpreter_handle(_f32_to_bf16_bits(out.data), tl.bfloat16)
        return out

    return op


def _wrap_bf16_arith(orig):
    return _bf16_in_f32(orig, narrow=True)


def _wrap_bf16_cmp(orig):
    return _bf16_in_f32(orig, narrow=False)


def _wrap_bf16_cast(orig):
    """``cast_impl(src, dst_type)`` (int <-> float, fp extend / truncate casts) with bfloat16 on either side done
    through fp32: the stock interpreter truncates fp32 -> bf16 toward zero (the GPU rounds to nearest even) and
    casts the raw bits for bf16 <-> int / fp16 / fp64 (``astype`` on ``uint16``)."""
    import triton.language as tl

    def cast(self, src, dst_type):
        src_bf16 = src.dtype.scalar == tl.bfloat16
        dst_bf16 = dst_type.scalar == tl.bfloat16
        if not (src_bf16 or dst_bf16) or (src_bf16 and dst_bf16):
            return orig(self, src, dst_type)
        if src_bf16:
            wide = _compat.interpreter_handle(_bf16_bits_to_f32(src.data), tl.float32)
            return wide if dst_type.scalar == tl.float32 else orig(self, wide, dst_type)
        wide = src if src.dtype.scalar == tl.float32 else orig(self, src, tl.float32)
        return _compat.interpreter_handle(_f32_to_bf16_bits(wide.data), tl.bfloat16)

    return cast


def _wrap_bf16_sum(orig):
    """``tl.sum`` of bfloat16 (kept bfloat16 by Triton): summed in fp32, rounded once to bfloat16 (the GPU adds in
    bf16 along a tree, so its last bit may differ; the stock interpreter summed the raw bits)."""
    import numpy as np
    import triton.language as tl

    def sum_(self, input):
        if input.dtype != tl.bfloat16:
            return orig(self, input)
        total = np.sum(_bf16_bits_to_f32(input.handle.data), axis=self.axis, keepdims=self.keep_dims,
                       dtype=np.float32)
        return self.to_tensor(_f32_to_bf16_bits(total), tl.bfloat16)

    return sum_


def install_interpreter_bf16_arith_fix() -> None:
    """Make bfloat16 element-wise arithmetic (``x + y``, ``*``, ``/``, ``-``, ``tl.maximum``, ``tl.fma``,
    ``tl.exp``, ...), comparisons and ``tl.sum`` correct under the interpreter.

    Stock Triton 3.6's interpreter stores bfloat16 as raw ``uint16`` bits and runs its numpy ops on those bits, so
    ``x + y`` on bf16 returns NaNs / huge values and every bf16 accumulation or reduction is wrong. The ops listed in
    ``_BF16_ARITH_OPS`` / ``_BF16_CMP_OPS`` and ``tl.sum`` widen bf16 operands to fp32 exactly, compute, and round the
    result to nearest-even bf16; casts to and from bf16 (``.to(tl.bfloat16)``, which the stock interpreter truncates,
    and bf16 <-> integer, which it did on the bits) go through fp32 the same way (``_compat.wrap_interpreter_builder_ops``, ``_compat.wrap_interpreter_reduce_sum``).
    Other dtypes go to the stock op unchanged. Idempotent."""
    _compat.wrap_interpreter_builder_ops(_BF16_ARITH_OPS, _wrap_bf16_arith)
    _compat.wrap_interpreter_builder_ops(_BF16_CMP_OPS, _wrap_bf16_cmp)
    _compat.wrap_interpreter_builder_ops(("cast_impl", ), _wrap_bf16_cast)
    _compat.wrap_interpreter_reduce_sum(_wrap_bf16_sum)


def _fp8_torch_dtypes() -> dict:
    """Triton's fp8 types that torch also has -> the torch dtype (fp8e4b15 has no torch twin)."""
    import torch
    import triton.language as tl

    return {tl.float8e4nv: torch.float8_e4m3fn, tl.float8e5: torch.float8_e5m2,
            tl.float8e4b8: torch.float8_e4m3fnuz, tl.float8e5b16: torch.float8_e5m2fnuz}


def _wrap_fp8_cast(orig):
    """``create_fp_to_fp(src, dst_type, rounding_mode)`` with an fp8 type on either side computed through torch:
    fp8 -> wider exactly; a wider float -> fp8 rounded to nearest even with finite values beyond the format's range
    saturated to its largest value (the GPU's ``cvt.rn.satfinite``; NaN stays NaN). The stock interpreter loses the
    carry of a rounding into the exponent (fp32 127.5 -> e4m3 gave 64, not 128) and flushes e4m3 subnormals."""
    import numpy as np
    import torch
    import triton.language as tl

    fp8 = _fp8_torch_dtypes()

    def to_f32(handle):
        kind = handle.dtype.scalar
        if kind in fp8:
            return torch.from_numpy(np.ascontiguousarray(handle.data).view(np.uint8)).view(fp8[kind]).float().numpy()
        if kind == tl.bfloat16:
            return _bf16_bits_to_f32(handle.data)
        return np.asarray(handle.data).astype(np.float32)

    def conv(self, src, dst_type, rounding_mode=None):
        s, d = src.dtype.scalar, dst_type.scalar
        if (s not in fp8 and d not in fp8) or (d in fp8 and rounding_mode is not None and
                                                 "RTZ" in str(rounding_mode)):
            return orig(self, src, dst_type, rounding_mode)
        vals = to_f32(src)
        if d in fp8:
            t = torch.from_numpy(np.ascontiguousarray(vals, dtype=np.float32))
            top = torch.finfo(fp8[d]).max
            t = torch.where(torch.isnan(t), t, t.clamp(-top, top))
            return _compat.interpreter_handle(t.to(fp8[d]).view(torch.uint8).numpy(), d)
        if d == tl.bfloat16:
            return _compat.interpreter_handle(_f32_to_bf16_bits(vals), tl.bfloat16)
        return _compat.interpreter_handle(vals.astype(_compat.interpreter_np_dtype(d)), d)

    return conv


def install_interpreter_fp8_cast_fix() -> None:
    """Make float <-> fp8 conversions (``.to(tl.float8e4nv)``, ``.to(tl.float32)`` of an e4m3 / e5m2 value) exact
    under the interpreter, as the GPU rounds them (:func:`_wrap_fp8_cast`, through
    ``_compat.wrap_interpreter_builder_ops``). Other conversions go to the stock op unchanged. Idempotent."""
    _compat.wrap_interpreter_builder_ops(("create_fp_to_fp", ), _wrap_fp8_cast)


class BlockTruthValueError(TypeError):
    """Python's ``and`` / ``or`` / ``not`` / ``if`` / ``while`` asked for the truth value of a block tensor."""


_triton_dir = None


def _called_from_triton(frame) -> bool:
    """Whether ``frame`` runs code of the ``triton`` package itself (not a kernel, not triton_dist)."""
    global _triton_dir
    if _triton_dir is None:
        import os

        import triton

        _triton_dir = os.path.dirname(os.path.abspath(triton.__file__)) + os.sep
    return frame.f_code.co_filename.startswith(_triton_dir)


def _tensor_bool(self):
    """``bool(tl.tensor)`` under the interpreter: a scalar's value; a block is refused (see
    :func:`install_interpreter_block_bool_fix`)."""
    import numpy as np

    data = np.asarray(self.handle.data)
    if data.size == 1:
        return bool(data.reshape(-1)[0])
    if _called_from_triton(sys._getframe(1)):
        return True  # Triton's own semantic layer tests operands for presence (`other.handle if other else None`)
    shape = list(getattr(self.type, "shape", data.shape))
    raise BlockTruthValueError(
        f"Python `and` / `or` / `not` (or `if` / `while`) on a block tensor of shape {shape} is not supported by the "
        f"triton_dist simulator: compiled Triton combines `a and b` / `a or b` element-wise (deprecated there) but "
        f"Triton's interpreter would keep only one operand (e.g. one of two masks, so masked stores go out of "
        f"bounds). Write the element-wise form: `a & b` instead of `a and b`, `a | b` instead of `a or b`, `~a` (or "
        f"`a == 0`) instead of `not a`.")


def install_interpreter_block_bool_fix() -> None:
    """Refuse Python ``and`` / ``or`` / ``not`` between block tensors under the interpreter, with a
    :class:`BlockTruthValueError` naming the construct and its fix.

    Python's ``a and b`` calls ``bool(a)``; stock Triton 3.6's interpreter answers ``True`` for every block, so
    ``mask_a and mask_b`` is ``mask_b`` and ``mask_a or mask_b`` is ``mask_a``, where compiled Triton (the AST
    visitor's ``BoolOp``) combines them with ``logical_and`` / ``logical_or`` element-wise: silent out-of-bounds
    stores. The interpreter runs the kernel's Python code, so it cannot see the ``and`` itself; refusing the truth
    value of a block is the faithful option (compiled Triton also refuses a block as an ``if`` / ``while``
    condition). Scalars (1 element) keep their value, so ``if a > 0 and b > 0`` works as compiled; code of the
    ``triton`` package itself (its semantic layer writes ``other.handle if other else None``) still gets the stock
    ``True`` (``_compat.override_interpreter_tensor_attr``). Idempotent."""
    _compat.override_interpreter_tensor_attr("__bool__", _tensor_bool)


def install_interpreter_simt_tile_indexing() -> None:
    """Per-thread tile element reads and writes inside ``simt_exec_region`` (``t[i, k]``, ``t[i, k] = v``; issue 16
    point 4) under the interpreter: ``backends.sim.extra.tile_getitem`` / ``tile_setitem`` on ``tl.tensor`` for the
    duration of each launch (``_compat.extend_interpreter_tensor``). Outside a region, indexing is Triton's own.
    Idempotent."""
    from ...backends.sim import extra

    _compat.extend_interpreter_tensor("__getitem__", extra.tile_getitem)
    _compat.extend_interpreter_tensor("__setitem__", extra.tile_setitem)


_fixes_installed = False
_fixes_lock = threading.Lock()


def install_interpreter_fixes() -> None:
    """Install everything the simulator adds to Triton's interpreter: :func:`install_interpreter_index_fix`,
    :func:`install_interpreter_bf16_dot_fix`, :func:`install_interpreter_bf16_arith_fix`,
    :func:`install_interpreter_fp8_cast_fix` and ``_compat.install_interpreted_jit_calls`` (a plain ``@triton.jit``
    function made while the interpreter was off -- ``tl.cdiv``, a user's helper -- runs when an interpreted kernel
    calls it). Each only changes what the interpreter does; compiled launches are unaffected. Idempotent and cheap
    after the first call (called on every interpreted launch)."""
    global _fixes_installed
    if _fixes_installed:
        return
    with _fixes_lock:
        if _fixes_installed:
            return
        install_interpreter_index_fix()
        install_interpreter_bf16_dot_fix()
        install_interpreter_bf16_arith_fix()
        install_interpreter_fp8_cast_fix()
        install_interpreter_block_bool_fix()
        install_interpreter_simt_tile_indexing()
        _compat.install_interpreted_jit_calls()
        _fixes_installed = True
