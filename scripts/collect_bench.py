#!/usr/bin/env python3
"""docs/results/bench-*.json, per block and case against SOL and the PyTorch peers, from one run's gg_bench JSON
and peers JSON. The case latency is gradgraph's graph replay as a CUPTI kernel span (the published protocol), in the
block's fast mode (fp16 for the fp32-I/O blocks); when the bench ran without CUPTI, the CUDA-event time, and "timing"
says so.
A peer counts as correct on a case when every peer that ran there passed the tolerance.

Usage: collect_bench.py BENCH_JSON PEERS_JSON OUT_JSON COMMIT COMMAND
"""
import json
import math
import sys

bench_path, peers_path, out, commit, command = sys.argv[1:6]
bench, peers = json.load(open(bench_path)), json.load(open(peers_path))
peer = {(r["block"], r["index"]): r for r in peers["results"]}
geo = lambda xs: math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs and all(x for x in xs) else None
fast = [r for r in bench["results"] if r["mode"] in ("fp16", "bf16")]
spans = all(r["graph_span_us"] > 0 for r in fast)  # -1 without CUPTI
latency = "graph_span_us" if spans else "graph_us"
timing = "CUPTI kernel span" if spans else "CUDA events (no CUPTI)"


def peers_correct(p):
    ran = [k for k in ("torch_eager", "torch_compile") if p.get(k + "_us")]
    return bool(ran) and all(bool(p.get(k + "_correct")) for k in ran)


blocks = {}
for r in fast:
    p = peer.get((r["block"], r["index"]), {})
    blocks.setdefault(r["block"], {"mode": r["mode"], "cases": []})["cases"].append({
        "index": r["index"], "M": r["M"], "median_us": r[latency], "sol_us": r["sol_us"],
        "correct": r["correct"] and r["bitwise_equal"], "torch_eager_us": p.get("torch_eager_us"),
        "torch_compile_us": p.get("torch_compile_us"),
        "peers_correct": peers_correct(p), "events_us": r["graph_us"]})
for b, s in blocks.items():
    cs = sorted(s["cases"], key=lambda c: c["index"])
    s["cases"] = cs
    s["geomean_us"] = round(geo([c["median_us"] for c in cs]), 2)
    s["sol_geomean_us"] = round(geo([c["sol_us"] for c in cs]), 2)
    s["sol_fraction"] = round(s["sol_geomean_us"] / s["geomean_us"], 4)
    te = geo([c["torch_eager_us"] for c in cs])
    tc = geo([c["torch_compile_us"] for c in cs])
    s["torch_eager_geomean_us"] = round(te, 2) if te else None
    s["torch_compile_geomean_us"] = round(tc, 2) if tc else None
    s["faster_than_torch_eager"] = sum(1 for c in cs if c["torch_eager_us"] and c["median_us"] < c["torch_eager_us"])
    s["faster_than_torch_compile"] = sum(1 for c in cs
                                         if c["torch_compile_us"] and c["median_us"] < c["torch_compile_us"])
    best = [min(x for x in (c["torch_eager_us"], c["torch_compile_us"]) if x)
            if (c["torch_eager_us"] or c["torch_compile_us"]) else None for c in cs]
    s["faster_than_best_peer"] = sum(1 for c, b in zip(cs, best) if b and c["median_us"] < b)
    s["peers_correct"] = all(c["peers_correct"] for c in cs)
    for name, g in (("torch_eager_over_gradgraph", te), ("torch_compile_over_gradgraph", tc)):
        s[name] = round(g / s["geomean_us"], 3) if g else None
json.dump({"commit": commit, "command": command, "gpu": bench["gpu"], "timing": timing + ", graph replay, cold L2",
           "blocks": blocks}, open(out, "w"), indent=1)
for b, s in blocks.items():
    print(f"{b[:12]} {s['mode']}: {s['geomean_us']} us, SOL {100 * s['sol_fraction']:.1f} %, torch eager "
          f"{s['torch_eager_geomean_us']} us, torch.compile {s['torch_compile_geomean_us']} us, "
          f"faster than the best peer on {s['faster_than_best_peer']}/{len(s['cases'])}")
