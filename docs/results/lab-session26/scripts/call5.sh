#!/usr/bin/env bash
# session 26 call 5 (one H200): block 4's one-launch kernel (M <= 256) with the chain's operands prefetched before
# g's k-loop. Trees: base = a208450; x = the working tree. x's test_blocks_gpu (every case, 10 rounds) and memcheck
# over its small shapes; then block 4 whole, base and x sharing one autotune cache, 4 rounds.
set -uo pipefail
A=/tmp/s26c5; rm -rf $A; mkdir -p $A/out
t0=$(date +%s)
export LD_LIBRARY_PATH=$PWD/carry/cmocka/usr/lib/x86_64-linux-gnu
OUT=$A ROUNDS=0 bash scripts/lab/ab_bench.sh base=lab_tmp/base x=lab_tmp/x > $A/out/build.txt 2>&1; cat $A/out/build.txt
cmake --build $A/build-x --target test_blocks_gpu >> $A/out/build.txt 2>&1 || echo "build tests failed"
GG_TUNE_CACHE=$A/algos.txt timeout 120 $A/build-x/tests/test_blocks_gpu > $A/out/tests-x.log 2>&1
echo "== x tests: $(grep -E '^\[  (PASSED|FAILED) ' $A/out/tests-x.log | tr '\n' ' ') at $(( $(date +%s) - t0 )) s"
grep -E 'FAILED|ERROR' $A/out/tests-x.log | head
GG_TEST_FILTER='*small*' GG_TUNE_CACHE=$A/algos.txt compute-sanitizer --tool memcheck --error-exitcode 9 \
  $A/build-x/tests/test_blocks_gpu > $A/out/sanitizer-x.log 2>&1; echo "memcheck exit $? at $(( $(date +%s) - t0 )) s"
for r in 1 2 3 4; do for t in base x; do
  [ $(( $(date +%s) - t0 )) -gt 200 ] && break 2
  GG_TUNE_CACHE=$A/algos.txt timeout 60 $A/build-$t/bench/gg_bench --block 4 --modes fast --iters 50 --warmup 10 \
    --csv $A/$t-r$r-b4.csv > /dev/null 2>> $A/$t-r$r.log || echo "$t r$r failed"
done; echo "round $r at $(( $(date +%s) - t0 )) s"; done
python3 scripts/lab/ab_summary.py $A > $A/out/ab-summary.txt 2>&1; head -24 $A/out/ab-summary.txt
echo "all done at $(( $(date +%s) - t0 )) s"
(cd $A && tar czf out/ab-csv.tgz *.csv *.log algos.txt 2>/dev/null)
tar czf $OUT/call5.tgz -C $A out
