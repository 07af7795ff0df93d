"""Makes the GPU tier's absence visible on CPU hosts: this test is skipped with the reason when no GPU tier can run,
and on the GPU machine it checks that the world really has two GPUs."""
import pytest


@pytest.mark.gpu
def test_gpu_tier_has_two_gpus():
    import torch

    assert torch.cuda.device_count() >= 2


def test_gpu_tier_and_benchmarks_import_on_cpu():
    """Preflight for the GPU machine (device time is scarce): every GPU-tier module imports and collects, and every
    benchmark script parses its arguments, on a CPU host. Catches names moved or removed by refactors."""
    import os
    import re
    import subprocess
    import sys

    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.abspath(os.path.join(here, "..", ".."))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.join(root, "python"), here,
                                                       os.environ.get("PYTHONPATH", "")]))
    r = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "--collect-gpu", "-p", "no:cacheprovider",
                        os.path.join(here, "gpu")], capture_output=True, text=True, env=env, cwd=root, timeout=300)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    m = re.search(r"(\d+) tests? collected", r.stdout)
    assert m and int(m.group(1)) >= 80, r.stdout[-2000:]
    for bench in ("bench_collectives", "bench_shmem", "bench_overlap"):
        r = subprocess.run([sys.executable, os.path.join(root, "benchmarks", f"{bench}.py"), "--help"],
                           capture_output=True, text=True, env=env, cwd=root, timeout=120)
        assert r.returncode == 0 and "usage" in r.stdout, (bench, r.stderr[-2000:])
