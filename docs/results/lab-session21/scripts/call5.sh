#!/usr/bin/env bash
# session 21 call 5: the cases above the few-token routes, where the official run at 70f8a2c was 1-2 % slower than
# ca61053's with the library unchanged there but for the launch priorities. Trees: base = 3acbe37 (main before this
# session), head = 70f8a2c (working tree), fewprio = head with the priorities only on the few-token routes.
# Per case (068: 1 2 0 15; 073: 2 13 3 5), 3 rounds.
set -uo pipefail
A=/tmp/s21c5; rm -rf $A; mkdir -p $A/out
t0=$(date +%s)
export LD_LIBRARY_PATH=$PWD/carry/cmocka/usr/lib/x86_64-linux-gnu
OUT=$A ROUNDS=0 bash scripts/lab/ab_bench.sh base=lab_tmp/base head=. fewprio=lab_tmp/fewprio > $A/out/build.txt 2>&1
cat $A/out/build.txt
echo "setup done at $(( $(date +%s) - t0 )) s"
cases() { [ $1 = 2 ] && echo "1 2 0 15" || echo "2 13 3 5"; }
for r in 1 2 3; do for t in base head fewprio; do for b in 2 3; do
  f=$A/$t-r$r-b$b.csv; rm -f $f
  for i in $(cases $b); do
    GG_TUNE_CACHE=$A/algos.txt timeout 40 $A/build-$t/bench/gg_bench --block $b --case $i --modes fast --iters 50 --warmup 10 \
      --csv $A/one.csv > /dev/null 2>> $A/$t-r$r.log || echo "$t r$r b$b c$i failed"
    [ -f $f ] && tail -n +2 $A/one.csv >> $f || cp $A/one.csv $f
  done
done; echo "round $r $t at $(( $(date +%s) - t0 )) s"; done; done
python3 scripts/lab/ab_summary.py $A > $A/out/ab5-summary.txt 2>&1
head -70 $A/out/ab5-summary.txt
echo "all done at $(( $(date +%s) - t0 )) s"
(cd $A && tar czf out/ab5-csv.tgz *.csv *.log algos.txt 2>/dev/null)
tar czf $OUT/call5.tgz -C $A out
