#!/usr/bin/env bash
# session 22 call 10 (one H200): Nsight Compute on the ping-pong dW kernel's two TMA-store forms (variants 9 and 10,
# branch wip/ffn-dw-wgmma at 1903e92 = lab_tmp/dw), each variant's first launch in scripts/lab/dw_probe.cu (068's
# dW2 at 200 tokens): speed of light, memory, warp stall reasons, launch and occupancy. (The first run of this
# call matched no kernel: ncu matches the demangled name unless told otherwise; the mangled base is used.)
set -uo pipefail
A=/tmp/s22c10; rm -rf $A; mkdir -p $A/out
cd lab_tmp/dw
nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -Ikernels -lineinfo -o $A/dw_probe scripts/lab/dw_probe.cu \
  kernels/gemm_dw.cu -lcublasLt > $A/out/build.log 2>&1 || { cat $A/out/build.log; exit 1; }
for k in 'pp_kernelILi64ELi6ELb1ELi0E' 'pp_kernelILi128ELi3ELb1ELi0E'; do
  timeout 240 ncu --kernel-name-base mangled --kernel-name regex:"$k" --launch-count 1 --section SpeedOfLight --section MemoryWorkloadAnalysis \
    --section WarpStateStats --section LaunchStats --section Occupancy --section SchedulerStats $A/dw_probe \
    > $A/out/ncu-$k.txt 2>&1; echo "ncu $k rc=$?"
done
grep -E 'Duration|Throughput|Stall|Warp Cycles|Issued|Eligible|Active Warps|Registers|Shared Memory Config' \
  $A/out/ncu-*.txt | head -80
tar czf $OUT/call10.tgz -C $A out
