"""The measured dispatch table of ``method="auto"`` for the collectives (``collectives_table.json``): its schema,
lookup (a dict lookup and a bisect per call) and how a benchmark run becomes a table (:func:`build_table`, used by
``benchmarks/bench_collectives.py --write-table`` / ``--table-from``). The file, its format header, the
``$TRITON_DIST_COLLECTIVES_TABLE`` override, the cache and the errors (a malformed file raises
:class:`CollectivesTableError` naming it and the entry) are
:class:`~triton_dist.runtime.dispatch_table.DispatchTable`'s (:data:`COLLECTIVES_TABLE`). The selection order around
it (user overrides, built-in defaults) is :func:`triton_dist.ops.collectives._select_method`.
"""
from __future__ import annotations

import bisect
import math
import os
from typing import Optional

from ..runtime.dispatch_table import DispatchTable, TableError, dump
from ..runtime.dtypes import dtype_name

#: The measured table shipped with the package, written by ``benchmarks/bench_collectives.py --write-table`` (or
#: ``--table-from JSON``). ``$TRITON_DIST_COLLECTIVES_TABLE`` names another file instead.
TABLE_PATH = os.path.join(os.path.dirname(__file__), "collectives_table.json")
TABLE_ENV = "TRITON_DIST_COLLECTIVES_TABLE"
TABLE_FORMAT = "triton_dist.collectives_table/1"
#: Methods a table entry may name per op (besides "nccl").
TABLE_METHODS = {"all_reduce": ("one_shot", "two_shot", "two_shot_pipe", "ll"),
                 "all_gather": ("push", "pull", "push_pipe", "ll", "ce"),
                 "reduce_scatter": ("direct", "direct_push", "push_pipe", "ll", "ring")}
TABLE_DTYPES = ("bfloat16", "float16", "float32")
#: dtypes without entries of their own use these (same element size / bytes moved).
TABLE_DTYPE_FALLBACK = {"float16": "bfloat16", "float8_e4m3fn": "bfloat16", "float8_e5m2": "bfloat16"}
_UNBOUNDED = 1 << 62


class CollectivesTableError(TableError):
    """The measured table file is malformed (the message names the file and the bad entry)."""


def _parse_rules(where: str, op: str, rules) -> tuple:
    if not isinstance(rules, list) or not rules:
        raise CollectivesTableError(f"{where}: expected a non-empty list of {{'max_bytes', 'method'}} rules")
    bounds, methods = [], []
    for i, rule in enumerate(rules):
        if not isinstance(rule, dict) or "method" not in rule or "max_bytes" not in rule:
            raise CollectivesTableError(f"{where}[{i}]: expected {{'max_bytes': int or null, 'method': str}}, "
                                        f"got {rule!r}")
        m, hi = rule["method"], rule["max_bytes"]
        if m != "nccl" and m not in TABLE_METHODS[op]:
            raise CollectivesTableError(f"{where}[{i}]: unknown method {m!r}; accepted: "
                                        f"{', '.join(TABLE_METHODS[op] + ('nccl', ))}")
        last = i == len(rules) - 1
        if hi is None and not last or hi is not None and (isinstance(hi, bool) or not isinstance(hi, int) or hi <= 0):
            raise CollectivesTableError(f"{where}[{i}]: max_bytes={hi!r} must be a positive int (null only for the "
                                        f"last rule)")
        if bounds and hi is not None and hi <= bounds[-1]:
            raise CollectivesTableError(f"{where}[{i}]: max_bytes={hi} does not increase (previous {bounds[-1]})")
        bounds.append(_UNBOUNDED if hi is None else hi)
        methods.append(m)
    if bounds[-1] != _UNBOUNDED:
        raise CollectivesTableError(f"{where}: the last rule must have max_bytes null (covers every larger size)")
    return bounds, methods


def parse_table(doc, path: str = "<table>") -> dict:
    """Check a table document and return ``{(op, world, dtype): (bounds, methods)}`` (``bounds`` sorted, inclusive
    upper bytes, the last one unbounded). Raises :class:`CollectivesTableError` naming ``path`` and the entry.

    Document: ``{"format": TABLE_FORMAT, "ops": {op: {"<world>": {dtype: {"rules": [{"max_bytes": int | null,
    "method": str}, ...], "source": ..., ...}}}}}`` (extra keys are provenance, ignored here)."""
    COLLECTIVES_TABLE.check_header(doc, path)
    out = {}
    for op, by_world in doc["ops"].items():
        if op not in TABLE_METHODS:
            raise CollectivesTableError(f"{path}: unknown op {op!r}; accepted: {', '.join(TABLE_METHODS)}")
        if not isinstance(by_world, dict):
            raise CollectivesTableError(f"{path}: ops.{op} must be an object keyed by world size")
        for world, by_dtype in by_world.items():
            if not str(world).isdigit() or int(world) < 1 or not isinstance(by_dtype, dict):
                raise CollectivesTableError(f"{path}: ops.{op}.{world}: expected a world size key and an object "
                                            f"keyed by dtype")
            for dt, entry in by_dtype.items():
                where = f"{path}: ops.{op}.{world}.{dt}"
                COLLECTIVES_TABLE.check_dtype_key(where, dt, TABLE_DTYPES)
                if not isinstance(entry, dict):
                    raise CollectivesTableError(f"{where}: expected an object with 'rules'")
                out[(op, int(world), dt)] = _parse_rules(where + ".rules", op, entry.get("rules"))
    return out


#: The collectives' table: file, header, ``$TRITON_DIST_COLLECTIVES_TABLE`` override, cache and errors.
COLLECTIVES_TABLE = DispatchTable(what="collectives", path=TABLE_PATH, env=TABLE_ENV, format=TABLE_FORMAT, key="ops",
                                  parse=parse_table, error=CollectivesTableError)


def table_path() -> str:
    """The measured table in use: ``$TRITON_DIST_COLLECTIVES_TABLE`` if set, else :data:`TABLE_PATH`."""
    return COLLECTIVES_TABLE.path()


def load_table(reload: bool = False) -> dict:
    """The parsed measured table ``{(op, world, dtype): (bounds, methods)}`` (read once, lazily, on the first
    ``auto`` call on a GPU, from :func:`table_path`; ``reload=True`` reads it again, e.g. after changing
    ``$TRITON_DIST_COLLECTIVES_TABLE``). A missing file is an empty table; a malformed one raises
    :class:`CollectivesTableError` naming the file."""
    return COLLECTIVES_TABLE.load(reload)


def best_per_size(results, tolerance: float = 0.01) -> dict:
    """From a ``bench_collectives`` JSON's ``results`` rows: ``{(op, world, dtype): [(bytes, method, us, best_us),
    ...]}`` sorted by size, where the candidates are each of our methods' CUDA-graph time (correct rows only) and
    NCCL's, ``best_us`` the fastest and ``method`` the pick: the previous size's method while it is within
    ``tolerance`` of the fastest (fewer crossovers from noise), else the fastest."""
    cands = {}
    for r in results:
        op = r.get("op")
        if op not in TABLE_METHODS or "nccl_us" not in r or r.get("dtype") not in TABLE_DTYPES:
            continue
        key = (op, int(r["world"]), r["dtype"])
        c = cands.setdefault(key, {}).setdefault(int(r["bytes"]), {})
        c["nccl"] = float(r["nccl_us"])
        m = r.get("method")
        if m in TABLE_METHODS[op] and "us" in r and r.get("correct", True) and r.get("error") is None:
            c[m] = float(r["us"])
    out = {}
    for key, by_size in cands.items():
        rows, prev = [], None
        for nbytes in sorted(by_size):
            times = by_size[nbytes]
            best = min(times.values())
            pick = min(times, key=times.get)
            if prev in times and times[prev] <= best * (1 + tolerance):
                pick = prev
            rows.append((nbytes, pick, times[pick], best))
            prev = pick
        out[key] = rows
    return out


def rules_from_points(points) -> list:
    """Table rules from ``[(bytes, method, ...), ...]`` sorted by size: each measured size keeps its method up to the
    geometric midpoint to the next measured size (``isqrt(a * b)``, inclusive); equal neighbours merge; the last
    rule is unbounded (``max_bytes`` null)."""
    rules = []
    for i, p in enumerate(points):
        hi = math.isqrt(p[0] * points[i + 1][0]) if i + 1 < len(points) else None
        if rules and rules[-1]["method"] == p[1]:
            rules[-1]["max_bytes"] = hi
        else:
            rules.append({"max_bytes": hi, "method": p[1]})
    return rules


def build_table(doc: dict, source: str, old: Optional[dict] = None, tolerance: float = 0.01) -> dict:
    """A table document from a ``bench_collectives`` results document ``doc`` (recorded as coming from ``source``):
    one entry per (op, world, dtype) it measured, with its rules (:func:`rules_from_points`), the measured points and
    provenance. Entries of ``old`` (a previous table document) that ``doc`` did not measure are kept."""
    ops = {}
    if old:
        COLLECTIVES_TABLE.parse(old, "old table")
        for op, by_world in old["ops"].items():
            for world, by_dtype in by_world.items():
                ops.setdefault(op, {}).setdefault(str(world), {}).update(by_dtype)
    versions = doc.get("versions") or {}
    for (op, world, dt), pts in sorted(best_per_size(doc.get("results", []), tolerance).items()):
        ops.setdefault(op, {}).setdefault(str(world), {})[dt] = {
            "source": source, "git_commit": doc.get("git_commit"), "gpu": versions.get("gpu"),
            "timestamp_utc": doc.get("timestamp_utc"), "rules": rules_from_points(pts),
            "measured": [{"bytes": b, "method": m, "us": round(us, 3), "best_us": round(best, 3)}
                         for b, m, us, best in pts]}
    return COLLECTIVES_TABLE.build(
        ops, "method='auto' of triton_dist.ops collectives (GPU only): per op, world size and dtype, the fastest of "
             "our methods and NCCL per measured size (CUDA-graph replay; the previous size's method while within "
             "1%), boundaries at the geometric midpoint of measured sizes; sizes in the NCCL-tests convention. "
             "Written by benchmarks/bench_collectives.py --write-table / --table-from; each entry names the results "
             "JSON and commit it came from.")


def dump_table(table: dict) -> str:
    """The table's JSON text: one line per rule / measured point (:func:`~triton_dist.runtime.dispatch_table.dump`)."""
    return dump(table)


def table_lookup(op: str, world: int, dtype, nbytes: int) -> Optional[str]:
    """The measured table's method for a call of ``nbytes`` of ``op`` at ``world`` ranks in ``dtype`` (a
    ``torch.dtype`` or its name; fp16 / fp8 use bf16's entry when they have none), or None without an entry."""
    tab = load_table()
    dtype = dtype_name(dtype)
    if not tab or dtype is None:
        return None
    ent = tab.get((op, world, dtype))
    if ent is None and dtype in TABLE_DTYPE_FALLBACK:
        ent = tab.get((op, world, TABLE_DTYPE_FALLBACK[dtype]))
    if ent is None:
        return None
    bounds, methods = ent
    return methods[min(bisect.bisect_left(bounds, nbytes), len(methods) - 1)]
