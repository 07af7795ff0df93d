"""The measured dispatch tables of the op families, one mechanism for all of them.

A family's table is a JSON file shipped next to its code (the GEMM table ``kernels/gemm_table.json``, the
collectives table ``ops/collectives_table.json``, the overlapped GEMMs' ``ops/overlap_table.json``) that a benchmark
run writes and the ops read when they pick a launch. :class:`DispatchTable` owns what every such table shares:

* the **format header**: the document is an object with ``"format": "<family>/<version>"`` and the family's body
  under one key (``"devices"``, ``"ops"``);
* the **file**: the shipped path, or the file an **environment variable** names instead;
* the **cache**: parsed once, lazily, on the first lookup; ``load(reload=True)`` reads it again (after the variable
  changed or a benchmark wrote the file);
* **parse errors** that name the file and the entry (the family's ``parse`` adds the entry; a file that is not JSON
  or has the wrong header is reported here), raised again by every later lookup, never half-loaded;
* **lookup** by the family's key, **build** (a new document from a body, checked by the family's parser before it is
  returned), **merge with a margin** (:func:`keep_incumbent`) and the **compact JSON dump** (one line per innermost
  object, :func:`dump`);
* for the per-device tables (GEMM, grouped GEMM): the walk of ``{device: {dtype: {shape: ...}}}``
  (:meth:`DispatchTable.device_dtype_items`), the entries' measured times and provenance
  (:meth:`DispatchTable.check_provenance`), a run's timestamp (:func:`run_timestamp`) and the pruning of an emptied
  device after a merge (:func:`drop_empty`).

What stays with each family: its schema (the ``parse`` function: entries and keys), what a lookup selects, and how a
benchmark run becomes entries (its table module's ``build_*``). A new op family adds a table by creating one
:class:`DispatchTable` and writing those three parts.
"""
from __future__ import annotations

import json
import math
import os
import re
from typing import Any, Callable, Optional

__all__ = ["DispatchTable", "TableError", "dump", "keep_incumbent", "check_margin", "run_timestamp", "drop_empty"]


class TableError(ValueError):
    """A dispatch table file or document is malformed (the message names the file and the bad entry). Each family
    raises its own subclass (``GemmTableError``, ``CollectivesTableError``, ``OverlapTableError``)."""


class DispatchTable:
    """One family's measured table: ``what`` (its name in messages), ``path`` (the shipped file), ``env`` (the
    variable naming another file), ``format`` (the header value), ``key`` (the body's key in the document),
    ``parse(doc, path)`` (checks the body, returns the parsed form; raises ``error`` naming ``path`` and the entry),
    ``error`` (the family's :class:`TableError` subclass) and ``missing`` (the parsed form of a table without a file:
    called once per load; default an empty dict)."""

    def __init__(self, *, what: str, path: str, env: str, format: str, key: str,
                 parse: Callable[[Any, str], Any], error: type = TableError,
                 missing: Optional[Callable[[], Any]] = None):
        self.what = what
        self.default_path = path
        self.env = env
        self.format = format
        self.key = key
        self._parse = parse
        self.error = error
        self._missing = missing or dict
        self._cache = None  # (path, parsed, document or None)

    # ------------------------------------------------------------------ file and cache
    def path(self) -> str:
        """The table in use: the file ``$<env>`` names if set, else the shipped one."""
        return os.environ.get(self.env) or self.default_path

    def check_header(self, doc, path: str) -> None:
        """The part every table document shares: an object holding the body (``key``, an object) and ``"format":
        format``; raises ``error`` naming ``path`` otherwise."""
        if not isinstance(doc, dict) or not isinstance(doc.get(self.key), dict):
            raise self.error(f"{path}: not a {self.what} table (expected an object with {self.key!r}, an object)")
        if doc.get("format") != self.format:
            raise self.error(f"{path}: format {doc.get('format')!r}, expected {self.format!r}")

    def check_dtype_key(self, where: str, dtype: str, accepted) -> None:
        """A dtype key of the body (``where`` names it) is one of ``accepted`` (dtype names); raises ``error``
        otherwise."""
        if dtype not in accepted:
            raise self.error(f"{where}: unknown dtype; accepted: {', '.join(accepted)}")

    def device_dtype_items(self, doc, path: str, dtypes, keyed_by: str):
        """Walk a per-device body ``{device name: {dtype: {key: value}}}`` (the GEMM tables'): yields ``(device,
        dtype, key, value, where)``, ``where`` naming ``path: <key>.<device>.<dtype>``. Raises ``error`` for a blank
        device name or a device level that is not an object, a dtype not in ``dtypes``, or a dtype level that is not
        an object (``keyed_by`` says what it is keyed by in the message)."""
        for dev, by_dtype in doc[self.key].items():
            if not dev.strip() or not isinstance(by_dtype, dict):
                raise self.error(f"{path}: {self.key}.{dev!r}: expected a device name and an object keyed by dtype")
            for dt, by_key in by_dtype.items():
                where = f"{path}: {self.key}.{dev}.{dt}"
                self.check_dtype_key(where, dt, dtypes)
                if not isinstance(by_key, dict):
                    raise self.error(f"{where}: expected an object keyed by {keyed_by}")
                for key, value in by_key.items():
                    yield dev, dt, key, value, where

    def check_provenance(self, where: str, ent: dict, times) -> None:
        """An entry's measured times and where they come from: each ``(key, nullable)`` of ``times`` a positive,
        finite number of microseconds (or None where ``nullable``); ``source`` and ``timestamp_utc`` non-empty
        strings, ``git_commit`` one or None. Raises ``error`` naming ``where`` and the key."""
        for key, nullable in times:
            v = ent[key]
            if nullable and v is None:
                continue
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0:
                raise self.error(f"{where}.{key}: expected a positive number of microseconds"
                                 f"{' or null' if nullable else ''}, got {v!r}")
        for key, nullable in (("source", False), ("git_commit", True), ("timestamp_utc", False)):
            v = ent[key]
            if not (isinstance(v, str) and v.strip() or nullable and v is None):
                raise self.error(f"{where}.{key}: expected a non-empty string{' or null' if nullable else ''}, "
                                 f"got {v!r}")

    def parse(self, doc, path: str = "<table>"):
        """Check the header and the body of the document ``doc`` (from ``path``) and return its parsed form."""
        self.check_header(doc, path)
        return self._parse(doc, path)

    def read(self, path: str):
        """``(document, parsed)`` of the table file at ``path``, or None when there is no such file. A file that is
        not JSON, or not a valid table, raises ``error`` naming it (and the entry)."""
        try:
            with open(path) as f:
                text = f.read()
        except FileNotFoundError:
            return None
        try:
            doc = json.loads(text)
        except ValueError as exc:
            raise self.error(f"{path}: not valid JSON: {exc}") from None
        return doc, self.parse(doc, path)

    def _load(self, reload: bool):
        if self._cache is None or reload:
            self._cache = None  # a malformed file is reported again by every later call, never half-loaded
            path = self.path()
            found = self.read(path)
            self._cache = (path, self._missing(), None) if found is None else (path, found[1], found[0])
        return self._cache

    def load(self, reload: bool = False):
        """The parsed table in use (read once, lazily, from :meth:`path`; ``reload=True`` reads it again). A missing
        file is the ``missing`` table; a malformed one raises ``error`` naming the file and the entry."""
        return self._load(reload)[1]

    def document(self, reload: bool = False):
        """The JSON document of the table in use (None when there is no file): what a merge starts from."""
        return self._load(reload)[2]

    def loaded_path(self) -> str:
        """The file the cached table was read from (reads it if nothing is cached)."""
        return self._load(False)[0]

    def lookup(self, key, default=None):
        """The parsed table's entry for ``key`` (a family whose parsed form is a dict of entries), or ``default``."""
        return self.load().get(key, default)

    # ------------------------------------------------------------------ writing
    def build(self, body: dict, note: str, **header) -> dict:
        """A new table document: the format header, ``note`` (what the table is and how it was written), the
        ``header`` fields (provenance) and the ``body``; checked by the family's parser (raises ``error`` naming
        ``"new table"`` when a derivation produced a bad entry)."""
        doc = {"format": self.format, **header, "note": note, self.key: body}
        self.parse(doc, "new table")
        return doc

    def write(self, doc: dict, path: Optional[str] = None) -> str:
        """Check ``doc`` and write it (compact JSON, :func:`dump`) to ``path`` (default: :meth:`path`); the cache is
        dropped when that is the table in use. Returns the path."""
        self.parse(doc, "new table")
        path = path or self.path()
        with open(path, "w") as f:
            f.write(dump(doc))
        if self._cache is not None and os.path.abspath(self._cache[0]) == os.path.abspath(path):
            self._cache = None
        return path

    def __repr__(self):
        return f"DispatchTable({self.what!r}, path={self.path()!r}, format={self.format!r})"


def run_timestamp(doc: dict, source: str) -> Optional[str]:
    """When a benchmark run was made: its results document's ``timestamp_utc``, else the ``<stamp>``
    (``YYYYMMDDTHHMMSSZ``) in the results file name ``source``; None when neither says."""
    if doc.get("timestamp_utc"):
        return str(doc["timestamp_utc"])
    m = re.search(r"(\d{8}T\d{6}Z)", os.path.basename(source))
    return m.group(1) if m else None


def drop_empty(devices: dict, device: str, dtype: str) -> None:
    """After a merge: remove ``devices[device][dtype]`` when it holds no entry, and the device when then empty."""
    if not devices[device][dtype]:
        del devices[device][dtype]
        if not devices[device]:
            del devices[device]


def dump(doc: dict) -> str:
    """The table's JSON text: indented objects, each innermost object (an entry, a rule, a measured point) on one
    line."""
    text = json.dumps(doc, indent=1)
    return re.sub(r"\{\s*([^{}\[\]]*?)\s*\}", lambda m: "{" + " ".join(m.group(1).split()) + "}", text) + "\n"


def check_margin(margin: float, who: str) -> None:
    """``margin`` is a fraction in [0, 0.5) (ValueError naming ``who`` otherwise)."""
    if isinstance(margin, bool) or not isinstance(margin, (int, float)) or not 0.0 <= margin < 0.5:
        raise ValueError(f"{who}: margin={margin!r} must be a fraction in [0, 0.5)")


def keep_incumbent(new_us: float, incumbent_us: Optional[float], margin: float) -> bool:
    """Whether a table entry stays in a merge: the incumbent was timed in the same run (``incumbent_us`` not None)
    and the newcomer (``new_us``) does not beat it by more than ``margin`` (a fraction: 0.015 = 1.5%). So timing noise
    between near-equal candidates does not rewrite a table; ``margin=0`` lets the fastest always win."""
    return incumbent_us is not None and margin > 0 and new_us >= incumbent_us * (1.0 - margin)
