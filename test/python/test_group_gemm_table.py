"""The measured dispatch table of ``ops.group_gemm`` (``kernels/group_gemm_table.json``): the shipped table and the
results it was written from, validation (each kind of bad entry names the file and the entry), the rows-per-expert
bucket, lookup, what ``group_gemm`` launches (:func:`select_group_config`: table, then the rule), the merge of a
``bench_group_gemm`` run (fastest wins, the margin keeps an incumbent, layer records and fp8 are not tilings), and
``bench_group_gemm.py --table-from``. No GPU."""
import copy
import json
import os
import subprocess
import sys

import pytest
import torch

from triton_dist.kernels import group_gemm_table as gt
from triton_dist.ops.moe_gemm import pick_group_config, select_group_config

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
H100 = "NVIDIA H100 80GB HBM3"

#: the bench_group_gemm results the shipped table was written from, in order (each --table-from merged into the last)
SHIPPED_FROM = ["benchmarks/results/2026-12-05-moe/group_gemm-20261205T142733Z.json",
                "benchmarks/results/2026-12-05-moe/group_gemm-20261205T142751Z.json",
                "benchmarks/results/2026-12-05-moe-h100/group_gemm-20261205T190609Z.json"]


def _entry(config="64x128x128x4x4", **kw):
    ent = {"config": config, "source": "results/x/group_gemm-1.json", "git_commit": "abc1234",
           "timestamp_utc": "20261205T000000Z", "us": 278.5, "grouped_mm_us": 303.0}
    ent.update(kw)
    return ent


def _table(entries):
    devices = {}
    for (dev, dt, shape, bucket), ent in entries.items():
        devices.setdefault(dev, {}).setdefault(dt, {}).setdefault(shape, {})[bucket] = ent
    return {"format": gt.GROUP_GEMM_TABLE_FORMAT, "devices": devices}


@pytest.fixture
def use_table(tmp_path, monkeypatch):
    def use(doc):
        path = tmp_path / "group_gemm_table.json"
        path.write_text(doc if isinstance(doc, str) else json.dumps(doc))
        monkeypatch.setenv(gt.GROUP_GEMM_TABLE_ENV, str(path))
        gt.GROUP_GEMM_TABLE._cache = None  # the next lookup reads it (and reports a bad one)
        return str(path)

    yield use
    monkeypatch.delenv(gt.GROUP_GEMM_TABLE_ENV, raising=False)
    gt.load_group_gemm_table(reload=True)


def test_shipped_table_is_what_its_results_give():
    """Rebuilding from the listed results reproduces the shipped table's entries (a hand edit, or a result file
    removed, fails here), and every entry names one of them."""
    with open(gt.GROUP_GEMM_TABLE_PATH) as f:
        shipped = json.load(f)
    parsed = gt.parse_group_gemm_table(shipped, gt.GROUP_GEMM_TABLE_PATH)
    assert parsed, "the shipped table is empty"
    doc = None
    for src in SHIPPED_FROM:
        with open(os.path.join(ROOT, src)) as f:
            doc, _ = gt.build_group_gemm_table(json.load(f), src, doc, margin=0.015)
    assert doc["devices"] == shipped["devices"]
    sources = {ent["source"] for dev in shipped["devices"].values() for dt in dev.values() for b in dt.values()
               for ent in b.values()}
    assert sources <= set(SHIPPED_FROM)


def test_rows_bucket():
    assert gt.rows_bucket(1024, 128) == 8
    assert gt.rows_bucket(8192, 128) == 64
    assert gt.rows_bucket(65536, 128) == 512
    assert gt.rows_bucket(1025, 128) == 16  # 8.01 rows per expert rounds up
    assert gt.rows_bucket(0, 128) == 1 and gt.rows_bucket(5, 0) == 8


@pytest.mark.parametrize("mutate,message", [
    (lambda d: d.update(format="triton_dist.group_gemm_table/0"), "format"),
    (lambda d: d["devices"][H100].update(int8={}), "unknown dtype"),
    (lambda d: d["devices"][H100]["bfloat16"].update({"128x1536": {}}), "ExNxK"),
    (lambda d: d["devices"][H100]["bfloat16"]["128x1536x2048"].update({"12": _entry()}), "power of two"),
    (lambda d: d["devices"][H100]["bfloat16"]["128x1536x2048"]["8"].update(config="64x128x128x4x4k2"), "config"),
    (lambda d: d["devices"][H100]["bfloat16"]["128x1536x2048"]["8"].update(config="oops"), "config"),
    (lambda d: d["devices"][H100]["bfloat16"]["128x1536x2048"]["8"].update(us=-1), ".us"),
    (lambda d: d["devices"][H100]["bfloat16"]["128x1536x2048"]["8"].pop("source"), "missing source"),
])
def test_bad_table_fails_loudly_naming_file_and_entry(use_table, mutate, message):
    doc = _table({(H100, "bfloat16", "128x1536x2048", "8"): _entry()})
    mutate(doc)
    path = use_table(doc)
    for _ in range(2):  # reported again by every later call, never half-loaded
        with pytest.raises(gt.GroupGemmTableError) as err:
            gt.load_group_gemm_table()
        assert path in str(err.value) and message in str(err.value), str(err.value)


def test_selection_is_table_then_rule(use_table):
    use_table(_table({(H100, "bfloat16", "128x1536x2048", "8"): _entry("128x128x64x8x3"),
                      (H100, "bfloat16", "128x1536x2048", "512"): _entry("64x64x64x4x2p")}))
    cfg, src = select_group_config(1024, 128, 1536, 2048, torch.bfloat16, H100)
    assert src == "table" and str(cfg) == "128x128x64x8x3"
    cfg, src = select_group_config(65536, 128, 1536, 2048, torch.bfloat16, H100)
    assert src == "table" and cfg.pointer_loads
    # another bucket, device, dtype or shape: the rule
    for args in ((8192, 128, 1536, 2048, torch.bfloat16, H100), (1024, 128, 1536, 2048, torch.float16, H100),
                 (1024, 128, 1536, 2048, torch.bfloat16, "NVIDIA H200"), (1024, 64, 1536, 2048, torch.bfloat16, H100)):
        cfg, src = select_group_config(*args)
        assert src == "rule" and cfg == pick_group_config(*args[:4], on_gpu=True), args
    # off GPU: the simulator's tiling, whatever the table says
    assert select_group_config(1024, 128, 1536, 2048, torch.bfloat16, None) == \
        (pick_group_config(1024, 128, 1536, 2048, on_gpu=False), "rule")


def test_block_scaled_calls_skip_an_entry_whose_k_step_spans_scale_blocks(use_table):
    f8 = torch.float8_e4m3fn
    use_table(_table({(H100, "float8_e4m3fn", "128x1536x2048", "512"): _entry("128x128x256x8x3")}))
    cfg, src = select_group_config(65536, 128, 1536, 2048, f8, H100, block_scaled=True)
    assert src == "rule" and cfg.BLOCK_K == 128


def _rec(tokens, rows, us, config="64x128x64x4x4", **kw):
    rec = {"name": "qwen3-30b-a3b", "projection": "gate_up", "tokens": tokens, "rows": rows, "experts": 128,
           "K": 2048, "N": 1536, "config": config, "us": us, "errors": {}}
    rec.update(kw)
    return rec


def _results(records, gpu=H100):
    return {"benchmark": "bench_group_gemm", "git_commit": "feed123", "timestamp_utc": "20261205T190609Z",
            "versions": {"gpu": gpu}, "records": records}


def test_build_picks_the_fastest_tiling_and_skips_what_is_not_one():
    doc = _results([_rec(128, 1024, {"ours": 288.0, "ours/64x128x128x4x4": 278.5, "ours/nk": 200.0,
                                      "ours/fp8": 100.0, "grouped_mm": 303.0}),
                    _rec(8192, 65536, {"ours": 720.0, "ours/128x256x64x8x3": 746.0, "ours/64x64x64x4x4": 600.0},
                         config="128x256x64x8x4", errors={"ours/64x64x64x4x4": "wrong result"}),
                    {"name": "qwen3-30b-a3b", "layer": True, "tokens": 128, "us": {"ours": 1.0}}])
    table, report = gt.build_group_gemm_table(doc, "r.json")
    ents = table["devices"][H100]["bfloat16"]["128x1536x2048"]
    assert ents["8"]["config"] == "64x128x128x4x4" and ents["8"]["grouped_mm_us"] == 303.0
    assert ents["512"]["config"] == "128x256x64x8x4" and ents["512"]["grouped_mm_us"] is None  # the rule's, timed
    assert len(report) == 2


def test_build_margin_keeps_an_incumbent_within_it():
    old = _table({(H100, "bfloat16", "128x1536x2048", "8"): _entry("64x128x64x4x4", us=290.0)})
    doc = _results([_rec(128, 1024, {"ours": 288.0, "ours/64x128x128x4x4": 285.0})])
    table, report = gt.build_group_gemm_table(copy.deepcopy(doc), "r.json", old, margin=0.015)
    assert table["devices"][H100]["bfloat16"]["128x1536x2048"]["8"]["config"] == "64x128x64x4x4"
    assert "kept" in report[0]
    table, _ = gt.build_group_gemm_table(doc, "r.json", old, margin=0.0)
    assert table["devices"][H100]["bfloat16"]["128x1536x2048"]["8"]["config"] == "64x128x128x4x4"


def test_table_from_json_cli(tmp_path):
    res = tmp_path / "group_gemm-20261205T190609Z.json"
    res.write_text(json.dumps(_results([_rec(1024, 8192, {"ours": 329.4, "ours/64x128x128x4x4": 304.7})])))
    out = tmp_path / "table.json"
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))
    cmd = [sys.executable, os.path.join(ROOT, "benchmarks", "bench_group_gemm.py"), "--table-from", str(res),
           "--table-out", str(out)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "bucket 64): 64x128x128x4x4 304.7 us" in proc.stdout
    parsed = gt.parse_group_gemm_table(json.loads(out.read_text()), str(out))
    assert str(parsed[(H100, "bfloat16", 128, 1536, 2048, 64)]) == "64x128x128x4x4"
    out.write_text('{"format": "triton_dist.group_gemm_table/1", "devices": {"X": {"int8": {}}}}')
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode != 0 and "unknown dtype" in proc.stderr and "int8" in out.read_text()
