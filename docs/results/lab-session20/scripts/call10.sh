#!/usr/bin/env bash
# session 20 call 10: dW2 beside G on the SMs a gg_k_gemm_f32w G leaves idle (new = working tree; 068 at 256 and
# 512 tokens: G is 96 CTAs, dW2 planned for the other 36 SMs) against base = f3ee60e (dW2 after G), per case at
# <= 512 tokens (068: 5, 9, 13; 073: 0, 12, whose G fills the GPU and is unchanged), 3 rounds. Tests + memcheck of
# new (the small few-token shapes take the new order).
set -uo pipefail
A=/tmp/s20c10; rm -rf $A; mkdir -p $A/out
export LD_LIBRARY_PATH=$PWD/carry/cmocka/usr/lib/x86_64-linux-gnu
TREES="base new"
OUT=$A ROUNDS=0 bash scripts/lab/ab_bench.sh base=lab_tmp/base new=. > $A/out/build.txt 2>&1
cat $A/out/build.txt
cmake --build $A/build-new --target test_blocks_gpu test_graphs_gpu > $A/out/build-tests.log 2>&1 || tail -20 $A/out/build-tests.log
T=$A/build-new/tests
{ GG_TEST_FILTER='library_matches*' timeout 120 $T/test_blocks_gpu; echo "rc=$?"; } > $A/out/tests-small.log 2>&1
tail -2 $A/out/tests-small.log
cases() { [ $1 = 2 ] && echo "5 9 13" || echo "0 12"; }
for r in 1 2 3; do for t in $TREES; do for b in 2 3; do
  f=$A/$t-r$r-b$b.csv; rm -f $f
  for i in $(cases $b); do
    GG_TUNE_CACHE=$A/algos.txt $A/build-$t/bench/gg_bench --block $b --case $i --modes fast --iters 50 --warmup 10 \
      --csv $A/one.csv > /dev/null 2>> $A/$t-r$r.log || echo "$t r$r b$b c$i failed"
    [ -f $f ] && tail -n +2 $A/one.csv >> $f || cp $A/one.csv $f
  done
done; done; done
python3 scripts/lab/ab_summary.py $A > $A/out/ab10-summary.txt 2>&1
head -40 $A/out/ab10-summary.txt
for t in $TREES; do for bc in "2 5" "2 9" "3 12" "3 0"; do set -- $bc
  GG_TUNE_CACHE=$A/algos.txt $A/build-$t/bench/gg_bench --block $1 --case $2 --modes fast --iters 10 --warmup 3 --trace $A/out/trace-$t-$1-$2.csv > /dev/null 2>&1
done; done
python3 - $A/out > $A/out/f32w-kernels.txt <<'PY'
import csv, glob, os, sys, statistics
for f in sorted(glob.glob(sys.argv[1] + "/trace-*.csv")):
    rows = [r for r in csv.DictReader(open(f)) if "gemm_f32w" in r["kernel"]]
    d = [float(r["duration_us"]) for r in rows]
    print(os.path.basename(f), "G %.2f dX %.2f" % (statistics.median(d[0::2]), statistics.median(d[1::2])) if d else "-")
PY
cat $A/out/f32w-kernels.txt
{ GG_TEST_FILTER='block2*' timeout 200 $T/test_blocks_gpu; echo "rc=$?";
  GG_TEST_FILTER='block3*' timeout 200 $T/test_blocks_gpu; echo "rc=$?";
  GG_TEST_FILTER='reductions*' timeout 100 $T/test_blocks_gpu; echo "rc=$?";
  timeout 200 $T/test_graphs_gpu; echo "rc=$?"; } > $A/out/tests.log 2>&1
grep -E "rc=" $A/out/tests.log | tr '\n' ' '; echo
GG_TEST_FILTER='library_matches*' timeout 150 compute-sanitizer --tool memcheck $T/test_blocks_gpu > $A/out/memcheck.log 2>&1; echo "memcheck rc=$?" >> $A/out/memcheck.log
tail -2 $A/out/memcheck.log
(cd $A && tar czf out/ab10-csv.tgz *.csv *.log algos.txt 2>/dev/null)
tar czf $OUT/call10.tgz -C $A out
