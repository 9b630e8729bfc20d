#!/usr/bin/env bash
# session 24 call 7 (one H200): block 2's gelu' on the narrow SMs beside dW2 (dW2 planned on all SMs but 24; the pass
# as 24 CTAs of 1024 threads, four groups of four elements a thread in flight). The working tree's tests
# (scripts/device.sh tests: every CPU and GPU test, memcheck on the small shapes); then blocks 2 and 3 whole over
# base (b178611) and ng (the working tree), 3 rounds; traces of 068 cases 1 and 0 for both.
set -uo pipefail
A=/tmp/s24c7; rm -rf $A; mkdir -p $A/out
t0=$(date +%s)
export LD_LIBRARY_PATH=$PWD/carry/cmocka/usr/lib/x86_64-linux-gnu
GG_COMMIT=working-tree OUT=$A/out/tests bash scripts/device.sh tests > $A/out/device-tests.log 2>&1
tail -12 $A/out/device-tests.log
echo "tests done at $(( $(date +%s) - t0 )) s"
OUT=$A ROUNDS=0 bash scripts/lab/ab_bench.sh base=lab_tmp/base ng=lab_tmp/ng > $A/out/build.txt 2>&1
cat $A/out/build.txt
for r in 1 2 3; do
  for t in base ng; do
    for b in 2 3; do
      [ $(( $(date +%s) - t0 )) -gt 330 ] && break 3
      GG_TUNE_CACHE=$A/algos.txt timeout 90 $A/build-$t/bench/gg_bench --block $b --modes fast \
        --iters 50 --warmup 10 --csv $A/$t-r$r-b$b.csv > /dev/null 2>> $A/$t-r$r.log || echo "$t r$r b$b failed"
    done
  done
  echo "round $r at $(( $(date +%s) - t0 )) s"
done
python3 scripts/lab/ab_summary.py $A > $A/out/ab-summary.txt 2>&1; head -50 $A/out/ab-summary.txt
for t in base ng; do for i in 1 0; do
  GG_TUNE_CACHE=$A/algos.txt timeout 30 $A/build-$t/bench/gg_bench --block 2 --case $i --modes fast --iters 10 \
    --warmup 3 --trace $A/out/trace-$t-2-$i.csv > /dev/null 2>&1
done; done
echo "all done at $(( $(date +%s) - t0 )) s"
(cd $A && tar czf out/ab-csv.tgz *.csv *.log algos.txt 2>/dev/null)
tar czf $OUT/call7.tgz -C $A out
