"""conftest_sim.SimPools keeps at most ``max_procs`` rank processes alive: the least recently used pools are closed
first, the pool being handed out never (an uncapped set of pools ran the CI host out of memory on 2026-12-06)."""
import conftest_sim


class FakePool:
    def __init__(self, world_size, local_world_size=None, env=None):
        self.world_size, self.env, self.closed = world_size, env, False

    def close(self, grace_s=0.0):
        self.closed = True


def test_pools_are_capped_least_recently_used_first(monkeypatch):
    monkeypatch.setattr(conftest_sim, "RankPool", FakePool)
    pools = conftest_sim.SimPools(max_procs=6)
    a = pools.pool(2, env={"X": "1"})
    b = pools.pool(2, env={"X": "2"})
    assert pools.pool(2, env={"X": "1"}) is a  # reused, and now the most recent
    c = pools.pool(4)  # 2 + 2 + 4 > 6: the least recently used (b) goes
    assert b.closed and not a.closed and not c.closed
    d = pools.pool(1)  # 2 + 4 + 1 > 6: a goes
    assert a.closed and not c.closed and not d.closed
    big = pools.pool(8)  # larger than the cap alone: everything else goes, the new pool is still made
    assert c.closed and d.closed and not big.closed
    assert pools.pool(8) is big
    pools.close()
