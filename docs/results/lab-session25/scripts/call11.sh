#!/usr/bin/env bash
# session 25 call 11 (one H200): block 4's bias sum at the narrow schedule's start (beside g) instead of after the
# chain on the narrow SMs. Trees: base = 95f442d; x = the working tree. x's test_blocks_gpu (every case, 10 rounds),
# then block 4 whole, base and x sharing one autotune cache (the same GEMM choices), 3 rounds; traces of x.
set -uo pipefail
A=/tmp/s25c11; rm -rf $A; mkdir -p $A/out
t0=$(date +%s)
export LD_LIBRARY_PATH=$PWD/carry/cmocka/usr/lib/x86_64-linux-gnu
OUT=$A ROUNDS=0 bash scripts/lab/ab_bench.sh base=lab_tmp/base x=lab_tmp/x > $A/out/build.txt 2>&1; cat $A/out/build.txt
cmake --build $A/build-x --target test_blocks_gpu >> $A/out/build.txt 2>&1 || echo "build tests failed"
GG_TUNE_CACHE=$A/algos.txt timeout 120 $A/build-x/tests/test_blocks_gpu > $A/out/tests-x.log 2>&1
echo "== x tests: $(grep -E '^\[  (PASSED|FAILED) ' $A/out/tests-x.log | tr '\n' ' ') at $(( $(date +%s) - t0 )) s"
grep -E 'FAILED|RESULT.*079' $A/out/tests-x.log | cut -c1-200 | head
for r in 1 2 3; do for t in base x; do
  [ $(( $(date +%s) - t0 )) -gt 150 ] && break 2
  GG_TUNE_CACHE=$A/algos.txt timeout 60 $A/build-$t/bench/gg_bench --block 4 --modes fast --iters 50 --warmup 10 \
    --csv $A/$t-r$r-b4.csv > /dev/null 2>> $A/$t-r$r.log || echo "$t r$r failed"
done; echo "round $r at $(( $(date +%s) - t0 )) s"; done
python3 scripts/lab/ab_summary.py $A > $A/out/ab-summary.txt 2>&1; head -24 $A/out/ab-summary.txt
for c in 5 7; do
  GG_TUNE_CACHE=$A/algos.txt timeout 30 $A/build-x/bench/gg_bench --block 4 --case $c --modes fast --iters 10 \
    --warmup 3 --trace $A/out/trace-x-4-$c.csv > /dev/null 2>&1
  echo "== x case $c"
  tail -n +2 $A/out/trace-x-4-$c.csv | awk -F, '{printf "%s %s %s %.40s | %s %s\n", $5, $6, $7, $8, $(NF-2), $(NF-1)}'
done
echo "all done at $(( $(date +%s) - t0 )) s"
(cd $A && tar czf out/ab-csv.tgz *.csv *.log algos.txt 2>/dev/null)
tar czf $OUT/call11.tgz -C $A out
