#!/usr/bin/env bash
# session 24 call 9 (one H200): block 4's narrow chain launched in thread-block clusters. One tree x = HEAD
# (14f14d2) with GG_LAB_MIN (the narrow schedule's minimum tokens) and GG_LAB_CLUSTER (the narrow chain's cluster
# size) read from the environment. Variants: head (x's defaults: from 32768 tokens, no clusters); c1 (from 4096, no
# clusters); c4 and c8 (from 4096, clusters of 4 and 8). Block 4 whole, 2 rounds; traces of case 1 (7892 tokens).
set -uo pipefail
A=/tmp/s24c9; rm -rf $A; mkdir -p $A/out
t0=$(date +%s)
export LD_LIBRARY_PATH=$PWD/carry/cmocka/usr/lib/x86_64-linux-gnu
OUT=$A ROUNDS=0 bash scripts/lab/ab_bench.sh x=lab_tmp/x > $A/out/build.txt 2>&1
cat $A/out/build.txt
variant() {
  case $1 in head) echo "GG_LAB_X=0";; c1) echo "GG_LAB_MIN=4096";; c4) echo "GG_LAB_MIN=4096 GG_LAB_CLUSTER=4";;
    c8) echo "GG_LAB_MIN=4096 GG_LAB_CLUSTER=8";; esac
}
for r in 1 2; do
  for v in head c1 c4 c8; do
    [ $(( $(date +%s) - t0 )) -gt 170 ] && break 2
    env $(variant $v) GG_TUNE_CACHE=$A/algos.txt timeout 60 $A/build-x/bench/gg_bench --block 4 --modes fast \
      --iters 50 --warmup 10 --csv $A/$v-r$r-b4.csv > /dev/null 2>> $A/$v-r$r.log || echo "$v r$r failed"
  done
  echo "round $r at $(( $(date +%s) - t0 )) s"
done
python3 scripts/lab/ab_summary.py $A > $A/out/ab-summary.txt 2>&1; head -30 $A/out/ab-summary.txt
for v in c1 c8; do
  env $(variant $v) GG_TUNE_CACHE=$A/algos.txt timeout 30 $A/build-x/bench/gg_bench --block 4 --case 1 --modes fast \
    --iters 10 --warmup 3 --trace $A/out/trace-$v-4-1.csv > /dev/null 2>&1
done
echo "all done at $(( $(date +%s) - t0 )) s"
(cd $A && tar czf out/ab-csv.tgz *.csv *.log algos.txt 2>/dev/null)
tar czf $OUT/call9.tgz -C $A out
