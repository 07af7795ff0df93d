"""The measured grouped-GEMM dispatch table (``group_gemm_table.json`` next to this module): per device name, dtype,
expert shape ``E x N x K`` and rows-per-expert bucket, the tiling that ``benchmarks/bench_group_gemm.py`` timed
fastest, with where that came from. ``triton_dist.ops.group_gemm`` on a GPU without ``config`` runs the entry for
its device, dtype, shape and bucket, and otherwise the rule (:func:`~triton_dist.ops.moe_gemm.pick_group_config`):
"auto" is table-then-rule.

The bucket is what the host knows of the routing: the capacity ``rows`` over the ``E`` experts, rounded up to a
power of two (:func:`rows_bucket`: 1,024 rows over 128 experts is bucket 8, 65,536 rows bucket 512). Calls whose
capacity falls in one bucket share an entry; the routing itself (how uneven, which experts are empty) is not seen.

The file, its header, the ``$TRITON_DIST_GROUP_GEMM_TABLE`` override, the cache and the errors are
:class:`~triton_dist.runtime.dispatch_table.DispatchTable`'s (:data:`GROUP_GEMM_TABLE`); this module holds the
schema (:func:`parse_group_gemm_table`), the lookup and how a bench_group_gemm run becomes entries
(:func:`build_group_gemm_table`, with the margin that keeps an incumbent entry through timing noise).
"""
from __future__ import annotations

import json
import math
import os
from typing import Optional

from ..runtime.dispatch_table import (DispatchTable, TableError, check_margin, drop_empty, dump, keep_incumbent,
                                      run_timestamp)
from ..runtime.dtypes import dtype_name
from .gemm_config import TileConfig
from .gemm_table import device_name_of  # noqa: F401  (the table's device key of a CUDA device)

#: The measured table shipped with the package, written by ``benchmarks/bench_group_gemm.py --write-table`` (or
#: ``--table-from JSON``). ``$TRITON_DIST_GROUP_GEMM_TABLE`` names another file instead.
GROUP_GEMM_TABLE_PATH = os.path.join(os.path.dirname(__file__), "group_gemm_table.json")
GROUP_GEMM_TABLE_ENV = "TRITON_DIST_GROUP_GEMM_TABLE"
GROUP_GEMM_TABLE_FORMAT = "triton_dist.group_gemm_table/1"
GROUP_GEMM_TABLE_DTYPES = ("bfloat16", "float16", "float8_e4m3fn", "float8_e5m2")
#: Keys every entry carries: the tiling and its provenance (the bench JSON ``source``, its ``git_commit`` /
#: ``timestamp_utc``, the entry's measured ``us`` and the ``torch._grouped_mm`` baseline's ``grouped_mm_us``, null
#: where the run had none).
GROUP_GEMM_TABLE_KEYS = ("config", "source", "git_commit", "timestamp_utc", "us", "grouped_mm_us")


class GroupGemmTableError(TableError):
    """The measured grouped-GEMM table file is malformed (the message names the file and the bad entry)."""


def rows_bucket(rows: int, num_experts: int) -> int:
    """The table's bucket of a call: ``ceil(rows / num_experts)`` rounded up to a power of two (at least 1)."""
    per = max(1, -(-int(rows) // max(1, int(num_experts))))
    return 1 << (per - 1).bit_length()


def _tiling(where: str, text) -> TileConfig:
    """An entry's tiling: ``BMxBNxBKxWARPSxSTAGES`` (``TileConfig.parse``; the grouped GEMM has no flattened, TMA-store
    or split-K forms, so no suffix but ``p``, pointer loads)."""
    try:
        cfg = TileConfig.parse(text) if isinstance(text, str) else None
    except ValueError as exc:
        raise GroupGemmTableError(f"{where}.config: {exc}") from None
    if cfg is None or cfg.flatten or cfg.tma_store or cfg.split_k > 1:
        raise GroupGemmTableError(f"{where}.config: expected BMxBNxBKxWARPSxSTAGES (optionally p), got {text!r}")
    return cfg


def _parse_entry(where: str, ent) -> TileConfig:
    if not isinstance(ent, dict):
        raise GroupGemmTableError(f"{where}: expected an object with {', '.join(GROUP_GEMM_TABLE_KEYS)}, got {ent!r}")
    missing = [k for k in GROUP_GEMM_TABLE_KEYS if k not in ent]
    if missing:
        raise GroupGemmTableError(f"{where}: missing {', '.join(missing)} (every entry names its tiling and the bench "
                                  f"JSON it was measured in)")
    cfg = _tiling(where, ent["config"])
    GROUP_GEMM_TABLE.check_provenance(where, ent, (("us", False), ("grouped_mm_us", True)))
    return cfg


def _shape_key(text) -> Optional[tuple]:
    dims = str(text).split("x")
    if len(dims) == 3 and all(d.isdigit() and int(d) > 0 for d in dims):
        return tuple(int(d) for d in dims)
    return None


def parse_group_gemm_table(doc, path: str = "<table>") -> dict:
    """Check a table document and return ``{(device, dtype, E, N, K, bucket): TileConfig}``. Raises
    :class:`GroupGemmTableError` naming ``path`` and the entry.

    Document: ``{"format": GROUP_GEMM_TABLE_FORMAT, "devices": {device name: {dtype: {"ExNxK": {"<bucket>":
    {"config": tiling, "source": bench JSON path, "git_commit": str | null, "timestamp_utc": str, "us": float,
    "grouped_mm_us": float | null, ...}}}}}}`` (device names as ``torch.cuda.get_device_name`` gives them; bucket: a
    power of two, :func:`rows_bucket`; extra keys are more provenance, ignored here)."""
    GROUP_GEMM_TABLE.check_header(doc, path)
    out = {}
    for dev, dt, shape, by_bucket, where in GROUP_GEMM_TABLE.device_dtype_items(doc, path, GROUP_GEMM_TABLE_DTYPES,
                                                                                "expert shape ExNxK"):
        dims = _shape_key(shape)
        if dims is None or not isinstance(by_bucket, dict):
            raise GroupGemmTableError(f"{where}.{shape}: expected an ExNxK key (positive integers) holding an object "
                                      f"keyed by rows-per-expert bucket")
        for bucket, ent in by_bucket.items():
            b = int(bucket) if str(bucket).isdigit() else 0
            if b < 1 or b & (b - 1):
                raise GroupGemmTableError(f"{where}.{shape}.{bucket}: bucket must be a power of two (rows per "
                                          f"expert, rounded up)")
            out[(dev, dt) + dims + (b, )] = _parse_entry(f"{where}.{shape}.{bucket}", ent)
    return out


def _parse_body(doc, path: str) -> dict:
    return parse_group_gemm_table(doc, path)


#: The grouped GEMM's table: file, header, ``$TRITON_DIST_GROUP_GEMM_TABLE`` override, cache and errors.
GROUP_GEMM_TABLE = DispatchTable(what="grouped GEMM", path=GROUP_GEMM_TABLE_PATH, env=GROUP_GEMM_TABLE_ENV,
                                 format=GROUP_GEMM_TABLE_FORMAT, key="devices", parse=_parse_body,
                                 error=GroupGemmTableError)


def load_group_gemm_table(reload: bool = False) -> dict:
    """The parsed measured table ``{(device, dtype, E, N, K, bucket): TileConfig}`` (read once, lazily; a missing
    file is an empty table; a malformed one raises :class:`GroupGemmTableError` naming the file and the entry, on
    every later call too)."""
    return GROUP_GEMM_TABLE.load(reload)


def group_gemm_table_lookup(device_name: str, dtype, num_experts: int, N: int, K: int,
                            rows: int) -> Optional[TileConfig]:
    """The measured table's tiling for a grouped GEMM of ``num_experts`` experts of ``[K, N]`` in ``dtype`` (a
    ``torch.dtype`` or its name) with capacity ``rows`` on the device named ``device_name``, or None: exact device,
    dtype, expert shape and :func:`rows_bucket`."""
    return GROUP_GEMM_TABLE.lookup((device_name, dtype_name(dtype), int(num_experts), int(N), int(K),
                                    rows_bucket(rows, num_experts)))


def _device_of(doc: dict) -> Optional[str]:
    """The GPU a bench_group_gemm document ran on (its header's ``versions.gpu``, else its first device)."""
    dev = (doc.get("versions") or {}).get("gpu") or (doc.get("devices") or [None])[0] or doc.get("device")
    return dev if isinstance(dev, str) and dev.strip() else None


def _candidates(rec: dict) -> dict:
    """``{tiling string: us}`` a bench_group_gemm record timed without error: ``ours`` as the tiling it ran (the
    record's ``config``) and every ``ours/<tiling>`` column (the ``--configs`` sweep; not ``ours/nk`` / ``ours/fp8``,
    other operands)."""
    us, errors = rec.get("us") or {}, rec.get("errors") or {}
    out = {}
    for name, t in us.items():
        if not name.startswith("ours") or name in errors or not isinstance(t, (int, float)) or \
                name in ("ours/nk", "ours/fp8"):
            continue
        text = rec.get("config") if name == "ours" else name[len("ours/"):]
        try:
            cfg = str(TileConfig.parse(text))
        except (ValueError, TypeError):
            continue
        out[cfg] = min(float(t), out.get(cfg, math.inf))
    return out


def build_group_gemm_table(doc: dict, source: str, old: Optional[dict] = None, margin: float = 0.0):
    """Merge a ``bench_group_gemm`` results document ``doc`` (recorded as coming from ``source``) into the table
    document ``old`` (None: empty) and return ``(table, report)``. Per grouped-GEMM record of 16-bit operands (the
    layer records and the fp8 column are not tilings of this table): the fastest of :func:`_candidates` becomes the
    entry of (device, ``bfloat16``, E x N x K, bucket of the record's rows), with provenance. ``margin`` (a fraction):
    an old entry the run timed too stays unless the fastest beats it by more than that (timing noise does not
    rewrite the table). Entries the run did not measure are kept. ``report``: one line per record."""
    check_margin(margin, "build_group_gemm_table")
    device = _device_of(doc)
    if device is None:
        raise GroupGemmTableError(f"{source}: the results document names no device")
    stamp = run_timestamp(doc, source)
    if stamp is None:
        raise GroupGemmTableError(f"{source}: no timestamp_utc in the results document and no <stamp> in its file "
                                  f"name: an entry must say when it was measured")
    devices = {}
    if old:
        GROUP_GEMM_TABLE.parse(old, "old table")
        devices = json.loads(json.dumps(old["devices"]))  # a copy
    by_shape = devices.setdefault(device, {}).setdefault("bfloat16", {})
    report = []
    for rec in doc.get("records", []):
        if rec.get("layer") or "projection" not in rec:
            continue
        cands = _candidates(rec)
        if not cands:
            continue
        E, N, K, rows = int(rec["experts"]), int(rec["N"]), int(rec["K"]), int(rec["rows"])
        shape, bucket = f"{E}x{N}x{K}", str(rows_bucket(rows, E))
        best = min(cands, key=cands.get)
        held = by_shape.get(shape, {}).get(bucket)
        t_held = cands.get(str(_parse_entry(f"{shape}.{bucket}", held))) if held is not None and margin > 0 else None
        what = f"{rec.get('name', '?')} {rec.get('projection')} rows {rows} ({shape}, bucket {bucket})"
        if keep_incumbent(cands[best], t_held, margin):
            report.append(f"{what}: entry {held['config']} kept ({t_held:.1f} us in this run; {best} at "
                          f"{cands[best]:.1f} us is within the {margin:.1%} margin)")
            continue
        us = rec.get("us") or {}
        base = min((float(us[n]) for n in ("grouped_mm", "grouped_mm/nk") if isinstance(us.get(n), (int, float))),
                   default=None)
        by_shape.setdefault(shape, {})[bucket] = {
            "config": best, "source": source, "git_commit": doc.get("git_commit"), "timestamp_utc": stamp,
            "us": round(cands[best], 2), "grouped_mm_us": None if base is None else round(base, 2)}
        report.append(f"{what}: {best} {cands[best]:.1f} us" + (f", {base / cands[best]:.3f}x torch._grouped_mm"
                                                                  if base else ""))
    drop_empty(devices, device, "bfloat16")
    for dev in devices.values():
        for dt in dev:
            dev[dt] = {s: dict(sorted(b.items(), key=lambda kv: int(kv[0])))
                       for s, b in sorted(dev[dt].items(), key=lambda kv: _shape_key(kv[0]))}
    table = GROUP_GEMM_TABLE.build(
        devices, "triton_dist.ops.group_gemm on a GPU without config: per device name, dtype, expert shape E x N x K "
                 "and rows-per-expert bucket (capacity / E rounded up to a power of two), the fastest tiling of "
                 "benchmarks/bench_group_gemm.py (the rule's and the --configs sweep's; CUDA-graph replay, "
                 "interleaved, median); calls without an entry take the rule (ops.moe_gemm.pick_group_config). "
                 "Written by bench_group_gemm.py --write-table / --table-from; each entry names the results JSON and "
                 "commit it came from.")
    return table, report


def dump_group_gemm_table(table: dict) -> str:
    """The table's JSON text: one line per entry (:func:`~triton_dist.runtime.dispatch_table.dump`)."""
    return dump(table)


__all__ = ["GROUP_GEMM_TABLE", "GROUP_GEMM_TABLE_PATH", "GROUP_GEMM_TABLE_ENV", "GROUP_GEMM_TABLE_FORMAT",
           "GROUP_GEMM_TABLE_DTYPES", "GROUP_GEMM_TABLE_KEYS", "GroupGemmTableError", "rows_bucket", "device_name_of",
           "parse_group_gemm_table", "load_group_gemm_table", "group_gemm_table_lookup", "build_group_gemm_table",
           "dump_group_gemm_table"]
