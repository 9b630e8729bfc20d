#!/usr/bin/env bash
# session 27 call 4 (one H200): block 4's chain drops g's L2 lines once it has read them (discard.global.L2; g is the
# plan's scratch, so its dirty lines need never be written back), knob GG_LAB_DISCARD=1. First block 4's GPU tests
# with the knob (small shapes, every case 10 rounds; memcheck over the small shapes). Then tree x (the working tree)
# with and without the knob: block 4 whole, one shared cache, 4 rounds; traces of 5692, 8192 and 17312 tokens.
set -uo pipefail
A=/tmp/s27c4; rm -rf $A; mkdir -p $A/out
t0=$(date +%s)
export LD_LIBRARY_PATH=$PWD/carry/cmocka/usr/lib/x86_64-linux-gnu
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $A/out/gpu.txt
OUT=$A ROUNDS=0 bash scripts/lab/ab_bench.sh x=lab_tmp/x > $A/out/build.txt 2>&1 &
OUT=$A/dev bash scripts/device.sh build > $A/out/device-build.txt 2>&1
wait; cat $A/out/build.txt; tail -1 $A/out/device-build.txt
for f in small block4; do
  GG_LAB_DISCARD=1 GG_TEST_FILTER="*$f*" timeout 200 build-device/tests/test_blocks_gpu > $A/out/test-$f.txt 2>&1
  echo "$f: rc $? $(grep -E '^\[  (PASSED|FAILED)|RESULT' $A/out/test-$f.txt | tr '\n' ' ')"
done
GG_LAB_DISCARD=1 GG_TEST_FILTER='*small*' timeout 200 compute-sanitizer --tool memcheck --error-exitcode 9 \
  build-device/tests/test_blocks_gpu > $A/out/memcheck.txt 2>&1
echo "memcheck rc $?"; tail -2 $A/out/memcheck.txt
echo "tests done at $(( $(date +%s) - t0 )) s"
V=(head=x@GG_LAB_NONE=1 disc=x@GG_LAB_DISCARD=1)
OUT=$A ROUNDS=4 DEADLINE=400 WHOLE="4" bash scripts/lab/ab_cases.sh "${V[@]}" > $A/out/cases.txt 2>&1
head -30 $A/out/ab-summary.txt
for vc in head:6 disc:6 head:14 disc:14 head:11 disc:11; do
  [ $(( $(date +%s) - t0 )) -gt 520 ] && break
  v=${vc%:*} c=${vc#*:} envs=
  for s in "${V[@]}"; do [ "${s%%=*}" = "$v" ] && envs=${s#*@}; done
  env ${envs//,/ } GG_TUNE_CACHE=$A/algos.txt timeout 30 $A/build-x/bench/gg_bench --block 4 --case $c \
    --modes fast --iters 10 --warmup 3 --trace $A/out/trace-$v-4-$c.csv > /dev/null 2>&1
  echo "== $v case $c"
  tail -n +2 $A/out/trace-$v-4-$c.csv | awk -F, '{printf "%s %s %s %.40s | %s %s\n", $5, $6, $7, $8, $(NF-2), $(NF-1)}'
done
echo "all done at $(( $(date +%s) - t0 )) s"
(cd $A && tar czf out/ab-csv.tgz *.csv *.log algos*.txt 2>/dev/null)
tar czf $OUT/call4.tgz -C $A out
