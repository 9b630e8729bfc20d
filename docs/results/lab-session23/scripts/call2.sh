#!/usr/bin/env bash
# session 23 call 2 (one H200): the tests of `cnd` (the working tree: call 1's efc for blocks 2/3 only, with the
# weight's evict-first policy in gemm_f32w only at one or two token tiles; diff ../cnd.diff), then per case blocks
# 2/3 base (29d94dd) / efc (call 1's tree) / cnd, the 1024-token cases where efc lost 1 % and controls.
set -uo pipefail
A=/tmp/s23c2; rm -rf $A; mkdir -p $A/out
t0=$(date +%s)
export LD_LIBRARY_PATH=$PWD/carry/cmocka/usr/lib/x86_64-linux-gnu
OUT=$A/out/tests GG_COMMIT=29d94dd+cnd bash scripts/device.sh tests > $A/out/tests.log 2>&1; echo "tests rc=$?"
grep -E 'PASSED|FAILED|tests passed|exit' $A/out/tests.log | head -20
echo "tests done at $(( $(date +%s) - t0 )) s"
OUT=$A ROUNDS=0 bash scripts/lab/ab_bench.sh base=lab_tmp/base efc=lab_tmp/efc cnd=lab_tmp/cnd > $A/out/build.txt 2>&1
cat $A/out/build.txt
OUT=$A ROUNDS=4 DEADLINE=330 CASES2="10 11 14 5 9 0 3" CASES3="6 8 10 14 12 0 3" bash scripts/lab/ab_cases.sh \
  base efc cnd | head -60
echo "all done at $(( $(date +%s) - t0 )) s"
(cd $A && tar czf out/ab-csv.tgz *.csv *.log algos.txt 2>/dev/null)
tar czf $OUT/call2.tgz -C $A out
