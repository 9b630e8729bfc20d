#!/usr/bin/env bash
# session 19 call 4: FFN narrow schedule on 20, 24, 28 SMs vs base (robustness of call 3)
set -uo pipefail
A=/tmp/ab4; mkdir -p $A/out
export LD_LIBRARY_PATH=$PWD/carry/cmocka/usr/lib/x86_64-linux-gnu
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv > $A/out/gpu.txt
OUT=$A ROUNDS=2 ITERS=30 BLOCKS="2 3" bash scripts/lab/ab_bench.sh base=lab_tmp/base n20=lab_tmp/n20 n24=lab_tmp/n24 n28=lab_tmp/n28 > $A/out/ab.txt 2>&1
python3 scripts/lab/ab_summary.py $A > $A/out/ab4-summary.txt 2>&1
head -60 $A/out/ab4-summary.txt
(cd $A && tar czf out/ab4-csv.tgz *.csv *.log ab-gemm-algos.txt 2>/dev/null)
tar czf $OUT/call4.tgz -C $A out
