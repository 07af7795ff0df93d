"""Normalization of the compile tool's text output for scripts/kernel_snapshot.py (see that module's docstring,
"Normalization drops ..."): what changes when the code does not is dropped, instructions are kept verbatim."""
from __future__ import annotations

import os
import re
from typing import Dict, List, Optional

REPO = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))


_STRING_RE = re.compile(r'"(?:[^"\\]|\\.)*"')


def _outside_strings(line: str, fn) -> str:
    """Apply ``fn`` to the parts of ``line`` outside double-quoted string literals, left to right."""
    if '"' not in line:
        return fn(line)
    out, pos = [], 0
    for m in _STRING_RE.finditer(line):
        out.append(fn(line[pos:m.start()]))
        out.append(m.group(0))
        pos = m.end()
    out.append(fn(line[pos:]))
    return "".join(out)


def _strip_comment(line: str, marker: str) -> str:
    """``line`` without the comment starting at the first ``marker`` outside a string literal."""
    if marker not in line:
        return line
    if '"' not in line:
        return line[:line.index(marker)]
    pos = 0
    for m in _STRING_RE.finditer(line):
        k = line.find(marker, pos, m.start())
        if k >= 0:
            return line[:k]
        pos = m.end()
    k = line.find(marker, pos)
    return line if k < 0 else line[:k]


def _strip_mlir_locs(line: str) -> str:
    """Remove `` loc(...)`` (balanced parentheses, strings skipped) wherever it follows whitespace."""
    if "loc(" not in line:
        return line
    out, i, n = [], 0, len(line)
    while i < n:
        c = line[i]
        if c == '"':
            m = _STRING_RE.match(line, i)
            j = m.end() if m else n
            out.append(line[i:j])
            i = j
            continue
        if line.startswith("loc(", i) and (i == 0 or line[i - 1].isspace()):
            depth, j = 0, i + 3
            while j < n:
                if line[j] == '"':
                    m = _STRING_RE.match(line, j)
                    j = m.end() if m else n
                    continue
                if line[j] == "(":
                    depth += 1
                elif line[j] == ")":
                    depth -= 1
                    if depth == 0:
                        break
                j += 1
            while out and out[-1].isspace():
                out.pop()
            i = j + 1
            continue
        out.append(c)
        i += 1
    return "".join(out)


_SSA_RE = re.compile(r"%[A-Za-z0-9_$.\-]+")


def _normalize_mlir(lines: List[str]) -> List[str]:
    names: Dict[str, str] = {}

    def rename(m):
        return names.setdefault(m.group(0), f"%v{len(names)}")

    out = []
    for line in lines:
        if re.match(r"\s*#loc\d*\s*=", line):
            continue
        line = _strip_mlir_locs(_strip_comment(line, "//"))
        out.append(_outside_strings(line, lambda s: _SSA_RE.sub(rename, s)))
    return out


def _drop_unreferenced_labels(lines: List[str], label_re: str) -> List[str]:
    define = re.compile(r"^\s*(" + label_re + r"):\s*$")
    ref = re.compile(label_re)
    used = set()
    for line in lines:
        if not define.match(line):
            used.update(ref.findall(line))
    return [line for line in lines if not ((m := define.match(line)) and m.group(1) not in used)]


def _normalize_ptx(lines: List[str]) -> List[str]:
    out, depth, in_debug, seen_brace = [], 0, False, False
    for line in lines:
        s = line.strip()
        if not in_debug and re.match(r"\.section\s+\.debug", s):
            in_debug, depth, seen_brace = True, 0, False
        if in_debug:
            code = _strip_comment(line, "//")
            depth += code.count("{") - code.count("}")
            seen_brace = seen_brace or "{" in code
            if seen_brace and depth <= 0:
                in_debug = False
            continue
        if re.match(r"\.(loc|file)\b", s):
            continue
        out.append(_strip_comment(line, "//"))
    return _drop_unreferenced_labels(out, r"\$L__[\w$]+")


_GCN_SECTION_END = re.compile(r"\.(text|data|bss|rodata|previous|popsection|amdgpu_metadata)\b")


def _normalize_amdgcn(lines: List[str]) -> List[str]:
    out, in_debug = [], False
    for line in lines:
        code = _strip_comment(line, ";")
        s = code.strip()
        m = re.match(r"\.(?:section|pushsection)\s+\"?([^\s,\"]+)", s)
        if m:
            in_debug = m.group(1).startswith(".debug")
        elif _GCN_SECTION_END.match(s):
            in_debug = False
        if in_debug or re.match(r"\.(loc|file)\b", s):
            continue
        out.append(code)
    return _drop_unreferenced_labels(out, r"\.L[\w$.]+")


_MD_REF = re.compile(r"!(\d+)\b")
_DBG_ATTACH = re.compile(r"(?:,\s*|\s+)!dbg\s+!\d+")


def _split_operands(body: str) -> List[str]:
    ops, cur, depth = [], [], 0
    pos = 0
    for m in list(_STRING_RE.finditer(body)) + [None]:
        end = m.start() if m else len(body)
        for c in body[pos:end]:
            if c in "({[<":
                depth += 1
            elif c in ")}]>":
                depth -= 1
            if c == "," and depth == 0:
                ops.append("".join(cur).strip())
                cur = []
            else:
                cur.append(c)
        if m:
            cur.append(m.group(0))
            pos = m.end()
    ops.append("".join(cur).strip())
    return [o for o in ops if o]


def _normalize_llir(lines: List[str]) -> List[str]:
    body, named, defs = [], [], {}
    for line in lines:
        line = _strip_comment(line, ";")
        s = line.strip()
        if not s or s.startswith("#dbg_") or re.match(r"(tail\s+)?(call|declare)\b.*@llvm\.dbg\.", s):
            continue
        m = re.match(r"!(\d+)\s*=\s*(.*)$", s)
        if m:
            defs[int(m.group(1))] = m.group(2)
            continue
        m = re.match(r"!([A-Za-z_.$][\w.$\-]*)\s*=\s*(.*)$", s)
        if m:
            if not m.group(1).startswith("llvm.dbg."):
                named.append((m.group(1), m.group(2)))
            continue
        body.append(_outside_strings(line, lambda t: _DBG_ATTACH.sub("", t)))
    debug = {k for k, v in defs.items() if re.match(r"(distinct\s+)?!DI", v)}

    def prune(value: str) -> str:  # drop operands of a tuple that point at debug nodes
        m = re.match(r"^(distinct\s+)?!\{(.*)\}$", value)
        if not m:
            return value
        ops = [o for o in _split_operands(m.group(2)) if not (re.fullmatch(r"!\d+", o) and int(o[1:]) in debug)]
        return f"{m.group(1) or ''}!{{{', '.join(ops)}}}"

    defs = {k: prune(v) for k, v in defs.items() if k not in debug}
    named = [(n, prune(v)) for n, v in named]
    order: Dict[int, int] = {}  # old id -> new id, in order of first reference
    queue: List[int] = []

    def visit(text: str):
        def note(t):
            for r in map(int, _MD_REF.findall(t)):
                if r in defs and r not in order:
                    order[r] = len(order)
                    queue.append(r)
            return t

        _outside_strings(text, note)

    def drain():  # nodes referenced only from other metadata, numbered after their referrers
        while queue:
            visit(defs[queue.pop(0)])

    for line in body:
        visit(line)
    drain()
    for _, v in named:
        visit(v)
    drain()

    def renumber(text: str) -> str:
        return _outside_strings(text, lambda t: _MD_REF.sub(
            lambda m: f"!{order[int(m.group(1))]}" if int(m.group(1)) in order else "!<debug>", t))

    out = [renumber(line) for line in body]
    out += [f"!{n} = {renumber(v)}" for n, v in named]
    out += [f"!{order[k]} = {renumber(defs[k])}" for k in sorted(order, key=order.get)]
    return out


_NORMALIZERS = {"ttir": _normalize_mlir, "ttgir": _normalize_mlir, "llir": _normalize_llir, "ptx": _normalize_ptx,
                "amdgcn": _normalize_amdgcn}


def normalize(text: str, stage: str, repo: Optional[str] = REPO) -> str:
    """``text`` (the compile tool's output for ``stage``) without debug info, comments, locations, paths and
    blank lines; see the module docstring."""
    lines = _NORMALIZERS[stage](text.splitlines())
    out = []
    for line in lines:
        line = line.rstrip()
        if not line.strip():
            continue
        if repo:
            line = line.replace(repo, "<repo>")
        out.append(line)
    return "\n".join(out) + "\n" if out else ""
