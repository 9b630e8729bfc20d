#!/usr/bin/env bash
# session 24 call 2 (one H200): which small-shape block-4 test failed in call 1 (the test now names the case and
# the output), with the narrow schedule on (x), off (x, GG_LAB_MIN huge) and with the accurate sigmoid (xacc);
# then block 4 over base (HEAD), x (narrow from 32768 tokens, 24 SMs, 4 chunks) and xacc, 3 rounds.
# Trees: base = HEAD (fb94723); x = working tree with the narrow constants read from the environment; xacc = x with
# s = 1 / (1 + expf(-z)) (IEEE division, accurate exp) instead of __fdividef / __expf.
set -uo pipefail
A=/tmp/s24c2; rm -rf $A; mkdir -p $A/out
t0=$(date +%s)
export LD_LIBRARY_PATH=$PWD/carry/cmocka/usr/lib/x86_64-linux-gnu
OUT=$A ROUNDS=0 bash scripts/lab/ab_bench.sh base=lab_tmp/base x=lab_tmp/x xacc=lab_tmp/xacc > $A/out/build.txt 2>&1
cat $A/out/build.txt
for t in x xacc; do cmake --build $A/build-$t --target test_blocks_gpu >> $A/out/build.txt 2>&1 || echo "build $t tests failed"; done
echo "built at $(( $(date +%s) - t0 )) s"
for v in x:"" xoff:GG_LAB_MIN=999999999 xacc:""; do
  name=${v%%:*} envs=${v#*:} tree=$name; [ $name = xoff ] && tree=x
  echo "== small tests: $name"
  env $envs GG_TEST_FILTER='*small*' GG_TUNE_CACHE=$A/algos.txt timeout 120 $A/build-$tree/tests/test_blocks_gpu \
    > $A/out/small-$name.log 2>&1
  grep -E 'matched|PASSED|FAILED|ERROR' $A/out/small-$name.log | head -20
done
echo "tests at $(( $(date +%s) - t0 )) s"
for r in 1 2 3; do
  for t in base x xacc; do
    [ $(( $(date +%s) - t0 )) -gt 480 ] && break 2
    GG_TUNE_CACHE=$A/algos.txt timeout 60 $A/build-$t/bench/gg_bench --block 4 --modes fast \
      --iters 50 --warmup 10 --csv $A/$t-r$r-b4.csv > /dev/null 2>> $A/$t-r$r.log || echo "$t r$r failed"
  done
  echo "round $r at $(( $(date +%s) - t0 )) s"
done
python3 scripts/lab/ab_summary.py $A > $A/out/ab-summary.txt 2>&1; head -30 $A/out/ab-summary.txt
echo "all done at $(( $(date +%s) - t0 )) s"
(cd $A && tar czf out/ab-csv.tgz *.csv *.log algos.txt 2>/dev/null)
tar czf $OUT/call2.tgz -C $A out
