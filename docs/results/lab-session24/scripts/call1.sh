#!/usr/bin/env bash
# session 24 call 1 (one H200): the working tree's tests (fb94723's kernel refactor had not run on a GPU; block 4's
# bf16x2 chain and narrow schedule are new), then block 4 per variant, 3 rounds (every variant once per round).
# Trees: base = HEAD (fb94723); x = the working tree with the narrow schedule's three constants read from the
# environment (GG_LAB_MIN tokens, GG_LAB_CTAS narrow SMs, GG_LAB_CHUNKS row chunks; defaults 4096, 24, 4).
# Variants: base; x2 = x with the narrow schedule off (the bf16x2 chain alone); n24c4 (x's defaults); n32c4;
# n24c8; n24c2; n16c4. Traces of cases 7 and 1 for base and n24c4.
set -uo pipefail
A=/tmp/s24c1; rm -rf $A; mkdir -p $A/out
t0=$(date +%s)
export LD_LIBRARY_PATH=$PWD/carry/cmocka/usr/lib/x86_64-linux-gnu
GG_COMMIT=working-tree OUT=$A/out/tests bash scripts/device.sh tests > $A/out/device-tests.log 2>&1
tail -25 $A/out/device-tests.log
echo "tests done at $(( $(date +%s) - t0 )) s"
OUT=$A ROUNDS=0 bash scripts/lab/ab_bench.sh base=lab_tmp/base x=lab_tmp/x > $A/out/build.txt 2>&1
cat $A/out/build.txt
variant() { # name: env for the x tree (base runs its own build)
  case $1 in
    base) echo "";; x2) echo "GG_LAB_MIN=999999999";; n24c4) echo "";; n32c4) echo "GG_LAB_CTAS=32";;
    n24c8) echo "GG_LAB_CHUNKS=8";; n24c2) echo "GG_LAB_CHUNKS=2";; n16c4) echo "GG_LAB_CTAS=16";;
  esac
}
for r in 1 2 3; do
  for v in base x2 n24c4 n32c4 n24c8 n24c2 n16c4; do
    [ $(( $(date +%s) - t0 )) -gt 470 ] && break 2
    tree=x; [ $v = base ] && tree=base
    env $(variant $v) GG_TUNE_CACHE=$A/algos.txt timeout 60 $A/build-$tree/bench/gg_bench --block 4 --modes fast \
      --iters 50 --warmup 10 --csv $A/$v-r$r-b4.csv > /dev/null 2>> $A/$v-r$r.log || echo "$v r$r failed"
  done
  echo "round $r at $(( $(date +%s) - t0 )) s"
done
python3 scripts/lab/ab_summary.py $A > $A/out/ab-summary.txt 2>&1; head -80 $A/out/ab-summary.txt
for v in base n24c4; do for i in 7 1; do
  tree=x; [ $v = base ] && tree=base
  GG_TUNE_CACHE=$A/algos.txt timeout 30 $A/build-$tree/bench/gg_bench --block 4 --case $i --modes fast --iters 10 \
    --warmup 3 --trace $A/out/trace-$v-4-$i.csv > /dev/null 2>&1
done; done
echo "all done at $(( $(date +%s) - t0 )) s"
(cd $A && tar czf out/ab-csv.tgz *.csv *.log algos.txt 2>/dev/null)
tar czf $OUT/call1.tgz -C $A out
