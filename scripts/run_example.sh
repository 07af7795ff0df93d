#!/usr/bin/env bash
# The main job on a fresh machine: sets up ./.venv (scripts/setup.sh) and runs examples/allgather_demo.py under
# torchrun — on every visible GPU, or on 4 CPU-simulator ranks where there is no GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=$(scripts/setup.sh)
ngpu=$("$PY" -c "import torch; print(torch.cuda.device_count() if torch.cuda.is_available() else 0)")
if [[ "$ngpu" -ge 1 ]]; then
  nproc=${NPROC:-$ngpu}
else
  nproc=${NPROC:-4}
  export TRITON_DIST_BACKEND=sim
fi
PYTHON="$PY" exec scripts/launch.sh --nproc_per_node "$nproc" examples/allgather_demo.py "$@"
