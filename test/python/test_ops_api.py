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
    """Issue 15 point 2: ranks that disagree are reported at once (not after the 60 s wait timeout), in one line
    naming the op, the rank and both calls' size tags (element counts mod 2**24), with the fix."""
    with pytest.raises(RankError) as ei:
        sim_ranks.run(2, work.size_mismatch, timeout=30, env={"TRITON_DIST_SIM_WAIT_TIMEOUT": "60"})
    for rank, (mine, peer) in enumerate(((100, 101), (101, 100))):
        typ, msg, _ = ei.value.failures[rank]
        assert typ == "SimSignalMismatch" and "\n" not in msg, (typ, msg)
        assert msg.startswith(f"all_reduce: [triton_dist sim] rank {rank}: ranks disagree in kernel "
                              f"allreduce_one_shot_kernel"), msg
        assert f"waits for call #1 with tag {mine} (this rank's" in msg and "element count mod 2**24" in msg, msg
        assert f"the peer's signal for the same call carries tag {peer}" in msg, msg
        assert "every rank must make the same calls with the same shapes" in msg and "check_peers" in msg, msg


def test_every_op_reports_a_rank_mismatch_at_once(sim_ranks):  # noqa: F811
    res = sim_ranks.run(2, work.rank_mismatch_every_op, timeout=120, env={"TRITON_DIST_SIM_WAIT_TIMEOUT": "60"})
    for rank in range(2):
        for case, got in res[rank].items():
            op = case.split()[0].split("/")[0]
            if case == "send/recv":
                if rank == 0:  # the sender does not wait for the receiver's size: only the receiver can tell
                    assert got is None, got
                    continue
                op = "recv"
            assert got is not None, (rank, case)
            typ, msg, took = got
            assert typ == "SimSignalMismatch" and "\n" not in msg, (rank, case, typ, msg)
            assert msg.startswith(f"{op}: [triton_dist sim] rank {rank}: ranks disagree"), (rank, case, msg)
            # reduce_scatter / two_shot_pipe tag the per-rank element count they exchange: 2 * 100 or 2 * 101
            tags = {f"tag {t}" for t in (100, 101, 200, 202)}
            assert sum(t in msg for t in tags) == 2, (rank, case, msg)
            assert took < 20, (rank, case, took)


def test_dead_peer_is_named_within_seconds(sim_ranks):  # noqa: F811
    """Issue 15 point 2: a peer whose process has exited is named (rank, pid) with the waiting op within a second
    or two, instead of the 60 s wait timeout."""
    with pytest.raises(RankError) as ei:
        sim_ranks.run(2, work.peer_exits, timeout=60, env={"TRITON_DIST_SIM_WAIT_TIMEOUT": "60"})
    assert ei.value.failures[1][0] == "ProcessDied", ei.value.failures
    # rank 0's error arrives at all only within the pool's 5 s grace after rank 1's death (else: RankTimeout)
    typ, msg, _ = ei.value.failures[0]
    assert typ == "SimPeerExited" and "\n" not in msg, (typ, msg)
    assert msg.startswith("all_reduce: [triton_dist sim] rank 0: dl.wait("), msg
    assert "in kernel allreduce_one_shot_kernel waits for peer rank 1, whose process (pid " in msg, msg
    assert "has exited" in msg and "launch with torchrun" in msg, msg


def test_ops_importable_without_runtime():
    import torch

    from triton_dist import ops

    for name in ("all_gather", "reduce_scatter", "all_reduce", "send", "recv", "ag_gemm", "gemm_rs", "gemm_ar",
                 "matmul", "group_gemm", "moe_route", "moe_combine", "pre_attn_all_to_all", "post_attn_all_to_all",
                 "flash_attention", "sp_ag_attention", "sp_flash_decode"):
        assert hasattr(torch.ops.triton_dist, name), name
    with pytest.raises(RuntimeError, match="initialize_distributed"):
        ops.create_allreduce_ctx(16, torch.bfloat16)
    with pytest.raises(RuntimeError, match="initialize_distributed"):
        ops.create_ag_gemm_context(max_m=16, k=32)
    with pytest.raises(RuntimeError, match="initialize_distributed"):
        ops.create_ulysses_ctx(1, 16, 4, 64)
    with pytest.raises(RuntimeError, match="initialize_distributed"):
        ops.create_sp_attention_ctx(1, 16, 1, 64)


def test_ops_exports_every_family():
    """docs/ops.md: triton_dist.ops exports every family (contexts, canonical and reference factory names, calls),
    matmul and get_context, and nothing in __all__ is missing; each call is ONE function whatever the import path
    (the per-op module, the ops.overlap facade, triton_dist.ops), which itself emits its torch.library op under
    torch.compile."""
    import importlib

    from triton_dist import ops
    from triton_dist.ops import overlap

    families = {
        "collectives": ["AllGatherContext", "ReduceScatterContext", "AllReduceContext", "all_gather",
                        "reduce_scatter", "all_reduce"],
        "p2p": ["P2PContext", "send", "recv"],
        "overlap": ["AGGemmContext", "GemmRSContext", "GemmARContext", "create_ag_gemm_context",
                    "create_gemm_rs_context", "create_gemm_ar_context", "ag_gemm", "gemm_rs", "gemm_ar"],
        "matmul": ["matmul"],
        "moe": ["group_gemm", "moe_silu_gate", "moe_route", "moe_combine", "MoERouting"],
        "moe_ep": ["EPContext", "EPHandle", "create_ep_context", "create_ep_ctx", "ep_dispatch", "ep_combine"],
        "moe_tp": ["TPMoEContext", "TPMoEHandle", "create_tp_moe_context", "create_tp_moe_ctx", "ag_group_gemm",
                   "group_gemm_rs"],
        "attention": ["flash_decode", "merge_attention_partials", "flash_attention", "flash_attention_partial",
                      "merge_chunk_partials"],
        "sp_attention": ["SPDecodeContext", "create_sp_decode_context", "create_sp_decode_ctx", "sp_flash_decode",
                         "SPAttentionContext", "create_sp_attention_context", "create_sp_attention_ctx",
                         "sp_ag_attention"],
        "ulysses": ["UlyssesContext", "create_ulysses_context", "create_ulysses_ctx", "pre_attn_all_to_all",
                    "post_attn_all_to_all"]}
    for fam in ("allgather", "reduce_scatter", "allreduce", "p2p"):
        families["collectives"] += [f"create_{fam}_context", f"create_{fam}_ctx"]
        assert getattr(ops, f"create_{fam}_context") is getattr(ops, f"create_{fam}_ctx")
    wanted = {n for names in families.values() for n in names} | {"get_context"}
    assert wanted == set(ops.__all__), set(ops.__all__) ^ wanted
    assert len(ops.__all__) == len(set(ops.__all__))
    for name in ops.__all__:
        assert getattr(ops, name) is not None, name
    for name, module in (("ag_gemm", "allgather_gemm"), ("gemm_rs", "gemm_reduce_scatter"),
                         ("gemm_ar", "gemm_allreduce"), ("matmul", "gemm"), ("group_gemm", "moe_gemm"),
                         ("moe_silu_gate", "moe_gemm")):
        impl = getattr(importlib.import_module(f"triton_dist.ops.{module}"), name)
        assert getattr(ops, name) is impl, name
        assert name in ("matmul", "group_gemm", "moe_silu_gate") or getattr(overlap, name) is impl, name


def test_capacity_aliases_and_the_fallback_method_name():
    """docs/ops.md: one capacity given once, under its name or one alias; None / "torch" / "nccl" resolve to the
    context's method and the family's own spelling of the torch fallback."""
    from types import SimpleNamespace

    from triton_dist.ops.context import Context, capacity_arg

    assert capacity_arg("f", "max_m", 8, {"max_M": None}) == 8
    assert capacity_arg("f", "max_m", None, {"max_m_per_rank": 4, "max_M": None}) == 4
    with pytest.raises(ValueError, match="max_m and max_M name the same capacity"):
        capacity_arg("f", "max_m", 8, {"max_M": 8})
    with pytest.raises(TypeError, match="missing the capacity argument max_m"):
        capacity_arg("f", "max_m", None, {"max_M": None})
    for family, fallback in (("collectives", "nccl"), ("overlap", "torch")):
        ctx = SimpleNamespace(method="two_shot", fallback_method=fallback)
        assert Context._call_method(ctx, None) == "two_shot", family
        assert Context._call_method(ctx, "ll") == "ll", family
        assert Context._call_method(ctx, "torch") == Context._call_method(ctx, "nccl") == fallback, family
    from triton_dist.ops import collectives, overlap

    assert collectives.AllReduceContext.fallback_method == "nccl" and "nccl" in collectives.AR_METHODS
    assert overlap.AGGemmContext.fallback_method == "torch" and "torch" in overlap.AG_GEMM_METHODS


def test_output_dtype_is_the_references_name_for_gemm_rs_dtype(monkeypatch):
    """docs/ops.md: create_gemm_rs_context takes the reference's ``output_dtype`` for ``dtype`` (bf16 when neither
    is given, one value when both agree); two different values raise ValueError naming both, before any context
    is built."""
    from types import SimpleNamespace

    import torch

    from triton_dist.ops import gemm_reduce_scatter as rs
    from triton_dist.ops.context import alias_arg

    ctx_cls = rs.GemmRSContext
    built = []
    monkeypatch.setattr(rs, "GemmRSContext", lambda max_m, n, dtype, **kw: built.append((max_m, n, dtype, kw)))
    bf, f16 = torch.bfloat16, torch.float16
    for kw, want in ((dict(), bf), (dict(dtype=f16), f16), (dict(output_dtype=f16), f16),
                     (dict(dtype=f16, output_dtype=f16), f16)):
        built.clear()
        rs.create_gemm_rs_context(8, 16, **kw)
        assert built == [(8, 16, want, {})], (kw, built)
    built.clear()
    rs.create_gemm_rs_context(max_M=8, n=16, output_dtype=f16, method="torch")
    assert built == [(8, 16, f16, {"method": "torch"})], built
    built.clear()
    with pytest.raises(ValueError, match=r"create_gemm_rs_context: dtype=torch.bfloat16 and "
                                         r"output_dtype=torch.float16 name the same argument"):
        rs.create_gemm_rs_context(8, 16, bf, output_dtype=f16)
    assert built == []
    assert alias_arg("f", "dtype", None, "output_dtype", None, bf) is bf
    assert ctx_cls.output_dtype.fget(SimpleNamespace(dtype=f16)) is f16  # the context reads it back by both names


def test_every_context_names_its_real_factory_in_errors():
    """Construction errors name the factory the user called (create_*_ctx for collectives, create_*_context for
    the overlapped GEMMs); each named factory exists in the module that defines the context."""
    import sys

    from triton_dist.ops import collectives as C
    from triton_dist.ops import overlap as O

    from triton_dist.ops.attention_ulysses import UlyssesContext

    classes = [C.AllGatherContext, C.ReduceScatterContext, C.AllReduceContext, C.P2PContext, O.AGGemmContext,
               O.GemmRSContext, O.GemmARContext, UlyssesContext]
    for cls in classes:
        assert callable(getattr(sys.modules[cls.__module__], cls.factory_name())), cls.factory_name()
    assert O.GemmRSContext.factory_name() == "create_gemm_rs_context"
