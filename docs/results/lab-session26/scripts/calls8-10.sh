#!/usr/bin/env bash
# session 26 calls 8-10 (one H200, the machine still warm from call 7, whose build and cache A they reuse; carry
# ["carry", "lab_tmp"]): single cases of block 4, the bias sum beside dW and the chain (enqueued last) against its
# place at the time. The three commands, run as three device calls:
A=/tmp/s26c7; export LD_LIBRARY_PATH=$PWD/carry/cmocka/usr/lib/x86_64-linux-gnu
# call 8 was run as `--case 5,11`, which timed case 5 only
call8() { # 11912 tokens: beside (last32k) against after the chain (last10k)
  for r in 1 2; do for v in last10k last32k; do mx=10000; [ $v = last32k ] && mx=32768
    GG_LAB_BIAS_LAST=1 GG_LAB_BESIDE_MAX=$mx GG_TUNE_CACHE=$A/algos-A.txt timeout 60 $A/build-x/bench/gg_bench \
      --block 4 --case 5 --modes fast --iters 50 --warmup 10 --csv $A/c8-$v-r$r.csv > /dev/null 2>&1
  done; done; mkdir -p $OUT/c8 && cp $A/c8-*.csv $OUT/c8/
}
call9() { # 17312 tokens, the same, 3 rounds
  for r in 1 2 3; do for v in last10k last32k; do mx=10000; [ $v = last32k ] && mx=32768
    GG_LAB_BIAS_LAST=1 GG_LAB_BESIDE_MAX=$mx GG_TUNE_CACHE=$A/algos-A.txt timeout 60 $A/build-x/bench/gg_bench \
      --block 4 --case 11 --modes fast --iters 50 --warmup 10 --csv $A/c9-$v-r$r.csv > /dev/null 2>&1
  done; done; mkdir -p $OUT/c9 && cp $A/c9-*.csv $OUT/c9/
}
call10() { # 34784 and 74432 tokens: before g (first) against beside, enqueued last (last)
  for c in 12 7; do for r in 1 2; do for v in first last; do mx=32768; [ $v = last ] && mx=100000
    GG_LAB_BIAS_LAST=1 GG_LAB_BESIDE_MAX=$mx GG_TUNE_CACHE=$A/algos-A.txt timeout 60 $A/build-x/bench/gg_bench \
      --block 4 --case $c --modes fast --iters 50 --warmup 10 --csv $A/c10-$v-$c-r$r.csv > /dev/null 2>&1
  done; done; done; mkdir -p $OUT/c10 && cp $A/c10-*.csv $OUT/c10/
}
"${1:-call8}"
