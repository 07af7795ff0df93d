"""triton_dist.utils and runtime selection on CPU: every function (device-only ones give a sane value or a clear
error without a GPU), errors before init, env helpers, and 2-/4-rank runs on the simulator."""
import os
import socket
import subprocess
import sys

import pytest
import torch

import triton_dist.utils as U
from triton_dist.runtime import nvshmem as nvrt
from triton_dist.runtime import select
from triton_dist.runtime.state import STATE

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PY = os.path.join(ROOT, "python")
no_gpu = pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-GPU behaviour")


def test_bool_and_int_env(monkeypatch):
    for v, want in [("1", True), ("ON", True), ("true", True), ("0", False), ("off", False), ("False", False)]:
        monkeypatch.setenv("TD_X", v)
        assert U.get_bool_env("TD_X", not want) is want
    monkeypatch.delenv("TD_X")
    assert U.get_bool_env("TD_X", True) is True and U.get_int_env("TD_X", 7) == 7
    monkeypatch.setenv("TD_X", "maybe")
    with pytest.raises(ValueError, match="TD_X='maybe' is not a boolean"):
        U.get_bool_env("TD_X", False)
    monkeypatch.setenv("TD_X", "42")
    assert U.get_int_env("TD_X", 0) == 42
    monkeypatch.setenv("TD_X", "4x")
    with pytest.raises(ValueError, match="TD_X='4x' is not an integer"):
        U.get_int_env("TD_X", 0)


def test_signal_dtype_and_check():
    assert U.NVSHMEM_SIGNAL_DTYPE is torch.int64
    t = torch.zeros(4, dtype=torch.int64)
    assert U.check_signal_tensor(t) is t
    with pytest.raises(ValueError, match="must be torch.int64"):
        U.check_signal_tensor(torch.zeros(4, dtype=torch.int32))
    with pytest.raises(TypeError):
        U.check_signal_tensor([1, 2])


def test_rand_tensor_ranges():
    U.init_seed(0)
    for dt in (torch.float32, torch.float16, torch.bfloat16):
        x = U.rand_tensor((4096, ), dt, device="cpu")
        assert x.dtype == dt and float(x.min()) >= -1 and float(x.max()) <= 1 and float(x.float().std()) > 0.4
    i8 = U.rand_tensor((8192, ), torch.int8, device="cpu")
    assert int(i8.min()) < -100 and int(i8.max()) > 100
    u8 = U.rand_tensor((8192, ), torch.uint8, device="cpu")
    assert int(u8.min()) >= 0 and int(u8.max()) > 200
    assert U.rand_tensor(5, torch.int32, device="cpu").shape == (5, )
    f8 = U.rand_tensor((64, ), torch.float8_e4m3fn, device="cpu")
    assert f8.dtype == torch.float8_e4m3fn and float(f8.float().abs().max()) <= 1


def test_init_seed_reproducible():
    U.init_seed(3)
    a = torch.rand(8)
    U.init_seed(3)
    assert torch.equal(a, torch.rand(8))
    U.init_seed(4)
    assert not torch.equal(a, torch.rand(8))


def test_dist_print(capsys, monkeypatch):
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    U.dist_print("hidden")
    U.dist_print("shown", allowed_ranks=[1], prefix=True)
    U.dist_print("all", allowed_ranks="all")
    assert capsys.readouterr().out == "[rank:1]shown\nall\n"
    with pytest.raises(ValueError, match="allowed_ranks"):
        U.dist_print("x", allowed_ranks="some")


@no_gpu
def test_platform_queries_without_gpu():
    assert U.is_cuda() is False and U.is_hip() is False and U.has_tma() is False
    assert U.has_fullmesh_nvlink() is False and U.supports_p2p_native_atomic() is False
    assert U.is_nvshmem_multimem_supported() is False
    for fn in (U.get_numa_node, U.get_max_gpu_clock_rate_in_khz, U.get_current_gpu_clock_rate_in_khz,
               U.get_device_max_shared_memory_size):
        with pytest.raises(RuntimeError, match="needs a CUDA GPU"):
            fn(0)


def test_multimem_off_whenever_nvls_disabled(monkeypatch):
    monkeypatch.setenv("NVSHMEM_DISABLE_NVLS", "1")
    assert U.is_nvshmem_multimem_supported() is False
    monkeypatch.delenv("NVSHMEM_DISABLE_NVLS")  # unset: triton_dist sets it to 1 at init
    assert U.is_nvshmem_multimem_supported() is False


def test_shmem_calls_before_init_raise(monkeypatch):
    monkeypatch.setattr(STATE, "backend", None)
    assert U.is_shmem_initialized() is False
    for call in (lambda: U.nvshmem_create_tensor((4, ), torch.float32),
                 lambda: U.nvshmem_create_tensors((4, ), torch.float32, 0, 1),
                 lambda: U.nvshmem_free_tensor_sync(torch.zeros(1)), lambda: U.nvshmem_barrier_all_on_stream(),
                 lambda: U.rocshmem_barrier_all_on_stream()):
        with pytest.raises(RuntimeError, match=r"call initialize_distributed\(\) first"):
            call()


def test_finalize_is_idempotent_without_init(monkeypatch):
    monkeypatch.setattr(STATE, "backend", None)
    U.finalize_distributed()
    U.finalize_distributed()


# ---- backend selection ------------------------------------------------------------------------------------------
@pytest.fixture
def fresh_select(monkeypatch):
    select.reset()
    yield monkeypatch
    select.reset()


@pytest.mark.parametrize("kind,want", [("cuda", "nvshmem"), ("hip", "rocshmem"), (None, "sim")])
def test_default_backend(fresh_select, kind, want):
    fresh_select.delenv("TRITON_DIST_BACKEND", raising=False)
    fresh_select.setattr(select, "_torch_gpu_kind", lambda: kind)
    assert select.backend_name() == want


def test_explicit_backend_and_bad_value(fresh_select):
    fresh_select.setattr(select, "_torch_gpu_kind", lambda: "cuda")
    fresh_select.setenv("TRITON_DIST_BACKEND", "SIM")
    assert select.backend_name() == "sim"
    select.reset()
    fresh_select.setenv("TRITON_DIST_BACKEND", "mpi")
    with pytest.raises(ValueError, match="not a triton_dist backend: choose one of nvshmem, rocshmem, sim"):
        select.backend_name()
    with pytest.raises(ValueError):
        U.initialize_distributed()


@pytest.mark.parametrize("env,gpu,want", [
    ({}, None, False),  # plain import on CPU: never
    ({"RANK": "0", "WORLD_SIZE": "2"}, None, True),  # torchrun without GPU
    ({"RANK": "0", "WORLD_SIZE": "2"}, "cuda", False),  # torchrun with GPU
    ({"TRITON_DIST_BACKEND": "sim"}, "cuda", True),  # explicit sim
    ({"RANK": "0", "WORLD_SIZE": "2", "TRITON_DIST_BACKEND": "nvshmem"}, None, False),
])
def test_should_interpret(fresh_select, env, gpu, want):
    for k in ("RANK", "WORLD_SIZE", "TRITON_DIST_BACKEND"):
        fresh_select.delenv(k, raising=False)
    for k, v in env.items():
        fresh_select.setenv(k, v)
    fresh_select.setattr(select, "_torch_gpu_kind", lambda: gpu)
    assert select.should_interpret() is want


def _import_and_report(env):
    full = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "TRITON_DIST_BACKEND",
                                                              "TRITON_INTERPRET")}
    full.update(env)
    full["PYTHONPATH"] = PY
    code = "import triton_dist, triton, os; print(bool(triton.knobs.runtime.interpret), os.environ.get('TRITON_INTERPRET'))"
    return subprocess.run([sys.executable, "-c", code], env=full, capture_output=True, text=True, timeout=120)


@no_gpu
def test_import_turns_interpreter_on_only_under_launcher_or_sim():
    assert _import_and_report({}).stdout.split() == ["False", "None"]
    assert _import_and_report({"RANK": "0", "WORLD_SIZE": "1"}).stdout.split() == ["True", "1"]
    assert _import_and_report({"TRITON_DIST_BACKEND": "sim"}).stdout.split() == ["True", "1"]


def test_make_backend_kinds():
    assert type(select.make_backend("nvshmem")).__name__ == "NvshmemBackend"
    assert type(select.make_backend("rocshmem")).__name__ == "RocshmemBackend"
    assert type(select.make_backend("sim")).__name__ == "SimBackend"
    with pytest.raises(ValueError):
        select.make_backend("mpi")


# ---- NVIDIA runtime pieces that need no GPU ---------------------------------------------------------------------
def test_nvls_default_and_user_override(monkeypatch):
    monkeypatch.delenv("NVSHMEM_DISABLE_NVLS", raising=False)
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    nvrt.apply_env_defaults()
    assert os.environ["NVSHMEM_DISABLE_NVLS"] == "1"
    monkeypatch.setenv("NVSHMEM_DISABLE_NVLS", "0")
    nvrt.apply_env_defaults()
    assert os.environ["NVSHMEM_DISABLE_NVLS"] == "0"


def test_bootstrap_interface_selection(monkeypatch):
    assert nvrt.interface_for("127.0.0.1") is None and nvrt.interface_for("localhost") is None
    assert nvrt.interface_for("") is None
    # a non-loopback local address must map back to its own interface
    local = None
    for _, name in socket.if_nameindex():
        ip = nvrt._iface_ipv4(name)
        if ip and not ip.startswith("127."):
            local = (name, ip)
            break
    if local is None:
        pytest.skip("no non-loopback IPv4 interface here")
    assert nvrt.interface_for(local[1]) == local[0]
    monkeypatch.delenv("NVSHMEM_BOOTSTRAP_UID_SOCK_IFNAME", raising=False)
    monkeypatch.setenv("MASTER_ADDR", local[1])
    nvrt.apply_env_defaults()
    assert os.environ["NVSHMEM_BOOTSTRAP_UID_SOCK_IFNAME"] == local[0]
    monkeypatch.setenv("NVSHMEM_BOOTSTRAP_UID_SOCK_IFNAME", "custom0")
    nvrt.apply_env_defaults()
    assert os.environ["NVSHMEM_BOOTSTRAP_UID_SOCK_IFNAME"] == "custom0"


def test_missing_nvshmem4py_is_a_clear_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "nvshmem.core", None)
    with pytest.raises(RuntimeError, match="nvshmem4py is not installed: pip install nvshmem4py-cu12"):
        nvrt.import_nvshmem()


def test_missing_librocshmem_is_a_clear_error(monkeypatch, tmp_path):
    from triton_dist.runtime import rocshmem

    monkeypatch.delenv("TRITON_DIST_ROCSHMEM_LIB", raising=False)
    monkeypatch.setenv("ROCSHMEM_HOME", str(tmp_path))
    monkeypatch.setenv("ROCM_PATH", str(tmp_path))
    with pytest.raises(RuntimeError, match="librocshmem.so not found.*ROCSHMEM_HOME"):
        rocshmem.find_librocshmem()


@no_gpu
def test_too_few_gpus_is_a_clear_error_before_cuda(fresh_select, monkeypatch):
    fresh_select.setenv("TRITON_DIST_BACKEND", "nvshmem")
    for k, v in {"RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2"}.items():
        monkeypatch.setenv(k, v)
    with pytest.raises(RuntimeError, match=r"LOCAL_WORLD_SIZE=2 .* needs 2 visible GPU\(s\) .* torch sees 0: "
                                           r"fix CUDA_VISIBLE_DEVICES, or run on the CPU simulator"):
        U.initialize_distributed()


def test_bad_launch_env_is_a_clear_error(fresh_select, monkeypatch):
    fresh_select.setenv("TRITON_DIST_BACKEND", "sim")
    monkeypatch.setenv("RANK", "3")
    monkeypatch.setenv("WORLD_SIZE", "2")
    with pytest.raises(ValueError, match="need 0 <= RANK < WORLD_SIZE"):
        U.initialize_distributed()


# ---- simulator: real bootstrap on 2 and 4 rank processes --------------------------------------------------------
@pytest.mark.sim
@pytest.mark.parametrize("world", [2, 4])
def test_initialize_distributed_on_sim(world):
    from triton_dist.runtime.sim.launch import run_ranks

    import _utils_rank_fns

    res = run_ranks(_utils_rank_fns.bootstrap_and_exchange, world, init=False, timeout=180)
    for r, out in enumerate(res):
        assert out["rank"] == r and out["world"] == world and out["group_size"] == world
        assert out["backend"] == "sim" and out["init"] is True
        assert out["peer_values"] == [100 + p for p in range(world)]
        assert out["own_is_view"] and out["after"] == (False, False)


@pytest.mark.sim
def test_exit_without_finalize_is_clean(tmp_path):
    script = tmp_path / "forgot.py"
    script.write_text("import torch, triton_dist.utils as U\n"
                      "U.initialize_distributed()\n"
                      "t = U.nvshmem_create_tensor((8,), torch.float32)\n"
                      "print('ok', U.is_shmem_initialized())\n")
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE")}
    env.update(PYTHONPATH=PY, TRITON_DIST_BACKEND="sim", PYTHONWARNINGS="default")
    p = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=180)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "ok True"
    assert "Error" not in p.stderr and "Warning" not in p.stderr and "Traceback" not in p.stderr, p.stderr


@pytest.mark.sim
def test_shmem_bootstrapped_over_a_subgroup_on_sim():
    """Each half of a 2-rank world its own process group of 1 (the launcher's LOCAL_WORLD_SIZE=2): SHMEM over it
    counts the group's own sizes (one PE), instead of refusing WORLD_SIZE=1 against LOCAL_WORLD_SIZE=2."""
    from triton_dist.runtime.sim.launch import run_ranks

    import _utils_rank_fns

    res = run_ranks(_utils_rank_fns.bootstrap_over_subgroups, 2, init=False, timeout=180, local_world_size=2)
    for r, seen in enumerate(res):
        assert seen == {"pe": 0, "n_pes": 1, "local_world": 1, "kernel": [0, 1],
                        "buf": [10.0 * r + i for i in range(4)]}, (r, seen)
