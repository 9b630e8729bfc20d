#!/usr/bin/env bash
# session 25 call 4 (one H200): block 4's split schedule, second form: N = 36 SMs for the chain's first rows (dW runs
# 96 CTAs at the middle sizes), the bias sum on the side stream after the narrow chain, the other rows' chain after
# dW. (1) `scripts/device.sh tests` on the working tree (N = 36, 900 per mille). (2) One tree x = that working tree
# with its constants from the environment: variants below, ALL SHARING ONE autotune cache (call 3's per-variant
# caches made the GEMM choices differ between variants), block 4 whole, 3 rounds; then one more round of `off` and
# the default with a second, fresh cache; then traces.
set -uo pipefail
A=/tmp/s25c4; rm -rf $A; mkdir -p $A/out
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
    s36p900) echo "GG_LAB_X=0";;
    s36p1000) echo "GG_LAB_SPLIT_PERMILLE=1000";;
    s36p800) echo "GG_LAB_SPLIT_PERMILLE=800";;
    s32p900) echo "GG_LAB_SPLIT_CTAS=32";;
    s40p1000) echo "GG_LAB_SPLIT_CTAS=40 GG_LAB_SPLIT_PERMILLE=1000";;
    s24p700) echo "GG_LAB_SPLIT_CTAS=24 GG_LAB_SPLIT_PERMILLE=700";;
    L900) echo "GG_LAB_NARROW_MIN_TOKENS=999999999";;
  esac
}
V="off s36p900 s36p1000 s36p800 s32p900 s40p1000 s24p700 L900"
for r in 1 2 3; do
  for v in $V; do
    [ $(( $(date +%s) - t0 )) -gt 330 ] && break 2
    env $(variant $v) GG_TUNE_CACHE=$A/algos.txt timeout 60 $B --block 4 --modes fast --iters 50 --warmup 10 \
      --csv $A/$v-r$r-b4.csv > /dev/null 2>> $A/$v-r$r.log || echo "$v r$r failed"
  done
  echo "round $r at $(( $(date +%s) - t0 )) s"
done
for v in off s36p900; do
  env $(variant $v) GG_TUNE_CACHE=$A/algos-second.txt timeout 60 $B --block 4 --modes fast --iters 50 --warmup 10 \
    --csv $A/out/second-$v.csv > /dev/null 2>> $A/second-$v.log || echo "second $v failed"
done
python3 - $A/out/second-off.csv $A/out/second-s36p900.csv <<'PY' | tee $A/out/second-summary.txt
import csv, math, sys
a, b = ([float(r["graph_span_us"]) for r in csv.DictReader(open(f))] for f in sys.argv[1:3])
geo = lambda xs: math.exp(sum(map(math.log, xs)) / len(xs))
print("second cache: off %.2f us, s36p900 %.2f us (%.3fx)" % (geo(a), geo(b), geo(b) / geo(a)))
print(" ".join("%.2f" % (y / x) for x, y in zip(a, b)))
PY
python3 scripts/lab/ab_summary.py $A > $A/out/ab-summary.txt 2>&1; cat $A/out/ab-summary.txt | head -40
for vc in s36p900:1 s36p900:5 s36p900:11 L900:7 L900:12; do v=${vc%:*} c=${vc#*:}
  env $(variant $v) GG_TUNE_CACHE=$A/algos.txt timeout 30 $B --block 4 --case $c --modes fast --iters 10 --warmup 3 \
    --log debug --trace $A/out/trace-$v-4-$c.csv > /dev/null 2> $A/out/log-$v-4-$c.txt
  echo "== $v case $c"; grep -E 'GEMM|warn' $A/out/log-$v-4-$c.txt | head -6
  tail -n +2 $A/out/trace-$v-4-$c.csv | awk -F, '{printf "%s %s %s %.50s | %s %s %s\n", $5, $6, $7, $8, $(NF-2), $(NF-1), $NF}'
done
echo "all done at $(( $(date +%s) - t0 )) s"
(cd $A && tar czf out/ab-csv.tgz *.csv *.log algos*.txt 2>/dev/null)
tar czf $OUT/call4.tgz -C $A out
