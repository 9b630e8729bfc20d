#!/usr/bin/env bash
# session 25 call 1 (one H200). (1) `scripts/device.sh tests` at e213578 (the last stop's read-through mend, 423993c,
# had not run on a GPU). (2) The cluster question: one tree x = e213578 with GG_LAB_MIN (the narrow schedule's
# minimum tokens) from the environment; traced replays of block 4 (--trace now records grid, block and cluster shape
# as launched; --log debug names each plan's cuBLASLt algorithm and its reported cluster shape): case 1 (7892
# tokens) with the defaults and with the narrow schedule from 4096, case 7 (74432) and 12 (34784) with the
# defaults (narrow). (3) How much the autotune's choices vary: blocks 2 and 3 whole, each run with its own fresh
# autotune cache (--log info prints every choice), 2 runs each.
set -uo pipefail
A=/tmp/s25c1; rm -rf $A; mkdir -p $A/out
t0=$(date +%s)
GG_COMMIT=e213578 OUT=$A/tests bash scripts/device.sh tests > $A/out/device-tests.txt 2>&1
tail -30 $A/out/device-tests.txt
cp $A/tests/*.log $A/tests/*.json $A/out/ 2>/dev/null
echo "tests done at $(( $(date +%s) - t0 )) s"
export LD_LIBRARY_PATH=$PWD/carry/cmocka/usr/lib/x86_64-linux-gnu
OUT=$A ROUNDS=0 bash scripts/lab/ab_bench.sh x=lab_tmp/x > $A/out/build.txt 2>&1; cat $A/out/build.txt
B=$A/build-x/bench/gg_bench
trace() { # name case env...
  local n=$1 c=$2; shift 2
  env "$@" GG_TUNE_CACHE=$A/algos.txt timeout 60 $B --block 4 --case $c --modes fast --iters 10 --warmup 3 \
    --log debug --trace $A/out/trace-$n-4-$c.csv > $A/out/bench-$n-4-$c.txt 2> $A/out/log-$n-4-$c.txt
  echo "== $n case $c: $(grep -c . $A/out/trace-$n-4-$c.csv) kernels"; grep -E 'GEMM|warn' $A/out/log-$n-4-$c.txt | head -8
}
trace head 1 GG_LAB_X=0
trace n4096 1 GG_LAB_MIN=4096
trace head 7 GG_LAB_X=0
trace head 12 GG_LAB_X=0
for f in $A/out/trace-*.csv; do
  echo "== $f"; tail -n +2 $f | head -16 | awk -F, '{printf "%s %s %s %.70s | %s %s %s\n", $5, $6, $7, $8, $(NF-2), $(NF-1), $NF}'
done
echo "traces done at $(( $(date +%s) - t0 )) s"
for r in 1 2; do
  for b in 2 3; do
    [ $(( $(date +%s) - t0 )) -gt 520 ] && break 2
    GG_TUNE_CACHE=$A/algos-r$r-b$b.txt timeout 100 $B --block $b --modes fast --iters 50 --warmup 10 --log info \
      --csv $A/out/tune-r$r-b$b.csv > /dev/null 2> $A/out/tune-r$r-b$b.log || echo "r$r b$b failed"
    echo "tune r$r b$b at $(( $(date +%s) - t0 )) s: $(grep -c autotune $A/out/tune-r$r-b$b.log) choices"
  done
done
cp $A/algos*.txt $A/out/
echo "all done at $(( $(date +%s) - t0 )) s"
tar czf $OUT/call1.tgz -C $A out
