"""Recording compile requests (``runtime.compile_record``) and compiling them again into Triton's cache
(``tools/precompile.py``), on the CPU for ``cuda:90``: the replay must land under the very cache key the JIT computes
for the same launch, or the job's next run would compile everything again."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch
import triton
import triton.language as tl

import triton_dist
from triton_dist import _compat
from triton_dist.runtime import compile_record as cr

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


@triton_dist.jit
def k_scale(x, y, n, alpha, DT: tl.constexpr, BLOCK: tl.constexpr, FLAGS: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    v = tl.load(x + offs, mask=offs < n)
    if FLAGS[0]:
        v = v * alpha
    tl.store(y + offs, v.to(DT), mask=offs < n)


@triton_dist.jit
def k_ring(x, n, WORLD: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(x + offs, tl.load(x + offs, mask=offs < n) * WORLD, mask=offs < n)


def _jit_request(fn, args, kwargs):
    """(signature, constexprs, attrs, options, target) exactly as ``JITFunction.run`` hands them to ``_do_compile``
    for this launch on an H100/H200 (the binder ``run`` uses, then ``_pack_args``)."""
    from triton.compiler import make_backend

    target = _compat.gpu_target("cuda", 90, 32)
    backend = make_backend(target)
    bound, specialization, options = _compat.specialization_binder(fn, target)(*args, **kwargs)
    options, signature, constexprs, attrs = fn._pack_args(backend, kwargs, bound, specialization, options)
    return signature, constexprs, attrs, options, target


def _launch_args():
    x = torch.empty(1024, dtype=torch.float32)
    y = torch.empty(1024, dtype=torch.bfloat16)
    return (x, y, 1000, 0.5), dict(DT=tl.bfloat16, BLOCK=256, FLAGS=(True, tl.constexpr(3)), num_warps=4)


def test_codec_round_trips_every_kind_of_value_exactly():
    from triton_dist.kernels.allreduce import allreduce_one_shot_kernel
    from triton_dist.language.extra import libshmem_device as shmem

    values = [None, True, 0, -7, 2.5, float("inf"), "s", (1, (True, None)), [1, (2, )], {(0, ): [["tt.divisibility", 16]]},
              tl.float16, tl.constexpr(4), allreduce_one_shot_kernel, {"extern_libs": (("libdevice", "/p"), )},
              shmem.float_p]
    for v in values:
        back = cr.decode(json.loads(json.dumps(cr.encode(v))))
        assert repr(back) == repr(v) and type(back) is type(v), v
    assert cr.decode(cr.encode(tl.float16)) == tl.float16
    assert cr.decode(cr.encode(shmem.float_p)) is shmem.float_p  # a libshmem function passed as a constexpr
    assert cr.encode(shmem.float_p)["function"]["file"] is None  # defined by a wrapper elsewhere: import by name only
    assert cr.encode(k_scale)["jit"]["file"] == os.path.abspath(__file__)

    @triton_dist.jit
    def local(x):
        pass

    with pytest.raises(cr.Unrecordable, match="inside a function"):
        cr.encode(local)
    with pytest.raises(cr.Unrecordable, match="function"):
        cr.encode(lambda: 0)


def _record_through_do_compile(monkeypatch, tmp_path, fn, args, kwargs):
    """Run DistJITFunction._do_compile as JITFunction.run would (Triton's own compile step replaced by a probe) with
    recording on; returns the request it was given and the record line written."""
    signature, constexprs, attrs, options, target = _jit_request(fn, args, kwargs)
    given = []
    monkeypatch.setattr(triton.JITFunction, "_do_compile", lambda self, *a: given.append(a) or "compiled")
    monkeypatch.setitem(fn.__dict__, "_caches_by_mode", {"": {0: ({}, {}, target, None, None)}})
    monkeypatch.setenv(cr.RECORD_ENV, str(tmp_path / "rec"))
    monkeypatch.delenv("TRITON_DIST_BOUNDED_WAIT", raising=False)
    assert fn._do_compile("key", signature, 0, constexprs, options, attrs, False) == "compiled"
    assert given == [("key", signature, 0, constexprs, options, attrs, False)]  # Triton's step runs unchanged
    (path, ) = (tmp_path / "rec").iterdir()
    (line, ) = path.read_text().splitlines()
    return (signature, constexprs, attrs, options, target), json.loads(line)


def test_a_record_that_cannot_be_written_never_fails_the_launch(monkeypatch, tmp_path):
    args, kwargs = _launch_args()
    signature, constexprs, attrs, options, target = _jit_request(k_scale, args, kwargs)
    monkeypatch.setattr(triton.JITFunction, "_do_compile", lambda self, *a: "compiled")
    monkeypatch.setitem(k_scale.__dict__, "_caches_by_mode", {"": {0: ({}, {}, target, None, None)}})
    (tmp_path / "file").write_text("")
    monkeypatch.setenv(cr.RECORD_ENV, str(tmp_path / "file" / "rec"))  # under a file: cannot be made
    with pytest.warns(RuntimeWarning, match="could not record a compile request"):
        assert k_scale._do_compile("key", signature, 0, constexprs, options, attrs, False) == "compiled"


def test_a_recorded_request_replays_under_the_jit_cache_key(monkeypatch, tmp_path):
    """The request DistJITFunction._do_compile records, compiled by ``compile_request``, is the kernel Triton's
    ``_do_compile`` would compile for that launch (``triton.compile(ASTSource(...), target, options.__dict__)``):
    same hash, so the job's next launch is a cache hit."""
    args, kwargs = _launch_args()
    (signature, constexprs, attrs, options, target), rec = _record_through_do_compile(
        monkeypatch, tmp_path, k_scale, args, kwargs)
    assert rec["kernel"]["qualname"] == "k_scale" and rec["bounded_wait"] == ""
    assert "unrecordable" not in rec and rec["signature"]["dict"][0] == ["x", "*fp32"]
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv(cr.RECORD_ENV)
    jit_would = triton.compile(_compat.ast_source(k_scale, signature, constexprs, attrs), target=target,
                               options=options.__dict__)
    (good, ), bad = cr.load_requests([str(tmp_path / "rec")])
    assert not bad
    replayed = cr.compile_request(good)
    assert replayed.hash == jit_would.hash
    assert "ld.global" in replayed.asm["ptx"] and ".target sm_90a" in replayed.asm["ptx"]


def test_a_kernel_of_a_script_run_as_main_is_recorded_as_unreplayable(monkeypatch):
    """A script's kernel lives in ``__main__``; a replay's ``__main__`` is the precompile tool, so the request is
    counted as unreplayable instead of failing the precompile step (seen on the GPU: ``__main__:never``)."""
    args, kwargs = _launch_args()
    signature, constexprs, attrs, options, target = _jit_request(k_scale, args, kwargs)
    monkeypatch.setattr(k_scale.fn, "__module__", "__main__")
    rec = cr.request_of(k_scale, target, signature, constexprs, attrs, options, "")
    assert "script run as __main__" in rec["unrecordable"] and rec["kernel"]["module"] == "__main__"


def test_requests_are_deduplicated_and_unreplayable_ones_counted(tmp_path):
    rec = {"format": cr.RECORD_FORMAT, "kernel": {"module": "m", "qualname": "k"}, "signature": {"dict": []}}
    bad = {"format": cr.RECORD_FORMAT, "kernel": {"module": "m", "qualname": "k2"}, "unrecordable": "a lambda"}
    cr.record(str(tmp_path / "a"), rec)
    cr.record(str(tmp_path / "a"), bad)
    (tmp_path / "b.jsonl").write_text(json.dumps(rec) + "\n\n")
    good, unrecordable = cr.load_requests([str(tmp_path / "a"), str(tmp_path / "b.jsonl")])
    assert good == [rec] and unrecordable == [bad]
    (tmp_path / "c.jsonl").write_text('{"format": 99, "kernel": {}}\n')
    with pytest.raises(ValueError, match=r"c.jsonl:1: not a compile request of format 1"):
        cr.load_requests([str(tmp_path / "c.jsonl")])
    with pytest.raises(FileNotFoundError, match="no file or directory"):
        cr.load_requests([str(tmp_path / "missing")])


def test_shmem_library_paths_become_this_machines_at_the_recorded_level(monkeypatch, tmp_path):
    from triton_dist.jit import shmem_extern_libs

    monkeypatch.setenv("TRITON_DIST_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("TRITON_DIST_NO_SHMEM_BITCODE", raising=False)
    here = {lvl: shmem_extern_libs("cuda", 90, library=lvl) for lvl in ("slim", "wide", "whole")}
    if not here["slim"]:
        pytest.skip("no NVSHMEM device bitcode installed here")
    name = "libnvshmem_device"
    elsewhere = {"slim": "/elsewhere/cache/triton_dist/libnvshmem_device-slim-0123abcd.ll",
                 "wide": "/elsewhere/cache/triton_dist/libnvshmem_device-wide-0123abcd.ll",
                 "whole": "/opt/x/site-packages/nvidia/nvshmem/lib/libnvshmem_device.bc"}
    for lvl, path in elsewhere.items():
        libs = cr.local_extern_libs(((name, path), ("libdevice", "/opt/x/libdevice.10.bc")), "cuda", 90)
        assert libs == {name: here[lvl][name]}, lvl  # libdevice: the backend's default here
    assert cr.local_extern_libs({name: "/mine/own.bc", "extra": "/e.bc"}, "cuda", 90) == \
        {name: "/mine/own.bc", "extra": "/e.bc"}


def test_precompile_cli_fills_the_cache_the_jit_reads(monkeypatch, tmp_path):
    """End to end, on the CPU: record a launch's request, ``python -m triton_dist.tools.precompile`` in 2 processes
    compiles it (and reports a broken record without stopping), and the JIT's own compile of that launch afterwards
    is a cache hit (no new cache entry)."""
    args, kwargs = _launch_args()
    (signature, constexprs, attrs, options, target), rec = _record_through_do_compile(
        monkeypatch, tmp_path, k_scale, args, kwargs)
    broken = dict(rec, kernel={"module": "no_such_module_here", "qualname": "k", "file": None})
    cr.record(str(tmp_path / "rec"), broken)
    cr.record(str(tmp_path / "rec"), {"format": 1, "kernel": {"module": "m", "qualname": "f.<locals>.k"},
                                      "unrecordable": "defined inside a function"})
    cache = tmp_path / "cache"
    env = dict(os.environ, TRITON_CACHE_DIR=str(cache), PYTHONPATH=os.pathsep.join([os.path.join(ROOT, "python"), HERE]))
    env.pop(cr.RECORD_ENV, None)
    cmd = [sys.executable, "-m", "triton_dist.tools.precompile", str(tmp_path / "rec"), "--jobs", "2"]
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode == 1, out.stdout + out.stderr
    assert "precompile: FAILED no_such_module_here:k: ImportError" in out.stdout
    assert "precompile: 2 requests: 1 compiled, 1 failed, 1 unreplayable" in out.stdout, out.stdout
    entries = set(os.listdir(cache))
    assert entries
    monkeypatch.setenv("TRITON_CACHE_DIR", str(cache))
    monkeypatch.delenv(cr.RECORD_ENV)
    triton.compile(_compat.ast_source(k_scale, signature, constexprs, attrs), target=target, options=options.__dict__)
    assert set(os.listdir(cache)) == entries  # a hit: the replay wrote the entry the JIT looks up
    at4 = subprocess.run(cmd + ["--world", "4"], env=env, capture_output=True, text=True, timeout=600)
    assert ("precompile: 2 requests for WORLD=4 (1 without a WORLD constexpr skipped): 0 compiled, 1 failed, "
            "1 unreplayable") in at4.stdout, at4.stdout + at4.stderr
    bad = subprocess.run(cmd[:-2] + ["--jobs", "0"], env=env, capture_output=True, text=True, timeout=300)
    assert bad.returncode == 2 and "--jobs must be >= 1" in bad.stderr


def test_world_replays_a_request_for_another_world_size(monkeypatch, tmp_path):
    """``compile_request(rec, world=4)`` of a launch recorded at WORLD=2 is the JIT's compile of the same launch at
    WORLD=4; a kernel without a WORLD constexpr is skipped (None)."""
    x = torch.empty(64, dtype=torch.float32)
    (_, rec2) = _record_through_do_compile(monkeypatch, tmp_path / "2", k_ring, (x, 50), dict(WORLD=2, BLOCK=64))
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv(cr.RECORD_ENV)
    signature, constexprs, attrs, options, target = _jit_request(k_ring, (x, 50), dict(WORLD=4, BLOCK=64))
    jit_at_4 = triton.compile(_compat.ast_source(k_ring, signature, constexprs, attrs), target=target,
                              options=options.__dict__)
    assert cr.compile_request(rec2, world=4).hash == jit_at_4.hash != cr.compile_request(rec2).hash
    args, kwargs = _launch_args()
    (_, rec) = _record_through_do_compile(monkeypatch, tmp_path / "s", k_scale, args, kwargs)
    assert cr.compile_request(rec, world=4) is None
