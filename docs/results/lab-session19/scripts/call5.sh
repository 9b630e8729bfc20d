#!/usr/bin/env bash
# session 19 call 5: the narrow schedule on the few-token route too (TF32 G on all SMs but 24, act/X/W1 copies narrow)
set -uo pipefail
A=/tmp/ab5; mkdir -p $A/out
export LD_LIBRARY_PATH=$PWD/carry/cmocka/usr/lib/x86_64-linux-gnu
OUT=$A ROUNDS=2 ITERS=30 BLOCKS="2 3" bash scripts/lab/ab_bench.sh base=lab_tmp/base few=lab_tmp/few > $A/out/ab.txt 2>&1
python3 scripts/lab/ab_summary.py $A > $A/out/ab5-summary.txt 2>&1
head -45 $A/out/ab5-summary.txt
for c in 5 9; do GG_TUNE_CACHE=$A/ab-gemm-algos.txt $A/build-few/bench/gg_bench --block 2 --case $c --modes fast --iters 10 --warmup 3 --trace $A/out/trace-few.csv > /dev/null 2>&1; done
for c in 12 0; do GG_TUNE_CACHE=$A/ab-gemm-algos.txt $A/build-few/bench/gg_bench --block 3 --case $c --modes fast --iters 10 --warmup 3 --trace $A/out/trace-few.csv > /dev/null 2>&1; done
cmake --build $A/build-few --target test_blocks_gpu > $A/out/build-tests.log 2>&1 || tail -20 $A/out/build-tests.log
GG_TEST_FILTER='*small*' timeout 100 $A/build-few/tests/test_blocks_gpu > $A/out/tests.log 2>&1; echo "tests rc=$?" | tee -a $A/out/tests.log
(cd $A && tar czf out/ab5-csv.tgz *.csv *.log ab-gemm-algos.txt 2>/dev/null)
tar czf $OUT/call5.tgz -C $A out
