"""Makes the GPU tier's absence visible on CPU hosts: this test is skipped with the reason when no GPU tier can run,
and on the GPU machine it checks the world the tier runs in: >= 2 ranks, each on its GPU by the binding rule, with
enough GPUs for them (one per rank, or shared: ``TRITON_DIST_RANKS_PER_GPU``)."""
import pytest


@pytest.mark.gpu
def test_gpu_tier_world_and_gpu_binding():
    """>= 2 ranks; this node has the GPUs its ranks need at TRITON_DIST_RANKS_PER_GPU = N ranks per GPU; this rank
    uses GPU ``LOCAL_RANK // N`` (``_torchrun_shmem.DEVICE``, what ``initialize_distributed`` binds: checked once the
    session's setup bound it); and where ranks share a GPU, their SM shares let all of them be resident at once
    (this rank has at most 1/N of the GPU's SMs, when NVML tells the GPU's SM count)."""
    import torch

    import triton_dist.utils as U
    from _torchrun_shmem import DEVICE, LOCAL_RANK, LOCAL_WORLD, RANKS_PER_GPU, WORLD
    from triton_dist.runtime import shared_gpu
    from triton_dist.runtime.device_info import rank_sm_count

    assert WORLD >= 2 and LOCAL_WORLD >= 1
    assert torch.cuda.device_count() >= shared_gpu.gpus_used(LOCAL_WORLD, RANKS_PER_GPU)
    assert DEVICE == shared_gpu.device_for_local_rank(LOCAL_RANK, LOCAL_WORLD, torch.cuda.device_count(),
                                                      RANKS_PER_GPU) == LOCAL_RANK // RANKS_PER_GPU
    if U.is_shmem_initialized():  # a whole-tier run: the session bound this rank's GPU
        assert torch.cuda.current_device() == DEVICE
    sharing = min(RANKS_PER_GPU, LOCAL_WORLD)
    physical = shared_gpu.physical_sm_count(DEVICE)
    if sharing > 1 and physical and shared_gpu.share_check_enabled():
        sms = rank_sm_count(torch.device("cuda", DEVICE))
        assert sms * sharing <= physical, (f"{sharing} ranks share GPU {DEVICE} ({physical} SMs) but this rank has "
                                           f"{sms}: run the tier through scripts/launch.sh --ranks-per-gpu (CUDA MPS)")


def test_gpu_tier_and_benchmarks_import_on_cpu():
    """Preflight for the GPU machine (device time is scarce): every GPU-tier module imports and collects, and every
    benchmark script parses its arguments, on a CPU host. Catches names moved or removed by refactors."""
    import os
    import re
    import subprocess
    import sys

    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.abspath(os.path.join(here, "..", ".."))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.join(root, "python"), here,
                                                       os.environ.get("PYTHONPATH", "")]))
    r = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "--collect-gpu", "-p", "no:cacheprovider",
                        os.path.join(here, "gpu")], capture_output=True, text=True, env=env, cwd=root, timeout=300)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    m = re.search(r"(\d+) tests? collected", r.stdout)
    assert m and int(m.group(1)) >= 80, r.stdout[-2000:]
    for bench in ("bench_collectives", "bench_shmem", "bench_overlap", "bench_moe_tp", "bench_attention"):
        r = subprocess.run([sys.executable, os.path.join(root, "benchmarks", f"{bench}.py"), "--help"],
                           capture_output=True, text=True, env=env, cwd=root, timeout=120)
        assert r.returncode == 0 and "usage" in r.stdout, (bench, r.stderr[-2000:])


def library_call_mismatches(path):
    """Calls in the Python file ``path`` to triton_dist functions and classes whose arguments do not bind to the
    callee's signature, or to names a triton_dist module does not have: ``[(line, callee, error)]``. Callees are
    resolved per scope (module, function, class) through ``from triton_dist... import name [as alias]`` and ``import
    triton_dist.x as alias`` in that scope or an enclosing one (GPU tests import inside the test functions); a name
    also assigned in the same scope (a local ``g = ...``) or imported twice differently, a call with ``*args`` /
    ``**kwargs``, and anything that is not a plain function or class (a Triton kernel, launched as
    ``kernel[grid](...)``) are left unchecked."""
    import ast
    import importlib
    import inspect

    with open(path) as f:
        tree = ast.parse(f.read(), path)
    scopes = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)

    def own_nodes(scope):
        """The nodes of ``scope`` outside its nested scopes (those come last, as scopes of their own)."""
        stack, nodes, children = list(ast.iter_child_nodes(scope)), [], []
        while stack:
            node = stack.pop()
            if isinstance(node, scopes):
                children.append(node)
                stack.extend(node.decorator_list if hasattr(node, "decorator_list") else [])
                continue
            nodes.append(node)
            stack.extend(ast.iter_child_nodes(node))
        return nodes, children

    problems = []

    def check(scope, outer):
        nodes, children = own_nodes(scope)
        names, local = dict(outer), {}

        def bind(name, obj):
            local[name] = obj if local.get(name, obj) is obj else None

        for node in nodes:
            if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").split(".")[0] == "triton_dist":
                mod = importlib.import_module(node.module)
                for alias in node.names:
                    obj = getattr(mod, alias.name, None)
                    bind(alias.asname or alias.name, obj if obj is not None else
                         importlib.import_module(f"{node.module}.{alias.name}"))
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.split(".")[0] == "triton_dist" and alias.asname:
                        bind(alias.asname, importlib.import_module(alias.name))
        for node in nodes:  # any other binding of a name in this scope makes it ambiguous here
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                local[node.id] = None
        if isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            for a in ast.walk(scope.args):
                if isinstance(a, ast.arg):
                    local[a.arg] = None
        for child in children:
            if not isinstance(child, ast.Lambda):
                local.setdefault(child.name, None)
        names.update(local)
        for node in nodes:
            if not isinstance(node, ast.Call):
                continue
            func, obj = node.func, None
            if isinstance(func, ast.Name):
                obj, what = names.get(func.id), func.id
            elif isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
                base, what = names.get(func.value.id), f"{func.value.id}.{func.attr}"
                if inspect.ismodule(base):
                    obj = getattr(base, func.attr, None)
                    if obj is None:
                        problems.append((node.lineno, what, f"module {base.__name__} has no attribute {func.attr!r}"))
                        continue
            if not (inspect.isfunction(obj) or inspect.isclass(obj)):
                continue
            if any(isinstance(a, ast.Starred) for a in node.args) or any(k.arg is None for k in node.keywords):
                continue
            try:
                sig = inspect.signature(obj)
            except (TypeError, ValueError):
                continue
            try:
                sig.bind(*range(len(node.args)), **{k.arg: None for k in node.keywords})
            except TypeError as exc:
                problems.append((node.lineno, what, str(exc)))
        for child in children:
            check(child, names)

    check(tree, {})
    return sorted(problems)


def test_gpu_tier_calls_bind_to_the_library_signatures(tmp_path):
    """Preflight, continued: every call the GPU tier and the benchmarks make to a triton_dist function or class binds
    to its current signature. On the CPU these files are only imported, so a changed signature stayed hidden until a
    GPU run: test_gemm_table_entries_run_and_match called select_matmul_launch without its required ``num_sms``
    (TypeError on the GPU) for a session."""
    import glob
    import os

    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.abspath(os.path.join(here, "..", ".."))
    files = sorted(glob.glob(os.path.join(here, "gpu", "*.py")) + glob.glob(os.path.join(root, "benchmarks", "*.py")))
    assert len(files) > 20
    found = {os.path.relpath(f, root): library_call_mismatches(f) for f in files}
    assert not any(found.values()), {f: p for f, p in found.items() if p}
    # the checker itself: the call that hid, a wrong keyword, and a name the module lacks are all reported
    bad = tmp_path / "bad.py"
    bad.write_text("def t():\n    from triton_dist.kernels import gemm_table as g\n"
                   "    g.select_matmul_launch(1, 2, 3, None, 'H200', use_tma=True)\n"
                   "    g.build_gemm_table(None, None, marginn=0)\n    g.no_such_function()\n")
    got = library_call_mismatches(str(bad))
    assert [(line, what) for line, what, _ in got] == [(3, "g.select_matmul_launch"), (4, "g.build_gemm_table"),
                                                        (5, "g.no_such_function")], got
    assert "num_sms" in got[0][2]


def test_tier_progress_lines_name_each_test_its_outcome_and_duration(tmp_path):
    """The GPU suite's tiers run with ``TRITON_DIST_REPORT_FAILURES_NOW=1`` (conftest.py): rank 0 prints one
    ``[done] OUTCOME SECONDS NODEID`` line per finished test and every rank its failures at once, so a step cut at
    its limit still tells where its time went and which tests a later run may deselect."""
    import os
    import shutil
    import subprocess
    import sys

    here = os.path.dirname(os.path.abspath(__file__))
    shutil.copy(os.path.join(here, "conftest.py"), tmp_path / "conftest.py")
    (tmp_path / "test_progress_probe.py").write_text(
        "import pytest\n"
        "def test_ok():\n    pass\n"
        "def test_bad():\n    assert 1 == 2, 'wrong on purpose'\n"
        "@pytest.mark.skip(reason='not here')\n"
        "def test_skipped():\n    pass\n")
    env = dict(os.environ, TRITON_DIST_REPORT_FAILURES_NOW="1", RANK="0")
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly",
                          "test_progress_probe.py"], cwd=tmp_path, env=env, capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 1, run.stdout + run.stderr
    done = [line.split() for line in run.stderr.splitlines() if line.startswith("[done] ")]
    assert [(d[1], d[3]) for d in done] == [("passed", "test_progress_probe.py::test_ok"),
                                             ("skipped", "test_progress_probe.py::test_skipped")], run.stderr
    assert all(d[2].endswith("s") and float(d[2][:-1]) >= 0 for d in done)
    assert "[rank 0] FAILED test_progress_probe.py::test_bad (call):" in run.stderr
    assert "wrong on purpose" in run.stderr
    quiet = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_progress_probe.py"],
                           cwd=tmp_path, env=dict(env, TRITON_DIST_REPORT_FAILURES_NOW="0"), capture_output=True,
                           text=True, timeout=120)
    assert "[done]" not in quiet.stderr and "[rank 0] FAILED" not in quiet.stderr
