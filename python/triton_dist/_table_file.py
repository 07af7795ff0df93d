"""Reading a measured dispatch table's JSON file: the GEMM table (``kernels.gemm``), the collectives table
(``ops.collectives_table``) and the benchmarks that merge a new run into either. One reader, one way to report a
file that is not JSON; what a valid document is stays with each table's parser."""
from __future__ import annotations

import json

__all__ = ["read_table", "check_header"]


def read_table(path: str, parse, error):
    """``(doc, parse(doc, path))`` for the JSON table file at ``path``, or None when there is no such file. A file
    that is not JSON raises ``error`` (the table's exception class) naming it; a document that is not a valid table
    raises whatever ``parse`` raises (which names the entry)."""
    try:
        with open(path) as f:
            text = f.read()
    except FileNotFoundError:
        return None
    try:
        doc = json.loads(text)
    except ValueError as exc:
        raise error(f"{path}: not valid JSON: {exc}") from None
    return doc, parse(doc, path)


def check_header(doc, path: str, what: str, key: str, fmt: str, error) -> None:
    """The part every table document shares: an object holding the ``key`` object and ``"format": fmt``; raises
    ``error`` naming ``path`` and ``what`` the table is otherwise."""
    if not isinstance(doc, dict) or not isinstance(doc.get(key), dict):
        raise error(f"{path}: not a {what} table (expected an object with {key!r}, an object)")
    if doc.get("format") != fmt:
        raise error(f"{path}: format {doc.get('format')!r}, expected {fmt!r}")
