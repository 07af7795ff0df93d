#!/usr/bin/env bash
# One device call of the lent GPU machine (../shared/gpu/README.md): install the carried wheels (.whl/, fetched on the
# CPU machine by ../shared/gpu/fetch-wheels.sh and named in the call's carry), keep Triton's cache at /tmp/tcache (it
# survives back-to-back calls while the machine stays warm), run scripts/gpu_suite.sh parts, and leave everything in
# ONE archive $OUT/run.tgz (the device tool brings back at most 8 files).
#   scripts/gpu_call.sh "NPROC:PART:BUDGET_S" ...      e.g.  TOTAL_S=560 scripts/gpu_call.sh "2:moe-tp:260" "4:moe-tp:260"
# Each spec runs `NPROC=N OUT=$OUT/run/PART-npN SUITE_BUDGET_S=B scripts/gpu_suite.sh PART`, its budget cut to what is
# left of TOTAL_S (default 560: a call is at most 600 s); a spec with less than 40 s left is skipped. Start the command
# with TRITON_DIST_GIT_COMMIT=<this checkout's HEAD>: the machine's copy of the tree may carry stale git metadata
# (2026-12-06: records said 5534f94 for a run of 8a379e7; benchmarks/provenance.py's tree fingerprint was right).
# PREBUILT_CACHE="TGZ ..." unpacks caches built here by scripts/prebuild_device_cache.sh (carry them) first.
set -uo pipefail
cd "$(dirname "$0")/.."
[[ $# -eq 0 || $1 == -h || $1 == --help ]] && { sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//'; exit 0; }
T0=$(date +%s); TOTAL_S=${TOTAL_S:-560}; OUT=${OUT:-/tmp/gpu-call-out}
if compgen -G ".whl/*.whl" > /dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl 2>&1 | tail -2
  export PYTHONPATH=/tmp/site:$PWD/python
fi
export TRITON_CACHE_DIR=${TRITON_CACHE_DIR:-/tmp/tcache}
mkdir -p "$TRITON_CACHE_DIR"
# PREBUILT_CACHE="TGZ ...": caches built on the CPU machine (scripts/prebuild_device_cache.sh; carry them), unpacked
# into the cache first. One tarball per call's parts: all the recordings' kernels together outgrow the device
# carry's 64 MiB (2026-12-06: 72 MB compressed for 1,272 kernels, ~240 KB of cubin each with NVSHMEM linked in)
for tgz in ${PREBUILT_CACHE:-}; do
  tar xzf "$tgz" -C "$TRITON_CACHE_DIR" && echo "prebuilt cache $tgz unpacked" || echo "prebuilt cache $tgz: tar failed"
done
echo "cache entries at start: $(ls "$TRITON_CACHE_DIR" | wc -l); $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null)"
R=$OUT/run
mkdir -p "$R"
touch "$R/.start"
for spec in "$@"; do
  IFS=: read -r np part budget <<< "$spec"
  left=$(( TOTAL_S - ($(date +%s) - T0) - 15 ))
  (( budget > left )) && budget=$left
  if (( budget < 40 )); then echo "== $spec skipped (call budget)"; continue; fi
  echo "== $spec (budget $budget s) at $(date -u +%T)"
  NPROC=$np OUT=$R/$part-np$np SUITE_BUDGET_S=$budget scripts/gpu_suite.sh "$part" 2>&1 | grep -v '^total\|^d\|^-'
done
echo "cache entries at end: $(ls "$TRITON_CACHE_DIR" | wc -l)"
# the call's new cache entries in the order they were written (epoch seconds, key, file): when each kernel finished
# compiling, i.e. where a cold step's time went
find "$TRITON_CACHE_DIR" -mindepth 2 -maxdepth 2 -name '*.json' -newer "$R/.start" -printf '%T@ %h %f\n' 2>/dev/null \
  | sed "s|$TRITON_CACHE_DIR/||" | sort -n > "$R/cache-new.txt"
( cd "$OUT" && tar czf run.tgz run && rm -rf run )
ls -la "$OUT"
