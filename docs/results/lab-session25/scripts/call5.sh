#!/usr/bin/env bash
# session 25 call 5 (one H200): GEMMs with an SM target autotuned beside a neighbour (fp32 -> fp16 passes on the SMs
# they leave; src/gemm/tune.c), and block 4's split schedule with them. (1) `scripts/device.sh tests` on the working
# tree. (2) Trees: base = 7b95b03 (tuning alone); x = the working tree with block 4's split constants from the
# environment. Block 4 whole over variants of x, each variant twice with its own fresh autotune cache (suffix A:
# rounds 1-2, suffix B: rounds 3-4), so that the comparison shows whether a gain survives another set of choices.
# Blocks 2 and 3 whole, base against x, each with its own fresh cache, 2 rounds. Then traces.
set -uo pipefail
A=/tmp/s25c5; rm -rf $A; mkdir -p $A/out
t0=$(date +%s)
GG_COMMIT=${GG_COMMIT:-working} OUT=$A/tests bash scripts/device.sh tests > $A/out/device-tests.txt 2>&1
tail -8 $A/out/device-tests.txt
echo "tests done at $(( $(date +%s) - t0 )) s"
export LD_LIBRARY_PATH=$PWD/carry/cmocka/usr/lib/x86_64-linux-gnu
OUT=$A ROUNDS=0 bash scripts/lab/ab_bench.sh base=lab_tmp/base x=lab_tmp/x > $A/out/build.txt 2>&1; cat $A/out/build.txt
variant() {
  case $1 in
    off) echo "GG_LAB_SPLIT_MIN_TOKENS=999999999";;
    s36p900) echo "GG_LAB_X=0";;
    s40p1000) echo "GG_LAB_SPLIT_CTAS=40 GG_LAB_SPLIT_PERMILLE=1000";;
    s24p700) echo "GG_LAB_SPLIT_CTAS=24 GG_LAB_SPLIT_PERMILLE=700";;
    L900) echo "GG_LAB_NARROW_MIN_TOKENS=999999999";;
  esac
}
V="off s36p900 s40p1000 s24p700 L900"
for r in 1 2 3 4; do
  set=A; [ $r -gt 2 ] && set=B
  for v in $V; do
    [ $(( $(date +%s) - t0 )) -gt 330 ] && break 2
    env $(variant $v) GG_TUNE_CACHE=$A/algos-$v$set.txt timeout 90 $A/build-x/bench/gg_bench --block 4 --modes fast \
      --iters 50 --warmup 10 --csv $A/$v$set-r$r-b4.csv > /dev/null 2>> $A/$v$set-r$r.log || echo "$v$set r$r failed"
  done
  echo "block 4 round $r at $(( $(date +%s) - t0 )) s"
done
for r in 1 2; do for t in base x; do for b in 2 3; do
  [ $(( $(date +%s) - t0 )) -gt 450 ] && break 3
  GG_TUNE_CACHE=$A/algos-ffn-$t.txt timeout 90 $A/build-$t/bench/gg_bench --block $b --modes fast --iters 50 \
    --warmup 10 --csv $A/ffn$t-r$r-b$b.csv > /dev/null 2>> $A/ffn$t-r$r.log || echo "ffn $t r$r b$b failed"
done; done; echo "ffn round $r at $(( $(date +%s) - t0 )) s"; done
python3 scripts/lab/ab_summary.py $A > $A/out/ab-summary.txt 2>&1; grep -A12 '^==' $A/out/ab-summary.txt | head -60
sed -n '/case *M *offA/,/^$/p' $A/out/ab-summary.txt | head -20
for vc in s36p900A:1 s36p900A:5; do v=${vc%:*} c=${vc#*:}
  env $(variant ${v%[AB]}) GG_TUNE_CACHE=$A/algos-$v.txt timeout 30 $A/build-x/bench/gg_bench --block 4 --case $c \
    --modes fast --iters 10 --warmup 3 --log debug --trace $A/out/trace-$v-4-$c.csv > /dev/null 2> $A/out/log-$v-4-$c.txt
  echo "== $v case $c"; grep -E 'GEMM|warn' $A/out/log-$v-4-$c.txt | head -6
  tail -n +2 $A/out/trace-$v-4-$c.csv | awk -F, '{printf "%s %s %s %.50s | %s %s %s\n", $5, $6, $7, $8, $(NF-2), $(NF-1), $NF}'
done
echo "all done at $(( $(date +%s) - t0 )) s"
(cd $A && tar czf out/ab-csv.tgz *.csv *.log algos*.txt 2>/dev/null)
tar czf $OUT/call5.tgz -C $A out
