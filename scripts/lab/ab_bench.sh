#!/usr/bin/env bash
# scripts/lab/ab_bench.sh - lab: the same benchmark over several source trees on one GPU. Builds gg_bench for each
# tree (Release, the chip's architecture), then runs `gg_bench --modes fast` over the trees in ROUNDS rounds (every
# tree once per round, so drift of clocks and temperature hits all alike). Per run: $OUT/<name>-r<k>.csv and its
# progress log; the trees share one autotune cache file, so they time the same GEMM algorithms.
#   OUT=... ROUNDS=3 ITERS=50 BLOCKS="1 2 3 4" bash scripts/lab/ab_bench.sh NAME=TREE[:BLOCKS] ...
# (BLOCKS after a tree, comma-separated: only those blocks for that tree.) OWN_CACHE="NAME ...": those trees tune
# their GEMMs into their own cache file (a tree that changes how GEMMs are tuned).
# Lab trees belong in lab_tmp/ (ignored by git: never committed; name it in the device tool's carry with `carry`).
# Summary: python3 scripts/lab/ab_summary.py $OUT. Per case instead of whole blocks, or variants of a tree by
# environment (a lab tree's knobs): ROUNDS=0 here, then scripts/lab/ab_cases.sh.
set -uo pipefail
OUT=${OUT:?set OUT}
mkdir -p "$OUT"
arch=${GG_CUDA_ARCH:-90a}
cmocka=$(cd "$(dirname "$0")/../.." && pwd)/carry/cmocka/usr # the bench builds with the test harness (cmocka)
build() { # name tree: in the background, all trees at once
  local t0=$(date +%s)
  cmake -S "$2" -B "$OUT/build-$1" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES="$arch" \
    -DCMAKE_PREFIX_PATH="$cmocka" -DGG_BUILD_EXAMPLES=OFF > "$OUT/build-$1.log" 2>&1 &&
    cmake --build "$OUT/build-$1" --target gg_bench >> "$OUT/build-$1.log" 2>&1 ||
    { tail -30 "$OUT/build-$1.log"; return 1; }
  echo "built $1 from $2 in $(( $(date +%s) - t0 )) s"
}
pids=()
for spec in "$@"; do
  name=${spec%%=*} dir=${spec#*=}
  build "$name" "$(cd "${dir%%:*}" && pwd)" & pids+=($!)
done
for p in "${pids[@]}"; do wait "$p" || exit 1; done
for r in $(seq 1 "${ROUNDS:-3}"); do
  for spec in "$@"; do
    name=${spec%%=*} dir=${spec#*=} blocks=${BLOCKS:-1 2 3 4}
    [ "$dir" != "${dir%%:*}" ] && blocks=${dir#*:} && blocks=${blocks//,/ }
    cache=$OUT/ab-gemm-algos.txt
    [[ " ${OWN_CACHE:-} " == *" $name "* ]] && cache=$OUT/ab-gemm-algos-$name.txt
    for b in $blocks; do
      GG_TUNE_CACHE=$cache "$OUT/build-$name/bench/gg_bench" --block "$b" --modes fast --iters "${ITERS:-50}" --warmup 10 \
        --csv "$OUT/$name-r$r-b$b.csv" > /dev/null 2>> "$OUT/$name-r$r.log" || echo "$name round $r block $b failed"
    done
    echo "round $r: $name done"
  done
done
