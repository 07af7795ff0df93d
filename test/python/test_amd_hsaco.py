"""Every class of triton_dist kernel assembles to a gfx942 code object (hsaco) on this CPU-only machine: ``dl`` ops,
``language_extra``, ``libshmem_device`` and the library's collectives and overlap kernels (issue 15, point 1).

No rocSHMEM bitcode is installed here, so the rocSHMEM functions stay unresolved: the AMDGCN calls them
(``s_swappc_b64`` through their GOT entries) and the hsaco keeps them as undefined symbols, as ``ptxas -c`` keeps
NVSHMEM's in a relocatable cubin. Before, LLVM (Triton 3.6) aborted the process while assembling any kernel with an
unresolved call (``cannot evaluate equated symbol '<kernel>.num_named_barrier'``, see
``_compat.amdgcn_with_module_resource_symbols``).

The set: one kernel per op class and per library module, chosen to cover every lowering that emits calls (dl.rank /
num_ranks / symm_at / notify at each comm scope, every libshmem_device function in two kernels) and each kernel
family of ``triton_dist.kernels``; the larger overlap GEMMs (ag_gemm, gemm_ar, gemm_rs, rs_own_gemm) are assembled by
their lit tests (test/lit/overlap, ``--stage amdgcn``), not again here.
"""
import os
import re
import subprocess

import pytest

from triton_dist.target import parse_target
from triton_dist.tools.compile import CompileRequest, compile_kernel, load_kernel

HERE = os.path.dirname(__file__)
LIT = os.path.join(HERE, "..", "lit")
PTR, FLAGS = "*fp32:16", "*i64:16"


def _lit_kernel(ref):
    return load_kernel(os.path.join(LIT, ref))


def _library(module, name):
    import importlib

    return getattr(importlib.import_module(f"triton_dist.kernels.{module}"), name)


def _dl_all_ops():
    from test_language_ops import k_all_ops

    return k_all_ops


# (id, kernel factory, signature, defines, rocSHMEM functions it must call)
CASES = [
    ("dl.rank+num_ranks", lambda: _lit_kernel("language/rank.py:rank_kernel"), ["*i32"], {},
     {"rocshmem_my_pe", "rocshmem_n_pes"}),
    ("dl.all_ops", _dl_all_ops, ["*i32:16", "*i64:16", PTR, PTR, "i32", "256"], {},
     {"rocshmem_my_pe", "rocshmem_n_pes", "rocshmem_ptr"}),
    ("dl.notify-inter_node", lambda: _lit_kernel("language/notify.py:notify_kernel"),
     ["*i64:16", "i32", "'inter_node'", "'set'"], {}, {"rocshmem_signal_set"}),
    ("language_extra.atomics", lambda: _lit_kernel("extra/atomics.py:add_k"), ["*i32", "*i32"],
     {"SCOPE": "sys", "SEM": "acq_rel"}, set()),
    ("libshmem_device.all_calls", lambda: _lit_kernel("libshmem/all_functions.py:all_calls"),
     ["*fp32:16", "*fp32:16", "*u64:16", "i32", "i64"], {}, {"rocshmem_putmem_signal_nbi_wg", "rocshmem_quiet"}),
    ("libshmem_device.amd_calls", lambda: _lit_kernel("libshmem/more_functions.py:amd_calls"),
     ["*fp32:16", "*fp32:16", "*u64:16", "i32", "i64"], {}, {"rocshmem_fcollectmem_wg"}),
    ("allgather", lambda: _library("allgather", "allgather_kernel"),
     [PTR, PTR, PTR, FLAGS, FLAGS, FLAGS, "i32", "i32", "i32", "i32"],
     {"WORLD": 2, "PUSH": True, "BLOCK": 1024}, {"rocshmem_ptr"}),
    ("allreduce.two_shot", lambda: _library("allreduce", "allreduce_two_shot_kernel"),
     [PTR, PTR, PTR, FLAGS, FLAGS, FLAGS, "i32", "i32", "i32", "i32", "i32"], {"WORLD": 2, "BLOCK": 1024},
     {"rocshmem_ptr"}),
    ("reduce_scatter.ring", lambda: _library("reduce_scatter", "reduce_scatter_ring_kernel"),
     [PTR, PTR, PTR, FLAGS, FLAGS, FLAGS, "i32", "i32", "i32", "i32"], {"WORLD": 2, "BLOCK": 1024},
     {"rocshmem_ptr"}),
    ("allreduce.ll (flagged words, tagged)", lambda: _library("allreduce", "allreduce_ll_kernel"),
     ["*bf16:16", "*bf16:16", FLAGS, FLAGS, "i32", "i32", "i32", "i32"], {"WORLD": 2, "BLOCK": 256, "EPW": 2},
     {"rocshmem_ptr", "rocshmem_my_pe"}),
    ("p2p.send", lambda: _library("p2p", "p2p_send_kernel"),
     [PTR, PTR, FLAGS, FLAGS, FLAGS, "i32", "i32", "i32", "i32", "i32"], {"WORLD": 2, "BLOCK": 1024},
     {"rocshmem_ptr"}),
    ("gemm_rs.chunked_finish", lambda: _library("gemm_rs", "rs_chunked_finish_kernel"),
     [PTR, PTR, PTR, FLAGS, FLAGS, "i32", "i32", "i32", "i32", "i32", "i32"],
     {"WORLD": 2, "BLOCK": 1024, "CONTIGUOUS": True}, set()),
    ("ag_gemm.ce_signal", lambda: _library("ag_gemm", "ag_ce_signal_kernel"),
     [FLAGS, FLAGS, FLAGS, FLAGS, "i32", "i32", "i32"], {"WORLD": 2, "NSIG": 2, "STEP": 2}, {"rocshmem_ptr"}),
]


def _undefined_symbols(hsaco: bytes, tmp_path) -> set:
    """Names of the undefined symbols of an ELF code object (``readelf``'s symbol tables; a textual scan of the
    ELF's string table would also list defined ones)."""
    path = tmp_path / "k.hsaco"
    path.write_bytes(hsaco)
    out = subprocess.run(["readelf", "-Ws", str(path)], capture_output=True, text=True, check=True).stdout
    return {f[7] for f in (ln.split() for ln in out.splitlines()) if len(f) >= 8 and f[6] == "UND"}


@pytest.mark.parametrize("name, factory, sig, defines, calls", CASES, ids=[c[0] for c in CASES])
def test_kernel_assembles_to_gfx942_hsaco(name, factory, sig, defines, calls, tmp_path, monkeypatch):
    monkeypatch.delenv("TRITON_DIST_ROCSHMEM_BITCODE", raising=False)
    monkeypatch.setenv("ROCSHMEM_HOME", str(tmp_path / "no-rocshmem"))  # no bitcode: the calls stay unresolved
    monkeypatch.setenv("ROCM_PATH", str(tmp_path / "no-rocm"))
    ck = compile_kernel(CompileRequest(factory(), parse_target("hip:gfx942"), sig, defines=defines))
    hsaco = ck.asm["hsaco"]
    assert isinstance(hsaco, bytes) and hsaco[:4] == b"\x7fELF", name
    gcn = ck.asm["amdgcn"]
    called = set(re.findall(r"\b(rocshmem_\w+)@gotpcrel32@lo", gcn))
    assert calls <= called, f"{name}: {sorted(calls - called)} not called in AMDGCN"
    if calls:
        assert "s_swappc_b64" in gcn
    import shutil

    if shutil.which("readelf"):
        undefined = _undefined_symbols(hsaco, tmp_path)
        assert {s for s in undefined if s.startswith("rocshmem_")} == called, name
