#!/usr/bin/env bash
# session 21 call 2: trees prio = working tree (call 1's prio, the route now as bits: G and dX each in
# gg_k_gemm_f32w up to its own token limit, 512 both), g1k = G up to 1024 tokens, g2k = G up to 2048, gd1k = G and
# dX up to 1024, g1kl = g1k with W1's conversion after dW2 on the side stream when G is in gg_k_gemm_f32w. Tests +
# memcheck of prio first; then per case (068: 5 10 14 0 3; 073: 12 6 10 3 9), 2 rounds; traces of 068 c10, 073 c6, 068 c0, 073 c3.
set -uo pipefail
A=/tmp/s21c2; rm -rf $A; mkdir -p $A/out
t0=$(date +%s)
export LD_LIBRARY_PATH=$PWD/carry/cmocka/usr/lib/x86_64-linux-gnu
OUT=$A ROUNDS=0 bash scripts/lab/ab_bench.sh prio=. g1k=lab_tmp/g1k g2k=lab_tmp/g2k gd1k=lab_tmp/gd1k g1kl=lab_tmp/g1kl > $A/out/build.txt 2>&1
cat $A/out/build.txt
cmake --build $A/build-prio --target test_blocks_gpu > $A/out/build-tests.log 2>&1 || tail -20 $A/out/build-tests.log
T=$A/build-prio/tests
{ for f in 'library_matches*' 'reductions*' 'block2*' 'block3*'; do GG_TEST_FILTER="$f" timeout 90 $T/test_blocks_gpu; echo "rc=$?"; done; } > $A/out/tests.log 2>&1
grep -E "rc=" $A/out/tests.log | tr '\n' ' '; echo
GG_TEST_FILTER='library_matches*' timeout 90 compute-sanitizer --tool memcheck $T/test_blocks_gpu > $A/out/memcheck.log 2>&1; echo "memcheck rc=$?" >> $A/out/memcheck.log
tail -2 $A/out/memcheck.log
echo "setup done at $(( $(date +%s) - t0 )) s"
cases() { [ $1 = 2 ] && echo "5 10 14 0 3" || echo "12 6 10 3 9"; }
for r in 1 2; do for t in prio g1k g2k gd1k g1kl; do for b in 2 3; do
  f=$A/$t-r$r-b$b.csv; rm -f $f
  for i in $(cases $b); do
    GG_TUNE_CACHE=$A/algos.txt timeout 40 $A/build-$t/bench/gg_bench --block $b --case $i --modes fast --iters 50 --warmup 10 \
      --csv $A/one.csv > /dev/null 2>> $A/$t-r$r.log || echo "$t r$r b$b c$i failed"
    [ -f $f ] && tail -n +2 $A/one.csv >> $f || cp $A/one.csv $f
  done
done; echo "round $r $t at $(( $(date +%s) - t0 )) s"; done; done
python3 scripts/lab/ab_summary.py $A > $A/out/ab2-summary.txt 2>&1
head -40 $A/out/ab2-summary.txt
for t in prio g1k g2k gd1k g1kl; do for bc in "2 10" "3 6" "2 0" "3 3"; do set -- $bc
  GG_TUNE_CACHE=$A/algos.txt timeout 30 $A/build-$t/bench/gg_bench --block $1 --case $2 --modes fast --iters 10 --warmup 3 --trace $A/out/trace-$t-$1-$2.csv > /dev/null 2>&1
done; done
echo "all done at $(( $(date +%s) - t0 )) s"
(cd $A && tar czf out/ab2-csv.tgz *.csv *.log algos.txt 2>/dev/null)
tar czf $OUT/call2.tgz -C $A out
