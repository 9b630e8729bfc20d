#!/usr/bin/env bash
# session 22 call 6 (one H200): block 3's gelu' + grad_bias1 pass (col_sum_kernel<GeluGradRow>) holds every SM to
# its end (about 4 CTAs per SM, all resident), so dW2, forked when G ends, starts only as it finishes; block 2's
# gelu' grid drains SM by SM and dW2 runs beside it. Trees: base = c153e65; c16 / c32 = base with that pass's row
# chunks sized for 16 / 32 CTAs per SM (sm_count passed x4 / x8 to gg_k_col_sum_chunks), more CTAs than fit at once.
# Per case, block 3 (3 11 13 5 2 4 10 0), 3 rounds; traces of 073 c3 and c13.
set -uo pipefail
A=/tmp/s22c6; rm -rf $A; mkdir -p $A/out
t0=$(date +%s)
export LD_LIBRARY_PATH=$PWD/carry/cmocka/usr/lib/x86_64-linux-gnu
OUT=$A ROUNDS=0 bash scripts/lab/ab_bench.sh base=lab_tmp/base c16=lab_tmp/c16 c32=lab_tmp/c32 > $A/out/build.txt 2>&1
cat $A/out/build.txt
OUT=$A ROUNDS=3 CASES3="3 11 13 5 2 4 10 0" bash scripts/lab/ab_cases.sh base c16 c32 | head -40
for t in base c16 c32; do for bc in "3 3" "3 13"; do set -- $bc
  GG_TUNE_CACHE=$A/algos.txt timeout 30 $A/build-$t/bench/gg_bench --block $1 --case $2 --modes fast --iters 10 --warmup 3 \
    --trace $A/out/trace-$t-$1-$2.csv > /dev/null 2>&1
done; done
echo "all done at $(( $(date +%s) - t0 )) s"
(cd $A && tar czf out/ab-csv.tgz *.csv *.log algos.txt 2>/dev/null)
tar czf $OUT/call6.tgz -C $A out
