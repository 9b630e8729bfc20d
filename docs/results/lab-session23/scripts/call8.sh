#!/usr/bin/env bash
# session 23 call 8 (one H200): cuBLASLt's counter memsets moved to the graph's start (`hoist`, the working tree:
# ../hoist.diff — each GEMM call of a capture gets its own workspace slot, graphs/hoist.c makes those memset nodes
# roots). First `scripts/device.sh tests` on the working tree (with the new test_hoist_gpu); then base (HEAD's
# library) against hoist per case, 3 rounds: 068 5 9 10 0 1, 073 12 0 6 3 13, 079 13 10 3 2 4 9 1 7; traces.
set -uo pipefail
A=/tmp/s23c8; rm -rf $A; mkdir -p $A/out
t0=$(date +%s)
export LD_LIBRARY_PATH=$PWD/carry/cmocka/usr/lib/x86_64-linux-gnu
OUT=$A/out/tests GG_COMMIT=9193204+hoist bash scripts/device.sh tests > $A/out/tests.log 2>&1; echo "tests rc=$?"
grep -E 'PASSED|FAILED|tests passed|exit|hoist' $A/out/tests.log | head -20
echo "tests done at $(( $(date +%s) - t0 )) s"
OUT=$A ROUNDS=0 bash scripts/lab/ab_bench.sh base=lab_tmp/base hoist=lab_tmp/hoist > $A/out/build.txt 2>&1
cat $A/out/build.txt
OUT=$A ROUNDS=3 DEADLINE=170 CASES2="5 9 10 0 1" CASES3="12 0 6 3 13" CASES4="13 10 3 2 4 9 1 7" \
  bash scripts/lab/ab_cases.sh base hoist | head -60
for t in base hoist; do for bc in "2 5" "2 0" "3 12" "4 2"; do set -- $bc
  GG_TUNE_CACHE=$A/algos.txt timeout 30 $A/build-$t/bench/gg_bench --block $1 --case $2 --modes fast --iters 10 \
    --warmup 3 --trace $A/out/trace-$t-$1-$2.csv > /dev/null 2>&1
done; done
echo "all done at $(( $(date +%s) - t0 )) s"
(cd $A && tar czf out/ab-csv.tgz *.csv *.log algos.txt 2>/dev/null)
tar czf $OUT/call8.tgz -C $A out
