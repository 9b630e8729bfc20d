#!/usr/bin/env bash
# session 19 call 1: block 4 dW with BGRADB (new) and that with g captured first (gfirst) against base
set -uo pipefail
A=/tmp/ab1; mkdir -p $A/out
export LD_LIBRARY_PATH=$PWD/carry/cmocka/usr/lib/x86_64-linux-gnu
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv > $A/out/gpu.txt
OUT=$A ROUNDS=3 ITERS=50 BLOCKS="4" bash scripts/lab/ab_bench.sh base=lab_tmp/base new=. gfirst=lab_tmp/gfirst > $A/out/ab.txt 2>&1
python3 scripts/lab/ab_summary.py $A > $A/out/ab1-summary.txt 2>&1
cmake --build $A/build-new --target test_blocks_gpu test_graphs_gpu > $A/out/build-tests.log 2>&1 || tail -20 $A/out/build-tests.log
{ GG_TEST_FILTER='block4*' timeout 200 $A/build-new/tests/test_blocks_gpu; echo "rc=$?";
  timeout 200 $A/build-new/tests/test_graphs_gpu; echo "rc=$?"; } > $A/out/tests.log 2>&1
for c in 13 10 2 7; do
  GG_TUNE_CACHE=$A/ab-gemm-algos.txt $A/build-new/bench/gg_bench --block 4 --case $c --modes fast --iters 10 --warmup 3 --trace $A/out/trace-new-$c.csv > /dev/null 2>&1
done
GG_TEST_FILTER='block4*' timeout 150 compute-sanitizer --tool memcheck $A/build-new/tests/test_blocks_gpu > $A/out/memcheck.log 2>&1; echo "memcheck rc=$?" >> $A/out/memcheck.log
(cd $A && tar czf out/ab1-csv.tgz *.csv *.log ab-gemm-algos.txt 2>/dev/null)
tar czf $OUT/call1.tgz -C $A out
tail -5 $A/out/tests.log; tail -3 $A/out/memcheck.log; head -40 $A/out/ab1-summary.txt
