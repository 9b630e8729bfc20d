#!/usr/bin/env bash
# session 20 call 3: gg_k_gemm_f32w with the split chosen by cluster capacity (new = working tree) against main's
# TF32-G route (base = ac03212), per case at <= 512 tokens (068: 5, 9, 13; 073: 0, 12), 3 rounds; ablations, timed
# only (their results are wrong on purpose): noact = the activations' boxes not loaded, now = the weight's boxes not
# loaded; prom = the weight's tensor map without L2 promotion. Tests + memcheck of new; one traced replay per tree.
set -uo pipefail
A=/tmp/s20c3; rm -rf $A; mkdir -p $A/out
export LD_LIBRARY_PATH=$PWD/carry/cmocka/usr/lib/x86_64-linux-gnu
TREES="base new noact now prom"
OUT=$A ROUNDS=0 bash scripts/lab/ab_bench.sh base=lab_tmp/base new=. noact=lab_tmp/noact now=lab_tmp/now prom=lab_tmp/prom > $A/out/build.txt 2>&1
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
python3 scripts/lab/ab_summary.py $A > $A/out/ab3-summary.txt 2>&1
head -40 $A/out/ab3-summary.txt
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
(cd $A && tar czf out/ab3-csv.tgz *.csv *.log algos.txt 2>/dev/null)
tar czf $OUT/call3.tgz -C $A out
