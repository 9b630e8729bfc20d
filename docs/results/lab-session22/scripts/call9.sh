#!/usr/bin/env bash
# session 22 call 9 (one H200): branch wip/ffn-dw-wgmma's few-token dW GEMM (lab_tmp/dw = the branch's worktree):
# call 8's ping-pong variants with TMA-store epilogues (9, 10) and the same with one wgmma group kept in flight in
# the main loop (11, 12; every ping-pong variant now starts a tile with scale-d 0 instead of zeroed
# accumulators, which made ptxas serialize the wgmmas), against variant 0 and cuBLASLt: scripts/lab/dw_probe.cu (every variant checked against a
# float64 reference, NaN-poisoned output, accumulate; then timed, cold L2, CUDA events).
set -uo pipefail
A=/tmp/s22c9; rm -rf $A; mkdir -p $A/out
cd lab_tmp/dw
nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -Ikernels -o $A/dw_probe scripts/lab/dw_probe.cu \
  kernels/gemm_dw.cu -lcublasLt > $A/out/build.log 2>&1 || { cat $A/out/build.log; exit 1; }
timeout 300 $A/dw_probe > $A/out/dw_probe_v7.txt 2>&1; echo "probe rc=$?" >> $A/out/dw_probe_v7.txt
cat $A/out/dw_probe_v7.txt
cp $A/out/dw_probe_v7.txt $OUT/
