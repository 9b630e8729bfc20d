#!/usr/bin/env bash
# session 23 call 1 (one H200): an evict-first L2 policy on data read once. After the protocol's flush the L2 holds
# ~60 MB of dirty lines; each line a load allocates at normal priority evicts one (a write-back in the load's DRAM
# time). Probe: `tma_probe l2`. Trees: base = HEAD (29d94dd); ef = base + gemm_f32w's weight boxes with an
# evict-first policy (TMA .L2::cache_hint), tanh_gate's and the SSM chains' input loads as ld.global.cs; efc = ef +
# the fp32 -> fp16 conversions' and gelu''s x loads as ld.global.cs. Per case blocks 2/3, whole blocks 1/4.
set -uo pipefail
A=/tmp/s23c1; B=/tmp/s23c1b; rm -rf $A $B; mkdir -p $A/out $B
t0=$(date +%s)
export LD_LIBRARY_PATH=$PWD/carry/cmocka/usr/lib/x86_64-linux-gnu
nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -Ikernels -o /tmp/tma_probe scripts/lab/tma_probe.cu -lcuda \
  && /tmp/tma_probe l2 > $A/out/l2_probe.txt 2>&1; cat $A/out/l2_probe.txt
echo "probe done at $(( $(date +%s) - t0 )) s"
OUT=$A ROUNDS=0 bash scripts/lab/ab_bench.sh base=lab_tmp/base ef=lab_tmp/ef efc=lab_tmp/efc > $A/out/build.txt 2>&1
cat $A/out/build.txt
OUT=$A ROUNDS=3 DEADLINE=270 CASES2="5 13 9 10 0 7 1" CASES3="12 0 6 3 13 4" bash scripts/lab/ab_cases.sh base ef efc \
  | head -60
echo "blocks 2/3 done at $(( $(date +%s) - t0 )) s"
for t in base efc; do for bc in "2 5" "3 12"; do set -- $bc
  GG_TUNE_CACHE=$A/algos.txt timeout 30 $A/build-$t/bench/gg_bench --block $1 --case $2 --modes fast --iters 10 \
    --warmup 3 --trace $A/out/trace-$t-$1-$2.csv > /dev/null 2>&1
done; done
for t in base ef; do mkdir -p $B/build-$t && ln -s $A/build-$t/bench $B/build-$t/bench; done
for r in 1 2; do for t in base ef; do for b in 1 4; do
  [ $(( $(date +%s) - t0 )) -gt 500 ] && break 3
  GG_TUNE_CACHE=$A/algos.txt timeout 60 $B/build-$t/bench/gg_bench --block $b --modes fast --iters 50 --warmup 10 \
    --csv $B/$t-r$r-b$b.csv > /dev/null 2>> $B/$t-r$r.log || echo "$t r$r b$b failed"
done; done; echo "blocks 1/4 round $r at $(( $(date +%s) - t0 )) s"; done
python3 scripts/lab/ab_summary.py $B > $A/out/ab-b14-summary.txt 2>&1; cat $A/out/ab-b14-summary.txt | head -30
echo "all done at $(( $(date +%s) - t0 )) s"
(cd $A && tar czf out/ab-csv.tgz *.csv *.log algos.txt 2>/dev/null; cd $B && tar czf $A/out/ab-b14-csv.tgz *.csv *.log)
tar czf $OUT/call1.tgz -C $A out
