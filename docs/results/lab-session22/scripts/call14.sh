#!/usr/bin/env bash
# session 22 call 14 (one H200): branch wip/ffn-dw-wgmma's few-token dW GEMM (lab_tmp/dw = the branch's worktree):
# variant 16 = variant 13 with 4 ring stages instead of 3, the producer further ahead (call 11: 8.5 % of the samples
# waited for a stage), made room for by staging half the tile at a time (two TMA-store rounds per tile); against
# variants 0 and 13 and cuBLASLt: scripts/lab/dw_probe.cu (every variant checked against a float64 reference,
# NaN-poisoned output, accumulate; then timed, cold L2, CUDA events).
set -uo pipefail
A=/tmp/s22c14; rm -rf $A; mkdir -p $A/out
cd lab_tmp/dw
nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -Ikernels -o $A/dw_probe scripts/lab/dw_probe.cu \
  kernels/gemm_dw.cu -lcublasLt > $A/out/build.log 2>&1 || { cat $A/out/build.log; exit 1; }
timeout 300 $A/dw_probe > $A/out/dw_probe_v10.txt 2>&1; echo "probe rc=$?" >> $A/out/dw_probe_v10.txt
cat $A/out/dw_probe_v10.txt
cp $A/out/dw_probe_v10.txt $OUT/
