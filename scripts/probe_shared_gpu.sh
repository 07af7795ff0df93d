#!/usr/bin/env bash
# Facts about ranks sharing a GPU under CUDA MPS on this machine, for the co-residency rule (runtime/device_info.py):
# the driver and MPS versions and what the MPS tools say about SM partitioning, -m triton_dist.tools.sm_probe at
# 2 and 4 ranks (which SMs each rank's full-SM blocks may use, alone and together), and whether the MPS control daemon
# has static SM partitioning (nvidia-cuda-mps-control -S; MPS 13.1 on). Run on 2026-12-06 under the former rule (an
# MPS percentage per rank: every rank on the same SMs); PROBE_PERCENT=P sets that percentage again to compare.
#   OUT=DIR scripts/probe_shared_gpu.sh          (writes DIR/probe/*; every step bounded by a timeout)
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/probe-out}; P=$OUT/probe; mkdir -p "$P"
if compgen -G ".whl/*.whl" > /dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl 2>&1 | tail -2
  export PYTHONPATH=/tmp/site:$PWD/python:$PWD/test/python
fi
export TRITON_CACHE_DIR=${TRITON_CACHE_DIR:-/tmp/tcache} NVSHMEM_DISABLE_NVLS=1 NCCL_NVLS_ENABLE=0 \
  TORCH_SYMM_MEM_DISABLE_MULTICAST=1 PYTHONUNBUFFERED=1 OMP_NUM_THREADS=1 TRITON_DIST_PG_TIMEOUT_S=60
{ nvidia-smi; echo "== mps -v"; nvidia-cuda-mps-control -v; echo "== mps --help"; timeout 5 nvidia-cuda-mps-control --help
  echo "== man"; man nvidia-cuda-mps-control 2>&1 | col -b | grep -n -i -B3 -A15 "partition"; } > "$P/facts.txt" 2>&1
for np in 2 4; do
  echo "== probe $np ranks at $(date -u +%T)"
  ${PROBE_PERCENT:+env CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=$PROBE_PERCENT} timeout -k 5 ${PROBE_S:-90} scripts/launch.sh --ranks-per-gpu auto --nproc_per_node $np -m triton_dist.tools.sm_probe \
    --out "$P/np$np" > "$P/probe-np$np.log" 2>&1; echo "exit $?"; grep "SUMMARY\|Error\|error" "$P/probe-np$np.log" | head -5
done
echo "== static partitioning daemon at $(date -u +%T)"
(
  export CUDA_MPS_PIPE_DIRECTORY=$(mktemp -d /tmp/sp-pipe.XXXX) CUDA_MPS_LOG_DIRECTORY=$(mktemp -d /tmp/sp-log.XXXX)
  timeout 20 nvidia-cuda-mps-control -S -d; echo "start rc=$?"; sleep 1
  for c in help "sm_partition" "lspart" "get_default_active_thread_percentage"; do
    echo "-- $c"; echo "$c" | timeout 10 nvidia-cuda-mps-control 2>&1 | head -40
  done
  echo quit | timeout 10 nvidia-cuda-mps-control; sleep 1
  echo "-- control.log"; cat "$CUDA_MPS_LOG_DIRECTORY"/control.log 2>&1 | tail -30
) > "$P/static.txt" 2>&1
tail -5 "$P/static.txt"
( cd "$OUT" && tar czf probe.tgz probe && rm -rf probe )
