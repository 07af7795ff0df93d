#!/usr/bin/env bash
# Every GPU tier and the quick benchmarks in one planned pass, each recorded as evidence JSON + log
# (benchmarks/record_run.py) under $OUT (default benchmarks/results/gpu-<date>).
#   scripts/gpu_suite.sh 1    tests: runtime, language, language_extra, libshmem, tools, main example (~6 min)
#   scripts/gpu_suite.sh 2    collectives tests + benchmarks (collectives, shmem, overlap) (~9 min)
# On the lent GPU machine, first: install the carried wheels (../shared/gpu/README.md). Never enables multicast.
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
rec() {  # rec NAME TIMEOUT_S CMD...
  local name=$1 t=$2; shift 2
  "$PY" benchmarks/record_run.py --name "$name" --out "$OUT" --timeout "$t" -- "$@" > /dev/null
  echo "$name: exit $? ($(grep -ho '[0-9]* passed[^"]*' "$OUT/$name.log" | tail -1))"
}
tier() {  # tier NAME TIMEOUT_S TESTFILE
  rec "$1" "$2" torchrun --nproc_per_node "$NP" -m pytest -rA -p no:cacheprovider -m gpu --collect-gpu "$3"
}
if [[ $part == 1 ]]; then
  tier gpu_runtime 120 test/python/gpu/test_gpu_runtime.py
  tier gpu_language 240 test/python/gpu/test_gpu_language.py
  tier gpu_language_extra 150 test/python/gpu/test_gpu_language_extra.py
  tier gpu_libshmem 240 test/python/gpu/test_gpu_libshmem.py
  tier gpu_tools 150 test/python/gpu/test_gpu_tools.py
  rec gpu_example 90 torchrun --nproc_per_node "$NP" examples/allgather_demo.py
else
  tier gpu_collectives 240 test/python/gpu/test_gpu_collectives.py
  tier gpu_overlap 240 test/python/gpu/test_gpu_overlap.py
  rec bench_collectives 200 torchrun --nproc_per_node "$NP" benchmarks/bench_collectives.py --quick
  rec bench_shmem 120 torchrun --nproc_per_node "$NP" benchmarks/bench_shmem.py --quick
  rec bench_overlap 240 torchrun --nproc_per_node "$NP" benchmarks/bench_overlap.py --quick
fi
ls -la "$OUT"
