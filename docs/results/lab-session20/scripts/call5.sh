#!/usr/bin/env bash
# session 20 call 5: the column sums' row chunks at few rows. base = 244407b's tree (at least 8 rows per lane and
# chunk); r2 = at least 2; r1 = at least 1 (more CTAs at small M: 073's dY sum at 256 tokens ran as 64 CTAs).
# Blocks 3 and 4 (the blocks with column sums), 2 rounds of 30 iterations; tests of r2 and r1 (blocks 3/4, small
# shapes, determinism).
set -uo pipefail
A=/tmp/s20c5; rm -rf $A; mkdir -p $A/out
export LD_LIBRARY_PATH=$PWD/carry/cmocka/usr/lib/x86_64-linux-gnu
OUT=$A ROUNDS=2 ITERS=30 BLOCKS="3 4" bash scripts/lab/ab_bench.sh base=lab_tmp/base r2=lab_tmp/r2 r1=lab_tmp/r1 > $A/out/ab.txt 2>&1
python3 scripts/lab/ab_summary.py $A > $A/out/ab5-summary.txt 2>&1
head -50 $A/out/ab5-summary.txt
for t in r2 r1; do
  cmake --build $A/build-$t --target test_blocks_gpu > $A/out/build-tests-$t.log 2>&1 || tail -20 $A/out/build-tests-$t.log
  T=$A/build-$t/tests
  { for f in 'library_matches*' 'reductions*' 'block3*' 'block4*'; do GG_TEST_FILTER="$f" timeout 200 $T/test_blocks_gpu; echo "rc=$?"; done; } > $A/out/tests-$t.log 2>&1
  echo "$t: $(grep -E 'rc=' $A/out/tests-$t.log | tr '\n' ' ')"
done
for t in base r2; do for bc in "3 12" "3 0" "4 0" "4 13"; do set -- $bc
  GG_TUNE_CACHE=$A/ab-gemm-algos.txt $A/build-$t/bench/gg_bench --block $1 --case $2 --modes fast --iters 10 --warmup 3 --trace $A/out/trace-$t-$1-$2.csv > /dev/null 2>&1
done; done
(cd $A && tar czf out/ab5-csv.tgz *.csv *.log ab-gemm-algos.txt 2>/dev/null)
tar czf $OUT/call5.tgz -C $A out
