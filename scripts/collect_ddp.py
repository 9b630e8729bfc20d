#!/usr/bin/env python3
"""Merges ddp_scaling JSON files into docs/results/ddp-*.json.

Usage: collect_ddp.py OUT_JSON COMMIT COMMAND RUN_JSON...
"""
import json
import sys

out, commit, command = sys.argv[1:4]
blocks = {}
for path in sys.argv[4:]:
    r = json.load(open(path))
    n = r["gpus"]
    blocks[r["block"]] = {
        "M": r["M"], "gpus": n, "precision": r["precision"], "bucket_bytes": r["bucket_bytes"],
        f"speedup_{n}gpu": r["speedup"], "allreduce_hidden_fraction": r["allreduce_hidden_fraction"],
        "step_us_1gpu": r["step_us_1gpu"], "step_us_1gpu_before": r.get("step_us_1gpu_before"),
        "step_us_1gpu_after": r.get("step_us_1gpu_after"), f"step_us_{n}gpu": r["step_us_ngpu"],
        "comm_sms": r.get("comm_sms"), "steps": r.get("steps"),
        "local_step_us": r["local_step_us_ngpu"], "allreduce_us": r["allreduce_us"], "efficiency": r["efficiency"],
    }
json.dump({"commit": commit, "command": command, "blocks": blocks}, open(out, "w"), indent=2)
for b, s in blocks.items():
    speedup = s["speedup_%dgpu" % s["gpus"]]
    print(f"{b[:12]}: M={s['M']} speedup {speedup:.3f} hidden {s['allreduce_hidden_fraction']:.2f}")
