#!/usr/bin/env bash
# session 20 call 9: after the cluster-launch helper (kernels/launch.cuh): the small shapes (both cluster kernels),
# block 4's and blocks 2/3's cases, determinism, memcheck of the small shapes, on the working tree's build
set -uo pipefail
A=/tmp/s20c9; rm -rf $A; mkdir -p $A
export LD_LIBRARY_PATH=$PWD/carry/cmocka/usr/lib/x86_64-linux-gnu
bash scripts/device.sh build > $A/build.log 2>&1 || tail -20 $A/build.log
T=build-device/tests
{ for f in 'library_matches*' 'reductions*' 'block4*' 'block2*' 'block3*'; do GG_TEST_FILTER="$f" timeout 200 $T/test_blocks_gpu; echo "rc=$?"; done; } > $A/tests.log 2>&1
grep -E "rc=|FAILED" $A/tests.log | tr '\n' ' '; echo
GG_TEST_FILTER='library_matches*' timeout 200 compute-sanitizer --tool memcheck $T/test_blocks_gpu > $A/memcheck.log 2>&1; echo "memcheck rc=$?" >> $A/memcheck.log
tail -2 $A/memcheck.log
cp $A/*.log $OUT/
