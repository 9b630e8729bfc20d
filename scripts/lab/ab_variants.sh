#!/usr/bin/env bash
# scripts/lab/ab_variants.sh - lab: whole blocks over variants of trees that scripts/lab/ab_bench.sh has built
# (ROUNDS=0 there), a variant being a built tree plus environment settings (a lab tree's knobs). Every variant once
# per round, so drift of clocks and temperature hits all alike; `gg_bench --block B --modes fast` per block, into
# $OUT/<variant>-r<k>-b<B>.csv and its log; the variants share one autotune cache. Then the summary
# (scripts/lab/ab_summary.py) goes to $OUT/out/ab-summary.txt and stdout.
#   OUT=... ROUNDS=3 BLOCKS="4" [DEADLINE=s] bash scripts/lab/ab_variants.sh NAME=TREE[@KEY=VALUE,KEY=VALUE] ...
# e.g. base=base n24=x@GG_LAB_MIN=4096 n32=x@GG_LAB_MIN=4096,GG_LAB_CTAS=32 (TREE: a name given to ab_bench.sh).
set -uo pipefail
OUT=${OUT:?set OUT}
mkdir -p "$OUT/out"
t0=$(date +%s)
for r in $(seq 1 "${ROUNDS:-3}"); do
  # DEADLINE (seconds): no round starts after it, so that a device call ends with its summary written.
  [ -n "${DEADLINE:-}" ] && [ $(( $(date +%s) - t0 )) -gt "$DEADLINE" ] && echo "deadline: round $r not run" && break
  for spec in "$@"; do
    name=${spec%%=*} rest=${spec#*=} tree=${rest%%@*} envs=()
    [ "$rest" != "$tree" ] && IFS=, read -r -a envs <<< "${rest#*@}"
    for b in ${BLOCKS:-1 2 3 4}; do
      env "${envs[@]}" GG_TUNE_CACHE="$OUT/algos.txt" timeout "${RUN_TIMEOUT:-120}" "$OUT/build-$tree/bench/gg_bench" \
        --block "$b" --modes fast --iters "${ITERS:-50}" --warmup 10 --csv "$OUT/$name-r$r-b$b.csv" > /dev/null \
        2>> "$OUT/$name-r$r.log" || echo "$name round $r block $b failed"
    done
  done
  echo "round $r at $(( $(date +%s) - t0 )) s"
done
python3 "$(dirname "$0")/ab_summary.py" "$OUT" > "$OUT/out/ab-summary.txt" 2>&1
cat "$OUT/out/ab-summary.txt"
