#!/usr/bin/env python3
"""Where a kernel's warps wait, from an Nsight Compute source page (`ncu -i X.ncu-rep --page source --csv
--print-source sass`, as scripts/lab/fused_check.sh on wip/ssm-fused-v2 writes to ncu-<name>-sass.csv[.gz]).

Prints the total of warp-stall samples, then the instructions with the most samples, each with its share and its three
largest stall reasons. An mbarrier wait compiles to `SYNCS.PHASECHK.TRANS64.TRYWAIT Pn, [...]` and, right after,
`@!Pn BRA` to an out-of-line retry loop: the samples land on the branch, which waits (long scoreboard) for the
TRYWAIT's result, so each such branch is shown with the TRYWAIT it waits for (its address), which names the barrier.
    python3 scripts/lab/sass_stalls.py FILE.csv[.gz] [--top N]"""
import csv
import gzip
import re
import sys


def rows_of(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        reader = csv.reader(f)
        next(reader)  # the kernel's name
        header = next(reader)
        return header, [r for r in reader if len(r) == len(header)]


def main():
    path = sys.argv[1]
    top = int(sys.argv[sys.argv.index("--top") + 1]) if "--top" in sys.argv else 20
    header, rows = rows_of(path)
    col = {h: i for i, h in enumerate(header)}
    samples_col = col["Warp Stall Sampling (All Samples)"]
    reasons = [h for h in header if h.startswith("stall_") and "Not Issued" not in h]
    total = sum(int(r[samples_col] or 0) for r in rows)
    print(f"{path}: {total} samples, {len(rows)} instructions")
    last_wait = {}  # predicate -> address of the latest TRYWAIT setting it
    notes = {}
    for r in rows:
        src = r[col["Source"]].strip()
        m = re.match(r"SYNCS\.PHASECHK\.\S*TRYWAIT\s+(P\d)", src)
        if m:
            last_wait[m.group(1)] = r[col["Address"]]
        m = re.match(r"@!(P\d)\s+BRA", src)
        if m and m.group(1) in last_wait:
            notes[r[col["Address"]]] = f"waits for the TRYWAIT at ...{last_wait[m.group(1)][-5:]}"
    for r in sorted(rows, key=lambda r: -int(r[samples_col] or 0))[:top]:
        n = int(r[samples_col] or 0)
        why = sorted(((int(r[col[h]] or 0), h[6:]) for h in reasons), reverse=True)[:3]
        why = ", ".join(f"{k} {v}" for v, k in why if v)
        addr = r[col["Address"]]
        src = r[col["Source"]].strip()
        note = notes.get(addr, "")
        note = f"  ({note})" if note else ""
        print(f"...{addr[-5:]} {100 * n / max(total, 1):5.1f} %  {src[:58]:58s} {why}{note}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
