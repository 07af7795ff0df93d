"""benchmarks/make_results.py turns every kind of evidence record into RESULTS.md sections (synthetic records,
shaped like what bench_collectives / bench_shmem / bench_overlap / record_run write)."""
import json
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "..", "..", "benchmarks", "make_results.py")


def _write(d, name, doc):
    d.mkdir(parents=True, exist_ok=True)
    (d / name).write_text(json.dumps(doc))


def test_every_record_kind_gets_its_section(tmp_path):
    res = tmp_path / "results"
    coll_rows = [{"op": "all_reduce", "method": m, "bytes": 8192, "us": us, "busbw_gbs": 1.0, "nccl_us": 20.0,
                  "nccl_busbw_gbs": 0.5, "speedup": 20.0 / us, "resolved": "one_shot"}
                 for m, us in (("one_shot", 5.0), ("auto", 5.5))]
    _write(res / "c", "coll.json", {"benchmark": "bench_collectives", "world_size": 2, "results": coll_rows})
    _write(res / "s", "shmem.json", {
        "benchmark": "bench_shmem", "world_size": 2, "git_commit": "abc", "time_utc": "t",
        "bandwidth": [{"bytes": 1 << 20, "peer_copy_GBps": 300.0, "put_block_GBps": 330.0,
                       "put_block_vs_peer_copy": 1.1, "put_block_ok": True}],
        "latency": [{"payload_bytes": 8, "round_trip_us": 5.4, "one_way_us": 2.7}]})
    _write(res / "s", "shmem_graph.json", {  # bench_shmem since graph timing (--sweep): new columns
        "benchmark": "bench_shmem", "world_size": 2, "git_commit": "def", "time_utc": "u", "timing": "graph",
        "graph_capture_failures": ["peer copy 1024: RuntimeError: no"],
        "suggested_default": {"getmem_block": {"num_warps": 16, "programs_per_sm": 2}},
        "bandwidth": [{"bytes": 16 << 20, "programs": 264, "peer_copy_GBps": 380.0, "peer_copy_eager_GBps": 370.0,
                       "getmem_block_GBps": 361.0, "getmem_block_vs_peer_copy": 0.95, "getmem_block_ok": True,
                       "getmem_block_eager_GBps": 300.0, "getmem_block_eager_vs_peer_copy": 0.81,
                       "getmem_block_num_warps": 16, "getmem_block_programs": 264, "getmem_block_timing": "graph",
                       "getmem_block_best_GBps": 370.0, "getmem_block_best_vs_peer_copy": 0.97,
                       "getmem_block_best_num_warps": 32, "getmem_block_best_programs": 132}],
        "put_quiet": [{"bytes": 1024, "us": 4.2, "eager_us": 12.0, "ok": True, "timing": "graph"}],
        "latency": [{"kind": "dl", "payload_bytes": 8, "round_trip_us": 2.7, "one_way_us": 1.35,
                     "eager_round_trip_us": 2.71, "ok": True},
                    {"kind": "signal_op", "payload_bytes": 8, "round_trip_us": 3.3, "one_way_us": 1.65,
                     "eager_round_trip_us": 3.4, "ok": True, "timing": "eager (graph capture failed)"}]})
    _write(res / "o", "overlap.json", {
        "benchmark": "bench_overlap", "world_size": 2, "records": [{
            "op": "ag_gemm", "model": "llama3-70b", "M": 8192, "best_ours": "ours/sm",
            "results": {"ours/sm": 1000.0, "torch_seq": 1400.0}, "errors": {}, "speedup_vs_torch_seq": 1.4,
            "overlap_eff": 0.93, "tflops_fused": 700.0, "gemm_ours_vs_cublas": 0.95}],
        "failures": [{"op": "gemm_rs", "model": "llama3-8b", "M": 128, "error": "Traceback\nRuntimeError: boom"}]})
    _write(res / "g", "gpu_language.json", {"name": "gpu_language", "exit_code": 0, "timed_out": False, "wall_s": 40,
                                            "pytest_summary": ["12 passed"], "facts": {"git_commit": "deadbeef"}})
    _write(res / "g", "bench_overlap.json", {"name": "bench_overlap", "skipped": "suite budget spent before this step"})
    out = tmp_path / "RESULTS.md"
    subprocess.run([sys.executable, SCRIPT, "--results", str(res), "--out", str(out)], check=True,
                   capture_output=True, text=True)
    text = out.read_text()
    assert "#### all_reduce" in text and "| 8 KiB | 20.0 (0)" in text and "4.00x" in text
    assert "## SHMEM put/get" in text and "| 1 MiB | 300 | 330 (1.10) | yes |" in text and "| 8 B | 5.40 | 2.70 |" in text
    assert "| 16 MiB | peer copy | — | 380 / 370 |" in text
    assert "| 16 MiB | getmem_block | 16w x 264 | 361 (0.95) | 300 (0.81) | 32w x 132 | 370 (0.97) | yes |" in text
    assert "getmem_block_eager" not in text and "suggested default" in text and "16w x 2/SM" in text
    assert "graph capture failed 1 time(s), eager figures instead: peer copy 1024" in text
    assert "| 1 KiB | 4.20 | 12.00 | yes |" in text and "| 8 B | 2.70 | 1.35 | 2.71 | dl |" in text
    assert "| 8 B | 3.30 (eager: capture failed) | 1.65 | 3.40 | signal_op |" in text
    assert "| 8 B | 5.40 | 2.70 | — | putmem_signal_block |" in text  # the older record: its kind by default
    assert "## Overlapped GEMMs" in text and "| ag_gemm | llama3-70b | 8192 | ours/sm | 1000 | 1400 | 1.40 |" in text
    assert "93%" in text and "FAILED gemm_rs llama3-8b M=128: `RuntimeError: boom`" in text
    assert "| gpu_language |" in text and "12 passed" in text and "`deadbeef`" in text
    assert "skipped: suite budget spent" in text
    assert "## Other result files" not in text  # every record found its section


def test_shared_gpu_results_get_their_own_section_and_nothing_else(tmp_path):
    """Results of ranks that shared a GPU (CUDA MPS, no NVLink; ``shared_gpu`` in the JSON) appear only in their own
    section, with world size and ranks per GPU, never in the NVLink tables or the headline (mega) figure."""
    res = tmp_path / "results"
    shared_topo = {"world_size": 4, "gpus": 1, "ranks_per_gpu": 4, "shared_gpu": True}
    nvlink_topo = {"world_size": 2, "gpus": 2, "ranks_per_gpu": 1, "shared_gpu": False}
    nv_rows = [{"op": "all_reduce", "method": m, "bytes": 8192, "us": us, "busbw_gbs": 1.0, "nccl_us": 20.0,
                "nccl_busbw_gbs": 0.5, "speedup": 20.0 / us, "resolved": "one_shot"}
               for m, us in (("one_shot", 5.0), ("auto", 5.5))]
    _write(res / "nv", "collectives_nvlink.json", {"benchmark": "bench_collectives", "world_size": 2,
                                                   "topology": nvlink_topo, "shared_gpu": False, "results": nv_rows})
    # bench_collectives where ranks shared a GPU: no NCCL column, the gloo host path timed eagerly
    sh_rows = [{"op": "all_reduce", "method": m, "bytes": 16384, "us": us, "busbw_gbs": 2.0, "nccl_us": None,
                "nccl_busbw_gbs": None, "nccl_eager_us": None, "nccl_unavailable": "no NCCL: ranks share a GPU",
                "gloo_host_us": 987.6, "gloo_host_busbw_gbs": 0.03, "speedup": None, "resolved": "one_shot",
                "eager_us": us + 3}
               for m, us in (("one_shot", 41.5), ("auto", 42.5))]
    _write(res / "sh", "collectives_shared.json", {"benchmark": "bench_collectives", "world_size": 4,
                                                   "topology": shared_topo, "shared_gpu": True, "results": sh_rows})
    _write(res / "sh", "overlap_shared.json", {
        "benchmark": "bench_overlap", "world_size": 4, "topology": shared_topo, "shared_gpu": True, "records": [{
            "op": "gemm_rs", "model": "llama3-8b", "M": 4096, "best_ours": "ours/ce",
            "results": {"ours/auto": 777.7, "ours/ce": 770.0, "ours_seq": 900.0, "comm_seq": 300.0,
                        "gemm_cublas": 600.0}, "errors": {}, "bound": 600.0, "bound_comm": "comm_seq",
            "auto_over_bound": 1.296, "auto_vs_ours_seq": 1.157}]})
    _write(res / "sh", "mega_shared.json", {
        "benchmark": "bench_mega", "world_size": 2, "shared_gpu": True, "preset": "qwen3-8b",
        "topology": {"world_size": 2, "gpus": 1, "ranks_per_gpu": 2, "shared_gpu": True},
        "skipped": {"torch_nccl": "skipped: ranks share a GPU"}, "config": {"num_layers": 36}, "context": 512,
        "results": {"mega_us": 4321.0, "torch_ours_us": 5555.0, "mega_roofline": 0.5}, "correctness": {}})
    _write(res / "sh", "trace-shared-rank0.json", {"traceEvents": [{"ph": "X"}], "topology": shared_topo,
                                                   "shared_gpu": True})
    # a suite step through scripts/launch.sh with ranks sharing a GPU, and one on one GPU per rank
    _write(res / "sh", "gpu_collectives_shared.json", {
        "name": "gpu_collectives_shared", "exit_code": 0, "timed_out": False, "wall_s": 50, "world_size": 4,
        "gpus": 1, "ranks_per_gpu": 4, "shared_gpu": True, "mps": "private", "pytest_summary": ["9 passed"],
        "facts": {"git_commit": "cafe"}})
    _write(res / "nv", "gpu_collectives_nvlink.json", {
        "name": "gpu_collectives_nvlink", "exit_code": 0, "timed_out": False, "wall_s": 40, "world_size": 2,
        "gpus": 2, "ranks_per_gpu": 1, "shared_gpu": False, "pytest_summary": ["8 passed"],
        "facts": {"git_commit": "beef"}})
    out = tmp_path / "RESULTS.md"
    r = subprocess.run([sys.executable, SCRIPT, "--results", str(res), "--out", str(out)], check=True,
                       capture_output=True, text=True)
    assert "5 shared-GPU results" in r.stdout
    text = out.read_text()
    title = "## Ranks sharing one GPU (CUDA MPS, no NVLink)"
    assert text.count(title) == 1
    nvlink, shared = text.split(title)
    # the NVLink figures: only the NVLink records
    assert "| 8 KiB | 20.0 (0)" in nvlink and "gpu_collectives_nvlink" in nvlink
    for mark in ("16 KiB", "987.6", "777.7", "4321.0", "gpu_collectives_shared", "collectives_shared.json",
                 "overlap_shared.json", "mega_shared.json", "trace-shared-rank0"):
        assert mark not in nvlink, mark
    assert "## Mega kernel" not in nvlink and "mega_steps" not in text  # no headline figure from a shared run
    assert "## Overlapped GEMMs" not in nvlink
    # the shared section: every shared record, with world size / GPUs / ranks per GPU, rendered as its kind is
    for mark in ("8 KiB", "20.0 (0)", "gpu_collectives_nvlink"):
        assert mark not in shared, mark
    assert "sh/collectives_shared.json` | bench_collectives | 4 | 1 | 4 | — |" in shared
    assert "sh/gpu_collectives_shared.json` | suite step | 4 | 1 | 4 | private |" in shared
    assert "gloo host path, eager us" in shared and "| 16 KiB | 987.6 (0) | 41.5 (2) | 42.5 (2) | - | - |" in shared
    assert "ours seq (our collectives + cuBLAS) us" in shared and "our comm (auto) us" in shared
    assert "| gemm_rs | llama3-8b | 4096 | 777.7 | ce | 900.0 | — | 600.0 | 300.0 | 1.296 | 1.16 |" in shared
    assert "4321.0" in shared and "5555.0" in shared and "torch_nccl: skipped: ranks share a GPU" in shared
    assert "| gpu_collectives_shared |" in shared and "9 passed" in shared and "private" in shared
    assert "**bench_mega, shared GPU: 2 ranks on 1 GPU(s), 2 per GPU (no NVLink)**" in shared
    assert "trace-shared-rank0.json` | trace | 4 | 1 | 4 |" in shared and "Chrome/Perfetto trace, 1 events" in shared


def _anchor(text):
    """GitHub's anchor of a heading's text (written out here apart from make_results, so the links are checked
    against the rule, not against themselves)."""
    out = ""
    for ch in text.strip().lower():
        if ch.isalnum() or ch in "_- ":
            out += "-" if ch == " " else ch
    return out


def _all_anchors(text):
    seen, found = {}, set()
    for line in text.splitlines():
        if line.startswith("#"):
            base = _anchor(line.lstrip("#"))
            n = seen.get(base, 0)
            seen[base] = n + 1
            found.add(base if n == 0 else f"{base}-{n}")
    return found


def test_results_open_with_one_screen_per_family(tmp_path):
    """RESULTS.md opens with one screen: per family the newest run's figures against each baseline of that run, the
    machine and date, and links that lead to the run's details below (every link an anchor of a heading there)."""
    res = tmp_path / "results"

    def coll_rows(auto_us, symm_us):
        rows = []
        for nbytes, nccl in ((4096, 10.0), (1 << 20, 30.0)):
            for m, us in (("one_shot", auto_us * 1.1), ("auto", auto_us), ("torch_symm/one_shot", symm_us)):
                rows.append({"op": "all_reduce", "dtype": "bfloat16", "method": m, "bytes": nbytes, "us": us,
                             "busbw_gbs": 1.0, "nccl_us": nccl, "nccl_busbw_gbs": 1.0, "correct": True,
                             **({"baseline": True} if m.startswith("torch") else {})})
        return rows

    h200 = {"gpu": "NVIDIA H200"}
    _write(res / "c", "collectives_20261130T100000Z.json", {
        "benchmark": "bench_collectives", "timestamp_utc": "20261130T100000Z", "world_size": 2, "versions": h200,
        "results": coll_rows(50.0, 60.0)})  # older: not the one shown
    _write(res / "c", "collectives_20261201T004301Z.json", {
        "benchmark": "bench_collectives", "timestamp_utc": "20261201T004301Z", "world_size": 2, "versions": h200,
        "mode": "full", "results": coll_rows(5.0, 7.5)})
    _write(res / "g", "gemm-20261202T074455Z.json", {
        "benchmark": "gemm", "device": "NVIDIA H200", "timestamp_utc": "20261202T074455Z", "records": [
            {"M": 2048, "N": 4096, "K": 3584, "us": {"cublas": 100.0, "ours/auto": 98.0}, "best": "ours/auto",
             "auto_vs_cublas": 100 / 98.0, "best_vs_cublas": 100 / 98.0},
            {"M": 4096, "N": 4096, "K": 3584, "us": {"cublas": 200.0, "ours/auto": 210.0}, "best": "ours/auto",
             "auto_vs_cublas": 200 / 210.0, "best_vs_cublas": 200 / 210.0}]})
    _write(res / "o", "overlap-20261130T215001Z-final.json", {
        "benchmark": "bench_overlap", "world_size": 2, "versions": h200, "records": [
            {"op": "gemm_rs", "model": "llama3-8b", "M": 4096, "results": {"ours/auto": 700.0, "torch_seq": 980.0,
                                                                           "torch_symm": 805.0},
             "auto_vs_seq": 1.4, "auto_vs_symm": 1.15, "auto_over_bound": 1.12, "errors": {}}]})
    _write(res / "m", "mega_20261201T112300Z.json", {
        "benchmark": "bench_mega", "timestamp_utc": "20261201T112300Z", "world_size": 1, "preset": "qwen3-8b",
        "devices": ["NVIDIA H200"], "config": {"num_layers": 36}, "context": 512, "correctness": {"steps": 64},
        "results": {"mega_us": 4497.4, "torch_nccl_us": 9984.2, "torch_nccl_over_mega": 2.22, "mega_roofline": 0.79}})
    # a batched run with the torch.compile baseline (its figure is the row's headline) and the renamed roofline key
    _write(res / "m", "mega_20261201T113000Z.json", {
        "benchmark": "bench_mega", "timestamp_utc": "20261201T113000Z", "world_size": 1, "preset": "qwen3-8b",
        "devices": ["NVIDIA H200"], "config": {"num_layers": 36}, "context": 4096, "batch": 8,
        "contexts": [4096, 100, 512, 7, 2048, 3000, 64, 1000],
        "results": {"mega_us": 5000.0, "torch_compile_us": 6750.0, "torch_compile_over_mega": 1.35,
                    "torch_nccl_us": 12000.0, "torch_nccl_over_mega": 2.4, "mega_roofline_fraction": 0.81,
                    "early32m_us": 4800.0, "early32m_speedup_over_mega": 5000 / 4800.0,
                    "early32m_roofline_fraction": 0.84},
        "variants": {"early32m": {"options": {"gemv_early_prefetch_bytes": 33554432}, "tasks": 100}},
        "correctness": {"steps": 8, "variants": {"early32m": {"same_bits_as_mega": True}}}})
    _write(res / "s", "shmem.json", {
        "benchmark": "bench_shmem", "world_size": 2, "time_utc": "2026-12-01T00:07:32+00:00", "versions": h200,
        "bandwidth": [{"bytes": 1 << 20, "peer_copy_GBps": 300.0, "putmem_block_GBps": 150.0,
                       "putmem_block_vs_peer_copy": 0.5, "putmem_block_ok": True},
                      {"bytes": 256 << 20, "peer_copy_GBps": 400.0, "putmem_block_GBps": 376.0,
                       "putmem_block_vs_peer_copy": 0.94, "putmem_block_ok": True}],
        "latency": [{"kind": "dl", "payload_bytes": 8, "round_trip_us": 2.98, "one_way_us": 1.49}]})
    _write(res / "sh", "gpu_runtime_np2.json", {
        "name": "gpu_runtime_np2", "exit_code": 0, "timed_out": False, "date": "2026-12-04T21:19:25+00:00",
        "world_size": 2, "gpus": 1, "ranks_per_gpu": 2, "shared_gpu": True, "facts": {"gpu": "NVIDIA H200"}})
    out = tmp_path / "RESULTS.md"
    subprocess.run([sys.executable, SCRIPT, "--results", str(res), "--out", str(out)], check=True,
                   capture_output=True, text=True)
    text = out.read_text()
    assert text.startswith("# Benchmark results\n")
    screen = text.split("## At a glance", 1)[1].split("\n## ", 1)[0]
    assert text.index("## At a glance") < text.index("## Collectives") and len(screen.splitlines()) <= 40
    rows = {tuple(c.strip() for c in line.split("|")[1:3]): line for line in screen.splitlines()
            if line.startswith("| ") and not line.startswith("| family")}
    # the newest collectives run: auto vs NCCL 2.00x (4 KiB) and 6.00x (1 MiB), vs torch symm-mem 1.50x
    row = rows[("Collectives", "all_reduce")]
    assert "auto 2.00–6.00x NCCL, 1.50x torch symm-mem (bfloat16, 4 KiB–1 MiB)" in row
    assert "| 2 x NVIDIA H200 | 2026-12-01 00:43 UTC |" in row
    row = rows[("GEMM", "`matmul`")]
    assert "auto 0.95–1.02x cuBLAS" in row and "| 1 x NVIDIA H200 |" in row
    row = rows[("Overlapped GEMMs", "GEMM+RS")]
    assert "auto 1.40x torch seq (NCCL + cuBLAS), 1.15x torch symm-mem; auto / bound 1.12 (1 shapes)" in row
    assert "2026-11-30 21:50 UTC" in row
    assert ("step 4497 us, no torch.compile figure in this run, 2.22x torch; roofline 0.79"
            in rows[("Mega kernel", "qwen3-8b TP=1")])
    assert ("step 5000 us, 1.35x torch.compile, 2.40x torch; roofline 0.81"
            in rows[("Mega kernel", "qwen3-8b TP=1 batch 8")])
    # a run's --variant A/B: its own rows under the run's table, never the headline
    assert "| early32m | gemv_early_prefetch_bytes=33554432 | 4800.0 | 1.0417 | 0.84 | True |" in text
    assert "4800" not in screen
    assert "putmem_block 0.94x peer copy (256 MiB)" in rows[("SHMEM primitives", "put / get bandwidth")]
    assert "dl 1.49 us" in rows[("SHMEM primitives", "signal latency")]
    assert "2026-12-01 00:07 UTC" in rows[("SHMEM primitives", "signal latency")]
    row = rows[("Shared GPU", "1 results")]
    assert "2 ranks per GPU" in row and "suite steps 1 passed" in row and "2 ranks on 1 x NVIDIA H200" in row
    assert len(rows) == 8
    # every link leads to a heading below, and a family's run link to that run's own heading
    links = re.findall(r"\]\(#([^)]+)\)", screen)
    assert links and set(links) <= _all_anchors(text), set(links) - _all_anchors(text)
    run = re.search(r"\[run\]\(#([^)]+)\)", rows[("Collectives", "all_reduce")]).group(1)
    assert "20261201t004301z" in run and "collectives_20261201t004301zjson" in run


def test_no_code_under_results():
    """benchmarks/results/ holds evidence (JSON, logs, traces, plots, READMEs), never code: a measurement is
    reproduced by a bench option (``bench_overlap.py --probe ...``) at a recorded commit, not by a script kept
    beside its results (such scripts patched module globals and rotted)."""
    results = os.path.join(HERE, "..", "..", "benchmarks", "results")
    code = (".py", ".sh", ".bash", ".ipynb", ".c", ".cc", ".cpp", ".cu", ".h", ".pl", ".rb", ".js", ".ts")
    found = []
    for dirpath, _, names in os.walk(results):
        for name in names:
            path = os.path.join(dirpath, name)
            with open(path, "rb") as f:
                shebang = f.read(2) == b"#!"
            if name.endswith(code) or shebang or os.access(path, os.X_OK):
                found.append(os.path.relpath(path, results))
    assert not found, f"code under benchmarks/results/ (move it into a bench option, cite the commit): {found}"
