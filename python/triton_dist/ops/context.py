"""The base of every op context (collectives and overlapped GEMMs): symmetric buffers and signal channels, the
creation-time fingerprint exchange, host-side argument checks shared by the calls, and the registry of live contexts
(the torch.library ops find a context by its handle).

What a context guarantees (docs/collectives.md): it spans the whole SHMEM world on one node; ranks that create it
with different arguments get a ``ValueError`` on every rank at creation (one exchange over the process group) instead
of mismatched symmetric allocations and a later hang; every rank zeroed its signals before any rank may raise one
(:meth:`Context._finish_init`); :meth:`Context.close` is collective and idempotent.
"""
from __future__ import annotations

import collections
import itertools
import weakref
from typing import Dict, List, Optional, Sequence

import torch

from ..jit import bounded_wait_key

from ..runtime.dtypes import FP8_DTYPES, dtype_names

registry: "weakref.WeakValueDictionary[int, Context]" = weakref.WeakValueDictionary()
context_ids = itertools.count(1)


def shmem_runtime():
    from .. import utils
    from ..runtime.state import require_backend

    backend = require_backend()
    return utils, backend


def on_gpu(backend) -> bool:
    return getattr(backend, "name", "") != "sim"


def capturing() -> bool:
    """Whether the current CUDA stream is being captured into a CUDA graph (False without CUDA). The ops' capture
    guard (:meth:`Context._guard_capture`) asks this; CPU tests monkeypatch it to exercise the guard."""
    return torch.cuda.is_available() and torch.cuda.is_current_stream_capturing()


def _spec_key(a):
    """What Triton's launch specialization can see of one kernel argument, or more (a refinement of its key: two
    launches with equal keys run the same compiled kernel): a tensor's dtype and 16-byte alignment, an int's
    ``== 1`` / divisibility by 16 / width class, another value's type."""
    if isinstance(a, torch.Tensor):
        return (a.dtype, a.data_ptr() % 16 == 0)
    if isinstance(a, int) and not isinstance(a, bool):
        return (a == 1, a % 16 == 0, 0 if -2**31 <= a < 2**31 else 1 if -2**63 <= a < 2**63 else 2)
    return type(a)


def parity_buffers(alloc, shape, dtype: torch.dtype) -> torch.Tensor:
    """Two buffers of ``shape`` for calls that alternate between them (double buffering), as one ``[2, *shape]``
    tensor whose second half starts on a 16-byte boundary (padding between the halves): ``t[0]`` and ``t[1]`` are
    contiguous and have the alignment Triton's launch specialises pointers on, so the kernel compiled for a call on
    one half runs a call on the other (a CUDA graph captured after one warm-up call of either parity compiles
    nothing). ``alloc((numel, ), dtype)`` allocates the flat storage (symmetric or local; aligned itself)."""
    shape = tuple(int(d) for d in shape)
    numel = 1
    for d in shape:
        numel *= d
    esize = torch.empty((), dtype=dtype).element_size()
    step = -(-numel * esize // 16) * 16 // esize
    strides, acc = [], 1
    for d in reversed(shape):
        strides.append(acc)
        acc *= d
    flat = alloc((2 * step, ), dtype)
    return flat.as_strided((2, ) + shape, (step, ) + tuple(reversed(strides)))


def traced_result(result: torch.Tensor, out: Optional[torch.Tensor]) -> torch.Tensor:
    """A call traced by torch.compile: the registered op's ``result``, copied into ``out`` when the call gave one
    (an op returns a new tensor; ``out`` was checked by the caller: as many elements)."""
    if out is None:
        return result
    out.view(-1).copy_(result.reshape(-1))
    return out


def check_eager_only(op: str, **kw) -> None:
    """Under torch.compile: refuse the keywords that only an eager call honours (``kw``: name -> value; None = not
    given) with one ``ValueError`` naming them."""
    given = [k for k, v in kw.items() if v is not None]
    if given:
        raise ValueError(f"{op}: {', '.join(given)} apply to eager calls only, not under torch.compile")


def capacity_arg(factory: str, name: str, value, aliases: dict):
    """The capacity argument ``name`` of ``factory``, given either as ``name`` or as exactly one of its alias
    keywords (``aliases``: alias -> value or None; e.g. ``max_m_per_rank`` / ``max_M`` for ``max_m``). Checking
    the value is the context's job."""
    given = {k: v for k, v in ((name, value), *aliases.items()) if v is not None}
    if len(given) > 1:
        raise ValueError(f"{factory}: {' and '.join(given)} name the same capacity; give one of them")
    if not given:
        raise TypeError(f"{factory}: missing the capacity argument {name} (aliases: {', '.join(aliases)})")
    return next(iter(given.values()))


def alias_arg(factory: str, name: str, value, alias: str, alias_value, default):
    """A keyword of ``factory`` that the reference spells ``alias`` (e.g. ``create_gemm_rs_context``'s ``dtype``,
    the reference's ``output_dtype``): the value given under either name (None = not given; the same value under
    both is accepted), ``default`` when neither; two different values raise ``ValueError`` naming both keywords."""
    if value is not None and alias_value is not None and value != alias_value:
        raise ValueError(f"{factory}: {name}={value} and {alias}={alias_value} name the same argument; give one "
                         f"of them")
    return next((v for v in (value, alias_value) if v is not None), default)


def sm_count(device) -> int:
    """SMs of this rank on ``device`` (its share where ranks share a GPU: ``runtime.device_info.rank_sm_count``);
    1 on the simulator."""
    from ..runtime.device_info import rank_sm_count

    return rank_sm_count(device, simulated=1)


def program_budget(device, num_programs: Optional[int] = None) -> int:
    """The most programs of a context's channels (:attr:`Context.max_programs`): ``num_programs`` where given, else
    this rank's SMs on a GPU (:func:`sm_count`) and 2 on the simulator. Where ranks share a GPU a ``num_programs``
    above this rank's share is capped to it (``runtime.device_info.programs_within_share``): the channels' programs
    spin on the peers' signals, and more of them than the share sit on every SM of the GPU, where the peer's kernel
    that raises those signals (or a cuBLAS GEMM it runs first) finds no room. Unchanged on a GPU of its own."""
    from ..runtime.device_info import programs_within_share

    if not num_programs:
        return sm_count(device) if torch.device(device).type == "cuda" else 2
    return programs_within_share(device, num_programs)


class Channel:
    """One fixed-grid signalling channel: ``num_programs`` programs, ``BLOCK`` elements per block, a symmetric
    data buffer, symmetric int64 ``ready``/``done`` arrays and a local int64 epoch ``counter``."""

    def __init__(self, ctx, name: str, buf_numel: int, buf_dtype, num_programs: int, block: int, num_warps: int,
                 nready: int, ndone: int, ncounter: int, peer_views: bool = False):
        u = ctx._utils
        self.name = name
        self.num_programs = int(num_programs)
        self.block = int(block)
        self.num_warps = int(num_warps)
        self.peers = None
        shape = (max(int(buf_numel), 1), )
        if peer_views:  # views of the buffer at every rank of the node (index = rank), e.g. for copy-engine pulls
            self.peers = u.nvshmem_create_tensors(shape, buf_dtype, ctx.rank, ctx.world_size)
            self.buf = self.peers[ctx.rank]
        else:
            self.buf = u.nvshmem_create_tensor(shape, buf_dtype)
        self.ready = u.nvshmem_create_tensor((max(nready, 1), ), torch.int64)
        self.done = u.nvshmem_create_tensor((max(ndone, 1), ), torch.int64)
        self.counter = torch.zeros(max(ncounter, 1), dtype=torch.int64, device=ctx.device)
        # NVSHMEM does not zero allocations: signals start at 0 (epoch 0); _finish_init barriers before first use
        self.ready.zero_()
        self.done.zero_()
        ctx._symmetric += [t for t in (self.buf, self.ready, self.done) if t is not None]

    def fingerprint(self):
        return (self.name, self.num_programs, self.block, None if self.buf is None else
                (self.buf.numel(), str(self.buf.dtype)))


#: the user's call of kernels launched by a context that serves several ops (its ``op`` is empty)
_USER_OP = {"p2p_send_kernel": "send", "p2p_recv_kernel": "recv"}


def _named_rank_error(op: str, exc: BaseException):
    """The simulator's cross-rank error inside ``exc`` (a tagged wait that saw another call's signal, or a wait on
    a peer whose process exited), raised again with the user's call ``op`` in front of its one-line message; None
    when ``exc`` is another error."""
    from ..backends.sim.context import SimPeerExited, SimSignalMismatch

    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, SimSignalMismatch):
            return SimSignalMismatch(f"{op or 'collective'}: {exc}; ctx.check_peers = True compares the calls' "
                                     f"arguments on the host before each launch", **vars(exc))
        if isinstance(exc, SimPeerExited):
            return SimPeerExited(f"{op or 'collective'}: {exc}", peer=exc.peer, op=exc.op)
        exc = exc.__cause__ or exc.__context__
    return None


class Context:
    """Base of the collective contexts (see module docstring). Attributes: ``rank``, ``world_size``, ``dtype``,
    ``max_numel``, ``device``, ``group`` (torch process group used for fallbacks and the creation check)."""

    kind = "base"
    #: the name of the public factory that builds this context (named in construction errors)
    factory_suffix = "_ctx"
    #: this family's own spelling of the torch.distributed fallback method (docs/ops.md: ``"torch"``, with
    #: ``"nccl"`` accepted as an alias; the collectives and their measured table spell it ``"nccl"``)
    fallback_method = "torch"

    @classmethod
    def factory_name(cls) -> str:
        return f"create_{cls.kind}{cls.factory_suffix}"

    def __init__(self, max_numel: int, dtype: torch.dtype, accepted_dtypes, *, num_programs: Optional[int] = None,
                 block_bytes: Optional[int] = None, num_warps: Optional[int] = None, fingerprint_extra=(),
                 methods: Optional[Sequence[str]] = None, all_methods: Sequence[str] = (), method: str = "auto"):
        utils, backend = shmem_runtime()
        self._utils = utils
        self._backend = backend
        op = self.factory_name()
        if not isinstance(method, str):
            raise ValueError(f"{op}: method={method!r} (the calls' default method) must be a str such as 'auto'; "
                             f"methods= lists the methods to allocate buffers for")
        #: the method of a call made with ``method=None`` (the default); the same on every rank (fingerprinted)
        self.method = self._call_method(method)
        if not isinstance(dtype, torch.dtype) or dtype not in accepted_dtypes:
            raise ValueError(f"{op}: dtype={dtype!r} is not supported; accepted: {dtype_names(accepted_dtypes)}")
        if not isinstance(max_numel, int) or isinstance(max_numel, bool) or max_numel < 1:
            raise ValueError(f"{op}: max_numel={max_numel!r} must be a positive int")
        if max_numel >= 2**31 - 2**20:
            raise ValueError(f"{op}: max_numel={max_numel} is too large (kernels index with int32; < 2**31)")
        self.rank = backend.my_pe()
        self.world_size = backend.n_pes()
        local = utils.get_triton_dist_local_world_size() or self.world_size
        if local != self.world_size:
            raise ValueError(f"{op}: the collective kernels are intra-node (NVLink / simulator heap); world size "
                             f"{self.world_size} spans several nodes (LOCAL_WORLD_SIZE={local}). The inter-node "
                             f"path (NVSHMEM put-with-signal) is a follow-up: use NCCL there")
        self.group = utils.get_triton_dist_world()
        from ..runtime.torch_collectives import group_has_nccl

        #: whether the torch fallback methods ("nccl" / "torch") run on NCCL; False where ranks share a GPU (gloo
        #: on host copies, never picked by "auto"); the simulator's gloo counts as its NCCL
        self.group_has_nccl = (not on_gpu(backend)) or group_has_nccl(self.group)
        self.dtype = dtype
        self.max_numel = int(max_numel)
        self.esize = torch.empty((), dtype=dtype).element_size()
        self.on_gpu = on_gpu(backend)
        self.device = torch.device("cuda", torch.cuda.current_device()) if self.on_gpu else torch.device("cpu")
        self.sm_count = sm_count(self.device)
        self.block_bytes = int(block_bytes or (16384 if self.on_gpu else 4096))
        self.num_warps = int(num_warps or (8 if self.on_gpu else 1))
        # where ranks share a GPU a given num_programs is capped at the share (program_budget): the channels'
        # programs wait for the peers, and more than the share would sit on every SM and keep the peers' kernels off
        self.max_programs = program_budget(self.device, num_programs)
        self.check_peers = False
        #: Eager calls through per-call CUDA graphs (:meth:`_launch_graphed`); on by default on GPUs, set False to
        #: launch every call directly.
        self.graph_calls = self.on_gpu
        self.max_graphs = 32
        self._graphs: "collections.OrderedDict[tuple, torch.cuda.CUDAGraph]" = collections.OrderedDict()
        self._graph_candidates: "collections.OrderedDict[tuple, None]" = collections.OrderedDict()
        #: op-level keys (x / out addresses, sizes, dtypes, method) of calls whose launch replayed ``_graphs[...]``
        self._call_graphs: Dict[tuple, "torch.cuda.CUDAGraph"] = {}
        self._symmetric: List[torch.Tensor] = []
        self.channels: Dict[str, Channel] = {}
        self._launches: Dict[tuple, object] = {}
        self.handle = next(context_ids)
        self._closed = False
        if methods is None:
            methods = tuple(all_methods)
        bad = [m for m in methods if m not in all_methods]
        if bad or not methods:
            raise ValueError(f"{op}: methods={tuple(methods)!r}: accepted (allocate buffers for): "
                             f"{', '.join(all_methods)}")
        self.methods = tuple(methods)
        #: specialization keys of the kernel launches this context made outside capture (:meth:`_guard_capture`)
        self._warm = set()
        self._exchange_fingerprint(tuple(fingerprint_extra) + self.methods + (self.method, ))

    # ------------------------------------------------------------------ helpers
    def _call_method(self, method: Optional[str]) -> str:
        """The method a call runs before ``"auto"`` is resolved: ``method``, or the context's :attr:`method` when
        None; ``"torch"`` and ``"nccl"`` (one fallback, two names) become this family's :attr:`fallback_method`."""
        if method is None:
            method = self.method
        if method == "torch" or method == "nccl":
            return self.fallback_method
        return method

    def _guard_capture(self, kernel, launch, args) -> None:
        """No first launch inside a capture: a launch whose specialization (:func:`_spec_key`) this context never
        launched outside capture would compile the kernel and initialise its SHMEM module during the capture, which
        a CUDA graph cannot hold. Inside a capture such a launch raises one line saying how to warm up; outside,
        the launch is remembered. Called before every launch of the context's kernels."""
        if capturing():
            self._require_warm(kernel, launch, args)
        else:
            self._warm.add(self._warm_key(launch, args))

    @staticmethod
    def _warm_key(launch, args) -> tuple:
        return (id(launch), bounded_wait_key()) + tuple(_spec_key(a) for a in args)

    def _require_warm(self, kernel, launch, args) -> None:
        """Inside a capture: raise unless this launch's specialization ran outside capture (:meth:`_guard_capture`)."""
        if self._warm_key(launch, args) not in self._warm:
            op = getattr(self, "op", "") or _USER_OP.get(getattr(kernel, "__name__", ""), "") or self.kind
            raise RuntimeError(f"{op}: the first call of this shape and method (kernel {kernel.__name__}) is inside "
                               f"CUDA-graph capture, where its kernel cannot be compiled and loaded; warm up: make "
                               f"the same call once before capturing (then synchronize), and capture after that")

    def _launch_plain(self, kernel, grid, args, **kw) -> None:
        """Launch ``kernel[grid](*args, **kw)`` through the context's bound launch, with the capture guard. On the
        simulator a cross-rank error of the kernel's waits is raised again naming the user's call (``self.op``)."""
        launch = self._bound(kernel, grid, **kw)
        self._guard_capture(kernel, launch, args)
        if self.on_gpu:
            launch(*args)
            return
        try:
            launch(*args)
        except Exception as exc:  # noqa: BLE001 - re-raised, named, when it is one of the simulator's rank errors
            named = _named_rank_error(getattr(self, "op", "") or self.kind, exc)
            if named is None:
                raise
            raise named from exc

    def _block(self, elem_bytes=None) -> int:
        return max(128, self.block_bytes // (elem_bytes or self.esize))

    def _grid_for(self, numel: int, block: int) -> int:
        return max(1, min(self.max_programs, -(-int(numel) // block)))

    def _need(self, op: str, method: str) -> None:
        if method not in ("auto", "nccl") and method not in self.methods:
            raise ValueError(f"{op}: method={method!r} was not allocated by this context (created with "
                             f"methods={self.methods}); create it with that method included")

    def _add_channel(self, name, **kw) -> Channel:
        ch = Channel(self, name, **kw)
        self.channels[name] = ch
        return ch

    # ------------------------------------------------------------------ fused kernels' launch epochs
    def _init_call_epochs(self, cooperative: bool = True) -> None:
        """For a context whose fused kernels run one epoch of a signalling protocol per launch
        (``kernels.common.call_epoch`` / ``finish_call``): ``counter [3]`` int64 in this rank's device memory (not
        symmetric), zeroed -- ``counter[0]`` the launches on this context that completed, ``counter[1]`` the
        programs of the running launch that finished, ``counter[2]`` free for a kernel's own use (the AG + GEMM
        keeps its call's epoch there) -- and ``cooperative``: whether its launches are cooperative (NVIDIA GPUs
        only, and ``cooperative``), because their programs wait on the peers' programs and must all be resident:
        an impossible grid is then a launch error instead of a hang. The epochs live in device memory, so calls can
        be captured in CUDA graphs and replayed."""
        self.counter = torch.zeros(3, dtype=torch.int64, device=self.device)
        self.cooperative = bool(cooperative and self.on_gpu and not getattr(torch.version, "hip", None))

    def _coop(self) -> dict:
        """The launch options of a fused launch: ``launch_cooperative_grid=True`` where :attr:`cooperative`."""
        return {"launch_cooperative_grid": True} if getattr(self, "cooperative", False) else {}

    @property
    def epoch(self) -> int:
        """Fused calls completed on this context (``counter[0]``; reads the device counter: synchronizes; for
        tests). A context without launch epochs has none: AttributeError."""
        counter = getattr(self, "counter", None)
        if counter is None:
            raise AttributeError(f"{type(self).__name__} has no launch epochs (no fused kernels)")
        return int(counter[0].item())

    def _finish_init(self):
        """Every rank zeroed its signals before any rank may raise one: device sync + SHMEM barrier."""
        if self.on_gpu:
            torch.cuda.synchronize()
        self._utils.nvshmem_barrier_all_on_stream()
        if self.on_gpu:
            torch.cuda.synchronize()
        registry[self.handle] = self

    def _exchange_fingerprint(self, extra):
        """Exchange the creation arguments once, BEFORE any symmetric allocation; any difference raises ValueError
        on every rank (instead of mismatched symmetric allocations and a later hang)."""
        import torch.distributed as dist

        fp = (self.kind, str(self.dtype), self.max_numel, self.world_size, self.block_bytes, self.max_programs,
              self.num_warps, tuple(extra))
        if dist.is_available() and dist.is_initialized() and self.world_size > 1:
            all_fp = [None] * self.world_size
            dist.all_gather_object(all_fp, fp, group=self.group)
            bad = [r for r, f in enumerate(all_fp) if f != all_fp[0]]
            if bad:
                raise ValueError(f"{self.factory_name()}: ranks disagree on the context (kind, dtype, max_numel, "
                                 f"world, block bytes, programs, warps, extra): rank 0 has {all_fp[0]}, rank(s) {bad} have "
                                 f"{[all_fp[r] for r in bad]}; create it with the same arguments on every rank")

    def _check(self, op: str, x: torch.Tensor, name: str = "x", dtypes=None) -> None:
        if type(x) is torch.Tensor and x.dtype == self.dtype and x.device == self.device and x.is_contiguous() \
                and not self._closed:
            return  # the eager hot path: one test; the diagnosis below runs only for a bad (or subclassed) tensor
        self._check_open(op)
        if not isinstance(x, torch.Tensor):
            raise ValueError(f"{op}: {name} must be a torch.Tensor, got {type(x).__name__}")
        self._check_dtype(op, x, name)
        self._check_device(op, x, name)
        if not x.is_contiguous():
            raise ValueError(f"{op}: {name} must be contiguous (call .contiguous())")

    def _check_open(self, op: str) -> None:
        """ValueError naming ``op`` when the context was closed."""
        if self._closed:
            raise ValueError(f"{op}: the context was closed")

    def _check_dtype(self, op: str, x: torch.Tensor, name: str) -> None:
        """ValueError naming ``op`` and ``name`` when the tensor ``x`` is not of the context's dtype."""
        if x.dtype != self.dtype:
            raise ValueError(f"{op}: {name}.dtype={x.dtype} differs from the context's dtype {self.dtype}; create a "
                             f"context per dtype")

    def _check_device(self, op: str, x: torch.Tensor, name: str) -> None:
        """ValueError naming ``op`` and ``name`` when the tensor ``x`` is not on the device of the context's
        buffers (same type; on GPU the same index)."""
        if x.device.type != self.device.type or (self.on_gpu and x.device.index != self.device.index):
            raise ValueError(f"{op}: {name} is on {x.device}, the context's buffers are on {self.device}")

    def _check_peers(self, op: str, desc) -> None:
        import torch.distributed as dist

        if not self.check_peers or self.world_size == 1:
            return
        if capturing():
            raise RuntimeError(f"{op}: ctx.check_peers exchanges the call's arguments on the host, which a CUDA graph "
                               f"cannot capture; set check_peers = False before capturing")
        all_desc = [None] * self.world_size
        dist.all_gather_object(all_desc, desc, group=self.group)
        if any(d != all_desc[0] for d in all_desc):
            raise ValueError(f"{op}: ranks called with different arguments: {all_desc}")

    def _launch(self, kernel, ch: Channel, *args, **consts):
        """Launch ``kernel`` on ``ch``'s grid: ``kernel[(ch.num_programs,)](*args, rank, WORLD=world,
        BLOCK=ch.block, num_warps=ch.num_warps, **consts)``, through a :class:`triton_dist.jit.BoundLaunch` kept
        per (kernel, channel, constexprs) so that repeated eager calls skip Triton's per-launch binding work."""
        launch = self._bound(kernel, (ch.num_programs, ), WORLD=self.world_size, BLOCK=ch.block,
                             num_warps=ch.num_warps, **consts)
        args = args + (self.rank, )
        if self.graph_calls and self.on_gpu:
            return self._launch_graphed(kernel, launch, args)  # the capture guard is inside
        self._guard_capture(kernel, launch, args)
        if self.on_gpu:
            launch(*args)
            return None
        try:  # simulator: name the user's call in a cross-rank error of the kernel's waits
            launch(*args)
        except Exception as exc:  # noqa: BLE001 - re-raised, named, when it is one of the simulator's rank errors
            op = getattr(self, "op", "") or _USER_OP.get(getattr(kernel, "__name__", ""), "")
            named = _named_rank_error(op, exc)
            if named is None:
                raise
            raise named from exc
        return None

    def _launch_graphed(self, kernel, launch, args):
        """``ctx.graph_calls = True``: a launch whose exact arguments (tensor addresses and every scalar) were seen
        before is replayed from a one-kernel CUDA graph captured on that second sighting (one ``cudaGraphLaunch``
        instead of Triton's per-launch host work); other launches run directly. At most ``max_graphs`` graphs per
        context (least recently used dropped). A call made while the current stream is being captured, or in
        another bounded-wait mode than the graph's, launches directly (captured into the caller's graph; inside a
        capture only a specialization launched before, :meth:`_require_warm`). The
        kernels' epochs live in device memory, so a replay is the same call as a launch. Graphs keep no tensor
        alive: a key is an address, and a reused address with the same size is the same memory region. Returns the
        graph that ran the launch, or None."""
        if torch.cuda.is_current_stream_capturing():
            self._require_warm(kernel, launch, args)
            launch(*args)
            return None
        key = (id(launch), bounded_wait_key()) + tuple(a.data_ptr() if isinstance(a, torch.Tensor) else a
                                                       for a in args)
        graph = self._graphs.get(key)
        if graph is not None:
            self._graphs.move_to_end(key)
            graph.replay()
            return graph
        if key not in self._graph_candidates:  # first sighting: a plain launch (compiles, if needed)
            self._graph_candidates[key] = None
            if len(self._graph_candidates) > 4 * self.max_graphs:
                self._graph_candidates.popitem(last=False)
            self._warm.add(self._warm_key(launch, args))  # for the capture guard
            launch(*args)
            return None
        del self._graph_candidates[key]
        graph = torch.cuda.CUDAGraph()
        side = torch.cuda.Stream(device=self.device)
        side.wait_stream(torch.cuda.current_stream(self.device))
        with torch.cuda.stream(side):
            graph.capture_begin(capture_error_mode="thread_local")
            try:
                launch(*args)
            finally:
                graph.capture_end()
        self._graphs[key] = graph
        if len(self._graphs) > self.max_graphs:
            self._graphs.popitem(last=False)
            self._call_graphs.clear()  # may name the dropped graph; refilled by the next calls
        graph.replay()
        return graph

    def _replay_call(self, x, out, method) -> bool:
        """The ``graph_calls`` fast path of an op called with ``out``: replay the graph an earlier call with the same
        ``x`` / ``out`` (address, size, dtype, contiguous), ``method`` and bounded-wait mode ran, skipping the op's
        own work. False when there is none or the stream is being captured (the op then runs normally)."""
        graphs = self._call_graphs
        if not graphs or type(x) is not torch.Tensor or type(out) is not torch.Tensor or \
                torch.compiler.is_compiling():
            return False
        graph = graphs.get(_call_key(x, out, method))
        if graph is None or not x.is_contiguous() or not out.is_contiguous() or \
                torch.cuda.is_current_stream_capturing():
            return False
        graph.replay()
        return True

    def _remember_call(self, graph, x, out, method) -> None:
        """After an op call with a user ``out`` whose (single) launch ran ``graph``: key it for :meth:`_replay_call`
        (only tensors that passed the op's checks get here)."""
        if graph is not None and type(x) is torch.Tensor and type(out) is torch.Tensor:
            self._call_graphs[_call_key(x, out, method)] = graph

    def clear_graphs(self) -> None:
        """Drop the graphs of ``graph_calls`` (they are also dropped by :meth:`close`)."""
        self._graphs.clear()
        self._graph_candidates.clear()
        self._call_graphs.clear()

    def _bound(self, kernel, grid, **kw):
        """The context's :class:`triton_dist.jit.BoundLaunch` of ``kernel`` with ``grid`` and keywords ``kw``
        (created on first use; ``kw`` in the same order at every call site)."""
        key = (id(kernel), grid) + tuple(kw.items())  # not hash(kernel): a JITFunction hashes its cache key (sha256)
        launch = self._launches.get(key)
        if launch is None:
            launch = self._launches[key] = kernel.bind_launch(grid, **kw)
        return launch

    def close(self) -> None:
        """Collective: free the symmetric buffers (every rank must call it). Idempotent."""
        if self._closed:
            return
        self._closed = True
        registry.pop(self.handle, None)
        self.clear_graphs()
        if self.on_gpu:
            torch.cuda.synchronize()
        for t in self._symmetric:
            self._utils.nvshmem_free_tensor_sync(t)
        self._symmetric = []

    def finalize(self) -> None:
        """The reference's name of :meth:`close` (kept for scripts written for it)."""
        self.close()

    def __repr__(self):
        return (f"{type(self).__name__}(rank={self.rank}, world={self.world_size}, dtype={self.dtype}, "
                f"max_numel={self.max_numel}, channels={list(self.channels)})")



def _call_key(x: torch.Tensor, out: torch.Tensor, method: str) -> tuple:
    """The key of an op call for ``graph_calls``' op-level replay: ``x`` / ``out`` address, size and dtype, the
    method asked for and the bounded-wait mode."""
    return (x.data_ptr(), out.data_ptr(), x.numel(), out.numel(), x.dtype, out.dtype, method, bounded_wait_key())


def check_ctx(op: str, ctx, cls, factory: str) -> None:
    if not isinstance(ctx, cls):
        raise ValueError(f"{op}: ctx must come from {factory}, got {type(ctx).__name__}")


def check_method(op: str, method: str, accepted) -> None:
    if method not in accepted:
        raise ValueError(f"{op}: method={method!r} is not supported; accepted: {', '.join(accepted)}")


def get_context(handle: int) -> Context:
    """The live context with ``handle`` (used by the torch.library ops)."""
    ctx = registry.get(int(handle))
    if ctx is None:
        raise ValueError(f"triton_dist ops: no live collective context with handle {handle}")
    return ctx


__all__ = ["FP8_DTYPES", "Channel", "Context", "capacity_arg", "capturing", "check_ctx", "check_method", "dtype_names", "get_context", "on_gpu",
           "program_budget", "shmem_runtime", "sm_count", "registry"]
