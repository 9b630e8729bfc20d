#!/usr/bin/env python3
"""Per-block plots of latency against the speed of light and the PyTorch peers.

Usage: plot.py BENCH_JSON [PEERS_JSON] OUT_DIR
BENCH_JSON from gg_bench --json; PEERS_JSON from bench/peers/torch_peers.py --json. One PNG per block: every case's
latency (graph replay, CUPTI kernel span when measured, else CUDA events) in the block's fast mode, the H200 SOL,
every peer variant that ran (TF32 / native in purple, fp16 operands in orange, autocast fp16 in green; eager dotted,
torch.compile dashed; a case where the variant failed the tolerance drawn as a red x, not joined to the line) and
the best peer (per case the fastest variant that passed, as scripts/collect_bench.py takes it), and for blocks 2 and 3
the GEMMs alone (torch_peers.py --gemm-floor: a floor, never a peer), against the case's token count M, log-log.
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
FLOOR = "gemm_floor"  # torch_peers.py --gemm-floor's field: the block's GEMMs alone, a bound, not a peer
variants = list((peers or {}).get("variants") or ["torch_eager", "torch_compile"])  # the peers JSON lists them
for r in peer_rows.values():
    variants += [k[:-3] for k in r if k.endswith("_us") and k[:-3] not in variants and k[:-3] != FLOOR]

for block, rows in sorted(by_block.items()):
    rows.sort(key=lambda r: (r["M"], r["index"]))
    m = [r["M"] for r in rows]
    fig, ax = plt.subplots(figsize=(7, 4.5))
    ours = [r["graph_span_us"] if r.get("graph_span_us", -1) > 0 else r["graph_us"] for r in rows]
    ax.plot(m, ours, "o-", label="gradgraph (graph replay)")
    ax.plot(m, [r["sol_us"] for r in rows], "k--", label="speed of light (H200)")
    colors = {"torch": "tab:purple", "torch_fp16": "tab:orange", "torch_autocast": "tab:green"}
    peer = [peer_rows.get((block, r["index"]), {}) for r in rows]
    best = [min((p[v + "_us"] for v in variants if p.get(v + "_us") and p.get(v + "_correct")), default=None)
            for p in peer]
    failed = False
    for name in variants:
        family, kind = name.rsplit("_", 1)
        pts = [(x, p.get(name + "_us"), bool(p.get(name + "_correct"))) for x, p in zip(m, peer)]
        ok = [(x, y) for x, y, c in pts if y and c]
        bad = [(x, y) for x, y, c in pts if y and not c]
        if not ok and not bad:
            continue
        style = ("^" if kind == "compile" else "s") + ("--" if kind == "compile" else ":")
        if ok:
            ax.plot(*zip(*ok), style, color=colors.get(family, "tab:gray"), markersize=4, linewidth=1,
                    label=name.replace("_", " ") + " (CUDA graph)")
        if bad:
            ax.plot(*zip(*bad), "x", color="red", markersize=7, label=None if failed else "peer failing the tolerance")
            failed = True
    floor = [(x, p.get(FLOOR + "_us")) for x, p in zip(m, peer) if p.get(FLOOR + "_us")]
    if floor:
        ax.plot(*zip(*floor), "d-.", color="tab:brown", markersize=4, linewidth=1,
                label="GEMMs alone, fp16 operands (a floor, not a peer)")
    if any(best):
        ax.plot([x for x, y in zip(m, best) if y], [y for y in best if y], "-", color="black", alpha=0.35,
                linewidth=4, label="best peer (fastest that passes)")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("tokens M")
    ax.set_ylabel("latency, us (cold L2)")
    ax.set_title(block)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    path = os.path.join(out, block[:3] + ".png")
    fig.savefig(path, dpi=110)
    print(path)
