#!/usr/bin/env bash
# Sets up (scripts/setup.sh, with the test extra) and runs the test tiers.
#   scripts/test.sh            CPU tier: ruff (lint, the pinned version of the test extra) + lit tests (compile for
#                              cuda:90 / hip:gfx942, FileCheck) + pytest (unit, compile, simulator executions at 2
#                              and 4 ranks). This is what CI runs; any failing step fails the run.
#                              Then the Triton matrix (scripts/triton_matrix.sh): lit + the matrix subset of pytest
#                              (simulator at 2 ranks) on every other supported Triton (scripts/triton_matrix.txt),
#                              each in its own venv sharing torch and the test tools; TRITON_MATRIX=0 skips it.
#   scripts/test.sh --gpu      GPU tier: pytest -m gpu under torchrun (scripts/launch.sh), NPROC ranks (default: the
#                              visible GPUs, at least 2), on the Triton installed there (the GPU machine has 3.6.0
#                              only and no network: no matrix). With fewer GPUs than ranks the ranks share GPUs
#                              (--ranks-per-gpu auto: CUDA MPS, each rank 1/N of the SMs; docs/runtime.md, "Develop
#                              on one GPU"): NPROC=2 and NPROC=4 on one GPU are the one-GPU machine's GPU tier.
# Extra arguments go to pytest. --help (first) prints this text and runs nothing.
# The CPU tier's pytest runs in TEST_WORKERS processes (pytest-xdist, default 2: one per core of the CI machine;
# TEST_WORKERS=0 runs it in this process), tests handed out one at a time as workers free up (--dist worksteal): the
# slowest tests are single 4-rank simulator runs of 80-160 s, which a per-file split would leave on one worker.
# Progress: lit prints each test as it finishes with its count ("PASS: triton-dist :: x.py (12 of 25)"), pytest a
# running count ("[ 120/519]"), and every step ends with its time. On the 2-core CI machine (2026-12-01, before the
# workers and the matrix's job pool) the whole run took 68 min: pinned pytest 877 s, the matrix about 33 min.
set -uo pipefail
if [[ "${1:-}" == "-h" || "${1:-}" == "--help" ]]; then
  sed -n '2,/^set -uo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0   # (not passed on to pytest: it would set up first)
fi
cd "$(dirname "$0")/.."
mode=cpu
if [[ "${1:-}" == "--gpu" ]]; then mode=gpu; shift; fi
PY=$(EXTRAS=test scripts/setup.sh) || { echo "setup failed" >&2; exit 1; }
BIN=$(dirname "$PY")
export PATH="$BIN:$PATH"
export PYTHONUNBUFFERED=1

if [[ $mode == gpu ]]; then
  nproc=${NPROC:-$("$PY" -c "import torch; print(max(2, torch.cuda.device_count()))")}
  exec env PYTHON="$PY" scripts/launch.sh --nproc_per_node "$nproc" --ranks-per-gpu auto -m pytest test/python -m gpu \
    --collect-gpu -p no:cacheprovider "$@"
fi

status=0
step_start=$SECONDS
took() { echo "-- $1: $((SECONDS - step_start)) s"; step_start=$SECONDS; }
echo "== ruff (lint: ruff check, rules in pyproject.toml) =="
"$BIN/ruff" check --no-cache . || status=1
took ruff
echo "== lit (compile for cuda:90 and hip:gfx942, FileCheck) =="
"$BIN/lit" -v test/lit || status=1
took lit
echo "== pytest (CPU tier) =="
workers=${TEST_WORKERS:-2}
xdist=()
[[ $workers -gt 0 ]] && xdist=(-n "$workers" --dist worksteal)
"$PY" -m pytest test/python -p no:cacheprovider -o console_output_style=count --durations=5 "${xdist[@]}" "$@"
rc=$?
took pytest
# 5 = no tests collected (e.g. a -k filter that matched nothing): not a failure of the suite.
if [[ $rc -ne 0 && $rc -ne 5 ]]; then status=1; fi
if [[ "${TRITON_MATRIX:-1}" != 0 ]]; then
  echo "== Triton matrix (lit + pytest --triton-matrix on the other supported Tritons) =="
  MAIN_PY="$PY" scripts/triton_matrix.sh || status=1
  took "triton matrix"
fi
exit $status
