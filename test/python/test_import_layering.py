"""Imports flow one way: language -> backends -> runtime/jit -> kernels -> ops -> layers/tools/mega_triton_kernel (docs/architecture.md).

Every module of ``python/triton_dist`` is parsed (no import is executed) and each ``import`` / ``from ... import``
inside it, at module level or inside a function (a lazy import is still a dependency), is mapped to the layer of
the module it names. A module may import its own layer and the layers below; :data:`KNOWN_UPWARD` lists the
imports that still go the wrong way, each with the reason and the change that removes it. The test fails on a new
upward import, and on an entry of the list that no longer exists (so the list only shrinks).
"""
from __future__ import annotations

import ast
import os

PKG_ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python")

#: layer of each top-level part of the package (0 = lowest); the package's own ``__init__`` is the public facade
#: and belongs to no layer
LAYERS = {"_compat": 0, "target": 0, "profiler_layout": 0, "language": 1, "backends": 2, "runtime": 3, "jit": 3,
          "utils": 3, "profiler_utils": 3, "kernels": 4, "ops": 5, "layers": 6, "tools": 6,
          "mega_triton_kernel": 6}

#: (importing module, imported package) pairs that go upward today, and why; remove an entry with its cause.
#: Empty since the backend contract (``language/_backend.py``): the backends register into the language layer, and
#: the simulator runtime installs its state into the sim backend (``backends/sim/context.py``).
KNOWN_UPWARD: set = set()


def _module_name(path: str) -> str:
    rel = os.path.relpath(path, PKG_ROOT)[:-3].replace(os.sep, ".")
    return rel[:-len(".__init__")] if rel.endswith(".__init__") else rel


def _layer(module: str):
    parts = module.split(".")
    if parts[0] != "triton_dist" or len(parts) < 2:
        return None
    return LAYERS.get(parts[1])


def _imported(node, package: str):
    """Absolute names a node imports (``from a import b`` gives ``a.b``: ``b`` may be a submodule)."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if isinstance(node, ast.ImportFrom):
        base = node.module or ""
        if node.level:
            parts = package.split(".")
            parts = parts[:len(parts) - (node.level - 1)]
            base = ".".join(parts + ([node.module] if node.module else []))
        return [f"{base}.{alias.name}" for alias in node.names]
    return []


def _existing_module(name: str) -> str:
    """The longest prefix of ``name`` that is a module or package of the tree (``a.b.func`` -> ``a.b``)."""
    parts = name.split(".")
    while len(parts) > 1:
        base = os.path.join(PKG_ROOT, *parts)
        if os.path.isfile(base + ".py") or os.path.isfile(os.path.join(base, "__init__.py")):
            break
        parts = parts[:-1]
    return ".".join(parts)


def upward_imports():
    """``{(importing module, first three parts of the imported name)}`` for every import that goes to a higher
    layer (imports among layers/tools, the top layer, are not ordered)."""
    found = set()
    for dirpath, _, files in os.walk(os.path.join(PKG_ROOT, "triton_dist")):
        for name in files:
            if not name.endswith(".py"):
                continue
            path = os.path.join(dirpath, name)
            module = _module_name(path)
            package = module if name == "__init__.py" else module.rsplit(".", 1)[0]
            src = _layer(module)
            if src is None:
                continue
            with open(path) as f:
                tree = ast.parse(f.read(), filename=path)
            for node in ast.walk(tree):
                for target in _imported(node, package):
                    dst = _layer(target)
                    if dst is not None and dst > src and not (src == dst == max(LAYERS.values())):
                        found.add((module, ".".join(_existing_module(target).split(".")[:3])))
    return found


def test_every_module_is_in_a_layer():
    tops = {entry[:-3] if entry.endswith(".py") else entry
            for entry in os.listdir(os.path.join(PKG_ROOT, "triton_dist"))
            if not entry.startswith(("__", ".")) and (entry.endswith(".py") or
                                                      os.path.isdir(os.path.join(PKG_ROOT, "triton_dist", entry)))}
    assert tops <= set(LAYERS), f"top-level parts of triton_dist without a layer: {sorted(tops - set(LAYERS))}"


def test_imports_flow_one_way():
    found = upward_imports()
    new = sorted(found - KNOWN_UPWARD)
    gone = sorted(KNOWN_UPWARD - found)
    assert not new, ("imports against the layering (language -> backends -> runtime/jit -> kernels -> ops -> "
                     f"layers/tools; docs/architecture.md): {new}")
    assert not gone, f"no longer imported: remove these entries from KNOWN_UPWARD: {gone}"


def test_the_scan_sees_relative_and_lazy_imports(tmp_path):
    """The scanner resolves ``from ..x import y`` and imports inside functions (both forms occur in the package)."""
    tree = ast.parse("def f():\n    from ..ops.overlap import ag_gemm\n")
    node = next(n for n in ast.walk(tree) if isinstance(n, ast.ImportFrom))
    assert _imported(node, "triton_dist.kernels") == ["triton_dist.ops.overlap.ag_gemm"]
    assert _layer("triton_dist.ops.overlap.ag_gemm") > _layer("triton_dist.kernels.gemm")


#: The inner order of ``mega_triton_kernel`` (0 = lowest): ``core`` (task IR, the registries, graph, scheduler,
#: codegen, device helpers) below ``tasks`` (the families, which register themselves into core's registries) below
#: ``builder`` (which imports ``tasks`` so every built-in family is registered) below ``models``. The package's
#: ``__init__`` is its facade, above all of them.
MEGA = "triton_dist.mega_triton_kernel"
MEGA_INNER = {"core": 0, "tasks": 1, "builder": 2, "models": 3}
_MEGA_FACADE = len(MEGA_INNER)


def _mega_part(module: str):
    """The inner layer of a module of ``mega_triton_kernel`` (the facade for the package itself), or None."""
    if module == MEGA:
        return _MEGA_FACADE
    if not module.startswith(MEGA + "."):
        return None
    return MEGA_INNER.get(module.split(".")[2])


def mega_violations(module: str, tree, is_package: bool = False) -> set:
    """``{(module, imported part)}`` for each import of ``tree`` (the source of ``module``, inside the package; an
    ``__init__`` when ``is_package``) that goes up the inner order."""
    found = set()
    package = module if is_package else module.rsplit(".", 1)[0]
    src = _mega_part(module)
    for node in ast.walk(tree):
        for target in _imported(node, package):
            dst = _mega_part(_existing_module(target))
            if src is not None and dst is not None and dst > src:
                found.add((module, ".".join(_existing_module(target).split(".")[:3])))
    return found


def test_mega_kernel_inner_order():
    """core never imports tasks, builder or models; tasks never import builder or models; builder never imports
    models; nothing inside imports the facade."""
    root = os.path.join(PKG_ROOT, *MEGA.split("."))
    found = set()
    for dirpath, _, files in os.walk(root):
        for name in files:
            if name.endswith(".py"):
                path = os.path.join(dirpath, name)
                with open(path) as f:
                    found |= mega_violations(_module_name(path), ast.parse(f.read(), filename=path),
                                             is_package=name == "__init__.py")
    assert not found, ("imports against mega_triton_kernel's inner order (core < tasks < builder < models): "
                       f"{sorted(found)}")


def test_mega_scan_sees_upward_imports():
    """The inner-order scan flags what it must: a lazy import of a family from core, of the builder from a task."""
    core_src = ast.parse("def fuse(ops):\n    from ..tasks import linear\n")
    assert mega_violations(f"{MEGA}.core.fusion", core_src) == {(f"{MEGA}.core.fusion", f"{MEGA}.tasks")}
    task_src = ast.parse("from ..builder import ModelBuilder\nfrom ..core.task import Op\n")
    assert mega_violations(f"{MEGA}.tasks.linear", task_src) == {(f"{MEGA}.tasks.linear", f"{MEGA}.builder")}
    assert mega_violations(f"{MEGA}.models.qwen3", ast.parse("from ..builder import ModelBuilder\n")) == set()
    assert mega_violations(f"{MEGA}.core", ast.parse("from ..tasks import norm\n"), is_package=True) == {
        (f"{MEGA}.core", f"{MEGA}.tasks")}
