"""Exit after the script finalised NVSHMEM or rocSHMEM itself (CPU, with a fake nvshmem4py / librocshmem).

The reference's tests end with their own ``nvshmem.core.finalize()`` (AMD: ``pyrocshmem.rocshmem_finalize()``) and
``torch.distributed.destroy_process_group()``; triton_dist's exit-time ``finalize_distributed`` must then neither free
symmetric memory nor finalise again (on a GPU that aborted the process with NVSHMEM's "mutex lock failed", status
255). The fake libraries below behave like NVSHMEM in that respect: any call after their finalize is the abort,
recorded instead of killing the test."""
import sys
import types

import pytest
import torch
import torch.distributed as dist

from triton_dist.runtime import bootstrap
from triton_dist.runtime import nvshmem as nvrt
from triton_dist.runtime import rocshmem as rocrt
from triton_dist.runtime.state import STATE


class FakeNvshmem:
    """``nvshmem.core`` and ``nvshmem.bindings`` of one PE: init / finalize / init_status / malloc / free, with the
    status values of ``nvshmemx_init_status_t`` (0 not initialised, 2 initialised)."""

    def __init__(self, has_init_status=True):
        self.status = 0
        self.events = []
        self.core = types.ModuleType("nvshmem.core")
        self.bindings = types.ModuleType("nvshmem.bindings")
        self.core.get_unique_id = lambda empty=False: "uid"
        self.core.init = self._init
        self.core.finalize = self._finalize
        if has_init_status:
            self.core.init_status = lambda: self.status
        self.bindings.free = self._free
        self.package = types.ModuleType("nvshmem")
        self.package.core, self.package.bindings = self.core, self.bindings

    def _call(self, what):
        if self.status < 2:
            self.events.append(f"{what} after finalize: mutex lock failed (abort)")
            raise RuntimeError("mutex lock failed")
        self.events.append(what)

    def _init(self, **kwargs):
        self.status = 2
        self.events.append("init")

    def _finalize(self):
        self._call("finalize")
        self.status = 0

    def _free(self, ptr):
        self._call(f"free {ptr:#x}")


@pytest.fixture
def fake(monkeypatch):
    lib = FakeNvshmem()
    install(monkeypatch, lib)
    return lib


def install(monkeypatch, lib):
    cuda_core = types.ModuleType("cuda.core")
    cuda_core.Device = type("Device", (), {"__init__": lambda self, i: None, "set_current": lambda self: None})
    for name, mod in (("nvshmem", lib.package), ("nvshmem.core", lib.core), ("nvshmem.bindings", lib.bindings),
                      ("cuda", types.ModuleType("cuda")), ("cuda.core", cuda_core)):
        monkeypatch.setitem(sys.modules, name, mod)
    fake_device_and_group(monkeypatch)


def fake_device_and_group(monkeypatch):
    """One GPU (device 0, synchronize a no-op) and a one-rank process group, for a backend's init."""
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a: None)
    for name, fn in (("get_rank", lambda group=None: 0), ("get_world_size", lambda group=None: 1),
                     ("broadcast_object_list", lambda objs, src=0, group=None: None),
                     ("get_global_rank", lambda group, rank: rank), ("barrier", lambda group=None: None)):
        monkeypatch.setattr(dist, name, fn)


def started(allocs=(0x1000, 0x2000)):
    backend = nvrt.NvshmemBackend()
    backend.init(None)
    for ptr in allocs:  # two symmetric tensors (what nvshmem_create_tensor records)
        backend._allocs[ptr] = 64
    return backend


def test_exit_after_the_scripts_own_finalize_is_clean(fake, monkeypatch):
    backend = started()
    import nvshmem.core

    monkeypatch.setattr(STATE, "backend", backend)
    monkeypatch.setattr(STATE, "created_process_group", False)
    nvshmem.core.finalize()  # the reference's last lines
    assert not backend.is_initialized()
    assert nvshmem.core.finalize == fake._finalize  # the wrapper is gone with the library
    bootstrap._finalize_at_exit()  # what atexit runs
    assert fake.events == ["init", "finalize"]
    assert STATE.backend is None


def test_finalised_by_another_path_is_seen_through_init_status(fake):
    backend = started()
    fake._finalize()  # not through nvshmem.core.finalize (e.g. bound before triton_dist started NVSHMEM)
    backend.finalize()
    assert fake.events == ["init", "finalize"] and not backend.is_initialized()


def test_our_finalize_frees_then_finalises_once_and_unhooks(fake):
    backend = started()
    backend.finalize()
    backend.finalize()
    assert fake.events == ["init", "free 0x1000", "free 0x2000", "finalize"]
    assert sys.modules["nvshmem.core"].finalize == fake._finalize


def test_process_group_destroyed_first(fake, monkeypatch):
    """The script destroyed the process group triton_dist created and finalised NVSHMEM: exit touches neither."""
    backend = started()
    monkeypatch.setattr(STATE, "backend", backend)
    monkeypatch.setattr(STATE, "created_process_group", True)
    monkeypatch.setattr(dist, "is_initialized", lambda: False)
    destroyed = []
    monkeypatch.setattr(dist, "destroy_process_group", lambda *a: destroyed.append(a))
    sys.modules["nvshmem.core"].finalize()
    bootstrap.finalize_distributed()
    assert fake.events == ["init", "finalize"] and destroyed == [] and not STATE.created_process_group


def test_without_init_status_the_wrapper_still_covers_the_scripts_finalize(monkeypatch):
    lib = FakeNvshmem(has_init_status=False)
    install(monkeypatch, lib)
    backend = started()
    assert nvrt.finalized_elsewhere(lib.core) is False
    sys.modules["nvshmem.core"].finalize()
    backend.finalize()
    assert lib.events == ["init", "finalize"]


# ---- rocSHMEM: the same guard (runtime.backend.LibraryHeapBackend) around the reference's pyrocshmem ----------------
class FakeRocshmem(FakeNvshmem):
    """``librocshmem.so`` as ctypes binds it (unique-id init, malloc-free, finalize) and the reference's ``pyrocshmem``
    module (``rocshmem_finalize``), with FakeNvshmem's rule: a call after finalize is the abort."""

    def __init__(self):
        super().__init__()
        self.lib = types.SimpleNamespace(
            rocshmem_get_uniqueid=lambda uid: 0, rocshmem_set_attr_uniqueid_args=lambda *a: 0,
            rocshmem_init_attr=lambda flags, attr: self._init() or 0, rocshmem_free=self._free,
            rocshmem_finalize=self._finalize)
        self.pyrocshmem = types.ModuleType("pyrocshmem")
        self.pyrocshmem.rocshmem_finalize = self._finalize


def rocshmem_started(monkeypatch, lib, imported=True):
    """A RocshmemBackend initialised over ``lib`` with two symmetric tensors; ``imported``: the script imported
    pyrocshmem before initialize_distributed (else it has no such module)."""
    monkeypatch.setattr(rocrt, "load_librocshmem", lambda path=None: lib.lib)
    if imported:
        monkeypatch.setitem(sys.modules, "pyrocshmem", lib.pyrocshmem)
    else:
        monkeypatch.delitem(sys.modules, "pyrocshmem", raising=False)
    fake_device_and_group(monkeypatch)
    backend = rocrt.RocshmemBackend()
    backend.init(None)
    backend._allocs.update({0x1000: 64, 0x2000: 64})
    return backend


def test_rocshmem_exit_after_the_scripts_own_finalize_is_clean(monkeypatch):
    lib = FakeRocshmem()
    backend = rocshmem_started(monkeypatch, lib)
    monkeypatch.setattr(STATE, "backend", backend)
    monkeypatch.setattr(STATE, "created_process_group", False)
    import pyrocshmem

    pyrocshmem.rocshmem_finalize()  # the reference's AMD scripts' last lines
    assert not backend.is_initialized()
    assert pyrocshmem.rocshmem_finalize == lib._finalize  # the wrapper is gone with the library
    bootstrap._finalize_at_exit()  # what atexit runs
    assert lib.events == ["init", "finalize"]
    assert STATE.backend is None


@pytest.mark.parametrize("imported", [True, False])
def test_rocshmem_our_finalize_frees_then_finalises_once_and_unhooks(monkeypatch, imported):
    lib = FakeRocshmem()
    backend = rocshmem_started(monkeypatch, lib, imported)
    assert (sys.modules.get("pyrocshmem") is lib.pyrocshmem) == imported
    assert (lib.pyrocshmem.rocshmem_finalize != lib._finalize) == imported  # wrapped only where imported
    backend.finalize()
    backend.finalize()
    assert lib.events == ["init", "free 0x1000", "free 0x2000", "finalize"]
    assert lib.pyrocshmem.rocshmem_finalize == lib._finalize
