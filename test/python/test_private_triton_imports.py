"""No module of triton_dist outside ``_compat`` reaches a private part of Triton, except those on :data:`ALLOWED`.

The rule (also in ``python/triton_dist/_compat/__init__.py``): Triton's public API is what ``triton`` and
``triton.language`` export in ``__all__`` and the modules in :data:`PUBLIC_MODULES`; any other Triton module
(``triton.runtime.*``, ``triton.compiler.*``, ``triton.backends.*``, ``triton._C.*``, ``triton.language.core``,
...) and any ``_`` name of a Triton module is private. A version-bound assumption about a private part lives in
``triton_dist._compat`` (one test each in test_compat.py), so that a Triton upgrade breaks one tested place.

Every module is parsed (no import is executed). Counted as reaching a private part: ``import triton.x`` /
``from triton.x import y`` naming one (also inside functions), ``from triton import _C`` style imports of a private
submodule or ``_`` name, and an attribute chain through a name bound to a Triton module (``tl.core.tuple``,
``triton.runtime.driver``, ``triton._C``).
"""
from __future__ import annotations

import ast
import importlib.util
import os

import triton
import triton.language as tl

PKG = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python", "triton_dist")

#: Triton modules that are public as a whole (besides ``triton`` and ``triton.language``, public through their
#: ``__all__``): the language's extra / math namespaces, the benchmarking helpers and the documented knobs.
PUBLIC_MODULES = {"triton.language.extra", "triton.language.math", "triton.testing", "triton.knobs"}

#: ``(module relative to triton_dist, private Triton name it reaches)`` -> why it is not behind ``_compat``.
#: Remove an entry with its cause; the test fails on an entry that no longer occurs (the list only shrinks).
ALLOWED: dict = {}


def _is_module(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, AttributeError, ValueError):  # a parent that is not a package, or no such parent
        return False


def _public_names(module: str):
    return {"triton": set(triton.__all__), "triton.language": set(tl.__all__)}.get(module)


def private_part(dotted: str):
    """The private Triton part ``dotted`` (``triton.a.b.c``, a module path followed by attributes) reaches, or None.

    Walks the path from ``triton``: a ``_`` name (not a dunder) is private; a submodule is private unless it is
    ``triton.language`` or in :data:`PUBLIC_MODULES`; the first non-module name ends the walk: public when its module
    is public, or exports it in ``__all__``, or does not have it in this release (see below).
    """
    parts = dotted.split(".")
    if parts[0] != "triton":
        return None
    module = "triton"
    for part in parts[1:]:
        name = f"{module}.{part}"
        if part.startswith("__") and part.endswith("__"):
            return None  # a module's own dunders (``triton.__version__``, ``__file__``) are public
        if part.startswith("_"):
            return name
        if module in PUBLIC_MODULES:
            return None  # everything a public module holds is public (its _ names were caught above)
        if name in PUBLIC_MODULES or name == "triton.language":
            module = name
            continue
        if _is_module(name):
            return name
        public = _public_names(module)
        if public is None or part in public or not hasattr(importlib.import_module(module), part):
            # a name this release lacks is a newer release's public one, used behind a version gate
            # (``_compat.HAS_ATOMIC_POLL`` for ``tl.atomic_poll``)
            return None
        return name
    return None


def _bindings(tree):
    """``{local name: Triton module path}`` for every ``import triton[.x] [as y]`` / ``from triton import x`` of a
    module (anywhere in it)."""
    bound = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "triton":
                    bound[alias.asname or alias.name.split(".")[0]] = alias.name if alias.asname else "triton"
        elif isinstance(node, ast.ImportFrom) and not node.level and (node.module or "").split(".")[0] == "triton":
            for alias in node.names:
                if _is_module(f"{node.module}.{alias.name}"):
                    bound[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    return bound


def _dotted(node):
    """``("a", ["b", "c"])`` for the attribute chain ``a.b.c``, or None."""
    attrs = []
    while isinstance(node, ast.Attribute):
        attrs.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        return node.id, attrs[::-1]
    return None


def private_uses(source: str):
    """The private Triton parts a module's ``source`` reaches (a set of dotted names)."""
    tree = ast.parse(source)
    _mark_parents(tree)
    found = set()
    bound = _bindings(tree)
    for node in ast.walk(tree):
        names = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            names = [f"{node.module}.{alias.name}" for alias in node.names]
        elif isinstance(node, ast.Attribute) and not isinstance(getattr(node, "_parent", None), ast.Attribute):
            chain = _dotted(node)
            if chain is not None and chain[0] in bound:
                names = [".".join([bound[chain[0]], *chain[1]])]
        for name in names:
            part = private_part(name)
            if part is not None:
                found.add(part)
    return found


def _mark_parents(tree):
    for node in ast.walk(tree):
        for child in ast.iter_child_nodes(node):
            child._parent = node


def offenders():
    """``{(module relative to triton_dist, private part)}`` over every module outside ``_compat``."""
    found = set()
    compat = os.path.join(PKG, "_compat") + os.sep
    for root, _, files in os.walk(PKG):
        for f in files:
            path = os.path.join(root, f)
            if not f.endswith(".py") or path.startswith(compat):
                continue
            with open(path) as fh:
                source = fh.read()
            rel = os.path.relpath(path, PKG).replace(os.sep, "/")
            found |= {(rel, part) for part in private_uses(source)}
    return found


def test_no_private_triton_outside_compat():
    found = offenders()
    new = sorted(found - set(ALLOWED))
    gone = sorted(set(ALLOWED) - found)
    assert not new, ("private Triton reached outside triton_dist._compat (add a tested function there, or an entry "
                     f"with its reason to ALLOWED): {new}")
    assert not gone, f"no longer used: remove these entries from ALLOWED: {gone}"


def test_every_allowed_entry_has_a_reason():
    assert all(isinstance(reason, str) and len(reason.split()) >= 5 for reason in ALLOWED.values())


def test_the_rule_on_examples():
    """What counts as private, on each form the scan recognises (so the test above can fail)."""
    assert private_part("triton.runtime.jit.JITFunction") == "triton.runtime"
    assert private_part("triton._C.libtriton") == "triton._C"
    assert private_part("triton.language.core.tuple") == "triton.language.core"
    assert private_part("triton.compiler.ASTSource") == "triton.compiler"
    assert private_part("triton.JITFunction") is None
    assert private_part("triton.language.tuple") is None
    assert private_part("triton.knobs.runtime.interpret") is None
    assert private_part("triton.language.extra.libdevice") is None
    assert private_part("triton.language._unwrap_if_constexpr") == "triton.language._unwrap_if_constexpr"
    assert private_part("triton.language.str_to_ty") == "triton.language.str_to_ty"  # present, not in __all__
    assert private_part("triton.__version__") is None

    uses = private_uses
    assert uses("def f():\n    from triton.runtime import driver\n") == {"triton.runtime"}
    assert uses("from triton import _C\n") == {"triton._C"}
    assert uses("import triton.language as tl\nx = tl.core.tuple\n") == {"triton.language.core"}
    assert uses("import triton\nd = triton.runtime.driver.active\n") == {"triton.runtime"}
    assert uses("import triton.language as tl\nx = tl.tuple\ny = tl.constexpr\n") == set()
    assert uses("import triton\ntriton.knobs.runtime.interpret = True\nk = triton.JITFunction\n") == set()
    assert uses("from triton.language import core as c\n") == {"triton.language.core"}
