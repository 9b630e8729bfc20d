#!/usr/bin/env bash
# session 27 call 2 (one H200): block 4's chain streamed through shared memory by bulk copies on the narrow SMs
# (kernels/chain_stream.cu, knob GG_LAB_STREAM=1), against the register kernel. First the GPU tests of block 4 with
# the knob (small shapes, 600 / 4001 tokens, every case 10 rounds; memcheck over the small shapes). Then tree x
# (the working tree) with knobs: GG_LAB_STREAM, GG_LAB_N10K / GG_LAB_N1500 (narrow SMs from 10000 / 1500 tokens).
# Block 4 whole, one shared cache, 3 rounds; traces.
set -uo pipefail
A=/tmp/s27c2; rm -rf $A; mkdir -p $A/out
t0=$(date +%s)
export LD_LIBRARY_PATH=$PWD/carry/cmocka/usr/lib/x86_64-linux-gnu
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $A/out/gpu.txt
OUT=$A ROUNDS=0 bash scripts/lab/ab_bench.sh x=lab_tmp/x > $A/out/build.txt 2>&1 &
OUT=$A/dev bash scripts/device.sh build > $A/out/device-build.txt 2>&1
wait; cat $A/out/build.txt; tail -3 $A/out/device-build.txt
GG_LAB_STREAM=1 GG_TEST_FILTER='*small*' timeout 200 build-device/tests/test_blocks_gpu > $A/out/test-small.txt 2>&1
echo "small: rc $? $(grep -E '^\[  (PASSED|FAILED)' $A/out/test-small.txt | tr '\n' ' ')"
GG_LAB_STREAM=1 GG_TEST_FILTER='*block4*' timeout 200 build-device/tests/test_blocks_gpu > $A/out/test-block4.txt 2>&1
echo "block4: rc $? $(grep -E '^\[  (PASSED|FAILED)' $A/out/test-block4.txt | tr '\n' ' ')"
GG_LAB_STREAM=1 GG_TEST_FILTER='*small*' timeout 200 compute-sanitizer --tool memcheck --error-exitcode 9 \
  build-device/tests/test_blocks_gpu > $A/out/memcheck.txt 2>&1
echo "memcheck rc $?"; tail -3 $A/out/memcheck.txt
echo "tests done at $(( $(date +%s) - t0 )) s"
V=(head=x@GG_LAB_NONE=1 st=x@GG_LAB_STREAM=1 st32=x@GG_LAB_STREAM=1,GG_LAB_N10K=32
   st24=x@GG_LAB_STREAM=1,GG_LAB_N10K=24 st40m=x@GG_LAB_STREAM=1,GG_LAB_N1500=40)
OUT=$A ROUNDS=3 DEADLINE=420 WHOLE="4" bash scripts/lab/ab_cases.sh "${V[@]}" > $A/out/cases.txt 2>&1
head -30 $A/out/ab-summary.txt
for vc in head:7 st:7 st32:7 st:5 st:6 st:2; do
  [ $(( $(date +%s) - t0 )) -gt 540 ] && break
  v=${vc%:*} c=${vc#*:} envs=
  for s in "${V[@]}"; do [ "${s%%=*}" = "$v" ] && envs=${s#*@}; done
  env ${envs//,/ } GG_TUNE_CACHE=$A/algos.txt timeout 30 $A/build-x/bench/gg_bench --block 4 --case $c \
    --modes fast --iters 10 --warmup 3 --trace $A/out/trace-$v-4-$c.csv > /dev/null 2>&1
  echo "== $v case $c"
  tail -n +2 $A/out/trace-$v-4-$c.csv | awk -F, '{printf "%s %s %s %.40s | %s %s\n", $5, $6, $7, $8, $(NF-2), $(NF-1)}'
done
echo "all done at $(( $(date +%s) - t0 )) s"
(cd $A && tar czf out/ab-csv.tgz *.csv *.log algos*.txt 2>/dev/null)
tar czf $OUT/call2.tgz -C $A out
