"""The backend contract (``triton_dist.language._backend``): every built-in backend implements every method of every
area with the call shape the declarations use, an incomplete backend is refused at registration, and the language
layer declares and validates without ever branching on a target (docs/architecture.md, "The backend contract")."""
import ast
import importlib
import os
import re
import subprocess
import sys

import pytest

from triton_dist.language import _backend
from triton_dist.language._backend import AREAS, Backend, contract_violations, register_backend, registered_backends
from triton_dist.target import BACKEND_PACKAGES

LANGUAGE_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python", "triton_dist",
                            "language")


def _register_all():
    for package in BACKEND_PACKAGES.values():
        importlib.import_module(package)
    return registered_backends()


def test_backends_register_on_first_use():
    """``import triton_dist`` loads no backend (its ``triton.jit`` helpers must be created after the interpreter
    switch); the first lookup for a target imports the package ``BACKEND_PACKAGES`` names, which registers itself."""
    code = ("import sys, triton_dist\n"
            "from triton_dist.language import _backend\n"
            "print(sorted(m for m in sys.modules if m.startswith('triton_dist.backends')), "
            "sorted(_backend.registered_backends()))\n"
            "target, backend = _backend.backend_for(None)\n"
            "print(target, backend.name, sorted(_backend.registered_backends()))\n")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                         env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)))
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip().splitlines()[-2:] == ["[] []", "sim sim ['sim']"]


def test_every_target_has_a_registered_backend():
    assert sorted(_register_all()) == sorted(BACKEND_PACKAGES) == ["cuda", "hip", "sim"]
    assert {b.name for b in registered_backends().values()} == {"nvidia", "amd", "sim"}


@pytest.mark.parametrize("target_backend", ["cuda", "hip", "sim"])
def test_backend_implements_every_lowering(target_backend):
    backend = _register_all()[target_backend]
    assert contract_violations(backend) == []
    for area, protocol in AREAS.items():
        for name in _backend._protocol_methods(protocol):
            assert callable(getattr(getattr(backend, area), name)), (target_backend, area, name)


def test_each_area_declares_its_methods():
    counts = {area: len(_backend._protocol_methods(p)) for area, p in AREAS.items()}
    assert counts == {"language": 10, "extra": 15, "libshmem": 16, "profiler": 3}


def test_incomplete_backend_is_refused():
    sim = _register_all()["sim"]

    class MissingTid:
        def __getattr__(self, name):
            if name == "tid":
                raise AttributeError(name)
            return getattr(sim.extra, name)

    with pytest.raises(TypeError, match=r"(?s)backend 'broken' does not implement .*broken\.extra: no tid"):
        register_backend("broken", Backend("broken", sim.language, MissingTid(), sim.libshmem, sim.profiler))
    assert "broken" not in registered_backends()


def test_call_shape_mismatch_is_refused():
    sim = _register_all()["sim"]

    class PositionalTarget:
        """``rank(target, _semantic)``: the old positional form; the declarations pass keywords."""

        def __getattr__(self, name):
            return getattr(sim.language, name)

        @staticmethod
        def rank(target, _semantic):
            return None

    problems = contract_violations(Backend("old", PositionalTarget(), sim.extra, sim.libshmem, sim.profiler))
    assert problems == ["old.language.rank: takes 2 positional operands and keywords (none); the contract says 0 "
                        "and _semantic, target"]


def test_unknown_target_names_the_registered_ones(monkeypatch):
    from triton_dist.target import Target

    _register_all()
    monkeypatch.setattr(_backend, "target_of", lambda _semantic: Target("vulkan", None, 1))
    with pytest.raises(RuntimeError, match=r"no backend is registered for target vulkan \(registered: cuda, hip, "
                                           r"sim; triton_dist.target.BACKEND_PACKAGES names no package for it\)"):
        _backend.backend_for(None)


# ------------------------------------------------------------------------------------------- no target branches

#: attributes of ``Target`` that tell one target from another (a comparison of ``Target.backend`` names a target:
#: the string check below finds it; the registry's lookup by ``Target.backend`` is no branch)
TARGET_TESTS = {"is_cuda", "is_hip", "is_sim"}
#: functions that tell the interpreter (simulator) from a compiled target
INTERPRETER_TESTS = {"is_interpreter_semantic", "interpret_enabled"}
#: prefixes of SHMEM library symbols, which only the backends may name (the public ``NVSHMEM_*`` constants are API)
SYMBOL_PREFIXES = ("nvshmem_", "nvshmemx_", "rocshmem_")
#: a SHMEM symbol: one of the prefixes at the start of a word (the reference's API name ``set_rocshmem_ctx`` is not
#: a library symbol)
_SYMBOL = re.compile(r"(?<![A-Za-z0-9_])(" + "|".join(SYMBOL_PREFIXES) + ")")


def _docstrings(tree):
    nodes = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                nodes.add(id(first.value))
    return nodes


def target_branches(source: str):
    """``(line, what)`` for every place in ``source`` that tells targets apart or names a SHMEM symbol (docstrings
    excepted: they may say what a target does)."""
    tree = ast.parse(source)
    docstrings = _docstrings(tree)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in TARGET_TESTS:
            found.append((node.lineno, f".{node.attr}"))
        elif isinstance(node, (ast.Attribute, ast.Name)) and (getattr(node, "attr", None) or
                                                              getattr(node, "id", None)) in INTERPRETER_TESTS:
            found.append((node.lineno, getattr(node, "attr", None) or node.id))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            if node.value in ("cuda", "hip", "sim") or _SYMBOL.search(node.value):
                found.append((node.lineno, repr(node.value)))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            parts = [p for name in [getattr(node, "module", None) or ""] + [a.name for a in node.names]
                     for p in name.split(".")]
            if "backends" in parts:
                found.append((node.lineno, "import of triton_dist.backends"))
    return found


def test_the_scan_finds_target_branches():
    src = ('"""Docstring naming nvshmem_ptr is fine."""\n'
           "from ..backends import x\n"
           "def f(target, s):\n"
           "    if target.is_hip:\n"
           "        return 'rocshmem_ptr'\n"
           "    name = 'set_rocshmem_ctx'\n"
           "    if _compat.is_interpreter_semantic(s) or target.backend == 'cuda':\n"
           "        return 1\n")
    assert sorted(target_branches(src)) == [(2, "import of triton_dist.backends"), (4, ".is_hip"),
                                            (5, "'rocshmem_ptr'"), (7, "'cuda'"), (7, "is_interpreter_semantic")]


def test_language_never_branches_on_a_target():
    found = {}
    for dirpath, _, files in os.walk(LANGUAGE_DIR):
        for name in files:
            if name.endswith(".py"):
                path = os.path.join(dirpath, name)
                with open(path) as f:
                    hits = target_branches(f.read())
                if hits:
                    found[os.path.relpath(path, LANGUAGE_DIR)] = hits
    assert not found, ("the language layer declares and validates; target-specific code belongs to "
                       f"triton_dist/backends/<target>/ (see docs/architecture.md): {found}")
