#!/usr/bin/env bash
# session 27 call 3 (one H200): call 1's L2 prefetch of block 4's chain operands while g runs, now paced (a rate in
# GB/s over all prefetch CTAs, after a start delay, so that g's first loads do not queue behind it) and capped (a
# budget in MB, spread over the tensors front to back), by bulk requests (GG_LAB_PF=1) or per-line
# prefetch.global.L2 from every thread (GG_LAB_PF=2); g planned on GG_LAB_PF_GSM SMs fewer. Tree x = the working tree
# (c0330b7) with prefetch.cu and the knobs (`pf2.diff`). Block 4 whole, one shared cache, 3 rounds; traces.
set -uo pipefail
A=/tmp/s27c3; rm -rf $A; mkdir -p $A/out
t0=$(date +%s)
export LD_LIBRARY_PATH=$PWD/carry/cmocka/usr/lib/x86_64-linux-gnu
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $A/out/gpu.txt
OUT=$A ROUNDS=0 bash scripts/lab/ab_bench.sh x=lab_tmp/x > $A/out/build.txt 2>&1; cat $A/out/build.txt
P=GG_LAB_PF_MAXTOK=10000,GG_LAB_PF_DELAY=1
V=(head=x@GG_LAB_NONE=1
   b8=x@$P,GG_LAB_PF=1,GG_LAB_PF_CTAS=8,GG_LAB_PF_GSM=8,GG_LAB_PF_RATE=2000,GG_LAB_PF_MB=24
   l1=x@$P,GG_LAB_PF=2,GG_LAB_PF_CTAS=1,GG_LAB_PF_GSM=1,GG_LAB_PF_RATE=2000,GG_LAB_PF_MB=24
   l4=x@$P,GG_LAB_PF=2,GG_LAB_PF_CTAS=4,GG_LAB_PF_GSM=4,GG_LAB_PF_RATE=3000,GG_LAB_PF_MB=32
   l1u=x@$P,GG_LAB_PF=2,GG_LAB_PF_CTAS=1,GG_LAB_PF_RATE=2000,GG_LAB_PF_MB=24)
OUT=$A ROUNDS=3 DEADLINE=360 WHOLE="4" bash scripts/lab/ab_cases.sh "${V[@]}" > $A/out/cases.txt 2>&1
head -30 $A/out/ab-summary.txt
for vc in head:2 b8:2 l1:2 l4:2 l1u:2 l1:13 l4:13 l4:6; do
  [ $(( $(date +%s) - t0 )) -gt 500 ] && break
  v=${vc%:*} c=${vc#*:} envs=
  for s in "${V[@]}"; do [ "${s%%=*}" = "$v" ] && envs=${s#*@}; done
  env ${envs//,/ } GG_TUNE_CACHE=$A/algos.txt timeout 30 $A/build-x/bench/gg_bench --block 4 --case $c \
    --modes fast --iters 10 --warmup 3 --trace $A/out/trace-$v-4-$c.csv > /dev/null 2>&1
  echo "== $v case $c"
  tail -n +2 $A/out/trace-$v-4-$c.csv | awk -F, '{printf "%s %s %s %.40s | %s %s\n", $5, $6, $7, $8, $(NF-2), $(NF-1)}'
done
echo "all done at $(( $(date +%s) - t0 )) s"
(cd $A && tar czf out/ab-csv.tgz *.csv *.log algos*.txt 2>/dev/null)
tar czf $OUT/call3.tgz -C $A out
