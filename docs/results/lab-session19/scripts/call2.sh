#!/usr/bin/env bash
# session 19 call 2: FFN narrow schedule (conversions beside G on 16/24 SMs, block 2's gelu' beside dW2) vs base
set -uo pipefail
A=/tmp/ab2; mkdir -p $A/out
export LD_LIBRARY_PATH=$PWD/carry/cmocka/usr/lib/x86_64-linux-gnu
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv > $A/out/gpu.txt
OUT=$A ROUNDS=2 ITERS=30 BLOCKS="2 3" bash scripts/lab/ab_bench.sh base=lab_tmp/base nar16=. nar24=lab_tmp/nar24 > $A/out/ab.txt 2>&1
python3 scripts/lab/ab_summary.py $A > $A/out/ab2-summary.txt 2>&1
head -60 $A/out/ab2-summary.txt
for c in 1 0; do GG_TUNE_CACHE=$A/ab-gemm-algos.txt $A/build-nar16/bench/gg_bench --block 2 --case $c --modes fast --iters 10 --warmup 3 --trace $A/out/trace-nar16.csv > /dev/null 2>&1; done
for c in 13 6; do GG_TUNE_CACHE=$A/ab-gemm-algos.txt $A/build-nar16/bench/gg_bench --block 3 --case $c --modes fast --iters 10 --warmup 3 --trace $A/out/trace-nar16.csv > /dev/null 2>&1; done
cmake --build $A/build-nar16 --target test_blocks_gpu test_graphs_gpu > $A/out/build-tests.log 2>&1 || tail -20 $A/out/build-tests.log
{ GG_TEST_FILTER='block2*' timeout 150 $A/build-nar16/tests/test_blocks_gpu; echo "rc=$?";
  GG_TEST_FILTER='block3*' timeout 150 $A/build-nar16/tests/test_blocks_gpu; echo "rc=$?";
  timeout 150 $A/build-nar16/tests/test_graphs_gpu; echo "rc=$?"; } > $A/out/tests.log 2>&1
(cd $A && tar czf out/ab2-csv.tgz *.csv *.log ab-gemm-algos.txt 2>/dev/null)
tar czf $OUT/call2.tgz -C $A out
grep -E 'RESULT|PASSED|FAIL|rc=' $A/out/tests.log | cut -c1-250
