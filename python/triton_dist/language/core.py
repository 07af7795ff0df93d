"""The ``triton_dist.language`` (``dl``) ops: declared once here, lowered per target in ``triton_dist.backends``.

Each op checks its arguments (types, strings) and raises a ``ValueError``/``TypeError`` naming the op, the bad value
and the accepted ones; Triton's code generator turns it into a ``CompilationError`` at trace time, before launch.
The lowering is the registered backend's (:class:`triton_dist.language._backend.LanguageLowering`), picked at trace
time from the kernel's compile options (``cuda`` / ``hip``) or the interpreter (``sim``).
"""
from __future__ import annotations

import os

import triton.language as tl

from .. import _compat
from .._compat import unwrap_constexpr as _c
from ._backend import backend_for

__all__ = ["wait", "consume_token", "rank", "num_ranks", "symm_at", "notify", "store_flagged", "load_flagged",
           "prefetch_l2", "extern_call", "bounded_wait_ms", "WAIT_SCOPES", "WAIT_SEMANTICS", "SIG_OPS", "COMM_SCOPES"]

WAIT_SCOPES = ("cta", "gpu", "sys")
WAIT_SEMANTICS = ("acquire", "relaxed")
SIG_OPS = ("set", "add")
COMM_SCOPES = ("gpu", "intra_node", "inter_node")

#: Env var read at COMPILE (trace) time: a timeout in milliseconds for every ``dl.wait`` (unset/0 = off).
BOUNDED_WAIT_ENV = "TRITON_DIST_BOUNDED_WAIT"


def bounded_wait_ms() -> int:
    """The bounded-wait timeout in ms from ``TRITON_DIST_BOUNDED_WAIT`` (0 = off). Read when a kernel is traced,
    so it must be part of the kernel cache key (``triton_dist.jit`` folds it in)."""
    text = os.environ.get(BOUNDED_WAIT_ENV, "").strip()
    if not text:
        return 0
    try:
        value = int(text)
    except ValueError:
        raise ValueError(f"{BOUNDED_WAIT_ENV}={text!r}: expected a timeout in milliseconds (integer >= 0)") from None
    if value < 0:
        raise ValueError(f"{BOUNDED_WAIT_ENV}={text!r}: expected a timeout in milliseconds (integer >= 0)")
    return value


def _choice(op, name, value, accepted):
    value = _c(value)
    if not isinstance(value, str) or value not in accepted:
        raise ValueError(f"dl.{op}: {name}={value!r} is not supported; accepted: {', '.join(map(repr, accepted))}")
    return value


def _is_tensor(x):
    return isinstance(x, tl.tensor)


def _pointee(op, name, ptr):
    """The element dtype of a (scalar or block) pointer ``ptr``; error if ``ptr`` is not a pointer."""
    if not _is_tensor(ptr) or not ptr.dtype.is_ptr():
        shown = getattr(ptr, "type", None) or type(_c(ptr)).__name__
        raise TypeError(f"dl.{op}: {name} must be a pointer (scalar or tensor of pointers), got {shown}")
    return ptr.dtype.element_ty


def _int_arg(op, name, value):
    """A checked integer argument (Python int or integer scalar), returned as-is; the lowerings convert it."""
    v = _c(value)
    if isinstance(v, bool) or not (isinstance(v, int) or (_is_tensor(v) and v.dtype.is_int())):
        raise TypeError(f"dl.{op}: {name} must be an integer (Python int or integer scalar), got "
                        f"{getattr(v, 'type', type(v).__name__)}")
    if _is_tensor(v) and v.type.is_block():
        raise TypeError(f"dl.{op}: {name} must be a scalar, got a block {v.type}")
    return v


@_compat.builtin
def wait(barrierPtrs, numBarriers, scope, semantic, waitValue=1, tag_bits=0, _semantic=None, _generator=None):
    """Spin until each of the ``numBarriers`` consecutive signals at ``barrierPtrs`` equals ``waitValue``.

    Signals are 32- or 64-bit integers (by pointee type). ``scope`` in {"cta", "gpu", "sys"}, ``semantic`` in
    {"acquire", "relaxed"}. Who executes: every thread of the program; the barriers are spread over the threads
    (NVIDIA: thread t polls t, t+ntid, ...; AMD: lane l of every wavefront polls l, l+64, ...), then a CTA /
    workgroup barrier orders every thread of the program after the wait (so call it in CTA-uniform control flow).
    With ``semantic="acquire"`` every load/store after the wait (of any thread of the program) observes what the
    signalling side published before its release. Returns an int32 token (value 0, opaque to the compiler); pass it
    to :func:`consume_token` so that loads cannot be scheduled above the wait.
    Bounded mode (``TRITON_DIST_BOUNDED_WAIT=<ms>`` at compile time): a wait exceeding the bound prints rank,
    program id, address, expected and seen value and traps.
    Tagged signals (``tag_bits=k``, a Python int, 0 < k < signal width - 1): each signal carries ``epoch << k | tag``
    (``tag < 2**k``, epochs only grow) and ``waitValue`` is this call's. The wait ends when a signal's epoch reaches
    ``waitValue``'s (``signal >= waitValue >> k << k``, signed; one compare per poll, as the equality it replaces);
    a signal that then differs from ``waitValue`` (the same epoch with another tag, or a later epoch) means that the
    ranks disagree, reported at once instead of hanging: the GPU prints rank, program, address, this call's epoch
    and tag and the signal's, then traps; the simulator raises :class:`~triton_dist.backends.sim.context.
    SimSignalMismatch` (one line: kernel, rank, both tags). The collective kernels tag their ready signals with the
    call's element count mod 2**24 (``kernels.common``).
    """
    scope = _choice("wait", "scope", scope, WAIT_SCOPES)
    sem = _choice("wait", "semantic", semantic, WAIT_SEMANTICS)
    elem = _pointee("wait", "barrierPtrs", barrierPtrs)
    if barrierPtrs.type.is_block():
        raise TypeError(f"dl.wait: barrierPtrs must be a scalar pointer to the first signal, got {barrierPtrs.type}")
    if not elem.is_int() or elem.primitive_bitwidth not in (32, 64):
        raise TypeError(f"dl.wait: signals must be 32- or 64-bit integers, got pointer to {elem} "
                        f"(accepted pointee types: int32, uint32, int64, uint64)")
    target, backend = backend_for(_semantic)
    n = _int_arg("wait", "numBarriers", numBarriers)
    val = _int_arg("wait", "waitValue", waitValue)
    tag_bits = _c(tag_bits)
    if isinstance(tag_bits, bool) or not isinstance(tag_bits, int) or not 0 <= tag_bits < elem.primitive_bitwidth - 1:
        raise ValueError(f"dl.wait: tag_bits={tag_bits!r}: expected a Python int in [0, "
                         f"{elem.primitive_bitwidth - 2}] (0: plain equality; k: signals are epoch << k | tag)")
    return backend.language.wait(barrierPtrs, n, scope, sem, val, elem.primitive_bitwidth, bounded_wait_ms(),
                                 tag_bits, target=target, _semantic=_semantic, _generator=_generator)


@_compat.builtin
def consume_token(value, token, _semantic=None):
    """Return ``value`` unchanged, but data-dependent on ``token`` (from :func:`wait`).

    Accepts scalar pointers, tensors of pointers, integer/float scalars and tensors, block pointers
    (``tl.make_block_ptr``; advanced by an opaque zero) and tensor descriptors. Zero run-time cost for pointers and
    integers (one register move to materialise the opaque zero); float tensors pay one integer add per element.
    Loads through the result cannot be scheduled above the wait (the pointer depends on the token), and the
    divisibility of pointers is preserved so that loads still vectorise.
    Tensor descriptors are returned UNCHANGED (their handle cannot carry a dependency): to order
    ``desc.load([x, y])`` after a wait, consume the token into the coordinates instead:
    ``x = dl.consume_token(x, token)``.
    """
    token = _c(token)
    if not _is_tensor(token) or not token.dtype.is_int() or token.type.is_block():
        raise TypeError(f"dl.consume_token: token must be the int32 scalar returned by dl.wait, got "
                        f"{getattr(token, 'type', type(token).__name__)}")
    value = _c(value)
    if isinstance(value, _compat.tensor_descriptor_base):
        return value
    is_number = isinstance(value, (int, float)) and not isinstance(value, bool)  # e.g. a descriptor coordinate
    if not _is_tensor(value) and not is_number and not _compat.is_block_pointer(value):
        raise TypeError(f"dl.consume_token: value must be a pointer, tensor, block pointer, tensor descriptor or "
                        f"number, got {type(value).__name__}")
    target, backend = backend_for(_semantic)
    return backend.language.consume_token(value, token, target=target, _semantic=_semantic)


def _check_axis(op, axis):
    axis = _c(axis)
    if axis is None or axis == -1:
        return
    raise ValueError(f"dl.{op}: axis={axis!r}: device meshes not supported yet (only axis=-1, the whole world)")


@_compat.builtin
def rank(axis=-1, _semantic=None):
    """This PE's rank in the world (int32). Executed by every thread (a SHMEM query, no memory ordering)."""
    _check_axis("rank", axis)
    target, backend = backend_for(_semantic)
    return backend.language.rank(target=target, _semantic=_semantic)


@_compat.builtin
def num_ranks(axis=-1, _semantic=None):
    """Number of PEs in the world (int32). Executed by every thread."""
    _check_axis("num_ranks", axis)
    target, backend = backend_for(_semantic)
    return backend.language.num_ranks(target=target, _semantic=_semantic)


@_compat.builtin
def symm_at(ptr, rank, _semantic=None):
    """The address of symmetric ``ptr`` (scalar or tensor of pointers) on PE ``rank``: same pointer type.

    Translates the scalar base once (``nvshmem_ptr`` / ``rocshmem_ptr``; the simulator translates into the peer's
    heap partition) and re-applies the offsets, so loads/stores through the result vectorise like local ones
    (the translated base is assumed 16-byte aligned, as symmetric allocations are). No memory ordering.
    """
    _pointee("symm_at", "ptr", ptr)
    target, backend = backend_for(_semantic)
    r = _int_arg("symm_at", "rank", rank)
    return backend.language.symm_at(ptr, r, target=target, _semantic=_semantic)


@_compat.builtin
def notify(ptr, rank, signal=1, sig_op="set", comm_scope="inter_node", _semantic=None, _generator=None):
    """Raise the 64-bit signal at symmetric ``ptr`` on PE ``rank``: ``set`` stores ``signal``, ``add`` adds it.

    Who executes: ONE thread of the program issues the signal, after a CTA/workgroup barrier.
    ``comm_scope``: "gpu" (``ptr`` on this GPU, gpu-scope release), "intra_node" (peer reached by load/store
    through ``symm_at``, system-scope release), "inter_node" (``nvshmemx_signal_op`` / rocSHMEM equivalent).
    Ordering contract (STRONGER than the reference, which only fences the signalling thread): every global write
    issued by ANY thread of this program before ``notify`` is visible at ``rank`` before ``rank`` can observe the
    signal. Why it holds: the barrier makes all the program's earlier writes happen-before the signalling thread's
    next instruction (barriers synchronise at CTA scope), and the following release fence at gpu/system scope is
    cumulative, so those writes are ordered before the signal store (PTX / HSA release cumulativity); for
    inter_node, nvshmemx_signal_op orders the calling thread's prior writes (its fence is likewise cumulative).
    Tensor-descriptor stores count too: on sm_90+ they are TMA (bulk asynchronous) copies, and every thread first
    waits for the completion of those it issued (``cp.async.bulk.wait_group 0``, writes included), so a tile pushed to
    a peer with ``desc.store`` through a descriptor over ``dl.symm_at(...)`` is visible before the signal.
    Returns nothing.
    """
    sig_op = _choice("notify", "sig_op", sig_op, SIG_OPS)
    comm_scope = _choice("notify", "comm_scope", comm_scope, COMM_SCOPES)
    elem = _pointee("notify", "ptr", ptr)
    if ptr.type.is_block():
        raise TypeError(f"dl.notify: ptr must be a scalar pointer to one signal, got {ptr.type}")
    if not elem.is_int() or elem.primitive_bitwidth != 64:
        raise TypeError(f"dl.notify: signals are 64-bit: ptr must point to int64/uint64, got pointer to {elem} "
                        f"(accepted pointee types: int64, uint64)")
    target, backend = backend_for(_semantic)
    r = _int_arg("notify", "rank", rank)
    sig = _int_arg("notify", "signal", signal)
    return backend.language.notify(ptr, r, sig, sig_op, comm_scope, target=target, _semantic=_semantic,
                                   _generator=_generator)


@_compat.builtin
def extern_call(lib_name, lib_path, args, arg_type_symbol_dict, is_pure, _semantic=None):
    """Call a device-library function ``symbol`` chosen by the argument dtypes from ``arg_type_symbol_dict``
    (``{(tl.int32, ...): ("symbol", ret_dtype)}``); ``ret_dtype`` may be ``tl.void`` / ``None`` (void function).

    Executed by every thread that reaches it (wrap in a SIMT region / predicate to call from one thread).
    Returns the result (a dummy int32 0 for void functions). Under the simulator, the symbol must have been
    registered with :func:`triton_dist.backends.sim.language.register_extern`.
    """
    if not isinstance(_c(arg_type_symbol_dict), dict) or not _c(arg_type_symbol_dict):
        raise TypeError("dl.extern_call: arg_type_symbol_dict must be a non-empty dict "
                        "{(arg dtypes...): ('symbol', return dtype)}")
    target, backend = backend_for(_semantic)
    return backend.language.extern_call(_c(lib_name), _c(lib_path), list(_c(args)), _c(arg_type_symbol_dict),
                                        bool(_c(is_pure)), target=target, _semantic=_semantic)


def _flagged_operands(op, ptr, mask, _semantic):
    """Checks shared by the flagged-word ops: ``ptr`` points to 64-bit integers, ``mask`` (optional) is a boolean
    of ``ptr``'s shape. Returns ``mask`` as given (None or the tensor)."""
    elem = _pointee(op, "ptr", ptr)
    if not elem.is_int() or elem.primitive_bitwidth != 64:
        raise TypeError(f"dl.{op}: flagged words are 64-bit: ptr must point to int64/uint64, got pointer to {elem}")
    mask = _c(mask)
    if mask is not None:
        if not _is_tensor(mask) or mask.dtype != tl.int1:
            raise TypeError(f"dl.{op}: mask must be a boolean tensor (or None), got "
                            f"{getattr(mask, 'type', type(mask).__name__)}")
        if list(mask.shape) != list(ptr.shape):
            raise ValueError(f"dl.{op}: mask has shape {list(mask.shape)}, ptr has {list(ptr.shape)}")
    return mask


@_compat.builtin
def store_flagged(ptr, value, flag, mask=None, _semantic=None, _generator=None):
    """Store flagged words (the low-latency "LL" protocol): ``*ptr = (uint32(flag) << 32) | bits32(value)``.

    ``ptr``: a scalar or block of pointers to int64 (local, or a peer's buffer through :func:`symm_at`); ``value``:
    32-bit integers or floats of ``ptr``'s shape (their bits are stored; pack two 16-bit values per word
    yourself); ``flag``: an int32 scalar, not 0 (a fresh or consumed word holds flag 0); ``mask``: optional
    boolean of ``ptr``'s shape (False: nothing stored there).
    Who executes: each element by the thread that holds it; no barrier. Ordering: every word is ONE single-copy
    atomic 64-bit store at system scope (relaxed): a reader that sees ``flag`` in a word sees that word's
    ``value``, with no fence and no separate signal -- which is the point (a notify costs a barrier, a system
    fence and a second NVLink write). Nothing else is ordered: a word publishes only itself. Pseudocode::

        for i where mask[i]: atomic_store_relaxed_sys(ptr[i], (flag << 32) | bits(value[i]))

    Returns nothing. Pair with :func:`load_flagged` on the reading rank.
    """
    mask = _flagged_operands("store_flagged", ptr, mask, _semantic)
    value = _c(value)
    if not _is_tensor(value) or value.dtype.primitive_bitwidth != 32 or not (value.dtype.is_int() or
                                                                          value.dtype.is_floating()):
        raise TypeError(f"dl.store_flagged: value must be 32-bit integers or floats (int32, uint32, float32), got "
                        f"{getattr(value, 'type', type(value).__name__)}")
    if list(value.shape) != list(ptr.shape):
        raise ValueError(f"dl.store_flagged: value has shape {list(value.shape)}, ptr has {list(ptr.shape)}")
    flag = _int_arg("store_flagged", "flag", flag)
    if isinstance(flag, int) and not (0 < flag < 2**32):
        raise ValueError(f"dl.store_flagged: flag={flag} must be a nonzero 32-bit value (0 marks an empty word)")
    target, backend = backend_for(_semantic)
    return backend.language.store_flagged(ptr, value, flag, mask, target=target, _semantic=_semantic,
                                          _generator=_generator)


@_compat.builtin
def load_flagged(ptr, flag, mask=None, tag_bits=0, _semantic=None, _generator=None):
    """Wait for flagged words and return their values: spin until every word at ``ptr`` (where ``mask``) carries
    ``flag`` in its upper 32 bits, then return the lower 32 bits as int32 (``ptr``'s shape; 0 where masked off).

    The words are read with relaxed system-scope loads, all in flight at once; words not yet flagged are read again
    until they are. Who executes: every thread of the program (the loop runs until the whole block is flagged,
    so call it in program-uniform control flow). Ordering: each returned value is the one stored together with
    ``flag`` by :func:`store_flagged` (single-copy atomicity of the 64-bit word); nothing else is acquired -- other
    memory written by the peer before its store is NOT guaranteed visible (use :func:`wait` for that). Pseudocode::

        while any(mask[i] and (atomic_load_relaxed_sys(ptr[i]) >> 32) != flag): pass
        return [word[i] & 0xffffffff for i]

    Reuse: the words keep ``flag`` after the call. A kernel that reuses a buffer must either clear the words it
    consumed (a plain store of 0 is enough when the next writer starts only after this kernel ended) or change
    ``flag`` on every use (e.g. the call's epoch), so that an old word is never taken for a new one.
    Bounded mode (``TRITON_DIST_BOUNDED_WAIT=<ms>`` at compile time): a wait exceeding the bound prints rank,
    program id, the first unflagged address, expected flag and the word seen, and traps (GPU); the simulator raises
    its wait-timeout error naming this op.
    Tagged flags (``tag_bits=k``, a Python int, 0 < k < 31): ``flag`` is ``epoch << k | tag`` (``tag < 2**k``, the
    epoch bits never all 0). A word is there when its epoch bits equal ``flag``'s (equality: flags wrap, and consumed
    words are cleared); once every word is there, one whose tag differs means that the ranks disagree, reported at
    once as by a tagged :func:`wait` (GPU: "RANKS DISAGREE" with rank, program, address, both epochs and tags, then a
    trap; simulator: ``SimSignalMismatch``). The ``ll`` collectives tag with the element count mod 2**16.
    """
    mask = _flagged_operands("load_flagged", ptr, mask, _semantic)
    flag = _int_arg("load_flagged", "flag", flag)
    if isinstance(flag, int) and not (0 < flag < 2**32):
        raise ValueError(f"dl.load_flagged: flag={flag} must be a nonzero 32-bit value (0 marks an empty word)")
    tag_bits = _c(tag_bits)
    if isinstance(tag_bits, bool) or not isinstance(tag_bits, int) or not 0 <= tag_bits < 31:
        raise ValueError(f"dl.load_flagged: tag_bits={tag_bits!r}: expected a Python int in [0, 30] (0: the whole "
                         f"flag must match; k: flags are epoch << k | tag)")
    target, backend = backend_for(_semantic)
    return backend.language.load_flagged(ptr, flag, mask, bounded_wait_ms(), tag_bits, target=target,
                                         _semantic=_semantic, _generator=_generator)


@_compat.builtin
def prefetch_l2(ptr, num_bytes, mask=None, _semantic=None, _generator=None):
    """Hint that the bytes ``[ptr, ptr + num_bytes)`` will be read soon: start bringing them into the L2 cache
    without waiting, without registers and without a result (a load later through the same addresses may then hit
    in L2). Nothing is guaranteed: the lines may be evicted before they are read, and a target without such an
    instruction ignores the hint.

    ``ptr``: a scalar pointer; ``num_bytes``: an integer scalar (Python int or tensor) below 2**31; ``mask``: an
    optional boolean scalar (False: no prefetch). The range is widened to whole 16-byte units (its start rounded
    down, its end up), so it may touch up to 15 bytes on either side: keep it inside one allocation's 16-byte
    aligned extent (every torch allocation is 512-byte aligned). A range of 0 bytes prefetches nothing.
    Who executes: the program's first thread, once. Several ranges: one call each (a loop). A block of pointers is
    refused: Triton replicates a block's elements over threads, and each copy would issue the same range again
    (measured on an H200: 16 copies per range made a GEMV-bound step 12-73% slower instead of faster).
    Ordering: none; it is not a memory access of the program (it orders nothing and is ordered by nothing).
    Lowering: NVIDIA sm_90 and newer ``cp.async.bulk.prefetch.L2.global [start], size`` (one instruction); older
    NVIDIA, AMD and the simulator: no effect (the arguments are checked all the same). Pseudocode::

        if mask and tid == 0: l2_prefetch_async(align_down(ptr, 16), align_up(ptr + num_bytes, 16))

    Use: stream a range that is read right after a wait (e.g. the weights of a tile whose input another program is
    still writing), so that HBM works during the wait. Prefetch only what L2 can hold until it is read.
    Returns nothing.
    """
    _pointee("prefetch_l2", "ptr", ptr)
    if ptr.type.is_block():
        raise TypeError(f"dl.prefetch_l2: ptr must be a scalar pointer (one range, issued once per program), got "
                        f"{ptr.type}; call it once per range (a block's elements are replicated over threads)")
    num_bytes = _int_arg("prefetch_l2", "num_bytes", num_bytes)
    if isinstance(num_bytes, int) and not 0 <= num_bytes < 2**31:
        raise ValueError(f"dl.prefetch_l2: num_bytes={num_bytes} must be in [0, 2**31)")
    mask = _c(mask)
    if mask is not None and not isinstance(mask, bool):
        if not _is_tensor(mask) or mask.dtype != tl.int1 or mask.type.is_block():
            raise TypeError(f"dl.prefetch_l2: mask must be a boolean scalar or None, got "
                            f"{getattr(mask, 'type', type(mask).__name__)}")
    if mask is False:
        return None
    if mask is True:
        mask = None
    target, backend = backend_for(_semantic)
    return backend.language.prefetch_l2(ptr, num_bytes, mask, target=target, _semantic=_semantic,
                                        _generator=_generator)
