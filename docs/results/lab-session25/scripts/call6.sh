#!/usr/bin/env bash
# session 25 call 6 (one H200): which split-schedule constants hold up over autotune caches. One tree x = 0492d97's
# working tree (GEMMs with an SM target tuned beside a neighbour) with block 4's constants from the environment, and
# GG_LAB_LARGE_MIN / _CTAS / _PERMILLE (other constants from that many tokens). Variants: off (the split schedule
# off: fork-first below 32768 tokens, the chunked narrow schedule above); L900 (split from 4096, 36 SMs, 900 per
# mille, no chunked schedule); L40 (the same with 40 SMs and 1000 per mille); C (40 / 1000 below 32768 tokens,
# 36 / 900 above). Block 4 whole, each variant once with each of three fresh autotune caches (suffixes A, B, C).
set -uo pipefail
A=/tmp/s25c6; rm -rf $A; mkdir -p $A/out
t0=$(date +%s)
export LD_LIBRARY_PATH=$PWD/carry/cmocka/usr/lib/x86_64-linux-gnu
OUT=$A ROUNDS=0 bash scripts/lab/ab_bench.sh x=lab_tmp/x > $A/out/build.txt 2>&1; cat $A/out/build.txt
variant() {
  case $1 in
    off) echo "GG_LAB_SPLIT_MIN_TOKENS=999999999";;
    L900) echo "GG_LAB_NARROW_MIN_TOKENS=999999999";;
    L40) echo "GG_LAB_NARROW_MIN_TOKENS=999999999 GG_LAB_SPLIT_CTAS=40 GG_LAB_SPLIT_PERMILLE=1000";;
    C) echo "GG_LAB_NARROW_MIN_TOKENS=999999999 GG_LAB_SPLIT_CTAS=40 GG_LAB_SPLIT_PERMILLE=1000 GG_LAB_LARGE_MIN=32768";;
  esac
}
for set in A B C; do
  for v in off L900 L40 C; do
    [ $(( $(date +%s) - t0 )) -gt 300 ] && break 2
    env $(variant $v) GG_TUNE_CACHE=$A/algos-$v$set.txt timeout 90 $A/build-x/bench/gg_bench --block 4 --modes fast \
      --iters 50 --warmup 10 --csv $A/$v$set-r1-b4.csv > /dev/null 2>> $A/$v$set-r1.log || echo "$v$set failed"
  done
  echo "cache set $set at $(( $(date +%s) - t0 )) s"
done
python3 scripts/lab/ab_summary.py $A > $A/out/ab-summary.txt 2>&1; cat $A/out/ab-summary.txt | head -40
echo "all done at $(( $(date +%s) - t0 )) s"
(cd $A && tar czf out/ab-csv.tgz *.csv *.log algos*.txt 2>/dev/null)
tar czf $OUT/call6.tgz -C $A out
