#!/usr/bin/env bash
# session 26 call 7 (one H200): block 4's bias sum on the third stream enqueued after dW instead of before the chain
# (so that dW and the chain take their SMs first and the sum, at the least priority, fills what they leave), below
# 1500 tokens and in the 56-SM range. Tree x = the working tree (ff76e6d's library) with knobs: GG_LAB_BIAS_LAST=1
# (the sum enqueued last), GG_LAB_BESIDE_MAX (the sum on the third stream below that many tokens; 1500). Variants:
# head, last, last10k, first10k. Block 4 whole, one shared cache A (3 rounds), then cache B (1 round); traces.
set -uo pipefail
A=/tmp/s26c7; rm -rf $A; mkdir -p $A/out
t0=$(date +%s)
export LD_LIBRARY_PATH=$PWD/carry/cmocka/usr/lib/x86_64-linux-gnu
OUT=$A ROUNDS=0 bash scripts/lab/ab_bench.sh x=lab_tmp/x > $A/out/build.txt 2>&1; cat $A/out/build.txt
variant() {
  case $1 in
    head) echo "GG_LAB_NONE=1";;
    last) echo "GG_LAB_BIAS_LAST=1";;
    last10k) echo "GG_LAB_BIAS_LAST=1 GG_LAB_BESIDE_MAX=10000";;
    first10k) echo "GG_LAB_BESIDE_MAX=10000";;
  esac
}
run() { # variant cache round
  env $(variant $1) GG_TUNE_CACHE=$A/algos-$2.txt timeout 90 $A/build-x/bench/gg_bench --block 4 --modes fast \
    --iters 50 --warmup 10 --csv $A/$1$2-r$3-b4.csv > /dev/null 2>> $A/$1$2-r$3.log || echo "$1$2 r$3 failed"
}
for r in 1 2 3; do for v in head last last10k first10k; do
  [ $(( $(date +%s) - t0 )) -gt 200 ] && break 2
  run $v A $r
done; echo "round $r at $(( $(date +%s) - t0 )) s"; done
for v in head last last10k; do [ $(( $(date +%s) - t0 )) -gt 240 ] && break; run $v B 1; done
python3 scripts/lab/ab_summary.py $A > $A/out/ab-summary.txt 2>&1; head -30 $A/out/ab-summary.txt
for vc in last10k:3 last10k:6 last:13; do
  [ $(( $(date +%s) - t0 )) -gt 280 ] && break
  v=${vc%:*} c=${vc#*:}
  env $(variant $v) GG_TUNE_CACHE=$A/algos-A.txt timeout 30 $A/build-x/bench/gg_bench --block 4 --case $c \
    --modes fast --iters 10 --warmup 3 --trace $A/out/trace-$v-4-$c.csv > /dev/null 2>&1
  echo "== $v case $c"
  tail -n +2 $A/out/trace-$v-4-$c.csv | awk -F, '{printf "%s %s %s %.40s | %s %s\n", $5, $6, $7, $8, $(NF-2), $(NF-1)}'
done
echo "all done at $(( $(date +%s) - t0 )) s"
(cd $A && tar czf out/ab-csv.tgz *.csv *.log algos*.txt 2>/dev/null)
tar czf $OUT/call7.tgz -C $A out
