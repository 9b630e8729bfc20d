#!/usr/bin/env bash
# session 22 call 12 (one H200): branch wip/ffn-dw-wgmma's few-token dW GEMM (lab_tmp/dw = the branch's worktree):
# the ping-pong kernel with 128 tokens per ring stage (half the barrier round trips per tile; call 11 found the main
# loop bound by waiting): variant 13 (TMA-store epilogue) and 14 (float2 stores), against variants 0 and 9 and
# cuBLASLt: scripts/lab/dw_probe.cu (every variant checked against a float64 reference, NaN-poisoned output,
# accumulate; then timed, cold L2, CUDA events).
set -uo pipefail
A=/tmp/s22c12; rm -rf $A; mkdir -p $A/out
cd lab_tmp/dw
nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -Ikernels -o $A/dw_probe scripts/lab/dw_probe.cu \
  kernels/gemm_dw.cu -lcublasLt > $A/out/build.log 2>&1 || { cat $A/out/build.log; exit 1; }
timeout 300 $A/dw_probe > $A/out/dw_probe_v8.txt 2>&1; echo "probe rc=$?" >> $A/out/dw_probe_v8.txt
cat $A/out/dw_probe_v8.txt
cp $A/out/dw_probe_v8.txt $OUT/
