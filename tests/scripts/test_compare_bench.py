#!/usr/bin/env python3
"""test_compare_bench.py - scripts/compare_bench.py's verdicts on runs made from the official bench-h200.json: the
run against itself is within noise (exit 0); one block 6 % slower has moved (exit 1, the block named); one case 10 %
slower inside an unchanged block is listed but passes; runs timed differently, or with a block missing, do not
compare (exit 2). Usage: test_compare_bench.py REPO_ROOT"""
import copy
import json
import os
import subprocess
import sys
import tempfile

root = sys.argv[1]
script = os.path.join(root, "scripts", "compare_bench.py")
official = json.load(open(os.path.join(root, "docs", "results", "bench-h200.json")))
failures = 0


def verdict(new, expect_rc, expect_text, name):
    global failures
    with tempfile.TemporaryDirectory() as d:
        ref_path, new_path = os.path.join(d, "ref.json"), os.path.join(d, "new.json")
        json.dump(official, open(ref_path, "w"))
        json.dump(new, open(new_path, "w"))
        p = subprocess.run([sys.executable, script, ref_path, new_path], capture_output=True, text=True)
    out = p.stdout + p.stderr
    ok = p.returncode == expect_rc and expect_text in out
    print(f"{'ok' if ok else 'FAILED'}: {name}: exit {p.returncode} (expected {expect_rc})")
    if not ok:
        print(out)
        failures += 1


def scaled(blocks, factor, case=None):
    run = copy.deepcopy(official)
    for name in blocks:
        for c in run["blocks"][name]["cases"]:
            if case is None or c["index"] == case:
                c["median_us"] *= factor
    return run


names = sorted(official["blocks"])
verdict(copy.deepcopy(official), 0, "every block within noise", "the official run against itself")
verdict(scaled([names[2]], 1.06), 1, "MOVED", f"{names[2][:12]} 6 % slower")
verdict(scaled([names[1]], 1.10, case=3), 0, "beyond 8%", f"{names[1][:12]} case 3 10 % slower")
other = copy.deepcopy(official)
other["timing"] = "something else"
verdict(other, 2, "do not compare", "timed differently")
missing = copy.deepcopy(official)
del missing["blocks"][names[0]]
verdict(missing, 2, "missing", "a block missing")
sys.exit(1 if failures else 0)
