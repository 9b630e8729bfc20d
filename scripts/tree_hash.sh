#!/usr/bin/env bash
# scripts/tree_hash.sh [DIR] - one hash of the source files under DIR (default: the current folder): the build
# description, the library, its kernels, tests, examples, bench and scripts, the README and docs left out (results
# are filed there). device.sh records it beside a run's results (tree.json); file_run.sh computes it again from the
# commit it files the run under and refuses a run whose files were not that commit's. SHA-256 of the sorted
# "hash  path" lines, Python caches left out.
set -euo pipefail
cd "${1:-.}"
paths=()
for p in CMakeLists.txt CMakePresets.json cmake include src kernels graphs examples bench scripts tests; do
  [ -e "$p" ] && paths+=("$p")
done
find "${paths[@]}" -type f ! -path '*/__pycache__/*' ! -name '*.pyc' -print0 | LC_ALL=C sort -z |
  xargs -0 sha256sum | sha256sum | cut -d' ' -f1
