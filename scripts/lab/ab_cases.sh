#!/usr/bin/env bash
# scripts/lab/ab_cases.sh - lab: an A/B over trees that scripts/lab/ab_bench.sh has built (ROUNDS=0 there), per case
# or per whole block. Every variant once per round (so drift hits all alike): for each block B with cases listed in
# CASESB, `gg_bench --block B --case I --modes fast` per case; for each block in WHOLE, `gg_bench --block B --modes
# fast`; into $OUT/<variant>-r<k>-b<B>.csv. The variants share one autotune cache. Then the summary
# (scripts/lab/ab_summary.py) goes to $OUT/out/ab-summary.txt and stdout. CACHE_PER_VARIANT=1: each variant tunes
# into a cache file of its own instead ($OUT/algos-<variant>.txt: for knobs that change the GEMMs' shapes or SMs).
#   OUT=... ROUNDS=3 [DEADLINE=s] CASES1="" CASES2="5 9 13" CASES3="0 12" CASES4="" WHOLE="4" \
#     bash scripts/lab/ab_cases.sh VARIANT ...
# A variant is a tree's name given to ab_bench.sh, or NAME=TREE@KEY=VALUE,KEY=VALUE: that tree run with those
# environment settings (a lab tree's knobs), e.g. base x n32=x@GG_LAB_CTAS=32.
# TRACES="VARIANT:BLOCK:CASE ...": after the summary, one traced replay of each (`--iters 10 --warmup 3 --trace`)
# into $OUT/out/trace-<variant>-<block>-<case>.csv, and per kernel a line on stdout (stream, start and length in us,
# name, CTAs, threads); TRACE_DEADLINE (seconds) stops them.
set -uo pipefail
OUT=${OUT:?set OUT}
mkdir -p "$OUT/out"
t0=$(date +%s)
# The autotune cache variant $1 uses.
cache_of() { [ "${CACHE_PER_VARIANT:-0}" = 1 ] && echo "$OUT/algos-$1.txt" || echo "$OUT/algos.txt"; }
# One gg_bench run of variant $1 (tree $2, environment in the envs array), block $3, round $4; more arguments
# (--case I) pass through; its CSV to $5.
bench() {
  local name=$1 tree=$2 b=$3 r=$4 csv=$5
  shift 5
  env "${envs[@]}" GG_TUNE_CACHE="$(cache_of "$name")" timeout "${CASE_TIMEOUT:-120}" \
    "$OUT/build-$tree/bench/gg_bench" --block "$b" "$@" --modes fast --iters "${ITERS:-50}" --warmup 10 --csv "$csv" \
    > /dev/null 2>> "$OUT/$name-r$r.log" || echo "$name r$r b$b $* failed"
}
# A variant's name, tree and environment (the envs array) from its spec.
parse() {
  name=${1%%=*} rest=${1#*=} envs=()
  tree=${rest%%@*}
  [ "$rest" != "$tree" ] && IFS=, read -r -a envs <<< "${rest#*@}"
  return 0
}
for r in $(seq 1 "${ROUNDS:-3}"); do
  # DEADLINE (seconds): no round starts after it, so that a device call ends with its summary written.
  [ -n "${DEADLINE:-}" ] && [ $(( $(date +%s) - t0 )) -gt "$DEADLINE" ] && echo "deadline: round $r not run" && break
  for spec in "$@"; do
    parse "$spec"
    for b in 1 2 3 4; do
      f=$OUT/$name-r$r-b$b.csv
      if [[ " ${WHOLE:-} " == *" $b "* ]]; then
        bench "$name" "$tree" "$b" "$r" "$f"
        continue
      fi
      var=CASES$b cases=${!var:-}
      [ -z "$cases" ] && continue
      rm -f "$f"
      for i in $cases; do
        bench "$name" "$tree" "$b" "$r" "$OUT/one.csv" --case "$i"
        if [ -f "$f" ]; then tail -n +2 "$OUT/one.csv" >> "$f"; else cp "$OUT/one.csv" "$f"; fi
      done
    done
    echo "round $r $name at $(( $(date +%s) - t0 )) s"
  done
done
python3 "$(dirname "$0")/ab_summary.py" "$OUT" > "$OUT/out/ab-summary.txt" 2>&1
cat "$OUT/out/ab-summary.txt"
for t in ${TRACES:-}; do
  [ -n "${TRACE_DEADLINE:-}" ] && [ $(( $(date +%s) - t0 )) -gt "$TRACE_DEADLINE" ] && echo "deadline: $t not traced" &&
    break
  IFS=: read -r v b c <<< "$t"
  tree=""
  for spec in "$@"; do [ "${spec%%=*}" = "$v" ] && parse "$spec"; done
  [ -z "$tree" ] && echo "$t: no variant $v" && continue # not another variant's tree and settings
  csv=$OUT/out/trace-$v-$b-$c.csv
  env "${envs[@]}" GG_TUNE_CACHE="$(cache_of "$v")" timeout 60 "$OUT/build-$tree/bench/gg_bench" --block "$b" \
    --case "$c" --modes fast --iters 10 --warmup 3 --trace "$csv" > /dev/null 2>&1 || echo "$t: trace failed"
  echo "== $v block $b case $c"
  tail -n +2 "$csv" | awk -F, '{printf "%s %s %s %.40s | %s %s\n", $5, $6, $7, $8, $(NF-2), $(NF-1)}'
done
