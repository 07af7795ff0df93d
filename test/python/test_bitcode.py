"""Device-bitcode lookup and the compatibility check, with synthetic bitcode files (CPU)."""
import os

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
        with pytest.raises(bc.BitcodeError, match=r"LLVM 23.*LLVM 22.*pip install \"nvidia-nvshmem-cu1[23]>=3.3,<3.7\""):
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
    with pytest.raises(bc.BitcodeError, match=r"not found.*pip install \"nvidia-nvshmem-cu1[23]>=3.3,<3.7\""):
        bc.find_nvshmem_bitcode()
    assert bc.nvshmem_bitcode_or_none() is None


def test_per_arch_only_layout_is_nvshmem_38_and_rejected(no_wheel, tmp_path, monkeypatch):
    _write(tmp_path / "lib" / "libnvshmem_device_sm_90.bc", fake_bitcode("LLVM22.0.0"))
    monkeypatch.setenv("NVSHMEM_HOME", str(tmp_path))
    with pytest.raises(bc.BitcodeError, match=r"only per-arch.*>= 3.8.*pip install"):
        bc.find_nvshmem_bitcode()


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
    assert text.startswith("LLVM") and major <= bc.triton_llvm_major()


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
