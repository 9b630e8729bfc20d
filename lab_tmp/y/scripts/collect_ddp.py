#!/usr/bin/env python3
"""Merges ddp_scaling results into docs/results/ddp-*.json: per block, the run with the median speedup (the lower
middle one for an even count), and every run under "runs" with the commit it ran on.

Each input is either one ddp_scaling --json file (a run of COMMIT) or a file this script wrote before (its runs keep
their own commits): so the runs of several `scripts/device.sh multigpu` calls can be pooled into one file, for calls
whose library code runs the same kernels (say so in the docs), for a steadier median than any one call gives.

Usage: collect_ddp.py OUT_JSON COMMIT COMMAND INPUT_JSON...
  COMMAND: how the runs were made; "" for pooled files, whose own commands are joined instead
"""
import json
import sys
from collections import defaultdict

out, commit, command = sys.argv[1:4]
runs, commands, pooled_from = defaultdict(list), [command] if command else [], []


def summary(r):
    n = r["gpus"]
    return {
        "M": r["M"], "gpus": n, "precision": r["precision"], "bucket_bytes": r["bucket_bytes"],
        f"speedup_{n}gpu": r["speedup"], "allreduce_hidden_fraction": r["allreduce_hidden_fraction"],
        "step_us_1gpu": r["step_us_1gpu"], "step_us_1gpu_before": r.get("step_us_1gpu_before"),
        "step_us_1gpu_after": r.get("step_us_1gpu_after"), f"step_us_{n}gpu": r["step_us_ngpu"],
        "comm_sms": r.get("comm_sms"), "copy_engines": r.get("copy_engines"), "steps": r.get("steps"),
        "cold_l2": r.get("cold_l2"), "local_step_us": r["local_step_us_ngpu"], "allreduce_us": r["allreduce_us"],
        "efficiency": r["efficiency"], "commit": commit,
    }


for path in sys.argv[4:]:
    d = json.load(open(path))
    if "blocks" in d:  # a file collected before: its runs, with their commits
        pooled_from.append(d["commit"])
        commands.append(d["command"].replace("<sha>", d["commit"]))
        for block, s in d["blocks"].items():
            runs[block].extend(dict(r, commit=r.get("commit", d["commit"])) for r in s["runs"])
    else:
        runs[d["block"]].append(summary(d))

blocks = {}
for block, rs in runs.items():
    n = rs[0]["gpus"]
    rs.sort(key=lambda r: r[f"speedup_{n}gpu"])
    blocks[block] = dict(rs[(len(rs) - 1) // 2], runs=rs)
result = {"commit": commit, "command": " ; ".join(commands), "blocks": blocks}
if pooled_from:
    result["pooled_from"] = pooled_from
json.dump(result, open(out, "w"), indent=2)
for b, s in blocks.items():
    n = s["gpus"]
    speedups = [r[f"speedup_{n}gpu"] for r in s["runs"]]
    hidden = [r["allreduce_hidden_fraction"] for r in s["runs"]]
    print(f"{b[:12]}: M={s['M']}, {len(speedups)} runs, median run: speedup {s[f'speedup_{n}gpu']:.3f} hidden "
          f"{s['allreduce_hidden_fraction']:.2f} (speedups {min(speedups):.3f}..{max(speedups):.3f}, hidden "
          f"{min(hidden):.2f}..{max(hidden):.2f})")
