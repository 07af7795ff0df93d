"""benchmarks/make_results.py's MoE rendering (bench_group_gemm, bench_moe_ep) on synthetic records shaped like what
the benchmarks write: the ratios in the tables, the H100 floor a pre-6d5610f run recorded with H200's bandwidth, and
ranks that shared a GPU kept out of the MoE section (their gloo torch baseline never shown as a speed-up)."""
import importlib.util
import json
import os
import subprocess
import sys
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "..", "..", "benchmarks", "make_results.py")
_spec = importlib.util.spec_from_file_location("make_results", SCRIPT)
mr = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(mr)

H100 = {"gpu": "NVIDIA H100 80GB HBM3"}


def _grouped_doc():
    us = {"ours": 100.0, "ours/nk": 101.0, "loop": 300.0, "ours/64x128x128x4x4": 90.0, "grouped_mm": 120.0,
          "grouped_mm/nk": 110.0}
    return {"benchmark": "bench_group_gemm", "timestamp_utc": "20261205T190609Z", "git_commit": "91e7f22",
            "versions": H100, "devices": [H100["gpu"]], "world_size": 1, "shared_gpu": False, "hbm_tbs": 4.8,
            "tflops": 989.0, "command": "bench_group_gemm.py", "records": [
                {"name": "qwen3-30b-a3b", "projection": "gate_up", "tokens": 128, "rows": 1024, "K": 2048, "N": 1536,
                 "config": "64x128x64x4x4", "us": us, "graphed": {k: True for k in us}, "errors": {},
                 "floor_bytes": 812646400, "floor_us": 812646400 / 4.8e6, "grouped_mm_over_ours": 1.1,
                 "loop_over_ours": 3.0},
                {"name": "qwen3-30b-a3b", "projection": "down", "tokens": 8192, "rows": 65536, "K": 768, "N": 2048,
                 "us": {"ours": 400.0, "grouped_mm": 380.0}, "errors": {}}]}  # an older record: no loop, no ratios


def _layer_doc():
    return {"benchmark": "bench_group_gemm", "timestamp_utc": "20261205T190646Z", "git_commit": "91e7f22",
            "versions": H100, "world_size": 1, "hbm_tbs": 4.8, "records": [
                {"name": "qwen3-30b-a3b", "layer": True, "tokens": 128,
                 "us": {"ours": 500.0, "torch": 600.0, "torch.compile": 525.0}, "torch_over_ours": 1.2,
                 "torch.compile_over_ours": 1.05},
                {"name": "qwen3-30b-a3b", "layer": True, "tokens": 1024, "us": {"ours": 700.0, "torch": 910.0}}]}


def _ep_doc(shared, backend):
    topo = {"world_size": 2, "gpus": 1 if shared else 2, "ranks_per_gpu": 2 if shared else 1, "shared_gpu": shared}
    cols = ("ours", "ours/a2a", "ours/normal", "ours/a2a/normal", "ours/ll", "ours/a2a/ll", "torch")
    rec = {"name": "qwen3-30b-a3b", "tokens_per_rank": 128, "experts_per_rank": 64,
           "us": {c: 10.0 + i for i, c in enumerate(cols)}, "eager_us": {c: 20.0 + i for i, c in enumerate(cols)},
           "graphed": {c: c != "torch" for c in cols}, "rel_error_vs_torch_by_method": {"push": 2.5e-5},
           "a2a_rel_error_by_method": {"push": 0.0}, "torch_over_ours": 1.6, "eager_torch_over_ours": 1.3}
    rec["eager_us"]["torch"] = 40.0 if not shared else 33333.0
    if backend:
        rec["torch_a2a_backend"] = backend
    return {"benchmark": "bench_moe_ep", "timestamp_utc": "20261205T190526Z" if shared else "20261206T000000Z",
            "git_commit": "91e7f22", "versions": H100, "world_size": 2, "topology": topo, "shared_gpu": shared,
            "graph_failures": [{"impl": "torch", "error": "RuntimeError: Cannot copy"}], "records": [rec]}


def test_grouped_gemm_and_layer_tables():
    lines = mr.moe_section({**_grouped_doc(), "_path": "results/x/group_gemm-20261205T190609Z.json"})
    text = "\n".join(lines)
    assert lines[0].startswith("### NVIDIA H100 80GB HBM3, commit `91e7f22`")
    row = next(x for x in lines if "| gate_up |" in x)
    # baseline: the faster layout (nk, 110 us); floor recomputed at 3.35 TB/s (812646400 B -> 242.6 us), footnoted
    assert "| 100.0 (`64x128x64x4x4`) | 110.0 (nk) | 300.0 | 242.6* | 0.41 | 1.100 | 3.00 |" in row
    assert "`64x128x128x4x4` 90.0 (1.222)" in row
    assert "floor recomputed" in text and "3.35 TB/s" in text
    old = next(x for x in lines if "| down |" in x)
    assert "| 400.0 | 380.0 | - | - | - | 0.950 | - | - |" in old  # missing keys: '-', the ratio from the us
    lay = "\n".join(mr.moe_section({**_layer_doc(), "_path": "results/x/group_gemm-20261205T190646Z.json"}))
    assert "| qwen3-30b-a3b | 128 | 500.0 | 600.0 | 525.0 | 1.200 | 1.050 |" in lay
    assert "| qwen3-30b-a3b | 1024 | 700.0 | 910.0 | - | 1.300 | - |" in lay


def test_floor_kept_where_the_header_matches_the_gpu():
    doc = {**_grouped_doc(), "versions": {"gpu": "NVIDIA H200"}, "devices": ["NVIDIA H200"]}
    assert mr._moe_floor(doc, doc["records"][0]) == (doc["records"][0]["floor_us"], False)


def test_moe_ep_columns_and_gloo_baseline():
    nv = "\n".join(mr.moe_ep_section({**_ep_doc(False, "nccl"), "_path": "results/n/moe_ep-20261206T000000Z.json"}))
    assert "`ours/ll` graph / eager us" in nv and "`ours/a2a/ll` graph / eager us" in nv
    assert "torch / `ours/ll` (eager / eager)" in nv and "torch / `ours/a2a" not in nv
    # eager torch 40 over eager ours 20 / ours/normal 22 / ours/ll 24
    assert "| 40.0 (nccl) | 2.00 | 1.82 | 1.67 |" in nv
    assert "graph capture failed (1x) for `torch`" in nv
    sh = "\n".join(mr.moe_ep_section({**_ep_doc(True, None), "_path": "results/s/moe_ep-20261205T190526Z.json"}))
    assert "n/a (gloo host path)" in sh and "not recorded" in sh and "1666" not in sh


def test_shared_moe_ep_stays_out_of_the_moe_section(tmp_path):
    res = tmp_path / "results"
    for sub, name, doc in (("m", "group_gemm-20261205T190609Z.json", _grouped_doc()),
                           ("m", "group_gemm-20261205T190646Z.json", _layer_doc()),
                           ("s", "moe_ep-20261205T190526Z.json", _ep_doc(True, "gloo")),
                           ("n", "moe_ep-20261206T000000Z.json", _ep_doc(False, "nccl"))):
        (res / sub).mkdir(parents=True, exist_ok=True)
        (res / sub / name).write_text(json.dumps(doc))
    out = tmp_path / "RESULTS.md"
    subprocess.run([sys.executable, SCRIPT, "--results", str(res), "--out", str(out)], check=True,
                   capture_output=True, text=True)
    text = out.read_text()
    title = "## Ranks sharing one GPU (CUDA MPS, no NVLink)"
    body, shared = text.split(title)
    moe = body.split("## Mixture of experts", 1)[1]
    assert "s/moe_ep-20261205T190526Z.json" not in body and "33333.0" not in body
    assert "s/moe_ep-20261205T190526Z.json" in shared and "n/a (gloo host path)" in shared
    assert "n/a (gloo" not in body
    assert "n/moe_ep-20261206T000000Z.json" in moe and "| 40.0 (nccl) | 2.00 |" in moe
    assert "n/moe_ep" not in shared
    assert "![MoE grouped GEMM and layer ratios](results/moe_group_gemm.png)" in moe
    # the opening screen: one MoE line per kind, linking into the MoE section
    glance = body.split("## At a glance", 1)[1].split("\n## ", 1)[0]
    assert "| MoE | grouped GEMM | 1.10x–0.95x" not in glance
    assert "| MoE | grouped GEMM | 0.95–1.10x torch._grouped_mm, 3.00x per-expert loop" in glance
    assert "| MoE | MoE layer, EP=1 | 1.05x torch.compile, 1.20–1.30x torch" in glance
    assert "| MoE | MoE layer, EP=2 | 2.00x torch (eager / eager; nccl)" in glance
    assert "#mixture-of-experts" in glance


def _tp_doc(world, shared):
    topo = {"world_size": world, "gpus": 1 if shared else world, "ranks_per_gpu": world if shared else 1,
            "shared_gpu": shared}
    cols = ("ours", "ours/ag_group_gemm", "ours/group_gemm_rs", "torch", "torch/capturable", "torch.compile")
    if world > 1:
        cols = cols[:-1] if not shared else cols[:-2]
    rec = {"name": "qwen3-30b-a3b", "world": world, "tokens": 1024, "tokens_per_rank": 1024 // world,
           "us": {c: 100.0 + 10 * i for i, c in enumerate(cols)}, "eager_us": {c: 200.0 + 10 * i for i, c in
                                                                               enumerate(cols)},
           "graphed": {c: c != "torch" for c in cols}, "rel_error_vs_torch": 3.1e-3, "errors": {},
           "torch_collectives_backend": "gloo" if shared else "nccl",
           "baselines_unavailable": {"torch.compile": "world > 1: timed at world 1 only"} if world > 1 else {}}
    for b in ("torch", "torch/capturable", "torch.compile"):
        if b in cols:
            if rec["graphed"][b]:
                rec[f"{b}_over_ours"] = rec["us"][b] / rec["us"]["ours"]
            rec[f"eager_{b}_over_ours"] = rec["eager_us"][b] / rec["eager_us"]["ours"]
    return {"benchmark": "bench_moe_tp", "timestamp_utc": "20261206T010000Z", "git_commit": "8a0438f",
            "versions": H100, "world_size": world, "topology": topo, "shared_gpu": shared, "records": [rec]}


def test_moe_tp_table():
    one = "\n".join(mr.moe_tp_section({**_tp_doc(1, False), "_path": "results/t/moe_tp-1.json"}))
    assert "### bench_moe_tp, TP=1" in one
    # ours 100 / 200; torch.compile 150 / 250 -> graph 1.50, eager 1.25; torch never graphed: its graph ratio '-'
    assert "| qwen3-30b-a3b | 1024 (1024) | 100.0 / 200.0 |" in one
    assert "| 1.50 / 1.25 |" in one and "| - / 1.15 |" in one and "3.1e-03" in one
    shared = "\n".join(mr.moe_tp_section({**_tp_doc(2, True), "_path": "results/t/moe_tp-2.json"}))
    assert "n/a (gloo host path)" in shared and "`torch.compile` not run: world > 1" in shared
    sim = {**_tp_doc(2, False), "_path": "results/t/moe_tp-3.json"}
    sim["records"] = [{**sim["records"][0], "us": {}, "eager_us": {}}]
    assert "not timed" in "\n".join(mr.moe_tp_section(sim))


def test_attention_table():
    dec = {"part": "decode", "batch": 1, "tokens": 32768, "page_size": 16, "us": {"ours": 100.0, "sdpa": 180.0},
           "eager_us": {"ours": 120.0, "sdpa": 200.0}, "graphed": {"ours": True, "sdpa": True},
           "kv_gbs": {"ours": 3000.0}, "kv_fraction": {"ours": 0.9}, "sdpa_over_ours": 1.8,
           "eager_sdpa_over_ours": 1.67}
    pre = {"part": "prefill", "tokens": 8192, "q_heads": 32, "kv_heads": 8, "us": {"ours": 1000.0, "sdpa_flash": 950.0},
           "eager_us": {"ours": 1010.0, "sdpa_flash": 960.0}, "graphed": {"ours": True, "sdpa_flash": True},
           "tflops": {"ours": 550.0, "sdpa_flash": 579.0}, "sdpa_flash_over_ours": 0.95,
           "eager_sdpa_flash_over_ours": 0.95}
    doc = {"benchmark": "bench_attention", "timestamp_utc": "20261206T020000Z", "git_commit": "abc", "versions": H100,
           "world_size": 1, "hbm": {"read_ceiling_gbs": 3333.0, "how": "torch.sum"}, "records": [dec, pre],
           "_path": "results/a/attention-1.json"}
    text = "\n".join(mr.attention_section(doc))
    assert "read ceiling 3333 GB/s" in text
    assert "| 1 | 32768 | 16 | 100.0 / 120.0 | 180.0 / 200.0 | 3000 (0.90) | 1.80 / 1.67 |" in text
    assert "| 8192 | 32/8 | 1000.0 / 1010.0 | 950.0 / 960.0 | 550 / 579 | 0.95 / 0.95 |" in text
    sim = {**doc, "records": [{**dec, "us": {}}]}
    assert "not timed" in "\n".join(mr.attention_section(sim))
    uly = {"part": "ulysses", "world": 2, "tokens": 8192, "tokens_per_rank": 4096, "heads": 32,
           "us": {"pre": 50.0, "torch_pre": 90.0}, "eager_us": {"pre": 60.0, "torch_pre": 900.0},
           "graphed": {"pre": True, "torch_pre": False}, "bus_gbs": {"pre": 335.5, "post": 320.0},
           "torch_pre_over_pre": 1.8, "torch_post_over_post": 1.5, "torch_a2a_backend": "gloo", "shared_gpu": True}
    text = "\n".join(mr.attention_section({**doc, "records": [uly]}))
    assert "Ulysses all-to-alls" in text
    row = "| 2 | 8192 (4096) | 32 | 50.0 / 60.0 | 90.0 (eager) / 900.0 | 336 / 320 | 1.80, 1.50 | gloo (shared GPU) |"
    assert row in text, text
    spag = {"part": "sp_ag", "world": 8, "batch": 1, "tokens": 32768, "tokens_per_rank": 4096, "shared_gpu": False,
            "us": {"ours": 900.0, "ag+flash": 1200.0, "sdpa_flash": 1000.0},
            "eager_us": {"ours": 910.0, "ag+flash": 1300.0, "sdpa_flash": 1010.0},
            "graphed": {"ours": True, "ag+flash": True, "sdpa_flash": True}, "tflops_per_gpu": {"ours": 500.0},
            "ag+flash_over_ours": 1.3333, "eager_ag+flash_over_ours": 1.4286, "sdpa_flash_over_ours": 1.1111,
            "eager_sdpa_flash_over_ours": 1.1099}
    text = "\n".join(mr.attention_section({**doc, "records": [spag, {**spag, "shared_gpu": True, "world": 2}]}))
    assert "sequence-parallel prefill, all-gather fused (causal):" in text, text
    assert ("| 8 | 1 | 32768 (4096) | 900.0 / 910.0 | 1200.0 / 1300.0 | 1000.0 / 1010.0 | 500 | 1.33 / 1.43 | "
            "1.11 / 1.11 |") in text, text
    assert "| 2 (shared GPU) | 1 |" in text, text


def test_attention_plot(tmp_path):
    """plot_attention: the newest run per GPU with timed decode / prefill records makes one PNG; nothing timed
    (the simulator) makes none."""
    pytest.importorskip("matplotlib")
    dec = {"part": "decode", "batch": 1, "tokens": 32768, "page_size": 16, "us": {"ours": 100.0, "sdpa": 90.0},
           "kv_fraction": {"ours": 0.7, "sdpa": 0.8}}
    pre = {"part": "prefill", "tokens": 8192, "us": {"ours": 1000.0}, "sdpa_flash_over_ours": 1.3}
    doc = {"benchmark": "bench_attention", "timestamp_utc": "20261206T020000Z", "git_commit": "abcdef0123",
           "versions": H100, "records": [dec, pre], "_path": "results/a/attention-1.json"}
    png = tmp_path / "attention.png"
    assert mr.plot_attention([doc], str(png)) and png.stat().st_size > 1000
    assert not mr.plot_attention([{**doc, "records": [{**dec, "us": {}}]}], str(tmp_path / "none.png"))
    assert not (tmp_path / "none.png").exists()
