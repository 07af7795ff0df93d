"""Device-bitcode lookup and the compatibility check, with synthetic bitcode files (CPU)."""
import os
import sys

import pytest

from triton_dist.runtime import bitcode as bc


class _BitWriter:

    def __init__(self):
        self.bits = []

    def put(self, value, n):
        self.bits.extend((value >> i) & 1 for i in range(n))

    def vbr(self, value, n):
        hi = 1 << (n - 1)
        while True:
            chunk = value & (hi - 1)
            value >>= n - 1
            self.put(chunk | (hi if value else 0), n)
            if not value:
                return

    def align32(self):
        while len(self.bits) % 32:
            self.bits.append(0)

    def data(self):
        self.align32()
        out = bytearray()
        for i in range(0, len(self.bits), 8):
            out.append(sum(b << j for j, b in enumerate(self.bits[i:i + 8])))
        return bytes(out)


def fake_bitcode(producer: str, abbreviated: bool = True, tail: bytes = b"") -> bytes:
    """Magic + an IDENTIFICATION block whose STRING record is ``producer`` (like LLVM writes it), then ``tail``."""
    w = _BitWriter()
    w.put(1, 2)  # ENTER_SUBBLOCK
    w.vbr(13, 8)  # IDENTIFICATION_BLOCK_ID
    w.vbr(5, 4)  # abbrev width
    w.align32()
    w.put(4, 32)  # block length in words (not checked)
    if abbreviated:
        w.put(2, 5)  # DEFINE_ABBREV [literal 1, array, char6]
        w.vbr(3, 5)
        w.put(1, 1)
        w.vbr(1, 8)
        w.put(0, 1)
        w.put(3, 3)
        w.put(0, 1)
        w.put(4, 3)
        w.put(4, 5)  # record with abbrev 4
        w.vbr(len(producer), 6)
        for ch in producer:
            w.put(bc._CHAR6.index(ch), 6)
    else:
        w.put(3, 5)  # UNABBREV_RECORD
        w.vbr(1, 6)
        w.vbr(len(producer), 6)
        for ch in producer:
            w.vbr(ord(ch), 6)
    w.put(2, 5)  # EPOCH record (unabbreviated)
    w.put(0, 5)  # END_BLOCK
    return b"BC\xc0\xde" + w.data() + tail


@pytest.mark.parametrize("abbrev", [True, False])
def test_identification_block_is_decoded(abbrev):
    assert bc.read_identification(fake_bitcode("LLVM23.1.0", abbrev)) == "LLVM23.1.0"


def test_not_bitcode_has_no_identification():
    assert bc.read_identification(b"\x7fELF" + b"\0" * 60) is None


def _write(path, data):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return str(path)


def test_producer_falls_back_to_clang_version(tmp_path):
    p = _write(tmp_path / "x.bc", b"BC\xc0\xde" + b"\x00" * 64 + b"...clang version 25.0.1 (git)...")
    assert bc.llvm_producer(p)[0] == 25


def test_newer_llvm_is_rejected_with_install_hint(tmp_path, monkeypatch):
    monkeypatch.setenv("TRITON_DIST_TRITON_LLVM_MAJOR", "22")
    bc.triton_llvm_major.cache_clear()
    try:
        p = _write(tmp_path / "new.bc", fake_bitcode("LLVM23.0.0"))
        with pytest.raises(bc.BitcodeError, match=r"LLVM 23.*LLVM 22 inside the installed Triton.*pip install \"nvidia-nvshmem-cu1[23]>=3.3,<3.8\""):
            bc.check_bitcode(p)
        old = _write(tmp_path / "old.bc", fake_bitcode("LLVM18.1.1"))
        assert bc.check_bitcode(old) == old
    finally:
        bc.triton_llvm_major.cache_clear()


def test_bad_magic_is_rejected(tmp_path):
    p = _write(tmp_path / "libnvshmem_device.bc", b"not bitcode at all")
    with pytest.raises(bc.BitcodeError, match="not an LLVM bitcode file"):
        bc.check_bitcode(p)


@pytest.fixture
def no_wheel(monkeypatch):
    monkeypatch.setattr(bc, "_wheel_lib_dir", lambda: None)
    monkeypatch.delenv("TRITON_DIST_NVSHMEM_BITCODE", raising=False)
    monkeypatch.delenv("NVSHMEM_HOME", raising=False)


def test_missing_bitcode_names_what_to_install(no_wheel):
    with pytest.raises(bc.BitcodeError, match=r"not found.*pip install \"nvidia-nvshmem-cu1[23]>=3.3,<3.8\""):
        bc.find_nvshmem_bitcode()
    assert bc.nvshmem_bitcode_or_none() is None


def test_per_arch_layout_picks_the_newest_arch_not_above_the_target(no_wheel, tmp_path, monkeypatch):
    """NVSHMEM >= 3.7 ships only libnvshmem_device_sm_XX.bc: the target's capability picks the file (the highest XX
    not above it); no capability, or none old enough, is one BitcodeError naming the files and what to install."""
    for sm in (75, 80, 90, 100):
        _write(tmp_path / "lib" / f"libnvshmem_device_sm_{sm}.bc", fake_bitcode("LLVM18.1.8"))
    monkeypatch.setenv("NVSHMEM_HOME", str(tmp_path))
    lib = tmp_path / "lib"
    assert bc.find_nvshmem_bitcode(90) == str(lib / "libnvshmem_device_sm_90.bc")
    assert bc.find_nvshmem_bitcode("sm_89") == str(lib / "libnvshmem_device_sm_80.bc")
    assert bc.find_nvshmem_bitcode(120) == str(lib / "libnvshmem_device_sm_100.bc")
    with pytest.raises(bc.BitcodeError, match=r"only per-arch.*>= 3.7.*no target compute capability.*pip install"):
        bc.find_nvshmem_bitcode()
    with pytest.raises(bc.BitcodeError, match=r"only per-arch.*none is for sm_70 or an older arch"):
        bc.find_nvshmem_bitcode(70)
    assert bc.nvshmem_bitcode_or_none() is None and bc.nvshmem_bitcode_or_none(90) is not None


def test_bitcode_of_a_later_release_of_the_same_llvm_major_is_unreadable(tmp_path, monkeypatch):
    """Triton 3.6's LLVM is a 22.0.0git snapshot: NVSHMEM 3.8's bitcode, written by LLVM 22.1.8, fails to parse in it
    (measured), while LLVM 21 / 18 bitcode links. The check compares whole versions, not majors."""
    monkeypatch.delenv("TRITON_DIST_TRITON_LLVM_MAJOR", raising=False)
    monkeypatch.setattr(bc, "triton_llvm_version", lambda: (22, 0, 0))
    newer = _write(tmp_path / "n" / "libnvshmem_device_sm_90.bc", fake_bitcode("LLVM22.1.8"))
    with pytest.raises(bc.BitcodeError, match=r"written by LLVM22.1.8.*newer than the LLVM 22.0.0 inside the "
                                              r"installed Triton 3\.\d+\.\d+.*cannot read it.*<3.8"):
        bc.check_bitcode(newer)
    for ok in ("LLVM22.0.0", "LLVM21.1.0", "LLVM18.1.1"):
        path = _write(tmp_path / ok / "x.bc", fake_bitcode(ok))
        assert bc.check_bitcode(path) == path


def test_llvm_version_tuple_parses_producers_and_triton_strings():
    assert bc.llvm_version_tuple("LLVM22.1.8") == (22, 1, 8)
    assert bc.llvm_version_tuple("22.0.0git") == (22, 0, 0)
    assert bc.llvm_version_tuple("clang version 18") == (18, 0, 0)
    assert bc.llvm_version_tuple("no digits") is None


def test_cuda_extras_allow_exactly_the_nvshmem_every_supported_triton_links():
    """pyproject.toml's cu12 / cu13 extras carry bitcode.NVSHMEM_WHEEL_SPEC (3.3-3.7: readable by Triton 3.6-3.9)."""
    import re

    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    with open(os.path.join(root, "pyproject.toml")) as f:
        text = f.read()
    for cu in ("cu12", "cu13"):
        line = re.search(rf"^{cu} = \[(.*)\]$", text, re.M).group(1)
        assert f'"nvidia-nvshmem-{cu}{bc.NVSHMEM_WHEEL_SPEC}"' in line, line


def test_nvshmem_home_and_override(no_wheel, tmp_path, monkeypatch):
    p = _write(tmp_path / "lib" / "libnvshmem_device.bc", fake_bitcode("LLVM18.1.1"))
    monkeypatch.setenv("NVSHMEM_HOME", str(tmp_path))
    assert bc.find_nvshmem_bitcode() == p
    other = _write(tmp_path / "o" / "custom.bc", fake_bitcode("LLVM17.0.6"))
    monkeypatch.setenv("TRITON_DIST_NVSHMEM_BITCODE", other)
    assert bc.find_nvshmem_bitcode() == other
    monkeypatch.setenv("TRITON_DIST_NVSHMEM_BITCODE", str(tmp_path / "missing.bc"))
    with pytest.raises(bc.BitcodeError, match="TRITON_DIST_NVSHMEM_BITCODE=.*is not a file"):
        bc.find_nvshmem_bitcode()


def test_installed_wheel_bitcode_is_compatible():
    lib = bc._wheel_lib_dir()
    if lib is None or not os.path.isfile(os.path.join(lib, bc.NVSHMEM_BITCODE_NAME)):
        pytest.skip("nvidia-nvshmem wheel not installed")
    path = bc.find_nvshmem_bitcode()
    major, text = bc.llvm_producer(path)
    assert text.startswith("LLVM") and bc.llvm_version_tuple(text) <= bc.triton_llvm_version()


def test_triton_llvm_major_is_read_from_libtriton():
    major = bc.triton_llvm_major()
    assert major is None or major >= 17


def test_rocshmem_lookup(tmp_path, monkeypatch):
    monkeypatch.delenv("TRITON_DIST_ROCSHMEM_BITCODE", raising=False)
    monkeypatch.setenv("ROCM_PATH", str(tmp_path / "rocm"))
    monkeypatch.setenv("ROCSHMEM_HOME", str(tmp_path / "rs"))
    with pytest.raises(bc.BitcodeError, match="librocshmem_device.bc not found.*ROCSHMEM_HOME"):
        bc.find_rocshmem_bitcode()
    assert bc.rocshmem_bitcode_or_none() is None
    p = _write(tmp_path / "rs" / "lib" / "librocshmem_device.bc", fake_bitcode("LLVM19.0.0"))
    assert bc.find_rocshmem_bitcode() == p


def test_rocshmem_per_arch_lookup(tmp_path, monkeypatch):
    """rocSHMEM installs one ``librocshmem_device_<gfx>.bc`` per GPU arch (cmake/DeviceBitcode.cmake)."""
    monkeypatch.delenv("TRITON_DIST_ROCSHMEM_BITCODE", raising=False)
    monkeypatch.setenv("ROCM_PATH", str(tmp_path / "rocm"))
    monkeypatch.setenv("ROCSHMEM_HOME", str(tmp_path / "rs"))
    p942 = _write(tmp_path / "rs" / "lib" / "librocshmem_device_gfx942.bc", fake_bitcode("LLVM19.0.0"))
    assert bc.find_rocshmem_bitcode("gfx942") == p942
    assert bc.find_rocshmem_bitcode("gfx942:sramecc+:xnack-") == p942  # feature suffixes are not in the name
    assert bc.rocshmem_bitcode_or_none("gfx942") == p942
    # another arch, or no arch, does not pick a per-arch file of a different GPU; the error lists what is there
    with pytest.raises(bc.BitcodeError, match=r"librocshmem_device_gfx90a.bc / librocshmem_device.bc not found.*"
                                              r"librocshmem_device_gfx942.bc"):
        bc.find_rocshmem_bitcode("gfx90a")
    with pytest.raises(bc.BitcodeError, match=r"no target arch was given"):
        bc.find_rocshmem_bitcode()
    assert bc.rocshmem_bitcode_or_none() is None
    # the arch-less file is the fallback; the per-arch one wins when both exist; ROCSHMEM_HOME before ROCM_PATH
    generic = _write(tmp_path / "rs" / "lib" / "librocshmem_device.bc", fake_bitcode("LLVM19.0.0"))
    assert bc.find_rocshmem_bitcode("gfx90a") == generic and bc.find_rocshmem_bitcode() == generic
    assert bc.find_rocshmem_bitcode("gfx942") == p942
    rocm950 = _write(tmp_path / "rocm" / "lib" / "librocshmem_device_gfx950.bc", fake_bitcode("LLVM19.0.0"))
    assert bc.find_rocshmem_bitcode("gfx950") == generic  # ROCSHMEM_HOME/lib is searched first
    os.remove(generic)
    assert bc.find_rocshmem_bitcode("gfx950") == rocm950
    # the explicit override wins over everything
    monkeypatch.setenv("TRITON_DIST_ROCSHMEM_BITCODE", p942)
    assert bc.find_rocshmem_bitcode("gfx950") == p942


# ------------------------------------------------------------------------------------------- the slim NVSHMEM library

@pytest.mark.skipif(bc.nvshmem_bitcode_or_none() is None, reason="no NVSHMEM wheel with device bitcode installed")
def test_slim_library_gives_the_same_ptx_as_the_whole_bitcode(tmp_path, monkeypatch):
    """A kernel calling every libshmem_device function compiles to the same PTX (debug lines aside) whether it links
    the slim library or NVSHMEM's whole bitcode; the slim library defines every function of the table, externally,
    and keeps the device state every function reads (what nvshmemx_cumodule_init binds)."""
    import re

    from triton_dist.target import parse_target
    from triton_dist.tools.compile import CompileRequest, compile_kernel, load_kernel

    monkeypatch.setenv("TRITON_DIST_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("TRITON_DIST_NO_SHMEM_BITCODE", raising=False)
    full = bc.find_nvshmem_bitcode()
    slim = bc.slim_nvshmem_library(full)
    assert slim != full and slim.startswith(str(tmp_path)) and os.path.getsize(slim) < os.path.getsize(full) / 4
    text = open(slim).read()
    for sym in bc.nvshmem_functions():
        assert re.search(rf"^define [^@\n]*@{sym}\(", text, re.M) and "define internal" not in \
            re.search(rf"^define [^\n]*@{sym}\(", text, re.M).group(0), sym
    assert re.search(r"^@nvshmemi_device_state_d = ", text, re.M)
    assert bc.slim_nvshmem_library(full) == slim  # made once
    # named by the bitcode's bytes: a reinstall elsewhere (new path, new mtime) keeps the kernels' cache keys
    import shutil

    moved = str(tmp_path / "reinstalled" / "libnvshmem_device.bc")
    os.makedirs(os.path.dirname(moved))
    shutil.copyfile(full, moved)
    os.utime(moved, ns=(1, 1))
    assert bc.slim_nvshmem_library(moved) == slim

    here = os.path.dirname(__file__)
    every_call = load_kernel(os.path.join(here, "..", "lit", "libshmem", "all_functions.py") + ":all_calls")
    from triton_dist.kernels.allreduce import allreduce_one_shot_kernel

    def compiled(kernel, sig, path, stop_after, **defines):
        req = CompileRequest(kernel, parse_target("cuda:90"), sig, defines=defines, stop_after=stop_after,
                             options={"extern_libs": {"libnvshmem_device": path}})
        return compile_kernel(req).asm

    # every function: the optimised LLVM IR (what PTX is generated from; ptxas on this kernel takes a minute)
    sig = ["*fp32:16", "*fp32:16", "*u64:16", "i32", "i64"]
    assert compiled(every_call, sig, slim, "llir")["llir"] == compiled(every_call, sig, full, "llir")["llir"]
    # a collective kernel of the library, all the way to PTX
    sig = ["*bf16:16", "*bf16:16", "*bf16:16", "*i64:16", "*i64:16", "i32", "i32", "i32", "i32"]

    def ptx(path):
        text = compiled(allreduce_one_shot_kernel, sig, path, None, WORLD=2, BLOCK=4096)["ptx"]
        return re.sub(r"^\s*\.(file|loc)\b.*$", "", text, flags=re.M)

    assert ptx(slim) == ptx(full)


def test_slim_library_can_be_turned_off_and_falls_back_on_failure(tmp_path, monkeypatch):
    full = tmp_path / "libnvshmem_device.bc"
    full.write_bytes(b"BC\xc0\xde not really bitcode")
    monkeypatch.setenv("TRITON_DIST_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv(bc.SLIM_ENV, "0")
    assert bc.nvshmem_link_library(str(full)) == str(full)
    monkeypatch.delenv(bc.SLIM_ENV)
    with pytest.warns(UserWarning, match="could not make the slim NVSHMEM library"):
        assert bc.nvshmem_link_library(str(full)) == str(full)


def test_kernel_calling_an_nvshmem_function_outside_the_slim_set_is_recompiled_with_the_next_library(monkeypatch):
    """triton_dist.jit: a compile that fails on an NVSHMEM function the linked library lacks is retried with the next
    library (slim -> wide -> whole), skipping a level that is the same file; the level reached is kept for the
    function's later compiles; other failures propagate unchanged."""
    import triton.language as tl

    import importlib

    import triton_dist

    J = importlib.import_module("triton_dist.jit")  # the module (the package attribute is the decorator)

    monkeypatch.setattr(J._compat, "interpret_enabled", lambda: False)
    files = {"slim": "slim.ll", "wide": "wide.ll", "whole": "whole.bc"}
    monkeypatch.setattr(J, "_libs_for_launch", lambda library="slim": {"libnvshmem_device": files[library]})
    seen = []
    lacking = {"slim.ll": "nvshmem_float_p", "wide.ll": None, "whole.bc": None}

    def fake(self, args, grid, warmup, kwargs):
        path = J._libs_for_launch(self._shmem_library)["libnvshmem_device"]
        seen.append(path)
        if lacking[path]:
            raise RuntimeError(f"PTXAS error\nptxas fatal   : Unresolved extern function '{lacking[path]}'")
        return "launched"

    monkeypatch.setattr(J.DistJITFunction, "_run_compiled", fake)

    @triton_dist.jit
    def k(x):
        tl.store(x, 1)

    assert k[(1, )](None) == "launched" and seen == ["slim.ll", "wide.ll"] and k._shmem_library == "wide"
    assert k[(1, )](None) == "launched" and seen == ["slim.ll", "wide.ll", "wide.ll"]

    # a function the wide library lacks too (a user's own NVSHMEM call): on to the whole bitcode
    seen.clear()
    lacking["wide.ll"] = "nvshmemx_something_else"

    @triton_dist.jit
    def k3(x):
        tl.store(x, 1)

    assert k3[(1, )](None) == "launched" and seen == ["slim.ll", "wide.ll", "whole.bc"]

    # slimming off: every level is the whole bitcode, so a miss there is the real error
    seen.clear()
    files.update(slim="whole.bc", wide="whole.bc")
    lacking["whole.bc"] = "nvshmem_missing"

    @triton_dist.jit
    def k4(x):
        tl.store(x, 1)

    with pytest.raises(RuntimeError, match="nvshmem_missing"):
        k4[(1, )](None)
    assert seen == ["whole.bc"] and k4._shmem_library == "slim"
    assert J.missing_from_slim_library(RuntimeError("Unresolved extern function 'nvshmemx_foo_block'")) == \
        "nvshmemx_foo_block"

    @triton_dist.jit
    def k2(x):
        tl.store(x, 1)

    def other(self, args, grid, warmup, kwargs):
        raise RuntimeError("Unresolved extern function '__nv_foo'")

    monkeypatch.setattr(J.DistJITFunction, "_run_compiled", other)
    with pytest.raises(RuntimeError, match="__nv_foo"):
        k2[(1, )](None)
    assert k2._shmem_library == "slim"


def test_wide_library_holds_every_function_and_links_a_full_library_only_call(tmp_path, monkeypatch):
    """The wide library defines every NVSHMEM function of the table (the slim set and ``FULL_LIBRARY_ONLY``),
    externally; a kernel calling a typed put (outside the slim set) compiles against it to the same optimised LLVM IR
    as against the whole bitcode, and ``shmem_link.libraries_for`` picks the smallest library that has a call."""
    import re

    from triton_dist.runtime import shmem_link
    from triton_dist.target import parse_target
    from triton_dist.tools.compile import CompileRequest, compile_kernel

    monkeypatch.setenv("TRITON_DIST_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("TRITON_DIST_NO_SHMEM_BITCODE", raising=False)
    full = bc.find_nvshmem_bitcode()
    wide = bc.nvshmem_link_library(full, "wide")
    assert wide != bc.nvshmem_link_library(full, "slim") and bc.nvshmem_link_library(full, "whole") == full
    text = open(wide).read()
    for sym in bc.nvshmem_functions(wide=True):
        assert re.search(rf"^define (?!internal)[^@\n]*@{sym}\(", text, re.M), sym
    with pytest.raises(ValueError, match="library must be one of"):
        bc.nvshmem_link_library(full, "fat")

    sys.path.insert(0, os.path.dirname(__file__))
    from test_libshmem_sim import k_scalar_put

    from triton_dist.language.extra import libshmem_device as shmem

    def llir(path):
        req = CompileRequest(k_scalar_put, parse_target("cuda:90"), ["*fp32:16", "fp32", "i32"],
                             defines={"P": shmem.float_p}, stop_after="llir",
                             options={"extern_libs": {"libnvshmem_device": path}})
        return compile_kernel(req).asm["llir"]

    assert llir(wide) == llir(full)
    slim = bc.nvshmem_link_library(full)
    # offered the slim file (what @triton_dist.jit offers first), the link step reads the typed put in the TTGIR and
    # links the wide one: one compile, no ptxas failure and retry
    assert llir(slim) == llir(wide)
    assert shmem_link.larger_offered_library("cuda", 90, slim, ["nvshmem_float_p"]) == wide
    assert shmem_link.larger_offered_library("cuda", 90, slim, ["nvshmem_int_p"]) is None  # slim has it
    assert shmem_link.larger_offered_library("cuda", 90, wide, ["nvshmem_int_p"]) is None  # never a smaller level
    assert shmem_link.larger_offered_library("cuda", 90, slim, ["nvshmem_not_ours"]) == full
    assert shmem_link.larger_offered_library("cuda", 90, "/a/users/own.bc", ["nvshmem_float_p"]) is None
    assert shmem_link.larger_offered_library("hip", "gfx942", slim, ["nvshmem_float_p"]) is None
    assert shmem_link.libraries_for("cuda", 90, ["nvshmem_int_p"]) == {"libnvshmem_device": slim}
    assert shmem_link.libraries_for("cuda", 90, ["nvshmem_float_p"]) == {"libnvshmem_device": wide}
    assert shmem_link.libraries_for("cuda", 90, ["nvshmem_not_ours"]) == {"libnvshmem_device": full}


def test_slim_function_set_leaves_out_the_full_library_only_functions():
    """The slim library holds every NVSHMEM function the lowerings call except ``FULL_LIBRARY_ONLY`` (most typed
    put / get, the thread / warp byte collectives: they would double its size); a kernel calling one of those is
    recompiled against the wide library (the tests above)."""
    from triton_dist.backends.nvidia import libshmem as nv

    slim = set(bc.nvshmem_functions())
    left_out = {nv.EXTERNS[n].symbol for n in nv.FULL_LIBRARY_ONLY}
    assert {"nvshmem_float_p", "nvshmem_uint16_g", "nvshmem_broadcastmem", "nvshmemx_fcollectmem_warp"} <= left_out
    assert not slim & left_out
    assert slim | left_out == {e.symbol for e in nv.EXTERNS.values()}
    assert {"nvshmem_int_p", "nvshmem_int_g", "nvshmem_putmem_signal", "nvshmemx_team_sync_block",
            "nvshmemx_broadcastmem_block"} <= slim


_NVSHMEM_KERNEL = '''
import triton.language as tl
import triton_dist
from triton_dist.language.extra import libshmem_device as shmem


@triton_dist.jit
def k(out):
    tl.store(out, shmem.my_pe())
'''


def test_missing_nvshmem_bitcode_is_one_error_naming_what_to_install(monkeypatch, tmp_path, capsys):
    """Compiling a kernel that calls NVSHMEM for cuda to PTX (which assembles it) where the device bitcode cannot be
    found: one Python error naming the function and what to install, not ptxas's ``Unresolved extern function``."""
    from triton_dist.runtime import shmem_link
    from triton_dist.tools import compile as ctool

    def not_found(arch=None):
        raise bc.BitcodeError("NVSHMEM device bitcode libnvshmem_device.bc not found (looked in: no nvidia-nvshmem "
                              'wheel installed and NVSHMEM_HOME unset). Install it with pip install '
                              '"nvidia-nvshmem-cu12>=3.3,<3.8", set NVSHMEM_HOME, or set TRITON_DIST_NVSHMEM_BITCODE')

    monkeypatch.delenv("TRITON_DIST_NO_SHMEM_BITCODE", raising=False)
    monkeypatch.setattr(bc, "find_nvshmem_bitcode", not_found)
    path = tmp_path / "k_nvshmem.py"
    path.write_text(_NVSHMEM_KERNEL)
    assert ctool.main([f"{path}:k", "-s", "*i32", "--target", "cuda:90", "--stage", "ptx"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert "kernel 'k' calls NVSHMEM (nvshmem_my_pe)" in err[0] and "Unresolved" not in err[0], err
    assert 'pip install "nvidia-nvshmem-cu12' in err[0] and "TRITON_DIST_NVSHMEM_BITCODE" in err[0], err
    # the check itself: only unresolved NVSHMEM declarations count, and the opt-out leaves them alone
    ptx = (".extern .func  (.param .b32 func_retval0) nvshmem_my_pe\n()\n;\n"
           ".visible .func nvshmemx_putmem_block()\n.extern .func __nv_expf\n")
    assert shmem_link.unresolved_nvshmem(ptx) == {"nvshmem_my_pe"}
    with pytest.raises(bc.BitcodeError, match=r"kernel 'k2' calls NVSHMEM \(nvshmem_my_pe\)"):
        shmem_link.check_nvshmem_resolvable(ptx, 90, "k2")
    shmem_link.check_nvshmem_resolvable(".extern .func __nv_expf\n", 90, "k3")
    monkeypatch.setenv("TRITON_DIST_NO_SHMEM_BITCODE", "1")
    shmem_link.check_nvshmem_resolvable(ptx, 90, "k4")
