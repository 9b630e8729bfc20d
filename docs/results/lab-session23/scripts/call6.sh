#!/usr/bin/env bash
# session 23 call 6 (one H200): (1) the side stream's priority. Call 5's `np` (no priority anywhere) ran 068 at 2048
# tokens 2.5 % faster and the few-token cases 2-4 % slower. Trees: base = HEAD's library (a890316's); np = call 5's;
# nps = base with only the side stream at the default priority (the launch priorities of the conversions and
# gg_k_gemm_f32w kept). Per case, 3 rounds: 068 5 9 0 7 2 1, 073 12 0 3 13 4. (2) `evt` = base with gg_bench
# also reading its CUDA events in the CUPTI pass (lab only): are the large cases' event times above their spans
# because of the pass (clocks under the power cap) or because of the timer? 073 case 4 and 068 cases 1 and 0, with
# the SM clock and power sampled every 20 ms.
set -uo pipefail
A=/tmp/s23c6; rm -rf $A; mkdir -p $A/out
t0=$(date +%s)
export LD_LIBRARY_PATH=$PWD/carry/cmocka/usr/lib/x86_64-linux-gnu
OUT=$A ROUNDS=0 bash scripts/lab/ab_bench.sh base=lab_tmp/base np=lab_tmp/np nps=lab_tmp/nps evt=lab_tmp/evt \
  > $A/out/build.txt 2>&1
cat $A/out/build.txt
OUT=$A ROUNDS=3 DEADLINE=300 CASES2="5 9 0 7 2 1" CASES3="12 0 3 13 4" bash scripts/lab/ab_cases.sh base np nps \
  | head -50
echo "A/B done at $(( $(date +%s) - t0 )) s"
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw --format=csv,noheader -lms 20 > $A/out/clocks-evt.txt &
smi=$!
for bc in "3 4" "2 1" "2 0"; do set -- $bc
  echo "== block $1 case $2 $(date +%T.%N)" >> $A/out/evt.txt
  GG_TUNE_CACHE=$A/algos.txt timeout 60 $A/build-evt/bench/gg_bench --block $1 --case $2 --modes fast --iters 50 \
    --warmup 10 >> $A/out/evt.txt 2>&1
done
kill $smi
grep -E '==|LAB|kernels' $A/out/evt.txt
echo "all done at $(( $(date +%s) - t0 )) s"
rm -f $A/evt-*.csv
(cd $A && tar czf out/ab-csv.tgz *.csv *.log algos.txt 2>/dev/null)
tar czf $OUT/call6.tgz -C $A out
