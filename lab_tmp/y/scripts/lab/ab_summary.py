#!/usr/bin/env python3
"""Lab: summary of scripts/lab/ab_bench.sh runs. Per block and precision mode, for each tree: the geomean over the
16 cases of the kernel span (CUPTI, graph replay) in each round and the fraction of SOL of the per-case medians over
rounds; then per case each tree's median span and its ratio to the reference tree's (the first tree ab_bench ran
with that block). Flags any case a tree did not verify as correct.
    python3 scripts/lab/ab_summary.py OUT_DIR"""
import csv, glob, math, os, re, statistics, sys
from collections import defaultdict

out = sys.argv[1]
runs = defaultdict(lambda: defaultdict(dict))  # tree -> round -> (block, index) -> row
for path in sorted(glob.glob(os.path.join(out, "*-r*-b*.csv"))):
    m = re.match(r"(.+)-r(\d+)-b\d+\.csv$", os.path.basename(path))
    tree, rnd = m.group(1), int(m.group(2))
    for row in csv.DictReader(open(path)):
        runs[tree][rnd][(row["block"] + " " + row["mode"], int(row["index"]))] = row
# ab_bench runs the trees in its command line's order each round: the earliest file of each tree gives that order
trees = sorted(runs, key=lambda t: min(os.path.getmtime(p) for p in glob.glob(os.path.join(out, f"{t}-r*-b*.csv"))))
geo = lambda xs: math.exp(sum(math.log(x) for x in xs) / len(xs))
blocks = sorted({k[0] for t in trees for r in runs[t].values() for k in r})
for block in blocks:
    print(f"\n== {block}")
    med = {}
    for t in [t for t in trees if any(k[0] == block for r in runs[t].values() for k in r)]:
        per_case = defaultdict(list)
        bad = []
        rounds = []
        for rnd, rows in sorted(runs[t].items()):
            spans = [float(v["graph_span_us"]) for k, v in sorted(rows.items()) if k[0] == block]
            bad += [k[1] for k, v in rows.items() if k[0] == block and v["correct"] != "1"]
            if spans: rounds.append(geo(spans))
            for k, v in rows.items():
                if k[0] == block:
                    per_case[k[1]].append((float(v["graph_span_us"]), float(v["sol_us"]), float(v["graph_us"])))
        med[t] = {i: (statistics.median(x[0] for x in v), v[0][1]) for i, v in per_case.items()}
        g = geo([m for m, _ in med[t].values()])
        sol = geo([s for _, s in med[t].values()])
        # CUDA events around the replay (a pass without CUPTI; includes the graph's launch): CUPTI's tracing can
        # lengthen the spans of two-stream graphs (perf-notes.md, "Session 19"), events show whether a change did
        events = geo([statistics.median(x[2] for x in v) for v in per_case.values()])
        print(f"{t:>12}: geomean per round " + " ".join(f"{x:.2f}" for x in rounds) +
              f" | median-of-rounds geomean {g:.2f} us, {100 * sol / g:.1f} % of SOL | events {events:.2f} us" +
              (f"  NOT CORRECT: {sorted(set(bad))}" if bad else ""))
    have = list(med)  # the first tree with this block and mode is the reference of the ratios
    base = have[0]
    print("  case      M  " + "  ".join(f"{t:>12}" for t in have))
    for i in sorted(med[base]):
        cells = [f"{med[base][i][0]:12.2f}"] + [f"{med[t][i][0]:7.2f} {med[t][i][0] / med[base][i][0]:4.2f}" for t in have[1:] if i in med[t]]
        M = next(v["M"] for r in runs[base].values() for k, v in r.items() if k == (block, i))
        print(f"  {i:4d} {M:>6}  " + "  ".join(cells))
