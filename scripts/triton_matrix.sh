#!/usr/bin/env bash
# The Triton matrix: the matrix subset of the CPU tier on every supported Triton other than the pinned one.
#   scripts/triton_matrix.sh [VERSION ...]     default: the versions in scripts/triton_matrix.txt
# For each version: a venv .venvs/triton-X.Y holding only that Triton; torch, numpy, pytest, lit, filecheck and the
# NVSHMEM wheel are shared from the main venv (scripts/setup.sh) through a .pth file, and triton_dist comes from the
# source tree (PYTHONPATH). Then, with that interpreter:
#   lit     the whole lit suite in compile-only mode (TRITON_DIST_LIT_COMPILE_ONLY=1, test/lit/lit.cfg.py): every
#           RUN line -- every dl / language_extra / libshmem_device / library kernel compiled for cuda:90 (PTX and
#           cubin through ptxas, NVSHMEM linked in libshmem/all_functions.py) and hip:gfx942, expected compile errors
#           included -- with the IR checks (FileCheck) left to the pinned Triton's run, since codegen details differ
#           between releases
#   pytest  pytest --triton-matrix (the subset: test/python/conftest.py MATRIX_FILES, simulator runs at 2 ranks)
# MATRIX_LIT_PATHS / MATRIX_PYTEST_PATHS narrow lit / pytest to some files (a quick check of this script).
# Versions run MATRIX_JOBS at a time (default 2: one per core of the CI machine), each into its own log under
# ${MATRIX_LOG_DIR:-build/triton-matrix}; a status line per running version every ${MATRIX_STATUS_S:-60} s shows
# progress, every step ends with its time, and the log of a failed version is printed at the end. Exit status 1
# when any version failed (or could not be installed).
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
MAIN_PY=${MAIN_PY:-$(EXTRAS=test scripts/setup.sh)} || { echo "setup failed" >&2; exit 1; }
MAIN_SITE=$("$MAIN_PY" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
LOGS=${MATRIX_LOG_DIR:-build/triton-matrix}
mkdir -p "$LOGS" .venvs
if [[ $# -gt 0 ]]; then versions=("$@"); else mapfile -t versions < <(grep -v '^\s*#' scripts/triton_matrix.txt | awk 'NF{print $1}'); fi
jobs_max=${MATRIX_JOBS:-2}
export PYTHONUNBUFFERED=1

# One version: install (if needed), lit, pytest. Writes "<step> <seconds> <rc>" lines to $LOGS/<v>.steps.
run_version() {
  local v=$1 mm=${1%.*} log=$LOGS/$1.log steps=$LOGS/$1.steps
  local venv=$ROOT/.venvs/triton-$mm py=$ROOT/.venvs/triton-$mm/bin/python t rc
  : > "$log"; : > "$steps"
  t=$SECONDS
  {
    if ! "$py" -c "import triton, sys; sys.exit(triton.__version__ != '$v')" 2>/dev/null; then
      rm -rf "$venv" && "$MAIN_PY" -m venv --without-pip "$venv" \
        && "$MAIN_PY" -m pip --python "$py" install -q --no-deps "triton==$v"
    fi
  } >> "$log" 2>&1
  rc=$?
  # shared packages come after the venv's own site-packages: its triton wins over the main venv's
  echo "$MAIN_SITE" > "$("$py" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")/triton_dist_shared_main.pth" 2>> "$log" \
    || rc=1
  if [[ $rc -eq 0 ]]; then
    "$py" -c "import triton; assert triton.__version__ == '$v', triton.__version__" >> "$log" 2>&1 || rc=1
  fi
  echo "install $((SECONDS - t)) $rc" >> "$steps"
  [[ $rc -eq 0 ]] || return 1
  local env=(env PATH="$(dirname "$py"):$(dirname "$MAIN_PY"):$PATH" PYTHONPATH="$ROOT/python" TRITON_DIST_LIT_COMPILE_ONLY=1
             TRITON_CACHE_DIR="$ROOT/build/triton-matrix/cache-$v" TRITON_DIST_CACHE_DIR="$ROOT/build/triton-matrix/cache-$v/triton_dist")
  t=$SECONDS
  echo "== lit (triton $v) ==" >> "$log"
  "${env[@]}" "$py" -c "import sys, lit.main; sys.argv[0] = 'lit'; lit.main.main()" -v ${MATRIX_LIT_PATHS:-test/lit} >> "$log" 2>&1
  rc=$?
  echo "lit $((SECONDS - t)) $rc" >> "$steps"
  t=$SECONDS
  echo "== pytest --triton-matrix (triton $v) ==" >> "$log"
  "${env[@]}" "$py" -m pytest ${MATRIX_PYTEST_PATHS:-test/python} --triton-matrix -p no:cacheprovider -o console_output_style=count \
    --durations=5 >> "$log" 2>&1
  local prc=$?
  echo "pytest $((SECONDS - t)) $prc" >> "$steps"
  [[ $rc -eq 0 && $prc -eq 0 ]]
}

status_line() {  # progress of version $1: its finished steps and the latest lit / pytest count in its log
  local v=$1 last
  last=$(tail -c 4000 "$LOGS/$v.log" 2>/dev/null | grep -oE '\([0-9]+ of [0-9]+\)|\[ *[0-9]+/[0-9]+\]' | tail -n 1)
  echo "   triton $v: $(awk '{printf "%s %ss%s; ", $1, $2, ($3 == 0 ? "" : " FAILED")}' "$LOGS/$v.steps" 2>/dev/null)${last:+now at $last}"
}

echo "== Triton matrix: ${versions[*]} ($jobs_max at a time; logs in $LOGS) =="
start=$SECONDS
declare -A pid_of
pending=("${versions[@]}")
running=()
failed=()
next_status=$((SECONDS + ${MATRIX_STATUS_S:-60}))
while [[ ${#pending[@]} -gt 0 || ${#running[@]} -gt 0 ]]; do
  while [[ ${#pending[@]} -gt 0 && ${#running[@]} -lt $jobs_max ]]; do
    v=${pending[0]}; pending=("${pending[@]:1}")
    run_version "$v" & pid_of[$v]=$!
    running+=("$v")
    echo "-- triton $v: started"
  done
  sleep 2
  still=()
  for v in "${running[@]}"; do
    if kill -0 "${pid_of[$v]}" 2>/dev/null; then still+=("$v"); continue; fi
    wait "${pid_of[$v]}"; rc=$?
    if [[ $rc -eq 0 ]]; then echo "-- triton $v: passed"; else echo "-- triton $v: FAILED"; failed+=("$v"); fi
    status_line "$v"
  done
  running=("${still[@]}")
  if [[ $SECONDS -ge $next_status && ${#running[@]} -gt 0 ]]; then
    echo "-- $((SECONDS - start)) s:"
    for v in "${running[@]}"; do status_line "$v"; done
    next_status=$((SECONDS + ${MATRIX_STATUS_S:-60}))
  fi
done
for v in "${failed[@]}"; do
  echo "==== triton $v: log ($LOGS/$v.log), last 150 lines ===="
  tail -n 150 "$LOGS/$v.log"
done
for v in "${versions[@]}"; do
  grep -E '^[0-9]+ (passed|failed)|(passed|failed|error).* in [0-9.]+s' "$LOGS/$v.log" | tail -n 1 | sed "s/^/   triton $v pytest: /"
  grep -E '^ *(Passed|Failed|Unsupported|Expectedly Failed) *:' "$LOGS/$v.log" | sed "s/^ */   triton $v lit: /"
done
echo "-- Triton matrix: $((SECONDS - start)) s, ${#failed[@]} of ${#versions[@]} versions failed${failed[*]:+: ${failed[*]}}"
[[ ${#failed[@]} -eq 0 ]]
