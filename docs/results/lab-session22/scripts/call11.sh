#!/usr/bin/env bash
# session 22 call 11 (one H200): Nsight Compute's sampled stall locations (SourceCounters, -lineinfo) for the
# ping-pong dW kernel's variant 9 (branch wip/ffn-dw-wgmma at 1903e92 = lab_tmp/dw), its first launch in
# scripts/lab/dw_probe.cu (068's dW2 at 200 tokens), with the source view of the sampled stalls.
set -uo pipefail
A=/tmp/s22c11; rm -rf $A; mkdir -p $A/out
cd lab_tmp/dw
nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -Ikernels -lineinfo -o $A/dw_probe scripts/lab/dw_probe.cu \
  kernels/gemm_dw.cu -lcublasLt > $A/out/build.log 2>&1 || { cat $A/out/build.log; exit 1; }
k='pp_kernelILi64ELi6ELb1ELi0E'
timeout 240 ncu --kernel-name-base mangled --kernel-name regex:"$k" --launch-count 1 --section WarpStateStats \
  --section SourceCounters --import-source yes -o $A/out/v9 $A/dw_probe > $A/out/ncu-run.txt 2>&1; echo "ncu rc=$?"
ncu --import $A/out/v9.ncu-rep --page details --section SourceCounters > $A/out/ncu-v9-source.txt 2>&1
ncu --import $A/out/v9.ncu-rep --page source --csv --print-source sass > $A/out/ncu-v9-sass.csv 2>&1
ncu --import $A/out/v9.ncu-rep --page source --csv --print-source cuda > $A/out/ncu-v9-cuda.csv 2>&1
ls -la $A/out
sed -n '1,80p' $A/out/ncu-v9-source.txt
tar czf $OUT/call11.tgz -C $A out
