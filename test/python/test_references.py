"""Cross-references in the sources point at files that exist: every ``docs/<name>.md`` cited from python/, test/,
scripts/, examples/, docs/, README.md or pyproject.toml is in the repository, and nothing cites the ARCHITECTURE
document, which is not part of it."""
import os
import re

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
SOURCES = ("python", "test", "scripts", "examples", "docs", "README.md", "pyproject.toml")
SUFFIXES = (".py", ".md", ".toml", ".sh", ".cfg", ".txt")


def _files():
    for top in SOURCES:
        path = os.path.join(ROOT, top)
        if os.path.isfile(path):
            yield path
        for root, _, files in os.walk(path):
            for f in files:
                if f.endswith(SUFFIXES):
                    yield os.path.join(root, f)


def test_cited_docs_exist_and_no_architecture_references():
    missing, stale = [], []
    for path in _files():
        if path == os.path.abspath(__file__):
            continue
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read()
        rel = os.path.relpath(path, ROOT)
        missing += [f"{rel}: {d}" for d in sorted(set(re.findall(r"\bdocs/[\w.-]+\.md", text)))
                    if not os.path.isfile(os.path.join(ROOT, d))]
        stale += [rel for _ in re.finditer(r"ARCHITECTURE(\.md)?\s*§", text)]
    assert missing == [] and stale == []
