#!/usr/bin/env bash
# session 23 call 5 (one H200): where do the 4-6 us before cuBLASLt's G (after W2's conversion) and before dW2
# (after the fork) come from? Trees: base = HEAD (73516ab's library = a890316's); np = base without any launch or
# stream priority (side stream at the default priority, no cudaLaunchAttributePriority); nosm = base without the
# narrow schedule. Traces and a per-case A/B (3 rounds) of 068 cases 5 9 0 and 073 cases 12 3; then SM clock and
# power sampled every 50 ms while base times 073 case 4 (its CUDA-event time runs ~8 % above its kernel span).
set -uo pipefail
A=/tmp/s23c5; rm -rf $A; mkdir -p $A/out
t0=$(date +%s)
export LD_LIBRARY_PATH=$PWD/carry/cmocka/usr/lib/x86_64-linux-gnu
OUT=$A ROUNDS=0 bash scripts/lab/ab_bench.sh base=lab_tmp/base np=lab_tmp/np nosm=lab_tmp/nosm > $A/out/build.txt 2>&1
cat $A/out/build.txt
OUT=$A ROUNDS=3 DEADLINE=200 CASES2="5 9 0" CASES3="12 3" bash scripts/lab/ab_cases.sh base np nosm | head -40
for t in base np nosm; do for bc in "2 5" "2 9" "2 0" "3 12" "3 3"; do set -- $bc
  GG_TUNE_CACHE=$A/algos.txt timeout 30 $A/build-$t/bench/gg_bench --block $1 --case $2 --modes fast --iters 10 \
    --warmup 3 --trace $A/out/trace-$t-$1-$2.csv > /dev/null 2>&1
done; done
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu --format=csv,noheader -lms 50 > $A/out/clocks.txt &
smi=$!
GG_TUNE_CACHE=$A/algos.txt $A/build-base/bench/gg_bench --block 3 --case 4 --modes fast --iters 50 --warmup 10 \
  > $A/out/b3c4.txt 2> $A/out/b3c4.log
kill $smi
grep -v '^$' $A/out/b3c4.txt | tail -3
echo "all done at $(( $(date +%s) - t0 )) s"
(cd $A && tar czf out/ab-csv.tgz *.csv *.log algos.txt 2>/dev/null)
tar czf $OUT/call5.tgz -C $A out
