#!/usr/bin/env bash
# session 23 call 7 (one H200): the 4-6 us before cuBLASLt's G again. `dot` = base with every captured graph written
# as a Graphviz file (cudaGraphDebugDotPrint, verbose; lab only): is there a node between W2's conversion and G that
# the kernel trace does not show? `carve` = base with the fp32 -> fp16 conversions preferring the largest shared-
# memory carveout (the GEMMs' need; cudaFuncAttributePreferredSharedMemoryCarveout): is the gap the SMs switching
# carveout? Traces of 068 cases 0, 1 and 073 case 3; per case 3 rounds, 068 0 2 1, 073 3 13.
set -uo pipefail
A=/tmp/s23c7; rm -rf $A; mkdir -p $A/out/dot
t0=$(date +%s)
export LD_LIBRARY_PATH=$PWD/carry/cmocka/usr/lib/x86_64-linux-gnu
OUT=$A ROUNDS=0 bash scripts/lab/ab_bench.sh base=lab_tmp/base carve=lab_tmp/carve dot=lab_tmp/dot \
  > $A/out/build.txt 2>&1
cat $A/out/build.txt
GG_LAB_DOT=$A/out/dot GG_TUNE_CACHE=$A/algos.txt timeout 60 $A/build-dot/bench/gg_bench --block 2 --case 0 \
  --modes fast --iters 2 --warmup 1 > /dev/null 2>&1
ls $A/out/dot | head; grep -c 'label' $A/out/dot/*.dot | head
OUT=$A ROUNDS=3 DEADLINE=200 CASES2="0 2 1" CASES3="3 13" bash scripts/lab/ab_cases.sh base carve | head -30
for t in base carve; do for bc in "2 0" "2 1" "3 3"; do set -- $bc
  GG_TUNE_CACHE=$A/algos.txt timeout 30 $A/build-$t/bench/gg_bench --block $1 --case $2 --modes fast --iters 10 \
    --warmup 3 --trace $A/out/trace-$t-$1-$2.csv > /dev/null 2>&1
done; done
echo "all done at $(( $(date +%s) - t0 )) s"
rm -f $A/dot-*.csv
(cd $A && tar czf out/ab-csv.tgz *.csv *.log algos.txt 2>/dev/null; cd out && tar czf dot.tgz dot && rm -rf dot)
tar czf $OUT/call7.tgz -C $A out
