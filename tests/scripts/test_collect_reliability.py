#!/usr/bin/env python3
"""test_collect_reliability.py - scripts/collect_reliability.py on stage outputs made up here. A tests stage's: the
sanitizer runs counted per tool, a run stopped by its limit before any report counted as cut (not as a report), a
check that did not run recorded as null. A multigpu stage's, with --merge: the official JSON keeps every field of its
own (and its commit), and gains this run's two-GPU facts (dead_rank_detected_s, multigpu_memcheck_errors, the runs
cut) and the commit, command and GPU that made them; a dead-rank time the run did not print is null, never the older
one. Usage: test_collect_reliability.py REPO_ROOT"""
import json
import os
import subprocess
import sys
import tempfile

from checks import check, finish  # tests/scripts/checks.py

root = sys.argv[1]
script = os.path.join(root, "scripts", "collect_reliability.py")


def write(d, name, text):
    with open(os.path.join(d, name), "w") as f:
        f.write(text)


def collect(args):
    p = subprocess.run([sys.executable, script] + args, capture_output=True, text=True)
    return p.returncode, p.stdout + p.stderr


with tempfile.TemporaryDirectory() as d:
    tests_out = os.path.join(d, "tests")
    os.makedirs(tests_out)
    write(tests_out, "sanitizer.log",
          "========= ERROR SUMMARY: 0 errors\nmemcheck test_blocks_gpu exit 0\n"
          "========= ERROR SUMMARY: 2 errors\nmemcheck test_graphs_gpu exit 9\n"
          "racecheck test_blocks_gpu exit 124\n")
    official = os.path.join(d, "reliability-official.json")
    rc, out = collect([tests_out, official, "aaaaaaa", "the tests command", "NVIDIA H200"])
    check(rc == 0, "a tests stage's output is collected", out)
    r = json.load(open(official))
    check(r["memcheck_errors"] == 2 and r["racecheck_hazards"] is None and r["synccheck_errors"] is None,
          "memcheck's reports summed; tools that did not run are null", json.dumps(r))
    check(r.get("sanitizer_runs_cut") == {"racecheck": 1}, "a run stopped by its limit is counted as cut")
    check(r["dead_rank_detected_s"] is None, "no two-GPU run: dead_rank_detected_s is null")
    r["dead_rank_detected_s"] = 9.9  # as if an older two-GPU run had set it
    json.dump(r, open(official, "w"))

    mg_out = os.path.join(d, "multigpu")
    os.makedirs(mg_out)
    write(mg_out, "test_dist.log", "5/6 Test #20: test_dist_dead_rank ...   Passed\nDEAD_RANK_DETECTED_S 3.25\n")
    write(mg_out, "sanitizer-multigpu.log",
          "========= ERROR SUMMARY: 0 errors\nmemcheck test_dist exit 0\n"
          "========= ERROR SUMMARY: 0 errors\nmemcheck test_dist exit 0\n"
          "memcheck test_step_dist exit 124\n")
    merged = os.path.join(d, "reliability-merged.json")
    rc, out = collect(["--merge", official, mg_out, merged, "bbbbbbb", "the multigpu command", "NVIDIA H200"])
    check(rc == 0 and os.path.exists(merged), "a multigpu stage's output is merged", out)
    m = json.load(open(merged)) if os.path.exists(merged) else {}
    check(m.get("commit") == "aaaaaaa" and m.get("command") == "the tests command" and
          m.get("memcheck_errors") == 2 and m.get("sanitizer_runs_cut") == {"racecheck": 1},
          "the official fields and their commit are kept",
          json.dumps(m))
    check(m.get("dead_rank_detected_s") == 3.25, "the two-GPU run's dead-rank time")
    check(m.get("multigpu_memcheck_errors") == 0 and m.get("multigpu_sanitizer_runs_cut") == {"memcheck": 1},
          "memcheck on two GPUs: reports and runs cut of its own")
    check(m.get("multigpu_commit") == "bbbbbbb" and m.get("multigpu_command") == "the multigpu command" and
          m.get("multigpu_gpu") == "NVIDIA H200", "the two-GPU facts name their commit, command and GPU")

    write(mg_out, "test_dist.log", "5/6 Test #20: test_dist_dead_rank ...   Failed\n")
    os.remove(os.path.join(mg_out, "sanitizer-multigpu.log"))
    if os.path.exists(merged):
        os.remove(merged)
    rc, out = collect(["--merge", official, mg_out, merged, "ccccccc", "the multigpu command", "NVIDIA H200"])
    m = json.load(open(merged)) if os.path.exists(merged) else {}
    check(rc == 0 and m.get("dead_rank_detected_s", 0) is None and "multigpu_memcheck_errors" in m and
          m["multigpu_memcheck_errors"] is None and
          "multigpu_sanitizer_runs_cut" not in m, "a run without the figures records null, not the older ones",
          json.dumps(m))

finish("COLLECT_RELIABILITY")
