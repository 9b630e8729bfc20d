#!/usr/bin/env bash
# session 22 call 1 (two H200s): (a) scripts/lab/dgelu_probe.cu on GPU 0; (b) data-parallel scaling at few tokens,
# base = c153e65 (gg_k_gemm_f32w's dX on every SM it fits) against cap = the working tree (in a syncing plan dX's
# capacity scaled to the SMs left to NCCL), blocks 2 and 3, M = 256, 512, 1024, comm_sms 8, copy_engines 0, 2 rounds;
# (c) the multigpu tests of cap.
set -uo pipefail
A=/tmp/s22c1; rm -rf $A; mkdir -p $A/out
export LD_LIBRARY_PATH=$PWD/carry/cmocka/usr/lib/x86_64-linux-gnu
export NCCL_NVLS_ENABLE=0
t0=$(date +%s)
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv > $A/out/gpu.txt
build() { # name dir target...
  local n=$1 d=$2; shift 2
  cmake -S $d -B $A/build-$n -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90a \
    -DCMAKE_PREFIX_PATH=$PWD/carry/cmocka/usr > $A/out/build-$n.log 2>&1 &&
    cmake --build $A/build-$n "$@" >> $A/out/build-$n.log 2>&1 || { echo "build $n failed"; tail -30 $A/out/build-$n.log; }
}
build base $PWD/lab_tmp/base --target ddp_scaling & pb=$!
build cap $PWD & pc=$!
nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -o $A/dgelu_probe scripts/lab/dgelu_probe.cu -lcublasLt &&
  CUDA_VISIBLE_DEVICES=0 $A/dgelu_probe > $A/out/dgelu_probe.txt 2>&1
cat $A/out/dgelu_probe.txt
echo "probe done at $(( $(date +%s) - t0 )) s"
wait $pb; wait $pc
echo "built at $(( $(date +%s) - t0 )) s"
timeout 300 ctest --test-dir $A/build-cap -L multigpu -V > $A/out/multigpu-cap.log 2>&1
grep -E '^[0-9]+/[0-9]+ Test|tests passed' $A/out/multigpu-cap.log
echo "multigpu tests done at $(( $(date +%s) - t0 )) s"
for r in 1 2; do for m in 256 512 1024; do for b in 2 3; do for t in base cap; do
  GG_TUNE_CACHE=$A/algos.txt timeout 120 $A/build-$t/examples/ddp_scaling --block $b --tokens $m --steps 50 \
    --copy-engines 0 --json $A/out/ddp-$t-b$b-m$m-r$r.json >> $A/out/ddp-$t.log 2>&1 || echo "$t b$b m$m r$r failed"
done; done; done; echo "round $r at $(( $(date +%s) - t0 )) s"; done
python3 - $A/out > $A/out/ddp-summary.txt <<'PY'
import glob, json, os, sys
rows = {}
for f in sorted(glob.glob(os.path.join(sys.argv[1], 'ddp-*.json'))):
    t, b, m, r = os.path.basename(f)[4:-5].split('-')
    d = json.load(open(f))
    d = d.get('blocks', {d.get('block', 'x'): d}) if 'speedup_2gpu' not in d else {'x': d}
    for v in d.values():
        rows.setdefault((b, m, t), []).append(v)
print('%-4s %-6s %-5s %10s %10s %10s %10s %8s %8s' % ('blk', 'M', 'tree', 'step1', 'step2', 'local2', 'allred',
      'hidden', 'speedup'))
for (b, m, t), vs in sorted(rows.items(), key=lambda k: (k[0][0], int(k[0][1][1:]), k[0][2])):
    for v in vs:
        print('%-4s %-6s %-5s %10.2f %10.2f %10.2f %10.2f %8.3f %8.3f' % (b, m, t, v['step_us_1gpu'],
              v['step_us_2gpu'], v['local_step_us'], v['allreduce_us'], v['allreduce_hidden_fraction'],
              v['speedup_2gpu']))
PY
cat $A/out/ddp-summary.txt
echo "all done at $(( $(date +%s) - t0 )) s"
tar czf $OUT/call1.tgz -C $A out
cp $A/out/ddp-summary.txt $A/out/dgelu_probe.txt $OUT/ 2>/dev/null
