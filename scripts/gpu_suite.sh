#!/usr/bin/env bash
# Every GPU tier and the quick benchmarks in a few planned passes, each step recorded as evidence JSON + log
# (benchmarks/record_run.py) under $OUT (default benchmarks/results/gpu-<date>).
#   scripts/gpu_suite.sh 1    tests: runtime, shared-GPU mode, language, language_extra, tools, plain jit + SIMT
#                             tiles, main example
#   scripts/gpu_suite.sh 2    tests: libshmem, collectives (10,000-call stress)
#   scripts/gpu_suite.sh 4    tests: GEMM, overlap (part 2 until 2026-12-04; split so that each fits a device call
#                             with ranks sharing one GPU, where compiling and the host-copy references take longer)
#   scripts/gpu_suite.sh 3    benchmarks (quick): collectives vs NCCL, shmem put/get, overlap vs torch
#   scripts/gpu_suite.sh overlap-tune   overlap tier, then bench_overlap --sweep (tilings + dispatch table) + profiles
#   scripts/gpu_suite.sh overlap-bench  bench_overlap with the table in the tree (no sweep) + TPMLP end to end
#   scripts/gpu_suite.sh overlap-trace  overlap tier, then GPU timelines of the host-composed methods (bench_overlap --probe trace)
#   scripts/gpu_suite.sh overlap-round  overlap tier, sweep + table, final bench with that table, traces, GEMM forms
#   scripts/gpu_suite.sh overlap-ag     the AG+GEMM tests of the overlap tier, sweep + table, final bench
#   scripts/gpu_suite.sh overlap-ar     the GEMM+AR tests of the overlap tier, its sweep + table, its final bench
#   scripts/gpu_suite.sh overlap-rs     the GEMM+RS tests of the overlap tier, its sweep + table (M >= 2048), final
#   scripts/gpu_suite.sh coll-host      bound-launch and collectives tests, host-path profile, small-size collectives
#   scripts/gpu_suite.sh coll-ll        collectives tests (the ll methods among them), small sizes of every op
#   scripts/gpu_suite.sh coll-verify    collectives and language tests, small sizes of every op (signalling changes)
#   scripts/gpu_suite.sh ll-knobs       ll block size / warps per program at small sizes (one bench run per setting)
#   scripts/gpu_suite.sh coll-sweep     collectives tests, full collectives sweep (bf16 + fp32) writing a dispatch
#                                       table into $OUT, pipelined-method knob runs, shmem launch-configuration sweep
#   scripts/gpu_suite.sh coll-final     full collectives run with the table in the tree, shmem bench, host profile
#   scripts/gpu_suite.sh coll-round     full sweep writing the table into the tree's copy here, then coll-final's steps
#   scripts/gpu_suite.sh rs-probe       the GEMM+RS tests, then bench_overlap.py --probe gemm-rs (PROBE_SHAPES: model:M,...)
#   scripts/gpu_suite.sh mega           the mega kernel's GPU tier (Qwen3 at TP=NPROC, batch 1 and 4), then bench_mega
#                                       at TP=NPROC (Qwen3-8B, batch 4, mixed contexts) and at TP=1 (batch 1, context
#                                       512, 64 teacher-forced steps, against torch and torch.compile)
#   scripts/gpu_suite.sh mega-b8        one GPU: bench_mega TP=1 at batch 8, mixed contexts up to 4K, with torch.compile
#   scripts/gpu_suite.sh mega-pf        one GPU: bench_mega TP=1 at the GEMV L2-prefetch budgets PF_BYTES
#   scripts/gpu_suite.sh mega-ab        one GPU: bench_mega TP=1, candidate builder options (MEGA_VARIANTS) as
#                                       --variant columns beside the default build (batch 1 with traces, batch 8)
#   scripts/gpu_suite.sh mega-ab-32b    one H200: the same batch-1 variants at Qwen3-32B
#   scripts/gpu_suite.sh gemm-quality   one GPU: bench_gemm (ours vs cuBLAS) at the overlapped GEMMs' M >= 2048 shapes
#   scripts/gpu_suite.sh moe            the MoE family's GPU tiers (one device; expert parallelism at NPROC ranks),
#                                       then bench_moe_ep (the EP layer vs all_to_all_single + torch)
#   scripts/gpu_suite.sh moe-tp         tensor-parallel MoE at NPROC ranks: its GPU tier, then bench_moe_tp at
#                                       Qwen3-30B-A3B (the TP layer vs the torch TP layer; at 1 rank also
#                                       torch.compile); MOE_TP_ARGS adds options (e.g. --models deepseek-v3)
#   scripts/gpu_suite.sh moe-bench      one GPU: bench_group_gemm at Qwen3-30B-A3B's expert shapes (vs
#                                       torch._grouped_mm and a per-expert matmul loop; the EP=1 layer vs torch and
#                                       torch.compile)
#   scripts/gpu_suite.sh moe-ds         one GPU: the same two benchmarks at DeepSeek-V3's expert shapes
#   scripts/gpu_suite.sh attention      the attention family's GPU tier at NPROC ranks (flash_decode, the merge,
#                                       flash_attention, sp_flash_decode, Ulysses' all-to-alls, sp_ag_attention),
#                                       then bench_attention: decode K/V bandwidth and prefill vs SDPA on one GPU,
#                                       sequence-parallel decode, Ulysses (vs all_to_all_single) and the
#                                       sequence-parallel prefill (sp_ag_attention vs all_gather + flash_attention
#                                       and SDPA flash) at NPROC ranks
#   scripts/gpu_suite.sh attention-sp   the attention GPU tier at NPROC ranks, then the multi-rank benchmarks only
#                                       (sp_flash_decode, Ulysses, sp_ag_attention): no one-GPU decode / prefill bench
#   scripts/gpu_suite.sh attention-tune one GPU: bench_attention decode at DECODE_LENS / DECODE_BATCHES (default
#                                       32768 / 1,8), page 16, with DECODE_VARIANTS as extra columns (bench_attention
#                                       --decode-variants: splits, tile, warps, stages, offsets, waves, merge step;
#                                       default: the tilings that fit 3-4 programs per SM with deeper K/V buffers,
#                                       docs/attention.md "Occupancy and the split rule")
#   scripts/gpu_suite.sh attention-trace one GPU: where a decode call's time goes, and the launch choices of
#                                       docs/attention.md "Occupancy and the split rule" against the default:
#                                       bench_attention --decode-trace (one profiled call per shape and launch:
#                                       Perfetto JSON, Gantt, timeline, summary in $OUT/decode-trace; the default and
#                                       TRACE_VARIANTS, default wide=1,merge_s=64,fused=1), then the timed A/B
#                                       (--only decode with DECODE_VARIANTS, default wide=1,merge_s=64,resident=3,
#                                       resident=3+merge_s=64,fused=1,splits=32), both at DECODE_LENS /
#                                       DECODE_BATCHES (default 32768 / 1,8), page 16
#   scripts/gpu_suite.sh shared-fullsm  ranks sharing a GPU, kernels of one block per SM (the TP-MoE and sp_ag kernels
#                                       hung at 2 ranks on one GPU under MPS percentages, 2026-12-06): the SM probe
#                                       (-m triton_dist.tools.sm_probe), the shared-GPU tier, the TP-MoE tier and
#                                       sp_ag's tests
#   scripts/gpu_suite.sh changed        the tiers the latest changes touch: overlap, an 8B AG/RS bench, plain jit +
#                                       SIMT tiles, language, libshmem
# Every part records its kernel compile requests into $OUT/compiles; PRECOMPILE_FROM="DIR ..." compiles earlier
# recordings into Triton's cache in parallel first (python -m triton_dist.tools.precompile, docs/runtime.md).
# Each part fits one device call: SUITE_BUDGET_S (default 560) bounds the whole part; a step gets
# min(its own timeout, what is left), and steps that no longer fit are recorded as skipped, so the JSON of every
# step that ran comes back even when something hangs. record_run ends every process of a step (torchrun's workers
# included) at its timeout, and fails a step whose processes outlive it (JSON: left_behind, exit_after_summary_s).
# Multi-rank steps start through scripts/launch.sh --ranks-per-gpu auto: with fewer GPUs than NPROC the ranks share
# GPUs (CUDA MPS, a private daemon per step, each rank 1/N of the SMs), so `NPROC=2 scripts/gpu_suite.sh 1` and
# `NPROC=4 scripts/gpu_suite.sh 1` run the tier at 2 and 4 ranks on one GPU; every step's record carries world_size,
# gpus and ranks_per_gpu (record_run reads launch.sh's "[launch]" line).
# The exit status is the number of steps that did not pass (0: all passed). On the lent GPU machine, first install the
# carried wheels (../shared/gpu/README.md). Never enables multicast.
set -uo pipefail
cd "$(dirname "$0")/.."
part=${1:-1}
PARTS="1|2|3|4|attention-sp|attention-tune|attention-trace|shared-fullsm|coll-host|coll-ll|coll-verify|ll-knobs|coll-sweep|coll-round|coll-final|overlap-tune|overlap-bench|\
overlap-trace|overlap-round|overlap-ag|overlap-ar|overlap-rs|rs-probe|mega|mega-b8|mega-pf|mega-ab|mega-ab-32b|gemm-quality|moe|moe-tp|moe-bench|moe-ds|attention|changed"
if [[ "$part" == "-h" || "$part" == "--help" ]]; then
  sed -n '2,/^set -uo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0
fi
if [[ "|$PARTS|" != *"|$part|"* ]]; then  # before anything is created (no empty results folder)
  echo "usage: $0 $PARTS" >&2; exit 2
fi
OUT=${OUT:-benchmarks/results/gpu-$(date -u +%Y%m%d-%H%M)}
mkdir -p "$OUT"
export NVSHMEM_DISABLE_NVLS=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 PYTHONUNBUFFERED=1
# A rank whose peer died waits in a collective until the process-group timeout: minutes here, not half an hour.
export TRITON_DIST_PG_TIMEOUT_S=${TRITON_DIST_PG_TIMEOUT_S:-150}
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}  # what torchrun sets anyway, minus its warning banner in every log
export PYTHONPATH="$PWD/python:$PWD/test/python${PYTHONPATH:+:$PYTHONPATH}"
export TRITON_DIST_RESULTS_DIR="$OUT"
# every kernel compile request of the part is recorded under $OUT/compiles (runtime/compile_record.py): a later run
# first compiles them all in parallel (PRECOMPILE_FROM below) instead of one after another inside each rank
export TRITON_DIST_COMPILE_RECORD=${TRITON_DIST_COMPILE_RECORD:-$(cd "$OUT" && pwd)/compiles}
NP=${NPROC:-2}
PY=${PYTHON:-python3}
export PYTHON="$PY"
# whether this suite's multi-rank steps share GPUs (fewer GPUs than NPROC): skipped steps' records say so too
SHARED=$("$PY" -c "import torch; n = torch.cuda.device_count(); print('true' if 0 < n < $NP else 'false')" \
  2>/dev/null || echo false)
SUITE_DEADLINE=$(( $(date +%s) + ${SUITE_BUDGET_S:-560} ))
rec() {  # rec NAME TIMEOUT_S CMD...  (TIMEOUT_S is cut to what is left of SUITE_BUDGET_S)
  local name=$1 t=$2; shift 2
  # 25 s of slack: record_run may take that long to end a step's processes after its timeout
  local left=$(( SUITE_DEADLINE - $(date +%s) - 25 ))
  if (( left < 30 )); then
    echo "{\"name\": \"$name\", \"skipped\": \"suite budget spent before this step\", \"shared_gpu\": $SHARED}" \
      > "$OUT/$name.json"
    echo "$name: skipped (suite budget spent)"; failed=$((failed + 1)); return
  fi
  (( t > left )) && t=$left
  local t0=$SECONDS rc cmd=("$@")
  # torchrun through the launcher: ranks share GPUs where there are fewer GPUs than ranks (see the header)
  [[ ${cmd[0]} == torchrun ]] && cmd=(scripts/launch.sh --ranks-per-gpu auto "${cmd[@]:1}")
  "$PY" benchmarks/record_run.py --name "$name" --out "$OUT" --timeout "$t" -- "${cmd[@]}" > /dev/null
  rc=$?
  (( rc != 0 )) && failed=$((failed + 1))
  echo "$name: exit $rc in $((SECONDS - t0)) s (limit ${t} s) ($(grep -ho '[0-9]* \(passed\|failed\|skipped\)[^"=]*' "$OUT/$name.log" | tail -1))"
}
failed=0
# PRECOMPILE_FROM="DIR ...": compile the requests earlier runs recorded (their $OUT/compiles) into Triton's cache,
# PRECOMPILE_JOBS processes at once (default: CPUs - 2), before the part's steps; a request that fails to compile
# here is compiled by the step itself, as without it (log: $OUT/precompile.log; not a step of the part).
# PRECOMPILE_WORLD=N: the recordings are of another world size: compile the kernels with a WORLD constexpr for N
# ranks (tools/precompile.py --world; a guess that saves most of a first run at a new rank count). An entry
# "N:DIR" of PRECOMPILE_FROM does that for DIR alone (its kernels without a WORLD constexpr are skipped), e.g.
# PRECOMPILE_FROM=".gpu/compiles-p4-np4 4:.gpu/compiles-p4-np2" for the 4-rank tests only a 2-rank run recorded.
# The way to a warm first run of a big part: the recordings are small to carry and the machine's cores compile them
# in parallel (a prebuilt cache of the same kernels, scripts/prebuild_device_cache.sh, outgrows the carry)
if [[ -n ${PRECOMPILE_FROM:-} ]]; then
  # coreutils nproc honours OMP_NUM_THREADS (set to 1 above for the ranks): ask without it
  cpus=$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc)
  jobs=${PRECOMPILE_JOBS:-$(( cpus > 3 ? cpus - 2 : 1 ))}
  precompile() {  # precompile WHAT ARGS...: one tools/precompile run, appended to the log, its last line reported
    local what=$1; shift
    TRITON_DIST_COMPILE_RECORD= "$PY" -m triton_dist.tools.precompile "$@" --jobs "$jobs" >> "$OUT/precompile.log" 2>&1
    echo "precompile$what: exit $? ($(tail -1 "$OUT/precompile.log"))"
  }
  plain=()
  : > "$OUT/precompile.log"
  for entry in $PRECOMPILE_FROM; do
    if [[ $entry =~ ^([0-9]+):(.+)$ ]]; then
      precompile " $entry" "${BASH_REMATCH[2]}" --world "${BASH_REMATCH[1]}"
    else
      plain+=("$entry")
    fi
  done
  (( ${#plain[@]} )) && precompile "" "${plain[@]}" ${PRECOMPILE_WORLD:+--world "$PRECOMPILE_WORLD"}
fi
eager_rules() {  # eager_rules TAG: the final run's eager winners into the table's eager overrides, copied to $OUT
  "$PY" benchmarks/bench_overlap.py --eager-rules-from "$OUT"/overlap-*-"$1".json && \
    cp python/triton_dist/ops/overlap_table.json "$OUT/" || failed=$((failed + 1))
}
tier() {  # tier NAME TIMEOUT_S TESTFILE [PYTEST ARGS...]
  # tiers run in bounded-wait mode (TIER_BOUNDED_WAIT_MS, default 120 s; 0: off): a wait that never completes ends
  # in an error naming the rank, program, address and value it waited for instead of a silent step timeout (two
  # fused kernels hung that way on 2026-12-06 and left nothing to read); benchmarks keep unbounded waits. Output is
  # uncaptured (-s: a kernel's device print reaches the log even when the rank dies before pytest's summary, as
  # both ranks did in NVSHMEM's teardown after a trap, 2026-12-06) and each failure is reported the moment it
  # happens (TRITON_DIST_REPORT_FAILURES_NOW, test/python/conftest.py; rank 0 also prints "[done] OUTCOME SECONDS
  # NODEID" per test). TIER_PYTEST_ARGS (word-split) go to every tier's pytest, e.g. "--deselect NODEID ..." to go on
  # where a cut run stopped (a recording pass; the evidence of a tier is one whole pass)
  TRITON_DIST_REPORT_FAILURES_NOW=1 TRITON_DIST_BOUNDED_WAIT=${TRITON_DIST_BOUNDED_WAIT:-${TIER_BOUNDED_WAIT_MS:-120000}} \
    rec "$1" "$2" torchrun --nproc_per_node "$NP" -m pytest -s -rA --durations=12 -p no:cacheprovider -m gpu --collect-gpu "${@:3}" \
    ${TIER_PYTEST_ARGS:-}
}
# mega-ab's candidates as bench_mega --variant arguments, into the array "variants" (MEGA_VARIANTS overrides the
# list; "all3" is the three candidates together): the early L2 prefetch of the GEMV after attention at 32 MiB, the split's loads ahead of its
# wait, the GEMV through the software pipeliner at 4 stages, all three
all3=gemv_early_prefetch_bytes=33554432,split_loads_ahead=true,gemv_stages=4
mega_variants() {
  variants=()
  local v
  for v in ${MEGA_VARIANTS:-early32m:gemv_early_prefetch_bytes=33554432 ahead:split_loads_ahead=true st4:gemv_stages=4 \
             all:$all3}; do
    variants+=(--variant "$v")
  done
}

case $part in
  1)
    tier gpu_runtime 100 test/python/gpu/test_gpu_runtime.py
    tier gpu_shared_gpu 150 test/python/gpu/test_gpu_shared_gpu.py
    tier gpu_language 180 test/python/gpu/test_gpu_language.py
    tier gpu_language_extra 120 test/python/gpu/test_gpu_language_extra.py
    tier gpu_tools 100 test/python/gpu/test_gpu_tools.py
    tier gpu_plain_jit 100 test/python/gpu/test_gpu_plain_jit.py test/python/gpu/test_gpu_simt_tiles.py
    rec gpu_example 60 torchrun --nproc_per_node "$NP" examples/allgather_demo.py ;;
  2)
    tier gpu_libshmem 240 test/python/gpu/test_gpu_libshmem.py test/python/gpu/test_gpu_libshmem_scope.py
    tier gpu_collectives 300 test/python/gpu/test_gpu_collectives.py ;;
  4)
    tier gpu_gemm 120 test/python/gpu/test_gpu_gemm.py
    tier gpu_overlap 420 test/python/gpu/test_gpu_overlap.py ;;
  3)
    rec bench_collectives 200 torchrun --nproc_per_node "$NP" benchmarks/bench_collectives.py --quick
    rec bench_shmem 120 torchrun --nproc_per_node "$NP" benchmarks/bench_shmem.py --quick
    rec bench_overlap 230 torchrun --nproc_per_node "$NP" benchmarks/bench_overlap.py --quick ;;
  overlap-tune)
    tier gpu_overlap 240 test/python/gpu/test_gpu_overlap.py
    rec bench_overlap_sweep 400 torchrun --nproc_per_node "$NP" benchmarks/bench_overlap.py --sweep --no-eager \
      --write-table --profile "$OUT/profile" --tag sweep
    cp python/triton_dist/ops/overlap_table.json "$OUT/" ;;
  overlap-trace)
    tier gpu_overlap 240 test/python/gpu/test_gpu_overlap.py
    rec trace_overlap 200 torchrun --nproc_per_node "$NP" benchmarks/bench_overlap.py --probe trace --out "$OUT/trace" ;;
  overlap-round)  # one device call for a round of overlap work: tier, sweep + table, final bench with it, traces
    tier gpu_overlap 200 test/python/gpu/test_gpu_overlap.py
    rec bench_overlap_sweep 200 torchrun --nproc_per_node "$NP" benchmarks/bench_overlap.py --sweep --no-eager \
      --write-table --tag sweep
    cp python/triton_dist/ops/overlap_table.json "$OUT/"
    rec bench_overlap_final 200 torchrun --nproc_per_node "$NP" benchmarks/bench_overlap.py --mlp --tag final
    eager_rules final
    rec trace_overlap 90 torchrun --nproc_per_node "$NP" benchmarks/bench_overlap.py --probe trace --out "$OUT/trace"
    rec bench_gemm 150 "$PY" benchmarks/bench_gemm.py --out "$OUT" ;;
  overlap-ag)  # after a change to the AG+GEMM kernels only: their tests, then sweep + table and the final bench
    tier gpu_overlap_ag 120 test/python/gpu/test_gpu_overlap.py -k ag_gemm
    rec bench_overlap_sweep 200 torchrun --nproc_per_node "$NP" benchmarks/bench_overlap.py --sweep --no-eager \
      --write-table --tag sweep
    cp python/triton_dist/ops/overlap_table.json "$OUT/"
    rec bench_overlap_final 200 torchrun --nproc_per_node "$NP" benchmarks/bench_overlap.py --mlp --tag final
    eager_rules final ;;
  overlap-ar)  # after a change to the GEMM+AR kernel only: its tests, then its sweep + table (other ops' rules kept)
    tier gpu_overlap_ar 150 test/python/gpu/test_gpu_overlap.py -k gemm_ar
    rec bench_overlap_ar_sweep 240 torchrun --nproc_per_node "$NP" benchmarks/bench_overlap.py --ops gemm_ar --sweep \
      --no-eager --write-table --tag ar-sweep
    cp python/triton_dist/ops/overlap_table.json "$OUT/"
    rec bench_overlap_ar_final 120 torchrun --nproc_per_node "$NP" benchmarks/bench_overlap.py --ops gemm_ar \
      --tag ar-final ;;
  rs-probe)  # the GEMM+RS tests, then the per-stage probe of the fused GEMM+RS (its default shapes unless PROBE_SHAPES)
    tier gpu_overlap_rs 150 test/python/gpu/test_gpu_overlap.py -k gemm_rs
    rec probe_gemm_rs 200 torchrun --nproc_per_node "$NP" benchmarks/bench_overlap.py --probe gemm-rs \
      ${PROBE_SHAPES:+--shapes "$PROBE_SHAPES"} --out "$OUT/probe" ;;
  overlap-rs)  # after a change to the GEMM+RS methods only: their tests, sweep + table at M >= 2048, final bench
    tier gpu_overlap_rs 150 test/python/gpu/test_gpu_overlap.py -k gemm_rs
    rec bench_overlap_rs_sweep 200 torchrun --nproc_per_node "$NP" benchmarks/bench_overlap.py --ops gemm_rs \
      --models llama3-70b,llama3-8b --m-values 2048,4096,8192 --sweep --no-eager --write-table --tag rs-sweep
    cp python/triton_dist/ops/overlap_table.json "$OUT/"
    rec bench_overlap_rs_final 150 torchrun --nproc_per_node "$NP" benchmarks/bench_overlap.py --ops gemm_rs \
      --models llama3-70b,llama3-8b,comm-heavy --m-values 2048,4096,8192 --tag rs-final
    eager_rules rs-final ;;
  mega)  # the mega kernel: its GPU tier, then the Qwen3-8B decode step at TP=NPROC, batch 4 at mixed contexts (vs
    # torch + NCCL and torch + our one-shot all-reduce; no torch.compile: its ~2 min compile does not fit this part)
    # and at TP=1, batch 1, context 512 (vs torch and torch.compile, max-autotune: ~2 min of the step's 180 s), fused
    # MLP. The batch-8 run is its own part (mega-b8): with a second compile it does not fit SUITE_BUDGET_S here. The
    # tier has 300 s (its fusion test builds three 8B-shaped models at batch 1 and 4); the last bench then gets what
    # is left of the budget, or is recorded as skipped.
    tier gpu_mega 300 test/python/gpu/test_gpu_mega_qwen3.py
    rec bench_mega_tp"$NP"_b4 130 torchrun --nproc_per_node "$NP" benchmarks/bench_mega.py --fused-mlp --steps 16 \
      --reps 10 --ar-method one_shot --batch 4 --contexts 512,2048,64,1024 --no-compile
    rec bench_mega_tp1 180 torchrun --nproc_per_node 1 benchmarks/bench_mega.py --fused-mlp --steps 64 --reps 10 ;;
  mega-b8)  # one GPU: the Qwen3-8B TP=1 step at batch 8, mixed contexts up to 4K, vs torch and torch.compile (the
    # issue's target: mega >= 1.3x torch.compile), then batch 1 without the compile for the same-run ratio
    rec bench_mega_tp1_b8 300 torchrun --nproc_per_node 1 benchmarks/bench_mega.py --fused-mlp --steps 16 --reps 10 \
      --batch 8 --contexts 4096,512,1024,128,2048,3000,64,700
    rec bench_mega_tp1_b1 120 torchrun --nproc_per_node 1 benchmarks/bench_mega.py --fused-mlp --steps 16 --reps 10 \
      --no-compile ;;
  mega-pf)  # one GPU: the Qwen3-8B TP=1 step at several GEMV L2-prefetch budgets (PF_BYTES), 16 checked steps each
    for pf in ${PF_BYTES:-0 65536 131072 262144}; do
      rec bench_mega_pf"$pf" 120 torchrun --nproc_per_node 1 benchmarks/bench_mega.py --fused-mlp --steps 16 \
        --reps 10 --gemv-prefetch "$pf" --out "$OUT/mega_tp1_pf$pf.json"
    done ;;
  mega-ab)  # one GPU: candidate builder options A/B-timed against the default build in one process per shape
    # (bench_mega --variant: the same interleaved samples, each variant checked at the timed step; hints and
    # reorderings must give mega's bits, a new KV partition only the reference's values). MEGA_VARIANTS
    # (space-separated NAME:KEY=VALUE[,KEY=VALUE]; mega_variants above) at batch 1 with every variant's trace.
    # Batch 8 (mixed contexts up to 4K) adds MEGA_B8_VARIANTS: splits of about 256 positions (kv_split_positions),
    # alone and with all three, and the build without fusions (whose norm / residual fusions at B > 1 are new).
    mega_variants
    b8=("${variants[@]}")
    for v in ${MEGA_B8_VARIANTS:-sp256:kv_split_positions=256 allsp:$all3,kv_split_positions=256 \
               nofuse:enable_fusion=false}; do
      b8+=(--variant "$v")
    done
    rec bench_mega_ab_b1 240 torchrun --nproc_per_node 1 benchmarks/bench_mega.py --fused-mlp --steps 16 --reps 20 \
      --no-compile "${variants[@]}" --profile "$OUT/mega_ab_prof" --out "$OUT/mega_ab_b1.json"
    rec bench_mega_ab_b8 240 torchrun --nproc_per_node 1 benchmarks/bench_mega.py --fused-mlp --steps 16 --reps 20 \
      --no-compile "${b8[@]}" --batch 8 --contexts 4096,512,1024,128,2048,3000,64,700 \
      --out "$OUT/mega_ab_b8.json" ;;
  mega-ab-32b)  # one GPU with room for Qwen3-32B's 64 GB of weights (an H200): mega-ab's batch-1 variants at 32B
    mega_variants
    rec bench_mega_ab_32b 400 torchrun --nproc_per_node 1 benchmarks/bench_mega.py --preset qwen3-32b --fused-mlp \
      --steps 16 --reps 10 --no-compile "${variants[@]}" --out "$OUT/mega_ab_32b.json" ;;
  gemm-quality)  # one GPU: our GEMM against cuBLAS at the overlapped GEMMs' shapes with M >= 2048 (per rank, TP=2:
    # AG+GEMM 70B / 8B, GEMM+RS 70B / 8B), the issue's "GEMM quality" target
    # (--write-table merges the run into the tree's kernels/gemm_table.json, copied to $OUT)
    rec bench_gemm_quality 300 "$PY" benchmarks/bench_gemm.py --out "$OUT" --write-table --shapes \
      2048x14336x8192,4096x14336x8192,8192x14336x8192,2048x7168x4096,4096x7168x4096,8192x7168x4096,2048x8192x7168,4096x8192x7168,8192x8192x7168,2048x4096x3584,4096x4096x3584,8192x4096x3584
    cp python/triton_dist/kernels/gemm_table.json "$OUT/" ;;
  moe)  # the MoE family's GPU tiers: one device (grouped GEMM, route / combine, the layer at EP=1; at NPROC ranks,
    # each checking its own device), expert parallelism at NPROC ranks (dispatch / combine, two in flight, graph
    # replay, fp8, the EP layer), then the EP layer's benchmark against all_to_all_single + torch (recorded as
    # skipped when the tiers leave too little of SUITE_BUDGET_S)
    tier gpu_moe 200 test/python/gpu/test_gpu_moe.py
    tier gpu_moe_ep 240 test/python/gpu/test_gpu_moe_ep.py
    rec bench_moe_ep 200 torchrun --nproc_per_node "$NP" benchmarks/bench_moe_ep.py --out "$OUT" ;;
  moe-tp)  # tensor-parallel MoE at NPROC ranks (ag_group_gemm / group_gemm_rs exact, ten calls on one context, the
    # TP layer, graph replay, bad input), then the TP layer's benchmark (Qwen3-30B-A3B unless MOE_TP_ARGS says more)
    tier gpu_moe_tp 240 test/python/gpu/test_gpu_moe_tp.py
    rec bench_moe_tp 300 torchrun --nproc_per_node "$NP" benchmarks/bench_moe_tp.py --out "$OUT" \
      ${MOE_TP_ARGS:---models qwen3-30b-a3b} ;;
  moe-bench)  # one GPU: the grouped GEMM against torch._grouped_mm and the per-expert loop at Qwen3-30B-A3B's expert
    # shapes (one process; MOE_BENCH_ARGS adds options, e.g. --fp8), with tilings beside the default rule (since
    # 7d18492: 128x256x64x8x4 above 64 rows per expert), then the EP=1 layer against torch and torch.compile
    rec bench_group_gemm 240 "$PY" benchmarks/bench_group_gemm.py --out "$OUT" --models qwen3-30b-a3b \
      --configs "${MOE_CONFIGS:-64x128x128x4x4,128x128x64x8x4,128x256x64x8x3}" ${MOE_BENCH_ARGS:-}
    rec bench_moe_layer 150 "$PY" benchmarks/bench_group_gemm.py --out "$OUT" --layer --models qwen3-30b-a3b ;;
  moe-ds)  # one GPU: the MoE benchmarks at DeepSeek-V3's expert shapes (256 experts, hidden 7168: 22 GB of weights)
    rec bench_group_gemm_ds 330 "$PY" benchmarks/bench_group_gemm.py --out "$OUT" --models deepseek-v3 ${MOE_BENCH_ARGS:-}
    rec bench_moe_layer_ds 200 "$PY" benchmarks/bench_group_gemm.py --out "$OUT" --layer --models deepseek-v3 \
      --tokens 128,1024 ;;
  attention)  # the attention family: its GPU tier at NPROC ranks (each rank checks the one-device kernels on its
    # own GPU; sp_flash_decode, Ulysses' all-to-alls and sp_ag_attention across the ranks), then bench_attention:
    # decode and prefill in one process on one GPU, the sequence-parallel decode, Ulysses and the sequence-parallel
    # prefill with the fused all-gather at NPROC ranks (shared_gpu in their JSON where the ranks share one GPU)
    tier gpu_attention 300 test/python/gpu/test_gpu_attention.py
    rec bench_attention 220 "$PY" benchmarks/bench_attention.py --only decode,prefill --out "$OUT"
    rec bench_attention_sp 130 torchrun --nproc_per_node "$NP" benchmarks/bench_attention.py --only sp,ulysses \
      --out "$OUT"
    rec bench_attention_sp_ag 160 torchrun --nproc_per_node "$NP" benchmarks/bench_attention.py --only sp_ag \
      --out "$OUT" ;;
  attention-sp)  # the attention tier, then the benchmarks that need the torchrun world (a session that measured the
    # one-GPU decode / prefill already, or has no time for them)
    tier gpu_attention 300 test/python/gpu/test_gpu_attention.py
    rec bench_attention_sp 130 torchrun --nproc_per_node "$NP" benchmarks/bench_attention.py --only sp,ulysses \
      --out "$OUT"
    rec bench_attention_sp_ag 160 torchrun --nproc_per_node "$NP" benchmarks/bench_attention.py --only sp_ag \
      --out "$OUT" ;;
  shared-fullsm)  # ranks sharing a GPU, grids of one block per SM: which SMs each rank's blocks get (the probe),
    # the shared-GPU tier (full-SM cross-rank barrier, MPS client check, misconfigured child), then the two fused
    # kernels that hung (TP-MoE AG + group GEMM, sp_ag_attention)
    rec sm_probe 90 torchrun --nproc_per_node "$NP" -m triton_dist.tools.sm_probe --out "$OUT"
    tier gpu_shared_gpu 150 test/python/gpu/test_gpu_shared_gpu.py
    tier gpu_moe_tp 240 test/python/gpu/test_gpu_moe_tp.py
    tier gpu_attention_sp_ag 200 test/python/gpu/test_gpu_attention.py -k "sp_ag" ;;
  attention-tune)  # one GPU: the decode kernel's launch choices against its default, same process
    rec bench_attention_tune 200 "$PY" benchmarks/bench_attention.py --only decode --pages 16 \
      --decode-lens "${DECODE_LENS:-32768}" --batches "${DECODE_BATCHES:-1,8}" \
      --decode-variants "${DECODE_VARIANTS:-wide=1,warps=8,block_n=64+stages=5,block_n=32+stages=7,resident=3,merge_s=64}" \
      --out "$OUT" ;;
  attention-trace)  # one GPU: the decode's timeline (batch 1 at 32K runs at 0.65 of the read ceiling, batch 8 at
    # 0.96: docs/attention.md) for the default (int32 K/V offsets: 3 programs per SM), the former int64 offsets (2),
    # the merge in one step and the fused merge; then those and the waves rule timed against the default, each in
    # one process
    rec bench_attention_trace 200 "$PY" benchmarks/bench_attention.py --decode-trace "$OUT/decode-trace" --pages 16 \
      --decode-lens "${DECODE_LENS:-32768}" --batches "${DECODE_BATCHES:-1,8}" \
      --decode-variants "${TRACE_VARIANTS:-wide=1,merge_s=64,fused=1}" --out "$OUT"
    rec bench_attention_fused 250 "$PY" benchmarks/bench_attention.py --only decode --pages 16 \
      --decode-lens "${DECODE_LENS:-32768}" --batches "${DECODE_BATCHES:-1,8}" \
      --decode-variants "${DECODE_VARIANTS:-wide=1,merge_s=64,resident=3,resident=3+merge_s=64,fused=1,splits=32}" \
      --out "$OUT" ;;
  coll-host)  # after a change to the collectives' host path: its tests, where the host time goes, eager figures
    tier gpu_runtime_bound 100 test/python/gpu/test_gpu_runtime.py -k "init or bound"
    tier gpu_collectives 160 test/python/gpu/test_gpu_collectives.py
    rec profile_host_8k 90 torchrun --nproc_per_node "$NP" benchmarks/bench_collectives.py --probe host-path --bytes 8192 --tag 8k
    rec profile_host_64k 90 torchrun --nproc_per_node "$NP" benchmarks/bench_collectives.py --probe host-path --bytes 65536 --tag 64k
    rec bench_collectives_small 150 torchrun --nproc_per_node "$NP" benchmarks/bench_collectives.py \
      --sizes 4096,8192,65536,1048576 --tag small ;;
  coll-ll)  # the flagged-word (ll) methods: the collectives tier (stress included), then small sizes of every op
    TRITON_DIST_STRESS_CALLS=${TRITON_DIST_STRESS_CALLS:-2000} tier gpu_collectives 170 \
      test/python/gpu/test_gpu_collectives.py
    rec bench_collectives_small 150 torchrun --nproc_per_node "$NP" benchmarks/bench_collectives.py \
      --sizes 4096,8192,16384,65536,262144,1048576 --tag ll-small ;;
  coll-verify)  # after a change to the collectives' signalling: their tier (mismatch children included), the language
    # tier (dl.wait), small sizes of every op (the signalling's cost)
    TRITON_DIST_STRESS_CALLS=${TRITON_DIST_STRESS_CALLS:-2000} tier gpu_collectives 200 \
      test/python/gpu/test_gpu_collectives.py
    tier gpu_language 150 test/python/gpu/test_gpu_language.py
    rec bench_collectives_small 150 torchrun --nproc_per_node "$NP" benchmarks/bench_collectives.py \
      --sizes 4096,8192,16384,65536,262144,1048576 --tag verify-small ;;
  ll-knobs)  # the ll channel's block (32-bit words) and warps per program at small sizes, ll only, one run per setting
    for knobs in "256 4" "128 4" "128 2" "512 8"; do
      set -- $knobs
      rec "bench_ll_b$1_w$2" 60 torchrun --nproc_per_node "$NP" benchmarks/bench_collectives.py --no-symm \
        --sizes 4096,8192,16384,65536,262144 --methods ll --eager-max-bytes 0 --ll-block-words "$1" \
        --ll-num-warps "$2" --tag "ll-b$1-w$2"
    done ;;
  coll-sweep)  # a round of collectives work: tests, full sweep + table (in $OUT, not the tree), knob runs, shmem sweep
    TRITON_DIST_STRESS_CALLS=${TRITON_DIST_STRESS_CALLS:-2000} tier gpu_collectives 170 \
      test/python/gpu/test_gpu_collectives.py
    rec bench_collectives_sweep 200 torchrun --nproc_per_node "$NP" benchmarks/bench_collectives.py \
      --dtypes bfloat16,float32 --write-table --table-out "$OUT/collectives_table.json" --tag sweep
    for knobs in "44 16" "88 16" "66 8" "66 32"; do  # pipelined methods: pushers of the 132-program grid, segments
      set -- $knobs
      rec "bench_pipe_p$1_s$2" 60 torchrun --nproc_per_node "$NP" benchmarks/bench_collectives.py --no-symm \
        --sizes 16777216,67108864,268435456,1073741824 --methods push_pipe,two_shot_pipe --eager-max-bytes 0 \
        --pipe-pushers "$1" --pipe-segments "$2" --tag "pipe-p$1-s$2"
    done
    rec bench_shmem_sweep 120 torchrun --nproc_per_node "$NP" benchmarks/bench_shmem.py --quick --sweep ;;
  coll-round)  # sweep + table, then the final run with that table (copied into this machine's tree, and to $OUT)
    rec bench_collectives_sweep 200 torchrun --nproc_per_node "$NP" benchmarks/bench_collectives.py \
      --dtypes bfloat16,float32 --write-table --table-out "$OUT/collectives_table.json" --tag sweep
    cp "$OUT/collectives_table.json" python/triton_dist/ops/collectives_table.json
    OUT="$OUT" SUITE_BUDGET_S=$(( SUITE_DEADLINE - $(date +%s) )) "$0" coll-final; failed=$((failed + $?)) ;;
  coll-final)  # evidence with the table in the tree: auto vs best at every size, shmem figures, host path
    rec bench_collectives_final 330 torchrun --nproc_per_node "$NP" benchmarks/bench_collectives.py \
      --dtypes bfloat16,float32 --tag final
    rec bench_shmem 100 torchrun --nproc_per_node "$NP" benchmarks/bench_shmem.py --quick
    rec profile_host_8k 60 torchrun --nproc_per_node "$NP" benchmarks/bench_collectives.py --probe host-path --bytes 8192 --tag 8k ;;
  changed)  # the tiers the latest changes touch: overlap (GEMM+RS pieces, eager dispatch, AG tilings), a bench of
    # the 8B shapes whose rules changed (eager column: auto's eager rules), plain jit + SIMT tiles (the tile view's
    # renamed attributes), language (dl.wait), libshmem (the shared torchrun fixture, team_translate_pe)
    tier gpu_overlap 240 test/python/gpu/test_gpu_overlap.py
    rec bench_overlap_8b 120 torchrun --nproc_per_node "$NP" benchmarks/bench_overlap.py --ops ag_gemm,gemm_rs \
      --models llama3-8b --m-values 2048,4096 --tag changed-8b
    tier gpu_plain_jit 100 test/python/gpu/test_gpu_plain_jit.py test/python/gpu/test_gpu_simt_tiles.py
    tier gpu_language 150 test/python/gpu/test_gpu_language.py
    tier gpu_libshmem 150 test/python/gpu/test_gpu_libshmem.py test/python/gpu/test_gpu_libshmem_scope.py ;;
  overlap-bench)
    rec bench_overlap_final 480 torchrun --nproc_per_node "$NP" benchmarks/bench_overlap.py --mlp --tag final ;;
  *) echo "usage: $0 $PARTS" >&2; exit 2 ;;
esac
ls -la "$OUT"
exit $failed
