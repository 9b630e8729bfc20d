#!/usr/bin/env bash
# session 20 call 1: gg_k_gemm_f32w v6 (TMA) on the few-token route (new = working tree) against main's TF32-G route
# (base = ac03212): small-shape and full-size tests of blocks 2/3, memcheck, per-case A/B of the cases at <= 512
# tokens (068: 5, 9, 13; 073: 0, 12), one traced replay of each
set -uo pipefail
A=/tmp/ab1; mkdir -p $A/out
export LD_LIBRARY_PATH=$PWD/carry/cmocka/usr/lib/x86_64-linux-gnu
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv > $A/out/gpu.txt
OUT=$A ROUNDS=0 bash scripts/lab/ab_bench.sh base=lab_tmp/base new=. > $A/out/build.txt 2>&1
cmake --build $A/build-new --target test_blocks_gpu test_graphs_gpu > $A/out/build-tests.log 2>&1 || tail -20 $A/out/build-tests.log
T=$A/build-new/tests
{ GG_TEST_FILTER='library_matches*' timeout 120 $T/test_blocks_gpu; echo "rc=$?"; } > $A/out/tests-small.log 2>&1
tail -4 $A/out/tests-small.log
GG_TEST_FILTER='library_matches*' timeout 150 compute-sanitizer --tool memcheck $T/test_blocks_gpu > $A/out/memcheck.log 2>&1; echo "memcheck rc=$?" >> $A/out/memcheck.log
tail -3 $A/out/memcheck.log
cases() { [ $1 = 2 ] && echo "5 9 13" || echo "0 12"; }
for r in 1 2 3; do for t in base new; do for b in 2 3; do
  f=$A/$t-r$r-b$b.csv; rm -f $f
  for i in $(cases $b); do
    GG_TUNE_CACHE=$A/algos.txt $A/build-$t/bench/gg_bench --block $b --case $i --modes fast --iters 50 --warmup 10 \
      --csv $A/one.csv > /dev/null 2>> $A/$t-r$r.log || echo "$t r$r b$b c$i failed"
    [ -f $f ] && tail -n +2 $A/one.csv >> $f || cp $A/one.csv $f
  done
done; done; done
python3 scripts/lab/ab_summary.py $A > $A/out/ab1-summary.txt 2>&1
head -60 $A/out/ab1-summary.txt
for t in base new; do for bc in "2 5" "2 9" "3 12" "3 0"; do set -- $bc
  GG_TUNE_CACHE=$A/algos.txt $A/build-$t/bench/gg_bench --block $1 --case $2 --modes fast --iters 10 --warmup 3 --trace $A/out/trace-$t-$1-$2.csv > /dev/null 2>&1
done; done
{ GG_TEST_FILTER='block2*' timeout 200 $T/test_blocks_gpu; echo "rc=$?";
  GG_TEST_FILTER='block3*' timeout 200 $T/test_blocks_gpu; echo "rc=$?";
  GG_TEST_FILTER='reductions*' timeout 100 $T/test_blocks_gpu; echo "rc=$?";
  timeout 200 $T/test_graphs_gpu; echo "rc=$?"; } > $A/out/tests.log 2>&1
grep -E "rc=|FAILED|PASSED" $A/out/tests.log | head
(cd $A && tar czf out/ab1-csv.tgz *.csv *.log algos.txt 2>/dev/null)
tar czf $OUT/call1.tgz -C $A out
