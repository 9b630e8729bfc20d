#!/usr/bin/env bash
# session 20 call 16: gg_k_gemm_f32w with two fragment sets (new = working tree: k-tile kt+1's fragment converted
# while k-tile kt's wgmma run, wgmma.wait_group 1) against base = b49b160 (one set, wait_group 0). Tests + memcheck of
# new first; then per case at <= 512 tokens (068: 5, 9, 13; 073: 0, 12), 2 rounds; one traced replay each.
set -uo pipefail
A=/tmp/s20c16; rm -rf $A; mkdir -p $A/out
export LD_LIBRARY_PATH=$PWD/carry/cmocka/usr/lib/x86_64-linux-gnu
OUT=$A ROUNDS=0 bash scripts/lab/ab_bench.sh base=lab_tmp/base new=. > $A/out/build.txt 2>&1
cmake --build $A/build-new --target test_blocks_gpu > $A/out/build-tests.log 2>&1 || tail -20 $A/out/build-tests.log
T=$A/build-new/tests
{ for f in 'library_matches*' 'reductions*' 'block2*' 'block3*'; do GG_TEST_FILTER="$f" timeout 60 $T/test_blocks_gpu; echo "rc=$?"; done; } > $A/out/tests.log 2>&1
grep -E "rc=" $A/out/tests.log | tr '\n' ' '; echo
GG_TEST_FILTER='library_matches*' timeout 60 compute-sanitizer --tool memcheck $T/test_blocks_gpu > $A/out/memcheck.log 2>&1; echo "memcheck rc=$?" >> $A/out/memcheck.log
tail -2 $A/out/memcheck.log
cases() { [ $1 = 2 ] && echo "5 9 13" || echo "0 12"; }
for r in 1 2; do for t in base new; do for b in 2 3; do
  f=$A/$t-r$r-b$b.csv; rm -f $f
  for i in $(cases $b); do
    GG_TUNE_CACHE=$A/algos.txt timeout 30 $A/build-$t/bench/gg_bench --block $b --case $i --modes fast --iters 50 --warmup 10 \
      --csv $A/one.csv > /dev/null 2>> $A/$t-r$r.log || echo "$t r$r b$b c$i failed"
    [ -f $f ] && tail -n +2 $A/one.csv >> $f || cp $A/one.csv $f
  done
done; done; done
python3 scripts/lab/ab_summary.py $A > $A/out/ab16-summary.txt 2>&1
head -20 $A/out/ab16-summary.txt
for t in base new; do for bc in "2 5" "3 12"; do set -- $bc
  GG_TUNE_CACHE=$A/algos.txt timeout 30 $A/build-$t/bench/gg_bench --block $1 --case $2 --modes fast --iters 10 --warmup 3 --trace $A/out/trace-$t-$1-$2.csv > /dev/null 2>&1
done; done
(cd $A && tar czf out/ab16-csv.tgz *.csv *.log algos.txt 2>/dev/null)
tar czf $OUT/call16.tgz -C $A out
