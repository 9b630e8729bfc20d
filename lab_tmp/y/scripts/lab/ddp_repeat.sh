#!/usr/bin/env bash
# scripts/lab/ddp_repeat.sh - lab: REPEATS rounds of ddp_sweep.sh over the same settings (round-robin, so every
# setting sees the same drift of clocks and temperature); the runs of round r are named NAME-rR.
#   REPEATS=4 bash scripts/lab/ddp_repeat.sh SPEC...
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
for r in $(seq 1 "${REPEATS:-3}"); do
  specs=()
  for spec in "$@"; do specs+=("${spec%%:*}-r$r:${spec#*:}"); done
  bash "$here/ddp_sweep.sh" "${specs[@]}" > /dev/null
done
