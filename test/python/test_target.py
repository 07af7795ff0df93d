"""Trace-time target dispatch: a builtin learns which target the kernel being traced is compiled for."""
import pytest
import triton
import triton.language as tl

from triton_dist import _compat
from triton_dist.target import SIM, Target, parse_target, target_of
from triton_dist.tools.compile import CompileRequest, compile_kernel

SEEN = []


@_compat.builtin
def _record_target(_semantic=None):
    SEEN.append(target_of(_semantic))
    return None


@triton.jit
def _probe(x_ptr):
    _record_target()
    tl.store(x_ptr, 1)


@pytest.mark.parametrize("text, expected", [
    ("cuda:90", Target("cuda", 90, 32)),
    ("cuda:80", Target("cuda", 80, 32)),
    ("hip:gfx942", Target("hip", "gfx942", 64)),
    ("hip:gfx90a", Target("hip", "gfx90a", 64)),
    ("hip:gfx950", Target("hip", "gfx950", 64)),
])
def test_builtin_sees_compile_target(text, expected):
    SEEN.clear()
    compile_kernel(CompileRequest(_probe, parse_target(text), ["*i32"]))
    assert SEEN == [expected]


def test_builtin_sees_interpreter_as_sim():
    # Triton's interpreter calls builtins it did not patch without `_semantic`.
    assert target_of(None) is SIM
    from triton.runtime.interpreter import interpreter_semantic

    assert target_of(interpreter_semantic) is SIM


def test_sim_target_execution_in_interpreter(tmp_path):
    import subprocess
    import sys
    import textwrap

    script = tmp_path / "k.py"
    script.write_text(textwrap.dedent("""
        import os
        os.environ["TRITON_INTERPRET"] = "1"
        import torch, triton, triton.language as tl
        from triton_dist import _compat
        from triton_dist.target import target_of
        SEEN = []
        @_compat.builtin
        def rec(_semantic=None):
            SEEN.append(str(target_of(_semantic)))
        @triton.jit
        def k(x):
            rec()
            tl.store(x, 7)
        x = torch.zeros(1, dtype=torch.int32)
        k[(2,)](x)
        print(SEEN, int(x[0]))
    """))
    import os

    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "['sim', 'sim'] 7"


@pytest.mark.parametrize("bad", ["cuda", "cuda:banana", "cuda:50", "cuda:99", "cuda:88", "hip:sm90", "hip:gfx9999",
                                 "hip:gfx940", "rocm:gfx942", "", "hip:"])
def test_parse_target_rejects(bad):
    with pytest.raises(ValueError, match="unknown target"):
        parse_target(bad)


def test_target_of_without_options_is_an_error():
    class FakeBuilder:
        pass

    class FakeSemantic:
        builder = FakeBuilder()

    with pytest.raises(RuntimeError, match="without compile options"):
        target_of(FakeSemantic())
