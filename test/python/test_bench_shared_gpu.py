"""The benchmarks where ranks share a GPU (CUDA MPS, no NVLink), without a GPU: a dispatch table is never written from
such timings (bench_collectives --table-from, bench_overlap --table-from / --eager-rules-from refuse a results JSON
with ``shared_gpu`` and leave the tables alone), and bench_overlap sizes the contexts of its ``ours_seq`` baseline for
the run's largest call. The shared-GPU timing paths themselves need a GPU (scripts/gpu_suite.sh through
scripts/launch.sh --ranks-per-gpu)."""
import hashlib
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
BENCH = os.path.join(ROOT, "benchmarks")
ENV = dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.join(ROOT, "python"), BENCH]))
SHARED = {"world_size": 2, "gpus": 1, "ranks_per_gpu": 2, "shared_gpu": True}


def _run(*args):
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, env=ENV, cwd=ROOT, timeout=300)


def _digest(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def test_collectives_table_is_never_written_from_shared_gpu_timings(tmp_path):
    doc = {"benchmark": "bench_collectives", "world_size": 2, "topology": SHARED, "shared_gpu": True,
           "results": [{"op": "all_reduce", "method": "one_shot", "bytes": 8192, "dtype": "bfloat16", "us": 5.0,
                        "nccl_us": None, "gloo_host_us": 900.0, "correct": True}]}
    src = tmp_path / "collectives_shared.json"
    src.write_text(json.dumps(doc))
    table = tmp_path / "table.json"
    r = _run(os.path.join(BENCH, "bench_collectives.py"), "--table-from", str(src), "--table-out", str(table))
    assert r.returncode != 0 and "share a GPU" in r.stderr and "NVLink" in r.stderr, r.stderr[-2000:]
    assert not table.exists()


def test_overlap_table_is_never_written_from_shared_gpu_timings(tmp_path):
    from triton_dist.ops.overlap import TABLE_PATH

    before = _digest(TABLE_PATH)
    doc = {"benchmark": "bench_overlap", "world_size": 2, "topology": SHARED, "shared_gpu": True,
           "records": [{"op": "gemm_rs", "model": "llama3-8b", "M": 4096, "K_per_rank": 7168, "N": 4096,
                        "results": {"ours/ce": 700.0, "ours_seq": 900.0}, "eager": {"ours/ce": 710.0}}]}
    src = tmp_path / "overlap_shared.json"
    src.write_text(json.dumps(doc))
    nvlink = tmp_path / "overlap_nvlink.json"  # a later NVLink file does not make the shared one acceptable
    nvlink.write_text(json.dumps(dict(doc, topology=dict(SHARED, shared_gpu=False), shared_gpu=False)))
    for args in (["--table-from", str(src)], ["--eager-rules-from", str(nvlink), str(src)]):
        r = _run(os.path.join(BENCH, "bench_overlap.py"), *args)
        assert r.returncode != 0 and "share a GPU" in r.stderr and "NVLink" in r.stderr, (args, r.stderr[-2000:])
    assert _digest(TABLE_PATH) == before


def test_ours_seq_contexts_hold_the_largest_call():
    code = ("import bench_overlap as bo; "
            "todo = [('ag_gemm', 'llama3-70b', 8192, None), ('ag_gemm', 'llama3-8b', 2048, None), "
            "('gemm_rs', 'llama3-70b', 4096, None), ('gemm_ar', 'decode', 128, (7168, 8192))]; "
            "print(bo.seq_capacity(todo, 2), bo.seq_capacity(todo[:1], 4, [8192]), bo.seq_capacity([], 2))")
    r = _run("-c", code)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.split("\n")[-2] == (f"({4096 * 8192}, {4096 * 8192}, {128 * 8192}) "
                                        f"({2048 * 8192}, {8192 * 8192}, 0) (0, 0, 0)"), r.stdout
