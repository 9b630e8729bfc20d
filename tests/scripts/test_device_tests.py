#!/usr/bin/env python3
"""test_device_tests.py - scripts/device.sh's tests and sanitizers stages, end to end on a machine without GPUs
(tests/scripts/fake_device.py): ctest, compute-sanitizer and the stages' GPU test programs faked. The fake
compute-sanitizer starts its test as a gradgraph context would: it refuses a GG_GEMM_MAX_CLUSTER_CTAS that
gg_ctx_create refuses (set and not a CTA count from 1 to 16: src/core/ctx.c) and a GG_HOPPER_KERNELS other than 0 or
1, failing the run as the real test fails, so a sanitizer run a stage sets up wrongly fails here, not first on the GPU
machine. Checked, the tests stage: a clean stage passes, with its 5 memcheck runs (cuBLASLt's clusters unlimited) and
no other tool, and reliability-h200.json recording 0 memcheck reports, racecheck, synccheck and initcheck null (not
run), no run cut, the shape sweep, the faults, the soak and the 64 cases on the path a B200 takes; a memcheck report
fails the stage and is counted. The sanitizers stage: a clean stage passes with its 8 runs, racecheck's first (with
the sm_90a kernels, then without) on clusters of one CTA, the others unlimited, racecheck and synccheck on both GPU
paths, each run's time in the output and the log; its facts merged over the official JSON (a fresh $OUT) or over the
tests stage's in the same $OUT, which keep their commit and other fields (memcheck's runs cut among them) while the
three tools' counts and runs cut are this run's, with sanitizers_commit and _command; a report (racecheck's) fails
it and is counted; a spent budget skips every run, counted as cut (the tools null, not 0), and fails it.
Usage: test_device_tests.py REPO_ROOT"""
import json
import os
import re
import subprocess
import sys
import tempfile

from checks import check, finish  # tests/scripts/checks.py
from fake_device import Machine, archived_log  # tests/scripts/fake_device.py

root = sys.argv[1]

SANITIZER = r'''tool=; while [ $# -gt 1 ]; do [ "$1" = --tool ] && tool=$2; shift; done
clusters=${GG_GEMM_MAX_CLUSTER_CTAS-unset}
echo "$tool $(basename "$1") filter=$GG_TEST_FILTER hopper=${GG_HOPPER_KERNELS-unset} clusters=$clusters" >> "$FAKE_LOG"
case "$clusters" in unset|""|[1-9]|1[0-6]) ;; *)
  echo "ERROR: gg_ctx_create: GG_GEMM_MAX_CLUSTER_CTAS=\"$clusters\" is not a CTA count from 1 to 16"
  echo "[  FAILED  ] 1 test(s)"; echo "========= ERROR SUMMARY: 0 errors"; exit 1;; esac
case "${GG_HOPPER_KERNELS-unset}" in unset|0|1) ;; *) echo "[  FAILED  ] GG_HOPPER_KERNELS"; exit 1;; esac
echo "[       OK ] $GG_TEST_FILTER"
if [ "$tool" = "${FAKE_REPORT:-none}" ]; then
  echo "========= Invalid __global__ read of size 4"; echo "========= ERROR SUMMARY: 1 error"; exit 9; fi
[ "$tool" = racecheck ] && echo "========= RACECHECK SUMMARY: 0 hazards displayed (0 errors, 0 warnings)" ||
  echo "========= ERROR SUMMARY: 0 errors"
'''
BLOCKS = ["061_tanh_gated_residual_add_backward", "068_gelu_approximate_feedforward_backward",
          "073_feedforward_mlp_backward", "079_ImageNet_83.6_ssm_output_projection_gate_multiply_backward"]
RESULTS = "".join(f'echo \'RESULT {{"block": "{b}", "mode": "x", "cases": 16, "cases_passed": 16, "rounds": 10, '
                  f'"worst_matched_ratio": 1.0, "worst_err_over_tol": 0.5}}\'\n' for b in BLOCKS)
PROGRAMS = {
    "tests/test_faults": 'echo \'FAULTS {"injected": 100, "failures": 0}\'\n',
    "tests/test_dist_faults": 'echo \'NCCL_FAULTS {"injected": 10, "failures": 0}\'\n',
    "tests/test_soak_gpu": 'echo \'SOAK {"replays": 100000, "failures": 0, "memory_drift_bytes": 0}\'\n',
    "tests/test_blocks_gpu": RESULTS + 'echo "[  PASSED  ] 10 test(s)."\n',
    "tests/test_graphs_gpu": 'echo "[  PASSED  ] 7 test(s)."\n',
    "tests/test_shapes_gpu": "".join(
        f'echo "SHAPES {{\\"block\\": {b}, \\"seed\\": 1, \\"shapes\\": 3, \\"checked\\": 3, \\"failures\\": 0, '
        f'\\"guard_bytes_changed\\": 0, \\"hopper_kernels\\": $GG_HOPPER_KERNELS}}"\n' for b in range(1, 5))
    + 'echo "[  PASSED  ] 5 test(s)."\n',
}
TOOLS = {"ctest": 'echo "ctest $*" >> "$FAKE_LOG"\necho "100% tests passed, 0 tests failed out of 50"\n',
         "compute-sanitizer": SANITIZER}

with tempfile.TemporaryDirectory() as d:
    machine = Machine(root, d, tools=TOOLS, programs=PROGRAMS)

    def reliability(out):
        path = os.path.join(out, "reliability-h200.json")
        return json.load(open(path)) if os.path.exists(path) else {}

    def sanitizer_runs(calls):
        """The fake compute-sanitizer's calls, in order: [tool, exe, filter=, hopper=, clusters=]."""
        return [line.split() for line in calls.splitlines() if line.split()[:1] and line.split()[0].endswith("check")]

    out = os.path.join(d, "clean")
    rc, text, calls = machine.stage("tests", out, 1, GG_SHAPES="3")
    check(rc == 0, "a clean stage passes", text)
    runs = sanitizer_runs(calls)
    check(len(runs) == 5 and all(r[0] == "memcheck" and r[-1] == "clusters=" for r in runs),
          f"the tests stage: 5 memcheck runs, cuBLASLt's clusters unlimited (GG_GEMM_MAX_CLUSTER_CTAS empty), no "
          f"other tool ({len(runs)})", calls)
    r = reliability(out)
    check(r.get("memcheck_errors") == 0 and "sanitizer_runs_cut" not in r and
          all(k in r and r[k] is None for k in ("racecheck_hazards", "synccheck_errors", "initcheck_errors")),
          "memcheck ran: 0 reports, no run cut; racecheck, synccheck and initcheck null (not run here)",
          json.dumps(r))
    check(r.get("shape_failures") == 0 and r.get("soak_replays") == 100000 and r.get("fault_failures") == 0 and
          r.get("non_hopper_cases_correct") == 64 and r.get("commit") == "abc1234",
          "the sweep, the faults, the soak and the B200 path's 64 cases recorded with the run's commit",
          json.dumps(r))
    tree = subprocess.run(["bash", os.path.join(machine.tree, "scripts", "tree_hash.sh"), machine.tree],
                          capture_output=True, text=True).stdout.strip()
    ran = json.load(open(os.path.join(out, "tree.json"))) if os.path.exists(os.path.join(out, "tree.json")) else {}
    check(len(tree) == 64 and ran.get("tree") == tree,
          "tree.json beside the results: the hash of the source files the stage ran (scripts/tree_hash.sh)",
          json.dumps(ran))

    # the sanitizers stage into the same $OUT (as in `all`, or a later call into it): over the tests stage's JSON
    rc, text, calls = machine.stage("sanitizers", out, 1, GG_COMMIT="def5678")
    check(rc == 0, "the sanitizers stage: a clean stage passes", text)
    runs = sanitizer_runs(calls)[5:]  # (after the tests stage's into the same $OUT)
    check([(x[0], x[3]) for x in runs] == [("racecheck", "hopper=1"), ("racecheck", "hopper=0"),
                                           ("synccheck", "hopper=1"), ("synccheck", "hopper=0"),
                                           ("initcheck", "hopper=1"), ("initcheck", "hopper=0"),
                                           ("initcheck", "hopper=1"), ("initcheck", "hopper=1")],
          "its 8 runs, racecheck first (with the sm_90a kernels, then without), racecheck and synccheck on both "
          "GPU paths, then initcheck", calls)
    check(all(x[-1] == ("clusters=1" if x[0] == "racecheck" else "clusters=") for x in runs),
          "racecheck's runs on clusters of one CTA, the others unlimited", calls)
    check({x[1] for x in runs if x[0] == "initcheck"} == {"test_blocks_gpu", "test_forward_gpu", "test_fp16_gpu"},
          "initcheck on the blocks, the forwards and test_fp16_gpu", calls)
    times = [line for line in text.splitlines()
             if re.match(r"^(racecheck|synccheck|initcheck) test_\w+ \(.*\): \d+ s \(limit \d+ s\)$", line)]
    check(len(times) == 8 and "GG_HOPPER_KERNELS=1 GG_GEMM_MAX_CLUSTER_CTAS=1" in times[0],
          "each run's time in the stage's output, naming its settings", text)
    log = archived_log(out, "sanitizers", "sanitizer-kernels.log")
    check(sum(1 for line in log.splitlines() if re.match(r"^racecheck test_blocks_gpu \(.*\): \d+ s", line)) == 2,
          "the runs' times in its log, sanitizer-kernels.log (in logs-sanitizers.tgz)", log)
    m = reliability(out)
    check(m.get("racecheck_hazards") == 0 and m.get("synccheck_errors") == 0 and m.get("initcheck_errors") == 0 and
          "sanitizer_runs_cut" not in m, "every tool ran: 0 reports, no run cut", json.dumps(m))
    check(m.get("commit") == "abc1234" and m.get("memcheck_errors") == 0 and m.get("soak_replays") == 100000 and
          m.get("sanitizers_commit") == "def5678" and "device.sh sanitizers" in m.get("sanitizers_command", "") and
          m.get("sanitizers_gpu") == "NVIDIA H200",
          "merged over the tests stage's JSON in the same $OUT, which keeps its commit and figures; the stage's "
          "commit, command and GPU recorded beside them", json.dumps(m))

    # a fresh $OUT: merged over the official JSON
    official = json.load(open(os.path.join(machine.tree, "docs", "results", "reliability-h200.json")))
    out = os.path.join(d, "sanitizers")
    rc, text, calls = machine.stage("sanitizers", out, 1)
    m = reliability(out)
    check(rc == 0 and m.get("commit") == official["commit"] and m.get("shape_failures") == official["shape_failures"]
          and m.get("sanitizers_commit") == "abc1234" and m.get("racecheck_hazards") == 0,
          "a fresh $OUT: merged over the official JSON, which keeps its commit and figures", json.dumps(m))

    # over a base JSON with runs cut: memcheck's kept, racecheck's replaced by this run's
    out = os.path.join(d, "base")
    os.makedirs(out)
    base = dict(official, commit="base123", memcheck_errors=0, racecheck_hazards=None,
                sanitizer_runs_cut={"memcheck": 1, "racecheck": 2})
    json.dump(base, open(os.path.join(out, "reliability-h200.json"), "w"))
    rc, text, calls = machine.stage("sanitizers", out, 1, FAKE_REPORT="racecheck")
    m = reliability(out)
    check(rc != 0 and m.get("racecheck_hazards") == 2 and m.get("synccheck_errors") == 0 and
          m.get("initcheck_errors") == 0, "racecheck's reports fail the stage and are counted (one in each of its "
          "2 runs)", json.dumps(m) + text)
    check(m.get("commit") == "base123" and m.get("sanitizer_runs_cut") == {"memcheck": 1} and
          m.get("sanitizers_commit") == "abc1234", "the base's memcheck runs cut kept, its racecheck runs cut "
          "replaced by this run's (none)", json.dumps(m))

    # a spent budget: every run skipped and counted as cut, the tools null
    out = os.path.join(d, "budget")
    rc, text, calls = machine.stage("sanitizers", out, 1, GG_SANITIZERS_BUDGET="30")
    m = reliability(out)
    check(rc != 0 and not sanitizer_runs(calls) and
          text.count("skipped, the stage's time budget is spent (GG_SANITIZERS_BUDGET)") == 8,
          "a spent budget: every run skipped and said so, and the stage fails", text)
    check(m.get("sanitizer_runs_cut") == {"racecheck": 2, "synccheck": 2, "initcheck": 4} and
          all(k in m and m[k] is None for k in ("racecheck_hazards", "synccheck_errors", "initcheck_errors")) and
          m.get("commit") == official["commit"],
          "a spent budget: the runs counted as cut, the three tools null (not 0), the official JSON's other fields "
          "kept", json.dumps(m))

    out = os.path.join(d, "report")
    rc, text, calls = machine.stage("tests", out, 1, GG_SHAPES="3", FAKE_REPORT="memcheck")
    r = reliability(out)
    check(rc != 0 and r.get("memcheck_errors") == 5,
          "memcheck's reports fail the stage and are counted (one in each of its 5 runs)", json.dumps(r))

finish("DEVICE_TESTS")
