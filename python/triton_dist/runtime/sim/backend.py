"""``SimBackend``: the :class:`ShmemBackend` of the CPU simulator (design: the ``triton_dist.runtime.sim``
package docstring).

State is per process (module level): any number of ``SimBackend()`` objects share the one heap, and ``init`` is
idempotent, so ``triton_dist.utils.initialize_distributed()`` may run after a launcher already initialised it.
"""
from __future__ import annotations

import atexit
import os
import socket
import uuid
from typing import List, Optional, Sequence

import torch

from ..backend import ShmemBackend
from ..env import process_group_layout
from . import context as _context
from .heap import (ALIGN, SimCollectiveMismatch, SimHeapContext, SimHeapExhausted, create_segment, header_bytes,
                   heap_size_from_env, segment_prefix)

_KIND_CREATE = 1
_KIND_FREE = 2

_state: Optional[SimHeapContext] = None


_DTYPE_NAMES = {}


def _dtype_code(dtype: torch.dtype) -> int:
    # stable across processes: crc32 of the dtype's name
    import zlib

    code = zlib.crc32(str(dtype).encode())
    _DTYPE_NAMES[code] = str(dtype)
    return code


def _dtype_name(code: int) -> str:
    return _DTYPE_NAMES.get(code, f"<dtype code {code:#x}>")


class SimBackend(ShmemBackend):
    """Symmetric heap in one shared file mapping; ranks are processes of a gloo (or any CPU) process group.

    Collective methods (``create_tensor(s)``, ``free_tensor``, ``barrier_all_on_stream``) synchronise through the
    segment's header with hardware atomics and raise :class:`~triton_dist.runtime.sim.heap.SimWaitTimeout`
    (naming the missing ranks) instead of hanging when a rank does not arrive within the wait timeout."""

    name = "sim"

    # ------------------------------------------------------------------ lifecycle
    def init(self, group=None) -> None:
        """Collective over ``group`` (default: the world group): rank 0 creates the segment, every rank maps it,
        then rank 0 unlinks its name (the mapping lives on; a crash cannot leak it). Idempotent per process."""
        global _state
        if _state is not None:
            return
        from .interpreter import install_interpreter_fixes

        install_interpreter_fixes()  # the simulator's kernels run on the interpreter, whoever turned it on
        import torch.distributed as dist

        if not dist.is_initialized():
            raise RuntimeError("SimBackend.init: torch.distributed is not initialised; create a gloo process group "
                               "first (triton_dist.utils.initialize_distributed() does)")
        # the group's own sizes: a subgroup (each half of a world its own group) is a world of its own here
        rank, world, local_rank, local_world = process_group_layout(group)
        if local_world <= 0 or world % local_world:
            raise ValueError(f"sim: WORLD_SIZE={world} is not a multiple of LOCAL_WORLD_SIZE={local_world} (sizes of "
                             f"the group SHMEM is bootstrapped over)")
        if local_rank != rank % local_world:
            raise ValueError(f"sim: LOCAL_RANK={local_rank} does not match RANK={rank} % LOCAL_WORLD_SIZE="
                             f"{local_world} (in the group SHMEM is bootstrapped over); the simulator numbers ranks "
                             f"node-major")
        heap_size, var = heap_size_from_env()
        heap_size = (heap_size + 4095) // 4096 * 4096
        header = header_bytes(world, world // local_world)
        total = header + world * heap_size

        # rank 0 creates; the name (and any creation error) is broadcast
        info = [None]
        if rank == 0:
            name = f"{segment_prefix(os.environ.get('MASTER_PORT', 'x'))}{os.getpid()}_{uuid.uuid4().hex[:12]}"
            try:
                info[0] = ("ok", create_segment(total, name, var), socket.gethostname(), heap_size)
            except Exception as exc:  # noqa: BLE001 - reported on every rank below
                info[0] = ("err", f"{type(exc).__name__}: {exc}", None, heap_size)
        dist.broadcast_object_list(info, src=_global_src(group), group=group)
        status, path_or_err, host0, heap0 = info[0]
        if status != "ok":
            raise RuntimeError(f"sim: rank 0 could not create the symmetric heap: {path_or_err}")

        mm = None
        err = None
        try:
            if socket.gethostname() != host0:
                raise RuntimeError(f"the simulator needs every rank on one host; rank {rank} is on "
                                   f"{socket.gethostname()!r}, rank 0 on {host0!r}")
            if heap0 != heap_size:
                raise RuntimeError(f"heap size mismatch: rank 0 uses {heap0} bytes per rank, rank {rank} {heap_size} "
                                   f"(from {var}); set the same value on every rank")
            import mmap

            fd = os.open(path_or_err, os.O_RDWR)
            try:
                if os.fstat(fd).st_size != total:
                    raise RuntimeError(f"segment {path_or_err} has {os.fstat(fd).st_size} bytes, expected {total}")
                mm = mmap.mmap(fd, total, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
            finally:
                os.close(fd)
        except Exception as exc:  # noqa: BLE001
            err = f"rank {rank}: {type(exc).__name__}: {exc}"
        errors: List[Optional[str]] = [None] * world
        dist.all_gather_object(errors, err, group=group)
        if rank == 0:
            try:
                os.unlink(path_or_err)
            except FileNotFoundError:
                pass
        bad = [e for e in errors if e]
        if bad:
            if mm is not None:
                mm.close()
            raise RuntimeError("sim: attaching the symmetric heap failed: " + "; ".join(bad))

        ctx = SimHeapContext(rank=rank, world_size=world, local_rank=local_rank, local_world_size=local_world,
                             heap_size=heap_size, heap_size_var=var, path=path_or_err, mm=mm, header=header)
        if rank == 0:
            ctx.write_header_identity()
        ctx.publish_process()
        dist.barrier(group=group)
        ctx.check_header_identity()
        _state = ctx
        _context.set_current(ctx)

    def is_initialized(self) -> bool:
        return _state is not None

    def finalize(self) -> None:
        """Local: forget all allocations and unmap (the segment name was unlinked at init). Safe to call twice.
        Tensors still referencing the heap keep the mapping alive until they die (no warning)."""
        global _state
        ctx, _state = _state, None
        if ctx is None:
            return
        if _context.is_active() and _context.current() is ctx:
            _context.set_current(None)
        ctx.alloc.used.clear()
        ctx.close()

    def reset(self) -> None:
        """Collective over the world process group: free every allocation and zero the barrier/collective words,
        so the next task starts from a clean heap (used by the test launcher between tasks)."""
        import torch.distributed as dist

        if _state is None:  # the task finalized the backend itself: nothing to reset
            return
        ctx = self.ctx
        dist.barrier()
        if ctx.rank == 0:
            ctx.zero_header_sync_words()
        ctx.reset_sync_state()
        ctx.abort_event.clear()
        for off in list(ctx.alloc.used):
            ctx.alloc.release(off)
        dist.barrier()

    # ------------------------------------------------------------------ queries
    @property
    def ctx(self) -> SimHeapContext:
        if _state is None:
            raise RuntimeError("SimBackend is not initialised: call triton_dist.utils.initialize_distributed() "
                               "(TRITON_DIST_BACKEND=sim) first")
        return _state

    def my_pe(self) -> int:
        return self.ctx.rank

    def n_pes(self) -> int:
        return self.ctx.world_size

    # ------------------------------------------------------------------ memory
    def _view(self, rank: int, offset: int, shape, dtype: torch.dtype) -> torch.Tensor:
        ctx = self.ctx
        numel = 1
        for s in shape:
            numel *= int(s)
        esize = torch.empty((), dtype=dtype).element_size()
        start = ctx.base(rank) - ctx.map_addr + offset
        if numel == 0:
            return torch.frombuffer(ctx._mm, dtype=dtype, count=1, offset=start)[:0].reshape(shape)
        t = torch.frombuffer(ctx._mm, dtype=dtype, count=numel, offset=start)
        assert t.element_size() == esize
        return t.view(tuple(int(s) for s in shape))

    def create_tensor(self, shape: Sequence[int], dtype: torch.dtype) -> torch.Tensor:
        """Collective: zero-filled tensor at the same offset of every rank's partition (``ALIGN``-aligned);
        every rank must pass the same shape and dtype (checked). Returns this rank's CPU view."""
        return self._alloc(shape, dtype)[1]

    def create_tensors(self, shape: Sequence[int], dtype: torch.dtype, rank: int,
                       local_world_size: int) -> List[torch.Tensor]:
        """Collective: one symmetric tensor; views of it on each rank of ``rank``'s node (index = local rank)."""
        off, _ = self._alloc(shape, dtype)
        node_first = (rank // local_world_size) * local_world_size
        return [self._view(node_first + i, off, shape, dtype) for i in range(local_world_size)]

    def peer_view(self, tensor: torch.Tensor, peer: int) -> torch.Tensor:
        """The same symmetric tensor (same shape/strides) as seen in ``peer``'s partition (host-side symm_at)."""
        ctx = self.ctx
        addr = tensor.data_ptr()
        peer_addr = ctx.translate(addr, peer)
        start = peer_addr - ctx.map_addr
        nbytes = tensor.untyped_storage().nbytes() - tensor.storage_offset() * tensor.element_size()
        flat = torch.frombuffer(ctx._mm, dtype=torch.uint8, count=max(nbytes, 1), offset=start)
        return flat.view(tensor.dtype).as_strided(tensor.shape, tensor.stride())

    def _alloc(self, shape, dtype):
        ctx = self.ctx
        if not isinstance(dtype, torch.dtype):
            raise TypeError(f"create_tensor: dtype must be a torch.dtype, got {dtype!r}")
        shape = tuple(int(s) for s in (shape if isinstance(shape, (tuple, list, torch.Size)) else (shape, )))
        if any(s < 0 for s in shape):
            raise ValueError(f"create_tensor: negative dimension in shape {shape}")
        numel = 1
        for s in shape:
            numel *= s
        nbytes = numel * torch.empty((), dtype=dtype).element_size()
        need = max(ALIGN, (nbytes + ALIGN - 1) // ALIGN * ALIGN)
        off = ctx.alloc.find(need)
        if off is not None:  # zero before publishing: after the collective barrier peers may write into it
            _zero(ctx, ctx.base(ctx.rank) + off, need)
        ndim_hash = hash(shape) & 0xFFFFFFFF
        ctx.collective_check(
            _KIND_CREATE, [need, nbytes, _dtype_code(dtype), ndim_hash, -1 if off is None else off],
            "create_tensor",
            lambda rec: (f"create_tensor(nbytes={rec[3]}, dtype={_dtype_name(rec[4])}, shape_hash={rec[5]:#x}) "
                         f"seq={rec[0]}" if rec[1] == _KIND_CREATE else f"free_tensor(offset={rec[2]:#x}) seq={rec[0]}"))
        if off is None:
            raise SimHeapExhausted(
                f"triton_dist sim: symmetric heap exhausted: create_tensor({list(shape)}, {dtype}) needs {need} bytes, "
                f"rank {ctx.rank}'s partition has {ctx.alloc.free_bytes()} bytes free (largest block "
                f"{ctx.alloc.largest_free()}) of {ctx.heap_size}; raise TRITON_DIST_SIM_SYMMETRIC_SIZE (per-rank size, "
                f"e.g. 1G; currently from {ctx.heap_size_var}) or free tensors")
        ctx.alloc.commit(off, need)
        return off, self._view(ctx.rank, off, shape, dtype)

    def free_tensor(self, tensor: torch.Tensor) -> None:
        """Collective: every rank frees the same symmetric tensor (a barrier precedes the release)."""
        ctx = self.ctx
        start = tensor.untyped_storage().data_ptr()
        if ctx.owner_of(start) != ctx.rank:
            raise ValueError(f"free_tensor: tensor at {ctx.describe_addr(start)} was not created by this rank's "
                             f"create_tensor")
        off = start - ctx.base(ctx.rank)
        if off not in ctx.alloc.used:
            raise ValueError(f"free_tensor: offset {off:#x} is not a live allocation (double free?)")
        ctx.collective_check(
            _KIND_FREE, [off], "free_tensor",
            lambda rec: (f"free_tensor(offset={rec[2]:#x}) seq={rec[0]}" if rec[1] == _KIND_FREE else
                         f"create_tensor(nbytes={rec[3]}, dtype={_dtype_name(rec[4])}) seq={rec[0]}"))
        ctx.alloc.release(off)

    def barrier_all_on_stream(self, stream: Optional[object] = None) -> None:
        """All ranks meet (host-side; ``stream`` is ignored: CPU work is synchronous). Raises SimWaitTimeout
        naming the ranks that did not arrive within ``TRITON_DIST_SIM_WAIT_TIMEOUT``."""
        self.ctx.host_barrier()


def _zero(ctx: SimHeapContext, addr: int, nbytes: int) -> None:
    import ctypes

    ctypes.memset(addr, 0, nbytes)


def _global_src(group):
    import torch.distributed as dist

    if group is None:
        return 0
    return dist.get_global_rank(group, 0) if hasattr(dist, "get_global_rank") else 0


@atexit.register
def _finalize_at_exit():
    SimBackend().finalize()


__all__ = ["SimBackend", "SimHeapExhausted", "SimCollectiveMismatch"]
