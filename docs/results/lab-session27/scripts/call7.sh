#!/usr/bin/env bash
# session 27 call 7 (one H200): block 4's one-launch kernel (ssm_small, 128 tokens) after call 6's ncu: tree x (the
# working tree) with the staging pitch at 72 floats, the partial tiles' halves read in opposite orders, no array of
# part pointers (local memory), and the last cluster barrier split (arrive after the partial reads, wait at the end);
# tree xe = x plus the chain's operands loaded between the first cluster barrier's halves; head = HEAD (f0ed213's
# kernel). First the GPU tests at x (small shapes, block 4's cases, the accumulate test; memcheck over the small
# shapes); then case 0 of block 4 in 6 rounds, one shared cache; ncu (clocks untouched) of x's and xe's kernel.
set -uo pipefail
A=/tmp/s27c7; rm -rf $A; mkdir -p $A/out
t0=$(date +%s)
export LD_LIBRARY_PATH=$PWD/carry/cmocka/usr/lib/x86_64-linux-gnu
OUT=$A ROUNDS=0 bash scripts/lab/ab_bench.sh head=lab_tmp/head x=lab_tmp/x xe=lab_tmp/xe > $A/out/build.txt 2>&1 &
OUT=$A/dev bash scripts/device.sh build > $A/out/device-build.txt 2>&1
wait; cat $A/out/build.txt; tail -1 $A/out/device-build.txt
for f in small block4; do
  GG_TEST_FILTER="*$f*" timeout 200 build-device/tests/test_blocks_gpu > $A/out/test-$f.txt 2>&1
  echo "$f: rc $? $(grep -E '^\[  (PASSED|FAILED)|RESULT' $A/out/test-$f.txt | tr '\n' ' ')"
done
GG_TEST_FILTER='*small*' timeout 200 compute-sanitizer --tool memcheck --error-exitcode 9 \
  build-device/tests/test_blocks_gpu > $A/out/memcheck.txt 2>&1
echo "memcheck rc $?"; tail -2 $A/out/memcheck.txt
echo "tests done at $(( $(date +%s) - t0 )) s"
OUT=$A ROUNDS=6 DEADLINE=200 CASES4="0" bash scripts/lab/ab_cases.sh head x xe > $A/out/cases.txt 2>&1
head -12 $A/out/ab-summary.txt
S="--section SpeedOfLight --section WarpStateStats --section SourceCounters --section MemoryWorkloadAnalysis_Tables"
for t in x xe; do
  timeout 120 ncu --clock-control none -k regex:ssm_small --launch-count 1 $S --page details --print-details all \
    $A/build-$t/bench/gg_bench --block 4 --case 0 --modes fast --iters 2 --warmup 0 > $A/out/ncu-$t.txt 2>&1
  echo "== ncu $t rc=$?"
  grep -E "Duration|Elapsed Cycles|SM Active|Stall (Membar|Long|Short|Wait|Barrier)|Wavefronts Shared Excessive|Sectors Local" \
    $A/out/ncu-$t.txt | head -14
done
echo "all done at $(( $(date +%s) - t0 )) s"
(cd $A && tar czf out/ab-csv.tgz *.csv *.log algos*.txt 2>/dev/null)
tar czf $OUT/call7.tgz -C $A out
