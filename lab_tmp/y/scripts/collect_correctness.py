#!/usr/bin/env python3
"""Turns the RESULT lines of test_blocks_gpu into docs/results/correctness-*.json.

Usage: collect_correctness.py LOG OUT_JSON COMMIT COMMAND GPU
"""
import json
import sys

log, out, commit, command, gpu = sys.argv[1:6]
blocks = {}
for line in open(log):
    if line.startswith("RESULT "):
        r = json.loads(line[len("RESULT "):])
        blocks.setdefault(r.pop("block"), {})[r.pop("mode")] = r
json.dump({"commit": commit, "command": command, "gpu": gpu, "blocks": blocks}, open(out, "w"), indent=2)
print(f"{out}: {sum(len(m) for m in blocks.values())} block/mode results")
