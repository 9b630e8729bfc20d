#!/usr/bin/env bash
# session 24 call 4 (one H200): gelu' with tanh.approx.f32 (one MUFU instruction for the tanh) where R is written in
# fp16 (the fp16 mode of blocks 2 and 3), against tanhf. Trees: base = HEAD (59598cd); ft = base with the fast tanh.
# Both trees' test_blocks_gpu (every case, 10 rounds: the RESULT lines give the worst err/tol per block and mode),
# then blocks 2 and 3 whole, fast mode, 3 rounds.
set -uo pipefail
A=/tmp/s24c4; rm -rf $A; mkdir -p $A/out
t0=$(date +%s)
export LD_LIBRARY_PATH=$PWD/carry/cmocka/usr/lib/x86_64-linux-gnu
OUT=$A ROUNDS=0 bash scripts/lab/ab_bench.sh base=lab_tmp/base ft=lab_tmp/ft > $A/out/build.txt 2>&1
for t in base ft; do cmake --build $A/build-$t --target test_blocks_gpu >> $A/out/build.txt 2>&1 || echo "build $t tests failed"; done
grep built $A/out/build.txt
for t in base ft; do
  GG_TUNE_CACHE=$A/algos.txt timeout 150 $A/build-$t/tests/test_blocks_gpu > $A/out/tests-$t.log 2>&1
  echo "== $t: $(grep -E '^\[  (PASSED|FAILED) ' $A/out/tests-$t.log | tr '\n' ' ')"
  grep RESULT $A/out/tests-$t.log | grep -E '068|073' | cut -c1-240
done
echo "tests at $(( $(date +%s) - t0 )) s"
for r in 1 2 3; do
  for t in base ft; do
    for b in 2 3; do
      [ $(( $(date +%s) - t0 )) -gt 500 ] && break 3
      GG_TUNE_CACHE=$A/algos.txt timeout 90 $A/build-$t/bench/gg_bench --block $b --modes fast \
        --iters 50 --warmup 10 --csv $A/$t-r$r-b$b.csv > /dev/null 2>> $A/$t-r$r.log || echo "$t r$r b$b failed"
    done
  done
  echo "round $r at $(( $(date +%s) - t0 )) s"
done
python3 scripts/lab/ab_summary.py $A > $A/out/ab-summary.txt 2>&1; head -50 $A/out/ab-summary.txt
echo "all done at $(( $(date +%s) - t0 )) s"
(cd $A && tar czf out/ab-csv.tgz *.csv *.log algos.txt 2>/dev/null)
tar czf $OUT/call4.tgz -C $A out
