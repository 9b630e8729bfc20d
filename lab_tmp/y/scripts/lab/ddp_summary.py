#!/usr/bin/env python3
"""Lab: medians per setting of the ddp_sweep JSON files in a folder (NAME-rR-bB.json)."""
import glob, json, os, re, statistics, sys
from collections import defaultdict
runs = defaultdict(list)
for f in glob.glob(os.path.join(sys.argv[1], "*.json")):
    m = re.match(r"(.*?)(-r\d+)?-b(\d)\.json$", os.path.basename(f))
    runs[(m.group(3), m.group(1))].append(json.load(open(f)))
print("block setting    n  step_us  local_us  allreduce_us  hidden(min..max)   speedup(min..max)")
for (b, name), rs in sorted(runs.items()):
    med = lambda k: statistics.median(r[k] for r in rs)
    hs = [r["allreduce_hidden_fraction"] for r in rs]; ss = [r["speedup"] for r in rs]
    print(f"{b:>5} {name:<10} {len(rs):2d} {med('step_us_ngpu'):8.1f} {med('local_step_us_ngpu'):9.1f} {med('allreduce_us'):13.1f}"
          f"  {statistics.median(hs):5.3f} ({min(hs):.3f}..{max(hs):.3f})  {statistics.median(ss):5.3f} ({min(ss):.3f}..{max(ss):.3f})")
