#!/usr/bin/env bash
# session 25 call 3 (one H200): block 4's split schedule (g alone on every SM; then dW and the bias sum on all SMs
# but N beside the chain's first rows on N SMs; the other rows' chain on every SM after the bias sum).
# (1) `scripts/device.sh tests` on the working tree (the split schedule from 4096 tokens, N = 32, 700 per mille).
# (2) One tree x = that working tree with its constants from the environment (GG_LAB_SPLIT_MIN_TOKENS, _CTAS,
# _PERMILLE, GG_LAB_NARROW_MIN_TOKENS): variants below, each tuning into its own autotune cache; block 4 whole,
# 3 rounds; then traces.
set -uo pipefail
A=/tmp/s25c3; rm -rf $A; mkdir -p $A/out
t0=$(date +%s)
GG_COMMIT=${GG_COMMIT:-working} OUT=$A/tests bash scripts/device.sh tests > $A/out/device-tests.txt 2>&1
tail -12 $A/out/device-tests.txt
echo "tests done at $(( $(date +%s) - t0 )) s"
export LD_LIBRARY_PATH=$PWD/carry/cmocka/usr/lib/x86_64-linux-gnu
OUT=$A ROUNDS=0 bash scripts/lab/ab_bench.sh x=lab_tmp/x > $A/out/build.txt 2>&1; cat $A/out/build.txt
B=$A/build-x/bench/gg_bench
variant() {
  case $1 in
    off) echo "GG_LAB_SPLIT_MIN_TOKENS=999999999";;
    n32p700) echo "GG_LAB_X=0";;
    n32p600) echo "GG_LAB_SPLIT_PERMILLE=600";;
    n32p800) echo "GG_LAB_SPLIT_PERMILLE=800";;
    n24p500) echo "GG_LAB_SPLIT_CTAS=24 GG_LAB_SPLIT_PERMILLE=500";;
    n40p850) echo "GG_LAB_SPLIT_CTAS=40 GG_LAB_SPLIT_PERMILLE=850";;
    n48p950) echo "GG_LAB_SPLIT_CTAS=48 GG_LAB_SPLIT_PERMILLE=950";;
    L700) echo "GG_LAB_NARROW_MIN_TOKENS=999999999";;
    L800) echo "GG_LAB_NARROW_MIN_TOKENS=999999999 GG_LAB_SPLIT_PERMILLE=800";;
  esac
}
V="off n32p700 n32p600 n32p800 n24p500 n40p850 n48p950 L700 L800"
for r in 1 2 3; do
  for v in $V; do
    [ $(( $(date +%s) - t0 )) -gt 400 ] && break 2
    env $(variant $v) GG_TUNE_CACHE=$A/algos-$v.txt timeout 60 $B --block 4 --modes fast --iters 50 --warmup 10 \
      --csv $A/$v-r$r-b4.csv > /dev/null 2>> $A/$v-r$r.log || echo "$v r$r failed"
  done
  echo "round $r at $(( $(date +%s) - t0 )) s"
done
python3 scripts/lab/ab_summary.py $A > $A/out/ab-summary.txt 2>&1; cat $A/out/ab-summary.txt | head -40
for vc in n32p700:1 n32p700:5 n32p700:11 L700:7; do v=${vc%:*} c=${vc#*:}
  env $(variant $v) GG_TUNE_CACHE=$A/algos-$v.txt timeout 30 $B --block 4 --case $c --modes fast --iters 10 --warmup 3 \
    --log debug --trace $A/out/trace-$v-4-$c.csv > /dev/null 2> $A/out/log-$v-4-$c.txt
  echo "== $v case $c"; grep -E 'GEMM|warn' $A/out/log-$v-4-$c.txt | head -6
  tail -n +2 $A/out/trace-$v-4-$c.csv | awk -F, '{printf "%s %s %s %.50s | %s %s %s\n", $5, $6, $7, $8, $(NF-2), $(NF-1), $NF}'
done
echo "all done at $(( $(date +%s) - t0 )) s"
(cd $A && tar czf out/ab-csv.tgz *.csv *.log algos-*.txt 2>/dev/null)
tar czf $OUT/call3.tgz -C $A out
