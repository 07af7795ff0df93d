"""The measured dispatch table of ``ops.matmul`` (``kernels/gemm_table.json``): the shipped table, loading
and validation (each kind of bad entry names the file and the entry), lookup by device / dtype / exact shape, what
``matmul`` would launch (:func:`select_matmul_launch`), the one launch helper shared with ``benchmarks/bench_gemm.py``
(a recording stand-in for the kernel: no GPU), and ``bench_gemm.py --table-from`` / ``--help``."""
import copy
import dataclasses
import functools
import importlib.util
import json
import os
import subprocess
import sys

import pytest
import torch

from triton_dist.kernels import gemm_config as gc
from triton_dist.kernels import gemm_table as gt

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
BENCH = os.path.join(ROOT, "benchmarks")
H200 = "NVIDIA H200"


def _entry(config="128x128x64x4x4", flatten=True, tma_store=False, **kw):
    ent = {"config": config, "flatten": flatten, "tma_store": tma_store, "source": "results/x/gemm-1.json",
           "git_commit": "abc1234", "timestamp_utc": "20261201T000000Z", "us": 179.3, "cublas_us": 186.1}
    ent.update(kw)
    return ent


def _table(entries=None):
    """A table document from {(device, dtype, "MxNxK"): entry}."""
    entries = entries if entries is not None else {
        (H200, "bfloat16", "2048x7168x4096"): _entry(),
        (H200, "bfloat16", "4096x7168x4096"): _entry("128x256x64x8x3", True, True),
        (H200, "float16", "2048x7168x4096"): _entry("128x256x64x8x4", False, False)}
    devices = {}
    for (dev, dt, shape), ent in entries.items():
        devices.setdefault(dev, {}).setdefault(dt, {})[shape] = ent
    return {"format": gt.GEMM_TABLE_FORMAT, "devices": devices}


@pytest.fixture
def use_table(tmp_path, monkeypatch):
    """Point $TRITON_DIST_GEMM_TABLE at a written table (doc or raw text); the cache is reloaded after."""
    def use(doc):
        path = tmp_path / "gemm_table.json"
        path.write_text(doc if isinstance(doc, str) else json.dumps(doc))
        monkeypatch.setenv(gt.GEMM_TABLE_ENV, str(path))
        gt.load_gemm_table(reload=True)
        return str(path)

    yield use
    monkeypatch.delenv(gt.GEMM_TABLE_ENV, raising=False)
    gt.load_gemm_table(reload=True)


#: the bench_gemm results the shipped table was written from, in order (--table-from merges each into the last)
SHIPPED_FROM = ["benchmarks/results/2026-12-01-gemm-quality/gemm-20261201T052614Z.json",
                "benchmarks/results/2026-12-01-gemm-quality/with-table-8066b6b/gemm-20261201T055228Z.json",
                # decode shapes (M <= 128): the 16-row and the 32-128-row sweeps
                "benchmarks/results/2026-12-01-decode-gemm/gemm-20261201T183601Z.json",
                "benchmarks/results/2026-12-01-decode-gemm/gemm-20261201T183643Z.json",
                # M = 256-1024: the tilings sweep, then a second one with split-K and 64/128-row variants
                "benchmarks/results/2026-12-01-decode-gemm/mid-m/gemm-20261201T184417Z.json",
                "benchmarks/results/2026-12-01-decode-gemm/mid-m/gemm-20261201T184458Z.json",
                # the validation run of the table and the decode rule at M <= 1024 (2026-12-02, commit 2b23218): the
                # autotuner was fastest at 4 of the M = 256-1024 shapes (entries removed)
                "benchmarks/results/2026-12-01-decode-gemm/final-2b23218/gemm-20261202T062741Z.json",
                # 5-6 stage 128x128 tilings at M = 256-4096 (cuBLAS's tiling at M = 256): entries where one won
                "benchmarks/results/2026-12-01-decode-gemm/stages-33afd5a/gemm-20261202T070358Z.json",
                # its validation run, the 6-stage tiling timed beside each entry
                "benchmarks/results/2026-12-01-decode-gemm/val-5606a58/gemm-20261202T070751Z.json",
                # the 12 M >= 2048 shapes again with the 6-stage tiling beside each entry (the GEMM-quality check)
                "benchmarks/results/2026-12-01-decode-gemm/quality-c64ccaf/gemm-20261202T074455Z.json"]


def test_shipped_table_parses_and_names_its_source():
    with open(gt.GEMM_TABLE_PATH) as f:
        doc = json.load(f)
    parsed = gt.parse_gemm_table(doc, gt.GEMM_TABLE_PATH)
    assert len(parsed) == 31
    for (dev, dt, M, N, K), var in parsed.items():
        ent = doc["devices"][dev][dt][f"{M}x{N}x{K}"]
        assert ent["source"] in SHIPPED_FROM and os.path.exists(os.path.join(ROOT, ent["source"])), ent["source"]
        assert ent["us"] <= ent["auto_us"]  # every entry was at least as fast as auto in its run
    # the shape: the autotuner's 0.931x cuBLAS against the fixed 128x128x64x4x4/flat's 1.038x (first run),
    # kept by the second run (table 185.3 us, 1.034x); the 6-stage tiling beat it in the validation run (163.2 us
    # against 168.7, 1.005x cuBLAS), its TMA-store form in the quality run (178.3 us, 1.055x)
    assert str(parsed[(H200, "bfloat16", 2048, 7168, 4096)]) == "128x128x64x4x6/flat+tma"
    # the second run: a fixed variant was fastest at 8192x4096x3584 (entry added; the quality run's 6-stage tiling
    # replaced it); the stages run: the autotuner at 2048x4096x3584 (entry removed), a fixed variant at
    # 2048x8192x7168 (where the second run had removed one; the later runs' 6-stage tiling replaced it)
    assert (H200, "bfloat16", 2048, 4096, 3584) not in parsed
    assert str(parsed[(H200, "bfloat16", 2048, 8192, 7168)]) == "128x128x64x4x6/flat+tma"
    assert str(parsed[(H200, "bfloat16", 256, 8192, 7168)]) == "128x128x64x4x6/flat"
    assert str(parsed[(H200, "bfloat16", 8192, 4096, 3584)]) == "128x128x64x4x6/flat+tma"  # quality run: 0.991x
    # decode: pointer loads won at every measured M <= 128 shape but one; split-K where 64 tiles leave SMs idle
    assert str(parsed[(H200, "bfloat16", 1, 8192, 3584)]) == "16x64x128x4x4p/plain"
    assert str(parsed[(H200, "bfloat16", 1, 4096, 14336)]) == "16x64x128x4x4pk2/plain"
    # the validation run: the autotuner beat the entry at 1024x7168x4096 (as in the run before it): removed
    assert (H200, "bfloat16", 1024, 7168, 4096) not in parsed
    rebuilt = None
    for src in SHIPPED_FROM:
        with open(os.path.join(ROOT, src)) as f:
            rebuilt, _ = gt.build_gemm_table(json.load(f), src, rebuilt)
    assert rebuilt == doc  # the committed table is what --table-from writes from the committed results


def test_good_table_parses_to_variants():
    parsed = gt.parse_gemm_table(_table(), "t.json")
    assert parsed == {(H200, "bfloat16", 2048, 7168, 4096): gc.GemmVariant(gc.TileConfig(128, 128, 64, 8, 4, 4), True,
                                                                          False),
                      (H200, "bfloat16", 4096, 7168, 4096): gc.GemmVariant(gc.TileConfig(128, 256, 64, 8, 8, 3), True,
                                                                          True),
                      (H200, "float16", 2048, 7168, 4096): gc.GemmVariant(gc.TileConfig(128, 256, 64, 8, 8, 4))}
    # variant names round-trip as bench_gemm writes them (ours/<tiling>/<form>)
    for name in ("128x128x64x4x4/plain", "128x256x64x8x3/flat+tma", "64x128x64x4x4/tma", "128x128x64x8x4/flat"):
        assert str(gc.GemmVariant.parse(name)) == name
    # pointer-load (p) and split-K (kS) tilings: the forms their launches have
    for name in ("16x64x128x4x4p/plain", "16x64x128x4x4p/flat", "64x128x128x4x4k2/plain", "16x64x128x4x4pk4/plain"):
        assert str(gc.GemmVariant.parse(name)) == name
    for name, why in (("64x128x128x4x4k2/flat", "plain only"), ("16x64x128x4x4p/tma", "plain, flat only"),
                      ("128x128x64x4x4f/plain", "no f suffix")):
        with pytest.raises(ValueError, match=why):
            gc.GemmVariant.parse(name)


def _set(path, value):
    def mutate(doc):
        node = doc
        for key in path[:-1]:
            node = node[key]
        if value is KeyError:
            del node[path[-1]]
        else:
            node[path[-1]] = value
    return mutate


def _both(first, second):
    def mutate(doc):
        first(doc)
        second(doc)
    return mutate


_ENT = ("devices", H200, "bfloat16", "2048x7168x4096")
BAD = [
    ("format", _set(("format", ), "triton_dist.gemm_table/0"), "format 'triton_dist.gemm_table/0', expected"),
    ("no-devices", _set(("devices", ), KeyError), "not a GEMM table"),
    ("device-not-object", _set(("devices", H200), []), f"devices.'{H200}': expected a device name"),
    ("dtype", _set(("devices", H200, "float32"), {}), "devices.NVIDIA H200.float32: unknown dtype"),
    ("shapes-not-object", _set(("devices", H200, "bfloat16"), ["x"]), "expected an object keyed by shape"),
    ("shape-key", _set(("devices", H200, "bfloat16", "2048x7168"), _entry()), ".2048x7168: shape key must be MxNxK"),
    ("shape-zero", _set(("devices", H200, "bfloat16", "0x7168x4096"), _entry()), ".0x7168x4096: shape key"),
    ("entry-not-object", _set(_ENT, "128x128x64x4x4"), ".2048x7168x4096: expected an object with config"),
    ("missing-provenance", _set(_ENT + ("source", ), KeyError), ".2048x7168x4096: missing source"),
    ("missing-form", _set(_ENT + ("tma_store", ), KeyError), ".2048x7168x4096: missing tma_store"),
    ("config-text", _set(_ENT + ("config", ), "128x128"), ".2048x7168x4096.config: tile config '128x128'"),
    ("config-type", _set(_ENT + ("config", ), 128), ".config: expected a tiling string"),
    ("config-flatten-suffix", _set(_ENT + ("config", ), "128x128x64x4x4f"), "no f suffix"),
    # the entry is flatten=True: a split-K tiling runs plain only; a pointer-load tiling cannot store through TMA
    ("split-k-flat", _set(_ENT + ("config", ), "16x64x128x4x4k2"), "runs as plain only, the entry says flat"),
    ("pointer-tma-store", _both(_set(_ENT + ("tma_store", ), True), _set(_ENT + ("config", ), "16x64x128x4x4p")),
     "runs as plain, flat only, the entry says flat+tma"),
    ("config-not-pow2", _set(_ENT + ("config", ), "96x128x64x4x4"), "powers of two"),
    ("flatten-type", _set(_ENT + ("flatten", ), "yes"), ".flatten: expected true or false, got 'yes'"),
    ("tma-store-type", _set(_ENT + ("tma_store", ), 1), ".tma_store: expected true or false, got 1"),
    ("us-zero", _set(_ENT + ("us", ), 0), ".us: expected a positive number of microseconds, got 0"),
    ("us-text", _set(_ENT + ("us", ), "179"), ".us: expected a positive number"),
    ("cublas-us-bool", _set(_ENT + ("cublas_us", ), True), ".cublas_us: expected a positive number"),
    ("source-empty", _set(_ENT + ("source", ), ""), ".source: expected a non-empty string, got ''"),
    ("commit-type", _set(_ENT + ("git_commit", ), 541836), ".git_commit: expected a non-empty string or null"),
    ("timestamp-null", _set(_ENT + ("timestamp_utc", ), None), ".timestamp_utc: expected a non-empty string, got None"),
]


@pytest.mark.parametrize("mutate,message", [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_bad_table_fails_loudly_naming_file_and_entry(use_table, mutate, message):
    doc = _table()
    mutate(doc)
    with pytest.raises(gt.GemmTableError, match="gemm_table.json") as exc:
        use_table(doc)
    assert message in str(exc.value)
    # never half-loaded, never silently empty: the next lookup raises again
    with pytest.raises(gt.GemmTableError):
        gt.gemm_table_lookup(H200, "bfloat16", 2048, 7168, 4096)


def test_table_loads_once_and_errors_on_bad_json(use_table, tmp_path):
    path = use_table(_table())
    assert str(gt.gemm_table_lookup(H200, torch.bfloat16, 2048, 7168, 4096)) == "128x128x64x4x4/flat"
    with open(path, "w") as f:
        f.write("{not json")
    assert gt.gemm_table_lookup(H200, "bfloat16", 2048, 7168, 4096) is not None  # cached: the file is read once
    with pytest.raises(gt.GemmTableError, match=r"gemm_table.json: not valid JSON"):
        gt.load_gemm_table(reload=True)
    os.remove(path)
    assert gt.load_gemm_table(reload=True) == {}  # a missing file is an empty table


def test_lookup_is_exact_device_dtype_and_shape(use_table):
    use_table(_table())
    assert str(gt.gemm_table_lookup(H200, torch.bfloat16, 2048, 7168, 4096)) == "128x128x64x4x4/flat"
    assert str(gt.gemm_table_lookup(H200, "float16", 2048, 7168, 4096)) == "128x256x64x8x4/plain"
    assert str(gt.gemm_table_lookup(H200, "bfloat16", 4096, 7168, 4096)) == "128x256x64x8x3/flat+tma"
    for miss in (("NVIDIA H100 80GB HBM3", "bfloat16", 2048, 7168, 4096), (H200, torch.float8_e4m3fn, 2048, 7168, 4096),
                 (H200, "bfloat16", 2048, 7168, 4104), (H200, "bfloat16", 2047, 7168, 4096),
                 (H200, "bfloat16", 4096, 4096, 7168)):
        assert gt.gemm_table_lookup(*miss) is None, miss


def test_matmul_selection_table_then_autotune(use_table):
    use_table(_table())
    sel = functools.partial(gt.select_matmul_launch, num_sms=132)
    hit = (2048, 7168, 4096, torch.bfloat16, H200)
    kind, var = sel(*hit, use_tma=True)
    assert kind == "table" and var == gc.GemmVariant(gc.TileConfig.parse("128x128x64x4x4"), True, False)
    assert sel(2048, 7168, 4096, torch.bfloat16, "NVIDIA A100-SXM4-80GB", use_tma=True) == ("autotune", None)
    assert sel(2048, 7168, 4096, torch.float8_e5m2, H200, use_tma=True) == ("autotune", None)
    assert sel(2048, 7168, 8192, torch.bfloat16, H200, use_tma=True) == ("autotune", None)
    # unchanged: off GPU, an explicit config, autotune=False; table=False is the autotuner alone
    cfg = gc.TileConfig.parse("64x128x64x4x4")
    assert sel(2048, 7168, 4096, torch.bfloat16, None, use_tma=False) == ("config", None)
    assert sel(*hit, use_tma=True, config=cfg) == ("config", cfg)
    assert sel(*hit, use_tma=True, autotune=False) == ("config", None)
    assert sel(*hit, use_tma=True, table=False) == ("autotune", None)
    # an entry runs only as it was measured: TMA loads; a TMA_STORE entry needs an output a descriptor can store to
    assert sel(*hit, use_tma=False) == ("autotune", None)
    assert sel(*hit, use_tma=True, tma_store_ok=False)[0] == "table"  # this entry stores through pointers
    tma_hit = (4096, 7168, 4096, torch.bfloat16, H200)
    assert sel(*tma_hit, use_tma=True)[1].tma_store
    assert sel(*tma_hit, use_tma=True, tma_store_ok=False) == ("autotune", None)
    # no entry and M <= SPLIT_K_MAX_M: the decode rule (table=False too); an entry still wins; above: autotune
    cfg16 = gc.TileConfig(16, 64, 128, 8, 4, 4, pointer_loads=True)
    assert sel(1, 8192, 3584, torch.bfloat16, H200, use_tma=True) == ("decode", cfg16)  # 128 tiles: no split
    assert sel(16, 4096, 14336, torch.bfloat16, H200, use_tma=True, table=False) == \
        ("decode", dataclasses.replace(cfg16, split_k=2))  # 64 tiles on 132 SMs
    assert sel(64, 8192, 7168, torch.bfloat16, H200, use_tma=False) == \
        ("decode", gc.TileConfig(64, 64, 128, 8, 4, 4, pointer_loads=True))
    assert sel(gc.SPLIT_K_MAX_M + 1, 8192, 7168, torch.bfloat16, H200, use_tma=True) == ("autotune", None)
    use_table(_table({(H200, "bfloat16", "16x4096x14336"): _entry(config="16x64x128x4x4pk4", flatten=False)}))
    assert sel(16, 4096, 14336, torch.bfloat16, H200, use_tma=True) == \
        ("table", gc.GemmVariant(gc.TileConfig(16, 64, 128, 8, 4, 4, split_k=4, pointer_loads=True)))


def test_decode_rule_covers_the_sms():
    for M, N, K, sms, want in ((1, 8192, 3584, 132, "16x64x128x4x4p"), (1, 4096, 14336, 132, "16x64x128x4x4pk2"),
                               (16, 1024, 7168, 132, f"16x64x128x4x4pk{gc.SPLIT_K_MAX}"),  # 16 tiles: capped
                               (64, 8192, 7168, 132, "64x64x128x4x4p"), (128, 8192, 3584, 132, "64x128x128x4x4p"),
                               (1, 64, 128, 132, "16x64x128x4x4p"),  # one K block: nothing to split
                               (100, 28672, 4096, 78, "64x128x128x4x4p")):
        assert str(gc.pick_decode_config(M, N, K, num_sms=sms)) == want, (M, N, K)
    with pytest.raises(ValueError, match="M <= 128"):
        gc.pick_decode_config(129, 8192, 8192, num_sms=132)


def _load_bench(monkeypatch):
    monkeypatch.syspath_prepend(BENCH)
    spec = importlib.util.spec_from_file_location("bench_gemm_for_test", os.path.join(BENCH, "bench_gemm.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


class _Recorder:
    """Stands in for ``gemm_kernel``: records ``kernel[grid](*args, **kwargs)``."""

    def __init__(self):
        self.calls = []

    def __getitem__(self, grid):
        return lambda *args, **kw: self.calls.append((grid, args, kw))


def test_bench_and_matmul_share_one_launch(monkeypatch):
    bench = _load_bench(monkeypatch)
    rec = _Recorder()
    monkeypatch.setattr(gc, "gemm_kernel", rec)
    monkeypatch.setattr(gc, "num_sms", lambda device: 132)
    a, b, c = torch.empty(2048, 4096), torch.empty(4096, 7168), torch.empty(2048, 7168)
    var = gc.GemmVariant.parse("128x128x64x4x4/flat")
    bench.launcher(a, b, c, var)()
    gc.launch_variant(a, b, c, var, sms=132)
    assert rec.calls[0] == rec.calls[1]
    grid, args, kw = rec.calls[0]
    assert grid == (132, )
    assert args[:7] == (a, b, c, c, 2048, 7168, 4096)
    assert kw == dict(BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, GROUP_M=8, NUM_SMS=132, USE_TMA=True, HAS_SCALE=False,
                      FLATTEN=True, TMA_STORE=False, num_warps=4, num_stages=4)
    s = torch.ones(1)
    gc.launch_variant(a[:100], b, c[:100], gc.GemmVariant.parse("128x256x64x8x3/flat+tma"), scale=s, sms=132)
    grid, args, kw = rec.calls[2]
    assert grid == (1 * 28, ) and args[3] is s and kw["HAS_SCALE"] and kw["TMA_STORE"] and kw["BLOCK_N"] == 256
    with pytest.raises(SystemExit, match="no f suffix"):
        bench.parse_config("128x128x64x4x4f")
    # a pointer-load tiling: gemm_kernel without descriptors; a split-K tiling: the split-K kernel and its workspace
    gc.launch_variant(a[:1], b, c[:1], gc.GemmVariant.parse("16x64x128x4x4p/flat"), sms=132)
    grid, args, kw = rec.calls[3]
    assert grid == (112, ) and not kw["USE_TMA"] and kw["FLATTEN"] and kw["BLOCK_M"] == 16
    rec_k = _Recorder()
    monkeypatch.setattr(gc, "gemm_split_k_kernel", rec_k)
    bench.launcher(a[:16], b, c[:16], gc.GemmVariant.parse("16x64x128x4x4k4/plain"))()
    grid, args, kw = rec_k.calls[0]
    ws, cnt = args[4], args[5]
    assert grid == (132, ) and args[6:9] == (16, 7168, 4096) and kw["SPLIT_K"] == 4 and kw["USE_TMA"]
    assert ws.dtype == torch.float32 and ws.numel() >= 4 * 16 * 7168 and cnt.dtype == torch.int32
    assert cnt.numel() >= 112 and not cnt.any()


def _results(records, **kw):
    doc = {"benchmark": "gemm", "device": H200, "git_commit": "0123abc", "configs": ["128x128x64x4x4"],
           "records": records}
    doc.update(kw)
    return doc


def _rec(M, N, K, us, errors=None, auto_variant=None):
    return {"M": M, "N": N, "K": K, "us": {"cublas": 100.0, **us}, "errors": errors or {},
            "auto_variant": auto_variant}


def test_build_table_margin_keeps_an_entry_within_it():
    """With a margin, an old entry the run timed (as ``ours/auto`` or as the same fixed variant) stays unless the
    fastest beats it by more than the margin, whether the fastest is another variant or the autotuner; an entry the
    run did not time, or one beaten by more, is replaced / dropped as without a margin."""
    held = dict(_entry(), config="128x128x64x4x6", flatten=True, tma_store=True)
    old = _table({(H200, "bfloat16", f"{m}x64x64"): held for m in (64, 128, 256, 512, 1024)})
    doc = _results([
        _rec(64, 64, 64, {"ours/auto": 100.0, "ours/128x256x64x8x3/flat": 99.0},
             auto_variant="128x128x64x4x6/flat+tma"),  # 1% faster: kept
        _rec(128, 64, 64, {"ours/auto": 100.0, "ours/128x256x64x8x3/flat": 97.0},
             auto_variant="128x128x64x4x6/flat+tma"),  # 3% faster: replaced
        _rec(256, 64, 64, {"ours/auto": 100.0, "ours/autotune": 99.5},
             auto_variant="128x128x64x4x6/flat+tma"),  # the autotuner 0.5% faster: kept
        _rec(512, 64, 64, {"ours/auto": 101.0, "ours/128x128x64x4x6/flat+tma": 100.0,
                           "ours/128x256x64x8x3/flat": 99.0}),  # the entry timed as a fixed variant: kept
        _rec(1024, 64, 64, {"ours/auto": 90.0, "ours/128x256x64x8x3/flat": 99.0})],  # entry not timed: autotuner
        timestamp_utc="20261202T000000Z")
    table, report = gt.build_gemm_table(doc, "r.json", old, margin=0.015)
    bf16 = table["devices"][H200]["bfloat16"]
    assert bf16["64x64x64"] == held and bf16["256x64x64"] == held and bf16["512x64x64"] == held
    assert bf16["128x64x64"]["config"] == "128x256x64x8x3" and "1024x64x64" not in bf16
    assert report[0].startswith("64x64x64: entry 128x128x64x4x6 kept (100.0 us in this run")
    assert "the autotuner at 99.5 us" in report[2]
    without, _ = gt.build_gemm_table(doc, "r.json", old)  # no margin: the fastest always wins
    assert without["devices"][H200]["bfloat16"]["64x64x64"]["config"] == "128x256x64x8x3"
    assert "256x64x64" not in without["devices"][H200]["bfloat16"]
    with pytest.raises(ValueError, match="margin"):
        gt.build_gemm_table(doc, "r.json", old, margin=0.5)


def test_build_table_picks_the_fastest_known_variant():
    old = _table({(H200, "bfloat16", "1x8x8"): _entry(), (H200, "bfloat16", "64x64x64"): _entry(),
                  ("Other GPU", "bfloat16", "64x64x64"): _entry()})
    doc = _results([
        _rec(2048, 7168, 4096, {"ours/auto": 110.0, "ours/128x128x64x4x4/plain": 104.0,
                                "ours/128x128x64x4x4/flat": 98.0, "ours/128x256x64x8x4/flat+tma": 97.0},
             errors={"ours/128x256x64x8x4/flat+tma": "OutOfResources"}),  # an errored variant never wins
        _rec(64, 64, 64, {"ours/auto": 90.0, "ours/128x128x64x4x4/flat": 95.0}),  # autotuner fastest: dropped
        _rec(128, 64, 64, {"ours/auto": 90.0, "ours/autotune": 99.0, "ours/128x128x64x4x4/flat": 95.0},
             auto_variant="128x256x64x8x3/flat+tma"),  # auto ran a table entry: that entry, at auto's time
        _rec(256, 64, 64, {"ours/auto": 99.0, "ours/autotune": 90.0, "ours/128x128x64x4x4/tma": 95.0},
             auto_variant="128x256x64x8x3/flat+tma")])  # the autotuner alone was fastest: no entry
    table, report = gt.build_gemm_table(doc, "benchmarks/results/x/gemm-20261201T010203Z.json", old)
    bf16 = table["devices"][H200]["bfloat16"]
    assert list(bf16) == ["1x8x8", "128x64x64", "2048x7168x4096"]  # sorted by shape; 1x8x8 kept, 64x64x64 removed
    assert bf16["2048x7168x4096"] == {
        "config": "128x128x64x4x4", "flatten": True, "tma_store": False,
        "source": "benchmarks/results/x/gemm-20261201T010203Z.json", "git_commit": "0123abc",
        "timestamp_utc": "20261201T010203Z", "us": 98.0, "cublas_us": 100.0, "auto_us": 110.0}
    assert (bf16["128x64x64"]["config"], bf16["128x64x64"]["tma_store"], bf16["128x64x64"]["us"]) == (
        "128x256x64x8x3", True, 90.0)
    assert table["devices"]["Other GPU"] == old["devices"]["Other GPU"]
    assert report[1] == "64x64x64: fastest was the autotuner (90.0 us; its pick is not known): no entry (old entry " \
                        "removed)"
    assert report[3].startswith("256x64x64: fastest was ours/autotune")
    gt.parse_gemm_table(table)
    with pytest.raises(gt.GemmTableError, match="names no device"):
        gt.build_gemm_table(_results([], device=None), "r.json")
    with pytest.raises(gt.GemmTableError, match="dtype 'float32'"):
        gt.build_gemm_table(_results([], dtype="float32"), "r.json")
    with pytest.raises(gt.GemmTableError, match="r.json: no timestamp_utc"):
        gt.build_gemm_table(_results([]), "r.json")
    assert gt.build_gemm_table(_results([], timestamp_utc="20261201T000000Z"), "r.json")[0]["devices"] == {}
    with pytest.raises(gt.GemmTableError, match="record 1x8x8: auto_variant: tile config '128x128x64x4x4f'"):
        gt.build_gemm_table(_results([_rec(1, 8, 8, {"ours/auto": 1.0}, auto_variant="128x128x64x4x4f/flat")]),
                           "gemm-20261201T000000Z.json")


def test_table_from_json_cli(tmp_path):
    res = tmp_path / "gemm-20261201T052614Z.json"
    old = copy.deepcopy(_table({(H200, "bfloat16", "1x8x8"): _entry()}))
    res.write_text(json.dumps(_results([_rec(2048, 7168, 4096, {"ours/auto": 110.0, "ours/128x128x64x4x4/flat": 98.0,
                                                                  "ours/128x128x64x4x4/flat+tma": 99.0})])))
    out = tmp_path / "table.json"
    out.write_text(json.dumps(old))
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))
    cmd = [sys.executable, os.path.join(BENCH, "bench_gemm.py"), "--table-from", str(res), "--table-out", str(out)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "2048x7168x4096: 128x128x64x4x4/flat 98.0 us, 1.020x cuBLAS (ours/auto 110.0 us)" in proc.stdout
    table = json.loads(out.read_text())
    parsed = gt.parse_gemm_table(table, str(out))
    assert set(parsed) == {(H200, "bfloat16", 1, 8, 8), (H200, "bfloat16", 2048, 7168, 4096)}
    ent = table["devices"][H200]["bfloat16"]["2048x7168x4096"]
    assert ent["source"] == str(res) and ent["timestamp_utc"] == "20261201T052614Z"  # outside the repo: absolute
    # a malformed table at --table-out is reported, not overwritten
    out.write_text('{"format": "triton_dist.gemm_table/1", "devices": {"X": {"int8": {}}}}')
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode != 0 and "GemmTableError" in proc.stderr and "unknown dtype" in proc.stderr
    assert "int8" in out.read_text()


def test_bench_gemm_help():
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))
    proc = subprocess.run([sys.executable, os.path.join(BENCH, "bench_gemm.py"), "--help"], capture_output=True,
                          text=True, timeout=120, env=env)
    assert proc.returncode == 0, proc.stderr
    for flag in ("--shapes", "--configs", "--write-table", "--table-out", "--table-from", "ours/autotune"):
        assert flag in proc.stdout


@pytest.mark.parametrize("margin", ["0.5", "-0.01", "nan"])
def test_bench_gemm_margin_out_of_range_is_refused_by_the_shared_check(tmp_path, margin):
    """``bench_gemm.py --margin`` is checked by ``runtime.dispatch_table.check_margin`` (the range every table merge
    accepts, as ``bench_overlap.py --margin``): a usage error naming the option, before any file is read."""
    from triton_dist.runtime.dispatch_table import check_margin

    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))
    missing = tmp_path / "never-read.json"
    proc = subprocess.run([sys.executable, os.path.join(BENCH, "bench_gemm.py"), "--margin", margin, "--table-from",
                           str(missing)], capture_output=True, text=True, timeout=120, env=env)
    with pytest.raises(ValueError) as shared:
        check_margin(float(margin), "--margin")
    assert proc.returncode == 2 and f"bench_gemm.py: error: {shared.value}" in proc.stderr, proc.stderr
