#!/usr/bin/env python3
"""test_official_run.py - scripts/official_run.sh on a machine without GPUs, nvidia-smi faked on PATH and
scripts/device.sh faked in a scratch copy: on an H200 a stage runs device.sh with the commit and the stage's settings
and archives its output with device.sh's exit status; on another GPU (the GPU machine may lend an H100 for a call that
asked for an H200, and file_run.sh would refuse the run) nothing runs, exit 3, the message naming the GPU and
GG_OFFICIAL_ANY_GPU, which runs it anyway; a stage that does not exist is named first (exit 2) wherever it runs.
Usage: test_official_run.py REPO_ROOT"""
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile

from checks import check, finish  # tests/scripts/checks.py
from fake_device import script  # tests/scripts/fake_device.py

root = sys.argv[1]
SHA = "0123456789abcdef0123456789abcdef01234567"

with tempfile.TemporaryDirectory() as d:
    tree, bin_dir = os.path.join(d, "tree"), os.path.join(d, "bin")
    os.makedirs(os.path.join(tree, "scripts"))
    shutil.copy(os.path.join(root, "scripts", "official_run.sh"), os.path.join(tree, "scripts"))
    # device.sh: logs its stage and the settings it was given, writes a result, exits FAKE_RC
    script(os.path.join(tree, "scripts", "device.sh"),
           'echo "device.sh $1 commit=$GG_COMMIT budget=${GG_STEP_BUDGET:-} arch=${GG_CUDA_ARCH:-}" >> "$FAKE_LOG"\n'
           'echo "== $1"; echo result > "$OUT/result.json"; exit "${FAKE_RC:-0}"\n')
    script(os.path.join(bin_dir, "nvidia-smi"), 'echo "$FAKE_GPU"\n')

    def run(stage, gpu, name, **env):
        log, out = os.path.join(d, f"calls-{name}.log"), os.path.join(d, f"out-{name}")
        e = dict(os.environ, PATH=bin_dir + os.pathsep + os.environ["PATH"], FAKE_GPU=gpu, FAKE_LOG=log, OUT=out)
        e.pop("GG_OFFICIAL_ANY_GPU", None)
        e.update(env)
        p = subprocess.run(["bash", "scripts/official_run.sh", SHA, stage], cwd=tree, capture_output=True, text=True,
                           env=e, timeout=60)
        calls = open(log).read() if os.path.exists(log) else ""
        return p.returncode, p.stdout + p.stderr, calls, os.path.join(out, f"run-{stage}.tgz")

    rc, text, calls, tgz = run("step", "NVIDIA H200", "h200")
    check(rc == 0 and calls == f"device.sh step commit={SHA} budget=560 arch=90a\n",
          "on an H200 the stage runs device.sh with the commit and the stage's settings", text + calls)
    names = tarfile.open(tgz).getnames() if os.path.exists(tgz) else []
    check("./step.log" in names and "./result.json" in names, "its output and results archived", str(names))

    rc, text, calls, tgz = run("step", "NVIDIA H200", "failing", FAKE_RC="1")
    check(rc == 1 and os.path.exists(tgz), "device.sh's failure is the exit status, the archive still made", text)

    rc, text, calls, tgz = run("bench", "NVIDIA H100 80GB HBM3", "h100")
    check(rc == 3 and calls == "" and not os.path.exists(tgz), "on an H100 nothing runs (exit 3)", text + calls)
    check("NVIDIA H100 80GB HBM3" in text and "GG_OFFICIAL_ANY_GPU=1" in text,
          "the message names the GPU and how to run anyway", text)

    rc, text, calls, tgz = run("bench", "", "none")
    check(rc == 3 and "none found" in text and calls == "", "without a GPU nothing runs either", text)

    rc, text, calls, tgz = run("bench", "NVIDIA H100 80GB HBM3", "anyway", GG_OFFICIAL_ANY_GPU="1")
    check(rc == 0 and calls.startswith("device.sh bench") and os.path.exists(tgz),
          "GG_OFFICIAL_ANY_GPU=1 runs it on an H100", text + calls)

    rc, text, calls, tgz = run("bogus", "NVIDIA H100 80GB HBM3", "bogus")
    check(rc == 2 and "stage 'bogus'" in text and calls == "", "a stage that does not exist is named first", text)
finish("OFFICIAL_RUN")
