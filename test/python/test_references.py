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


def _slug(heading):
    """GitHub's anchor for a Markdown heading: lower case, punctuation but ``-`` / ``_`` dropped, spaces to ``-``."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_links_in_readme_and_docs_resolve():
    """Every relative link ``[text](path#anchor)`` of README.md and docs/*.md (outside code) names a file or folder
    of the repository, and an anchor into a Markdown page names one of its headings."""
    pages = ["README.md"] + sorted(os.path.join("docs", f) for f in os.listdir(os.path.join(ROOT, "docs"))
                                   if f.endswith(".md"))
    broken = []
    for page in pages:
        with open(os.path.join(ROOT, page), encoding="utf-8") as f:
            text = re.sub(r"`[^`\n]*`", "", re.sub(r"```.*?```", "", f.read(), flags=re.S))
        for link in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"[a-z]+:", link):
                continue
            path, _, anchor = link.partition("#")
            target = os.path.normpath(os.path.join(os.path.dirname(page), path)) if path else page
            if not os.path.exists(os.path.join(ROOT, target)):
                broken.append(f"{page}: {link} (no such file)")
            elif anchor and target.endswith(".md"):
                with open(os.path.join(ROOT, target), encoding="utf-8") as f:
                    prose = re.sub(r"```.*?```", "", f.read(), flags=re.S)  # a shell comment is no heading
                slugs = {_slug(ln.lstrip("#")) for ln in prose.splitlines() if ln.startswith("#")}
                if anchor not in slugs:
                    broken.append(f"{page}: {link} (no such heading)")
    assert broken == []


def test_python_examples_in_readme_and_docs_parse_and_their_imports_run():
    """Every ```python example of README.md and docs/*.md is valid Python, and its import statements run on a
    machine without a GPU (the names it imports exist). Running the examples themselves needs ranks: the audit ran
    each on the simulator (docs/overlap.md's example, for one, needs a larger simulator heap, as that page says)."""
    import ast
    import textwrap

    pages = ["README.md"] + sorted(os.path.join("docs", f) for f in os.listdir(os.path.join(ROOT, "docs"))
                                   if f.endswith(".md"))
    blocks = 0
    for page in pages:
        with open(os.path.join(ROOT, page), encoding="utf-8") as f:
            text = f.read()
        for _, block in re.findall(r"^([ \t]*)```python\n(.*?)^\1```", text, flags=re.S | re.M):
            blocks += 1
            tree = ast.parse(textwrap.dedent(block), filename=page)  # (a list item's block is indented)
            imports = [node for node in tree.body if isinstance(node, (ast.Import, ast.ImportFrom))]
            exec(compile(ast.Module(body=imports, type_ignores=[]), page, "exec"), {})
    assert blocks >= 9
