#!/usr/bin/env bash
# scripts/lab/ddp_sweep.sh - lab: ddp_scaling under several settings on a 2-GPU machine, after
# `bash scripts/device.sh build`. Each argument is NAME:BLOCK:COMM_SMS[:VAR=VALUE,...] (COMM_SMS > 0 also sets NCCL's
# channel count to it); every run's JSON lands in $OUT/sweep/NAME-bBLOCK.json, its output in $OUT/sweep.log.
#   bash scripts/lab/ddp_sweep.sh W:3:16:GG_LAB_DW2_SPLIT=0 S4:3:16:GG_LAB_DW2_SPLIT=4 ...
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
OUT=${OUT:-$root/out}
mkdir -p "$OUT/sweep"
export NCCL_NVLS_ENABLE=0 GG_TUNE_CACHE=${GG_TUNE_CACHE:-$root/build-device/gemm-algos.txt}
for spec in "$@"; do
  IFS=: read -r name block cs vars args <<< "$spec"
  envs=()
  # COMM_SMS > 0 sets NCCL's channels to it unless VARS set them (or say NOCH: NCCL's choice)
  [ "$cs" -gt 0 ] && [[ "${vars:-}" != *NCHANNELS* && "${vars:-}" != *NOCH* ]] && envs+=(NCCL_MIN_NCHANNELS=$cs NCCL_MAX_NCHANNELS=$cs)
  vars=${vars//NOCH/}; vars=${vars#,}
  [ -n "${vars:-}" ] && IFS=, read -ra extra <<< "$vars" && envs+=("${extra[@]}")
  echo "== $name block $block comm_sms $cs ${envs[*]}" | tee -a "$OUT/sweep.log"
  t0=$(date +%s)
  env "${envs[@]}" timeout 200 "$root/build-device/examples/ddp_scaling" --block "$block" --steps "${GG_STEPS:-40}" \
    --comm-sms "$cs" ${args:+${args//,/ }} --json "$OUT/sweep/$name-b$block.json" >> "$OUT/sweep.log" 2>&1
  echo "rc $? in $(( $(date +%s) - t0 )) s: $(tail -1 "$OUT/sweep.log")" | tee -a "$OUT/sweep.log"
done
