#!/usr/bin/env bash
# session 21 call 1: trees base = 3acbe37 (main), prio = working tree (side-stream conversions launched at the least
# priority, G's conversion and the f32w GEMMs at the greatest), f2k = base with gg_k_gemm_f32w routed up to 2048
# tokens, pf2k = prio with the same. Tests + memcheck of prio first; then per case (068: 5 9 10 14 0; 073: 12 0 6 10
# 3: 256 to 2048 tokens), 2 rounds; one traced replay of 068 c10 and 073 c6 per tree.
set -uo pipefail
A=/tmp/s21c1; rm -rf $A; mkdir -p $A/out
t0=$(date +%s)
export LD_LIBRARY_PATH=$PWD/carry/cmocka/usr/lib/x86_64-linux-gnu
OUT=$A ROUNDS=0 bash scripts/lab/ab_bench.sh base=lab_tmp/base prio=. f2k=lab_tmp/f2k pf2k=lab_tmp/pf2k > $A/out/build.txt 2>&1
cat $A/out/build.txt
cmake --build $A/build-prio --target test_blocks_gpu > $A/out/build-tests.log 2>&1 || tail -20 $A/out/build-tests.log
T=$A/build-prio/tests
{ for f in 'library_matches*' 'reductions*' 'block2*' 'block3*'; do GG_TEST_FILTER="$f" timeout 90 $T/test_blocks_gpu; echo "rc=$?"; done; } > $A/out/tests.log 2>&1
grep -E "rc=" $A/out/tests.log | tr '\n' ' '; echo
GG_TEST_FILTER='library_matches*' timeout 90 compute-sanitizer --tool memcheck $T/test_blocks_gpu > $A/out/memcheck.log 2>&1; echo "memcheck rc=$?" >> $A/out/memcheck.log
tail -2 $A/out/memcheck.log
echo "setup done at $(( $(date +%s) - t0 )) s"
cases() { [ $1 = 2 ] && echo "5 9 10 14 0" || echo "12 0 6 10 3"; }
for r in 1 2; do for t in base prio f2k pf2k; do for b in 2 3; do
  f=$A/$t-r$r-b$b.csv; rm -f $f
  for i in $(cases $b); do
    GG_TUNE_CACHE=$A/algos.txt timeout 40 $A/build-$t/bench/gg_bench --block $b --case $i --modes fast --iters 50 --warmup 10 \
      --csv $A/one.csv > /dev/null 2>> $A/$t-r$r.log || echo "$t r$r b$b c$i failed"
    [ -f $f ] && tail -n +2 $A/one.csv >> $f || cp $A/one.csv $f
  done
done; echo "round $r $t at $(( $(date +%s) - t0 )) s"; done; done
python3 scripts/lab/ab_summary.py $A > $A/out/ab1-summary.txt 2>&1
head -40 $A/out/ab1-summary.txt
for t in base prio f2k pf2k; do for bc in "2 10" "3 6" "2 5" "3 12"; do set -- $bc
  GG_TUNE_CACHE=$A/algos.txt timeout 30 $A/build-$t/bench/gg_bench --block $1 --case $2 --modes fast --iters 10 --warmup 3 --trace $A/out/trace-$t-$1-$2.csv > /dev/null 2>&1
done; done
echo "all done at $(( $(date +%s) - t0 )) s"
(cd $A && tar czf out/ab1-csv.tgz *.csv *.log algos.txt 2>/dev/null)
tar czf $OUT/call1.tgz -C $A out
