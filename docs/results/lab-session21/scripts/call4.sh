#!/usr/bin/env bash
# session 21 call 4: trees head = c1b2d6c (working tree), late = head with dW2 forked after R instead of after G when
# dX is in gg_k_gemm_f32w at <= 512 tokens (so dX, not dW2, takes the SMs after gelu'), latelo = late with the side
# chain on a stream of the least priority on that route. Per case (068: 5 9 13 10; 073: 12 0 6), 3 rounds; traces of
# 068 c5, 073 c12, 068 c9, 073 c0.
set -uo pipefail
A=/tmp/s21c4; rm -rf $A; mkdir -p $A/out
t0=$(date +%s)
export LD_LIBRARY_PATH=$PWD/carry/cmocka/usr/lib/x86_64-linux-gnu
OUT=$A ROUNDS=0 bash scripts/lab/ab_bench.sh head=. late=lab_tmp/late latelo=lab_tmp/latelo > $A/out/build.txt 2>&1
cat $A/out/build.txt
echo "setup done at $(( $(date +%s) - t0 )) s"
cases() { [ $1 = 2 ] && echo "5 9 13 10" || echo "12 0 6"; }
for r in 1 2 3; do for t in head late latelo; do for b in 2 3; do
  f=$A/$t-r$r-b$b.csv; rm -f $f
  for i in $(cases $b); do
    GG_TUNE_CACHE=$A/algos.txt timeout 40 $A/build-$t/bench/gg_bench --block $b --case $i --modes fast --iters 50 --warmup 10 \
      --csv $A/one.csv > /dev/null 2>> $A/$t-r$r.log || echo "$t r$r b$b c$i failed"
    [ -f $f ] && tail -n +2 $A/one.csv >> $f || cp $A/one.csv $f
  done
done; echo "round $r $t at $(( $(date +%s) - t0 )) s"; done; done
python3 scripts/lab/ab_summary.py $A > $A/out/ab4-summary.txt 2>&1
head -70 $A/out/ab4-summary.txt
for t in head late latelo; do for bc in "2 5" "3 12" "2 9" "3 0"; do set -- $bc
  GG_TUNE_CACHE=$A/algos.txt timeout 30 $A/build-$t/bench/gg_bench --block $1 --case $2 --modes fast --iters 10 --warmup 3 --trace $A/out/trace-$t-$1-$2.csv > /dev/null 2>&1
done; done
echo "all done at $(( $(date +%s) - t0 )) s"
(cd $A && tar czf out/ab4-csv.tgz *.csv *.log algos.txt 2>/dev/null)
tar czf $OUT/call4.tgz -C $A out
