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
config.substitutions.append(("filecheck", filecheck))
config.substitutions.append(("not ", f"{python} -m triton_dist.tools._not "))

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
