#!/usr/bin/env bash
# session 27 call 1 (one H200): block 4's chain operands (gate_activated, ssm_output, gate; and dW's gated) prefetched
# into L2 by a small kernel on the aux stream while g runs (cp.async.bulk.prefetch.L2, 16 KiB requests). Tree x =
# the working tree with knobs: GG_LAB_PF=<CTAs> (0 off), GG_LAB_PF_GSM=<SMs g leaves free>, GG_LAB_PF_AFTER=1 (the
# prefetch enqueued after g), GG_LAB_PF_GATED=0 (not gated), GG_LAB_PF_MB=<budget>. Block 4 whole, one shared cache,
# 3 rounds; then traces of 422, 2048 and 5692 tokens.
set -uo pipefail
A=/tmp/s27c1; rm -rf $A; mkdir -p $A/out
t0=$(date +%s)
export LD_LIBRARY_PATH=$PWD/carry/cmocka/usr/lib/x86_64-linux-gnu
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $A/out/gpu.txt
OUT=$A ROUNDS=0 bash scripts/lab/ab_bench.sh x=lab_tmp/x > $A/out/build.txt 2>&1; cat $A/out/build.txt
V=(head=x@GG_LAB_NONE=1 pf1=x@GG_LAB_PF=1 pf1g=x@GG_LAB_PF=1,GG_LAB_PF_GSM=1 pf4g=x@GG_LAB_PF=4,GG_LAB_PF_GSM=4
   pf1a=x@GG_LAB_PF=1,GG_LAB_PF_AFTER=1 pf1ng=x@GG_LAB_PF=1,GG_LAB_PF_GATED=0 pf1b24=x@GG_LAB_PF=1,GG_LAB_PF_MB=24)
OUT=$A ROUNDS=3 DEADLINE=300 WHOLE="4" bash scripts/lab/ab_cases.sh "${V[@]}" > $A/out/cases.txt 2>&1
head -40 $A/out/ab-summary.txt
for vc in head:13 pf1:13 pf1g:13 head:2 pf1:2 pf1g:2 head:6 pf1:6; do
  [ $(( $(date +%s) - t0 )) -gt 480 ] && break
  v=${vc%:*} c=${vc#*:} envs=
  for s in "${V[@]}"; do [ "${s%%=*}" = "$v" ] && envs=${s#*@}; done
  env ${envs//,/ } GG_TUNE_CACHE=$A/algos.txt timeout 30 $A/build-x/bench/gg_bench --block 4 --case $c \
    --modes fast --iters 10 --warmup 3 --trace $A/out/trace-$v-4-$c.csv > /dev/null 2>&1
  echo "== $v case $c"
  tail -n +2 $A/out/trace-$v-4-$c.csv | awk -F, '{printf "%s %s %s %.40s | %s %s\n", $5, $6, $7, $8, $(NF-2), $(NF-1)}'
done
echo "all done at $(( $(date +%s) - t0 )) s"
(cd $A && tar czf out/ab-csv.tgz *.csv *.log algos*.txt 2>/dev/null)
tar czf $OUT/call1.tgz -C $A out
