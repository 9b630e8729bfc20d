#!/usr/bin/env bash
# session 22 call 13 (one H200): branch wip/ffn-dw-wgmma's few-token dW GEMM (lab_tmp/dw = the branch's worktree):
# the ping-pong TMA-store variants now end waiting only for their stores' reads (call 11: the wait for the writes was
# 4.4 % of the samples), and variant 15 = 13 with one wgmma group kept in flight; against variants 0, 9 and 13 and
# cuBLASLt: scripts/lab/dw_probe.cu (every variant checked against a float64 reference, NaN-poisoned output,
# accumulate; then timed, cold L2, CUDA events).
set -uo pipefail
A=/tmp/s22c13; rm -rf $A; mkdir -p $A/out
cd lab_tmp/dw
nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -Ikernels -o $A/dw_probe scripts/lab/dw_probe.cu \
  kernels/gemm_dw.cu -lcublasLt > $A/out/build.log 2>&1 || { cat $A/out/build.log; exit 1; }
timeout 300 $A/dw_probe > $A/out/dw_probe_v9.txt 2>&1; echo "probe rc=$?" >> $A/out/dw_probe_v9.txt
cat $A/out/dw_probe_v9.txt
cp $A/out/dw_probe_v9.txt $OUT/
