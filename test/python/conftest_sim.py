"""pytest plugin for simulator executions (load with ``pytest_plugins = ["conftest_sim"]`` or import the fixture).

Fixture ``sim_ranks`` (session scope): a pool manager. ``sim_ranks.run(world_size, fn, *args, timeout=60,
env=None, local_world_size=None, **kwargs)`` runs the module-level function ``fn`` on ``world_size`` simulator
rank processes and returns the per-rank results (index = rank). Processes are spawned once per
(world_size, local_world_size, env) and reused (each process already has torch, triton, a gloo group and the
symmetric heap; the heap is reset between calls), because spawning costs seconds per process on the 2-core CI
machine; one set of pools per pytest process (:func:`shared_pools`) keeps at most :data:`MAX_LIVE_PROCS` rank
processes alive, the least recently used pools closed first (memory: each rank process holds ~250 MB). A failing call raises ``RankError`` with each rank's traceback; if every rank still
answered, the processes are kept (heap reset), else (timeout, crash) they are killed and respawned on next use. Children see TRITON_INTERPRET=1 and TRITON_DIST_BACKEND=sim from birth.

Tip: put many checks in one ``fn`` when they share set-up; mark tests ``@pytest.mark.sim``.
"""
from __future__ import annotations

import os

import pytest

from triton_dist.runtime.sim.launch import RankPool


#: the most rank processes the pools of one pytest process keep alive (TRITON_DIST_SIM_POOL_MAX_PROCS overrides):
#: every (world size, env) pair has a pool of its own, and with tests handed out one at a time (xdist worksteal) a
#: worker meets most pairs, so without a cap each worker accumulated ~35 live rank processes; two workers ran a
#: 23 GB CI host out of memory on 2026-12-06 (a worker OOM-killed in the middle of a test)
MAX_LIVE_PROCS = int(os.environ.get("TRITON_DIST_SIM_POOL_MAX_PROCS", "12"))


class SimPools:
    """Live :class:`RankPool` objects keyed by (world_size, local_world_size, env), the least recently used closed
    first once they hold more than :data:`MAX_LIVE_PROCS` rank processes together (the pool in use is never
    closed)."""

    def __init__(self, max_procs: int = MAX_LIVE_PROCS):
        self._pools = {}  # insertion order = least recently used first
        self.max_procs = max_procs

    def pool(self, world_size: int, *, env=None, local_world_size=None) -> RankPool:
        key = (world_size, local_world_size or world_size, tuple(sorted((env or {}).items())))
        pool = self._pools.pop(key, None)
        if pool is None:
            live = sum(k[0] for k in self._pools) + world_size
            for old in list(self._pools):
                if live <= self.max_procs:
                    break
                self._pools.pop(old).close(grace_s=3.0)
                live -= old[0]
            pool = RankPool(world_size, local_world_size=local_world_size, env=env)
        self._pools[key] = pool  # most recently used last
        return pool

    def run(self, world_size: int, fn, *args, timeout: float = 60.0, env=None, local_world_size=None, **kwargs):
        return self.pool(world_size, env=env, local_world_size=local_world_size).run(fn, *args, timeout=timeout,
                                                                                     **kwargs)

    def run_checks(self, world_size: int, fn, *args, timeout: float = 60.0, env=None, **kwargs):
        """:meth:`run` for the rank functions that return ``(failures, checks)``: asserts every rank's list of
        failure strings is empty (the assertion names the rank and its failures) and returns each rank's
        ``checks``."""
        res = self.run(world_size, fn, *args, timeout=timeout, env=env, **kwargs)
        for rank, (fails, _) in enumerate(res):
            assert not fails, (rank, fails)
        return [checks for _, checks in res]

    def close(self):
        for p in self._pools.values():
            p.close(grace_s=3.0)
        self._pools.clear()


_SHARED: "SimPools | None" = None


def shared_pools() -> SimPools:
    """The one :class:`SimPools` of this pytest process. Test modules import the ``sim_ranks`` fixture, and pytest
    then keeps one session-scoped instance PER importing module: without a shared object every module held its own
    pools until the session ended (36 live rank processes under one xdist worker, 2026-12-06), whatever the cap."""
    global _SHARED
    if _SHARED is None:
        _SHARED = SimPools()
    return _SHARED


@pytest.fixture(scope="session")
def sim_ranks():
    pools = shared_pools()
    try:
        yield pools
    finally:
        pools.close()  # every importing module's instance closes the same pools at the session's end (idempotent)


def pytest_configure(config):
    config.addinivalue_line("markers", "sim: executes kernels on the CPU simulator (multi-process)")
