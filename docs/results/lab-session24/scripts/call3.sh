#!/usr/bin/env bash
# session 24 call 3 (one H200): the working tree's tests (the chain's bf16x2 steps now the _rn forms, which are never
# contracted into an FMA; the narrow schedule from 32768 tokens); the sigmoid probe (how often the fast sigmoid's
# bf16 s differs from the exact one); block 4 over base (HEAD, fb94723) and x (the working tree), 3 rounds.
set -uo pipefail
A=/tmp/s24c3; rm -rf $A; mkdir -p $A/out
t0=$(date +%s)
export LD_LIBRARY_PATH=$PWD/carry/cmocka/usr/lib/x86_64-linux-gnu
GG_COMMIT=working-tree OUT=$A/out/tests bash scripts/device.sh tests > $A/out/device-tests.log 2>&1
tail -14 $A/out/device-tests.log
echo "tests done at $(( $(date +%s) - t0 )) s"
nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -Ikernels -o /tmp/sigmoid_probe scripts/lab/sigmoid_probe.cu \
  && /tmp/sigmoid_probe > $A/out/sigmoid_probe.txt 2>&1; cat $A/out/sigmoid_probe.txt
OUT=$A ROUNDS=0 bash scripts/lab/ab_bench.sh base=lab_tmp/base x=lab_tmp/x > $A/out/build.txt 2>&1
cat $A/out/build.txt
for r in 1 2 3; do
  for t in base x; do
    [ $(( $(date +%s) - t0 )) -gt 480 ] && break 2
    GG_TUNE_CACHE=$A/algos.txt timeout 60 $A/build-$t/bench/gg_bench --block 4 --modes fast \
      --iters 50 --warmup 10 --csv $A/$t-r$r-b4.csv > /dev/null 2>> $A/$t-r$r.log || echo "$t r$r failed"
  done
  echo "round $r at $(( $(date +%s) - t0 )) s"
done
python3 scripts/lab/ab_summary.py $A > $A/out/ab-summary.txt 2>&1; head -30 $A/out/ab-summary.txt
for i in 7 12; do
  GG_TUNE_CACHE=$A/algos.txt timeout 30 $A/build-x/bench/gg_bench --block 4 --case $i --modes fast --iters 10 \
    --warmup 3 --trace $A/out/trace-x-4-$i.csv > /dev/null 2>&1
done
echo "all done at $(( $(date +%s) - t0 )) s"
(cd $A && tar czf out/ab-csv.tgz *.csv *.log algos.txt 2>/dev/null)
tar czf $OUT/call3.tgz -C $A out
