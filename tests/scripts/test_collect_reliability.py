#!/usr/bin/env python3
"""test_collect_reliability.py - scripts/collect_reliability.py on stage outputs made up here. A tests stage's: the
sanitizer runs counted per tool, the fault injection's totals (test_faults' lines summed with test_dist_faults'
host-memory and CUDA-resource lines, its NCCL line apart), a run stopped by its limit before any report counted as cut
(not as a report), a check that did not run recorded as null. A multigpu stage's, with --merge: the official JSON keeps
every field of its own (and its commit), and gains this run's two-GPU facts (dead_rank_detected_s,
multigpu_memcheck_errors, the runs cut) and the commit, command and GPU that made them; a dead-rank time the run did not
print is null, never the older one. A sanitizers stage's (sanitizer-kernels.log), with --merge: racecheck's, synccheck's
and initcheck's counts (null for a tool whose runs were all cut) and runs cut replace the base's, memcheck's runs cut
and every other field (the two-GPU facts among them, the commit) stay, sanitizers_commit, _command and _gpu are
recorded; a run without cuts drops the base's cuts of those tools. Both stages' logs in one folder (`all` on two GPUs):
both merged. Neither: refused, nothing written. Usage: test_collect_reliability.py REPO_ROOT"""
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
    check(r["faults_injected"] is None and r["nccl_faults_injected"] is None, "no fault test's log: null")
    write(tests_out, "test_faults.log", 'FAULTS {"injected": 100, "failures": 0}\n'
          'FAULTS_RESOURCES {"injected": 10, "failures": 0}\n'
          'FAULTS_STEP {"injected": 20, "failures": 1}\nFAULTS_FORWARD {"injected": 3, "failures": 0}\n')
    write(tests_out, "test_dist_faults.log", 'NCCL_FAULTS {"injected": 50, "failures": 0}\n'
          'FAULTS_HOST_MEMORY {"injected": 7, "failures": 2}\nFAULTS_CUDA_RESOURCES {"injected": 5, "failures": 0}\n'
          'FAULTS_CUDA_CALLS {"injected": 4, "failures": 1}\n')
    rc, out = collect([tests_out, official, "aaaaaaa", "the tests command", "NVIDIA H200"])
    r = json.load(open(official))
    check(rc == 0 and r["faults_injected"] == 149 and r["fault_failures"] == 4,
          "the faults: the blocks' (their CUDA resources too), the steps', the forwards' and the data-parallel "
          "path's host memory, CUDA resources and CUDA calls added",
          json.dumps(r))
    check(r["nccl_faults_injected"] == 50 and r["nccl_fault_failures"] == 0, "the NCCL calls' faults on their own")
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

    # a sanitizers stage's output, over the JSON the multigpu stage left (with memcheck's runs cut as well)
    base = dict(json.load(open(official)), dead_rank_detected_s=3.25, multigpu_memcheck_errors=0,
                multigpu_commit="bbbbbbb", sanitizer_runs_cut={"memcheck": 1, "racecheck": 1})
    json.dump(base, open(official, "w"))
    san_out = os.path.join(d, "sanitizers")
    os.makedirs(san_out)
    write(san_out, "sanitizer-kernels.log",
          "========= RACECHECK SUMMARY: 0 hazards displayed (0 errors, 0 warnings)\nracecheck test_blocks_gpu exit 0\n"
          "racecheck test_blocks_gpu (*small*, GG_HOPPER_KERNELS=1 GG_GEMM_MAX_CLUSTER_CTAS=1): 201 s (limit 300 s)\n"
          "========= RACECHECK SUMMARY: 0 hazards displayed (0 errors, 0 warnings)\nracecheck test_blocks_gpu exit 0\n"
          "========= ERROR SUMMARY: 3 errors\nsynccheck test_blocks_gpu exit 9\n"
          "synccheck test_blocks_gpu (*small*, GG_HOPPER_KERNELS=1 GG_GEMM_MAX_CLUSTER_CTAS=): 30 s (limit 300 s)\n"
          "========= ERROR SUMMARY: 0 errors\nsynccheck test_blocks_gpu exit 0\n"
          "initcheck test_blocks_gpu: skipped, the stage's time budget is spent (GG_SANITIZERS_BUDGET)\n"
          "initcheck test_blocks_gpu exit 124\n")
    merged = os.path.join(d, "reliability-sanitizers.json")
    rc, out = collect(["--merge", official, san_out, merged, "ddddddd", "the sanitizers command", "NVIDIA H200"])
    m = json.load(open(merged)) if rc == 0 and os.path.exists(merged) else {}
    check(rc == 0 and m.get("racecheck_hazards") == 0 and m.get("synccheck_errors") == 3 and
          "initcheck_errors" in m and m["initcheck_errors"] is None,
          "a sanitizers stage's counts merged: each tool's reports summed, a tool whose runs were all cut null",
          out + json.dumps(m))
    check(m.get("sanitizer_runs_cut") == {"memcheck": 1, "initcheck": 1},
          "its runs cut replace the base's for its tools (racecheck's gone), memcheck's kept", json.dumps(m))
    check(m.get("commit") == "aaaaaaa" and m.get("command") == "the tests command" and
          m.get("memcheck_errors") == 2 and m.get("dead_rank_detected_s") == 3.25 and
          m.get("multigpu_commit") == "bbbbbbb" and m.get("multigpu_memcheck_errors") == 0,
          "the base's fields, its commit and the two-GPU facts are kept", json.dumps(m))
    check(m.get("sanitizers_commit") == "ddddddd" and m.get("sanitizers_command") == "the sanitizers command" and
          m.get("sanitizers_gpu") == "NVIDIA H200", "the sanitizers facts name their commit, command and GPU",
          json.dumps(m))

    write(san_out, "sanitizer-kernels.log", "racecheck test_blocks_gpu exit 0\nsynccheck test_blocks_gpu exit 0\n"
          "initcheck test_blocks_gpu exit 0\n")
    json.dump(dict(base, sanitizer_runs_cut={"racecheck": 2}), open(official, "w"))
    rc, out = collect(["--merge", official, san_out, merged, "ddddddd", "the sanitizers command", "NVIDIA H200"])
    m = json.load(open(merged)) if rc == 0 else {}
    check(rc == 0 and "sanitizer_runs_cut" not in m and m.get("racecheck_hazards") == 0 and
          m.get("initcheck_errors") == 0, "a run with nothing cut drops the base's cuts of its tools", json.dumps(m))

    # both stages' logs in one folder (`all` on two GPUs): both merged
    write(san_out, "test_dist.log", "DEAD_RANK_DETECTED_S 1.5\n")
    rc, out = collect(["--merge", official, san_out, merged, "eeeeeee", "the all command", "NVIDIA H200"])
    m = json.load(open(merged)) if rc == 0 else {}
    check(m.get("dead_rank_detected_s") == 1.5 and m.get("multigpu_commit") == "eeeeeee" and
          m.get("sanitizers_commit") == "eeeeeee" and m.get("racecheck_hazards") == 0,
          "both stages' logs in one folder: both merged", json.dumps(m))

    empty = os.path.join(d, "empty")
    os.makedirs(empty)
    os.remove(merged)
    rc, out = collect(["--merge", official, empty, merged, "fffffff", "a command", "NVIDIA H200"])
    check(rc != 0 and "no multigpu" in out and not os.path.exists(merged),
          "a folder without either stage's logs: refused, nothing written", out)

finish("COLLECT_RELIABILITY")
