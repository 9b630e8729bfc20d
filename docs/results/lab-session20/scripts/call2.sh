#!/usr/bin/env bash
# session 20 call 2: Nsight Compute on gg_k_gemm_f32w (v6, TMA) in 068 case 5 (M 256) and 073 case 12 (M 256):
# its two launches per backward (G, then dX), each profiled alone (ncu serializes kernels)
set -uo pipefail
A=/tmp/s20c2; rm -rf $A; mkdir -p $A/out
export LD_LIBRARY_PATH=$PWD/carry/cmocka/usr/lib/x86_64-linux-gnu
OUT=$A ROUNDS=0 bash scripts/lab/ab_bench.sh new=. > $A/out/build.txt 2>&1
B=$A/build-new/bench/gg_bench
S="--section SpeedOfLight --section MemoryWorkloadAnalysis --section MemoryWorkloadAnalysis_Tables --section WarpStateStats --section SchedulerStats --section LaunchStats --section Occupancy --section ComputeWorkloadAnalysis --section SourceCounters"
for bc in "2 5" "3 12"; do set -- $bc
  timeout 200 ncu -k regex:gemm_f32w --launch-count 2 $S --page details --print-details all $B --block $1 --case $2 --modes fast --iters 2 --warmup 0 > $A/out/ncu-$1-$2.txt 2>&1
  echo "ncu $1 $2 rc=$?"
done
grep -E "Duration|DRAM Throughput|Memory Throughput|L2 Cache Throughput|Compute \(SM\)|Stall|Issued Warp|Registers|Grid Size|Cluster" $A/out/ncu-2-5.txt | head -60
tar czf $OUT/call2.tgz -C $A out
