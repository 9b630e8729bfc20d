#!/usr/bin/env bash
# session 26 call 2 (one H200): block 4's narrow schedule below 10000 tokens, where its bias sum runs, and how many
# rows a column-sum CTA reads. One tree x = 71d39af's working tree with knobs: GG_LAB_MIN (narrow schedule from that
# many tokens), GG_LAB_CTAS_SMALL (narrow SMs below 10000 tokens; 40 above), GG_LAB_BIAS (below 32768 tokens: 0 on
# the side stream after the chain, 1 on the side stream before g, 2 on a third stream beside dW and the chain, 3 on
# the caller's stream after g, before dW), GG_LAB_ROWS (a column sum's minimum rows per lane, 8). Block 4 whole,
# every variant in one shared autotune cache, 2 rounds; traces.
set -uo pipefail
A=/tmp/s26c2; rm -rf $A; mkdir -p $A/out
t0=$(date +%s)
export LD_LIBRARY_PATH=$PWD/carry/cmocka/usr/lib/x86_64-linux-gnu
OUT=$A ROUNDS=0 bash scripts/lab/ab_bench.sh x=lab_tmp/x > $A/out/build.txt 2>&1; cat $A/out/build.txt
variant() {
  case $1 in
    off) echo "GG_LAB_NONE=1";;
    offr2) echo "GG_LAB_ROWS=2";;
    n40) echo "GG_LAB_MIN=257";;
    n40b1) echo "GG_LAB_MIN=257 GG_LAB_BIAS=1";;
    n40b2) echo "GG_LAB_MIN=257 GG_LAB_BIAS=2";;
    n40b3) echo "GG_LAB_MIN=257 GG_LAB_BIAS=3";;
    n40b2r2) echo "GG_LAB_MIN=257 GG_LAB_BIAS=2 GG_LAB_ROWS=2";;
    n48) echo "GG_LAB_MIN=1000 GG_LAB_CTAS_SMALL=48";;
    n56) echo "GG_LAB_MIN=1000 GG_LAB_CTAS_SMALL=56";;
    n64) echo "GG_LAB_MIN=1000 GG_LAB_CTAS_SMALL=64";;
    n56b2) echo "GG_LAB_MIN=1000 GG_LAB_CTAS_SMALL=56 GG_LAB_BIAS=2";;
    n56b3) echo "GG_LAB_MIN=1000 GG_LAB_CTAS_SMALL=56 GG_LAB_BIAS=3";;
  esac
}
V="off offr2 n40 n40b1 n40b2 n40b3 n40b2r2 n48 n56 n64 n56b2 n56b3"
run() { # variant round
  env $(variant $1) GG_TUNE_CACHE=$A/algos.txt timeout 90 $A/build-x/bench/gg_bench --block 4 --modes fast \
    --iters 50 --warmup 10 --csv $A/$1-r$2-b4.csv > /dev/null 2>> $A/$1-r$2.log || echo "$1 r$2 failed"
}
for r in 1 2; do
  for v in $V; do
    [ $(( $(date +%s) - t0 )) -gt 380 ] && break 2
    run $v $r
  done
  echo "round $r at $(( $(date +%s) - t0 )) s"
done
python3 scripts/lab/ab_summary.py $A > $A/out/ab-summary.txt 2>&1; head -60 $A/out/ab-summary.txt
for vc in n40b2:13 n40b2:2 n40b2r2:13 n56b2:6 offr2:3; do
  [ $(( $(date +%s) - t0 )) -gt 470 ] && break
  v=${vc%:*} c=${vc#*:}
  env $(variant $v) GG_TUNE_CACHE=$A/algos.txt timeout 30 $A/build-x/bench/gg_bench --block 4 --case $c \
    --modes fast --iters 10 --warmup 3 --trace $A/out/trace-$v-4-$c.csv > /dev/null 2>&1
  echo "== $v case $c"
  tail -n +2 $A/out/trace-$v-4-$c.csv | awk -F, '{printf "%s %s %s %.40s | %s %s\n", $5, $6, $7, $8, $(NF-2), $(NF-1)}'
done
echo "all done at $(( $(date +%s) - t0 )) s"
(cd $A && tar czf out/ab-csv.tgz *.csv *.log algos*.txt 2>/dev/null)
tar czf $OUT/call2.tgz -C $A out
