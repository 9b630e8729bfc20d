#!/usr/bin/env bash
# session 27 call 6 (one H200): Nsight Compute on block 4's one-launch kernel (ssm_small, case 0: 128 tokens) at the
# head, clocks left alone (--clock-control none): speed of light, memory, warp states, scheduler, launch, occupancy,
# source counters; the kernel's first two launches (the bench's eager check, then a replay).
set -uo pipefail
A=/tmp/s27c6; rm -rf $A; mkdir -p $A/out
export LD_LIBRARY_PATH=$PWD/carry/cmocka/usr/lib/x86_64-linux-gnu
OUT=$A ROUNDS=0 bash scripts/lab/ab_bench.sh head=. > $A/out/build.txt 2>&1; cat $A/out/build.txt
B=$A/build-head/bench/gg_bench
S="--section SpeedOfLight --section MemoryWorkloadAnalysis --section MemoryWorkloadAnalysis_Tables --section WarpStateStats --section SchedulerStats --section LaunchStats --section Occupancy --section ComputeWorkloadAnalysis --section SourceCounters"
timeout 240 ncu --clock-control none -k regex:ssm_small --launch-count 2 $S --page details --print-details all $B \
  --block 4 --case 0 --modes fast --iters 2 --warmup 0 > $A/out/ncu-4-0.txt 2>&1
echo "ncu rc=$?"
grep -E "Duration|DRAM Throughput|Memory Throughput|L2 Cache Throughput|L1/TEX Hit|Compute \(SM\)|Stall|Issued Warp|Eligible|Active Warps|Registers|Grid Size|Cluster|Achieved Occupancy|Theoretical Occupancy|Block Limit" $A/out/ncu-4-0.txt | head -70
tar czf $OUT/call6.tgz -C $A out
