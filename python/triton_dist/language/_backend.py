"""The backend contract: what a target implements for the ops this layer declares, and the registry that finds it.

Four areas, one :class:`typing.Protocol` each:

* :class:`LanguageLowering` -- the ``dl.*`` ops (``triton_dist.language.core``);
* :class:`ExtraLowering` -- ``language_extra`` and the SIMT region (``triton_dist.language.extra.language_extra``,
  ``triton_dist.language.simt``);
* :class:`LibshmemLowering` -- ``libshmem_device`` (``triton_dist.language.extra.libshmem_device``);
* :class:`ProfilerLowering` -- the profiler's clock reads (``triton_dist.language.profiler``).

(The host side has its own contract, ``triton_dist.runtime.backend.ShmemBackend``.)

A target bundles one implementation of each area in a :class:`Backend` and registers it under the name its
:class:`~triton_dist.target.Target` carries (``Target.backend``: ``"cuda"``, ``"hip"``, ``"sim"``) with
:func:`register_backend`. The declarations find it at trace time with :func:`backend_for`, which imports the package
``triton_dist.target.BACKEND_PACKAGES`` names for the target the first time it is needed (the package registers
itself when imported): this layer names no backend.

Calling convention, the same in every area: the operands come positionally, already validated by the declaration
(types and pointee widths checked, option strings normalised, ``libshmem_device`` constants checked against the
tables of ``triton_dist.language._libshmem``, integers range-checked but NOT converted: Python ints and integer
scalars arrive as the caller gave them); then keyword-only ``target`` (the :class:`Target` being traced),
``_semantic`` (Triton's semantic; ``None`` under the interpreter) and, for the ops that may emit ``@jit`` helpers,
``_generator``. An implementation may be a module of functions or an object with methods; :func:`register_backend`
checks that every method of every area accepts exactly that call.

What each op means (arguments, result, who executes it, memory ordering) is stated once, in the docstring of its
public declaration; a method here names the declaration it lowers.
"""
from __future__ import annotations

import importlib
import inspect
from dataclasses import dataclass
from typing import Dict, List, Protocol, Tuple

from ..target import BACKEND_PACKAGES, Target, target_of

__all__ = ["LanguageLowering", "ExtraLowering", "LibshmemLowering", "ProfilerLowering", "Backend", "AREAS",
           "register_backend", "backend_for", "registered_backends", "contract_violations"]


class LanguageLowering(Protocol):
    """Lowerings of the ``triton_dist.language`` (``dl``) ops, one method per op of the same name."""

    def wait(self, ptr, n, scope, semantic, value, bits, bound_ms, tag_bits, *, target, _semantic, _generator):
        """``dl.wait``: ``bits`` is the signals' width (32 / 64), ``bound_ms`` the bounded-wait timeout (0: none),
        ``tag_bits`` the tagged-signal mode (0: equality; k: wait for ``value``'s epoch, report a differing signal).
        Returns the int32 token."""

    def consume_token(self, value, token, *, target, _semantic):
        """``dl.consume_token`` for a pointer, tensor, block pointer or Python number ``value`` (tensor descriptors
        never reach the lowering)."""

    def rank(self, *, target, _semantic):
        """``dl.rank``: int32."""

    def num_ranks(self, *, target, _semantic):
        """``dl.num_ranks``: int32."""

    def symm_at(self, ptr, rank, *, target, _semantic):
        """``dl.symm_at``: ``ptr``'s address on PE ``rank``, same type as ``ptr``."""

    def notify(self, ptr, rank, signal, sig_op, comm_scope, *, target, _semantic, _generator):
        """``dl.notify``; returns None."""

    def extern_call(self, lib_name, lib_path, args, arg_type_symbol_dict, is_pure, *, target, _semantic):
        """``dl.extern_call``: the call's result (int32 0 for a void function)."""

    def store_flagged(self, ptr, value, flag, mask, *, target, _semantic, _generator):
        """``dl.store_flagged``: ``value`` is a 32-bit tensor of ``ptr``'s shape, ``mask`` None or a boolean of that
        shape; returns None."""

    def load_flagged(self, ptr, flag, mask, bound_ms, tag_bits, *, target, _semantic, _generator):
        """``dl.load_flagged``: int32 values of ``ptr``'s shape; ``bound_ms`` and ``tag_bits`` (a Python int) as
        for :meth:`wait`."""

    def prefetch_l2(self, ptr, num_bytes, mask, *, target, _semantic, _generator):
        """``dl.prefetch_l2``: ``ptr`` a scalar pointer, ``num_bytes`` a Python int in [0, 2**31) or an integer
        scalar tensor, ``mask`` None or a boolean scalar tensor; returns None."""


class ExtraLowering(Protocol):
    """Lowerings of ``language_extra`` (one method per function; ``__syncthreads`` is ``syncthreads``) and of the
    target-specific steps of ``simt_exec_region`` and ``extract``. ``elem`` is the pointee dtype; ``scope`` is
    ``"cta"`` / ``"gpu"`` / ``"sys"`` and ``semantic`` one of the canonical names the declaration accepts."""

    def tid(self, axis, *, target, _semantic):
        """int32 thread index along ``axis``."""

    def ntid(self, axis, *, target, _semantic):
        """int32 thread count along ``axis``."""

    def num_warps(self, *, target, _semantic) -> int:
        """Python int: warps of the program being compiled."""

    def num_threads(self, *, target, _semantic) -> int:
        """Python int: threads of the program being compiled."""

    def syncthreads(self, *, target, _semantic):
        """Barrier of every thread of the program."""

    def ld(self, ptr, elem, scope, semantic, *, target, _semantic):
        """The loaded value, of dtype ``elem``."""

    def st(self, ptr, val, elem, scope, semantic, *, target, _semantic):
        """Store ``val`` (already of dtype ``elem``)."""

    def atomic_add(self, ptr, val, elem, scope, semantic, *, target, _semantic):
        """The old value."""

    def atomic_cas(self, ptr, cmp_val, target_val, elem, scope, semantic, *, target, _semantic):
        """The old value."""

    def ld_vector(self, ptr, elem, n, scope, semantic, *, target, _semantic):
        """A ``vector`` of ``n`` elements of dtype ``elem``."""

    def st_vector(self, ptr, vec, elem, scope, semantic, *, target, _semantic):
        """Store the ``vector`` ``vec``."""

    def pack(self, src, dst_type, *, target, _semantic):
        """The bits of ``vector`` ``src`` as one ``dst_type`` scalar (widths already checked)."""

    def unpack(self, src, dst_type, *, target, _semantic):
        """Scalar ``src`` as a ``vector`` of ``dst_type`` (widths already checked)."""

    def enter_simt_region(self, values, *, target, _semantic):
        """``simt_exec_region.__enter__``: ``(what the with statement binds, undo callable or None)`` for the
        ``(tid, num_threads)`` pair ``values``; the undo runs at ``__exit__``."""

    def extract_element(self, input, flat_index, shape, *, target, _semantic, _generator):
        """``extract`` from block tensor ``input`` (of ``shape``): the element at row-major ``flat_index`` (an int32
        scalar, the same in every thread), as a scalar of ``input``'s dtype."""


class LibshmemLowering(Protocol):
    """Lowerings of ``libshmem_device``. Pointers arrive as scalar typed pointers or int64 addresses; integers
    (bytes, PE numbers, signal values) as Python ints or integer scalars of any width, for the lowering to convert to
    the C type (``size_t`` / ``int`` / ``uint64_t``, see ``triton_dist.language._libshmem.SIGNATURES``);
    ``team`` / ``sig_op`` / ``cmp`` as a value of the NVSHMEM tables (Python int) or an integer scalar (run-time)."""

    def my_pe(self, *, target, _semantic, _generator):
        """int32."""

    def n_pes(self, *, target, _semantic, _generator):
        """int32."""

    def team_my_pe(self, team, *, target, _semantic, _generator):
        """int32."""

    def team_n_pes(self, team, *, target, _semantic, _generator):
        """int32."""

    def remote_ptr(self, local_ptr, pe, *, target, _semantic, _generator):
        """``local_ptr``'s address on ``pe`` (0 if unreachable), same type as ``local_ptr``."""

    def remote_mc_ptr(self, team, ptr, *, target, _semantic, _generator):
        """The multicast address of ``ptr`` for ``team`` (0 where there is none), same type as ``ptr``."""

    def team_translate_pe(self, src_team, pe, dest_team, *, target, _semantic, _generator):
        """int32: the number in ``dest_team`` of ``src_team``'s PE ``pe``, -1 when it is not a member."""

    def sync(self, name, scope, team, *, target, _semantic, _generator):
        """The barriers / syncs (``barrier_all*``, ``barrier*``, ``sync_all*``, ``team_sync*``) and ``quiet`` /
        ``fence`` (``name``); ``scope`` (``"thread"`` / ``"warp"`` / ``"block"``) is the suffix's. Every thread that
        reaches the call executes it (``triton_dist.language._libshmem.lower``); nothing is added around it.
        ``team`` is None for the functions that take none. Returns None."""

    def rma(self, name, kind, scope, blocking, dest, source, nbytes, pe, *, target, _semantic, _generator):
        """The ``getmem*`` / ``putmem*`` function ``name``: ``kind`` ``"get"`` / ``"put"``, ``scope`` as for
        :meth:`sync`, ``blocking`` False for ``*_nbi``. Returns None."""

    def p(self, name, dest, value, pe, *, target, _semantic, _generator):
        """Typed scalar put ``<type>_p`` (``name``; the type's Triton dtype is
        ``triton_dist.language._libshmem.SCALAR_TYPES[type]``). Returns None."""

    def g(self, name, source, pe, *, target, _semantic, _generator):
        """Typed scalar get ``<type>_g``: the value, of the type's Triton dtype."""

    def putmem_signal(self, name, blocking, dest, source, nelems, elem_bytes, sig_addr, signal, sig_op, pe, *,
                      target, _semantic, _generator):
        """``putmem_signal[_nbi][_warp|_block]`` (``name``, ``blocking``) of ``nelems * elem_bytes`` bytes
        (``elem_bytes`` a Python int). Returns None."""

    def signal_op(self, sig_addr, signal, sig_op, pe, *, target, _semantic, _generator):
        """Returns None."""

    def signal_wait_until(self, sig_addr, cmp, cmp_val, *, target, _semantic, _generator):
        """The uint64 value that satisfied the comparison."""

    def broadcast(self, name, team, dest, source, nelems, elem_bytes, pe_root, *, target, _semantic, _generator):
        """``broadcastmem[_warp|_block]`` (``name``) of ``nelems * elem_bytes`` bytes. int32 0 on success."""

    def fcollect(self, name, team, dest, source, nelems, elem_bytes, *, target, _semantic, _generator):
        """``fcollectmem[_warp|_block]`` (``name``) of ``nelems * elem_bytes`` bytes per PE. int32 0 on success."""


class ProfilerLowering(Protocol):
    """The device clock and processor id of ``triton_dist.language.profiler``."""

    def timestamp(self, *, target, _semantic):
        """int64 scalar: the device clock now, in ticks of :meth:`ticks_per_second`; not pure."""

    def sm_id(self, *, target, _semantic):
        """int32 scalar: the SM / CU running the program."""

    def ticks_per_second(self, *, target, _semantic) -> int:
        """Python int: the frequency of :meth:`timestamp`'s clock."""


#: area -> its protocol (the fields of :class:`Backend`)
AREAS = {"language": LanguageLowering, "extra": ExtraLowering, "libshmem": LibshmemLowering,
         "profiler": ProfilerLowering}


@dataclass(frozen=True)
class Backend:
    """Everything a target implements at trace time: one implementation per area of the contract."""

    name: str  # the package under triton_dist.backends (for messages)
    language: LanguageLowering
    extra: ExtraLowering
    libshmem: LibshmemLowering
    profiler: ProfilerLowering


def _protocol_methods(protocol) -> Dict[str, inspect.Signature]:
    return {name: inspect.signature(fn) for name, fn in vars(protocol).items()
            if callable(fn) and not name.startswith("_")}


def _call_shape(sig: inspect.Signature, drop_self: bool) -> Tuple[int, Tuple[str, ...]]:
    params = list(sig.parameters.values())[1 if drop_self else 0:]
    positional = sum(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) for p in params)
    keywords = tuple(sorted(p.name for p in params if p.kind == p.KEYWORD_ONLY))
    return positional, keywords


def contract_violations(backend: Backend) -> List[str]:
    """What ``backend`` lacks to fulfil the contract: one line per missing method, and per method whose call shape
    differs from the protocol's (number of positional operands, names of the keyword-only arguments)."""
    problems = []
    for area, protocol in AREAS.items():
        impl = getattr(backend, area)
        for name, expected in _protocol_methods(protocol).items():
            fn = getattr(impl, name, None)
            if not callable(fn):
                problems.append(f"{backend.name}.{area}: no {name}")
                continue
            want, got = _call_shape(expected, True), _call_shape(inspect.signature(fn), False)
            if want != got:
                problems.append(f"{backend.name}.{area}.{name}: takes {got[0]} positional operands and keywords "
                                f"{', '.join(got[1]) or '(none)'}; the contract says {want[0]} and "
                                f"{', '.join(want[1])}")
    return problems


_BACKENDS: Dict[str, Backend] = {}


def register_backend(target_backend: str, backend: Backend) -> None:
    """Make ``backend`` the lowering of every kernel traced for a target whose ``Target.backend`` is
    ``target_backend``. Raises TypeError, listing what is missing, if ``backend`` does not fulfil the contract."""
    problems = contract_violations(backend)
    if problems:
        raise TypeError(f"backend {backend.name!r} does not implement the triton_dist backend contract:\n  "
                        + "\n  ".join(problems))
    _BACKENDS[target_backend] = backend


def registered_backends() -> Dict[str, Backend]:
    """``{Target.backend name: Backend}`` of every registered backend (a copy)."""
    return dict(_BACKENDS)


def backend_for(_semantic) -> Tuple[Target, Backend]:
    """``(target, backend)`` for the kernel being traced (``_semantic`` as the builtin received it). The first call
    for a target imports its package (``triton_dist.target.BACKEND_PACKAGES``), which registers the backend."""
    target = target_of(_semantic)
    backend = _BACKENDS.get(target.backend)
    if backend is None:
        package = BACKEND_PACKAGES.get(target.backend)
        if package is not None:
            importlib.import_module(package)
        backend = _BACKENDS.get(target.backend)
    if backend is None:
        raise RuntimeError(f"triton_dist: no backend is registered for target {target} (registered: "
                           f"{', '.join(sorted(_BACKENDS)) or 'none'}; triton_dist.target.BACKEND_PACKAGES names "
                           f"{package or 'no package'} for it)")
    return target, backend
