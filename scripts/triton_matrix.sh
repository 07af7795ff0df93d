#!/usr/bin/env bash
# The Triton matrix: the matrix subset of the CPU tier on every supported Triton other than the pinned one.
#   scripts/triton_matrix.sh [VERSION ...]     default: the versions in scripts/triton_matrix.txt
# For each version: a venv .venvs/triton-X.Y holding only that Triton; torch, numpy, pytest, lit, filecheck and the
# NVSHMEM wheel are shared from the main venv (scripts/setup.sh) through a .pth file, and triton_dist comes from the
# source tree (PYTHONPATH). Then, with that interpreter, two jobs:
#   lit     the whole lit suite in compile-only mode (TRITON_DIST_LIT_COMPILE_ONLY=1, test/lit/lit.cfg.py): every
#           RUN line -- every dl / language_extra / libshmem_device / library kernel compiled for cuda:90 (PTX and
#           cubin through ptxas, NVSHMEM linked in libshmem/all_functions.py) and hip:gfx942, expected compile errors
#           included -- with the IR checks (FileCheck) left to the pinned Triton's run, since codegen details differ
#           between releases
#   pytest  pytest --triton-matrix (the subset: test/python/conftest.py MATRIX_FILES, simulator runs at 2 ranks)
# MATRIX_LIT_PATHS / MATRIX_PYTEST_PATHS narrow lit / pytest to some files (a quick check of this script).
# Every version is installed first, one after another. Then the jobs of all versions share one pool of MATRIX_JOBS
# slots (default 2: one per core of the CI machine), longest first (every pytest job, then every lit job: on the CI
# machine pytest took 580-680 s, lit 250-470), so no core idles while one version's last job runs alone. Each job
# writes its own log under ${MATRIX_LOG_DIR:-build/triton-matrix} (<version>.<job>.log; installs in
# <version>.install.log); a status line per running job every ${MATRIX_STATUS_S:-60} s shows progress, every job ends
# with its time, and the log of a failed job is printed at the end. Exit status 1 when any job failed (or a version
# could not be installed).
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

# Install version $1 into its venv (if needed). Writes "install <seconds> <rc>" to $LOGS/<v>.steps.
install_version() {
  local v=$1 mm=${1%.*} log=$LOGS/$1.install.log steps=$LOGS/$1.steps
  local venv=$ROOT/.venvs/triton-$mm py=$ROOT/.venvs/triton-$mm/bin/python t=$SECONDS rc
  : > "$log"; : > "$steps"
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
  return $rc
}

# One job ("<version> lit" or "<version> pytest") of an installed version, into $LOGS/<v>.<job>.log; appends
# "<job> <seconds> <rc>" to $LOGS/<v>.steps.
run_job() {
  local v=$1 job=$2 mm=${1%.*} log=$LOGS/$1.$2.log t=$SECONDS rc
  local py=$ROOT/.venvs/triton-$mm/bin/python
  local env=(env PATH="$(dirname "$py"):$(dirname "$MAIN_PY"):$PATH" PYTHONPATH="$ROOT/python" TRITON_DIST_LIT_COMPILE_ONLY=1
             TRITON_CACHE_DIR="$ROOT/build/triton-matrix/cache-$v" TRITON_DIST_CACHE_DIR="$ROOT/build/triton-matrix/cache-$v/triton_dist")
  if [[ $job == lit ]]; then
    echo "== lit (triton $v) ==" > "$log"
    "${env[@]}" "$py" -c "import sys, lit.main; sys.argv[0] = 'lit'; lit.main.main()" -v ${MATRIX_LIT_PATHS:-test/lit} >> "$log" 2>&1
  else
    echo "== pytest --triton-matrix (triton $v) ==" > "$log"
    "${env[@]}" "$py" -m pytest ${MATRIX_PYTEST_PATHS:-test/python} --triton-matrix -p no:cacheprovider -o console_output_style=count \
      --durations=5 >> "$log" 2>&1
  fi
  rc=$?
  echo "$job $((SECONDS - t)) $rc" >> "$LOGS/$v.steps"
  return $rc
}

status_line() {  # progress of running job "$1" ("<version> <job>"): its time so far, the latest lit / pytest count
  local v=${1% *} job=${1#* } last
  last=$(tail -c 4000 "$LOGS/$v.$job.log" 2>/dev/null | grep -oE '\([0-9]+ of [0-9]+\)|\[ *[0-9]+/[0-9]+\]' | tail -n 1)
  echo "   triton $v $job: running $((SECONDS - started_at[$1])) s${last:+, now at $last}"
}

echo "== Triton matrix: ${versions[*]} (installs first, then $jobs_max jobs at a time; logs in $LOGS) =="
start=$SECONDS
failed=()
pending_pytest=(); pending_lit=()
for v in "${versions[@]}"; do
  if install_version "$v"; then
    echo "-- triton $v: installed ($(awk '$1 == "install" {print $2}' "$LOGS/$v.steps") s)"
    pending_pytest+=("$v pytest"); pending_lit+=("$v lit")
  else
    echo "-- triton $v: install FAILED"; failed+=("$v install")
  fi
done
pending=("${pending_pytest[@]}" "${pending_lit[@]}")  # longest first
declare -A pid_of started_at
running=()
next_status=$((SECONDS + ${MATRIX_STATUS_S:-60}))
while [[ ${#pending[@]} -gt 0 || ${#running[@]} -gt 0 ]]; do
  while [[ ${#pending[@]} -gt 0 && ${#running[@]} -lt $jobs_max ]]; do
    j=${pending[0]}; pending=("${pending[@]:1}")
    run_job $j & pid_of[$j]=$!; started_at[$j]=$SECONDS
    running+=("$j")
    echo "-- triton $j: started"
  done
  sleep 2
  still=()
  for j in "${running[@]}"; do
    if kill -0 "${pid_of[$j]}" 2>/dev/null; then still+=("$j"); continue; fi
    wait "${pid_of[$j]}"; rc=$?
    took=$((SECONDS - started_at[$j]))
    if [[ $rc -eq 0 ]]; then echo "-- triton $j: passed ($took s)"; else echo "-- triton $j: FAILED ($took s)"; failed+=("$j"); fi
  done
  running=("${still[@]}")
  if [[ $SECONDS -ge $next_status && ${#running[@]} -gt 0 ]]; then
    echo "-- $((SECONDS - start)) s:"
    for j in "${running[@]}"; do status_line "$j"; done
    next_status=$((SECONDS + ${MATRIX_STATUS_S:-60}))
  fi
done
for j in "${failed[@]}"; do
  log=$LOGS/${j% *}.${j#* }.log
  echo "==== triton $j: log ($log), last 150 lines ===="
  tail -n 150 "$log"
done
for v in "${versions[@]}"; do
  grep -E '^[0-9]+ (passed|failed)|(passed|failed|error).* in [0-9.]+s' "$LOGS/$v.pytest.log" 2>/dev/null | tail -n 1 \
    | sed "s/^/   triton $v pytest: /"
  grep -E '^ *(Passed|Failed|Unsupported|Expectedly Failed) *:' "$LOGS/$v.lit.log" 2>/dev/null | sed "s/^ */   triton $v lit: /"
  echo "   triton $v: $(awk '{printf "%s %ss%s; ", $1, $2, ($3 == 0 ? "" : " FAILED")}' "$LOGS/$v.steps" 2>/dev/null)"
done
echo "-- Triton matrix: $((SECONDS - start)) s, ${#failed[@]} failed${failed[*]:+: ${failed[*]}}"
[[ ${#failed[@]} -eq 0 ]]
