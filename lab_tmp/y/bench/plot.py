#!/usr/bin/env python3
"""Per-block plots of latency against the speed of light and the PyTorch peers.

Usage: plot.py BENCH_JSON [PEERS_JSON] OUT_DIR
BENCH_JSON from gg_bench --json; PEERS_JSON from bench/peers/torch_peers.py --json. One PNG per block: every case's
latency (graph replay, CUPTI kernel span when measured, else CUDA events) in the block's fast mode, the H200 SOL,
and the peers, against the case's token count M, log-log.
"""
import json
import os
import sys

import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

bench = json.load(open(sys.argv[1]))
peers = json.load(open(sys.argv[2])) if len(sys.argv) > 3 else None
out = sys.argv[-1]
os.makedirs(out, exist_ok=True)

by_block = {}
for r in bench["results"]:
    if r["mode"] in ("fp16", "bf16"):
        by_block.setdefault(r["block"], []).append(r)
peer_rows = {}
for r in (peers or {}).get("results", []):
    peer_rows[(r["block"], r["index"])] = r

for block, rows in sorted(by_block.items()):
    rows.sort(key=lambda r: (r["M"], r["index"]))
    m = [r["M"] for r in rows]
    fig, ax = plt.subplots(figsize=(7, 4.5))
    ours = [r["graph_span_us"] if r.get("graph_span_us", -1) > 0 else r["graph_us"] for r in rows]
    ax.plot(m, ours, "o-", label="gradgraph (graph replay)")
    ax.plot(m, [r["sol_us"] for r in rows], "k--", label="speed of light (H200)")
    for name, style in (("torch_eager", "s:"), ("torch_compile", "^:")):
        ys = [peer_rows.get((block, r["index"]), {}).get(name + "_us") for r in rows]
        if any(y is not None for y in ys):
            ax.plot([x for x, y in zip(m, ys) if y], [y for y in ys if y], style, label=name.replace("_", " ") + " (CUDA graph)")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("tokens M")
    ax.set_ylabel("latency, us (cold L2)")
    ax.set_title(block)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    path = os.path.join(out, block[:3] + ".png")
    fig.savefig(path, dpi=110)
    print(path)
