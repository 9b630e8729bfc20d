#!/usr/bin/env bash
# session 26 call 4 (one H200): the official run at the commit given as $1 (`scripts/device.sh tests`, then
# `GG_PEERS_COMPILE=1 GG_PEERS_TIMEOUT=300 scripts/device.sh bench`; run.tgz), then traces of block 4 at 422, 1172
# and 1546 tokens with the run's autotune cache and --log debug (call4.tgz).
set -uo pipefail
sha=${1:?commit}
A=/tmp/s26c4; rm -rf $A /tmp/run; mkdir -p $A/out /tmp/run
t0=$(date +%s)
GG_COMMIT=$sha OUT=/tmp/run bash scripts/device.sh tests > /tmp/t.log 2>&1; echo "tests rc $? at $(( $(date +%s) - t0 )) s"
grep -E "tests passed|PASSED|FAILED|memcheck" /tmp/t.log
GG_COMMIT=$sha GG_PEERS_COMPILE=1 GG_PEERS_TIMEOUT=300 OUT=/tmp/run bash scripts/device.sh bench > /tmp/b.log 2>&1
echo "bench rc $? at $(( $(date +%s) - t0 )) s"; grep -E "SOL .*faster|fail" /tmp/b.log | head -12
cp /tmp/t.log /tmp/b.log /tmp/run/; tar czf $OUT/run.tgz -C /tmp/run .
export LD_LIBRARY_PATH=$PWD/carry/cmocka/usr/lib/x86_64-linux-gnu
for c in 13 10 3; do
  GG_TUNE_CACHE=$PWD/build-device/gemm-algos.txt timeout 30 build-device/bench/gg_bench --block 4 --case $c \
    --modes fast --iters 10 --warmup 3 --log debug --trace $A/out/trace-4-$c.csv > /dev/null 2> $A/out/log-4-$c.txt
  echo "== case $c"
  tail -n +2 $A/out/trace-4-$c.csv | awk -F, '{printf "%s %s %s %.40s | %s %s\n", $5, $6, $7, $8, $(NF-2), $(NF-1)}'
done
echo "all done at $(( $(date +%s) - t0 )) s"
tar czf $OUT/call4.tgz -C $A out
