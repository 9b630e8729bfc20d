#!/usr/bin/env bash
# session 19 call 3: FFN narrow schedule, conversions beside G on 16, 24, 32 SMs (gelu and dW2 wide) vs base
set -uo pipefail
A=/tmp/ab3; mkdir -p $A/out
export LD_LIBRARY_PATH=$PWD/carry/cmocka/usr/lib/x86_64-linux-gnu
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv > $A/out/gpu.txt
OUT=$A ROUNDS=2 ITERS=30 BLOCKS="2 3" bash scripts/lab/ab_bench.sh base=lab_tmp/base n16=. n24=lab_tmp/n24 n32=lab_tmp/n32 > $A/out/ab.txt 2>&1
python3 scripts/lab/ab_summary.py $A > $A/out/ab3-summary.txt 2>&1
head -60 $A/out/ab3-summary.txt
for c in 1 0; do GG_TUNE_CACHE=$A/ab-gemm-algos.txt $A/build-n24/bench/gg_bench --block 2 --case $c --modes fast --iters 10 --warmup 3 --trace $A/out/trace-n24.csv > /dev/null 2>&1; done
for c in 13 6; do GG_TUNE_CACHE=$A/ab-gemm-algos.txt $A/build-n24/bench/gg_bench --block 3 --case $c --modes fast --iters 10 --warmup 3 --trace $A/out/trace-n24.csv > /dev/null 2>&1; done
(cd $A && tar czf out/ab3-csv.tgz *.csv *.log ab-gemm-algos.txt 2>/dev/null)
tar czf $OUT/call3.tgz -C $A out
