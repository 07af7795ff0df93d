"""The ``libshmem_device`` functions as the GPU targets call them: each C signature declared once, the constants'
values (stated once here for every target), and the lowering steps the NVIDIA and AMD tables share. Symbol names
live in ``triton_dist.backends.{nvidia,amd}.libshmem``.

Pointers pass as their 64-bit generic address (``i64``; pointer results come back as ``i64``), ``size_t`` is ``i64``,
``int`` and team handles are ``i32``, ``uint64_t`` is ``u64``; a void result is ``None``."""
from __future__ import annotations

import triton.language as tl

from .. import _compat
from ._extern import Extern

# ----------------------------------------------------------------------------------------------------------------
# constants: NVSHMEM 3.4.5's values (headers under nvidia/nvshmem/include). They are the API's values on every target:
# ``libshmem_device`` exports them as its ``NVSHMEM_*`` constexprs and checks arguments against these tables, the
# NVIDIA lowering passes them through, the simulator reads them (``triton_dist.backends.sim.libshmem``) and the AMD
# lowering translates them to rocSHMEM's enums (``triton_dist.backends.amd.libshmem``).
# ----------------------------------------------------------------------------------------------------------------
#: value -> name, enum nvshmemi_cmp_type (device_host_transport/nvshmem_constants.h; note LE = 3 comes before LT = 4)
CMP_NAMES = {0: "eq", 1: "ne", 2: "gt", 3: "le", 4: "lt", 5: "ge"}
#: value -> name, nvshmemx_signal_op_t (device_host_transport/nvshmem_common_transport.h)
SIGNAL_NAMES = {9: "set", 10: "add"}
#: value -> name, predefined team handles (device_host/nvshmem_common.cuh)
TEAM_NAMES = {0: "world", 1: "shared", 2: "node"}
#: NVSHMEM_TEAM_INVALID (device_host/nvshmem_common.cuh): not a team, refused wherever a team is expected
TEAM_INVALID = -1


def value_of(names, name: str) -> int:
    """The value whose name is ``name`` in a ``*_NAMES`` table (e.g. ``value_of(SIGNAL_NAMES, "set") == 9``)."""
    for value, n in names.items():
        if n == name:
            return value
    raise KeyError(name)


_P, _S, _I, _U = tl.int64, tl.int64, tl.int32, tl.uint64  # pointer, size_t, int, uint64_t
_RMA = (_P, _P, _S, _I)  # (dest, source, bytes, pe)

#: The NVSHMEM standard RMA types of the typed scalar put / get (``<type>_p`` / ``<type>_g``) -> the Triton dtype
#: of the value (``char`` is signed, as on NVIDIA and AMD GPUs; ``long`` is 64-bit; ``size`` = ``size_t``,
#: ``ptrdiff`` = ``ptrdiff_t``).
SCALAR_TYPES = {
    "float": tl.float32, "double": tl.float64, "char": tl.int8, "schar": tl.int8, "short": tl.int16,
    "int": tl.int32, "long": tl.int64, "longlong": tl.int64, "uchar": tl.uint8, "ushort": tl.uint16,
    "uint": tl.uint32, "ulong": tl.uint64, "ulonglong": tl.uint64, "int8": tl.int8, "int16": tl.int16,
    "int32": tl.int32, "int64": tl.int64, "uint8": tl.uint8, "uint16": tl.uint16, "uint32": tl.uint32,
    "uint64": tl.uint64, "size": tl.uint64, "ptrdiff": tl.int64, "half": tl.float16, "bfloat16": tl.bfloat16,
}
#: The C type the value travels as: its own, except ``half`` / ``bfloat16``, which NVSHMEM's bitcode passes as a
#: ``byval`` struct (not expressible as a Triton extern call) -> their 16 bits, through the ``uint16`` function
#: (the same 2-byte remote store / load).
SCALAR_CARRIER = {t: (tl.uint16 if ty in (tl.float16, tl.bfloat16) else ty) for t, ty in SCALAR_TYPES.items()}

#: libshmem_device function -> (argument types, result type).
SIGNATURES = {
    # PE info
    "my_pe": ((), tl.int32),
    "n_pes": ((), tl.int32),
    "team_my_pe": ((_I, ), tl.int32),
    "team_n_pes": ((_I, ), tl.int32),
    # memory: ptr(const void *dest, int pe); mc_ptr(team, const void *ptr)
    "ptr": ((_P, _I), tl.int64),
    "mc_ptr": ((_I, _P), tl.int64),
    # sync
    "barrier_all": ((), None),
    "barrier_all_block": ((), None),
    "barrier_all_warp": ((), None),
    "barrier": ((_I, ), None),
    "sync_all": ((), None),
    "quiet": ((), None),
    "fence": ((), None),
    # get / put
    "getmem_nbi_block": (_RMA, None),
    "getmem_block": (_RMA, None),
    "getmem_nbi_warp": (_RMA, None),
    "getmem_warp": (_RMA, None),
    "getmem_nbi": (_RMA, None),
    "getmem": (_RMA, None),
    "putmem_block": (_RMA, None),
    "putmem_nbi_block": (_RMA, None),
    "putmem_warp": (_RMA, None),
    "putmem_nbi_warp": (_RMA, None),
    "putmem": (_RMA, None),
    "putmem_nbi": (_RMA, None),
    # signal: (dest, source, bytes, sig_addr, signal, sig_op, pe)
    **{f"putmem_signal{nbi}{scope}": ((_P, _P, _S, _P, _U, _I, _I), None)
       for nbi in ("", "_nbi") for scope in ("", "_warp", "_block")},
    # signal_op(uint64_t *sig_addr, uint64_t signal, int sig_op, int pe)
    "signal_op": ((_P, _U, _I, _I), None),
    # uint64_t signal_wait_until(uint64_t *sig_addr, int cmp, uint64_t cmp_val)
    "signal_wait_until": ((_P, _I, _U), tl.uint64),
    # sync over a team: barrier_{block,warp}(team), team_sync{,_block,_warp}(team); sync_all_{block,warp}()
    "barrier_block": ((_I, ), None),
    "barrier_warp": ((_I, ), None),
    "sync_all_block": ((), None),
    "sync_all_warp": ((), None),
    "team_sync": ((_I, ), None),
    "team_sync_block": ((_I, ), None),
    "team_sync_warp": ((_I, ), None),
    # int team_translate_pe(src_team, int pe_in_src_team, dest_team): -1 when not a member of dest_team
    "team_translate_pe": ((_I, _I, _I), tl.int32),
    # collectives (byte counts): int broadcastmem{,_warp,_block}(team, dest, source, nelems, pe_root),
    # int fcollectmem{,_warp,_block}(team, dest, source, nelems)
    **{f"broadcastmem{scope}": ((_I, _P, _P, _S, _I), tl.int32) for scope in ("", "_warp", "_block")},
    **{f"fcollectmem{scope}": ((_I, _P, _P, _S), tl.int32) for scope in ("", "_warp", "_block")},
    # typed scalar put / get: void <T>_p(T *dest, T value, int pe); T <T>_g(const T *source, int pe)
    **{f"{t}_p": ((_P, SCALAR_CARRIER[t], _I), None) for t in SCALAR_TYPES},
    **{f"{t}_g": ((_P, _I), SCALAR_CARRIER[t]) for t in SCALAR_TYPES},
}

#: Functions that block until other PEs (or every block of a launch) arrive: a kernel calling any of them must be
#: launched cooperatively when it has more than one program (see ``triton_dist.jit.check_cooperative_launch``).
COLLECTIVES = ("barrier_all", "barrier_all_block", "barrier_all_warp", "barrier", "barrier_block", "barrier_warp",
               "sync_all", "sync_all_block", "sync_all_warp", "team_sync", "team_sync_block", "team_sync_warp",
               "broadcastmem", "broadcastmem_warp", "broadcastmem_block", "fcollectmem", "fcollectmem_warp",
               "fcollectmem_block")


def scope_of(name: str) -> str:
    """Who calls function ``name``: "block" (``*_block``), "warp" (``*_warp``) or "thread" (no suffix)."""
    return "block" if name.endswith("_block") else "warp" if name.endswith("_warp") else "thread"


def externs(symbol_of, returns=None):
    """``{name: Extern}`` for every function of :data:`SIGNATURES`, named ``symbol_of(name)``; ``returns`` maps a
    name to the result type a target's library declares instead (``None``: void)."""
    returns = returns or {}
    return {name: Extern(symbol_of(name), args, returns.get(name, ret)) for name, (args, ret) in SIGNATURES.items()}


# ----------------------------------------------------------------------------------------------------------------
# lowering
# ----------------------------------------------------------------------------------------------------------------
def builtin(shmem, name):
    """A builtin that calls ``shmem.call(name, *args)``, for a backend's ``@jit`` helpers."""

    def call(*args, _semantic=None):
        return shmem.call(name, *args, _semantic=_semantic)

    call.__name__ = call.__qualname__ = f"_{name}"
    return _compat.builtin(call)


def lower(shmem, name, args, *, _semantic):
    """Emit function ``name`` of ``shmem`` (a ``triton_dist.backends.<target>.libshmem`` module: ``call``,
    ``EXTERNS``) with converted ``args`` (already i64 / i32 / u64 tensors). Returns the result (None for void).

    Who executes it is the C function's rule, as in a CUDA / HIP kernel (and in Triton-distributed): every thread
    of the program that reaches the call executes it, with its own argument values. A scalar call in Triton code
    runs in every thread, so a thread variant (no suffix) called unguarded is issued once per thread, a warp
    variant once per warp, a block variant once per program; ``if tid(0) == 0:`` (``language_extra.tid``) makes a
    thread variant one call per program. Nothing is added around the call (no predicate, no CTA barrier): a
    barrier inside ``if tid(0) == 0`` would deadlock the threads that skip it."""
    res = shmem.call(name, *args, _semantic=_semantic)
    return None if shmem.EXTERNS[name].ret is None else res


# ----------------------------------------------------------------------------------------------------------------
# the libshmem_device lowering of a GPU target
# ----------------------------------------------------------------------------------------------------------------
def address(ptr, _semantic):
    """A pointer operand (scalar typed pointer or int64 / uint64 address) as the i64 address the C functions take."""
    return ptr if ptr.dtype == tl.int64 else _semantic.cast(ptr, tl.int64)


def c_int(value, ty, _semantic):
    """An integer operand (a Python int that fits ``ty``, or an integer scalar) as C type ``ty`` (i32 / i64 / u64);
    a Python int at or above 2**63 passes to u64 as its two's-complement bits."""
    if isinstance(value, int):
        if ty == tl.uint64 and value >= (1 << 63):
            value -= 1 << 64
        value = _semantic.to_tensor(value)
    return value if value.dtype == ty else _semantic.cast(value, ty)


def byte_count(nelems, elem_bytes, _semantic):
    """``nelems * elem_bytes`` as the ``size_t`` (i64) operand (``elem_bytes`` a Python int: 1 for the ``*mem``
    functions, the element size for the typed ones)."""
    if isinstance(nelems, int):
        return c_int(nelems * elem_bytes, tl.int64, _semantic)
    n = c_int(nelems, tl.int64, _semantic)
    if elem_bytes == 1:
        return n
    return _semantic.mul(n, _semantic.to_tensor(elem_bytes), True)


def scalar_value(value, ty, _semantic):
    """The value of a typed scalar put as Triton dtype ``ty`` (a Python number or a scalar of any numeric type is
    converted as ``tl.cast`` converts)."""
    if not isinstance(value, tl.tensor):
        value = _semantic.to_tensor(value)
    return value if value.dtype == ty else _semantic.cast(value, ty)


def pointer_like(address_i64, like, _semantic):
    """The i64 result of a pointer query converted to ``like``'s pointer type (i64 stays i64), marked 16-aligned
    (symmetric allocations are) so accesses through it vectorise."""
    if like.dtype == tl.int64:
        return address_i64
    out = _semantic.cast(address_i64, like.type)
    return _compat.set_divisibility(out, 16)


class GpuLibshmemLowering:
    """The ``LibshmemLowering`` (``triton_dist.language._backend``) of a GPU target, written once over the target's
    table module ``shmem`` (``triton_dist.backends.<target>.libshmem``), which provides ``lower(name, args, ...)``
    (see :func:`lower`) and ``constant(kind, value, op)``: the library's value of a public (NVSHMEM) team /
    sig_op / cmp constant. A target whose library differs in a function overrides that method.

    Operands are converted to the C types of :data:`SIGNATURES` in the order the declaration lists them, constants
    last (the order of the emitted conversions is part of the generated code)."""

    def __init__(self, shmem):
        self.shmem = shmem

    def _lower(self, name, args, _semantic):
        return self.shmem.lower(name, args, _semantic=_semantic)

    def constant_operand(self, kind, value, op, _semantic):
        """A validated team / sig_op / cmp constant as the library's i32 operand."""
        value = self.shmem.constant(kind, value, op)
        if isinstance(value, int):
            return _semantic.to_tensor(value)
        return value if value.dtype == tl.int32 else _semantic.cast(value, tl.int32)

    def my_pe(self, *, target, _semantic, _generator):
        return self._lower("my_pe", [], _semantic)

    def n_pes(self, *, target, _semantic, _generator):
        return self._lower("n_pes", [], _semantic)

    def team_my_pe(self, team, *, target, _semantic, _generator):
        t = self.constant_operand("team", team, "team_my_pe", _semantic)
        return self._lower("team_my_pe", [t], _semantic)

    def team_n_pes(self, team, *, target, _semantic, _generator):
        t = self.constant_operand("team", team, "team_n_pes", _semantic)
        return self._lower("team_n_pes", [t], _semantic)

    def team_translate_pe(self, src_team, pe, dest_team, *, target, _semantic, _generator):
        s = self.constant_operand("team", src_team, "team_translate_pe", _semantic)
        r = c_int(pe, tl.int32, _semantic)
        d = self.constant_operand("team", dest_team, "team_translate_pe", _semantic)
        return self._lower("team_translate_pe", [s, r, d], _semantic)

    def remote_ptr(self, local_ptr, pe, *, target, _semantic, _generator):
        args = [address(local_ptr, _semantic), c_int(pe, tl.int32, _semantic)]
        return pointer_like(self._lower("ptr", args, _semantic), local_ptr, _semantic)

    def remote_mc_ptr(self, team, ptr, *, target, _semantic, _generator):
        args = [self.constant_operand("team", team, "remote_mc_ptr", _semantic), address(ptr, _semantic)]
        return pointer_like(self._lower("mc_ptr", args, _semantic), ptr, _semantic)

    def sync(self, name, scope, team, *, target, _semantic, _generator):
        args = [] if team is None else [self.constant_operand("team", team, name, _semantic)]
        self._lower(name, args, _semantic)
        return None

    def rma(self, name, kind, scope, blocking, dest, source, nbytes, pe, *, target, _semantic, _generator):
        args = [address(dest, _semantic), address(source, _semantic), c_int(nbytes, tl.int64, _semantic),
                c_int(pe, tl.int32, _semantic)]
        self._lower(name, args, _semantic)
        return None

    def p(self, name, dest, value, pe, *, target, _semantic, _generator):
        ty = SCALAR_TYPES[name[:-2]]
        v = scalar_value(value, ty, _semantic)
        carrier = SCALAR_CARRIER[name[:-2]]
        if carrier != ty:
            v = _semantic.bitcast(v, carrier)
        self._lower(name, [address(dest, _semantic), v, c_int(pe, tl.int32, _semantic)], _semantic)
        return None

    def g(self, name, source, pe, *, target, _semantic, _generator):
        ty = SCALAR_TYPES[name[:-2]]
        res = self._lower(name, [address(source, _semantic), c_int(pe, tl.int32, _semantic)], _semantic)
        return res if res.dtype == ty else _semantic.bitcast(res, ty)

    def putmem_signal(self, name, blocking, dest, source, nelems, elem_bytes, sig_addr, signal, sig_op, pe, *,
                      target, _semantic, _generator):
        d, s = address(dest, _semantic), address(source, _semantic)
        n = byte_count(nelems, elem_bytes, _semantic)
        a = address(sig_addr, _semantic)
        v = c_int(signal, tl.uint64, _semantic)
        r = c_int(pe, tl.int32, _semantic)
        o = self.constant_operand("sig_op", sig_op, name, _semantic)
        self._lower(name, [d, s, n, a, v, o, r], _semantic)
        return None

    def signal_op(self, sig_addr, signal, sig_op, pe, *, target, _semantic, _generator):
        a = address(sig_addr, _semantic)
        v = c_int(signal, tl.uint64, _semantic)
        r = c_int(pe, tl.int32, _semantic)
        o = self.constant_operand("sig_op", sig_op, "signal_op", _semantic)
        self._lower("signal_op", [a, v, o, r], _semantic)
        return None

    def signal_wait_until(self, sig_addr, cmp, cmp_val, *, target, _semantic, _generator):
        a = address(sig_addr, _semantic)
        v = c_int(cmp_val, tl.uint64, _semantic)
        c = self.constant_operand("cmp", cmp, "signal_wait_until", _semantic)
        return self._lower("signal_wait_until", [a, c, v], _semantic)

    def broadcast(self, name, team, dest, source, nelems, elem_bytes, pe_root, *, target, _semantic, _generator):
        args = [self.constant_operand("team", team, name, _semantic), address(dest, _semantic),
                address(source, _semantic), byte_count(nelems, elem_bytes, _semantic),
                c_int(pe_root, tl.int32, _semantic)]
        res = self._lower(name, args, _semantic)
        return res if res is not None else _semantic.to_tensor(0)

    def fcollect(self, name, team, dest, source, nelems, elem_bytes, *, target, _semantic, _generator):
        args = [self.constant_operand("team", team, name, _semantic), address(dest, _semantic),
                address(source, _semantic), byte_count(nelems, elem_bytes, _semantic)]
        res = self._lower(name, args, _semantic)
        return res if res is not None else _semantic.to_tensor(0)
