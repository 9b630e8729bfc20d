#!/usr/bin/env bash
# scripts/lab/ab_cases.sh - lab: a per-case A/B over trees that scripts/lab/ab_bench.sh has built (ROUNDS=0 there).
# Every tree once per round runs `gg_bench --block B --case I --modes fast` for each listed case (so drift hits all
# trees alike), appending to $OUT/<tree>-r<k>-b<B>.csv; the trees share one autotune cache. Then the summary
# (scripts/lab/ab_summary.py) goes to $OUT/out/ab-summary.txt and stdout. Blocks without cases are skipped.
#   OUT=... ROUNDS=3 [DEADLINE=s] CASES1="" CASES2="5 9 13" CASES3="0 12" CASES4="" \
#     bash scripts/lab/ab_cases.sh TREE ...
set -uo pipefail
OUT=${OUT:?set OUT}
mkdir -p "$OUT/out"
t0=$(date +%s)
for r in $(seq 1 "${ROUNDS:-3}"); do
  # DEADLINE (seconds): no round starts after it, so that a device call ends with its summary written.
  [ -n "${DEADLINE:-}" ] && [ $(( $(date +%s) - t0 )) -gt "$DEADLINE" ] && echo "deadline: round $r not run" && break
  for t in "$@"; do
    for b in 1 2 3 4; do
      var=CASES$b cases=${!var:-}
      [ -z "$cases" ] && continue
      f=$OUT/$t-r$r-b$b.csv
      rm -f "$f"
      for i in $cases; do
        GG_TUNE_CACHE=$OUT/algos.txt timeout "${CASE_TIMEOUT:-40}" "$OUT/build-$t/bench/gg_bench" --block "$b" \
          --case "$i" --modes fast --iters "${ITERS:-50}" --warmup 10 --csv "$OUT/one.csv" > /dev/null \
          2>> "$OUT/$t-r$r.log" || echo "$t r$r b$b c$i failed"
        if [ -f "$f" ]; then tail -n +2 "$OUT/one.csv" >> "$f"; else cp "$OUT/one.csv" "$f"; fi
      done
    done
    echo "round $r $t at $(( $(date +%s) - t0 )) s"
  done
done
python3 "$(dirname "$0")/ab_summary.py" "$OUT" > "$OUT/out/ab-summary.txt" 2>&1
cat "$OUT/out/ab-summary.txt"
