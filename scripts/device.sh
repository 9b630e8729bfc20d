#!/usr/bin/env bash
# scripts/device.sh - everything the GPU machine does: build for the chip, run the tests (CPU and `gpu`, the shape
# sweep on both GPU paths), compute-sanitizer's four tools on the small-shape tests, and time all 64 cases; logs and
# JSON land in $OUT. Each stage fits one call of the GPU machine (10 minutes at most); `all` runs every stage but
# peers in one go.
# On a machine with several GPUs, `multigpu` (part of `all` there) runs the `multigpu` tests, memcheck on two GPUs,
# the step graph data-parallel on 2 GPUs (model_backward --gpus 2, the large and small residual MLP models) into
# step-h200.json's "ddp", and the scaling example for blocks 068 and 073 at their largest cases.
#
#   GG_COMMIT=<sha> bash scripts/device.sh [all|tests|sanitizers|bench|peers|step|train|multigpu|build]
#
# tests: the tests, the sweeps, the faults, the soak and compute-sanitizer's memcheck (5 runs), into
# reliability-h200.json (racecheck, synccheck and initcheck null there: the sanitizers stage runs them) and
# correctness-h200.json. Budgeted as step is (GG_TESTS_BUDGET, default 570 s from this script's start when run
# alone): the memcheck runs, last, get what is left, and one that no longer fits is skipped and counted as cut.
#
# sanitizers: compute-sanitizer's racecheck, synccheck and initcheck on the small-shape tests, both GPU paths (8 runs,
# 278 s with the build on an H200; a call of its own: they do not fit the tests stage's call), racecheck first and the
# longest first (racecheck with the sm_90a kernels 185-207 s, without 60-79 s), each run's time logged. Budgeted
# (GG_SANITIZERS_BUDGET, default 570 s from the script's start when run alone, 3600 from the stage's start in
# `all`); a run that no longer fits is skipped and counted as cut. Its facts (racecheck_hazards, synccheck_errors,
# initcheck_errors, those tools' sanitizer_runs_cut, sanitizers_commit/_command/_gpu) are merged into
# reliability-h200.json: the tests stage's, here or in an earlier call into the same $OUT; else the official one.
#
# step: fits one 10-minute call on one H200 (GG_CUDA_ARCH=90a halves the build; only the two targets it runs are
# built). Every piece has a time limit and the stage a budget, GG_STEP_BUDGET seconds from this script's start
# (default 570): a piece that no longer fits is skipped and says so. In order: the step graph test; then
# examples/model_backward on the issue's models (8 residual MLP layers D = 2048, F = 8192, 8192 tokens; the small one
# D = 1024, F = 4096, 2048 tokens; a gated bf16 stack), each checked against eager calls and timed as step graph (a
# sweep of side streams x scratch slots, GG_STEP_SWEEP, default 2:0,3:0,2:2 with K = 0 the default
# S + 1 slots; interleaved rounds), per-block graphs and eager calls, with a CUPTI trace of one step of each model
# (the fastest configuration, and as per-block graphs) drawn by scripts/plot_step_timeline.py into the log archive
# (plots/step-timeline-<model>.png; the trace itself is $OUT/step-trace.csv) and what a replay of that step runs as
# Graphviz DOT (step-<model>.dot, gg_step_debug_dot, in the log archive); the *_fused models add each layer's
# residual gradient in its dX GEMM (gg_mlp_args.grad_residual) instead of in a callback, the *_copies ones also hand
# every MLP the fp16 copies of its operands (--fp16-copies); GG_STEP_MODELS="large_fused small_fused ..." runs only
# those models (default: all); then bench/peers/step_torch.py (PyTorch eager, CUDA graph, torch.compile, each compile
# bounded; autograd under autocast and in TF32, the backward written out on fp16 saved tensors, casting to fp16, in
# TF32; and the fp16 GEMMs alone, the floor no step beats; each variant warmed a second before it is timed, as
# model_backward's step is; GG_STEP_TORCH_FORMS=autograd_fp16,... fewer; GG_STEP_TORCH_COMPILE_MODE=
# max-autotune-no-cudagraphs compiles in that mode); then, when the first pass compiled in the default mode, the forms GG_STEP_TORCH_AUTOTUNE (default
# autograd_fp16, the fastest fp16 form; empty: none) again under torch.compile in max-autotune for each model's shape
# (each compile bounded by GG_COMPILE_TIMEOUT_AUTOTUNE, default 240 s), counted beside the default mode's.
# All of it lands in $OUT/step-h200.json (scripts/collect_step.py), with the sweep's verdict in its "config_sweep".
# No sanitizer runs here: racecheck sees only races on shared memory inside a CTA, not two kernels of concurrent
# layers on one scratch slot; tests/cpu/test_step_ring.c proves the slots' ordering, and the sanitizers stage runs
# racecheck on the kernels themselves.
#
# train: examples/train, the character model (8 residual MLP layers) on tinyshakespeare, GG_TRAIN_STEPS (default
# 2000) steps at GG_TRAIN_PRECISION (default fp32): its initial weights (--dump-init), the step-graph run, the --eager
# run, the PyTorch twin (bench/peers/train_torch.py: eager, whole-step CUDA graph, torch.compile; from the same
# weights and batches), the loss curves (scripts/plot_loss.py: $OUT/train-loss-h200.png), all in
# $OUT/train-h200.json (scripts/collect_train.py) beside the three runs' JSON (every step's loss). Budgeted like
# step (GG_TRAIN_BUDGET, default 540 s from the script's start; only its target is built).
#
# multigpu: fits one 10-minute call on two H200s (GG_CUDA_ARCH=90a; only its targets are built), budgeted as step is
# (GG_MULTIGPU_BUDGET, default 570 s from the script's start): the multigpu tests, memcheck on two GPUs (into
# reliability-h200.json, merged over the tests stage's or the official one), the step graph data-parallel (the
# large, small and gated models, and PyTorch DDP eager and CUDA-graphed on the first two, into step-h200.json's
# "ddp", likewise), then the blocks' scaling (ddp-h200x2.json) as far as the budget goes. GG_MULTIGPU_PARTS (a comma
# list of tests, memcheck, step, blocks; default all four) runs only those pieces, so that the stage can be spread
# over several calls (each into its own $OUT) when one call's budget cannot hold it all.
# GG_DDP_RUNS (default 3) runs per block, GG_STEPS (default 30) steps per measurement, GG_BUCKET_MIB
# (default: the library's 25 MiB) pieces, GG_COMM_SMS (default: the library's) SMs and NCCL CTAs for communication,
# GG_COPY_ENGINES=0|1 the weight gradients on SMs or through NCCL's copy engines (gg_dist_config.copy_engines) for
# both blocks (default: copy engines for block 2, SMs for block 3, each block's best).
#
# peers: PyTorch's autotuned peers (bench/peers/torch_peers.py's autotune family: torch.compile in max-autotune, each
# distinct shape compiled on its own, ~23 s each on an H200) of blocks GG_PEERS_BLOCKS (default 2,3), their cases
# GG_PEERS_CASES (indices, comma-separated; default all: a run that the budget stopped is finished so), the variants
# GG_PEERS_VARIANTS (default torch_fp16_autotune, the fastest autotuned form wherever both were measured: 068 and
# 073's fp16 operands against autocast), budgeted (GG_PEERS_BUDGET, default 560 s from the script's start), into
# $OUT/peers-autotune.json; nothing is built. A stage of its own: the bench stage's call has no room for the
# compilations (17 shapes in blocks 2 and 3). scripts/file_run.sh collects it with the bench stage's peers
# (same machine type; the same commit, or a later one with the same library and peers) into bench-h200.json. Not
# part of `all`.
#
# `build` only builds (for experiments that run build-device/bench/gg_bench directly). Autotune choices persist in
# build-device/gemm-algos.txt (GG_TUNE_CACHE): later stages and calls on a warm machine reuse them.
#
# The GPU machine has no cmocka: carry/cmocka holds Debian's libcmocka packages unpacked (docs/maintainers.md).
set -uo pipefail
script_start=$(date +%s)
stage=${1:-all}
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
OUT=${OUT:-$root/out}
mkdir -p "$OUT"
# The source files that run (scripts/tree_hash.sh), hashed before anything is built: scripts/file_run.sh files the
# results only under the commit whose files these are.
tree=$(bash scripts/tree_hash.sh "$root" 2>/dev/null) && echo "{\"tree\": \"$tree\"}" > "$OUT/tree.json"
export NCCL_NVLS_ENABLE=${NCCL_NVLS_ENABLE:-0} # NVLink multicast must stay off on the shared machines
# The multigpu stage's pieces (GG_MULTIGPU_PARTS), checked before anything is built or run.
multigpu_parts=${GG_MULTIGPU_PARTS:-tests,memcheck,step,blocks}
IFS=, read -ra multigpu_pieces <<< "$multigpu_parts"
for piece in "${multigpu_pieces[@]}"; do
  case $piece in
    tests|memcheck|step|blocks) ;;
    *) echo "device.sh: GG_MULTIGPU_PARTS: '$piece' is not tests, memcheck, step or blocks" >&2; exit 2 ;;
  esac
done
export GG_TUNE_CACHE=${GG_TUNE_CACHE:-$root/build-device/gemm-algos.txt}
cmocka=$root/carry/cmocka/usr
export LD_LIBRARY_PATH=$cmocka/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
# The tests and the bench need cmocka; the training run does not: on a machine without it (neither carry/cmocka nor
# the system's), `train` builds without the tests, `peers` builds nothing, and every other stage stops here saying
# what to install.
tests_opt=()
if [ ! -f "$cmocka/include/cmocka.h" ] && [ ! -f /usr/include/cmocka.h ] && [ ! -f /usr/local/include/cmocka.h ]; then
  if [ "$stage" = train ]; then
    tests_opt=(-DGG_BUILD_TESTS=OFF)
  elif [ "$stage" != peers ]; then # (which builds nothing)
    echo "cmocka not found: sudo apt-get install libcmocka-dev (or carry/cmocka, docs/maintainers.md);" \
         "'scripts/device.sh train' runs without it" >&2
    exit 1
  fi
fi
arch=${GG_CUDA_ARCH:-90a;100a} # the H200's and the B200's code
# How the results were made, as recorded in their JSON: the settings that change them (those set), then the command.
# GG_STEP_TORCH_AUTOTUNE counts when set even empty (empty turns its pass off); GG_PEERS_COMPILE is a switch.
run_cmd="GG_COMMIT=<sha>"
for setting in GG_CUDA_ARCH GG_STEP_SWEEP GG_STEP_BUDGET GG_STEP_TORCH_FORMS GG_STEP_TORCH_COMPILE_MODE \
    GG_STEP_TORCH_AUTOTUNE GG_SHAPES GG_SHAPES_SEED GG_SANITIZER_TIMEOUT GG_TESTS_BUDGET GG_SANITIZERS_BUDGET GG_MODES \
    GG_ITERS GG_PEERS_COMPILE GG_PEERS_VARIANTS GG_PEERS_TIMEOUT GG_PEERS_COMPILE_TIMEOUT GG_PEERS_BLOCKS \
    GG_PEERS_CASES GG_PEERS_BUDGET GG_STEPS GG_BUCKET_MIB GG_COMM_SMS GG_COPY_ENGINES GG_DDP_RUNS GG_TRAIN_STEPS \
    GG_TRAIN_PRECISION GG_TRAIN_BUDGET GG_MULTIGPU_BUDGET; do
  if [ "$setting" = GG_STEP_TORCH_AUTOTUNE ]; then [ -n "${!setting+set}" ] || continue
  elif [ -z "${!setting:-}" ]; then continue; fi
  if [ "$setting" = GG_PEERS_COMPILE ]; then run_cmd+=" $setting=1"; else run_cmd+=" $setting=${!setting}"; fi
done
run_cmd+=" bash scripts/device.sh $stage"
build=$root/build-device
shapes_seed=${GG_SHAPES_SEED:-$(date +%s)}
status=0
# limit_by DEADLINE WANT: WANT seconds, or what is left until DEADLINE (epoch seconds) less 25 s (collecting,
# packing) when that is less; 0 when under 15 s are left: the piece is to be skipped
limit_by() { local l=$(( $1 - $(date +%s) - 25 )); [ "$l" -gt "$2" ] && l=$2; [ "$l" -ge 15 ] && echo "$l" || echo 0; }
# sanitizer_run LOG DEADLINE WANT BUDGET TOOL EXE FILTER [NAME=VALUE...]: one compute-sanitizer run of the cmocka
# test EXE (its cases matching FILTER, the environment given), for at most WANT seconds before DEADLINE, appended to
# LOG as collect_reliability.py reads it: the tool's output, then "<tool> <exe> exit <rc>", then (for planning
# budgets) how long it took: "<tool> <exe> (<filter>, <environment>): <n> s (limit <l> s)", both lines in the
# stage's output too. A run that does not fit the budget (BUDGET names its variable) is skipped; one stopped by its
# limit, skipped, or whose test ran no case (every case skipped: no GPU for it) has exit 124 and counts as cut, never
# as a clean run. The tests of tensors past 2^31 elements are left out (GG_TEST_SKIP): they pass gigabytes through
# every kernel, which the tools would take minutes over. Returns nonzero unless the run was clean.
sanitizer_run() {
  local log=$1 deadline=$2 want=$3 budget=$4 tool=$5 exe=$6 filter=$7; shift 7
  local opts=() limit rc t0
  case $tool in
    racecheck | synccheck) opts=(--kernel-name-exclude kns=nvjet) ;;
    initcheck) opts=(--nvtx true) ;;
  esac
  limit=$(limit_by "$deadline" "$want")
  if [ "$limit" = 0 ]; then
    echo "$tool $exe: skipped, the stage's time budget is spent ($budget)" | tee -a "$log"
    echo "$tool $exe exit 124" >> "$log"; return 1
  fi
  t0=$(date +%s)
  env GG_TEST_FILTER="$filter" GG_TEST_SKIP='*past_32_bit*' "$@" timeout "$limit" compute-sanitizer --tool "$tool" ${opts[@]+"${opts[@]}"} \
    --error-exitcode 9 "$build/tests/$exe" > "$OUT/sanitizer-run.log" 2>&1
  rc=$?
  grep -q '^\[       OK \]' "$OUT/sanitizer-run.log" || { [ $rc = 0 ] && rc=124; }
  cat "$OUT/sanitizer-run.log" >> "$log"; rm -f "$OUT/sanitizer-run.log"
  echo "$tool $exe exit $rc" | tee -a "$log"
  echo "$tool $exe ($filter${*:+, $*}): $(( $(date +%s) - t0 )) s (limit $limit s)" | tee -a "$log"
  [ $rc = 0 ]
}
# kernel_sanitizers LOG DEADLINE BUDGET RUN...: sanitizer_run of each RUN, "<tool> <exe> <filter> <hopper>", on the
# GPU path GG_HOPPER_KERNELS=<hopper>, each for at most GG_SANITIZER_TIMEOUT seconds (default 240). racecheck and
# synccheck check gradgraph's kernels only: cuBLASLt's own (nvjet) synchronize shared memory through TMA barriers,
# which racecheck reports as races; racecheck also fails with a hardware exception on cuBLASLt's cluster kernels, so
# its runs take clusters of one CTA (GG_GEMM_MAX_CLUSTER_CTAS=1; empty for the others: no limit, as gg_ctx_create
# refuses 0). initcheck sees every kernel, with NVTX on: the GEMMs mark what their TMA stores write
# (src/gemm/matmul.c). A tool's log ends with its summary. Returns nonzero unless every run was clean.
kernel_sanitizers() {
  local log=$1 deadline=$2 budget=$3 run tool exe filter hopper clusters rc=0; shift 3
  for run in "$@"; do
    read -r tool exe filter hopper <<< "$run"
    clusters=$([ "$tool" != racecheck ] || echo 1)
    sanitizer_run "$log" "$deadline" "${GG_SANITIZER_TIMEOUT:-240}" "$budget" "$tool" "$exe" "$filter" \
      GG_HOPPER_KERNELS="$hopper" GG_GEMM_MAX_CLUSTER_CTAS="$clusters" || rc=1
  done
  return $rc
}

nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv | tee "$OUT/gpu.txt"

targets=() # the step, train and multigpu stages alone build what they run
[ "$stage" = step ] && targets=(--target test_step_gpu test_residual_gpu gg_example_model_backward)
[ "$stage" = train ] && targets=(--target gg_example_train)
if [ "$stage" = multigpu ]; then
  targets=(--target test_dist test_step_dist test_dist_timeout test_dist_dead_rank gg_example_train ddp_scaling
           gg_example_model_backward)
  want_mpi=1 # test_dist_mpi too, where CMake found MPI (below)
fi
if [ "$stage" != peers ]; then # the peers stage runs PyTorch alone
  echo "== build (sm_$arch)"
  t0=$(date +%s)
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES="$arch" \
    -DCMAKE_PREFIX_PATH="$cmocka" -DGG_WERROR=ON ${tests_opt[@]+"${tests_opt[@]}"} > "$OUT/build.log" 2>&1 ||
    { tail -40 "$OUT/build.log"; exit 1; }
  [ -n "${want_mpi:-}" ] && cmake --build "$build" --target help 2>/dev/null | grep -q '^test_dist_mpi:' &&
    targets+=(test_dist_mpi)
  cmake --build "$build" ${targets[@]+"${targets[@]}"} >> "$OUT/build.log" 2>&1 ||
    { tail -40 "$OUT/build.log"; exit 1; }
  echo "built in $(( $(date +%s) - t0 )) s"
fi

if [ "$stage" = all ] || [ "$stage" = tests ]; then
  echo "== tests"
  # The stage's budget: GG_TESTS_BUDGET seconds from the script's start (default 570 for `tests` alone, one call of
  # the GPU machine with room to pack; 3600 within `all`). The memcheck runs, the last part, get what is left; one
  # that no longer fits is skipped and counted as cut, so the JSON is always written, saying what ran.
  tests_deadline=$(( script_start + ${GG_TESTS_BUDGET:-$([ "$stage" = tests ] && echo 570 || echo 3600)} ))
  # Every test but the long GPU ones (run directly, so their RESULT lines are kept) and the multi-GPU ones (the
  # multigpu stage) through CTest; test_step_gpu's random stacks from the sweep's fresh seed.
  GG_SHAPES_SEED=$shapes_seed ctest --test-dir "$build" --output-on-failure -E 'test_(blocks|graphs|shapes|soak)_gpu' \
    -LE multigpu 2>&1 |
    tee "$OUT/ctest.log" | tail -12
  grep -q "100% tests passed" "$OUT/ctest.log" || status=1
  # fault injection (CPU, fakes) and the soak (100 000 replays across buckets), for their FAULTS and SOAK lines
  "$build/tests/test_faults" > "$OUT/test_faults.log" 2>&1 || status=1
  grep -E '^FAULTS|^FAULT FAIL' "$OUT/test_faults.log" | head -20
  # the data-parallel path's: deadlines, watchdog, aborts, fingerprints, every NCCL call failed (fake NCCL)
  if [ -x "$build/tests/test_dist_faults" ]; then
    "$build/tests/test_dist_faults" > "$OUT/test_dist_faults.log" 2>&1 || status=1
    grep -E '^NCCL_FAULTS|^NCCL FAULT FAIL|\[  FAILED' "$OUT/test_dist_faults.log" | head -20
  fi
  t0=$(date +%s)
  timeout 900 "$build/tests/test_soak_gpu" > "$OUT/test_soak_gpu.log" 2>&1 || status=1
  echo "$(grep -E '^SOAK' "$OUT/test_soak_gpu.log" | head -20) ($(( $(date +%s) - t0 )) s)"
  for t in test_blocks_gpu test_graphs_gpu; do
    t0=$(date +%s)
    timeout 300 "$build/tests/$t" > "$OUT/$t.log" 2>&1 || status=1
    echo "$t: $(grep -E '^\[  (PASSED|FAILED) ' "$OUT/$t.log" | tr '\n' ' ') ($(( $(date +%s) - t0 )) s)"
    grep -E '^\[  FAILED|^\[  ERROR|FAIL |differs|wrong' "$OUT/$t.log" | head -20
  done
  echo "== shape sweep: ${GG_SHAPES:-300} random shapes per block (seed $shapes_seed), then the path a B200 takes"
  # test_shapes_gpu (tests/gpu): random and threshold shapes against the float64 reference, guard regions around
  # every output; then the same sweep and all 64 cases with the sm_90a-only kernels off (GG_HOPPER_KERNELS=0).
  for hopper in 1 0; do
    t0=$(date +%s)
    GG_HOPPER_KERNELS=$hopper GG_SHAPES_SEED=$shapes_seed GG_SHAPES_PER_BLOCK=${GG_SHAPES:-300} timeout 900 \
      "$build/tests/test_shapes_gpu" > "$OUT/test_shapes_gpu-hopper$hopper.log" 2>&1 || status=1
    grep -E '^SHAPES|^\[  (PASSED|FAILED) ' "$OUT/test_shapes_gpu-hopper$hopper.log"
    echo "($(( $(date +%s) - t0 )) s)"
    grep -E '^SHAPE FAIL' "$OUT/test_shapes_gpu-hopper$hopper.log" | head -20
  done
  GG_HOPPER_KERNELS=0 GG_TEST_FILTER='*all_cases*' timeout 600 "$build/tests/test_blocks_gpu" \
    > "$OUT/test_blocks_gpu-hopper0.log" 2>&1 || status=1
  echo "test_blocks_gpu, sm_90a-only kernels off: $(grep -E '^\[  (PASSED|FAILED) ' "$OUT/test_blocks_gpu-hopper0.log" |
    tr '\n' ' ')"
  python3 scripts/collect_correctness.py "$OUT/test_blocks_gpu.log" "$OUT/correctness-h200.json" \
    "${GG_COMMIT:-unknown}" "$run_cmd" "$(head -2 "$OUT/gpu.txt" | tail -1 | cut -d, -f1)"
  echo "== compute-sanitizer: memcheck (eager and graph) on the small shapes"
  # memcheck on every block's small shapes (test_blocks_gpu), on a graph's capture, replay and rebinding
  # (test_graphs_gpu), on the forwards, the optimizer and fp16 mode's copies and checks (test_fp16_gpu). Any report
  # fails the stage. racecheck, synccheck and initcheck are the sanitizers stage's (they do not fit this call too).
  : > "$OUT/sanitizer.log"
  kernel_sanitizers "$OUT/sanitizer.log" "$tests_deadline" GG_TESTS_BUDGET \
    "memcheck test_blocks_gpu *small* 1" "memcheck test_graphs_gpu *rebinding* 1" "memcheck test_forward_gpu * 1" \
    "memcheck test_optim_gpu * 1" "memcheck test_fp16_gpu * 1" || status=1
  python3 scripts/collect_reliability.py "$OUT" "$OUT/reliability-h200.json" "${GG_COMMIT:-unknown}" "$run_cmd" \
    "$(head -2 "$OUT/gpu.txt" | tail -1 | cut -d, -f1)"
fi

if [ "$stage" = all ] || [ "$stage" = sanitizers ]; then
  echo "== compute-sanitizer: racecheck, synccheck, initcheck on the small shapes, both GPU paths"
  # The stage's budget: GG_SANITIZERS_BUDGET seconds from the script's start when run alone (default 570: one call
  # of the GPU machine with room to pack), from here within `all` (default 3600). The runs go longest first, racecheck
  # with the sm_90a-only kernels (185-207 s on an H200) then without (60-79 s), so that what the budget may cut is the
  # short ones; one that no longer fits is skipped and counted as cut, so the JSON always says what ran.
  sanitizers_start=$script_start sanitizers_budget=570
  [ "$stage" = sanitizers ] || { sanitizers_start=$(date +%s); sanitizers_budget=3600; }
  sanitizers_deadline=$(( sanitizers_start + ${GG_SANITIZERS_BUDGET:-$sanitizers_budget} ))
  # racecheck, synccheck and initcheck on the small shapes of every block, on both GPU paths (GG_HOPPER_KERNELS), and
  # initcheck on the forwards and test_fp16_gpu too (their fp16 GEMMs take cuBLASLt's split-k with a fused epilogue)
  : > "$OUT/sanitizer-kernels.log"
  kernel_sanitizers "$OUT/sanitizer-kernels.log" "$sanitizers_deadline" GG_SANITIZERS_BUDGET \
    "racecheck test_blocks_gpu *small* 1" "racecheck test_blocks_gpu *small* 0" \
    "synccheck test_blocks_gpu *small* 1" "synccheck test_blocks_gpu *small* 0" \
    "initcheck test_blocks_gpu *small* 1" "initcheck test_blocks_gpu *small* 0" \
    "initcheck test_forward_gpu * 1" "initcheck test_fp16_gpu * 1" || status=1
  # The three tools' facts merged into the reliability JSON: the tests stage's, here or in an earlier call into the
  # same $OUT; else the official one (which keeps its own commit; this run's is sanitizers_commit).
  [ -f "$OUT/reliability-h200.json" ] || cp docs/results/reliability-h200.json "$OUT/reliability-h200.json"
  python3 scripts/collect_reliability.py --merge "$OUT/reliability-h200.json" "$OUT" "$OUT/reliability-h200.json" \
    "${GG_COMMIT:-unknown}" "$run_cmd" "$(head -2 "$OUT/gpu.txt" | tail -1 | cut -d, -f1)" || status=1
  echo "sanitizers stage: $(( $(date +%s) - script_start )) s since the script started"
fi

if [ "$stage" = all ] || [ "$stage" = bench ]; then
  echo "== timing: eager path and graph replay (CUDA events, cold L2)"
  "$build/bench/gg_bench" --iters "${GG_ITERS:-50}" --warmup "${GG_WARMUP:-10}" --modes "${GG_MODES:-all}" \
    --overlap "${GG_OVERLAP:-auto}" --trace "$OUT/trace.csv" --json "$OUT/bench.json" --csv "$OUT/bench.csv" \
    2> "$OUT/bench-progress.log" | tee "$OUT/bench.txt" || status=1
  python3 scripts/collect_graphs.py "$OUT/bench.json" "$OUT/graphs-h200.json" "${GG_COMMIT:-unknown}" "$run_cmd"
  echo "== PyTorch peers (eager${GG_PEERS_COMPILE:+ and torch.compile}, CUDA graphs, cold L2)"
  # every variant (TF32/native, fp16 operands, autocast fp16; GG_PEERS_VARIANTS selects), each torch.compile bounded
  # (GG_PEERS_COMPILE_TIMEOUT s) and the whole run budgeted 30 s inside GG_PEERS_TIMEOUT, so that it ends by itself
  peers_timeout=${GG_PEERS_TIMEOUT:-400}
  PYTHONUNBUFFERED=1 timeout "$peers_timeout" python3 bench/peers/torch_peers.py --iters "${GG_ITERS:-50}" \
    --warmup "${GG_WARMUP:-10}" ${GG_PEERS_COMPILE:+--compile} --variants "${GG_PEERS_VARIANTS:-base,fp16,autocast}" \
    --compile-timeout "${GG_PEERS_COMPILE_TIMEOUT:-90}" --gemm-floor \
    --budget $(( peers_timeout > 60 ? peers_timeout - 30 : peers_timeout / 2 )) \
    --json "$OUT/peers.json" 2> "$OUT/peers-progress.log" | tee "$OUT/peers.txt" || status=1
  python3 scripts/collect_bench.py "$OUT/bench.json" "$OUT/peers.json" "$OUT/bench-h200.json" "${GG_COMMIT:-unknown}" \
    "$run_cmd" || status=1
  # against the official results in the tree: which blocks moved beyond the noise between runs (information: a run
  # on another machine, or a change meant to move them, moves them)
  python3 scripts/compare_bench.py docs/results/bench-h200.json "$OUT/bench-h200.json" 2>&1 |
    tee "$OUT/bench-compare.txt"
  mkdir -p "$OUT/plots"
  python3 bench/plot.py "$OUT/bench.json" "$OUT/peers.json" "$OUT/plots" > /dev/null 2>> "$OUT/peers-progress.log" ||
    true
fi
if [ "$stage" = peers ]; then
  echo "== PyTorch's autotuned peers (torch.compile max-autotune, each shape compiled), blocks ${GG_PEERS_BLOCKS:-2,3}"
  left=$(( script_start + ${GG_PEERS_BUDGET:-560} - $(date +%s) ))
  PYTHONUNBUFFERED=1 timeout "$left" python3 bench/peers/torch_peers.py --block "${GG_PEERS_BLOCKS:-2,3}" --compile \
    --variants "${GG_PEERS_VARIANTS:-torch_fp16_autotune}" --iters "${GG_ITERS:-50}" --warmup "${GG_WARMUP:-10}" \
    --compile-timeout "${GG_PEERS_COMPILE_TIMEOUT:-90}" --budget $(( left > 60 ? left - 30 : left / 2 )) \
    ${GG_PEERS_CASES:+--cases "$GG_PEERS_CASES"} \
    --json "$OUT/peers-autotune.json" 2> "$OUT/peers-autotune-progress.log" | tee "$OUT/peers-autotune.txt" || status=1
  # the command that made it, for the bench JSON that file_run.sh collects it into
  python3 - "$OUT/peers-autotune.json" "${GG_COMMIT:-unknown}" "$run_cmd" <<'PY' || status=1
import json, sys
path, commit, command = sys.argv[1:4]
p = json.load(open(path))
p["commit"], p["command"] = commit, command
json.dump(p, open(path, "w"), indent=1)
PY
fi
if [ "$stage" = all ] || [ "$stage" = step ]; then
  echo "== step graphs: test_step_gpu, model_backward (sweep, trace), PyTorch peers"
  # alone, the budget counts from the script's start (the build is part of the call); after other stages, from here
  step_deadline=$(( $([ "$stage" = step ] && echo "$script_start" || date +%s) + ${GG_STEP_BUDGET:-570} ))
  limit() { limit_by "$step_deadline" "$1"; }
  skipped() { echo "$1: skipped, the stage's time budget is spent (GG_STEP_BUDGET)" | tee -a "$OUT/step.log"; }
  t=$(limit 150)
  if [ "$t" -gt 0 ]; then
    timeout "$t" "$build/tests/test_step_gpu" > "$OUT/test_step_gpu.log" 2>&1 || status=1
    grep -E '^RESULT|^\[  (PASSED|FAILED|ERROR) ' "$OUT/test_step_gpu.log"
    # the residual's gradient added in the dX GEMM (what the *_fused models below use), on every route
    timeout 60 "$build/tests/test_residual_gpu" > "$OUT/test_residual_gpu.log" 2>&1 || status=1
    grep -E '^RESULT|^\[  (PASSED|FAILED|ERROR) ' "$OUT/test_residual_gpu.log"
  else skipped test_step_gpu; status=1; fi
  rm -f "$OUT/step-trace.csv"
  # the SM clock and power while the models run: a sustained step runs at the clock the power limit allows, a single
  # traced step (after idle) faster
  nvidia-smi --query-gpu=clocks.sm,power.draw --format=csv,noheader,nounits -lms 250 > "$OUT/step-clocks.csv" \
    2>/dev/null &
  clocks_pid=$!
  for model in "large:150:" "large_fused:120:--fused-residual" "large_fused_copies:120:--fused-residual --fp16-copies" \
               "small:45:--small" "small_fused:45:--small --fused-residual" \
               "small_fused_copies:45:--small --fused-residual --fp16-copies" "gated:50:--gated --tokens 8192"; do
    name=${model%%:*}; rest=${model#*:}; want=${rest%%:*}; model_opts=${rest#*:}
    case " ${GG_STEP_MODELS:-$name} " in *" $name "*) ;; *) continue ;; esac
    t=$(limit "$want")
    if [ "$t" -gt 0 ]; then
      t0=$(date +%s)
      # shellcheck disable=SC2086 # the model's options split on purpose
      timeout "$t" "$build/examples/gg_example_model_backward" $model_opts --sweep "${GG_STEP_SWEEP:-2:0,3:0,2:2}" \
        --rounds 5 --steps "${GG_STEPS:-20}" --json "$OUT/step-$name.json" --trace "$OUT/step-trace.csv" \
        --dot "$OUT/step-$name.dot" \
        > "$OUT/step-$name.log" 2>&1 || status=1
      echo "model_backward $name ($(( $(date +%s) - t0 )) s, limit $t s; 124: stopped by it):"
      grep -E 'FAILED|^step graph,|of SOL|^trace |--trace|rror' "$OUT/step-$name.log"
    else skipped "model_backward $name"; status=1; fi
  done
  kill "$clocks_pid" 2>/dev/null
  sort -t, -k1 -n "$OUT/step-clocks.csv" | awk -F, 'BEGIN { n = 0 } $2 > 300 { c[n++] = $1 }
    END { if (n) printf "SM clock while the models ran (samples over 300 W): median %d MHz, lowest %d, %d samples\n",
          c[int(n / 2)], c[0], n }' | tee -a "$OUT/step.log"
  if [ -s "$OUT/step-trace.csv" ]; then
    mkdir -p "$OUT/plots"
    timeout 60 python3 scripts/plot_step_timeline.py "$OUT/step-trace.csv" "$OUT/plots" \
      --json "$OUT/step-timeline.json" 2>&1 | tee -a "$OUT/step.log"
  fi
  # step_peers NAME WANT COMPILE_TIMEOUT ARGS...: one bench/peers/step_torch.py pass into $OUT/NAME.json (its output
  # NAME.txt, progress NAME-progress.log), for at most WANT seconds of the stage's budget
  step_peers() {
    local name=$1 t; t=$(limit "$2"); local timeout=$3; shift 3
    if [ "$t" -gt 0 ]; then
      PYTHONUNBUFFERED=1 timeout "$t" python3 bench/peers/step_torch.py --steps "${GG_STEPS:-20}" \
        --budget $(( t - 10 )) --compile-timeout "$timeout" "$@" --json "$OUT/$name.json" \
        2> "$OUT/$name-progress.log" | tee "$OUT/$name.txt" | { grep -v '^{' | sed "s/^/$name: /" || true; } ||
        status=1
    else skipped "step_torch.py ($name)"; fi
  }
  # shellcheck disable=SC2086 # the settings split on purpose
  step_peers step-torch 330 "${GG_COMPILE_TIMEOUT:-75}" ${GG_STEP_TORCH_FORMS:+--forms $GG_STEP_TORCH_FORMS} \
    ${GG_STEP_TORCH_COMPILE_MODE:+--compile-mode $GG_STEP_TORCH_COMPILE_MODE}
  # the fastest fp16 form again, compiled in max-autotune for the model's shape: collect_step.py counts its
  # torch.compile beside the default mode's (GG_STEP_TORCH_AUTOTUNE: the forms, empty for none)
  autotune_forms=${GG_STEP_TORCH_AUTOTUNE-autograd_fp16}
  if [ -n "$autotune_forms" ] && [ -z "${GG_STEP_TORCH_COMPILE_MODE:-}" ]; then
    step_peers step-torch-autotune 300 "${GG_COMPILE_TIMEOUT_AUTOTUNE:-240}" --forms "$autotune_forms" \
      --compile-mode max-autotune-no-cudagraphs
  fi
  python3 scripts/collect_step.py "$OUT" "$OUT/step-h200.json" "${GG_COMMIT:-unknown}" "$run_cmd" \
    "$(head -2 "$OUT/gpu.txt" | tail -1 | cut -d, -f1)" || status=1
  echo "step stage: $(( $(date +%s) - script_start )) s since the script started"
  rm -f "$OUT"/step-{large,small,gated,torch,torch-autotune,timeline}.json "$OUT"/step-*_fused.json \
    "$OUT"/step-*_copies.json
fi
if [ "$stage" = all ] || [ "$stage" = train ]; then
  echo "== train: the character model as step graphs, --eager, the PyTorch twin, the loss curves"
  train_deadline=$(( $([ "$stage" = train ] && echo "$script_start" || date +%s) + ${GG_TRAIN_BUDGET:-540} ))
  train=("$build/examples/gg_example_train" --steps "${GG_TRAIN_STEPS:-2000}" --precision "${GG_TRAIN_PRECISION:-fp32}")
  init=$build/train-init.bin # 34 MB: not for $OUT
  : > "$OUT/train.log"
  if "${train[@]}" --dump-init "$init" >> "$OUT/train.log" 2>&1; then
    for mode in graph eager; do
      t=$(limit_by "$train_deadline" 150)
      if [ "$t" -gt 0 ]; then
        timeout "$t" "${train[@]}" $([ $mode = eager ] && echo --eager) --log-every 250 --json "$OUT/train-$mode.json" \
          2>&1 | tee -a "$OUT/train.log" | grep -E '^train:|^step .*(500|1000|1500|2000) |rror' || status=1
      else
        echo "train $mode: skipped, the stage's time budget is spent (GG_TRAIN_BUDGET)" | tee -a "$OUT/train.log"
        status=1
      fi
    done
    t=$(limit_by "$train_deadline" 330)
    if [ "$t" -gt 0 ]; then
      PYTHONUNBUFFERED=1 timeout "$t" python3 bench/peers/train_torch.py --init "$init" \
        --steps "${GG_TRAIN_STEPS:-2000}" --precision "${GG_TRAIN_PRECISION:-fp32}" --log-every 250 \
        --budget $(( t - 10 )) --json "$OUT/train-torch.json" 2>> "$OUT/train.log" > /dev/null || status=1
      grep -E '^(eager|graph|compile):' "$OUT/train.log"
    else
      echo "train_torch.py: skipped, the stage's time budget is spent (GG_TRAIN_BUDGET)" | tee -a "$OUT/train.log"
    fi
  else tail -5 "$OUT/train.log"; status=1; fi
  rm -f "$init"
  runs=(); for f in train-graph train-eager train-torch; do [ -s "$OUT/$f.json" ] && runs+=("$OUT/$f.json"); done
  [ ${#runs[@]} -gt 0 ] && { timeout 60 python3 scripts/plot_loss.py "$OUT/train-loss-h200.png" "${runs[@]}" \
    2>&1 | tee -a "$OUT/train.log" || true; }
  python3 scripts/collect_train.py "$OUT/train-graph.json" "$OUT/train-eager.json" "$OUT/train-torch.json" \
    "$OUT/train-h200.json" "${GG_COMMIT:-unknown}" "$run_cmd" "$(head -2 "$OUT/gpu.txt" | tail -1 | cut -d, -f1)" ||
    status=1
  echo "train stage: $(( $(date +%s) - script_start )) s since the script started"
  # the runs' own JSON (every step's loss) go into the stage's log archive: at most 8 files come back
  tar -C "$OUT" -czf "$OUT/train-runs.tgz" train-graph.json train-eager.json train-torch.json 2>/dev/null &&
    rm -f "$OUT"/train-{graph,eager,torch}.json
fi
gpus=$(nvidia-smi -L | wc -l)
if { [ "$stage" = all ] && [ "$gpus" -ge 2 ]; } || [ "$stage" = multigpu ]; then
  echo "== multigpu ($gpus GPUs): tests, memcheck, the step graph data-parallel, block scaling"
  # On one GPU the tests skip and the examples would time one GPU as if it were data-parallel: nothing is recorded.
  if [ "$gpus" -lt 2 ]; then
    echo "multigpu: needs 2 GPUs, this machine has $gpus: nothing run" | tee -a "$OUT/multigpu.log"; exit 1
  fi
  # Budgeted as step is (GG_MULTIGPU_BUDGET, default 570 s from this script's start when run alone), the pieces in the
  # order the results need them; one that no longer fits is skipped and says so.
  multigpu_deadline=$(( $([ "$stage" = multigpu ] && echo "$script_start" || date +%s) + ${GG_MULTIGPU_BUDGET:-570} ))
  limit() { limit_by "$multigpu_deadline" "$1"; }
  skipped() { echo "$1: skipped, the stage's time budget is spent (GG_MULTIGPU_BUDGET)" | tee -a "$OUT/multigpu.log"; }
  part() { case ",$multigpu_parts," in *",$1,"*) return 0 ;; esac; return 1; } # checked at the top
  echo "multigpu: parts $multigpu_parts"
  # 1. The multigpu tests through CTest, verbose so the log keeps them: test_dist (threads), test_step_dist, the
  # timeouts, test_dist_dead_rank (two processes: a rank that dies mid-training, a rank with another bucket_bytes;
  # it prints DEAD_RANK_DETECTED_S), test_dist_mpi with MPI, the training example on two GPUs.
  t=$(limit 300)
  if ! part tests; then :
  elif [ "$t" -gt 0 ]; then
    timeout "$t" ctest --test-dir "$build" -L multigpu -V > "$OUT/test_dist.log" 2>&1 || status=1
    grep -E '^[0-9]+/[0-9]+ Test|tests passed|DEAD_RANK_DETECTED_S' "$OUT/test_dist.log"
    grep -E '\[  ERROR|\[  FAILED|differ|hung|FAILED' "$OUT/test_dist.log" | head -10
  else skipped "ctest -L multigpu"; status=1; fi
  # 2. memcheck on two GPUs (one process, a thread per GPU): eager and graph reductions, the two-rank split through
  # the copy engines, a data-parallel step graph; logged and counted as the tests stage's runs are.
  part memcheck && : > "$OUT/sanitizer-multigpu.log"
  part memcheck && for run in "test_dist *synced_equals_sum_of_local*" "test_dist *two_rank_split_reduction*" \
             "test_step_dist *default_buckets*"; do
    read -r exe filter <<< "$run"
    sanitizer_run "$OUT/sanitizer-multigpu.log" "$multigpu_deadline" 120 GG_MULTIGPU_BUDGET memcheck "$exe" \
      "$filter" || status=1
  done
  # The two-GPU facts (dead_rank_detected_s, multigpu_memcheck_errors) merged into the reliability JSON: the tests
  # stage's, here or in an earlier call into the same $OUT; else the official one.
  if part tests || part memcheck; then
    [ -f "$OUT/reliability-h200.json" ] || cp docs/results/reliability-h200.json "$OUT/reliability-h200.json"
    python3 scripts/collect_reliability.py --merge "$OUT/reliability-h200.json" "$OUT" "$OUT/reliability-h200.json" \
      "${GG_COMMIT:-unknown}" "$run_cmd" "$(head -2 "$OUT/gpu.txt" | tail -1 | cut -d, -f1)" || status=1
  fi
  # 3. The step graph data-parallel on 2 GPUs (model_backward --gpus 2) and PyTorch DDP on the same models: their
  # "ddp", with this run's commit, merged into step-h200.json (the step stage's, here or in an earlier call into the
  # same $OUT; else the official one).
  part step && { [ -f "$OUT/step-h200.json" ] || cp docs/results/step-h200.json "$OUT/step-h200.json"; }
  part step && for model in "large:" "small:--small"; do
    name=${model%%:*}; model_opts=${model#*:}
    t=$(limit 150)
    if [ "$t" = 0 ]; then skipped "model_backward $name --gpus 2"; status=1; continue; fi
    # shellcheck disable=SC2086 # the model's options split on purpose
    timeout "$t" "$build/examples/gg_example_model_backward" $model_opts --gpus 2 --rounds 3 --steps "${GG_STEPS:-20}" \
      --json "$OUT/step-ddp-$name.json" > "$OUT/step-ddp-$name.log" 2>&1 || status=1
    grep -E '^check|speedup|rror' "$OUT/step-ddp-$name.log"
  done
  # PyTorch DDP on the same models and GPUs (bench/peers/step_ddp_torch.py): torch_ddp_speedup beside gradgraph's
  t=$(limit 240)
  if ! part step; then :
  elif [ "$t" -gt 0 ]; then
    PYTHONUNBUFFERED=1 timeout "$t" python3 bench/peers/step_ddp_torch.py --gpus 2 --models large,small \
      --steps "${GG_STEPS:-20}" --json "$OUT/torch-ddp.json" > "$OUT/torch-ddp.log" 2>&1 || status=1
    grep -E '^(large|small):|rror' "$OUT/torch-ddp.log"
  else skipped "step_ddp_torch.py"; status=1; fi
  # The gated bf16 stack (blocks 1 and 4) data-parallel too, after PyTorch's peer (which has no gated form).
  t=$(limit 90)
  if ! part step; then :
  elif [ "$t" -gt 0 ]; then
    timeout "$t" "$build/examples/gg_example_model_backward" --gated --tokens 8192 --gpus 2 --rounds 3 \
      --steps "${GG_STEPS:-20}" --json "$OUT/step-ddp-gated.json" > "$OUT/step-ddp-gated.log" 2>&1 || status=1
    grep -E '^check|speedup|rror' "$OUT/step-ddp-gated.log"
  else skipped "model_backward gated --gpus 2"; status=1; fi
  torch_ddp=(); [ -f "$OUT/torch-ddp.json" ] && torch_ddp=(--torch "$OUT/torch-ddp.json")
  ls "$OUT"/step-ddp-*.json > /dev/null 2>&1 &&
    python3 scripts/collect_step.py --ddp "$OUT/step-h200.json" --commit "${GG_COMMIT:-unknown}" \
      ${torch_ddp[@]+"${torch_ddp[@]}"} "$OUT"/step-ddp-*.json &&
    rm -f "$OUT"/step-ddp-*.json "$OUT/torch-ddp.json"
  # 4. Block scaling: GG_DDP_RUNS rounds over the two blocks (round-robin: each block's runs see the same drift of
  # clocks), as many as the budget leaves; the JSON holds each block's median run by speedup, and every run.
  # Each block with its best setting unless GG_COPY_ENGINES says otherwise: block 2 (068, a short backward with large
  # gradients) through the copy engines and the two-rank split reduction, block 3 (073) on SMs (docs/distributed.md).
  part blocks && for r in $(seq 1 "${GG_DDP_RUNS:-3}"); do
    for b in 2 3; do
      t=$(limit 120)
      if [ "$t" = 0 ]; then skipped "ddp_scaling --block $b, run $r"; continue; fi
      ce=${GG_COPY_ENGINES:-$([ $b = 2 ] && echo 1 || echo 0)}
      timeout "$t" "$build/examples/ddp_scaling" --block $b --steps "${GG_STEPS:-30}" \
        ${GG_BUCKET_MIB:+--bucket-mib "$GG_BUCKET_MIB"} ${GG_COMM_SMS:+--comm-sms "$GG_COMM_SMS"} --copy-engines "$ce" \
        --json "$OUT/ddp-block$b-run$r.json" 2>&1 | tee -a "$OUT/ddp.log" | tail -1 || status=1
    done
  done
  ls "$OUT"/ddp-block*-run*.json > /dev/null 2>&1 &&
    python3 scripts/collect_ddp.py "$OUT/ddp-h200x$gpus.json" "${GG_COMMIT:-unknown}" "$run_cmd" \
      "$OUT"/ddp-block*-run*.json &&
    rm -f "$OUT"/ddp-block*-run*.json
  echo "multigpu stage: $(( $(date +%s) - script_start )) s since the script started"
fi

cp "$GG_TUNE_CACHE" "$OUT/gemm-algos.txt" 2>/dev/null
# At most 8 files come back from the GPU machine: logs, tables and plots go into one archive beside the JSON/CSV,
# named after the stage, so that stages run one after the other into one $OUT keep each other's logs.
tar -C "$OUT" -czf "$OUT/logs-$stage.tgz" --exclude='logs-*.tgz' --exclude='*.json' --exclude='*.csv' . 2>/dev/null
find "$OUT" -maxdepth 1 -type f ! -name '*.json' ! -name '*.csv' ! -name 'logs-*.tgz' ! -name 'train-loss-*.png' -delete
rm -rf "$OUT/plots" # (in the archive)
exit $status
