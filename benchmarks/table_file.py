"""The measured dispatch tables' files as the benchmarks rewrite them (bench_collectives, bench_gemm)."""
from __future__ import annotations

import json
import os


def read_existing_table(path, parse, error):
    """The table document at ``path`` to merge a new run into: None when there is no file; ``error`` (the table's
    exception class) when it is not JSON, and whatever ``parse(doc, path)`` raises when it is not a valid table --
    a malformed table is reported, never overwritten."""
    if not os.path.exists(path):
        return None
    with open(path) as f:
        try:
            doc = json.load(f)
        except ValueError as exc:
            raise error(f"{path}: not valid JSON: {exc}") from None
    parse(doc, path)
    return doc
