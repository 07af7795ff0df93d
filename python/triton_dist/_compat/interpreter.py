"""Triton's interpreter (``TRITON_INTERPRET=1``) as the simulator uses it: the switch that turns it on, its values
and handles, its C++ memory helpers on raw addresses, its program id, the frame of one interpreted launch, its
device-function calls, and the hook points the simulator's workarounds patch (``tl.tensor`` attributes, ``tl.dot``
operands, element-wise builder ops, ``tl.sum``).

Covers Triton 3.6-3.9 (``triton.runtime.interpreter``: ``GridExecutor``, ``InterpreterBuilder``,
``InterpretedFunction``, ``TensorHandle``, ``ReduceOps``, ``_patch_lang`` / ``_patch_lang_tensor``;
``triton._C.libtriton.interpreter``). What the simulator builds on these (program threads, its workarounds) lives
in ``triton_dist.runtime.sim.interpreter``. Each assumption is tested in ``test/python/test_compat.py`` (section
"interpreter").
"""
from __future__ import annotations

import os

import triton

from .frontend import in_interpreted_program, tensor, tl_core, unwrap_constexpr


def interpret_enabled() -> bool:
    """Whether ``triton.jit`` currently produces interpreted functions (``TRITON_INTERPRET``)."""
    return bool(triton.knobs.runtime.interpret)


def set_interpret(on: bool) -> None:
    """Turn Triton's interpreter on or off for this process: ``TRITON_INTERPRET`` (``"1"`` / ``"0"``, inherited by
    processes started afterwards) and ``triton.knobs.runtime.interpret`` (what ``triton.jit`` reads).

    Assumption: ``triton.knobs.runtime.interpret`` is assignable and overrides the variable."""
    os.environ["TRITON_INTERPRET"] = "1" if on else "0"
    triton.knobs.runtime.interpret = bool(on)


def is_interpreter_semantic(semantic) -> bool:
    """True when ``semantic`` belongs to Triton's interpreter (``TRITON_INTERPRET=1``).

    Assumption: the interpreter's builder is ``triton.runtime.interpreter.InterpreterBuilder``.
    """
    if semantic is None:
        return True
    from triton.runtime.interpreter import InterpreterBuilder

    return isinstance(getattr(semantic, "builder", None), InterpreterBuilder)


def interpreter_semantic():
    """The interpreter's module-level ``TritonSemantic`` (used by sim lowerings called without ``_semantic``).

    Assumption: ``triton.runtime.interpreter.interpreter_semantic`` exists.
    """
    from triton.runtime import interpreter

    return interpreter.interpreter_semantic


def semantic_or_interpreter(semantic):
    """The semantic a builtin builds with: ``semantic`` (the ``_semantic`` Triton passed it), or, when that is None
    (a builtin run by the interpreter), :func:`interpreter_semantic`."""
    return semantic if semantic is not None else interpreter_semantic()


def interpreter_np_dtype(dtype):
    """The numpy dtype the interpreter stores a Triton ``dtype`` as (Triton 3.6:
    ``triton.runtime.interpreter._get_np_dtype``)."""
    from triton.runtime.interpreter import _get_np_dtype

    return _get_np_dtype(dtype)


def interpreter_handle(data, dtype):
    """An interpreter value handle: ``TensorHandle(data, dtype)`` (``data`` a numpy array, ``dtype`` the scalar
    ``tl`` dtype; read back as ``handle.data`` / ``handle.dtype``). The interpreter stores bfloat16 as raw
    ``uint16`` bits (:func:`interpreter_np_dtype`). Assumption: ``triton.runtime.interpreter.TensorHandle``."""
    from triton.runtime.interpreter import TensorHandle

    return TensorHandle(data, dtype)


def interpreter_value(data, dtype):
    """A ``tl.tensor`` of the interpreter holding numpy ``data`` with Triton type ``dtype`` (scalar or block type;
    0-d data becomes shape (1,), as the interpreter keeps scalars).

    Assumption: interpreter values are ``tl.tensor(TensorHandle(np_array, scalar_dtype), type)``."""
    import numpy as np
    from triton.runtime.interpreter import TensorHandle

    arr = np.asarray(data)
    if arr.ndim == 0:
        arr = arr.reshape(1)
    return tensor(TensorHandle(arr, dtype.scalar if hasattr(dtype, "scalar") else dtype), dtype)


def interpreter_data(value):
    """The numpy array behind an interpreter ``tl.tensor`` (or ``np.asarray(value)`` for Python scalars)."""
    import numpy as np

    handle = getattr(value, "handle", None)
    if handle is not None and hasattr(handle, "data"):
        return handle.data
    return np.asarray(unwrap_constexpr(value))


def interp_atomics():
    """Triton's interpreter C++ helpers on raw addresses (``triton._C.libtriton.interpreter``).

    Assumptions: the module exposes ``load(ptrs_u64, mask, other, np_dtype)``, ``store(ptrs_u64, values, mask)``,
    ``atomic_rmw(RMW_OP, ptrs_u64, values, mask, MEM_SEMANTIC)`` returning the old values and
    ``atomic_cas(ptrs_u64, cmp, val, MEM_SEMANTIC)`` returning the old values. Integer 32/64-bit and fp32/fp64
    RMW/CAS are hardware atomics (``std::atomic`` on the address), hence atomic across processes mapping the same
    memory. Caveat (Triton's implementation): fp16/bf16 ``FADD`` and types without a lock-free ``std::atomic`` use a
    process-local mutex, so they are NOT atomic across rank processes.
    """
    from triton._C.libtriton import interpreter as _interp

    return _interp


def _np_u64(addrs):
    import numpy as np

    return np.ascontiguousarray(np.asarray(addrs, dtype=np.uint64).reshape(-1))


def _mem_semantic(m, sem: str):
    sems = {"relaxed": m.MEM_SEMANTIC.RELAXED, "acquire": m.MEM_SEMANTIC.ACQUIRE, "release": m.MEM_SEMANTIC.RELEASE,
            "acq_rel": m.MEM_SEMANTIC.ACQUIRE_RELEASE, "acquire_release": m.MEM_SEMANTIC.ACQUIRE_RELEASE}
    if sem not in sems:
        raise ValueError(f"unknown memory semantic {sem!r}; accepted: {sorted(sems)}")
    return sems[sem]


def raw_atomic_rmw(op: str, addrs, values, sem: str = "acq_rel"):
    """Atomic read-modify-write at raw address(es) (ints or arrays, same length as ``values``); returns old values.

    ``op``: add | fadd | and | or | xor | xchg | max | min | umax | umin; ``sem``: relaxed | acquire | release |
    acq_rel (or acquire_release). The element width is ``values``' numpy dtype. ``fadd`` on fp16/bf16 is atomic
    within one process only (see :func:`interp_atomics`)."""
    import numpy as np

    m = interp_atomics()
    ops = {"add": m.RMW_OP.ADD, "fadd": m.RMW_OP.FADD, "and": m.RMW_OP.AND, "or": m.RMW_OP.OR, "xor": m.RMW_OP.XOR,
           "xchg": m.RMW_OP.XCHG, "max": m.RMW_OP.MAX, "min": m.RMW_OP.MIN, "umax": m.RMW_OP.UMAX,
           "umin": m.RMW_OP.UMIN}
    sems = {sem: _mem_semantic(m, sem)}
    if op not in ops:
        raise ValueError(f"raw_atomic_rmw: unknown op {op!r}; accepted: {sorted(ops)}")
    ptrs = _np_u64(addrs)
    vals = np.ascontiguousarray(np.asarray(values).reshape(-1))
    if vals.size == 1 and ptrs.size > 1:
        vals = np.full(ptrs.shape, vals[0], dtype=vals.dtype)
    mask = np.ones(ptrs.shape, dtype=bool)
    return m.atomic_rmw(ops[op], ptrs, vals, mask, sems[sem])


def raw_atomic_cas(addrs, cmp, val, sem: str = "acq_rel"):
    """Atomic compare-and-swap at raw address(es); returns the old values (width = ``cmp``'s numpy dtype)."""
    import numpy as np

    m = interp_atomics()
    ptrs = _np_u64(addrs)
    c = np.ascontiguousarray(np.asarray(cmp).reshape(-1))
    v = np.ascontiguousarray(np.asarray(val, dtype=c.dtype).reshape(-1))
    return m.atomic_cas(ptrs, c, v, _mem_semantic(m, sem))


def raw_load(addrs, np_dtype):
    """Plain (non-atomic) load of ``np_dtype`` element(s) at raw address(es) through the interpreter's helper."""
    import numpy as np

    m = interp_atomics()
    ptrs = _np_u64(addrs)
    dt = np.dtype(np_dtype)
    return m.load(ptrs, np.ones(ptrs.shape, dtype=bool), np.zeros(ptrs.shape, dtype=dt), dt)


def raw_store(addrs, values) -> None:
    """Plain (non-atomic) store of ``values`` (numpy, its dtype is the width) at raw address(es)."""
    import numpy as np

    ptrs = _np_u64(addrs)
    vals = np.ascontiguousarray(np.asarray(values).reshape(-1))
    interp_atomics().store(ptrs, vals, np.ones(ptrs.shape, dtype=bool))


_grid_tls_installed = False


def install_thread_local_grid_idx():
    """Make the interpreter's program id thread-local, so programs of one launch can run in separate threads.

    Assumptions: the interpreter has ONE module-level ``interpreter_builder`` (an ``InterpreterBuilder``) whose
    ``grid_idx`` attribute (written by ``set_grid_idx``, read by ``create_get_program_id`` / ``create_print``) is
    the only per-program state; builtins are bound to it by ``_patch_lang``. We switch that instance's class to a
    subclass whose ``grid_idx`` is a property backed by ``threading.local`` (a thread that never set it reads the
    last value set by any thread, which keeps the stock sequential executor's behaviour). Idempotent.
    """
    global _grid_tls_installed
    if _grid_tls_installed:
        return
    import threading

    from triton.runtime import interpreter as _it

    builder = _it.interpreter_builder
    base_cls = type(builder)

    class _ThreadLocalGridBuilder(base_cls):
        _tls = threading.local()

        @property
        def grid_idx(self):
            v = getattr(_ThreadLocalGridBuilder._tls, "grid_idx", _MISSING_GRID)
            if v is _MISSING_GRID:
                return self.__dict__.get("_shared_grid_idx")
            return v

        @grid_idx.setter
        def grid_idx(self, value):
            _ThreadLocalGridBuilder._tls.grid_idx = value
            self.__dict__["_shared_grid_idx"] = value

    builder.__dict__["_shared_grid_idx"] = builder.__dict__.pop("grid_idx", None)
    builder.__class__ = _ThreadLocalGridBuilder
    _grid_tls_installed = True


_MISSING_GRID = object()


def interpreted_launch(fn, arg_names, grid, pre_run_hooks, args_dev, kwargs, run_programs) -> None:
    """One launch of the rewritten interpreted kernel ``fn`` exactly as Triton's interpreter performs it, except for
    who runs the programs: the arguments are copied to the host, ``pre_run_hooks`` run, ``tl`` is patched for the
    interpreter, the arguments are bound (tensors become their base pointers, constexprs stay as given), ``grid`` is
    evaluated (a callable gets the bound arguments) and padded to three dimensions, and the grid size is set; then
    ``run_programs(grid, call_args, set_program_id)`` runs the programs -- each one ``set_program_id(x, y, z)``
    followed by ``fn(**call_args)``, from a frame declared with :func:`interpreted_program_runner` -- and finally the
    patch is undone and the arguments are copied back (for CPU tensors a copy of a storage onto itself: a no-op).

    Assumptions (tested in test_compat.py): ``GridExecutor(fn, arg_names, grid, pre_run_hooks)`` computes
    ``constexprs`` and has ``_init_args_hst(args, kwargs) -> (args_hst, kwargs_hst)`` and
    ``_restore_args_dev(args_dev, args_hst, kwargs, kwargs_hst)``; the module-level ``_patch_lang(fn)`` returns a
    scope with ``restore()``, ``_implicit_cvt`` converts an argument, and ``interpreter_builder`` has
    ``set_grid_dim`` / ``set_grid_idx``; CPU tensors reach the interpreter without a copy (programs see each other's
    writes at once).
    """
    import inspect

    from triton.runtime import interpreter as _it

    stock = _it.GridExecutor(fn, arg_names, grid, pre_run_hooks)
    spec = inspect.getfullargspec(fn)
    kwargs = {k: v for k, v in kwargs.items() if k in spec.args}
    args_hst, kwargs_hst = stock._init_args_hst(args_dev, kwargs)
    for hook in pre_run_hooks:
        hook(*args_hst, **kwargs_hst)
    scope = _it._patch_lang(fn)
    try:
        bound = inspect.getcallargs(fn, *args_hst, **kwargs_hst)
        call_args = {name: value if name in stock.constexprs else _it._implicit_cvt(value)
                     for name, value in bound.items()}
        size = tuple(grid(call_args) if callable(grid) else grid)
        if len(size) > 3:
            raise ValueError(f"grid must have at most 3 dimensions, got {size}")
        size = size + (1, ) * (3 - len(size))
        builder = _it.interpreter_builder
        builder.set_grid_dim(*size)
        run_programs(size, call_args, builder.set_grid_idx)
    finally:
        scope.restore()
    stock._restore_args_dev(args_dev, args_hst, kwargs, kwargs_hst)


def interpreter_program_error(message: str, exc: BaseException) -> BaseException:
    """What Triton's interpreter raises for a program that raised ``exc``: ``exc`` itself when
    ``triton.knobs.compilation.front_end_debugging`` is on, else ``InterpreterError(message)`` (to be raised
    ``from exc``). Assumption: ``triton.runtime.interpreter.InterpreterError`` exists."""
    if triton.knobs.compilation.front_end_debugging:
        return exc
    from triton.runtime.interpreter import InterpreterError

    return InterpreterError(message)


def interpreter_error_origin(exc: BaseException) -> BaseException:
    """The exception a program of an interpreted launch actually raised, beneath the interpreter's wrapping.

    Triton's interpreter re-raises an exception ``e`` of a device-function call, and of a program, as
    ``InterpreterError(repr(e)) from e``, so an error inside a device function reaches the launch nested, with
    escaped quotes (``InterpreterError('InterpreterError(\\'...\\')')``). Following ``__cause__`` through the
    ``InterpreterError`` layers gives the original; anything else is returned as is. Assumption (tested in
    test_compat.py): the wrapping is ``InterpreterError`` raised ``from`` the original."""
    from triton.runtime.errors import InterpreterError

    seen = set()
    while isinstance(exc, InterpreterError) and exc.__cause__ is not None and id(exc) not in seen:
        seen.add(id(exc))
        exc = exc.__cause__
    return exc


_interpreted_twins: dict = {}


def _interpreted_twin(fn):
    from triton.runtime.interpreter import InterpretedFunction

    twin = _interpreted_twins.get(fn)
    if twin is None:
        twin = _interpreted_twins.setdefault(fn, InterpretedFunction(fn))
    return twin


_twin_lock = None
_twin_state = {"active": 0, "modules": set(), "scopes": []}


def _language_modules(fn):
    import triton.language as tl

    return {id(v) for v in fn.__globals__.values() if v is tl or v is tl_core}


def _call_interpreted_twin(fn, args, kwargs):
    """A device-function call of ``fn`` by an interpreted program, with the language patches it needs held only while
    some program is inside such a call (see :func:`install_interpreted_jit_calls`)."""
    import threading

    from triton.runtime import interpreter as _it
    from triton.runtime.errors import InterpreterError

    global _twin_lock
    if _twin_lock is None:
        _twin_lock = threading.Lock()
    state = _twin_state
    with _twin_lock:
        mods = _language_modules(fn)
        if not mods <= state["modules"]:
            state["scopes"].append(_it._patch_lang(fn))
            state["modules"] |= mods
        state["active"] += 1
    try:
        rewritten = _interpreted_twin(fn).rewrite()
        try:
            return rewritten(*args, **kwargs)
        except InterpreterError:
            raise
        except Exception as e:
            raise InterpreterError(repr(e)) from e
    finally:
        with _twin_lock:
            state["active"] -= 1
            if state["active"] == 0:
                for scope in reversed(state["scopes"]):
                    scope.restore()
                state["scopes"].clear()
                state["modules"].clear()


def install_interpreted_jit_calls() -> None:
    """From now on, a plain ``JITFunction`` called as a device function from a program of an interpreted launch
    runs through an ``InterpretedFunction`` of the same Python function instead of raising. Such JITFunctions exist
    whenever a function was decorated while the interpreter was off: ``tl.cdiv``, ``tl.sum`` and the rest of
    Triton's standard library when ``triton`` was imported before ``import triton_dist`` turned the interpreter on,
    or a user's ``@triton.jit`` helper defined then. Called anywhere else (outside an interpreted program, and in
    every compiled launch, whose code generator never calls a JITFunction) a JITFunction raises as before.
    Idempotent; thread-safe (programs of a simulator launch run as threads).

    The interpreter's own device-function call patches the callee's ``triton.language`` modules and never undoes
    it (its launch undoes only what the launch patched), so a later compile in the process would trace with
    interpreter builtins (``tl.zeros`` is such a callee: ``ir.value has no attribute dtype``). Here the patches live
    while some program is inside such a call and are undone when the last one leaves (counted under a lock: the
    simulator's programs are threads).

    Assumptions (tested in test_compat.py): ``JITFunction.__call__`` only raises ("Cannot call @triton.jit'd outside
    of the scope of a kernel") and the code generator never calls it; the interpreter's device-function call is
    ``_patch_lang(fn)`` (returning a scope with ``restore()``), then ``InterpretedFunction(fn).rewrite()(*args)``,
    errors wrapped in ``InterpreterError(repr(e))``; :func:`in_interpreted_program` tells a program of an interpreted
    launch."""
    from triton.runtime.jit import JITFunction

    stock = JITFunction.__dict__["__call__"]
    if getattr(stock, "_triton_dist_interpreted_calls", False):
        return

    def __call__(self, *args, **kwargs):
        if in_interpreted_program():
            return _call_interpreted_twin(self.fn, args, kwargs)
        return stock(self, *args, **kwargs)

    __call__._triton_dist_interpreted_calls = True
    __call__.__wrapped__ = stock
    JITFunction.__call__ = __call__


_tensor_overrides: dict = {}


def override_interpreter_tensor_attr(name: str, value) -> None:
    """From now on, whenever Triton's interpreter patches ``tl.tensor`` for a launch (it installs its own operators
    and ``__index__`` on the class for the launch's duration), it installs ``value`` as attribute ``name`` instead
    of its own; the interpreter's own is never installed, not even briefly (programs may run as threads). A second
    call for the same name replaces the first.

    Assumptions (tested in test_compat.py): the interpreter module has ``_patch_lang_tensor(tensor, scope)``, called
    by ``_patch_lang`` through the module global, and sets each attribute with ``scope.set_attr(obj, name, value)``.
    """
    from triton.runtime import interpreter as _it

    _tensor_overrides[name] = value
    orig = _it._patch_lang_tensor
    if getattr(orig, "_triton_dist_overrides", False):
        return

    class _OverridingScope:
        """Forwards to the interpreter's patch scope, substituting the overridden attributes."""

        def __init__(self, scope):
            self._scope = scope

        def set_attr(self, obj, attr, val):
            self._scope.set_attr(obj, attr, _tensor_overrides.get(attr, val))

        def __getattr__(self, attr):
            return getattr(self._scope, attr)

    def patched(tensor, scope):
        orig(tensor, _OverridingScope(scope))

    patched._triton_dist_overrides = True
    _it._patch_lang_tensor = patched


_tensor_extensions: dict = {}
_tensor_extensions_installed = False


def extend_interpreter_tensor(name: str, make) -> None:
    """From now on, whenever Triton's interpreter patches ``tl.tensor`` for a launch, it also sets attribute ``name``
    to ``make(current)``, where ``current`` is the attribute as the interpreter just left it (None when the class
    has none); restored with the interpreter's own patches when the launch ends. A second call for ``name``
    replaces the first.

    Assumptions (tested in test_compat.py): as :func:`override_interpreter_tensor_attr` (``_patch_lang_tensor(tensor,
    scope)`` called through the module global after the builtins of ``tl.tensor`` were wrapped, and the scope's
    ``set_attr`` restores what it set, deleting an attribute the class did not have)."""
    from triton.runtime import interpreter as _it

    global _tensor_extensions_installed
    _tensor_extensions[name] = make
    if _tensor_extensions_installed:
        return
    _tensor_extensions_installed = True
    orig = _it._patch_lang_tensor

    def patched(tensor, scope):
        orig(tensor, scope)
        for attr, mk in list(_tensor_extensions.items()):
            current = getattr(tensor, attr, None)
            # A patch that is never undone (the interpreter's device-function calls, see
            # install_interpreted_jit_calls) leaves our wrapper installed: wrap what IT wrapped, never a wrapper,
            # or every helper call would nest one more level until indexing hits the recursion limit.
            current = getattr(current, "_triton_dist_extends", current)
            wrapper = mk(current)
            if wrapper is not current:
                try:
                    wrapper._triton_dist_extends = current
                except AttributeError:  # not a function: nothing will wrap it
                    pass
            scope.set_attr(tensor, attr, wrapper)

    _it._patch_lang_tensor = patched


def convert_interpreter_dot_operands(convert) -> None:
    """From now on ``tl.dot`` under Triton's interpreter passes its operand handles through ``convert(a, b) -> (a,
    b)`` before the product (handles as :func:`interpreter_handle` makes them). Idempotent for one ``convert``.

    Assumptions (tested in test_compat.py): ``interpreter.InterpreterBuilder.create_dot(self, a, b, d,
    input_precision, max_num_imprecise_acc)`` computes every interpreted ``tl.dot``, on ``TensorHandle`` operands.
    """
    from triton.runtime import interpreter as _it

    cls = _it.InterpreterBuilder
    orig = cls.create_dot
    if getattr(orig, "_triton_dist_convert", None) is convert:
        return

    def create_dot(self, a, b, d, input_precision, max_num_imprecise_acc):
        a, b = convert(a, b)
        return orig(self, a, b, d, input_precision, max_num_imprecise_acc)

    create_dot._triton_dist_convert = convert
    cls.create_dot = create_dot


def wrap_interpreter_builder_ops(names, wrap) -> None:
    """From now on each ``InterpreterBuilder.<name>`` (for ``name`` in ``names``) is ``wrap(original)``: the
    interpreter computes every element-wise op of an interpreted kernel through these methods, with operand handles
    as :func:`interpreter_handle` makes them and non-handle arguments (``propagate_nans``) passed through.
    Idempotent for one ``wrap`` (a name already wrapped by it is left alone).

    Assumptions (tested in test_compat.py): ``triton.runtime.interpreter.InterpreterBuilder`` has these methods as
    class attributes (``create_fadd``, ``create_fcmpOLT``, ``create_fma``, ``create_exp``, ...) and the semantic
    layer calls them through the instance (so a class attribute set later is the one used)."""
    from triton.runtime import interpreter as _it

    cls = _it.InterpreterBuilder
    for name in names:
        orig = getattr(cls, name)
        if getattr(orig, "_triton_dist_wrap", None) is wrap:
            continue
        new = wrap(orig)
        new._triton_dist_wrap = wrap
        setattr(cls, name, new)


def wrap_interpreter_reduce_sum(wrap) -> None:
    """From now on ``tl.sum`` under the interpreter runs ``wrap(original)(reduce_op, input)``; ``reduce_op`` has
    ``.axis``, ``.keep_dims`` and ``.to_tensor(numpy_data, tl_dtype)`` (a ``tl.tensor`` of that data), ``input`` is
    the ``tl.tensor`` reduced. Idempotent for one ``wrap``.

    Assumptions (tested in test_compat.py): ``triton.runtime.interpreter.ReduceOps.sum(self, input)`` computes every
    interpreted ``tl.sum`` (``np.sum`` of the raw handle data), with ``axis`` / ``keep_dims`` / ``to_tensor``."""
    from triton.runtime import interpreter as _it

    cls = _it.ReduceOps
    orig = cls.sum
    if getattr(orig, "_triton_dist_wrap", None) is wrap:
        return
    new = wrap(orig)
    new._triton_dist_wrap = wrap
    cls.sum = new


def interpreted_function(fn, **jit_kwargs):
    """What ``triton.jit(fn, **jit_kwargs)`` returns under the interpreter: ``fn`` run by Triton's interpreter, with
    ``fn`` (the Python function) and ``pre_run_hooks``. Assumption: ``triton.runtime.interpreter.InterpretedFunction``
    takes the Python function and ``triton.jit``'s keyword arguments."""
    from triton.runtime.interpreter import InterpretedFunction

    return InterpretedFunction(fn, **jit_kwargs)


def standard_library_globals() -> dict:
    """The module dict of Triton's standard library of ``@jit`` functions (``tl.cdiv``, ``tl.sum``, ``tl.zeros``,
    ...), which interpreted kernels call as device functions. Assumption: they are defined in
    ``triton.language.standard`` (re-exported by ``triton.language``)."""
    import triton.language.standard as standard

    return vars(standard)


def is_interpreted_function(value) -> bool:
    """Whether ``value`` is an interpreted kernel or device function (see :func:`interpreted_function`)."""
    from triton.runtime.interpreter import InterpretedFunction

    return isinstance(value, InterpretedFunction)
