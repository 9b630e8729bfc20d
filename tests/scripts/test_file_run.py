#!/usr/bin/env python3
"""test_file_run.py - scripts/file_run.sh on a made-up tests run, in a scratch copy of the tree's docs/results: the
run's JSON and logs land in run-<sha>/ and the JSON in results/; GG_FUZZ_LOG merges the fuzzer's figures (execs,
seconds, where they came from) into the reliability JSON and files the log; an older run folder of the same kind is
named for removal, one of the other kind (a bench run's) is not; a log without a FUZZ line fails the filing. A
multigpu run is filed on its own: multigpu-<sha>/ gets its stage log and logs, results/ the merged reliability and step
JSON and ddp-h200x2.json, and the older multigpu and ddp folders are named for removal, the run folders not.
Usage: test_file_run.py REPO_ROOT"""
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile

from checks import check, finish  # tests/scripts/checks.py

root = sys.argv[1]


def tgz(path, files):
    with tarfile.open(path, "w:gz") as t:
        for name, text in files.items():
            data = text if isinstance(text, bytes) else text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))


with tempfile.TemporaryDirectory() as d:
    os.makedirs(os.path.join(d, "scripts"))
    shutil.copy(os.path.join(root, "scripts", "file_run.sh"), os.path.join(d, "scripts"))
    results = os.path.join(d, "docs", "results")
    os.makedirs(os.path.join(results, "run-aaaaaaa"))  # an older tests run
    os.makedirs(os.path.join(results, "run-bbbbbbb"))  # a bench run
    json.dump({"commit": "aaaaaaa"}, open(os.path.join(results, "run-aaaaaaa", "reliability-h200.json"), "w"))
    json.dump({"commit": "bbbbbbb"}, open(os.path.join(results, "run-bbbbbbb", "bench-h200.json"), "w"))
    sha = "1234567"
    reliability = {"commit": sha, "command": "GG_COMMIT=<sha> bash scripts/device.sh tests", "fuzz_execs": None,
                   "shape_failures": 0}
    run = os.path.join(d, "run-tests.tgz")
    tgz(run, {"reliability-h200.json": json.dumps(reliability), "correctness-h200.json": json.dumps({"commit": sha}),
              "logs-tests.tgz": "not a real archive"})
    fuzz_log = os.path.join(d, "test-sh.log")
    open(fuzz_log, "w").write("100% tests passed\nFUZZ {\"execs\": 12345, \"seconds\": 61}\n")

    env = dict(os.environ, GG_FUZZ_LOG=fuzz_log)
    p = subprocess.run(["bash", os.path.join(d, "scripts", "file_run.sh"), sha, run], capture_output=True, text=True,
                       env=env)
    out = p.stdout + p.stderr
    check(p.returncode == 0, "filing succeeds", out)
    filed = os.path.join(results, f"run-{sha}")
    for name in ("reliability-h200.json", "correctness-h200.json", "logs-tests.tgz", "test-sh.log"):
        check(os.path.exists(os.path.join(filed, name)), f"run-{sha}/{name} filed")
    r = json.load(open(os.path.join(results, "reliability-h200.json")))
    check(r.get("commit") == sha and r.get("fuzz_execs") == 12345 and r.get("fuzz_seconds") == 61 and
          "scripts/test.sh" in r.get("fuzz_command", ""), "the fuzzer's figures merged into results/", json.dumps(r))
    check(r.get("shape_failures") == 0, "the run's own figures kept")
    check("run-aaaaaaa" in out and "run-bbbbbbb" not in out,
          "only the older run folder of the same kind is named for removal", out)

    open(fuzz_log, "w").write("no fuzzer here\n")
    p = subprocess.run(["bash", os.path.join(d, "scripts", "file_run.sh"), sha, run], capture_output=True, text=True,
                       env=env)
    check(p.returncode != 0 and "no FUZZ line" in p.stdout + p.stderr, "a log without a FUZZ line fails the filing",
          p.stdout + p.stderr)

    # a multigpu run: the official JSON with the two-GPU facts merged (their own commit), ddp-h200x2.json, the logs
    os.makedirs(os.path.join(results, "multigpu-ccccccc"))
    os.makedirs(os.path.join(results, "ddp-ddddddd"))
    mg = os.path.join(d, "run-multigpu.tgz")
    merged = dict(reliability, dead_rank_detected_s=3.25, multigpu_commit="7654321")
    step = {"commit": "eeeeeee", "models": [{"name": "residual_mlp_large", "ddp": {"speedup": 1.95,
                                                                                 "commit": "7654321"}}]}
    tgz(mg, {"multigpu.log": "== multigpu (2 GPUs)\n", "reliability-h200.json": json.dumps(merged),
             "step-h200.json": json.dumps(step), "ddp-h200x2.json": json.dumps({"commit": "7654321"}),
             "logs-multigpu.tgz": "not a real archive"})
    p = subprocess.run(["bash", os.path.join(d, "scripts", "file_run.sh"), "7654321", mg], capture_output=True,
                       text=True)
    out = p.stdout + p.stderr
    check(p.returncode == 0, "a multigpu run is filed", out)
    filed = os.path.join(results, "multigpu-7654321")
    for name in ("device-multigpu.log", "logs-multigpu.tgz", "ddp-h200x2.json"):
        check(os.path.exists(os.path.join(filed, name)), f"multigpu-7654321/{name} filed")
    check(not os.path.exists(os.path.join(results, "run-7654321")), "no run-<sha>/ folder for a multigpu run")
    r = json.load(open(os.path.join(results, "reliability-h200.json")))
    check(r.get("dead_rank_detected_s") == 3.25 and r.get("commit") == sha, "the merged reliability JSON in results/")
    s = json.load(open(os.path.join(results, "step-h200.json")))
    check(s["models"][0]["ddp"]["speedup"] == 1.95, "the merged step JSON in results/")
    check(os.path.exists(os.path.join(results, "ddp-h200x2.json")), "ddp-h200x2.json in results/")
    check("multigpu-ccccccc" in out and "ddp-ddddddd" in out and "run-aaaaaaa" not in out and "warning" not in out,
          "the older multigpu and ddp folders are named for removal, nothing else", out)

    # a step run and a train run: their JSON and plots in results/, the fused_copies models' timelines renamed
    logs = os.path.join(d, "logs-step.tgz")
    tgz(logs, {"plots/step-timeline-residual_mlp_fused_copies_2048x8192_8192.png": "large png",
               "plots/step-timeline-residual_mlp_fused_copies_1024x4096_2048.png": "small png",
               "plots/step-timeline-residual_mlp_1024x4096_2048.png": "another model's png"})
    step_run, train_run = os.path.join(d, "run-step.tgz"), os.path.join(d, "run-train.tgz")
    tgz(step_run, {"step.log": "== step graphs\n", "step-h200.json": json.dumps({"commit": "5555555", "models": []}),
                   "logs-step.tgz": open(logs, "rb").read()})
    tgz(train_run, {"train.log": "== train\n", "train-h200.json": json.dumps({"commit": "5555555"}),
                    "train-loss-h200.png": "loss png"})
    before = set(os.listdir(results))
    p = subprocess.run(["bash", os.path.join(d, "scripts", "file_run.sh"), "5555555", step_run, train_run],
                       capture_output=True, text=True)
    out = p.stdout + p.stderr
    check(p.returncode == 0 and "warning" not in out, "a step run and a train run are filed", out)
    read = lambda name: open(os.path.join(results, name)).read() if os.path.exists(os.path.join(results, name)) else ""
    check('"5555555"' in read("step-h200.json") and '"5555555"' in read("train-h200.json") and
          read("train-loss-h200.png") == "loss png",
          "their JSON and the loss plot in results/")
    check(read("step-timeline-large.png") == "large png" and read("step-timeline-small.png") == "small png",
          "the fused_copies models' timelines as step-timeline-large.png and -small.png")
    check(not [n for n in set(os.listdir(results)) - before if n.startswith("run-")], "no run folder for them")

finish("FILE_RUN")
