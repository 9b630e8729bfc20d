#!/usr/bin/env bash
# session 26 call 3 (one H200): the official run at the commit given as $1, then the lab. Official: `scripts/device.sh
# tests` and `GG_PEERS_COMPILE=1 GG_PEERS_TIMEOUT=300 scripts/device.sh bench` (run.tgz). Lab tree y = that commit's
# working tree with knobs: GG_LAB_SMALL_MIN / GG_LAB_SMALL_CTAS / GG_LAB_SMALL_BIAS=2 (block 4's narrow schedule
# below 1500 tokens too, on that many SMs, its bias sum on a third stream beside dW and the chain); GG_LAB_NONB=1
# (the FFN blocks' GEMMs with an SM target timed alone by the autotune, not beside a neighbour). Block 4: head and
# s2 in one cache, 3 rounds, then in a second cache 1 round. Blocks 2 and 3: nb (the default) and nonb, two cache
# sets (their keys differ, so each set is one file), 2 rounds in set A, 1 in set B.
set -uo pipefail
sha=${1:?commit}
A=/tmp/s26c3; rm -rf $A /tmp/run; mkdir -p $A/out /tmp/run
t0=$(date +%s)
GG_COMMIT=$sha OUT=/tmp/run bash scripts/device.sh tests > /tmp/t.log 2>&1; echo "tests rc $? at $(( $(date +%s) - t0 )) s"
grep -E "tests passed|PASSED|FAILED|memcheck" /tmp/t.log
GG_COMMIT=$sha GG_PEERS_COMPILE=1 GG_PEERS_TIMEOUT=300 OUT=/tmp/run bash scripts/device.sh bench > /tmp/b.log 2>&1
echo "bench rc $? at $(( $(date +%s) - t0 )) s"; grep -iE "geomean|079|fail" /tmp/b.log | head -12
cp /tmp/t.log /tmp/b.log /tmp/run/; tar czf $OUT/run.tgz -C /tmp/run .
export LD_LIBRARY_PATH=$PWD/carry/cmocka/usr/lib/x86_64-linux-gnu
OUT=$A ROUNDS=0 bash scripts/lab/ab_bench.sh y=lab_tmp/y > $A/out/build.txt 2>&1; cat $A/out/build.txt
variant() {
  case $1 in
    head|nb) echo "GG_LAB_NONE=1";;
    s2) echo "GG_LAB_SMALL_MIN=257 GG_LAB_SMALL_CTAS=40 GG_LAB_SMALL_BIAS=2";;
    nonb) echo "GG_LAB_NONB=1";;
  esac
}
run() { # variant cache round blocks
  for b in $4; do
    env $(variant $1) GG_TUNE_CACHE=$A/algos-$2.txt timeout 120 $A/build-y/bench/gg_bench --block $b --modes fast \
      --iters 50 --warmup 10 --csv $A/$1$2-r$3-b$b.csv > /dev/null 2>> $A/$1$2-r$3.log || echo "$1$2 r$3 b$b failed"
  done
}
for r in 1 2 3; do for v in head s2; do run $v A $r 4; done; done
for v in head s2; do run $v B 1 4; done
echo "block 4 at $(( $(date +%s) - t0 )) s"
for r in 1 2; do for v in nb nonb; do
  [ $(( $(date +%s) - t0 )) -gt 500 ] && break 2
  run $v A $r "2 3"
done; echo "ffn round $r at $(( $(date +%s) - t0 )) s"; done
for v in nb nonb; do [ $(( $(date +%s) - t0 )) -gt 540 ] && break; run $v B 1 "2 3"; done
python3 scripts/lab/ab_summary.py $A > $A/out/ab-summary.txt 2>&1; grep -A14 '^==' $A/out/ab-summary.txt | head -80
echo "all done at $(( $(date +%s) - t0 )) s"
(cd $A && tar czf out/ab-csv.tgz *.csv *.log algos*.txt 2>/dev/null)
tar czf $OUT/call3.tgz -C $A out
