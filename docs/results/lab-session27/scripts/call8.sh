#!/usr/bin/env bash
# session 27 call 8 (one H200): the official run at the commit given as $1: `scripts/device.sh tests`, then
# `GG_PEERS_COMPILE=1 GG_PEERS_TIMEOUT=300 scripts/device.sh bench` (run.tgz). No traces beyond the bench's own
# (the session's device time was nearly spent).
# (Its body, as run, is now scripts/lab/official_run.sh, the same commands.)
exec bash scripts/lab/official_run.sh "$@"
