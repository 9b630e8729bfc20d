#!/usr/bin/env python3
"""test_device_multigpu.py - scripts/device.sh's multigpu stage, end to end on a machine without GPUs: a scratch copy
of the scripts and the official JSON, with nvidia-smi, cmake, ctest and compute-sanitizer faked on PATH and the
examples faked in the build folder. Two GPUs: only the stage's targets built; the two-GPU facts (the dead rank's time,
memcheck's reports, a memcheck run whose test skipped counted as cut) merged over the official reliability JSON,
which keeps its own commit; the step graph's "ddp" and PyTorch DDP's speedup merged into the official step JSON
with the run's commit; the blocks' scaling collected; the stage passing only when every piece was clean (a memcheck
run cut, or PyTorch's peer failing, fails it). A budget too small for anything: every piece skipped and said so,
the memcheck runs counted as cut, no dead-rank time. One GPU: refused, nothing recorded. The GPU machine is lent
rarely with two GPUs: this keeps the stage from breaking unseen in between. Usage: test_device_multigpu.py REPO_ROOT"""
import json
import os
import sys
import tempfile

from checks import check, finish  # tests/scripts/checks.py
from fake_device import Machine, archived_log  # tests/scripts/fake_device.py

root = sys.argv[1]


TOOLS = {
    "ctest": 'echo "ctest $*" >> "$FAKE_LOG"\necho "5/6 Test #39: test_dist_dead_rank ... Passed"\n'
             'echo "DEAD_RANK_DETECTED_S 2.75"\necho "100% tests passed, 0 tests failed out of 6"\n',
    # the run of the test named in FAKE_SKIP skips (as it does without a second GPU), the others run
    "compute-sanitizer": 'echo "memcheck $GG_TEST_FILTER" >> "$FAKE_LOG"\n'
                         'case "$GG_TEST_FILTER" in *"${FAKE_SKIP:-none}"*) echo "[  SKIPPED ] x";; '
                         '*) echo "[       OK ] $GG_TEST_FILTER";; esac\necho "========= ERROR SUMMARY: 0 errors"\n',
}
MODEL_BACKWARD = ('json=; while [ $# -gt 0 ]; do [ "$1" = --json ] && json=$2; shift; done\n'
                  'echo \'{"name": "residual_mlp", "precision": "fp16", "ddp": {"gpus": 2, "speedup": 1.93, '
                  '"comm_hidden_fraction": 0.92, "correct": true}}\' > "$json"\necho "check: ok"\n')
DDP_SCALING = ('json=; b=; while [ $# -gt 0 ]; do case $1 in --json) json=$2;; --block) b=$2;; esac; shift; done\n'
               'echo "{\\"block\\": \\"block$b\\", \\"M\\": 8192, \\"gpus\\": 2, \\"precision\\": \\"fp16\\", '
               '\\"bucket_bytes\\": 1, \\"speedup\\": 1.9, \\"allreduce_hidden_fraction\\": 0.9, '
               '\\"step_us_1gpu\\": 1, \\"step_us_ngpu\\": 1, \\"local_step_us_ngpu\\": 1, \\"allreduce_us\\": 1, '
               '\\"efficiency\\": 0.95}" > "$json"\n')

with tempfile.TemporaryDirectory() as d:
    # PyTorch's DDP peer faked (failing when FAKE_TORCH_FAIL is set), every other script run by the real python3
    torch_ddp = json.dumps({"torch": "fake", "models": [{"name": f"residual_mlp_{n}", "torch_ddp": {"speedup": 1.61}}
                                                       for n in ("large", "small")]})
    python3 = ('case "$1" in *step_ddp_torch.py)\n'
               '  [ -n "$FAKE_TORCH_FAIL" ] && { echo "no GPU here" >&2; exit 2; }\n'
               '  while [ $# -gt 0 ]; do [ "$1" = --json ] && json=$2; shift; done\n'
               f"  echo '{torch_ddp}' > \"$json\"; exit 0;;\nesac\nexec {sys.executable} \"$@\"\n")
    machine = Machine(root, d, copies=["bench/peers/step_ddp_torch.py"], tools=dict(TOOLS, python3=python3),
                      programs={"examples/gg_example_model_backward": MODEL_BACKWARD,
                                "examples/ddp_scaling": DDP_SCALING})
    tree = machine.tree
    official = json.load(open(os.path.join(tree, "docs", "results", "reliability-h200.json")))

    def stage(gpus, out, **env):
        return machine.stage("multigpu", out, gpus, GG_DDP_RUNS="1", **env)

    out = os.path.join(d, "two")
    rc, text, calls = stage(2, out, FAKE_SKIP="default_buckets")
    check("--target test_dist test_step_dist" in calls and "test_dist_mpi" in calls,
          "only the stage's targets are built (test_dist_mpi where CMake has it)", calls)
    rel_path = os.path.join(out, "reliability-h200.json")
    r = json.load(open(rel_path)) if os.path.exists(rel_path) else {}
    check(r.get("dead_rank_detected_s") == 2.75 and r.get("multigpu_memcheck_errors") == 0 and
          r.get("multigpu_sanitizer_runs_cut") == {"memcheck": 1},
          "the dead rank's time and memcheck on two GPUs (the skipped test's run counted as cut)", text)
    check(r.get("commit") == official["commit"] and r.get("multigpu_commit") == "abc1234" and
          r.get("shape_failures") == official.get("shape_failures"),
          "merged over the official JSON, which keeps its commit and figures", json.dumps(r))
    step_path = os.path.join(out, "step-h200.json")
    s = json.load(open(step_path)) if os.path.exists(step_path) else {"models": []}
    ddp = {m["name"]: m.get("ddp") for m in s["models"]}
    check(all((ddp.get(n) or {}).get("commit") == "abc1234" and (ddp.get(n) or {}).get("speedup") == 1.93 and
              (ddp.get(n) or {}).get("torch_ddp_speedup") == 1.61
              for n in ("residual_mlp_large", "residual_mlp_small")) and len(s["models"]) > 2,
          "the step graph's ddp and PyTorch DDP's speedup merged into the official step JSON with the run's commit",
          text)
    check(os.path.exists(os.path.join(out, "ddp-h200x2.json")), "the blocks' scaling collected", text)
    check(rc != 0, "a memcheck run cut fails the stage", text)

    rc, text, calls = stage(2, os.path.join(d, "clean"))
    check(rc == 0, "every piece clean: the stage passes", text)

    out = os.path.join(d, "torch")
    rc, text, calls = stage(2, out, FAKE_TORCH_FAIL="1")
    peer_log = archived_log(out, "multigpu", "torch-ddp.log")
    check(rc != 0 and "no GPU here" in peer_log, "a piece that failed (PyTorch's DDP peer here) fails the stage",
          text)

    out = os.path.join(d, "budget")
    rc, text, calls = stage(2, out, GG_MULTIGPU_BUDGET="30")
    r = json.load(open(os.path.join(out, "reliability-h200.json")))
    check(rc != 0 and text.count("skipped, the stage's time budget is spent") >= 7 and "ctest" not in calls and
          "memcheck" not in calls, "a spent budget: every piece skipped and said so", text)
    check(r.get("multigpu_sanitizer_runs_cut") == {"memcheck": 3} and r.get("dead_rank_detected_s") is None,
          "a spent budget: the memcheck runs cut, no dead-rank time", json.dumps(r))

    # the stage spread over calls (GG_MULTIGPU_PARTS): the step graph's pieces alone, then the tests and memcheck
    out = os.path.join(d, "parts-step")
    rc, text, calls = stage(2, out, GG_MULTIGPU_PARTS="step")
    check(rc == 0 and "ctest" not in calls and "memcheck" not in calls and
          not os.path.exists(os.path.join(out, "ddp-h200x2.json")) and
          os.path.exists(os.path.join(out, "step-h200.json")) and
          not os.path.exists(os.path.join(out, "reliability-h200.json")),
          "parts step: the step graph's pieces only, merged into step-h200.json", text + calls)
    out = os.path.join(d, "parts-tests")
    rc, text, calls = stage(2, out, GG_MULTIGPU_PARTS="tests,memcheck")
    check(rc == 0 and "-L multigpu" in calls and "memcheck" in calls and
          not os.path.exists(os.path.join(out, "ddp-h200x2.json")) and
          os.path.exists(os.path.join(out, "reliability-h200.json")) and
          not os.path.exists(os.path.join(out, "step-h200.json")),
          "parts tests,memcheck: the tests and memcheck only, into the reliability JSON", text + calls)
    rc, text, calls = stage(2, os.path.join(d, "parts-bad"), GG_MULTIGPU_PARTS="tests,bench")
    check(rc != 0 and "'bench' is not tests, memcheck, step or blocks" in text and "cmake" not in calls and
          "ctest" not in calls, "an unknown part is refused before anything is built or run", text + calls)

    out = os.path.join(d, "one")
    rc, text, calls = stage(1, out)
    check(rc != 0 and "needs 2 GPUs" in text and not os.path.exists(os.path.join(out, "reliability-h200.json")) and
          "ctest" not in calls, "one GPU: refused, nothing recorded", text)

finish("DEVICE_MULTIGPU")
