"""The dispatch-table mechanism every op family's measured table uses (``runtime/dispatch_table.py``): the file and its
environment override, the cache and reload, the format header and the errors that name the file and the entry, the
margin merge, the compact dump; the overlap table on it (header, override, schema errors, derivation in the library);
and the overlapped GEMMs' no-tuning path inside a CUDA-graph capture (simulated: the capture predicate patched)."""
import json
import types

import pytest
import torch

from triton_dist.runtime import dispatch_table as dt


class _Err(dt.TableError):
    pass


def _family(tmp_path, env="TRITON_DIST_TEST_TABLE"):
    """A toy family: body ``{"entries": {name: positive int}}``, parsed to ``{name: int}``."""
    def parse(doc, path):
        out = {}
        for name, v in doc["entries"].items():
            if not isinstance(v, int) or v <= 0:
                raise _Err(f"{path}: entries.{name}: expected a positive int, got {v!r}")
            out[name] = v
        return out

    return dt.DispatchTable(what="toy", path=str(tmp_path / "shipped.json"), env=env, format="toy/1",
                            key="entries", parse=parse, error=_Err)


def test_env_override_cache_and_reload(tmp_path, monkeypatch):
    fam = _family(tmp_path)
    monkeypatch.delenv(fam.env, raising=False)
    (tmp_path / "shipped.json").write_text(json.dumps({"format": "toy/1", "entries": {"a": 1}}))
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"format": "toy/1", "entries": {"a": 2, "b": 3}}))
    assert fam.path() == str(tmp_path / "shipped.json") and fam.load() == {"a": 1}
    monkeypatch.setenv(fam.env, str(other))
    assert fam.path() == str(other)
    assert fam.lookup("a") == 1  # cached until a reload
    assert fam.load(reload=True) == {"a": 2, "b": 3} and fam.lookup("b") == 3 and fam.lookup("z", 0) == 0
    assert fam.document()["entries"] == {"a": 2, "b": 3} and fam.loaded_path() == str(other)
    monkeypatch.setenv(fam.env, str(tmp_path / "absent.json"))
    assert fam.load(reload=True) == {} and fam.document() is None  # no file: the family's empty table


@pytest.mark.parametrize("text,words", [
    ("{not json", ["not valid JSON"]),
    (json.dumps({"format": "toy/0", "entries": {}}), ["format 'toy/0'", "expected 'toy/1'"]),
    (json.dumps({"format": "toy/1"}), ["not a toy table", "'entries'"]),
    (json.dumps({"format": "toy/1", "entries": {"a": -1}}), ["entries.a", "positive int"]),
])
def test_bad_files_name_the_file_and_the_entry_every_time(tmp_path, monkeypatch, text, words):
    fam = _family(tmp_path)
    bad = tmp_path / "bad.json"
    bad.write_text(text)
    monkeypatch.setenv(fam.env, str(bad))
    for _ in range(2):  # never half-loaded: a later lookup reports it again
        with pytest.raises(_Err) as ei:
            fam.lookup("a")
        msg = str(ei.value)
        assert str(bad) in msg and all(w in msg for w in words), msg


def test_build_write_and_compact_dump(tmp_path, monkeypatch):
    fam = _family(tmp_path)
    monkeypatch.setenv(fam.env, str(tmp_path / "t.json"))
    doc = fam.build({"a": 1, "b": 2}, "a note", source="run.json")
    assert doc["format"] == "toy/1" and doc["note"] == "a note" and doc["source"] == "run.json"
    with pytest.raises(_Err, match="new table: entries.b"):
        fam.build({"b": 0}, "bad")
    fam.write(doc)
    assert fam.load(reload=True) == {"a": 1, "b": 2}
    text = dt.dump({"format": "f", "rows": [{"x": 1, "y": [1, 2]}, {"z": {"w": 1}}]})
    assert '{"w": 1}' in text and json.loads(text) == {"format": "f", "rows": [{"x": 1, "y": [1, 2]}, {"z": {"w": 1}}]}
    with pytest.raises(_Err, match="new table"):  # a bad document is never written
        fam.write({"format": "toy/1", "note": "", "entries": {"a": "x"}})


def test_margin_keeps_the_incumbent_unless_beaten_by_more():
    assert dt.keep_incumbent(99.0, 100.0, 0.015)  # 1% faster: within the margin, the entry stays
    assert not dt.keep_incumbent(98.0, 100.0, 0.015)  # 2% faster: the newcomer wins
    assert not dt.keep_incumbent(99.9, 100.0, 0.0)  # margin 0: the fastest always wins
    assert not dt.keep_incumbent(99.0, None, 0.015)  # the incumbent was not timed in this run
    for bad in (-0.1, 0.5, True, "x"):
        with pytest.raises(ValueError, match="margin"):
            dt.check_margin(bad, "who")


def test_gemm_and_collectives_tables_share_the_mechanism():
    from triton_dist.kernels import gemm_table as gt
    from triton_dist.ops import collectives_table as ct

    for tab, err in ((gt.GEMM_TABLE, gt.GemmTableError), (ct.COLLECTIVES_TABLE, ct.CollectivesTableError)):
        assert isinstance(tab, dt.DispatchTable) and issubclass(err, dt.TableError)
    assert gt.GEMM_TABLE.env == "TRITON_DIST_GEMM_TABLE" and ct.COLLECTIVES_TABLE.env == "TRITON_DIST_COLLECTIVES_TABLE"


# ------------------------------------------------------------------------------------------------ overlap table
def test_shipped_overlap_table_has_a_header_and_parses():
    from triton_dist.ops import overlap_table as ot

    with open(ot.TABLE_PATH) as f:
        doc = json.load(f)
    assert doc["format"] == ot.TABLE_FORMAT and doc["status"] == "measured"
    assert ot.parse_overlap_table(doc, ot.TABLE_PATH) is doc
    assert ot.OVERLAP_TABLE.read(ot.TABLE_PATH)[1]["ops"].keys() == {"ag_gemm", "gemm_rs", "gemm_ar"}


def test_shipped_tables_are_stored_as_the_tools_write_them():
    """Every table in the tree is in dispatch_table.dump's compact form, so a sweep that rewrites one changes only the
    entries it measured (the overlap table was once indented by hand: its first rewrite would have churned 400 lines)."""
    from triton_dist.kernels import gemm_table
    from triton_dist.ops import collectives_table, overlap_table

    for path in (gemm_table.GEMM_TABLE_PATH, collectives_table.TABLE_PATH, overlap_table.TABLE_PATH):
        with open(path) as f:
            text = f.read()
        assert dt.dump(json.loads(text)) == text, f"{path} is not in dispatch_table.dump's form: rewrite it with dump"


@pytest.mark.parametrize("mutate,words", [
    (lambda d: d.pop("format"), ["format None", "triton_dist.overlap_table/1"]),
    (lambda d: d["ops"]["gemm_rs"]["2"][0].update(method="nope"), ["ops.gemm_rs.2[0]", "'nope'", "accepted"]),
    (lambda d: d["ops"]["gemm_ar"]["2"][0].update(eager={"method": "sm"}), ["ops.gemm_ar.2[0].eager", "'sm'"]),
    (lambda d: d["ops"]["ag_gemm"]["2"][0].update(max_m=0), ["ops.ag_gemm.2[0].max_m"]),
    (lambda d: d["configs"]["gemm_rs"]["2"][0].update(config="12x3"), ["configs.gemm_rs.2[0].config", "12x3"]),
    (lambda d: d["ops"].update(tp_mlp={}), ["ops.tp_mlp", "unknown op"]),
])
def test_overlap_table_errors_name_the_file_and_entry(tmp_path, monkeypatch, mutate, words):
    """The overlap table no longer falls back silently: a malformed file (through the environment override) raises
    naming the file and the entry."""
    from triton_dist.ops import overlap_table as ot

    with open(ot.TABLE_PATH) as f:
        doc = json.load(f)
    mutate(doc)
    bad = tmp_path / "overlap.json"
    bad.write_text(json.dumps(doc))
    monkeypatch.setenv(ot.TABLE_ENV, str(bad))
    try:
        with pytest.raises(ot.OverlapTableError) as ei:
            ot.dispatch_table(reload=True)
        with pytest.raises(ot.OverlapTableError) as again:  # an auto call reports it too
            ot.select_rule("gemm_rs", 2, 4096, True, 4096, 3584)
        assert str(again.value) == str(ei.value)
        msg = str(ei.value)
        assert str(bad) in msg and all(w in msg for w in words), msg
    finally:
        monkeypatch.undo()
        ot.dispatch_table(reload=True)


def test_overlap_env_override_and_default(tmp_path, monkeypatch):
    from triton_dist.ops import overlap_table as ot

    table = {"format": ot.TABLE_FORMAT, "status": "measured", "ops": {"gemm_ar": {"2": [
        {"n": 64, "k": 32, "max_m": 16, "method": "ll"}, {"max_m": None, "method": "torch"}]}}}
    path = tmp_path / "overlap.json"
    path.write_text(json.dumps(table))
    monkeypatch.setenv(ot.TABLE_ENV, str(path))
    try:
        ot.dispatch_table(reload=True)
        assert ot.select_method("gemm_ar", 2, 8, True, 64, 32) == "ll"
        assert ot.select_method("gemm_ar", 2, 8, True, 128, 32) == "torch"
        assert ot.select_method("gemm_rs", 2, 8, True, 64, 32) == "fused"  # no rules for the op: fused
        monkeypatch.setenv(ot.TABLE_ENV, str(tmp_path / "absent.json"))
        assert ot.dispatch_table(reload=True) is ot.DEFAULT_TABLE
        assert ot.select_method("gemm_rs", 2, 1023, True) == "torch"
    finally:
        monkeypatch.undo()
        ot.dispatch_table(reload=True)


def test_overlap_table_build_merges_and_round_trips(tmp_path):
    """The library derives and merges (benchmarks only measure): a run's rules replace its shapes' rules, the old
    table's other shapes and ops stay, the document carries the header and passes the parser after a dump."""
    from triton_dist.ops import overlap_table as ot

    old = {"format": ot.TABLE_FORMAT, "status": "measured", "note": "", "ops": {
        "gemm_rs": {"2": [{"n": 8, "k": 8, "max_m": 64, "method": "torch"}, {"max_m": None, "method": "fused"}]},
        "ag_gemm": {"2": [{"max_m": None, "method": "ce"}]}}}
    recs = [{"op": "gemm_rs", "M": 128, "K_per_rank": 8, "N": 8,
             "results": {"ours/fused": 10.0, "ours/ce": 8.0, "torch_seq": 12.0}, "configs": {"ce": "64x64x64x4x4"}}]
    rules, configs = ot.method_rules(recs, 2)
    table = ot.build_overlap_table({"dispatch_rules": rules, "dispatch_configs": configs, "world_size": 2},
                                   "run.json", old)
    rs = table["ops"]["gemm_rs"]["2"]
    assert [(r.get("max_m"), r["method"]) for r in rs] == [(64, "torch"), (128, "ce"), (None, "fused")]
    assert table["ops"]["ag_gemm"] == old["ops"]["ag_gemm"] and table["format"] == ot.TABLE_FORMAT
    path = tmp_path / "t.json"
    ot.OVERLAP_TABLE.write(table, str(path))
    assert ot.OVERLAP_TABLE.read(str(path))[0] == table


def _rs_rule(m, method, **params):
    return {"n": 8, "k": 8, "max_m": m, "method": method, **params}


def _margin_case():
    """An old measured gemm_rs table and a run over its three shapes: at M=128 the winner (fused) beats the old rule
    (ce, timed too) by 1%, at M=256 by 10% (old: chunked with sub_chunks 2, timed as ``ours/chunked@s2``), at M=512
    by 0.5% over plain ce, but the old rule (ce with 4 pieces) was not timed."""
    from triton_dist.ops import overlap_table as ot

    old = {"format": ot.TABLE_FORMAT, "status": "measured", "note": "", "ops": {"gemm_rs": {"2": [
        _rs_rule(128, "ce", us=10.1), _rs_rule(256, "chunked", sub_chunks=2, us=10.0), _rs_rule(512, "ce", pieces=4),
        {"max_m": None, "method": "fused"}]}},
        "configs": {"gemm_rs": {"2": [{"n": 8, "k": 8, "max_m": 128, "config": "64x64x64x4x4"}]}}}
    recs = [{"op": "gemm_rs", "M": m, "K_per_rank": 8, "N": 8, "results": res, "configs": {"fused": "128x64x64x4x3"}}
            for m, res in ((128, {"ours/fused": 9.9, "ours/ce": 10.0, "torch_seq": 20.0}),
                           (256, {"ours/fused": 9.0, "ours/chunked@s2": 10.0, "ours/ce": 11.0, "torch_seq": 20.0}),
                           (512, {"ours/fused": 9.95, "ours/ce": 10.0, "torch_seq": 20.0}))]
    rules, configs = ot.method_rules(recs, 2)
    return old, {"dispatch_rules": rules, "dispatch_configs": configs, "world_size": 2, "records": recs}


def test_overlap_table_margin_keeps_a_timed_incumbent_within_noise():
    """build_overlap_table(margin=): a shape's old rule stays, with its tiling, where the run timed its method (with
    its parameters) and the winner is not faster by more than the margin; a winner faster by more, or an old rule the
    run did not time, replaces it; margin 0 (the default) is the merge without it; the margin is checked."""
    import copy

    from triton_dist.ops import overlap_table as ot

    old, doc = _margin_case()
    fresh = ot.build_overlap_table(doc, "run.json", copy.deepcopy(old))
    assert [(r.get("max_m"), r["method"]) for r in fresh["ops"]["gemm_rs"]["2"]][:3] == [
        (128, "fused"), (256, "fused"), (512, "fused")]
    assert ot.build_overlap_table(doc, "run.json", copy.deepcopy(old), margin=0.0) == fresh
    table = ot.build_overlap_table(doc, "run.json", copy.deepcopy(old), margin=0.015)
    rs = table["ops"]["gemm_rs"]["2"]
    assert rs[0] == _rs_rule(128, "ce", us=10.1)  # 1% is noise: the old rule, untouched
    assert rs[1]["method"] == "fused" and rs[2]["method"] == "fused"  # 10% faster; ce@p4 not timed
    assert rs[3:] == fresh["ops"]["gemm_rs"]["2"][3:]  # the generic rules as without a margin
    cfgs = {c["max_m"]: c["config"] for c in table["configs"]["gemm_rs"]["2"]}
    assert cfgs == {128: "64x64x64x4x4", 256: "128x64x64x4x3", 512: "128x64x64x4x3"}  # the kept shape's old tiling
    # the incumbent is matched with its parameters: timed as chunked@s2 within the margin, chunked@s2 stays
    doc["records"][1]["results"]["ours/chunked@s2"] = 9.1
    table = ot.build_overlap_table(doc, "run.json", copy.deepcopy(old), margin=0.015)
    assert table["ops"]["gemm_rs"]["2"][1] == _rs_rule(256, "chunked", sub_chunks=2, us=10.0)
    assert ot.build_overlap_table({**doc, "records": []}, "run.json", copy.deepcopy(old), margin=0.2) == \
        ot.build_overlap_table({**doc, "records": []}, "run.json", copy.deepcopy(old))  # no timings: no keeping
    for bad in (-0.1, 0.5, True, "0.01"):
        with pytest.raises(ValueError, match=r"build_overlap_table: margin=.* must be a fraction in \[0, 0.5\)"):
            ot.build_overlap_table(doc, "run.json", copy.deepcopy(old), margin=bad)


# ------------------------------------------------------------------------------------------------ capture
def test_ce_own_gemm_in_capture_launches_untuned(monkeypatch):
    """gemm_rs ``ce``: a first call of a shape inside a capture launches the deterministic tiling (no tuning, no
    scratch allocation); outside a capture it tunes once, then launches the tuned kernel."""
    from triton_dist.kernels import gemm_config as gc
    from triton_dist.kernels import gemm_rs as rsk
    from triton_dist.ops import overlap_tuner as tu

    calls = []

    class Rec:
        def __init__(self, name):
            self.name = name

        def __getitem__(self, grid):
            return lambda *args, **kw: calls.append((self.name, kw))

    monkeypatch.setattr(rsk, "rs_own_gemm_kernel", Rec("fixed"))
    monkeypatch.setattr(rsk, "rs_own_gemm_autotuned", lambda: Rec("autotuned"))
    ctx = types.SimpleNamespace(world_size=2, rank=0, num_sms=4, device=torch.device("cpu"), cc=90,
                                _ce_tuned=set(), ce_count=torch.zeros(1, dtype=torch.int64), _use_tma=lambda: False)
    own, b = torch.zeros(256, 64, dtype=torch.bfloat16), torch.zeros(64, 128, dtype=torch.bfloat16)
    out, stage, flags = torch.empty(256, 128, dtype=torch.bfloat16), torch.zeros(2 * 256 * 128), torch.zeros(8)
    monkeypatch.setattr(tu, "_capturing", lambda: True)
    tu._rs_own_gemm(ctx, own, b, out, stage, flags, 256 * 128, 2)
    want = gc.pick_config(256, 128, 64, on_gpu=True, elem_bytes=2, cc=90)
    assert [c[0] for c in calls] == ["fixed"] and not ctx._ce_tuned
    assert calls[0][1]["BLOCK_M"] == want.BLOCK_M and calls[0][1]["num_stages"] == want.num_stages
    calls.clear()
    monkeypatch.setattr(tu, "_capturing", lambda: False)
    tu._rs_own_gemm(ctx, own, b, out, stage, flags, 256 * 128, 2)
    assert [c[0] for c in calls] == ["autotuned", "autotuned"] and len(ctx._ce_tuned) == 1  # tune, then the launch
    calls.clear()
    monkeypatch.setattr(tu, "_capturing", lambda: True)
    tu._rs_own_gemm(ctx, own, b, out, stage, flags, 256 * 128, 2)
    assert [c[0] for c in calls] == ["autotuned"]  # tuned before the capture: the tuned kernel, captured


def test_fp8_scale_in_capture(monkeypatch):
    """ag_gemm's fp8 scales inside a capture: a float becomes a device fill (no host copy); a tensor on another
    device is refused in one line saying what to pass."""
    from triton_dist.ops import overlap_context as oc

    monkeypatch.setattr(oc, "_capturing", lambda: True)
    s = oc._scale_tensor("ag_gemm", 0.5, 4.0, True, torch.device("cpu"))
    assert s.tolist() == [2.0]
    with pytest.raises(ValueError, match=r"scale_a is on cpu; inside a CUDA-graph capture a scale must be a float"):
        oc._scale_tensor("ag_gemm", torch.tensor([0.5]), 4.0, True, torch.device("meta"))
