#!/usr/bin/env bash
# session 22 call 5 (two H200s): data-parallel scaling at few tokens per GPU, main (c153e65), blocks 2 and 3,
# M = 256 and 1024 per rank, with NCCL on 8 (the default), 16 and 32 CTAs (SMs left by dX alike, copy engines off),
# and with the copy engines (gg_dist_config.copy_engines = 1, comm_sms 8); 2 rounds, settings round-robin.
set -uo pipefail
A=/tmp/s22c5; rm -rf $A; mkdir -p $A/out
export LD_LIBRARY_PATH=$PWD/carry/cmocka/usr/lib/x86_64-linux-gnu
export NCCL_NVLS_ENABLE=0
t0=$(date +%s)
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv > $A/out/gpu.txt
cmake -S . -B $A/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90a \
  -DCMAKE_PREFIX_PATH=$PWD/carry/cmocka/usr > $A/out/build.log 2>&1 &&
  cmake --build $A/build --target ddp_scaling >> $A/out/build.log 2>&1 || { tail -30 $A/out/build.log; exit 1; }
echo "built at $(( $(date +%s) - t0 )) s"
for r in 1 2; do for m in 256 1024; do for b in 2 3; do for s in sm8 sm16 sm32 ce8; do
  case $s in sm*) sms=${s#sm} ce=0 ;; ce*) sms=${s#ce} ce=1 ;; esac
  GG_TUNE_CACHE=$A/algos.txt timeout 120 $A/build/examples/ddp_scaling --block $b --tokens $m --steps 50 \
    --comm-sms $sms --copy-engines $ce --json $A/out/ddp-$s-b$b-m$m-r$r.json >> $A/out/ddp.log 2>&1 ||
    echo "$s b$b m$m r$r failed"
done; done; done; echo "round $r at $(( $(date +%s) - t0 )) s"; done
python3 - $A/out > $A/out/ddp-summary.txt <<'PY'
import glob, json, os, sys
rows = {}
for f in sorted(glob.glob(os.path.join(sys.argv[1], 'ddp-*.json'))):
    s, b, m, r = os.path.basename(f)[4:-5].split('-')
    rows.setdefault((b, int(m[1:]), s), []).append(json.load(open(f)))
print('%-4s %-6s %-5s %10s %10s %10s %10s %8s %8s' % ('blk', 'M', 'set', 'step1', 'stepN', 'localN', 'allred',
      'hidden', 'speedup'))
for k in sorted(rows):
    for v in rows[k]:
        print('%-4s %-6s %-5s %10.2f %10.2f %10.2f %10.2f %8.3f %8.3f' % (k[0], k[1], k[2], v['step_us_1gpu'],
              v['step_us_ngpu'], v['local_step_us_ngpu'], v['allreduce_us'], v['allreduce_hidden_fraction'],
              v['speedup']))
PY
cat $A/out/ddp-summary.txt
echo "all done at $(( $(date +%s) - t0 )) s"
tar czf $OUT/call5.tgz -C $A out
cp $A/out/ddp-summary.txt $OUT/
