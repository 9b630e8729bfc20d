#!/usr/bin/env bash
# pick_sweep.sh - lab (session 11, needs lab-patch.diff): for each block and each cuBLASLt candidate index of the GEMM that leaves SMs to
# NCCL (GG_LAB_TUNE_PICK), one ddp_scaling run with --verbose and a one-step trace; ROUNDS round-robin rounds.
#   BLOCKS="3 2" PICKS="0 1 2 3" ROUNDS=2 bash scripts/lab/pick_sweep.sh   (after scripts/device.sh build)
set -uo pipefail
root=$(cd "$(dirname "$0")/../../.." && pwd) # run from docs/results/ddp-pick-session11/
OUT=${OUT:-$root/out}
mkdir -p "$OUT/pick"
export NCCL_NVLS_ENABLE=0 GG_TUNE_CACHE=${GG_TUNE_CACHE:-$root/build-device/gemm-algos.txt}
for r in $(seq 1 "${ROUNDS:-2}"); do
  for b in ${BLOCKS:-3 2}; do
    for p in ${PICKS:-auto 0 1 2 3 4 5 6 7}; do
      name=b$b-p$p-r$r
      envs=(); [ "$p" != auto ] && envs=(GG_LAB_TUNE_PICK=$p)
      env "${envs[@]}" timeout 120 "$root/build-device/examples/ddp_scaling" --block "$b" --steps "${GG_STEPS:-30}" \
        --verbose --trace "$OUT/pick/$name.trace.csv" --json "$OUT/pick/$name.json" > "$OUT/pick/$name.log" 2>&1
      echo "$name rc $?: $(grep -E '^[0-9]{3}_' "$OUT/pick/$name.log" | tail -1)"
    done
  done
done
