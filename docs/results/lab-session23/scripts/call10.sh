#!/usr/bin/env bash
# session 23 call 10 (one H200): W1 prefetched into the L2 while G runs, so that dX (gg_k_gemm_f32w, few-token
# route) reads it from the L2. Trees: base = HEAD's library; pfn / pfl = base plus, on the side stream after the
# conversions, at the least priority, one small kernel issuing cp.async.bulk.prefetch.L2 over W1 in 16 KiB requests
# (pfl with an evict-last L2 policy), only when dX reads the fp32 W1 (../pf.diff). Per case 3 rounds: 068 5 13 9,
# 073 12 0 6; traces of 068 case 5 and 073 case 12.
set -uo pipefail
A=/tmp/s23c10; rm -rf $A; mkdir -p $A/out
t0=$(date +%s)
export LD_LIBRARY_PATH=$PWD/carry/cmocka/usr/lib/x86_64-linux-gnu
OUT=$A ROUNDS=0 bash scripts/lab/ab_bench.sh base=lab_tmp/base pfn=lab_tmp/pfn pfl=lab_tmp/pfl > $A/out/build.txt 2>&1
cat $A/out/build.txt
OUT=$A ROUNDS=3 DEADLINE=100 CASES2="5 13 9" CASES3="12 0 6" bash scripts/lab/ab_cases.sh base pfn pfl | head -40
for t in base pfn pfl; do for bc in "2 5" "3 12"; do set -- $bc
  GG_TUNE_CACHE=$A/algos.txt timeout 30 $A/build-$t/bench/gg_bench --block $1 --case $2 --modes fast --iters 10 \
    --warmup 3 --trace $A/out/trace-$t-$1-$2.csv > /dev/null 2>&1
done; done
echo "all done at $(( $(date +%s) - t0 )) s"
(cd $A && tar czf out/ab-csv.tgz *.csv *.log algos.txt 2>/dev/null)
tar czf $OUT/call10.tgz -C $A out
