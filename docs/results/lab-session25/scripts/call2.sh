#!/usr/bin/env bash
# session 25 call 2 (one H200): GEMMs that leave SMs free re-shaped to 2-CTA clusters (the heuristic offers none for
# block 4's g chunks on 108 SMs; reshape_to_fitting_clusters in src/gemm/matmul.c), and block 4's narrow schedule
# with them. One tree x = the working tree after call 1 with knobs from the environment: GG_LAB_NOFIX (no re-shaping:
# the old filter, lifted), GG_LAB_MIN / GG_LAB_CTAS / GG_LAB_CHUNKS (the narrow schedule's minimum tokens, SMs for the
# chain, g's row chunks), GG_LAB_GFULL (g planned for all SMs; with one chunk: g alone, then the chain on the narrow
# SMs beside dW). Every variant tunes into its own autotune cache. Block 4 whole, 3 rounds; then traces.
set -uo pipefail
A=/tmp/s25c2; rm -rf $A; mkdir -p $A/out
t0=$(date +%s)
export LD_LIBRARY_PATH=$PWD/carry/cmocka/usr/lib/x86_64-linux-gnu
OUT=$A ROUNDS=0 bash scripts/lab/ab_bench.sh x=lab_tmp/x > $A/out/build.txt 2>&1; cat $A/out/build.txt
B=$A/build-x/bench/gg_bench
variant() {
  case $1 in
    nofix) echo "GG_LAB_NOFIX=1";;
    fix) echo "GG_LAB_X=0";;
    f4k) echo "GG_LAB_MIN=4096";;
    f4kc2) echo "GG_LAB_MIN=4096 GG_LAB_CHUNKS=2";;
    f4kc8) echo "GG_LAB_MIN=4096 GG_LAB_CHUNKS=8";;
    f4kn32) echo "GG_LAB_MIN=4096 GG_LAB_CTAS=32";;
    g48) echo "GG_LAB_MIN=4096 GG_LAB_CHUNKS=1 GG_LAB_CTAS=48 GG_LAB_GFULL=1";;
    g32) echo "GG_LAB_MIN=4096 GG_LAB_CHUNKS=1 GG_LAB_CTAS=32 GG_LAB_GFULL=1";;
    g64) echo "GG_LAB_MIN=4096 GG_LAB_CHUNKS=1 GG_LAB_CTAS=64 GG_LAB_GFULL=1";;
  esac
}
V="nofix fix f4k f4kc2 f4kc8 f4kn32 g32 g48 g64"
for r in 1 2 3; do
  for v in $V; do
    [ $(( $(date +%s) - t0 )) -gt 330 ] && break 2
    env $(variant $v) GG_TUNE_CACHE=$A/algos-$v.txt timeout 60 $B --block 4 --modes fast --iters 50 --warmup 10 \
      --csv $A/$v-r$r-b4.csv > /dev/null 2>> $A/$v-r$r.log || echo "$v r$r failed"
  done
  echo "round $r at $(( $(date +%s) - t0 )) s"
done
python3 scripts/lab/ab_summary.py $A > $A/out/ab-summary.txt 2>&1; cat $A/out/ab-summary.txt | head -60
for v in fix f4k g48; do for c in 1 7; do
  env $(variant $v) GG_TUNE_CACHE=$A/algos-$v.txt timeout 30 $B --block 4 --case $c --modes fast --iters 10 --warmup 3 \
    --log debug --trace $A/out/trace-$v-4-$c.csv > /dev/null 2> $A/out/log-$v-4-$c.txt
  echo "== $v case $c"; grep -E 'GEMM|warn' $A/out/log-$v-4-$c.txt | head -6
  tail -n +2 $A/out/trace-$v-4-$c.csv | awk -F, '{printf "%s %s %s %.60s | %s %s %s\n", $5, $6, $7, $8, $(NF-2), $(NF-1), $NF}'
done; done
echo "all done at $(( $(date +%s) - t0 )) s"
(cd $A && tar czf out/ab-csv.tgz *.csv *.log algos-*.txt 2>/dev/null)
tar czf $OUT/call2.tgz -C $A out
