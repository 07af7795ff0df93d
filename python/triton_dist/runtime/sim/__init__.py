"""The CPU simulator runtime (the ``sim`` backend: docs/runtime.md, "Choosing the backend"; what the device API
does on it: docs/libshmem_device.md, "Simulator model").

Ranks are processes; the symmetric heap is one shared-memory segment that every rank maps whole, divided into
``world_size`` equal partitions (partition ``r`` is rank ``r``'s heap). A symmetric tensor lives at the same offset
in every partition, so ``symm_at`` is ``addr - base(my_rank) + base(peer)`` inside one process's mapping.
Kernels run through Triton's interpreter; the ``sim`` lowerings in ``triton_dist.backends.sim`` call
:func:`current` to reach the heap (a :class:`~triton_dist.runtime.sim.heap.SimHeapContext`).

Submodules (imported lazily; importing this package needs neither torch.distributed nor a process group):
``heap`` (context, allocator, barriers, spin-waits, errors), ``backend`` (``SimBackend``), ``launch``
(``run_ranks``, ``RankPool``, ``run_grid``).
"""
from .context import SimContext, current, is_active, set_current  # noqa: F401
