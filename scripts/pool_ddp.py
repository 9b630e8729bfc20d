#!/usr/bin/env python3
"""Pools the runs of several `scripts/device.sh multigpu` calls (their ddp-h200x*.json, made by collect_ddp.py) into
one file of the same shape: per block the median run by speedup over all pooled runs (the lower middle one for an
even count), every run under "runs" with the commit it ran on. For calls whose library code runs the same kernels in
the same order (say so in the docs): more runs, on more machines, give a steadier median than any one call.

Usage: pool_ddp.py OUT_JSON COMMIT IN_JSON...   (COMMIT: the newest of them, whose code the file describes)
"""
import json
import sys

out, commit, inputs = sys.argv[1], sys.argv[2], sys.argv[3:]
pooled, commands = {}, []
for path in inputs:
    d = json.load(open(path))
    commands.append(d["command"].replace("<sha>", d["commit"]))
    for block, s in d["blocks"].items():
        pooled.setdefault(block, []).extend(dict(r, commit=d["commit"]) for r in s["runs"])
blocks = {}
for block, runs in pooled.items():
    n = runs[0]["gpus"]
    runs.sort(key=lambda r: r[f"speedup_{n}gpu"])
    blocks[block] = dict(runs[(len(runs) - 1) // 2], runs=runs)
json.dump({"commit": commit, "command": " ; ".join(commands), "pooled_from": [json.load(open(p))["commit"] for p in inputs],
           "blocks": blocks}, open(out, "w"), indent=2)
for block, s in blocks.items():
    n = s["gpus"]
    speedups = [r[f"speedup_{n}gpu"] for r in s["runs"]]
    print(f"{block[:12]}: {len(speedups)} runs, median run {s[f'speedup_{n}gpu']:.3f} / hidden "
          f"{s['allreduce_hidden_fraction']:.3f}; speedups {min(speedups):.3f}..{max(speedups):.3f}, "
          f"{sum(x >= 1.9 for x in speedups)} at 1.9x or more; hidden "
          f"{min(r['allreduce_hidden_fraction'] for r in s['runs']):.3f}..{max(r['allreduce_hidden_fraction'] for r in s['runs']):.3f}")
