#!/usr/bin/env bash
# session 21 call 6: base = 70f8a2c (library c1b2d6c), new = working tree: block 3's grad_bias2 on the side stream
# (least priority) beside G on the few-token routes, dY's plain conversion before G; the launch priorities only on the
# few-token routes (call 5's fewprio). Tests (small shapes, reductions, block 3 all cases, graphs) + memcheck of new first; per case (068: 5 9 10; 073: 12 0 6 10 3),
# 3 rounds; traces of 073 c12, c0, c6.
set -uo pipefail
A=/tmp/s21c6; rm -rf $A; mkdir -p $A/out
t0=$(date +%s)
export LD_LIBRARY_PATH=$PWD/carry/cmocka/usr/lib/x86_64-linux-gnu
OUT=$A ROUNDS=0 bash scripts/lab/ab_bench.sh base=lab_tmp/base new=. > $A/out/build.txt 2>&1
cat $A/out/build.txt
cmake --build $A/build-new --target test_blocks_gpu test_graphs_gpu > $A/out/build-tests.log 2>&1 || tail -20 $A/out/build-tests.log
T=$A/build-new/tests
{ for f in 'library_matches*' 'reductions*' 'block3*'; do GG_TEST_FILTER="$f" timeout 90 $T/test_blocks_gpu; echo "rc=$?"; done; } > $A/out/tests.log 2>&1
timeout 120 $A/build-new/tests/test_graphs_gpu >> $A/out/tests.log 2>&1; echo "graphs rc=$?" >> $A/out/tests.log
grep -E "rc=" $A/out/tests.log | tr '\n' ' '; echo
GG_TEST_FILTER='library_matches*' timeout 90 compute-sanitizer --tool memcheck $T/test_blocks_gpu > $A/out/memcheck.log 2>&1; echo "memcheck rc=$?" >> $A/out/memcheck.log
tail -2 $A/out/memcheck.log
echo "setup done at $(( $(date +%s) - t0 )) s"
cases() { [ $1 = 2 ] && echo "5 9 10" || echo "12 0 6 10 3"; }
for r in 1 2 3; do for t in base new; do for b in 2 3; do
  f=$A/$t-r$r-b$b.csv; rm -f $f
  for i in $(cases $b); do
    GG_TUNE_CACHE=$A/algos.txt timeout 40 $A/build-$t/bench/gg_bench --block $b --case $i --modes fast --iters 50 --warmup 10 \
      --csv $A/one.csv > /dev/null 2>> $A/$t-r$r.log || echo "$t r$r b$b c$i failed"
    [ -f $f ] && tail -n +2 $A/one.csv >> $f || cp $A/one.csv $f
  done
done; echo "round $r $t at $(( $(date +%s) - t0 )) s"; done; done
python3 scripts/lab/ab_summary.py $A > $A/out/ab6-summary.txt 2>&1
head -40 $A/out/ab6-summary.txt
for t in base new; do for bc in "3 12" "3 0" "3 6"; do set -- $bc
  GG_TUNE_CACHE=$A/algos.txt timeout 30 $A/build-$t/bench/gg_bench --block $1 --case $2 --modes fast --iters 10 --warmup 3 --trace $A/out/trace-$t-$1-$2.csv > /dev/null 2>&1
done; done
echo "all done at $(( $(date +%s) - t0 )) s"
(cd $A && tar czf out/ab6-csv.tgz *.csv *.log algos.txt 2>/dev/null)
tar czf $OUT/call6.tgz -C $A out
