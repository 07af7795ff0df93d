"""What the GPU tests that run under torchrun with SHMEM share: the rank layout from torchrun's environment and this
rank's GPU by the binding rule (``DEVICE``), one distributed setup per pytest process (NVSHMEM through
``triton_dist.utils``) with a module-scoped seeding fixture, the SHMEM barrier, and the environment of a child job
that may trap (``isolated_child_env``).

Ranks that share a GPU (``TRITON_DIST_RANKS_PER_GPU=N``, ``scripts/launch.sh --ranks-per-gpu N``; see
``triton_dist.runtime.shared_gpu``): local rank ``r`` uses GPU ``r // N``, so a test must never take ``LOCAL_RANK``
for a device index -- use ``DEVICE``.

Importable on a CPU host (the GPU tier is collected there, and the helpers are tested there): nothing here touches
a GPU at import."""
import os
import tempfile

import pytest
import torch

import triton_dist.utils as U
from triton_dist.runtime import shared_gpu

RANK = int(os.environ.get("RANK", 0))
WORLD = int(os.environ.get("WORLD_SIZE", 1))
LOCAL_RANK = int(os.environ.get("LOCAL_RANK", 0))
LOCAL_WORLD = int(os.environ.get("LOCAL_WORLD_SIZE", WORLD))
NXT = (RANK + 1) % max(WORLD, 1)
PRV = (RANK - 1) % max(WORLD, 1)

#: the MPS control pipe a CUDA client looks for when ``CUDA_MPS_PIPE_DIRECTORY`` is unset
DEFAULT_MPS_PIPE_DIR = "/tmp/nvidia-mps"


def env_ranks_per_gpu(env=None) -> int:
    """``TRITON_DIST_RANKS_PER_GPU`` of ``env`` (default ``os.environ``): 1 when unset. A value that is not an
    integer >= 1 also gives 1 here (the tier is then skipped, ``conftest.gpu_tier_skip_reason`` naming it; the
    library refuses it at initialisation)."""
    env = os.environ if env is None else env
    text = str(env.get(shared_gpu.RANKS_PER_GPU_ENV, "") or "").strip()
    try:
        n = int(text) if text else 1
    except ValueError:
        return 1
    return n if n >= 1 else 1


def rank_device(env=None, visible=None) -> int:
    """This rank's GPU index by the binding rule (``LOCAL_RANK // TRITON_DIST_RANKS_PER_GPU``, what
    ``initialize_distributed`` binds) from ``env`` (default ``os.environ``: LOCAL_RANK, LOCAL_WORLD_SIZE,
    TRITON_DIST_RANKS_PER_GPU) and ``visible`` GPUs (default ``torch.cuda.device_count()``). Where the node has too
    few GPUs for the rule (a CPU host collecting the tier, a launch the tier skips), ``LOCAL_RANK // N`` all the
    same: never raises, so a module can compute it at import."""
    env = os.environ if env is None else env
    local_rank = int(env.get("LOCAL_RANK", 0))
    local_world = int(env.get("LOCAL_WORLD_SIZE", env.get("WORLD_SIZE", 1)))
    per_gpu = env_ranks_per_gpu(env)
    if visible is None:
        visible = torch.cuda.device_count()
    try:
        return shared_gpu.device_for_local_rank(local_rank, local_world, int(visible), per_gpu)
    except (RuntimeError, ValueError):
        return local_rank // per_gpu


RANKS_PER_GPU = env_ranks_per_gpu()
#: this rank's GPU index (the binding rule): the device index every GPU test uses, never ``LOCAL_RANK``
DEVICE = rank_device()


def mps_client(env=None, default_pipe_dir: str = DEFAULT_MPS_PIPE_DIR) -> bool:
    """Whether a CUDA process started with ``env`` may become a client of an MPS server: ``CUDA_MPS_PIPE_DIRECTORY``
    is set (``scripts/launch.sh --ranks-per-gpu`` runs a private daemon there), or a daemon's control pipe is in the
    default directory."""
    env = os.environ if env is None else env
    if env.get("CUDA_MPS_PIPE_DIRECTORY"):
        return True
    return os.path.exists(os.path.join(default_pipe_dir, "control"))


def gpu_shared(env=None, default_pipe_dir: str = DEFAULT_MPS_PIPE_DIR) -> bool:
    """Whether this rank's GPU is shared with other ranks (``TRITON_DIST_RANKS_PER_GPU > 1``) or its process may be
    an MPS client (:func:`mps_client`): then a child job that may trap must run outside the MPS server
    (:func:`isolated_child_env`)."""
    return env_ranks_per_gpu(env) > 1 or mps_client(env, default_pipe_dir)


def visible_device_id(env, index: int) -> str:
    """The ``CUDA_VISIBLE_DEVICES`` entry that makes device ``index`` of a process started with ``env`` the only
    device of a child: the ``index``-th entry of ``env``'s ``CUDA_VISIBLE_DEVICES`` when it is set (an ordinal or a
    UUID), else ``index`` itself."""
    entries = [e.strip() for e in str(env.get("CUDA_VISIBLE_DEVICES", "") or "").split(",") if e.strip()]
    if entries and 0 <= index < len(entries):
        return entries[index]
    return str(index)


#: how much longer a child job may take outside the MPS server (see :func:`isolated_child_env`)
SHARED_CHILD_SLOWDOWN = 2


def child_timeout(seconds: float, env=None, default_pipe_dir: str = DEFAULT_MPS_PIPE_DIR) -> float:
    """The wall-clock limit of a child job that normally ends within ``seconds``: ``SHARED_CHILD_SLOWDOWN`` times
    longer when the GPU is shared (:func:`gpu_shared`: the child runs outside the MPS server and time-slices with
    it, about 2 ms per switch), so slowness is not a failure while a hang still is."""
    return seconds * (SHARED_CHILD_SLOWDOWN if gpu_shared(env, default_pipe_dir) else 1)


_TORCHRUN_PREFIXES = ("TORCHELASTIC_", "GROUP_", "ROLE_")


def isolated_child_env(base, *, port: int, ranks: int = 1, rank: int = 0, device=None, mps_dir=None,
                       shared=None, **extra) -> dict:
    """The environment of rank ``rank`` of a ``ranks``-rank child job (a fresh ``python`` that calls
    ``initialize_distributed``) started by a test, e.g. one that makes a kernel trap on purpose; ``base`` is the
    parent's environment (``os.environ``), ``port`` the child job's MASTER_PORT (the same for all its ranks),
    ``device`` the GPU index (in ``base``'s visible devices) the child job runs on when the GPU is shared (default
    ``DEVICE``; every rank of the child job must pass the same), ``shared`` whether it is (default
    :func:`gpu_shared` of ``base``), ``extra`` more variables (``str(value)``; None removes one).

    torchrun's own variables (``TORCHELASTIC_*``, ``GROUP_*``, ``ROLE_*``) are dropped and the child's
    RANK / WORLD_SIZE / LOCAL_RANK / LOCAL_WORLD_SIZE / MASTER_ADDR / MASTER_PORT set.

    **Why the child must run outside MPS.** Where ranks share a GPU they are clients of one CUDA MPS server, and a
    fatal GPU fault in ONE client (a ``trap``, an illegal address) kills every client of that server -- every rank
    of the tier -- and the server refuses new clients until all of them have exited. So when :func:`gpu_shared`,
    the child gets ``CUDA_MPS_PIPE_DIRECTORY`` = ``mps_dir`` (default: a fresh ``tempfile.mkdtemp()``), an empty
    directory where no daemon listens: the CUDA driver finds no MPS control daemon there and runs the child as an
    ordinary, non-MPS context, which time-slices with the MPS server (so it is slower: :func:`child_timeout`) and
    whose trap kills only itself. Also: every other ``CUDA_MPS_*`` variable is removed (the active-thread
    percentage means nothing outside MPS), ``TRITON_DIST_SM_SHARE_CHECK=0`` (the child's ranks time-slice instead
    of holding SM shares, which the check would refuse), ``TRITON_DIST_RANKS_PER_GPU=ranks`` (all the child's ranks
    on one GPU) and ``CUDA_VISIBLE_DEVICES`` = the job's GPU (``device``), the child's only one.

    One rank per GPU (not shared): a 1-rank child sees only the parent's GPU; the ranks of a multi-rank child keep
    the parent's ``CUDA_VISIBLE_DEVICES`` and child rank ``r`` uses GPU ``r`` (the GPU of parent local rank ``r``),
    ``TRITON_DIST_RANKS_PER_GPU=1``."""
    if not 0 <= rank < ranks:
        raise ValueError(f"isolated_child_env: rank {rank} is not in [0, ranks={ranks})")
    device = DEVICE if device is None else int(device)
    env = {k: v for k, v in base.items() if not k.startswith(_TORCHRUN_PREFIXES)}
    env.update(RANK=str(rank), WORLD_SIZE=str(ranks), LOCAL_RANK=str(rank), LOCAL_WORLD_SIZE=str(ranks),
               MASTER_ADDR="127.0.0.1", MASTER_PORT=str(int(port)))
    if shared is None:
        shared = gpu_shared(base)
    if shared:
        for k in [k for k in env if k.startswith("CUDA_MPS_")]:
            del env[k]
        env["CUDA_MPS_PIPE_DIRECTORY"] = str(mps_dir) if mps_dir is not None else tempfile.mkdtemp(prefix="no-mps-")
        env[shared_gpu.SM_SHARE_CHECK_ENV] = "0"
        env[shared_gpu.RANKS_PER_GPU_ENV] = str(ranks)
        env["CUDA_VISIBLE_DEVICES"] = visible_device_id(base, device)
    else:
        env[shared_gpu.RANKS_PER_GPU_ENV] = "1"
        if ranks == 1:
            env["CUDA_VISIBLE_DEVICES"] = visible_device_id(base, device)
    for k, v in extra.items():
        if v is None:
            env.pop(k, None)
        else:
            env[k] = str(v)
    return env


def run_logged_child(cmd, env, log_path, timeout: float):
    """Run a child process (``cmd``, environment ``env``) with its stdout and stderr into ``log_path``; returns
    ``(exit code, log text)``, the code being ``"timeout"`` when it ran past ``timeout`` seconds (then killed)."""
    import subprocess

    with open(log_path, "w") as f:
        try:
            rc = subprocess.run(cmd, env=env, stdout=f, stderr=subprocess.STDOUT, timeout=timeout).returncode
        except subprocess.TimeoutExpired:
            rc = "timeout"
    with open(log_path) as f:
        return rc, f.read()


def shmem_session_setup():
    """The body of the session fixture ``shmem_session`` (``test/python/conftest.py``): torch.distributed + NVSHMEM
    for the whole pytest process (this rank's GPU, ``DEVICE``, selected), initialised once, at the first test that
    needs it, and finalised at the end of the session (checked: SHMEM is then down). Per module it was initialised
    and finalised again: on the GPU machine the second module's initialisation in the same process then failed in
    Gloo's connect (``Connection refused``, every test of ``test_gpu_libshmem_scope.py`` after
    ``test_gpu_libshmem.py``, run at 56407d5)."""
    torch.cuda.set_device(DEVICE)
    g = U.initialize_distributed()
    yield g
    U.finalize_distributed()
    assert not U.is_shmem_initialized(), "finalize_distributed() left SHMEM initialised"


def shmem_group(seed: int):
    """A module-scoped fixture: the session's distributed setup (:func:`shmem_session`) with the RNGs seeded with
    ``seed`` for the module's tests (as ``initialize_distributed(seed=seed)`` seeds them). Use as
    ``group = shmem_group(5)``."""
    @pytest.fixture(scope="module")
    def group(shmem_session):
        U.init_seed(seed)
        return shmem_session

    return group


def shmem_barrier():
    """Every rank's NVSHMEM barrier on the current stream, then a device synchronize."""
    U.nvshmem_barrier_all_on_stream()
    torch.cuda.synchronize()
