"""The GPU tier's shared fixtures: one torch.distributed + NVSHMEM setup per pytest process
(``_torchrun_shmem.shmem_session``), which the modules' ``group = shmem_group(seed)`` fixtures request."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from _torchrun_shmem import shmem_session  # noqa: E402,F401  (a fixture: pytest finds it by name)
