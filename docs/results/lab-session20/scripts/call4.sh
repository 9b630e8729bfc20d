#!/usr/bin/env bash
# session 20 call 4: gg_k_gemm_f32w with two rings (new = working tree: the activations' ring 3 stages, the weight's
# 4, a weight stage released once in registers) against call 3's one ring (split = 05da1c3), per case at <= 512 tokens
# (068: 5, 9, 13; 073: 0, 12), 3 rounds; w5 = rings of 2 and 5; rot = new with each column tile's k-tiles in an order
# rotated by its index (the CTAs along N then read different activation boxes at once). Tests + memcheck of new.
set -uo pipefail
A=/tmp/s20c4; rm -rf $A; mkdir -p $A/out
export LD_LIBRARY_PATH=$PWD/carry/cmocka/usr/lib/x86_64-linux-gnu
TREES="split new w5 rot"
OUT=$A ROUNDS=0 bash scripts/lab/ab_bench.sh split=lab_tmp/split new=. w5=lab_tmp/w5 rot=lab_tmp/rot > $A/out/build.txt 2>&1
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
python3 scripts/lab/ab_summary.py $A > $A/out/ab4-summary.txt 2>&1
head -40 $A/out/ab4-summary.txt
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
(cd $A && tar czf out/ab4-csv.tgz *.csv *.log algos.txt 2>/dev/null)
tar czf $OUT/call4.tgz -C $A out
