#!/usr/bin/env bash
# Every GPU tier and the quick benchmarks in a few planned passes, each step recorded as evidence JSON + log
# (benchmarks/record_run.py) under $OUT (default benchmarks/results/gpu-<date>).
#   scripts/gpu_suite.sh 1    tests: runtime, language, language_extra, tools, main example
#   scripts/gpu_suite.sh 2    tests: libshmem, collectives, overlap
#   scripts/gpu_suite.sh 3    benchmarks (quick): collectives vs NCCL, shmem put/get, overlap vs torch
# Each part fits one device call: SUITE_BUDGET_S (default 560) bounds the whole part; a step gets
# min(its own timeout, what is left), and steps that no longer fit are recorded as skipped, so the JSON of every
# step that ran comes back even when something hangs. On the lent GPU machine, first install the carried wheels
# (../shared/gpu/README.md). Never enables multicast.
set -uo pipefail
cd "$(dirname "$0")/.."
part=${1:-1}
OUT=${OUT:-benchmarks/results/gpu-$(date -u +%Y%m%d-%H%M)}
mkdir -p "$OUT"
export NVSHMEM_DISABLE_NVLS=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 PYTHONUNBUFFERED=1
export PYTHONPATH="$PWD/python:$PWD/test/python${PYTHONPATH:+:$PYTHONPATH}"
export TRITON_DIST_RESULTS_DIR="$OUT"
NP=${NPROC:-2}
PY=${PYTHON:-python3}
SUITE_DEADLINE=$(( $(date +%s) + ${SUITE_BUDGET_S:-560} ))
rec() {  # rec NAME TIMEOUT_S CMD...  (TIMEOUT_S is cut to what is left of SUITE_BUDGET_S)
  local name=$1 t=$2; shift 2
  local left=$(( SUITE_DEADLINE - $(date +%s) - 5 ))
  if (( left < 30 )); then
    echo "{\"name\": \"$name\", \"skipped\": \"suite budget spent before this step\"}" > "$OUT/$name.json"
    echo "$name: skipped (suite budget spent)"; return
  fi
  (( t > left )) && t=$left
  "$PY" benchmarks/record_run.py --name "$name" --out "$OUT" --timeout "$t" -- "$@" > /dev/null
  echo "$name: exit $? in <= ${t}s ($(grep -ho '[0-9]* passed[^"]*' "$OUT/$name.log" | tail -1))"
}
tier() {  # tier NAME TIMEOUT_S TESTFILE
  rec "$1" "$2" torchrun --nproc_per_node "$NP" -m pytest -rA -p no:cacheprovider -m gpu --collect-gpu "$3"
}
case $part in
  1)
    tier gpu_runtime 100 test/python/gpu/test_gpu_runtime.py
    tier gpu_language 180 test/python/gpu/test_gpu_language.py
    tier gpu_language_extra 120 test/python/gpu/test_gpu_language_extra.py
    tier gpu_tools 100 test/python/gpu/test_gpu_tools.py
    rec gpu_example 60 torchrun --nproc_per_node "$NP" examples/allgather_demo.py ;;
  2)
    tier gpu_libshmem 200 test/python/gpu/test_gpu_libshmem.py
    tier gpu_collectives 180 test/python/gpu/test_gpu_collectives.py
    tier gpu_overlap 180 test/python/gpu/test_gpu_overlap.py ;;
  3)
    rec bench_collectives 200 torchrun --nproc_per_node "$NP" benchmarks/bench_collectives.py --quick
    rec bench_shmem 120 torchrun --nproc_per_node "$NP" benchmarks/bench_shmem.py --quick
    rec bench_overlap 230 torchrun --nproc_per_node "$NP" benchmarks/bench_overlap.py --quick ;;
  *) echo "usage: $0 1|2|3" >&2; exit 2 ;;
esac
ls -la "$OUT"
