#!/usr/bin/env python3
"""Whether a bench run's numbers are unchanged within noise against a reference run: two docs/results/bench-*.json
files (scripts/collect_bench.py), per block and per case, gradgraph's latency (median_us) only.

Noise, as measured (docs/decisions.md, "Measuring: what moves between runs"): official runs on two machines move a
block's geomean by 1-4 % with its code unchanged, and fresh autotune caches move single cases by about 2 % (a few
small cases are bimodal). So a block is unchanged when its geomean moved by at most --block-tolerance (default 4 %),
and a case is flagged when it moved by more than --case-tolerance (default 8 %); flagged cases are listed, they do
not fail the comparison on their own. Exit status: 0 when every block is within its tolerance, 1 when one is not,
2 on unusable input (different cases, a block missing).

Usage: compare_bench.py REFERENCE_JSON NEW_JSON [--block-tolerance 0.04] [--case-tolerance 0.08]
"""
import argparse
import json
import math
import sys


def geo(xs):
    return math.exp(sum(math.log(x) for x in xs) / len(xs))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("reference")
    ap.add_argument("new")
    ap.add_argument("--block-tolerance", type=float, default=0.04)
    ap.add_argument("--case-tolerance", type=float, default=0.08)
    opt = ap.parse_args()
    ref, new = json.load(open(opt.reference)), json.load(open(opt.new))
    print(f"reference {ref.get('commit')} ({ref.get('timing')}), new {new.get('commit')} ({new.get('timing')})")
    if ref.get("timing") != new.get("timing"):
        print("the two runs timed differently: their numbers do not compare", file=sys.stderr)
        return 2
    worst = 0
    for name, rb in ref["blocks"].items():
        nb = new["blocks"].get(name)
        if nb is None or rb["mode"] != nb["mode"]:
            print(f"{name}: missing from the new run, or in another mode", file=sys.stderr)
            return 2
        rc = {c["index"]: c for c in rb["cases"]}
        nc = {c["index"]: c for c in nb["cases"]}
        if rc.keys() != nc.keys() or any(rc[i]["M"] != nc[i]["M"] for i in rc):
            print(f"{name}: the runs have different cases", file=sys.stderr)
            return 2
        ratios = {i: nc[i]["median_us"] / rc[i]["median_us"] for i in sorted(rc)}
        block = geo(list(ratios.values()))
        ok = abs(block - 1) <= opt.block_tolerance
        worst = max(worst, 0 if ok else 1)
        flagged = [f"#{i} (M={rc[i]['M']}) {rc[i]['median_us']} -> {nc[i]['median_us']} us ({r - 1:+.1%})"
                   for i, r in ratios.items() if abs(r - 1) > opt.case_tolerance]
        print(f"{name[:12]} {rb['mode']}: geomean {geo([c['median_us'] for c in rb['cases']]):.2f} -> "
              f"{geo([c['median_us'] for c in nb['cases']]):.2f} us ({block - 1:+.2%}), "
              f"cases {min(ratios.values()) - 1:+.1%} to {max(ratios.values()) - 1:+.1%}: "
              f"{'within noise' if ok else 'MOVED'}"
              + (f"; beyond {opt.case_tolerance:.0%}: " + ", ".join(flagged) if flagged else ""))
    print("every block within noise" if worst == 0 else "a block moved beyond noise")
    return worst


if __name__ == "__main__":
    sys.exit(main())
