#!/usr/bin/env bash
# session 27 call 9 (one H200): block 4 whole, the session's libraries side by side on one machine: start (b2f088a,
# the session's start), f0ed (f0ed213: the discard; call 5's official run), head (83fb932: also the one-launch
# kernel's changes; call 8's official run). One shared cache, 4 rounds.
set -uo pipefail
A=/tmp/s27c9; rm -rf $A; mkdir -p $A/out
export LD_LIBRARY_PATH=$PWD/carry/cmocka/usr/lib/x86_64-linux-gnu
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $A/out/gpu.txt
OUT=$A ROUNDS=0 bash scripts/lab/ab_bench.sh start=lab_tmp/start f0ed=lab_tmp/f0ed head=lab_tmp/head \
  > $A/out/build.txt 2>&1; cat $A/out/build.txt
OUT=$A ROUNDS=4 DEADLINE=150 WHOLE="4" bash scripts/lab/ab_cases.sh start f0ed head > $A/out/cases.txt 2>&1
head -30 $A/out/ab-summary.txt
(cd $A && tar czf out/ab-csv.tgz *.csv *.log algos*.txt 2>/dev/null)
tar czf $OUT/call9.tgz -C $A out
