"""The measured GEMM dispatch table (``gemm_table.json`` next to this module): per device name, dtype and exact
``(M, N, K)``, the tiling and loop / epilogue form (``FLATTEN``, ``TMA_STORE``) that ``benchmarks/bench_gemm.py``
timed fastest, with where that came from. ``triton_dist.ops.matmul`` on a GPU without ``config`` runs an exact-shape
entry for its device and dtype (through ``gemm_config.launch_variant``, the launch bench_gemm times) and otherwise
the decode rule or the autotuner (:func:`select_matmul_launch`): "auto" is table-then-autotune.

The file, its header, the ``$TRITON_DIST_GEMM_TABLE`` override, the cache and the errors are
:class:`~triton_dist.runtime.dispatch_table.DispatchTable`'s (:data:`GEMM_TABLE`); this module holds the schema
(:func:`parse_gemm_table`), the lookup and how a bench_gemm run becomes entries (:func:`build_gemm_table`, with a
margin that keeps an incumbent entry through timing noise).
"""
from __future__ import annotations

import functools
import json
import os
from typing import Optional

from ..runtime.dispatch_table import (DispatchTable, TableError, check_margin, drop_empty, dump, keep_incumbent,
                                      run_timestamp)
from ..runtime.dtypes import dtype_name
from .gemm_config import (GEMM_FORMS, SPLIT_K_MAX_M, GemmVariant, TileConfig, pick_decode_config, variant_config,
                          variant_forms)

#: The measured table shipped with the package, written by ``benchmarks/bench_gemm.py --write-table`` (or
#: ``--table-from JSON``). ``$TRITON_DIST_GEMM_TABLE`` names another file instead.
GEMM_TABLE_PATH = os.path.join(os.path.dirname(__file__), "gemm_table.json")
GEMM_TABLE_ENV = "TRITON_DIST_GEMM_TABLE"
GEMM_TABLE_FORMAT = "triton_dist.gemm_table/1"
GEMM_TABLE_DTYPES = ("bfloat16", "float16", "float8_e4m3fn", "float8_e5m2")
#: Keys every entry carries: the launch (``config``, ``flatten``, ``tma_store``) and its provenance (the bench JSON
#: ``source`` and its ``git_commit`` / ``timestamp_utc``, the entry's and cuBLAS's measured ``us`` / ``cublas_us``).
GEMM_TABLE_KEYS = ("config", "flatten", "tma_store", "source", "git_commit", "timestamp_utc", "us", "cublas_us")


class GemmTableError(TableError):
    """The measured GEMM table file is malformed (the message names the file and the bad entry)."""


def _positive_int(text) -> bool:
    return str(text).isdigit() and int(text) > 0


def _parse_gemm_entry(where: str, ent) -> GemmVariant:
    if not isinstance(ent, dict):
        raise GemmTableError(f"{where}: expected an object with {', '.join(GEMM_TABLE_KEYS)}, got {ent!r}")
    missing = [k for k in GEMM_TABLE_KEYS if k not in ent]
    if missing:
        raise GemmTableError(f"{where}: missing {', '.join(missing)} (every entry names its launch and the bench JSON "
                             f"it was measured in)")
    try:
        cfg = variant_config(ent["config"]) if isinstance(ent["config"], str) else None
    except ValueError as exc:
        raise GemmTableError(f"{where}.config: {exc}") from None
    if cfg is None:
        raise GemmTableError(f"{where}.config: expected a tiling string, got {ent['config']!r}")
    for key in ("flatten", "tma_store"):
        if not isinstance(ent[key], bool):
            raise GemmTableError(f"{where}.{key}: expected true or false, got {ent[key]!r}")
    form = next(name for name, f in GEMM_FORMS.items() if f == (ent["flatten"], ent["tma_store"]))
    if form not in variant_forms(cfg):
        raise GemmTableError(f"{where}: tiling {cfg} runs as {', '.join(variant_forms(cfg))} only, the entry says "
                             f"{form} (flatten / tma_store)")
    GEMM_TABLE.check_provenance(where, ent, (("us", False), ("cublas_us", False)))
    return GemmVariant(cfg, ent["flatten"], ent["tma_store"])


def parse_gemm_table(doc, path: str = "<table>") -> dict:
    """Check a table document and return ``{(device, dtype, M, N, K): GemmVariant}``. Raises
    :class:`GemmTableError` naming ``path`` and the entry.

    Document: ``{"format": GEMM_TABLE_FORMAT, "devices": {device name: {dtype: {"MxNxK": {"config": tiling,
    "flatten": bool, "tma_store": bool, "source": bench JSON path, "git_commit": str | null, "timestamp_utc": str,
    "us": float, "cublas_us": float, ...}}}}}`` (device names as ``torch.cuda.get_device_name`` gives them; extra
    keys are more provenance, ignored here)."""
    GEMM_TABLE.check_header(doc, path)
    out = {}
    for dev, dt, shape, ent, where in GEMM_TABLE.device_dtype_items(doc, path, GEMM_TABLE_DTYPES, "shape MxNxK"):
        dims = str(shape).split("x")
        if len(dims) != 3 or not all(_positive_int(d) for d in dims):
            raise GemmTableError(f"{where}.{shape}: shape key must be MxNxK with positive integers")
        out[(dev, dt) + tuple(int(d) for d in dims)] = _parse_gemm_entry(f"{where}.{shape}", ent)
    return out


def _parse_body(doc, path: str) -> dict:
    return parse_gemm_table(doc, path)


#: The GEMM family's table: file, header, ``$TRITON_DIST_GEMM_TABLE`` override, cache and errors.
GEMM_TABLE = DispatchTable(what="GEMM", path=GEMM_TABLE_PATH, env=GEMM_TABLE_ENV, format=GEMM_TABLE_FORMAT,
                           key="devices", parse=_parse_body, error=GemmTableError)


def gemm_table_path() -> str:
    """The measured table in use: ``$TRITON_DIST_GEMM_TABLE`` if set, else :data:`GEMM_TABLE_PATH`."""
    return GEMM_TABLE.path()


def load_gemm_table(reload: bool = False) -> dict:
    """The parsed measured table ``{(device, dtype, M, N, K): GemmVariant}`` (read once, lazily, on the first
    ``matmul`` that may use it, from :func:`gemm_table_path`; ``reload=True`` reads it again). A missing file is an
    empty table; a malformed one raises :class:`GemmTableError` naming the file and the entry (every later call raises
    it again)."""
    return GEMM_TABLE.load(reload)


def gemm_table_lookup(device_name: str, dtype, M: int, N: int, K: int) -> Optional[GemmVariant]:
    """The measured table's variant for an ``M x N x K`` GEMM in ``dtype`` (a ``torch.dtype`` or its name) on the
    device named ``device_name``, or None: exact device, dtype and shape only."""
    return GEMM_TABLE.lookup((device_name, dtype_name(dtype), int(M), int(N), int(K)))


def select_matmul_launch(M: int, N: int, K: int, dtype, device_name: Optional[str], *, use_tma: bool,
                         num_sms: int, config: Optional[TileConfig] = None, autotune: bool = True,
                         table: bool = True, tma_store_ok: bool = True):
    """What :func:`matmul` launches, as ``(kind, what)``: ``("config", TileConfig or None)`` (the given ``config``,
    or :func:`pick_config`'s when None: off GPU, ``autotune=False``), ``("table", GemmVariant)`` (an exact-shape entry
    of the measured table for this device and dtype), ``("decode", TileConfig)`` (no entry and ``M <=
    SPLIT_K_MAX_M``: :func:`pick_decode_config` for ``num_sms`` SMs, split-K where the tiles leave SMs idle) or
    ``("autotune", None)``. ``device_name`` None means not on a GPU. A table entry is taken only where its launch is
    the one measured: TMA loads available (``use_tma``) and, for a ``tma_store`` entry, an output a tensor descriptor
    can store to (``tma_store_ok``); ``table=False`` skips the table (the decode rule still applies)."""
    if device_name is None or config is not None or not autotune:
        return "config", config
    if table and use_tma:
        var = gemm_table_lookup(device_name, dtype, M, N, K)
        if var is not None and (tma_store_ok or not var.tma_store):
            return "table", var
    if M <= SPLIT_K_MAX_M:
        return "decode", pick_decode_config(M, N, K, num_sms=num_sms)
    return "autotune", None


@functools.lru_cache(maxsize=None)
def device_name_of(index: int) -> str:
    """``torch.cuda.get_device_name(index)``, cached: the table's device key of a CUDA device."""
    import torch

    return torch.cuda.get_device_name(index)


def best_gemm_variants(doc: dict):
    """Per record of a ``bench_gemm`` results document: ``((M, N, K), GemmVariant or None, us, record)``. The
    candidates are our fixed variants (``ours/<tiling>/<form>``, timed without error) and ``ours/auto`` when the
    record says which variant it ran (``auto_variant``: a table entry; ``auto_rule``: the decode rule's tiling, run
    plain); the fastest wins. None when the fastest of
    ours ran the autotuner (``ours/auto`` without ``auto_variant``, or ``ours/autotune``): its pick is not known."""
    out = []
    for rec in doc.get("records", []):
        us = rec.get("us") or {}
        errors = rec.get("errors") or {}
        cands = {}  # name -> (variant or None, us)
        for name, t in us.items():
            if not name.startswith("ours/") or name in errors or not isinstance(t, (int, float)):
                continue
            if name in ("ours/auto", "ours/autotune"):
                var = rec.get("auto_variant") if name == "ours/auto" else None
                if name == "ours/auto" and not var and rec.get("auto_rule"):
                    var = f"{rec['auto_rule']}/plain"  # the decode rule's tiling: a launch the table can name
                try:
                    cands[name] = (GemmVariant.parse(var) if var else None, float(t))
                except ValueError as exc:
                    raise GemmTableError(f"record {rec.get('M')}x{rec.get('N')}x{rec.get('K')}: auto_variant: "
                                         f"{exc}") from None
                continue
            try:
                cands[name] = (GemmVariant.parse(name[len("ours/"):]), float(t))
            except ValueError:
                continue  # a variant this table cannot name (e.g. a flattened tiling written with f)
        if not cands:
            continue
        best = min(cands, key=lambda n: cands[n][1])
        out.append(((int(rec["M"]), int(rec["N"]), int(rec["K"])), cands[best][0], cands[best][1], rec))
    return out


def _incumbent_us(rec: dict, held: GemmVariant) -> Optional[float]:
    """The time an existing table entry's variant ``held`` got in the run of record ``rec``: ``ours/auto`` when that
    launch was the entry (``auto_variant``), else the same variant timed as a fixed one; None when the run did not
    time it."""
    us = rec.get("us") or {}
    errors = rec.get("errors") or {}
    name = str(held)
    for key, ran in (("ours/auto", rec.get("auto_variant")), (f"ours/{name}", name)):
        t = us.get(key)
        if ran == name and key not in errors and isinstance(t, (int, float)):
            return float(t)
    return None


def build_gemm_table(doc: dict, source: str, old: Optional[dict] = None, margin: float = 0.0):
    """Merge a ``bench_gemm`` results document ``doc`` (recorded as coming from ``source``) into the table document
    ``old`` (None: empty) and return ``(table, report)``. Per measured shape (device ``doc["device"]``, dtype
    ``doc["dtype"]``, bf16 when absent): the fastest of :func:`best_gemm_variants` becomes the entry, with
    provenance; a shape whose fastest was the autotuner (pick unknown) gets no entry (an old one is removed: the
    autotuner beat it there). Entries of shapes ``doc`` did not measure are kept. ``margin`` (a fraction, e.g.
    0.015): an old entry the run timed too stays unless the run's fastest beats it by more than that, so timing
    noise (entries of one shape flip by 0.5% between processes) does not rewrite the table; 0 (the default, and
    what wrote the shipped table): the fastest always wins. ``report``: one line per shape."""
    check_margin(margin, "build_gemm_table")
    device = doc.get("device")
    if not isinstance(device, str) or not device.strip():
        raise GemmTableError(f"{source}: the results document names no device")
    dtype = doc.get("dtype", "bfloat16")
    if dtype not in GEMM_TABLE_DTYPES:
        raise GemmTableError(f"{source}: dtype {dtype!r}; accepted: {', '.join(GEMM_TABLE_DTYPES)}")
    devices = {}
    if old:
        GEMM_TABLE.parse(old, "old table")
        devices = json.loads(json.dumps(old["devices"]))  # a copy
    stamp = run_timestamp(doc, source)
    if stamp is None:
        raise GemmTableError(f"{source}: no timestamp_utc in the results document and no <stamp> in its file name "
                             f"(gemm-<stamp>.json): an entry must say when it was measured")
    by_shape = devices.setdefault(device, {}).setdefault(dtype, {})
    report = []
    for (M, N, K), var, t, rec in best_gemm_variants(doc):
        key = f"{M}x{N}x{K}"
        cublas = (rec.get("us") or {}).get("cublas")
        held = by_shape.get(key)
        t_held = _incumbent_us(rec, _parse_gemm_entry(key, held)) if held is not None and margin > 0 else None
        if keep_incumbent(t, t_held, margin):
            report.append(f"{key}: entry {held['config']} kept ({t_held:.1f} us in this run; the fastest, "
                          f"{var or 'the autotuner'} at {t:.1f} us, is within the {margin:.1%} margin)")
            continue
        if var is None or not cublas:
            dropped = by_shape.pop(key, None)
            why = "ours/autotune" if var is None and "ours/autotune" in rec.get("us", {}) else "the autotuner"
            report.append(f"{key}: fastest was {why} ({t:.1f} us; its pick is not known): no entry"
                          + (" (old entry removed)" if dropped else ""))
            continue
        auto = (rec.get("us") or {}).get("ours/auto")
        ent = {"config": str(var.config), "flatten": var.flatten, "tma_store": var.tma_store, "source": source,
               "git_commit": doc.get("git_commit"), "timestamp_utc": stamp, "us": round(t, 2),
               "cublas_us": round(float(cublas), 2)}
        if auto:
            ent["auto_us"] = round(float(auto), 2)
        by_shape[key] = ent
        report.append(f"{key}: {var} {t:.1f} us, {float(cublas) / t:.3f}x cuBLAS"
                      + (f" (ours/auto {auto:.1f} us)" if auto else ""))
    drop_empty(devices, device, dtype)
    for dev in devices.values():
        for dt in dev:
            dev[dt] = dict(sorted(dev[dt].items(), key=lambda kv: tuple(int(v) for v in kv[0].split("x"))))
    table = GEMM_TABLE.build(
        devices, "triton_dist.ops.matmul on a GPU without config: per device name, dtype and exact M x N x K, the "
                 "fastest of our fixed variants (tiling + FLATTEN / TMA_STORE, launched by launch_variant) in "
                 "benchmarks/bench_gemm.py (CUDA-graph replay, interleaved rounds, median); shapes without an "
                 "entry run the Triton autotuner. Written by bench_gemm.py --write-table / --table-from; each "
                 "entry names the results JSON and commit it came from.")
    return table, report


def dump_gemm_table(table: dict) -> str:
    """The table's JSON text: one line per entry (:func:`~triton_dist.runtime.dispatch_table.dump`)."""
    return dump(table)


__all__ = ["GEMM_TABLE", "GEMM_TABLE_PATH", "GEMM_TABLE_ENV", "GEMM_TABLE_FORMAT", "GEMM_TABLE_DTYPES",
           "GEMM_TABLE_KEYS", "GemmTableError", "parse_gemm_table", "load_gemm_table", "gemm_table_path",
           "gemm_table_lookup", "select_matmul_launch", "device_name_of", "best_gemm_variants", "build_gemm_table",
           "dump_gemm_table"]
