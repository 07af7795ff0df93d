"""Stands in for filecheck when lit runs in compile-only mode (TRITON_DIST_LIT_COMPILE_ONLY=1, see lit.cfg.py): reads
and discards the input (stdin, or --input-file FILE) so that the command before it in the pipe is never cut off,
and succeeds."""
import sys

if "--input-file" in sys.argv:
    with open(sys.argv[sys.argv.index("--input-file") + 1], "rb") as f:
        f.read()
else:
    sys.stdin.buffer.read()
