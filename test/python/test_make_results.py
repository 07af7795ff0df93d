"""benchmarks/make_results.py turns every kind of evidence record into RESULTS.md sections (synthetic records,
shaped like what bench_collectives / bench_shmem / bench_overlap / record_run write)."""
import json
import os
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
