#!/usr/bin/env bash
# scripts/file_run.sh - files an official run (scripts/official_run.sh's run.tgz) under docs/results: run-<sha>/ gets
# the JSON, CSV and log archives, the two stages' output as device-tests.log and device-bench.log, the trace gzipped
# and the per-block plots; bench-h200.json, graphs-h200.json and correctness-h200.json are copied to docs/results/
# (the current official figures). docs/results keeps one run folder per kind: remove the previous run-<sha>/ in the
# same commit (git history keeps it), and update the numbers the docs quote (docs/results/README.md lists them).
#   bash scripts/file_run.sh RUN_TGZ SHA
set -euo pipefail
tgz=${1:?run.tgz} sha=${2:?commit}
root=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
tar xzf "$tgz" -C "$tmp"
d=$root/docs/results/run-$sha
mkdir -p "$d"
for f in bench-h200.json bench.csv bench.json correctness-h200.json graphs-h200.json logs-bench.tgz logs-tests.tgz \
  peers.json; do cp "$tmp/$f" "$d/"; done
cp "$tmp/t.log" "$d/device-tests.log"
cp "$tmp/b.log" "$d/device-bench.log"
gzip -c "$tmp/trace.csv" > "$d/trace.csv.gz"
mkdir -p "$tmp/logs" && tar xzf "$tmp/logs-bench.tgz" -C "$tmp/logs"
find "$tmp/logs" -name '*.png' -exec cp {} "$d/" \;
cp "$d/bench-h200.json" "$d/graphs-h200.json" "$d/correctness-h200.json" "$root/docs/results/"
grep -q "\"commit\": \"$sha" "$d/bench-h200.json" || echo "warning: bench-h200.json names another commit" >&2
echo "filed in $d"
ls -d "$root"/docs/results/run-* | grep -v "run-$sha\$" | sed 's/^/older run folder (remove it): /' || true
