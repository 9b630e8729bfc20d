#!/usr/bin/env bash
# scripts/official_run.sh - one stage of an official run at the commit given as $1, on a one-H200 machine:
#   tests  `GG_SHAPES=300 GG_SANITIZER_TIMEOUT=240 scripts/device.sh tests` (193 s at 44a780d: the tests, the
#          sweeps on both GPU paths, the faults, the soak, compute-sanitizer's memcheck), into $OUT/run-tests.tgz;
#   sanitizers  `GG_SANITIZER_TIMEOUT=300 scripts/device.sh sanitizers` (278 s at 44a780d: racecheck, synccheck and
#          initcheck on both GPU paths, racecheck with the sm_90a kernels first, 185 s), into
#          $OUT/run-sanitizers.tgz; its reliability-h200.json is the tests run's with those tools' facts merged in
#          (the one in docs/results/ on the GPU machine's copy of the tree: file the tests run first);
#   bench  `GG_PEERS_COMPILE=1 GG_PEERS_TIMEOUT=300 scripts/device.sh bench` (every mode), into $OUT/run-bench.tgz;
#   peers  `GG_PEERS_BUDGET=560 scripts/device.sh peers` (PyTorch's autotuned peers of blocks 2 and 3, about 8
#          minutes; a GG_PEERS_BUDGET set in the environment replaces the 560 s), into $OUT/run-peers.tgz, filed
#          with the bench run of the same commit;
#   step   `GG_CUDA_ARCH=90a GG_STEP_BUDGET=560 scripts/device.sh step` (the step graphs' models and their PyTorch
#          peers, torch.compile in its default mode and in max-autotune, about 8-9 minutes), into $OUT/run-step.tgz;
#   train  `GG_CUDA_ARCH=90a GG_TRAIN_BUDGET=330 scripts/device.sh train` (the README's main job, about 2 minutes),
#          into $OUT/run-train.tgz;
#   multigpu  `GG_CUDA_ARCH=90a scripts/device.sh multigpu` on a machine with two GPUs (nvidia-h200-x2): the
#          multigpu tests, memcheck on two GPUs, the step graph and the blocks data-parallel, into
#          $OUT/run-multigpu.tgz (filed on its own: file_run.sh SHA run-multigpu.tgz); GG_MULTIGPU_PARTS set in the
#          environment runs only those pieces (device.sh), to spread the stage over calls, each filed in turn.
# On a GPU other than an H200 nothing runs and it exits 3 (GG_OFFICIAL_ANY_GPU=1: it runs, for reading).
# Each stage is one call of the GPU machine (10 minutes at most a call: tests and bench do not fit one together, nor
# tests and sanitizers). Each archive holds the stage's output (<stage>.log) and everything it wrote;
# scripts/file_run.sh <sha> files them (tests, sanitizers and bench into run-<sha>/, step and train as the JSON and
# plots in results/).
#   bash scripts/official_run.sh SHA tests|sanitizers|bench|peers|step|train|multigpu
set -uo pipefail
sha=${1:?commit} stage=${2:?tests, sanitizers, bench, peers, step, train or multigpu}
out=${OUT:-$PWD/out}
mkdir -p "$out"
run=/tmp/run-$stage
rm -rf "$run"; mkdir -p "$run"
t0=$(date +%s)
# The stage's output is written beside $run, not in it: device.sh packs what $run holds into its logs archive at
# the end and removes the loose files. It joins the archive's top as <stage>.log afterwards.
log=/tmp/official-$stage.log
case $stage in # each stage's settings, as the header lists them
  tests) settings=(GG_SHAPES=300 GG_SANITIZER_TIMEOUT=240) ;;
  sanitizers) settings=(GG_SANITIZER_TIMEOUT=300) ;;
  bench) settings=(GG_PEERS_COMPILE=1 GG_PEERS_TIMEOUT=300) ;;
  peers) settings=(GG_PEERS_BUDGET=${GG_PEERS_BUDGET:-560}) ;; # less where less device time is left
  step) settings=(GG_CUDA_ARCH=90a GG_STEP_BUDGET=560) ;;
  train) settings=(GG_CUDA_ARCH=90a GG_TRAIN_BUDGET=330) ;;
  multigpu) settings=(GG_CUDA_ARCH=90a ${GG_MULTIGPU_PARTS:+GG_MULTIGPU_PARTS=$GG_MULTIGPU_PARTS}) ;;
  *) echo "official_run.sh: stage '$stage': tests, sanitizers, bench, peers, step, train or multigpu" >&2; exit 2 ;;
esac
# file_run.sh files results named for an H200 only from one, and the GPU machine may lend an H100 for a call that
# asked for an H200: there a stage would spend its minutes on a run that cannot be filed, so nothing runs
# (GG_OFFICIAL_ANY_GPU=1 runs it anyway, to read, not to file).
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
if [ "${GG_OFFICIAL_ANY_GPU:-0}" != 1 ] && [[ "$gpu" != *H200* ]]; then
  echo "official_run.sh: the GPU is '${gpu:-none found}', not an H200: file_run.sh would not file this run, so" \
    "nothing ran (GG_OFFICIAL_ANY_GPU=1 runs it anyway)" >&2
  exit 3
fi
env GG_COMMIT="$sha" "${settings[@]}" OUT="$run" bash scripts/device.sh "$stage" > "$log" 2>&1
rc=$?
cp "$log" "$run/$stage.log"
echo "$stage rc $rc at $(( $(date +%s) - t0 )) s"
grep -E "tests passed|PASSED|FAILED|exit [1-9]|SOL .*faster|fail|DEAD_RANK|speedup" "$run/$stage.log" | head -20
tar czf "$out/run-$stage.tgz" -C "$run" .
exit $rc
