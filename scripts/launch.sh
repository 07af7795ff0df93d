#!/usr/bin/env bash
# Thin torchrun wrapper for triton-dist programs, one node or several.
#
#   scripts/launch.sh [--nproc_per_node N] script.py [args...]
#   scripts/launch.sh [--nproc_per_node N] -m module [args...]
#
# Variables (all optional):
#   NNODES          number of nodes (default 1)
#   NODE_RANK       this node's index, 0..NNODES-1 (default 0)
#   MASTER_ADDR     address of node 0, reachable from every node (default 127.0.0.1)
#   MASTER_PORT     free TCP port on node 0 for the rendezvous (default 29500)
#   NPROC_PER_NODE  processes per node; --nproc_per_node overrides it. Default: the number of visible GPUs
#                   (CUDA_VISIBLE_DEVICES / torch.cuda.device_count()), or 2 on a machine without GPUs, where
#                   the ranks run on the CPU simulator.
#   PYTHON          interpreter (default: ./.venv/bin/python if present, else python3)
#   TRITON_DIST_BACKEND  nvshmem | rocshmem | sim (default: sim when no GPU is visible, else what the machine
#                   has); with sim, TRITON_INTERPRET=1 is exported so kernels run in Triton's interpreter
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
cd_root="$(cd "$(dirname "$0")/.." && pwd)"
if [[ -z "${PYTHON:-}" ]]; then
  if [[ -x "$cd_root/.venv/bin/python" ]]; then PYTHON="$cd_root/.venv/bin/python"; else PYTHON=python3; fi
fi
nproc="${NPROC_PER_NODE:-}"
if [[ "$1" == "--nproc_per_node" || "$1" == "--nproc-per-node" ]]; then nproc="$2"; shift 2; fi
if [[ "$1" == --nproc_per_node=* || "$1" == --nproc-per-node=* ]]; then nproc="${1#*=}"; shift; fi
ngpu=$("$PYTHON" -c "import torch; print(torch.cuda.device_count() if torch.cuda.is_available() else 0)")
if [[ -z "$nproc" ]]; then
  nproc=$(( ngpu > 0 ? ngpu : 2 ))
fi
if [[ "$ngpu" -eq 0 && -z "${TRITON_DIST_BACKEND:-}" ]]; then
  export TRITON_DIST_BACKEND=sim
fi
if [[ "${TRITON_DIST_BACKEND:-}" == "sim" ]]; then
  # Kernels are interpreted on the simulator; set before the script imports triton, so that every @triton.jit
  # function (Triton's standard library included) is an interpreted one.
  export TRITON_INTERPRET=1
fi
if [[ "${NVSHMEM_DISABLE_NVLS:-1}" != "1" ]]; then
  echo "launch.sh: refusing NVSHMEM_DISABLE_NVLS=${NVSHMEM_DISABLE_NVLS}: this wrapper never enables NVLink multicast" >&2
  exit 2
fi
export NVSHMEM_DISABLE_NVLS=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
export PYTHONUNBUFFERED=1
exec "$PYTHON" -m torch.distributed.run \
  --nnodes "${NNODES:-1}" --node_rank "${NODE_RANK:-0}" \
  --master_addr "${MASTER_ADDR:-127.0.0.1}" --master_port "${MASTER_PORT:-29500}" \
  --nproc_per_node "$nproc" "$@"
