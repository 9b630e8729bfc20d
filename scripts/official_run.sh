#!/usr/bin/env bash
# scripts/official_run.sh - an official run at the commit given as $1, on a one-H200 machine: `scripts/device.sh
# tests`, then `GG_PEERS_COMPILE=1 GG_PEERS_TIMEOUT=300 scripts/device.sh bench`; both stages' output and everything
# they wrote go to $OUT/run.tgz (written after the tests, and again after the bench). About 230 s.
# File it with scripts/file_run.sh run.tgz <sha>.
set -uo pipefail
sha=${1:?commit}
rm -rf /tmp/run; mkdir -p /tmp/run
t0=$(date +%s)
GG_COMMIT=$sha OUT=/tmp/run bash scripts/device.sh tests > /tmp/t.log 2>&1
echo "tests rc $? at $(( $(date +%s) - t0 )) s"
grep -E "tests passed|PASSED|FAILED|memcheck" /tmp/t.log
cp /tmp/t.log /tmp/run/; tar czf $OUT/run.tgz -C /tmp/run .
GG_COMMIT=$sha GG_PEERS_COMPILE=1 GG_PEERS_TIMEOUT=300 OUT=/tmp/run bash scripts/device.sh bench > /tmp/b.log 2>&1
echo "bench rc $? at $(( $(date +%s) - t0 )) s"; grep -E "SOL .*faster|fail" /tmp/b.log | head -12
cp /tmp/t.log /tmp/b.log /tmp/run/; tar czf $OUT/run.tgz -C /tmp/run .
