#!/usr/bin/env bash
# Thin torchrun wrapper for triton-dist programs, one node or several, one GPU per rank or ranks sharing GPUs.
#
#   scripts/launch.sh [--nproc_per_node N] [--ranks-per-gpu N|auto] script.py [args...]
#   scripts/launch.sh [--nproc_per_node N] [--ranks-per-gpu N|auto] -m module [args...]
#
# Variables (all optional):
#   NNODES          number of nodes (default 1)
#   NODE_RANK       this node's index, 0..NNODES-1 (default 0)
#   MASTER_ADDR     address of node 0, reachable from every node (default 127.0.0.1)
#   MASTER_PORT     free TCP port on node 0 for the rendezvous (default 29500)
#   NPROC_PER_NODE  processes per node; --nproc_per_node overrides it. Default: the number of visible GPUs
#                   (CUDA_VISIBLE_DEVICES / torch.cuda.device_count()), or 2 on a machine without GPUs, where
#                   the ranks run on the CPU simulator.
#   TRITON_DIST_RANKS_PER_GPU  ranks that share one GPU (default 1); --ranks-per-gpu overrides it. `auto`: as many
#                   as needed, ceil(ranks / visible GPUs). Ranks that share a GPU ("Develop on one GPU",
#                   docs/runtime.md): local rank r uses GPU r // N; the torch process group is gloo only (NCCL
#                   refuses two ranks on one GPU); NVSHMEM runs several PEs per GPU; the ranks run as clients of
#                   one CUDA MPS server, so that their kernels run side by side, and each sizes its "one program per
#                   SM" grids to 1/N of the GPU's SMs, so that all ranks' grids are resident together
#                   (runtime/shared_gpu.py says why no MPS active-thread percentage is set: it would put every
#                   rank on the same fraction of the SMs). This wrapper uses the MPS control daemon that answers at
#                   CUDA_MPS_PIPE_DIRECTORY (or /tmp/nvidia-mps) if one runs, else starts a private one for the job
#                   (pipe and log folders in /tmp) and stops it when the job ends. More ranks than GPUs without
#                   this option is refused. Figures taken this way measure no NVLink: benchmarks label them.
#   PYTHON          interpreter (default: ./.venv/bin/python if present, else python3)
#   TRITON_DIST_BACKEND  nvshmem | rocshmem | sim (default: sim when no GPU is visible, else what the machine
#                   has); with sim, TRITON_INTERPRET=1 is exported so kernels run in Triton's interpreter
#
# Before torchrun starts, one line on stdout names the layout:
#   [launch] world_size=W gpus=G ranks_per_gpu=R mps=private|existing|none
#
# NVSHMEM is bootstrapped by triton_dist itself with a unique id carried over torch.distributed (no MPI, no
# PMI launcher needed). Multicast defaults set here:
#   NVSHMEM_DISABLE_NVLS=1       NVLink multicast (NVLS) stays OFF; this wrapper never turns it on
#   NCCL_NVLS_ENABLE=0           same for NCCL
#   TORCH_SYMM_MEM_DISABLE_MULTICAST=1
#   NVSHMEM_SYMMETRIC_SIZE       symmetric heap per rank: left to NVSHMEM's default (1 GiB) unless set; the
#                                simulator honours it too (or TRITON_DIST_SIM_SYMMETRIC_SIZE)
# Multi-node: if NVSHMEM_BOOTSTRAP_UID_SOCK_IFNAME is unset, triton_dist picks the interface that reaches
# MASTER_ADDR at initialisation.
set -euo pipefail
usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; }
if [[ $# -eq 0 || "$1" == "-h" || "$1" == "--help" ]]; then usage; exit 0; fi
die() { echo "launch.sh: $*" >&2; exit 2; }
cd_root="$(cd "$(dirname "$0")/.." && pwd)"
if [[ -z "${PYTHON:-}" ]]; then
  if [[ -x "$cd_root/.venv/bin/python" ]]; then PYTHON="$cd_root/.venv/bin/python"; else PYTHON=python3; fi
fi
nproc="${NPROC_PER_NODE:-}"
per_gpu="${TRITON_DIST_RANKS_PER_GPU:-}"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --nproc_per_node|--nproc-per-node) nproc="$2"; shift 2 ;;
    --nproc_per_node=*|--nproc-per-node=*) nproc="${1#*=}"; shift ;;
    --ranks-per-gpu|--ranks_per_gpu) per_gpu="$2"; shift 2 ;;
    --ranks-per-gpu=*|--ranks_per_gpu=*) per_gpu="${1#*=}"; shift ;;
    *) break ;;
  esac
done
[[ $# -gt 0 ]] || die "no script or -m module to run (--help lists the options)"
ngpu=$("$PYTHON" -c "import torch; print(torch.cuda.device_count() if torch.cuda.is_available() else 0)")
if [[ -z "$nproc" ]]; then
  nproc=$(( ngpu > 0 ? ngpu : 2 ))
fi
[[ "$nproc" =~ ^[1-9][0-9]*$ ]] || die "--nproc_per_node=$nproc is not a positive integer"
if [[ "$ngpu" -eq 0 && -z "${TRITON_DIST_BACKEND:-}" ]]; then
  export TRITON_DIST_BACKEND=sim
fi
if [[ "${TRITON_DIST_BACKEND:-}" == "sim" ]]; then
  # Kernels are interpreted on the simulator; set before the script imports triton, so that every @triton.jit
  # function (Triton's standard library included) is an interpreted one.
  export TRITON_INTERPRET=1
fi
if [[ "${NVSHMEM_DISABLE_NVLS:-1}" != "1" ]]; then
  die "refusing NVSHMEM_DISABLE_NVLS=${NVSHMEM_DISABLE_NVLS}: this wrapper never enables NVLink multicast"
fi
export NVSHMEM_DISABLE_NVLS=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
export PYTHONUNBUFFERED=1
torchrun=("$PYTHON" -m torch.distributed.run
  --nnodes "${NNODES:-1}" --node_rank "${NODE_RANK:-0}"
  --master_addr "${MASTER_ADDR:-127.0.0.1}" --master_port "${MASTER_PORT:-29500}"
  --nproc_per_node "$nproc")
world=$(( nproc * ${NNODES:-1} ))

# ---- one rank per GPU (or the simulator): torchrun as it is
if [[ "${TRITON_DIST_BACKEND:-}" == "sim" || "$ngpu" -eq 0 ]]; then
  echo "[launch] world_size=$world gpus=0 ranks_per_gpu=1 mps=none"
  exec "${torchrun[@]}" "$@"
fi
if [[ -z "$per_gpu" ]]; then
  per_gpu=1
  (( nproc > ngpu )) && die "$nproc ranks per node but $ngpu visible GPU(s): let ranks share GPUs with" \
    "--ranks-per-gpu $(( (nproc + ngpu - 1) / ngpu )) (or TRITON_DIST_RANKS_PER_GPU; CUDA MPS, each rank" \
    "1/N of the SMs), or lower --nproc_per_node"
elif [[ "$per_gpu" == "auto" ]]; then
  per_gpu=$(( (nproc + ngpu - 1) / ngpu ))
fi
[[ "$per_gpu" =~ ^[1-9][0-9]*$ ]] || die "--ranks-per-gpu=$per_gpu is not a positive integer or auto"
gpus=$(( (nproc + per_gpu - 1) / per_gpu ))
(( gpus <= ngpu )) || die "$nproc ranks at $per_gpu per GPU need $gpus GPUs, $ngpu visible: raise --ranks-per-gpu"
if (( per_gpu == 1 )); then
  unset TRITON_DIST_RANKS_PER_GPU
  echo "[launch] world_size=$world gpus=$(( gpus * ${NNODES:-1} )) ranks_per_gpu=1 mps=none"
  exec "${torchrun[@]}" "$@"
fi

# ---- ranks that share a GPU: clients of one CUDA MPS server, each sizing its grids to 1/N of the SMs
export TRITON_DIST_RANKS_PER_GPU=$per_gpu
# no CUDA_MPS_ACTIVE_THREAD_PERCENTAGE: under a percentage every client gets the SAME fraction of the SMs (measured,
# 2026-12-06: 2 ranks at 50% both on one set of 66 SMs, the other 66 idle), so it would not separate the ranks and
# would halve the GPU. A value the caller set stays (each rank's grids then take 1/N of that pool).
export NVSHMEM_DISABLE_NCCL=1  # NVSHMEM's own NCCL use: NCCL refuses two ranks on one GPU
command -v nvidia-cuda-mps-control >/dev/null || die "ranks share GPUs ($per_gpu per GPU) but" \
  "nvidia-cuda-mps-control is not on PATH: install the NVIDIA driver's MPS tools, or run one rank per GPU"
mps_answers() {  # does an MPS control daemon answer at $CUDA_MPS_PIPE_DIRECTORY?
  [[ -S "${CUDA_MPS_PIPE_DIRECTORY:-/tmp/nvidia-mps}/control" ]] && \
    echo get_default_active_thread_percentage | timeout 10 nvidia-cuda-mps-control >/dev/null 2>&1
}
mps=existing mps_pid=
if ! mps_answers; then
  mps=private
  export CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
  CUDA_MPS_PIPE_DIRECTORY=$(mktemp -d /tmp/triton-dist-mps-pipe.XXXXXX)
  CUDA_MPS_LOG_DIRECTORY=$(mktemp -d /tmp/triton-dist-mps-log.XXXXXX)
  stop_mps() {  # quit ends the daemon and its server; wait until both are gone (nothing outlives the job)
    local t0=$SECONDS waited=0
    echo quit | timeout 30 nvidia-cuda-mps-control >/dev/null 2>&1 || true
    # wait for the processes, not the control socket: if the socket file stays after the daemon is gone, a wait on
    # it lasts the full 10 s (suspected: shared-GPU steps exited ~10 s later than one-rank-per-GPU ones, 2026-12-06)
    for _ in $(seq 100); do
      { [[ -n $mps_pid ]] && kill -0 "$mps_pid" 2>/dev/null; } || pgrep -x nvidia-cuda-mps-server >/dev/null || break
      sleep 0.1; waited=$((waited + 1))
    done
    rm -rf "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
    echo "[launch] MPS daemon stopped in $((SECONDS - t0)) s ($waited waits of 0.1 s)" >&2
  }
  trap stop_mps EXIT
  trap 'exit 143' TERM INT
  nvidia-cuda-mps-control -d || die "could not start a CUDA MPS daemon (nvidia-cuda-mps-control -d); start one" \
    "yourself and set CUDA_MPS_PIPE_DIRECTORY, or run one rank per GPU"
  # this job's daemon: the newest nvidia-cuda-mps-control process (-d forks and returns once it runs)
  mps_pid=$(pgrep -n -x nvidia-cuda-mps-control || true)
  for _ in $(seq 50); do mps_answers && break; sleep 0.1; done
  mps_answers || die "the private CUDA MPS daemon does not answer at $CUDA_MPS_PIPE_DIRECTORY"
fi
echo "[launch] world_size=$world gpus=$(( gpus * ${NNODES:-1} )) ranks_per_gpu=$per_gpu mps=$mps"
set +e
t_job=$SECONDS
"${torchrun[@]}" "$@"
rc=$?
echo "[launch] ranks ended after $((SECONDS - t_job)) s (exit $rc)" >&2
exit $rc
