#!/usr/bin/env python3
"""Summarizes a gg_bench JSON into docs/results/graphs-*.json: per block, cases, bitwise-equal count and geomean
latencies of graph replay and the eager path. The headline mode of the fp32 blocks is fp16 (the speed mode);
every mode is under "modes".

Usage: collect_graphs.py BENCH_JSON OUT_JSON COMMIT COMMAND
"""
import json
import math
import sys

bench, out, commit, command = sys.argv[1:5]
data = json.load(open(bench))
by = {}
for r in data["results"]:
    by.setdefault(r["block"], {}).setdefault(r["mode"], []).append(r)

def geomean(xs):
    return math.exp(sum(math.log(x) for x in xs) / len(xs))

blocks = {}
for block, modes in by.items():
    summary = {}
    for mode, rs in modes.items():
        summary[mode] = {
            "cases": len(rs),
            "bitwise_equal": sum(r["bitwise_equal"] for r in rs),
            "correct": sum(r["correct"] for r in rs),
            "graph_geomean_us": round(geomean([r["graph_us"] for r in rs]), 2),
            "eager_geomean_us": round(geomean([r["eager_us"] for r in rs]), 2),
            "graph_host_geomean_us": round(geomean([r["graph_host_us"] for r in rs]), 2),
            "graph_span_geomean_us": round(geomean([r["graph_span_us"] for r in rs]), 2)
            if all(r.get("graph_span_us", -1) > 0 for r in rs) else None,
            "eager_host_geomean_us": round(geomean([r["eager_host_us"] for r in rs]), 2),
            "graph_slower_cases": [r["index"] for r in rs if r["graph_us"] > r["eager_us"] * 1.02],
        }
    head = summary.get("fp16") or summary.get("bf16") or next(iter(summary.values()))
    blocks[block] = dict(head, headline_mode="fp16" if "fp16" in summary else "bf16", modes=summary)
json.dump({"commit": commit, "command": command, "gpu": data["gpu"], "iters": data["iters"], "blocks": blocks},
          open(out, "w"), indent=2)
for b, s in blocks.items():
    print(f"{b[:12]:12s} {s['headline_mode']}: graph {s['graph_geomean_us']:9.1f} us  "
          f"eager {s['eager_geomean_us']:9.1f} us  bitwise {s['bitwise_equal']}/{s['cases']}")
