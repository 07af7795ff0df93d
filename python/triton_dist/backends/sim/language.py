"""CPU-simulator lowerings of the ``triton_dist.language`` ops (Triton interpreter, ``TRITON_INTERPRET=1``).

The interpreter runs each program as one sequential thread of numpy code, so "one thread" and "every thread"
coincide. Memory is the real memory of this process (the symmetric heap is a shared mapping, see
``triton_dist.runtime.sim``); signals are read and written with the interpreter's C++ atomics, which are real
atomics across processes:
- ``wait``: acquire (or relaxed) atomic loads of each signal until it equals the value; after
  ``ctx.wait_timeout_s`` (or the bounded-wait mode's ``TRITON_DIST_BOUNDED_WAIT`` ms) raises ``SimWaitTimeout``
  naming op, rank, kernel, address, expected and seen value, and the variable that set the bound; inside a kernel
  it also says that simulator launches are synchronous (a signal the host sets after the launch is never seen).
- ``notify``: release atomic exchange ("set") / add ("add") on the signal; the target is translated into the
  peer's partition for intra_node / inter_node. Every earlier store of the program is visible before the signal.
- ``store_flagged``: one atomic 64-bit exchange per (masked) word, relaxed -- real single-copy atomicity across the
  rank processes, like the GPU's one 64-bit store.
- ``load_flagged``: spins (as ``wait``, with its timeout and error) on the upper halves of the masked words until
  they all hold the flag, then reads the words atomically and returns their lower halves.
- ``extern_call``: only functions registered with :func:`register_extern` can run.
"""
from __future__ import annotations

from typing import Callable, Dict

import numpy as np
import triton.language as tl

from ... import _compat
from ...language.core import BOUNDED_WAIT_ENV
from . import context as sim_context

_EXTERNS: Dict[str, Callable] = {}

#: default spin timeout when no simulator context is installed (single-process use)


def register_extern(symbol: str, pyfunc: Callable) -> None:
    """Make ``dl.extern_call`` to ``symbol`` runnable under the simulator: ``pyfunc(*numpy_args)`` gets the numpy
    arrays of the arguments (pointers as uint64 addresses) and returns a numpy array / scalar (or None for void)."""
    if not callable(pyfunc):
        raise TypeError(f"register_extern({symbol!r}, ...): pyfunc must be callable")
    _EXTERNS[symbol] = pyfunc


def unregister_extern(symbol: str) -> None:
    _EXTERNS.pop(symbol, None)


def _ctx(required: bool, op: str):
    if sim_context.is_active():
        return sim_context.current()
    if required:
        sim_context.current()  # raises the runtime's clear "not initialised" error
    return None


def _scalar(value) -> int:
    arr = np.asarray(_compat.interpreter_data(value)).reshape(-1)
    if arr.size != 1:
        raise TypeError(f"expected a scalar, got an array of shape {arr.shape}")
    return int(arr[0])


def _np_int(bits: int):
    return np.int64 if bits == 64 else np.int32


def bounded_wait_timeout(bound_ms: int) -> dict:
    """The ``spin_wait`` keywords of the bounded-wait mode: with a bound (``TRITON_DIST_BOUNDED_WAIT``, ms) the wait
    times out after it and the message names that variable; without one (0), the context's own timeout applies."""
    if not bound_ms:
        return {}
    return {"timeout_s": bound_ms / 1000.0,
            "timeout_hint": f"The bound is {BOUNDED_WAIT_ENV}={int(bound_ms)} (milliseconds, read when the kernel is "
                            f"compiled): raise or unset it to wait longer."}


def wait(ptr, n, scope, sem, value, bits, bound_ms, tag_bits, *, target, _semantic, _generator):
    ctx = _ctx(False, "wait") or sim_context.LocalContext()
    base, count, expected = _scalar(ptr), _scalar(n), _scalar(value)
    if bits == 32:
        expected = int(np.array(expected).astype(np.int64).astype(np.int32))  # wrap like the GPU compare
    step = bits // 8
    if count > 0:  # the context's waiter: acquire reads, names the heap slot on timeout, stops on an abort
        addrs = base + step * np.arange(count, dtype=np.uint64)
        op = f"dl.wait(scope={scope}, semantic={sem}{f', tag_bits={tag_bits}' if tag_bits else ''})"
        if not tag_bits:
            ctx.spin_wait(addrs, expected, nbytes=step, cmp="eq", op=op, signed=True, **bounded_wait_timeout(bound_ms))
        else:  # wait for the epoch, then the whole value must match (same epoch, same tag)
            seen = ctx.spin_wait(addrs, expected >> tag_bits << tag_bits, nbytes=step, cmp="ge", op=op, signed=True,
                                 **bounded_wait_timeout(bound_ms))
            bad = np.nonzero(np.asarray(seen).reshape(-1) != expected)[0]
            if bad.size:
                raise signal_mismatch(ctx, op, int(addrs[bad[0]]), expected, int(seen.reshape(-1)[bad[0]]), tag_bits)
    return _compat.interpreter_value(np.array([0], dtype=np.int32), tl.int32)


def signal_mismatch(ctx, op: str, addr: int, expected: int, seen: int, tag_bits: int):
    """The :class:`~triton_dist.backends.sim.context.SimSignalMismatch` of a tagged wait that saw ``seen`` where it
    waits for ``expected``: one line naming the kernel, this rank, both calls' epoch and tag, and the fix."""
    mask = (1 << tag_bits) - 1
    fields = dict(rank=ctx.rank, kernel=_compat.interpreted_kernel_name(), tag_bits=tag_bits,
                  expected_epoch=expected >> tag_bits, expected_tag=expected & mask, seen_epoch=seen >> tag_bits,
                  seen_tag=seen & mask)
    where = f" in kernel {fields['kernel']}" if fields["kernel"] else ""
    if fields["seen_epoch"] == fields["expected_epoch"]:
        peer = f"the peer's signal for the same call carries tag {fields['seen_tag']}"
    else:
        peer = (f"the peer's signal is already at call #{fields['seen_epoch']} (tag {fields['seen_tag']}): the ranks "
                f"made different numbers of calls")
    return sim_context.SimSignalMismatch(
        f"[triton_dist sim] rank {ctx.rank}: ranks disagree{where}: {op} at {ctx.describe_addr(addr)} waits for call "
        f"#{fields['expected_epoch']} with tag {fields['expected_tag']} (this rank's; collectives tag with the element "
        f"count mod 2**{tag_bits}), {peer}; every rank must make the same calls with the same shapes", **fields)


def consume_token(value, token, *, target, _semantic):
    return value  # the interpreter executes in program order


def rank(*, target, _semantic):
    return _compat.interpreter_value(np.array([_ctx(True, "rank").rank], dtype=np.int32), tl.int32)


def num_ranks(*, target, _semantic):
    return _compat.interpreter_value(np.array([_ctx(True, "num_ranks").world_size], dtype=np.int32), tl.int32)


def _check_peer(op, ctx, peer):
    if not 0 <= peer < ctx.world_size:
        raise ValueError(f"dl.{op}: rank {peer} out of range (world size {ctx.world_size})")


def _to_peer(ctx, addrs: np.ndarray, peer: int, call) -> np.ndarray:
    """``addrs`` (uint64, in this rank's heap partition) at the same offsets in ``peer``'s partition. An address
    off this rank's partition raises one line naming the user's call (``call(first_bad_address_text)``), the rank
    and the fix, instead of the translation's own error."""
    mine = ctx.base(ctx.rank)
    bad = (addrs < np.uint64(mine)) | (addrs >= np.uint64(mine + ctx.heap_size))
    if bad.any():
        raise ValueError(f"[triton_dist sim] rank {ctx.rank}: {call(ctx.describe_addr(int(addrs[bad].reshape(-1)[0])))}"
                         f": ptr is not a symmetric buffer of rank {ctx.rank}; allocate it with triton_dist's "
                         f"symmetric allocator (triton_dist.utils.nvshmem_create_tensor)")
    return np.asarray(ctx.translate(addrs, peer), dtype=np.uint64)


def symm_at(ptr, rank, *, target, _semantic):
    ctx = _ctx(True, "symm_at")
    peer = _scalar(rank)
    _check_peer("symm_at", ctx, peer)
    data = np.asarray(_compat.interpreter_data(ptr)).astype(np.uint64)
    out = _to_peer(ctx, data, peer, lambda p: f"dl.symm_at(ptr={p}, rank={peer})").reshape(data.shape)
    return _compat.interpreter_value(out, ptr.type)


def notify(ptr, rank, signal, sig_op, comm_scope, *, target, _semantic, _generator):
    ctx = _ctx(comm_scope != "gpu", "notify")
    addr = _scalar(ptr)
    if comm_scope != "gpu":
        peer = _scalar(rank)
        _check_peer("notify", ctx, peer)

        def call(p):
            return (f"dl.notify(ptr={p}, rank={peer}, signal={_scalar(signal)}, sig_op={sig_op!r}, "
                    f"comm_scope={comm_scope!r})")

        addr = int(_to_peer(ctx, np.array([addr], dtype=np.uint64), peer, call).reshape(-1)[0])
    mem = _compat.interp_atomics()
    op = mem.RMW_OP.XCHG if sig_op == "set" else mem.RMW_OP.ADD
    sig = np.array([_scalar(signal)], dtype=np.uint64).astype(np.int64)
    mem.atomic_rmw(op, np.array([addr], dtype=np.uint64), sig, np.ones(1, dtype=bool),
                   mem.MEM_SEMANTIC.ACQUIRE_RELEASE)
    return None


def extern_call(lib_name, lib_path, args, arg_type_symbol_dict, is_pure, *, target, _semantic):
    symbols = sorted({v[0] for v in arg_type_symbol_dict.values()})
    missing = [s for s in symbols if s not in _EXTERNS]
    if missing:
        raise RuntimeError(f"dl.extern_call: {', '.join(missing)} (from {lib_name}) cannot run under the simulator: "
                           f"device-library calls have no CPU implementation unless one is registered with "
                           f"triton_dist.backends.sim.language.register_extern(symbol, pyfunc)")
    dtypes = tuple(a.dtype if isinstance(a, tl.tensor) else _infer_dtype(a) for a in args)
    if dtypes in arg_type_symbol_dict:
        symbol, ret = arg_type_symbol_dict[dtypes]
    elif len(arg_type_symbol_dict) == 1:
        symbol, ret = next(iter(arg_type_symbol_dict.values()))
    else:
        raise TypeError(f"dl.extern_call: no entry for argument dtypes {dtypes} in arg_type_symbol_dict")
    res = _EXTERNS[symbol](*[np.asarray(_compat.interpreter_data(a)) for a in args])
    shapes = [a.type.shape for a in args if isinstance(a, tl.tensor) and a.type.is_block()]
    if ret is None or ret == tl.void or res is None:
        return _compat.interpreter_value(np.array([0], dtype=np.int32), tl.int32)
    arr = np.asarray(res).astype(_np_dtype(ret))
    ty = tl.block_type(ret, shapes[0]) if shapes else ret
    return _compat.interpreter_value(arr, ty)


def _infer_dtype(v):
    v = _compat.unwrap_constexpr(v)
    if isinstance(v, bool):
        return tl.int1
    if isinstance(v, int):
        return tl.int32 if -2**31 <= v < 2**31 else tl.int64
    if isinstance(v, float):
        return tl.float32
    raise TypeError(f"dl.extern_call: unsupported argument {v!r}")


def _np_dtype(dt):
    return {"int1": np.bool_, "int8": np.int8, "int16": np.int16, "int32": np.int32, "int64": np.int64,
            "uint8": np.uint8, "uint16": np.uint16, "uint32": np.uint32, "uint64": np.uint64,
            "fp16": np.float16, "fp32": np.float32, "fp64": np.float64}.get(dt.name, np.float32)


def _flagged_addrs(ptr, mask):
    """The (masked) word addresses of a flagged-word op as a flat uint64 array, and the block shape."""
    addrs = np.asarray(_compat.interpreter_data(ptr)).astype(np.uint64)
    shape = addrs.shape
    flat = addrs.reshape(-1)
    on = np.ones(flat.shape, dtype=bool) if mask is None else \
        np.asarray(_compat.interpreter_data(mask)).astype(bool).reshape(-1)
    return flat, on, shape


def store_flagged(ptr, value, flag, mask, *, target, _semantic, _generator):
    flat, on, _ = _flagged_addrs(ptr, mask)
    if not on.any():
        return None
    bits = np.ascontiguousarray(np.asarray(_compat.interpreter_data(value)).reshape(-1)).view(np.uint32)
    bits = np.broadcast_to(bits, flat.shape)
    words = (np.uint64(_scalar(flag) & 0xFFFFFFFF) << np.uint64(32)) | bits.astype(np.uint64)
    _compat.raw_atomic_rmw("xchg", flat[on], words[on], "relaxed")
    return None


def load_flagged(ptr, flag, mask, bound_ms, tag_bits, *, target, _semantic, _generator):
    ctx = _ctx(False, "load_flagged") or sim_context.LocalContext()
    flat, on, shape = _flagged_addrs(ptr, mask)
    want = _scalar(flag) & 0xFFFFFFFF
    out = np.zeros(flat.shape, dtype=np.uint32)
    if on.any():
        # the flag is the word's upper half: on a little-endian host, the 4 bytes at address + 4
        faddrs = flat[on] + np.uint64(4)
        op = f"dl.load_flagged(flag={want}{f', tag_bits={tag_bits}' if tag_bits else ''})"
        if not tag_bits:
            ctx.spin_wait(faddrs, np.uint32(want), nbytes=4, cmp="eq", op=op, **bounded_wait_timeout(bound_ms))
        else:  # wait for the epoch bits (equality: flags wrap); a word of this epoch with another tag ends it at once
            seen = [None]

            def arrived():
                seen[0] = ctx.atomic_load(faddrs, np.uint32)
                there = (seen[0] >> tag_bits) == (want >> tag_bits)
                return bool(np.all(there) or np.any(there & (seen[0] != want)))

            def describe():
                i = int(np.nonzero((seen[0] >> tag_bits) != (want >> tag_bits))[0][0])
                return (f"flag at {ctx.describe_addr(int(faddrs[i]) - 4)}: expected epoch {want >> tag_bits}, last "
                        f"seen flag {int(seen[0][i])} (epoch {int(seen[0][i]) >> tag_bits})")

            ctx.spin_until(arrived, describe, op=op, **bounded_wait_timeout(bound_ms))
            # name a word of this epoch with another tag: others may simply not have arrived yet (the peer is
            # still writing them), and naming one of those would report the previous call's flag instead
            same_epoch = (seen[0] >> tag_bits) == (want >> tag_bits)
            bad = np.nonzero(same_epoch & (seen[0] != want))[0]
            if bad.size:
                raise signal_mismatch(ctx, op, int(faddrs[bad[0]]) - 4, want, int(seen[0][bad[0]]), tag_bits)
        words = ctx.atomic_load(flat[on], np.uint64)
        out[on] = (np.asarray(words, dtype=np.uint64) & np.uint64(0xFFFFFFFF)).astype(np.uint32)
    res = out.view(np.int32).reshape(shape)
    ty = tl.block_type(tl.int32, list(shape)) if ptr.type.is_block() else tl.int32
    return _compat.interpreter_value(res, ty)


def prefetch_l2(ptr, num_bytes, mask, *, target, _semantic, _generator):
    """``dl.prefetch_l2``: a cache hint; the simulator has no cache (the declaration checked the arguments)."""
    return None
