"""The torch-facing collective API on the simulator: argument validation before launch, context fingerprints,
torch.library registration (real, fake, torch.compile), auto selection with NCCL fallback, check_peers, and a
cross-rank size mismatch turning into an error rather than a hang."""
import pytest

import _collectives_sim_work as work
from conftest_sim import sim_ranks  # noqa: F401  (fixture)
from triton_dist.runtime.sim.launch import RankError

pytestmark = pytest.mark.sim


def test_api_checks(sim_ranks):  # noqa: F811
    res = sim_ranks.run(2, work.api_checks, timeout=600, env={"TRITON_DIST_SIM_WAIT_TIMEOUT": "60"})
    for rank, fails in enumerate(res):
        assert not fails, (rank, fails)


def test_size_mismatch_is_an_error(sim_ranks):  # noqa: F811
    with pytest.raises(RankError) as ei:
        sim_ranks.run(2, work.size_mismatch, timeout=120, env={"TRITON_DIST_SIM_WAIT_TIMEOUT": "3"})
    msg = str(ei.value)
    assert "wait" in msg.lower() and ("timed out" in msg.lower() or "timeout" in msg.lower()), msg[-2000:]


def test_ops_importable_without_runtime():
    import torch

    from triton_dist import ops

    assert hasattr(torch.ops.triton_dist, "all_reduce")
    with pytest.raises(RuntimeError, match="initialize_distributed"):
        ops.create_allreduce_ctx(16, torch.bfloat16)


def test_every_context_names_its_real_factory_in_errors():
    """Construction errors name the factory the user called (create_*_ctx for collectives, create_*_context for
    the overlapped GEMMs); each named factory exists in the module that defines the context."""
    import sys

    from triton_dist.ops import collectives as C
    from triton_dist.ops import overlap as O

    classes = [C.AllGatherContext, C.ReduceScatterContext, C.AllReduceContext, C.P2PContext, O.AGGemmContext,
               O.GemmRSContext, O.GemmARContext]
    for cls in classes:
        assert callable(getattr(sys.modules[cls.__module__], cls.factory_name())), cls.factory_name()
    assert O.GemmRSContext.factory_name() == "create_gemm_rs_context"
