"""Run part of a CPU test in a fresh Python process, with the repository's ``python/`` first on the path: a script
that must set ``TRITON_INTERPRET`` before Triton is imported and prints its verdict on its last line, or the compile
tool for a GPU target (no GPU needed). Shared by the kernel tests that do both (test_gemm, test_group_gemm,
test_moe_layout)."""
import os
import subprocess
import sys

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
KERNELS = os.path.join(ROOT, "python", "triton_dist", "kernels")


def _env(drop: str) -> dict:
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))
    env.pop(drop, None)
    return env


def run_script(script: str, timeout: int = 600) -> subprocess.CompletedProcess:
    """``python -c script`` (``TRITON_DIST_BACKEND`` unset: the script picks its own), output captured."""
    return subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          env=_env("TRITON_DIST_BACKEND"), timeout=timeout)


def assert_script_says(script: str, last_line: str, timeout: int = 600) -> None:
    """:func:`run_script` exits 0 and its last line of output is ``last_line`` (e.g. ``FAILS []``)."""
    res = run_script(script, timeout)
    assert res.returncode == 0, res.stderr[-3000:]
    assert res.stdout.strip().splitlines()[-1] == last_line, res.stdout[-3000:]


def compile_kernel(module: str, kernel: str, sig: str, target: str, *options: str,
                   timeout: int = 600) -> subprocess.CompletedProcess:
    """``python -m triton_dist.tools.compile kernels/<module>:<kernel> -s sig --target target --stage ptx|amdgcn
    *options`` (the stage from the target; ``TRITON_INTERPRET`` unset), output captured."""
    stage = "amdgcn" if target.startswith("hip") else "ptx"
    return subprocess.run([sys.executable, "-m", "triton_dist.tools.compile", f"{os.path.join(KERNELS, module)}:{kernel}",
                           "-s", sig, "--target", target, "--stage", stage, *options], capture_output=True, text=True,
                          env=_env("TRITON_INTERPRET"), timeout=timeout)
