#!/usr/bin/env python3
"""test_device_tests.py - scripts/device.sh's tests stage, end to end on a machine without GPUs (tests/scripts/
fake_device.py): ctest, compute-sanitizer and the stage's GPU test programs faked. The fake compute-sanitizer starts
its test as a gradgraph context would: it refuses a GG_GEMM_MAX_CLUSTER_CTAS that gg_ctx_create refuses (set and not
a CTA count from 1 to 16: src/core/ctx.c) and a GG_HOPPER_KERNELS other than 0 or 1, failing the run as the real test
fails, so a sanitizer run the stage sets up wrongly fails here, not first on the GPU machine. Checked: a clean stage
passes, with all 13 sanitizer runs made on both GPU paths, racecheck's with clusters of one CTA and the others with
cuBLASLt's clusters unlimited, and reliability-h200.json recording 0 reports of each tool, no run cut, the shape
sweep, the faults, the soak and the 64 cases on the path a B200 takes; a sanitizer report (memcheck's here) fails
the stage and is counted. Usage: test_device_tests.py REPO_ROOT"""
import json
import os
import sys
import tempfile

from checks import check, finish  # tests/scripts/checks.py
from fake_device import Machine  # tests/scripts/fake_device.py

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

    out = os.path.join(d, "clean")
    rc, text, calls = machine.stage("tests", out, 1, GG_SHAPES="3")
    check(rc == 0, "a clean stage passes", text)
    runs = [line.split() for line in calls.splitlines() if line.split()[:1] and line.split()[0].endswith("check")]
    check(len(runs) == 13, f"13 sanitizer runs ({len(runs)})", calls)
    check(all(r[-1] == ("clusters=1" if r[0] == "racecheck" else "clusters=") for r in runs),
          "racecheck's runs on clusters of one CTA, the others unlimited (GG_GEMM_MAX_CLUSTER_CTAS empty)", calls)
    check({r[3] for r in runs if r[0] in ("racecheck", "synccheck")} == {"hopper=0", "hopper=1"},
          "racecheck and synccheck on both GPU paths", calls)
    rel_path = os.path.join(out, "reliability-h200.json")
    r = json.load(open(rel_path)) if os.path.exists(rel_path) else {}
    check(r.get("memcheck_errors") == 0 and r.get("racecheck_hazards") == 0 and r.get("synccheck_errors") == 0 and
          r.get("initcheck_errors") == 0 and "sanitizer_runs_cut" not in r, "every tool ran: 0 reports, no run cut",
          json.dumps(r))
    check(r.get("shape_failures") == 0 and r.get("soak_replays") == 100000 and r.get("fault_failures") == 0 and
          r.get("non_hopper_cases_correct") == 64 and r.get("commit") == "abc1234",
          "the sweep, the faults, the soak and the B200 path's 64 cases recorded with the run's commit",
          json.dumps(r))

    out = os.path.join(d, "report")
    rc, text, calls = machine.stage("tests", out, 1, GG_SHAPES="3", FAKE_REPORT="memcheck")
    rel_path = os.path.join(out, "reliability-h200.json")
    r = json.load(open(rel_path)) if os.path.exists(rel_path) else {}
    check(rc != 0 and r.get("memcheck_errors") == 5 and r.get("initcheck_errors") == 0,
          "memcheck's reports fail the stage and are counted (one in each of its 5 runs)", json.dumps(r))

finish("DEVICE_TESTS")
