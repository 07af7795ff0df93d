#!/usr/bin/env bash
# Creates ./.venv (if missing) and installs triton-dist into it with the pinned CPU-machine stack:
# torch==2.13.0 (the CPU build on this project's machines), triton==3.6.0 (the GPU machine's version).
#   EXTRAS=test  scripts/setup.sh     # also installs pytest, lit, filecheck, ruff
# Set TRITON_DIST_PYTHON to use an existing interpreter instead (e.g. on a GPU host whose torch you keep);
# then nothing is installed and that interpreter must already have torch and triton.
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ -n "${TRITON_DIST_PYTHON:-}" ]]; then
  echo "$TRITON_DIST_PYTHON"
  exit 0
fi
VENV=${VENV:-.venv}
[[ "$VENV" = /* ]] || VENV="$PWD/$VENV"   # absolute: callers put its bin/ on PATH and change directories
if [[ ! -x "$VENV/bin/python" ]]; then
  python3 -m venv "$VENV" >&2
fi
PY="$VENV/bin/python"
"$PY" -m pip install -q --upgrade pip >&2 || true
"$PY" -c "import torch" 2>/dev/null || "$PY" -m pip install -q "torch==${TORCH_VERSION:-2.13.0}" >&2
"$PY" -c "import triton; assert triton.__version__.startswith('${TRITON_VERSION:-3.6.0}')" 2>/dev/null \
  || "$PY" -m pip install -q "triton==${TRITON_VERSION:-3.6.0}" >&2
spec="."
[[ -n "${EXTRAS:-}" ]] && spec=".[${EXTRAS}]"
"$PY" -m pip install -q "$spec" >&2
echo "$PY"
