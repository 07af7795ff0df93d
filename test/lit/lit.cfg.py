# lit configuration: every test compiles kernels for a GPU target on this (CPU-only) machine with
# triton_dist.tools.compile and checks the IR with the `filecheck` package.
import os
import shutil
import sys

import lit.formats

config.name = "triton-dist"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".py"]
config.excludes = ["lit.cfg.py", "Inputs", "__pycache__"]
config.test_source_root = os.path.dirname(__file__)
repo_root = os.path.abspath(os.path.join(config.test_source_root, "..", ".."))

python = sys.executable
config.substitutions.append(("%python", python))
config.substitutions.append(("%compile", f"{python} -m triton_dist.tools.compile"))
filecheck = os.path.abspath(shutil.which("filecheck") or os.path.join(os.path.dirname(python), "filecheck"))
# TRITON_DIST_LIT_COMPILE_ONLY=1 (CI's Triton matrix, scripts/triton_matrix.sh): every RUN line runs, but filecheck
# only drains its input. The IR checks hold for the pinned Triton; on the other versions the tests prove that every
# kernel still compiles (pipefail: a failing compile fails the test; `--stage ptx` assembles the cubin with ptxas,
# so an unresolved NVSHMEM call fails too) and that expected compile errors (`not %compile`) still happen.
if os.environ.get("TRITON_DIST_LIT_COMPILE_ONLY") == "1":
    filecheck = f"{python} {os.path.join(config.test_source_root, 'Inputs', 'drain.py')}"
    config.available_features.add("compile-only")
    # The matrix runs several Tritons at once on one tree: each writes its %t files under its own folder (in the
    # tests' Output/ folders they overwrote each other's while another version read them).
    import triton

    config.test_exec_root = os.path.join(repo_root, "build", "lit", f"triton-{triton.__version__}")
config.substitutions.append(("filecheck", filecheck))
config.substitutions.append(("not ", f"{python} -m triton_dist.tools._not "))

# What the installed Triton has (lit features for REQUIRES / UNSUPPORTED), from triton_dist._compat.
sys.path.insert(0, os.path.join(repo_root, "python"))
from triton_dist import _compat  # noqa: E402

if _compat.HAS_BLOCK_POINTERS:
    config.available_features.add("block-pointers")

# The installed package is used when present; otherwise the source tree.
pythonpath = [os.path.join(repo_root, "python")]
if os.environ.get("PYTHONPATH"):
    pythonpath.append(os.environ["PYTHONPATH"])
config.environment["PYTHONPATH"] = os.pathsep.join(pythonpath)
for var in ("HOME", "TRITON_CACHE_DIR", "TRITON_HOME", "TRITON_DIST_NVSHMEM_BITCODE", "NVSHMEM_HOME", "PATH"):
    if var in os.environ:
        config.environment[var] = os.environ[var]
# Compilation is never interpretation, whatever the caller's environment says.
config.environment["TRITON_INTERPRET"] = "0"
config.environment.pop("TRITON_DIST_BOUNDED_WAIT", None)
