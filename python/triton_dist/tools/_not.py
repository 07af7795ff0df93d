"""``python -m triton_dist.tools._not CMD...``: run CMD and invert success (for lit tests that expect failure),
so the lit suite needs no LLVM `not` binary."""
import subprocess
import sys

if __name__ == "__main__":
    rc = subprocess.call(sys.argv[1:])
    sys.exit(0 if rc != 0 else 1)
