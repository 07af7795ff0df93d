"""Every public module of triton_dist imports where CUDA is unavailable and neither NVSHMEM, ROCm nor the CUDA
Python bindings can be imported."""
import os
import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent("""
    import importlib, importlib.abc, pkgutil, sys

    BLOCKED = ("nvshmem", "cuda", "pynvml", "cupy", "hip", "rocshmem")

    class Block(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in BLOCKED:
                raise ImportError(f"blocked for this test: {name}")
            return None

    sys.meta_path.insert(0, Block())
    import torch
    assert not torch.cuda.is_available()
    import triton_dist
    names = []
    for info in pkgutil.walk_packages(triton_dist.__path__, "triton_dist."):
        if info.name.split(".")[-1].startswith("_") and not info.name.endswith("__init__"):
            continue
        importlib.import_module(info.name)
        names.append(info.name)
    import triton_dist.language as dl
    from triton_dist.language.extra import language_extra  # noqa: F401
    import triton_dist.utils  # noqa: F401
    print(len(names))
""")


def test_every_public_module_imports_without_gpu():
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="", PYTHONPATH=os.pathsep.join(sys.path))
    env.pop("TRITON_INTERPRET", None)
    res = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=env, timeout=300)
    assert res.returncode == 0, res.stderr
    assert int(res.stdout.strip().splitlines()[-1]) >= 5
