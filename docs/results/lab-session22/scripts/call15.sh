#!/usr/bin/env bash
# session 22 call 15 (one H200): branch wip/ffn-dw-wgmma's few-token dW GEMM (lab_tmp/dw = the branch's worktree):
# variant 17 = variant 13 with 4 ring stages and one whole-tile staging buffer that the two consumers take in turn
# (a `staged` barrier, one phase per tile, after the stores read it), so that both the deeper ring (call 14) and
# whole-tile stores fit; against variants 0, 13 and 16 and cuBLASLt: scripts/lab/dw_probe.cu (every variant checked
# against a float64 reference, NaN-poisoned output, accumulate; then timed, cold L2, CUDA events).
set -uo pipefail
A=/tmp/s22c15; rm -rf $A; mkdir -p $A/out
cd lab_tmp/dw
nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -Ikernels -o $A/dw_probe scripts/lab/dw_probe.cu \
  kernels/gemm_dw.cu -lcublasLt > $A/out/build.log 2>&1 || { cat $A/out/build.log; exit 1; }
timeout 300 $A/dw_probe > $A/out/dw_probe_v11.txt 2>&1; echo "probe rc=$?" >> $A/out/dw_probe_v11.txt
cat $A/out/dw_probe_v11.txt
cp $A/out/dw_probe_v11.txt $OUT/
