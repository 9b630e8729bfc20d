#!/usr/bin/env bash
# session 22 call 4 (one H200): base = c153e65, fused = the working tree (G's epilogue makes R and block 3's
# grad_bias1 as in call 3, without the L2 prefetch (nopf won there), x loaded 16 rows at a time), b8 = fused with 8
# rows at a time. Tests of fused first (small shapes, reductions, accumulate) and memcheck
# (small shapes); per case at few tokens (068: 5 13 9 10 11 14; 073: 12 0 6 8 10 14), 3 rounds;
# traces of 068 c5, c10 and 073 c12, c10.
set -uo pipefail
A=/tmp/s22c4; rm -rf $A; mkdir -p $A/out
t0=$(date +%s)
export LD_LIBRARY_PATH=$PWD/carry/cmocka/usr/lib/x86_64-linux-gnu
OUT=$A ROUNDS=0 bash scripts/lab/ab_bench.sh base=lab_tmp/base fused=. b8=lab_tmp/b8 > $A/out/build.txt 2>&1
cat $A/out/build.txt
cmake --build $A/build-fused --target test_blocks_gpu test_graphs_gpu > $A/out/build-tests.log 2>&1 || tail -20 $A/out/build-tests.log
T=$A/build-fused/tests
{ for f in 'library_matches*' 'reductions*' 'few_token*'; do
    GG_TEST_FILTER="$f" timeout 120 $T/test_blocks_gpu; echo "$f rc=$?"; done; } > $A/out/tests.log 2>&1
grep -E "rc=" $A/out/tests.log | tr '\n' ' '; echo
for f in 'library_matches*'; do
  GG_TEST_FILTER="$f" timeout 120 compute-sanitizer --tool memcheck --error-exitcode 9 $T/test_blocks_gpu >> $A/out/memcheck.log 2>&1
  echo "memcheck $f rc=$?" | tee -a $A/out/memcheck.log
done
echo "setup done at $(( $(date +%s) - t0 )) s"
OUT=$A ROUNDS=3 CASES2="5 13 9 10 11 14" CASES3="12 0 6 8 10 14" bash scripts/lab/ab_cases.sh base fused b8 | head -60
for t in base fused; do for bc in "2 5" "2 10" "3 12" "3 10"; do set -- $bc
  GG_TUNE_CACHE=$A/algos.txt timeout 30 $A/build-$t/bench/gg_bench --block $1 --case $2 --modes fast --iters 10 --warmup 3 \
    --trace $A/out/trace-$t-$1-$2.csv > /dev/null 2>&1
done; done
echo "all done at $(( $(date +%s) - t0 )) s"
(cd $A && tar czf out/ab-csv.tgz *.csv *.log algos.txt 2>/dev/null)
tar czf $OUT/call4.tgz -C $A out
