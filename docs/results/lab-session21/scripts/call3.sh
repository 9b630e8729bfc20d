#!/usr/bin/env bash
# session 21 call 3: trees prio = working tree (as in call 2), g1k and gd1k as in call 2 (G, and G and dX, in
# gg_k_gemm_f32w up to 1024 tokens), lo1g / lo1k = g1k / gd1k with the graph captured on a stream of the greatest
# priority and, when G or dX is in gg_k_gemm_f32w, the side chain (conversions, dW2, dW1) on a stream of the least.
# Per case (068: 5 9 10 14; 073: 12 0 6 10), 2 rounds; block 4 all cases for prio and lo1k (its main chain also
# captured at the greatest priority there); traces of 068 c10, 073 c6, 068 c5, 073 c12.
set -uo pipefail
A=/tmp/s21c3; rm -rf $A; mkdir -p $A/out
t0=$(date +%s)
export LD_LIBRARY_PATH=$PWD/carry/cmocka/usr/lib/x86_64-linux-gnu
OUT=$A ROUNDS=0 bash scripts/lab/ab_bench.sh prio=. g1k=lab_tmp/g1k gd1k=lab_tmp/gd1k lo1g=lab_tmp/lo1g lo1k=lab_tmp/lo1k > $A/out/build.txt 2>&1
cat $A/out/build.txt
echo "setup done at $(( $(date +%s) - t0 )) s"
cases() { [ $1 = 2 ] && echo "5 9 10 14" || echo "12 0 6 10"; }
for r in 1 2; do for t in prio g1k gd1k lo1g lo1k; do for b in 2 3; do
  f=$A/$t-r$r-b$b.csv; rm -f $f
  for i in $(cases $b); do
    GG_TUNE_CACHE=$A/algos.txt timeout 40 $A/build-$t/bench/gg_bench --block $b --case $i --modes fast --iters 50 --warmup 10 \
      --csv $A/one.csv > /dev/null 2>> $A/$t-r$r.log || echo "$t r$r b$b c$i failed"
    [ -f $f ] && tail -n +2 $A/one.csv >> $f || cp $A/one.csv $f
  done
done; echo "round $r $t at $(( $(date +%s) - t0 )) s"; done; done
for r in 1 2; do for t in prio lo1k; do
  GG_TUNE_CACHE=$A/algos.txt timeout 120 $A/build-$t/bench/gg_bench --block 4 --modes fast --iters 50 --warmup 10 --csv $A/$t-r$r-b4.csv > /dev/null 2>> $A/$t-r$r.log || echo "$t r$r b4 failed"
done; done
python3 scripts/lab/ab_summary.py $A > $A/out/ab3-summary.txt 2>&1
head -70 $A/out/ab3-summary.txt
for t in prio g1k gd1k lo1g lo1k; do for bc in "2 10" "3 6" "2 5" "3 12"; do set -- $bc
  GG_TUNE_CACHE=$A/algos.txt timeout 30 $A/build-$t/bench/gg_bench --block $1 --case $2 --modes fast --iters 10 --warmup 3 --trace $A/out/trace-$t-$1-$2.csv > /dev/null 2>&1
done; done
echo "all done at $(( $(date +%s) - t0 )) s"
(cd $A && tar czf out/ab3-csv.tgz *.csv *.log algos.txt 2>/dev/null)
tar czf $OUT/call3.tgz -C $A out
