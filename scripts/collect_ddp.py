#!/usr/bin/env python3
"""Merges ddp_scaling JSON files into docs/results/ddp-*.json: per block, the run with the median speedup (of an
odd number of runs; the lower middle one otherwise), and every run under "runs".

Usage: collect_ddp.py OUT_JSON COMMIT COMMAND RUN_JSON...
"""
import json
import sys
from collections import defaultdict

out, commit, command = sys.argv[1:4]
runs = defaultdict(list)
for path in sys.argv[4:]:
    r = json.load(open(path))
    runs[r["block"]].append(r)


def summary(r):
    n = r["gpus"]
    return {
        "M": r["M"], "gpus": n, "precision": r["precision"], "bucket_bytes": r["bucket_bytes"],
        f"speedup_{n}gpu": r["speedup"], "allreduce_hidden_fraction": r["allreduce_hidden_fraction"],
        "step_us_1gpu": r["step_us_1gpu"], "step_us_1gpu_before": r.get("step_us_1gpu_before"),
        "step_us_1gpu_after": r.get("step_us_1gpu_after"), f"step_us_{n}gpu": r["step_us_ngpu"],
        "comm_sms": r.get("comm_sms"), "copy_engines": r.get("copy_engines"), "steps": r.get("steps"), "cold_l2": r.get("cold_l2"),
        "local_step_us": r["local_step_us_ngpu"], "allreduce_us": r["allreduce_us"], "efficiency": r["efficiency"],
    }


blocks = {}
for block, rs in runs.items():
    rs.sort(key=lambda r: r["speedup"])
    blocks[block] = dict(summary(rs[(len(rs) - 1) // 2]), runs=[summary(r) for r in rs])
json.dump({"commit": commit, "command": command, "blocks": blocks}, open(out, "w"), indent=2)
for b, s in blocks.items():
    speedup = s["speedup_%dgpu" % s["gpus"]]
    all_runs = ", ".join(f"{r['speedup_%dgpu' % r['gpus']]:.3f}/{r['allreduce_hidden_fraction']:.2f}" for r in s["runs"])
    print(f"{b[:12]}: M={s['M']} median run: speedup {speedup:.3f} hidden {s['allreduce_hidden_fraction']:.2f} "
          f"(runs, speedup/hidden: {all_runs})")
