#!/usr/bin/env bash
# session 26 call 1 (one H200): `scripts/device.sh tests` at 71d39af, then block 4's narrow schedule below 10000
# tokens. One tree x = 71d39af's working tree with block 4's constants from the environment: GG_LAB_MIN (narrow
# schedule from that many tokens), GG_LAB_CTAS (narrow SMs), GG_LAB_SWAP=1 (chain on the caller's stream, dW on the
# side stream). Variants: off (defaults), n40 (from 257 tokens, 40 SMs), n24, n56, s40 (n40 swapped). Block 4 whole,
# all variants sharing cache A, 3 rounds; then off, n40, n56 once each with fresh caches (set B); traces of n40.
set -uo pipefail
A=/tmp/s26c1; rm -rf $A; mkdir -p $A/out $A/tests
t0=$(date +%s)
GG_COMMIT=71d39af OUT=$A/tests bash scripts/device.sh tests > $A/out/device-tests.txt 2>&1; echo "device.sh tests rc $?"
cp $A/tests/* $A/out/ 2>/dev/null
grep -E "tests passed|PASSED|FAILED|memcheck" $A/out/device-tests.txt
echo "tests done at $(( $(date +%s) - t0 )) s"
export LD_LIBRARY_PATH=$PWD/carry/cmocka/usr/lib/x86_64-linux-gnu
OUT=$A ROUNDS=0 bash scripts/lab/ab_bench.sh x=lab_tmp/x > $A/out/build.txt 2>&1; cat $A/out/build.txt
variant() {
  case $1 in
    off) echo "GG_LAB_NONE=1";;
    n40) echo "GG_LAB_MIN=257";;
    n24) echo "GG_LAB_MIN=257 GG_LAB_CTAS=24";;
    n56) echo "GG_LAB_MIN=257 GG_LAB_CTAS=56";;
    s40) echo "GG_LAB_MIN=257 GG_LAB_SWAP=1";;
  esac
}
run() { # variant cache-tag round
  env $(variant $1) GG_TUNE_CACHE=$A/algos-$2.txt timeout 90 $A/build-x/bench/gg_bench --block 4 --modes fast \
    --iters 50 --warmup 10 --csv $A/$1$2-r$3-b4.csv > /dev/null 2>> $A/$1$2-r$3.log || echo "$1$2 r$3 failed"
}
for r in 1 2 3; do
  for v in off n40 n24 n56 s40; do
    [ $(( $(date +%s) - t0 )) -gt 330 ] && break 2
    run $v A $r
  done
  echo "round $r at $(( $(date +%s) - t0 )) s"
done
for v in off n40 n56; do
  [ $(( $(date +%s) - t0 )) -gt 400 ] && break
  run $v B$v 1
done
echo "set B at $(( $(date +%s) - t0 )) s"
python3 scripts/lab/ab_summary.py $A > $A/out/ab-summary.txt 2>&1; head -60 $A/out/ab-summary.txt
for c in 2 13 6; do
  [ $(( $(date +%s) - t0 )) -gt 450 ] && break
  env $(variant n40) GG_TUNE_CACHE=$A/algos-A.txt timeout 30 $A/build-x/bench/gg_bench --block 4 --case $c \
    --modes fast --iters 10 --warmup 3 --log debug --trace $A/out/trace-n40-4-$c.csv > /dev/null 2> $A/out/log-n40-$c.txt
  echo "== n40 case $c"
  tail -n +2 $A/out/trace-n40-4-$c.csv | awk -F, '{printf "%s %s %s %.40s | %s %s\n", $5, $6, $7, $8, $(NF-2), $(NF-1)}'
done
echo "all done at $(( $(date +%s) - t0 )) s"
(cd $A && tar czf out/ab-csv.tgz *.csv *.log algos*.txt 2>/dev/null)
tar czf $OUT/call1.tgz -C $A out
