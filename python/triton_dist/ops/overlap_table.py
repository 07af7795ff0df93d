"""The measured dispatch table of the overlapped GEMMs' ``method="auto"`` (``overlap_table.json`` next to this module):
its schema, the lookups (:func:`select_rule`, :func:`table_config`) and how a ``benchmarks/bench_overlap.py`` run
becomes rules (:func:`method_rules`, :func:`build_overlap_table`, :func:`apply_eager_rules`).

The file, its format header, the ``$TRITON_DIST_OVERLAP_TABLE`` override, the cache and the errors (naming the file
and the entry) are :class:`~triton_dist.runtime.dispatch_table.DispatchTable`'s (:data:`OVERLAP_TABLE`). Without a
file the conservative :data:`DEFAULT_TABLE` applies.

Document::

    {"format": "triton_dist.overlap_table/1", "status": "measured" | "unmeasured", <provenance>, "note": str,
     "ops": {op: {"<world>" | "default": [rule, ...]}},
     "configs": {op: {"<world>": [{"n": int, "k": int, "max_m": int | null, "config": tiling}, ...]}}}

A rule: ``{"method": str, "max_m": int | null, ["n": int, "k": int], [parameters], ["us": float], ["eager": {"method":
str, [parameters]}]}`` (``op``: ``ag_gemm`` / ``gemm_rs`` / ``gemm_ar``; parameters ``first_frac`` (ag_gemm
``chunked``), ``sub_chunks`` (gemm_rs ``chunked``), ``pieces`` (gemm_rs ``ce`` / ``fused``)).
"""
from __future__ import annotations

import copy
import os
from typing import Optional

from ..kernels.gemm_config import TileConfig
from ..runtime.dispatch_table import DispatchTable, TableError, check_margin, keep_incumbent

#: The measured table shipped with the package, written by ``benchmarks/bench_overlap.py --sweep --write-table`` (or
#: ``--table-from JSON``). ``$TRITON_DIST_OVERLAP_TABLE`` names another file instead.
TABLE_PATH = os.path.join(os.path.dirname(__file__), "overlap_table.json")
TABLE_ENV = "TRITON_DIST_OVERLAP_TABLE"
TABLE_FORMAT = "triton_dist.overlap_table/1"
#: Methods a rule may name per op (``auto`` is the table itself).
TABLE_METHODS = {"ag_gemm": ("fused", "ce", "sm", "chunked", "torch"),
                 "gemm_rs": ("fused", "chunked", "ce", "torch"),
                 "gemm_ar": ("fused", "ll", "one_shot", "torch")}


class OverlapTableError(TableError):
    """The overlap dispatch table file is malformed (the message names the file and the bad entry)."""


def _positive_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v > 0


def _check_shape(where: str, ent: dict, need_shape: bool) -> None:
    for key in ("n", "k"):
        if (key in ent or need_shape) and not _positive_int(ent.get(key)):
            raise OverlapTableError(f"{where}.{key}: expected a positive int, got {ent.get(key)!r}")
    if "max_m" not in ent or not (ent["max_m"] is None or _positive_int(ent["max_m"])):
        raise OverlapTableError(f"{where}.max_m: expected a positive int or null, got {ent.get('max_m')!r}")


def _check_rule(where: str, op: str, rule) -> None:
    if not isinstance(rule, dict):
        raise OverlapTableError(f"{where}: expected a rule object with 'method' and 'max_m', got {rule!r}")
    for sub, ent in ((where, rule), (where + ".eager", rule.get("eager"))):
        if ent is None and sub != where:
            continue
        if not isinstance(ent, dict) or ent.get("method") not in TABLE_METHODS[op]:
            got = ent.get("method") if isinstance(ent, dict) else ent
            raise OverlapTableError(f"{sub}: method {got!r}; accepted for {op}: {', '.join(TABLE_METHODS[op])}")
    if ("n" in rule) != ("k" in rule):
        raise OverlapTableError(f"{where}: a shape rule names both n and k")
    _check_shape(where, rule, need_shape=False)


def parse_overlap_table(doc, path: str = "<table>") -> dict:
    """Check an overlap table document (header, every rule and tiling) and return it. Raises
    :class:`OverlapTableError` naming ``path`` and the entry."""
    OVERLAP_TABLE.check_header(doc, path)
    sections = (("ops", doc["ops"]), ("configs", doc.get("configs", {})))
    for section, by_op in sections:
        if not isinstance(by_op, dict):
            raise OverlapTableError(f"{path}: {section}: expected an object keyed by op")
        for op, by_world in by_op.items():
            if op not in TABLE_METHODS:
                raise OverlapTableError(f"{path}: {section}.{op}: unknown op; accepted: {', '.join(TABLE_METHODS)}")
            if not isinstance(by_world, dict):
                raise OverlapTableError(f"{path}: {section}.{op}: expected an object keyed by world size")
            for world, entries in by_world.items():
                where = f"{path}: {section}.{op}.{world}"
                if not (str(world).isdigit() and int(world) > 0 or section == "ops" and world == "default"):
                    raise OverlapTableError(f"{where}: the key must be a world size (or 'default' for rules)")
                if not isinstance(entries, list):
                    raise OverlapTableError(f"{where}: expected a list")
                for i, ent in enumerate(entries):
                    if section == "ops":
                        _check_rule(f"{where}[{i}]", op, ent)
                        continue
                    if not isinstance(ent, dict):
                        raise OverlapTableError(f"{where}[{i}]: expected an object with n, k, max_m and config")
                    _check_shape(f"{where}[{i}]", ent, need_shape=True)
                    try:
                        TileConfig.parse(ent.get("config"))
                    except ValueError as exc:
                        raise OverlapTableError(f"{where}[{i}].config: {exc}") from None
    return doc


#: Built-in conservative default (used when there is no table file).
DEFAULT_TABLE = {
    "format": TABLE_FORMAT,
    "status": "unmeasured",
    "note": "conservative default: torch (NCCL + cuBLAS) below M=1024 (global rows), fused kernels from there; "
            "benchmarks/bench_overlap.py --write-table replaces it with measured crossovers",
    "ops": {op: {"default": [{"max_m": 1023, "method": "torch"}, {"max_m": None, "method": "fused"}]}
            for op in ("ag_gemm", "gemm_rs", "gemm_ar")},
}

#: The overlap family's table: file, header, ``$TRITON_DIST_OVERLAP_TABLE`` override, cache and errors.
OVERLAP_TABLE = DispatchTable(what="overlap", path=TABLE_PATH, env=TABLE_ENV, format=TABLE_FORMAT, key="ops",
                              parse=parse_overlap_table, error=OverlapTableError, missing=lambda: DEFAULT_TABLE)


def dispatch_table(reload: bool = False) -> dict:
    """The dispatch table document in use (:data:`OVERLAP_TABLE`: ``$TRITON_DIST_OVERLAP_TABLE`` or
    ``overlap_table.json`` next to this module; :data:`DEFAULT_TABLE` without a file). A malformed file raises
    :class:`OverlapTableError` naming it and the entry."""
    return OVERLAP_TABLE.load(reload)


def _rule_matches(rule: dict, m: int, n: Optional[int], k: Optional[int]) -> bool:
    if "n" in rule and rule["n"] != n:
        return False
    if "k" in rule and rule["k"] != k:
        return False
    return rule.get("max_m") is None or m <= int(rule["max_m"])


def select_rule(op: str, world: int, m: int, on_gpu: bool, n: Optional[int] = None,
                k: Optional[int] = None, eager: bool = False) -> dict:
    """The dispatch rule for ``op`` at global row count ``m`` with ``n`` output columns and inner size ``k`` (per
    rank): the first rule of the world-size entry (else ``"default"``) that holds, as a dict with ``"method"`` and
    the method's measured parameters (``first_frac`` for ag_gemm ``chunked``, ``sub_chunks`` for gemm_rs
    ``chunked``, ``pieces`` for gemm_rs ``ce`` and ``fused``). A rule holds when its ``max_m`` (inclusive; None =
    unbounded) covers ``m`` and its optional ``n`` / ``k`` equal the call's (rules with a shape come from measured
    shapes, rules without one are the fallback). The rules are the fastest methods in CUDA-graph replay; a measured
    shape whose fastest method differs without a graph (host launch cost included: side streams and extra launches
    cost more there) carries it as ``rule["eager"]``, which ``eager=True`` (a call not being captured) returns
    instead. The simulator always gets ``{"method": "fused"}``."""
    if not on_gpu:
        return {"method": "fused"}
    ops = dispatch_table()["ops"].get(op, {})
    rules = ops.get(str(world), ops.get("default", []))
    for rule in rules:
        if _rule_matches(rule, m, n, k):
            sub = rule.get("eager") if eager else None
            if isinstance(sub, dict) and isinstance(sub.get("method"), str):
                return {**{key: rule[key] for key in ("n", "k", "max_m") if key in rule}, **sub}
            return rule
    return {"method": "fused"}


def select_method(op: str, world: int, m: int, on_gpu: bool, n: Optional[int] = None,
                  k: Optional[int] = None) -> str:
    """``"fused"`` (or a specific method, e.g. ``"sm"`` / ``"ce"`` / ``"chunked"`` for ag_gemm, ``"ll"`` /
    ``"one_shot"`` for gemm_ar) or ``"torch"``: the method of :func:`select_rule`."""
    return select_rule(op, world, m, on_gpu, n, k)["method"]


def table_config(op: str, world: int, m: int, n: int, k: int, elem_bytes: int = 2):
    """The measured tiling (:class:`~triton_dist.kernels.gemm_config.TileConfig`) of ``op``'s fused kernel for global rows
    ``m``, ``n`` output columns and inner size ``k`` (per rank), or None when the table has none for this shape
    (callers then use :func:`~triton_dist.kernels.gemm_config.pick_config`). Table entries (``configs[op][world]``):
    ``{"n", "k", "max_m", "config": "BMxBNxBKxWARPSxSTAGES"}``, first match wins; bf16/fp16 only."""
    if elem_bytes != 2:
        return None
    entries = dispatch_table().get("configs", {}).get(op, {}).get(str(world), [])
    for ent in entries:
        if ent.get("n") == n and ent.get("k") == k and (ent.get("max_m") is None or m <= int(ent["max_m"])):
            return TileConfig.parse(ent["config"])  # checked when the table was loaded
    return None


# ================================================================================================================
# derivation: a bench_overlap run -> rules and tilings -> a merged table
# ================================================================================================================
def method_of(impl):
    """``ours/<method>[@f<frac>|@s<sub>|@p<pieces>]`` -> dispatch rule fields ``{"method", "first_frac" |
    "sub_chunks" | "pieces"}``."""
    name = impl.split("/", 1)[1] if "/" in impl else impl
    meth, _, var = name.partition("@")
    rule = {"method": meth}
    if var.startswith("p"):
        rule["pieces"] = int(var[1:])
    elif var.startswith("f"):
        rule["first_frac"] = float(var[1:])
    elif var.startswith("s"):
        rule["sub_chunks"] = int(var[1:])
    return rule


def _record_shape_keys(op: str):
    """The record fields of ``op``'s rule shape: ``(n, k)`` (per rank)."""
    return ("N_per_rank", "K") if op == "ag_gemm" else ("N", "K_per_rank")


def _candidates(timings: dict) -> dict:
    """``{method or method@variant: us}`` of one record's timings (``results``: graph replay, or ``eager``): the
    ``ours/<method>[@<variant>]`` entries but ``ours/auto``, and ``torch_seq`` as ``torch``."""
    cand = {k.split("/", 1)[1]: v for k, v in timings.items() if k.startswith("ours/") and k != "ours/auto"
            and isinstance(v, (int, float))}
    if isinstance(timings.get("torch_seq"), (int, float)):
        cand["torch"] = timings["torch_seq"]
    return cand


def _method_fields(rule: dict) -> dict:
    """A rule's method and its parameters: what :func:`method_of` gives for the timed name it came from."""
    return {k: v for k, v in rule.items() if k not in ("n", "k", "max_m", "us", "eager")}


#: a candidate within this fraction of the fastest counts as a tie (the run-to-run spread of one timing is 1-3%)
TIE = 0.01


def pick_robust(cand):
    """The method to store for one measured shape: the fastest of ``cand`` (``{method or method@variant: us}``),
    except that a tie (within :data:`TIE`) goes to ``torch`` (no overlap machinery), else to the plain method of a
    variant, so noise between near-equal timings does not steer ``auto`` to the more complex choice."""
    best = min(cand, key=cand.get)
    tol = (1 + TIE) * cand[best]
    if "torch" in cand and cand["torch"] <= tol:
        return "torch"
    base = best.split("@", 1)[0]
    if base != best and base in cand and cand[base] <= tol:
        return base
    return best


def eager_rule(rec, graph_rule=None):
    """The fastest of a record's ``ours/<method>`` and ``torch_seq`` *eager* timings (k back-to-back calls without a
    graph: host launch cost included) as a rule's ``"eager"`` entry ``{"method", <parameter>, "us"}``; None without
    eager timings, or when it names the same method and parameters as ``graph_rule`` (nothing to override)."""
    cand = _candidates(rec.get("eager") or {})
    if not cand:
        return None
    best = pick_robust(cand)
    sub = method_of(best)
    if graph_rule is not None and sub == _method_fields(graph_rule):
        return None
    return {**sub, "us": round(cand[best], 1)}


def method_rules(records, world):
    """Per op: shape-specific rules (fastest of ours/<method> and torch_seq at each measured M; M in between uses
    the next measured M above; with the eager winner as ``"eager"`` where it differs, :func:`eager_rule`) followed by
    the generic crossover (smallest M from which ours wins everywhere)."""
    ops, configs = {}, {}
    for op in ("ag_gemm", "gemm_rs", "gemm_ar"):
        rs = [r for r in records if r["op"] == op and r["results"]]
        if not rs:
            continue
        rules, cfgs = [], []
        nn, kn = _record_shape_keys(op)
        wins = {}
        for r in sorted(rs, key=lambda r: (r[nn], r[kn], r["M"])):
            cand = _candidates(r["results"])
            if not cand:
                continue
            best = pick_robust(cand)
            rule = {"n": r[nn], "k": r[kn], "max_m": r["M"], **method_of(best), "us": round(cand[best], 1)}
            sub = eager_rule(r, rule)
            if sub is not None:
                rule["eager"] = sub
            rules.append(rule)
            wins.setdefault(r["M"], []).append(best != "torch")
            base_meth = best.split("@", 1)[0]  # fused@p<P> runs the fused kernel's tiling
            cfg = r.get("configs", {}).get(base_meth if base_meth in ("sm", "ce", "fused", "ll") else "", None)
            if cfg is None and r.get("configs"):
                cfg = next(iter(r["configs"].values()))
            if cfg:
                cfgs.append({"n": r[nn], "k": r[kn], "max_m": r["M"], "config": cfg})
        # generic fallback for unmeasured shapes
        ms = sorted(wins)
        cross = next((m for i, m in enumerate(ms) if all(all(wins[x]) for x in ms[i:])), None)
        fused = "fused"
        if op == "ag_gemm":
            fused = "ce"
        if cross is None:
            generic = [{"max_m": None, "method": "torch"}]
        elif cross == ms[0]:
            generic = [{"max_m": None, "method": fused}]
        else:
            generic = [{"max_m": cross - 1, "method": "torch"}, {"max_m": None, "method": fused}]
        ops[op] = {str(world): rules + generic, "default": generic}
        configs[op] = {str(world): cfgs}
    return ops, configs


def _shape_key(rule):
    return (rule.get("n"), rule.get("k"), rule.get("max_m"))


def merge_rules(old, new):
    """One world size's rules after a run that measured some shapes: the run's shape rules, plus the old shape rules
    of shapes (``n``, ``k``, ``max_m``) it did not measure, ordered by shape (for one ``n`` / ``k`` the smallest
    ``max_m`` that covers a call matches first); then the generic rules (no shape): the run's when it measured every
    shape the old table had, else the old ones (a partial run's crossover is not evidence for the shapes it
    skipped)."""
    shape, kept = merge_shapes([r for r in old if "n" in r], [r for r in new if "n" in r])
    generic = [r for r in (old if kept else new) if "n" not in r] or [r for r in new if "n" not in r]
    return shape + generic


def merge_shapes(old, new):
    """``(merged, kept)``: the ``new`` per-shape entries (rules or tilings) plus the ``old`` ones of shapes ``new``
    does not have (``kept``), ordered by ``n``, ``k``, then ``max_m``."""
    seen = {_shape_key(e) for e in new}
    kept = [e for e in old if _shape_key(e) not in seen]
    merged = sorted(new + kept, key=lambda e: (e.get("n") or 0, e.get("k") or 0, e.get("max_m") or 1 << 62))
    return merged, kept


def _timed_us(rec: Optional[dict], rule: dict) -> Optional[float]:
    """The graph-replay time that record ``rec`` holds for ``rule``'s method with its parameters (``ours/<method>
    [@<variant>]``, ``torch_seq`` for ``torch``); None when the run did not time it."""
    want = _method_fields(rule)
    cand = _candidates((rec or {}).get("results") or {})
    return next((float(t) for name, t in cand.items() if method_of(name) == want), None)


def keep_incumbent_rules(op: str, old_rules, new_rules, records, margin: float):
    """``(rules, kept)``: ``new_rules`` (one world size's, from :func:`method_rules` over ``records``) with each shape
    rule replaced by the old rule of its shape (``n``, ``k``, ``max_m``) where the run timed that old rule's method
    with its parameters too and the new rule's method does not beat it there by more than ``margin``
    (:func:`~triton_dist.runtime.dispatch_table.keep_incumbent`); ``kept``: those shapes. An old rule whose method
    the run did not time (e.g. a variant it did not sweep) is replaced, as with ``margin=0``; ``ours/auto`` does not
    count as its timing (unlike the GEMM table's records, a record does not say which rule ``auto`` ran)."""
    if margin <= 0:
        return list(new_rules), set()
    nn, kn = _record_shape_keys(op)
    by_shape = {(r[nn], r[kn], r["M"]): r for r in records if r.get("op") == op}
    old_by_shape = {_shape_key(r): r for r in old_rules if "n" in r}
    rules, kept = [], set()
    for rule in new_rules:
        held = old_by_shape.get(_shape_key(rule)) if "n" in rule else None
        rec = by_shape.get(_shape_key(rule))
        t_new = _timed_us(rec, rule)
        if held is not None and keep_incumbent(rule.get("us", 0.0) if t_new is None else t_new,
                                               _timed_us(rec, held), margin):
            rules.append(copy.deepcopy(held))
            kept.add(_shape_key(rule))
        else:
            rules.append(rule)
    return rules, kept


def build_overlap_table(doc: dict, source: str, old: Optional[dict] = None, margin: float = 0.0) -> dict:
    """A table document from a ``bench_overlap`` results document ``doc`` (its ``dispatch_rules`` /
    ``dispatch_configs``, from :func:`method_rules`; recorded as coming from ``source``), merged into the table
    document ``old`` (None or an unmeasured one: the built-in default): other ops are kept, and within an op the
    shapes this run did not measure keep their rules and tilings (:func:`merge_rules`), so a run over some ops or
    some M updates only those. ``margin`` (a fraction in [0, 0.5), e.g. 0.015; the GEMM table's,
    :func:`~triton_dist.kernels.gemm_table.build_gemm_table`): a measured shape whose old rule's method (with its
    parameters) the run timed too (``doc["records"]``) keeps its old rule and tiling unless the run's winner beats
    that method by more than the margin (:func:`keep_incumbent_rules`), so timing noise between near-equal methods
    does not rewrite the table; where the run did not time the old rule's method, or ``doc`` has no records, the
    run's rule replaces it. 0 (the default): the run's rules always replace the old ones. The generic crossover
    rules are merged as without a margin."""
    check_margin(margin, "build_overlap_table")
    measured = bool(old) and old.get("status") == "measured"
    if measured:
        OVERLAP_TABLE.parse(old, "old table")
    old_ops = old.get("ops", {}) if measured else {}
    old_cfgs = old.get("configs", {}) if measured else {}
    ops = {**copy.deepcopy(DEFAULT_TABLE["ops"]), **copy.deepcopy(old_ops)}
    kept = {}  # (op, world) -> shapes whose old rule (and tiling) stays
    for op, by_world in doc["dispatch_rules"].items():
        merged = dict(old_ops.get(op, {}))
        for world, rules in by_world.items():
            if world == "default":
                merged[world] = rules
                continue
            old_rules = old_ops.get(op, {}).get(world, [])
            rules, kept[op, world] = keep_incumbent_rules(op, old_rules, rules, doc.get("records", []), margin)
            merged[world] = merge_rules(old_rules, rules)
        ops[op] = merged
    cfgs = copy.deepcopy(old_cfgs)
    for op, by_world in doc.get("dispatch_configs", {}).items():
        merged = dict(old_cfgs.get(op, {}))
        for world, entries in by_world.items():
            held = kept.get((op, world), set())  # a kept shape keeps its old tiling, or none if it had none
            merged[world], _ = merge_shapes(old_cfgs.get(op, {}).get(world, []),
                                            [e for e in entries if _shape_key(e) not in held])
        cfgs[op] = merged
    table = OVERLAP_TABLE.build(
        ops, "fastest method per measured shape (CUDA-graph replay timing) from benchmarks/bench_overlap.py "
             "--sweep --write-table; generic crossover rules for other shapes; shapes a later partial run did not "
             "measure keep their earlier rules", status="measured", source=source, git_commit=doc.get("git_commit"),
        gpu=doc.get("versions", {}).get("gpu"), world_size=doc.get("world_size"))
    table["configs"] = cfgs
    OVERLAP_TABLE.parse(table, "new table")
    return table


def apply_eager_rules(table: dict, docs, sources: str) -> int:
    """Set, in place, the ``"eager"`` entries of the measured ``table``'s shape rules from the eager timings of the
    results documents ``docs`` (later documents win for a shape they share): a rule gets its shape's eager winner
    where it differs from the rule's method (:func:`eager_rule`) and loses a stale entry where it does not. Shapes
    without a rule of their own, or without eager timings, are left alone; the note names ``sources`` (once: a run
    with the same sources adds nothing). Returns the number of rules updated. :class:`OverlapTableError` when ``table`` is not a measured table."""
    OVERLAP_TABLE.parse(table, "table")
    if table.get("status") != "measured":
        raise OverlapTableError("eager rules: the table is not a measured one (write it from a --sweep run first)")
    count = 0
    for doc in docs:
        world = str(doc.get("world_size", 2))
        for rec in doc.get("records", []):
            op = rec.get("op")
            if op not in TABLE_METHODS or not rec.get("eager"):
                continue
            nn, kn = _record_shape_keys(op)
            for rule in table["ops"].get(op, {}).get(world, []):
                if rule.get("n") == rec.get(nn) and rule.get("k") == rec.get(kn) and rule.get("max_m") == rec["M"]:
                    sub = eager_rule(rec, rule)
                    rule.pop("eager", None)
                    if sub is not None:
                        rule["eager"] = sub
                    count += 1
    sentence = f" Eager overrides (rule['eager']) from: {sources}."
    if sentence not in table.get("note", ""):  # the same sources again (a repeated run) are named once
        table["note"] = table.get("note", "") + sentence
    OVERLAP_TABLE.parse(table, "new table")
    return count


__all__ = ["OVERLAP_TABLE", "OverlapTableError", "TABLE_PATH", "TABLE_ENV", "TABLE_FORMAT", "TABLE_METHODS",
           "DEFAULT_TABLE", "parse_overlap_table", "dispatch_table", "select_rule", "select_method", "table_config",
           "TIE", "method_of", "pick_robust", "eager_rule", "method_rules", "merge_rules", "merge_shapes",
           "keep_incumbent_rules", "build_overlap_table", "apply_eager_rules"]
